/* test_db.c — the run database: opening and migrations (from an empty file,
 * from an older schema; a newer schema and foreign files refused), profiles
 * round-tripping field for field (a program's record too, its moments
 * included, written whole or not at all, checked when read), several profiles in one database, memory
 * events in atomic batches, training records, and crash safety: a writer
 * SIGKILLed at random moments leaves a database that passes integrity_check
 * and shows its run as incomplete. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd_report.h"
#include "reports/db.h"
#include "reports/report_json.h"
#include "reports/schema.h"
#include "reports/term_report.h"
#include "tests/common/planner_util.h"
#include "tests/common/reports_util.h"
#include "vocab/profile_json.h"

static char tmpdir[256];
static int file_no;

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ms_test_db_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void fresh_path(char *buf, size_t len)
{
    snprintf(buf, len, "%s/db%d.sqlite", tmpdir, file_no++);
}

static ms_db *open_new(char *path, size_t len)
{
    char err[512];
    fresh_path(path, len);
    ms_db *db = ms_db_open(path, 1, err, sizeof err);
    if (!db) fprintf(stderr, "open: %s\n", err);
    assert_non_null(db);
    return db;
}

/* Runs SQL on a raw connection and returns the first column of the first row
 * as text (static buffer), "" if no row. */
static const char *raw_query(const char *path, const char *sql)
{
    static char out[256];
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    out[0] = '\0';
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_busy_timeout(h, 5000);
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(out, sizeof out, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(h);
    return out;
}

static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *h = NULL;
    char *msg = NULL;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK) fprintf(stderr, "raw_exec: %s\n", msg);
    assert_null(msg);
    sqlite3_close(h);
}

/* text with every run of white space made one space, so phrases can be
 * found whatever the line breaks (in place; returns text). */
static char *squash(char *text)
{
    char *w = text;
    for (const char *r = text; *r; r++) {
        int space = *r == ' ' || *r == '\n';
        if (space && w > text && w[-1] == ' ') continue;
        *w++ = space ? ' ' : *r;
    }
    *w = '\0';
    return text;
}

/* ---- opening and migrations ----------------------------------------- */

static void test_missing_file_not_created(void **state)
{
    (void)state;
    char path[300], err[512];
    fresh_path(path, sizeof path);
    ms_db *db = ms_db_open(path, 0, err, sizeof err);
    assert_null(db);
    assert_non_null(strstr(err, "no database"));
    assert_int_not_equal(access(path, F_OK), 0);   /* not created */
}

static void test_empty_file_migrates(void **state)
{
    (void)state;
    char path[300], err[512];
    fresh_path(path, sizeof path);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    ms_db *db = ms_db_open(path, 0, err, sizeof err);
    assert_non_null(db);
    assert_int_equal(ms_db_schema_version(db), ms_db_n_migrations);
    int64_t run = ms_db_run_begin(db, "profile", "memsplit profile", NULL, "[\"cpu\"]", "m", 0);
    assert_true(run > 0);
    ms_db_close(db);
    assert_string_equal(raw_query(path, "PRAGMA journal_mode"), "wal");
    char want[32];
    snprintf(want, sizeof want, "%d", (int)MS_DB_APPLICATION_ID);
    assert_string_equal(raw_query(path, "PRAGMA application_id"), want);
    /* Reopening an up-to-date database changes nothing. */
    db = ms_db_open(path, 0, err, sizeof err);
    assert_non_null(db);
    ms_run_info r;
    assert_int_equal(ms_db_get_run(db, run, &r), 0);
    assert_string_equal(r.kind, "profile");
    ms_db_close(db);
}

static void test_migrates_from_version_1(void **state)
{
    (void)state;
    char path[300], err[512], sql[200];
    fresh_path(path, sizeof path);
    /* A database as the first schema left it, with a run in it. */
    raw_exec(path, ms_db_migrations[0]);
    snprintf(sql, sizeof sql, "PRAGMA user_version=1; PRAGMA application_id=%d;", (int)MS_DB_APPLICATION_ID);
    raw_exec(path, sql);
    raw_exec(path, "INSERT INTO runs (kind, status, started, started_unix, model) "
                   "VALUES ('profile', 'ok', '2024-01-01T00:00:00.000Z', 1704067200, 'old')");
    assert_true(ms_db_n_migrations >= 2);
    ms_db *db = ms_db_open(path, 0, err, sizeof err);
    assert_non_null(db);
    assert_int_equal(ms_db_schema_version(db), ms_db_n_migrations);
    ms_run_info r;
    assert_int_equal(ms_db_get_run(db, 1, &r), 0);
    assert_string_equal(r.model, "old");
    /* The tables of version 2 now work. */
    int64_t plan = ms_db_add_plan(db, 1, "{\"version\":1}", 12.5, 1);
    assert_true(plan > 0);
    ms_db_close(db);
}

/* A version-2 database with a profile, its OOM, rows and a plan: version 3
 * rebuilds runs, oom_events and layer_rows (their CHECKs grew) and must keep
 * every record and every reference; the new row sources, the validation
 * phase and the "interrupted" status then work. */
static void test_migrates_from_version_2_keeping_records(void **state)
{
    (void)state;
    char path[300], err[512], sql[200];
    fresh_path(path, sizeof path);
    raw_exec(path, ms_db_migrations[0]);
    raw_exec(path, ms_db_migrations[1]);
    snprintf(sql, sizeof sql, "PRAGMA user_version=2; PRAGMA application_id=%d;", (int)MS_DB_APPLICATION_ID);
    raw_exec(path, sql);
    raw_exec(path,
             "INSERT INTO runs (id, kind, status, started, started_unix, model) VALUES"
             " (1, 'profile', 'oom', '2024-01-01T00:00:00.000Z', 1704067200, 'old'),"
             " (2, 'doctor', 'ok', '2024-01-01T00:00:01.000Z', 1704067201, 'old');"
             "UPDATE runs SET parent_run = 2 WHERE id = 1;"
             "INSERT INTO oom_events (id, run_id, device, layer, layer_name, phase, category, requested, capacity,"
             " live_by_cat, live_by_layer, what) VALUES (7, 1, 'cpu', 3, 'block 3', 'forward', 'act', 100, 1000,"
             " '{}', '[1,2,3,4]', 'fc_pre');"
             "INSERT INTO profiles (run_id, model, n_layers, seq_len, d_model, n_head, vocab, global_batch, device,"
             " capacity, reserve, peak, fits, oom_event, created, created_unix) VALUES (1, 'old', 2, 8, 8, 1, 8, 1,"
             " 'cpu', 1000, 0, 999, 0, 7, '2024-01-01T00:00:00.000Z', 1704067200);"
             "INSERT INTO layer_rows VALUES (1, 0, 0, 'embed', 'embed', 'fp32', 1, 'full', 1,0,1,2,3,0,0,0,4,"
             " 0.5,0.5,0.1),"
             " (1, 1, 1, 'head', 'head', 'fp32', 1, 'isolated', 1,0,1,2,3,0,0,0,4, 0.5,0.5,0.1);"
             "INSERT INTO plans (id, run_id, created, created_unix, plan_json, feasible) VALUES"
             " (5, 2, '2024-01-01T00:00:02.000Z', 1704067202, '{\"version\":1}', 1);");
    ms_db *db = ms_db_open(path, 0, err, sizeof err);
    if (!db) fail_msg("open: %s", err);
    assert_int_equal(ms_db_schema_version(db), ms_db_n_migrations);
    ms_run_info r;
    assert_int_equal(ms_db_get_run(db, 1, &r), 0);
    assert_int_equal(r.parent, 2);
    ms_profile p;
    if (ms_db_load_profile(db, 1, &p, err, sizeof err)) fail_msg("load: %s", err);
    assert_int_equal(p.n_rows, 2);
    assert_int_equal(p.rows[1].source, MS_ROW_ISOLATED);
    assert_int_equal(p.rows[1].transient_opt, 0);
    assert_true(p.oom.happened);
    assert_string_equal(p.oom.what, "fc_pre");
    assert_int_equal(p.oom.n_live_layers, 4);
    assert_int_equal(p.oom.step, 0);     /* recorded before version 5: the step is not known */
    ms_profile_free(&p);
    assert_int_equal(ms_db_get_plan(db, 5, NULL, NULL, NULL, NULL), 0);
    assert_string_equal(raw_query(path, "PRAGMA foreign_keys"), "0"); /* a fresh connection's default */
    /* what version 3 adds */
    int64_t run = ms_db_run_begin(db, "profile", "memsplit profile -- python t.py", NULL, NULL, "t.py", 0);
    assert_true(run > 0);
    memset(&p, 0, sizeof p);
    p.n_layers = 1;
    p.global_batch = 1;
    p.n_rows = 1;
    p.rows = calloc(1, sizeof *p.rows);
    p.rows[0].micro_batch = 1;
    p.rows[0].source = MS_ROW_COPIED;
    p.rows[0].transient_opt = 77;
    snprintf(p.fingerprint, sizeof p.fingerprint, "fnv64:00ff00ff00ff00ff");
    p.oom.happened = 1;
    p.oom.phase = MS_PH_VALIDATION;
    p.oom.step = 2;                 /* version 5: the step it happened in */
    const ms_loss_row loss = { .present = 1, .made_in = 0, .outputs = 1, .held = 2, .transient_fwd = 3,
                               .transient_bwd = 4, .carry = 5, .carry_loss = 6 };
    p.loss = loss;
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    ms_profile_free(&p);
    if (ms_db_load_profile(db, run, &p, err, sizeof err)) fail_msg("load v3: %s", err);
    assert_memory_equal(&p.loss, &loss, sizeof loss);
    assert_int_equal(p.rows[0].source, MS_ROW_COPIED);
    assert_int_equal(p.rows[0].transient_opt, 77);
    assert_string_equal(p.fingerprint, "fnv64:00ff00ff00ff00ff");
    assert_int_equal(p.oom.phase, MS_PH_VALIDATION);
    assert_int_equal(p.oom.step, 2);
    ms_profile_free(&p);
    assert_int_equal(ms_db_run_finish(db, run, "interrupted"), 0);
    ms_db_close(db);
}

