/* planner_util.c — synthetic profiles and a brute-force planner for tests. */
#include "tests/common/planner_util.h"
#include "planner/replica_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/memory_model.h"

void pu_seed(pu_rng *r, uint64_t seed) { r->s = seed ^ 0x9E3779B97F4A7C15ull; }

uint64_t pu_next(pu_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double pu_uniform(pu_rng *r) { return (double)(pu_next(r) >> 11) * 0x1.0p-53; }
int pu_int(pu_rng *r, int n) { return n <= 1 ? 0 : (int)(pu_next(r) % (uint64_t)n); }

static uint64_t rnd(pu_rng *r, uint64_t lo, uint64_t hi) { return lo + pu_next(r) % (hi - lo + 1); }

ms_profile *pu_random_profile(pu_rng *r, int n_layers, unsigned prec_mask, const int *sizes, int n_sizes,
                              int global_batch)
{
    ms_profile *p = calloc(1, sizeof *p);
    int n_prec = 0;
    for (int q = 0; q < 3; q++) n_prec += (prec_mask >> q) & 1;
    p->rows = calloc((size_t)n_layers * (size_t)n_prec * (size_t)n_sizes, sizeof *p->rows);
    snprintf(p->model, sizeof p->model, "synthetic-%d", n_layers);
    p->n_layers = n_layers;
    p->seq_len = 128;
    p->d_model = 256;
    p->n_head = 4;
    p->vocab = 1000;
    p->global_batch = global_batch;
    snprintf(p->device, sizeof p->device, "cuda:0");
    p->reserve = rnd(r, 1, 64) << 20;
    const uint64_t MiB = 1 << 20;
    for (int l = 0; l < n_layers; l++) {
        /* the layer's own character, shared by its rows */
        uint64_t np = rnd(r, 1, 40) * MiB / 4;                 /* parameters */
        uint64_t a0 = rnd(r, 0, 8) * MiB, a1 = rnd(r, 1, 60) * MiB; /* act = a0 + a1 * u (fp32) */
        uint64_t x1 = rnd(r, 1, a1 / MiB) * MiB / 2;            /* act_input per sequence */
        uint64_t tf0 = rnd(r, 0, 16) * MiB, tf1 = rnd(r, 0, 20) * MiB;
        uint64_t tb1 = rnd(r, 0, 30) * MiB, o1 = rnd(r, 1, 4) * MiB;
        double f0 = 0.05 + pu_uniform(r), f1 = 0.1 + 2 * pu_uniform(r), bw = 1.5 + pu_uniform(r);
        double opt = 0.01 + 0.2 * pu_uniform(r);
        for (int q = 0; q < 3; q++) {
            if (!((prec_mask >> q) & 1)) continue;
            int half = q != 0;
            for (int s = 0; s < n_sizes; s++) {
                uint64_t u = (uint64_t)sizes[s];
                ms_layer_row *w = &p->rows[p->n_rows++];
                w->layer = l;
                if (l == 0) snprintf(w->name, sizeof w->name, "embed");
                else if (l == n_layers - 1) snprintf(w->name, sizeof w->name, "head");
                else snprintf(w->name, sizeof w->name, "block %d", l);
                snprintf(w->kind, sizeof w->kind, "%s", l == 0 ? "embed" : l == n_layers - 1 ? "head" : "block");
                w->precision = q;
                w->micro_batch = (int)u;
                w->source = (l % 3 == 2) ? MS_ROW_ISOLATED : MS_ROW_FULL;
                w->param = np * (half ? 2 : 4);
                w->master = half ? np * 4 : 0;
                w->grad = np * (half ? 2 : 4);
                w->optim = np * 8;
                w->act = (a0 + a1 * u) >> half;
                w->act_input = (x1 * u) >> half;
                w->transient_fwd = (tf0 + tf1 * u) >> half;
                w->transient_bwd = (tf0 + tb1 * u) >> half;
                w->out_bytes = (o1 * u) >> half;
                double speed = q == 0 ? 1.0 : (q == 1 ? 0.55 : 0.5);
                w->fwd_ms = (f0 + f1 * (double)u) * speed;
                w->bwd_ms = w->fwd_ms * bw;
                w->opt_ms = opt;
            }
        }
    }
    return p;
}

ms_prog_record *pu_random_record(pu_rng *r, int n_layers, int n)
{
    ms_prog_record *rec = calloc(1, sizeof *rec);
    if (!rec || (n > 0 && !(rec->s = calloc((size_t)n, sizeof *rec->s)))) {
        free(rec);
        return NULL;
    }
    rec->n_layers = n_layers;
    rec->n = n;
    uint32_t pos = 0, end = 1;
    for (int i = 0; i < n; i++) {
        ms_rec_storage *st = &rec->s[i];
        pos += (uint32_t)pu_int(r, 3);                      /* 0: at the same position as the last */
        st->t_alloc = pos;
        st->layer = pu_int(r, n_layers);
        st->cat = pu_int(r, MS_CAT_N);
        st->bytes = i == n / 2 ? (1ull << 48) : pu_next(r) >> 34;   /* 1ull << 48: MS_PROFILE_MAX_ROW_BYTES */
        st->t_free = pu_int(r, 6) == 0 ? MS_REC_NEVER : pos + 1 + (uint32_t)pu_int(r, 40);
        st->copy_of = -1;
        for (int back = 1; back <= 4 && back <= i && i % 3 == 0; back++)
            if (rec->s[i - back].t_free > pos) {             /* a crossing's copy of a live storage */
                st->copy_of = i - back;
                break;
            }
        if (st->t_free != MS_REC_NEVER && st->t_free > end) end = st->t_free;
        if (pos + 1 > end) end = pos + 1;
    }
    rec->t_end = end + (uint32_t)pu_int(r, 3);
    rec->t_from = (uint32_t)pu_int(r, (int)rec->t_end + 1);
    /* moments, as the record pass makes them (bridge/record.c): in order,
     * most beginning where the last ended, some of no position, a gap now
     * and then; layers -1 (outside any) to n_layers (the loss outside the
     * model) */
    int cap = (int)(rec->t_end / 2) + 2;
    if (!(rec->m = malloc((size_t)cap * sizeof *rec->m))) {
        ms_prog_record_free(rec);
        return NULL;
    }
    uint32_t t = (uint32_t)pu_int(r, 3);
    while (rec->n_moments < cap && t <= rec->t_end) {
        ms_rec_moment *m = &rec->m[rec->n_moments++];
        m->layer = pu_int(r, n_layers + 2) - 1;
        m->phase = pu_int(r, MS_PH_N);
        m->t_begin = t;
        uint32_t len = pu_int(r, 4) == 0 ? 0 : 1 + (uint32_t)pu_int(r, 8);
        m->t_end = len > rec->t_end - t ? rec->t_end : t + len;
        t = m->t_end + (pu_int(r, 6) == 0 ? (uint32_t)pu_int(r, 3) : 0);
        if (m->t_end == rec->t_end && pu_int(r, 2)) break;
    }
    return rec;
}

int pu_hand_on(pu_rng *r, ms_prog_record *rec, int n)
{
    ms_str_list_free(rec->handed_on, rec->n_handed_on);
    rec->handed_on = NULL;
    rec->n_handed_on = 0;
    if (n <= 0) return 0;
    if (!(rec->handed_on = calloc((size_t)n, sizeof *rec->handed_on))) return -1;
    for (int i = 0; i < n; i++, rec->n_handed_on++) {
        char path[MS_NAME_MAX];
        if (i == n - 1 && n > 2) {        /* the longest a module path may be */
            int k = snprintf(path, sizeof path, "model.%d.", i);
            memset(path + k, 'x', sizeof path - 1 - (size_t)k);
            path[sizeof path - 1] = '\0';
        } else {                          /* the index keeps them apart */
            static const char *const kinds[] = { "model.layers.%d", "model.layers.%d.mlp", "encoder.blöck.%d",
                                                 "h.%d.\xe6\xb3\xa8\xe6\x84\x8f", "decoder.layer.%d.\xf0\x9f\x98\x80" };
            snprintf(path, sizeof path, kinds[pu_int(r, 5)], i);
        }
        if (!(rec->handed_on[i] = strdup(path))) return -1;
    }
    return 0;
}

int pu_record_diff(const ms_prog_record *a, const ms_prog_record *b, char *why, size_t len)
{
    if (!a || !b) {
        if (a == b) return 0;
        snprintf(why, len, "one record is NULL (%p, %p)", (const void *)a, (const void *)b);
        return 1;
    }
    if (a->n_layers != b->n_layers || a->t_from != b->t_from || a->t_end != b->t_end || a->n != b->n) {
        snprintf(why, len, "headers differ: n_layers %d/%d, t_from %u/%u, t_end %u/%u, n %d/%d", a->n_layers,
                 b->n_layers, a->t_from, b->t_from, a->t_end, b->t_end, a->n, b->n);
        return 1;
    }
    for (int i = 0; i < a->n; i++) {
        const ms_rec_storage *x = &a->s[i], *y = &b->s[i];
        if (x->layer != y->layer || x->cat != y->cat || x->bytes != y->bytes || x->t_alloc != y->t_alloc ||
            x->t_free != y->t_free || x->copy_of != y->copy_of) {
            snprintf(why, len, "storage %d differs: [%d %d %llu %u %u %d] / [%d %d %llu %u %u %d]", i, x->layer,
                     x->cat, (unsigned long long)x->bytes, x->t_alloc, x->t_free, x->copy_of, y->layer, y->cat,
                     (unsigned long long)y->bytes, y->t_alloc, y->t_free, y->copy_of);
            return 1;
        }
    }
    if (a->n_moments != b->n_moments) {
        snprintf(why, len, "moments: %d / %d", a->n_moments, b->n_moments);
        return 1;
    }
    for (int i = 0; i < a->n_moments; i++) {
        const ms_rec_moment *x = &a->m[i], *y = &b->m[i];
        if (x->layer != y->layer || x->phase != y->phase || x->t_begin != y->t_begin || x->t_end != y->t_end) {
            snprintf(why, len, "moment %d differs: [%d %d %u %u] / [%d %d %u %u]", i, x->layer, x->phase,
                     x->t_begin, x->t_end, y->layer, y->phase, y->t_begin, y->t_end);
            return 1;
        }
    }
    if (a->n_handed_on != b->n_handed_on || (a->n_handed_on == 0 && (a->handed_on || b->handed_on))) {
        snprintf(why, len, "handed on: %d / %d modules (lists %p, %p)", a->n_handed_on, b->n_handed_on,
                 (const void *)a->handed_on, (const void *)b->handed_on);   /* none: NULL, as a load leaves it */
        return 1;
    }
    for (int i = 0; i < a->n_handed_on; i++)
        if (strcmp(a->handed_on[i], b->handed_on[i])) {
            snprintf(why, len, "module handed on %d differs: \"%.80s\" / \"%.80s\"", i, a->handed_on[i],
                     b->handed_on[i]);
            return 1;
        }
    return 0;
}

uint64_t pu_one_device_bytes(const ms_profile *p)
{
    int prec = -1, u = 0;
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *w = &p->rows[i];
        if (prec < 0 || w->precision < prec || (w->precision == prec && w->micro_batch < u)) {
            prec = w->precision;
            u = w->micro_batch;
        }
    }
    uint64_t stat = 0, act = 0, tr = 0, m = (uint64_t)(p->global_batch / u ? p->global_batch / u : 1);
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *w = &p->rows[i];
        if (w->precision != prec || w->micro_batch != u) continue;
        stat += w->param + w->master + w->grad + w->optim;
        act += w->act;
        uint64_t t = w->transient_fwd > w->transient_bwd ? w->transient_fwd : w->transient_bwd;
        if (t > tr) tr = t;
    }
    return stat + m * act + tr + p->reserve;
}

