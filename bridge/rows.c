/* rows.c — profile rows from a program's trace (rows.h). */
#include "bridge/rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/ledger.h"
#include "vocab/errf.h"

/* What one pass over a trace measured, per layer. */
typedef struct layer_meas {
    int fwd, bwd;                 /* intervals seen in the step used */
    int pass;                     /* the forward pass act_pass adds up (per step: 1, 2, ...) */
    uint64_t act_pass;            /* act of this layer's intervals in that pass (a tied module
                                     brings a layer back in the middle of another's) */
    uint64_t act, tf, tb;         /* act, transient forward / backward (max over micro-batches) */
    uint64_t topt;                /* the optimizer's temporaries made for this layer's parameters,
                                     live at the optimizer phase's peak */
    int64_t xin;                  /* bytes entering the layer (-1 unknown) */
    int xl;                       /* the layer that made them (-1 unknown) */
    int64_t net;                  /* the last forward visit's change in live bytes, the
                                     program's carried bytes it freed added back */
    uint64_t cat[4];              /* highest live param, master, grad, optim bytes over the run */
} layer_meas;

typedef struct pass_meas {
    int n;                        /* layers, and one more: "outside" (the program's loss), folded into layer 0 */
    layer_meas *L;
    uint64_t opt_transient;       /* the optimizer phase's peak above its start */
    uint64_t peak_alloc;          /* highest allocated bytes (counters, else the ledger) */
    uint64_t peak_reserved;       /* highest reserved (GPU), 0 unknown */
    int steps_complete;
    int grads_freed;              /* MS_GRADS_*: when the program frees its gradients */
    int grads_at_forward;         /* some were live when a forward began */
    int grads_at_loss;            /* some were live when the loss's backward began */
    int loss_checked;             /* loss backwards begun after the first gradients */
    uint64_t grad_seen;
    /* of the step used: the dynamic bytes live when its first forward began
     * (what the program carries from the step before), and of those what
     * was still live when the loss's backward began */
    uint64_t carry, carry_loss;
    /* at the OOM marker */
    uint64_t oom_cat[MS_CAT_N];
    uint64_t oom_untracked;       /* GPU: the allocator's count beyond the tensors the ledger saw */
    uint64_t persist;             /* GPU: the same at the last complete step's end: buffers that
                                     libraries keep in the caching allocator (cuBLAS workspaces, one
                                     per thread that multiplies), made by no operator, living on */
    uint64_t *oom_layer;          /* n entries */
} pass_meas;

static int is_static(int cat) { return cat <= MS_CAT_OPTIM; }

/* A layer whose row this pass measured whole: its forward and backward, or
 * its forward in a step the pass completed, where a backward that never came
 * is a fact of the program (frozen blocks, a module whose outputs need no
 * gradient), not a part of it the pass did not reach */
static int ran(const pass_meas *pm, int l)
{
    return pm->L[l].fwd && (pm->L[l].bwd || pm->steps_complete > 0);
}

typedef struct interval {
    int open, layer, phase, pass;
    int64_t dyn_start, dyn_peak;  /* the ledger's dynamic bytes */
    int64_t tot_start, tot_peak;  /* everything live, gradients made in the interval included */
    int64_t xin;
    int xl;
    uint64_t base_freed;          /* carried bytes (live when the step began) freed in it */
    uint64_t stat_max;            /* the most static bytes live during it */
} interval;

typedef struct replay {
    msl_ledger led;
    uint64_t grad_seen;           /* any gradient bytes at all so far */
    uint64_t stat;                /* live static bytes (param, master, grad, optim) */
    uint64_t *lc;                 /* live bytes per (layer + 1, static category): (n + 1) x 4 */
    int64_t *dl;                  /* live dynamic bytes per layer + 1: n + 1; then the optimizer
                                     phase's start and its peak: 3 (n + 1) in all */
    int n;
} replay;

static int64_t dyn_now(const replay *r) { return (int64_t)msl_dev(&r->led, 0)->live - (int64_t)r->stat; }

static uint64_t grads_live(const replay *r)
{
    uint64_t g = 0;
    for (int l = 0; l <= r->n; l++) g += r->lc[(size_t)l * 4 + MS_CAT_GRAD];
    return g;
}

