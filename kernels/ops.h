/* ops.h — the numeric contract: every op memsplit computes, as one table of
 * function pointers with two instances, ms_ops_cpu (plain C, the reference)
 * and ms_ops_cuda (CUDA kernels, cuBLASLt for matmuls). Same signatures, same
 * semantics; tests hold one against the other.
 *
 * Conventions (all ops):
 *  - Row-major. "N" is the number of token rows (B*T), "C" the model width.
 *  - Activations and low-precision weights are of the dtype `dt`; their math
 *    is float. Norm weights/biases, statistics, losses, weight gradients and
 *    optimizer state are always float (fp32), whatever the policy.
 *  - Buffers live on the op table's device (host memory for the CPU table,
 *    device memory for the CUDA table). Ops are asynchronous on the GPU
 *    (ctx->stream); results are visible after ms_ops.sync().
 *  - "accumulates" means +=; everything else overwrites.
 *  - Errors (e.g. a cuBLASLt failure) set ctx->status (first error wins) and
 *    never abort; callers check it after sync. */
#ifndef MS_OPS_H
#define MS_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-device execution context. The CPU table ignores everything but status. */
typedef struct ms_kctx {
    void *stream;          /* cudaStream_t */
    void *lt;              /* cublasLtHandle_t */
    void *workspace;       /* cuBLASLt workspace (device memory) */
    size_t workspace_bytes;
    int matmul_pick;       /* CUDA (matmul.cu): 0 = cuBLASLt's heuristic's first algorithm, the
                              same bits every run; 1 = time its top algorithms on each shape's
                              first calls; 2 = keep what was timed, time no more. The CPU
                              ignores it. */
    int status;            /* 0 = ok; first error code kept */
    char error[160];       /* text of the first error */
} ms_kctx;

typedef enum {
    MS_EPI_NONE = 0,  /* D = alpha*op(A)op(B) + beta*Cin (+ bias) */
    MS_EPI_GELU = 1,  /* pre = alpha*op(A)op(B) + bias; aux = pre; D = gelu(pre). beta must be 0 */
    MS_EPI_DGELU = 2, /* D = (alpha*op(A)op(B)) * gelu'(aux). beta must be 0, no bias */
} ms_epilogue;

/* A gradient-statistics record: grad_stats accumulates into its two fields. */
typedef struct ms_grad_stat {
    float sumsq;
    int nonfinite;
} ms_grad_stat;

