/* test_kernels_cpu.c — unit tests of the CPU reference kernels, called
 * through the ms_ops_cpu table (so the table wiring is tested too).
 *
 * Inputs are random (kern_util's seeded PRNG; seed 0x5eed unless the
 * environment variable KU_SEED gives another), shapes tiny.
 *
 * Tolerances, and why:
 *  - Gradients vs central finite differences (fp32, eps 1e-2 on inputs of
 *    size ~1, loss L = sum(out * R) summed in double): |fd - g| <= 2e-3 +
 *    1e-2 * max(|fd|, |g|). The finite difference carries the float rounding
 *    of the forward (~1e-7 relative per output, ~1e-5 absolute on L, divided
 *    by 2 eps) plus O(eps^2) truncation (~1e-4 for these smooth ops); a
 *    wrong term in a gradient is off by O(1), far outside this band.
 *  - fp32 kernels vs naive double loops: 1e-5 relative + 1e-4 absolute (float
 *    accumulation over K <= 300 terms of size <= 1).
 *  - bf16 / f16 outputs vs the double reference rounded once to the type:
 *    one unit in the last place, i.e. relative 2^-7 (bf16, 8e-3 used) and
 *    2^-10 (f16, 2e-3 used), + 1e-4 absolute for near-cancelling sums, since
 *    the float-accumulated value may land across a rounding boundary.
 *  - LayerNorm bf16 vs fp32 on the same (bf16-representable) inputs: 1e-2
 *    (outputs of size ~3 rounded to bf16 differ by up to ~1e-2 absolute).
 *  - AdamW vs numbers computed by hand (Python, double, fp32-rounded
 *    hyperparameters): 1e-6 relative — the kernel is float, a few ulps off.
 *  - Casts and embedding/residual values: exact (bit-for-bit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/ops.h"
#include "tests/common/kern_util.h"

#define FD_EPS 1e-2f
#define FD_RTOL 1e-2
#define FD_ATOL 2e-3

static const ms_ops *K = &ms_ops_cpu;
static ms_kctx g_ctx;
static ku_rng g_rng;

/* ---- per-test allocation list, freed in teardown ---- */
static void *g_allocs[512];
static int g_nallocs;

static void *talloc(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    assert_non_null(p);
    assert_true(g_nallocs < (int)(sizeof g_allocs / sizeof g_allocs[0]));
    g_allocs[g_nallocs++] = p;
    return p;
}
static float *zeros(size_t n) { return talloc(n * sizeof(float)); }
static void *rnd_dt(ms_dtype dt, size_t n, float lo, float hi)
{
    void *p = talloc(n * ms_dtype_size(dt));
    ku_fill(&g_rng, dt, p, n, lo, hi);
    return p;
}
static float *rnd(size_t n, float lo, float hi) { return rnd_dt(MS_F32, n, lo, hi); }
static float *copyf(const float *src, size_t n)
{
    float *p = zeros(n);
    memcpy(p, src, n * sizeof *p);
    return p;
}
static float *as_f32(ms_dtype dt, const void *buf, size_t n)
{
    float *p = zeros(n);
    for (size_t i = 0; i < n; i++) p[i] = ms_ld(buf, dt, i);
    return p;
}

static int setup(void **state)
{
    (void)state;
    memset(&g_ctx, 0, sizeof g_ctx);
    const char *s = getenv("KU_SEED");
    ku_seed(&g_rng, s ? strtoull(s, NULL, 0) : 0x5eed);
    g_nallocs = 0;
    return 0;
}
static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < g_nallocs; i++) free(g_allocs[i]);
    g_nallocs = 0;
    return 0;
}

static void expect_ok(void)
{
    if (g_ctx.status) fprintf(stderr, "kernel error: %s\n", g_ctx.error);
    assert_int_equal(K->sync(&g_ctx), 0);
}

/* a[i] - b[i] into a new array */
static float *diff(const float *a, const float *b, size_t n)
{
    float *d = zeros(n);
    for (size_t i = 0; i < n; i++) d[i] = a[i] - b[i];
    return d;
}

#define CHECK_GRAD(what, x, n, g, fn, u) \
    assert_int_equal(ku_check_grad(what, x, n, g, fn, u, FD_EPS, FD_RTOL, FD_ATOL), 0)

/* ================================================================ embedding */

typedef struct {
    int B, T, C;
    int32_t *tok;
    float *wte, *wpe, *out, *R;
} emb_case;

static double emb_loss(void *u)
{
    emb_case *e = u;
    K->embedding_fwd(&g_ctx, MS_F32, e->out, e->tok, e->wte, e->wpe, e->B, e->T, e->C);
    return ku_weighted_sum(MS_F32, e->out, e->R, (size_t)e->B * e->T * e->C);
}

static void test_embedding(void **state)
{
    (void)state;
    emb_case e = {.B = 2, .T = 3, .C = 4};
    int V = 5;
    size_t rows = (size_t)e.B * e.T, n = rows * e.C;
    e.tok = talloc(rows * sizeof *e.tok);
    for (size_t i = 0; i < rows; i++) e.tok[i] = ku_int(&g_rng, V);
    e.tok[1] = e.tok[4]; /* a repeated token accumulates twice */
    e.wte = rnd((size_t)V * e.C, -1, 1);
    e.wpe = rnd((size_t)e.T * e.C, -1, 1);
    e.out = zeros(n);
    e.R = rnd(n, -1, 1);

    emb_loss(&e);
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < e.C; c++)
            assert_true(e.out[r * e.C + c] ==
                        e.wte[(size_t)e.tok[r] * e.C + c] + e.wpe[(r % e.T) * e.C + c]);

    float *dwte0 = rnd((size_t)V * e.C, -1, 1), *dwpe0 = rnd((size_t)e.T * e.C, -1, 1);
    float *dwte = copyf(dwte0, (size_t)V * e.C), *dwpe = copyf(dwpe0, (size_t)e.T * e.C);
    K->embedding_bwd(&g_ctx, MS_F32, dwte, dwpe, e.R, e.tok, e.B, e.T, e.C);
    expect_ok();
    CHECK_GRAD("dwte", e.wte, (size_t)V * e.C, diff(dwte, dwte0, (size_t)V * e.C), emb_loss, &e);
    CHECK_GRAD("dwpe", e.wpe, (size_t)e.T * e.C, diff(dwpe, dwpe0, (size_t)e.T * e.C), emb_loss, &e);

    /* bf16: the sum of two bf16 values rounded once */
    void *wte16 = rnd_dt(MS_BF16, (size_t)V * e.C, -1, 1), *wpe16 = rnd_dt(MS_BF16, (size_t)e.T * e.C, -1, 1);
    void *out16 = talloc(n * 2);
    K->embedding_fwd(&g_ctx, MS_BF16, out16, e.tok, wte16, wpe16, e.B, e.T, e.C);
    expect_ok();
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < e.C; c++) {
            float want = ms_round(MS_BF16, ms_ld(wte16, MS_BF16, (size_t)e.tok[r] * e.C + c) +
                                               ms_ld(wpe16, MS_BF16, (r % e.T) * e.C + c));
            assert_true(ms_ld(out16, MS_BF16, r * e.C + c) == want);
        }
}