static void close_interval(const interval *iv, const msb_ev *w, const replay *r, layer_meas *step_L, int n,
                           uint64_t *opt_tr)
{
    if (!iv->open) return;
    int64_t end = dyn_now(r), peak = iv->dyn_peak;
    if (w && w->alloc >= 0) {               /* the caching allocator's exact counters */
        end = w->alloc - (int64_t)r->stat;
        /* its peak counts every byte: less the most static bytes there were
         * (zero_grad in the interval frees the gradients after its peak;
         * less only those left at the end would count them as its own) */
        if (w->peak >= 0) peak = w->peak - (int64_t)iv->stat_max;
    }
    if (peak < end) peak = end;
    /* what the program carried into the step and frees here (its last
     * step's outputs, when it assigns the new ones) is no work of this
     * interval: the model holds the carried bytes apart (ms_loss_row) */
    int64_t start = iv->dyn_start - (int64_t)iv->base_freed;
    if (iv->phase == MS_PH_OPTIMIZER && iv->layer < 0) {
        uint64_t above = peak > start ? (uint64_t)(peak - start) : 0;
        if (above > *opt_tr) *opt_tr = above;
        return;
    }
    if (iv->layer < 0 || iv->layer >= n) return;
    layer_meas *m = &step_L[iv->layer];
    if (iv->phase == MS_PH_FORWARD) {
        uint64_t act = end > start ? (uint64_t)(end - start) : 0, tf = (uint64_t)(peak - end);
        m->fwd = 1;
        /* the layer's visits in one forward pass add up; passes (micro-batches) take the largest */
        if (m->pass != iv->pass) {
            m->pass = iv->pass;
            m->act_pass = 0;
        }
        m->act_pass += act;
        if (m->act_pass > m->act) m->act = m->act_pass;
        if (tf > m->tf) m->tf = tf;
        m->net = end - start;
        if (iv->xin >= 0) {
            m->xin = iv->xin;
            m->xl = iv->xl;
        }
    } else if (iv->phase == MS_PH_BACKWARD) {
        /* above everything live at the start, the layer's own new gradients
         * included: they come while its activations go */
        int64_t tpeak = iv->tot_peak, tstart = iv->tot_start;
        if (w && w->peak >= 0 && w->alloc >= 0) tpeak = w->peak;
        uint64_t tb = tpeak > tstart ? (uint64_t)(tpeak - tstart) : 0;
        (void)start;
        m->bwd = 1;
        if (tb > m->tb) m->tb = tb;
    }
}

/* A static storage comes or goes: the sums, and the layer's highest. */
static void apply(replay *r, layer_meas *cur, int cat, int layer, uint64_t bytes, int sign)
{
    if (!is_static(cat)) return;
    if (sign > 0) r->stat += bytes; else r->stat -= bytes;
    if (cat == MS_CAT_GRAD && sign > 0) r->grad_seen += bytes;
    int l = layer + 1;
    if (l < 0 || l > r->n) return;
    uint64_t *slot = &r->lc[(size_t)l * 4 + (size_t)cat];
    if (sign > 0) *slot += bytes; else *slot -= bytes;
    if (layer >= 0 && layer < r->n && *slot > cur[layer].cat[cat]) cur[layer].cat[cat] = *slot;
}

/* The optimizer phase ends: each layer's temporaries at its peak (foreach
 * ops make them for every parameter at once; a loop over parameters, one
 * parameter's at a time: then the largest layer's alone are live). */
static void opt_by_layer(const replay *r, const int64_t *start, const int64_t *peak, layer_meas *cur)
{
    for (int l = 0; l < r->n; l++) {
        int64_t d = peak[l + 1] - start[l + 1];
        if (d > 0 && (uint64_t)d > cur[l].topt) cur[l].topt = (uint64_t)d;
    }
}

