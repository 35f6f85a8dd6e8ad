/* test_kernels_gpu.c — every CUDA op (ms_ops_cuda) against its CPU twin
 * (ms_ops_cpu) on the same fresh random inputs, for f32, bf16 and f16, on
 * aligned (vectorised) and odd or misaligned (scalar fallback) sizes.
 *
 * Criterion, element-wise: |gpu - cpu| <= tol * (max(|gpu|, |cpu|) + rms(cpu)),
 * tol = 1e-5 for fp32 results and 1e-2 for bf16/f16 results. The rms term is
 * there because float rounding error scales with the magnitude of the terms
 * that were summed or cancelled, not with the (possibly tiny) result: e.g. a
 * matmul element sums K products of size ~rms; an fp32 sum reordered
 * (cuBLASLt vs the CPU loop) differs by ~sqrt(K) eps |terms| << 1e-5 rms. The
 * same holds for the cancellation in 1 + tanh(u) for negative GELU inputs.
 * cuBLASLt runs with CUBLAS_COMPUTE_32F (no TF32), which this 1e-5 checks.
 * Casts, scale and embedding_fwd must match bit for bit (NaN: any NaN).
 *
 * Needs a CUDA device: without one it fails (exit 1) with "no CUDA device". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops.h"
#include "tests/common/kern_util.h"

static ms_kctx g_gpu, g_cpu;
static void *g_ws;

#define CK(call)                                                                   \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) fail_msg("%s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

static const ms_dtype k_dts[3] = {MS_F32, MS_BF16, MS_F16};

static double tol_of(ms_dtype dt) { return dt == MS_F32 ? 1e-5 : 1e-2; }

/* ---- host/device buffer pairs ------------------------------------------- */

/* The same data on both sides: the CPU op runs on h, the CUDA op on d. */
typedef struct {
    void *h, *d;
    size_t n; /* elements */
    ms_dtype dt;
} pair;

static size_t pbytes(const pair *p) { return p->n * ms_dtype_size(p->dt); }

static pair mk_from(ms_dtype dt, const void *host, size_t n)
{
    pair p = {malloc(n ? n * ms_dtype_size(dt) : 1), NULL, n, dt};
    assert_non_null(p.h);
    if (n) memcpy(p.h, host, n * ms_dtype_size(dt));
    CK(cudaMalloc(&p.d, n ? pbytes(&p) : 16));
    if (n) {
        CK(cudaMemcpyAsync(p.d, p.h, pbytes(&p), cudaMemcpyHostToDevice, (cudaStream_t)g_gpu.stream));
        CK(cudaStreamSynchronize((cudaStream_t)g_gpu.stream));
    }
    return p;
}

static pair mk(ku_rng *r, ms_dtype dt, size_t n, float lo, float hi)
{
    void *h = ku_alloc_fill(r, dt, n, lo, hi);
    assert_non_null(h);
    pair p = mk_from(dt, h, n);
    free(h);
    return p;
}

static const pair k_none = {NULL, NULL, 0, MS_F32};

static void pfree(pair *p)
{
    free(p->h);
    if (p->d) cudaFree(p->d);
    *p = k_none;
}

/* Element k of each side (for misaligned views). */
static void *ph(const pair *p, size_t k) { return p->h ? (char *)p->h + k * ms_dtype_size(p->dt) : NULL; }
static void *pd(const pair *p, size_t k) { return p->d ? (char *)p->d + k * ms_dtype_size(p->dt) : NULL; }

static void *fetch(const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    assert_non_null(h);
    CK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)g_gpu.stream));
    CK(cudaStreamSynchronize((cudaStream_t)g_gpu.stream));
    return h;
}

/* On failure the status is cleared so that later tests start clean (a
 * sticky CUDA error would still fail them, which is right). */
static void gpu_done(const char *what)
{
    int st = ms_ops_cuda.sync(&g_gpu);
    if (st != 0) {
        g_gpu.status = 0;
        fail_msg("%s: CUDA op failed, status %d: %s", what, st, g_gpu.error);
    }
}

static void cpu_done(const char *what)
{
    int st = g_cpu.status;
    if (st != 0) {
        g_cpu.status = 0;
        fail_msg("%s: CPU op failed, status %d: %s", what, st, g_cpu.error);
    }
}

/* n elements from element k of p: device side against host side. */
static int cmp_at(const char *what, const pair *p, size_t k, size_t n, double tol)
{
    size_t es = ms_dtype_size(p->dt);
    void *g = fetch((char *)p->d + k * es, n * es);
    float *gf = ku_to_f32(p->dt, g, n), *cf = ku_to_f32(p->dt, (char *)p->h + k * es, n);
    assert_non_null(gf);
    assert_non_null(cf);
    double ss = 0;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(cf[i])) {
            ss += (double)cf[i] * cf[i];
            finite++;
        }
    double rms = finite ? sqrt(ss / finite) : 0;
    int bad = ku_compare(what, gf, cf, n, tol, tol * rms);
    free(g);
    free(gf);
    free(cf);
    return bad;
}

static int cmp(const char *what, const pair *p, double tol) { return cmp_at(what, p, 0, p->n, tol); }

