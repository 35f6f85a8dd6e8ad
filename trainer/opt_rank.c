/* opt_rank.c — one rank's share of the optimizer step (opt_rank.h). */
#include "trainer/opt_rank.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int sharded(const ms_dist *d) { return d->zero && d->replicas > 1; }

void ms_opt_rank_share(const ms_dist *dist, const ms_layer *L, size_t *lo, size_t *hi, int for_stats)
{
    if (sharded(dist)) {
        *lo = ms_shard_lo(L->n_params, dist->replicas, dist->replica);
        *hi = ms_shard_hi(L->n_params, dist->replicas, dist->replica);
    } else {
        /* every replica holds the same summed gradient: count it once */
        *lo = 0;
        *hi = for_stats && dist->replica > 0 ? 0 : L->n_params;
    }
}

typedef struct { float sumsq; int nonfinite; } grad_stats_t;

int ms_opt_rank_stats(ms_model *m, int first, int last, ms_scratch *scr, const ms_dist *dist, double *sumsq,
                      long *nonfinite)
{
    ms_device *d = m->layers[first].dev;
    int n = last - first + 1;
    ms_dev_where(d, first, MS_PH_OPTIMIZER);
    /* the layer-scratch arena is idle between steps (as in ms_opt_step) */
    grad_stats_t *gs = ms_scratch_arena(scr, (size_t)n * sizeof *gs);
    if (!gs) return MS_EOOM;
    if (ms_dev_memset0(d, gs, (size_t)n * sizeof *gs)) return MS_EFAIL;
    for (int k = 0; k < n; k++) {
        ms_layer *L = &m->layers[first + k];
        size_t lo, hi;
        ms_opt_rank_share(dist, L, &lo, &hi, 1);
        if (L->g && hi > lo) d->ops->grad_stats(&d->k, L->g + lo, hi - lo, &gs[k].sumsq, &gs[k].nonfinite);
    }
    *nonfinite = 0;
    for (int k0 = 0; k0 < n; k0 += 64) {
        grad_stats_t h[64];
        int c = n - k0 < 64 ? n - k0 : 64;
        if (ms_dev_d2h(d, h, gs + k0, (size_t)c * sizeof *h)) return MS_EFAIL;
        for (int k = 0; k < c; k++) {
            sumsq[first + k0 + k] = h[k].sumsq;
            *nonfinite += h[k].nonfinite;
        }
    }
    return MS_OK;
}

/* AdamW over elements [lo, hi) of L, whose m/v are the rank's (all of them,
 * or its ZeRO-1 chunk). */
static void update_share(ms_model *m, ms_layer *L, size_t lo, size_t hi, int t, float grad_scale)
{
    const ms_config *c = &m->cfg;
    ms_device *d = L->dev;
    size_t n = hi - lo;
    int mixed = L->wc != (void *)L->w;
    size_t n_copy = !mixed || L->n_copy <= lo ? 0 : (L->n_copy - lo < n ? L->n_copy - lo : n);
    void *copy = n_copy ? (char *)L->wc + lo * ms_dtype_size(m->dt) : NULL;
    d->ops->adamw(&d->k, L->w + lo, L->g + lo, L->mv, L->mv + n, n, c->lr, c->beta1, c->beta2, c->eps,
                  c->weight_decay, t, grad_scale, NULL, copy, m->dt, n_copy);
}

int ms_opt_rank_apply(ms_model *m, int first, int last, ms_opt_state *st, const ms_dist *dist, double grad_norm,
                      int finite, ms_opt_result *res)
{
    const ms_config *c = &m->cfg;
    ms_device *d = m->layers[first].dev;
    memset(res, 0, sizeof *res);
    res->grad_norm = grad_norm;
    if (finite) {
        float scale = ms_opt_clip_factor(c, grad_norm) / st->loss_scale;
        st->t++;
        for (int i = first; i <= last; i++) {
            ms_layer *L = &m->layers[i];
            if (!L->g) continue;
            if (!L->mv) return MS_EFAIL; /* the caller allocates the rank's m/v first */
            size_t lo, hi;
            ms_opt_rank_share(dist, L, &lo, &hi, 0);
            ms_dev_where(d, i, MS_PH_OPTIMIZER);
            if (hi > lo) update_share(m, L, lo, hi, st->t, scale);
            if (!sharded(dist)) continue;
            if (dist->dp_allgather(dist->ctx, d, L->w, L->n_params)) return MS_EFAIL; /* dist->err says why */
            if (L->wc != (void *)L->w) d->ops->cast(&d->k, m->dt, L->wc, MS_F32, L->w, L->n_copy);
        }
        res->applied = 1;
    }
    ms_opt_end_step(m, first, last, st, finite);
    return ms_dev_sync(d) ? MS_EFAIL : MS_OK;
}
