/* infeasible.c — when no plan fits, find what would, by searching again
 * with relaxed settings (planner.h): more GPUs like the largest given, a
 * larger capacity on the given number of GPUs, and each fixed option opened
 * in turn. Every answer comes from ms_plan_search(), none is estimated. */
#include "planner/planner.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/memory_model.h"
#include "vocab/size.h"

typedef struct {
    char *buf;
    size_t len, cap;
} text;

static void say(text *t, const char *fmt, ...)
{
    if (t->len >= t->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0) t->len = (size_t)n < t->cap - t->len ? t->len + (size_t)n : t->cap - 1;
}

/* 1: a plan fits, 0: none, -1: error (err set). *plan_out optional. */
static int fits(const ms_profile *prof, const ms_plan_device *devs, int n, const ms_plan_opts *o, int first_fit,
                ms_plan *plan_out, char *err, size_t errlen)
{
    ms_plan_opts oo = *o;
    oo.first_fit = first_fit;
    ms_plan pl;
    int rc = ms_plan_search(prof, devs, n, &oo, &pl, err, errlen);
    if (rc == MS_PLAN_ERROR) return -1;
    if (rc == MS_PLAN_OK && plan_out) *plan_out = pl;
    else ms_plan_free(&pl);
    return rc == MS_PLAN_OK;
}

static int uniform_fits(const ms_profile *prof, int n, uint64_t cap, const ms_plan_opts *o, char *err,
                        size_t errlen)
{
    ms_plan_device *d = calloc((size_t)n, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) d[i].capacity = cap;
    int r = fits(prof, d, n, o, 1, NULL, err, errlen);
    free(d);
    return r;
}

/* The most GPUs worth trying: one layer each, or --max-stages. */
static int gpu_limit(const ms_profile *prof, const ms_plan_opts *o)
{
    int max = prof->n_layers < MS_MAX_DEVICES ? prof->n_layers : MS_MAX_DEVICES;
    if (o->max_stages && o->max_stages < max) max = o->max_stages;
    return max;
}

/* Smallest count in (n, max] of the given GPUs plus copies of the largest
 * that fits; 0 if none does. Feasibility only grows with the count. */
