/* exec.c — shared transients, lazy buffers, norm dispatch, layer dispatch. */
#include "trainer/exec_internal.h"

#include <string.h>

static const char *const slot_names[MS_TR_N] = { "activation grad (residual)", "layer scratch", "grad stats",
                                                  "recompute arena" };

void *ms_scratch_get(ms_scratch *s, int slot, size_t bytes)
{
    return ms_scratch_get_as(s, slot, bytes, MS_CAT_TRANSIENT);
}

void *ms_scratch_get_as(ms_scratch *s, int slot, size_t bytes, ms_cat cat)
{
    if (s->bytes[slot] >= bytes && s->buf[slot]) return s->buf[slot];
    if (s->dev->capturing) { /* growing would free what a graph may hold: refused (device.h) */
        s->dev->capture_broken = 1;
        return NULL;
    }
    if (s->buf[slot]) ms_dev_free(s->dev, s->buf[slot]);
    s->buf[slot] = NULL;
    s->bytes[slot] = 0;
    void *p = ms_dev_alloc(s->dev, bytes, cat, slot_names[slot], 0);
    if (!p) return NULL;
    s->buf[slot] = p;
    s->bytes[slot] = bytes;
    return p;
}

void *ms_scratch_arena(ms_scratch *s, size_t bytes)
{
    s->last_need = bytes;
    return ms_scratch_get(s, MS_TR_ARENA, bytes);
}

void ms_scratch_release(ms_scratch *s)
{
    for (int i = 0; i < MS_TR_N; i++) {
        if (s->buf[i]) ms_dev_free(s->dev, s->buf[i]);
        s->buf[i] = NULL;
        s->bytes[i] = 0;
    }
}

/* A recomputing block: its output lives in its own (per micro-batch) arena,
 * everything else in the device's shared recompute arena. */
static int ensure_recompute_acts(ms_model *m, ms_layer *L, ms_scratch *s)
{
    size_t full = ms_acts_layout(m, L, m->B, NULL, NULL);
    char *shared = ms_scratch_get_as(s, MS_TR_RECOMP, full, MS_CAT_ACT);
    if (!shared) return MS_EOOM;
    void *own = L->a.arena;
    if (!own) {
        size_t out = (size_t)m->B * m->T * m->C * ms_dtype_size(m->dt);
        own = ms_dev_alloc(L->dev, out, MS_CAT_ACT, "saved output (recompute)", 0);
        if (!own) return MS_EOOM;
    }
    if (m->cfg.norm == MS_NORM_BATCH && !L->bn_backup) {
        L->bn_backup = ms_dev_alloc(L->dev, ms_layer_bn_bytes(m, L), MS_CAT_TRANSIENT, "batchnorm stats backup", 0);
        if (!L->bn_backup) return MS_EOOM;
    }
    ms_acts_layout(m, L, m->B, &L->a, shared);
    L->a.arena = own;
    L->a.out = own;
    return MS_OK;
}

int ms_exec_ensure_acts_s(ms_model *m, ms_layer *L, ms_scratch *s)
{
    if (L->recompute && L->kind == MS_LAYER_BLOCK) return ensure_recompute_acts(m, L, s);
    return ms_exec_ensure_acts(m, L);
}

int ms_exec_ensure_acts(ms_model *m, ms_layer *L)
{
    if (L->a.arena) return MS_OK;
    size_t bytes = ms_acts_layout(m, L, m->B, NULL, NULL);
    void *p = ms_dev_alloc(L->dev, bytes, MS_CAT_ACT, "saved activations", 0);
    if (!p) return MS_EOOM;
    ms_acts_layout(m, L, m->B, &L->a, p);
    L->a.arena = p;
    return MS_OK;
}

int ms_exec_ensure_grads(ms_model *m, ms_layer *L)
{
    (void)m;
    if (L->g) return MS_OK;
    L->g = ms_dev_alloc(L->dev, L->n_params * 4, MS_CAT_GRAD, "gradients", 1);
    return L->g ? MS_OK : MS_EOOM;
}

/* run: batchnorm's running mean then variance [C] each (unused by layernorm) */
static void norm_fwd(ms_model *m, ms_layer *L, void *out, float *mean, float *rstd, float *run, const void *x,
                     const float *w, const float *b)
{
    ms_device *d = L->dev;
    int N = m->B * m->T, C = m->C;
    if (m->cfg.norm == MS_NORM_LAYER)
        d->ops->layernorm_fwd(&d->k, m->dt, out, mean, rstd, x, w, b, N, C);
    else
        d->ops->batchnorm_fwd(&d->k, m->dt, out, mean, rstd, run, run + C, m->cfg.bn_momentum, x, w, b, N, C);
}

/* which: 0 = first norm of a block / the head's norm, 1 = second norm of a block */
void ms_exec_norm_fwd(ms_model *m, ms_layer *L, int which, void *out, float *mean, float *rstd,
                      const void *x, const float *w, const float *b)
{
    norm_fwd(m, L, out, mean, rstd, L->bn_run ? L->bn_run + (size_t)which * 2 * m->C : NULL, x, w, b);
}

size_t ms_exec_norm_recompute_need(const ms_model *m)
{
    size_t n = m->cfg.norm == MS_NORM_BATCH ? 4 * (size_t)m->C : 2 * (size_t)m->B * m->T;
    return ms_scratch_round(n * 4);
}

/* Both norm kernels are deterministic on both backends (layernorm: one warp
 * or loop per row; batchnorm: one owner per column, a fixed reduction order),
 * so the same kernel on the same input gives forward's output bit for bit;
 * the statistics it recomputes go to scratch, the saved ones stay untouched. */
