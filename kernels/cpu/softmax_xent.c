/* softmax_xent.c — softmax cross-entropy over the first Vreal of V columns,
 * loss per row and the gradient written in place over the logits.
 * Numerically stable (max subtracted, exp sums in double). Padding columns
 * (>= Vreal) and ignored rows (target < 0) are written as exact zeros. A
 * target >= Vreal is an error: the row is treated as ignored. */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>

void ms_cpu_softmax_xent(ms_kctx *ctx, ms_dtype dt, float *losses, void *logits,
                         const int32_t *targets, int N, int V, int Vreal, float dscale)
{
    if (!ms_cpu_dtype_ok(dt) || N < 0 || Vreal < 1 || V < Vreal ||
        (N && (!losses || !logits || !targets))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "softmax_xent: bad arguments (N=%d V=%d Vreal=%d)", N, V, Vreal);
        return;
    }
    for (int i = 0; i < N; i++) {
        size_t row = (size_t)i * V;
        int t = targets[i];
        if (t >= Vreal) {
            ms_cpu_fail(ctx, MS_CPU_EARG, "softmax_xent: target %d >= Vreal %d at row %d", t, Vreal, i);
            t = -1;
        }
        if (t < 0) {
            losses[i] = 0.0f;
            for (int j = 0; j < V; j++) ms_st(logits, dt, row + j, 0.0f);
            continue;
        }
        float mx = -INFINITY;
        for (int j = 0; j < Vreal; j++) {
            float z = ms_ld(logits, dt, row + j);
            if (z > mx) mx = z;
        }
        double s = 0;
        for (int j = 0; j < Vreal; j++) s += exp((double)ms_ld(logits, dt, row + j) - mx);
        double lse = mx + log(s);
        losses[i] = (float)(lse - ms_ld(logits, dt, row + t));
        for (int j = 0; j < Vreal; j++) {
            double p = exp((double)ms_ld(logits, dt, row + j) - lse);
            ms_st(logits, dt, row + j, (float)((p - (j == t)) * dscale));
        }
        for (int j = Vreal; j < V; j++) ms_st(logits, dt, row + j, 0.0f);
    }
}