/* Bit-exact comparison (any NaN equals any NaN). */
static int cmp_exact_at(const char *what, const pair *p, size_t k, size_t n)
{
    size_t es = ms_dtype_size(p->dt);
    void *g = fetch((char *)p->d + k * es, n * es);
    const char *c = (const char *)p->h + k * es;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float a = ms_ld(g, p->dt, i), b = ms_ld(c, p->dt, i);
        if (isnan(a) && isnan(b)) continue;
        if (memcmp((char *)g + i * es, c + i * es, es) != 0) {
            if (bad < 5) fprintf(stderr, "%s[%zu]: %.9g vs %.9g\n", what, i, (double)a, (double)b);
            bad++;
        }
    }
    if (bad) fprintf(stderr, "%s: %d of %zu entries differ\n", what, bad, n);
    free(g);
    return bad;
}

/* ---- setup --------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    memset(&g_cpu, 0, sizeof g_cpu);
    if (cudaMalloc(&g_ws, MS_CUDA_WORKSPACE_BYTES) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc of the cuBLASLt workspace failed\n");
        return -1;
    }
    if (ms_cuda_ctx_init(&g_gpu, g_ws, MS_CUDA_WORKSPACE_BYTES) != 0) {
        fprintf(stderr, "ms_cuda_ctx_init: %s\n", g_gpu.error);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ms_cuda_ctx_destroy(&g_gpu);
    cudaFree(g_ws);
    return 0;
}

/* ---- tests ---------------------------------------------------------------- */

static void test_table(void **state)
{
    (void)state;
    assert_string_equal(ms_ops_cuda.name, "cuda");
    assert_true(ms_cuda_device_count() > 0);
    /* argument errors are recorded, never fatal; first error wins */
    ms_ops_cuda.matmul(&g_gpu, MS_F32, MS_F32, 0, 0, 4, 4, 4, 1.0f, g_ws, g_ws, 1.0f, NULL, g_ws, NULL,
                       MS_EPI_NONE, NULL);
    ms_ops_cuda.gelu_fwd(&g_gpu, MS_F32, NULL, NULL, 5);
    assert_int_equal(ms_ops_cuda.sync(&g_gpu), MS_CUDA_EARG);
    assert_non_null(strstr(g_gpu.error, "Cin"));
    g_gpu.status = 0;
    g_gpu.error[0] = 0;
}

static void test_embedding(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 101);
    const int shapes[][3] = {{3, 37, 72}, {2, 19, 75}}; /* B, T, C: vectorised, scalar */
    const int vocab = 50;
    int bad = 0;
    char name[96];
    for (int di = 0; di < 3; di++)
        for (int si = 0; si < 2; si++) {
            ms_dtype dt = k_dts[di];
            int B = shapes[si][0], T = shapes[si][1], C = shapes[si][2];
            size_t rows = (size_t)B * T;
            int32_t *tok = malloc(rows * sizeof *tok);
            assert_non_null(tok);
            for (size_t i = 0; i < rows; i++) tok[i] = ku_int(&r, vocab); /* many repeats */
            pair ptok = mk_from(MS_F32, tok, rows);                       /* int32 as 4-byte elements */
            pair wte = mk(&r, dt, (size_t)vocab * C, -1, 1), wpe = mk(&r, dt, (size_t)T * C, -1, 1);
            pair out = mk(&r, dt, rows * C, -1, 1);
            ms_ops_cpu.embedding_fwd(&g_cpu, dt, out.h, tok, wte.h, wpe.h, B, T, C);
            ms_ops_cuda.embedding_fwd(&g_gpu, dt, out.d, ptok.d, wte.d, wpe.d, B, T, C);
            cpu_done("embedding_fwd");
            gpu_done("embedding_fwd");
            snprintf(name, sizeof name, "embedding_fwd %s C=%d", ms_dtype_name(dt), C);
            bad += cmp_exact_at(name, &out, 0, out.n);

            pair dout = mk(&r, dt, rows * C, -1, 1);
            pair dwte = mk(&r, MS_F32, (size_t)vocab * C, -1, 1), dwpe = mk(&r, MS_F32, (size_t)T * C, -1, 1);
            ms_ops_cpu.embedding_bwd(&g_cpu, dt, dwte.h, dwpe.h, dout.h, tok, B, T, C);
            ms_ops_cuda.embedding_bwd(&g_gpu, dt, dwte.d, dwpe.d, dout.d, ptok.d, B, T, C);
            cpu_done("embedding_bwd");
            gpu_done("embedding_bwd");
            snprintf(name, sizeof name, "embedding_bwd dwte %s C=%d", ms_dtype_name(dt), C);
            bad += cmp(name, &dwte, 1e-5);
            snprintf(name, sizeof name, "embedding_bwd dwpe %s C=%d", ms_dtype_name(dt), C);
            bad += cmp(name, &dwpe, 1e-5);
            free(tok);
            pfree(&ptok);
            pfree(&wte);
            pfree(&wpe);
            pfree(&out);
            pfree(&dout);
            pfree(&dwte);
            pfree(&dwpe);
        }
    assert_int_equal(bad, 0);
}

