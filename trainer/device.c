/* device.c — devices (CPU, CUDA, virtual) and the tagged allocator. */
#include "trainer/device.h"
#include "kernels/cuda/cuda_kernels.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CUDA_GRAIN (2u << 20)   /* the driver hands out device memory in 2 MiB pages */
#define CPU_GRAIN 256u          /* keeps every tensor 256-byte aligned, like cudaMalloc */

struct ms_alloc_rec {
    uintptr_t addr;             /* 0 = empty, 1 = tombstone */
    size_t bytes;
    int layer;
    ms_cat cat;
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static size_t hash_ptr(uintptr_t p, size_t cap) { return (size_t)((p >> 8) * 0x9E3779B97F4A7C15ull) & (cap - 1); }

static int recs_grow(ms_device *d)
{
    size_t ncap = d->recs_cap ? d->recs_cap * 2 : 1024;
    ms_alloc_rec *n = calloc(ncap, sizeof *n);
    if (!n) return -1;
    for (size_t i = 0; i < d->recs_cap; i++) {
        ms_alloc_rec r = d->recs[i];
        if (r.addr <= 1) continue;
        size_t h = hash_ptr(r.addr, ncap);
        while (n[h].addr) h = (h + 1) & (ncap - 1);
        n[h] = r;
    }
    free(d->recs);
    d->recs = n;
    d->recs_cap = ncap;
    return 0;
}

static int recs_put(ms_device *d, ms_alloc_rec r)
{
    if ((d->recs_n + 1) * 2 > d->recs_cap && recs_grow(d)) return -1;
    size_t h = hash_ptr(r.addr, d->recs_cap);
    while (d->recs[h].addr > 1) h = (h + 1) & (d->recs_cap - 1);
    d->recs[h] = r;
    d->recs_n++;
    return 0;
}

static ms_alloc_rec *recs_find(const ms_device *d, uintptr_t addr)
{
    if (!d->recs_cap) return NULL;
    size_t h = hash_ptr(addr, d->recs_cap);
    for (size_t n = 0; n < d->recs_cap; n++, h = (h + 1) & (d->recs_cap - 1)) {
        if (d->recs[h].addr == 0) return NULL;
        if (d->recs[h].addr == addr) return &d->recs[h];
    }
    return NULL;
}

int ms_cuda_gpu_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

int ms_cuda_gpu_capacities(uint64_t *caps, int max)
{
    int n = ms_cuda_gpu_count();
    if (n > max) n = max;
    for (int i = 0; i < n; i++) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) return i;
        caps[i] = prop.totalGlobalMem;
    }
    return n;
}

static void account(ms_device *d, ms_cat cat, int layer, long long delta)
{
    d->live[cat] += (size_t)delta;
    d->live_total += (size_t)delta;
    if (layer >= 0 && layer < MS_MAX_LAYERS) d->live_layer[layer] += (size_t)delta;
    if (d->live[cat] > d->peak[cat]) d->peak[cat] = d->live[cat];
    if (d->live_total > d->peak_total) {
        d->peak_total = d->live_total;
        memcpy(d->at_peak, d->live, sizeof d->at_peak);
    }
}

void ms_dev_account_foreign(ms_device *d, ms_cat cat, size_t bytes)
{
    if (d && bytes) account(d, cat, -1, (long long)bytes);
}

static void emit(ms_device *d, ms_mem_event_kind kind, uintptr_t addr, size_t bytes, int layer, ms_phase ph,
                 ms_cat cat, const char *what)
{
    if (!d->hook) return;
    ms_mem_event ev = { .t_us = now_us() - d->t0, .device = d->index, .kind = kind, .layer = layer, .phase = ph,
                        .category = cat, .bytes = bytes, .address = addr, .source = MS_EV_SRC_ALLOCATOR };
    snprintf(ev.what, sizeof ev.what, "%s", what ? what : "");
    d->hook(d->hook_user, &ev);
}

