/* sequential.c — the exact search for the sequential schedule (sequential.h). */
#include "planner/sequential.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/memory_model.h"
#include "planner/record_replay.h"
#include "planner/search_dp.h"
#include "vocab/errf.h"

#define MAX_CELLS (1L << 22)

/* A moment asked about: the most live while (layer, phase) runs. */
typedef struct seq_query {
    int layer, phase, found;
    uint64_t value;
} seq_query;

/* A stage's memory through one step, one micro-batch in flight: the
 * forward keeps each layer's activations with its transient on top; the
 * backward frees them from the last layer back while the gradients appear
 * (unless they stay across steps: then they are there from the start); the
 * optimizer step has the gradients and its temporaries. The peak and the
 * categories at that moment go to bytes[]; the input kept as a copy and the
 * reserve are always there. A program's stage also sees (loss present):
 *  - its output leaving for the next stage after its forward, and that
 *    output's gradient coming back for its backward;
 *  - on the stage whose modules make the model's outputs, those outputs
 *    before they go to the root device, and their gradient coming back;
 *  - on the root stage, what the program carries from step to step, the
 *    residual stream its own code holds while later stages run, the
 *    outputs arriving, and the loss (ms_loss_row) with its transients.
 * q, when given, also gets the most live at the moment it asks about. */