/* ================================================================ layernorm */

typedef struct {
    int N, C;
    float *x, *w, *b, *out, *mean, *rstd, *R;
} ln_case;

static double ln_loss(void *u)
{
    ln_case *l = u;
    K->layernorm_fwd(&g_ctx, MS_F32, l->out, l->mean, l->rstd, l->x, l->w, l->b, l->N, l->C);
    return ku_weighted_sum(MS_F32, l->out, l->R, (size_t)l->N * l->C);
}

static void test_layernorm_forward_values(void **state)
{
    (void)state;
    int N = 4, C = 13;
    size_t n = (size_t)N * C;
    float *x = rnd(n, -3, 2), *w = rnd(C, 0.5f, 1.5f), *b = rnd(C, -0.5f, 0.5f);
    float *out = zeros(n), *mean = zeros(N), *rstd = zeros(N), *want = zeros(n);
    K->layernorm_fwd(&g_ctx, MS_F32, out, mean, rstd, x, w, b, N, C);
    expect_ok();
    for (int r = 0; r < N; r++) {
        double mu = 0, var = 0;
        for (int c = 0; c < C; c++) mu += x[r * C + c];
        mu /= C;
        for (int c = 0; c < C; c++) var += (x[r * C + c] - mu) * (x[r * C + c] - mu);
        var /= C; /* biased */
        double rs = 1.0 / sqrt(var + 1e-5);
        assert_float_equal(mean[r], mu, 1e-6);
        assert_float_equal(rstd[r], rs, 1e-5 * rs);
        for (int c = 0; c < C; c++) want[r * C + c] = (float)((x[r * C + c] - mu) * rs * w[c] + b[c]);
    }
    assert_int_equal(ku_compare("ln out", out, want, n, 1e-5, 1e-5), 0);
}

static void test_layernorm_grad(void **state)
{
    (void)state;
    ln_case l = {.N = 3, .C = 8};
    size_t n = (size_t)l.N * l.C;
    l.x = rnd(n, -2, 2);
    l.w = rnd(l.C, 0.5f, 1.5f);
    l.b = rnd(l.C, -0.5f, 0.5f);
    l.out = zeros(n);
    l.mean = zeros(l.N);
    l.rstd = zeros(l.N);
    l.R = rnd(n, -1, 1);
    ln_loss(&l);

    float *dw0 = rnd(l.C, -1, 1), *db0 = rnd(l.C, -1, 1);
    float *dw = copyf(dw0, l.C), *db = copyf(db0, l.C);
    float *dx = rnd(n, -9, 9); /* garbage: must be overwritten */
    K->layernorm_bwd(&g_ctx, MS_F32, dx, NULL, dw, db, l.R, l.x, l.mean, l.rstd, l.w, l.N, l.C);
    expect_ok();
    CHECK_GRAD("ln dx", l.x, n, dx, ln_loss, &l);
    CHECK_GRAD("ln dw", l.w, l.C, diff(dw, dw0, l.C), ln_loss, &l);
    CHECK_GRAD("ln db", l.b, l.C, diff(db, db0, l.C), ln_loss, &l);

    /* dresid separate: dx = dresid + grad; and aliased: the same numbers */
    float *dres = rnd(n, -1, 1), *dx2 = zeros(n), *dx3 = copyf(dres, n);
    float *dwj = zeros(l.C), *dbj = zeros(l.C);
    K->layernorm_bwd(&g_ctx, MS_F32, dx2, dres, dwj, dbj, l.R, l.x, l.mean, l.rstd, l.w, l.N, l.C);
    K->layernorm_bwd(&g_ctx, MS_F32, dx3, dx3, dwj, dbj, l.R, l.x, l.mean, l.rstd, l.w, l.N, l.C);
    expect_ok();
    assert_int_equal(ku_compare("ln dresid", diff(dx2, dres, n), dx, n, 1e-5, 1e-6), 0);
    assert_memory_equal(dx2, dx3, n * sizeof(float));
    /* two calls accumulated twice the gradient */
    for (int c = 0; c < l.C; c++) {
        assert_float_equal(dwj[c], 2 * (dw[c] - dw0[c]), 1e-5);
        assert_float_equal(dbj[c], 2 * (db[c] - db0[c]), 1e-5);
    }
}

static void test_layernorm_bf16_vs_f32(void **state)
{
    (void)state;
    int N = 6, C = 32;
    size_t n = (size_t)N * C;
    void *x16 = rnd_dt(MS_BF16, n, -2, 3), *dout16 = rnd_dt(MS_BF16, n, -1, 1);
    float *x = as_f32(MS_BF16, x16, n), *dout = as_f32(MS_BF16, dout16, n);
    float *w = rnd(C, 0.5f, 1.5f), *b = rnd(C, -0.5f, 0.5f);
    float *o32 = zeros(n), *m32 = zeros(N), *r32 = zeros(N), *m16 = zeros(N), *r16 = zeros(N);
    void *o16 = talloc(n * 2);
    K->layernorm_fwd(&g_ctx, MS_F32, o32, m32, r32, x, w, b, N, C);
    K->layernorm_fwd(&g_ctx, MS_BF16, o16, m16, r16, x16, w, b, N, C);
    expect_ok();
    assert_memory_equal(m32, m16, N * sizeof(float)); /* same inputs, same statistics */
    assert_memory_equal(r32, r16, N * sizeof(float));
    assert_int_equal(ku_compare("ln bf16 out", as_f32(MS_BF16, o16, n), o32, n, 1e-2, 1e-2), 0);

    float *dx32 = zeros(n), *dw32 = zeros(C), *db32 = zeros(C), *dw16 = zeros(C), *db16 = zeros(C);
    void *dx16 = talloc(n * 2);
    K->layernorm_bwd(&g_ctx, MS_F32, dx32, NULL, dw32, db32, dout, x, m32, r32, w, N, C);
    K->layernorm_bwd(&g_ctx, MS_BF16, dx16, NULL, dw16, db16, dout16, x16, m16, r16, w, N, C);
    expect_ok();
    assert_int_equal(ku_compare("ln bf16 dx", as_f32(MS_BF16, dx16, n), dx32, n, 1e-2, 1e-2), 0);
    assert_int_equal(ku_compare("ln bf16 dw", dw16, dw32, C, 1e-5, 1e-5), 0);
    assert_int_equal(ku_compare("ln bf16 db", db16, db32, C, 1e-5, 1e-5), 0);
}

/* ================================================================ batchnorm */

typedef struct {
    int N, C;
    float *x, *w, *b, *out, *mean, *rstd, *rm, *rv, *R;
} bn_case;

static double bn_loss(void *u)
{
    bn_case *l = u;
    K->batchnorm_fwd(&g_ctx, MS_F32, l->out, l->mean, l->rstd, l->rm, l->rv, 0.1f, l->x, l->w, l->b,
                     l->N, l->C);
    return ku_weighted_sum(MS_F32, l->out, l->R, (size_t)l->N * l->C);
}

