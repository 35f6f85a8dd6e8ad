/* cupti_trace.c — CUPTI glue of the memory tracer: which callbacks are
 * enabled, how their parameters are decoded into events, the per-thread
 * NVTX range stack and runtime-call nesting, and the MEMORY2 activity
 * buffers. The bookkeeping lives in cupti_ledger.c. Contract: cupti_trace.h.
 *
 * Locking: `data_mu` guards the event log, maps and stats and is held only
 * for short stretches inside callbacks; `ctl_mu` serialises start/stop/flush.
 * CUPTI may call the buffer-completion callback synchronously from inside
 * cuptiActivityFlushAll, so no CUPTI call is ever made with data_mu held. */
#include "profiler/cupti_trace.h"

#include <cupti.h>
#include <generated_nvtx_meta.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ what we trace */

typedef struct traced_api {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    const char *name;
} traced_api;

#define RT(n, id)  { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##id, n }
#define DRV(n, id) { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##id, n }
#define NVTX(id)   { CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_##id, #id }

/* Every runtime/driver call that hands out or gives back device memory and
 * has a size to record (arrays and graph memory nodes are left out: see the
 * doc), and the three NVTX calls that move the default domain's range stack.
 * Only these callback ids are enabled: kernel launches never call us. */
static const traced_api TRACED[] = {
    RT("cudaMalloc", cudaMalloc_v3020),
    RT("cudaMallocPitch", cudaMallocPitch_v3020),
    RT("cudaMalloc3D", cudaMalloc3D_v3020),
    RT("cudaMallocManaged", cudaMallocManaged_v6000),
    RT("cudaMallocAsync", cudaMallocAsync_v11020),
    RT("cudaMallocAsync_ptsz", cudaMallocAsync_ptsz_v11020),
    RT("cudaMallocFromPoolAsync", cudaMallocFromPoolAsync_v11020),
    RT("cudaMallocFromPoolAsync_ptsz", cudaMallocFromPoolAsync_ptsz_v11020),
    RT("cudaFree", cudaFree_v3020),
    RT("cudaFreeAsync", cudaFreeAsync_v11020),
    RT("cudaFreeAsync_ptsz", cudaFreeAsync_ptsz_v11020),
    DRV("cuMemAlloc_v2", cuMemAlloc_v2),
    DRV("cuMemAllocPitch_v2", cuMemAllocPitch_v2),
    DRV("cuMemAllocManaged", cuMemAllocManaged),
    DRV("cuMemAllocAsync", cuMemAllocAsync),
    DRV("cuMemAllocAsync_ptsz", cuMemAllocAsync_ptsz),
    DRV("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync),
    DRV("cuMemAllocFromPoolAsync_ptsz", cuMemAllocFromPoolAsync_ptsz),
    DRV("cuMemFree_v2", cuMemFree_v2),
    DRV("cuMemFreeAsync", cuMemFreeAsync),
    DRV("cuMemFreeAsync_ptsz", cuMemFreeAsync_ptsz),
    DRV("cuMemCreate", cuMemCreate),
    DRV("cuMemRelease", cuMemRelease),
    NVTX(nvtxRangePushA),
    NVTX(nvtxRangePushEx),
    NVTX(nvtxRangePop),
};
#define N_TRACED ((int)(sizeof TRACED / sizeof TRACED[0]))

static const char *api_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    for (int i = 0; i < N_TRACED; i++)
        if (TRACED[i].domain == domain && TRACED[i].cbid == cbid) return TRACED[i].name;
    return "?";
}

/* One decoded call: an allocation (address valid only if it succeeded) or a
 * free. `bytes` of an allocation is what it got, or what it asked for if it
 * failed (a pitched allocation asked for width*height and got pitch*height). */
typedef struct decoded {
    int is_free;
    uint64_t address;
    uint64_t bytes;
} decoded;

static uint64_t ptr_at(void *const *pp) { return pp ? (uint64_t)(uintptr_t)*pp : 0; }
static uint64_t dptr_at(const CUdeviceptr *pp) { return pp ? (uint64_t)*pp : 0; }