static void test_layernorm(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 202);
    /* 256: vectorised + cached row; 77: scalar; 3200: too long to cache (16-bit);
     * 7000: backward needs > 48 KiB of shared memory; 768 and 2048: the
     * widths of gpt2-small and seed17 (forward rows held in registers:
     * 256, 768, 2048); 2048 again with 2500 rows: more rows than the
     * column-owned backward's row groups, so each walks several; 768 with
     * 3000 rows: each warp of the per-warp backward walks several */
    const int Cs[] = {256, 77, 3200, 7000, 768, 2048, 2048, 768};
    int bad = 0;
    char name[96];
    for (int di = 0; di < 3; di++)
        for (int ci = 0; ci < 8; ci++) {
            ms_dtype dt = k_dts[di];
            int C = Cs[ci], N = ci == 6 ? 2500 : ci == 7 ? 3000 : C > 1000 ? 9 : 37;
            size_t nc = (size_t)N * C;
            float shift = ku_range(&r, -2, 2);
            pair x = mk(&r, dt, nc, shift - 1.5f, shift + 1.5f);
            pair w = mk(&r, MS_F32, C, 0.5f, 1.5f), b = mk(&r, MS_F32, C, -0.5f, 0.5f);
            pair out = mk(&r, dt, nc, -1, 1), mean = mk(&r, MS_F32, N, -1, 1), rstd = mk(&r, MS_F32, N, -1, 1);
            ms_ops_cpu.layernorm_fwd(&g_cpu, dt, out.h, mean.h, rstd.h, x.h, w.h, b.h, N, C);
            ms_ops_cuda.layernorm_fwd(&g_gpu, dt, out.d, mean.d, rstd.d, x.d, w.d, b.d, N, C);
            cpu_done("layernorm_fwd");
            gpu_done("layernorm_fwd");
            snprintf(name, sizeof name, "layernorm_fwd out %s C=%d", ms_dtype_name(dt), C);
            bad += cmp(name, &out, tol_of(dt));
            snprintf(name, sizeof name, "layernorm_fwd mean %s C=%d", ms_dtype_name(dt), C);
            bad += cmp(name, &mean, 1e-5);
            snprintf(name, sizeof name, "layernorm_fwd rstd %s C=%d", ms_dtype_name(dt), C);
            bad += cmp(name, &rstd, 1e-5);

            /* backward from the CPU's statistics; dresid: none, separate, aliasing dx */
            pair m_in = mk_from(MS_F32, mean.h, N), r_in = mk_from(MS_F32, rstd.h, N);
            for (int mode = 0; mode < 3; mode++) {
                pair dout = mk(&r, dt, nc, -1, 1), dx = mk(&r, dt, nc, -1, 1);
                pair dres = mode == 1 ? mk(&r, dt, nc, -1, 1) : k_none;
                pair dw = mk(&r, MS_F32, C, -1, 1), db = mk(&r, MS_F32, C, -1, 1);
                const void *rh = mode == 1 ? dres.h : mode == 2 ? dx.h : NULL;
                const void *rd = mode == 1 ? dres.d : mode == 2 ? dx.d : NULL;
                ms_ops_cpu.layernorm_bwd(&g_cpu, dt, dx.h, rh, dw.h, db.h, dout.h, x.h, m_in.h, r_in.h, w.h, N, C);
                ms_ops_cuda.layernorm_bwd(&g_gpu, dt, dx.d, rd, dw.d, db.d, dout.d, x.d, m_in.d, r_in.d, w.d, N, C);
                cpu_done("layernorm_bwd");
                gpu_done("layernorm_bwd");
                snprintf(name, sizeof name, "layernorm_bwd dx %s C=%d dresid mode %d", ms_dtype_name(dt), C, mode);
                bad += cmp(name, &dx, tol_of(dt));
                snprintf(name, sizeof name, "layernorm_bwd dw %s C=%d", ms_dtype_name(dt), C);
                bad += cmp(name, &dw, 1e-5);
                snprintf(name, sizeof name, "layernorm_bwd db %s C=%d", ms_dtype_name(dt), C);
                bad += cmp(name, &db, 1e-5);
                pfree(&dout);
                pfree(&dx);
                pfree(&dres);
                pfree(&dw);
                pfree(&db);
            }
            pfree(&m_in);
            pfree(&r_in);
            pfree(&x);
            pfree(&w);
            pfree(&b);
            pfree(&out);
            pfree(&mean);
            pfree(&rstd);
        }
    assert_int_equal(bad, 0);
}