static void test_batchnorm_grad(void **state)
{
    (void)state;
    bn_case l = {.N = 6, .C = 3};
    size_t n = (size_t)l.N * l.C;
    l.x = rnd(n, -2, 2);
    l.w = rnd(l.C, 0.5f, 1.5f);
    l.b = rnd(l.C, -0.5f, 0.5f);
    l.out = zeros(n);
    l.mean = zeros(l.C);
    l.rstd = zeros(l.C);
    l.rm = zeros(l.C);
    l.rv = zeros(l.C);
    l.R = rnd(n, -1, 1);
    bn_loss(&l);
    expect_ok();
    /* forward values: each feature normalised over the rows */
    for (int c = 0; c < l.C; c++) {
        double mu = 0, var = 0;
        for (int r = 0; r < l.N; r++) mu += l.x[r * l.C + c];
        mu /= l.N;
        for (int r = 0; r < l.N; r++) var += (l.x[r * l.C + c] - mu) * (l.x[r * l.C + c] - mu);
        var /= l.N;
        for (int r = 0; r < l.N; r++)
            assert_float_equal(l.out[r * l.C + c], (l.x[r * l.C + c] - mu) / sqrt(var + 1e-5) * l.w[c] + l.b[c],
                               1e-5);
    }

    float *dw0 = rnd(l.C, -1, 1), *db0 = rnd(l.C, -1, 1);
    float *dw = copyf(dw0, l.C), *db = copyf(db0, l.C), *dx = rnd(n, -9, 9);
    K->batchnorm_bwd(&g_ctx, MS_F32, dx, NULL, dw, db, l.R, l.x, l.mean, l.rstd, l.w, l.N, l.C);
    expect_ok();
    CHECK_GRAD("bn dx", l.x, n, dx, bn_loss, &l);
    CHECK_GRAD("bn dw", l.w, l.C, diff(dw, dw0, l.C), bn_loss, &l);
    CHECK_GRAD("bn db", l.b, l.C, diff(db, db0, l.C), bn_loss, &l);

    float *dres = rnd(n, -1, 1), *dx2 = zeros(n), *dx3 = copyf(dres, n), *dwj = zeros(l.C), *dbj = zeros(l.C);
    K->batchnorm_bwd(&g_ctx, MS_F32, dx2, dres, dwj, dbj, l.R, l.x, l.mean, l.rstd, l.w, l.N, l.C);
    K->batchnorm_bwd(&g_ctx, MS_F32, dx3, dx3, dwj, dbj, l.R, l.x, l.mean, l.rstd, l.w, l.N, l.C);
    expect_ok();
    assert_int_equal(ku_compare("bn dresid", diff(dx2, dres, n), dx, n, 1e-5, 1e-6), 0);
    assert_memory_equal(dx2, dx3, n * sizeof(float));
}

static void test_batchnorm_running_stats(void **state)
{
    (void)state;
    /* Hand computation, momentum 0.1, running mean 0 and var 1 at start.
     * call 1: f0 = {1,3,5,7}: mean 4, biased var 5, unbiased 20/3
     *         f1 = {2,4,0,-2}: mean 1, biased var 5, unbiased 20/3
     *   run_mean = {0.4, 0.1}; run_var = 0.9 + 0.1*20/3 = 1.5666667 (both)
     * call 2: f0 = {0,0,2,2}: mean 1, biased 1, unbiased 4/3
     *         f1 = {1,1,1,5}: mean 2, biased 3, unbiased 4
     *   run_mean = {0.36+0.1, 0.09+0.2} = {0.46, 0.29}
     *   run_var  = {1.41+0.1333333, 1.41+0.4} = {1.5433333, 1.81} */
    const float x1[8] = {1, 2, 3, 4, 5, 0, 7, -2}, x2[8] = {0, 1, 0, 1, 2, 1, 2, 5};
    float w[2] = {2, 0.5f}, b[2] = {0.25f, -1};
    float rm[2] = {0, 0}, rv[2] = {1, 1}, mean[2], rstd[2], out[8];
    K->batchnorm_fwd(&g_ctx, MS_F32, out, mean, rstd, rm, rv, 0.1f, x1, w, b, 4, 2);
    expect_ok();
    assert_float_equal(rm[0], 0.4, 1e-6);
    assert_float_equal(rm[1], 0.1, 1e-6);
    assert_float_equal(rv[0], 1.5666667, 1e-6);
    assert_float_equal(rv[1], 1.5666667, 1e-6);
    K->batchnorm_fwd(&g_ctx, MS_F32, out, mean, rstd, rm, rv, 0.1f, x2, w, b, 4, 2);
    expect_ok();
    assert_float_equal(rm[0], 0.46, 1e-6);
    assert_float_equal(rm[1], 0.29, 1e-6);
    assert_float_equal(rv[0], 1.5433333, 1e-6);
    assert_float_equal(rv[1], 1.81, 1e-6);
    assert_float_equal(mean[0], 1, 1e-7);
    assert_float_equal(mean[1], 2, 1e-7);
    assert_float_equal(rstd[0], 1 / sqrt(1 + 1e-5), 1e-6);
    assert_float_equal(rstd[1], 1 / sqrt(3 + 1e-5), 1e-6);
    /* row 3, feature 1: (5 - 2) / sqrt(3 + eps) * 0.5 - 1 */
    assert_float_equal(out[7], 3 / sqrt(3 + 1e-5) * 0.5 - 1, 1e-6);

    /* N = 1 has no unbiased variance: an error, not a crash */
    K->batchnorm_fwd(&g_ctx, MS_F32, out, mean, rstd, rm, rv, 0.1f, x2, w, b, 1, 2);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
}

/* ================================================================ matmul */

/* op(A)[i,k] and op(B)[k,j] as float, whatever the storage */
static float opA(ms_dtype dt, int tA, const void *A, int M, int K, int i, int k)
{
    return ms_ld(A, dt, tA ? (size_t)k * M + i : (size_t)i * K + k);
}
static float opB(ms_dtype dt, int tB, const void *B, int K, int N, int k, int j)
{
    return ms_ld(B, dt, tB ? (size_t)j * K + k : (size_t)k * N + j);
}

/* Naive double reference of the NONE epilogue; cin/bias as float (may be NULL). */
static float *naive_mm(ms_dtype ab, int tA, int tB, int M, int N, int Kd, float alpha, const void *A,
                       const void *B, float beta, const float *cin, const float *bias)
{
    float *out = zeros((size_t)M * N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < Kd; k++)
                s += (double)opA(ab, tA, A, M, Kd, i, k) * opB(ab, tB, B, Kd, N, k, j);
            s *= alpha;
            if (beta != 0.0f) s += (double)beta * cin[(size_t)i * N + j];
            if (bias) s += bias[j];
            out[(size_t)i * N + j] = (float)s;
        }
    return out;
}

