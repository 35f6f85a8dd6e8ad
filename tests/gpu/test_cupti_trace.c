/* test_cupti_trace.c — the CUPTI memory tracer on a real GPU: allocations
 * and frees inside an NVTX range (and another range on a second thread),
 * an impossible cudaMalloc seen as a FAIL event with its bytes and
 * cudaErrorMemoryAllocation, a driver-API allocation recorded once, and the
 * callback and MEMORY2 activity ledgers agreeing byte for byte. Also a
 * restart, and what tracing costs an API call it does not trace.
 * Fails at once, saying so, when there is no GPU. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profiler/cupti_trace.h"
#include "trainer/nvtx_ranges.h"

static uint64_t rng_state;
static uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *kind_name(int k)
{
    return k == MS_TEV_ALLOC ? "ALLOC" : k == MS_TEV_FREE ? "FREE" : k == MS_TEV_FAIL ? "FAIL" : "?";
}

static void print_events(const ms_trace_event *ev, int n)
{
    for (int i = 0; i < n; i++)
        printf("  %3d %9.1fus %-8s %-5s %-22s %#14llx %16llu res=%d corr=%u dev=%d range=\"%s\"\n", i,
               ev[i].t_us, ev[i].source == MS_TEV_CALLBACK ? "callback" : "activity", kind_name(ev[i].kind),
               ev[i].api, (unsigned long long)ev[i].address, (unsigned long long)ev[i].bytes,
               ev[i].api_result, ev[i].correlation, ev[i].device, ev[i].range);
}

/* Events of one source, kind, address and (unless 0) bytes: addresses are
 * reused after a free, so an address alone may name two allocations. */
static int count(const ms_trace_event *ev, int n, int source, int kind, uint64_t addr, uint64_t bytes,
                 const ms_trace_event **first)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        if (ev[i].source == source && ev[i].kind == kind && ev[i].address == addr &&
            (bytes == 0 || ev[i].bytes == bytes)) {
            if (c++ == 0 && first) *first = &ev[i];
        }
    return c;
}

static int group_setup(void **state)
{
    (void)state;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        fprintf(stderr, "FAIL: this GPU test needs a CUDA GPU (cudaGetDeviceCount: %s, %d devices)\n",
                cudaGetErrorString(e), ndev);
        return -1;
    }
    return 0;
}

typedef struct { size_t bytes; void *ptr; cudaError_t rc; char range_seen[64]; } thread_job;

static void *second_thread(void *arg)
{
    thread_job *job = arg;
    ms_range_push("block 5/backward");
    snprintf(job->range_seen, sizeof job->range_seen, "%s", ms_trace_current_range());
    job->rc = cudaMalloc(&job->ptr, job->bytes);
    ms_range_pop();
    return NULL;
}

enum { N_MAIN = 6 };

