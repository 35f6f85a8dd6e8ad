/* table.c — ms_ops_cpu, the CPU instance of the op table, and the error
 * recording shared by every CPU kernel. CPU ops are synchronous, so sync only
 * reports the status. */
#include "kernels/cpu/cpu_kernels.h"

#include <stdarg.h>
#include <stdio.h>

void ms_cpu_fail(ms_kctx *ctx, int code, const char *fmt, ...)
{
    if (!ctx || ctx->status != 0) return; /* first error wins */
    ctx->status = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
}

int ms_cpu_sync(ms_kctx *ctx) { return ctx ? ctx->status : 0; }

const ms_ops ms_ops_cpu = {
    .name = "cpu",
    .sync = ms_cpu_sync,
    .embedding_fwd = ms_cpu_embedding_fwd,
    .embedding_bwd = ms_cpu_embedding_bwd,
    .layernorm_fwd = ms_cpu_layernorm_fwd,
    .layernorm_bwd = ms_cpu_layernorm_bwd,
    .batchnorm_fwd = ms_cpu_batchnorm_fwd,
    .batchnorm_bwd = ms_cpu_batchnorm_bwd,
    .matmul = ms_cpu_matmul,
    .bias_grad = ms_cpu_bias_grad,
    .attention_fwd = ms_cpu_attention_fwd,
    .attention_bwd_scratch = ms_cpu_attention_bwd_scratch,
    .attention_bwd = ms_cpu_attention_bwd,
    .gelu_fwd = ms_cpu_gelu_fwd,
    .gelu_bwd = ms_cpu_gelu_bwd,
    .residual_fwd = ms_cpu_residual_fwd,
    .softmax_xent = ms_cpu_softmax_xent,
    .adamw = ms_cpu_adamw,
    .clip_scale = ms_cpu_clip_scale,
    .cast = ms_cpu_cast,
    .grad_stats = ms_cpu_grad_stats,
    .scale = ms_cpu_scale,
};