/* Decodes a runtime call's parameters. 0 if the id is not ours. */
static int decode_runtime(CUpti_CallbackId cbid, const void *params, int ok, decoded *d)
{
    memset(d, 0, sizeof *d);
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
        const cudaMalloc_v3020_params *p = params;
        d->bytes = p->size;
        d->address = ok ? ptr_at(p->devPtr) : 0;
        return 1;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
        const cudaMallocManaged_v6000_params *p = params;
        d->bytes = p->size;
        d->address = ok ? ptr_at(p->devPtr) : 0;
        return 1;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
        const cudaMallocAsync_v11020_params *p = params; /* _ptsz has the same layout */
        d->bytes = p->size;
        d->address = ok ? ptr_at(p->devPtr) : 0;
        return 1;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020: {
        const cudaMallocFromPoolAsync_v11020_params *p = params;
        d->bytes = p->size;
        d->address = ok ? ptr_at(p->ptr) : 0;
        return 1;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
        const cudaMallocPitch_v3020_params *p = params;
        d->bytes = (uint64_t)p->width * p->height;
        if (ok && p->pitch) d->bytes = (uint64_t)*p->pitch * p->height;
        d->address = ok ? ptr_at(p->devPtr) : 0;
        return 1;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020: {
        const cudaMalloc3D_v3020_params *p = params;
        uint64_t rows = (uint64_t)p->extent.height * p->extent.depth;
        d->bytes = (uint64_t)p->extent.width * rows;
        if (ok && p->pitchedDevPtr) {
            d->bytes = (uint64_t)p->pitchedDevPtr->pitch * rows;
            d->address = (uint64_t)(uintptr_t)p->pitchedDevPtr->ptr;
        }
        return 1;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020: {
        const cudaFree_v3020_params *p = params;
        d->is_free = 1;
        d->address = (uint64_t)(uintptr_t)p->devPtr;
        return 1;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020: {
        const cudaFreeAsync_v11020_params *p = params;
        d->is_free = 1;
        d->address = (uint64_t)(uintptr_t)p->devPtr;
        return 1;
    }
    default:
        return 0;
    }
}

/* Decodes a driver call's parameters. 0 if the id is not ours. */
static int decode_driver(CUpti_CallbackId cbid, const void *params, int ok, decoded *d)
{
    memset(d, 0, sizeof *d);
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
        const cuMemAlloc_v2_params *p = params;
        d->bytes = p->bytesize;
        d->address = ok ? dptr_at(p->dptr) : 0;
        return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
        const cuMemAllocManaged_params *p = params;
        d->bytes = p->bytesize;
        d->address = ok ? dptr_at(p->dptr) : 0;
        return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
        const cuMemAllocAsync_params *p = params;
        d->bytes = p->bytesize;
        d->address = ok ? dptr_at(p->dptr) : 0;
        return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
        const cuMemAllocFromPoolAsync_params *p = params;
        d->bytes = p->bytesize;
        d->address = ok ? dptr_at(p->dptr) : 0;
        return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        const cuMemAllocPitch_v2_params *p = params;
        d->bytes = (uint64_t)p->WidthInBytes * p->Height;
        if (ok && p->pPitch) d->bytes = (uint64_t)*p->pPitch * p->Height;
        d->address = ok ? dptr_at(p->dptr) : 0;
        return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
        const cuMemCreate_params *p = params;
        d->bytes = p->size;
        d->address = ok && p->handle ? (uint64_t)*p->handle : 0;
        return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
        const cuMemFree_v2_params *p = params;
        d->is_free = 1;
        d->address = (uint64_t)p->dptr;
        return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
        const cuMemFreeAsync_params *p = params;
        d->is_free = 1;
        d->address = (uint64_t)p->dptr;
        return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
        const cuMemRelease_params *p = params;
        d->is_free = 1;
        d->address = (uint64_t)p->handle;
        return 1;
    }
    default:
        return 0;
    }
}

/* ------------------------------------------------------------ state */

#define RANGE_DEPTH 32 /* deeper pushes are counted but their names not kept */
#define RANGE_LEN 64

