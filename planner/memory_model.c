/* memory_model.c — per-layer costs fitted from the profile's rows and the
 * stage formulas (memory_model.h states them). */
#include "planner/memory_model.h"
#include "vocab/errf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/profile_json.h"


unsigned ms_profile_precisions(const ms_profile *p)
{
    unsigned mask = 0;
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].precision >= 0 && p->rows[i].precision < 3) mask |= 1u << p->rows[i].precision;
    return mask;
}

int ms_profile_sizes(const ms_profile *p, int precision, int *sizes, int max)
{
    int n = 0;
    for (int i = 0; i < p->n_rows; i++) {
        if (p->rows[i].precision != precision) continue;
        int u = p->rows[i].micro_batch, at = 0;
        while (at < n && sizes[at] < u) at++;
        if (at < n && sizes[at] == u) continue;
        if (n == max) { /* full: keep the smallest max sizes */
            if (at == n) continue;
            n--;
        }
        memmove(sizes + at + 1, sizes + at, (size_t)(n - at) * sizeof *sizes);
        sizes[at] = u;
        n++;
    }
    return n;
}

/* The two measured sizes a field at size u is read from: (u, u) when
 * measured; the bracketing pair; else the two nearest on one side; (s, s)
 * when only one size was measured. */
static int pick_sizes(const ms_profile *p, int precision, int u, int *a, int *b)
{
    int min1 = 0, min2 = 0, max1 = 0, max2 = 0, below = 0, above = 0, any = 0;
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *r = &p->rows[i];
        if (r->precision != precision) continue;
        int s = r->micro_batch;
        any = 1;
        if (s == u) { *a = *b = u; return 0; }
        if (!min1 || s < min1) { if (min1 != s) min2 = min1; min1 = s; }
        else if (s != min1 && (!min2 || s < min2)) min2 = s;
        if (!max1 || s > max1) { if (max1 != s) max2 = max1; max1 = s; }
        else if (s != max1 && (!max2 || s > max2)) max2 = s;
        if (s < u && s > below) below = s;
        if (s > u && (!above || s < above)) above = s;
    }
    if (!any) return -1;
    if (below && above) { *a = below; *b = above; }
    else if (!min2) { *a = *b = min1; }                 /* one size only */
    else if (above) { *a = min1; *b = min2; }           /* u below every size */
    else { *a = max2; *b = max1; }                      /* u above every size */
    return 0;
}

static uint64_t clamp_bytes(double v)
{
    if (!(v > 0)) return 0;
    v = ceil(v);
    return v >= (double)MS_PROFILE_MAX_ROW_BYTES ? MS_PROFILE_MAX_ROW_BYTES : (uint64_t)v;
}

/* value at u on the line through (ua, va) and (ub, vb); proportional when ua == ub */
static double line(double va, double vb, int ua, int ub, int u)
{
    if (ua == ub) return ua == u ? va : va * (double)u / (double)ua;
    return va + (vb - va) * (double)(u - ua) / (double)(ub - ua);
}

static uint64_t line_bytes(uint64_t va, uint64_t vb, int ua, int ub, int u)
{
    if (ua == u) return va;
    if (ub == u) return vb;
    return clamp_bytes(line((double)va, (double)vb, ua, ub, u));
}

static double line_ms(double va, double vb, int ua, int ub, int u)
{
    double v = line(va, vb, ua, ub, u);
    return v > 0 ? v : 0;
}

int ms_layer_costs(const ms_profile *p, int precision, int micro_batch, ms_layer_cost *L, char *err,
                   size_t errlen)
{
    int ua, ub;
    if (micro_batch < 1) return ms_errf(err, errlen, "micro-batch size %d is not positive", micro_batch);
    if (pick_sizes(p, precision, micro_batch, &ua, &ub))
        return ms_errf(err, errlen, "the profile has no rows for precision %d", precision);
    const ms_layer_row **ra = calloc((size_t)p->n_layers * 2, sizeof *ra);
    if (!ra) return ms_errf(err, errlen, "out of memory");
    const ms_layer_row **rb = ra + p->n_layers;
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *r = &p->rows[i];
        if (r->precision != precision || r->layer < 0 || r->layer >= p->n_layers) continue;
        if (r->micro_batch == ua && !ra[r->layer]) ra[r->layer] = r;
        if (r->micro_batch == ub && !rb[r->layer]) rb[r->layer] = r;
    }
    /* static bytes and optimizer time do not depend on the micro-batch:
     * read them at the nearer measured size */
    int a_nearer = abs(micro_batch - ua) <= abs(ub - micro_batch);
    for (int l = 0; l < p->n_layers; l++) {
        const ms_layer_row *a = ra[l], *b = rb[l];
        if (!a || !b) {
            free(ra);
            return ms_errf(err, errlen, "layer %d has no row at micro-batch %d", l, a ? ub : ua);
        }
        const ms_layer_row *near = a_nearer ? a : b;
        ms_layer_cost *c = &L[l];
        c->param = near->param;
        c->master = near->master;
        c->grad = near->grad;
        c->optim = near->optim;
        c->opt_ms = near->opt_ms;
        c->transient_opt = near->transient_opt;
        c->act = line_bytes(a->act, b->act, ua, ub, micro_batch);
        c->act_input = line_bytes(a->act_input, b->act_input, ua, ub, micro_batch);
        uint64_t ta = a->transient_fwd > a->transient_bwd ? a->transient_fwd : a->transient_bwd;
        uint64_t tb = b->transient_fwd > b->transient_bwd ? b->transient_fwd : b->transient_bwd;
        c->transient = line_bytes(ta, tb, ua, ub, micro_batch);
        c->transient_fwd = line_bytes(a->transient_fwd, b->transient_fwd, ua, ub, micro_batch);
        c->transient_bwd = line_bytes(a->transient_bwd, b->transient_bwd, ua, ub, micro_batch);
        c->out_bytes = line_bytes(a->out_bytes, b->out_bytes, ua, ub, micro_batch);
        c->fwd_ms = line_ms(a->fwd_ms, b->fwd_ms, ua, ub, micro_batch);
        c->bwd_ms = line_ms(a->bwd_ms, b->bwd_ms, ua, ub, micro_batch);
    }
    free(ra);
    return 0;
}