int ms_dev_open(ms_device *d, int index, const char *spec, size_t capacity, int virtual_share,
                char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->index = index;
    d->cur_layer = -1;
    d->cur_phase = MS_PH_INIT;
    d->t0 = now_us();
    d->virtual_share = virtual_share;
    if (strcmp(spec, "cpu") == 0) {
        d->backend = MS_BACKEND_CPU;
        d->ops = &ms_ops_cpu;
        d->grain = CPU_GRAIN;
        d->capacity = capacity ? capacity : SIZE_MAX;
        snprintf(d->name, sizeof d->name, virtual_share ? "cpu/v%d" : "cpu", index);
        return 0;
    }
    int ord = -1;
    char tail = 0;
    if (sscanf(spec, "cuda:%d%c", &ord, &tail) != 1 || ord < 0) {
        snprintf(err, errlen, "bad device '%s' (expected cpu or cuda:N)", spec);
        return -1;
    }
    int n = ms_cuda_gpu_count();
    if (n == 0) {
        snprintf(err, errlen, "device %s asked for, but no CUDA GPU is visible on this machine "
                 "(use --device cpu to run on the CPU backend)", spec);
        return -1;
    }
    if (ord >= n) {
        snprintf(err, errlen, "device %s asked for, but only %d CUDA GPU(s) are visible", spec, n);
        return -1;
    }
    d->backend = MS_BACKEND_CUDA;
    d->cuda_ordinal = ord;
    d->ops = &ms_ops_cuda;
    d->grain = CUDA_GRAIN;
    snprintf(d->name, sizeof d->name, virtual_share ? "cuda:%d/v%d" : "cuda:%d", ord, index);
    cudaError_t e = cudaSetDevice(ord);
    if (e == cudaSuccess) e = cudaFree(0); /* create the context now, before we measure */
    if (e != cudaSuccess) {
        snprintf(err, errlen, "%s: cannot initialise CUDA: %s", spec, cudaGetErrorString(e));
        return -1;
    }
    size_t freeb = 0, total = 0;
    cudaMemGetInfo(&freeb, &total);
    /* What the GPU costs before any tensor of ours (context, driver) is the
     * first part of the reserve, measured at the first open of each GPU in
     * the process. A virtual device is accounted as if it were a GPU of its
     * own, context included, so that it behaves like the real one it
     * emulates (the planner adds the profile's reserve to every device). */
    static size_t ctx_of[64];
    if (ord < 64 && !ctx_of[ord]) ctx_of[ord] = total - freeb;
    size_t ctx_bytes = ord < 64 ? ctx_of[ord] : total - freeb;
    account(d, MS_CAT_RESERVE, -1, (long long)ctx_bytes);
    if (!capacity) capacity = virtual_share ? freeb : total;
    d->capacity = capacity;
    if (!virtual_share && capacity < total) {
        if (capacity <= ctx_bytes) {
            snprintf(err, errlen, "%s: --gpu-mem %zu bytes is below what the CUDA context alone takes (%zu bytes)",
                     spec, capacity, ctx_bytes);
            return -1;
        }
        size_t keep = capacity - ctx_bytes;   /* what must stay free for us */
        if (keep < freeb) {
            d->ballast_bytes = freeb - keep;
            e = cudaMalloc(&d->ballast, d->ballast_bytes);
            if (e != cudaSuccess) {
                snprintf(err, errlen, "%s: cannot take the %zu-byte ballast that emulates --gpu-mem: %s",
                         spec, d->ballast_bytes, cudaGetErrorString(e));
                return -1;
            }
        }
    } else if (virtual_share && capacity > freeb + ctx_bytes) {
        snprintf(err, errlen, "%s: capacity %zu bytes is more than the GPU has free (%zu)", d->name, capacity, freeb);
        return -1;
    }
    void *ws = ms_dev_alloc(d, MS_CUDA_WORKSPACE_BYTES, MS_CAT_RESERVE, "cublaslt workspace", 0);
    if (!ws) {
        snprintf(err, errlen, "%s: no room for the cuBLASLt workspace", d->name);
        return -1;
    }
    if (ms_cuda_ctx_init(&d->k, ws, MS_CUDA_WORKSPACE_BYTES) != 0) {
        snprintf(err, errlen, "%s: %s", d->name, d->k.error);
        return -1;
    }
    return 0;
}

void ms_dev_close(ms_device *d)
{
    if (d->backend == MS_BACKEND_CUDA) {
        cudaSetDevice(d->cuda_ordinal);
        cudaDeviceSynchronize();
        if (d->mark) cudaEventDestroy((cudaEvent_t)d->mark);
        d->mark = NULL;
        void *ws = d->k.workspace;
        ms_cuda_ctx_destroy(&d->k);
        for (size_t i = 0; i < d->recs_cap; i++)
            if (d->recs[i].addr > 1 && (void *)d->recs[i].addr != ws) cudaFree((void *)d->recs[i].addr);
        if (ws) cudaFree(ws);
        if (d->ballast) cudaFree(d->ballast);
    } else {
        for (size_t i = 0; i < d->recs_cap; i++)
            if (d->recs[i].addr > 1) free((void *)d->recs[i].addr);
    }
    free(d->recs);
    d->recs = NULL;
    d->recs_cap = d->recs_n = 0;
}