static uint64_t stage_walk(const ms_layer_cost *L, int n, int a, int b, uint64_t in, uint64_t out, int grads_freed,
                           int program, const ms_loss_row *loss, uint64_t reserve, uint64_t bytes[MS_CAT_N],
                           seq_query *q)
{
    int at_l = -1, at_ph = -1;     /* the moment the CONSIDERs below are of */
    /* a later stage's layer, asked of the root stage: while it runs, the
     * root holds the residual stream and the outputs coming back (-2) */
    const int later = -2;
    if (q && q->layer > b && q->layer < n && a == 0) q->layer = later;
    uint64_t param = 0, master = 0, optim = 0, grad = 0, topt = 0;
    for (int l = a; l <= b; l++) {
        param += L[l].param;
        master += L[l].master;
        optim += L[l].optim;
        grad += L[l].grad;
        topt += L[l].transient_opt;
    }
    const int staged = program && loss && loss->present;
    const int root = a == 0, last = b == n - 1;
    const int maker = staged && !root && loss->made_in >= a && loss->made_in <= b;
    /* a stage that is not the last hands its output on; before the
     * program's loss row the output buffer was counted throughout */
    const uint64_t keep_out = staged ? 0 : out;
    /* under autocast the param bytes are its 16-bit copies of the weights,
     * made as the forward reaches each layer and gone once that layer's
     * backward has used them: they come and go with its activations */
    uint64_t own = param;          /* param bytes held throughout: those of layers without copies */
    for (int l = a; l <= b; l++)
        if (L[l].master) own -= L[l].param;
    const uint64_t fixed = ms_sat_add(ms_sat_add(own, master), ms_sat_add(optim, ms_sat_add(ms_sat_add(in, keep_out), reserve)));
    const uint64_t carry = staged && root ? loss->carry : 0, outputs = staged ? loss->outputs : 0;
    /* the gradients: there from the start unless freed before the forward;
     * freed after it (Lightning): gone once the loss's backward begins */
    const int freed_late = grads_freed == MS_GRADS_FREED_BEFORE_BACKWARD;
    uint64_t g = grads_freed == MS_GRADS_FREED_BEFORE_FORWARD ? 0 : grad, act = 0, cp = 0, best = 0, b_act = 0, b_grad = g, b_tr = 0, b_comm = in;
    uint64_t b_param = own;
#define CONSIDER(A, G, T, C)                                                                                  \
    do {                                                                                                      \
        uint64_t v_ = ms_sat_add(ms_sat_add(ms_sat_add(fixed, cp), (A)), ms_sat_add(ms_sat_add((G), (T)), (C))); \
        if (q && at_l == q->layer && at_ph == q->phase && v_ >= q->value) {                                \
            q->value = v_;                                                                                    \
            q->found = 1;                                                                                     \
        }                                                                                                     \
        if (v_ > best) {                                                                                      \
            best = v_; b_act = (A); b_grad = (G); b_tr = (T); b_comm = in + (C) + keep_out;                     \
            b_param = own + cp;                                                                               \
        }                                                                                                     \
    } while (0)
#define COPIES(l) (L[l].master ? L[l].param : 0)
    CONSIDER(carry, g, 0, 0);
    for (int l = a; l <= b; l++) {
        at_l = l;
        at_ph = MS_PH_FORWARD;
        cp = ms_sat_add(cp, COPIES(l));
        CONSIDER(ms_sat_add(ms_sat_add(act, L[l].act), carry), g, L[l].transient_fwd, 0);
        act = ms_sat_add(act, L[l].act);
    }
    if (maker) CONSIDER(act, g, outputs, 0);   /* the outputs, before their copy to the root */
    uint64_t leave = 0;
    if (staged && !last) leave = out < L[b].act ? out : L[b].act;
    act -= leave;
    if (staged && root) {
        /* while later stages run, the program's own code on the root device
         * holds the residual stream between their modules (their outputs
         * come back to it): one tensor kept, one on its way */
        at_l = later;
        at_ph = MS_PH_FORWARD;
        if (!last) CONSIDER(ms_sat_add(act, carry), g, out, out);
        CONSIDER(ms_sat_add(ms_sat_add(act, carry), outputs), g, 0, 0);
        uint64_t at_loss = ms_sat_add(ms_sat_add(act, loss->carry_loss), loss->held);
        at_l = n;                  /* the loss: the program's own code after the model */
        CONSIDER(at_loss, g, loss->transient_fwd, 0);
        if (freed_late) g = 0;
        at_ph = MS_PH_BACKWARD;
        CONSIDER(at_loss, g, loss->transient_bwd, 0);
    } else if (program && !staged && root) {
        /* a profile without its loss row: layer 0's row carries the loss's
         * work, with the residual stream held while later stages run */
        CONSIDER(ms_sat_add(act, out), g, L[0].transient_fwd, 0);
        if (freed_late) g = 0;
        CONSIDER(ms_sat_add(act, out), g, L[0].transient_bwd, 0);
    }
    if (freed_late) g = 0;
    for (int l = b; l >= a; l--) {
        /* transient_bwd counts the layer's own new gradients (the profile
         * measures it above everything live): they come as its activations
         * go; the gradient of what left the stage comes back to it */
        uint64_t gl = grads_freed ? L[l].grad : 0;
        uint64_t back = staged && !last ? out : 0;
        at_l = l;
        at_ph = MS_PH_BACKWARD;
        if (maker && l == loss->made_in) back = ms_sat_add(back, outputs);
        CONSIDER(ms_sat_add(act, carry), g, L[l].transient_bwd, back);
        act = act > L[l].act ? act - L[l].act : 0;
        cp = cp > COPIES(l) ? cp - COPIES(l) : 0;
        g = ms_sat_add(g, gl);
    }
    at_l = -1;
    at_ph = MS_PH_OPTIMIZER;
    CONSIDER(carry, g, topt, 0);
#undef COPIES
#undef CONSIDER
    bytes[MS_CAT_PARAM] = b_param;
    bytes[MS_CAT_MASTER] = master;
    bytes[MS_CAT_GRAD] = b_grad;
    bytes[MS_CAT_OPTIM] = optim;
    bytes[MS_CAT_ACT] = b_act;
    bytes[MS_CAT_TRANSIENT] = b_tr;
    bytes[MS_CAT_COMM] = b_comm;
    bytes[MS_CAT_RESERVE] = reserve;
    return best;
}

uint64_t ms_seq_stage_peak(const ms_layer_cost *L, int n, int a, int b, uint64_t in, uint64_t out, int grads_freed,
                           int program, const ms_loss_row *loss, uint64_t reserve, uint64_t bytes[MS_CAT_N])
{
    return stage_walk(L, n, a, b, in, out, grads_freed, program, loss, reserve, bytes, NULL);
}

