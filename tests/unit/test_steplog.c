/* test_steplog.c — run/steplog.h against a database another connection
 * holds locked (issue 11: `train --db` exited 0 with step rows missing when
 * another process held the write lock): no row is dropped, waiting rows are
 * written in order once the lock goes, and rows the database never takes
 * are an error that says how many and which. Also: a read-only open never
 * writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/steplog.h"
#include "reports/db.h"

static char dir[64], path[128];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/ms_test_steplog_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(path, sizeof path, "%s/s.db", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Another process's write lock: a raw connection inside BEGIN IMMEDIATE. */
static sqlite3 *lock_db(void)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    return h;
}

static void unlock_db(sqlite3 *h)
{
    assert_int_equal(sqlite3_exec(h, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
}

static int count_step(const ms_step_rec *s, void *ctx)
{
    int *n = ctx;
    assert_int_equal(s->step, *n + 1); /* in order, none missing */
    assert_non_null(s->peaks_json);
    assert_string_equal(s->peaks_json, "{\"cpu\": 7}");
    (*n)++;
    return 0;
}

static ms_step_rec step(int i)
{
    ms_step_rec s = { i, 1.0 / i, 2.0, 3.0, 1e-3, 0, 0, "{\"cpu\": 7}" };
    return s;
}

/* A new database with one run, its first step written, then locked by
 * another connection (*other); writes wait timeout_ms. */
static ms_steplog *first_step_then_locked(ms_db **db, int64_t *run, int timeout_ms, sqlite3 **other)
{
    char err[512];
    unlink(path);
    *db = ms_db_open(path, 1, err, sizeof err);
    assert_non_null(*db);
    *run = ms_db_run_begin(*db, "train", NULL, NULL, NULL, "tiny", 0);
    assert_true(*run > 0);
    ms_db_set_busy_timeout(*db, timeout_ms);
    ms_steplog *l = ms_steplog_new(*db, *run, timeout_ms, NULL);
    ms_step_rec s = step(1);
    assert_int_equal(ms_steplog_add(l, &s), 0);
    *other = lock_db();
    return l;
}

static void test_rows_wait_for_the_lock(void **state)
{
    (void)state;
    char err[512];
    ms_db *db;
    int64_t run;
    sqlite3 *other;
    ms_steplog *l = first_step_then_locked(&db, &run, 50, &other);
    ms_step_rec s;
    for (int i = 2; i <= 5; i++) {
        s = step(i);
        assert_int_equal(ms_steplog_add(l, &s), 1); /* kept, not written, not lost */
    }
    assert_int_equal(ms_steplog_pending(l), 4);
    unlock_db(other);
    s = step(6);
    assert_int_equal(ms_steplog_add(l, &s), 0); /* the kept rows go first */
    assert_int_equal(ms_steplog_finish(l, err, sizeof err), 0);
    int n = 0;
    assert_int_equal(ms_db_list_steps(db, run, count_step, &n), 0);
    assert_int_equal(n, 6);
    ms_steplog_free(l);
    ms_db_close(db);
}

static void test_rows_never_written_are_an_error(void **state)
{
    (void)state;
    char err[512];
    ms_db *db;
    int64_t run;
    sqlite3 *other;
    ms_steplog *l = first_step_then_locked(&db, &run, 20, &other);
    ms_step_rec s;
    for (int i = 2; i <= 3; i++) {
        s = step(i);
        assert_int_equal(ms_steplog_add(l, &s), 1);
    }
    assert_int_equal(ms_steplog_finish(l, err, sizeof err), -1);
    assert_non_null(strstr(err, "2 step rows (steps 2..3) could not be written to the database"));
    assert_non_null(strstr(err, "locked"));
    unlock_db(other);
    ms_steplog_free(l);
    ms_db_close(db);
}

/* memsplit report opens read-only: a database in a read-only file reads,
 * and the open leaves the file's bytes as they were. */
static void test_readonly_open_never_writes(void **state)
{
    (void)state;
    char err[512];
    unlink(path);
    ms_db *db = ms_db_open(path, 1, err, sizeof err);
    assert_non_null(db);
    assert_true(ms_db_run_begin(db, "train", NULL, NULL, NULL, "tiny", 0) > 0);
    ms_db_close(db);
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    chmod(path, 0444);
    db = ms_db_open_readonly(path, err, sizeof err);
    if (!db) fail_msg("read-only open: %s", err);
    assert_int_equal(ms_db_latest_top_run(db), 1);
    assert_true(ms_db_run_begin(db, "train", NULL, NULL, NULL, "tiny", 0) < 0); /* it cannot write */
    ms_db_close(db);
    assert_int_equal(stat(path, &after), 0);
    assert_true(before.st_size == after.st_size && before.st_mtime == after.st_mtime);
    chmod(path, 0644);
    /* an empty file (killed before the schema) reads as no runs */
    FILE *f = fopen(path, "w");
    fclose(f);
    db = ms_db_open_readonly(path, err, sizeof err);
    assert_non_null(db);
    assert_int_equal(ms_db_latest_top_run(db), 0);
    ms_db_close(db);
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(after.st_size, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_wait_for_the_lock),
        cmocka_unit_test(test_rows_never_written_are_an_error),
        cmocka_unit_test(test_readonly_open_never_writes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
