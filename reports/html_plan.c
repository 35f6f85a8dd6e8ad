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
#include <stdlib.h>
#include <string.h>

#include "reports/grow.h"
#include "reports/run_facts.h"
#include "vocab/plan_json.h"

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
    int readable;                  /* 0: its JSON does not parse */
    ms_plan pl;                    /* read loosely (vocab/plan_json.h): what it has */
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
    r->readable = ms_plan_read_loose(pl->plan_json, &r->pl) == 0;
    return 0;
}

static void free_plans(plan_list *l)
{
    for (int i = 0; i < l->n; i++) ms_plan_free(&l->p[i].pl);
    free(l->p);
}

/* The plan's device with that index (name, capacity). */
static void plan_device(const ms_plan *plan, int index, char *name, size_t len, uint64_t *capacity)
{
    snprintf(name, len, "device %d", index);
    *capacity = 0;
    if (index < 0 || index >= plan->n_devices) return;
    if (plan->devices[index].name[0]) snprintf(name, len, "%s", plan->devices[index].name);
    *capacity = plan->devices[index].capacity;
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
    const ms_plan *j = &pr->pl;
    if (!pr->readable) {
        fprintf(f, ", predicted %s per step. (Its JSON could not be read.)</p></div>\n",
                h_ms(pr->predicted_step_ms, b1, sizeof b1));
        return;
    }
    size_t n_st = j->n_stages > 0 ? (size_t)j->n_stages : 0;
    fprintf(f, ", %zu stage%s", n_st, n_st == 1 ? "" : "s");
    if (j->schedule >= 0) { fputs(", schedule ", f); h_esc(f, ms_schedule_name(j->schedule)); }
    if (j->precision >= 0) { fputs(", precision ", f); h_esc(f, ms_precision_name((ms_precision)j->precision)); }
    if (j->micro_batch > 0 && j->n_micro > 0) fprintf(f, ", %d micro-batches of %d", j->n_micro, j->micro_batch);
    if (j->headroom >= 0) fprintf(f, ", headroom %.0f%%", j->headroom * 100.0);
    fprintf(f, "; predicted %s per step.</p>\n", h_ms(pr->predicted_step_ms, b1, sizeof b1));
    if (n_st) {
        fprintf(f, "<table class=\"t\" id=\"t-plan-%" PRId64 "\">\n<caption>The stages of plan %" PRId64
                   ", predicted (times per micro-batch; the peak by category is in (c))</caption>\n<thead><tr><th>stage</th><th>device</th>"
                   "<th>capacity</th><th>layers</th><th>recompute</th><th>predicted peak</th>",
                pr->id, pr->id);
        fputs("<th>fwd</th><th>bwd</th><th>transfers</th><th>optimizer</th></tr></thead>\n<tbody>\n", f);
        /* a program's plan names its layers by module path */
        const char *const *names = (const char *const *)j->layer_names;
        int n_names = j->layer_names ? j->n_layers : 0;
        for (size_t i = 0; i < n_st; i++) {
            const ms_plan_stage *st = &j->stages[i];
            char name[64];
            uint64_t cap;
            plan_device(j, st->device, name, sizeof name, &cap);
            fprintf(f, "<tr data-stage=\"%zu\">", i);
            h_td_int(f, "stage", (long long)i);
            h_td_text(f, "device", name);
            h_td_bytes(f, "capacity", cap);
            fprintf(f, "<td data-k=\"layers\" data-v=\"%d-%d\">%d&ndash;%d", st->first, st->last, st->first,
                    st->last);
            if (names && st->first >= 0 && st->last < n_names) {
                char span[1024];
                rf_layer_span(names, n_names, st->first, st->last, span, sizeof span);
                fputs(": ", f);
                h_esc(f, span);
            }
            fputs("</td>", f);
            h_td_text(f, "recompute", st->recompute ? "yes" : "no");
            h_td_bytes(f, "predicted", st->peak);
            h_td_num(f, "fwd_ms", st->fwd_ms, "%.3f ms");
            h_td_num(f, "bwd_ms", st->bwd_ms, "%.3f ms");
            h_td_num(f, "comm_ms", st->comm_ms, "%.3f ms");
            h_td_num(f, "opt_ms", st->opt_ms, "%.3f ms");
            fputs("</tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    const char *why = j->reasoning;
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
        dv[i].has_parts = d->has_parts;
        dv[i].meas_alloc = d->allocator_peak;
        dv[i].meas_beyond = d->beyond_allocator;
        dv[i].pred_alloc = d->predicted_allocator_peak;
        dv[i].pred_beyond = d->predicted_beyond_allocator;
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
static int bars_from_plan(const ms_plan *j, h_dev_bar **out)
{
    size_t n = j->n_stages > 0 ? (size_t)j->n_stages : 0;
    h_dev_bar *dv = calloc(n ? n : 1, sizeof *dv);
    if (!dv) return -1;
    for (size_t i = 0; i < n; i++) {
        const ms_plan_stage *st = &j->stages[i];
        plan_device(j, st->device, dv[i].name, sizeof dv[i].name, &dv[i].capacity);
        for (int c = 0; c < MS_CAT_N; c++) dv[i].pred_by[c] = st->bytes[c];
        dv[i].pred = st->peak;
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
                     : !measured_any && pl.n && pl.p[pl.n - 1].readable ? bars_from_plan(&pl.p[pl.n - 1].pl, &dv)
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