static void test_newer_schema_refused(void **state)
{
    (void)state;
    char path[300], err[512], sql[120];
    ms_db *db = open_new(path, sizeof path);
    ms_db_close(db);
    snprintf(sql, sizeof sql, "PRAGMA user_version=%d", ms_db_n_migrations + 1);
    raw_exec(path, sql);
    db = ms_db_open(path, 0, err, sizeof err);
    assert_null(db);
    assert_non_null(strstr(err, "newer"));
    /* Untouched: still the newer version. */
    snprintf(sql, sizeof sql, "%d", ms_db_n_migrations + 1);
    assert_string_equal(raw_query(path, "PRAGMA user_version"), sql);
}

/* user_version is signed: a negative one once indexed the migrations out
 * of bounds (found by tests/fuzz/fuzz_db.c; `report` died of SIGBUS). */
static void test_negative_schema_refused(void **state)
{
    (void)state;
    char path[300], err[512];
    ms_db *db = open_new(path, sizeof path);
    ms_db_close(db);
    raw_exec(path, "PRAGMA user_version=-217");
    assert_null(ms_db_open(path, 0, err, sizeof err));
    assert_non_null(strstr(err, "not a memsplit database: schema version -217"));
    assert_string_equal(raw_query(path, "PRAGMA user_version"), "-217");   /* untouched */
}

static void test_foreign_files_refused(void **state)
{
    (void)state;
    char path[300], err[512];
    fresh_path(path, sizeof path);
    raw_exec(path, "CREATE TABLE accounts (id INTEGER, owner TEXT)");
    assert_null(ms_db_open(path, 1, err, sizeof err));
    assert_non_null(strstr(err, "not a memsplit database"));
    assert_string_equal(raw_query(path, "PRAGMA journal_mode"), "delete");   /* not switched to WAL */

    fresh_path(path, sizeof path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    rp_rng rng;
    rp_seed(&rng, rp_test_seed());
    for (int i = 0; i < 8192; i++) fputc((int)(rp_next(&rng) & 0xff), f);
    fclose(f);
    assert_null(ms_db_open(path, 1, err, sizeof err));
    assert_true(strlen(err) > 0);
    assert_null(ms_db_open(tmpdir, 1, err, sizeof err));   /* a directory */
}

/* A file's bytes (malloc'd) and their count. */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* The fuzzer's door (tests/fuzz/fuzz_db.c): a WAL-mode file's bytes open
 * in memory with its runs, the file is never touched, an empty image
 * becomes a new database, and what ms_db_open refuses is refused too. */
static void test_open_image(void **state)
{
    (void)state;
    char path[300], err[512];
    ms_db *db = open_new(path, sizeof path);
    int64_t run = ms_db_run_begin(db, "train", "memsplit train", NULL, NULL, "tiny", 0);
    assert_true(run > 0);
    ms_db_close(db);
    size_t n;
    unsigned char *img = slurp(path, &n);
    assert_int_equal(img[18], 2);   /* WAL, as memsplit leaves every database */
    db = ms_db_open_image(img, n, err, sizeof err);
    if (!db) fail_msg("open_image: %s", err);
    ms_run_info r;
    assert_int_equal(ms_db_get_run(db, run, &r), 0);
    assert_string_equal(r.model, "tiny");
    assert_true(ms_db_run_begin(db, "plan", NULL, NULL, NULL, "tiny", 0) > 0);   /* writes stay in memory */
    ms_db_close(db);
    size_t n2;
    unsigned char *again = slurp(path, &n2);
    assert_int_equal(n2, n);
    assert_memory_equal(again, img, n);
    free(again);

    db = ms_db_open_image(NULL, 0, err, sizeof err);
    assert_non_null(db);
    assert_int_equal(ms_db_schema_version(db), ms_db_n_migrations);
    assert_int_equal(ms_db_latest_top_run(db), 0);
    ms_db_close(db);

    memset(img + 60, 0x7f, 4);   /* user_version: far newer than this build */
    assert_null(ms_db_open_image(img, n, err, sizeof err));
    assert_non_null(strstr(err, "newer"));
    memset(img, 'x', 16);        /* not an SQLite file at all */
    assert_null(ms_db_open_image(img, n, err, sizeof err));
    assert_true(strlen(err) > 0);
    free(img);
}

/* ---- profiles -------------------------------------------------------- */

static void assert_rows_equal(const ms_layer_row *a, const ms_layer_row *b)
{
    assert_int_equal(a->layer, b->layer);
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->kind, b->kind);
    assert_int_equal(a->precision, b->precision);
    assert_int_equal(a->micro_batch, b->micro_batch);
    assert_int_equal(a->source, b->source);
    assert_int_equal(a->param, b->param);
    assert_int_equal(a->master, b->master);
    assert_int_equal(a->grad, b->grad);
    assert_int_equal(a->optim, b->optim);
    assert_int_equal(a->act, b->act);
    assert_int_equal(a->act_input, b->act_input);
    assert_int_equal(a->transient_fwd, b->transient_fwd);
    assert_int_equal(a->transient_bwd, b->transient_bwd);
    assert_int_equal(a->out_bytes, b->out_bytes);
    /* Doubles are stored as REAL: bit for bit. */
    assert_memory_equal(&a->fwd_ms, &b->fwd_ms, sizeof(double));
    assert_memory_equal(&a->bwd_ms, &b->bwd_ms, sizeof(double));
    assert_memory_equal(&a->opt_ms, &b->opt_ms, sizeof(double));
}

static void assert_profiles_equal(const ms_profile *a, const ms_profile *b)
{
    assert_string_equal(a->model, b->model);
    assert_int_equal(a->n_layers, b->n_layers);
    assert_int_equal(a->seq_len, b->seq_len);
    assert_int_equal(a->d_model, b->d_model);
    assert_int_equal(a->n_head, b->n_head);
    assert_int_equal(a->vocab, b->vocab);
    assert_int_equal(a->global_batch, b->global_batch);
    assert_string_equal(a->device, b->device);
    assert_int_equal(a->capacity, b->capacity);
    assert_int_equal(a->reserve, b->reserve);
    assert_int_equal(a->reserve_allocator, b->reserve_allocator);
    assert_int_equal(a->peak, b->peak);
    assert_int_equal(a->fits, b->fits);
    assert_int_equal(a->n_rows, b->n_rows);
    for (int i = 0; i < a->n_rows; i++) assert_rows_equal(&a->rows[i], &b->rows[i]);
    char why[256];
    if (pu_record_diff(a->record, b->record, why, sizeof why)) fail_msg("record: %s", why);
    const ms_oom_info *x = &a->oom, *y = &b->oom;
    assert_int_equal(x->happened, y->happened);
    if (!x->happened) return;
    assert_int_equal(x->layer, y->layer);
    assert_string_equal(x->layer_name, y->layer_name);
    assert_int_equal(x->phase, y->phase);
    assert_int_equal(x->category, y->category);
    assert_int_equal(x->requested, y->requested);
    assert_int_equal(x->capacity, y->capacity);
    for (int c = 0; c < MS_CAT_N; c++) assert_int_equal(x->live_by_cat[c], y->live_by_cat[c]);
    assert_int_equal(x->n_live_layers, y->n_live_layers);
    for (int i = 0; i < x->n_live_layers; i++) assert_int_equal(x->live_by_layer[i], y->live_by_layer[i]);
    assert_string_equal(x->what, y->what);
}

