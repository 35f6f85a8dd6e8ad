/* choose.c — the plan memsplit picks among plans the search finds about as
 * fast (planner.h: ms_plan_choose). Predicted step times carry the noise of
 * measured layer times; two runs of the same trial must not train in two
 * precisions because 0.5% moved. So plans within MS_PLAN_TIE of the fastest
 * count as equal, and among equals a fixed order decides: the trial's
 * precision, then fewer stages, then no recompute, then the lower peak.
 * Each rule is one more exact search with that option fixed or tightened;
 * none estimates. */
#include "planner/planner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The trial's precision: that of its rows measured in the full run. */
static int trial_precision(const ms_profile *prof)
{
    for (int i = 0; i < prof->n_rows; i++)
        if (prof->rows[i].source == MS_ROW_FULL) return prof->rows[i].precision;
    return -1;
}

/* The fastest plan under o, or INFINITY when none (or on an error, kept in rc). */
static double fastest(const ms_profile *prof, const ms_plan_device *devs, int n, const ms_plan_opts *o, ms_plan *pl,
                      int *rc, char *err, size_t errlen)
{
    ms_plan_free(pl);
    int r = ms_plan_search(prof, devs, n, o, pl, err, errlen);
    if (r == MS_PLAN_ERROR) *rc = r;
    return r == MS_PLAN_OK ? pl->step_ms : INFINITY;
}

static uint64_t usable(uint64_t cap, double headroom) { return (uint64_t)floor((double)cap * (1.0 - headroom)); }

/* The headroom at which the plan's fullest stage sits exactly on its limit. */
static double headroom_of(const ms_plan *pl)
{
    double h = 1;
    for (int s = 0; s < pl->n_stages; s++) {
        double cap = (double)pl->devices[pl->stages[s].device].capacity;
        double free_frac = cap > 0 ? 1.0 - (double)pl->stages[s].peak / cap : 0;
        if (free_frac < h) h = free_frac;
    }
    return h < 0 ? 0 : h;
}

int ms_plan_choose(const ms_profile *prof, const ms_plan_device *devs, int n, const ms_plan_opts *opts,
                   ms_plan *out, char *err, size_t errlen)
{
    int rc = ms_plan_search(prof, devs, n, opts, out, err, errlen);
    if (rc != MS_PLAN_OK) return rc;
    const double best = out->step_ms, limit = best * (1 + MS_PLAN_TIE);
    int best_prec = out->precision, best_stages = out->n_stages;
    ms_plan_opts c = *opts;
    ms_plan t;
    memset(&t, 0, sizeof t);
    char note[sizeof out->note] = "";
    rc = MS_PLAN_OK;

    /* 1. the trial's precision */
    int tp = trial_precision(prof);
    if (c.precision < 0 && tp >= 0 && tp != best_prec) {
        ms_plan_opts q = c;
        q.precision = tp;
        double ms = fastest(prof, devs, n, &q, &t, &rc, err, errlen);
        if (ms <= limit) {
            c.precision = tp;
            snprintf(note, sizeof note, "It keeps the trial's precision, %s: %s is predicted only %.1f%% faster, within the %.0f%% that counts as equal. ",
                     ms_precision_name((ms_precision)tp), ms_precision_name((ms_precision)best_prec),
                     100 * (ms / best - 1), 100 * MS_PLAN_TIE);
        } else if (isinf(ms)) {
            snprintf(note, sizeof note, "It trains in %s, not the trial's %s: no plan in %s fits. ",
                     ms_precision_name((ms_precision)best_prec), ms_precision_name((ms_precision)tp),
                     ms_precision_name((ms_precision)tp));
            c.precision = best_prec;
        } else {
            snprintf(note, sizeof note, "It trains in %s, not the trial's %s: %s is predicted %.1f%% faster (more than the %.0f%% that counts as equal). ",
                     ms_precision_name((ms_precision)best_prec), ms_precision_name((ms_precision)tp),
                     ms_precision_name((ms_precision)best_prec), 100 * (1 - best / ms), 100 * MS_PLAN_TIE);
            c.precision = best_prec;
        }
    } else if (c.precision < 0) {
        c.precision = best_prec;
    }
    /* 2. fewer stages: the fastest plan with at most k stages is no slower
     * for a larger k, so the smallest k within the limit is a bisection;
     * the later rules keep at most that many (a lower peak never buys a
     * longer pipeline) */
    if (rc == MS_PLAN_OK) {
        int lo = 1, hi = best_stages; /* hi fits within the limit */
        if (c.precision != best_prec) {
            ms_plan_opts q = c;
            fastest(prof, devs, n, &q, &t, &rc, err, errlen);
            hi = t.n_stages ? t.n_stages : best_stages;
        }
        while (lo < hi && rc == MS_PLAN_OK) {
            ms_plan_opts q = c;
            q.max_stages = (lo + hi) / 2;
            if (fastest(prof, devs, n, &q, &t, &rc, err, errlen) <= limit) hi = q.max_stages;
            else lo = q.max_stages + 1;
        }
        c.max_stages = hi;
    }
    /* 3. no recompute */
    if (rc == MS_PLAN_OK && c.recompute == MS_RECOMPUTE_AUTO) {
        ms_plan_opts q = c;
        q.recompute = MS_RECOMPUTE_NEVER;
        if (fastest(prof, devs, n, &q, &t, &rc, err, errlen) <= limit) c.recompute = MS_RECOMPUTE_NEVER;
    }
    /* 4. the lower peak: the largest headroom that still leaves a plan within the limit */
    if (rc == MS_PLAN_OK) {
        double ms = fastest(prof, devs, n, &c, &t, &rc, err, errlen);
        double lo = c.headroom, hi = 1; /* lo: a plan within the limit exists; hi: none */
        double probe = headroom_of(&t) * (1 - 1e-9); /* where the plan just found still fits */
        for (int it = 0; it < 10 && ms <= limit && rc == MS_PLAN_OK && probe > lo && probe < hi; it++) {
            ms_plan_opts q = c;
            q.headroom = probe;
            if (fastest(prof, devs, n, &q, &t, &rc, err, errlen) <= limit) lo = probe;
            else hi = probe;
            probe = (lo + hi) / 2;
        }
        c.headroom = lo;
    }
    if (rc == MS_PLAN_OK && fastest(prof, devs, n, &c, &t, &rc, err, errlen) <= limit) {
        /* the plan states the headroom it was asked for; its peaks keep more */
        t.headroom = opts->headroom;
        for (int s = 0; s < t.n_stages; s++)
            if (t.stages[s].peak > usable(t.devices[t.stages[s].device].capacity, opts->headroom)) rc = MS_PLAN_ERROR;
        if (rc == MS_PLAN_OK) {
            ms_plan_free(out);
            *out = t;
            memset(&t, 0, sizeof t);
        }
    }
    ms_plan_free(&t);
    if (rc != MS_PLAN_OK) {
        ms_plan_free(out);
        return rc;
    }
    snprintf(out->note, sizeof out->note, "%s", note);
    return MS_PLAN_OK;
}
