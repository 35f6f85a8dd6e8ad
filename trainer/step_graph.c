/* step_graph.c — capture, validity and replay of a micro-batch's CUDA graph. */
#include "trainer/step_graph.h"
#include "kernels/cuda/cuda_kernels.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static size_t generation(const ms_device *d) { return d->n_allocs + d->n_frees; }

static size_t free_bytes(void)
{
    size_t fr = 0, total = 0;
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return fr;
}

int ms_step_graph_ready(const ms_step_graph *g, const ms_device *d, float dscale)
{
    return g->exec && g->gen == generation(d) && g->dscale == dscale;
}

static void drop_exec(ms_step_graph *g)
{
    ms_cuda_graph_destroy(g->exec, g->graph);
    g->exec = g->graph = NULL;
    g->copy[0] = g->copy[1] = NULL;
}

static void free_slots(ms_step_graph *g)
{
    for (int k = 0; k < 2; k++) {
        if (g->ids[k]) cudaFreeHost(g->ids[k]);
        if (g->targets[k]) cudaFreeHost(g->targets[k]);
        g->ids[k] = g->targets[k] = NULL;
    }
    g->n = 0;
}

int ms_step_graph_begin(ms_step_graph *g, ms_device *d, size_t n)
{
    if (d->backend != MS_BACKEND_CUDA) {
        snprintf(g->why_not, sizeof g->why_not, "CUDA graphs need a GPU");
        return -1;
    }
    cudaSetDevice(d->cuda_ordinal);
    drop_exec(g);
    if (g->n != n) {
        free_slots(g);
        for (int k = 0; k < 2; k++)
            if (cudaMallocHost((void **)&g->ids[k], n * sizeof *g->ids[k]) != cudaSuccess ||
                cudaMallocHost((void **)&g->targets[k], n * sizeof *g->targets[k]) != cudaSuccess) {
                cudaGetLastError();
                free_slots(g);
                snprintf(g->why_not, sizeof g->why_not, "no pinned host memory for the graph's token ids");
                return -1;
            }
        g->n = n;
        for (int k = 0; k < 2; k++) {
            memset(g->ids[k], 0, n * sizeof *g->ids[k]);
            memset(g->targets[k], 0, n * sizeof *g->targets[k]);
        }
    }
    /* a timed matmul pick settles now (the device is idle), not while the
     * capture records its calls */
    ms_cuda_matmul_settle();
    g->t0 = now_ms();
    g->free0 = free_bytes();
    char err[160] = "";
    if (ms_cuda_capture_begin(&d->k, err, sizeof err)) {
        snprintf(g->why_not, sizeof g->why_not, "%s", err);
        return -1;
    }
    d->capturing = 1;
    d->capture_broken = 0;
    return 0;
}

int ms_step_graph_end(ms_step_graph *g, ms_device *d, int ok, float dscale)
{
    d->capturing = 0;
    int keep = ok && !d->capture_broken;
    char err[160] = "";
    void *exec = NULL, *graph = NULL;
    if (ms_cuda_capture_end(&d->k, keep, &exec, &graph, err, sizeof err)) {
        snprintf(g->why_not, sizeof g->why_not, "%s", err);
        return -1;
    }
    if (!keep) {
        g->thrown += d->capture_broken;
        return 0;
    }
    /* the copies from slot 0 that launches re-point at their slot */
    void *copy[2];
    if (ms_cuda_graph_find_copy(graph, g->ids[0], &copy[0]) || ms_cuda_graph_find_copy(graph, g->targets[0], &copy[1])) {
        ms_cuda_graph_destroy(exec, graph);
        snprintf(g->why_not, sizeof g->why_not, "the graph holds no copy of the token ids");
        return -1;
    }
    /* upload now, so the memory the graph takes is seen here and not at
     * its first launch */
    cudaError_t e = cudaGraphUpload((cudaGraphExec_t)exec, (cudaStream_t)d->k.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)d->k.stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        ms_cuda_graph_destroy(exec, graph);
        snprintf(g->why_not, sizeof g->why_not, "cudaGraphUpload: %s", cudaGetErrorString(e));
        return -1;
    }
    size_t fr = free_bytes(), took = g->free0 > fr ? g->free0 - fr : 0;
    if (took > g->bytes) { /* a graph replaced frees its memory: count only growth */
        ms_dev_account_foreign(d, MS_CAT_TRANSIENT, took - g->bytes);
        g->bytes = took;
    }
    g->exec = exec;
    g->graph = graph;
    g->copy[0] = copy[0];
    g->copy[1] = copy[1];
    g->slot = 0;
    g->gen = generation(d);
    g->dscale = dscale;
    g->captures++;
    g->capture_ms = now_ms() - g->t0;
    return 1;
}

int ms_step_graph_launch(ms_step_graph *g, ms_device *d, const int32_t *ids, const int32_t *targets)
{
    int k = g->slot;
    memcpy(g->ids[k], ids, g->n * sizeof *g->ids[k]);
    memcpy(g->targets[k], targets, g->n * sizeof *g->targets[k]);
    cudaSetDevice(d->cuda_ordinal);
    if (ms_cuda_graph_repoint_copy(&d->k, g->exec, g->copy[0], g->ids[k]) ||
        ms_cuda_graph_repoint_copy(&d->k, g->exec, g->copy[1], g->targets[k]))
        return MS_EFAIL;
    if (ms_cuda_graph_launch(&d->k, g->exec)) return MS_EFAIL;
    g->slot = k ^ 1;
    return MS_OK;
}

void ms_step_graph_free(ms_step_graph *g)
{
    drop_exec(g);
    free_slots(g);
    memset(g, 0, sizeof *g);
}