static void test_profile_round_trip_with_oom(void **state)
{
    (void)state;
    char path[300], err[512];
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 1);
    ms_db *db = open_new(path, sizeof path);
    ms_profile p, q;
    rp_profile_spec spec = { .n_blocks = 20, .n_prec = 3, .n_mb = 2, .isolated_from = 17, .oom = 1,
                             .oom_layer = 17, .capacity = 40ull << 30, .requested = 3ull << 29,
                             .missing = 450971566ull };
    assert_int_equal(rp_make_profile(&p, &spec, &rng), 0);
    /* Extremes survive too: the largest byte count, a negative layer. */
    p.reserve_allocator = p.reserve / 2;
    p.rows[3].out_bytes = UINT64_MAX;
    p.rows[4].param = (uint64_t)INT64_MAX + 7;
    int64_t run = ms_db_run_begin(db, "profile", "memsplit profile --preset seed17", "[model]\nn_layer=20\n",
                                  "[{\"name\":\"cuda:0\",\"capacity\":42949672960}]", "seed17", 0);
    assert_true(run > 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    assert_int_equal(ms_db_run_finish(db, run, "oom"), 0);

    assert_int_equal(ms_db_load_profile(db, run, &q, err, sizeof err), 0);
    assert_profiles_equal(&p, &q);
    ms_profile_free(&q);
    assert_int_equal(ms_db_load_profile(db, 0, &q, err, sizeof err), 0);   /* newest */
    assert_profiles_equal(&p, &q);
    ms_profile_free(&q);

    /* One profile per run: a second is refused and the first stays intact. */
    assert_int_equal(ms_db_add_rows(db, run, &p), -1);
    assert_non_null(strstr(ms_db_errmsg(db), "already has a profile"));
    assert_int_equal(ms_db_load_profile(db, run, &q, err, sizeof err), 0);
    assert_profiles_equal(&p, &q);
    ms_profile_free(&q);

    /* A bad row is refused whole: nothing of that profile is stored. */
    int64_t run2 = ms_db_run_begin(db, "profile", NULL, NULL, NULL, NULL, 0);
    p.rows[p.n_rows - 1].precision = 9;
    assert_int_equal(ms_db_add_rows(db, run2, &p), -1);
    assert_int_equal(ms_db_load_profile(db, run2, &q, err, sizeof err), -1);
    assert_int_equal(q.n_rows, 0);
    assert_null(q.rows);
    assert_int_equal(ms_db_load_profile(db, 999, &q, err, sizeof err), -1);
    assert_non_null(strstr(err, "no stored profile"));
    assert_int_equal(ms_db_add_rows(db, 999, &p), -1);   /* no such run */
    ms_profile_free(&p);

    ms_run_info r;
    assert_int_equal(ms_db_get_run(db, run, &r), 0);
    assert_string_equal(r.status, "oom");
    assert_string_equal(ms_run_state(&r), "oom");
    assert_true(r.has_profile);
    assert_non_null(strstr(r.devices, "cuda:0"));
    char *ini = ms_db_run_config(db, run);
    assert_non_null(ini);
    assert_string_equal(ini, "[model]\nn_layer=20\n");
    free(ini);
    ms_db_close(db);
}

static void test_several_profiles_share_a_database(void **state)
{
    (void)state;
    char path[300], err[512];
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 2);
    ms_db *db = open_new(path, sizeof path);
    enum { N = 4 };
    ms_profile p[N];
    int64_t run[N];
    for (int i = 0; i < N; i++) {
        rp_profile_spec spec = { .n_blocks = 2 + i * 5, .n_prec = 1 + i % 3, .n_mb = 1 + i % 2,
                                 .isolated_from = i % 2 ? 1 : -1, .oom = i % 2, .oom_layer = 1,
                                 .capacity = (8ull << 30) * (uint64_t)(i + 1), .requested = 1ull << 20,
                                 .missing = 1ull << 19 };
        assert_int_equal(rp_make_profile(&p[i], &spec, &rng), 0);
        run[i] = ms_db_run_begin(db, "profile", NULL, NULL, NULL, p[i].model, 0);
        assert_true(run[i] > 0);
        assert_int_equal(ms_db_add_rows(db, run[i], &p[i]), 0);
        assert_int_equal(ms_db_run_finish(db, run[i], p[i].fits ? "ok" : "oom"), 0);
    }
    ms_db_close(db);
    db = ms_db_open(path, 0, err, sizeof err);
    assert_non_null(db);
    for (int i = N - 1; i >= 0; i--) {
        ms_profile q;
        assert_int_equal(ms_db_load_profile(db, run[i], &q, err, sizeof err), 0);
        assert_profiles_equal(&p[i], &q);
        ms_profile_free(&q);
    }
    assert_int_equal(ms_db_latest_profile_run(db), run[N - 1]);
    for (int i = 0; i < N; i++) ms_profile_free(&p[i]);
    ms_db_close(db);
}

/* ---- a program's record ---------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A profile of a few layers for a record (rows from rp_make_profile). */
static void record_profile(ms_profile *p, rp_rng *rng, pu_rng *g, int n_storages)
{
    rp_profile_spec spec = { .n_blocks = 4, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .capacity = 1ull << 34 };
    assert_int_equal(rp_make_profile(p, &spec, rng), 0);
    p->record = pu_random_record(g, p->n_layers, n_storages);
    assert_non_null(p->record);
}

/* Runs sql on the database file with run substituted for %lld. */
static void tamper(const char *path, const char *sql, int64_t run)
{
    char q[512];
    snprintf(q, sizeof q, sql, (long long)run);
    raw_exec(path, q);
}

static void expect_load_error(ms_db *db, int64_t run, const char *want)
{
    ms_profile q;
    char err[512];
    assert_int_equal(ms_db_load_profile(db, run, &q, err, sizeof err), -1);
    if (!strstr(err, want)) fail_msg("message '%s' lacks '%s'", err, want);
    assert_null(q.record);
    assert_null(q.rows);
}

/* A record is stored with its profile and loads back equal (from a
 * read-only open too); an empty one stays a record; a malformed one is
 * refused before anything is written; a storage the database refuses fails
 * the whole profile, said; a record changed in the file after it was
 * written is an error on loading, never a record the planner would trust. */
