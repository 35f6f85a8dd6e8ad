/* db_train.c — what training records: plans, steps, per-device peaks and
 * OOM recoveries. */
#include "reports/db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs one prepared INSERT (already bound) as its own transaction; returns
 * the new rowid, or -1. The statement is finalized here. */
static int64_t insert_one(ms_db *db, sqlite3_stmt *st, int64_t need_run, const char *what)
{
    int64_t id = -1;
    if (need_run > 0 && dbi_need_run(db, need_run) != 0) {
        /* message set */
    } else if (dbi_step_done(db, st, what) == 0) {
        id = sqlite3_last_insert_rowid(db->h);
    }
    sqlite3_finalize(st);
    if (id < 0) { dbi_rollback(db); return -1; }
    return dbi_commit(db) == 0 ? id : -1;
}

int64_t ms_db_add_plan(ms_db *db, int64_t run, const char *plan_json, double predicted_step_ms, int feasible)
{
    if (!db) return -1;
    if (!plan_json || !dbi_json_ok(plan_json)) return dbi_fail(db, "a plan must be JSON text");
    char now[32];
    double now_unix;
    dbi_now(now, &now_unix);
    if (dbi_begin(db) != 0) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "INSERT INTO plans (run_id, created, created_unix, plan_json, predicted_step_ms, feasible)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (!st) { dbi_rollback(db); return -1; }
    if (run > 0) sqlite3_bind_int64(st, 1, run); else sqlite3_bind_null(st, 1);
    dbi_bind_text(st, 2, now);
    sqlite3_bind_double(st, 3, now_unix);
    dbi_bind_text(st, 4, plan_json);
    sqlite3_bind_double(st, 5, predicted_step_ms);
    sqlite3_bind_int(st, 6, feasible ? 1 : 0);
    return insert_one(db, st, run, "cannot add the plan");
}

int ms_db_get_plan(ms_db *db, int64_t plan_id, char **plan_json, double *predicted_step_ms, int *feasible,
                   int64_t *run)
{
    if (!db) return -1;
    if (plan_json) *plan_json = NULL;
    if (plan_id <= 0) {
        plan_id = ms_db_latest_plan_id(db, 0);
        if (plan_id < 0) return -1;
        if (plan_id == 0) return dbi_fail(db, "the database holds no plan");
    }
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT plan_json, coalesce(predicted_step_ms, 0), feasible, coalesce(run_id, 0) FROM plans WHERE id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, plan_id);
    int rc = sqlite3_step(st), ret = 0;
    if (rc == SQLITE_ROW) {
        if (plan_json) {
            *plan_json = strdup((const char *)sqlite3_column_text(st, 0));
            if (!*plan_json) ret = dbi_fail(db, "out of memory");
        }
        if (predicted_step_ms) *predicted_step_ms = sqlite3_column_double(st, 1);
        if (feasible) *feasible = sqlite3_column_int(st, 2);
        if (run) *run = sqlite3_column_int64(st, 3);
    } else if (rc == SQLITE_DONE) {
        ret = dbi_fail(db, "no plan %lld in the database", (long long)plan_id);
    } else {
        ret = dbi_sqlfail(db, "cannot read the plan");
    }
    sqlite3_finalize(st);
    return ret;
}

int ms_db_list_plans(ms_db *db, int64_t run, int (*cb)(const ms_plan_info *pl, void *ctx), void *ctx)
{
    if (!db || !cb) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT id, coalesce(run_id, 0), created, coalesce(predicted_step_ms, 0), feasible, plan_json FROM plans"
        " WHERE ?1 <= 0 OR run_id = ?1 ORDER BY id");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ms_plan_info pl;
        memset(&pl, 0, sizeof pl);
        pl.id = sqlite3_column_int64(st, 0);
        pl.run = sqlite3_column_int64(st, 1);
        dbi_col_text(st, 2, pl.created, sizeof pl.created);
        pl.predicted_step_ms = sqlite3_column_double(st, 3);
        pl.feasible = sqlite3_column_int(st, 4);
        pl.plan_json = (const char *)sqlite3_column_text(st, 5);
        if (cb(&pl, ctx)) { rc = SQLITE_DONE; break; }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : dbi_sqlfail(db, "cannot read plans");
}