void ms_dev_where(ms_device *d, int layer, ms_phase phase)
{
    /* kernels launch on the current CUDA device: make it this one */
    if (d->backend == MS_BACKEND_CUDA) cudaSetDevice(d->cuda_ordinal);
    d->cur_layer = layer;
    d->cur_phase = phase;
}

static void fill_oom(ms_device *d, size_t bytes, ms_cat cat, const char *what, int by_backend, const char *msg)
{
    ms_dev_oom *o = &d->oom;
    memset(o, 0, sizeof *o);
    o->happened = 1;
    o->device = d->index;
    o->layer = d->cur_layer;
    o->phase = d->cur_phase;
    o->cat = cat;
    snprintf(o->what, sizeof o->what, "%s", what ? what : "");
    o->requested = bytes;
    o->capacity = d->capacity;
    memcpy(o->live, d->live, sizeof o->live);
    o->live_total = d->live_total;
    o->by_backend = by_backend;
    snprintf(o->backend_error, sizeof o->backend_error, "%s", msg ? msg : "");
}

void *ms_dev_alloc(ms_device *d, size_t bytes, ms_cat cat, const char *what, int zero)
{
    if (d->capturing) {
        d->capture_broken = 1;
        return NULL;
    }
    if (bytes == 0) bytes = 1;
    size_t g = d->grain;
    size_t rounded = (bytes + g - 1) / g * g;
    int layer = d->cur_layer;
    /* The accounting is the capacity wherever no ballast makes the GPU itself refuse. */
    int accounting_decides = d->backend == MS_BACKEND_CPU || d->virtual_share || !d->ballast || d->account_only;
    if (accounting_decides && d->capacity != SIZE_MAX &&
        (rounded > d->capacity || d->live_total > d->capacity - rounded)) {
        fill_oom(d, rounded, cat, what, 0, NULL);
        emit(d, MS_EV_FAIL, 0, rounded, layer, d->cur_phase, cat, what);
        return NULL;
    }
    void *p = NULL;
    if (d->backend == MS_BACKEND_CPU) {
        if (posix_memalign(&p, 256, rounded) != 0) p = NULL;
        if (!p) {
            fill_oom(d, rounded, cat, what, 1, "host allocation failed");
            emit(d, MS_EV_FAIL, 0, rounded, layer, d->cur_phase, cat, what);
            return NULL;
        }
        if (zero) memset(p, 0, rounded);
    } else {
        cudaSetDevice(d->cuda_ordinal);
        cudaError_t e = cudaMalloc(&p, rounded);
        if (e != cudaSuccess) {
            cudaGetLastError();
            fill_oom(d, rounded, cat, what, 1, cudaGetErrorString(e));
            emit(d, MS_EV_FAIL, 0, rounded, layer, d->cur_phase, cat, what);
            return NULL;
        }
        if (zero) cudaMemsetAsync(p, 0, rounded, (cudaStream_t)d->k.stream);
    }
    ms_alloc_rec r = { (uintptr_t)p, rounded, layer, cat };
    if (recs_put(d, r) != 0) {
        if (d->backend == MS_BACKEND_CPU) free(p); else cudaFree(p);
        fill_oom(d, rounded, cat, what, 1, "allocation table full");
        return NULL;
    }
    account(d, cat, layer, (long long)rounded);
    d->n_allocs++;
    emit(d, MS_EV_ALLOC, (uintptr_t)p, rounded, layer, d->cur_phase, cat, what);
    return p;
}

size_t ms_dev_size_of(const ms_device *d, const void *p)
{
    ms_alloc_rec *r = recs_find(d, (uintptr_t)p);
    return r ? r->bytes : 0;
}

void ms_dev_free(ms_device *d, void *p)
{
    if (!p) return;
    if (d->capturing) {
        d->capture_broken = 1;
        return;
    }
    ms_alloc_rec *r = recs_find(d, (uintptr_t)p);
    if (!r) return; /* not ours: ignoring is safer than freeing a stranger */
    ms_alloc_rec rec = *r;
    r->addr = 1; /* tombstone */
    d->recs_n--;
    if (d->backend == MS_BACKEND_CPU) {
        free(p);
    } else {
        cudaSetDevice(d->cuda_ordinal);
        /* cudaFree synchronises the device, so queued kernels using p finish first */
        cudaFree(p);
    }
    account(d, rec.cat, rec.layer, -(long long)rec.bytes);
    d->n_frees++;
    emit(d, MS_EV_FREE, rec.addr, rec.bytes, rec.layer, d->cur_phase, rec.cat, "");
}

static int cuda_status(ms_device *d, cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    if (!d->k.status) {
        d->k.status = MS_EFAIL;
        snprintf(d->k.error, sizeof d->k.error, "%s: %s", what, cudaGetErrorString(e));
    }
    return MS_EFAIL;
}

