/* layer_block.c — a pre-norm transformer block:
 *   res2 = x + att_proj(attention(qkv(norm1(x))))
 *   out  = res2 + proj(gelu(fc(norm2(res2))))
 * Residual adds are fused into the projection matmuls (beta = 1 on the
 * residual), GELU into the fc matmul's epilogue (which also keeps the
 * pre-activation for backward), dGELU into the backward matmul's epilogue.
 * norm2's output is read only by the fc matmul and its weight gradient, so
 * it is not saved: forward writes it into the arena, backward recomputes it
 * from the saved res2 (N*C*es bytes less per block and micro-batch). */
#include "trainer/exec_internal.h"

int ms_block_forward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x)
{
    ms_device *d = L->dev;
    const ms_ops *o = d->ops;
    ms_kctx *k = &d->k;
    ms_acts *a = &L->a;
    ms_dtype dt = m->dt;
    int N = m->B * m->T, C = m->C, H = m->H;
    /* scratch: ln2 [N,C], dead after the fc matmul */
    void *ln2 = ms_scratch_arena(s, ms_scratch_round((size_t)N * C * ms_dtype_size(dt)));
    if (!ln2) return MS_EOOM;

    ms_exec_norm_fwd(m, L, 0, a->ln1, a->ln1_mean, a->ln1_rstd, x, w_of(L, "ln1_w"), w_of(L, "ln1_b"));
    o->matmul(k, dt, dt, 0, 1, N, 3 * C, C, 1.0f, a->ln1, wc_of(m, L, "qkv_w"), 0.0f, NULL, a->qkv,
              wc_of(m, L, "qkv_b"), MS_EPI_NONE, NULL);
    o->attention_fwd(k, dt, a->att, a->lse, a->qkv, m->B, m->T, C, m->NH);
    o->matmul(k, dt, dt, 0, 1, N, C, C, 1.0f, a->att, wc_of(m, L, "att_w"), 1.0f, x, a->res2,
              wc_of(m, L, "att_b"), MS_EPI_NONE, NULL);
    ms_exec_norm_fwd(m, L, 1, ln2, a->ln2_mean, a->ln2_rstd, a->res2, w_of(L, "ln2_w"), w_of(L, "ln2_b"));
    o->matmul(k, dt, dt, 0, 1, N, H, C, 1.0f, ln2, wc_of(m, L, "fc_w"), 0.0f, NULL, a->fc_gelu,
              wc_of(m, L, "fc_b"), MS_EPI_GELU, a->fc_pre);
    o->matmul(k, dt, dt, 0, 1, N, C, H, 1.0f, a->fc_gelu, wc_of(m, L, "proj_w"), 1.0f, a->res2, a->out,
              wc_of(m, L, "proj_b"), MS_EPI_NONE, NULL);
    return MS_OK;
}

/* Weight gradient dW[out,in] += dy[N,out]^T · x[N,in] (= with
 * m->wgrad_overwrite: dW is grad_whole, model.c) and db += colsum(dy). */
static void linear_wgrad(const ms_model *m, ms_layer *L, const char *wname, const char *bname,
                         const void *dy, const void *xin, int N, int out, int in)
{
    ms_device *d = L->dev;
    float *gw = g_of(L, wname);
    const float beta = m->wgrad_overwrite ? 0.0f : 1.0f;
    d->ops->matmul(&d->k, m->dt, MS_F32, 1, 0, out, in, N, 1.0f, dy, xin, beta, gw, gw, NULL, MS_EPI_NONE, NULL);
    d->ops->bias_grad(&d->k, m->dt, g_of(L, bname), dy, N, out);
}

size_t ms_block_scratch_need(const ms_model *m, const ms_layer *L)
{
    size_t es = ms_dtype_size(m->dt), N = (size_t)m->B * m->T, C = m->C, H = m->H;
    size_t wide = H > 3 * C ? H : 3 * C;
    /* backward's views (ms_block_backward); they include forward's ln2 [N,C] */
    return ms_scratch_round(N * C * es) + ms_scratch_round(N * wide * es) + ms_exec_norm_recompute_need(m) +
           L->dev->ops->attention_bwd_scratch(m->dt, m->B, m->T, m->C, m->NH);
}

