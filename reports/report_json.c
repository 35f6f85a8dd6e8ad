/* report_json.c — a stored run as JSON (see report_json.h). */
#include "reports/report_json.h"

#include "vocab/profile_json.h"
#include "reports/db_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 4

static json_t *jbytes(uint64_t v) { return json_integer((json_int_t)v); }

static json_t *jfixed(const char *s, size_t cap) { return json_stringn(s, strnlen(s, cap)); }

static json_t *cats_json(const uint64_t v[MS_CAT_N])
{
    json_t *o = json_object();
    for (int c = 0; o && c < MS_CAT_N; c++) json_object_set_new(o, ms_cat_name((ms_cat)c), jbytes(v[c]));
    return o;
}

/* ---- the run ---------------------------------------------------------- */

static int add_plan(const ms_plan_info *pl, void *ctx)
{
    json_t *o = json_object();
    json_t *plan = pl->plan_json ? json_loads(pl->plan_json, JSON_DECODE_ANY, NULL) : NULL;
    json_object_set_new(o, "id", json_integer(pl->id));
    json_object_set_new(o, "created", json_string(pl->created));
    json_object_set_new(o, "feasible", json_boolean(pl->feasible));
    json_object_set_new(o, "predicted_step_ms", json_real(pl->predicted_step_ms));
    json_object_set_new(o, "plan", plan ? plan : json_null());
    json_array_append_new(ctx, o);
    return 0;
}

static int add_peak(const ms_device_peak *d, void *ctx)
{
    json_t *o = json_object();
    json_object_set_new(o, "device", json_integer(d->device));
    json_object_set_new(o, "name", jfixed(d->name, sizeof d->name));
    json_object_set_new(o, "capacity_bytes", jbytes(d->capacity));
    json_object_set_new(o, "predicted_peak_bytes", d->predicted_peak ? jbytes(d->predicted_peak) : json_null());
    json_object_set_new(o, "measured_peak_bytes", jbytes(d->measured_peak));
    /* a record from before the breakdown was kept holds no category at all:
     * not measured (null), not a peak of 0 B in each */
    uint64_t measured_cats = 0;
    for (int c = 0; c < MS_CAT_N; c++) measured_cats += d->measured_by_cat[c];
    json_object_set_new(o, "measured_by_category",
                        measured_cats || !d->measured_peak ? cats_json(d->measured_by_cat) : json_null());
    json_object_set_new(o, "predicted_by_category", cats_json(d->predicted_by_cat));
    /* a program's stage alone on its GPU: the measured peak's two parts (null elsewhere) */
    json_object_set_new(o, "measured_allocator_peak_bytes", d->has_parts ? jbytes(d->allocator_peak) : json_null());
    json_object_set_new(o, "measured_beyond_allocator_bytes", d->has_parts ? jbytes(d->beyond_allocator) : json_null());
    json_object_set_new(o, "predicted_allocator_peak_bytes",
                        d->has_parts ? jbytes(d->predicted_allocator_peak) : json_null());
    json_object_set_new(o, "predicted_beyond_allocator_bytes",
                        d->has_parts ? jbytes(d->predicted_beyond_allocator) : json_null());
    json_array_append_new(ctx, o);
    return 0;
}

static int add_step(const ms_step_rec *s, void *ctx)
{
    json_t *o = json_object();
    json_t *peaks = s->peaks_json ? json_loads(s->peaks_json, JSON_DECODE_ANY, NULL) : NULL;
    json_object_set_new(o, "step", json_integer(s->step));
    json_object_set_new(o, "loss", json_real(s->loss));
    json_object_set_new(o, "ms", json_real(s->ms));
    json_object_set_new(o, "tokens_per_s", json_real(s->tokens_per_s));
    json_object_set_new(o, "lr", json_real(s->lr));
    json_object_set_new(o, "loss_scale", json_real(s->loss_scale));
    json_object_set_new(o, "skipped", json_boolean(s->skipped));
    json_object_set_new(o, "peaks", peaks ? peaks : json_null());
    json_array_append_new(ctx, o);
    return 0;
}