static void test_batchnorm(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 303);
    const int shapes[][2] = {{300, 40}, {301, 7}, {64, 100}}; /* N, C */
    int bad = 0;
    char name[96];
    for (int di = 0; di < 3; di++)
        for (int si = 0; si < 3; si++) {
            ms_dtype dt = k_dts[di];
            int N = shapes[si][0], C = shapes[si][1];
            size_t nc = (size_t)N * C;
            pair x = mk(&r, dt, nc, 2.0f, 4.0f); /* mean far from 0: checks the variance numerics */
            pair w = mk(&r, MS_F32, C, 0.5f, 1.5f), b = mk(&r, MS_F32, C, -0.5f, 0.5f);
            pair out = mk(&r, dt, nc, -1, 1), mean = mk(&r, MS_F32, C, -1, 1), rstd = mk(&r, MS_F32, C, -1, 1);
            pair rm = mk(&r, MS_F32, C, -1, 1), rv = mk(&r, MS_F32, C, 0.5f, 1.5f);
            ms_ops_cpu.batchnorm_fwd(&g_cpu, dt, out.h, mean.h, rstd.h, rm.h, rv.h, 0.1f, x.h, w.h, b.h, N, C);
            ms_ops_cuda.batchnorm_fwd(&g_gpu, dt, out.d, mean.d, rstd.d, rm.d, rv.d, 0.1f, x.d, w.d, b.d, N, C);
            cpu_done("batchnorm_fwd");
            gpu_done("batchnorm_fwd");
            snprintf(name, sizeof name, "batchnorm_fwd out %s C=%d", ms_dtype_name(dt), C);
            bad += cmp(name, &out, tol_of(dt));
            bad += cmp("batchnorm_fwd mean", &mean, 1e-5);
            bad += cmp("batchnorm_fwd rstd", &rstd, 1e-5);
            bad += cmp("batchnorm_fwd run_mean", &rm, 1e-5);
            bad += cmp("batchnorm_fwd run_var", &rv, 1e-5);

            pair m_in = mk_from(MS_F32, mean.h, C), r_in = mk_from(MS_F32, rstd.h, C);
            for (int alias = 0; alias < 2; alias++) {
                pair dout = mk(&r, dt, nc, -1, 1), dx = mk(&r, dt, nc, -1, 1);
                pair dw = mk(&r, MS_F32, C, -1, 1), db = mk(&r, MS_F32, C, -1, 1);
                ms_ops_cpu.batchnorm_bwd(&g_cpu, dt, dx.h, alias ? dx.h : NULL, dw.h, db.h, dout.h, x.h, m_in.h,
                                         r_in.h, w.h, N, C);
                ms_ops_cuda.batchnorm_bwd(&g_gpu, dt, dx.d, alias ? dx.d : NULL, dw.d, db.d, dout.d, x.d, m_in.d,
                                          r_in.d, w.d, N, C);
                cpu_done("batchnorm_bwd");
                gpu_done("batchnorm_bwd");
                snprintf(name, sizeof name, "batchnorm_bwd dx %s C=%d alias %d", ms_dtype_name(dt), C, alias);
                bad += cmp(name, &dx, tol_of(dt));
                bad += cmp("batchnorm_bwd dw", &dw, 1e-5);
                bad += cmp("batchnorm_bwd db", &db, 1e-5);
                pfree(&dout);
                pfree(&dx);
                pfree(&dw);
                pfree(&db);
            }
            pfree(&m_in);
            pfree(&r_in);
            pfree(&x);
            pfree(&w);
            pfree(&b);
            pfree(&out);
            pfree(&mean);
            pfree(&rstd);
            pfree(&rm);
            pfree(&rv);
        }
    assert_int_equal(bad, 0);
}

/* One matmul case. cin_mode: 0 none, 1 a separate Cin, 2 Cin == D.
 * a_off: A starts a_off elements into its buffer (misaligned A). */
static int mm_case(ku_rng *r, ms_dtype ab, ms_dtype cd, int ta, int tb, int M, int N, int K, float alpha,
                   float beta, int cin_mode, int use_bias, ms_epilogue epi, int a_off)
{
    pair A = mk(r, ab, (size_t)M * K + a_off, -0.5f, 0.5f), B = mk(r, ab, (size_t)K * N, -0.5f, 0.5f);
    pair D = mk(r, cd, (size_t)M * N, -1, 1);
    pair Cin = cin_mode == 1 ? mk(r, cd, (size_t)M * N, -1, 1) : k_none;
    pair bias = use_bias ? mk(r, cd, N, -0.5f, 0.5f) : k_none;
    pair aux = epi == MS_EPI_NONE ? k_none
               : epi == MS_EPI_DGELU ? mk(r, cd, (size_t)M * N, -3, 3) /* input: pre-activations */
                                     : mk(r, cd, (size_t)M * N, -1, 1);
    const void *ch = cin_mode == 1 ? Cin.h : cin_mode == 2 ? D.h : NULL;
    const void *cdv = cin_mode == 1 ? Cin.d : cin_mode == 2 ? D.d : NULL;
    ms_ops_cpu.matmul(&g_cpu, ab, cd, ta, tb, M, N, K, alpha, ph(&A, a_off), B.h, beta, ch, D.h, bias.h, epi, aux.h);
    ms_ops_cuda.matmul(&g_gpu, ab, cd, ta, tb, M, N, K, alpha, pd(&A, a_off), B.d, beta, cdv, D.d, bias.d, epi,
                       aux.d);
    char name[160];
    snprintf(name, sizeof name, "matmul %s->%s tA%d tB%d M%d N%d K%d alpha %g beta %g cin %d bias %d epi %d off %d",
             ms_dtype_name(ab), ms_dtype_name(cd), ta, tb, M, N, K, alpha, beta, cin_mode, use_bias, (int)epi,
             a_off);
    cpu_done(name);
    gpu_done(name);
    int bad = cmp(name, &D, tol_of(cd));
    if (epi == MS_EPI_GELU) bad += cmp_at("  ... aux", &aux, 0, aux.n, tol_of(cd));
    pfree(&A);
    pfree(&B);
    pfree(&D);
    pfree(&Cin);
    pfree(&bias);
    pfree(&aux);
    return bad;
}

