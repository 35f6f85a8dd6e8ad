/* test_attention_gpu.c — CUDA causal self-attention against the CPU twin,
 * every GPU path (fast: MS_ATTN_SIMPLE=0, reference: MS_ATTN_SIMPLE=1, and
 * for 16-bit data on a 9.0 device the mma.sync backward beside the default
 * wgmma one: MS_ATTN_WGMMA=0), on fresh random inputs. On a 9.0 device the
 * wgmma backward must be the default (a build without its sm_90a code
 * fails here rather than passing on the older kernel).
 *
 * Criterion, per tensor (out, dq, dk, dv separately, each over the batches
 * the CPU recomputes): max_i |gpu_i - cpu_i| <= tol * max_i |cpu_i|
 * (normwise relative, so it does not blow up on entries near zero); lse:
 * |gpu - cpu| <= tol * max(1, |cpu|) element-wise. tol = 1e-5 for fp32,
 * 1e-2 for bf16 and f16. Backward is end to end: each side's backward runs
 * on its own forward's out and lse. dqkv is filled with NaN before backward,
 * so anything left unwritten fails.
 *
 * Shapes: T not a multiple of the tiles (64 rows; at hs=128 128-row forward
 * tiles and 128-key x 32-query backward tiles),
 * hs = 32, 64 and 128, T = 1, and one with B*nh = 144 blocks a query tile
 * (more than the H200's 132 SMs). The CPU recomputes only the first and the
 * last batch of each shape (batches are independent) to stay fast.
 *
 * MS_ATTN_SHAPES=N checks only the first N shapes (for slow tools such as
 * compute-sanitizer). MS_ATTN_BENCH=1 adds timings of the GPT-2 small shape (B=16, T=1024,
 * C=768, nh=12) to the output (MS_ATTN_BENCH=only: nothing else). With no GPU every test fails, saying so. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/attention_cuda.h"
#include "tests/common/kern_util.h"

typedef struct { int B, T, C, nh; } shape;

static const shape kShapes[] = {
    {2, 100, 128, 2},   /* hs 64, T = 64 + 36 */
    {3, 77, 96, 3},     /* hs 32 */
    {2, 130, 256, 2},   /* hs 128, T = 2*64 + 2 */
    {1, 1, 64, 1},      /* a single token */
    {1, 128, 128, 1},   /* hs 128, T a multiple of every tile */
    {12, 257, 768, 12}, /* hs 64, B*nh = 144 */
    {6, 150, 1536, 12}, /* hs 128, B*nh = 72 */
    {2, 33, 32, 4},     /* hs 8: the simple path (tiny models) */
    {2, 40, 96, 2},     /* hs 48: the simple path */
};

static int have_gpu(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        fprintf(stderr, "FAIL: no CUDA GPU available (%s): the GPU attention tests need one\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    return 1;
}

#define CUDA_OK(x)                                                                                  \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) fail_msg("%s: %s", #x, cudaGetErrorString(e_));                      \
    } while (0)

static double tol_for(ms_dtype dt) { return dt == MS_F32 ? 1e-5 : 1e-2; }

/* Normwise check of n values (gpu g, cpu c); prints the ratio err/max. */
static int close_norm(const char *what, const float *g, const float *c, size_t n, double tol, char *line, size_t cap)
{
    double mref = 0, merr = 0;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(g[i])) nan++;
        mref = fmax(mref, fabs(c[i]));
        merr = fmax(merr, fabs((double)g[i] - c[i]));
    }
    double rel = merr / (mref > 0 ? mref : 1);
    size_t len = strlen(line);
    snprintf(line + len, cap - len, " %s %.1e", what, rel);
    if (nan || rel > tol) {
        fprintf(stderr, "  %s: max err %.3g vs max |ref| %.3g (rel %.3g > %.0e), %d non-finite\n", what, merr, mref,
                rel, tol, nan);
        return 0;
    }
    return 1;
}

