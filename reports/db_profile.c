/* db_profile.c — storing a profile (header, layer rows, OOM, a program's
 * record) in one transaction, and loading it back field for field. */
#include "reports/db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/profile_json.h"

static int check_profile(ms_db *db, const ms_profile *p)
{
    if (!p) return dbi_fail(db, "no profile given");
    if (p->n_rows < 0 || (p->n_rows > 0 && !p->rows)) return dbi_fail(db, "profile: bad row list (%d rows)", p->n_rows);
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *r = &p->rows[i];
        if (!dbi_precision_name(r->precision))
            return dbi_fail(db, "profile row %d (layer %d): unknown precision %d", i, r->layer, r->precision);
        if (r->source < 0 || r->source >= MS_ROW_N)
            return dbi_fail(db, "profile row %d (layer %d): unknown source %d", i, r->layer, r->source);
    }
    char why[256];
    if (p->record && ms_prog_record_validate(p->record, p->n_layers, why, sizeof why))
        return dbi_fail(db, "profile: %s", why);   /* stored only when it loads back */
    return 0;
}

static int insert_header(ms_db *db, int64_t run, const ms_profile *p, int64_t oom_id)
{
    char now[32];
    double now_unix;
    dbi_now(now, &now_unix);
    sqlite3_stmt *st = dbi_prepare(db,
        "INSERT INTO profiles (run_id, model, n_layers, seq_len, d_model, n_head, vocab, global_batch, device,"
        " capacity, reserve, peak, fits, oom_event, created, created_unix, fingerprint, layer_list, framework,"
        " accounting, reserved_peak, grads_freed, loss_present, loss_made_in, loss_outputs, loss_held,"
        " loss_transient_fwd, loss_transient_bwd, loss_carry, loss_carry_loss, reserve_allocator)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,"
        " ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    dbi_bind_fixed(st, 2, p->model);
    sqlite3_bind_int(st, 3, p->n_layers);
    sqlite3_bind_int(st, 4, p->seq_len);
    sqlite3_bind_int(st, 5, p->d_model);
    sqlite3_bind_int(st, 6, p->n_head);
    sqlite3_bind_int(st, 7, p->vocab);
    sqlite3_bind_int(st, 8, p->global_batch);
    dbi_bind_fixed(st, 9, p->device);
    dbi_bind_u64(st, 10, p->capacity);
    dbi_bind_u64(st, 11, p->reserve);
    dbi_bind_u64(st, 12, p->peak);
    sqlite3_bind_int(st, 13, p->fits ? 1 : 0);
    if (oom_id > 0) sqlite3_bind_int64(st, 14, oom_id); else sqlite3_bind_null(st, 14);
    dbi_bind_text(st, 15, now);
    sqlite3_bind_double(st, 16, now_unix);
    dbi_bind_fixed(st, 17, p->fingerprint);
    dbi_bind_fixed(st, 18, p->layer_list);
    dbi_bind_fixed(st, 19, p->framework);
    dbi_bind_fixed(st, 20, p->accounting);
    dbi_bind_u64(st, 21, p->reserved_peak);
    sqlite3_bind_int(st, 22, p->grads_freed);
    const ms_loss_row *l = &p->loss;
    sqlite3_bind_int(st, 23, l->present ? 1 : 0);
    sqlite3_bind_int(st, 24, l->made_in);
    const uint64_t lb[6] = { l->outputs, l->held, l->transient_fwd, l->transient_bwd, l->carry, l->carry_loss };
    for (int k = 0; k < 6; k++) dbi_bind_u64(st, 25 + k, lb[k]);
    dbi_bind_u64(st, 31, p->reserve_allocator);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) return 0;
    int ext = sqlite3_extended_errcode(db->h);
    if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE)
        return dbi_fail(db, "run %lld already has a profile (one profile per run)", (long long)run);
    if (ext == SQLITE_CONSTRAINT_FOREIGNKEY) return dbi_fail(db, "no run %lld in the database", (long long)run);
    return dbi_sqlfail(db, "cannot add the profile");
    return 0;
}

