/* db_runs.c — the runs table: begin, finish, notes, listing, and telling a
 * live run from one whose process died. */
#include "reports/db_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const run_kinds[] = { "profile", "train", "doctor", "isolate", "plan", NULL };
static const char *const end_states[] = { "ok", "oom", "failed", "killed", "infeasible", "interrupted", NULL };

static int in_list(const char *s, const char *const *list)
{
    for (int i = 0; s && list[i]; i++)
        if (strcmp(s, list[i]) == 0) return 1;
    return 0;
}

int64_t ms_db_run_begin(ms_db *db, const char *kind, const char *cmdline, const char *config_ini,
                        const char *devices_json, const char *model, int64_t parent)
{
    if (!db) return -1;
    if (!in_list(kind, run_kinds))
        return dbi_fail(db, "unknown run kind '%s' (profile, train, doctor, isolate, plan)", kind ? kind : "(null)");
    if (!dbi_json_ok(devices_json)) return dbi_fail(db, "the devices of a run must be JSON: %.80s", devices_json);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char now[32];
    double now_unix;
    dbi_now(now, &now_unix);

    if (dbi_begin(db) != 0) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "INSERT INTO runs (kind, status, started, started_unix, cmdline, config_ini, devices_json, model,"
        " parent_run, host, pid) VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    if (!st) { dbi_rollback(db); return -1; }
    dbi_bind_text(st, 1, kind);
    dbi_bind_text(st, 2, now);
    sqlite3_bind_double(st, 3, now_unix);
    dbi_bind_text(st, 4, cmdline);
    dbi_bind_text(st, 5, config_ini);
    dbi_bind_text(st, 6, devices_json);
    dbi_bind_text(st, 7, model);
    if (parent > 0) sqlite3_bind_int64(st, 8, parent); else sqlite3_bind_null(st, 8);
    dbi_bind_text(st, 9, host);
    sqlite3_bind_int(st, 10, (int)getpid());
    int rc = dbi_step_done(db, st, parent > 0 ? "cannot add the run (does the parent run exist?)" : "cannot add the run");
    sqlite3_finalize(st);
    if (rc != 0) { dbi_rollback(db); return -1; }
    int64_t id = sqlite3_last_insert_rowid(db->h);
    return dbi_commit(db) == 0 ? id : -1;
}

int ms_db_run_finish(ms_db *db, int64_t run, const char *status)
{
    if (!db) return -1;
    if (!in_list(status, end_states))
        return dbi_fail(db, "unknown run status '%s' (ok, oom, failed, killed, infeasible)", status ? status : "(null)");
    char now[32];
    double now_unix;
    dbi_now(now, &now_unix);
    if (dbi_begin(db) != 0) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "UPDATE runs SET status = ?2, finished = ?3, finished_unix = ?4 WHERE id = ?1 AND status = 'running'");
    if (!st) { dbi_rollback(db); return -1; }
    sqlite3_bind_int64(st, 1, run);
    dbi_bind_text(st, 2, status);
    dbi_bind_text(st, 3, now);
    sqlite3_bind_double(st, 4, now_unix);
    int rc = dbi_step_done(db, st, "cannot finish the run");
    sqlite3_finalize(st);
    if (rc == 0 && sqlite3_changes(db->h) != 1) rc = dbi_fail(db, "run %lld is not a running run", (long long)run);
    if (rc != 0) { dbi_rollback(db); return -1; }
    return dbi_commit(db);
}

int ms_db_run_note(ms_db *db, int64_t run, const char *line)
{
    if (!db) return -1;
    if (!line) return 0;
    if (dbi_begin(db) != 0) return -1;
    sqlite3_stmt *st = dbi_prepare(db,
        "UPDATE runs SET notes = CASE WHEN notes IS NULL OR notes = '' THEN ?2 ELSE notes || char(10) || ?2 END"
        " WHERE id = ?1");
    if (!st) { dbi_rollback(db); return -1; }
    sqlite3_bind_int64(st, 1, run);
    dbi_bind_text(st, 2, line);
    int rc = dbi_step_done(db, st, "cannot add the note");
    sqlite3_finalize(st);
    if (rc == 0 && sqlite3_changes(db->h) != 1) rc = dbi_fail(db, "no run %lld in the database", (long long)run);
    if (rc != 0) { dbi_rollback(db); return -1; }
    return dbi_commit(db);
}

const char *ms_run_state(const ms_run_info *r)
{
    if (strcmp(r->status, "running") != 0) return r->status;
    /* A run whose process is alive on this host is still running; one whose
     * process is gone (killed, crashed) never recorded its end. A run from
     * another host cannot be checked: it is most often a database copied
     * after the fact, so it reads as incomplete too. */
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    if (r->pid > 0 && strcmp(host, r->host) == 0 && (kill((pid_t)r->pid, 0) == 0 || errno == EPERM))
        return "running";
    return "incomplete";
}