/* Per-thread: the NVTX range stack and the runtime-call nesting depth. A
 * thread whose `gen` is stale starts empty, so state from an earlier trace
 * (say a stop in the middle of a call) never leaks into the next one. */
typedef struct thread_state {
    unsigned gen;
    int rt_depth;        /* traced runtime calls this thread is inside */
    uint32_t rt_corr;    /* correlation id of the outermost one */
    int range_depth;
    char ranges[RANGE_DEPTH][RANGE_LEN];
    CUcontext last_ctx;  /* cache for cuptiGetDeviceId */
    int last_dev;
} thread_state;

static _Thread_local thread_state tls_state;
static atomic_uint generation = 1;
static atomic_int recording;               /* callbacks record only while 1 */
static atomic_uint_fast64_t nvtx_seen;

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t data_mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
    /* under ctl_mu */
    int started;
    int buffers_registered;
    CUpti_SubscriberHandle sub;
    uint64_t reserve;
    /* under data_mu */
    uint64_t t0_ns;
    ms_event_log log;
    ms_addr_map live_addr;   /* callback ledger: address -> bytes */
    ms_addr_map live_handle; /* callback ledger: VMM handle -> bytes */
    ms_addr_map corr_event;  /* correlation id -> callback event index + 1 */
    ms_addr_map corr_alias;  /* nested call's correlation id -> outer call's */
    ms_trace_stats stats;
    /* streaming (injection) mode: events go to the sink and are not kept */
    ms_trace_sink sink;
    void *sink_user;
} g;

static thread_state *tls(void)
{
    thread_state *t = &tls_state;
    unsigned gen = atomic_load_explicit(&generation, memory_order_relaxed);
    if (t->gen != gen) {
        t->gen = gen;
        t->rt_depth = 0;
        t->rt_corr = 0;
        t->range_depth = 0;
        t->last_ctx = NULL;
        t->last_dev = -1;
    }
    return t;
}

static const char *innermost(const thread_state *t)
{
    if (t->range_depth <= 0) return "";
    int top = t->range_depth < RANGE_DEPTH ? t->range_depth : RANGE_DEPTH;
    return t->ranges[top - 1];
}

/* Microseconds since start on CUPTI's clock (the clock of activity
 * timestamps too). g.t0_ns is written before recording starts. */