static int add_recovery(const ms_recovery_rec *r, void *ctx)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(r->id));
    json_object_set_new(o, "step", json_integer(r->step));
    json_object_set_new(o, "resumed_step", r->resumed_step >= 0 ? json_integer(r->resumed_step) : json_null());
    json_object_set_new(o, "reason", json_string(r->reason));
    json_object_set_new(o, "oom_event", r->oom_event ? json_integer(r->oom_event) : json_null());
    json_object_set_new(o, "old_plan_id", r->old_plan_id ? json_integer(r->old_plan_id) : json_null());
    json_object_set_new(o, "new_plan_id", r->new_plan_id ? json_integer(r->new_plan_id) : json_null());
    json_object_set_new(o, "checkpoint", json_string(r->checkpoint));
    json_object_set_new(o, "time", json_string(r->t));
    json_array_append_new(ctx, o);
    return 0;
}

typedef struct { int64_t parent; json_t *ids; } kids;

static int add_kid(const ms_run_info *r, void *ctx)
{
    kids *k = ctx;
    if (r->parent == k->parent) json_array_append_new(k->ids, json_integer(r->id));
    return 0;
}

static json_t *run_json(ms_db *db, int64_t run, int depth)
{
    ms_run_info *r = malloc(sizeof *r);
    if (!r) return NULL;
    if (ms_db_get_run(db, run, r) != 0) { free(r); return NULL; }
    json_t *j = json_object();
    json_t *devices = r->devices[0] ? json_loads(r->devices, JSON_DECODE_ANY, NULL) : NULL;
    json_object_set_new(j, "id", json_integer(r->id));
    json_object_set_new(j, "kind", json_string(r->kind));
    json_object_set_new(j, "status", json_string(r->status));
    json_object_set_new(j, "state", json_string(ms_run_state(r)));
    json_object_set_new(j, "started", json_string(r->started));
    json_object_set_new(j, "finished", r->finished[0] ? json_string(r->finished) : json_null());
    json_object_set_new(j, "model", json_string(r->model));
    json_object_set_new(j, "devices", devices ? devices : (r->devices[0] ? json_string(r->devices) : json_null()));
    json_object_set_new(j, "cmdline", json_string(r->cmdline));
    json_object_set_new(j, "parent", r->parent ? json_integer(r->parent) : json_null());
    json_object_set_new(j, "notes", json_string(r->notes));

    int ok = 1;
    json_t *profile = json_null();
    if (r->has_profile) {
        ms_profile p;
        char err[256];
        if (ms_db_load_profile(db, run, &p, err, sizeof err) == 0) {
            json_decref(profile);
            profile = ms_profile_to_json(&p);   /* the same object `memsplit profile --json` prints */
            ms_profile_free(&p);
            if (!profile) ok = dbi_fail(db, "run %lld: its profile cannot be written as JSON", (long long)run) + 1;
        } else {
            ok = 0;
        }
    }
    json_object_set_new(j, "profile", profile ? profile : json_null());
    json_t *plans = json_array(), *peaks = json_array(), *steps = json_array(), *recov = json_array();
    ok = ok && ms_db_list_plans(db, run, add_plan, plans) == 0 && ms_db_list_device_peaks(db, run, add_peak, peaks) == 0 &&
         ms_db_list_steps(db, run, add_step, steps) == 0 && ms_db_list_recoveries(db, run, add_recovery, recov) == 0;
    json_object_set_new(j, "plans", plans);
    json_object_set_new(j, "device_peaks", peaks);
    json_object_set_new(j, "steps", steps);
    json_object_set_new(j, "recoveries", recov);

    kids k = { run, json_array() };
    json_t *children = json_array();
    if (ok && depth + 1 < MAX_DEPTH && ms_db_list_runs(db, add_kid, &k) == 0) {
        size_t i;
        json_t *id;
        json_array_foreach(k.ids, i, id) {
            json_t *c = run_json(db, json_integer_value(id), depth + 1);
            if (!c) { ok = 0; break; }
            json_array_append_new(children, c);
        }
    } else if (depth + 1 < MAX_DEPTH) {
        ok = 0;
    }
    json_decref(k.ids);
    json_object_set_new(j, "children", children);
    free(r);
    if (!ok) { json_decref(j); return NULL; }
    return j;
}

json_t *ms_report_run_json(ms_db *db, int64_t run)
{
    if (!db) return NULL;
    return run_json(db, run, 0);
}