static float *rounded(ms_dtype dt, const float *v, size_t n)
{
    float *r = zeros(n);
    for (size_t i = 0; i < n; i++) r[i] = ms_round(dt, v[i]);
    return r;
}

static void test_matmul_fp32_vs_naive(void **state)
{
    (void)state;
    /* the big shape crosses every tile edge (64 rows, 256 columns, 256 depth) */
    const int shapes[][3] = {{3, 5, 7}, {1, 1, 1}, {70, 260, 300}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], Kd = shapes[s][2];
        size_t mn = (size_t)M * N;
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++) {
                float *A = rnd((size_t)M * Kd, -1, 1), *B = rnd((size_t)Kd * N, -1, 1);
                float *bias = rnd(N, -1, 1), *cin = rnd(mn, -1, 1);

                /* beta = 0: Cin full of NaN must not be read */
                float *nanc = zeros(mn), *D = zeros(mn);
                for (size_t i = 0; i < mn; i++) nanc[i] = NAN;
                K->matmul(&g_ctx, MS_F32, MS_F32, tA, tB, M, N, Kd, 0.75f, A, B, 0.0f, nanc, D, NULL,
                          MS_EPI_NONE, NULL);
                expect_ok();
                float *want = naive_mm(MS_F32, tA, tB, M, N, Kd, 0.75f, A, B, 0, NULL, NULL);
                assert_int_equal(ku_compare("mm beta0", D, want, mn, 1e-5, 1e-4), 0);

                /* beta, Cin, bias */
                K->matmul(&g_ctx, MS_F32, MS_F32, tA, tB, M, N, Kd, 1.25f, A, B, 0.5f, cin, D, bias,
                          MS_EPI_NONE, NULL);
                expect_ok();
                want = naive_mm(MS_F32, tA, tB, M, N, Kd, 1.25f, A, B, 0.5f, cin, bias);
                assert_int_equal(ku_compare("mm beta", D, want, mn, 1e-5, 1e-4), 0);

                /* Cin aliasing D: accumulate */
                float *acc = copyf(cin, mn);
                K->matmul(&g_ctx, MS_F32, MS_F32, tA, tB, M, N, Kd, 1.0f, A, B, 1.0f, acc, acc, NULL,
                          MS_EPI_NONE, NULL);
                expect_ok();
                want = naive_mm(MS_F32, tA, tB, M, N, Kd, 1.0f, A, B, 1.0f, cin, NULL);
                assert_int_equal(ku_compare("mm alias", acc, want, mn, 1e-5, 1e-4), 0);
            }
    }
}

static void test_matmul_low_precision(void **state)
{
    (void)state;
    int M = 37, N = 45, Kd = 300;
    size_t mn = (size_t)M * N;
    const ms_dtype lows[2] = {MS_BF16, MS_F16};
    const double rtol[2] = {8e-3, 2e-3};
    for (int d = 0; d < 2; d++) {
        ms_dtype dt = lows[d];
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++) {
                void *A = rnd_dt(dt, (size_t)M * Kd, -1, 1), *B = rnd_dt(dt, (size_t)Kd * N, -1, 1);
                void *bias = rnd_dt(dt, N, -1, 1), *cin = rnd_dt(dt, mn, -1, 1);
                float *biasf = as_f32(dt, bias, N), *cinf = as_f32(dt, cin, mn);

                /* D in the low type: the double result rounded once, within one ulp */
                void *D = talloc(mn * 2);
                K->matmul(&g_ctx, dt, dt, tA, tB, M, N, Kd, 0.5f, A, B, 0.75f, cin, D, bias, MS_EPI_NONE, NULL);
                expect_ok();
                float *want = naive_mm(dt, tA, tB, M, N, Kd, 0.5f, A, B, 0.75f, cinf, biasf);
                assert_int_equal(ku_compare(ms_dtype_name(dt), as_f32(dt, D, mn), rounded(dt, want, mn), mn,
                                            rtol[d], 1e-4), 0);

                /* f32 D from low-precision A/B, accumulating (the weight-gradient case) */
                float *Df = rnd(mn, -1, 1), *Df0 = copyf(Df, mn);
                K->matmul(&g_ctx, dt, MS_F32, tA, tB, M, N, Kd, 1.0f, A, B, 1.0f, Df, Df, NULL, MS_EPI_NONE, NULL);
                expect_ok();
                want = naive_mm(dt, tA, tB, M, N, Kd, 1.0f, A, B, 1.0f, Df0, NULL);
                assert_int_equal(ku_compare("f32 D", Df, want, mn, 1e-5, 1e-4), 0);
            }
    }
}

static void test_matmul_gelu_epilogues_vs_naive(void **state)
{
    (void)state;
    int M = 9, N = 11, Kd = 20;
    size_t mn = (size_t)M * N;
    const ms_dtype dts[3] = {MS_F32, MS_BF16, MS_F16};
    for (int d = 0; d < 3; d++) {
        ms_dtype dt = dts[d];
        double rtol = dt == MS_F32 ? 1e-5 : dt == MS_BF16 ? 8e-3 : 2e-3;
        void *A = rnd_dt(dt, (size_t)M * Kd, -1, 1), *B = rnd_dt(dt, (size_t)Kd * N, -1, 1);
        void *bias = rnd_dt(dt, N, -1, 1);
        void *D = talloc(mn * 4), *aux = talloc(mn * 4), *D2 = talloc(mn * 4);
        K->matmul(&g_ctx, dt, dt, 0, 1, M, N, Kd, 0.5f, A, B, 0.0f, NULL, D, bias, MS_EPI_GELU, aux);
        expect_ok();
        float *pre = naive_mm(dt, 0, 1, M, N, Kd, 0.5f, A, B, 0, NULL, as_f32(dt, bias, N));
        float *g = zeros(mn), *dg = zeros(mn);
        for (size_t i = 0; i < mn; i++) g[i] = ms_round(dt, ms_gelu_f(pre[i]));
        assert_int_equal(ku_compare("gelu aux", as_f32(dt, aux, mn), rounded(dt, pre, mn), mn, rtol, 1e-4), 0);
        assert_int_equal(ku_compare("gelu D", as_f32(dt, D, mn), g, mn, rtol, 1e-4), 0);

        /* DGELU: D = (alpha AB) * gelu'(aux), aux as stored */
        K->matmul(&g_ctx, dt, dt, 1, 0, M, N, Kd, 2.0f, A, B, 0.0f, NULL, D2, NULL, MS_EPI_DGELU, aux);
        expect_ok();
        float *ab = naive_mm(dt, 1, 0, M, N, Kd, 2.0f, A, B, 0, NULL, NULL);
        for (size_t i = 0; i < mn; i++) dg[i] = ms_round(dt, ab[i] * ms_gelu_grad_f(ms_ld(aux, dt, i)));
        assert_int_equal(ku_compare("dgelu D", as_f32(dt, D2, mn), dg, mn, rtol, 1e-4), 0);
    }
}

