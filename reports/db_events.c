/* db_events.c — memory events (alloc/free/fail, appended in batches) and
 * OOM events (a profile's, or one met during training). */
#include "reports/db_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ev_kinds[] = { "alloc", "free", "fail" };
static const char *const ev_sources[] = { "allocator", "cupti_callback", "cupti_activity" };

static int parse_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (s && strcmp(s, names[i]) == 0) return i;
    return -1;
}

static int check_event(ms_db *db, const ms_mem_event *e, int i)
{
    if (e->kind < 0 || e->kind > MS_EV_FAIL) return dbi_fail(db, "memory event %d: bad kind %d", i, e->kind);
    if (e->source < 0 || e->source > MS_EV_SRC_CUPTI_ACTIVITY)
        return dbi_fail(db, "memory event %d: bad source %d", i, e->source);
    if (e->phase < -1 || e->phase >= MS_PH_N) return dbi_fail(db, "memory event %d: bad phase %d", i, e->phase);
    if (e->category < -1 || e->category >= MS_CAT_N)
        return dbi_fail(db, "memory event %d: bad category %d", i, e->category);
    return 0;
}

int ms_db_add_mem_events(ms_db *db, int64_t run, const ms_mem_event *ev, int n)
{
    if (!db) return -1;
    if (n < 0 || (n > 0 && !ev)) return dbi_fail(db, "bad memory event batch (n = %d)", n);
    for (int i = 0; i < n; i++)
        if (check_event(db, &ev[i], i) != 0) return -1;
    if (n == 0) return 0;
    if (dbi_begin(db) != 0) return -1;
    /* The sequence continues the run's own: read under the write lock, so
     * two writers of one run could not interleave numbers. */
    sqlite3_stmt *q = dbi_prepare(db, "SELECT coalesce(max(seq), -1) + 1 FROM mem_events WHERE run_id = ?1");
    sqlite3_stmt *st = dbi_prepare(db,
        "INSERT INTO mem_events (run_id, seq, t_us, device, kind, layer, phase, category, bytes, address,"
        " what, source) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
    int rc = (q && st) ? dbi_need_run(db, run) : -1;
    int64_t seq = 0;
    if (rc == 0) {
        sqlite3_bind_int64(q, 1, run);
        if (sqlite3_step(q) == SQLITE_ROW) seq = sqlite3_column_int64(q, 0);
        else rc = dbi_sqlfail(db, "cannot number memory events");
    }
    for (int i = 0; rc == 0 && i < n; i++) {
        const ms_mem_event *e = &ev[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, seq + i);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)e->t_us);   /* whole microseconds */
        sqlite3_bind_int(st, 4, e->device);
        dbi_bind_text(st, 5, ev_kinds[e->kind]);
        if (e->layer >= 0) sqlite3_bind_int(st, 6, e->layer); else sqlite3_bind_null(st, 6);
        dbi_bind_text(st, 7, e->phase >= 0 ? ms_phase_name((ms_phase)e->phase) : NULL);
        dbi_bind_text(st, 8, e->category >= 0 ? ms_cat_name((ms_cat)e->category) : NULL);
        dbi_bind_u64(st, 9, e->bytes);
        dbi_bind_u64(st, 10, e->address);
        if (e->what[0]) dbi_bind_fixed(st, 11, e->what); else sqlite3_bind_null(st, 11);
        dbi_bind_text(st, 12, ev_sources[e->source]);
        rc = dbi_step_done(db, st, "cannot add a memory event (does the run exist?)");
    }
    sqlite3_finalize(q);
    sqlite3_finalize(st);
    if (rc != 0) { dbi_rollback(db); return -1; }
    return dbi_commit(db);
}

int ms_db_list_mem_events(ms_db *db, int64_t run,
                          int (*cb)(int64_t seq, const ms_mem_event *ev, void *ctx), void *ctx)
{
    if (!db || !cb) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT seq, t_us, device, kind, coalesce(layer, -1), phase, category, bytes, coalesce(address, 0),"
        " coalesce(what, ''), source FROM mem_events WHERE run_id = ?1 ORDER BY seq");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ms_mem_event e;
        memset(&e, 0, sizeof e);
        char kind[16], phase[16], cat[16], source[32];
        e.t_us = (double)sqlite3_column_int64(st, 1);
        e.device = sqlite3_column_int(st, 2);
        dbi_col_text(st, 3, kind, sizeof kind);
        e.layer = sqlite3_column_int(st, 4);
        dbi_col_text(st, 5, phase, sizeof phase);
        dbi_col_text(st, 6, cat, sizeof cat);
        e.bytes = dbi_col_u64(st, 7);
        e.address = dbi_col_u64(st, 8);
        dbi_col_text(st, 9, e.what, sizeof e.what);
        dbi_col_text(st, 10, source, sizeof source);
        e.kind = parse_name(kind, ev_kinds, 3);
        e.source = parse_name(source, ev_sources, 3);
        e.phase = ms_phase_parse(phase);
        e.category = ms_cat_parse(cat);
        if (cb(sqlite3_column_int64(st, 0), &e, ctx)) { rc = SQLITE_DONE; break; }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : dbi_sqlfail(db, "cannot read memory events");
}

int64_t ms_db_count_mem_events(ms_db *db, int64_t run)
{
    if (!db) return -1;
    sqlite3_stmt *st = dbi_prepare(db, "SELECT count(*) FROM mem_events WHERE run_id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    if (n < 0) dbi_sqlfail(db, "cannot count memory events");
    sqlite3_finalize(st);
    return n;
}

/* ---- OOM events ---------------------------------------------------- */

static char *layers_to_json(const uint64_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer((json_int_t)v[i]));
    char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return s;
}

