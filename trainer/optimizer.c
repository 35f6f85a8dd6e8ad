/* optimizer.c — gradient statistics, clipping, loss scaling, AdamW. */
#include "trainer/optimizer.h"

#include "kernels/clip_scale.h"

#include <stdlib.h>
#include <string.h>

void ms_opt_init(ms_opt_state *st, const ms_config *cfg)
{
    memset(st, 0, sizeof *st);
    st->loss_scale = cfg->precision == MS_PREC_FP16 ? cfg->loss_scale : 1.0f;
}

int ms_opt_ensure_state(ms_model *m, ms_layer *L)
{
    (void)m;
    if (L->mv) return MS_OK;
    ms_dev_where(L->dev, L->index, MS_PH_OPTIMIZER);
    L->mv = ms_dev_alloc(L->dev, L->n_params * 8, MS_CAT_OPTIM, "adamw m+v", 1);
    return L->mv ? MS_OK : MS_EOOM;
}

float ms_opt_clip_factor(const ms_config *c, double grad_norm)
{
    if (c->grad_clip > 0 && grad_norm > c->grad_clip) return (float)(c->grad_clip / grad_norm);
    return 1.0f;
}

/* The grad_whole tensor at the lowest offset >= from, or NULL. */
static const ms_tensor *next_whole(const ms_layer *L, size_t from)
{
    const ms_tensor *best = NULL;
    for (int t = 0; t < L->n_tensors; t++)
        if (L->t[t].grad_whole && L->t[t].off >= from && (!best || L->t[t].off < best->off)) best = &L->t[t];
    return best;
}

/* Gradients to zero for the next step; with m->wgrad_overwrite, all but
 * the grad_whole tensors' (the next backward writes those without reading
 * them): the stretches between them, padding included. */
static void zero_grads(ms_model *m, int first, int last)
{
    for (int i = first; i <= last; i++) {
        ms_layer *L = &m->layers[i];
        if (!L->g) continue;
        size_t from = 0;
        for (const ms_tensor *next; m->wgrad_overwrite && (next = next_whole(L, from)); ) {
            if (next->off > from) ms_dev_memset0(L->dev, L->g + from, (next->off - from) * 4);
            from = next->off + next->rows * next->cols;
        }
        if (L->n_params > from) ms_dev_memset0(L->dev, L->g + from, (L->n_params - from) * 4);
    }
}

/* The skipped count and the fp16 loss scale, after a step applied or not. */
static void count_step(const ms_config *c, ms_opt_state *st, int finite)
{
    if (!finite) st->skipped++;
    /* dynamic loss scaling (fp16 only): halve on overflow, double after a window of good steps */
    if (c->precision != MS_PREC_FP16) return;
    if (!finite) {
        st->loss_scale = st->loss_scale > 1.0f ? st->loss_scale * 0.5f : 1.0f;
        st->good_steps = 0;
    } else if (++st->good_steps >= c->loss_scale_window) {
        st->loss_scale *= 2.0f;
        st->good_steps = 0;
    }
}

void ms_opt_end_step(ms_model *m, int first, int last, ms_opt_state *st, int finite)
{
    zero_grads(m, first, last);
    count_step(&m->cfg, st, finite);
}

size_t ms_opt_rec_bytes(int n_layers)
{
    return (size_t)n_layers * sizeof(ms_grad_stat) + 2 * sizeof(float);
}

/* Layers [first, last] on one device: the statistics, the multiplier
 * (clip_scale) and the update are all queued without the host waiting for
 * any of them, and the records are read back once, at the end, for the
 * norm the step reports. The multiplier and the skip decision are made on
 * the device from the same records with the host's arithmetic, so the
 * result is the same as the path below, bit for bit. */
int ms_opt_queue(ms_model *m, int first, int last, ms_scratch *s, ms_opt_state *st, void *rec)
{
    const ms_config *c = &m->cfg;
    ms_device *d = m->layers[first].dev;
    int n = last - first + 1;
    size_t bytes = ms_opt_rec_bytes(n);
    ms_dev_where(d, first, MS_PH_OPTIMIZER);
    /* the records borrow the layer-scratch arena, idle between steps (the
     * step's last micro-batch is queued before them on the same stream) */
    ms_grad_stat *gs = ms_scratch_arena(s, bytes);
    if (!gs) return MS_EOOM;
    float *mul = (float *)(void *)(gs + n);
    ms_dev_memset0(d, gs, bytes);
    for (int k = 0; k < n; k++) {
        ms_layer *L = &m->layers[first + k];
        if (L->g) d->ops->grad_stats(&d->k, L->g, L->n_params, &gs[k].sumsq, &gs[k].nonfinite);
    }
    d->ops->clip_scale(&d->k, mul, gs, n, st->loss_scale, c->grad_clip);
    /* every layer's state first: running out there leaves no layer updated */
    for (int i = first; i <= last; i++) {
        int rc = m->layers[i].g ? ms_opt_ensure_state(m, &m->layers[i]) : MS_OK;
        if (rc) return rc;
    }
    int t = st->t + 1; /* taken only if the device applies the step (ms_opt_finish) */
    for (int i = first; i <= last; i++) {
        ms_layer *L = &m->layers[i];
        if (!L->g) continue;
        ms_dev_where(d, i, MS_PH_OPTIMIZER);
        int mixed = L->wc != (void *)L->w;
        d->ops->adamw(&d->k, L->w, L->g, L->mv, L->mv + L->n_params, L->n_params, c->lr, c->beta1, c->beta2,
                      c->eps, c->weight_decay, t, 1.0f, mul, mixed ? L->wc : NULL, m->dt, mixed ? L->n_copy : 0);
    }
    zero_grads(m, first, last);
    /* the device's decision and the records in one read (they are adjacent):
     * one wait, not two, and the caller says when */
    return ms_dev_d2h_later(d, rec, gs, bytes) ? MS_EFAIL : MS_OK;
}

