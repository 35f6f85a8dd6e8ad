/* matmul.c — D = epilogue(alpha * op(A) op(B) + beta * Cin + bias), row-major,
 * the reference for the cuBLASLt matmuls (see ops.h for the contract).
 *
 * How: tiles of op(A) (MB x KB) and op(B) (KB x NB) are converted to float
 * and packed; a 4 x 8 register-blocked micro-kernel accumulates the float
 * product tile over all of K, then the epilogue reads Cin / bias / aux and
 * stores D, rounding once. Packing also absorbs the transposes, so the inner
 * loop never branches. Single-threaded; the tile sizes keep the packed B tile
 * in L2 and the accumulator rows in L1.
 *
 * Epilogue details (shared with the CUDA twin):
 *  - beta == 0 never reads Cin (so Cin may be NULL or hold NaN);
 *    Cin may equal D: each element is read before it is written.
 *  - GELU: pre = alpha*AB + bias in float; aux = pre rounded to cd;
 *    D = gelu(pre) computed from the unrounded float pre.
 *  - DGELU: D = (alpha*AB) * gelu'(aux) with aux as stored (type cd). */
#include "kernels/cpu/cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

enum { MB = 64, KB = 256, NB = 256, MR = 4, NR = 8 };

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* c[0..3][0..7] += a-panel (kb x 4, k-major) times b rows (kb x 8, stride ldb). */
static void micro_4x8(int kb, const float *restrict a, const float *restrict b, size_t ldb,
                      float *restrict c, size_t ldc)
{
    float c0[NR] = {0}, c1[NR] = {0}, c2[NR] = {0}, c3[NR] = {0};
    for (int k = 0; k < kb; k++) {
        const float *bk = b + (size_t)k * ldb;
        float a0 = a[MR * k], a1 = a[MR * k + 1], a2 = a[MR * k + 2], a3 = a[MR * k + 3];
        for (int v = 0; v < NR; v++) {
            float bv = bk[v];
            c0[v] += a0 * bv;
            c1[v] += a1 * bv;
            c2[v] += a2 * bv;
            c3[v] += a3 * bv;
        }
    }
    for (int v = 0; v < NR; v++) {
        c[v] += c0[v];
        c[ldc + v] += c1[v];
        c[2 * ldc + v] += c2[v];
        c[3 * ldc + v] += c3[v];
    }
}

typedef struct {
    ms_dtype ab;
    int transA, transB, M, N, K;
    const void *A, *B;
} mm_in;

/* op(A)[i0+i, k0+k] for i < mb, k < kb into MR-row panels, rows >= mb zero. */
static void pack_a(const mm_in *in, float *ap, int i0, int mb, int k0, int kb)
{
    int mbp = (int)round_up((size_t)mb, MR);
    for (int i = 0; i < mbp; i++) {
        float *dst = ap + (size_t)(i / MR) * kb * MR + i % MR;
        if (i >= mb) {
            for (int k = 0; k < kb; k++) dst[(size_t)k * MR] = 0.0f;
        } else if (!in->transA) {
            size_t base = (size_t)(i0 + i) * in->K + k0;
            for (int k = 0; k < kb; k++) dst[(size_t)k * MR] = ms_ld(in->A, in->ab, base + k);
        } else {
            for (int k = 0; k < kb; k++)
                dst[(size_t)k * MR] = ms_ld(in->A, in->ab, (size_t)(k0 + k) * in->M + i0 + i);
        }
    }
}

/* op(B)[k0+k, j0+j] for k < kb, j < nb into bp[k][nbp], columns >= nb zero. */
static void pack_b(const mm_in *in, float *bp, int k0, int kb, int j0, int nb, int nbp)
{
    for (int k = 0; k < kb; k++) {
        float *dst = bp + (size_t)k * nbp;
        if (!in->transB) {
            size_t base = (size_t)(k0 + k) * in->N + j0;
            for (int j = 0; j < nb; j++) dst[j] = ms_ld(in->B, in->ab, base + j);
        } else {
            for (int j = 0; j < nb; j++)
                dst[j] = ms_ld(in->B, in->ab, (size_t)(j0 + j) * in->K + k0 + k);
        }
        for (int j = nb; j < nbp; j++) dst[j] = 0.0f;
    }
}

