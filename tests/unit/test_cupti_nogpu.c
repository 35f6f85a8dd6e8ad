/* test_cupti_nogpu.c — the CUPTI memory tracer on a machine without a GPU:
 * ms_trace_start fails cleanly (or works, where a GPU exists); the address
 * map, ledgers and cross-check on random synthetic events; and the real
 * callback decoding (runtime/driver nesting, NVTX range stacks per thread,
 * failed allocations, MEMORY2 correlation) fed with synthetic CUPTI data
 * through the test hooks; and ms_nvtx_prepare's handling of the variable. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cupti.h>
#include <generated_nvtx_meta.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/cupti_trace.h"
#include "trainer/nvtx_ranges.h"

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state;
static uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void seed(uint64_t s)
{
    rng_state = s;
    printf("  seed %llu\n", (unsigned long long)s);
}

static ms_trace_event mk(int kind, int source, uint64_t addr, uint64_t bytes, double t)
{
    ms_trace_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.source = source;
    e.address = addr;
    e.bytes = bytes;
    e.t_us = t;
    snprintf(e.api, sizeof e.api, "%s", source == MS_TEV_CALLBACK ? "cudaMalloc" : "memory2:device");
    return e;
}

/* ------------------------------------------------------------ start without GPU */

static void test_start_without_gpu(void **state)
{
    (void)state;
    char err[256];
    memset(err, 'x', sizeof err);
    int rc = ms_trace_start(err, sizeof err);
    if (rc == 0) {
        /* a GPU is here after all: the trace must stop cleanly */
        printf("  a GPU is present: ms_trace_start succeeded\n");
        assert_int_equal(ms_trace_running(), 1);
        assert_int_equal(ms_trace_flush(), 0);
        assert_int_equal(ms_trace_stop(), 0);
        ms_trace_clear();
        return;
    }
    assert_int_equal(rc, -1);
    printf("  ms_trace_start: %s\n", err);
    assert_true(strlen(err) > 10 && strlen(err) < sizeof err);
    assert_non_null(strstr(err, "unavailable"));
    assert_int_equal(ms_trace_running(), 0);
    assert_int_equal(ms_trace_flush(), -1);
    assert_int_equal(ms_trace_stop(), -1);
    const ms_trace_event *ev = NULL;
    int n = -1;
    assert_int_equal(ms_trace_events(&ev, &n), 0);
    assert_int_equal(n, 0);
    uint64_t a = 1, b = 1, c = 1, d = 1;
    assert_int_equal(ms_trace_ledgers(&a, &b, &c, &d), 0);
    assert_true(a == 0 && b == 0 && c == 0 && d == 0);
    assert_int_equal(ms_trace_reserve_bytes(), 0);
    /* a second failing start is just as clean, and NULL buffers are fine */
    assert_int_equal(ms_trace_start(NULL, 0), -1);
}

/* ------------------------------------------------------------ address map */

static void test_addr_map_random(void **state)
{
    (void)state;
    seed(0x5eed0001);
    enum { N = 3000 };
    uint64_t *keys = calloc(N, sizeof *keys), *vals = calloc(N, sizeof *vals);
    int *present = calloc(N, sizeof *present);
    assert_non_null(keys); assert_non_null(vals); assert_non_null(present);
    for (int i = 0; i < N; i++) {
        /* 512-byte aligned, like device addresses, all distinct */
        keys[i] = 0x7f0000000000ULL + ((uint64_t)i * 7919 + 1) * 512;
        vals[i] = 1 + rnd() % 100000;
    }
    ms_addr_map m = { 0 };
    assert_int_equal(ms_addr_map_put(&m, 0, 5), -1); /* key 0 is never stored */
    size_t live = 0;
    for (int step = 0; step < 40000; step++) {
        int i = (int)(rnd() % N);
        uint64_t v = 0;
        if (rnd() % 3 != 0) {
            int was = present[i];
            vals[i] = 1 + rnd() % 100000;
            assert_int_equal(ms_addr_map_put(&m, keys[i], vals[i]), 0);
            if (!was) live++;
            present[i] = 1;
        } else {
            int got = ms_addr_map_take(&m, keys[i], &v);
            assert_int_equal(got, present[i]);
            if (got) { assert_true(v == vals[i]); live--; }
            present[i] = 0;
        }
        assert_int_equal(m.n, live);
    }
    for (int i = 0; i < N; i++) {
        uint64_t v = 0;
        assert_int_equal(ms_addr_map_get(&m, keys[i], &v), present[i]);
        if (present[i]) assert_true(v == vals[i]);
    }
    ms_addr_map_clear(&m);
    assert_int_equal(ms_addr_map_get(&m, keys[0], NULL), 0);
    free(keys); free(vals); free(present);
}

