/* ctx.cu — the CUDA execution context (stream, cuBLASLt handle, workspace),
 * error recording and sync. */
#include "kernels/cuda/cuda_common.cuh"

#include <cublasLt.h>
#include <atomic>
#include <mutex>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Live contexts: the matmul plan cache is released with the last one. */
static std::atomic<int> g_live_ctx{0};

extern "C" void ms_cuda_fail(ms_kctx *ctx, int code, const char *fmt, ...)
{
    if (!ctx || ctx->status != 0) return; /* first error wins */
    ctx->status = code ? code : MS_CUDA_EARG;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
}

extern "C" int ms_cuda_check(ms_kctx *ctx, const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    ms_cuda_fail(ctx, (int)e, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

extern "C" int ms_cuda_sync(ms_kctx *ctx)
{
    if (!ctx) return MS_CUDA_EARG;
    cudaError_t e = cudaStreamSynchronize(ms_stream(ctx));
    if (e != cudaSuccess) ms_cuda_fail(ctx, (int)e, "sync: %s", cudaGetErrorString(e));
    ms_cuda_check(ctx, "sync");
    return ctx->status;
}

extern "C" int ms_cuda_capture_begin(ms_kctx *ctx, char *err, size_t errlen)
{
    cudaError_t e = cudaStreamBeginCapture(ms_stream(ctx), cudaStreamCaptureModeRelaxed);
    if (e == cudaSuccess) return 0;
    cudaGetLastError();
    snprintf(err, errlen, "cudaStreamBeginCapture: %s", cudaGetErrorString(e));
    return -1;
}

extern "C" int ms_cuda_capture_end(ms_kctx *ctx, int keep, void **exec, void **graph, char *err, size_t errlen)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    *exec = *graph = NULL;
    cudaError_t e = cudaStreamEndCapture(ms_stream(ctx), &g);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an invalidated capture is not a sticky error */
        snprintf(err, errlen, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
        if (g) cudaGraphDestroy(g);
        return -1;
    }
    if (!keep) {
        cudaGraphDestroy(g);
        return 0;
    }
    if (ms_cuda_graph_memsets_to_kernels(g, err, errlen) < 0) {
        cudaGraphDestroy(g);
        return -1;
    }
    e = cudaGraphInstantiateWithFlags(&x, g, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
        cudaGraphDestroy(g);
        return -1;
    }
    *exec = x;
    *graph = g;
    return 0;
}

extern "C" int ms_cuda_graph_launch(ms_kctx *ctx, void *exec)
{
    cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)exec, ms_stream(ctx));
    if (e == cudaSuccess) return 0;
    ms_cuda_fail(ctx, (int)e, "cudaGraphLaunch: %s", cudaGetErrorString(e));
    cudaGetLastError();
    return -1;
}

extern "C" int ms_cuda_graph_find_copy(void *graph, const void *src, void **node)
{
    cudaGraph_t g = (cudaGraph_t)graph;
    size_t n = 0;
    *node = NULL;
    if (cudaGraphGetNodes(g, NULL, &n) != cudaSuccess) goto fail;
    {
        cudaGraphNode_t *nodes = (cudaGraphNode_t *)calloc(n + 1, sizeof *nodes);
        if (!nodes) return -1;
        int found = 0;
        if (cudaGraphGetNodes(g, nodes, &n) == cudaSuccess)
            for (size_t i = 0; i < n && !found; i++) {
                enum cudaGraphNodeType t;
                struct cudaMemcpy3DParms p;
                if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess || t != cudaGraphNodeTypeMemcpy) continue;
                if (cudaGraphMemcpyNodeGetParams(nodes[i], &p) != cudaSuccess) continue;
                if (p.srcPtr.ptr == src) {
                    *node = nodes[i];
                    found = 1;
                }
            }
        free(nodes);
        cudaGetLastError();
        return found ? 0 : -1;
    }
fail:
    cudaGetLastError();
    return -1;
}

extern "C" int ms_cuda_graph_repoint_copy(ms_kctx *ctx, void *exec, void *node, const void *src)
{
    struct cudaMemcpy3DParms p;
    cudaError_t e = cudaGraphMemcpyNodeGetParams((cudaGraphNode_t)node, &p);
    if (e == cudaSuccess) {
        p.srcPtr.ptr = (void *)src;
        e = cudaGraphExecMemcpyNodeSetParams((cudaGraphExec_t)exec, (cudaGraphNode_t)node, &p);
    }
    if (e == cudaSuccess) return 0;
    ms_cuda_fail(ctx, (int)e, "graph copy update: %s", cudaGetErrorString(e));
    cudaGetLastError();
    return -1;
}