static double now_us(void)
{
    uint64_t ts = 0;
    if (cuptiGetTimestamp(&ts) != CUPTI_SUCCESS) return 0.0;
    return ((double)ts - (double)g.t0_ns) / 1000.0;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static int device_of(thread_state *t, CUcontext ctx)
{
    if (!ctx) return -1;
    if (ctx != t->last_ctx) {
        uint32_t dev = 0;
        t->last_ctx = ctx;
        t->last_dev = cuptiGetDeviceId(ctx, &dev) == CUPTI_SUCCESS ? (int)dev : -1;
    }
    return t->last_dev;
}

/* ------------------------------------------------------------ callbacks */

static void on_nvtx(CUpti_CallbackId cbid, const CUpti_NvtxData *nd)
{
    thread_state *t = tls();
    atomic_fetch_add_explicit(&nvtx_seen, 1, memory_order_relaxed);
    if (cbid == CUPTI_CBID_NVTX_nvtxRangePop) {
        if (t->range_depth > 0) t->range_depth--;
        return;
    }
    const char *msg = NULL;
    if (cbid == CUPTI_CBID_NVTX_nvtxRangePushA) {
        const nvtxRangePushA_params *p = nd ? nd->functionParams : NULL;
        msg = p ? p->message : NULL;
    } else if (cbid == CUPTI_CBID_NVTX_nvtxRangePushEx) {
        const nvtxRangePushEx_params *p = nd ? nd->functionParams : NULL;
        const nvtxEventAttributes_t *a = p ? p->eventAttrib : NULL;
        /* registered or wide strings cannot be read here: push "" so that
         * the matching pop still balances */
        if (a && a->messageType == NVTX_MESSAGE_TYPE_ASCII) msg = a->message.ascii;
    } else {
        return;
    }
    if (t->range_depth < RANGE_DEPTH) copy_str(t->ranges[t->range_depth], RANGE_LEN, msg);
    t->range_depth++;
}

/* An empty event: CUPTI knows no layer, phase or category of its own (the
 * profiler reads layer and phase from the range). */
static void unknown_place(ms_mem_event *e)
{
    memset(e, 0, sizeof *e);
    e->layer = e->phase = e->category = -1;
}

/* Stores one callback event; data_mu must not be held. */
static void record_call(thread_state *t, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                        const CUpti_CallbackData *cd)
{
    int result = 0;
    if (cd->functionReturnValue)
        result = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? (int)*(const cudaError_t *)cd->functionReturnValue
                                                       : (int)*(const CUresult *)cd->functionReturnValue;
    int ok = result == 0;
    decoded d;
    int known = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? decode_runtime(cbid, cd->functionParams, ok, &d)
                                                      : decode_driver(cbid, cd->functionParams, ok, &d);
    if (!known || !cd->functionParams) return;

    ms_mem_event e;
    unknown_place(&e);
    e.source = MS_EV_SRC_CUPTI_CALLBACK;
    e.api_result = result;
    e.correlation = cd->correlationId;
    e.device = device_of(t, cd->context);
    copy_str(e.range, sizeof e.range, innermost(t));
    copy_str(e.api, sizeof e.api, api_name(domain, cbid));
    int handle = domain == CUPTI_CB_DOMAIN_DRIVER_API &&
                 (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate || cbid == CUPTI_DRIVER_TRACE_CBID_cuMemRelease);

    e.t_us = now_us();

    pthread_mutex_lock(&data_mu);
    ms_addr_map *live = handle ? &g.live_handle : &g.live_addr;
    int store = 1;
    if (!ok) {
        if (d.is_free) { g.stats.failed_frees++; store = 0; }
        else { e.kind = MS_EV_FAIL; e.bytes = d.bytes; }
    } else if (d.is_free) {
        e.kind = MS_EV_FREE;
        e.address = d.address;
        if (d.address == 0) store = 0; /* cudaFree(NULL) frees nothing */
        else if (!ms_addr_map_take(live, d.address, &e.bytes)) g.stats.untraced_frees++;
    } else {
        e.kind = MS_EV_ALLOC;
        e.address = d.address;
        e.bytes = d.bytes;
        if (d.address == 0) store = 0; /* a zero-byte request gets NULL and no memory */
        else if (ms_addr_map_put(live, d.address, d.bytes) != 0) g.stats.lost_events++;
    }
    ms_trace_sink sink = g.sink;
    void *sink_user = g.sink_user;
    int to_sink = store && sink;
    if (to_sink) {
        store = 0;
    } else if (store) {
        int idx = ms_event_log_push(&g.log, &e);
        if (idx < 0) g.stats.lost_events++;
        else if (e.correlation) ms_addr_map_put(&g.corr_event, e.correlation, (uint64_t)idx + 1);
    }
    pthread_mutex_unlock(&data_mu);
    /* outside the lock: the sink writes to a socket */
    if (to_sink) sink(&e, sink_user);
}

/* A call made inside a traced runtime call is not recorded again, but its
 * correlation id is remembered as an alias of the outer call's, so that a
 * MEMORY2 record carrying either id finds the recorded event. */
static void note_alias(uint32_t inner, uint32_t outer)
{
    if (!inner || !outer || inner == outer) return;
    pthread_mutex_lock(&data_mu);
    ms_addr_map_put(&g.corr_alias, inner, outer);
    pthread_mutex_unlock(&data_mu);
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *cbdata)
{
    (void)userdata;
    /* acquire: pairs with the store in ms_trace_start, after which g.t0_ns
     * is only read */
    if (!atomic_load_explicit(&recording, memory_order_acquire) || !cbdata) return;
    if (domain == CUPTI_CB_DOMAIN_NVTX) {
        on_nvtx(cbid, cbdata);
        return;
    }
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    const CUpti_CallbackData *cd = cbdata;
    thread_state *t = tls();
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (cd->callbackSite == CUPTI_API_ENTER) {
            if (t->rt_depth++ == 0) t->rt_corr = cd->correlationId;
            else note_alias(cd->correlationId, t->rt_corr);
            return;
        }
        if (t->rt_depth > 0) t->rt_depth--;
        if (t->rt_depth == 0) record_call(t, domain, cbid, cd);
        return;
    }
    if (cd->callbackSite != CUPTI_API_EXIT) return;
    if (t->rt_depth > 0) note_alias(cd->correlationId, t->rt_corr);
    else record_call(t, domain, cbid, cd);
}