/* ------------------------------------------------------------ ledgers and cross-check */

/* A random alloc/free history, seen by both sources; activity records carry
 * their own timestamps and are delivered in shuffled order. */
static int make_history(ms_trace_event *ev, int max, uint64_t *expect_live)
{
    enum { SLOTS = 64 };
    uint64_t addr[SLOTS] = { 0 }, bytes[SLOTS] = { 0 };
    int n = 0, nact = 0;
    ms_trace_event act[1024];
    double t = 1.0;
    for (int step = 0; step < 400 && n < max / 2 - 1; step++, t += 1.5) {
        int s = (int)(rnd() % SLOTS);
        if (addr[s] == 0) {
            addr[s] = 0x7f1000000000ULL + (uint64_t)s * 0x1000000ULL + (rnd() % 64) * 512;
            bytes[s] = 1 + rnd() % (1u << 24);
            ev[n++] = mk(MS_TEV_ALLOC, MS_TEV_CALLBACK, addr[s], bytes[s], t);
            act[nact++] = mk(MS_TEV_ALLOC, MS_TEV_ACTIVITY, addr[s], bytes[s], t + 0.1);
        } else {
            ev[n++] = mk(MS_TEV_FREE, MS_TEV_CALLBACK, addr[s], bytes[s], t);
            act[nact++] = mk(MS_TEV_FREE, MS_TEV_ACTIVITY, addr[s], bytes[s], t + 0.1);
            addr[s] = 0;
        }
    }
    *expect_live = 0;
    for (int s = 0; s < SLOTS; s++) if (addr[s]) *expect_live += bytes[s];
    for (int i = nact - 1; i > 0; i--) { /* shuffle delivery order */
        int j = (int)(rnd() % (uint64_t)(i + 1));
        ms_trace_event x = act[i]; act[i] = act[j]; act[j] = x;
    }
    for (int i = 0; i < nact; i++) ev[n++] = act[i];
    return n;
}