#define RUN_COLUMNS \
    "id, coalesce(parent_run, 0), kind, status, started, coalesce(finished, ''), started_unix," \
    " coalesce(finished_unix, 0), coalesce(model, ''), coalesce(host, ''), coalesce(pid, 0)," \
    " EXISTS (SELECT 1 FROM profiles p WHERE p.run_id = runs.id), coalesce(cmdline, '')," \
    " coalesce(devices_json, ''), coalesce(notes, '') FROM runs"

static void read_run(sqlite3_stmt *st, ms_run_info *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->parent = sqlite3_column_int64(st, 1);
    dbi_col_text(st, 2, r->kind, sizeof r->kind);
    dbi_col_text(st, 3, r->status, sizeof r->status);
    dbi_col_text(st, 4, r->started, sizeof r->started);
    dbi_col_text(st, 5, r->finished, sizeof r->finished);
    r->started_unix = sqlite3_column_double(st, 6);
    r->finished_unix = sqlite3_column_double(st, 7);
    dbi_col_text(st, 8, r->model, sizeof r->model);
    dbi_col_text(st, 9, r->host, sizeof r->host);
    r->pid = sqlite3_column_int(st, 10);
    r->has_profile = sqlite3_column_int(st, 11);
    dbi_col_text(st, 12, r->cmdline, sizeof r->cmdline);
    dbi_col_text(st, 13, r->devices, sizeof r->devices);
    dbi_col_text(st, 14, r->notes, sizeof r->notes);
}

int ms_db_list_runs(ms_db *db, int (*cb)(const ms_run_info *r, void *ctx), void *ctx)
{
    if (!db || !cb) return -1;
    sqlite3_stmt *st = dbi_prepare(db, "SELECT " RUN_COLUMNS " ORDER BY id");
    if (!st) return -1;
    ms_run_info *r = malloc(sizeof *r);   /* ~2.7 KB: kept off the stack */
    int rc;
    if (!r) { sqlite3_finalize(st); return dbi_fail(db, "out of memory"); }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        read_run(st, r);
        if (cb(r, ctx)) { rc = SQLITE_DONE; break; }
    }
    free(r);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : dbi_sqlfail(db, "cannot list runs");
}

int ms_db_get_run(ms_db *db, int64_t run, ms_run_info *out)
{
    if (!db || !out) return -1;
    sqlite3_stmt *st = dbi_prepare(db, "SELECT " RUN_COLUMNS " WHERE id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) read_run(st, out);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW) return 0;
    if (rc == SQLITE_DONE) return dbi_fail(db, "no run %lld in the database", (long long)run);
    return dbi_sqlfail(db, "cannot read the run");
}

static int64_t single_id(ms_db *db, const char *sql, int64_t arg, const char *what)
{
    sqlite3_stmt *st = dbi_prepare(db, sql);
    if (!st) return -1;
    if (sqlite3_bind_parameter_count(st) > 0) sqlite3_bind_int64(st, 1, arg);
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return dbi_sqlfail(db, what);
    return id;
}

int64_t ms_db_latest_top_run(ms_db *db)
{
    if (!db) return -1;
    return single_id(db, "SELECT coalesce(max(id), 0) FROM runs WHERE parent_run IS NULL", 0,
                     "cannot find the latest run");
}

int64_t ms_db_latest_profile_run(ms_db *db)
{
    if (!db) return -1;
    return single_id(db, "SELECT coalesce(max(run_id), 0) FROM profiles", 0, "cannot find the latest profile");
}

int64_t ms_db_latest_plan_id(ms_db *db, int64_t run)
{
    if (!db) return -1;
    if (run > 0)
        return single_id(db, "SELECT coalesce(max(id), 0) FROM plans WHERE run_id = ?1", run,
                         "cannot find the latest plan");
    return single_id(db, "SELECT coalesce(max(id), 0) FROM plans", 0, "cannot find the latest plan");
}

char *ms_db_run_config(ms_db *db, int64_t run)
{
    if (!db) return NULL;
    sqlite3_stmt *st = dbi_prepare(db, "SELECT config_ini FROM runs WHERE id = ?1");
    if (!st) return NULL;
    sqlite3_bind_int64(st, 1, run);
    char *out = NULL;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        out = strdup((const char *)sqlite3_column_text(st, 0));
        if (!out) dbi_fail(db, "out of memory");
    } else if (rc == SQLITE_ROW) {
        dbi_fail(db, "run %lld has no stored config", (long long)run);
    } else if (rc == SQLITE_DONE) {
        dbi_fail(db, "no run %lld in the database", (long long)run);
    } else {
        dbi_sqlfail(db, "cannot read the run's config");
    }
    sqlite3_finalize(st);
    return out;
}
