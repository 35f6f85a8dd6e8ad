/* db_internal.h — shared by the reports/db*.c files only: the handle, error
 * recording, transactions, timestamps, and enum <-> text conversions.
 * Not part of the public API (reports/db.h). */
#ifndef MS_DB_INTERNAL_H
#define MS_DB_INTERNAL_H

#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "reports/db.h"

struct ms_db {
    sqlite3 *h;
    char err[512];
};

/* Records a message (printf-style) as the handle's error; returns -1. */
int dbi_fail(ms_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records "what: <sqlite's message>"; returns -1. */
int dbi_sqlfail(ms_db *db, const char *what);

/* BEGIN IMMEDIATE (takes the write lock up front, so a busy database waits
 * in the busy handler instead of failing at the first write) / COMMIT /
 * ROLLBACK. commit and begin return 0 or -1; rollback never fails loudly. */
int dbi_begin(ms_db *db);
int dbi_commit(ms_db *db);
void dbi_rollback(ms_db *db);

/* Prepares sql; on failure records the error and returns NULL. */
sqlite3_stmt *dbi_prepare(ms_db *db, const char *sql);
/* Steps a statement expected to finish (INSERT/UPDATE): 0 or -1. */
int dbi_step_done(ms_db *db, sqlite3_stmt *st, const char *what);

/* Now as ISO8601 UTC with milliseconds ("2025-01-31T12:00:00.123Z") and as
 * unix seconds. */
void dbi_now(char iso[32], double *unix_s);

/* Binds text, or NULL when s is NULL. */
int dbi_bind_text(sqlite3_stmt *st, int i, const char *s);
/* Copies a text column into buf (cut to fit, "" for NULL). */
void dbi_col_text(sqlite3_stmt *st, int col, char *buf, size_t len);
/* uint64 bytes are stored bit for bit in SQLite's signed 64-bit integers. */
static inline int dbi_bind_u64(sqlite3_stmt *st, int i, uint64_t v) { return sqlite3_bind_int64(st, i, (sqlite3_int64)v); }
static inline uint64_t dbi_col_u64(sqlite3_stmt *st, int col) { return (uint64_t)sqlite3_column_int64(st, col); }

/* 1 if s is NULL or parses as JSON. */
int dbi_json_ok(const char *s);
/* JSON object {"param": n, ...} over the MS_CAT_N categories, malloc'd. */
char *dbi_cats_to_json(const uint64_t v[MS_CAT_N]);
/* Parses such an object into v (absent categories 0); 0 or -1. */
int dbi_cats_from_json(const char *s, uint64_t v[MS_CAT_N]);

/* Precision <-> text ("fp32", "bf16", "fp16"): NULL / -1 when unknown.
 * Kept here rather than using trainer/ so reports/ depends on nothing but
 * the profile contract. */
const char *dbi_precision_name(int p);
int dbi_precision_parse(const char *s);

/* OOM events (db_events.c), inside the caller's transaction: insert returns
 * the event id or -1; load fills oom (live_by_layer malloc'd) or returns -1. */
int64_t dbi_insert_oom(ms_db *db, int64_t run, const char *device, const ms_oom_info *oom, int64_t t_us,
                       int has_t);
int dbi_load_oom(ms_db *db, int64_t oom_id, ms_oom_info *oom);

/* 0 if the run exists, else -1 with "no run N in the database". */
int dbi_need_run(ms_db *db, int64_t run);

/* Length of a fixed char array's text, never reading past it. */
#define DBI_FIXED(arr) (int)strnlen((arr), sizeof(arr))
#define dbi_bind_fixed(st, i, arr) sqlite3_bind_text((st), (i), (arr), DBI_FIXED(arr), SQLITE_TRANSIENT)

#endif