int ms_block_backward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x)
{
    ms_device *d = L->dev;
    const ms_ops *o = d->ops;
    ms_kctx *k = &d->k;
    ms_acts *a = &L->a;
    ms_dtype dt = m->dt;
    int N = m->B * m->T, C = m->C, H = m->H, B = m->B, T = m->T, NH = m->NH;
    size_t es = ms_dtype_size(dt);
    size_t wide = (size_t)(H > 3 * C ? H : 3 * C);

    void *dres = s->buf[MS_TR_DRES]; /* gradient of the block output, updated in place */
    /* scratch: dmid [N,C] (ln2 recomputed, dln2, datt, dln1), dbig [N,max(H,3C)]
     * (dfc, dqkv), norm2's recomputed statistics, attention's */
    size_t b_mid = ms_scratch_round((size_t)N * C * es), b_big = ms_scratch_round((size_t)N * wide * es);
    char *arena = ms_scratch_arena(s, ms_block_scratch_need(m, L));
    if (!arena) return MS_EOOM;
    void *dmid = arena, *dbig = arena + b_mid;
    float *stats = (float *)(void *)(arena + b_mid + b_big);
    void *scr = arena + b_mid + b_big + ms_exec_norm_recompute_need(m);

    /* MLP: out = res2 + proj(gelu(fc(ln2))) */
    o->matmul(k, dt, dt, 0, 0, N, H, C, 1.0f, dres, wc_of(m, L, "proj_w"), 0.0f, NULL, dbig, NULL,
              MS_EPI_DGELU, a->fc_pre);
    linear_wgrad(m, L, "proj_w", "proj_b", dres, a->fc_gelu, N, C, H);
    /* ln2 again, into dmid before the fc input gradient needs it: no [N,C]
     * more than when it was saved */
    ms_exec_norm_recompute(m, L, dmid, stats, a->res2, w_of(L, "ln2_w"), w_of(L, "ln2_b"));
    linear_wgrad(m, L, "fc_w", "fc_b", dbig, dmid, N, H, C);
    o->matmul(k, dt, dt, 0, 0, N, C, H, 1.0f, dbig, wc_of(m, L, "fc_w"), 0.0f, NULL, dmid, NULL, MS_EPI_NONE, NULL);
    ms_exec_norm_bwd(m, L, dres, dres, g_of(L, "ln2_w"), g_of(L, "ln2_b"), dmid, a->res2, a->ln2_mean,
                     a->ln2_rstd, w_of(L, "ln2_w"));
    /* attention: res2 = x + att_proj(attention(qkv(ln1))) */
    o->matmul(k, dt, dt, 0, 0, N, C, C, 1.0f, dres, wc_of(m, L, "att_w"), 0.0f, NULL, dmid, NULL, MS_EPI_NONE, NULL);
    linear_wgrad(m, L, "att_w", "att_b", dres, a->att, N, C, C);
    o->attention_bwd(k, dt, dbig, dmid, a->qkv, a->att, a->lse, scr, B, T, C, NH);
    o->matmul(k, dt, dt, 0, 0, N, C, 3 * C, 1.0f, dbig, wc_of(m, L, "qkv_w"), 0.0f, NULL, dmid, NULL,
              MS_EPI_NONE, NULL);
    linear_wgrad(m, L, "qkv_w", "qkv_b", dbig, a->ln1, N, 3 * C, C);
    ms_exec_norm_bwd(m, L, dres, dres, g_of(L, "ln1_w"), g_of(L, "ln1_b"), dmid, x, a->ln1_mean, a->ln1_rstd,
                     w_of(L, "ln1_w"));
    return MS_OK;
}