static void test_profile_record_round_trip(void **state)
{
    (void)state;
    char path[300], err[512];
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 11);
    pu_rng g;
    pu_seed(&g, 99);
    ms_db *db = open_new(path, sizeof path);
    ms_profile p, e, q;
    record_profile(&p, &rng, &g, 3000);
    record_profile(&e, &rng, &g, 0);
    assert_int_equal(pu_hand_on(&g, p.record, 40), 0);
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "rec", 0);
    int64_t run_e = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "rec", 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    assert_int_equal(ms_db_add_rows(db, run_e, &e), 0);
    assert_int_equal(ms_db_load_profile(db, run, &q, err, sizeof err), 0);
    assert_profiles_equal(&p, &q);
    ms_profile_free(&q);
    assert_int_equal(ms_db_load_profile(db, run_e, &q, err, sizeof err), 0);
    assert_non_null(q.record);           /* an empty record is still a record */
    assert_profiles_equal(&e, &q);
    ms_profile_free(&q);
    ms_db_close(db);
    db = ms_db_open_readonly(path, err, sizeof err);
    assert_non_null(db);
    assert_int_equal(ms_db_load_profile(db, run, &q, err, sizeof err), 0);
    assert_profiles_equal(&p, &q);
    ms_profile_free(&q);
    ms_db_close(db);
    /* the table's form: NULL for never freed and for not a copy */
    int never = 0, copies = 0;
    for (int i = 0; i < p.record->n; i++) {
        never += p.record->s[i].t_free == MS_REC_NEVER;
        copies += p.record->s[i].copy_of >= 0;
    }
    assert_true(never > 0 && copies > 0);
    /* its moments too: outside any layer, the loss's layer n_layers, of no position */
    int outside = 0, loss = 0, empty = 0;
    for (int i = 0; i < p.record->n_moments; i++) {
        outside += p.record->m[i].layer == -1;
        loss += p.record->m[i].layer == p.n_layers;
        empty += p.record->m[i].t_begin == p.record->m[i].t_end;
    }
    assert_true(p.record->n_moments > 100 && outside > 0 && loss > 0 && empty > 0);
    char want[32], sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM rec_moments WHERE run_id = %lld", (long long)run);
    snprintf(want, sizeof want, "%d", p.record->n_moments);
    assert_string_equal(raw_query(path, sql), want);
    snprintf(sql, sizeof sql, "SELECT n_moments FROM prog_records WHERE run_id = %lld", (long long)run);
    assert_string_equal(raw_query(path, sql), want);
    snprintf(sql, sizeof sql, "SELECT phase FROM rec_moments WHERE run_id = %lld AND idx = 0", (long long)run);
    assert_string_equal(raw_query(path, sql), ms_phase_name((ms_phase)p.record->m[0].phase));   /* by name */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM rec_storages WHERE run_id = %lld AND t_free IS NULL",
             (long long)run);
    snprintf(want, sizeof want, "%d", never);
    assert_string_equal(raw_query(path, sql), want);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM rec_storages WHERE run_id = %lld AND copy_of IS NOT NULL",
             (long long)run);
    snprintf(want, sizeof want, "%d", copies);
    assert_string_equal(raw_query(path, sql), want);
    /* the modules handed on: counted in the header, one row each, the path's bytes as they are */
    snprintf(sql, sizeof sql, "SELECT n_handed_on FROM prog_records WHERE run_id = %lld", (long long)run);
    assert_string_equal(raw_query(path, sql), "40");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM rec_handed_on WHERE run_id = %lld", (long long)run);
    assert_string_equal(raw_query(path, sql), "40");
    snprintf(sql, sizeof sql, "SELECT path FROM rec_handed_on WHERE run_id = %lld AND idx = 39", (long long)run);
    assert_string_equal(raw_query(path, sql), p.record->handed_on[39]);
    snprintf(sql, sizeof sql, "SELECT n_handed_on FROM prog_records WHERE run_id = %lld", (long long)run_e);
    assert_string_equal(raw_query(path, sql), "0");

    db = ms_db_open(path, 0, err, sizeof err);
    assert_non_null(db);
    /* malformed: refused whole, with the field named */
    int64_t run_bad = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "rec", 0);
    p.record->s[10].copy_of = 10;
    assert_int_equal(ms_db_add_rows(db, run_bad, &p), -1);
    assert_non_null(strstr(ms_db_errmsg(db), "record.storages[10].copy_of"));
    p.record->s[10].copy_of = -1;
    p.record->n_layers++;
    assert_int_equal(ms_db_add_rows(db, run_bad, &p), -1);
    assert_non_null(strstr(ms_db_errmsg(db), "record.n_layers"));
    p.record->n_layers--;
    p.record->m[3].t_begin = p.record->m[2].t_end + 1;
    p.record->m[3].t_end = p.record->m[2].t_end;
    assert_int_equal(ms_db_add_rows(db, run_bad, &p), -1);
    assert_non_null(strstr(ms_db_errmsg(db), "record.moments[3].t_begin"));
    p.record->m[3].t_begin = p.record->m[3].t_end;
    char *was = p.record->handed_on[7];
    p.record->handed_on[7] = p.record->handed_on[3];
    assert_int_equal(ms_db_add_rows(db, run_bad, &p), -1);
    assert_non_null(strstr(ms_db_errmsg(db), "record.handed_on[7]"));
    p.record->handed_on[7] = was;
    expect_load_error(db, run_bad, "no stored profile");
    /* the database refuses a storage half-way, or a moment after every storage went in: an error, and
     * nothing of the profile stays */
    static const struct { const char *table; int idx; const char *said; } refusals[] = {
        {"rec_storages", 1500, "cannot add a storage of the program's record"},
        {"rec_moments", 50, "cannot add a moment of the program's record"},
        {"rec_handed_on", 20, "cannot add a module the program's record hands on"},
    };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        snprintf(sql, sizeof sql, "CREATE TRIGGER boom BEFORE INSERT ON %s WHEN NEW.idx = %d"
                 " BEGIN SELECT RAISE(ABORT, 'disk on fire'); END;", refusals[i].table, refusals[i].idx);
        raw_exec(path, sql);
        assert_int_equal(ms_db_add_rows(db, run_bad, &p), -1);
        assert_non_null(strstr(ms_db_errmsg(db), refusals[i].said));
        assert_non_null(strstr(ms_db_errmsg(db), "disk on fire"));
        expect_load_error(db, run_bad, "no stored profile");
        snprintf(sql, sizeof sql, "SELECT (SELECT count(*) FROM rec_storages WHERE run_id = %lld) +"
                 " (SELECT count(*) FROM rec_moments WHERE run_id = %lld) +"
                 " (SELECT count(*) FROM rec_handed_on WHERE run_id = %lld)", (long long)run_bad, (long long)run_bad,
                 (long long)run_bad);
        assert_string_equal(raw_query(path, sql), "0");
        raw_exec(path, "DROP TRIGGER boom");
    }
    assert_int_equal(ms_db_add_rows(db, run_bad, &p), 0);
    assert_int_equal(ms_db_load_profile(db, run_bad, &q, err, sizeof err), 0);
    assert_profiles_equal(&p, &q);
    ms_profile_free(&q);

    /* its moments changed in the file, one change after another: each an error naming what is wrong */
    int k = 1;
    while (k < p.record->n_moments && p.record->m[k - 1].t_end == 0) k++;
    assert_true(k < p.record->n_moments - 1);
    char overlap[200], overlap_want[64], more[64];
    snprintf(overlap, sizeof overlap, "UPDATE rec_moments SET t_begin = %u WHERE run_id = %%lld AND idx = %d",
             p.record->m[k - 1].t_end - 1, k);
    snprintf(overlap_want, sizeof overlap_want, "record.moments[%d].t_begin", k);
    snprintf(more, sizeof more, "its record lists 2 moments of %d", p.record->n_moments);
    const struct { const char *sql, *want; } mchanges[] = {
        {"UPDATE rec_moments SET phase = 'sideways' WHERE run_id = %lld AND idx = 3", "record moment 3: bad phase"},
        {"UPDATE rec_moments SET phase = 1 WHERE run_id = %lld AND idx = 3", "record moment 3: bad phase"},
        {"UPDATE rec_moments SET phase = 'forward', t_end = 'later' WHERE run_id = %lld AND idx = 3",
         "record moment 3: bad t_end"},
        {"UPDATE rec_moments SET t_end = t_begin, layer = -2 WHERE run_id = %lld AND idx = 3",
         "record moment 3: bad layer"},
        {"UPDATE rec_moments SET layer = 7 WHERE run_id = %lld AND idx = 3", "record.moments[3].layer: 7 is outside -1..6"},
        {"UPDATE rec_moments SET layer = 6, t_end = 4294967294 WHERE run_id = %lld AND idx = 3",
         "record.moments[3].t_end: 4294967294 is beyond the record's t_end"},
        {"UPDATE rec_moments SET t_end = t_begin WHERE run_id = %lld AND idx = 3", NULL},   /* valid again */
        {overlap, overlap_want},
        {"DELETE FROM rec_moments WHERE run_id = %lld AND idx = 2", "record moment 2: bad idx"},
        {"DELETE FROM rec_moments WHERE run_id = %lld AND idx > 1", more},
        {"UPDATE prog_records SET n_moments = 1 WHERE run_id = %lld", "more moments than its 1"},
        {"UPDATE prog_records SET n_moments = -1 WHERE run_id = %lld", "record's header is out of range"},
        {"UPDATE prog_records SET n_moments = 16777217 WHERE run_id = %lld", "record's header is out of range"},
    };
    for (size_t i = 0; i < sizeof mchanges / sizeof mchanges[0]; i++) {
        tamper(path, mchanges[i].sql, run_bad);
        if (!mchanges[i].want) {
            assert_int_equal(ms_db_load_profile(db, run_bad, &q, err, sizeof err), 0);
            ms_profile_free(&q);
        } else {
            expect_load_error(db, run_bad, mchanges[i].want);
        }
    }
    /* none at all (as a record stored before they were kept): zero moments */
    tamper(path, "DELETE FROM rec_moments WHERE run_id = %lld", run_bad);
    tamper(path, "UPDATE prog_records SET n_moments = 0 WHERE run_id = %lld", run_bad);
    assert_int_equal(ms_db_load_profile(db, run_bad, &q, err, sizeof err), 0);
    assert_int_equal(q.record->n_moments, 0);
    assert_int_equal(q.record->n, p.record->n);
    ms_profile_free(&q);

    /* the modules handed on changed in the file, one change after another: each an error naming what is
     * wrong (the row's form, then the list's as a record's) */
    snprintf(more, sizeof more, "its record lists 2 modules handed on of %d", p.record->n_handed_on);
    const struct { const char *sql, *want; } hchanges[] = {
        {"UPDATE rec_handed_on SET path = '' WHERE run_id = %lld AND idx = 5", "record.handed_on[5]: empty"},
        {"UPDATE rec_handed_on SET path = (SELECT path FROM rec_handed_on WHERE run_id = %1$lld AND idx = 2)"
         " WHERE run_id = %1$lld AND idx = 5", "record.handed_on[5]:"},
        {"UPDATE rec_handed_on SET path = CAST(X'6DC328' AS TEXT) WHERE run_id = %lld AND idx = 5",
         "record.handed_on[5]: not valid UTF-8"},
        {"UPDATE rec_handed_on SET path = CAST(X'6D0078' AS TEXT) WHERE run_id = %lld AND idx = 5",
         "record's module handed on 5: bad path (it holds a NUL byte)"},
        {"UPDATE rec_handed_on SET path = X'6D' WHERE run_id = %lld AND idx = 5",   /* a number would be text */
         "record's module handed on 5: bad path (not text)"},
        {"UPDATE rec_handed_on SET path = printf('m.%%0300d', 5) WHERE run_id = %lld AND idx = 5",
         "record's module handed on 5: bad path (longer than a module path may be)"},
        {"UPDATE rec_handed_on SET path = 'model.fine' WHERE run_id = %lld AND idx = 5", NULL},   /* valid again */
        {"DELETE FROM rec_handed_on WHERE run_id = %lld AND idx = 2", "record's module handed on 2: bad idx"},
        {"DELETE FROM rec_handed_on WHERE run_id = %lld AND idx > 1", more},
        {"UPDATE prog_records SET n_handed_on = 1 WHERE run_id = %lld", "more modules handed on than its 1"},
        {"UPDATE prog_records SET n_handed_on = -1 WHERE run_id = %lld", "record's header is out of range"},
        {"UPDATE prog_records SET n_handed_on = 4097 WHERE run_id = %lld", "record's header is out of range"},
        {"UPDATE prog_records SET n_handed_on = 'all' WHERE run_id = %lld", "record's header is out of range"},
    };
    for (size_t i = 0; i < sizeof hchanges / sizeof hchanges[0]; i++) {
        tamper(path, hchanges[i].sql, run_bad);
        if (!hchanges[i].want) {
            assert_int_equal(ms_db_load_profile(db, run_bad, &q, err, sizeof err), 0);
            assert_string_equal(q.record->handed_on[5], "model.fine");
            ms_profile_free(&q);
        } else {
            expect_load_error(db, run_bad, hchanges[i].want);
        }
    }
    /* none (as a record stored before they were kept): NULL, 0 */
    tamper(path, "DELETE FROM rec_handed_on WHERE run_id = %lld", run_bad);
    tamper(path, "UPDATE prog_records SET n_handed_on = 0 WHERE run_id = %lld", run_bad);
    assert_int_equal(ms_db_load_profile(db, run_bad, &q, err, sizeof err), 0);
    assert_int_equal(q.record->n_handed_on, 0);
    assert_null(q.record->handed_on);
    ms_profile_free(&q);

    /* changed in the file, one change after another: each is an error naming what is wrong */
    static const struct { const char *sql, *want; } changes[] = {
        {"UPDATE rec_storages SET t_free = t_alloc WHERE run_id = %lld AND idx = 5", "record.storages[5].t_free"},
        {"UPDATE rec_storages SET t_free = NULL, t_alloc = 'soon' WHERE run_id = %lld AND idx = 7",
         "record storage 7: bad t_alloc"},
        {"UPDATE rec_storages SET t_alloc = -1 WHERE run_id = %lld AND idx = 7", "record storage 7: bad t_alloc"},
        {"UPDATE rec_storages SET t_alloc = 0, cat = 'weights' WHERE run_id = %lld AND idx = 7",
         "record storage 7: bad cat"},
        {"DELETE FROM rec_storages WHERE run_id = %lld AND idx = 7", "record storage 7: bad idx"},
        {"DELETE FROM rec_storages WHERE run_id = %lld AND idx > 6", "its record lists 7 storages of 3000"},
        {"UPDATE prog_records SET n_storages = 1 WHERE run_id = %lld", "more storages than its 1"},
        {"UPDATE prog_records SET n_storages = 7, n_layers = 99 WHERE run_id = %lld",
         "record.n_layers: 99, but the profile has 6 layers"},
        {"UPDATE prog_records SET n_layers = 6, t_end = 4294967295 WHERE run_id = %lld",
         "record's header is out of range"},
    };
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        tamper(path, changes[i].sql, run);
        expect_load_error(db, run, changes[i].want);
    }
    /* a profile whose record goes takes it along (ON DELETE CASCADE) */
    tamper(path, "PRAGMA foreign_keys=ON; DELETE FROM profiles WHERE run_id = %lld", run);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM rec_storages WHERE run_id = %lld", (long long)run);
    assert_string_equal(raw_query(path, sql), "0");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM rec_moments WHERE run_id = %lld", (long long)run);
    assert_string_equal(raw_query(path, sql), "0");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM rec_handed_on WHERE run_id = %lld", (long long)run);
    assert_string_equal(raw_query(path, sql), "0");
    ms_db_close(db);
    ms_profile_free(&p);
    ms_profile_free(&e);
}