static int min_gpus(const ms_profile *prof, const ms_plan_device *devs, int n, const ms_plan_opts *o,
                    uint64_t *added, char *err, size_t errlen)
{
    int max = gpu_limit(prof, o);
    if (max <= n) return 0;
    uint64_t big = 0;
    for (int i = 0; i < n; i++)
        if (devs[i].capacity > big) big = devs[i].capacity;
    *added = big;
    ms_plan_device *d = calloc((size_t)max, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(d, devs, (size_t)n * sizeof *d);
    for (int i = n; i < max; i++) {
        d[i].capacity = big;
        snprintf(d[i].name, sizeof d[i].name, "extra:%d", i - n);
    }
    int r = fits(prof, d, max, o, 1, NULL, err, errlen), lo = n, hi = max;
    if (r <= 0) {
        free(d);
        return r < 0 ? -1 : 0;
    }
    while (hi - lo > 1) { /* lo does not fit, hi fits */
        int mid = lo + (hi - lo) / 2;
        r = fits(prof, d, mid, o, 1, NULL, err, errlen);
        if (r < 0) break;
        if (r) hi = mid;
        else lo = mid;
    }
    free(d);
    return r < 0 ? -1 : hi;
}

/* Smallest capacity (to 1 MiB, or 0.1%) for n alike GPUs that fits; 0 if none. */
static uint64_t capacity_needed(const ms_profile *prof, int n, uint64_t start, const ms_plan_opts *o, int *error,
                                char *err, size_t errlen)
{
    const uint64_t MiB = 1ull << 20;
    uint64_t lo = 0, hi = start > MiB ? start : MiB;
    for (;;) {
        int r = uniform_fits(prof, n, hi, o, err, errlen);
        if (r < 0) { *error = 1; return 0; }
        if (r) break;
        lo = hi;
        if (hi > (1ull << 61)) return 0;
        hi *= 2;
    }
    while (hi - lo > MiB && hi - lo > hi / 1000) {
        uint64_t mid = lo + (hi - lo) / 2;
        int r = uniform_fits(prof, n, mid, o, err, errlen);
        if (r < 0) { *error = 1; return 0; }
        if (r) hi = mid;
        else lo = mid;
    }
    return (hi + MiB - 1) / MiB * MiB; /* round up: still fits (more memory never hurts) */
}

typedef struct {
    int applies;
    const char *name;
    ms_plan_opts o;
} relaxation;

static void add_fix(ms_infeasible *out, const ms_plan *pl, const char *option)
{
    if (out->n_fixes >= (int)(sizeof out->fixes / sizeof out->fixes[0])) return;
    ms_infeasible_fix *f = &out->fixes[out->n_fixes++];
    snprintf(f->option, sizeof f->option, "%s", option);
    f->n_stages = pl->n_stages;
    f->step_ms = pl->step_ms;
}

static const char *opt_summary(const ms_plan_opts *o, char *buf, size_t len)
{
    char mb[24];
    if (o->micro_batch) snprintf(mb, sizeof mb, "%d", o->micro_batch);
    else snprintf(mb, sizeof mb, "any");
    snprintf(buf, len, "precision %s, schedule %s, micro-batch %s, recompute %s",
             o->precision >= 0 ? ms_precision_name((ms_precision)o->precision) : "any",
             o->schedule >= 0 ? ms_schedule_name(o->schedule) : "any", mb, ms_recompute_mode_name(o->recompute));
    return buf;
}

static int same_capacity(const ms_plan_device *devs, int n)
{
    for (int i = 1; i < n; i++)
        if (devs[i].capacity != devs[0].capacity) return 0;
    return 1;
}

static void describe_devices(text *t, const ms_plan_device *devs, int n, double headroom)
{
    char a[32], b[32];
    if (same_capacity(devs, n)) {
        say(t, "%d GPU%s of %s (%s usable at %g%% headroom)", n, n > 1 ? "s" : "",
            ms_fmt_bytes(devs[0].capacity, a, sizeof a),
            ms_fmt_bytes(ms_usable_bytes(devs[0].capacity, headroom), b, sizeof b), headroom * 100);
        return;
    }
    say(t, "GPUs of ");
    for (int i = 0; i < n; i++) say(t, "%s%s", i ? ", " : "", ms_fmt_bytes(devs[i].capacity, a, sizeof a));
    say(t, " (%g%% headroom)", headroom * 100);
}

int ms_plan_explain_infeasible(const ms_profile *prof, const ms_plan_device *devs, int n_devs,
                               const ms_plan_opts *opts, ms_infeasible *out, char *err, size_t errlen)
{
    if (!out) return MS_PLAN_ERROR;
    memset(out, 0, sizeof *out);
    out->gpus_given = n_devs;
    ms_plan pl;
    int r = fits(prof, devs, n_devs, opts, 1, NULL, err, errlen);
    if (r < 0) return MS_PLAN_ERROR;
    if (r > 0) {
        snprintf(out->text, sizeof out->text, "A plan fits as requested.");
        return 0;
    }
    out->min_gpus = min_gpus(prof, devs, n_devs, opts, &out->added_capacity, err, errlen);
    if (out->min_gpus < 0) return MS_PLAN_ERROR;
    uint64_t big = 0;
    for (int i = 0; i < n_devs; i++)
        if (devs[i].capacity > big) big = devs[i].capacity;
    int cap_err = 0;
    out->capacity_needed = capacity_needed(prof, n_devs, big, opts, &cap_err, err, errlen);
    if (cap_err) return MS_PLAN_ERROR;

    /* each fixed option opened on its own, with the full search for its time */
    relaxation relax[6];
    int nr = 0;
    ms_plan_opts o = *opts;
    o.precision = -1;
    relax[nr++] = (relaxation){opts->precision >= 0, "--precision any", o};
    o = *opts;
    o.micro_batch = 0;
    relax[nr++] = (relaxation){opts->micro_batch > 0, "--micro-batch any", o};
    o = *opts;
    o.recompute = MS_RECOMPUTE_AUTO;
    relax[nr++] = (relaxation){opts->recompute != MS_RECOMPUTE_AUTO, "--recompute auto", o};
    o = *opts;
    o.schedule = -1;
    relax[nr++] = (relaxation){opts->schedule >= 0, "--schedule any", o};
    o = *opts;
    o.max_stages = 0;
    relax[nr++] = (relaxation){opts->max_stages > 0, "--max-stages any", o};
    o = *opts;
    o.headroom = 0;
    relax[nr++] = (relaxation){opts->headroom > 0, "--headroom 0", o};
    for (int i = 0; i < nr; i++) {
        if (!relax[i].applies) continue;
        r = fits(prof, devs, n_devs, &relax[i].o, 0, &pl, err, errlen);
        if (r < 0) return MS_PLAN_ERROR;
        if (r) {
            add_fix(out, &pl, relax[i].name);
            ms_plan_free(&pl);
        }
    }

    /* no single option is enough: all of them together, and on how many GPUs */
    ms_plan_opts open = *opts;
    open.precision = -1;
    open.micro_batch = 0;
    open.recompute = MS_RECOMPUTE_AUTO;
    open.schedule = -1;
    open.max_stages = 0;
    int any_fixed = memcmp(&open, opts, sizeof open) != 0;
    if (any_fixed && out->n_fixes == 0) {
        r = fits(prof, devs, n_devs, &open, 0, &pl, err, errlen);
        if (r < 0) return MS_PLAN_ERROR;
        if (r) {
            add_fix(out, &pl, "every option open");
            ms_plan_free(&pl);
        } else {
            uint64_t added;
            out->min_gpus_open = min_gpus(prof, devs, n_devs, &open, &added, err, errlen);
            if (out->min_gpus_open < 0) return MS_PLAN_ERROR;
        }
    }

    text t = {out->text, 0, sizeof out->text};
    char a[32], b[32], sum[160];
    say(&t, "No plan fits ");
    describe_devices(&t, devs, n_devs, opts->headroom);
    say(&t, " with %s.", opt_summary(opts, sum, sizeof sum));
    if (out->min_gpus > 0) {
        if (same_capacity(devs, n_devs)) say(&t, " It would fit on %d GPUs of %s", out->min_gpus, ms_fmt_bytes(out->added_capacity, a, sizeof a));
        else say(&t, " It would fit with %d more GPU%s of %s", out->min_gpus - n_devs, out->min_gpus - n_devs > 1 ? "s" : "",
                 ms_fmt_bytes(out->added_capacity, a, sizeof a));
    } else if (opts->max_stages && opts->max_stages <= n_devs) {
        say(&t, " More GPUs would not help with --max-stages %d", opts->max_stages);
    } else if (gpu_limit(prof, opts) == prof->n_layers) {
        say(&t, " Not even one layer per GPU (%d GPUs of %s) fits: some layer alone is too big", prof->n_layers,
            ms_fmt_bytes(big, a, sizeof a));
    } else {
        say(&t, " Not even %d GPUs of %s fit", gpu_limit(prof, opts), ms_fmt_bytes(big, a, sizeof a));
    }
    if (out->capacity_needed)
        say(&t, "%s %d GPU%s of at least %s each", out->min_gpus > 0 ? ", or on" : "; it needs", n_devs,
            n_devs > 1 ? "s" : "", ms_fmt_bytes(out->capacity_needed, b, sizeof b));
    say(&t, ".");
    if (out->n_fixes && prof->fingerprint[0]) {
        /* a program's precision, batch and checkpointing are its own: say
         * what change in the program would fit, never as a flag */
        say(&t, " A change in the program would also make it fit:");
        for (int i = 0; i < out->n_fixes; i++) {
            const char *o = out->fixes[i].option;
            const char *what = !strncmp(o, "--micro-batch", 13) ? "a smaller batch per forward"
                             : !strncmp(o, "--precision", 11)   ? "another precision (bf16 autocast)"
                             : !strncmp(o, "--recompute", 11)   ? "activation checkpointing of its blocks"
                                                                : o;
            say(&t, "%s %s (%d stage%s, %.1f ms/step)", i ? ";" : "", what, out->fixes[i].n_stages,
                out->fixes[i].n_stages > 1 ? "s" : "", out->fixes[i].step_ms);
        }
        say(&t, "; memsplit does not make it for you.");
    } else if (out->n_fixes) {
        say(&t, " Opening an option also makes it fit:");
        for (int i = 0; i < out->n_fixes; i++)
            say(&t, "%s %s (%d stage%s, %.1f ms/step)", i ? ";" : "", out->fixes[i].option, out->fixes[i].n_stages,
                out->fixes[i].n_stages > 1 ? "s" : "", out->fixes[i].step_ms);
        say(&t, ".");
    } else if (out->min_gpus_open > 0) {
        if (same_capacity(devs, n_devs))
            say(&t, " With every option open it would fit on %d GPUs of %s.", out->min_gpus_open,
                ms_fmt_bytes(out->added_capacity, a, sizeof a));
        else
            say(&t, " With every option open it would fit with %d more GPU%s of %s.", out->min_gpus_open - n_devs,
                out->min_gpus_open - n_devs > 1 ? "s" : "", ms_fmt_bytes(out->added_capacity, a, sizeof a));
    } else if (!any_fixed) {
        say(&t, " Every precision, micro-batch size and recompute choice was already tried.");
    }
    return 0;
}