static void test_matmul(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 404);
    const ms_dtype pairs[][2] = {{MS_F32, MS_F32}, {MS_BF16, MS_BF16}, {MS_F16, MS_F16},
                                 {MS_BF16, MS_F32}, {MS_F16, MS_F32}};
    const int shapes[][3] = {{64, 96, 80}, {37, 29, 53}}; /* aligned; odd (no fused GELU: N % 8) */
    int bad = 0;
    for (int pi = 0; pi < 5; pi++) {
        ms_dtype ab = pairs[pi][0], cd = pairs[pi][1];
        for (int si = 0; si < 2; si++)
            for (int t = 0; t < 4; t++) {
                int ta = t & 1, tb = t >> 1, M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
                bad += mm_case(&r, ab, cd, ta, tb, M, N, K, 1.0f, 0.0f, 0, 0, MS_EPI_NONE, 0);
                bad += mm_case(&r, ab, cd, ta, tb, M, N, K, 0.5f, 0.7f, 1, 1, MS_EPI_NONE, 0);
                bad += mm_case(&r, ab, cd, ta, tb, M, N, K, 1.0f, 1.0f, 2, 0, MS_EPI_NONE, 0);
                bad += mm_case(&r, ab, cd, ta, tb, M, N, K, 1.0f, 0.0f, 0, 1, MS_EPI_GELU, 0);
                bad += mm_case(&r, ab, cd, ta, tb, M, N, K, 0.8f, 0.0f, 0, 0, MS_EPI_GELU, 0);
                bad += mm_case(&r, ab, cd, ta, tb, M, N, K, 1.0f, 0.0f, 0, 0, MS_EPI_DGELU, 0);
            }
        /* K == 0: D = beta*Cin + bias */
        bad += mm_case(&r, ab, cd, 0, 0, 5, 7, 0, 1.0f, 0.5f, 1, 1, MS_EPI_NONE, 0);
        /* A misaligned by one element */
        bad += mm_case(&r, ab, cd, 0, 1, 64, 96, 80, 1.0f, 0.0f, 0, 1, MS_EPI_NONE, 1);
    }
    /* GPT-2-like shapes, once per 16-bit type: MLP up-projection with GELU, and
     * its backward through DGELU; an fp32-accumulated weight gradient */
    bad += mm_case(&r, MS_BF16, MS_BF16, 0, 1, 256, 1024, 256, 1.0f, 0.0f, 0, 1, MS_EPI_GELU, 0);
    bad += mm_case(&r, MS_BF16, MS_BF16, 0, 0, 256, 1024, 256, 1.0f, 0.0f, 0, 0, MS_EPI_DGELU, 0);
    bad += mm_case(&r, MS_F16, MS_F16, 0, 1, 256, 1024, 256, 1.0f, 0.0f, 0, 1, MS_EPI_GELU, 0);
    bad += mm_case(&r, MS_BF16, MS_F32, 1, 0, 256, 384, 512, 1.0f, 1.0f, 2, 0, MS_EPI_NONE, 0);
    bad += mm_case(&r, MS_F32, MS_F32, 0, 1, 128, 256, 768, 1.0f, 0.0f, 0, 1, MS_EPI_GELU, 0);
    /* the same shapes again: served from the plan cache */
    bad += mm_case(&r, MS_BF16, MS_BF16, 0, 1, 256, 1024, 256, 1.0f, 0.0f, 0, 1, MS_EPI_GELU, 0);
    bad += mm_case(&r, MS_F32, MS_F32, 0, 0, 64, 96, 80, 1.0f, 0.0f, 0, 0, MS_EPI_NONE, 0);
    assert_int_equal(bad, 0);
}

/* The timed pick (matmul.cu, ctx->matmul_pick): every call of a shape, the
 * timed ones (each of cuBLASLt's top candidates in turn), the ones while
 * they finish and the kept choice after, against the CPU: a fused GELU
 * product, and an fp32 weight gradient accumulated in place (each call adds
 * to D, so a call run twice or skipped would show). Then mode 2 (keep, time
 * no more) for a shape first seen there. */
static void test_matmul_pick(void **state)
{
    (void)state;
    ms_kctx pick;
    assert_int_equal(ms_cuda_ctx_init(&pick, g_ws, MS_CUDA_WORKSPACE_BYTES), 0);
    pick.matmul_pick = 1;
    ku_rng r;
    ku_seed(&r, 4040);
    int bad = 0;
    char name[96];
    for (int v = 0; v < 3; v++) {
        int gelu = v == 0, M = v == 2 ? 192 : 256, N = v == 2 ? 320 : 1024, K = v == 2 ? 160 : 256;
        ms_dtype cd = gelu ? MS_BF16 : MS_F32;
        if (v == 2) pick.matmul_pick = 2;
        pair A = mk(&r, MS_BF16, (size_t)M * K, -0.5f, 0.5f), B = mk(&r, MS_BF16, (size_t)K * N, -0.5f, 0.5f);
        pair D = mk(&r, cd, (size_t)M * N, -1, 1), bias = gelu ? mk(&r, cd, N, -0.5f, 0.5f) : k_none;
        pair aux = gelu ? mk(&r, cd, (size_t)M * N, -1, 1) : k_none;
        for (int call = 0; call < 30; call++) {
            int ta = !gelu, tb = gelu;
            float beta = gelu ? 0.0f : 1.0f;
            ms_epilogue epi = gelu ? MS_EPI_GELU : MS_EPI_NONE;
            ms_ops_cpu.matmul(&g_cpu, MS_BF16, cd, ta, tb, M, N, K, 1.0f, A.h, B.h, beta, gelu ? NULL : D.h, D.h,
                              bias.h, epi, aux.h);
            ms_ops_cuda.matmul(&pick, MS_BF16, cd, ta, tb, M, N, K, 1.0f, A.d, B.d, beta, gelu ? NULL : D.d, D.d,
                               bias.d, epi, aux.d);
            snprintf(name, sizeof name, "picked matmul %d, call %d", v, call);
            cpu_done(name);
            int st = ms_ops_cuda.sync(&pick);
            if (st) fail_msg("%s: status %d: %s", name, st, pick.error);
            bad += cmp(name, &D, tol_of(cd));
            if (gelu) bad += cmp_at("  ... aux", &aux, 0, aux.n, tol_of(cd));
        }
        pfree(&A);
        pfree(&B);
        pfree(&D);
        pfree(&bias);
        pfree(&aux);
    }
    ms_cuda_ctx_destroy(&pick);
    assert_int_equal(bad, 0);
}