/* D = A B + bias, L = sum(D * R): dA = R B^T, dB = A^T R, dbias = colsum R */
typedef struct {
    int M, N, K;
    float *A, *B, *bias, *D, *R;
} mm_case;

static double mm_loss(void *u)
{
    mm_case *c = u;
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 0, c->M, c->N, c->K, 1.0f, c->A, c->B, 0.0f, NULL, c->D, c->bias,
              MS_EPI_NONE, NULL);
    return ku_weighted_sum(MS_F32, c->D, c->R, (size_t)c->M * c->N);
}

static void test_matmul_grad(void **state)
{
    (void)state;
    mm_case c = {.M = 3, .N = 4, .K = 5};
    c.A = rnd((size_t)c.M * c.K, -1, 1);
    c.B = rnd((size_t)c.K * c.N, -1, 1);
    c.bias = rnd(c.N, -1, 1);
    c.D = zeros((size_t)c.M * c.N);
    c.R = rnd((size_t)c.M * c.N, -1, 1);
    float *dA = zeros((size_t)c.M * c.K), *dB = zeros((size_t)c.K * c.N), *dbias = zeros(c.N);
    /* dA[M,K] = R[M,N] B^T (B stored [K,N] = op^T) */
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 1, c.M, c.K, c.N, 1.0f, c.R, c.B, 0.0f, NULL, dA, NULL, MS_EPI_NONE, NULL);
    /* dB[K,N] = A^T R (A stored [M,K]) */
    K->matmul(&g_ctx, MS_F32, MS_F32, 1, 0, c.K, c.N, c.M, 1.0f, c.A, c.R, 0.0f, NULL, dB, NULL, MS_EPI_NONE, NULL);
    K->bias_grad(&g_ctx, MS_F32, dbias, c.R, c.M, c.N);
    expect_ok();
    CHECK_GRAD("mm dA", c.A, (size_t)c.M * c.K, dA, mm_loss, &c);
    CHECK_GRAD("mm dB", c.B, (size_t)c.K * c.N, dB, mm_loss, &c);
    CHECK_GRAD("mm dbias", c.bias, c.N, dbias, mm_loss, &c);
}

/* MLP: h = gelu(X W1 + b1) (GELU epilogue), y = h W2, L = sum(y * R).
 * Backward: dpre = (R W2^T) * gelu'(pre) (DGELU epilogue), dX = dpre W1^T,
 * dW1 = X^T dpre (accumulated into a prefilled buffer), db1, dW2 = h^T R. */
typedef struct {
    int M, C, H, O;
    float *X, *W1, *b1, *W2, *pre, *h, *y, *R;
} mlp_case;

static double mlp_loss(void *u)
{
    mlp_case *c = u;
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 0, c->M, c->H, c->C, 1.0f, c->X, c->W1, 0.0f, NULL, c->h, c->b1,
              MS_EPI_GELU, c->pre);
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 0, c->M, c->O, c->H, 1.0f, c->h, c->W2, 0.0f, NULL, c->y, NULL,
              MS_EPI_NONE, NULL);
    return ku_weighted_sum(MS_F32, c->y, c->R, (size_t)c->M * c->O);
}

static void test_matmul_gelu_chain_grad(void **state)
{
    (void)state;
    mlp_case c = {.M = 4, .C = 3, .H = 6, .O = 2};
    c.X = rnd((size_t)c.M * c.C, -1.5f, 1.5f);
    c.W1 = rnd((size_t)c.C * c.H, -1, 1);
    c.b1 = rnd(c.H, -0.5f, 0.5f);
    c.W2 = rnd((size_t)c.H * c.O, -1, 1);
    c.pre = zeros((size_t)c.M * c.H);
    c.h = zeros((size_t)c.M * c.H);
    c.y = zeros((size_t)c.M * c.O);
    c.R = rnd((size_t)c.M * c.O, -1, 1);
    mlp_loss(&c);
    float *dpre = zeros((size_t)c.M * c.H), *dX = zeros((size_t)c.M * c.C), *db1 = zeros(c.H);
    float *dW1_0 = rnd((size_t)c.C * c.H, -1, 1), *dW1 = copyf(dW1_0, (size_t)c.C * c.H);
    float *dW2 = zeros((size_t)c.H * c.O);
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 1, c.M, c.H, c.O, 1.0f, c.R, c.W2, 0.0f, NULL, dpre, NULL,
              MS_EPI_DGELU, c.pre);
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 1, c.M, c.C, c.H, 1.0f, dpre, c.W1, 0.0f, NULL, dX, NULL, MS_EPI_NONE, NULL);
    K->matmul(&g_ctx, MS_F32, MS_F32, 1, 0, c.C, c.H, c.M, 1.0f, c.X, dpre, 1.0f, dW1, dW1, NULL, MS_EPI_NONE, NULL);
    K->bias_grad(&g_ctx, MS_F32, db1, dpre, c.M, c.H);
    K->matmul(&g_ctx, MS_F32, MS_F32, 1, 0, c.H, c.O, c.M, 1.0f, c.h, c.R, 0.0f, NULL, dW2, NULL, MS_EPI_NONE, NULL);
    expect_ok();
    CHECK_GRAD("mlp dX", c.X, (size_t)c.M * c.C, dX, mlp_loss, &c);
    CHECK_GRAD("mlp dW1", c.W1, (size_t)c.C * c.H, diff(dW1, dW1_0, (size_t)c.C * c.H), mlp_loss, &c);
    CHECK_GRAD("mlp db1", c.b1, c.H, db1, mlp_loss, &c);
    CHECK_GRAD("mlp dW2", c.W2, (size_t)c.H * c.O, dW2, mlp_loss, &c);
}

static void test_matmul_bad_arguments(void **state)
{
    (void)state;
    float A[4] = {1, 2, 3, 4}, D[4] = {0}, aux[4];
    /* beta != 0 without Cin */
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 0, 2, 2, 2, 1.0f, A, A, 1.0f, NULL, D, NULL, MS_EPI_NONE, NULL);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
    assert_non_null(strstr(g_ctx.error, "Cin"));
    /* first error wins */
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 0, -1, 2, 2, 1.0f, A, A, 0.0f, NULL, D, NULL, MS_EPI_NONE, NULL);
    assert_non_null(strstr(g_ctx.error, "Cin"));
    for (int i = 0; i < 4; i++) assert_true(D[i] == 0.0f); /* nothing written */

    memset(&g_ctx, 0, sizeof g_ctx);
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 0, 2, 2, 2, 1.0f, A, A, 0.5f, D, D, NULL, MS_EPI_GELU, aux);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
    memset(&g_ctx, 0, sizeof g_ctx);
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 0, 2, 2, 2, 1.0f, A, A, 0.0f, NULL, D, A, MS_EPI_DGELU, aux);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
    memset(&g_ctx, 0, sizeof g_ctx);
    K->matmul(&g_ctx, MS_F32, MS_F32, 0, 0, 2, 2, 2, 1.0f, A, A, 0.0f, NULL, D, NULL, MS_EPI_GELU, NULL);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
    memset(&g_ctx, 0, sizeof g_ctx);
    K->matmul(&g_ctx, MS_F16, MS_BF16, 0, 0, 2, 2, 2, 1.0f, A, A, 0.0f, NULL, D, NULL, MS_EPI_NONE, NULL);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);

    /* other ops: NULL buffers and negative sizes are errors, never crashes */
    memset(&g_ctx, 0, sizeof g_ctx);
    K->layernorm_fwd(&g_ctx, MS_F32, NULL, NULL, NULL, NULL, NULL, NULL, 3, 4);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
    memset(&g_ctx, 0, sizeof g_ctx);
    K->embedding_fwd(&g_ctx, MS_F32, D, NULL, A, A, -1, 2, 2);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
    memset(&g_ctx, 0, sizeof g_ctx);
    K->cast(&g_ctx, (ms_dtype)7, D, MS_F32, A, 4);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
    memset(&g_ctx, 0, sizeof g_ctx);
    float m[1] = {0}, v[1] = {0};
    K->adamw(&g_ctx, A, A, m, v, 1, 0.1f, 0.9f, 0.99f, 1e-8f, 0, 0 /* t must be >= 1 */, 1, NULL, NULL, MS_F32, 0);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
}

