/* layernorm.c — LayerNorm over the C features of each row (eps 1e-5, biased
 * variance). Statistics are summed in double; mean/rstd are saved as float
 * and the output is computed from those saved values, so backward sees
 * exactly the statistics forward used. */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>

#define LN_EPS 1e-5

void ms_cpu_layernorm_fwd(ms_kctx *ctx, ms_dtype dt, void *out, float *mean, float *rstd,
                          const void *x, const float *w, const float *b, int N, int C)
{
    if (!ms_cpu_dtype_ok(dt) || N < 0 || C <= 0 ||
        (N && (!out || !mean || !rstd || !x || !w || !b))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "layernorm_fwd: bad arguments (N=%d C=%d)", N, C);
        return;
    }
    for (int n = 0; n < N; n++) {
        size_t row = (size_t)n * C;
        double s = 0;
        for (int c = 0; c < C; c++) s += ms_ld(x, dt, row + c);
        double mu = s / C, ss = 0;
        for (int c = 0; c < C; c++) {
            double d = ms_ld(x, dt, row + c) - mu;
            ss += d * d;
        }
        float m = (float)mu, r = (float)(1.0 / sqrt(ss / C + LN_EPS));
        mean[n] = m;
        rstd[n] = r;
        for (int c = 0; c < C; c++)
            ms_st(out, dt, row + c, (ms_ld(x, dt, row + c) - m) * r * w[c] + b[c]);
    }
}

void ms_cpu_layernorm_bwd(ms_kctx *ctx, ms_dtype dt, void *dx, const void *dresid, float *dw, float *db,
                          const void *dout, const void *x, const float *mean, const float *rstd,
                          const float *w, int N, int C)
{
    if (!ms_cpu_dtype_ok(dt) || N < 0 || C <= 0 ||
        (N && (!dx || !dw || !db || !dout || !x || !mean || !rstd || !w))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "layernorm_bwd: bad arguments (N=%d C=%d)", N, C);
        return;
    }
    for (int n = 0; n < N; n++) {
        size_t row = (size_t)n * C;
        float m = mean[n], r = rstd[n];
        /* dx = r * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w */
        double sg = 0, sgx = 0;
        for (int c = 0; c < C; c++) {
            float go = ms_ld(dout, dt, row + c);
            float xhat = (ms_ld(x, dt, row + c) - m) * r;
            float g = go * w[c];
            sg += g;
            sgx += (double)g * xhat;
            dw[c] += go * xhat;
            db[c] += go;
        }
        float mg = (float)(sg / C), mgx = (float)(sgx / C);
        for (int c = 0; c < C; c++) {
            float xhat = (ms_ld(x, dt, row + c) - m) * r;
            float g = ms_ld(dout, dt, row + c) * w[c];
            float v = r * (g - mg - xhat * mgx);
            /* read dresid before the store: it may alias dx */
            if (dresid) v += ms_ld(dresid, dt, row + c);
            ms_st(dx, dt, row + c, v);
        }
    }
}