static int measure(const msb_trace *t, pass_meas *pm)
{
    int n = t->n_blocks + 3;      /* + the outside layer */
    memset(pm, 0, sizeof *pm);
    pm->n = n;
    pm->L = calloc((size_t)n, sizeof *pm->L);
    layer_meas *cur = calloc((size_t)n, sizeof *cur);
    int (*fin)[2] = calloc((size_t)t->n_ev + 1, sizeof *fin);
    replay r = { .n = n };
    r.lc = calloc((size_t)(n + 1) * 4, sizeof *r.lc);
    r.dl = calloc((size_t)(n + 1) * 3, sizeof *r.dl);
    int64_t *opt_start = r.dl ? r.dl + (n + 1) : NULL, *opt_peak = r.dl ? r.dl + 2 * (n + 1) : NULL;
    pm->oom_layer = calloc((size_t)n, sizeof *pm->oom_layer);
    int rc = (!pm->L || !cur || !fin || !r.lc || !r.dl || !pm->oom_layer) ? -1 : msb_final_labels(t, fin);
    msl_init(&r.led);
    for (int i = 0; i < n; i++) pm->L[i].xin = cur[i].xin = -1;
    interval iv = { 0 };
    uint64_t opt_cur = 0;
    ms_addr_map born = { 0 };     /* key -> its allocation's event index + 1 */
    int base_ev = -1;             /* the event that began the step's first forward */
    uint64_t base_live = 0, carry = 0, carry_loss = 0;
    int loss_seen = 0;
    int64_t untracked = 0;        /* at the last transition: allocator count - ledger */
    for (int i = 0; rc == 0 && i < t->n_ev; i++) {
        const msb_ev *e = &t->ev[i];
        if (e->conn != t->model_conn) continue;
        switch (e->kind) {
        case MSB_EV_ALLOC: {
            int cat = fin[i][0], layer = fin[i][1];
            if (msl_alloc(&r.led, 0, e->m.address, e->m.bytes, cat, layer, NULL) == MSL_OK) {
                apply(&r, cur, cat, layer, e->m.bytes, +1);
                if (!is_static(cat) && layer >= -1 && layer < n) r.dl[layer + 1] += (int64_t)e->m.bytes;
                if (e->m.address && ms_addr_map_put(&born, e->m.address, (uint64_t)i + 1) != 0) rc = -1;
            }
            break;
        }
        case MSB_EV_FREE: {
            const msl_rec *rec = msl_find(&r.led, e->m.address);
            if (rec) {
                int cat = rec->cat, layer = rec->layer;
                uint64_t b = msl_free(&r.led, e->m.address, NULL), at = 0;
                apply(&r, cur, cat, layer, b, -1);
                if (!is_static(cat) && layer >= -1 && layer < n) r.dl[layer + 1] -= (int64_t)b;
                if (ms_addr_map_take(&born, e->m.address, &at) && !is_static(cat) && (int)at - 1 < base_ev &&
                    base_live >= b) {
                    base_live -= b;
                    if (iv.open) iv.base_freed += b;
                }
            }
            break;
        }
        case MSB_EV_WHERE:
            if (e->alloc >= 0) untracked = e->alloc - (int64_t)msl_dev(&r.led, 0)->live;
            if (e->m.layer == 0 && e->m.phase == MS_PH_FORWARD && r.grad_seen && grads_live(&r))   /* a forward begins */
                pm->grads_at_forward = 1;   /* kept across steps or micro-batches */
            /* the step's first forward begins (not a tied module's return to layer 0) */
            int first_fwd = e->m.layer == 0 && e->m.phase == MS_PH_FORWARD && e->n <= 1 &&
                            !(iv.open && iv.phase == MS_PH_FORWARD);
            if (iv.open && iv.phase == MS_PH_OPTIMIZER && iv.layer < 0) opt_by_layer(&r, opt_start, opt_peak, cur);
            close_interval(&iv, e, &r, cur, n, &opt_cur);
            if (e->m.layer < 0 && e->m.phase == MS_PH_OPTIMIZER) {
                memcpy(opt_start, r.dl, (size_t)(n + 1) * sizeof *r.dl);
                memcpy(opt_peak, r.dl, (size_t)(n + 1) * sizeof *r.dl);
            }
            if (first_fwd) {
                base_ev = i;
                base_live = carry = dyn_now(&r) > 0 ? (uint64_t)dyn_now(&r) : 0;
                loss_seen = 0;
            }
            if (e->m.layer == n - 1 && e->m.phase == MS_PH_BACKWARD && !loss_seen) {   /* the loss's backward */
                carry_loss = base_live;
                loss_seen = 1;
                if (r.grad_seen) {
                    if (grads_live(&r)) pm->grads_at_loss = 1;
                    pm->loss_checked++;
                }
            }
            iv = (interval){ .open = 1, .layer = e->m.layer, .phase = e->m.phase, .xin = e->xin, .xl = e->xl,
                             .pass = e->n };
            iv.dyn_start = e->alloc >= 0 ? e->alloc - (int64_t)r.stat : dyn_now(&r);
            iv.dyn_peak = iv.dyn_start;
            iv.tot_start = iv.tot_peak = e->alloc >= 0 ? e->alloc : (int64_t)msl_dev(&r.led, 0)->live;
            iv.stat_max = r.stat;
            if (e->peak > 0 && (uint64_t)e->peak > pm->peak_alloc) pm->peak_alloc = (uint64_t)e->peak;
            if (e->alloc > 0 && (uint64_t)e->alloc > pm->peak_alloc) pm->peak_alloc = (uint64_t)e->alloc;
            if (e->rpeak > 0 && (uint64_t)e->rpeak > pm->peak_reserved) pm->peak_reserved = (uint64_t)e->rpeak;
            break;
        case MSB_EV_STEP:
            /* the step's last interval (layer -1, init) closed at its 'w' */
            pm->persist = untracked > 0 ? (uint64_t)untracked : 0;
            memcpy(pm->L, cur, (size_t)n * sizeof *cur);
            pm->opt_transient = opt_cur;
            pm->carry = carry;
            pm->carry_loss = loss_seen ? carry_loss : carry;
            pm->steps_complete++;
            for (int l = 0; l < n; l++) {
                cur[l] = (layer_meas){ .xin = cur[l].xin };
                memcpy(cur[l].cat, pm->L[l].cat, sizeof cur[l].cat);
            }
            opt_cur = 0;
            break;
        case MSB_EV_OOM:
            memcpy(pm->oom_cat, msl_dev(&r.led, 0)->live_cat, sizeof pm->oom_cat);
            pm->oom_untracked = untracked > 0 ? (uint64_t)untracked : 0;
            for (int l = 0; l < n; l++) pm->oom_layer[l] = msl_live_layer(&r.led, 0, l);
            break;
        default:
            break;
        }
        if (iv.open && dyn_now(&r) > iv.dyn_peak) {
            iv.dyn_peak = dyn_now(&r);
            if (iv.phase == MS_PH_OPTIMIZER && iv.layer < 0) memcpy(opt_peak, r.dl, (size_t)(n + 1) * sizeof *r.dl);
        }
        if (iv.open && (int64_t)msl_dev(&r.led, 0)->live > iv.tot_peak) iv.tot_peak = (int64_t)msl_dev(&r.led, 0)->live;
        if (iv.open && r.stat > iv.stat_max) iv.stat_max = r.stat;
    }
    if (!t->cuda) pm->peak_alloc = msl_dev(&r.led, 0)->peak;   /* the CPU: the ledger is the accounting */
    pm->grad_seen = r.grad_seen;
    /* none live when a forward began: freed before it (zero_grad first);
     * live then but never when the loss's backward began: freed between
     * the two (Lightning's closure: training_step, zero_grad, backward) */
    pm->grads_freed = !r.grad_seen ? MS_GRADS_KEPT
                      : !pm->grads_at_forward ? MS_GRADS_FREED_BEFORE_FORWARD
                      : pm->loss_checked && !pm->grads_at_loss ? MS_GRADS_FREED_BEFORE_BACKWARD : MS_GRADS_KEPT;
    if (rc == 0 && pm->steps_complete == 0) {   /* no complete step: what the first one got to */
        if (iv.open && iv.phase == MS_PH_OPTIMIZER && iv.layer < 0) opt_by_layer(&r, opt_start, opt_peak, cur);
        close_interval(&iv, NULL, &r, cur, n, &opt_cur);
        memcpy(pm->L, cur, (size_t)n * sizeof *cur);
        pm->opt_transient = opt_cur;
        pm->carry = carry;
        pm->carry_loss = loss_seen ? carry_loss : carry;
    } else if (rc == 0) {
        for (int l = 0; l < n; l++)   /* the static maxima of the whole run */
            for (int c = 0; c < 4; c++)
                if (cur[l].cat[c] > pm->L[l].cat[c]) pm->L[l].cat[c] = cur[l].cat[c];
    }
    msl_free_all(&r.led);
    ms_addr_map_clear(&born);
    free(r.lc);
    free(r.dl);
    free(fin);
    free(cur);
    return rc;
}

