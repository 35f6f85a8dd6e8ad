/* gemm_pick.c — what the matmul's timed pick (kernels/cuda/matmul.cu,
 * ctx->matmul_pick) gains on the trainer's own products, shape by shape.
 * A developer's tool of issue 15, like attn_tune: not part of `make bench`.
 *
 * The products are a bf16 training step's, as trainer/layer_block.c and
 * trainer/layer_head.c call them (types, transposes, beta, bias, GELU
 * epilogues, fp32 weight gradients accumulated in place, then bias_grad):
 * per block the four forward and eight backward ones, per head chunk its
 * three. Each runs
 * through ms_cuda_matmul with the pick off, then on (its timed calls first,
 * until the choice is kept), and is timed over CALLS back-to-back calls
 * with CUDA events. Operands hold uniform random values in [-1, 1).
 *
 *   gemm_pick LAYERS TOKENS D_MODEL VOCAB HEAD_ROWS
 *   e.g. gpt2-small: gemm_pick 12 16384 768 50304 2560
 *        seed17:     gemm_pick 24 30720 2048 50304 2560
 *
 * Prints a line per product (ms a call off and on, calls a step) and the
 * step's totals; exit 0, or 1 on bad arguments or a CUDA/cuBLASLt error. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/fill_uniform.h"
#include "kernels/cuda/cuda_kernels.h"

#define CALLS 20
#define SETTLE_CALLS 40 /* more than the pick's timed calls (MM_CAND * MM_REPS) */

typedef struct product {
    const char *name;
    int ta, tb, M, N, K;
    int f32_out;  /* fp32 D accumulated in place (beta 1): a weight gradient */
    int resid;    /* beta 1 on a separate residual input */
    int bias;     /* forward: a bias in the product; weight gradient: the bias gradient too */
    ms_epilogue epi;
    int per_step; /* calls a step */
} product;

static int parse(const char *s, int *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > (1L << 30)) return -1;
    *out = (int)v;
    return 0;
}

typedef struct bufs {
    void *a, *b, *d, *c, *aux, *bias;
    float *db;
} bufs;

/* One call of p; a weight gradient with its bias gradient is the product
 * and then bias_grad, as the trainer does. */
static void call(ms_kctx *k, const product *p, const bufs *u)
{
    ms_dtype cd = p->f32_out ? MS_F32 : MS_BF16;
    float beta = p->f32_out || p->resid ? 1.0f : 0.0f;
    const void *cin = p->f32_out ? u->d : p->resid ? u->c : NULL;
    if (p->f32_out && p->bias) {
        ms_cuda_matmul(k, MS_BF16, cd, p->ta, p->tb, p->M, p->N, p->K, 1.0f, u->a, u->b, beta, cin, u->d, NULL,
                       MS_EPI_NONE, NULL);
        ms_cuda_bias_grad(k, MS_BF16, u->db, u->a, p->K, p->M);
        return;
    }
    ms_cuda_matmul(k, MS_BF16, cd, p->ta, p->tb, p->M, p->N, p->K, 1.0f, u->a, u->b, beta, cin, u->d,
                   p->bias ? u->bias : NULL, p->epi, p->epi == MS_EPI_NONE ? NULL : u->aux);
}

/* ms a call of p over CALLS calls, after warm-up (and, with the pick, its
 * choice); -1 on an error (said on stderr). */
static double time_product(ms_kctx *k, const product *p, const bufs *u)
{
    cudaEvent_t e0, e1;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) return -1;
    for (int i = 0; i < SETTLE_CALLS; i++) {
        call(k, p, u);
        if (i == SETTLE_CALLS / 2 && ms_cuda_sync(k)) break; /* the timed calls finish: the next call keeps one */
    }
    double ms = -1;
    if (ms_cuda_sync(k) == 0) {
        cudaEventRecord(e0, (cudaStream_t)k->stream);
        for (int i = 0; i < CALLS; i++) call(k, p, u);
        cudaEventRecord(e1, (cudaStream_t)k->stream);
        float t = 0;
        if (ms_cuda_sync(k) == 0 && cudaEventElapsedTime(&t, e0, e1) == cudaSuccess) ms = t / CALLS;
    }
    if (k->status) fprintf(stderr, "gemm_pick: %s: %s\n", p->name, k->error);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms;
}