static void test_trace_allocations(void **state)
{
    (void)state;
    rng_state = 0x5eedc0de;
    ms_trace_clear();
    char err[512];
    int prc = ms_nvtx_prepare(err, sizeof err);
    printf("  ms_nvtx_prepare -> %d, NVTX_INJECTION64_PATH=%s %s\n", prc, getenv("NVTX_INJECTION64_PATH"), err);
    assert_int_equal(prc, 0);

    /* the context exists before tracing, as in the trainer (the reserve is
     * measured then) */
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaFree(NULL), cudaSuccess);

    int rc = ms_trace_start(err, sizeof err);
    if (rc != 0) fprintf(stderr, "  ms_trace_start: %s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(ms_trace_start(err, sizeof err), -1); /* only once */
    printf("  second start: %s\n", err);
    printf("  CUPTI reserve measured at start: %llu bytes\n", (unsigned long long)ms_trace_reserve_bytes());

    ms_range_push("layer 3/forward");
    assert_string_equal(ms_trace_current_range(), "layer 3/forward");

    size_t sizes[N_MAIN];
    void *ptrs[N_MAIN] = { 0 };
    sizes[0] = 1000 + rnd() % 1000;            /* odd small sizes */
    sizes[1] = (3u << 20) + 7;
    sizes[2] = (64u << 20) + rnd() % 4096;
    sizes[3] = 256;
    sizes[4] = 12345 * 17;
    sizes[5] = (size_t)(1 + rnd() % 200) << 20;
    for (int i = 0; i < N_MAIN; i++) assert_int_equal(cudaMalloc(&ptrs[i], sizes[i]), cudaSuccess);
    for (int i = 0; i < N_MAIN; i += 2) assert_int_equal(cudaFree(ptrs[i]), cudaSuccess);

    /* an impossible request: 1 PiB */
    const size_t huge = (size_t)1 << 50;
    void *never = NULL;
    assert_int_equal(cudaMalloc(&never, huge), cudaErrorMemoryAllocation);
    (void)cudaGetLastError();

    /* a second thread in its own range */
    thread_job job = { 777 + rnd() % 100, NULL, cudaSuccess, "" };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, second_thread, &job), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(job.rc, cudaSuccess);
    assert_string_equal(job.range_seen, "block 5/backward");
    assert_string_equal(ms_trace_current_range(), "layer 3/forward");

    /* the other allocating calls: pitched, stream-ordered, managed, driver */
    ms_range_push("layer 4/backward");
    void *pitched = NULL, *async = NULL, *managed = NULL;
    size_t pitch = 0;
    assert_int_equal(cudaMallocPitch(&pitched, &pitch, 1000, 33), cudaSuccess);
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&async, 1u << 20, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(async, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaMallocManaged(&managed, 1u << 20, cudaMemAttachGlobal), cudaSuccess);
    void *fn_alloc = NULL, *fn_free = NULL;
    enum cudaDriverEntryPointQueryResult q;
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn_alloc, 13000, cudaEnableDefault, &q), cudaSuccess);
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemFree", &fn_free, 13000, cudaEnableDefault, &q), cudaSuccess);
    CUresult (*cu_alloc)(CUdeviceptr *, size_t) = (CUresult (*)(CUdeviceptr *, size_t))fn_alloc;
    CUresult (*cu_free)(CUdeviceptr) = (CUresult (*)(CUdeviceptr))fn_free;
    CUdeviceptr dptr = 0;
    assert_int_equal(cu_alloc(&dptr, 65536 + 512), CUDA_SUCCESS);
    ms_range_pop();

    ms_range_pop();
    assert_string_equal(ms_trace_current_range(), "");
    assert_int_equal(cudaFree(ptrs[1]), cudaSuccess); /* freed outside any range */
    assert_int_equal(cu_free(dptr), CUDA_SUCCESS);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);

    assert_int_equal(ms_trace_flush(), 0);
    assert_int_equal(ms_trace_stop(), 0);
    assert_int_equal(ms_trace_running(), 0);

    const ms_trace_event *ev = NULL;
    int n = 0;
    assert_int_equal(ms_trace_events(&ev, &n), 0);
    print_events(ev, n);

    const ms_trace_event *e = NULL, *a = NULL;
    for (int i = 0; i < N_MAIN; i++) {
        uint64_t addr = (uint64_t)(uintptr_t)ptrs[i];
        assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, addr, sizes[i], &e), 1);
        assert_string_equal(e->api, "cudaMalloc"); /* not also cuMemAlloc_v2 */
        assert_true(e->bytes == sizes[i]);
        assert_string_equal(e->range, "layer 3/forward");
        assert_int_equal(count(ev, n, MS_TEV_ACTIVITY, MS_TEV_ALLOC, addr, sizes[i], &a), 1);
        assert_true(a->bytes == sizes[i]);
        assert_string_equal(a->range, "layer 3/forward"); /* through the correlation id */
        int freed = i % 2 == 0 || i == 1;
        assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_FREE, addr, sizes[i], &e), freed);
        assert_int_equal(count(ev, n, MS_TEV_ACTIVITY, MS_TEV_FREE, addr, sizes[i], &a), freed);
        if (freed) {
            assert_true(e->bytes == sizes[i]);
            assert_true(a->bytes == sizes[i]);
            assert_string_equal(e->range, i == 1 ? "" : "layer 3/forward");
        }
    }
    /* the failure, with its bytes, code and range; MEMORY2 has no record */
    int fails = 0;
    for (int i = 0; i < n; i++)
        if (ev[i].kind == MS_TEV_FAIL) {
            fails++;
            assert_int_equal(ev[i].source, MS_TEV_CALLBACK);
            assert_string_equal(ev[i].api, "cudaMalloc");
            assert_true(ev[i].bytes == huge);
            assert_int_equal(ev[i].api_result, cudaErrorMemoryAllocation);
            assert_string_equal(ev[i].range, "layer 3/forward");
        }
    assert_int_equal(fails, 1);
    /* the second thread's allocation */
    assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, (uint64_t)(uintptr_t)job.ptr, job.bytes, &e), 1);
    assert_string_equal(e->range, "block 5/backward");
    assert_true(e->bytes == job.bytes);
    /* pitched: pitch * height */
    assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, (uint64_t)(uintptr_t)pitched, (uint64_t)pitch * 33, &e), 1);
    assert_true(e->bytes == (uint64_t)pitch * 33);
    assert_string_equal(e->range, "layer 4/backward");
    /* stream-ordered and managed */
    assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, (uint64_t)(uintptr_t)async, 1u << 20, &e), 1);
    assert_string_equal(e->api, "cudaMallocAsync");
    assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_FREE, (uint64_t)(uintptr_t)async, 1u << 20, &e), 1);
    assert_true(e->bytes == 1u << 20);
    assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, (uint64_t)(uintptr_t)managed, 1u << 20, &e), 1);
    assert_string_equal(e->api, "cudaMallocManaged");
    /* the program's own driver call: recorded once, as a driver call */
    assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, (uint64_t)dptr, 65536 + 512, &e), 1);
    assert_string_equal(e->api, "cuMemAlloc_v2");
    assert_true(e->bytes == 65536 + 512);
    assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_FREE, (uint64_t)dptr, 65536 + 512, &e), 1);
    assert_string_equal(e->api, "cuMemFree_v2");

    /* the cross-check: every allocation and free, same address and bytes */
    ms_trace_xcheck x;
    int xr = ms_trace_crosscheck(ev, n, &x);
    printf("  cross-check: %d allocs and %d frees agree (%llu bytes); allocs only in callbacks %d, only in "
           "activity %d; frees %d / %d; untraced frees %d\n",
           x.allocs_matched, x.frees_matched, (unsigned long long)x.bytes_matched, x.allocs_callback_only,
           x.allocs_activity_only, x.frees_callback_only, x.frees_activity_only, x.frees_untraced);
    for (int i = 0; i < x.n_diffs; i++)
        printf("  diff: %s only in %s at %#llx, %llu bytes\n", kind_name(x.diffs[i].kind),
               x.diffs[i].only_in == MS_TEV_CALLBACK ? "callbacks" : "activity",
               (unsigned long long)x.diffs[i].address, (unsigned long long)x.diffs[i].bytes);
    assert_int_equal(xr, 0);
    const int ours = N_MAIN + 1 /* thread */ + 4 /* pitched, async, managed, driver */;
    assert_true(x.allocs_matched >= ours);
    assert_true(x.frees_matched >= 3 + 1 + 1 + 1);

    uint64_t cl = 0, al = 0, cn = 0, an = 0;
    assert_int_equal(ms_trace_ledgers(&cl, &al, &cn, &an), 0);
    printf("  ledgers: callback live %llu in %llu allocs, activity live %llu in %llu allocs\n",
           (unsigned long long)cl, (unsigned long long)cn, (unsigned long long)al, (unsigned long long)an);
    assert_true(cl == al);
    assert_true(cn == an);
    uint64_t expect_live = sizes[3] + sizes[5] + job.bytes + (uint64_t)pitch * 33 + (1u << 20);
    assert_true(cl >= expect_live);

    ms_trace_stats st;
    assert_int_equal(ms_trace_get_stats(&st), 0);
    printf("  stats: dropped %llu skipped %llu unmatched %llu failed_frees %llu untraced_frees %llu nvtx %llu "
           "lost %llu env %d\n",
           (unsigned long long)st.activity_dropped, (unsigned long long)st.activity_skipped,
           (unsigned long long)st.activity_unmatched, (unsigned long long)st.failed_frees,
           (unsigned long long)st.untraced_frees, (unsigned long long)st.nvtx_callbacks,
           (unsigned long long)st.lost_events, st.nvtx_env_set);
    assert_true(st.activity_dropped == 0);
    assert_true(st.lost_events == 0);
    assert_true(st.nvtx_callbacks >= 6);
    assert_int_equal(st.nvtx_env_set, 1);

    for (int i = 3; i < N_MAIN; i += 2) cudaFree(ptrs[i]);
    cudaFree(job.ptr);
    cudaFree(pitched);
    cudaFree(managed);
    cudaStreamDestroy(s);
    ms_trace_clear();
}