/* What the program computes outside the model (its loss) is its own row
 * (ms_loss_row): the model's outputs leave the layer that made them (the
 * last layer's modules, or layer 0's when a tied lm_head runs there) for
 * the root device, where the loss holds them with what it saves; the
 * parameters of modules outside the model count with layer 0. */
static void fold_outside(pass_meas *pm, int n, ms_loss_row *loss)
{
    layer_meas *o = &pm->L[n], *z = &pm->L[0];
    int mk = o->xl >= 0 && o->xl < n ? o->xl : n - 1;
    layer_meas *m = &pm->L[mk];
    uint64_t x = o->xin > 0 ? (uint64_t)o->xin : 0;
    if (x > m->act) x = m->act;
    m->act -= x;
    int64_t held = (int64_t)x + o->net;
    *loss = (ms_loss_row){ .present = 1, .made_in = mk, .outputs = x, .held = held > 0 ? (uint64_t)held : 0,
                           .transient_fwd = o->tf, .transient_bwd = o->tb, .carry = pm->carry,
                           .carry_loss = pm->carry_loss };
    for (int c = 0; c < 4; c++) z->cat[c] += o->cat[c];
    z->topt += o->topt;
    if (pm->oom_layer) pm->oom_layer[0] += pm->oom_layer[n];
}