/* ---- brute force ------------------------------------------------------ */

typedef struct {
    const ms_profile *prof;
    const ms_plan_device *devs;
    int n_devs;
    const ms_plan_opts *o;
    const ms_layer_cost *L;
    int sched, m, p, d, zero;
    int first[64], last[64], slot[64];  /* slot[s * d + r]: device of stage s, replica r */
    unsigned char used[64];
    double best;
} bf;

static void bf_eval(bf *b)
{
    ms_plan_stage st[64];
    for (unsigned mask = 0; mask < (1u << b->p); mask++) {
        int ok = 1;
        for (int s = 0; s < b->p && ok; s++) {
            int rc = (mask >> s) & 1;
            if ((rc && b->o->recompute == MS_RECOMPUTE_NEVER) || (!rc && b->o->recompute == MS_RECOMPUTE_ALWAYS)) {
                ok = 0;
                break;
            }
            ms_stage_predict_replicas(b->L, b->prof->n_layers, b->first[s], b->last[s], s, b->p, b->sched, b->m, rc,
                                      b->prof->reserve, b->o->link_gbps, b->d, b->zero, b->o->bus_gbps,
                                      b->o->comm_reserve, &st[s]);
            /* a stage must fit the smallest of its d devices */
            for (int r = 0; r < b->d && ok; r++)
                if (st[s].peak > ms_usable_bytes(b->devs[b->slot[s * b->d + r]].capacity, b->o->headroom)) ok = 0;
        }
        if (!ok) continue;
        double t = ms_step_ms(st, b->p, b->m);
        if (t < b->best) b->best = t;
    }
}