/* ================================================================ gelu, residual, bias_grad */

typedef struct {
    size_t n;
    float *x, *out, *R;
} gelu_case;

static double gelu_loss(void *u)
{
    gelu_case *g = u;
    K->gelu_fwd(&g_ctx, MS_F32, g->out, g->x, g->n);
    return ku_weighted_sum(MS_F32, g->out, g->R, g->n);
}

static void test_gelu(void **state)
{
    (void)state;
    /* the tanh form, values from a double-precision evaluation */
    assert_float_equal(ms_gelu_f(1.0f), 0.8411919906082768, 1e-6);
    assert_float_equal(ms_gelu_f(-1.0f), -0.15880800939172324, 1e-6);
    assert_float_equal(ms_gelu_f(3.0f), 2.996362607918227, 1e-6);
    assert_float_equal(ms_gelu_f(-0.5f), -0.15428599017485606, 1e-6);
    assert_true(ms_gelu_f(0.0f) == 0.0f);

    gelu_case g = {.n = 40};
    g.x = rnd(g.n, -4, 4);
    g.out = zeros(g.n);
    g.R = rnd(g.n, -1, 1);
    float *dx = zeros(g.n);
    K->gelu_bwd(&g_ctx, MS_F32, dx, g.R, g.x, g.n);
    expect_ok();
    CHECK_GRAD("gelu dx", g.x, g.n, dx, gelu_loss, &g);
    /* dx aliasing dout */
    float *alias = copyf(g.R, g.n);
    K->gelu_bwd(&g_ctx, MS_F32, alias, alias, g.x, g.n);
    expect_ok();
    assert_memory_equal(alias, dx, g.n * sizeof(float));

    /* bf16: each element gelu of the loaded value, rounded once */
    void *x16 = rnd_dt(MS_BF16, g.n, -4, 4), *o16 = talloc(g.n * 2);
    K->gelu_fwd(&g_ctx, MS_BF16, o16, x16, g.n);
    expect_ok();
    for (size_t i = 0; i < g.n; i++)
        assert_true(ms_ld(o16, MS_BF16, i) == ms_round(MS_BF16, ms_gelu_f(ms_ld(x16, MS_BF16, i))));
}

static void test_residual_and_bias_grad(void **state)
{
    (void)state;
    size_t n = 33;
    float *a = rnd(n, -1, 1), *b = rnd(n, -1, 1), *out = zeros(n), *a2 = copyf(a, n);
    K->residual_fwd(&g_ctx, MS_F32, out, a, b, n);
    K->residual_fwd(&g_ctx, MS_F32, a2, a2, b, n); /* out aliasing a */
    expect_ok();
    for (size_t i = 0; i < n; i++) {
        assert_true(out[i] == a[i] + b[i]);
        assert_true(a2[i] == out[i]);
    }
    void *h1 = rnd_dt(MS_F16, n, -1, 1), *h2 = rnd_dt(MS_F16, n, -1, 1), *ho = talloc(n * 2);
    K->residual_fwd(&g_ctx, MS_F16, ho, h1, h2, n);
    expect_ok();
    for (size_t i = 0; i < n; i++)
        assert_true(ms_ld(ho, MS_F16, i) == ms_round(MS_F16, ms_ld(h1, MS_F16, i) + ms_ld(h2, MS_F16, i)));

    int M = 7, N = 5;
    void *dy = rnd_dt(MS_BF16, (size_t)M * N, -1, 1);
    float *db = rnd(N, -1, 1), *db0 = copyf(db, N);
    K->bias_grad(&g_ctx, MS_BF16, db, dy, M, N);
    expect_ok();
    for (int j = 0; j < N; j++) {
        double s = db0[j];
        for (int i = 0; i < M; i++) s += ms_ld(dy, MS_BF16, (size_t)i * N + j);
        assert_float_equal(db[j], s, 1e-6);
    }
}

/* ================================================================ softmax cross-entropy */

typedef struct {
    int N, V, Vreal;
    float dscale;
    int32_t *tgt;
    float *logits, *scratch, *losses;
} xent_case;

static double xent_loss(void *u)
{
    xent_case *x = u;
    memcpy(x->scratch, x->logits, (size_t)x->N * x->V * sizeof(float));
    K->softmax_xent(&g_ctx, MS_F32, x->losses, x->scratch, x->tgt, x->N, x->V, x->Vreal, x->dscale);
    double s = 0;
    for (int i = 0; i < x->N; i++) s += x->losses[i];
    return s * x->dscale;
}