extern "C" void ms_cuda_graph_destroy(void *exec, void *graph)
{
    if (exec) cudaGraphExecDestroy((cudaGraphExec_t)exec);
    if (graph) cudaGraphDestroy((cudaGraph_t)graph);
}

extern "C" int ms_cuda_ctx_init(ms_kctx *ctx, void *workspace, size_t workspace_bytes)
{
    if (!ctx) return -1;
    memset(ctx, 0, sizeof *ctx);
    cudaStream_t s = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear a non-sticky error */
        ms_cuda_fail(ctx, (int)e, "ctx_init: cudaStreamCreate: %s", cudaGetErrorString(e));
        return -1;
    }
    cublasLtHandle_t lt = NULL;
    cublasStatus_t st = cublasLtCreate(&lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(s);
        ms_cuda_fail(ctx, MS_CUDA_EBLAS, "ctx_init: cublasLtCreate: %s", cublasLtGetStatusString(st));
        return -1;
    }
    ctx->stream = s;
    ctx->lt = lt;
    ctx->workspace = workspace;
    ctx->workspace_bytes = workspace ? workspace_bytes : 0;
    g_live_ctx.fetch_add(1);
    return 0;
}

extern "C" void ms_cuda_ctx_destroy(ms_kctx *ctx)
{
    if (!ctx || (!ctx->stream && !ctx->lt)) return;
    if (ctx->stream) {
        cudaStreamSynchronize(ms_stream(ctx)); /* work queued on it may still use the handle */
        cudaStreamDestroy(ms_stream(ctx));
    }
    if (ctx->lt) cublasLtDestroy((cublasLtHandle_t)ctx->lt);
    ctx->stream = NULL;
    ctx->lt = NULL;
    ctx->workspace = NULL;
    ctx->workspace_bytes = 0;
    if (g_live_ctx.fetch_sub(1) == 1) ms_cuda_matmul_cache_clear();
}

extern "C" int ms_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

/* An attribute of the current device, read once per device and kept in
 * cache[]; fallback where it cannot be read (or is not positive). */
enum { MS_ATTR_MAXDEV = 64 };
static int cached_attr(std::atomic<int> *cache, cudaDeviceAttr attr, int fallback)
{
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError();
        dev = 0;
    }
    if (dev >= 0 && dev < MS_ATTR_MAXDEV) {
        int n = cache[dev].load(std::memory_order_relaxed);
        if (n > 0) return n;
    }
    int n = 0;
    if (cudaDeviceGetAttribute(&n, attr, dev) != cudaSuccess || n <= 0) {
        cudaGetLastError();
        n = fallback;
    }
    if (dev >= 0 && dev < MS_ATTR_MAXDEV) cache[dev].store(n, std::memory_order_relaxed);
    return n;
}

int ms_cuda_smem_optin(void)
{
    static std::atomic<int> cache[MS_ATTR_MAXDEV];
    /* fallback: what every device allows without opting in */
    return cached_attr(cache, cudaDevAttrMaxSharedMemoryPerBlockOptin, 48 << 10);
}

int ms_cuda_allow_smem(const void *kernel)
{
    enum { MAXK = 8 };
    static std::mutex mu;
    static const void *done[MS_ATTR_MAXDEV][MAXK]; /* kernels already allowed, per device, */
    static int bytes[MS_ATTR_MAXDEV][MAXK];        /* and what each may ask for */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return -1;
    std::lock_guard<std::mutex> lock(mu);
    int slot = -1;
    if (dev >= 0 && dev < MS_ATTR_MAXDEV)
        for (int i = 0; i < MAXK; i++) {
            if (done[dev][i] == kernel) return bytes[dev][i];
            if (!done[dev][i] && slot < 0) slot = i;
        }
    /* the ceiling holds static and dynamic shared memory together */
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, kernel) != cudaSuccess) return -1;
    int allow = ms_cuda_smem_optin() - (int)fa.sharedSizeBytes;
    if (allow < 0) allow = 0;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, allow) != cudaSuccess) return -1;
    if (slot >= 0) { /* no slot left: set again next time (harmless) */
        done[dev][slot] = kernel;
        bytes[dev][slot] = allow;
    }
    return allow;
}

int ms_cuda_sm_count(void)
{
    static std::atomic<int> cache[MS_ATTR_MAXDEV];
    return cached_attr(cache, cudaDevAttrMultiProcessorCount, 132); /* H100/H200; only sizes grids */
}