static int insert_rows(ms_db *db, int64_t run, const ms_profile *p)
{
    sqlite3_stmt *st = dbi_prepare(db,
        "INSERT INTO layer_rows (run_id, ord, layer, name, kind, precision, micro_batch, source, param, master,"
        " grad, optim, act, act_input, transient_fwd, transient_bwd, out_bytes, fwd_ms, bwd_ms, opt_ms,"
        " transient_opt)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)");
    if (!st) return -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < p->n_rows; i++) {
        const ms_layer_row *r = &p->rows[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int(st, 2, i);
        sqlite3_bind_int(st, 3, r->layer);
        dbi_bind_fixed(st, 4, r->name);
        dbi_bind_fixed(st, 5, r->kind);
        dbi_bind_text(st, 6, dbi_precision_name(r->precision));
        sqlite3_bind_int(st, 7, r->micro_batch);
        dbi_bind_text(st, 8, ms_row_source_name(r->source));
        const uint64_t bytes[9] = { r->param, r->master, r->grad, r->optim, r->act,
                                    r->act_input, r->transient_fwd, r->transient_bwd, r->out_bytes };
        for (int k = 0; k < 9; k++) dbi_bind_u64(st, 9 + k, bytes[k]);
        sqlite3_bind_double(st, 18, r->fwd_ms);
        sqlite3_bind_double(st, 19, r->bwd_ms);
        sqlite3_bind_double(st, 20, r->opt_ms);
        dbi_bind_u64(st, 21, r->transient_opt);
        rc = dbi_step_done(db, st, "cannot add a layer row");
    }
    sqlite3_finalize(st);
    return rc;
}

typedef void (*bind_elem_fn)(sqlite3_stmt *st, const ms_prog_record *r, int i);

/* Element i of the record's storages: ?3.. of rec_storages' INSERT. */
static void bind_storage(sqlite3_stmt *st, const ms_prog_record *r, int i)
{
    const ms_rec_storage *s = &r->s[i];
    sqlite3_bind_int(st, 3, s->layer);
    sqlite3_bind_text(st, 4, ms_cat_name((ms_cat)s->cat), -1, SQLITE_STATIC);
    dbi_bind_u64(st, 5, s->bytes);
    sqlite3_bind_int64(st, 6, s->t_alloc);
    if (s->t_free == MS_REC_NEVER) sqlite3_bind_null(st, 7);
    else sqlite3_bind_int64(st, 7, s->t_free);
    if (s->copy_of < 0) sqlite3_bind_null(st, 8);
    else sqlite3_bind_int(st, 8, s->copy_of);
}

/* ... and of its moments: ?3.. of rec_moments' */
static void bind_moment(sqlite3_stmt *st, const ms_prog_record *r, int i)
{
    const ms_rec_moment *m = &r->m[i];
    sqlite3_bind_int(st, 3, m->layer);
    sqlite3_bind_text(st, 4, ms_phase_name((ms_phase)m->phase), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, m->t_begin);
    sqlite3_bind_int64(st, 6, m->t_end);
}

/* ... and of the modules it hands on: ?3 of rec_handed_on's (the path's bytes as they are) */
static void bind_handed_on(sqlite3_stmt *st, const ms_prog_record *r, int i)
{
    sqlite3_bind_text(st, 3, r->handed_on[i], -1, SQLITE_STATIC);   /* lives through the step */
}

/* One of the record's lists, n rows through one prepared statement (sql:
 * run_id ?1, idx ?2, the rest bound by bind), reused; what says which in
 * an error. */
static int insert_list(ms_db *db, int64_t run, const ms_prog_record *r, int n, const char *sql, bind_elem_fn bind,
                       const char *what)
{
    if (n <= 0) return 0;
    sqlite3_stmt *st = dbi_prepare(db, sql);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);   /* bindings stay across resets */
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int(st, 2, i);
        bind(st, r, i);
        rc = dbi_step_done(db, st, what);
    }
    sqlite3_finalize(st);
    return rc;
}