/* lse, element-wise. */
static int close_lse(const float *g, const float *c, size_t n, double tol, char *line, size_t cap)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)g[i] - c[i]) / fmax(1.0, fabs(c[i]));
        if (!(r <= worst)) worst = r; /* NaN sticks */
    }
    size_t len = strlen(line);
    snprintf(line + len, cap - len, " lse %.1e", worst);
    if (!(worst <= tol)) {
        fprintf(stderr, "  lse: worst relative error %.3g > %.0e\n", worst, tol);
        return 0;
    }
    return 1;
}

/* Host data of one shape and the CPU results of its checked batches. */
typedef struct {
    shape s;
    ms_dtype dt;
    size_t es, nqkv, nout, nlse;
    void *qkv, *dout;
    int nb, batches[2];
    float *out_c[2], *lse_c[2], *dqkv_c[2]; /* per checked batch, as float */
} ref;

static void ref_build(ref *r, ms_dtype dt, shape s, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->s = s;
    r->dt = dt;
    r->es = ms_dtype_size(dt);
    r->nqkv = (size_t)s.B * s.T * 3 * s.C;
    r->nout = (size_t)s.B * s.T * s.C;
    r->nlse = (size_t)s.B * s.nh * s.T;
    ku_rng rng;
    ku_seed(&rng, seed);
    r->qkv = ku_alloc_fill(&rng, dt, r->nqkv, -2.0f, 2.0f);
    r->dout = ku_alloc_fill(&rng, dt, r->nout, -1.0f, 1.0f);
    assert_non_null(r->qkv);
    assert_non_null(r->dout);
    r->nb = s.B > 1 ? 2 : 1;
    r->batches[0] = 0;
    r->batches[1] = s.B - 1;
    size_t bq = (size_t)s.T * 3 * s.C, bo = (size_t)s.T * s.C, bl = (size_t)s.nh * s.T;
    void *out = malloc(bo * r->es), *dqkv = malloc(bq * r->es);
    void *scratch = malloc(ms_cpu_attention_bwd_scratch(dt, 1, s.T, s.C, s.nh));
    assert_non_null(out); assert_non_null(dqkv); assert_non_null(scratch);
    for (int i = 0; i < r->nb; i++) {
        int b = r->batches[i];
        const char *qkv_b = (const char *)r->qkv + (size_t)b * bq * r->es;
        const char *dout_b = (const char *)r->dout + (size_t)b * bo * r->es;
        ms_kctx ctx = {0};
        r->lse_c[i] = malloc(bl * sizeof(float));
        assert_non_null(r->lse_c[i]);
        ms_cpu_attention_fwd(&ctx, dt, out, r->lse_c[i], qkv_b, 1, s.T, s.C, s.nh);
        ms_cpu_attention_bwd(&ctx, dt, dqkv, dout_b, qkv_b, out, r->lse_c[i], scratch, 1, s.T, s.C, s.nh);
        assert_int_equal(ctx.status, 0);
        r->out_c[i] = ku_to_f32(dt, out, bo);
        r->dqkv_c[i] = ku_to_f32(dt, dqkv, bq);
        assert_non_null(r->out_c[i]); assert_non_null(r->dqkv_c[i]);
    }
    free(out); free(dqkv); free(scratch);
}

static void ref_free(ref *r)
{
    free(r->qkv); free(r->dout);
    for (int i = 0; i < r->nb; i++) { free(r->out_c[i]); free(r->lse_c[i]); free(r->dqkv_c[i]); }
}

/* Columns [lo, hi) of each of n rows of width w, gathered. */
static float *cols(const float *x, size_t n, int w, int lo, int hi)
{
    float *y = malloc(n * (size_t)(hi - lo) * sizeof *y);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++) memcpy(y + i * (hi - lo), x + i * w + lo, (size_t)(hi - lo) * sizeof *y);
    return y;
}

/* The GPU paths, chosen through the environment the kernels read. */
enum { PATH_FAST, PATH_SIMPLE, PATH_MMA_SYNC };
static const char *path_name[] = {"fast", "simple", "mma"};
static void path_set(int path)
{
    setenv("MS_ATTN_SIMPLE", path == PATH_SIMPLE ? "1" : "0", 1);
    if (path == PATH_MMA_SYNC) setenv("MS_ATTN_WGMMA", "0", 1); /* the mma.sync kernels */
}
static void path_clear(void)
{
    unsetenv("MS_ATTN_SIMPLE");
    unsetenv("MS_ATTN_WGMMA");
}