/* ------------------------------------------------------------ activity */

#define ACTIVITY_BUFFER_BYTES ((size_t)1 << 20) /* ~8000 MEMORY2 records */

static void CUPTIAPI on_buffer_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, ACTIVITY_BUFFER_BYTES);
    *size = *buffer ? ACTIVITY_BUFFER_BYTES : 0;
    *max_records = 0; /* as many as fit */
}

/* One MEMORY2 record into the log; data_mu held. */
static void on_memory_record(const CUpti_ActivityMemory4 *r)
{
    int kind;
    if (r->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) kind = MS_EV_ALLOC;
    else if (r->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) kind = MS_EV_FREE;
    else { g.stats.activity_skipped++; return; }
    const char *mem;
    if (r->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) mem = "memory2:device";
    else if (r->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED) mem = "memory2:managed";
    else { g.stats.activity_skipped++; return; } /* host, arrays, module statics */
    /* CUPTI keeps writing release records for allocations it saw even while
     * the kind is disabled (seen on the H200: frees made between two traces
     * arrived in the second one, stamped before its start): drop them */
    if (r->timestamp < g.t0_ns) { g.stats.activity_skipped++; return; }

    ms_mem_event e;
    unknown_place(&e);
    e.t_us = ((double)r->timestamp - (double)g.t0_ns) / 1000.0;
    e.kind = kind;
    e.address = r->address;
    e.bytes = r->bytes;
    e.correlation = r->correlationId;
    e.source = MS_EV_SRC_CUPTI_ACTIVITY;
    e.device = r->deviceId == CUPTI_UNIFIED_MEMORY_CPU_DEVICE_ID ? -1 : (int)r->deviceId;
    /* range and API come from the callback event of the same call */
    uint64_t corr = r->correlationId, outer = 0, idx = 0;
    if (ms_addr_map_get(&g.corr_alias, corr, &outer)) corr = outer;
    if (ms_addr_map_get(&g.corr_event, corr, &idx) && idx >= 1 && idx <= (uint64_t)g.log.n) {
        const ms_mem_event *c = &g.log.ev[idx - 1];
        memcpy(e.range, c->range, sizeof e.range);
        memcpy(e.api, c->api, sizeof e.api);
    } else {
        g.stats.activity_unmatched++;
        copy_str(e.api, sizeof e.api, mem);
    }
    if (ms_event_log_push(&g.log, &e) < 0) g.stats.lost_events++;
}

static void CUPTIAPI on_buffer_complete(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                        size_t valid)
{
    (void)size;
    if (!buffer) return;
    pthread_mutex_lock(&data_mu);
    if (valid > 0) {
        CUpti_Activity *rec = NULL;
        while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
            if (rec->kind == CUPTI_ACTIVITY_KIND_MEMORY2) on_memory_record((const CUpti_ActivityMemory4 *)rec);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        g.stats.activity_dropped += dropped;
    pthread_mutex_unlock(&data_mu);
    free(buffer);
}

/* ------------------------------------------------------------ driver probe */

typedef int (*cu_int_fn)(unsigned int);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_name_fn)(int, const char **);
typedef int (*cu_ctx_fn)(CUcontext *);
typedef int (*cu_meminfo_fn)(size_t *, size_t *);

typedef struct driver_probe {
    void *lib;
    cu_ctx_fn ctx_get_current;
    cu_meminfo_fn mem_get_info;
} driver_probe;

/* Looks for a usable driver and device without creating a context, so that
 * "no GPU" is said plainly instead of as an obscure CUPTI error. */
