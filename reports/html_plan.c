/* html_plan.c — section 2 of the HTML report: the plans recorded under the
 * report's runs (their stages, exact), and the bars of chart (c): per
 * device, the predicted peak against the measured one, by category, against
 * the device's capacity (see html_internal.h).
 *
 * The measured side comes from a run's device_peaks; when a run has a plan
 * but no peaks yet (nothing trained), the chart shows the plan's predicted
 * stages alone and says that nothing was measured. The chart itself:
 * html_devices.c. */
#include "reports/html_internal.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "reports/grow.h"
#include "reports/run_facts.h"

/* ---- collecting --------------------------------------------------------- */

typedef struct {
    ms_device_peak *d;
    int n, cap, oom;
} peak_list;

static int add_peak(const ms_device_peak *d, void *ctx)
{
    peak_list *l = ctx;
    if (ms_grow((void **)&l->d, &l->cap, l->n, sizeof *l->d, 8)) { l->oom = 1; return 1; }
    l->d[l->n++] = *d;
    return 0;
}

typedef struct {
    int64_t id, run;
    char created[32];
    double predicted_step_ms;
    int feasible;
    json_t *j;                     /* NULL when it does not parse */
} plan_rec;

typedef struct {
    plan_rec *p;
    int n, cap, oom;
} plan_list;

static int add_plan(const ms_plan_info *pl, void *ctx)
{
    plan_list *l = ctx;
    if (ms_grow((void **)&l->p, &l->cap, l->n, sizeof *l->p, 4)) { l->oom = 1; return 1; }
    plan_rec *r = &l->p[l->n++];
    memset(r, 0, sizeof *r);
    r->id = pl->id;
    r->run = pl->run;
    memcpy(r->created, pl->created, sizeof r->created);
    r->created[sizeof r->created - 1] = '\0';
    r->predicted_step_ms = pl->predicted_step_ms;
    r->feasible = pl->feasible;
    r->j = pl->plan_json ? json_loads(pl->plan_json, 0, NULL) : NULL;
    return 0;
}

static void free_plans(plan_list *l)
{
    for (int i = 0; i < l->n; i++) json_decref(l->p[i].j);
    free(l->p);
}