static void test_ledgers_agree_and_disagree(void **state)
{
    (void)state;
    seed(0x5eed0002);
    static ms_trace_event ev[2048];
    uint64_t expect_live = 0;
    int n = make_history(ev, 2048, &expect_live);
    assert_true(n > 100);
    assert_true(expect_live > 0);

    ms_trace_ledger cb, ac;
    assert_int_equal(ms_trace_ledger_compute(ev, n, MS_TEV_CALLBACK, &cb), 0);
    assert_int_equal(ms_trace_ledger_compute(ev, n, MS_TEV_ACTIVITY, &ac), 0);
    assert_true(cb.live_bytes == expect_live);
    assert_true(ac.live_bytes == expect_live);
    assert_int_equal(cb.allocs, ac.allocs);
    assert_int_equal(cb.frees, ac.frees);
    assert_int_equal(cb.untraced_frees, 0);
    assert_int_equal(ac.untraced_frees, 0); /* timestamp replay undoes the shuffle */
    assert_true(cb.peak_bytes >= cb.live_bytes && cb.peak_bytes == ac.peak_bytes);

    ms_trace_xcheck x;
    assert_int_equal(ms_trace_crosscheck(ev, n, &x), 0);
    assert_int_equal(x.allocs_matched, cb.allocs);
    assert_int_equal(x.frees_matched, cb.frees);
    assert_int_equal(x.n_diffs, 0);
    assert_true(x.bytes_matched == cb.alloc_bytes);

    /* one activity allocation off by one byte: both sides show a difference */
    int victim = -1;
    for (int i = 0; i < n && victim < 0; i++)
        if (ev[i].source == MS_TEV_ACTIVITY && ev[i].kind == MS_TEV_ALLOC) victim = i;
    assert_true(victim >= 0);
    ev[victim].bytes += 1;
    assert_int_equal(ms_trace_crosscheck(ev, n, &x), 1);
    assert_int_equal(x.allocs_callback_only, 1);
    assert_int_equal(x.allocs_activity_only, 1);
    assert_int_equal(x.n_diffs, 2);
    int saw_act = 0;
    for (int i = 0; i < x.n_diffs; i++)
        if (x.diffs[i].only_in == MS_TEV_ACTIVITY) {
            saw_act = 1;
            assert_true(x.diffs[i].address == ev[victim].address);
            assert_true(x.diffs[i].bytes == ev[victim].bytes);
        }
    assert_true(saw_act);
    ev[victim].bytes -= 1;

    /* an activity free lost: the callback side has one free more */
    int lost = -1;
    for (int i = n - 1; i >= 0 && lost < 0; i--)
        if (ev[i].source == MS_TEV_ACTIVITY && ev[i].kind == MS_TEV_FREE) lost = i;
    assert_true(lost >= 0);
    ms_trace_event keep = ev[lost];
    ev[lost].source = -1; /* belongs to neither source */
    assert_int_equal(ms_trace_crosscheck(ev, n, &x), 1);
    assert_int_equal(x.frees_callback_only, 1);
    assert_int_equal(x.frees_activity_only, 0);
    assert_int_equal(x.allocs_callback_only + x.allocs_activity_only, 0);
    assert_int_equal(ms_trace_ledger_compute(ev, n, MS_TEV_ACTIVITY, &ac), 0);
    assert_true(ac.live_bytes == expect_live + keep.bytes);
    ev[lost] = keep;

    /* a free of something allocated before tracing is set apart, not a diff */
    ev[n] = mk(MS_TEV_FREE, MS_TEV_CALLBACK, 0x1234500, 0, 9999.0);
    assert_int_equal(ms_trace_crosscheck(ev, n + 1, &x), 0);
    assert_int_equal(x.frees_untraced, 1);

    assert_int_equal(ms_trace_crosscheck(NULL, 3, &x), -1);
    assert_int_equal(ms_trace_ledger_compute(ev, n, MS_TEV_CALLBACK, NULL), -1);
    assert_int_equal(ms_trace_crosscheck(NULL, 0, &x), 0);
}

/* ------------------------------------------------------------ callbacks through the hooks */

static uint32_t next_corr = 100;

static void nvtx_push(const char *msg)
{
    nvtxRangePushA_params p = { msg };
    CUpti_NvtxData d = { "nvtxRangePushA", &p, NULL };
    ms_trace_test_callback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushA, &d);
}

static void nvtx_pop(void)
{
    nvtxRangePop_params p = { NULL };
    CUpti_NvtxData d = { "nvtxRangePop", &p, NULL };
    ms_trace_test_callback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePop, &d);
}

static void api_site(int domain, uint32_t cbid, int site, const void *params, void *ret, uint32_t corr)
{
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.callbackSite = site;
    d.functionName = "synthetic";
    d.functionParams = params;
    d.functionReturnValue = ret;
    d.correlationId = corr;
    ms_trace_test_callback(domain, cbid, &d);
}

/* A cudaMalloc as CUPTI reports it: runtime enter, the driver call the
 * runtime makes inside (enter and exit), runtime exit. Returns the
 * driver-level correlation id (what a MEMORY2 record might carry). */
static uint32_t fake_cuda_malloc(uint64_t addr, size_t size, cudaError_t result)
{
    void *ptr = result == cudaSuccess ? (void *)(uintptr_t)addr : NULL;
    cudaMalloc_v3020_params rp = { &ptr, size };
    CUdeviceptr dptr = (CUdeviceptr)addr;
    cuMemAlloc_v2_params dp = { &dptr, size };
    CUresult dres = result == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    uint32_t rt_corr = next_corr++, drv_corr = next_corr++;
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_ENTER, &rp, NULL, rt_corr);
    api_site(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_ENTER, &dp, NULL, drv_corr);
    api_site(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, &dp, &dres, drv_corr);
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_EXIT, &rp, &result, rt_corr);
    return drv_corr;
}