/* A record of 100,000 storages (a large program's record pass) is written
 * in one transaction and read back in well under a second each way. */
static void test_profile_record_100k(void **state)
{
    (void)state;
    char path[300], err[512];
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 12);
    pu_rng g;
    pu_seed(&g, 100000);
    ms_db *db = open_new(path, sizeof path);
    ms_profile p, q;
    record_profile(&p, &rng, &g, 100000);
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "rec", 0);
    double t0 = now_ms();
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    double t1 = now_ms();
    assert_int_equal(ms_db_load_profile(db, run, &q, err, sizeof err), 0);
    double t2 = now_ms();
    assert_profiles_equal(&p, &q);
    json_t *j = ms_profile_to_json(&q);
    char *text = json_dumps(j, JSON_COMPACT);
    double t3 = now_ms();
    ms_profile back;
    json_t *jb = json_loads(text, 0, NULL);
    assert_non_null(jb);
    assert_int_equal(ms_profile_from_json(jb, &back, err, sizeof err), 0);
    double t4 = now_ms();
    json_decref(jb);
    assert_profiles_equal(&p, &back);
    fprintf(stderr, "record of 100000 storages and %d moments: database write %.0f ms, load %.0f ms; JSON write "
            "%.0f ms (%zu bytes compact), parse and read %.0f ms\n", p.record->n_moments, t1 - t0, t2 - t1, t3 - t2,
            strlen(text), t4 - t3);
    /* generous bounds: sanitizer builds and a shared machine */
    assert_true(t1 - t0 < 10000);
    assert_true(t2 - t1 < 10000);
    free(text);
    json_decref(j);
    ms_profile_free(&back);
    ms_profile_free(&q);
    ms_profile_free(&p);
    ms_db_close(db);
}

/* A database file at schema `version` (below the current one) holding run
 * 1's profile: "prog.py", n_layers layers of one fp32 row each
 * (transient_opt 5), on the CPU; then `more` (SQL, NULL for none). Opened
 * (migrated to the current version) and returned, its path in path. */
static ms_db *old_profile_db(char *path, size_t len, int version, int n_layers, const char *more)
{
    char err[512], sql[600];
    fresh_path(path, len);
    assert_true(ms_db_n_migrations > version);
    for (int v = 0; v < version; v++) raw_exec(path, ms_db_migrations[v]);
    snprintf(sql, sizeof sql, "PRAGMA user_version=%d; PRAGMA application_id=%d;", version,
             (int)MS_DB_APPLICATION_ID);
    raw_exec(path, sql);
    snprintf(sql, sizeof sql,
             "INSERT INTO runs (id, kind, status, started, started_unix, model) VALUES"
             " (1, 'profile', 'ok', '2025-01-01T00:00:00.000Z', 1735689600, 'prog.py');"
             "INSERT INTO profiles (run_id, model, n_layers, seq_len, d_model, n_head, vocab, global_batch, device,"
             " capacity, reserve, peak, fits, created, created_unix, accounting, loss_present) VALUES (1, 'prog.py',"
             " %d, 0, 0, 0, 0, 1, 'cpu', 1000, 0, 999, 1, '2025-01-01T00:00:00.000Z', 1735689600, 'cpu-dispatcher',"
             " 1);", n_layers);
    raw_exec(path, sql);
    for (int l = 0; l < n_layers; l++) {
        snprintf(sql, sizeof sql,
                 "INSERT INTO layer_rows (run_id, ord, layer, name, kind, precision, micro_batch, source, param,"
                 " master, grad, optim, act, act_input, transient_fwd, transient_bwd, transient_opt, out_bytes, fwd_ms,"
                 " bwd_ms, opt_ms) VALUES (1, %d, %d, 'model.%d', 'block', 'fp32', 1, 'full', 1, 0, 1, 2, 3, 0, 0, 0,"
                 " 5, 4, 0.5, 0.5, 0.1);", l, l, l);
        raw_exec(path, sql);
    }
    if (more) raw_exec(path, more);
    ms_db *db = ms_db_open(path, 0, err, sizeof err);
    if (!db) fail_msg("open: %s", err);
    assert_int_equal(ms_db_schema_version(db), ms_db_n_migrations);
    return db;
}

/* p with a random record of n storages (seed): stored as a new run and
 * loaded back equal. */
static void store_with_record(ms_db *db, ms_profile *p, uint64_t seed, int n)
{
    char err[512];
    pu_rng g;
    pu_seed(&g, seed);
    ms_prog_record_free(p->record);
    p->record = pu_random_record(&g, p->n_layers, n);
    assert_non_null(p->record);
    assert_true(p->record->n_moments > 0);
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "prog.py", 0);
    assert_int_equal(ms_db_add_rows(db, run, p), 0);
    ms_profile q;
    if (ms_db_load_profile(db, run, &q, err, sizeof err)) fail_msg("load: %s", err);
    assert_profiles_equal(p, &q);
    ms_profile_free(&q);
}

/* A database of version 5 (before records), with a profile: version 6 adds
 * the record's tables; the old profile loads with no record, and a new one
 * keeps its record. */
static void test_migrates_from_version_5(void **state)
{
    (void)state;
    char path[300], err[512];
    ms_db *db = old_profile_db(path, sizeof path, 5, 1, NULL);
    ms_profile p;
    if (ms_db_load_profile(db, 1, &p, err, sizeof err)) fail_msg("load: %s", err);
    assert_null(p.record);
    assert_int_equal(p.rows[0].transient_opt, 5);
    assert_string_equal(p.accounting, "cpu-dispatcher");
    store_with_record(db, &p, 6, 50);   /* what version 6 adds */
    ms_profile_free(&p);
    ms_db_close(db);
}

/* A database of version 6 (records without moments), with a program's
 * record: version 7 adds the moments' table; the old record loads whole,
 * with no moments (and is stored again so), and a new one keeps its
 * moments. */
static void test_migrates_from_version_6(void **state)
{
    (void)state;
    char path[300], err[512];
    ms_db *db = old_profile_db(path, sizeof path, 6, 2,
                               "INSERT INTO prog_records (run_id, n_layers, t_from, t_end, n_storages)"
                               " VALUES (1, 2, 1, 9, 3);"
                               "INSERT INTO rec_storages (run_id, idx, layer, cat, bytes, t_alloc, t_free, copy_of)"
                               " VALUES (1, 0, 0, 'param', 100, 0, NULL, NULL), (1, 1, 0, 'act', 40, 2, 6, NULL),"
                               " (1, 2, 1, 'act', 40, 3, 8, 1);");
    ms_profile p, q;
    if (ms_db_load_profile(db, 1, &p, err, sizeof err)) fail_msg("load: %s", err);
    assert_non_null(p.record);
    assert_int_equal(p.record->n, 3);
    assert_int_equal(p.record->t_end, 9);
    assert_int_equal(p.record->s[2].copy_of, 1);
    assert_true(p.record->s[0].t_free == MS_REC_NEVER);
    assert_int_equal(p.record->n_moments, 0);
    assert_null(p.record->m);
    assert_string_equal(raw_query(path, "SELECT n_moments FROM prog_records WHERE run_id = 1"), "0");
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "prog.py", 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    if (ms_db_load_profile(db, run, &q, err, sizeof err)) fail_msg("load again: %s", err);
    assert_profiles_equal(&p, &q);
    ms_profile_free(&q);
    store_with_record(db, &p, 7, 50);   /* what version 7 adds */
    ms_profile_free(&p);
    ms_db_close(db);
}

/* A database of version 7 (records without the modules handed on), with a
 * program's record and its moments: version 8 adds their table; the old
 * record loads whole, handing nothing on (NULL, 0), is stored again so,
 * and a new one keeps its modules, byte for byte. */
