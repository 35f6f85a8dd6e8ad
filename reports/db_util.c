/* db_util.c — helpers shared by the database files (see db_internal.h). */
#include "reports/db_internal.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int dbi_fail(ms_db *db, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->err, sizeof db->err, fmt, ap);
    va_end(ap);
    return -1;
}

int dbi_sqlfail(ms_db *db, const char *what)
{
    return dbi_fail(db, "%s: %s", what, db->h ? sqlite3_errmsg(db->h) : "no database");
}

int dbi_begin(ms_db *db)
{
    char *msg = NULL;
    if (sqlite3_exec(db->h, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK) {
        dbi_fail(db, "cannot start a transaction: %s", msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int dbi_commit(ms_db *db)
{
    char *msg = NULL;
    if (sqlite3_exec(db->h, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
        dbi_fail(db, "cannot commit: %s", msg ? msg : "?");
        sqlite3_free(msg);
        dbi_rollback(db);
        return -1;
    }
    return 0;
}

void dbi_rollback(ms_db *db)
{
    /* Only when a transaction is open: a failed COMMIT may already have
     * rolled back, and a second ROLLBACK would overwrite nothing useful. */
    if (!sqlite3_get_autocommit(db->h)) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

sqlite3_stmt *dbi_prepare(ms_db *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) {
        dbi_sqlfail(db, "cannot prepare a statement");
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

int dbi_step_done(ms_db *db, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return dbi_sqlfail(db, what);
    return 0;
}

void dbi_now(char iso[32], double *unix_s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    unsigned ms = (unsigned)(ts.tv_nsec / 1000000L) % 1000u;
    snprintf(iso, 32, "%.19s.%03uZ", base, ms);
    if (unix_s) *unix_s = (double)ts.tv_sec + ms / 1000.0;
}

int dbi_bind_text(sqlite3_stmt *st, int i, const char *s)
{
    return s ? sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

void dbi_col_text(sqlite3_stmt *st, int col, char *buf, size_t len)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    if (!len) return;
    snprintf(buf, len, "%s", t ? (const char *)t : "");
}

int dbi_json_ok(const char *s)
{
    if (!s) return 1;
    json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
    if (!j) return 0;
    json_decref(j);
    return 1;
}

char *dbi_cats_to_json(const uint64_t v[MS_CAT_N])
{
    json_t *o = json_object();
    if (!o) return NULL;
    for (int c = 0; c < MS_CAT_N; c++)
        json_object_set_new(o, ms_cat_name((ms_cat)c), json_integer((json_int_t)v[c]));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

int dbi_cats_from_json(const char *s, uint64_t v[MS_CAT_N])
{
    memset(v, 0, sizeof(uint64_t) * MS_CAT_N);
    if (!s) return 0;
    json_t *o = json_loads(s, 0, NULL);
    if (!o || !json_is_object(o)) { json_decref(o); return -1; }
    for (int c = 0; c < MS_CAT_N; c++) {
        json_t *x = json_object_get(o, ms_cat_name((ms_cat)c));
        if (x && json_is_integer(x)) v[c] = (uint64_t)json_integer_value(x);
    }
    json_decref(o);
    return 0;
}

static const char *const precision_names[] = { "fp32", "bf16", "fp16" };

const char *dbi_precision_name(int p)
{
    return p >= 0 && p < 3 ? precision_names[p] : NULL;
}

int dbi_precision_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (s && strcmp(s, precision_names[i]) == 0) return i;
    return -1;
}

int dbi_need_run(ms_db *db, int64_t run)
{
    sqlite3_stmt *st = dbi_prepare(db, "SELECT 1 FROM runs WHERE id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW) return 0;
    if (rc == SQLITE_DONE) return dbi_fail(db, "no run %lld in the database", (long long)run);
    return dbi_sqlfail(db, "cannot look up the run");
}