void ms_opt_finish(ms_model *m, int first, int last, ms_opt_state *st, const void *rec, ms_opt_result *res)
{
    const ms_config *c = &m->cfg;
    int n = last - first + 1;
    const ms_grad_stat *h = rec;
    const float *hmul = (const float *)(const void *)(h + n);
    float scale = st->loss_scale; /* the step's, before count_step moves it */
    memset(res, 0, sizeof *res);
    res->applied = hmul[1] != 0.0f;
    if (res->applied) st->t++;
    count_step(c, st, res->applied);
    float again[2]; /* what the device decided, from the same records */
    res->grad_norm = ms_clip_scale_of(again, h, n, scale, c->grad_clip);
}

int ms_opt_step(ms_model *m, int first, int last, ms_scratch **scratch, ms_opt_state *st, ms_opt_result *res)
{
    const ms_config *c = &m->cfg;
    memset(res, 0, sizeof *res);
    /* 1. statistics: one accumulator per layer, summed on the host in layer
     * order, so the global norm (and the clipping) is the same however the
     * layers are split over devices */
    int one = 1;
    for (int i = first + 1; i <= last; i++) one &= m->layers[i].dev == m->layers[first].dev;
    if (one) {
        void *rec = malloc(ms_opt_rec_bytes(last - first + 1));
        if (!rec) return MS_EFAIL;
        int rc = ms_opt_queue(m, first, last, scratch[first], st, rec);
        if (rc == MS_OK && ms_dev_sync(m->layers[first].dev)) rc = MS_EFAIL;
        if (rc == MS_OK) ms_opt_finish(m, first, last, st, rec, res);
        free(rec);
        return rc;
    }
    ms_grad_stat *all = calloc((size_t)(last - first + 1), sizeof *all);
    if (!all) return MS_EFAIL;
    for (int i = first; i <= last;) {
        ms_device *d = m->layers[i].dev;
        ms_scratch *s = scratch[i];
        int j = i;
        while (j <= last && m->layers[j].dev == d) j++;
        int n = j - i;
        ms_dev_where(d, i, MS_PH_OPTIMIZER);
        /* the statistics borrow the layer-scratch arena, idle between steps,
         * so the optimizer adds nothing to the device's transient peak */
        ms_grad_stat *gs = ms_scratch_arena(s, (size_t)n * sizeof(ms_grad_stat));
        if (!gs) { free(all); return MS_EOOM; }
        ms_dev_memset0(d, gs, (size_t)n * sizeof *gs);
        for (int k = 0; k < n; k++) {
            ms_layer *L = &m->layers[i + k];
            if (L->g) d->ops->grad_stats(&d->k, L->g, L->n_params, &gs[k].sumsq, &gs[k].nonfinite);
        }
        if (ms_dev_d2h(d, all + (i - first), gs, (size_t)n * sizeof *gs)) { free(all); return MS_EFAIL; }
        i = j;
    }
    float mul[2];
    res->grad_norm = ms_clip_scale_of(mul, all, last - first + 1, st->loss_scale, c->grad_clip);
    free(all);
    int finite = mul[1] != 0.0f;
    if (finite) {
        st->t++;
        for (int i = first; i <= last; i++) {
            ms_layer *L = &m->layers[i];
            if (!L->g) continue;
            int rc = ms_opt_ensure_state(m, L);
            if (rc) return rc;
            ms_device *d = L->dev;
            ms_dev_where(d, i, MS_PH_OPTIMIZER);
            int mixed = L->wc != (void *)L->w;
            d->ops->adamw(&d->k, L->w, L->g, L->mv, L->mv + L->n_params, L->n_params, c->lr, c->beta1, c->beta2,
                          c->eps, c->weight_decay, st->t, mul[0], NULL, mixed ? L->wc : NULL, m->dt,
                          mixed ? L->n_copy : 0);
        }
        res->applied = 1;
    }
    ms_opt_end_step(m, first, last, st, finite);
    for (int i = first; i <= last; i++)
        if (i == first || m->layers[i].dev != m->layers[i - 1].dev)
            if (ms_dev_sync(m->layers[i].dev)) return MS_EFAIL;
    return MS_OK;
}