int ms_dev_h2d(ms_device *d, void *dst, const void *src, size_t bytes)
{
    if (d->backend == MS_BACKEND_CPU) { memcpy(dst, src, bytes); return 0; }
    cudaSetDevice(d->cuda_ordinal);
    return cuda_status(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)d->k.stream), "copy to device");
}

int ms_dev_d2h(ms_device *d, void *dst, const void *src, size_t bytes)
{
    if (d->backend == MS_BACKEND_CPU) { memcpy(dst, src, bytes); return 0; }
    cudaSetDevice(d->cuda_ordinal);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)d->k.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)d->k.stream);
    return cuda_status(d, e, "copy to host");
}

void *ms_dev_host_alloc(ms_device *d, size_t bytes)
{
    if (d->backend == MS_BACKEND_CPU) return malloc(bytes ? bytes : 1);
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) == cudaSuccess) return p;
    cudaGetLastError(); /* no pinned memory is not a device error */
    return NULL;
}

void ms_dev_host_free(ms_device *d, void *p)
{
    if (!p) return;
    if (d->backend == MS_BACKEND_CPU) free(p);
    else cudaFreeHost(p);
}

int ms_dev_d2h_later(ms_device *d, void *dst, const void *src, size_t bytes)
{
    if (d->backend == MS_BACKEND_CPU) { memcpy(dst, src, bytes); return 0; }
    cudaSetDevice(d->cuda_ordinal);
    return cuda_status(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)d->k.stream),
                       "copy to host");
}

int ms_dev_mark(ms_device *d)
{
    if (d->backend == MS_BACKEND_CPU) return 0;
    cudaSetDevice(d->cuda_ordinal);
    cudaError_t e = cudaSuccess;
    if (!d->mark) {
        cudaEvent_t ev;
        e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
        if (e == cudaSuccess) d->mark = ev;
    }
    if (e == cudaSuccess) e = cudaEventRecord((cudaEvent_t)d->mark, (cudaStream_t)d->k.stream);
    return cuda_status(d, e, "mark");
}

int ms_dev_wait_mark(ms_device *d)
{
    if (d->backend == MS_BACKEND_CPU || !d->mark) return ms_dev_sync(d);
    cudaSetDevice(d->cuda_ordinal);
    if (cuda_status(d, cudaEventSynchronize((cudaEvent_t)d->mark), "wait")) return MS_EFAIL;
    /* a launch that failed since, as ms_dev_sync would see it */
    if (ms_cuda_check(&d->k, "wait")) return MS_EFAIL;
    return d->k.status ? MS_EFAIL : 0;
}

int ms_dev_d2d(ms_device *d, void *dst, const void *src, size_t bytes)
{
    if (d->backend == MS_BACKEND_CPU) { memmove(dst, src, bytes); return 0; }
    cudaSetDevice(d->cuda_ordinal);
    return cuda_status(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)d->k.stream), "device copy");
}

int ms_dev_memset0(ms_device *d, void *p, size_t bytes)
{
    if (d->backend == MS_BACKEND_CPU) { memset(p, 0, bytes); return 0; }
    cudaSetDevice(d->cuda_ordinal);
    return cuda_status(d, cudaMemsetAsync(p, 0, bytes, (cudaStream_t)d->k.stream), "memset");
}

int ms_dev_sync(ms_device *d)
{
    if (d->backend == MS_BACKEND_CUDA) cudaSetDevice(d->cuda_ordinal);
    int s = d->ops->sync(&d->k);
    return s ? MS_EFAIL : 0;
}

const char *ms_dev_oom_message(const ms_device *d, const char *layer_name, char *buf, size_t len)
{
    const ms_dev_oom *o = &d->oom;
    double gib = 1024.0 * 1024.0 * 1024.0;
    size_t missing = o->live_total + o->requested > o->capacity ? o->live_total + o->requested - o->capacity : 0;
    snprintf(buf, len,
             "out of memory on %s in the %s pass of %s: requested %zu bytes (%.3f GiB, %s '%s') "
             "with %zu bytes (%.3f GiB) live of %zu (%.3f GiB) capacity; %zu bytes (%.3f GiB) missing%s%s",
             d->name, ms_phase_name(o->phase), layer_name ? layer_name : "(no layer)", o->requested,
             o->requested / gib, ms_cat_name(o->cat), o->what, o->live_total, o->live_total / gib,
             o->capacity, o->capacity / gib, missing, missing / gib,
             o->by_backend ? "; the device said: " : "", o->by_backend ? o->backend_error : "");
    return buf;
}
