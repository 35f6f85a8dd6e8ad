/* attention.c — causal multi-head self-attention, the plain-C reference
 * (contract: attention_fwd / attention_bwd_scratch / attention_bwd in
 * kernels/ops.h). Layouts: qkv [B,T,3C] = q|k|v, each [B,T,nh,hs]; out
 * [B,T,C]; lse [B,nh,T]. Scores are s_tj = scale * q_t.k_j for j <= t,
 * scale = 1/sqrt(hs); lse_t = log sum_j exp(s_tj) (natural log).
 *
 * Math is float storage with double accumulation (dot products, sums), the
 * convention of every CPU kernel; memory is one T-row of scores at a time in
 * forward, and in backward the caller's scratch holds one head's dK/dV
 * accumulators plus two T-rows (linear in T, never T x T). */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Shared argument check; returns 1 when the call may proceed. */
static int attn_args_ok(ms_kctx *ctx, const char *op, ms_dtype dt, int B, int T, int C, int nh)
{
    if (!ms_cpu_dtype_ok(dt) || B < 0 || T < 0 || C <= 0 || nh <= 0 || C % nh != 0) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "%s: bad arguments (B=%d T=%d C=%d nh=%d)", op, B, T, C, nh);
        return 0;
    }
    return 1;
}

/* Element offsets of q/k/v row (b,t) of head h inside qkv, and of out row. */
static size_t qkv_at(int b, int t, int h, int part, int T, int C, int hs)
{
    return ((size_t)b * T + t) * 3 * (size_t)C + (size_t)part * C + (size_t)h * hs;
}
static size_t out_at(int b, int t, int h, int T, int C, int hs)
{
    return ((size_t)b * T + t) * (size_t)C + (size_t)h * hs;
}

static double dot_ld(const void *x, size_t xo, const void *y, size_t yo, ms_dtype dt, int n)
{
    double s = 0;
    for (int d = 0; d < n; d++) s += (double)ms_ld(x, dt, xo + d) * ms_ld(y, dt, yo + d);
    return s;
}

void ms_cpu_attention_fwd(ms_kctx *ctx, ms_dtype dt, void *out, float *lse, const void *qkv,
                          int B, int T, int C, int nh)
{
    if (!attn_args_ok(ctx, "attention_fwd", dt, B, T, C, nh)) return;
    if (B == 0 || T == 0) return;
    if (!out || !lse || !qkv) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "attention_fwd: NULL buffer");
        return;
    }
    int hs = C / nh;
    double scale = 1.0 / sqrt((double)hs);
    double *srow = malloc(((size_t)T + hs) * sizeof *srow); /* scores, then the output row */
    if (!srow) {
        ms_cpu_fail(ctx, MS_CPU_ENOMEM, "attention_fwd: out of memory (T=%d)", T);
        return;
    }
    double *acc = srow + T;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int t = 0; t < T; t++) {
                size_t qo = qkv_at(b, t, h, 0, T, C, hs);
                double mx = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    srow[j] = scale * dot_ld(qkv, qo, qkv, qkv_at(b, j, h, 1, T, C, hs), dt, hs);
                    if (srow[j] > mx) mx = srow[j];
                }
                double sum = 0;
                for (int j = 0; j <= t; j++) {
                    srow[j] = exp(srow[j] - mx);
                    sum += srow[j];
                }
                memset(acc, 0, (size_t)hs * sizeof *acc);
                for (int j = 0; j <= t; j++) {
                    size_t vo = qkv_at(b, j, h, 2, T, C, hs);
                    for (int d = 0; d < hs; d++) acc[d] += srow[j] * ms_ld(qkv, dt, vo + d);
                }
                size_t oo = out_at(b, t, h, T, C, hs);
                for (int d = 0; d < hs; d++) ms_st(out, dt, oo + d, (float)(acc[d] / sum));
                lse[((size_t)b * nh + h) * T + t] = (float)(mx + log(sum));
            }
    free(srow);
}

/* Scratch: dK and dV accumulators of one head (T*hs each), then the p and dS
 * rows of one query (T each) and its dQ row (hs), all double. */
size_t ms_cpu_attention_bwd_scratch(ms_dtype dt, int B, int T, int C, int nh)
{
    (void)dt;
    (void)B;
    if (T <= 0 || C <= 0 || nh <= 0 || C % nh != 0) return 0;
    size_t hs = (size_t)(C / nh);
    return (2 * (size_t)T * hs + 2 * (size_t)T + hs) * sizeof(double);
}

void ms_cpu_attention_bwd(ms_kctx *ctx, ms_dtype dt, void *dqkv, const void *dout, const void *qkv,
                          const void *out, const float *lse, void *scratch,
                          int B, int T, int C, int nh)
{
    if (!attn_args_ok(ctx, "attention_bwd", dt, B, T, C, nh)) return;
    if (B == 0 || T == 0) return;
    if (!dqkv || !dout || !qkv || !out || !lse || !scratch) {
        ms_cpu_fail(ctx, MS_CPU_EARG, "attention_bwd: NULL buffer");
        return;
    }
    int hs = C / nh;
    double scale = 1.0 / sqrt((double)hs);
    double *dk = scratch, *dv = dk + (size_t)T * hs, *p = dv + (size_t)T * hs;
    double *ds = p + T, *dq = ds + T;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++) {
            memset(dk, 0, 2 * (size_t)T * hs * sizeof *dk);
            for (int t = 0; t < T; t++) {
                size_t qo = qkv_at(b, t, h, 0, T, C, hs), oo = out_at(b, t, h, T, C, hs);
                double lse_t = lse[((size_t)b * nh + h) * T + t];
                /* D_t = dO_t . O_t = sum_j p_tj dP_tj: the softmax Jacobian's row term */
                double Dt = dot_ld(dout, oo, out, oo, dt, hs);
                for (int j = 0; j <= t; j++) {
                    double s = scale * dot_ld(qkv, qo, qkv, qkv_at(b, j, h, 1, T, C, hs), dt, hs);
                    p[j] = exp(s - lse_t);
                    double dp = dot_ld(dout, oo, qkv, qkv_at(b, j, h, 2, T, C, hs), dt, hs);
                    ds[j] = p[j] * (dp - Dt);
                }
                memset(dq, 0, (size_t)hs * sizeof *dq);
                for (int j = 0; j <= t; j++) {
                    size_t ko = qkv_at(b, j, h, 1, T, C, hs);
                    double *dkj = dk + (size_t)j * hs, *dvj = dv + (size_t)j * hs;
                    for (int d = 0; d < hs; d++) {
                        dq[d] += ds[j] * ms_ld(qkv, dt, ko + d);
                        dkj[d] += ds[j] * ms_ld(qkv, dt, qo + d);
                        dvj[d] += p[j] * ms_ld(dout, dt, oo + d);
                    }
                }
                for (int d = 0; d < hs; d++) ms_st(dqkv, dt, qo + d, (float)(scale * dq[d]));
            }
            for (int j = 0; j < T; j++) {
                size_t ko = qkv_at(b, j, h, 1, T, C, hs), vo = qkv_at(b, j, h, 2, T, C, hs);
                for (int d = 0; d < hs; d++) {
                    ms_st(dqkv, dt, ko + d, (float)(scale * dk[(size_t)j * hs + d]));
                    ms_st(dqkv, dt, vo + d, (float)dv[(size_t)j * hs + d]);
                }
            }
        }
}
