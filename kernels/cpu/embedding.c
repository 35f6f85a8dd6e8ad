/* embedding.c — token + position embedding, forward and backward. */
#include "kernels/cpu/cpu_kernels.h"

void ms_cpu_embedding_fwd(ms_kctx *ctx, ms_dtype dt, void *out, const int32_t *tok,
                          const void *wte, const void *wpe, int B, int T, int C)
{
    if (!ms_cpu_dtype_ok(dt) || B < 0 || T < 0 || C < 0 ||
        (B && T && C && (!out || !tok || !wte || !wpe))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "embedding_fwd: bad arguments (B=%d T=%d C=%d)", B, T, C);
        return;
    }
    size_t rows = (size_t)B * T;
    for (size_t n = 0; n < rows; n++) {
        if (tok[n] < 0) {
            ms_cpu_fail(ctx, MS_CPU_EARG, "embedding_fwd: token %d at row %zu", tok[n], n);
            continue;
        }
        size_t wrow = (size_t)tok[n] * C, prow = (n % (size_t)T) * C, orow = n * C;
        for (int c = 0; c < C; c++)
            ms_st(out, dt, orow + c, ms_ld(wte, dt, wrow + c) + ms_ld(wpe, dt, prow + c));
    }
}

void ms_cpu_embedding_bwd(ms_kctx *ctx, ms_dtype dt, float *dwte, float *dwpe, const void *dout,
                          const int32_t *tok, int B, int T, int C)
{
    if (!ms_cpu_dtype_ok(dt) || B < 0 || T < 0 || C < 0 ||
        (B && T && C && (!dwte || !dwpe || !dout || !tok))) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "embedding_bwd: bad arguments (B=%d T=%d C=%d)", B, T, C);
        return;
    }
    size_t rows = (size_t)B * T;
    for (size_t n = 0; n < rows; n++) {
        if (tok[n] < 0) {
            ms_cpu_fail(ctx, MS_CPU_EARG, "embedding_bwd: token %d at row %zu", tok[n], n);
            continue;
        }
        float *gw = dwte + (size_t)tok[n] * C, *gp = dwpe + (n % (size_t)T) * C;
        for (int c = 0; c < C; c++) {
            float g = ms_ld(dout, dt, n * C + c);
            gw[c] += g;
            gp[c] += g;
        }
    }
}