/* The record's header, its storages, its moments and the modules it hands on. */
static int insert_record(ms_db *db, int64_t run, const ms_prog_record *r)
{
    sqlite3_stmt *st = dbi_prepare(db, "INSERT INTO prog_records (run_id, n_layers, t_from, t_end, n_storages,"
                                       " n_moments, n_handed_on) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int(st, 2, r->n_layers);
    sqlite3_bind_int64(st, 3, r->t_from);
    sqlite3_bind_int64(st, 4, r->t_end);
    sqlite3_bind_int(st, 5, r->n);
    sqlite3_bind_int(st, 6, r->n_moments);
    sqlite3_bind_int(st, 7, r->n_handed_on);
    int rc = dbi_step_done(db, st, "cannot add the program's record");
    sqlite3_finalize(st);
    if (rc == 0)
        rc = insert_list(db, run, r, r->n, "INSERT INTO rec_storages (run_id, idx, layer, cat, bytes, t_alloc, t_free,"
                         " copy_of) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", bind_storage,
                         "cannot add a storage of the program's record");
    if (rc == 0)
        rc = insert_list(db, run, r, r->n_moments, "INSERT INTO rec_moments (run_id, idx, layer, phase, t_begin, t_end)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6)", bind_moment, "cannot add a moment of the program's record");
    if (rc == 0)
        rc = insert_list(db, run, r, r->n_handed_on, "INSERT INTO rec_handed_on (run_id, idx, path) VALUES (?1, ?2, ?3)",
                         bind_handed_on, "cannot add a module the program's record hands on");
    return rc;
}

int ms_db_add_rows(ms_db *db, int64_t run, const ms_profile *p)
{
    if (!db) return -1;
    if (check_profile(db, p) != 0) return -1;
    if (dbi_begin(db) != 0) return -1;
    int64_t oom_id = dbi_need_run(db, run);
    if (oom_id == 0 && p->oom.happened) oom_id = dbi_insert_oom(db, run, p->device, &p->oom, 0, 0);
    if (oom_id < 0 || insert_header(db, run, p, oom_id) != 0 || insert_rows(db, run, p) != 0 ||
        (p->record && insert_record(db, run, p->record) != 0)) {
        dbi_rollback(db);
        return -1;
    }
    return dbi_commit(db);
}

/* ---- loading ------------------------------------------------------- */

static int load_header(ms_db *db, int64_t run, ms_profile *out, int64_t *oom_id)
{
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT model, n_layers, seq_len, d_model, n_head, vocab, global_batch, device, capacity, reserve,"
        " peak, fits, coalesce(oom_event, 0), coalesce(fingerprint, ''), coalesce(layer_list, ''),"
        " coalesce(framework, ''), coalesce(accounting, ''), coalesce(reserved_peak, 0), grads_freed,"
        " loss_present, loss_made_in, loss_outputs, loss_held, loss_transient_fwd, loss_transient_bwd,"
        " loss_carry, loss_carry_loss, coalesce(reserve_allocator, 0) FROM profiles WHERE run_id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        dbi_col_text(st, 0, out->model, sizeof out->model);
        out->n_layers = sqlite3_column_int(st, 1);
        out->seq_len = sqlite3_column_int(st, 2);
        out->d_model = sqlite3_column_int(st, 3);
        out->n_head = sqlite3_column_int(st, 4);
        out->vocab = sqlite3_column_int(st, 5);
        out->global_batch = sqlite3_column_int(st, 6);
        dbi_col_text(st, 7, out->device, sizeof out->device);
        out->capacity = dbi_col_u64(st, 8);
        out->reserve = dbi_col_u64(st, 9);
        out->peak = dbi_col_u64(st, 10);
        out->fits = sqlite3_column_int(st, 11);
        *oom_id = sqlite3_column_int64(st, 12);
        dbi_col_text(st, 13, out->fingerprint, sizeof out->fingerprint);
        dbi_col_text(st, 14, out->layer_list, sizeof out->layer_list);
        dbi_col_text(st, 15, out->framework, sizeof out->framework);
        dbi_col_text(st, 16, out->accounting, sizeof out->accounting);
        out->reserved_peak = dbi_col_u64(st, 17);
        out->grads_freed = sqlite3_column_int(st, 18);
        if (out->grads_freed < MS_GRADS_KEPT || out->grads_freed > MS_GRADS_FREED_BEFORE_BACKWARD)
            out->grads_freed = MS_GRADS_KEPT;   /* unknown: the gradients stay (the larger peak) */
        ms_loss_row *l = &out->loss;
        l->present = sqlite3_column_int(st, 19);
        l->made_in = sqlite3_column_int(st, 20);
        uint64_t *lb[6] = { &l->outputs, &l->held, &l->transient_fwd, &l->transient_bwd, &l->carry, &l->carry_loss };
        for (int k = 0; k < 6; k++) *lb[k] = dbi_col_u64(st, 21 + k);
        out->reserve_allocator = dbi_col_u64(st, 27);
        if (out->reserve_allocator > out->reserve) out->reserve_allocator = out->reserve;   /* a part of it */
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) return dbi_fail(db, "run %lld has no stored profile", (long long)run);
    if (rc != SQLITE_ROW) return dbi_sqlfail(db, "cannot read the profile");
    return 0;
}