int ms_seq_stage_live_at(const ms_layer_cost *L, int n, int a, int b, uint64_t in, uint64_t out, int grads_freed,
                         const ms_loss_row *loss, uint64_t reserve, int layer, int phase, uint64_t *live)
{
    uint64_t bytes[MS_CAT_N];
    seq_query q = { .layer = layer, .phase = phase };
    stage_walk(L, n, a, b, in, out, grads_freed, 1, loss, reserve, bytes, &q);
    if (q.found) *live = q.value;
    return q.found ? 0 : -1;
}

/* What crosses into and out of stage [first, last]: 0 at the model's ends. */
static void stage_bounds(const ms_layer_cost *L, int n, int first, int last, uint64_t *in, uint64_t *out)
{
    *in = first > 0 ? L[first - 1].out_bytes : 0;
    *out = last < n - 1 ? L[last].out_bytes : 0;
}

/* The last record's range peaks, kept for the next search: ms_plan_choose
 * and the infeasibility explainer search one profile many times, and the
 * table is most of a search's time (a third of a second for 200 layers and
 * 60,000 storages). Keyed by a copy of the whole record, so a record that
 * changed in any field is never served another's peaks. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static ms_prog_record cache_rec;   /* its storages owned here */
static uint64_t *cache_peaks;

static int same_record(const ms_prog_record *x, const ms_prog_record *y)
{
    if (x->n_layers != y->n_layers || x->t_from != y->t_from || x->t_end != y->t_end || x->n != y->n) return 0;
    for (int i = 0; i < x->n; i++) {
        const ms_rec_storage *a = &x->s[i], *b = &y->s[i];
        if (a->layer != b->layer || a->cat != b->cat || a->bytes != b->bytes || a->t_alloc != b->t_alloc ||
            a->t_free != b->t_free || a->copy_of != b->copy_of)
            return 0;
    }
    return 1;
}

/* ms_record_range_peaks through the cache: peaks has n_layers^2 entries.
 * 0, or -1 when out of memory. */
static int record_peaks(const ms_prog_record *r, uint64_t *peaks)
{
    const size_t cells = (size_t)r->n_layers * (size_t)r->n_layers;
    pthread_mutex_lock(&cache_lock);
    int hit = cache_peaks && same_record(&cache_rec, r);
    if (hit) memcpy(peaks, cache_peaks, cells * sizeof *peaks);
    pthread_mutex_unlock(&cache_lock);
    if (hit) return 0;
    if (ms_record_range_peaks(r, peaks)) return -1;
    /* kept when memory allows; the search goes on either way */
    ms_rec_storage *s = malloc((size_t)(r->n ? r->n : 1) * sizeof *s);
    uint64_t *pk = malloc(cells * sizeof *pk);
    if (!s || !pk) {
        free(s);
        free(pk);
        return 0;
    }
    if (r->n) memcpy(s, r->s, (size_t)r->n * sizeof *s);
    memcpy(pk, peaks, cells * sizeof *pk);
    pthread_mutex_lock(&cache_lock);
    free(cache_rec.s);
    free(cache_peaks);
    cache_rec = *r;
    cache_rec.s = s;
    cache_rec.m = NULL;            /* the peaks do not depend on the moments */
    cache_rec.n_moments = 0;
    cache_rec.handed_on = NULL;    /* nor on its list of modules, which is the profile's to free */
    cache_rec.n_handed_on = 0;
    cache_peaks = pk;
    pthread_mutex_unlock(&cache_lock);
    return 0;
}

const ms_prog_record *ms_seq_record(const ms_profile *prof)
{
    return prof->record && prof->record->n_layers == prof->n_layers ? prof->record : NULL;
}

