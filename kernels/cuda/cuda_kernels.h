/* cuda_kernels.h — the CUDA instance of the op table (ms_ops_cuda) and the
 * context it runs in. C-callable.
 *
 * Each ms_cuda_<op> has exactly the signature and semantics of the ms_ops
 * member <op> in kernels/ops.h. All of them enqueue on (cudaStream_t)
 * ctx->stream of the current CUDA device and return at once; errors (bad
 * arguments, launch failures, cuBLASLt failures) are recorded in ctx (first
 * error wins) and reported by ms_cuda_sync. Nothing aborts.
 *
 * Status codes in ctx->status: MS_CUDA_EARG for bad arguments, MS_CUDA_EBLAS
 * for a cuBLASLt failure, otherwise the cudaError_t value (> 0).
 *
 * Deviations from the CPU twin that cannot be avoided on a GPU: a bad token or
 * target id lives in device memory, so it cannot be reported; such rows are
 * skipped (embedding) or treated as ignored (softmax_xent, as on the CPU).
 * Sums reduced across thread blocks with float atomics (embedding_bwd dwte,
 * layernorm_bwd dw/db, bias_grad when columns are few, grad_stats) may differ
 * in the last bits from run to run. */
#ifndef MS_CUDA_KERNELS_H
#define MS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Recommended cuBLASLt workspace (NVIDIA recommends 32 MiB on Hopper). */
#define MS_CUDA_WORKSPACE_BYTES ((size_t)32 << 20)

enum { MS_CUDA_EARG = -1, MS_CUDA_EBLAS = -3 };

/* Creates a non-blocking stream and a cuBLASLt handle on the current device
 * and stores the caller-allocated cuBLASLt workspace (device memory, may be
 * NULL with 0 bytes). Returns 0, or -1 with ctx->status/error set. */
int ms_cuda_ctx_init(ms_kctx *ctx, void *workspace, size_t workspace_bytes);
/* Releases the stream and handle (not the workspace, which the caller owns). */
void ms_cuda_ctx_destroy(ms_kctx *ctx);
/* Number of CUDA devices; 0 when there is no GPU or no driver. */
int ms_cuda_device_count(void);

/* Error recording for CUDA code (also for attention.cu): the first error wins.
 * ms_cuda_check records cudaGetLastError() (after a launch) and returns 0 if
 * there was none. */