static void test_softmax_xent(void **state)
{
    (void)state;
    xent_case x = {.N = 4, .V = 8, .Vreal = 6, .dscale = 0.5f};
    size_t n = (size_t)x.N * x.V;
    x.tgt = talloc(x.N * sizeof *x.tgt);
    x.tgt[0] = 2;
    x.tgt[1] = -1; /* ignored */
    x.tgt[2] = 5;
    x.tgt[3] = 0;
    x.logits = rnd(n, -3, 3); /* padding columns hold garbage too */
    x.scratch = zeros(n);
    x.losses = zeros(x.N);
    xent_loss(&x);
    expect_ok();

    /* loss values against a double computation */
    for (int i = 0; i < x.N; i++) {
        if (x.tgt[i] < 0) {
            assert_true(x.losses[i] == 0.0f);
            continue;
        }
        double mx = -1e30, s = 0;
        for (int j = 0; j < x.Vreal; j++) mx = fmax(mx, x.logits[i * x.V + j]);
        for (int j = 0; j < x.Vreal; j++) s += exp(x.logits[i * x.V + j] - mx);
        assert_float_equal(x.losses[i], mx + log(s) - x.logits[i * x.V + x.tgt[i]], 1e-5);
    }
    /* the gradient written over the logits: padding and ignored rows exactly 0 */
    float *grad = copyf(x.scratch, n);
    for (int i = 0; i < x.N; i++)
        for (int j = 0; j < x.V; j++)
            if (j >= x.Vreal || x.tgt[i] < 0) assert_true(grad[i * x.V + j] == 0.0f);
    CHECK_GRAD("xent dlogits", x.logits, n, grad, xent_loss, &x);

    /* stable for large logits */
    float big[6] = {1000, 1001, 999, 1000.5f, 0, 0};
    int32_t t1 = 1;
    float loss;
    K->softmax_xent(&g_ctx, MS_F32, &loss, big, &t1, 1, 6, 4, 1.0f);
    expect_ok();
    double s = exp(-1.0) + 1 + exp(-2.0) + exp(-0.5);
    assert_float_equal(loss, log(s), 1e-5);
    assert_true(big[4] == 0.0f && big[5] == 0.0f);

    /* bf16 logits: same loss as fp32 on the same values; gradient rounded once */
    void *l16 = rnd_dt(MS_BF16, n, -3, 3);
    float *l32 = as_f32(MS_BF16, l16, n), *loss16 = zeros(x.N), *loss32 = zeros(x.N);
    K->softmax_xent(&g_ctx, MS_BF16, loss16, l16, x.tgt, x.N, x.V, x.Vreal, x.dscale);
    K->softmax_xent(&g_ctx, MS_F32, loss32, l32, x.tgt, x.N, x.V, x.Vreal, x.dscale);
    expect_ok();
    assert_memory_equal(loss16, loss32, x.N * sizeof(float));
    assert_int_equal(ku_compare("xent bf16 grad", as_f32(MS_BF16, l16, n), rounded(MS_BF16, l32, n), n, 0, 0), 0);

    /* a target beyond Vreal is an error */
    int32_t bad = 6;
    K->softmax_xent(&g_ctx, MS_F32, &loss, big, &bad, 1, 6, 4, 1.0f);
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
}

/* ================================================================ AdamW */

static void test_adamw(void **state)
{
    (void)state;
    /* Expected values: the ops.h formula evaluated by hand in Python (double)
     * with lr 0.01, b1 0.9, b2 0.999, eps 1e-8, wd 0.1, grad_scale 0.5 (as
     * fp32 numbers). Element 2 has zero gradient at step 1 (pure decay). */
    float p[4] = {1.0f, -0.5f, 2.0f, 0.25f}, m[4] = {0}, v[4] = {0};
    const float g1[4] = {0.1f, -0.2f, 0.0f, 4.0f}, g2[4] = {0.3f, 0.1f, -0.4f, -2.0f};
    const double p1[4] = {0.989000002, -0.489500001, 1.998, 0.23975};
    const double m1[4] = {0.00500000127, -0.0100000025, 0, 0.200000048};
    const double v1[4] = {2.49996789e-06, 9.99987155e-06, 0, 0.0039999485};
    const double p2[4] = {0.978833192, -0.486347131, 2.00344337, 0.23684688};
    const double m2[4] = {0.0195000052, -0.00400000077, -0.0200000051, 0.0800000143};
    const double v2[4] = {2.49971801e-05, 1.24898397e-05, 3.99994862e-05, 0.00499593573};
    uint16_t copy[4] = {0xdead, 0xdead, 0xdead, 0xdead};

    K->adamw(&g_ctx, p, g1, m, v, 4, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, 0.5f, NULL, NULL, MS_BF16, 0);
    expect_ok();
    for (int i = 0; i < 4; i++) {
        assert_float_equal(p[i], p1[i], 1e-6 * fabs(p1[i]));
        assert_float_equal(m[i], m1[i], 1e-6 * fabs(m1[i]));
        assert_float_equal(v[i], v1[i], 1e-6 * fabs(v1[i]));
    }
    K->adamw(&g_ctx, p, g2, m, v, 4, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 2, 0.5f, NULL, copy, MS_BF16, 3);
    expect_ok();
    for (int i = 0; i < 4; i++) {
        assert_float_equal(p[i], p2[i], 1e-6 * fabs(p2[i]));
        assert_float_equal(m[i], m2[i], 1e-6 * fabs(m2[i]));
        assert_float_equal(v[i], v2[i], 1e-6 * fabs(v2[i]));
    }
    for (int i = 0; i < 3; i++) assert_int_equal(copy[i], ms_f32_to_bf16(p[i]));
    assert_int_equal(copy[3], 0xdead); /* i >= n_copy untouched */

    /* f16 copy of a larger random buffer */
    size_t n = 100;
    float *pp = rnd(n, -1, 1), *gg = rnd(n, -1, 1), *mm = zeros(n), *vv = zeros(n);
    uint16_t *c16 = talloc(n * 2);
    K->adamw(&g_ctx, pp, gg, mm, vv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1, 1.0f, NULL, c16, MS_F16, n);
    expect_ok();
    for (size_t i = 0; i < n; i++) assert_int_equal(c16[i], ms_f32_to_f16(pp[i]));
}

/* AdamW with its multiplier read from memory (clip_scale's output): the
 * same numbers as with grad_scale, and nothing touched when skipped. */
static void test_adamw_dmul(void **state)
{
    (void)state;
    size_t n = 37;
    float *p = rnd(n, -1, 1), *g = rnd(n, -1, 1), *m = rnd(n, -0.1f, 0.1f), *v = rnd(n, 0, 0.01f);
    float *p2 = copyf(p, n), *m2 = copyf(m, n), *v2 = copyf(v, n);
    uint16_t *c1 = talloc(n * 2), *c2 = talloc(n * 2);
    K->adamw(&g_ctx, p, g, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.37f, NULL, c1, MS_BF16, n);
    float mul[2] = {0.37f, 1.0f};
    K->adamw(&g_ctx, p2, g, m2, v2, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 123.0f /* ignored */, mul, c2,
             MS_BF16, n);
    expect_ok();
    assert_memory_equal(p, p2, n * 4);
    assert_memory_equal(m, m2, n * 4);
    assert_memory_equal(v, v2, n * 4);
    assert_memory_equal(c1, c2, n * 2);
    float skip[2] = {0.37f, 0.0f};
    K->adamw(&g_ctx, p2, g, m2, v2, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 4, 1.0f, skip, c2, MS_BF16, n);
    expect_ok();
    assert_memory_equal(p, p2, n * 4); /* a skipped step changes nothing */
    assert_memory_equal(m, m2, n * 4);
    assert_memory_equal(c1, c2, n * 2);
}

/* clip_scale against the host's formula (trainer/optimizer.c): the norm in
 * double over the records in order, the clip factor, the loss scale, and
 * the finite flag. */
