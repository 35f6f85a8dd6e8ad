/* residual.c — out = a + b elementwise (out may alias a or b). */
#include "kernels/cpu/cpu_kernels.h"

void ms_cpu_residual_fwd(ms_kctx *ctx, ms_dtype dt, void *out, const void *a, const void *b, size_t n)
{
    if (!ms_cpu_dtype_ok(dt) || (n && (!out || !a || !b))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "residual_fwd: bad arguments (n=%zu)", n);
        return;
    }
    for (size_t i = 0; i < n; i++) ms_st(out, dt, i, ms_ld(a, dt, i) + ms_ld(b, dt, i));
}