static void test_migrates_from_version_7(void **state)
{
    (void)state;
    char path[300], err[512];
    ms_db *db = old_profile_db(path, sizeof path, 7, 2,
                               "INSERT INTO prog_records (run_id, n_layers, t_from, t_end, n_storages, n_moments)"
                               " VALUES (1, 2, 1, 9, 2, 2);"
                               "INSERT INTO rec_storages (run_id, idx, layer, cat, bytes, t_alloc, t_free, copy_of)"
                               " VALUES (1, 0, 0, 'param', 100, 0, NULL, NULL), (1, 1, 1, 'act', 40, 2, 6, NULL);"
                               "INSERT INTO rec_moments (run_id, idx, layer, phase, t_begin, t_end)"
                               " VALUES (1, 0, 0, 'forward', 0, 3), (1, 1, 1, 'forward', 3, 9);");
    ms_profile p, q;
    if (ms_db_load_profile(db, 1, &p, err, sizeof err)) fail_msg("load: %s", err);
    assert_non_null(p.record);
    assert_int_equal(p.record->n, 2);
    assert_int_equal(p.record->n_moments, 2);
    assert_int_equal(p.record->n_handed_on, 0);
    assert_null(p.record->handed_on);
    assert_string_equal(raw_query(path, "SELECT n_handed_on FROM prog_records WHERE run_id = 1"), "0");
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "prog.py", 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    if (ms_db_load_profile(db, run, &q, err, sizeof err)) fail_msg("load again: %s", err);
    assert_profiles_equal(&p, &q);
    assert_null(q.record->handed_on);
    ms_profile_free(&q);
    /* what version 8 adds */
    pu_rng g;
    pu_seed(&g, 8);
    ms_prog_record_free(p.record);
    p.record = pu_random_record(&g, p.n_layers, 50);
    assert_non_null(p.record);
    assert_int_equal(pu_hand_on(&g, p.record, 5), 0);
    run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "prog.py", 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    if (ms_db_load_profile(db, run, &q, err, sizeof err)) fail_msg("load with modules: %s", err);
    assert_profiles_equal(&p, &q);
    assert_int_equal(q.record->n_handed_on, 5);
    for (int i = 0; i < 5; i++) assert_string_equal(q.record->handed_on[i], p.record->handed_on[i]);
    ms_profile_free(&q);
    ms_profile_free(&p);
    ms_db_close(db);
}

static int get_peak(const ms_device_peak *d, void *ctx);

/* A database of version 8, with a training run's device peak: version 9
 * adds the two parts of a stage's measured peak; the old row lists whole,
 * with none (not parts of 0 B), and a new row keeps its parts. */
static void test_migrates_from_version_8(void **state)
{
    (void)state;
    char path[300];
    ms_db *db = old_profile_db(path, sizeof path, 8, 2,
                               "INSERT INTO runs (id, kind, status, started, started_unix, model) VALUES"
                               " (2, 'train', 'ok', '2025-01-01T00:00:00.000Z', 1735689600, 'prog.py');"
                               "INSERT INTO device_peaks (run_id, device, name, capacity, predicted_peak, measured_peak,"
                               " measured_by_cat, predicted_by_cat) VALUES (2, 0, 'cuda:0', 1000, 900, 950, '{}', NULL);");
    ms_device_peak got[2];
    memset(got, 0, sizeof got);
    assert_int_equal(ms_db_list_device_peaks(db, 2, get_peak, got), 0);
    assert_string_equal(got[0].name, "cuda:0");
    assert_int_equal(got[0].measured_peak, 950);
    assert_int_equal(got[0].has_parts, 0);
    assert_string_equal(raw_query(path, "SELECT coalesce(allocator_peak, 'null') FROM device_peaks"), "null");
    ms_device_peak d = { .device = 1, .capacity = 1000, .predicted_peak = 900, .measured_peak = 960, .has_parts = 1,
                         .allocator_peak = 300, .beyond_allocator = 660 };
    snprintf(d.name, sizeof d.name, "cuda:1");
    assert_int_equal(ms_db_add_device_peak(db, 2, &d), 0);
    memset(got, 0, sizeof got);
    assert_int_equal(ms_db_list_device_peaks(db, 2, get_peak, got), 0);
    assert_int_equal(got[0].has_parts, 0);
    assert_int_equal(got[1].has_parts, 1);
    assert_int_equal(got[1].allocator_peak, 300);
    assert_int_equal(got[1].beyond_allocator, 660);
    ms_db_close(db);
}

/* ---- memory events --------------------------------------------------- */

static void random_events(rp_rng *rng, ms_mem_event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        memset(&ev[i], 0, sizeof ev[i]);
        ev[i].t_us = (int64_t)rp_below(rng, 1000000000);
        ev[i].device = (int)rp_below(rng, 4);
        ev[i].kind = (int)rp_below(rng, 3);
        ev[i].layer = (int)rp_below(rng, 30) - 1;
        ev[i].phase = (int)rp_below(rng, MS_PH_N + 1) - 1;
        ev[i].category = (int)rp_below(rng, MS_CAT_N + 1) - 1;
        ev[i].bytes = rp_next(rng) >> (int)rp_below(rng, 60);
        ev[i].address = rp_next(rng);
        if (rp_below(rng, 4)) snprintf(ev[i].what, sizeof ev[i].what, "t%llu", (unsigned long long)rp_below(rng, 1000));
        ev[i].source = (int)rp_below(rng, 3);
    }
}

typedef struct { const ms_mem_event *want; int n; int64_t next_seq; } ev_check;

static int check_event(int64_t seq, const ms_mem_event *e, void *ctx)
{
    ev_check *c = ctx;
    assert_int_equal(seq, c->next_seq);
    assert_true(seq < c->n);
    const ms_mem_event *w = &c->want[seq];
    assert_int_equal(e->t_us, w->t_us);
    assert_int_equal(e->device, w->device);
    assert_int_equal(e->kind, w->kind);
    assert_int_equal(e->layer, w->layer);
    assert_int_equal(e->phase, w->phase);
    assert_int_equal(e->category, w->category);
    assert_int_equal(e->bytes, w->bytes);
    assert_int_equal(e->address, w->address);
    assert_string_equal(e->what, w->what);
    assert_int_equal(e->source, w->source);
    c->next_seq++;
    return 0;
}

static void test_mem_events_batches(void **state)
{
    (void)state;
    char path[300];
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 3);
    ms_db *db = open_new(path, sizeof path);
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, NULL, 0);
    int64_t other = ms_db_run_begin(db, "profile", NULL, NULL, NULL, NULL, 0);
    enum { N = 1500 };
    ms_mem_event *ev = malloc(N * sizeof *ev);
    assert_non_null(ev);
    random_events(&rng, ev, N);
    int done = 0;
    while (done < N) {
        int n = 1 + (int)rp_below(&rng, 400);
        if (n > N - done) n = N - done;
        assert_int_equal(ms_db_add_mem_events(db, run, ev + done, n), 0);
        assert_int_equal(ms_db_add_mem_events(db, other, ev, 1), 0);   /* interleaved run */
        done += n;
    }
    assert_int_equal(ms_db_count_mem_events(db, run), N);
    ev_check c = { ev, N, 0 };
    assert_int_equal(ms_db_list_mem_events(db, run, check_event, &c), 0);
    assert_int_equal(c.next_seq, N);

    /* A batch with one bad event is refused whole. */
    ms_mem_event bad[3];
    random_events(&rng, bad, 3);
    bad[2].kind = 7;
    assert_int_equal(ms_db_add_mem_events(db, run, bad, 3), -1);
    assert_int_equal(ms_db_count_mem_events(db, run), N);
    assert_int_equal(ms_db_add_mem_events(db, 12345, ev, 2), -1);   /* no such run */
    assert_non_null(strstr(ms_db_errmsg(db), "no run"));
    free(ev);
    ms_db_close(db);
}

/* ---- runs, plans and training records -------------------------------- */

static int count_steps(const ms_step_rec *s, void *ctx)
{
    double *sum = ctx;
    sum[0] += 1;
    sum[1] += s->loss;
    if (s->step == 3) {
        assert_non_null(s->peaks_json);
        assert_non_null(strstr(s->peaks_json, "cuda:1"));
    }
    return 0;
}

static int get_peak(const ms_device_peak *d, void *ctx)
{
    ms_device_peak *out = ctx;
    out[d->device] = *d;
    return 0;
}

static int get_recovery(const ms_recovery_rec *r, void *ctx)
{
    *(ms_recovery_rec *)ctx = *r;
    return 0;
}