static int probe_driver(driver_probe *dp, char *err, size_t errlen)
{
    memset(dp, 0, sizeof *dp);
    /* the handle is kept open: the CUDA runtime loads the same driver */
    dp->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!dp->lib) {
        const char *why = dlerror();
        snprintf(err, errlen, "CUPTI tracing unavailable: no CUDA driver (libcuda.so.1 not loadable: %s)",
                 why ? why : "not found");
        return -1;
    }
    cu_int_fn cu_init = (cu_int_fn)dlsym(dp->lib, "cuInit");
    cu_count_fn cu_count = (cu_count_fn)dlsym(dp->lib, "cuDeviceGetCount");
    cu_name_fn cu_name = (cu_name_fn)dlsym(dp->lib, "cuGetErrorName");
    dp->ctx_get_current = (cu_ctx_fn)dlsym(dp->lib, "cuCtxGetCurrent");
    dp->mem_get_info = (cu_meminfo_fn)dlsym(dp->lib, "cuMemGetInfo_v2");
    if (!cu_init || !cu_count) {
        snprintf(err, errlen, "CUPTI tracing unavailable: libcuda.so.1 lacks cuInit/cuDeviceGetCount");
        return -1;
    }
    int rc = cu_init(0);
    if (rc != 0) {
        const char *name = NULL;
        if (!cu_name || cu_name(rc, &name) != 0) name = NULL;
        snprintf(err, errlen, "CUPTI tracing unavailable: cuInit failed with %s (%d): no usable GPU",
                 name ? name : "CUDA error", rc);
        return -1;
    }
    int count = 0;
    if (cu_count(&count) != 0 || count <= 0) {
        snprintf(err, errlen, "CUPTI tracing unavailable: no CUDA device");
        return -1;
    }
    return 0;
}

/* Free device memory of the current context, 0 if there is none. */
static uint64_t free_device_bytes(const driver_probe *dp)
{
    CUcontext ctx = NULL;
    size_t free_b = 0, total_b = 0;
    if (!dp->ctx_get_current || !dp->mem_get_info) return 0;
    if (dp->ctx_get_current(&ctx) != 0 || !ctx) return 0;
    if (dp->mem_get_info(&free_b, &total_b) != 0) return 0;
    return free_b;
}

/* ------------------------------------------------------------ start / stop */

static void cupti_msg(char *err, size_t errlen, const char *what, CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
    snprintf(err, errlen, "CUPTI tracing unavailable: %s failed: %s (%d)%s", what, s, (int)r,
             r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                 ? " - another CUPTI client (Nsight, a sanitizer) is attached"
                 : "");
}

static void set_callbacks(CUpti_SubscriberHandle sub, uint32_t enable)
{
    for (int i = 0; i < N_TRACED; i++) cuptiEnableCallback(enable, sub, TRACED[i].domain, TRACED[i].cbid);
}

/* Undo a partial start; ctl_mu held. */
static void teardown(void)
{
    atomic_store(&recording, 0);
    if (g.sub) {
        set_callbacks(g.sub, 0);
        cuptiUnsubscribe(g.sub);
        g.sub = NULL;
    }
}

static int start(int injected, char *err, size_t errlen);

int ms_trace_start(char *err, size_t errlen) { return start(0, err, errlen); }

int ms_trace_start_streaming(ms_trace_sink sink, void *user, char *err, size_t errlen)
{
    if (!sink) return -1;
    pthread_mutex_lock(&data_mu);
    g.sink = sink;
    g.sink_user = user;
    pthread_mutex_unlock(&data_mu);
    int rc = start(1, err, errlen);
    if (rc != 0) {
        pthread_mutex_lock(&data_mu);
        g.sink = NULL;
        pthread_mutex_unlock(&data_mu);
    }
    return rc;
}