static int check_args(ms_kctx *ctx, ms_dtype ab, ms_dtype cd, int M, int N, int K,
                      const void *A, const void *B, float beta, const void *Cin, void *D,
                      const void *bias, ms_epilogue epi, void *aux)
{
    const char *why = NULL;
    if (!ms_cpu_dtype_ok(ab) || !ms_cpu_dtype_ok(cd) || (cd != ab && cd != MS_F32))
        why = "dtype pair (cd must be ab or f32)";
    else if (M < 0 || N < 0 || K < 0)
        why = "negative size";
    else if (epi != MS_EPI_NONE && epi != MS_EPI_GELU && epi != MS_EPI_DGELU)
        why = "unknown epilogue";
    else if (M && N && !D)
        why = "D is NULL";
    else if (M && N && K && (!A || !B))
        why = "A or B is NULL";
    else if (beta != 0.0f && !Cin && M && N)
        why = "beta != 0 with Cin NULL";
    else if (epi != MS_EPI_NONE && beta != 0.0f)
        why = "GELU epilogues need beta = 0";
    else if (epi == MS_EPI_DGELU && bias)
        why = "DGELU epilogue takes no bias";
    else if (epi != MS_EPI_NONE && !aux && M && N)
        why = "GELU epilogues need aux";
    if (why) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "matmul: %s (M=%d N=%d K=%d)", why, M, N, K);
        return -1;
    }
    return 0;
}

/* Writes rows i0.., columns j0.. of D from the float product tile acc. */
static void epilogue(ms_dtype cd, const float *acc, size_t ldacc, int i0, int mb, int j0, int nb,
                     int N, float alpha, float beta, const void *Cin, void *D, const void *bias,
                     ms_epilogue epi, void *aux)
{
    for (int i = 0; i < mb; i++) {
        const float *arow = acc + (size_t)i * ldacc;
        size_t row = (size_t)(i0 + i) * N;
        for (int j = 0; j < nb; j++) {
            size_t idx = row + j0 + j;
            float v = alpha * arow[j];
            if (epi == MS_EPI_DGELU) {
                ms_st(D, cd, idx, v * ms_gelu_grad_f(ms_ld(aux, cd, idx)));
                continue;
            }
            if (beta != 0.0f) v += beta * ms_ld(Cin, cd, idx);
            if (bias) v += ms_ld(bias, cd, (size_t)(j0 + j));
            if (epi == MS_EPI_GELU) {
                ms_st(aux, cd, idx, v);
                v = ms_gelu_f(v);
            }
            ms_st(D, cd, idx, v);
        }
    }
}

void ms_cpu_matmul(ms_kctx *ctx, ms_dtype ab, ms_dtype cd, int transA, int transB,
                   int M, int N, int K, float alpha, const void *A, const void *B,
                   float beta, const void *Cin, void *D, const void *bias,
                   ms_epilogue epi, void *aux)
{
    if (check_args(ctx, ab, cd, M, N, K, A, B, beta, Cin, D, bias, epi, aux)) return;
    if (M == 0 || N == 0) return;
    mm_in in = {ab, transA, transB, M, N, K, A, B};

    int mbmax = M < MB ? M : MB, kbmax = K < KB ? K : KB, nbmax = N < NB ? N : NB;
    size_t mbp = round_up((size_t)mbmax, MR), nbp_max = round_up((size_t)nbmax, NR);
    size_t kbm = kbmax ? (size_t)kbmax : 1;
    float *ap = malloc(mbp * kbm * sizeof *ap);
    float *bp = malloc(kbm * nbp_max * sizeof *bp);
    float *acc = malloc(mbp * nbp_max * sizeof *acc);
    if (!ap || !bp || !acc) {
        ms_cpu_fail(ctx, MS_CPU_ENOMEM, "matmul: no memory for tiles (M=%d N=%d K=%d)", M, N, K);
        goto out;
    }
    for (int i0 = 0; i0 < M; i0 += MB) {
        int mb = M - i0 < MB ? M - i0 : MB;
        for (int j0 = 0; j0 < N; j0 += NB) {
            int nb = N - j0 < NB ? N - j0 : NB;
            size_t nbp = round_up((size_t)nb, NR);
            memset(acc, 0, mbp * nbp * sizeof *acc);
            for (int k0 = 0; k0 < K; k0 += KB) {
                int kb = K - k0 < KB ? K - k0 : KB;
                pack_a(&in, ap, i0, mb, k0, kb);
                pack_b(&in, bp, k0, kb, j0, nb, (int)nbp);
                for (int ip = 0; ip < mb; ip += MR)
                    for (size_t jp = 0; jp < nbp; jp += NR)
                        micro_4x8(kb, ap + (size_t)(ip / MR) * kb * MR, bp + jp, nbp,
                                  acc + (size_t)ip * nbp + jp, nbp);
            }
            epilogue(cd, acc, nbp, i0, mb, j0, nb, N, alpha, beta, Cin, D, bias, epi, aux);
        }
    }
out:
    free(ap);
    free(bp);
    free(acc);
}