int64_t dbi_insert_oom(ms_db *db, int64_t run, const char *device, const ms_oom_info *oom, int64_t t_us,
                       int has_t)
{
    if (oom->phase < 0 || oom->phase >= MS_PH_N) return dbi_fail(db, "OOM: bad phase %d", oom->phase);
    if (oom->category < 0 || oom->category >= MS_CAT_N)
        return dbi_fail(db, "OOM: bad category %d", oom->category);
    if (oom->n_live_layers < 0 || (oom->n_live_layers > 0 && !oom->live_by_layer))
        return dbi_fail(db, "OOM: bad live-by-layer list (%d entries)", oom->n_live_layers);
    char *cats = dbi_cats_to_json(oom->live_by_cat);
    char *layers = layers_to_json(oom->live_by_layer, oom->n_live_layers);
    sqlite3_stmt *st = (cats && layers) ? dbi_prepare(db,
        "INSERT INTO oom_events (run_id, device, layer, layer_name, phase, category, requested, capacity,"
        " live_by_cat, live_by_layer, what, t_us, step) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
        " ?13)")
        : NULL;
    int64_t id = -1;
    if (!cats || !layers) dbi_fail(db, "out of memory");
    if (st) {
        sqlite3_bind_int64(st, 1, run);
        dbi_bind_text(st, 2, device);
        sqlite3_bind_int(st, 3, oom->layer);
        dbi_bind_fixed(st, 4, oom->layer_name);
        dbi_bind_text(st, 5, ms_phase_name((ms_phase)oom->phase));
        dbi_bind_text(st, 6, ms_cat_name((ms_cat)oom->category));
        dbi_bind_u64(st, 7, oom->requested);
        dbi_bind_u64(st, 8, oom->capacity);
        dbi_bind_text(st, 9, cats);
        dbi_bind_text(st, 10, layers);
        dbi_bind_fixed(st, 11, oom->what);
        if (has_t) sqlite3_bind_int64(st, 12, t_us); else sqlite3_bind_null(st, 12);
        if (oom->step > 0) sqlite3_bind_int(st, 13, oom->step); else sqlite3_bind_null(st, 13);
        if (dbi_step_done(db, st, "cannot add the OOM event") == 0) id = sqlite3_last_insert_rowid(db->h);
    }
    sqlite3_finalize(st);
    free(cats);
    free(layers);
    return id;
}

int64_t ms_db_add_oom_event(ms_db *db, int64_t run, const char *device, const ms_oom_info *oom, int64_t t_us)
{
    if (!db) return -1;
    if (!oom) return dbi_fail(db, "no OOM given");
    if (dbi_begin(db) != 0) return -1;
    int64_t id = dbi_need_run(db, run) == 0 ? dbi_insert_oom(db, run, device, oom, t_us, 1) : -1;
    if (id < 0) { dbi_rollback(db); return -1; }
    return dbi_commit(db) == 0 ? id : -1;
}

static int layers_from_json(const char *s, ms_oom_info *oom)
{
    json_t *a = s ? json_loads(s, 0, NULL) : NULL;
    if (!a || !json_is_array(a)) { json_decref(a); return -1; }
    size_t n = json_array_size(a);
    oom->live_by_layer = n ? calloc(n, sizeof(uint64_t)) : NULL;
    if (n && !oom->live_by_layer) { json_decref(a); return -1; }
    oom->n_live_layers = (int)n;
    for (size_t i = 0; i < n; i++) oom->live_by_layer[i] = (uint64_t)json_integer_value(json_array_get(a, i));
    json_decref(a);
    return 0;
}

int dbi_load_oom(ms_db *db, int64_t oom_id, ms_oom_info *oom)
{
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT layer, coalesce(layer_name, ''), phase, category, requested, capacity, live_by_cat,"
        " live_by_layer, coalesce(what, ''), coalesce(step, 0) FROM oom_events WHERE id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, oom_id);
    int rc = sqlite3_step(st);
    int ret = 0;
    if (rc != SQLITE_ROW) {
        ret = rc == SQLITE_DONE ? dbi_fail(db, "OOM event %lld is missing", (long long)oom_id)
                                : dbi_sqlfail(db, "cannot read the OOM event");
    } else {
        memset(oom, 0, sizeof *oom);
        oom->happened = 1;
        oom->layer = sqlite3_column_int(st, 0);
        dbi_col_text(st, 1, oom->layer_name, sizeof oom->layer_name);
        oom->phase = ms_phase_parse((const char *)sqlite3_column_text(st, 2));
        oom->category = ms_cat_parse((const char *)sqlite3_column_text(st, 3));
        oom->requested = dbi_col_u64(st, 4);
        oom->capacity = dbi_col_u64(st, 5);
        dbi_col_text(st, 8, oom->what, sizeof oom->what);
        oom->step = sqlite3_column_int(st, 9);
        if (oom->phase < 0 || oom->category < 0)
            ret = dbi_fail(db, "OOM event %lld: unknown phase or category", (long long)oom_id);
        else if (dbi_cats_from_json((const char *)sqlite3_column_text(st, 6), oom->live_by_cat) != 0 ||
                 layers_from_json((const char *)sqlite3_column_text(st, 7), oom) != 0)
            ret = dbi_fail(db, "OOM event %lld: unreadable live bytes", (long long)oom_id);
    }
    sqlite3_finalize(st);
    return ret;
}