/* A second trace in the same process works; a free of something allocated
 * before it is an untraced free, not a difference. */
static void test_restart(void **state)
{
    (void)state;
    char err[512];
    void *before = NULL, *p = NULL;
    ms_trace_clear();
    assert_int_equal(cudaMalloc(&before, 4096), cudaSuccess);
    assert_int_equal(ms_trace_start(err, sizeof err), 0);
    ms_range_push("layer 9/optimizer");
    assert_int_equal(cudaMalloc(&p, 5000), cudaSuccess);
    assert_int_equal(cudaFree(before), cudaSuccess);
    ms_range_pop();
    assert_int_equal(ms_trace_stop(), 0);
    const ms_trace_event *ev = NULL, *e = NULL;
    int n = 0;
    assert_int_equal(ms_trace_events(&ev, &n), 0);
    print_events(ev, n);
    assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_ALLOC, (uint64_t)(uintptr_t)p, 5000, &e), 1);
    assert_string_equal(e->range, "layer 9/optimizer");
    assert_int_equal(count(ev, n, MS_TEV_CALLBACK, MS_TEV_FREE, (uint64_t)(uintptr_t)before, 0, &e), 1);
    assert_true(e->bytes == 0);
    ms_trace_xcheck x;
    assert_int_equal(ms_trace_crosscheck(ev, n, &x), 0);
    assert_int_equal(x.frees_untraced, 2);
    cudaFree(p);
    ms_trace_clear();
}