static uint32_t fake_cuda_free(uint64_t addr)
{
    cudaFree_v3020_params rp = { (void *)(uintptr_t)addr };
    cuMemFree_v2_params dp = { (CUdeviceptr)addr };
    cudaError_t ok = cudaSuccess;
    CUresult dok = CUDA_SUCCESS;
    uint32_t rt_corr = next_corr++, drv_corr = next_corr++;
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, CUPTI_API_ENTER, &rp, NULL, rt_corr);
    api_site(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, CUPTI_API_EXIT, &dp, &dok, drv_corr);
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, CUPTI_API_EXIT, &rp, &ok, rt_corr);
    return rt_corr;
}

static void fake_memory2(int op, int memkind, uint64_t addr, uint64_t bytes, uint32_t corr, uint64_t ts)
{
    CUpti_ActivityMemory4 r;
    memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = op;
    r.memoryKind = memkind;
    r.correlationId = corr;
    r.address = addr;
    r.bytes = bytes;
    r.timestamp = ts;
    r.deviceId = 0;
    ms_trace_test_activity(&r);
}

typedef struct { uint64_t addr; size_t size; } thread_job;

static void *second_thread(void *arg)
{
    const thread_job *job = arg;
    nvtx_push("block 5/backward");
    fake_cuda_malloc(job->addr, job->size, cudaSuccess);
    nvtx_pop();
    return NULL;
}

static const ms_trace_event *find(const ms_trace_event *ev, int n, int source, int kind, uint64_t addr)
{
    for (int i = 0; i < n; i++)
        if (ev[i].source == source && ev[i].kind == kind && ev[i].address == addr) return &ev[i];
    return NULL;
}