static void test_runs_and_training_records(void **state)
{
    (void)state;
    char path[300];
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 4);
    ms_db *db = open_new(path, sizeof path);
    assert_int_equal(ms_db_run_begin(db, "bogus", NULL, NULL, NULL, NULL, 0), -1);
    assert_int_equal(ms_db_run_begin(db, "train", NULL, NULL, "{not json", NULL, 0), -1);
    assert_int_equal(ms_db_run_begin(db, "train", NULL, NULL, NULL, NULL, 777), -1);   /* no parent */
    int64_t doctor = ms_db_run_begin(db, "doctor", "memsplit doctor --gpus 2", NULL, NULL, "seed17", 0);
    int64_t train = ms_db_run_begin(db, "train", NULL, NULL, NULL, "seed17", doctor);
    assert_true(doctor > 0 && train > doctor);
    assert_int_equal(ms_db_latest_top_run(db), doctor);

    char plan[128];
    snprintf(plan, sizeof plan, "{\"version\":1,\"stages\":[{\"layers\":[0,9]},{\"layers\":[10,21]}],\"r\":%llu}",
             (unsigned long long)rp_below(&rng, 1000000));
    assert_int_equal(ms_db_add_plan(db, doctor, "not json", 1, 1), -1);
    int64_t p1 = ms_db_add_plan(db, doctor, plan, 123.5, 1);
    int64_t p2 = ms_db_add_plan(db, doctor, "{\"version\":1}", 150.25, 0);
    assert_true(p1 > 0 && p2 > p1);
    assert_int_equal(ms_db_latest_plan_id(db, doctor), p2);
    char *json = NULL;
    double pred = 0;
    int feasible = -1;
    int64_t prun = 0;
    assert_int_equal(ms_db_get_plan(db, p1, &json, &pred, &feasible, &prun), 0);
    assert_string_equal(json, plan);
    assert_true(pred == 123.5);
    assert_int_equal(feasible, 1);
    assert_int_equal(prun, doctor);
    free(json);
    assert_int_equal(ms_db_get_plan(db, 0, NULL, &pred, &feasible, NULL), 0);   /* newest */
    assert_true(pred == 150.25);
    assert_int_equal(feasible, 0);

    double loss_sum = 0;
    for (int s = 1; s <= 5; s++) {
        ms_step_rec rec = { .step = s, .loss = 10.0 - s + rp_unit(&rng), .ms = 100, .tokens_per_s = 5000,
                            .lr = 3e-4, .peaks_json = "{\"cuda:0\": 1000, \"cuda:1\": 2000}" };
        loss_sum += rec.loss;
        assert_int_equal(ms_db_add_step(db, train, &rec), 0);
    }
    /* Step 5 redone after a recovery replaces the first record. */
    ms_step_rec redo = { .step = 5, .loss = 1.0, .ms = 90 };
    assert_int_equal(ms_db_add_step(db, train, &redo), 0);
    double sums[2] = { 0, 0 };
    assert_int_equal(ms_db_list_steps(db, train, count_steps, sums), 0);
    assert_true(sums[0] == 5);
    assert_true(sums[1] < loss_sum);

    ms_device_peak d = { .device = 1, .capacity = 40ull << 30, .predicted_peak = 30ull << 30,
                         .measured_peak = (30ull << 30) + rp_below(&rng, 1u << 28) };
    snprintf(d.name, sizeof d.name, "cuda:1");
    for (int c = 0; c < MS_CAT_N; c++) d.measured_by_cat[c] = rp_below(&rng, 1ull << 32);
    assert_int_equal(ms_db_add_device_peak(db, train, &d), 0);
    ms_device_peak got[2];
    memset(got, 0, sizeof got);
    assert_int_equal(ms_db_list_device_peaks(db, train, get_peak, got), 0);
    assert_string_equal(got[1].name, "cuda:1");
    assert_int_equal(got[1].measured_peak, d.measured_peak);
    assert_int_equal(got[1].predicted_peak, d.predicted_peak);
    for (int c = 0; c < MS_CAT_N; c++) {
        assert_int_equal(got[1].measured_by_cat[c], d.measured_by_cat[c]);
        assert_int_equal(got[1].predicted_by_cat[c], 0);
    }
    assert_int_equal(got[1].has_parts, 0);      /* not a program's stage alone on its GPU: none kept */
    /* a program's stage alone on its GPU: its measured peak's two parts, kept as given */
    ms_device_peak g = { .device = 0, .capacity = 80ull << 30, .predicted_peak = 900ull << 20, .has_parts = 1,
                         .allocator_peak = rp_below(&rng, 1ull << 32), .beyond_allocator = rp_below(&rng, 1ull << 30),
                         .predicted_allocator_peak = rp_below(&rng, 1ull << 32),
                         .predicted_beyond_allocator = rp_below(&rng, 1ull << 30) };
    g.measured_peak = g.allocator_peak + g.beyond_allocator;
    g.predicted_by_cat[MS_CAT_RESERVE] = 800ull << 20;
    snprintf(g.name, sizeof g.name, "cuda:0");
    assert_int_equal(ms_db_add_device_peak(db, train, &g), 0);
    memset(got, 0, sizeof got);
    assert_int_equal(ms_db_list_device_peaks(db, train, get_peak, got), 0);
    assert_int_equal(got[0].has_parts, 1);
    assert_int_equal(got[0].allocator_peak, g.allocator_peak);
    assert_int_equal(got[0].beyond_allocator, g.beyond_allocator);
    assert_int_equal(got[0].predicted_allocator_peak, g.predicted_allocator_peak);
    assert_int_equal(got[0].predicted_beyond_allocator, g.predicted_beyond_allocator);
    assert_int_equal(got[1].has_parts, 0);

    ms_oom_info oom;
    memset(&oom, 0, sizeof oom);
    oom.happened = 1;
    oom.layer = 12;
    oom.phase = MS_PH_BACKWARD;
    oom.category = MS_CAT_TRANSIENT;
    oom.requested = 1 << 20;
    int64_t ev = ms_db_add_oom_event(db, train, "cuda:1", &oom, 123456);
    assert_true(ev > 0);
    ms_recovery_rec rr = { .step = 5, .resumed_step = 4, .oom_event = ev, .old_plan_id = p1, .new_plan_id = p2 };
    snprintf(rr.reason, sizeof rr.reason, "oom on cuda:1");
    snprintf(rr.checkpoint, sizeof rr.checkpoint, "/tmp/ckpt/step4");
    assert_true(ms_db_add_recovery(db, train, &rr) > 0);
    ms_recovery_rec back;
    memset(&back, 0, sizeof back);
    assert_int_equal(ms_db_list_recoveries(db, train, get_recovery, &back), 0);
    assert_int_equal(back.step, 5);
    assert_int_equal(back.resumed_step, 4);
    assert_int_equal(back.oom_event, ev);
    assert_int_equal(back.new_plan_id, p2);
    assert_string_equal(back.checkpoint, "/tmp/ckpt/step4");

    assert_int_equal(ms_db_run_finish(db, train, "done"), -1);   /* not a status */
    assert_int_equal(ms_db_run_finish(db, train, "ok"), 0);
    assert_int_equal(ms_db_run_finish(db, train, "failed"), -1); /* only once */
    assert_int_equal(ms_db_run_note(db, doctor, "trial ran out"), 0);
    assert_int_equal(ms_db_run_note(db, doctor, "plan 2 chosen"), 0);
    ms_run_info r;
    assert_int_equal(ms_db_get_run(db, train, &r), 0);
    assert_string_equal(r.status, "ok");
    assert_true(r.finished[0] != '\0');
    assert_true(r.finished_unix >= r.started_unix);
    assert_int_equal(r.parent, doctor);
    assert_int_equal(ms_db_get_run(db, doctor, &r), 0);
    assert_string_equal(r.notes, "trial ran out\nplan 2 chosen");
    assert_string_equal(ms_run_state(&r), "running");   /* our own process: alive */

    /* The whole doctor run reports, children included, in 80 columns. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(ms_term_report_run(f, db, doctor, 80), 0);
    fclose(f);
    squash(text);
    assert_non_null(strstr(text, "== run 2: train, ok =="));
    assert_non_null(strstr(text, "2 stages"));
    assert_non_null(strstr(text, "cuda:1"));
    assert_non_null(strstr(text, "recovery at step 5"));
    free(text);
    ms_db_close(db);
}

/* ---- crash safety ------------------------------------------------------ */

enum { CRASH_BATCH = 256 };

/* The writer: a run, a profile, then memory events and steps in a loop of
 * transactions until killed. Reports its run id through the pipe. */
static void crash_child(const char *path, int fd, uint64_t seed)
{
    char err[512];
    rp_rng rng;
    rp_seed(&rng, seed);
    ms_db *db = ms_db_open(path, 1, err, sizeof err);
    if (!db) _exit(3);
    int64_t run = ms_db_run_begin(db, "profile", "crash child", "[model]\n", "[\"cpu\"]", "crash", 0);
    if (run <= 0) _exit(4);
    if (fd >= 0 && write(fd, &run, sizeof run) != (ssize_t)sizeof run) _exit(5);
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 30, .n_prec = 3, .n_mb = 2, .isolated_from = -1, .oom = 1,
                             .oom_layer = 17, .capacity = 1ull << 30, .requested = 1 << 20, .missing = 1 << 10 };
    if (rp_make_profile(&p, &spec, &rng) != 0 || ms_db_add_rows(db, run, &p) != 0) _exit(6);
    static ms_mem_event ev[CRASH_BATCH];
    for (int step = 0;; step++) {
        random_events(&rng, ev, CRASH_BATCH);
        if (ms_db_add_mem_events(db, run, ev, CRASH_BATCH) != 0) _exit(7);
        ms_step_rec s = { .step = step, .loss = rp_unit(&rng) };
        if (ms_db_add_step(db, run, &s) != 0) _exit(8);
    }
}

static void assert_sound(const char *path)
{
    assert_string_equal(raw_query(path, "PRAGMA integrity_check"), "ok");
    assert_string_equal(raw_query(path, "PRAGMA foreign_key_check"), "");
}