static void free_meas(pass_meas *pm)
{
    free(pm->L);
    free(pm->oom_layer);
    memset(pm, 0, sizeof *pm);
}

/* Times per micro-batch of the step used: the last complete step, else the
 * first; fwd/bwd summed over the step's micro-batches and divided by them. */
static void step_times(const msb_trace *t, ms_layer_row *rows, int n, double *opt_ms)   /* n rows; layer n: outside */
{
    *opt_ms = 0;
    if (t->n_steps == 0) return;
    const msb_step *s = &t->steps[t->n_steps - 1];
    int accum = s->accum > 0 ? s->accum : 1;
    for (int i = 0; i < s->n_iv; i++) {
        const msb_interval_ms *v = &s->iv[i];
        if (v->layer < 0) {
            if (v->phase == MS_PH_OPTIMIZER) *opt_ms += v->ms;
            continue;
        }
        if (v->layer > n) continue;
        int l = v->layer == n ? 0 : v->layer;   /* the loss outside the model: the root device's layer 0 */
        if (v->phase == MS_PH_FORWARD) rows[l].fwd_ms += v->ms / accum;
        else if (v->phase == MS_PH_BACKWARD) rows[l].bwd_ms += v->ms / accum;
    }
}

/* Pre and post members come from the first training forward; the trial may
 * have died before the post layer, the uncapped pass u did not. */
static void name_row(const msb_trace *t, const msb_trace *u, int l, ms_layer_row *r)
{
    int n = t->n_blocks + 2;
    const char *pre = t->pre[0] || !u ? t->pre : u->pre, *post = t->post[0] || !u ? t->post : u->post;
    if (l == 0) {
        snprintf(r->name, sizeof r->name, "%s", pre[0] ? pre : "(before the units)");
        snprintf(r->kind, sizeof r->kind, "pre");
    } else if (l == n - 1) {
        snprintf(r->name, sizeof r->name, "%s", post[0] ? post : "(after the units)");
        snprintf(r->kind, sizeof r->kind, "post");
    } else {
        snprintf(r->name, sizeof r->name, "%s", t->blocks[l - 1]);
        snprintf(r->kind, sizeof r->kind, "block");
    }
}

static int precision_of(const char *s)
{
    ms_precision p;
    return ms_precision_parse(s, &p) == 0 ? (int)p : MS_PREC_FP32;
}

