/* attention_cuda.h — the CUDA causal self-attention behind ms_ops_cuda
 * (attention_fwd, attention_bwd_scratch, attention_bwd: same signatures and
 * semantics as the ms_ops members in kernels/ops.h; buffers are device
 * memory, work is queued on (cudaStream_t)ctx->stream).
 *
 * Head sizes 32, 64 and 128 are supported; others set ctx->status. bf16/f16
 * use tensor-core flash kernels, fp32 CUDA-core flash kernels. Setting the
 * environment variable MS_ATTN_SIMPLE=1 (read at every call) selects instead
 * a simple one-thread-per-row reference, the safety net if a fast kernel is
 * ever suspect. On a 9.0 device (H100, H200) the 16-bit backward at head
 * sizes 64 and 128 runs on the warpgroup MMA (wgmma) kernel; MS_ATTN_WGMMA=0
 * (read at every call) keeps the mma.sync kernel. Errors set ctx->status (first error wins): -1 for bad
 * arguments, the cudaError_t value for a failed launch. */
#ifndef MS_ATTENTION_CUDA_H
#define MS_ATTENTION_CUDA_H

#include <stddef.h>
#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

void ms_cuda_attention_fwd(ms_kctx *ctx, ms_dtype dt, void *out, float *lse, const void *qkv,
                           int B, int T, int C, int nh);
size_t ms_cuda_attention_bwd_scratch(ms_dtype dt, int B, int T, int C, int nh);
void ms_cuda_attention_bwd(ms_kctx *ctx, ms_dtype dt, void *dqkv, const void *dout,
                           const void *qkv, const void *out, const float *lse, void *scratch,
                           int B, int T, int C, int nh);
/* 1 when the wgmma backward runs on the current device (MS_ATTN_WGMMA
 * unset or not 0, and this build's sm_90a code loaded), else 0. */
int ms_cuda_attention_wgmma(void);

#ifdef __cplusplus
}
#endif

#endif