/* What tracing costs calls it does not trace (kernel-like traffic) and the
 * NVTX ranges it does follow. Printed, with a loose bound only. */
static void test_overhead(void **state)
{
    (void)state;
    char err[512];
    void *buf = NULL;
    assert_int_equal(cudaMalloc(&buf, 1 << 20), cudaSuccess);
    enum { CALLS = 20000, REPS = 3 };
    double off = 1e30, on = 1e30;
    /* interleaved, best of REPS, so that clock drift hits both alike */
    for (int rep = 0; rep < REPS; rep++) {
        for (int traced = 0; traced < 2; traced++) {
            if (traced) assert_int_equal(ms_trace_start(err, sizeof err), 0);
            double t = now_s();
            for (int i = 0; i < CALLS; i++) {
                ms_range_push("block 1/forward");
                cudaMemsetAsync(buf, i & 0xff, 4096, 0);
                ms_range_pop();
            }
            cudaDeviceSynchronize();
            t = now_s() - t;
            if (traced) assert_int_equal(ms_trace_stop(), 0);
            if (traced) on = t < on ? t : on;
            else off = t < off ? t : off;
        }
    }
    printf("  %d x (range push + cudaMemsetAsync + pop): %.1f ms untraced, %.1f ms traced (%+.1f%%)\n", CALLS,
           off * 1e3, on * 1e3, 100.0 * (on - off) / off);
    assert_true(on < 3.0 * off + 0.05);
    cudaFree(buf);
    ms_trace_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_allocations),
        cmocka_unit_test(test_restart),
        cmocka_unit_test(test_overhead),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