int ms_db_add_step(ms_db *db, int64_t run, const ms_step_rec *s)
{
    if (!db) return -1;
    if (!s) return dbi_fail(db, "no step given");
    if (!dbi_json_ok(s->peaks_json)) return dbi_fail(db, "step %d: per-device peaks must be JSON", s->step);
    char now[32];
    double now_unix;
    dbi_now(now, &now_unix);
    if (dbi_begin(db) != 0) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "INSERT OR REPLACE INTO steps (run_id, step, loss, ms, tokens_per_s, lr, loss_scale, skipped, peaks_json,"
        " t_unix) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    if (!st) { dbi_rollback(db); return -1; }
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int(st, 2, s->step);
    sqlite3_bind_double(st, 3, s->loss);
    sqlite3_bind_double(st, 4, s->ms);
    sqlite3_bind_double(st, 5, s->tokens_per_s);
    sqlite3_bind_double(st, 6, s->lr);
    sqlite3_bind_double(st, 7, s->loss_scale);
    sqlite3_bind_int(st, 8, s->skipped ? 1 : 0);
    dbi_bind_text(st, 9, s->peaks_json);
    sqlite3_bind_double(st, 10, now_unix);
    return insert_one(db, st, run, "cannot add the step") < 0 ? -1 : 0;
}

int ms_db_list_steps(ms_db *db, int64_t run, int (*cb)(const ms_step_rec *s, void *ctx), void *ctx)
{
    if (!db || !cb) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT step, coalesce(loss, 0), coalesce(ms, 0), coalesce(tokens_per_s, 0), coalesce(lr, 0),"
        " coalesce(loss_scale, 0), skipped, peaks_json FROM steps WHERE run_id = ?1 ORDER BY step");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ms_step_rec s = {
            .step = sqlite3_column_int(st, 0),
            .loss = sqlite3_column_double(st, 1),
            .ms = sqlite3_column_double(st, 2),
            .tokens_per_s = sqlite3_column_double(st, 3),
            .lr = sqlite3_column_double(st, 4),
            .loss_scale = sqlite3_column_double(st, 5),
            .skipped = sqlite3_column_int(st, 6),
            .peaks_json = (const char *)sqlite3_column_text(st, 7),
        };
        if (cb(&s, ctx)) { rc = SQLITE_DONE; break; }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : dbi_sqlfail(db, "cannot read steps");
}

int ms_db_add_device_peak(ms_db *db, int64_t run, const ms_device_peak *d)
{
    if (!db) return -1;
    if (!d) return dbi_fail(db, "no device peak given");
    int any_pred = 0;
    for (int c = 0; c < MS_CAT_N; c++) any_pred |= d->predicted_by_cat[c] != 0;
    char *measured = dbi_cats_to_json(d->measured_by_cat);
    char *predicted = any_pred ? dbi_cats_to_json(d->predicted_by_cat) : NULL;
    if (!measured || (any_pred && !predicted)) {
        free(measured);
        free(predicted);
        return dbi_fail(db, "out of memory");
    }
    int ret = dbi_begin(db);
    sqlite3_stmt *st = ret == 0 ? dbi_prepare(db,
        "INSERT OR REPLACE INTO device_peaks (run_id, device, name, capacity, predicted_peak, measured_peak,"
        " measured_by_cat, predicted_by_cat, allocator_peak, beyond_allocator, predicted_allocator_peak,"
        " predicted_beyond_allocator) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)") : NULL;
    if (ret == 0 && !st) { dbi_rollback(db); ret = -1; }
    if (st) {
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int(st, 2, d->device);
        dbi_bind_fixed(st, 3, d->name);
        dbi_bind_u64(st, 4, d->capacity);
        if (d->predicted_peak) dbi_bind_u64(st, 5, d->predicted_peak); else sqlite3_bind_null(st, 5);
        dbi_bind_u64(st, 6, d->measured_peak);
        dbi_bind_text(st, 7, measured);
        dbi_bind_text(st, 8, predicted);
        const uint64_t part[4] = { d->allocator_peak, d->beyond_allocator, d->predicted_allocator_peak,
                                   d->predicted_beyond_allocator };
        for (int k = 0; k < 4; k++)
            if (d->has_parts) dbi_bind_u64(st, 9 + k, part[k]); else sqlite3_bind_null(st, 9 + k);
        ret = insert_one(db, st, run, "cannot add the device peak") < 0 ? -1 : 0;
    }
    free(measured);
    free(predicted);
    return ret;
}