static void fill_row(ms_layer_row *r, const layer_meas *m, int source)
{
    r->source = source;
    r->param = m->cat[MS_CAT_PARAM];
    r->master = m->cat[MS_CAT_MASTER];
    r->grad = m->cat[MS_CAT_GRAD];
    r->optim = m->cat[MS_CAT_OPTIM];
    r->act = m->act;
    r->transient_fwd = m->tf;
    r->transient_bwd = m->tb;
}

/* The device's own bytes beyond the tensors: its context and libraries,
 * from the last step's free memory (GPU), less the ballast. */
static uint64_t reserve_of(const msb_trace *t)
{
    if (t->n_steps == 0) {
        if (t->ballast.taken && t->ballast.total > t->ballast.free) return t->ballast.total - t->ballast.free;
        return 0;
    }
    const msb_step *s = &t->steps[t->n_steps - 1];
    if (s->mem_total < 0) return 0;
    int64_t used = s->mem_total - s->mem_free - s->mem_reserved - (int64_t)t->ballast.bytes;
    return used > 0 ? (uint64_t)used : 0;
}

int msb_build_profile(const msb_trace *t, const msb_trace *u, const msb_rows_opts *o, ms_profile *p,
                      int *incomplete, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (incomplete) *incomplete = 0;
    if (t->model_conn < 0 || t->n_blocks < 1)
        return ms_errf(err, errlen, "the program never ran a training forward pass of a model");
    if (u && (u->model_conn < 0 || u->n_blocks != t->n_blocks)) u = NULL;   /* a different model: unusable */
    int n = t->n_blocks + 2;
    pass_meas mt, mu = { 0 };
    if (measure(t, &mt) != 0 || (u && measure(u, &mu) != 0)) {
        free_meas(&mt);
        free_meas(&mu);
        return ms_errf(err, errlen, "out of memory");
    }
    ms_loss_row lt, lu;
    fold_outside(&mt, n, &lt);
    if (u) fold_outside(&mu, n, &lu);
    p->rows = calloc((size_t)n, sizeof *p->rows);
    if (!p->rows) {
        free_meas(&mt);
        free_meas(&mu);
        return ms_errf(err, errlen, "out of memory");
    }
    p->n_rows = p->n_layers = n;
    int prec = precision_of(t->precision);
    int mb = t->n_steps ? t->steps[t->n_steps - 1].micro_batch : 0;
    if (mb <= 0 && u && u->n_steps) mb = u->steps[u->n_steps - 1].micro_batch;
    if (mb <= 0) mb = 1;
    int accum = t->n_steps ? t->steps[t->n_steps - 1].accum : (u && u->n_steps ? u->steps[u->n_steps - 1].accum : 1);
    double opt_t = 0, opt_u = 0;
    ms_layer_row *tu = calloc((size_t)n, sizeof *tu);
    if (!tu) {
        free_meas(&mt);
        free_meas(&mu);
        ms_profile_free(p);
        return ms_errf(err, errlen, "out of memory");
    }
    step_times(t, p->rows, n, &opt_t);
    if (u) step_times(u, tu, n, &opt_u);
    int last_full = -1;
    for (int l = 0; l < n; l++) {
        ms_layer_row *r = &p->rows[l];
        r->layer = l;
        r->precision = prec;
        r->micro_batch = mb;
        name_row(t, u, l, r);
        const layer_meas *m = &mt.L[l];
        /* a trial that ran out before its steady state (say in its second
         * step, with the optimizer's state new) measured a first step: the
         * uncapped pass's later steps are the better rows */
        int prefer_u = u && mu.steps_complete > mt.steps_complete && ran(&mu, l);
        /* the layer before or after the units with no module and no weight of its own, in a
         * trial that finished a step (a model that is one module): nothing in it has a backward
         * to wait for */
        int empty_end = mt.steps_complete > 0 && ((l == 0 && !t->pre[0]) || (l == n - 1 && !t->post[0])) &&
                        !m->cat[0] && !m->cat[1];
        if ((ran(&mt, l) || empty_end) && !prefer_u) {
            fill_row(r, m, MS_ROW_FULL);
            if (l > 0 && l < n - 1) last_full = l;
        } else if (prefer_u || (u && ran(&mu, l))) {
            fill_row(r, &mu.L[l], MS_ROW_UNCAPPED);
            r->fwd_ms = tu[l].fwd_ms;
            r->bwd_ms = tu[l].bwd_ms;
        } else {
            r->source = -1;      /* filled below from an identical block */
        }
        int64_t xin = l + 1 < n ? (mt.L[l + 1].xin >= 0 ? mt.L[l + 1].xin : (u ? mu.L[l + 1].xin : -1)) : -1;
        r->out_bytes = xin > 0 ? (uint64_t)xin : 0;
        int64_t in = m->xin >= 0 ? m->xin : (u ? mu.L[l].xin : -1);
        r->act_input = in > 0 ? (uint64_t)in : 0;
    }
    /* unreached units: the last completed unit of the same structure (equal
     * signatures; a trace without them had one list of identical blocks);
     * otherwise the first forward we have, marked so the caller can say it
     * is partial */
    for (int l = 0; l < n; l++) {
        ms_layer_row *r = &p->rows[l];
        if (r->source >= 0) continue;
        const ms_layer_row *src = NULL;
        if (l > 0 && l < n - 1 && !t->sigs) src = last_full > 0 ? &p->rows[last_full] : NULL;
        for (int k = n - 2; l > 0 && l < n - 1 && t->sigs && !src && k >= 1; k--)
            if (k != l && (p->rows[k].source == MS_ROW_FULL || p->rows[k].source == MS_ROW_UNCAPPED) && t->sigs[k - 1] && t->sigs[l - 1] &&
                !strcmp(t->sigs[k - 1], t->sigs[l - 1]))
                src = &p->rows[k];
        if (src) {
            char name[MS_NAME_MAX], kind[16];
            memcpy(name, r->name, sizeof name);
            memcpy(kind, r->kind, sizeof kind);
            uint64_t out = r->out_bytes, in = r->act_input;
            *r = *src;
            memcpy(r->name, name, sizeof name);
            memcpy(r->kind, kind, sizeof kind);
            r->layer = l;
            r->out_bytes = out ? out : src->out_bytes;
            r->act_input = in ? in : src->act_input;
        } else {
            fill_row(r, &mt.L[l], MS_ROW_COPIED);
            if (incomplete) *incomplete = 1;
        }
        r->source = MS_ROW_COPIED;
    }
    /* the optimizer: each layer's own temporaries at its peak; what no
     * layer's parameters made, and the time, shared out by parameter bytes */
    int use_u = u && mu.steps_complete > mt.steps_complete;
    const pass_meas *om = use_u ? &mu : &mt;
    double opt_ms = use_u ? opt_u : opt_t;
    uint64_t total_params = 0, own = 0;
    for (int l = 0; l < n; l++) {
        total_params += p->rows[l].param + p->rows[l].master;
        own += om->L[l].topt;
    }
    uint64_t rest = om->opt_transient > own ? om->opt_transient - own : 0;
    for (int l = 0; l < n && total_params; l++) {
        double share = (double)(p->rows[l].param + p->rows[l].master) / (double)total_params;
        p->rows[l].transient_opt = om->L[l].topt + (uint64_t)((double)rest * share);
        p->rows[l].opt_ms = opt_ms * share;
    }

    snprintf(p->model, sizeof p->model, "%s", o && o->model_name ? o->model_name : t->root);
    p->global_batch = mb * (accum > 0 ? accum : 1);
    snprintf(p->device, sizeof p->device, "%s", t->device[0] ? t->device : "cpu");
    p->capacity = o ? o->capacity : 0;
    /* the reserve, what a GPU costs before any tensor of the program: its
     * context and libraries, and the buffers libraries keep in the caching
     * allocator, as the last complete step left them (measured, not a rule:
     * the rows count operators' outputs, so those buffers are no layer's);
     * the peak is the allocator's own peak, which counts them, plus the
     * context */
    uint64_t context = reserve_of(t);
    const pass_meas *sm = om->steps_complete ? om : NULL;
    uint64_t libs = t->cuda && sm ? sm->persist : 0;
    /* from the pass the rows come from: a trial that ran out before its
     * first step ended read its context when the ballast was taken, before
     * the libraries loaded theirs */
    p->reserve = (use_u ? reserve_of(u) : context) + libs;
    if (o && o->libs) *o->libs = libs;
    p->peak = mt.peak_alloc + context;
    p->reserved_peak = mt.peak_reserved;
    p->grads_freed = use_u ? mu.grads_freed : mt.grads_freed;
    /* the loss as the rows: from the trial when it measured the loss's
     * forward and backward, else from the uncapped pass */
    p->loss = (mt.L[n].fwd && mt.L[n].bwd && !use_u) || !u ? lt : lu;
    p->fits = !t->oom.happened;
    snprintf(p->fingerprint, sizeof p->fingerprint, "%s", t->fingerprint);
    snprintf(p->layer_list, sizeof p->layer_list, "%.*s", (int)sizeof p->layer_list - 1, t->why);
    char version[49];          /* cut at a character boundary: a forged version may not be ASCII */
    msb_utf8_copy(version, sizeof version, t->torch_version, 48);
    snprintf(p->framework, sizeof p->framework, "torch %s (%s)", version, t->cuda ? "cuda" : "cpu");
    snprintf(p->accounting, sizeof p->accounting, "%s", t->cuda ? "cuda-caching-allocator" : "cpu-dispatcher");
    if (t->oom.happened) {
        ms_oom_info *x = &p->oom;
        x->happened = 1;
        x->layer = t->oom.layer >= 0 && t->oom.layer < n ? t->oom.layer : -1;   /* n: outside the model */
        if (x->layer >= 0) snprintf(x->layer_name, sizeof x->layer_name, "%s", p->rows[x->layer].name);
        x->phase = t->oom.phase >= 0 && t->oom.phase < MS_PH_N ? t->oom.phase : MS_PH_FORWARD;
        x->step = t->oom.step > 0 ? t->oom.step : 0;
        x->category = MS_CAT_TRANSIENT;
        for (int i = t->oom.ev_index - 1; i >= 0 && i >= t->oom.ev_index - 4; i--)
            if (t->ev[i].kind == MSB_EV_REFUSED) x->category = t->ev[i].m.category;   /* the refused request's */
        if (t->oom.category >= 0) x->category = t->oom.category;   /* made unlabelled, said by the program */
        x->requested = t->oom.requested;
        x->capacity = p->capacity;
        memcpy(x->live_by_cat, mt.oom_cat, sizeof x->live_by_cat);
        /* allocated, but by no operator's output, beyond the libraries' buffers the reserve holds */
        x->live_by_cat[MS_CAT_TRANSIENT] += mt.oom_untracked > libs ? mt.oom_untracked - libs : 0;
        x->live_by_cat[MS_CAT_RESERVE] += p->reserve;
        if (t->oom.device_free >= 0 && p->capacity > (uint64_t)t->oom.device_free) {
            /* a real CUDA OOM: the device says what is in use; beyond the
             * tensors that is the context, libraries and the allocator's cache */
            uint64_t used = p->capacity - (uint64_t)t->oom.device_free, tensors = 0;
            for (int c = 0; c < MS_CAT_N; c++)
                if (c != MS_CAT_RESERVE) tensors += x->live_by_cat[c];
            x->live_by_cat[MS_CAT_RESERVE] = used > tensors ? used - tensors : 0;
        }
        x->n_live_layers = n;
        x->live_by_layer = mt.oom_layer;
        mt.oom_layer = NULL;
        char module[181], type[61];   /* cut at character boundaries: names are UTF-8 */
        msb_utf8_copy(module, sizeof module, t->oom.module, 180);
        msb_utf8_copy(type, sizeof type, t->oom.type[0] ? t->oom.type : "?", 60);
        if (t->oom.module[0])
            snprintf(x->what, sizeof x->what, "%s (%s)", module, type);
        else if (t->oom.layer == n)
            snprintf(x->what, sizeof x->what, "the program's own code after the model's forward (its loss)");
        else if (t->oom.type[0])   /* the root's forward, in its own code between its modules */
            snprintf(x->what, sizeof x->what, "%s's own code (the model's forward, outside its modules)", type);
    }
    free(tu);
    free_meas(&mt);
    free_meas(&mu);
    return 0;
}
