/* adamw.c — one AdamW step on fp32 parameters (decoupled weight decay on
 * every element), in float exactly as the formula in ops.h, plus the
 * optional low-precision copy of the updated parameters. */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>

void ms_cpu_adamw(ms_kctx *ctx, float *p, const float *grad, float *m, float *v, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int t, float grad_scale,
                  const float *dmul, void *copy, ms_dtype copy_dt, size_t n_copy)
{
    if (t < 1 || (n && (!p || !grad || !m || !v)) ||
        (copy && (!ms_cpu_dtype_ok(copy_dt) || n_copy > n))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "adamw: bad arguments (n=%zu t=%d n_copy=%zu)", n, t, n_copy);
        return;
    }
    if (dmul) {
        if (dmul[1] == 0.0f) return; /* a skipped step */
        grad_scale = dmul[0];
    }
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * grad_scale;
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        float mhat = m[i] / bc1, vhat = v[i] / bc2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
    if (copy)
        for (size_t i = 0; i < n_copy; i++) ms_st(copy, copy_dt, i, p[i]);
}