int main(int argc, char **argv)
{
    int L, N, C, V, rows;
    if (argc != 6 || parse(argv[1], &L) || parse(argv[2], &N) || parse(argv[3], &C) || parse(argv[4], &V) ||
        parse(argv[5], &rows)) {
        fprintf(stderr, "usage: gemm_pick LAYERS TOKENS D_MODEL VOCAB HEAD_ROWS (positive integers)\n");
        return 1;
    }
    int H = 4 * C, tail = N % rows, chunks = N / rows;
    product ps[] = {
        { "qkv fwd", 0, 1, N, 3 * C, C, 0, 0, 1, MS_EPI_NONE, L },
        { "att proj fwd (+res)", 0, 1, N, C, C, 0, 1, 1, MS_EPI_NONE, L },
        { "fc fwd (gelu)", 0, 1, N, H, C, 0, 0, 1, MS_EPI_GELU, L },
        { "proj fwd (+res)", 0, 1, N, C, H, 0, 1, 1, MS_EPI_NONE, L },
        { "proj dgrad (dgelu)", 0, 0, N, H, C, 0, 0, 0, MS_EPI_DGELU, L },
        { "proj wgrad", 1, 0, C, H, N, 1, 0, 1, MS_EPI_NONE, L },
        { "fc wgrad", 1, 0, H, C, N, 1, 0, 1, MS_EPI_NONE, L },
        { "fc dgrad", 0, 0, N, C, H, 0, 0, 0, MS_EPI_NONE, L },
        { "att proj dgrad", 0, 0, N, C, C, 0, 0, 0, MS_EPI_NONE, L },
        { "att proj wgrad", 1, 0, C, C, N, 1, 0, 1, MS_EPI_NONE, L },
        { "qkv dgrad", 0, 0, N, C, 3 * C, 0, 0, 0, MS_EPI_NONE, L },
        { "qkv wgrad", 1, 0, 3 * C, C, N, 1, 0, 1, MS_EPI_NONE, L },
        { "head logits", 0, 1, rows, V, C, 0, 0, 0, MS_EPI_NONE, chunks },
        { "head dgrad", 0, 0, rows, C, V, 0, 0, 0, MS_EPI_NONE, chunks },
        { "head wgrad", 1, 0, V, C, rows, 1, 0, 0, MS_EPI_NONE, chunks },
        { "head logits (tail)", 0, 1, tail, V, C, 0, 0, 0, MS_EPI_NONE, tail ? 1 : 0 },
        { "head dgrad (tail)", 0, 0, tail, C, V, 0, 0, 0, MS_EPI_NONE, tail ? 1 : 0 },
        { "head wgrad (tail)", 1, 0, V, C, tail, 1, 0, 0, MS_EPI_NONE, tail ? 1 : 0 },
    };
    size_t big = (size_t)N * H; /* elements of the largest operand */
    if ((size_t)rows * V > big) big = (size_t)rows * V;
    if ((size_t)V * C > big) big = (size_t)V * C;
    bufs u;
    memset(&u, 0, sizeof u);
    void *ws = NULL;
    if (cudaMalloc(&u.a, big * 2) || cudaMalloc(&u.b, big * 2) || cudaMalloc(&u.d, big * 4) ||
        cudaMalloc(&u.c, big * 2) || cudaMalloc(&u.aux, big * 2) || cudaMalloc(&u.bias, (size_t)V * 4 + 4 * H) ||
        cudaMalloc((void **)&u.db, (size_t)H * 4) || cudaMalloc(&ws, MS_CUDA_WORKSPACE_BYTES)) {
        fprintf(stderr, "gemm_pick: cudaMalloc failed (no GPU, or too little memory)\n");
        return 1;
    }
    if (fill_uniform(u.a, big, 0, 1) || fill_uniform(u.b, big, 0, 2) || fill_uniform(u.c, big, 0, 3) ||
        fill_uniform(u.aux, big, 0, 4) || fill_uniform(u.bias, (size_t)V + 2 * H, 0, 5) ||
        fill_uniform(u.d, big, 1, 6) || fill_uniform(u.db, (size_t)H, 1, 7)) {
        fprintf(stderr, "gemm_pick: filling the operands failed\n");
        return 1;
    }
    ms_kctx off, on;
    if (ms_cuda_ctx_init(&off, ws, MS_CUDA_WORKSPACE_BYTES) || ms_cuda_ctx_init(&on, ws, MS_CUDA_WORKSPACE_BYTES)) {
        fprintf(stderr, "gemm_pick: context: %s\n", off.error[0] ? off.error : on.error);
        return 1;
    }
    on.matmul_pick = 1;
    /* off: the heuristic's first; pick: the timed pick (bias_grad after a
     * weight gradient in both) */
    printf("%-20s %6s %6s %6s %5s %8s %8s %7s\n", "product", "M", "N", "K", "calls", "off ms", "pick ms", "gain");
    double tot[2] = { 0, 0 };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        const product *p = &ps[i];
        if (!p->per_step) continue;
        double t[2] = { time_product(&off, p, &u), time_product(&on, p, &u) };
        if (t[0] < 0 || t[1] < 0) return 1;
        for (int j = 0; j < 2; j++) tot[j] += t[j] * p->per_step;
        printf("%-20s %6d %6d %6d %5d %8.4f %8.4f %+6.1f%%\n", p->name, p->M, p->N, p->K, p->per_step, t[0], t[1],
               100.0 * (t[0] - t[1]) / t[0]);
    }
    printf("a step's products: %.2f ms with the heuristic's first, %.2f ms picked (%+.2f ms)\n", tot[0], tot[1],
           tot[1] - tot[0]);
    ms_cuda_ctx_destroy(&off);
    ms_cuda_ctx_destroy(&on);
    return 0;
}