static int start(int injected, char *err, size_t errlen)
{
    char scratch[8];
    if (!err || errlen == 0) { err = scratch; errlen = sizeof scratch; }
    err[0] = '\0';
    pthread_mutex_lock(&ctl_mu);
    if (g.started) {
        pthread_mutex_unlock(&ctl_mu);
        snprintf(err, errlen, "CUPTI tracing already started");
        return -1;
    }
    /* Inside an injection library's InitializeInjection the driver is being
     * initialised: no probe, and no context to measure yet. */
    driver_probe dp;
    memset(&dp, 0, sizeof dp);
    if (!injected && probe_driver(&dp, err, errlen) != 0) {
        pthread_mutex_unlock(&ctl_mu);
        return -1;
    }
    uint64_t free_before = injected ? 0 : free_device_bytes(&dp);

    CUptiResult r = cuptiSubscribe(&g.sub, on_callback, NULL);
    if (r != CUPTI_SUCCESS) {
        g.sub = NULL;
        cupti_msg(err, errlen, "cuptiSubscribe", r);
        pthread_mutex_unlock(&ctl_mu);
        return -1;
    }
    for (int i = 0; i < N_TRACED; i++) {
        r = cuptiEnableCallback(1, g.sub, TRACED[i].domain, TRACED[i].cbid);
        if (r != CUPTI_SUCCESS) {
            char what[80];
            snprintf(what, sizeof what, "cuptiEnableCallback(%s)", TRACED[i].name);
            cupti_msg(err, errlen, what, r);
            teardown();
            pthread_mutex_unlock(&ctl_mu);
            return -1;
        }
    }
    if (!injected && !g.buffers_registered) {
        r = cuptiActivityRegisterCallbacks(on_buffer_request, on_buffer_complete);
        if (r != CUPTI_SUCCESS) {
            cupti_msg(err, errlen, "cuptiActivityRegisterCallbacks", r);
            teardown();
            pthread_mutex_unlock(&ctl_mu);
            return -1;
        }
        g.buffers_registered = 1;
    }

    uint64_t t0 = 0;
    cuptiGetTimestamp(&t0);
    pthread_mutex_lock(&data_mu);
    g.t0_ns = t0;
    g.stats.nvtx_env_set = getenv("NVTX_INJECTION64_PATH") != NULL;
    pthread_mutex_unlock(&data_mu);
    atomic_fetch_add(&generation, 1);
    atomic_store(&recording, 1);

    r = injected ? CUPTI_SUCCESS : cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2);
    if (r != CUPTI_SUCCESS) {
        cupti_msg(err, errlen, "cuptiActivityEnable(MEMORY2)", r);
        teardown();
        pthread_mutex_unlock(&ctl_mu);
        return -1;
    }
    uint64_t free_after = injected ? 0 : free_device_bytes(&dp);
    g.reserve = free_before > free_after ? free_before - free_after : 0;
    g.started = 1;
    pthread_mutex_unlock(&ctl_mu);
    return 0;
}

int ms_trace_flush(void)
{
    pthread_mutex_lock(&ctl_mu);
    int rc = -1;
    if (g.started) rc = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS ? 0 : -1;
    pthread_mutex_unlock(&ctl_mu);
    return rc;
}

int ms_trace_stop(void)
{
    pthread_mutex_lock(&ctl_mu);
    if (!g.started) {
        pthread_mutex_unlock(&ctl_mu);
        return -1;
    }
    int rc = 0;
    /* stop new callback events, hand over every record of calls already
     * made, then stop the activity kind and hand over what is left */
    set_callbacks(g.sub, 0);
    if (cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS) rc = -1;
    if (cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY2) != CUPTI_SUCCESS) rc = -1;
    if (cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS) rc = -1;
    teardown();
    g.started = 0;
    pthread_mutex_unlock(&ctl_mu);
    return rc;
}

int ms_trace_running(void)
{
    pthread_mutex_lock(&ctl_mu);
    int s = g.started;
    pthread_mutex_unlock(&ctl_mu);
    return s;
}

/* ------------------------------------------------------------ reading */

int ms_trace_events(const ms_mem_event **ev, int *n)
{
    if (!ev || !n) return -1;
    pthread_mutex_lock(&data_mu);
    *ev = g.log.ev;
    *n = g.log.n;
    pthread_mutex_unlock(&data_mu);
    return 0;
}

