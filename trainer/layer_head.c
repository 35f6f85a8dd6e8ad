/* layer_head.c — the last layer: final norm, LM head, softmax cross-entropy.
 *
 * Forward keeps only the normalised input. Backward computes the logits a
 * chunk of rows at a time, turns them into their gradient in place (fused
 * softmax + cross-entropy), and uses each chunk at once for the input
 * gradient and the head's weight gradient: the [N, V] logits never exist
 * whole (for GPT-2 small at B=16 that would be 1.6 GB in bf16). The loss is
 * known at the end of backward. */
#include "trainer/exec_internal.h"

#include <stdio.h>
#include <stdlib.h>

int ms_head_forward(ms_model *m, ms_layer *L, const void *x, const int32_t *ids)
{
    ms_device *d = L->dev;
    size_t N = (size_t)m->B * m->T;
    if (ms_dev_h2d(d, L->a.targets, ids, N * 4)) return MS_EFAIL;
    ms_exec_norm_fwd(m, L, 0, L->a.lnf, L->a.lnf_mean, L->a.lnf_rstd, x, w_of(L, "lnf_w"), w_of(L, "lnf_b"));
    return MS_OK;
}

/* The configured head_chunk, or the fewest equal chunks of at most
 * HEAD_CHUNK_BYTES each. Equal, because a short last chunk pays a whole
 * weight-gradient pass (the [V, C] fp32 accumulator is read and written once
 * a chunk, whatever its rows) for few rows. 320 MiB, because fewer chunks
 * mean fewer such passes and less split-K in the input gradient, and more
 * would take gpt2-small past its memory target (0.8x torch.compile's pool,
 * issue 15). Measured on an H200, gpt2-small bf16, untraced tokens/s in one
 * call: six 2560-row chunks and a 1024-row tail (the 256 MiB rule before)
 * 551k; seven of 2341 554k; five of 3277 (this rule, 69 MiB more logits)
 * 558k; four of 4096 559k; one of 16384 565k. */
#define HEAD_CHUNK_BYTES ((size_t)320 << 20)
int ms_head_chunk_rows(const ms_model *m)
{
    int N = m->B * m->T;
    if (m->cfg.head_chunk > 0) return m->cfg.head_chunk < N ? m->cfg.head_chunk : N;
    size_t per_row = (size_t)m->V * ms_dtype_size(m->dt);
    size_t fit = HEAD_CHUNK_BYTES / per_row; /* rows a chunk may hold */
    if (fit < 1) fit = 1;
    size_t chunks = ((size_t)N + fit - 1) / fit;
    return (int)(((size_t)N + chunks - 1) / chunks);
}

size_t ms_head_scratch_need(const ms_model *m)
{
    size_t es = ms_dtype_size(m->dt);
    return ms_scratch_round((size_t)m->B * m->T * m->C * es) + (size_t)ms_head_chunk_rows(m) * m->V * es;
}

int ms_head_backward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x, float dscale, double *loss_sum)
{
    ms_device *d = L->dev;
    const ms_ops *o = d->ops;
    ms_kctx *k = &d->k;
    ms_dtype dt = m->dt;
    int N = m->B * m->T, C = m->C, V = m->V;
    size_t es = ms_dtype_size(dt);
    /* Tied: the LM head is the embedding's wte (same device: the planner keeps them together). */
    ms_layer *E = m->cfg.tied ? &m->layers[0] : L;
    if (m->cfg.tied && E->dev != d) {
        snprintf(d->k.error, sizeof d->k.error, "tied embedding and head on different devices");
        d->k.status = MS_EFAIL;
        return MS_EFAIL;
    }
    if (m->cfg.tied) {
        int rc = ms_exec_ensure_grads(m, E);
        if (rc) return rc;
    }
    const void *W = wc_of(m, E, m->cfg.tied ? "wte" : "lm_w");
    float *gW = g_of(E, m->cfg.tied ? "wte" : "lm_w");
    int rows = ms_head_chunk_rows(m);
    void *dres = ms_scratch_get(s, MS_TR_DRES, (size_t)N * C * es);
    if (!dres) return MS_EOOM;
    /* scratch: dlnf [N,C], one logits chunk [rows,V] */
    size_t b_dlnf = ms_scratch_round((size_t)N * C * es);
    char *arena = ms_scratch_arena(s, ms_head_scratch_need(m));
    if (!arena) return MS_EOOM;
    void *dlnf = arena, *logits = arena + b_dlnf;
    for (int r0 = 0; r0 < N; r0 += rows) {
        int n = N - r0 < rows ? N - r0 : rows;
        const void *xin = row_ptr(L->a.lnf, r0, C, dt);
        o->matmul(k, dt, dt, 0, 1, n, V, C, 1.0f, xin, W, 0.0f, NULL, logits, NULL, MS_EPI_NONE, NULL);
        o->softmax_xent(k, dt, L->a.losses + r0, logits, L->a.targets + r0, n, V, V, dscale);
        o->matmul(k, dt, dt, 0, 0, n, C, V, 1.0f, logits, W, 0.0f, NULL, row_ptr(dlnf, r0, C, dt), NULL,
                  MS_EPI_NONE, NULL);
        o->matmul(k, dt, MS_F32, 1, 0, V, C, n, 1.0f, logits, xin, 1.0f, gW, gW, NULL, MS_EPI_NONE, NULL);
    }
    ms_exec_norm_bwd(m, L, dres, NULL, g_of(L, "lnf_w"), g_of(L, "lnf_b"), dlnf, x, L->a.lnf_mean,
                     L->a.lnf_rstd, w_of(L, "lnf_w"));
    return loss_sum ? ms_head_add_loss(m, L, loss_sum) : MS_OK;
}

int ms_head_add_loss(ms_model *m, ms_layer *L, double *loss_sum)
{
    float *h = malloc(ms_layer_loss_rows(m) * 4);
    if (!h) return MS_EFAIL;
    int rc = ms_dev_d2h(L->dev, h, L->a.losses, ms_layer_loss_rows(m) * 4);
    if (!rc) *loss_sum += ms_layer_loss_sum(m, h);
    free(h);
    return rc ? MS_EFAIL : MS_OK;
}