static void test_bias_grad(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 505);
    const int shapes[][2] = {{1000, 96}, {50, 77}, {300, 2048}, {7, 5}, {1024, 50304}}; /* M, N */
    int bad = 0;
    char name[96];
    for (int di = 0; di < 3; di++)
        for (int si = 0; si < 5; si++) {
            ms_dtype dt = k_dts[di];
            int M = shapes[si][0], N = shapes[si][1];
            if (si == 4 && dt != MS_BF16) continue; /* one large case is enough */
            pair dy = mk(&r, dt, (size_t)M * N, -1, 1), db = mk(&r, MS_F32, N, -1, 1);
            ms_ops_cpu.bias_grad(&g_cpu, dt, db.h, dy.h, M, N);
            ms_ops_cuda.bias_grad(&g_gpu, dt, db.d, dy.d, M, N);
            cpu_done("bias_grad");
            gpu_done("bias_grad");
            snprintf(name, sizeof name, "bias_grad %s M=%d N=%d", ms_dtype_name(dt), M, N);
            bad += cmp(name, &db, 1e-5);
            pfree(&dy);
            pfree(&db);
        }
    assert_int_equal(bad, 0);
}

static void test_gelu(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 606);
    int bad = 0;
    char name[96];
    for (int di = 0; di < 3; di++)
        for (int off = 0; off < 2; off++) { /* aligned (vectors + tail), misaligned by one element */
            ms_dtype dt = k_dts[di];
            size_t n = off ? 1001 : 4099;
            pair x = mk(&r, dt, n + off, -6, 6), out = mk(&r, dt, n + off, -1, 1);
            ms_ops_cpu.gelu_fwd(&g_cpu, dt, ph(&out, off), ph(&x, off), n);
            ms_ops_cuda.gelu_fwd(&g_gpu, dt, pd(&out, off), pd(&x, off), n);
            cpu_done("gelu_fwd");
            gpu_done("gelu_fwd");
            snprintf(name, sizeof name, "gelu_fwd %s off %d", ms_dtype_name(dt), off);
            bad += cmp_at(name, &out, off, n, tol_of(dt));
            for (int alias = 0; alias < 2; alias++) {
                pair dout = mk(&r, dt, n + off, -1, 1), dx = mk(&r, dt, n + off, -1, 1);
                pair *din = alias ? &dx : &dout;
                ms_ops_cpu.gelu_bwd(&g_cpu, dt, ph(&dx, off), ph(din, off), ph(&x, off), n);
                ms_ops_cuda.gelu_bwd(&g_gpu, dt, pd(&dx, off), pd(din, off), pd(&x, off), n);
                cpu_done("gelu_bwd");
                gpu_done("gelu_bwd");
                snprintf(name, sizeof name, "gelu_bwd %s off %d alias %d", ms_dtype_name(dt), off, alias);
                bad += cmp_at(name, &dx, off, n, tol_of(dt));
                pfree(&dout);
                pfree(&dx);
            }
            pfree(&x);
            pfree(&out);
        }
    assert_int_equal(bad, 0);
}

static void test_residual(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 707);
    int bad = 0;
    char name[96];
    for (int di = 0; di < 3; di++)
        for (int off = 0; off < 2; off++)
            for (int alias = 0; alias < 2; alias++) {
                ms_dtype dt = k_dts[di];
                size_t n = off ? 1001 : 4099;
                pair a = mk(&r, dt, n + off, -2, 2), b = mk(&r, dt, n + off, -2, 2), out = mk(&r, dt, n + off, -1, 1);
                pair *o = alias ? &a : &out;
                ms_ops_cpu.residual_fwd(&g_cpu, dt, ph(o, off), ph(&a, off), ph(&b, off), n);
                ms_ops_cuda.residual_fwd(&g_gpu, dt, pd(o, off), pd(&a, off), pd(&b, off), n);
                cpu_done("residual_fwd");
                gpu_done("residual_fwd");
                snprintf(name, sizeof name, "residual_fwd %s off %d alias %d", ms_dtype_name(dt), off, alias);
                bad += cmp_exact_at(name, o, off, n); /* one rounding of an exact float sum */
                pfree(&a);
                pfree(&b);
                pfree(&out);
            }
    assert_int_equal(bad, 0);
}

