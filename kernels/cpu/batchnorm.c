/* batchnorm.c — BatchNorm in training mode: statistics of each of the C
 * features over the N rows (eps 1e-5, biased variance for normalising,
 * unbiased for the running variance). Rows are walked in memory order with
 * per-feature sums in double scratch, so large inputs stay cache friendly. */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>
#include <stdlib.h>

#define BN_EPS 1e-5

void ms_cpu_batchnorm_fwd(ms_kctx *ctx, ms_dtype dt, void *out, float *mean, float *rstd,
                          float *run_mean, float *run_var, float momentum,
                          const void *x, const float *w, const float *b, int N, int C)
{
    /* N >= 2: the unbiased running variance divides by N-1 */
    if (!ms_cpu_dtype_ok(dt) || N < 2 || C < 0 ||
        (C && (!out || !mean || !rstd || !run_mean || !run_var || !x || !w || !b))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "batchnorm_fwd: bad arguments (N=%d C=%d)", N, C);
        return;
    }
    if (C == 0) return;
    double *sum = calloc(2 * (size_t)C, sizeof *sum);
    if (!sum) {
        ms_cpu_fail(ctx, MS_CPU_ENOMEM, "batchnorm_fwd: no memory for %d features", C);
        return;
    }
    double *sq = sum + C;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) sum[c] += ms_ld(x, dt, (size_t)n * C + c);
    for (int c = 0; c < C; c++) sum[c] /= N; /* now the mean */
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double d = ms_ld(x, dt, (size_t)n * C + c) - sum[c];
            sq[c] += d * d;
        }
    for (int c = 0; c < C; c++) {
        double var = sq[c] / N;
        mean[c] = (float)sum[c];
        rstd[c] = (float)(1.0 / sqrt(var + BN_EPS));
        run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * (float)sum[c];
        run_var[c] = (1.0f - momentum) * run_var[c] + momentum * (float)(var * N / (N - 1));
    }
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)n * C + c;
            ms_st(out, dt, i, (ms_ld(x, dt, i) - mean[c]) * rstd[c] * w[c] + b[c]);
        }
    free(sum);
}

void ms_cpu_batchnorm_bwd(ms_kctx *ctx, ms_dtype dt, void *dx, const void *dresid, float *dw, float *db,
                          const void *dout, const void *x, const float *mean, const float *rstd,
                          const float *w, int N, int C)
{
    if (!ms_cpu_dtype_ok(dt) || N < 1 || C < 0 ||
        (C && (!dx || !dw || !db || !dout || !x || !mean || !rstd || !w))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "batchnorm_bwd: bad arguments (N=%d C=%d)", N, C);
        return;
    }
    if (C == 0) return;
    /* per feature: sum of dout (= db part) and sum of dout * xhat (= dw part) */
    double *sdo = calloc(2 * (size_t)C, sizeof *sdo);
    if (!sdo) {
        ms_cpu_fail(ctx, MS_CPU_ENOMEM, "batchnorm_bwd: no memory for %d features", C);
        return;
    }
    double *sdox = sdo + C;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)n * C + c;
            float go = ms_ld(dout, dt, i);
            float xhat = (ms_ld(x, dt, i) - mean[c]) * rstd[c];
            sdo[c] += go;
            sdox[c] += (double)go * xhat;
        }
    /* dx = rstd * w * (dout - mean(dout) - xhat * mean(dout * xhat)) */
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)n * C + c;
            float xhat = (ms_ld(x, dt, i) - mean[c]) * rstd[c];
            float mg = (float)(sdo[c] / N), mgx = (float)(sdox[c] / N);
            float v = rstd[c] * w[c] * (ms_ld(dout, dt, i) - mg - xhat * mgx);
            if (dresid) v += ms_ld(dresid, dt, i); /* read before the store: may alias dx */
            ms_st(dx, dt, i, v);
        }
    for (int c = 0; c < C; c++) {
        dw[c] += (float)sdox[c];
        db[c] += (float)sdo[c];
    }
    free(sdo);
}