/* every assignment of the p * d (stage, replica) slots to distinct devices */
static void bf_devices(bf *b, int k)
{
    if (k == b->p * b->d) {
        bf_eval(b);
        return;
    }
    for (int d = 0; d < b->n_devs; d++) {
        if (b->used[d]) continue;
        b->used[d] = 1;
        b->slot[k] = d;
        bf_devices(b, k + 1);
        b->used[d] = 0;
    }
}

static void bf_splits(bf *b, int n)
{
    /* cuts: a subset of the n-1 gaps with p-1 members */
    for (unsigned cuts = 0; cuts < (1u << (n - 1)); cuts++) {
        if (__builtin_popcount(cuts) != b->p - 1) continue;
        int s = 0;
        b->first[0] = 0;
        for (int g = 0; g < n - 1; g++)
            if ((cuts >> g) & 1) {
                b->last[s] = g;
                b->first[++s] = g + 1;
            }
        b->last[s] = n - 1;
        bf_devices(b, 0);
    }
}

double pu_brute_force(const ms_profile *prof, const ms_plan_device *devs, int n_devs, const ms_plan_opts *o)
{
    const int n = prof->n_layers, G = o->global_batch ? o->global_batch : prof->global_batch;
    ms_layer_cost *L = malloc((size_t)n * sizeof *L);
    bf b = {.prof = prof, .devs = devs, .n_devs = n_devs, .o = o, .L = L, .best = INFINITY};
    unsigned have = ms_profile_precisions(prof);
    for (int prec = 0; prec < 3; prec++) {
        if (!(have & (1u << prec)) || (o->precision >= 0 && o->precision != prec)) continue;
        for (int u = 1; u <= G; u++) {
            if (G % u || (o->micro_batch && o->micro_batch != u)) continue;
            if (ms_layer_costs(prof, prec, u, L, NULL, 0)) continue;
            for (int d = 1; d <= n_devs; d++) {
                if ((G / u) % d || (o->replicas && o->replicas != d)) continue;
                for (int z = 0; z <= (d > 1); z++) {
                    if (o->zero >= 0 && o->zero != z) continue;
                    b.d = d;
                    b.zero = z;
                    b.m = G / u / d;
                    for (int sc = 0; sc < MS_SCHED_PIPELINES; sc++) { /* what an open search tries */
                        if (o->schedule >= 0 && o->schedule != sc) continue;
                        b.sched = sc;
                        for (b.p = 1; b.p <= n && b.p * d <= n_devs; b.p++)
                            if (!o->max_stages || b.p <= o->max_stages) bf_splits(&b, n);
                    }
                }
            }
        }
    }
    free(L);
    return b.best;
}

