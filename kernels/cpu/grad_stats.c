/* grad_stats.c — gradient norm pieces and scaling on fp32 buffers:
 * grad_stats accumulates the sum of squares (summed in double, added to
 * *sumsq as float; NaN/Inf propagate into it) and counts NaN/Inf values;
 * clip_scale turns the records into AdamW's multiplier (ops.h); scale
 * multiplies in place. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/clip_scale.h"

#include <math.h>

void ms_cpu_grad_stats(ms_kctx *ctx, const float *x, size_t n, float *sumsq, int *nonfinite)
{
    if (!sumsq || !nonfinite || (n && !x)) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "grad_stats: bad arguments (n=%zu)", n);
        return;
    }
    double s = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)x[i] * x[i];
        bad += !isfinite(x[i]);
    }
    *sumsq += (float)s;
    *nonfinite += bad;
}

void ms_cpu_clip_scale(ms_kctx *ctx, float *out, const ms_grad_stat *stats, int n, float loss_scale,
                       float grad_clip)
{
    if (!out || n < 0 || (n && !stats) || !(loss_scale > 0)) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "clip_scale: bad arguments (n=%d)", n);
        return;
    }
    ms_clip_scale_of(out, stats, n, loss_scale, grad_clip);
}

void ms_cpu_scale(ms_kctx *ctx, float *x, size_t n, float s)
{
    if (n && !x) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "scale: x is NULL (n=%zu)", n);
        return;
    }
    for (size_t i = 0; i < n; i++) x[i] *= s;
}