void ms_exec_norm_recompute(ms_model *m, ms_layer *L, void *out, float *stats, const void *x, const float *w,
                            const float *b)
{
    int N = m->B * m->T, C = m->C;
    if (m->cfg.norm == MS_NORM_LAYER) {
        norm_fwd(m, L, out, stats, stats + N, NULL, x, w, b);
        return;
    }
    /* batch statistics do not depend on the running ones; the kernel's update
     * goes to a zeroed throwaway pair, so they move once per micro-batch */
    float *run = stats + 2 * C;
    if (ms_dev_memset0(L->dev, run, 2 * (size_t)C * 4)) return; /* k.status says why */
    norm_fwd(m, L, out, stats, stats + C, run, x, w, b);
}

void ms_exec_norm_bwd(ms_model *m, ms_layer *L, void *dx, const void *dresid, float *dw, float *db,
                      const void *dout, const void *x, const float *mean, const float *rstd, const float *w)
{
    ms_device *d = L->dev;
    int N = m->B * m->T, C = m->C;
    if (m->cfg.norm == MS_NORM_LAYER)
        d->ops->layernorm_bwd(&d->k, m->dt, dx, dresid, dw, db, dout, x, mean, rstd, w, N, C);
    else
        d->ops->batchnorm_bwd(&d->k, m->dt, dx, dresid, dw, db, dout, x, mean, rstd, w, N, C);
}


static int status_of(ms_layer *L, int rc)
{
    if (rc != MS_OK) return rc;
    return L->dev->k.status ? MS_EFAIL : MS_OK;
}

int ms_layer_forward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x, const int32_t *ids)
{
    s->last_need = 0;
    ms_dev_where(L->dev, L->index, MS_PH_FORWARD);
    int rc = ms_exec_ensure_acts_s(m, L, s);
    if (rc) return rc;
    switch (L->kind) {
    case MS_LAYER_EMBED: rc = ms_embed_forward(m, L, ids); break;
    case MS_LAYER_BLOCK: rc = ms_block_forward(m, L, s, x); break;
    case MS_LAYER_HEAD: rc = ms_head_forward(m, L, x, ids); break;
    }
    return status_of(L, rc);
}

int ms_layer_backward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x, float dscale, double *loss_sum)
{
    s->last_need = 0;
    ms_dev_where(L->dev, L->index, MS_PH_BACKWARD);
    int rc = ms_exec_ensure_grads(m, L);
    if (rc) return rc;
    if (L->recompute && L->kind == MS_LAYER_BLOCK) {
        /* re-run the forward from the saved input; batchnorm's running
         * statistics must not move twice for one micro-batch */
        rc = ms_exec_ensure_acts_s(m, L, s);
        if (rc) return rc;
        size_t bn = ms_layer_bn_bytes(m, L);
        if (L->bn_backup) ms_dev_d2d(L->dev, L->bn_backup, L->bn_run, bn);
        rc = ms_block_forward(m, L, s, x);
        if (L->bn_backup) ms_dev_d2d(L->dev, L->bn_run, L->bn_backup, bn);
        if (rc) return status_of(L, rc);
    }
    switch (L->kind) {
    case MS_LAYER_EMBED: rc = ms_embed_backward(m, L, s); break;
    case MS_LAYER_BLOCK: rc = ms_block_backward(m, L, s, x); break;
    case MS_LAYER_HEAD: rc = ms_head_backward(m, L, s, x, dscale, loss_sum); break;
    }
    return status_of(L, rc);
}

int ms_layer_add_loss(ms_model *m, ms_layer *L, double *loss_sum)
{
    if (L->kind != MS_LAYER_HEAD) return MS_EFAIL;
    return status_of(L, ms_head_add_loss(m, L, loss_sum));
}

size_t ms_layer_loss_rows(const ms_model *m)
{
    return (size_t)m->B * m->T;
}

int ms_layer_read_loss_later(ms_model *m, ms_layer *L, float *host)
{
    if (L->kind != MS_LAYER_HEAD) return MS_EFAIL;
    return status_of(L, ms_dev_d2h_later(L->dev, host, L->a.losses, ms_layer_loss_rows(m) * 4) ? MS_EFAIL : MS_OK);
}

double ms_layer_loss_sum(const ms_model *m, const float *host)
{
    double sum = 0;
    for (size_t i = 0, n = ms_layer_loss_rows(m); i < n; i++) sum += host[i];
    return sum;
}

const void *ms_layer_output(const ms_layer *L)
{
    return L->a.out;
}

int ms_layer_preallocate(ms_model *m, ms_layer *L, ms_scratch *s)
{
    ms_dev_where(L->dev, L->index, MS_PH_FORWARD);
    int rc = ms_exec_ensure_acts_s(m, L, s);
    if (rc) return rc;
    ms_dev_where(L->dev, L->index, MS_PH_BACKWARD);
    if ((rc = ms_exec_ensure_grads(m, L))) return rc;
    size_t es = ms_dtype_size(m->dt), N = (size_t)m->B * m->T;
    if (!ms_scratch_get(s, MS_TR_DRES, N * m->C * es)) return MS_EOOM;
    size_t need = L->kind == MS_LAYER_BLOCK ? ms_block_scratch_need(m, L) : L->kind == MS_LAYER_HEAD ? ms_head_scratch_need(m) : 0;
    if (need && !ms_scratch_arena(s, need)) return MS_EOOM;
    return MS_OK;
}