int ms_plan_stage_live_at(const ms_profile *prof, const ms_plan *pl, int stage, int layer, int phase, uint64_t *live)
{
    if (!prof || !pl || stage < 0 || stage >= pl->n_stages || pl->n_layers != prof->n_layers || prof->n_layers < 1)
        return -1;
    /* a record says it by its moments: the range replayed while that ran */
    const ms_prog_record *rec = ms_seq_record(prof);
    if (rec) {
        const ms_plan_stage *st = &pl->stages[stage];
        uint64_t v = 0;
        if (ms_record_live_at(rec, st->first, st->last, layer, phase, &v) != 0) return -1;
        *live = ms_sat_add(v, prof->reserve);
        return 0;
    }
    const int n = prof->n_layers;
    const ms_plan_stage *st = &pl->stages[stage];
    ms_layer_cost *L = malloc((size_t)n * sizeof *L);
    char err[256];
    if (!L || ms_layer_costs(prof, pl->precision, pl->micro_batch, L, err, sizeof err)) {
        free(L);
        return -1;
    }
    uint64_t in, out;
    stage_bounds(L, n, st->first, st->last, &in, &out);
    int rc = ms_seq_stage_live_at(L, n, st->first, st->last, in, out, prof->grads_freed, &prof->loss, prof->reserve,
                                  layer, phase, live);
    free(L);
    return rc;
}

/* A lower bound of ms_seq_stage_peak that grows with b: the static bytes,
 * the input copy and the forward's peak, which nothing after it changes. */
static uint64_t forward_floor(const ms_layer_cost *L, int a, int b, uint64_t in, uint64_t reserve)
{
    uint64_t stat = ms_sat_add(in, reserve), act = 0, top = 0;
    for (int l = a; l <= b; l++) {
        /* autocast's 16-bit copies (param beside master) come with the forward */
        uint64_t cp = L[l].master ? L[l].param : 0;
        stat = ms_sat_add(stat, ms_sat_add(ms_sat_add(L[l].param - cp, L[l].master), L[l].optim));
        act = ms_sat_add(act, cp);
        uint64_t v = ms_sat_add(ms_sat_add(act, L[l].act), L[l].transient_fwd);
        if (v > top) top = v;
        act = ms_sat_add(act, L[l].act);
    }
    return ms_sat_add(stat, top);
}

typedef struct cell {
    int ok;
    double comm;          /* sum of the boundaries' transfer time so far, ms per micro-batch */
    double frac;          /* largest share of a device a stage takes so far */
    int from_j, from_st, cls;
} cell;

static int better(double comm, double frac, const cell *c)
{
    if (!c->ok) return 1;
    if (comm != c->comm) return comm < c->comm;
    return frac < c->frac;
}

/* One configuration (precision, micro-batch): fills best_* when it beats
 * *best_ms. rec: the record's peak of every range (ms_record_range_peaks),
 * which then stands for the stage rules; NULL: the rules. Returns 0, or -1
 * when out of memory. */