static int read_row(ms_db *db, sqlite3_stmt *st, ms_layer_row *r)
{
    char prec[8], source[16];
    memset(r, 0, sizeof *r);
    r->layer = sqlite3_column_int(st, 0);
    dbi_col_text(st, 1, r->name, sizeof r->name);
    dbi_col_text(st, 2, r->kind, sizeof r->kind);
    dbi_col_text(st, 3, prec, sizeof prec);
    r->micro_batch = sqlite3_column_int(st, 4);
    dbi_col_text(st, 5, source, sizeof source);
    uint64_t *bytes[9] = { &r->param, &r->master, &r->grad, &r->optim, &r->act,
                           &r->act_input, &r->transient_fwd, &r->transient_bwd, &r->out_bytes };
    for (int k = 0; k < 9; k++) *bytes[k] = dbi_col_u64(st, 6 + k);
    r->fwd_ms = sqlite3_column_double(st, 15);
    r->bwd_ms = sqlite3_column_double(st, 16);
    r->opt_ms = sqlite3_column_double(st, 17);
    r->transient_opt = dbi_col_u64(st, 18);
    r->precision = dbi_precision_parse(prec);
    r->source = ms_row_source_parse(source);
    if (r->precision < 0) return dbi_fail(db, "layer %d: unknown precision '%s'", r->layer, prec);
    if (r->source < 0) return dbi_fail(db, "layer %d: unknown row source '%s'", r->layer, source);
    return 0;
}

static int load_rows(ms_db *db, int64_t run, ms_profile *out)
{
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT layer, name, kind, precision, micro_batch, source, param, master, grad, optim, act, act_input,"
        " transient_fwd, transient_bwd, out_bytes, fwd_ms, bwd_ms, opt_ms, transient_opt FROM layer_rows"
        " WHERE run_id = ?1"
        " ORDER BY ord");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int cap = 0, rc, ret = 0;
    while (ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (out->n_rows == cap) {
            int ncap = cap ? 2 * cap : 64;
            ms_layer_row *grown = realloc(out->rows, (size_t)ncap * sizeof *grown);
            if (!grown) { ret = dbi_fail(db, "out of memory"); break; }
            out->rows = grown;
            cap = ncap;
        }
        ret = read_row(db, st, &out->rows[out->n_rows]);
        if (ret == 0) out->n_rows++;
    }
    if (ret == 0 && rc != SQLITE_DONE) ret = dbi_sqlfail(db, "cannot read layer rows");
    sqlite3_finalize(st);
    return ret;
}

/* An INTEGER column in lo..hi (a file may hold anything: the fuzzer's do). */
static int col_in(sqlite3_stmt *st, int col, int64_t lo, int64_t hi, int64_t *v)
{
    *v = sqlite3_column_int64(st, col);
    return sqlite3_column_type(st, col) == SQLITE_INTEGER && *v >= lo && *v <= hi ? 0 : -1;
}

static int read_storage(ms_db *db, int64_t run, sqlite3_stmt *st, int i, void *elem)
{
    ms_rec_storage *s = elem;
    const int64_t last = MS_REC_NEVER - 1;   /* MS_REC_NEVER is NULL in the table */
    int64_t v[7] = {0};
    int null_free = sqlite3_column_type(st, 5) == SQLITE_NULL, null_copy = sqlite3_column_type(st, 6) == SQLITE_NULL;
    int cat = ms_cat_parse((const char *)sqlite3_column_text(st, 2));
    const char *bad = col_in(st, 0, i, i, &v[0])                         ? "idx (the list has a gap)"
                      : col_in(st, 1, 0, MS_MAX_LAYERS - 1, &v[1])       ? "layer"
                      : cat < 0                                          ? "cat"
                      : col_in(st, 3, 0, INT64_MAX, &v[3])               ? "bytes"
                      : col_in(st, 4, 0, last, &v[4])                    ? "t_alloc"
                      : !null_free && col_in(st, 5, 0, last, &v[5])      ? "t_free"
                      : !null_copy && col_in(st, 6, 0, INT32_MAX, &v[6]) ? "copy_of"
                                                                         : NULL;
    if (bad) return dbi_fail(db, "run %lld: record storage %d: bad %s", (long long)run, i, bad);
    s->layer = (int)v[1];
    s->cat = cat;
    s->bytes = (uint64_t)v[3];
    s->t_alloc = (uint32_t)v[4];
    s->t_free = null_free ? MS_REC_NEVER : (uint32_t)v[5];
    s->copy_of = null_copy ? -1 : (int32_t)v[6];
    return 0;
}

