/* search.c — the exact plan search (planner.h).
 *
 * Outer loop: configurations (precision x schedule x micro-batch size), in
 * order of a lower bound on their step time so that a good plan is found
 * early and bounds the rest. Inner: a dynamic program over suffixes of the
 * layer list. A stage's memory and time depend on its layers, on whether it
 * is the first stage (it receives no input) and on how many stages follow it
 * (1F1B keeps min(m, that + 1) micro-batches in flight; the last stage sends
 * nothing) — all known when stages are added from the back, so one pass
 * covers every stage count at once. Devices enter as a multiset of capacity
 * classes (equal capacities are interchangeable), which makes the search
 * exact over every subset and ordering of the devices. The objective
 * (m + p - 1) * max cycle + max opt is not a single max, so each state keeps
 * the Pareto set of (max cycle C, max opt O) over its partial plans.
 * Replicas: a configuration also fixes d copies of the pipeline and ZeRO-1;
 * their costs fold into the layers' (replica_model.h), each stage takes a
 * group of d devices, and m = G / (u d) micro-batches run per replica. */
#include "planner/planner.h"
#include "vocab/errf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/memory_model.h"
#include "vocab/plan_replicas.h"
#include "planner/replica_model.h"
#include "planner/search_dp.h"
#include "planner/sequential.h"
#include "vocab/profile_json.h"
#include "vocab/size.h"

#define MAX_DP_CELLS (1 << 23)


/* ---- configurations -------------------------------------------------- */

typedef struct {
    int precision, schedule, micro_batch, replicas, zero;
    double lb;
    int order;
} config;