void ms_cuda_fail(ms_kctx *ctx, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int ms_cuda_check(ms_kctx *ctx, const char *what);

int ms_cuda_sync(ms_kctx *ctx);

/* Stream capture of ctx's stream into a CUDA graph (the trainer's
 * steady-state micro-batch, trainer/step_graph.h). Capture is relaxed, so
 * host-only calls made while the ops enqueue stay legal; nothing captured
 * runs until the graph is launched. capture_end, when keep is nonzero,
 * rewrites the graph's small memsets as kernels (below), instantiates it
 * and returns the executable graph in *exec and the graph it came from
 * (cudaGraph_t, for updates of the executable's nodes) in *graph; both go
 * with ms_cuda_graph_destroy. These never touch
 * ctx's error state: a graph that cannot be made is a reason to run
 * without one, in err, not a failed step. Each returns 0 or -1. */
int ms_cuda_capture_begin(ms_kctx *ctx, char *err, size_t errlen);
int ms_cuda_capture_end(ms_kctx *ctx, int keep, void **exec, void **graph, char *err, size_t errlen);
/* Enqueues the graph on ctx's stream; a failure is recorded in ctx. */
int ms_cuda_graph_launch(ms_kctx *ctx, void *exec);
/* Rewrites the captured graph's (cudaGraph_t) memset nodes of at most 1 MiB
 * as kernel nodes with the same edges (graph_memset.cu says why); returns
 * how many, or -1 with err set. */
int ms_cuda_graph_memsets_to_kernels(void *graph, char *err, size_t errlen);
/* The graph's copy node whose source is src, in *node: 0, or -1 if none. */
int ms_cuda_graph_find_copy(void *graph, const void *src, void **node);
/* Points that node's copy in exec at src instead (same size, same kind of
 * memory) for the launches queued after this call; a failure is recorded
 * in ctx. */
int ms_cuda_graph_repoint_copy(ms_kctx *ctx, void *exec, void *node, const void *src);
void ms_cuda_graph_destroy(void *exec, void *graph);
/* Keeps the fastest candidate of every timed matmul pick whose timed calls
 * have all finished (matmul.cu), so that a capture after a sync bakes in the
 * final algorithms instead of settling while it records. */
void ms_cuda_matmul_settle(void);

void ms_cuda_embedding_fwd(ms_kctx *, ms_dtype dt, void *out, const int32_t *tok,
                           const void *wte, const void *wpe, int B, int T, int C);
void ms_cuda_embedding_bwd(ms_kctx *, ms_dtype dt, float *dwte, float *dwpe, const void *dout,
                           const int32_t *tok, int B, int T, int C);

void ms_cuda_layernorm_fwd(ms_kctx *, ms_dtype dt, void *out, float *mean, float *rstd,
                           const void *x, const float *w, const float *b, int N, int C);
void ms_cuda_layernorm_bwd(ms_kctx *, ms_dtype dt, void *dx, const void *dresid, float *dw, float *db,
                           const void *dout, const void *x, const float *mean, const float *rstd,
                           const float *w, int N, int C);

void ms_cuda_batchnorm_fwd(ms_kctx *, ms_dtype dt, void *out, float *mean, float *rstd,
                           float *run_mean, float *run_var, float momentum,
                           const void *x, const float *w, const float *b, int N, int C);
void ms_cuda_batchnorm_bwd(ms_kctx *, ms_dtype dt, void *dx, const void *dresid, float *dw, float *db,
                           const void *dout, const void *x, const float *mean, const float *rstd,
                           const float *w, int N, int C);

void ms_cuda_matmul(ms_kctx *, ms_dtype ab, ms_dtype cd, int transA, int transB,
                    int M, int N, int K, float alpha, const void *A, const void *B,
                    float beta, const void *Cin, void *D, const void *bias,
                    ms_epilogue epi, void *aux);

void ms_cuda_bias_grad(ms_kctx *, ms_dtype dt, float *db, const void *dy, int M, int N);

/* Implemented in kernels/cuda/attention.cu (a separate module). */
void ms_cuda_attention_fwd(ms_kctx *, ms_dtype dt, void *out, float *lse, const void *qkv,
                           int B, int T, int C, int nh);
size_t ms_cuda_attention_bwd_scratch(ms_dtype dt, int B, int T, int C, int nh);
void ms_cuda_attention_bwd(ms_kctx *, ms_dtype dt, void *dqkv, const void *dout, const void *qkv,
                           const void *out, const float *lse, void *scratch,
                           int B, int T, int C, int nh);

void ms_cuda_gelu_fwd(ms_kctx *, ms_dtype dt, void *out, const void *x, size_t n);
void ms_cuda_gelu_bwd(ms_kctx *, ms_dtype dt, void *dx, const void *dout, const void *x, size_t n);

void ms_cuda_residual_fwd(ms_kctx *, ms_dtype dt, void *out, const void *a, const void *b, size_t n);

void ms_cuda_softmax_xent(ms_kctx *, ms_dtype dt, float *losses, void *logits,
                          const int32_t *targets, int N, int V, int Vreal, float dscale);

void ms_cuda_adamw(ms_kctx *, float *p, const float *grad, float *m, float *v, size_t n,
                   float lr, float b1, float b2, float eps, float wd, int t, float grad_scale,
                   const float *dmul, void *copy, ms_dtype copy_dt, size_t n_copy);

void ms_cuda_cast(ms_kctx *, ms_dtype dst_dt, void *dst, ms_dtype src_dt, const void *src, size_t n);

void ms_cuda_grad_stats(ms_kctx *, const float *x, size_t n, float *sumsq, int *nonfinite);
void ms_cuda_clip_scale(ms_kctx *, float *out, const ms_grad_stat *stats, int n, float loss_scale, float grad_clip);
void ms_cuda_scale(ms_kctx *, float *x, size_t n, float s);

#ifdef __cplusplus
}
#endif

#endif