static int read_moment(ms_db *db, int64_t run, sqlite3_stmt *st, int i, void *elem)
{
    ms_rec_moment *m = elem;
    const int64_t last = MS_REC_NEVER - 1;
    int64_t v[5] = {0};
    int phase = ms_phase_parse((const char *)sqlite3_column_text(st, 2));
    const char *bad = col_in(st, 0, i, i, &v[0])                 ? "idx (the list has a gap)"
                      : col_in(st, 1, -1, MS_MAX_LAYERS, &v[1])  ? "layer"
                      : phase < 0                                ? "phase"
                      : col_in(st, 3, 0, last, &v[3])            ? "t_begin"
                      : col_in(st, 4, 0, last, &v[4])            ? "t_end"
                                                                 : NULL;
    if (bad) return dbi_fail(db, "run %lld: record moment %d: bad %s", (long long)run, i, bad);
    *m = (ms_rec_moment){ .layer = (int)v[1], .phase = phase, .t_begin = (uint32_t)v[3], .t_end = (uint32_t)v[4] };
    return 0;
}

/* A module path the record hands on: text without a NUL byte, of a module
 * path's length (its content: ms_prog_record_validate, after the list). */
static int read_handed_on(ms_db *db, int64_t run, sqlite3_stmt *st, int i, void *elem)
{
    char **path = elem;
    int64_t idx;
    const int text = sqlite3_column_type(st, 1) == SQLITE_TEXT;
    const char *s = text ? (const char *)sqlite3_column_text(st, 1) : NULL;
    size_t len = s ? (size_t)sqlite3_column_bytes(st, 1) : 0;
    const char *bad = col_in(st, 0, i, i, &idx)  ? "idx (the list has a gap)"
                      : !text                    ? "path (not text)"
                      : !s                       ? NULL   /* out of memory, said below */
                      : strlen(s) != len         ? "path (it holds a NUL byte)"
                      : len >= MS_NAME_MAX       ? "path (longer than a module path may be)"
                                                 : NULL;
    if (bad) return dbi_fail(db, "run %lld: record's module handed on %d: bad %s", (long long)run, i, bad);
    if (!s || !(*path = strdup(s))) return dbi_fail(db, "out of memory");
    return 0;
}

typedef int (*read_elem_fn)(ms_db *db, int64_t run, sqlite3_stmt *st, int i, void *elem);

/* One of the record's lists (`what`: "storages", "moments", "modules handed on"): sql's rows
 * (run_id ?1, in idx order), each read into the list by read, exactly want
 * of them. The list is grown as rows come: a count in the file allocates
 * nothing by itself. *list and *n hold what was read, on failure too. */
static int load_list(ms_db *db, int64_t run, const char *sql, const char *what, size_t size, int64_t want,
                     void **list, int *n, read_elem_fn read)
{
    sqlite3_stmt *st = dbi_prepare(db, sql);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int cap = 0, rc = SQLITE_DONE, ret = 0;
    while (ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == want) { ret = dbi_fail(db, "run %lld: its record has more %s than its %lld", (long long)run,
                                         what, (long long)want); break; }
        if (*n == cap) {
            int ncap = cap ? (cap > want / 2 ? (int)want : 2 * cap) : (want < 4096 ? (int)want : 4096);
            void *grown = realloc(*list, (size_t)ncap * size);
            if (!grown) { ret = dbi_fail(db, "out of memory"); break; }
            *list = grown;
            cap = ncap;
        }
        ret = read(db, run, st, *n, (char *)*list + (size_t)*n * size);
        if (ret == 0) (*n)++;
    }
    if (ret == 0 && rc != SQLITE_DONE) ret = dbi_sqlfail(db, "cannot read the program's record");
    sqlite3_finalize(st);
    if (ret == 0 && *n != want)
        ret = dbi_fail(db, "run %lld: its record lists %d %s of %lld", (long long)run, *n, what, (long long)want);
    return ret;
}

