/* isolate.c — measure one layer alone: the rows the trial could not reach.
 *
 * The layer gets a fresh device of the same kind and capacity, its own
 * parameters, a random input of the right shape (not attributed to it), and
 * runs forward, backward and its optimizer step twice: the first pass
 * allocates (bytes are counted there), the second is timed. */
#include "profiler/trial.h"
#include "trainer/exec.h"
#include "trainer/optimizer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { int layer; size_t by_cat[MS_CAT_N]; } iso_acc;

static void iso_hook(void *u, const ms_mem_event *e)
{
    iso_acc *a = u;
    if (e->kind == MS_EV_ALLOC && e->layer == a->layer) a->by_cat[e->category] += e->bytes;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Random values in [-1, 1) of dtype dt, n elements, copied to the device. */
static int fill_random(ms_device *d, void *dst, ms_dtype dt, size_t n, uint64_t seed)
{
    size_t es = ms_dtype_size(dt);
    char *h = malloc(n * es);
    if (!h) return MS_EFAIL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ms_st(h, dt, i, (float)((seed >> 40) * (2.0 / 16777216.0) - 1.0));
    }
    int rc = ms_dev_h2d(d, dst, h, n * es);
    if (!rc) rc = ms_dev_sync(d);
    free(h);
    return rc ? MS_EFAIL : MS_OK;
}

static int iso_run(ms_model *m, ms_device *d, int layer, iso_acc *acc, ms_layer_row *row, char *err, size_t errlen)
{
    ms_layer *L = &m->layers[layer];
    int N = m->B * m->T, C = m->C, rc;
    size_t es = ms_dtype_size(m->dt);
    ms_scratch s = { .dev = d };
    ms_scratch *scr_of[MS_MAX_LAYERS];
    for (int i = 0; i < m->n_layers && i < MS_MAX_LAYERS; i++) scr_of[i] = &s;
    int32_t *ids = malloc((size_t)N * 4);
    if (!ids) return MS_EFAIL;
    uint64_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((r >> 33) % (uint64_t)m->V);
    }
    void *x = NULL;
    rc = ms_model_alloc_params(m, layer, layer);
    if (!rc && m->cfg.tied && L->kind == MS_LAYER_HEAD) rc = ms_model_alloc_params(m, 0, 0);
    ms_dev_where(d, -1, MS_PH_INIT);
    if (!rc && L->kind != MS_LAYER_EMBED) {
        x = ms_dev_alloc(d, (size_t)N * C * es, MS_CAT_TRANSIENT, "isolation input", 0);
        rc = x ? fill_random(d, x, m->dt, (size_t)N * C, 7) : MS_EOOM;
    }
    if (!rc && L->kind != MS_LAYER_HEAD) {
        void *dres = ms_scratch_get(&s, MS_TR_DRES, (size_t)N * C * es);
        rc = dres ? fill_random(d, dres, m->dt, (size_t)N * C, 11) : MS_EOOM;
    }
    ms_opt_state st;
    ms_opt_init(&st, &m->cfg);
    ms_opt_result ores;
    double loss = 0;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        double t0 = now_ms();
        rc = ms_layer_forward(m, L, &s, x, ids);
        if (rc) break;
        if (ms_dev_sync(d)) { rc = MS_EFAIL; break; }
        double t1 = now_ms();
        /* the layer's own need, rounded like the arena (as the trial counts it):
         * after the first pass the arena has backward's larger size */
        row->transient_fwd = (s.last_need + d->grain - 1) / d->grain * d->grain;
        rc = ms_layer_backward(m, L, &s, x, 1.0f / (float)N, &loss);
        if (rc) break;
        if (ms_dev_sync(d)) { rc = MS_EFAIL; break; }
        double t2 = now_ms();
        size_t need = s.last_need;
        row->transient_bwd = ms_dev_size_of(d, s.buf[MS_TR_DRES]) + (need ? ms_dev_size_of(d, s.buf[MS_TR_ARENA]) : 0);
        rc = ms_opt_step(m, layer, layer, scr_of, &st, &ores);
        if (rc) break;
        double t3 = now_ms();
        if (pass == 1) {
            row->fwd_ms = t1 - t0;
            row->bwd_ms = t2 - t1;
            row->opt_ms = t3 - t2;
        }
    }
    free(ids);
    if (rc == MS_EOOM) {
        snprintf(err, errlen, "isolating %s: out of memory (%s of %zu bytes in %s)", L->name,
                 ms_cat_name(d->oom.cat), d->oom.requested, ms_phase_name(d->oom.phase));
        return rc;
    }
    if (rc) {
        snprintf(err, errlen, "isolating %s: %s", L->name, d->k.error[0] ? d->k.error : "failed");
        return rc;
    }
    row->param = acc->by_cat[MS_CAT_PARAM];
    row->master = acc->by_cat[MS_CAT_MASTER];
    row->grad = acc->by_cat[MS_CAT_GRAD];
    row->optim = acc->by_cat[MS_CAT_OPTIM];
    row->act = acc->by_cat[MS_CAT_ACT];
    return MS_OK;
}

int ms_isolate_layer(const ms_config *cfg, int layer, ms_layer_row *row, char *err, size_t errlen)
{
    ms_model m;
    if (ms_model_init(&m, cfg, err, errlen)) return MS_EFAIL;
    if (layer < 0 || layer >= m.n_layers) {
        snprintf(err, errlen, "no layer %d", layer);
        ms_model_free(&m);
        return MS_EFAIL;
    }
    ms_device d;
    if (ms_dev_open(&d, 0, cfg->device, cfg->gpu_mem, 0, err, errlen)) {
        ms_model_free(&m);
        return MS_EFAIL;
    }
    iso_acc acc;
    memset(&acc, 0, sizeof acc);
    acc.layer = layer;
    d.hook = iso_hook;
    d.hook_user = &acc;
    for (int i = 0; i < m.n_layers; i++) m.layers[i].dev = &d;
    ms_layer *L = &m.layers[layer];
    memset(row, 0, sizeof *row);
    row->layer = layer;
    snprintf(row->name, sizeof row->name, "%s", L->name);
    snprintf(row->kind, sizeof row->kind, "%s", L->kind == MS_LAYER_EMBED ? "embed" : L->kind == MS_LAYER_BLOCK ? "block" : "head");
    row->precision = cfg->precision;
    row->micro_batch = cfg->batch;
    row->source = MS_ROW_ISOLATED;
    size_t N = (size_t)cfg->batch * cfg->seq_len, es = ms_dtype_size(m.dt), g = d.grain;
    size_t out = (N * cfg->d_model * es + g - 1) / g * g; /* as a buffer of its own */
    row->out_bytes = L->kind == MS_LAYER_HEAD ? 0 : out;
    int rc = iso_run(&m, &d, layer, &acc, row, err, errlen);
    /* kept per micro-batch when the stage recomputes: a block its output, the
     * embedding and the head (never recomputed) all their activations */
    row->act_input = L->kind == MS_LAYER_BLOCK ? out : row->act;
    ms_dev_close(&d);
    ms_model_free(&m);
    return rc;
}