static void test_callbacks_through_hooks(void **state)
{
    (void)state;
    seed(0x5eed0003);
    ms_trace_clear();
    if (ms_trace_test_begin() != 0) { /* a real trace runs (GPU machine): nothing to fake */
        printf("  skipped: a real trace is running\n");
        return;
    }
    const uint64_t base = 0x7f2000000000ULL + (rnd() % 1024) * 0x200000ULL;
    const size_t sz_a = 1000 + rnd() % 5000, sz_b = (3u << 20) + 7, sz_c = 4096 + rnd() % 100;
    const uint64_t a = base, b = base + 0x1000000, c = base + 0x3000000, drv = base + 0x5000000;
    const uint64_t pitched = base + 0x7000000, async = base + 0x9000000, thr = base + 0xb000000;
    const uint64_t huge = 1ULL << 50;

    assert_string_equal(ms_trace_current_range(), "");
    nvtx_push("layer 3/forward");
    assert_string_equal(ms_trace_current_range(), "layer 3/forward");
    uint32_t corr_a = fake_cuda_malloc(a, sz_a, cudaSuccess);
    uint32_t corr_b = fake_cuda_malloc(b, sz_b, cudaSuccess);
    fake_cuda_malloc(0, huge, cudaErrorMemoryAllocation);

    /* nested NVTX ranges: the innermost wins, the pop restores */
    nvtx_push("attn");
    uint32_t corr_c = fake_cuda_malloc(c, sz_c, cudaSuccess);
    nvtx_pop();

    /* a driver call made by the program itself is recorded */
    CUdeviceptr dptr = (CUdeviceptr)drv;
    cuMemAlloc_v2_params dp = { &dptr, 65536 };
    CUresult dok = CUDA_SUCCESS;
    uint32_t corr_drv = next_corr++;
    api_site(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_ENTER, &dp, NULL, corr_drv);
    api_site(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, &dp, &dok, corr_drv);

    /* cudaMallocPitch: bytes are pitch * height */
    void *pptr = (void *)(uintptr_t)pitched;
    size_t pitch = 512;
    cudaMallocPitch_v3020_params pp = { &pptr, &pitch, 300, 10 };
    cudaError_t ok = cudaSuccess;
    uint32_t corr_p = next_corr++;
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020, CUPTI_API_ENTER, &pp, NULL, corr_p);
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020, CUPTI_API_EXIT, &pp, &ok, corr_p);

    /* cudaMallocAsync / cudaFreeAsync */
    void *aptr = (void *)(uintptr_t)async;
    cudaMallocAsync_v11020_params ap = { &aptr, 12345, NULL };
    uint32_t corr_async = next_corr++;
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, CUPTI_API_ENTER, &ap, NULL, corr_async);
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, CUPTI_API_EXIT, &ap, &ok, corr_async);
    cudaFreeAsync_v11020_params fp = { (void *)(uintptr_t)async, NULL };
    uint32_t corr_fa = next_corr++;
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, CUPTI_API_ENTER, &fp, NULL, corr_fa);
    api_site(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, CUPTI_API_EXIT, &fp, &ok, corr_fa);

    /* a VMM handle: recorded, kept out of the cross-check */
    CUmemGenericAllocationHandle h = 0x55aa;
    cuMemCreate_params cp = { &h, 2u << 20, NULL, 0 };
    uint32_t corr_h = next_corr++;
    api_site(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_API_EXIT, &cp, &dok, corr_h);

    /* a second thread with its own range; ours is untouched */
    thread_job job = { thr, 777 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, second_thread, &job), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_string_equal(ms_trace_current_range(), "layer 3/forward");

    nvtx_pop();
    assert_string_equal(ms_trace_current_range(), "");
    nvtx_pop(); /* a pop on an empty stack is ignored */
    assert_string_equal(ms_trace_current_range(), "");
    uint32_t corr_fb = fake_cuda_free(b);
    fake_cuda_free(0);                     /* cudaFree(NULL): nothing */
    fake_cuda_free(0x1234000);             /* not allocated while tracing */

    /* MEMORY2 records: by the runtime's or the driver's correlation id */
    uint64_t ts = 1000;
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, a, sz_a, corr_a - 1, ts++); /* runtime id */
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, b, sz_b, corr_b, ts++);
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, c, sz_c, corr_c, ts++); /* driver id */
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, drv, 65536, corr_drv, ts++);
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, pitched, 5120, corr_p, ts++);
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, async, 12345, corr_async, ts++);
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, async, 12345, corr_fa, ts++);
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, thr, 777, 99999, ts++);
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, b, sz_b, corr_fb, ts++);
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0x1000, 64, 5, ts++);
    /* a release stamped before the trace started (CUPTI sends those) */
    fake_memory2(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, a, sz_a, 7, 100);
    ms_trace_test_end();

    /* after the end nothing is recorded */
    fake_cuda_malloc(base + 0xd000000, 64, cudaSuccess);

    const ms_trace_event *ev = NULL;
    int n = 0;
    assert_int_equal(ms_trace_events(&ev, &n), 0);
    for (int i = 0; i < n; i++)
        printf("  %2d %-8s %-4s %-22s %#14llx %10llu res=%d corr=%u range=\"%s\"\n", i,
               ev[i].source == MS_TEV_CALLBACK ? "callback" : "activity",
               ev[i].kind == MS_TEV_ALLOC ? "ALLOC" : ev[i].kind == MS_TEV_FREE ? "FREE" : "FAIL", ev[i].api,
               (unsigned long long)ev[i].address, (unsigned long long)ev[i].bytes, ev[i].api_result,
               ev[i].correlation, ev[i].range);
    /* callbacks: a, b, FAIL, c, drv, pitched, async, free async, handle, thr, free b, untraced free;
     * activity: 9 (the pinned and the early records are skipped) */
    int ncb = 0, nac = 0;
    for (int i = 0; i < n; i++) *(ev[i].source == MS_TEV_CALLBACK ? &ncb : &nac) += 1;
    assert_int_equal(ncb, 12);
    assert_int_equal(nac, 9);

    const ms_trace_event *e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, a);
    assert_non_null(e);
    assert_string_equal(e->api, "cudaMalloc"); /* the nested cuMemAlloc_v2 is not recorded again */
    assert_string_equal(e->range, "layer 3/forward");
    assert_true(e->bytes == sz_a);
    e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_FAIL, 0);
    assert_non_null(e);
    assert_true(e->bytes == huge);
    assert_int_equal(e->api_result, cudaErrorMemoryAllocation);
    assert_string_equal(e->range, "layer 3/forward");
    e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, c);
    assert_non_null(e);
    assert_string_equal(e->range, "attn");
    e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, drv);
    assert_non_null(e);
    assert_string_equal(e->api, "cuMemAlloc_v2");
    e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, pitched);
    assert_non_null(e);
    assert_true(e->bytes == 5120);
    e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_FREE, async);
    assert_non_null(e);
    assert_true(e->bytes == 12345);
    assert_string_equal(e->api, "cudaFreeAsync");
    e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, thr);
    assert_non_null(e);
    assert_string_equal(e->range, "block 5/backward");
    e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_FREE, b);
    assert_non_null(e);
    assert_true(e->bytes == sz_b);
    assert_string_equal(e->range, "");
    e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_FREE, 0x1234000);
    assert_non_null(e);
    assert_true(e->bytes == 0);
    e = find(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, 0x55aa);
    assert_non_null(e);
    assert_true(ms_trace_event_is_handle(e));

    /* activity events borrow range and API from their call */
    e = find(ev, n, MS_TEV_ACTIVITY, MS_TEV_ALLOC, c);
    assert_non_null(e);
    assert_string_equal(e->range, "attn");      /* via the driver-level (alias) id */
    assert_string_equal(e->api, "cudaMalloc");
    e = find(ev, n, MS_TEV_ACTIVITY, MS_TEV_ALLOC, thr);
    assert_non_null(e);
    assert_string_equal(e->api, "memory2:device"); /* unknown correlation id */
    assert_string_equal(e->range, "");

    ms_trace_stats st;
    assert_int_equal(ms_trace_get_stats(&st), 0);
    assert_true(st.untraced_frees == 1);
    assert_true(st.activity_skipped == 2);
    assert_true(st.activity_unmatched == 1);
    assert_true(st.nvtx_callbacks == 7);
    assert_true(st.lost_events == 0);

    ms_trace_xcheck x;
    assert_int_equal(ms_trace_crosscheck(ev, n, &x), 0);
    assert_int_equal(x.allocs_matched, 7);
    assert_int_equal(x.frees_matched, 2);
    assert_int_equal(x.frees_untraced, 1);

    uint64_t cl = 0, al = 0, cn = 0, an = 0;
    assert_int_equal(ms_trace_ledgers(&cl, &al, &cn, &an), 0);
    const uint64_t live_addr = sz_a + sz_c + 65536 + 5120 + 777;
    assert_true(al == live_addr);
    assert_true(cl == live_addr + (2u << 20)); /* plus the VMM handle */
    assert_true(cn == 8 && an == 7);

    ms_trace_clear();
    assert_int_equal(ms_trace_events(&ev, &n), 0);
    assert_int_equal(n, 0);
}

