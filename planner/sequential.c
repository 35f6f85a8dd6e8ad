/* sequential.c — the exact search for the sequential schedule (sequential.h). */
#include "planner/sequential.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/memory_model.h"
#include "planner/search_dp.h"
#include "vocab/errf.h"

#define MAX_CELLS (1L << 22)

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
 * *best_ms. Returns 0, or -1 when out of memory. */
static int search_one(const ms_layer_cost *L, int n, const ms_dev_space *ds, int R, uint64_t reserve, int m,
                      double link_gbps, double *best_ms, double *best_frac, ms_stage_pick *picks, int *n_picks)
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
            ms_stage_sums s;
            memset(&s, 0, sizeof s);
            for (int e = j + 1; e <= n; e++) {        /* the stage holds layers j..e-1 */
                const ms_layer_cost *lc = &L[e - 1];
                s.param += lc->param;
                s.master += lc->master;
                s.grad += lc->grad;
                s.optim += lc->optim;
                s.act += lc->act;
                s.act_input += lc->act_input;
                if (lc->act > s.max_act) s.max_act = lc->act;
                if (lc->transient > s.max_transient) s.max_transient = lc->transient;
                s.opt_transient += lc->transient_opt;
                s.in_bytes = j > 0 ? L[j - 1].out_bytes : 0;
                s.out_bytes = e < n ? lc->out_bytes : 0;
                uint64_t by[MS_CAT_N];
                uint64_t peak = ms_stage_bytes(&s, 1, 0, reserve, by);
                /* without its output buffer every term grows with e: once the
                 * largest device is too small, longer stages are too */
                ms_stage_sums s0 = s;
                s0.out_bytes = 0;
                if (ms_stage_bytes(&s0, 1, 0, reserve, by) > ds->avail[0]) break;
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
    if (!L || !picks || !cur) rc = ms_errf(err, errlen, "out of memory");
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
            double b0 = best;
            int got = search_one(L, n, &ds, R, prof->reserve, G / u, o->link_gbps, &best, &best_frac, cur, &np);
            if (got < 0) {
                rc = ms_errf(err, errlen, "out of memory");
                break;
            }
            (void)b0;
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
                st->device = ds.devs[ds.dev_off[picks[s].cls] + used[picks[s].cls]++];
                cyc += st->fwd_ms + st->bwd_ms + st->comm_ms;
                opt += st->opt_ms;
            }
            out->step_ms = (double)out->n_micro * cyc + opt;
            rc = MS_PLAN_OK;
        }
    }
    if (rc != MS_PLAN_OK) ms_plan_free(out);
    ms_dev_space_free(&ds);
    free(L);
    free(picks);
    free(cur);
    return rc;
}