typedef struct ms_ops {
    const char *name; /* "cpu" or "cuda" */

    /* Wait for all queued work on ctx; returns ctx->status. */
    int (*sync)(ms_kctx *ctx);

    /* out[n,:] = wte[tok[n],:] + wpe[n % T,:], n < B*T. wte [V,C], wpe [T,C], out [B*T,C], all dt. */
    void (*embedding_fwd)(ms_kctx *, ms_dtype dt, void *out, const int32_t *tok,
                          const void *wte, const void *wpe, int B, int T, int C);
    /* Accumulates dwte[tok[n],:] += dout[n,:], dwpe[n%T,:] += dout[n,:] (fp32 grads). */
    void (*embedding_bwd)(ms_kctx *, ms_dtype dt, float *dwte, float *dwpe, const void *dout,
                          const int32_t *tok, int B, int T, int C);

    /* LayerNorm over C for each of N rows, eps 1e-5 (biased variance).
     * out = (x-mean)*rstd*w + b; writes mean[N], rstd[N] (saved for backward). */
    void (*layernorm_fwd)(ms_kctx *, ms_dtype dt, void *out, float *mean, float *rstd,
                          const void *x, const float *w, const float *b, int N, int C);
    /* dx = dresid + d(LN)/dx · dout, where dresid may be NULL (treated as 0)
     * and may alias dx. Accumulates dw, db. */
    void (*layernorm_bwd)(ms_kctx *, ms_dtype dt, void *dx, const void *dresid, float *dw, float *db,
                          const void *dout, const void *x, const float *mean, const float *rstd,
                          const float *w, int N, int C);

    /* BatchNorm over features in training mode: statistics of each of C
     * features over the N rows, eps 1e-5, biased variance for normalising.
     * Writes mean[C], rstd[C]; updates running stats:
     *   run_mean = (1-momentum)*run_mean + momentum*mean,
     *   run_var  = (1-momentum)*run_var  + momentum*var*N/(N-1)  (unbiased). */
    void (*batchnorm_fwd)(ms_kctx *, ms_dtype dt, void *out, float *mean, float *rstd,
                          float *run_mean, float *run_var, float momentum,
                          const void *x, const float *w, const float *b, int N, int C);
    /* Same conventions as layernorm_bwd, statistics per feature. */
    void (*batchnorm_bwd)(ms_kctx *, ms_dtype dt, void *dx, const void *dresid, float *dw, float *db,
                          const void *dout, const void *x, const float *mean, const float *rstd,
                          const float *w, int N, int C);

    /* D[M,N] = epilogue(alpha * op(A)[M,K] op(B)[K,N] + beta * Cin[M,N] + bias[N]).
     * op(A) = A ([M,K]) or, with transA, A^T where A is stored [K,M]; likewise B
     * ([K,N] or, with transB, stored [N,K]). A, B of type ab; Cin, D of type cd
     * (cd is ab or MS_F32; f32 D with ab = bf16/f16 is the weight-gradient
     * case); Cin may equal D (accumulate) or be NULL when beta = 0; bias of
     * type cd or NULL; aux [M,N] of type cd for the GELU epilogues, else NULL.
     * GELU is the tanh approximation (GPT-2's). */
    void (*matmul)(ms_kctx *, ms_dtype ab, ms_dtype cd, int transA, int transB,
                   int M, int N, int K, float alpha, const void *A, const void *B,
                   float beta, const void *Cin, void *D, const void *bias,
                   ms_epilogue epi, void *aux);

    /* Accumulates db[j] += sum_i dy[i,j], dy [M,N] of type dt. */
    void (*bias_grad)(ms_kctx *, ms_dtype dt, float *db, const void *dy, int M, int N);

    /* Causal multi-head self-attention, head size hs = C/nh, scale 1/sqrt(hs).
     * qkv [B,T,3C] holds q | k | v, each [B,T,nh,hs]. out [B,T,C] (heads
     * concatenated). lse [B,nh,T] fp32 = log-sum-exp of each query row's
     * scaled scores: with q, k, v and out, it is all backward needs, so the
     * T x T probabilities are never stored (flash-style). */
    void (*attention_fwd)(ms_kctx *, ms_dtype dt, void *out, float *lse, const void *qkv,
                          int B, int T, int C, int nh);
    /* Bytes of scratch attention_bwd needs for these shapes (a transient). */
    size_t (*attention_bwd_scratch)(ms_dtype dt, int B, int T, int C, int nh);
    /* dqkv [B,T,3C] (overwritten) from dout, qkv, out, lse. */
    void (*attention_bwd)(ms_kctx *, ms_dtype dt, void *dqkv, const void *dout, const void *qkv,
                          const void *out, const float *lse, void *scratch,
                          int B, int T, int C, int nh);

    /* out = gelu(x) (tanh approximation), n elements. */
    void (*gelu_fwd)(ms_kctx *, ms_dtype dt, void *out, const void *x, size_t n);
    /* dx = dout * gelu'(x). dx may alias dout. */
    void (*gelu_bwd)(ms_kctx *, ms_dtype dt, void *dx, const void *dout, const void *x, size_t n);

    /* out = a + b, n elements; out may alias a or b. */
    void (*residual_fwd)(ms_kctx *, ms_dtype dt, void *out, const void *a, const void *b, size_t n);

    /* Softmax cross-entropy over the first Vreal of V columns of logits
     * [N,V] (columns >= Vreal are padding: probability 0, gradient 0).
     * losses[i] = logsumexp(row i) - logit[i, target[i]] (fp32).
     * Writes, in place over logits, dlogits = (softmax - onehot) * dscale.
     * A target < 0 marks an ignored row: loss 0, gradient 0. */
    void (*softmax_xent)(ms_kctx *, ms_dtype dt, float *losses, void *logits,
                         const int32_t *targets, int N, int V, int Vreal, float dscale);

    /* AdamW on n fp32 parameters (decoupled weight decay on every element):
     *   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     *   p -= lr * ( (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd * p )
     * t is the 1-based step. If copy != NULL, also writes copy[i] = p[i]
     * rounded to copy_dt for i < n_copy (the low-precision compute copy).
     * With dmul (NULL: none; device memory, as clip_scale writes it) the
     * multiplier is dmul[0] instead of grad_scale, and when dmul[1] == 0 the
     * call changes nothing (a skipped step), decided on the device. */
    void (*adamw)(ms_kctx *, float *p, const float *grad, float *m, float *v, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int t, float grad_scale,
                  const float *dmul, void *copy, ms_dtype copy_dt, size_t n_copy);

    /* The AdamW multiplier from n gradient statistics records (grad_stats
     * accumulated into each), computed on the device so that the host need
     * not read them before the update: norm = sqrt(sum of the records'
     * sumsq, in double, in record order) / loss_scale; out[0] = clip /
     * loss_scale (float), with clip = (float)(grad_clip / norm) where
     * grad_clip > 0 and norm > grad_clip, else 1; out[1] = 1 when every
     * nonfinite count is 0 and norm is finite, else 0. The same arithmetic
     * as trainer/optimizer.c's on the host, so both give the same bits. */
    void (*clip_scale)(ms_kctx *, float *out, const ms_grad_stat *stats, int n, float loss_scale,
                       float grad_clip);

    /* dst[i] = src[i] converted (rounded to nearest even), n elements. */
    void (*cast)(ms_kctx *, ms_dtype dst_dt, void *dst, ms_dtype src_dt, const void *src, size_t n);

    /* Accumulates *sumsq += sum x[i]^2 and *nonfinite += count of NaN/Inf
     * over n fp32 values (gradient norm and fp16 overflow check). */
    void (*grad_stats)(ms_kctx *, const float *x, size_t n, float *sumsq, int *nonfinite);
    /* x[i] *= s for n fp32 values. */
    void (*scale)(ms_kctx *, float *x, size_t n, float s);
} ms_ops;

extern const ms_ops ms_ops_cpu;
/* The CUDA table; its functions run on the GPU of the current CUDA device. */
extern const ms_ops ms_ops_cuda;

#ifdef __cplusplus
}
#endif

#endif