/* Runs forward and backward on the GPU by the path chosen and compares
 * the checked batches with the CPU. Returns 1 when everything matched. */
static int gpu_case(const ref *r, int path)
{
    const shape s = r->s;
    path_set(path);
    cudaStream_t st;
    CUDA_OK(cudaStreamCreate(&st));
    ms_kctx ctx = {0};
    ctx.stream = st;
    size_t scratch_bytes = ms_cuda_attention_bwd_scratch(r->dt, s.B, s.T, s.C, s.nh);
    void *qkv, *out, *dout, *dqkv, *scratch;
    float *lse;
    CUDA_OK(cudaMalloc(&qkv, r->nqkv * r->es));
    CUDA_OK(cudaMalloc(&dqkv, r->nqkv * r->es));
    CUDA_OK(cudaMalloc(&out, r->nout * r->es));
    CUDA_OK(cudaMalloc(&dout, r->nout * r->es));
    CUDA_OK(cudaMalloc((void **)&lse, r->nlse * sizeof(float)));
    CUDA_OK(cudaMalloc(&scratch, scratch_bytes ? scratch_bytes : 1));
    CUDA_OK(cudaMemcpy(qkv, r->qkv, r->nqkv * r->es, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dout, r->dout, r->nout * r->es, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dqkv, 0xff, r->nqkv * r->es)); /* NaN in every dtype */
    CUDA_OK(cudaMemset(out, 0xff, r->nout * r->es));
    CUDA_OK(cudaMemset(scratch, 0xff, scratch_bytes ? scratch_bytes : 1)); /* bwd must not rely on zeros */

    ms_cuda_attention_fwd(&ctx, r->dt, out, lse, qkv, s.B, s.T, s.C, s.nh);
    ms_cuda_attention_bwd(&ctx, r->dt, dqkv, dout, qkv, out, lse, scratch, s.B, s.T, s.C, s.nh);
    cudaError_t se = cudaStreamSynchronize(st);
    if (se != cudaSuccess) fail_msg("kernel failure: %s", cudaGetErrorString(se));
    if (ctx.status != 0) fail_msg("ctx status %d: %s", ctx.status, ctx.error);

    void *out_h = malloc(r->nout * r->es), *dqkv_h = malloc(r->nqkv * r->es);
    float *lse_h = malloc(r->nlse * sizeof(float));
    assert_non_null(out_h); assert_non_null(dqkv_h); assert_non_null(lse_h);
    CUDA_OK(cudaMemcpy(out_h, out, r->nout * r->es, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(dqkv_h, dqkv, r->nqkv * r->es, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(lse_h, lse, r->nlse * sizeof(float), cudaMemcpyDeviceToHost));

    const double tol = tol_for(r->dt);
    int ok = 1;
    const size_t bq = (size_t)s.T * 3 * s.C, bo = (size_t)s.T * s.C, bl = (size_t)s.nh * s.T;
    for (int i = 0; i < r->nb; i++) {
        const int b = r->batches[i];
        char line[256];
        snprintf(line, sizeof line, "%s %-6s B=%d T=%d C=%d nh=%d b=%d:", ms_dtype_name(r->dt),
                 path_name[path], s.B, s.T, s.C, s.nh, b);
        float *og = ku_to_f32(r->dt, (const char *)out_h + (size_t)b * bo * r->es, bo);
        float *gg = ku_to_f32(r->dt, (const char *)dqkv_h + (size_t)b * bq * r->es, bq);
        assert_non_null(og); assert_non_null(gg);
        ok &= close_norm("out", og, r->out_c[i], bo, tol, line, sizeof line);
        ok &= close_lse(lse_h + (size_t)b * bl, r->lse_c[i], bl, tol, line, sizeof line);
        static const char *names[3] = {"dq", "dk", "dv"};
        for (int part = 0; part < 3; part++) {
            float *a = cols(gg, s.T, 3 * s.C, part * s.C, (part + 1) * s.C);
            float *c = cols(r->dqkv_c[i], s.T, 3 * s.C, part * s.C, (part + 1) * s.C);
            ok &= close_norm(names[part], a, c, bo, tol, line, sizeof line);
            free(a); free(c);
        }
        fprintf(stderr, "%s%s\n", line, ok ? "" : "   <-- FAIL");
        free(og); free(gg);
    }
    free(out_h); free(dqkv_h); free(lse_h);
    cudaFree(qkv); cudaFree(dqkv); cudaFree(out); cudaFree(dout); cudaFree(lse); cudaFree(scratch);
    cudaStreamDestroy(st);
    path_clear();
    return ok;
}

/* MS_ATTN_BENCH=only: timings alone (profiling runs) */
static int bench_only(void)
{
    const char *e = getenv("MS_ATTN_BENCH");
    return e && strcmp(e, "only") == 0;
}

/* A 9.0 device (H100, H200): the wgmma backward's machine. */
static int hopper(void)
{
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    return major == 9 && minor == 0;
}

static void check_dtype(ms_dtype dt)
{
    if (bench_only()) skip();
    if (!have_gpu()) fail_msg("no CUDA GPU");
    if (dt != MS_F32 && hopper() && !ms_cuda_attention_wgmma())
        fail_msg("a 9.0 device, but the wgmma backward is not in use (built without its sm_90a code?)");
    int bad = 0;
    size_t n = sizeof kShapes / sizeof kShapes[0];
    const char *lim = getenv("MS_ATTN_SHAPES"); /* first N shapes only (e.g. under compute-sanitizer) */
    if (lim && atoi(lim) > 0 && (size_t)atoi(lim) < n) n = (size_t)atoi(lim);
    for (size_t i = 0; i < n; i++) {
        ref r;
        ref_build(&r, dt, kShapes[i], 1000 + 17 * i + dt);
        bad += !gpu_case(&r, PATH_FAST);
        bad += !gpu_case(&r, PATH_SIMPLE);
        if (dt != MS_F32 && hopper()) bad += !gpu_case(&r, PATH_MMA_SYNC);
        ref_free(&r);
    }
    assert_int_equal(bad, 0);
}

static void test_fp32(void **state) { (void)state; check_dtype(MS_F32); }
static void test_bf16(void **state) { (void)state; check_dtype(MS_BF16); }
static void test_f16(void **state) { (void)state; check_dtype(MS_F16); }

/* Head sizes over 128 and missing buffers are errors, not garbage. */
static void test_errors(void **state)
{
    (void)state;
    if (bench_only()) skip();
    if (!have_gpu()) fail_msg("no CUDA GPU");
    void *buf;
    CUDA_OK(cudaMalloc(&buf, 1 << 20));
    ms_kctx ctx = {0};
    ms_cuda_attention_fwd(&ctx, MS_BF16, buf, buf, buf, 1, 8, 384, 2); /* hs 192 */
    assert_int_not_equal(ctx.status, 0);
    assert_non_null(strstr(ctx.error, "head size"));
    memset(&ctx, 0, sizeof ctx);
    ms_cuda_attention_bwd(&ctx, MS_F32, buf, buf, buf, buf, buf, buf, 1, 8, 256, 1); /* hs 256 */
    assert_int_not_equal(ctx.status, 0);
    memset(&ctx, 0, sizeof ctx);
    ms_cuda_attention_bwd(&ctx, MS_BF16, buf, buf, buf, buf, buf, NULL, 1, 8, 128, 2);
    assert_int_not_equal(ctx.status, 0);
    memset(&ctx, 0, sizeof ctx);
    ms_cuda_attention_fwd(&ctx, MS_BF16, buf, buf, buf, 1, 8, 100, 3); /* 3 does not divide 100 */
    assert_int_not_equal(ctx.status, 0);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    cudaFree(buf);
}

/* Timing of the GPT-2 small shape (only with MS_ATTN_BENCH=1). */
static void bench_one(ms_dtype dt, int B, int T, int C, int nh, int path)
{
    path_set(path);
    size_t es = ms_dtype_size(dt), nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    ku_rng rng;
    ku_seed(&rng, 7);
    void *h = ku_alloc_fill(&rng, dt, nq, -2.0f, 2.0f);
    assert_non_null(h);
    void *qkv, *dqkv, *out, *dout, *scratch;
    float *lse;
    size_t sb = ms_cuda_attention_bwd_scratch(dt, B, T, C, nh);
    CUDA_OK(cudaMalloc(&qkv, nq * es)); CUDA_OK(cudaMalloc(&dqkv, nq * es));
    CUDA_OK(cudaMalloc(&out, no * es)); CUDA_OK(cudaMalloc(&dout, no * es));
    CUDA_OK(cudaMalloc((void **)&lse, (size_t)B * nh * T * 4)); CUDA_OK(cudaMalloc(&scratch, sb));
    CUDA_OK(cudaMemcpy(qkv, h, nq * es, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dout, h, no * es, cudaMemcpyHostToDevice));
    ms_kctx ctx = {0};
    cudaEvent_t e0, e1, e2;
    cudaEventCreate(&e0); cudaEventCreate(&e1); cudaEventCreate(&e2);
    const int iters = path == PATH_SIMPLE ? 2 : 20;
    float tf = 0, tb = 0;
    for (int rep = 0; rep < 2; rep++) { /* the first round warms up */
        tf = tb = 0;
        for (int i = 0; i < iters; i++) {
            float a, b;
            cudaEventRecord(e0, 0);
            ms_cuda_attention_fwd(&ctx, dt, out, lse, qkv, B, T, C, nh);
            cudaEventRecord(e1, 0);
            ms_cuda_attention_bwd(&ctx, dt, dqkv, dout, qkv, out, lse, scratch, B, T, C, nh);
            cudaEventRecord(e2, 0);
            cudaEventSynchronize(e2);
            cudaEventElapsedTime(&a, e0, e1);
            cudaEventElapsedTime(&b, e1, e2);
            tf += a; tb += b;
        }
    }
    assert_int_equal(ctx.status, 0);
    tf /= iters; tb /= iters;
    double hs = C / nh, flop_f = 4.0 * B * nh * (double)T * T * hs / 2; /* causal: half the tiles */
    fprintf(stderr, "bench %s %-6s B=%d T=%d C=%d nh=%d: fwd %.3f ms (%.0f TFLOP/s), bwd %.3f ms (%.0f TFLOP/s)\n",
            ms_dtype_name(dt), path_name[path], B, T, C, nh, tf, flop_f / tf / 1e9, tb,
            2.5 * flop_f / tb / 1e9);
    cudaEventDestroy(e0); cudaEventDestroy(e1); cudaEventDestroy(e2);
    cudaFree(qkv); cudaFree(dqkv); cudaFree(out); cudaFree(dout); cudaFree(lse); cudaFree(scratch);
    free(h);
    path_clear();
}

static void test_bench(void **state)
{
    (void)state;
    const char *e = getenv("MS_ATTN_BENCH");
    if (!e || (strcmp(e, "1") != 0 && strcmp(e, "only") != 0)) skip();
    if (!have_gpu()) fail_msg("no CUDA GPU");
    bench_one(MS_BF16, 16, 1024, 768, 12, PATH_FAST);
    bench_one(MS_BF16, 16, 1024, 768, 12, PATH_MMA_SYNC);
    bench_one(MS_F16, 16, 1024, 768, 12, PATH_FAST);
    bench_one(MS_F32, 16, 1024, 768, 12, PATH_FAST);
    bench_one(MS_BF16, 8, 1024, 1024, 8, PATH_FAST); /* hs 128 */
    bench_one(MS_BF16, 8, 1024, 1024, 8, PATH_MMA_SYNC);
    bench_one(MS_BF16, 16, 1024, 768, 24, PATH_FAST); /* hs 32 */
    bench_one(MS_BF16, 16, 1024, 768, 12, PATH_SIMPLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_f16),
        cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