static int search_one(const ms_layer_cost *L, int n, const ms_dev_space *ds, int R, uint64_t reserve, int m,
                      double link_gbps, int grads_freed, int program, const ms_loss_row *loss, const uint64_t *rec,
                      double *best_ms, double *best_frac, ms_stage_pick *picks, int *n_picks)
{
    const int S = ds->n_states, K = ds->n_cls;
    cell *T = calloc((size_t)(n + 1) * (size_t)S, sizeof *T);
    if (!T) return -1;
    T[0] = (cell){ .ok = 1 };
    double fixed = 0, opt = 0;    /* compute and optimizer time: the same for every split */
    for (int l = 0; l < n; l++) {
        fixed += L[l].fwd_ms + L[l].bwd_ms;
        opt += L[l].opt_ms;
    }
    for (int j = 0; j < n; j++)
        for (int st = 0; st < S; st++) {
            const cell *c = &T[(size_t)j * S + st];
            if (!c->ok || ds->size[st] >= R) continue;
            for (int e = j + 1; e <= n; e++) {        /* the stage holds layers j..e-1 */
                const ms_layer_cost *lc = &L[e - 1];
                uint64_t in = j > 0 ? L[j - 1].out_bytes : 0, out = e < n ? lc->out_bytes : 0;
                uint64_t by[MS_CAT_N], peak;
                if (rec) {
                    /* no early stop: a longer stage can elide a copy and
                     * peak lower */
                    peak = ms_sat_add(rec[(size_t)j * n + (e - 1)], reserve);
                } else {
                    peak = ms_seq_stage_peak(L, n, j, e - 1, in, out, grads_freed, program, loss, reserve, by);
                    /* the forward's peak only grows with e and is no more
                     * than the stage's: once the largest device is too small
                     * for it, longer stages are too */
                    if (forward_floor(L, j, e - 1, in, reserve) > ds->avail[0]) break;
                }
                double comm = c->comm + (e < n ? 2 * ms_transfer_ms(lc->out_bytes, link_gbps) : 0);
                for (int k = 0; k < K; k++) {
                    int nst = ds->add[st * K + k];
                    if (nst < 0 || peak > ds->avail[k]) continue;
                    double frac = (double)peak / (double)ds->avail[k];
                    if (frac < c->frac) frac = c->frac;
                    cell *d = &T[(size_t)e * S + nst];
                    if (better(comm, frac, d)) *d = (cell){ 1, comm, frac, j, st, k };
                }
            }
        }
    int found = 0;
    for (int st = 0; st < S; st++) {
        const cell *c = &T[(size_t)n * S + st];
        if (!c->ok || ds->size[st] < 1) continue;
        double ms = (double)m * (fixed + c->comm) + opt;
        if (ms < *best_ms || (ms == *best_ms && c->frac < *best_frac)) {
            *best_ms = ms;
            *best_frac = c->frac;
            /* walk back */
            int k = ds->size[st], j = n, s2 = st;
            *n_picks = k;
            while (j > 0) {
                const cell *x = &T[(size_t)j * S + s2];
                picks[--k] = (ms_stage_pick){ x->from_j, j - 1, x->cls, 0 };
                j = x->from_j;
                s2 = x->from_st;
            }
            found = 1;
        }
    }
    free(T);
    return found;
}