/* ---- a plan against its own model ------------------------------------- */

static int close_ms(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-12; }

int pu_check_plan(const ms_profile *prof, const ms_plan *pl)
{
    ms_layer_cost *L = malloc((size_t)prof->n_layers * sizeof *L);
    unsigned char *taken = calloc((size_t)pl->n_devices, 1);
    int bad = 0, next = 0;
    if (ms_layer_costs(prof, pl->precision, pl->micro_batch, L, NULL, 0)) bad = printf("no layer costs\n");
    if (pl->micro_batch * pl->n_micro != pl->global_batch) bad = printf("batch does not multiply out\n");
    for (int s = 0; s < pl->n_stages && !bad; s++) {
        const ms_plan_stage *st = &pl->stages[s];
        if (st->first != next || st->last < st->first) bad = printf("stage %d: layers [%d, %d], expected start %d\n", s, st->first, st->last, next);
        else if (st->device < 0 || st->device >= pl->n_devices || taken[st->device]) bad = printf("stage %d: device %d reused or invalid\n", s, st->device);
        if (bad) break;
        taken[st->device] = 1;
        next = st->last + 1;
        ms_plan_stage ref;
        ms_stage_predict(L, prof->n_layers, st->first, st->last, s, pl->n_stages, pl->schedule, pl->n_micro,
                         st->recompute, prof->reserve, pl->link_gbps, &ref);
        if (memcmp(ref.bytes, st->bytes, sizeof ref.bytes) || ref.peak != st->peak)
            bad = printf("stage %d: bytes differ from the reference model\n", s);
        if (!close_ms(ref.fwd_ms, st->fwd_ms) || !close_ms(ref.bwd_ms, st->bwd_ms) ||
            !close_ms(ref.comm_ms, st->comm_ms) || !close_ms(ref.opt_ms, st->opt_ms))
            bad = printf("stage %d: times differ from the reference model\n", s);
        if (st->peak > ms_usable_bytes(pl->devices[st->device].capacity, pl->headroom))
            bad = printf("stage %d: peak %llu over usable %llu\n", s, (unsigned long long)st->peak,
                         (unsigned long long)ms_usable_bytes(pl->devices[st->device].capacity, pl->headroom));
    }
    if (!bad && next != prof->n_layers) bad = printf("stages end at %d of %d layers\n", next, prof->n_layers);
    if (!bad && !close_ms(ms_step_ms(pl->stages, pl->n_stages, pl->n_micro), pl->step_ms))
        bad = printf("step time %g is not the formula's %g\n", pl->step_ms, ms_step_ms(pl->stages, pl->n_stages, pl->n_micro));
    free(L);
    free(taken);
    return bad ? -1 : 0;
}
