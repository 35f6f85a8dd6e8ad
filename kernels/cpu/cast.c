/* cast.c — dtype conversion through float (round to nearest even, NaN/Inf
 * kept). Same-type casts are plain copies, so they are bit exact. */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

void ms_cpu_cast(ms_kctx *ctx, ms_dtype dst_dt, void *dst, ms_dtype src_dt, const void *src, size_t n)
{
    if (!ms_cpu_dtype_ok(dst_dt) || !ms_cpu_dtype_ok(src_dt) || (n && (!dst || !src))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "cast: bad arguments (n=%zu)", n);
        return;
    }
    if (dst_dt == src_dt) {
        if (n) memmove(dst, src, n * ms_dtype_size(src_dt));
        return;
    }
    for (size_t i = 0; i < n; i++) ms_st(dst, dst_dt, i, ms_ld(src, src_dt, i));
}