int ms_db_list_device_peaks(ms_db *db, int64_t run, int (*cb)(const ms_device_peak *d, void *ctx), void *ctx)
{
    if (!db || !cb) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT device, name, capacity, coalesce(predicted_peak, 0), measured_peak, measured_by_cat,"
        " predicted_by_cat, allocator_peak, beyond_allocator, coalesce(predicted_allocator_peak, 0),"
        " coalesce(predicted_beyond_allocator, 0) FROM device_peaks WHERE run_id = ?1 ORDER BY device");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ms_device_peak d;
        memset(&d, 0, sizeof d);
        d.device = sqlite3_column_int(st, 0);
        dbi_col_text(st, 1, d.name, sizeof d.name);
        d.capacity = dbi_col_u64(st, 2);
        d.predicted_peak = dbi_col_u64(st, 3);
        d.measured_peak = dbi_col_u64(st, 4);
        /* An unreadable breakdown leaves zeros: the totals still report. */
        dbi_cats_from_json((const char *)sqlite3_column_text(st, 5), d.measured_by_cat);
        dbi_cats_from_json((const char *)sqlite3_column_text(st, 6), d.predicted_by_cat);
        if (sqlite3_column_type(st, 7) != SQLITE_NULL && sqlite3_column_type(st, 8) != SQLITE_NULL) {
            d.has_parts = 1;
            d.allocator_peak = dbi_col_u64(st, 7);
            d.beyond_allocator = dbi_col_u64(st, 8);
            d.predicted_allocator_peak = dbi_col_u64(st, 9);
            d.predicted_beyond_allocator = dbi_col_u64(st, 10);
        }
        if (cb(&d, ctx)) { rc = SQLITE_DONE; break; }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : dbi_sqlfail(db, "cannot read device peaks");
}

int64_t ms_db_add_recovery(ms_db *db, int64_t run, const ms_recovery_rec *r)
{
    if (!db) return -1;
    if (!r) return dbi_fail(db, "no recovery given");
    char now[32];
    double now_unix;
    dbi_now(now, &now_unix);
    if (dbi_begin(db) != 0) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "INSERT INTO recovery_events (run_id, step, resumed_step, reason, oom_event, old_plan_id, new_plan_id,"
        " checkpoint, t, t_unix) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    if (!st) { dbi_rollback(db); return -1; }
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int(st, 2, r->step);
    if (r->resumed_step >= 0) sqlite3_bind_int(st, 3, r->resumed_step); else sqlite3_bind_null(st, 3);
    dbi_bind_fixed(st, 4, r->reason);
    const int64_t refs[3] = { r->oom_event, r->old_plan_id, r->new_plan_id };
    for (int k = 0; k < 3; k++)
        if (refs[k] > 0) sqlite3_bind_int64(st, 5 + k, refs[k]); else sqlite3_bind_null(st, 5 + k);
    if (r->checkpoint[0]) dbi_bind_fixed(st, 8, r->checkpoint); else sqlite3_bind_null(st, 8);
    dbi_bind_text(st, 9, now);
    sqlite3_bind_double(st, 10, now_unix);
    return insert_one(db, st, run, "cannot add the recovery (do its OOM event and plans exist?)");
}

int ms_db_list_recoveries(ms_db *db, int64_t run, int (*cb)(const ms_recovery_rec *r, void *ctx), void *ctx)
{
    if (!db || !cb) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT id, step, coalesce(resumed_step, -1), reason, coalesce(oom_event, 0), coalesce(old_plan_id, 0),"
        " coalesce(new_plan_id, 0), coalesce(checkpoint, ''), t FROM recovery_events WHERE run_id = ?1 ORDER BY id");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ms_recovery_rec r;
        memset(&r, 0, sizeof r);
        r.id = sqlite3_column_int64(st, 0);
        r.step = sqlite3_column_int(st, 1);
        r.resumed_step = sqlite3_column_int(st, 2);
        dbi_col_text(st, 3, r.reason, sizeof r.reason);
        r.oom_event = sqlite3_column_int64(st, 4);
        r.old_plan_id = sqlite3_column_int64(st, 5);
        r.new_plan_id = sqlite3_column_int64(st, 6);
        dbi_col_text(st, 7, r.checkpoint, sizeof r.checkpoint);
        dbi_col_text(st, 8, r.t, sizeof r.t);
        if (cb(&r, ctx)) { rc = SQLITE_DONE; break; }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : dbi_sqlfail(db, "cannot read recoveries");
}