int ms_plan_search_sequential(const ms_profile *prof, const ms_plan_device *devs, int n_devs,
                              const ms_plan_opts *o, ms_plan *out, char *err, size_t errlen)
{
    const int n = prof->n_layers;
    const int G = o->global_batch ? o->global_batch : prof->global_batch;
    int R = n_devs < n ? n_devs : n;
    if (o->max_stages && o->max_stages < R) R = o->max_stages;
    if (o->recompute == MS_RECOMPUTE_ALWAYS)
        return ms_errf(err, errlen, "the sequential schedule runs a program's own recompute choice; --recompute always "
                                    "is not an option for it");
    ms_dev_space ds;
    if (ms_dev_space_build(&ds, devs, n_devs, R, o->headroom, err, errlen)) {
        ms_dev_space_free(&ds);
        return MS_PLAN_ERROR;
    }
    if ((long)(n + 1) * ds.n_states > MAX_CELLS) {
        ms_dev_space_free(&ds);
        return ms_errf(err, errlen, "search space too large (%d layers x %d device states)", n, ds.n_states);
    }
    ms_layer_cost *L = malloc((size_t)n * sizeof *L);
    ms_stage_pick *picks = malloc((size_t)R * sizeof *picks), *cur = malloc((size_t)R * sizeof *cur);
    int rc = MS_PLAN_INFEASIBLE, win_prec = -1, win_mb = 0, n_best = 0;
    double best = 1e300, best_frac = 2;
    /* a program's record: every range's peak, once (the same for every
     * precision and micro-batch: the program's own) */
    const ms_prog_record *record = ms_seq_record(prof);
    uint64_t *rec = NULL;
    char rerr[200];
    if (!L || !picks || !cur) {
        rc = ms_errf(err, errlen, "out of memory");
    } else if (record && ms_record_check(record, rerr, sizeof rerr)) {
        rc = ms_errf(err, errlen, "the profile's record is malformed: %s", rerr);
    } else if (record && (!(rec = malloc((size_t)n * (size_t)n * sizeof *rec)) || record_peaks(record, rec))) {
        rc = ms_errf(err, errlen, "out of memory");
    }
    unsigned have = ms_profile_precisions(prof);
    for (int prec = 0; rc == MS_PLAN_INFEASIBLE && prec < 3; prec++) {
        if (!(have & (1u << prec)) || (o->precision >= 0 && o->precision != prec)) continue;
        for (int u = 1; u <= G; u++) {
            if (G % u || (o->micro_batch && o->micro_batch != u)) continue;
            if (ms_layer_costs(prof, prec, u, L, err, errlen)) {
                rc = MS_PLAN_ERROR;
                break;
            }
            int np = 0;
            int got = search_one(L, n, &ds, R, prof->reserve, G / u, o->link_gbps, prof->grads_freed,
                                 prof->fingerprint[0] != 0, &prof->loss, rec, &best, &best_frac, cur, &np);
            if (got < 0) {
                rc = ms_errf(err, errlen, "out of memory");
                break;
            }
            if (got) {
                win_prec = prec;
                win_mb = u;
                n_best = np;
                memcpy(picks, cur, (size_t)np * sizeof *cur);
            }
        }
    }
    if (rc == MS_PLAN_INFEASIBLE && win_prec >= 0) {
        out->devices = calloc((size_t)n_devs, sizeof *out->devices);
        out->stages = calloc((size_t)n_best, sizeof *out->stages);
        if (!out->devices || !out->stages || ms_layer_costs(prof, win_prec, win_mb, L, err, errlen)) {
            rc = out->devices && out->stages ? MS_PLAN_ERROR : ms_errf(err, errlen, "out of memory");
        } else {
            out->version = MS_PLAN_VERSION;
            snprintf(out->model, sizeof out->model, "%s", prof->model);
            out->n_layers = n;
            out->seq_len = prof->seq_len;
            out->d_model = prof->d_model;
            out->n_head = prof->n_head;
            out->vocab = prof->vocab;
            out->n_devices = n_devs;
            memcpy(out->devices, devs, (size_t)n_devs * sizeof *devs);
            out->headroom = o->headroom;
            out->link_gbps = o->link_gbps;
            out->precision = win_prec;
            out->schedule = MS_SCHED_SEQUENTIAL;
            out->micro_batch = win_mb;
            out->n_micro = G / win_mb;
            out->global_batch = G;
            out->n_stages = n_best;
            int used[MS_MAX_CLASSES] = { 0 };
            double cyc = 0, opt = 0;
            for (int s = 0; s < n_best; s++) {
                ms_plan_stage *st = &out->stages[s];
                ms_stage_predict(L, n, picks[s].first, picks[s].last, s, n_best, MS_SCHED_SEQUENTIAL, out->n_micro, 0,
                                 prof->reserve, o->link_gbps, st);
                /* the memory by the sequential model (the record replayed,
                 * or the stage rules), not the pipeline's sums */
                if (record) {
                    uint64_t pk = ms_record_stage(record, picks[s].first, picks[s].last, st->bytes);
                    if (pk == UINT64_MAX) {
                        rc = ms_errf(err, errlen, "out of memory");
                        break;
                    }
                    st->peak = ms_sat_add(pk, prof->reserve);
                    st->bytes[MS_CAT_RESERVE] = ms_sat_add(st->bytes[MS_CAT_RESERVE], prof->reserve);
                } else {
                    uint64_t in, outb;
                    stage_bounds(L, n, picks[s].first, picks[s].last, &in, &outb);
                    st->peak = ms_seq_stage_peak(L, n, picks[s].first, picks[s].last, in, outb, prof->grads_freed,
                                                 prof->fingerprint[0] != 0, &prof->loss, prof->reserve, st->bytes);
                }
                st->device = ds.devs[ds.dev_off[picks[s].cls] + used[picks[s].cls]++];
                cyc += st->fwd_ms + st->bwd_ms + st->comm_ms;
                opt += st->opt_ms;
            }
            out->step_ms = (double)out->n_micro * cyc + opt;
            if (rc == MS_PLAN_INFEASIBLE) rc = MS_PLAN_OK;
        }
    }
    if (rc != MS_PLAN_OK) ms_plan_free(out);
    ms_dev_space_free(&ds);
    free(rec);
    free(L);
    free(picks);
    free(cur);
    return rc;
}