static void test_softmax_xent(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 808);
    /* N, V, Vreal: vectorised at the LM head's width and at a narrower
     * one (16-bit: rows in shared memory, a block each), scalar, and more
     * rows than an H200 has SMs (16-bit: each block walks several rows
     * through its two buffers), and no padding column at all */
    const int shapes[][3] = {{6, 50304, 50257}, {4, 20000, 19993}, {5, 1001, 999}, {700, 12288, 12283},
                             {3, 16384, 16384}};
    int bad = 0;
    char name[96];
    for (int di = 0; di < 3; di++)
        for (int si = 0; si < 5; si++) {
            ms_dtype dt = k_dts[di];
            int N = shapes[si][0], V = shapes[si][1], Vreal = shapes[si][2];
            int32_t tg[700];
            for (int i = 0; i < N; i++) tg[i] = ku_int(&r, Vreal);
            tg[1] = -1;         /* ignored row */
            tg[2] = Vreal - 1;  /* last real column */
            if (N > 400) tg[400] = -7; /* an ignored row a block meets after others */
            pair ptg = mk_from(MS_F32, tg, N);
            pair logits = mk(&r, dt, (size_t)N * V, -8, 8), loss = mk(&r, MS_F32, N, -1, 1);
            ms_ops_cpu.softmax_xent(&g_cpu, dt, loss.h, logits.h, tg, N, V, Vreal, 0.2f);
            ms_ops_cuda.softmax_xent(&g_gpu, dt, loss.d, logits.d, ptg.d, N, V, Vreal, 0.2f);
            cpu_done("softmax_xent");
            gpu_done("softmax_xent");
            snprintf(name, sizeof name, "softmax_xent loss %s V=%d", ms_dtype_name(dt), V);
            bad += cmp(name, &loss, 1e-5);
            snprintf(name, sizeof name, "softmax_xent dlogits %s V=%d", ms_dtype_name(dt), V);
            bad += cmp(name, &logits, tol_of(dt));
            pfree(&ptg);
            pfree(&logits);
            pfree(&loss);
        }
    assert_int_equal(bad, 0);
}

static void test_adamw(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 909);
    /* copy dtype (-1: no copy), n_copy short of n, misalignment */
    const int cases[][3] = {{-1, 0, 0}, {MS_BF16, 0, 0}, {MS_F16, 5, 0}, {MS_F32, 0, 0}, {MS_BF16, 3, 1}};
    const size_t n = 10001;
    int bad = 0;
    char name[96];
    for (int ci = 0; ci < 5; ci++) {
        int off = cases[ci][2];
        ms_dtype cdt = cases[ci][0] < 0 ? MS_BF16 : (ms_dtype)cases[ci][0];
        size_t n_copy = n - (size_t)cases[ci][1];
        pair p = mk(&r, MS_F32, n + off, -1, 1), g = mk(&r, MS_F32, n + off, -1, 1);
        pair m = mk(&r, MS_F32, n + off, -0.1f, 0.1f), v = mk(&r, MS_F32, n + off, 0.0f, 0.01f);
        pair copy = cases[ci][0] < 0 ? k_none : mk(&r, cdt, n + off, -1, 1);
        /* steps 3 and 4 (the second reads the first's state); 4 and 5 take
         * the multiplier from memory, as clip_scale leaves it: 5 is skipped */
        const float mul4[2] = {0.5f, 1.0f}, mul5[2] = {0.25f, 0.0f};
        pair dm4 = mk_from(MS_F32, mul4, 2), dm5 = mk_from(MS_F32, mul5, 2);
        for (int step = 3; step <= 5; step++) {
            const pair *dm = step == 4 ? &dm4 : step == 5 ? &dm5 : &k_none;
            ms_ops_cpu.adamw(&g_cpu, ph(&p, off), ph(&g, off), ph(&m, off), ph(&v, off), n, 1e-2f, 0.9f, 0.95f,
                             1e-8f, 0.1f, step, step == 3 ? 0.5f : 9.0f, dm->h, ph(&copy, off), cdt, n_copy);
            ms_ops_cuda.adamw(&g_gpu, pd(&p, off), pd(&g, off), pd(&m, off), pd(&v, off), n, 1e-2f, 0.9f, 0.95f,
                              1e-8f, 0.1f, step, step == 3 ? 0.5f : 9.0f, dm->d, pd(&copy, off), cdt, n_copy);
        }
        pfree(&dm4);
        pfree(&dm5);
        cpu_done("adamw");
        gpu_done("adamw");
        snprintf(name, sizeof name, "adamw case %d p", ci);
        bad += cmp_at(name, &p, off, n, 1e-5);
        bad += cmp_at("adamw m", &m, off, n, 1e-5);
        bad += cmp_at("adamw v", &v, off, n, 1e-5);
        if (copy.h) {
            snprintf(name, sizeof name, "adamw case %d copy %s", ci, ms_dtype_name(cdt));
            bad += cmp_at(name, &copy, off, n, tol_of(cdt)); /* untouched tail compared too */
        }
        pfree(&p);
        pfree(&g);
        pfree(&m);
        pfree(&v);
        pfree(&copy);
    }
    assert_int_equal(bad, 0);
}

/* Values that exercise rounding: random magnitudes 1e-9 .. 1e5 (f16 overflow,
 * f16 subnormals), signed zeros, infinities, NaN. */
static void fill_special(ku_rng *r, ms_dtype dt, void *buf, size_t n)
{
    static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 6e-8f, 1e-45f};
    for (size_t i = 0; i < n; i++) {
        float v = (float)(ku_range(r, -1, 1) * pow(10.0, ku_range(r, -9, 5)));
        if (i % 97 < sizeof sp / sizeof sp[0]) v = sp[i % 97];
        ms_st(buf, dt, i, v);
    }
}