/* The record, when the profile has one (out->record stays NULL otherwise). */
static int load_record(ms_db *db, int64_t run, ms_profile *out)
{
    sqlite3_stmt *st = dbi_prepare(db,
        "SELECT n_layers, t_from, t_end, n_storages, n_moments, n_handed_on FROM prog_records WHERE run_id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc = sqlite3_step(st), ret = 0;
    int64_t v[6] = {0};
    if (rc == SQLITE_ROW) {
        if (col_in(st, 0, 1, MS_MAX_LAYERS, &v[0]) || col_in(st, 1, 0, MS_REC_NEVER - 1, &v[1]) ||
            col_in(st, 2, 0, MS_REC_NEVER - 1, &v[2]) || col_in(st, 3, 0, MS_PROFILE_MAX_REC_STORAGES, &v[3]) ||
            col_in(st, 4, 0, MS_PROFILE_MAX_REC_MOMENTS, &v[4]) || col_in(st, 5, 0, MS_REC_MAX_HANDED_ON, &v[5]))
            ret = dbi_fail(db, "run %lld: its record's header is out of range", (long long)run);
        else if (!(out->record = calloc(1, sizeof *out->record)))
            ret = dbi_fail(db, "out of memory");
    } else if (rc != SQLITE_DONE) {
        ret = dbi_sqlfail(db, "cannot read the program's record");
    }
    sqlite3_finalize(st);
    if (ret || !out->record) return ret;
    ms_prog_record *r = out->record;
    r->n_layers = (int)v[0];
    r->t_from = (uint32_t)v[1];
    r->t_end = (uint32_t)v[2];
    void *s = NULL, *m = NULL, *h = NULL;
    int bad = load_list(db, run, "SELECT idx, layer, cat, bytes, t_alloc, t_free, copy_of FROM rec_storages"
                                 " WHERE run_id = ?1 ORDER BY idx", "storages", sizeof *r->s, v[3], &s, &r->n,
                        read_storage);
    r->s = s;
    if (bad) return -1;
    bad = load_list(db, run, "SELECT idx, layer, phase, t_begin, t_end FROM rec_moments WHERE run_id = ?1"
                             " ORDER BY idx", "moments", sizeof *r->m, v[4], &m, &r->n_moments, read_moment);
    r->m = m;
    if (bad) return -1;
    bad = load_list(db, run, "SELECT idx, path FROM rec_handed_on WHERE run_id = ?1 ORDER BY idx",
                    "modules handed on", sizeof *r->handed_on, v[5], &h, &r->n_handed_on, read_handed_on);
    r->handed_on = h;
    if (bad) return -1;
    char why[256];
    if (ms_prog_record_validate(r, out->n_layers, why, sizeof why))
        return dbi_fail(db, "run %lld: %s", (long long)run, why);
    return 0;
}

int ms_db_load_profile(ms_db *db, int64_t run_id, ms_profile *out, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    if (!db) {
        if (err) snprintf(err, errlen, "no database handle");
        return -1;
    }
    int64_t run = run_id > 0 ? run_id : ms_db_latest_profile_run(db);
    int ret = 0;
    if (run == 0) ret = dbi_fail(db, "the database holds no profile");
    else if (run < 0) ret = -1;
    /* One read transaction: the header, rows and OOM from one snapshot. */
    if (ret == 0 && sqlite3_exec(db->h, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        ret = dbi_sqlfail(db, "cannot start a read");
    if (ret == 0) {
        int64_t oom_id = 0;
        ret = load_header(db, run, out, &oom_id);
        if (ret == 0) ret = load_rows(db, run, out);
        if (ret == 0 && oom_id > 0) ret = dbi_load_oom(db, oom_id, &out->oom);
        if (ret == 0) ret = load_record(db, run, out);
        dbi_rollback(db);   /* read only: nothing to commit */
    }
    if (ret != 0) {
        ms_profile_free(out);
        if (err) snprintf(err, errlen, "%s", db->err);
    }
    return ret;
}
