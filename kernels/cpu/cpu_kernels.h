/* cpu_kernels.h — the plain-C reference kernels behind ms_ops_cpu.
 *
 * Each ms_cpu_<op> has exactly the signature and semantics of the ms_ops
 * member <op> documented in kernels/ops.h (read that file for the contract).
 * All math is float (reductions accumulate in double); values are loaded and
 * stored through ms_ld/ms_st so bf16/f16 round exactly as dtype.h says.
 * Work is synchronous and single-threaded. Bad arguments (negative sizes,
 * NULL buffers that the op needs, a token or target out of range, a
 * forbidden epilogue combination) set ctx->status (first error wins, see
 * ms_cpu_fail) and the op returns without writing, or skips the bad row. */
#ifndef MS_CPU_KERNELS_H
#define MS_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/ops.h"

/* ctx->status values set by the CPU kernels. */
enum { MS_CPU_EARG = -1, MS_CPU_ENOMEM = -2 };

/* Records an error in ctx (if ctx is non-NULL and holds no error yet):
 * status = code, error = formatted text. */
void ms_cpu_fail(ms_kctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 if dt is one of the three storage types. */
static inline int ms_cpu_dtype_ok(ms_dtype dt)
{
    return dt == MS_F32 || dt == MS_BF16 || dt == MS_F16;
}

/* GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))),
 * and its derivative. Every CPU op (and the tests) use these two. */
float ms_gelu_f(float x);
float ms_gelu_grad_f(float x);

int ms_cpu_sync(ms_kctx *ctx);

void ms_cpu_embedding_fwd(ms_kctx *, ms_dtype dt, void *out, const int32_t *tok,
                          const void *wte, const void *wpe, int B, int T, int C);
void ms_cpu_embedding_bwd(ms_kctx *, ms_dtype dt, float *dwte, float *dwpe, const void *dout,
                          const int32_t *tok, int B, int T, int C);

void ms_cpu_layernorm_fwd(ms_kctx *, ms_dtype dt, void *out, float *mean, float *rstd,
                          const void *x, const float *w, const float *b, int N, int C);
void ms_cpu_layernorm_bwd(ms_kctx *, ms_dtype dt, void *dx, const void *dresid, float *dw, float *db,
                          const void *dout, const void *x, const float *mean, const float *rstd,
                          const float *w, int N, int C);

void ms_cpu_batchnorm_fwd(ms_kctx *, ms_dtype dt, void *out, float *mean, float *rstd,
                          float *run_mean, float *run_var, float momentum,
                          const void *x, const float *w, const float *b, int N, int C);
void ms_cpu_batchnorm_bwd(ms_kctx *, ms_dtype dt, void *dx, const void *dresid, float *dw, float *db,
                          const void *dout, const void *x, const float *mean, const float *rstd,
                          const float *w, int N, int C);

void ms_cpu_matmul(ms_kctx *, ms_dtype ab, ms_dtype cd, int transA, int transB,
                   int M, int N, int K, float alpha, const void *A, const void *B,
                   float beta, const void *Cin, void *D, const void *bias,
                   ms_epilogue epi, void *aux);

void ms_cpu_bias_grad(ms_kctx *, ms_dtype dt, float *db, const void *dy, int M, int N);

/* Implemented in kernels/cpu/attention.c (a separate module). */
void ms_cpu_attention_fwd(ms_kctx *, ms_dtype dt, void *out, float *lse, const void *qkv,
                          int B, int T, int C, int nh);
size_t ms_cpu_attention_bwd_scratch(ms_dtype dt, int B, int T, int C, int nh);
void ms_cpu_attention_bwd(ms_kctx *, ms_dtype dt, void *dqkv, const void *dout, const void *qkv,
                          const void *out, const float *lse, void *scratch,
                          int B, int T, int C, int nh);

void ms_cpu_gelu_fwd(ms_kctx *, ms_dtype dt, void *out, const void *x, size_t n);
void ms_cpu_gelu_bwd(ms_kctx *, ms_dtype dt, void *dx, const void *dout, const void *x, size_t n);

void ms_cpu_residual_fwd(ms_kctx *, ms_dtype dt, void *out, const void *a, const void *b, size_t n);

void ms_cpu_softmax_xent(ms_kctx *, ms_dtype dt, float *losses, void *logits,
                         const int32_t *targets, int N, int V, int Vreal, float dscale);

void ms_cpu_adamw(ms_kctx *, float *p, const float *grad, float *m, float *v, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int t, float grad_scale,
                  const float *dmul, void *copy, ms_dtype copy_dt, size_t n_copy);

void ms_cpu_cast(ms_kctx *, ms_dtype dst_dt, void *dst, ms_dtype src_dt, const void *src, size_t n);

void ms_cpu_grad_stats(ms_kctx *, const float *x, size_t n, float *sumsq, int *nonfinite);
void ms_cpu_clip_scale(ms_kctx *, float *out, const ms_grad_stat *stats, int n, float loss_scale, float grad_clip);
void ms_cpu_scale(ms_kctx *, float *x, size_t n, float s);

#endif