static void test_cast(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 1010);
    int bad = 0;
    char name[96];
    for (int si = 0; si < 3; si++)
        for (int di = 0; di < 3; di++)
            for (int off = 0; off < 2; off++) {
                ms_dtype st = k_dts[si], dt = k_dts[di];
                size_t n = off ? 1001 : 4099;
                void *h = malloc((n + off) * ms_dtype_size(st));
                assert_non_null(h);
                fill_special(&r, st, h, n + off);
                pair src = mk_from(st, h, n + off), dst = mk(&r, dt, n + off, -1, 1);
                free(h);
                ms_ops_cpu.cast(&g_cpu, dt, ph(&dst, off), st, ph(&src, off), n);
                ms_ops_cuda.cast(&g_gpu, dt, pd(&dst, off), st, pd(&src, off), n);
                cpu_done("cast");
                gpu_done("cast");
                snprintf(name, sizeof name, "cast %s->%s off %d", ms_dtype_name(st), ms_dtype_name(dt), off);
                bad += cmp_exact_at(name, &dst, 0, n + off); /* the untouched element too */
                pfree(&src);
                pfree(&dst);
            }
    assert_int_equal(bad, 0);
}

static void test_grad_stats_scale(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 1111);
    int bad = 0;
    for (int variant = 0; variant < 3; variant++) { /* plain; with NaN/Inf; misaligned */
        size_t n = 100003, off = variant == 2 ? 1 : 0;
        float *xh = ku_alloc_fill(&r, MS_F32, n + off, -1, 1);
        assert_non_null(xh);
        if (variant == 1) {
            xh[10] = NAN;
            xh[5000] = INFINITY;
            xh[n - 1] = -INFINITY;
        }
        pair x = mk_from(MS_F32, xh, n + off);
        free(xh);
        float s0 = 1.5f;
        int c0 = 2;
        pair ss = mk_from(MS_F32, &s0, 1), nf = mk_from(MS_F32, &c0, 1); /* int as a 4-byte element */
        ms_ops_cpu.grad_stats(&g_cpu, ph(&x, off), n, ss.h, nf.h);
        ms_ops_cuda.grad_stats(&g_gpu, pd(&x, off), n, ss.d, nf.d);
        cpu_done("grad_stats");
        gpu_done("grad_stats");
        bad += cmp("grad_stats sumsq", &ss, 1e-5);
        int *gc = fetch(nf.d, sizeof(int));
        if (*gc != *(int *)nf.h) {
            fprintf(stderr, "grad_stats nonfinite: %d vs %d\n", *gc, *(int *)nf.h);
            bad++;
        }
        free(gc);

        ms_ops_cpu.scale(&g_cpu, ph(&x, off), n, 0.37f);
        ms_ops_cuda.scale(&g_gpu, pd(&x, off), n, 0.37f);
        cpu_done("scale");
        gpu_done("scale");
        bad += cmp_exact_at("scale", &x, 0, n + off);
        pfree(&x);
        pfree(&ss);
        pfree(&nf);
    }
    assert_int_equal(bad, 0);
}

/* clip_scale on the device against its CPU twin: the same bits (the host's
 * double arithmetic), clipped or not, with a loss scale, and skipped steps. */
static void test_clip_scale(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 31);
    int bad = 0;
    const int n = 29;
    ms_grad_stat st[29];
    for (int c = 0; c < 6; c++) {
        for (int i = 0; i < n; i++) {
            st[i].sumsq = (float)(ku_range(&r, 0, 1) * pow(10.0, ku_range(&r, -6, 3)));
            st[i].nonfinite = 0;
        }
        if (c == 4) st[7].nonfinite = 3;
        if (c == 5) st[11].sumsq = NAN;
        float scale = c == 3 ? 65536.0f : 1.0f, clip = c == 0 ? 0.0f : c == 2 ? 1e9f : 1.0f;
        float ho[2] = {-1, -1};
        void *ds = NULL, *dout = NULL;
        assert_int_equal(cudaMalloc(&ds, sizeof st), cudaSuccess);
        assert_int_equal(cudaMalloc(&dout, sizeof ho), cudaSuccess);
        assert_int_equal(cudaMemcpy(ds, st, sizeof st, cudaMemcpyHostToDevice), cudaSuccess);
        ms_ops_cpu.clip_scale(&g_cpu, ho, st, n, scale, clip);
        ms_ops_cuda.clip_scale(&g_gpu, (float *)dout, (const ms_grad_stat *)ds, n, scale, clip);
        cpu_done("clip_scale");
        gpu_done("clip_scale");
        float *go = fetch(dout, sizeof ho);
        if (memcmp(go, ho, sizeof ho) != 0) {
            fprintf(stderr, "clip_scale case %d: gpu %.9g %g, cpu %.9g %g\n", c, go[0], go[1], ho[0], ho[1]);
            bad++;
        }
        if ((c >= 4) != (ho[1] == 0.0f)) {
            fprintf(stderr, "clip_scale case %d: finite flag %g\n", c, ho[1]);
            bad++;
        }
        free(go);
        cudaFree(ds);
        cudaFree(dout);
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    int ndev = ms_cuda_device_count();
    if (ndev <= 0) {
        fprintf(stderr, "test_kernels_gpu: FAIL: no CUDA device (this test must run on a machine with a GPU)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),       cmocka_unit_test(test_embedding),  cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_batchnorm),   cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_pick),     cmocka_unit_test(test_bias_grad),
        cmocka_unit_test(test_gelu),        cmocka_unit_test(test_residual),   cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_adamw),       cmocka_unit_test(test_cast),       cmocka_unit_test(test_grad_stats_scale),
        cmocka_unit_test(test_clip_scale),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
