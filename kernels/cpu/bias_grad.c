/* bias_grad.c — db[j] += sum over the M rows of dy[i,j]. Column sums are
 * taken in double (rows walked in memory order), then added to db once. */
#include "kernels/cpu/cpu_kernels.h"

#include <stdlib.h>

void ms_cpu_bias_grad(ms_kctx *ctx, ms_dtype dt, float *db, const void *dy, int M, int N)
{
    if (!ms_cpu_dtype_ok(dt) || M < 0 || N < 0 || (M && N && (!db || !dy))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "bias_grad: bad arguments (M=%d N=%d)", M, N);
        return;
    }
    if (N == 0) return;
    double *sum = calloc((size_t)N, sizeof *sum);
    if (!sum) {
        ms_cpu_fail(ctx, MS_CPU_ENOMEM, "bias_grad: no memory for %d columns", N);
        return;
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) sum[j] += ms_ld(dy, dt, (size_t)i * N + j);
    for (int j = 0; j < N; j++) db[j] += (float)sum[j];
    free(sum);
}