static void test_sigkill_leaves_sound_database(void **state)
{
    (void)state;
    char path[300], err[512];
    fresh_path(path, sizeof path);
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 5);
    enum { ROUNDS = 6 };
    for (int round = 0; round < ROUNDS; round++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(path, fds[1], rp_next(&rng));
        }
        close(fds[1]);
        int64_t run = 0;
        assert_int_equal(read(fds[0], &run, sizeof run), (ssize_t)sizeof run);
        close(fds[0]);
        /* Kill at a random moment within the writing: 0.2 to 60 ms in. */
        struct timespec ts = { 0, (long)(200000 + rp_below(&rng, 60000000)) };
        nanosleep(&ts, NULL);
        assert_int_equal(kill(pid, SIGKILL), 0);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status)) fprintf(stderr, "child exited %d\n", WEXITSTATUS(status));
        assert_true(WIFSIGNALED(status));

        ms_db *db = ms_db_open(path, 0, err, sizeof err);
        if (!db) fprintf(stderr, "reopen after kill: %s\n", err);
        assert_non_null(db);
        assert_sound(path);
        ms_run_info r;
        assert_int_equal(ms_db_get_run(db, run, &r), 0);
        assert_string_equal(r.status, "running");
        assert_string_equal(r.finished, "");
        assert_string_equal(ms_run_state(&r), "incomplete");
        /* Batches are atomic: whole batches only, numbered without gaps. */
        int64_t n = ms_db_count_mem_events(db, run);
        assert_true(n >= 0);
        assert_int_equal(n % CRASH_BATCH, 0);
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT coalesce(max(seq), -1) + 1 FROM mem_events WHERE run_id = %lld",
                 (long long)run);
        char want[32];
        snprintf(want, sizeof want, "%lld", (long long)n);
        ms_db_close(db);
        assert_string_equal(raw_query(path, sql), want);

        /* The report calls it incomplete; a new run can be added and ends. */
        db = ms_db_open(path, 0, err, sizeof err);
        assert_non_null(db);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        assert_int_equal(ms_term_report_run(f, db, run, 80), 0);
        fclose(f);
        assert_non_null(strstr(text, ", incomplete =="));
        free(text);
        json_t *j = ms_report_run_json(db, run);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "state")), "incomplete");
        assert_true(json_is_null(json_object_get(j, "finished")));
        /* The profile is there whole, or (killed before its commit) not at all. */
        assert_true(r.has_profile ? json_is_object(json_object_get(j, "profile"))
                                  : json_is_null(json_object_get(j, "profile")));
        json_decref(j);
        if (r.has_profile) {
            ms_profile q;
            assert_int_equal(ms_db_load_profile(db, run, &q, err, sizeof err), 0);
            assert_int_equal(q.n_rows, 32 * 3 * 2);
            assert_int_equal(q.oom.happened, 1);
            assert_int_equal(q.oom.n_live_layers, 32);
            ms_profile_free(&q);
        }
        int64_t next = ms_db_run_begin(db, "train", NULL, NULL, NULL, NULL, 0);
        assert_true(next > run);
        ms_mem_event one[1];
        random_events(&rng, one, 1);
        assert_int_equal(ms_db_add_mem_events(db, next, one, 1), 0);
        assert_int_equal(ms_db_run_finish(db, next, "ok"), 0);
        assert_int_equal(ms_db_get_run(db, next, &r), 0);
        assert_string_equal(ms_run_state(&r), "ok");
        ms_db_close(db);
    }
}

/* A kill so early it may land while the first writer creates the schema. */
static void test_sigkill_during_creation(void **state)
{
    (void)state;
    char path[300], err[512];
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 6);
    for (int round = 0; round < 6; round++) {
        fresh_path(path, sizeof path);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) crash_child(path, -1, rp_next(&rng));
        struct timespec ts = { 0, (long)rp_below(&rng, 4000000) };
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        ms_db *db = ms_db_open(path, 1, err, sizeof err);
        if (!db) fprintf(stderr, "reopen after early kill: %s\n", err);
        assert_non_null(db);
        assert_int_equal(ms_db_schema_version(db), ms_db_n_migrations);
        ms_db_close(db);
        assert_sound(path);
    }
}

/* Several processes writing one database at once: each waits its turn
 * (busy timeout, write lock taken at BEGIN) and nothing is lost. */
static void test_concurrent_writers(void **state)
{
    (void)state;
    char path[300], err[512];
    ms_db *db = open_new(path, sizeof path);
    ms_db_close(db);
    enum { WRITERS = 3, BATCHES = 20, PER = 50 };
    pid_t pids[WRITERS];
    uint64_t seed = rp_test_seed() + 8;
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        assert_true(pids[w] >= 0);
        if (pids[w] > 0) continue;
        rp_rng rng;
        rp_seed(&rng, seed + (uint64_t)w);
        ms_db *mine = ms_db_open(path, 0, err, sizeof err);
        if (!mine) _exit(3);
        int64_t run = ms_db_run_begin(mine, "profile", NULL, NULL, NULL, NULL, 0);
        if (run <= 0) _exit(4);
        ms_profile p;
        rp_profile_spec spec = { .n_blocks = 6, .n_prec = 2, .n_mb = 1, .isolated_from = -1 };
        if (rp_make_profile(&p, &spec, &rng) != 0) _exit(5);
        ms_mem_event ev[PER];
        for (int b = 0; b < BATCHES; b++) {
            random_events(&rng, ev, PER);
            if (ms_db_add_mem_events(mine, run, ev, PER) != 0) _exit(6);
            if (b == BATCHES / 2 && ms_db_add_rows(mine, run, &p) != 0) _exit(7);
        }
        if (ms_db_run_finish(mine, run, "ok") != 0) _exit(8);
        ms_profile_free(&p);
        ms_db_close(mine);
        _exit(0);
    }
    for (int w = 0; w < WRITERS; w++) {
        int status = 0;
        assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fprintf(stderr, "writer %d: status %d\n", w, status);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    db = ms_db_open(path, 0, err, sizeof err);
    assert_non_null(db);
    for (int64_t run = 1; run <= WRITERS; run++) {
        ms_run_info r;
        ms_profile q;
        assert_int_equal(ms_db_get_run(db, run, &r), 0);
        assert_string_equal(r.status, "ok");
        assert_int_equal(ms_db_count_mem_events(db, run), BATCHES * PER);
        assert_int_equal(ms_db_load_profile(db, run, &q, err, sizeof err), 0);
        assert_int_equal(q.n_rows, 8 * 2);
        ms_profile_free(&q);
    }
    ms_db_close(db);
    assert_sound(path);
}

/* ---- the command ------------------------------------------------------ */

/* Runs `memsplit report ARGS...` with its stdout and stderr silenced. */
static int run_report(int n, ...)
{
    char *argv[16];
    va_list ap;
    va_start(ap, n);
    argv[0] = "report";
    for (int i = 0; i < n && i < 14; i++) argv[i + 1] = va_arg(ap, char *);
    va_end(ap);
    argv[n + 1] = NULL;
    fflush(stdout);
    fflush(stderr);
    int out = dup(1), err = dup(2), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    int rc = ms_cmd_report(n + 1, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(out, 1);
    dup2(err, 2);
    close(out);
    close(err);
    close(null);
    return rc;
}

static void test_report_command_exit_codes(void **state)
{
    (void)state;
    char path[300], missing[300];
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 7);
    ms_db *db = open_new(path, sizeof path);
    assert_int_equal(run_report(2, "--db", path), 2);   /* no runs yet */
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "m", 0);
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 3, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .oom = 1, .oom_layer = 2,
                             .capacity = 1ull << 30, .requested = 1 << 20, .missing = 4096 };
    assert_int_equal(rp_make_profile(&p, &spec, &rng), 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    ms_profile_free(&p);
    ms_db_close(db);
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)run);
    fresh_path(missing, sizeof missing);

    assert_int_equal(run_report(1, "--help"), 0);
    assert_int_equal(run_report(2, "--db", path), 0);
    assert_int_equal(run_report(4, "--db", path, "--run", id), 0);
    assert_int_equal(run_report(3, "--db", path, "--json"), 0);
    assert_int_equal(run_report(3, "--db", path, "--list"), 0);
    assert_int_equal(run_report(0), 1);                               /* --db missing */
    assert_int_equal(run_report(3, "--db", path, "--frobnicate"), 1);
    assert_int_equal(run_report(4, "--db", path, "--run", "x"), 1);
    assert_int_equal(run_report(1, "--db"), 1);
    assert_int_equal(run_report(3, "--db", path, "stray"), 1);
    assert_int_equal(run_report(4, "--db", path, "--run", "999"), 2);  /* no such run */
    assert_int_equal(run_report(2, "--db", missing), 2);
    assert_int_not_equal(access(missing, F_OK), 0);                    /* not created */
}

int main(void)
{
    rp_test_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_file_not_created),
        cmocka_unit_test(test_empty_file_migrates),
        cmocka_unit_test(test_migrates_from_version_1),
        cmocka_unit_test(test_migrates_from_version_2_keeping_records),
        cmocka_unit_test(test_migrates_from_version_5),
        cmocka_unit_test(test_migrates_from_version_6),
        cmocka_unit_test(test_migrates_from_version_7),
        cmocka_unit_test(test_migrates_from_version_8),
        cmocka_unit_test(test_newer_schema_refused),
        cmocka_unit_test(test_negative_schema_refused),
        cmocka_unit_test(test_foreign_files_refused),
        cmocka_unit_test(test_open_image),
        cmocka_unit_test(test_profile_round_trip_with_oom),
        cmocka_unit_test(test_several_profiles_share_a_database),
        cmocka_unit_test(test_profile_record_round_trip),
        cmocka_unit_test(test_profile_record_100k),
        cmocka_unit_test(test_mem_events_batches),
        cmocka_unit_test(test_runs_and_training_records),
        cmocka_unit_test(test_sigkill_leaves_sound_database),
        cmocka_unit_test(test_sigkill_during_creation),
        cmocka_unit_test(test_concurrent_writers),
        cmocka_unit_test(test_report_command_exit_codes),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
