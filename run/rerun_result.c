/* rerun_result.c — a rerun's outcome per device, measured against the
 * plan's prediction: its JSON, its records and its lines (rerun.h). */
#include "run/rerun.h"
#include "run/interrupt.h"
#include "vocab/visible.h"
#include "run/records.h"
#include "vocab/size.h"

#include <math.h>
#include <string.h>

static json_t *device_entry(const ms_pipeline *p, const ms_plan *plan, int k, int d, double *gap)
{
    const ms_device *dev = &p->devs[k];
    const ms_plan_stage *st = NULL;
    for (int s = 0; s < plan->n_stages; s++)
        if (plan->stages[s].device == d) st = &plan->stages[s];
    size_t pred[MS_CAT_N] = { 0 };
    for (int c = 0; st && c < MS_CAT_N; c++) pred[c] = st->bytes[c];
    json_t *o = ms_run_device_row(dev->name, dev->capacity, st ? st->peak : 0, dev->peak_total, pred, dev->peak, gap);
    json_object_set_new(o, "plan_device", json_integer(d));
    return o;
}

static void record_peaks(const ms_rerun_opts *o, ms_rerun_result *r, const ms_pipeline *p, const ms_plan *plan,
                         const int *plan_dev)
{
    if (!o->db) return;
    for (int k = 0; k < p->n_dev; k++) {
        ms_device_peak dp;
        memset(&dp, 0, sizeof dp);
        dp.device = plan_dev[k];
        snprintf(dp.name, sizeof dp.name, "%.31s", p->devs[k].name);
        dp.capacity = p->devs[k].capacity;
        dp.measured_peak = p->devs[k].peak_total;
        for (int s = 0; s < plan->n_stages; s++)
            if (plan->stages[s].device == plan_dev[k]) {
                dp.predicted_peak = plan->stages[s].peak;
                for (int c = 0; c < MS_CAT_N; c++) dp.predicted_by_cat[c] = plan->stages[s].bytes[c];
            }
        for (int c = 0; c < MS_CAT_N; c++) dp.measured_by_cat[c] = p->devs[k].peak[c];
        ms_run_recorded(ms_db_add_device_peak(o->db, o->run, &dp), o->db, "train", "a device's peak", &r->db_failed);
    }
}

void ms_rerun_measured(const ms_rerun_opts *o, ms_rerun_result *r, const ms_pipeline *p, const ms_plan *plan,
                       const int *plan_dev)
{
    r->devices = json_array();
    for (int k = 0; k < p->n_dev; k++) {
        double gap;
        json_array_append_new(r->devices, device_entry(p, plan, k, plan_dev[k], &gap));
        if (fabs(gap) > r->worst_gap) r->worst_gap = fabs(gap);
    }
    record_peaks(o, r, p, plan, plan_dev);
}

void ms_rerun_result_free(ms_rerun_result *r)
{
    json_decref(r->losses);
    json_decref(r->devices);
    r->losses = r->devices = NULL;
}

json_t *ms_rerun_result_json(const ms_rerun_result *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "steps", json_integer(r->steps));
    json_object_set_new(o, "loss_first", isnan(r->loss_first) ? json_null() : json_real(r->loss_first));
    json_object_set_new(o, "loss_last", isnan(r->loss_last) ? json_null() : json_real(r->loss_last));
    json_object_set_new(o, "tokens_per_s", json_real(r->tokens_per_s));
    json_object_set_new(o, "recoveries", json_integer(r->recoveries));
    json_object_set_new(o, "losses", r->losses ? json_incref(r->losses) : json_array());
    json_object_set_new(o, "devices", r->devices ? json_incref(r->devices) : json_array());
    json_object_set_new(o, "worst_gap", json_real(r->worst_gap));
    json_object_set_new(o, "checkpoint", r->checkpoint[0] ? json_string(r->checkpoint) : json_null());
    json_object_set_new(o, "interrupted", r->interrupted ? json_string(ms_signal_name(r->interrupted)) : json_null());
    return o;
}

void ms_rerun_print_devices(FILE *f, const ms_rerun_result *r)
{
    if (!r->devices) return;
    fprintf(f, "measured against predicted peak, per device:\n");
    fprintf(f, "  %-14s %12s %12s %12s %9s\n", "device", "capacity", "predicted", "measured", "gap");
    size_t i;
    json_t *d;
    json_array_foreach(r->devices, i, d) {
        char a[32], b[32], c[32];
        char vis[64];
        fputs("  ", f);
        ms_print_cell(f, ms_visible(json_string_value(json_object_get(d, "name")), vis, sizeof vis), 14);
        fprintf(f, " %12s %12s %12s %+8.2f%%\n",
                ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "capacity_bytes")), a, sizeof a),
                ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "predicted_peak_bytes")), b, sizeof b),
                ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "measured_peak_bytes")), c, sizeof c),
                100 * json_real_value(json_object_get(d, "gap")));
    }
}