static int config_cmp(const void *a, const void *b)
{
    const config *x = a, *y = b;
    if (x->lb != y->lb) return x->lb < y->lb ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* Step time no plan with this configuration can beat: the compute spread
 * perfectly, never less than the slowest layer, plus the slowest optimizer step. */
static double lower_bound(const ms_layer_cost *L, int n, int m, int R)
{
    double total = 0, maxc = 0, maxo = 0, tot_o = 0;
    for (int l = 0; l < n; l++) {
        double c = L[l].fwd_ms + L[l].bwd_ms;
        total += c;
        if (c > maxc) maxc = c;
        if (L[l].opt_ms > maxo) maxo = L[l].opt_ms;
        tot_o += L[l].opt_ms;
    }
    double best = INFINITY;
    for (int p = 1; p <= R; p++) {
        double C = total / p > maxc ? total / p : maxc;
        double O = tot_o / p > maxo ? tot_o / p : maxo;
        double t = (double)(m + p - 1) * C + O;
        if (t < best) best = t;
    }
    return best;
}

static int check_opts(const ms_profile *prof, const ms_plan_device *devs, int n_devs, const ms_plan_opts *o,
                      char *err, size_t errlen)
{
    if (!prof || !o || !devs) return ms_errf(err, errlen, "missing profile, devices or options");
    if (n_devs < 1) return ms_errf(err, errlen, "no devices to plan for");
    if (n_devs > MS_MAX_DEVICES) return ms_errf(err, errlen, "%d devices is more than %d", n_devs, MS_MAX_DEVICES);
    if (!(o->headroom >= 0 && o->headroom < 1)) return ms_errf(err, errlen, "headroom %g is outside [0, 1)", o->headroom);
    if (!(o->link_gbps > 0 && isfinite(o->link_gbps)))
        return ms_errf(err, errlen, "link bandwidth %g Gbit/s is not positive", o->link_gbps);
    if (o->precision < -1 || o->precision > 2) return ms_errf(err, errlen, "unknown precision %d", o->precision);
    if (o->schedule < -1 || o->schedule >= MS_SCHED_N) return ms_errf(err, errlen, "unknown schedule %d", o->schedule);
    if (o->recompute < 0 || o->recompute > 2) return ms_errf(err, errlen, "unknown recompute mode %d", o->recompute);
    if (o->global_batch < 0 || o->global_batch > MS_PROFILE_MAX_BATCH)
        return ms_errf(err, errlen, "global batch %d is outside 1..%d", o->global_batch, MS_PROFILE_MAX_BATCH);
    if (o->micro_batch < 0) return ms_errf(err, errlen, "micro-batch %d is negative", o->micro_batch);
    if (o->max_stages < 0) return ms_errf(err, errlen, "max stages %d is negative", o->max_stages);
    if (o->replicas < 0 || o->replicas > MS_MAX_DEVICES)
        return ms_errf(err, errlen, "replicas %d is outside 0 (any) .. %d", o->replicas, MS_MAX_DEVICES);
    if (o->zero < -1 || o->zero > 1) return ms_errf(err, errlen, "unknown ZeRO setting %d", o->zero);
    if (o->schedule == MS_SCHED_SEQUENTIAL && o->replicas != 1)
        return ms_errf(err, errlen, "the sequential schedule runs one pipeline: replicas must be 1");
    if (o->zero == 1 && o->replicas == 1)
        return ms_errf(err, errlen, "ZeRO-1 shards the optimizer over replicas; with one replica there is nothing to shard");
    if (!(o->bus_gbps > 0 && isfinite(o->bus_gbps)))
        return ms_errf(err, errlen, "all-reduce bandwidth %g Gbit/s is not positive", o->bus_gbps);
    int G = o->global_batch ? o->global_batch : prof->global_batch;
    if (o->micro_batch && G % o->micro_batch)
        return ms_errf(err, errlen, "micro-batch %d does not divide the global batch %d", o->micro_batch, G);
    unsigned have = ms_profile_precisions(prof);
    if (o->precision >= 0 && !(have & (1u << o->precision))) {
        char list[32] = "";
        for (int p = 0; p < 3; p++)
            if (have & (1u << p)) {
                if (list[0]) strcat(list, ", ");
                strcat(list, ms_precision_name((ms_precision)p));
            }
        return ms_errf(err, errlen, "the profile has no %s rows (it has %s); profile that precision or drop --precision",
                    ms_precision_name((ms_precision)o->precision), list);
    }
    return 0;
}

static void fill_plan_header(ms_plan *pl, const ms_profile *prof, const ms_plan_device *devs, int n_devs,
                             const ms_plan_opts *o)
{
    pl->version = MS_PLAN_VERSION;
    snprintf(pl->model, sizeof pl->model, "%s", prof->model);
    pl->n_layers = prof->n_layers;
    pl->seq_len = prof->seq_len;
    pl->d_model = prof->d_model;
    pl->n_head = prof->n_head;
    pl->vocab = prof->vocab;
    pl->n_devices = n_devs;
    memcpy(pl->devices, devs, (size_t)n_devs * sizeof *devs);
    pl->headroom = o->headroom;
    pl->link_gbps = o->link_gbps;
    pl->bus_gbps = o->bus_gbps;
    pl->comm_reserve = o->comm_reserve;
}

/* The device spaces and DPs of one device list, one per replica count d
 * (each stage a group of d devices), built when a configuration first needs them. */
typedef struct spaces {
    const ms_plan_device *devs;
    int n_devs, R;           /* devices; most stages with one replica */
    double headroom;
    ms_dev_space ds[MS_MAX_DEVICES + 1];
    ms_dp *dp[MS_MAX_DEVICES + 1];
    int built[MS_MAX_DEVICES + 1];
} spaces;

static int stages_for(const spaces *sp, int d) { return sp->R < sp->n_devs / d ? sp->R : sp->n_devs / d; }

static int space_of(spaces *sp, const ms_profile *prof, const ms_plan_opts *o, int d, char *err, size_t errlen)
{
    if (sp->built[d]) return 0;
    int R = stages_for(sp, d);
    if (ms_dev_space_build_groups(&sp->ds[d], sp->devs, sp->n_devs, R, sp->headroom, d, err, errlen)) return -1;
    sp->built[d] = 1;
    if ((size_t)(prof->n_layers + 1) * (size_t)sp->ds[d].n_states > MAX_DP_CELLS)
        return ms_errf(err, errlen, "search space too large (%d layers x %d device states)", prof->n_layers,
                       sp->ds[d].n_states);
    sp->dp[d] = ms_dp_new(prof->n_layers, R, &sp->ds[d], prof->reserve, o->link_gbps,
                          o->recompute != MS_RECOMPUTE_ALWAYS, o->recompute != MS_RECOMPUTE_NEVER, o->comm_reserve, d);
    return sp->dp[d] ? 0 : ms_errf(err, errlen, "out of memory");
}

static void spaces_free(spaces *sp)
{
    for (int d = 0; sp && d <= MS_MAX_DEVICES; d++)
        if (sp->built[d]) {
            ms_dp_free(sp->dp[d]);
            ms_dev_space_free(&sp->ds[d]);
        }
    free(sp);
}

static spaces *spaces_new(const ms_plan_device *devs, int n_devs, int R, double headroom)
{
    spaces *sp = calloc(1, sizeof *sp);
    if (sp) *sp = (spaces){.devs = devs, .n_devs = n_devs, .R = R, .headroom = headroom};
    return sp;
}

/* Runs the configurations (sorted by lower bound) against one device space.
 * Improves *best and sets *win / picks / *n_picks when a better plan turns
 * up. Returns 0, or MS_PLAN_ERROR with err. */
static int run_configs(const ms_profile *prof, const ms_plan_opts *o, const config *cfg, int n_cfg, int G,
                       spaces *sp, ms_layer_cost *L, double *best, const config **win, ms_stage_pick *picks,
                       int *n_picks, char *err, size_t errlen)
{
    const int n = prof->n_layers;
    ms_stage_pick *cur = malloc((size_t)sp->R * sizeof *cur);
    ms_layer_cost *Lr = malloc((size_t)n * sizeof *Lr);
    int rc = 0;
    if (!cur || !Lr) {
        rc = ms_errf(err, errlen, "out of memory");
        goto done;
    }
    for (int ci = 0; ci < n_cfg; ci++) {
        const config *cf = &cfg[ci];
        if (cf->lb >= *best) break; /* sorted: nothing later can win */
        if (stages_for(sp, cf->replicas) < 1) continue; /* too few devices for d replicas */
        if (ms_layer_costs(prof, cf->precision, cf->micro_batch, L, err, errlen) ||
            space_of(sp, prof, o, cf->replicas, err, errlen)) {
            rc = MS_PLAN_ERROR;
            goto done;
        }
        ms_replica_costs(L, n, cf->replicas, cf->zero, o->bus_gbps, Lr);
        int np = 0, got = ms_dp_run(sp->dp[cf->replicas], Lr, cf->schedule, G / cf->micro_batch / cf->replicas, best,
                                    cur, &np);
        if (got < 0) {
            rc = ms_errf(err, errlen, "out of memory");
            goto done;
        }
        if (got) {
            *win = cf;
            *n_picks = np;
            memcpy(picks, cur, (size_t)np * sizeof *cur);
            if (o->first_fit) break;
        }
    }
done:
    free(cur);
    free(Lr);
    return rc;
}

/* Stage s's d devices for a plan found in the exact space: stages in order of
 * their class (the most demanding first) each take d devices of that class or
 * larger, the smallest first. With nested sets of allowed devices, taking
 * any of them for the most demanding stage first never blocks a later one. */
static void place_groups(const ms_dev_space *ds, const ms_stage_pick *picks, int p, int d, int *out)
{
    int used[MS_MAX_CLASSES] = {0};
    for (int cls = 0; cls < ds->n_cls; cls++)
        for (int s = 0; s < p; s++) {
            if (picks[s].cls != cls) continue;
            for (int r = 0, c = cls; r < d; r++) {
                while (used[c] == ds->count[c]) c--; /* Hall's condition: one is left in a larger class */
                out[s * d + r] = ds->devs[ds->dev_off[c] + used[c]++];
            }
        }
}

/* The configurations (precision x micro-batch x replicas x ZeRO x schedule)
 * with their lower bounds, into *out (malloc'd); their count, or -1. */
static int make_configs(const ms_profile *prof, const ms_plan_opts *opts, int G, int n_devs, int R, ms_layer_cost *L,
                        config **out, char *err, size_t errlen)
{
    const int n = prof->n_layers;
    int n_cfg = 0, cap = 0;
    config *cfg = NULL;
    ms_layer_cost *Lr = malloc((size_t)n * sizeof *Lr);
    if (!Lr) return ms_errf(err, errlen, "out of memory");
    unsigned have = ms_profile_precisions(prof);
    for (int prec = 0; prec < 3; prec++) {
        if (!(have & (1u << prec)) || (opts->precision >= 0 && opts->precision != prec)) continue;
        for (int u = 1; u <= G; u++) {
            if (G % u || (opts->micro_batch && opts->micro_batch != u)) continue;
            if (ms_layer_costs(prof, prec, u, L, err, errlen)) goto fail;
            for (int d = 1; d <= n_devs && d <= G / u; d++) {
                if ((G / u) % d || (opts->replicas && opts->replicas != d)) continue;
                int Rd = R < n_devs / d ? R : n_devs / d;
                for (int z = 0; z <= (d > 1); z++) {
                    if ((opts->zero >= 0 && opts->zero != z) || (opts->zero == 1 && d == 1)) continue;
                    ms_replica_costs(L, n, d, z, opts->bus_gbps, Lr);
                    double lb = lower_bound(Lr, n, G / u / d, Rd);
                    for (int sc = MS_SCHED_PIPELINES - 1; sc >= 0; sc--) { /* 1F1B first: never more memory */
                        if (opts->schedule >= 0 && opts->schedule != sc) continue;
                        if (n_cfg == cap) {
                            cap = cap ? cap * 2 : 32;
                            config *nc = realloc(cfg, (size_t)cap * sizeof *nc);
                            if (!nc) {
                                ms_errf(err, errlen, "out of memory");
                                goto fail;
                            }
                            cfg = nc;
                        }
                        cfg[n_cfg] = (config){prec, sc, u, d, z, lb, n_cfg};
                        n_cfg++;
                    }
                }
            }
        }
    }
    free(Lr);
    if (n_cfg) qsort(cfg, (size_t)n_cfg, sizeof *cfg, config_cmp);
    *out = cfg;
    return n_cfg;
fail:
    free(Lr);
    free(cfg);
    return -1;
}

int ms_plan_search(const ms_profile *prof, const ms_plan_device *devs, int n_devs, const ms_plan_opts *opts,
                   ms_plan *out, char *err, size_t errlen)
{
    if (out) memset(out, 0, sizeof *out);
    if (!out) return ms_errf(err, errlen, "no output plan");
    if (check_opts(prof, devs, n_devs, opts, err, errlen)) return MS_PLAN_ERROR;
    char verr[256];
    if (ms_profile_validate(prof, verr, sizeof verr)) return ms_errf(err, errlen, "bad profile: %s", verr);
    if (opts->schedule == MS_SCHED_SEQUENTIAL) return ms_plan_search_sequential(prof, devs, n_devs, opts, out, err, errlen);

    const int n = prof->n_layers;
    const int G = opts->global_batch ? opts->global_batch : prof->global_batch;
    int R = n_devs < n ? n_devs : n;
    if (R > MS_MAX_STAGES) R = MS_MAX_STAGES;
    if (opts->max_stages && opts->max_stages < R) R = opts->max_stages;

    ms_dev_space ds;
    spaces *exact = NULL, *stand_in = NULL;
    ms_plan_device *flat = NULL;
    if (ms_dev_space_build(&ds, devs, n_devs, R, opts->headroom, err, errlen)) {
        ms_dev_space_free(&ds);
        return MS_PLAN_ERROR;
    }
    int n_cfg = 0, rc = MS_PLAN_INFEASIBLE;
    config *cfg = NULL;
    ms_layer_cost *L = malloc((size_t)n * sizeof *L);
    ms_stage_pick *picks = malloc((size_t)R * sizeof *picks);
    if (!L || !picks || !(exact = spaces_new(devs, n_devs, R, opts->headroom))) {
        rc = ms_errf(err, errlen, "out of memory");
        goto done;
    }
    if ((size_t)(n + 1) * (size_t)ds.n_states > MAX_DP_CELLS) {
        rc = ms_errf(err, errlen, "search space too large (%d layers x %d device states)", n, ds.n_states);
        goto done;
    }
    if ((n_cfg = make_configs(prof, opts, G, n_devs, R, L, &cfg, err, errlen)) < 0) {
        rc = MS_PLAN_ERROR;
        goto done;
    }

    double best = INFINITY;
    int n_best = 0, seeded = 0;
    const config *win = NULL;
    /* Mixed capacities: first plan on uniform stand-ins — for each capacity
     * class k, the devices at least that big, all treated as having exactly
     * that capacity. These spaces are cheap (one class), their plans fit the
     * real devices, so their best is a valid plan and a tight bound for the
     * exact search below. */
    uint64_t seed_cap = 0;
    for (int k = ds.n_cls - 1; ds.n_cls > 1 && k >= 0 && !(seeded && opts->first_fit); k--) {
        int cnt = 0;
        for (int c = 0; c <= k; c++) cnt += ds.count[c];
        if (!flat && !(flat = malloc((size_t)n_devs * sizeof *flat))) {
            rc = ms_errf(err, errlen, "out of memory");
            goto done;
        }
        for (int d = 0; d < cnt; d++) flat[d] = (ms_plan_device){"", ds.cap[k]};
        const config *w = NULL;
        spaces_free(stand_in);
        if (!(stand_in = spaces_new(flat, cnt, cnt < R ? cnt : R, opts->headroom))) {
            rc = ms_errf(err, errlen, "out of memory");
            goto done;
        }
        if (run_configs(prof, opts, cfg, n_cfg, G, stand_in, L, &best, &w, picks, &n_best, err, errlen)) {
            rc = MS_PLAN_ERROR;
            goto done;
        }
        if (w) {
            win = w;
            seeded = 1;
            seed_cap = ds.cap[k];
        }
    }
    if (!(seeded && opts->first_fit)) {
        const config *w2 = NULL;
        if (run_configs(prof, opts, cfg, n_cfg, G, exact, L, &best, &w2, picks, &n_best, err, errlen)) {
            rc = MS_PLAN_ERROR;
            goto done;
        }
        if (w2) {
            win = w2;
            seeded = 0;
        }
    }
    if (!win) goto done;

    /* the plan, every number from the reference model */
    const int d = win->replicas, m = G / win->micro_batch / d;
    out->devices = calloc((size_t)n_devs, sizeof *out->devices);
    out->stages = calloc((size_t)n_best, sizeof *out->stages);
    out->replica_devices = calloc((size_t)(n_best * d), sizeof *out->replica_devices);
    if (!out->devices || !out->stages || !out->replica_devices) {
        rc = ms_errf(err, errlen, "out of memory");
        goto done;
    }
    fill_plan_header(out, prof, devs, n_devs, opts);
    out->precision = win->precision;
    out->schedule = win->schedule;
    out->micro_batch = win->micro_batch;
    out->n_micro = G / win->micro_batch;
    out->global_batch = G;
    out->n_stages = n_best;
    out->replicas = d;
    out->zero = win->zero;
    if (ms_layer_costs(prof, win->precision, win->micro_batch, L, err, errlen)) {
        rc = MS_PLAN_ERROR;
        goto done;
    }
    /* where each (stage, replica) runs: a plan from a uniform stand-in fits
     * every device at least seed_cap big, taken in index order by rank
     * (rank r * p + s is stage s of replica r); an exact plan by class */
    int used[MS_MAX_CLASSES] = {0};
    for (int k = 0, next = 0; seeded && k < n_best * d; k++) {
        while (devs[next].capacity < seed_cap) next++;
        out->replica_devices[(k % n_best) * d + k / n_best] = next++;
    }
    if (!seeded && d > 1) place_groups(&ds, picks, n_best, d, out->replica_devices);
    for (int s = 0; !seeded && d == 1 && s < n_best; s++)
        out->replica_devices[s] = ds.devs[ds.dev_off[picks[s].cls] + used[picks[s].cls]++];
    for (int s = 0; s < n_best; s++) {
        const ms_stage_pick *pk = &picks[s];
        ms_plan_stage *st = &out->stages[s];
        ms_stage_predict_replicas(L, n, pk->first, pk->last, s, n_best, win->schedule, m, pk->rc, prof->reserve,
                                  opts->link_gbps, d, win->zero, opts->bus_gbps, opts->comm_reserve, st);
        st->device = out->replica_devices[s * d];
        for (int r = 0; r < d; r++) {
            uint64_t cap = devs[out->replica_devices[s * d + r]].capacity;
            if (st->peak > ms_usable_bytes(cap, opts->headroom)) {
                rc = ms_errf(err, errlen, "internal error: stage %d predicted %llu bytes over its device", s,
                             (unsigned long long)st->peak);
                goto done;
            }
        }
    }
    out->step_ms = ms_step_ms(out->stages, n_best, m);
    rc = MS_PLAN_OK;

done:
    if (rc != MS_PLAN_OK) ms_plan_free(out);
    ms_dev_space_free(&ds);
    spaces_free(exact);
    spaces_free(stand_in);
    free(flat);
    free(cfg);
    free(L);
    free(picks);
    return rc;
}