static void test_clip_scale(void **state)
{
    (void)state;
    ms_grad_stat st[5];
    double sumsq = 0;
    for (int i = 0; i < 5; i++) {
        float *r = rnd(1, 0.5f, 40.0f);
        st[i].sumsq = r[0];
        st[i].nonfinite = 0;
        sumsq += st[i].sumsq;
    }
    float out[2];
    const float scales[2] = {1.0f, 1024.0f}, clips[3] = {0.0f, 1.0f, 1e6f};
    for (int si = 0; si < 2; si++)
        for (int ci = 0; ci < 3; ci++) {
            K->clip_scale(&g_ctx, out, st, 5, scales[si], clips[ci]);
            expect_ok();
            double norm = sqrt(sumsq) / scales[si];
            float clip = clips[ci] > 0 && norm > clips[ci] ? (float)(clips[ci] / norm) : 1.0f;
            assert_true(out[0] == clip / scales[si]);
            assert_true(out[1] == 1.0f);
            if (ci == 1 && si == 0) assert_true(out[0] < 1.0f); /* the norm is above 1: clipped */
            if (ci == 2) assert_true(out[0] == 1.0f / scales[si]); /* far below the clip */
        }
    st[3].nonfinite = 2; /* an overflow: the step is skipped */
    K->clip_scale(&g_ctx, out, st, 5, 1.0f, 1.0f);
    expect_ok();
    assert_true(out[1] == 0.0f);
    st[3].nonfinite = 0;
    st[1].sumsq = INFINITY; /* a norm that is not finite, counts of 0 */
    K->clip_scale(&g_ctx, out, st, 5, 1.0f, 1.0f);
    expect_ok();
    assert_true(out[1] == 0.0f);
    K->clip_scale(&g_ctx, out, st, 5, 0.0f, 1.0f); /* no loss scale: refused */
    assert_int_equal(K->sync(&g_ctx), MS_CPU_EARG);
}

/* ================================================================ cast, grad_stats */

static void test_cast_round_trips(void **state)
{
    (void)state;
    /* every 16-bit pattern: bf16 -> f32 -> bf16 and f16 -> f32 -> f16 */
    size_t n = 65536;
    uint16_t *h = talloc(n * 2), *back = talloc(n * 2);
    float *f = zeros(n);
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)i;
    for (int d = 0; d < 2; d++) {
        ms_dtype dt = d ? MS_F16 : MS_BF16;
        K->cast(&g_ctx, MS_F32, f, dt, h, n);
        K->cast(&g_ctx, dt, back, MS_F32, f, n);
        expect_ok();
        for (size_t i = 0; i < n; i++) {
            if (isnan(f[i])) {
                assert_true(isnan(ms_ld(back, dt, i))); /* NaN stays NaN (payload may be quieted) */
                assert_int_equal(back[i] & 0x8000, h[i] & 0x8000);
            } else {
                assert_int_equal(back[i], h[i]);
            }
        }
    }
    /* specific values, f32 -> bf16 / f16 */
    const float src[] = {1.0f + 0x1p-8f /* tie -> even 1.0 in bf16 */, 1.0f + 0x1p-7f + 0x1p-8f /* tie -> up */,
                         NAN, INFINITY, -INFINITY, 1e-40f /* f32 subnormal */, 65504.0f, 65520.0f /* f16 tie -> Inf */,
                         0x1p-24f /* smallest f16 subnormal */, 0x1p-25f /* tie -> 0 */, 3 * 0x1p-25f, -0.0f};
    size_t ns = sizeof src / sizeof src[0];
    uint16_t *b16 = talloc(ns * 2), *h16 = talloc(ns * 2);
    K->cast(&g_ctx, MS_BF16, b16, MS_F32, src, ns);
    K->cast(&g_ctx, MS_F16, h16, MS_F32, src, ns);
    expect_ok();
    assert_int_equal(b16[0], 0x3f80);
    assert_int_equal(b16[1], 0x3f82);
    assert_true(isnan(ms_bf16_to_f32(b16[2])));
    assert_int_equal(b16[3], 0x7f80);
    assert_int_equal(b16[4], 0xff80);
    assert_int_equal(b16[5], 0x0001); /* 1e-40 = 1.09 * 2^-133: the smallest bf16 subnormal */
    assert_true(isnan(ms_f16_to_f32(h16[2])));
    assert_int_equal(h16[3], 0x7c00);
    assert_int_equal(h16[4], 0xfc00);
    assert_int_equal(h16[5], 0x0000); /* far below f16 range */
    assert_int_equal(h16[6], 0x7bff);
    assert_int_equal(h16[7], 0x7c00);
    assert_int_equal(h16[8], 0x0001);
    assert_int_equal(h16[9], 0x0000);
    assert_int_equal(h16[10], 0x0002); /* 1.5 ulp -> ties to even 2 */
    assert_int_equal(h16[11], 0x8000);
    assert_int_equal(b16[11], 0x8000);

    /* bf16 <-> f16 directly, and same-type copies bit exact */
    uint16_t hb[3] = {0x3c00 /* 1.0 */, 0x7e00 /* NaN */, 0x0001 /* 2^-24 */}, bb[3], same[3];
    K->cast(&g_ctx, MS_BF16, bb, MS_F16, hb, 3);
    K->cast(&g_ctx, MS_F16, same, MS_F16, hb, 3);
    expect_ok();
    assert_int_equal(bb[0], 0x3f80);
    assert_true(isnan(ms_bf16_to_f32(bb[1])));
    assert_true(ms_bf16_to_f32(bb[2]) == 0x1p-24f);
    assert_memory_equal(same, hb, sizeof hb);
}

static void test_grad_stats_and_scale(void **state)
{
    (void)state;
    size_t n = 257;
    float *x = rnd(n, -2, 2);
    double want = 0;
    for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
    float sumsq = 1.5f;
    int nonfinite = 2;
    K->grad_stats(&g_ctx, x, n, &sumsq, &nonfinite);
    expect_ok();
    assert_float_equal(sumsq, 1.5 + want, 1e-6 * want);
    assert_int_equal(nonfinite, 2);

    x[3] = NAN;
    x[100] = -INFINITY;
    x[200] = INFINITY;
    sumsq = 0;
    K->grad_stats(&g_ctx, x, n, &sumsq, &nonfinite);
    expect_ok();
    assert_int_equal(nonfinite, 5);
    assert_false(isfinite(sumsq));

    float y[3] = {1, -2, 0.5f};
    K->scale(&g_ctx, y, 3, -4.0f);
    expect_ok();
    assert_true(y[0] == -4.0f && y[1] == 8.0f && y[2] == -2.0f);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_embedding),
        T(test_layernorm_forward_values),
        T(test_layernorm_grad),
        T(test_layernorm_bf16_vs_f32),
        T(test_batchnorm_grad),
        T(test_batchnorm_running_stats),
        T(test_matmul_fp32_vs_naive),
        T(test_matmul_low_precision),
        T(test_matmul_gelu_epilogues_vs_naive),
        T(test_matmul_grad),
        T(test_matmul_gelu_chain_grad),
        T(test_matmul_bad_arguments),
        T(test_gelu),
        T(test_residual_and_bias_grad),
        T(test_softmax_xent),
        T(test_adamw),
        T(test_adamw_dmul),
        T(test_clip_scale),
        T(test_cast_round_trips),
        T(test_grad_stats_and_scale),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