int ms_inflight(int schedule, int n_micro, int stage, int n_stages)
{
    if (schedule == MS_SCHED_GPIPE) return n_micro;
    if (schedule == MS_SCHED_SEQUENTIAL) return n_micro > 0 ? 1 : 0;   /* one micro-batch at a time */
    int k = n_stages - stage;
    return k < n_micro ? k : n_micro;
}

uint64_t ms_usable_bytes(uint64_t capacity, double headroom)
{
    long double v = (long double)capacity * (1.0L - (long double)headroom);
    if (!(v > 0)) return 0;
    /* floor, forgiving the binary representation of a decimal headroom
     * (1000 * (1 - 0.05) must be 950, not 949.999...) */
    v = floorl(v + v * 1e-15L);
    if (v >= (long double)UINT64_MAX) return UINT64_MAX;
    return (uint64_t)v;
}

double ms_transfer_ms(uint64_t bytes, double link_gbps)
{
    return (double)bytes * 8e-6 / link_gbps; /* bits / (Gbit/s) = ns; /1e6 → ms */
}

uint64_t ms_stage_bytes(const ms_stage_sums *s, int inflight, int recompute, uint64_t reserve,
                        uint64_t bytes[MS_CAT_N])
{
    uint64_t k = inflight > 0 ? (uint64_t)inflight : 0;
    bytes[MS_CAT_PARAM] = s->param;
    bytes[MS_CAT_MASTER] = s->master;
    bytes[MS_CAT_GRAD] = s->grad;
    bytes[MS_CAT_OPTIM] = s->optim;
    bytes[MS_CAT_ACT] = recompute ? ms_sat_add(ms_sat_mul(k, s->act_input), s->max_act) : ms_sat_mul(k, s->act);
    /* the optimizer step's temporaries come when the activations are gone:
     * the peak is the larger of (activations + transient) and them */
    bytes[MS_CAT_TRANSIENT] = s->max_transient;
    if (s->opt_transient > ms_sat_add(bytes[MS_CAT_ACT], s->max_transient))
        bytes[MS_CAT_TRANSIENT] = s->opt_transient - bytes[MS_CAT_ACT];
    bytes[MS_CAT_COMM] = ms_sat_add(ms_sat_mul(k, s->in_bytes), s->out_bytes);
    bytes[MS_CAT_RESERVE] = reserve;
    uint64_t peak = 0;
    for (int c = 0; c < MS_CAT_N; c++) peak = ms_sat_add(peak, bytes[c]);
    return peak;
}

void ms_stage_times(const ms_stage_sums *s, int recompute, double link_gbps, ms_plan_stage *out)
{
    out->fwd_ms = s->fwd_ms;
    out->bwd_ms = s->bwd_ms + (recompute ? s->fwd_ms : 0.0);
    out->comm_ms = ms_transfer_ms(s->out_bytes, link_gbps) + ms_transfer_ms(s->in_bytes, link_gbps);
    out->opt_ms = s->opt_ms;
}

void ms_stage_predict(const ms_layer_cost *L, int n_layers, int first, int last, int stage, int n_stages,
                      int schedule, int n_micro, int recompute, uint64_t reserve, double link_gbps,
                      ms_plan_stage *out)
{
    ms_stage_sums s;
    memset(&s, 0, sizeof s);
    for (int l = first; l <= last && l < n_layers; l++) {
        const ms_layer_cost *c = &L[l];
        s.param += c->param;
        s.master += c->master;
        s.grad += c->grad;
        s.optim += c->optim;
        s.act += c->act;
        s.act_input += c->act_input;
        if (c->act > s.max_act) s.max_act = c->act;
        if (c->transient > s.max_transient) s.max_transient = c->transient;
        s.opt_transient += c->transient_opt;
        s.fwd_ms += c->fwd_ms;
        s.bwd_ms += c->bwd_ms;
        s.opt_ms += c->opt_ms;
    }
    s.in_bytes = (stage > 0 && first > 0) ? L[first - 1].out_bytes : 0;
    s.out_bytes = (stage < n_stages - 1 && last < n_layers) ? L[last].out_bytes : 0;
    out->first = first;
    out->last = last;
    out->recompute = recompute;
    out->peak = ms_stage_bytes(&s, ms_inflight(schedule, n_micro, stage, n_stages), recompute, reserve, out->bytes);
    ms_stage_times(&s, recompute, link_gbps, out);
}

double ms_stage_cycle_ms(const ms_plan_stage *s) { return s->fwd_ms + s->bwd_ms + s->comm_ms; }

double ms_step_ms(const ms_plan_stage *stages, int n_stages, int n_micro)
{
    double cyc = 0, opt = 0;
    for (int s = 0; s < n_stages; s++) {
        double c = ms_stage_cycle_ms(&stages[s]);
        if (c > cyc) cyc = c;
        if (stages[s].opt_ms > opt) opt = stages[s].opt_ms;
    }
    return (double)(n_micro + n_stages - 1) * cyc + opt;
}