int ms_trace_events_copy(ms_mem_event **ev, int *n)
{
    if (!ev || !n) return -1;
    *ev = NULL;
    *n = 0;
    int rc = 0;
    pthread_mutex_lock(&data_mu);
    if (g.log.n > 0) {
        *ev = malloc((size_t)g.log.n * sizeof **ev);
        if (*ev) {
            memcpy(*ev, g.log.ev, (size_t)g.log.n * sizeof **ev);
            *n = g.log.n;
        } else {
            rc = -1;
        }
    }
    pthread_mutex_unlock(&data_mu);
    return rc;
}

void ms_trace_clear(void)
{
    pthread_mutex_lock(&data_mu);
    ms_event_log_clear(&g.log);
    ms_addr_map_clear(&g.live_addr);
    ms_addr_map_clear(&g.live_handle);
    ms_addr_map_clear(&g.corr_event);
    ms_addr_map_clear(&g.corr_alias);
    int env = g.stats.nvtx_env_set;
    memset(&g.stats, 0, sizeof g.stats);
    g.stats.nvtx_env_set = env;
    pthread_mutex_unlock(&data_mu);
    atomic_store(&nvtx_seen, 0);
}

int ms_trace_ledgers(uint64_t *callback_live, uint64_t *activity_live, uint64_t *callback_allocs,
                     uint64_t *activity_allocs)
{
    ms_trace_ledger cb, ac;
    pthread_mutex_lock(&data_mu);
    int rc = ms_trace_ledger_compute(g.log.ev, g.log.n, MS_EV_SRC_CUPTI_CALLBACK, &cb);
    if (rc == 0) rc = ms_trace_ledger_compute(g.log.ev, g.log.n, MS_EV_SRC_CUPTI_ACTIVITY, &ac);
    pthread_mutex_unlock(&data_mu);
    if (rc != 0) return -1;
    if (callback_live) *callback_live = cb.live_bytes;
    if (activity_live) *activity_live = ac.live_bytes;
    if (callback_allocs) *callback_allocs = (uint64_t)cb.allocs;
    if (activity_allocs) *activity_allocs = (uint64_t)ac.allocs;
    return 0;
}

int ms_trace_get_stats(ms_trace_stats *out)
{
    if (!out) return -1;
    pthread_mutex_lock(&data_mu);
    *out = g.stats;
    pthread_mutex_unlock(&data_mu);
    out->nvtx_callbacks = atomic_load(&nvtx_seen);
    return 0;
}

uint64_t ms_trace_reserve_bytes(void)
{
    pthread_mutex_lock(&ctl_mu);
    uint64_t r = g.reserve;
    pthread_mutex_unlock(&ctl_mu);
    return r;
}

const char *ms_trace_current_range(void)
{
    return innermost(tls());
}

/* ------------------------------------------------------------ test hooks */

int ms_trace_test_begin(void)
{
    pthread_mutex_lock(&ctl_mu);
    int rc = g.started ? -1 : 0;
    if (rc == 0) {
        pthread_mutex_lock(&data_mu);
        g.t0_ns = 500; /* synthetic activity records stamped earlier are dropped */
        pthread_mutex_unlock(&data_mu);
        atomic_fetch_add(&generation, 1);
        atomic_store(&recording, 1);
    }
    pthread_mutex_unlock(&ctl_mu);
    return rc;
}

void ms_trace_test_end(void)
{
    pthread_mutex_lock(&ctl_mu);
    if (!g.started) atomic_store(&recording, 0);
    pthread_mutex_unlock(&ctl_mu);
}

void ms_trace_test_callback(int domain, uint32_t cbid, const void *cbdata)
{
    on_callback(NULL, (CUpti_CallbackDomain)domain, (CUpti_CallbackId)cbid, cbdata);
}

void ms_trace_test_activity(const void *memory_record)
{
    if (!memory_record || !atomic_load(&recording)) return;
    pthread_mutex_lock(&data_mu);
    on_memory_record(memory_record);
    pthread_mutex_unlock(&data_mu);
}
