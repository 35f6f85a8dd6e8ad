/* gelu.c — GELU (tanh approximation, GPT-2's) forward and backward, and the
 * scalar formulas every CPU op and test shares. */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

float ms_gelu_f(float x)
{
    float u = GELU_K * (x + GELU_C * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

float ms_gelu_grad_f(float x)
{
    float u = GELU_K * (x + GELU_C * x * x * x);
    float t = tanhf(u);
    float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

void ms_cpu_gelu_fwd(ms_kctx *ctx, ms_dtype dt, void *out, const void *x, size_t n)
{
    if (!ms_cpu_dtype_ok(dt) || (n && (!out || !x))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "gelu_fwd: bad arguments (n=%zu)", n);
        return;
    }
    for (size_t i = 0; i < n; i++) ms_st(out, dt, i, ms_gelu_f(ms_ld(x, dt, i)));
}

void ms_cpu_gelu_bwd(ms_kctx *ctx, ms_dtype dt, void *dx, const void *dout, const void *x, size_t n)
{
    if (!ms_cpu_dtype_ok(dt) || (n && (!dx || !dout || !x))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "gelu_bwd: bad arguments (n=%zu)", n);
        return;
    }
    /* element i of dout is read before element i of dx is written: dx may alias dout */
    for (size_t i = 0; i < n; i++)
        ms_st(dx, dt, i, ms_ld(dout, dt, i) * ms_gelu_grad_f(ms_ld(x, dt, i)));
}