/* ------------------------------------------------------------ NVTX injection variable */

static void test_nvtx_prepare(void **state)
{
    (void)state;
    char err[512];
    unsetenv("NVTX_INJECTION64_PATH");
    int rc = ms_nvtx_prepare(err, sizeof err);
    const char *v = getenv("NVTX_INJECTION64_PATH");
    printf("  prepare -> %d, NVTX_INJECTION64_PATH=%s %s\n", rc, v ? v : "(unset)", err);
    assert_int_equal(rc, 0);
    assert_non_null(v);
    assert_non_null(strstr(v, "cupti"));
    assert_int_equal(ms_nvtx_prepare(err, sizeof err), 0); /* again: already libcupti */

    /* another tool's library is kept, with a warning */
    setenv("NVTX_INJECTION64_PATH", "/nonexistent/libnot_a_tool.so", 1);
    assert_int_equal(ms_nvtx_prepare(err, sizeof err), 1);
    assert_non_null(strstr(err, "does not name libcupti"));
    assert_string_equal(getenv("NVTX_INJECTION64_PATH"), "/nonexistent/libnot_a_tool.so");

    /* ranges with no loadable tool are no-ops; after one, preparing is too late */
    ms_range_push("layer 0/forward");
    ms_range_pop();
    unsetenv("NVTX_INJECTION64_PATH");
    assert_int_equal(ms_nvtx_prepare(err, sizeof err), -1);
    assert_non_null(strstr(err, "already"));
    assert_null(getenv("NVTX_INJECTION64_PATH"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_without_gpu),
        cmocka_unit_test(test_addr_map_random),
        cmocka_unit_test(test_ledgers_agree_and_disagree),
        cmocka_unit_test(test_callbacks_through_hooks),
        cmocka_unit_test(test_nvtx_prepare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