/* ---- plan JSON, read leniently (a report shows what it can) -------------- */

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static double jnum(json_t *o, const char *k, double dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static uint64_t jbytes(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (json_is_integer(v) && json_integer_value(v) > 0) return (uint64_t)json_integer_value(v);
    return 0;
}

/* The plan's device entry with that index (name, capacity). */
static void plan_device(json_t *plan, int index, char *name, size_t len, uint64_t *capacity)
{
    snprintf(name, len, "device %d", index);
    *capacity = 0;
    json_t *devs = json_object_get(plan, "devices"), *d;
    size_t i;
    json_array_foreach(devs, i, d) {
        json_t *ix = json_object_get(d, "index");
        int idx = json_is_integer(ix) ? (int)json_integer_value(ix) : (int)i;
        if (idx != index) continue;
        const char *s = jstr(d, "device");
        if (s) snprintf(name, len, "%s", s);
        *capacity = jbytes(d, "capacity_bytes");
        return;
    }
}

/* ---- the stages of one plan -------------------------------------------- */

static void plan_card(FILE *f, const plan_rec *pr)
{
    char b1[32];
    fprintf(f, "<div class=\"plan\" id=\"plan-%" PRId64 "\">\n<p class=\"facts\"><b>Plan %" PRId64 "</b>", pr->id, pr->id);
    if (pr->created[0]) {
        fputs(" (", f);
        h_esc(f, pr->created);
        fputs(")", f);
    }
    fprintf(f, ": <span class=\"%s\">%s</span>", pr->feasible ? "good" : "bad", pr->feasible ? "feasible" : "infeasible");
    json_t *j = pr->j;
    if (!j) {
        fprintf(f, ", predicted %s per step. (Its JSON could not be read.)</p></div>\n",
                h_ms(pr->predicted_step_ms, b1, sizeof b1));
        return;
    }
    json_t *stages = json_object_get(j, "stages");
    size_t n_st = json_is_array(stages) ? json_array_size(stages) : 0;
    const char *prec = jstr(j, "precision"), *sched = jstr(j, "schedule");
    fprintf(f, ", %zu stage%s", n_st, n_st == 1 ? "" : "s");
    if (sched) { fputs(", schedule ", f); h_esc(f, sched); }
    if (prec) { fputs(", precision ", f); h_esc(f, prec); }
    double mb = jnum(j, "micro_batch", 0), nm = jnum(j, "n_micro", 0);
    if (mb > 0 && nm > 0) fprintf(f, ", %.0f micro-batches of %.0f", nm, mb);
    double head = jnum(j, "headroom", -1);
    if (head >= 0) fprintf(f, ", headroom %.0f%%", head * 100.0);
    fprintf(f, "; predicted %s per step.</p>\n", h_ms(pr->predicted_step_ms, b1, sizeof b1));
    if (n_st) {
        fprintf(f, "<table class=\"t\" id=\"t-plan-%" PRId64 "\">\n<caption>The stages of plan %" PRId64
                   ", predicted (times per micro-batch; the peak by category is in (c))</caption>\n<thead><tr><th>stage</th><th>device</th>"
                   "<th>capacity</th><th>layers</th><th>recompute</th><th>predicted peak</th>",
                pr->id, pr->id);
        fputs("<th>fwd</th><th>bwd</th><th>transfers</th><th>optimizer</th></tr></thead>\n<tbody>\n", f);
        size_t i;
        json_t *st;
        int n_names = 0;   /* a program's plan names its layers by module path */
        const char **names = rf_plan_layer_names(j, &n_names);
        json_array_foreach(stages, i, st) {
            char name[64];
            uint64_t cap;
            json_t *dv = json_object_get(st, "device");
            int dev = json_is_integer(dv) ? (int)json_integer_value(dv) : -1;
            plan_device(j, dev, name, sizeof name, &cap);
            fprintf(f, "<tr data-stage=\"%zu\">", i);
            h_td_int(f, "stage", (long long)i);
            h_td_text(f, "device", name);
            h_td_bytes(f, "capacity", cap);
            json_t *ly = json_object_get(st, "layers");
            long long a = json_integer_value(json_array_get(ly, 0)), b = json_integer_value(json_array_get(ly, 1));
            fprintf(f, "<td data-k=\"layers\" data-v=\"%lld-%lld\">%lld&ndash;%lld", a, b, a, b);
            if (names && a >= 0 && b < n_names) {
                char span[1024];
                rf_layer_span(names, n_names, (int)a, (int)b, span, sizeof span);
                fputs(": ", f);
                h_esc(f, span);
            }
            fputs("</td>", f);
            h_td_text(f, "recompute", json_is_true(json_object_get(st, "recompute")) ? "yes" : "no");
            h_td_bytes(f, "predicted", jbytes(st, "predicted_peak_bytes"));
            h_td_num(f, "fwd_ms", jnum(st, "fwd_ms", 0), "%.3f ms");
            h_td_num(f, "bwd_ms", jnum(st, "bwd_ms", 0), "%.3f ms");
            h_td_num(f, "comm_ms", jnum(st, "comm_ms", 0), "%.3f ms");
            h_td_num(f, "opt_ms", jnum(st, "opt_ms", 0), "%.3f ms");
            fputs("</tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
        free(names);
    }
    const char *why = jstr(j, "reasoning");
    if (why && *why) {
        fputs("<p class=\"reason\">", f);
        h_esc(f, why);
        fputs("</p>\n", f);
    }
    fputs("</div>\n", f);
}

static uint64_t sum_cats(const uint64_t *v)
{
    uint64_t s = 0;
    for (int c = 0; c < H_NCAT; c++) s += v[c];
    return s;
}

/* Bars from a run's recorded device peaks. */
static int bars_from_peaks(const peak_list *pk, h_dev_bar **out)
{
    h_dev_bar *dv = calloc(pk->n > 0 ? (size_t)pk->n : 1, sizeof *dv);
    if (!dv) return -1;
    for (int i = 0; i < pk->n; i++) {
        const ms_device_peak *d = &pk->d[i];
        snprintf(dv[i].name, sizeof dv[i].name, "%.*s", (int)sizeof d->name, d->name[0] ? d->name : "?");
        dv[i].capacity = d->capacity;
        dv[i].pred = d->predicted_peak;
        dv[i].meas = d->measured_peak;
        dv[i].has_pred = d->predicted_peak != 0;
        dv[i].has_meas = 1;
        for (int c = 0; c < MS_CAT_N; c++) {
            dv[i].pred_by[c] = d->predicted_by_cat[c];
            dv[i].meas_by[c] = d->measured_by_cat[c];
        }
        if (!dv[i].has_pred && sum_cats(dv[i].pred_by)) { dv[i].has_pred = 1; dv[i].pred = sum_cats(dv[i].pred_by); }
    }
    *out = dv;
    return pk->n;
}

/* Bars from a plan's stages, predicted only. */
static int bars_from_plan(json_t *j, h_dev_bar **out)
{
    json_t *stages = json_object_get(j, "stages");
    size_t n = json_is_array(stages) ? json_array_size(stages) : 0;
    h_dev_bar *dv = calloc(n ? n : 1, sizeof *dv);
    if (!dv) return -1;
    size_t i;
    json_t *st;
    json_array_foreach(stages, i, st) {
        json_t *dvi = json_object_get(st, "device");
        plan_device(j, json_is_integer(dvi) ? (int)json_integer_value(dvi) : -1, dv[i].name, sizeof dv[i].name,
                    &dv[i].capacity);
        json_t *by = json_object_get(st, "bytes");
        for (int c = 0; c < MS_CAT_N; c++) dv[i].pred_by[c] = jbytes(by, ms_cat_name((ms_cat)c));
        dv[i].pred = jbytes(st, "predicted_peak_bytes");
        if (!dv[i].pred) dv[i].pred = sum_cats(dv[i].pred_by);
        dv[i].has_pred = dv[i].pred != 0;
    }
    *out = dv;
    return (int)n;
}

int h_section_plan(FILE *f, ms_db *db, const ms_run_info *runs, int n, char *err, size_t errlen)
{
    fputs("<section id=\"plan\">\n<h2>2. The plan</h2>\n", f);
    /* When some run of the report measured its devices, (c) is drawn from
     * those peaks (which hold the plan's predictions too); a plan's
     * predictions alone are drawn only when nothing was measured. */
    int measured_any = 0;
    for (int i = 0; i < n && !measured_any; i++) {
        peak_list pk = { 0 };
        if (ms_db_list_device_peaks(db, runs[i].id, add_peak, &pk) != 0 || pk.oom) {
            snprintf(err, errlen, "%s", pk.oom ? "out of memory" : ms_db_errmsg(db));
            free(pk.d);
            return -1;
        }
        measured_any = pk.n > 0;
        free(pk.d);
    }
    int shown = 0;
    for (int i = 0; i < n; i++) {
        const ms_run_info *r = &runs[i];
        plan_list pl = { 0 };
        peak_list pk = { 0 };
        if (ms_db_list_plans(db, r->id, add_plan, &pl) != 0 || ms_db_list_device_peaks(db, r->id, add_peak, &pk) != 0 ||
            pl.oom || pk.oom) {
            snprintf(err, errlen, "%s", pl.oom || pk.oom ? "out of memory" : ms_db_errmsg(db));
            free_plans(&pl);
            free(pk.d);
            return -1;
        }
        if (pl.n || pk.n) {
            shown++;
            fprintf(f, "<article class=\"run\" id=\"plan-run-%" PRId64 "\">\n<h3>Run %" PRId64 " (", r->id, r->id);
            h_esc(f, r->kind);
            fputs(", ", f);
            h_esc(f, ms_run_state(r));
            fputs(")", f);
            if (r->model[0]) { fputs(": ", f); h_escn(f, r->model, sizeof r->model); }
            fputs("</h3>\n", f);
            for (int k = 0; k < pl.n; k++) plan_card(f, &pl.p[k]);
            h_dev_bar *dv = NULL;
            int nd = pk.n                                      ? bars_from_peaks(&pk, &dv)
                     : !measured_any && pl.n && pl.p[pl.n - 1].j ? bars_from_plan(pl.p[pl.n - 1].j, &dv)
                                                                 : 0;
            if (nd < 0) {
                snprintf(err, errlen, "out of memory");
                free_plans(&pl);
                free(pk.d);
                return -1;
            }
            if (nd > 0) h_chart_devices(f, r->id, dv, nd, pk.n > 0);
            free(dv);
            fputs("</article>\n", f);
        }
        free_plans(&pl);
        free(pk.d);
    }
    if (!shown)
        fprintf(f, "<p class=\"empty\">No plan recorded yet: nothing in this database planned a split for run %" PRId64
                   " or the runs it contains, and no device peaks were measured. <code>memsplit plan</code> or "
                   "<code>memsplit doctor</code> records one.</p>\n",
                n ? runs[0].id : 0);
    fputs("</section>\n", f);
    return 0;
}
