/* test_profile_json.c — the profile JSON: round trips bit for bit (a
 * program's record too, its moments as the record pass makes them),
 * rejects malformed input (and malformed records and moments)
 * with a message naming the field, and survives random mutations of valid
 * documents (text and structure) without crashing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bridge/record.h"
#include "bridge/trace.h"
#include "planner/record_replay.h"
#include "vocab/profile_json.h"
#include "tests/common/planner_util.h"

static ms_profile *sample(uint64_t seed, int with_oom)
{
    pu_rng r;
    pu_seed(&r, seed);
    int sizes[2] = {1, 2 + pu_int(&r, 3)};
    ms_profile *p = pu_random_profile(&r, 3 + pu_int(&r, 10), 1u + (unsigned)pu_int(&r, 7), sizes, 1 + pu_int(&r, 2),
                                      8);
    p->capacity = (8ull << 30) + pu_next(&r) % 1000;
    p->peak = p->capacity - 12345;
    p->fits = !with_oom;
    if (with_oom) {
        ms_oom_info *o = &p->oom;
        o->happened = 1;
        o->layer = pu_int(&r, p->n_layers);
        snprintf(o->layer_name, sizeof o->layer_name, "block %d", o->layer);
        o->phase = pu_int(&r, MS_PH_N);
        o->step = pu_int(&r, 3);            /* 0: unknown (null), else the step it happened in */
        o->category = pu_int(&r, MS_CAT_N);
        o->requested = pu_next(&r) >> 20;
        o->capacity = p->capacity;
        for (int c = 0; c < MS_CAT_N; c++) o->live_by_cat[c] = pu_next(&r) >> 24;
        o->n_live_layers = o->layer + 1;
        o->live_by_layer = calloc((size_t)o->n_live_layers, sizeof *o->live_by_layer);
        for (int i = 0; i < o->n_live_layers; i++) o->live_by_layer[i] = pu_next(&r) >> 30;
        snprintf(o->what, sizeof o->what, "fc_pre");
    }
    return p;
}

static void drop(ms_profile *p)
{
    ms_profile_free(p);
    free(p);
}

static void assert_same_profile(const ms_profile *a, const ms_profile *b)
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
    assert_int_equal(a->peak, b->peak);
    assert_int_equal(a->fits, b->fits);
    assert_string_equal(a->fingerprint, b->fingerprint);
    assert_string_equal(a->layer_list, b->layer_list);
    assert_string_equal(a->framework, b->framework);
    assert_int_equal(a->reserved_peak, b->reserved_peak);
    assert_int_equal(a->reserve_allocator, b->reserve_allocator);
    assert_memory_equal(&a->loss, &b->loss, sizeof a->loss);
    assert_int_equal(a->oom.happened, b->oom.happened);
    if (a->oom.happened) {
        assert_int_equal(a->oom.layer, b->oom.layer);
        assert_string_equal(a->oom.layer_name, b->oom.layer_name);
        assert_int_equal(a->oom.phase, b->oom.phase);
        assert_int_equal(a->oom.step, b->oom.step);
        assert_int_equal(a->oom.category, b->oom.category);
        assert_int_equal(a->oom.requested, b->oom.requested);
        assert_int_equal(a->oom.capacity, b->oom.capacity);
        assert_memory_equal(a->oom.live_by_cat, b->oom.live_by_cat, sizeof a->oom.live_by_cat);
        assert_int_equal(a->oom.n_live_layers, b->oom.n_live_layers);
        assert_memory_equal(a->oom.live_by_layer, b->oom.live_by_layer,
                            (size_t)a->oom.n_live_layers * sizeof *a->oom.live_by_layer);
        assert_string_equal(a->oom.what, b->oom.what);
    }
    char why[256];
    if (pu_record_diff(a->record, b->record, why, sizeof why)) fail_msg("record: %s", why);
    assert_int_equal(a->n_rows, b->n_rows);
    for (int i = 0; i < a->n_rows; i++) {
        const ms_layer_row *x = &a->rows[i], *y = &b->rows[i];
        assert_int_equal(x->layer, y->layer);
        assert_string_equal(x->name, y->name);
        assert_string_equal(x->kind, y->kind);
        assert_int_equal(x->precision, y->precision);
        assert_int_equal(x->micro_batch, y->micro_batch);
        assert_int_equal(x->source, y->source);
        assert_int_equal(x->param, y->param);
        assert_int_equal(x->master, y->master);
        assert_int_equal(x->grad, y->grad);
        assert_int_equal(x->optim, y->optim);
        assert_int_equal(x->act, y->act);
        assert_int_equal(x->act_input, y->act_input);
        assert_int_equal(x->transient_fwd, y->transient_fwd);
        assert_int_equal(x->transient_bwd, y->transient_bwd);
        assert_int_equal(x->transient_opt, y->transient_opt);
        assert_int_equal(x->out_bytes, y->out_bytes);
        /* bit for bit: jansson writes 17 significant digits */
        assert_memory_equal(&x->fwd_ms, &y->fwd_ms, sizeof(double));
        assert_memory_equal(&x->bwd_ms, &y->bwd_ms, sizeof(double));
        assert_memory_equal(&x->opt_ms, &y->opt_ms, sizeof(double));
    }
}

/* p as compact text and back: equal field for field (its record too), and
 * the same JSON again. Consumes j, the JSON of p. */
static void check_text_round_trip(const ms_profile *p, json_t *j, int it)
{
    char *text = json_dumps(j, JSON_COMPACT);
    json_error_t je;
    json_t *back_j = json_loads(text, 0, &je);
    assert_non_null(back_j);
    ms_profile back;
    char err[256];
    if (ms_profile_from_json(back_j, &back, err, sizeof err)) fail_msg("round trip %d: %s", it, err);
    assert_same_profile(p, &back);
    json_t *again = ms_profile_to_json(&back);
    assert_true(json_equal(j, again));
    json_decref(again);
    ms_profile_free(&back);
    json_decref(back_j);
    free(text);
    json_decref(j);
}

static void test_round_trip(void **state)
{
    (void)state;
    for (int it = 0; it < 40; it++) {
        ms_profile *p = sample(1000 + (uint64_t)it, it % 2);
        json_t *j = ms_profile_to_json(p);
        assert_non_null(j);
        check_text_round_trip(p, j, it);
        drop(p);
    }
}

/* A program's profile (the bridge's): long module paths, no GPT shape, the
 * program fields, every row source and the optimizer transient survive a
 * round trip; the GPT shape may be left out in version 2 only. */
static void test_program_profile(void **state)
{
    (void)state;
    ms_profile *p = sample(77, 1);
    p->seq_len = p->d_model = p->n_head = p->vocab = 0;
    snprintf(p->model, sizeof p->model, "train_reference_lightning.py");
    snprintf(p->fingerprint, sizeof p->fingerprint, "fnv64:0123456789abcdef");
    snprintf(p->layer_list, sizeof p->layer_list, "model.transformers: ModuleList of %d identical ModuleList",
             p->n_layers - 2);
    snprintf(p->framework, sizeof p->framework, "torch 1.13.1 (cpu)");
    snprintf(p->accounting, sizeof p->accounting, "cpu-dispatcher");
    p->reserved_peak = 123456789;
    p->reserve_allocator = p->reserve / 3;      /* the record pass's library buffers, in the reserve */
    for (int i = 0; i < p->n_rows; i++) {
        ms_layer_row *r = &p->rows[i];
        snprintf(r->name, sizeof r->name, "model.encoder.very_long_module_name_%0200d.%d", 7, r->layer);
        r->source = i % MS_ROW_N;
        r->transient_opt = (uint64_t)(i + 1) << 20;
    }
    snprintf(p->oom.what, sizeof p->oom.what, "model.transformers.15.0.qkv (Linear)");
    p->oom.phase = MS_PH_VALIDATION;
    p->loss = (ms_loss_row){ .present = 1, .made_in = p->n_layers - 1, .outputs = 11, .held = 22,
                             .transient_fwd = 33, .transient_bwd = 44, .carry = 55, .carry_loss = 5 };
    p->grads_freed = MS_GRADS_FREED_BEFORE_BACKWARD;     /* Lightning's order */
    json_t *j = ms_profile_to_json(p);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "grads_freed_before")), "backward");
    ms_profile back;
    char err[256];
    if (ms_profile_from_json(j, &back, err, sizeof err)) fail_msg("program profile: %s", err);
    assert_same_profile(p, &back);
    assert_int_equal(back.grads_freed, MS_GRADS_FREED_BEFORE_BACKWARD);
    assert_string_equal(back.accounting, "cpu-dispatcher");
    ms_profile_free(&back);
    /* when: forward, backward or absent (forward); nothing else, and only when freed */
    json_object_set_new(j, "grads_freed_before", json_string("sometimes"));
    assert_int_equal(ms_profile_from_json(j, &back, err, sizeof err), -1);
    assert_non_null(strstr(err, "grads_freed_before"));
    json_object_set_new(j, "grads_freed_before", json_string("backward"));
    json_object_set_new(j, "grads_freed_each_step", json_false());
    assert_int_equal(ms_profile_from_json(j, &back, err, sizeof err), -1);
    json_object_set_new(j, "grads_freed_each_step", json_true());
    json_object_del(j, "grads_freed_before");
    assert_int_equal(ms_profile_from_json(j, &back, err, sizeof err), 0);
    assert_int_equal(back.grads_freed, MS_GRADS_FREED_BEFORE_FORWARD);
    ms_profile_free(&back);
    json_object_set_new(j, "grads_freed_before", json_string("backward"));
    /* no shape keys at all: fine in version 2 */
    json_t *m = json_object_get(j, "model");
    json_object_del(m, "seq_len");
    json_object_del(m, "vocab");
    assert_int_equal(ms_profile_from_json(j, &back, err, sizeof err), 0);
    assert_int_equal(back.vocab, 0);
    ms_profile_free(&back);
    /* ... but a version 1 document must have them, non-zero */
    json_object_set_new(j, "version", json_integer(1));
    assert_int_equal(ms_profile_from_json(j, &back, err, sizeof err), -1);
    assert_non_null(strstr(err, "model.seq_len"));
    json_object_set_new(m, "seq_len", json_integer(0));
    assert_int_equal(ms_profile_from_json(j, &back, err, sizeof err), -1);
    json_decref(j);
    drop(p);
}

static void test_files(void **state)
{
    (void)state;
    char path[] = "/tmp/ms_profile_json_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ms_profile *p = sample(7, 1);
    char err[256];
    assert_int_equal(ms_profile_save_json(path, p, err, sizeof err), 0);
    ms_profile back;
    assert_int_equal(ms_profile_load_json(path, &back, err, sizeof err), 0);
    assert_same_profile(p, &back);
    ms_profile_free(&back);
    FILE *f = fopen(path, "w");
    fputs("{\"fits\": true,\n  \"capacity_bytes\": 12,,}\n", f);
    fclose(f);
    assert_int_equal(ms_profile_load_json(path, &back, err, sizeof err), -1);
    assert_non_null(strstr(err, "line 2"));
    unlink(path);
    assert_int_equal(ms_profile_load_json(path, &back, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
    assert_int_equal(back.n_rows, 0); /* left empty: safe to free */
    ms_profile_free(&back);
    drop(p);
}

/* A program's profile with a record: text and back, equal storage for
 * storage (live to the end, copies, the largest bytes, positions up to the
 * last one below MS_REC_NEVER), and the same JSON again. */
static void test_record_round_trip(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 31);
    for (int it = 0; it < 12; it++) {
        ms_profile *p = sample(500 + (uint64_t)it, it % 2);
        p->record = pu_random_record(&r, p->n_layers, it == 0 ? 0 : 1 + pu_int(&r, 400));
        assert_non_null(p->record);
        if (it % 3 == 2) assert_int_equal(pu_hand_on(&r, p->record, 1 + pu_int(&r, 40)), 0);
        if (it == 1) {   /* the far end of the positions */
            ms_prog_record *x = p->record;
            x->t_end = MS_REC_NEVER - 1;
            x->t_from = x->t_end;
            x->s[x->n - 1].t_alloc = x->t_end - 1;
            x->s[x->n - 1].t_free = x->t_end;
        }
        json_t *j = ms_profile_to_json(p);
        assert_non_null(j);
        const json_t *rec = json_object_get(j, "record");
        assert_true(json_is_object(rec));
        assert_int_equal(json_array_size(json_object_get(rec, "storages")), p->record->n);
        for (int i = 0; i < p->record->n; i++) {   /* compact: [layer, category, bytes, t_alloc, t_free, copy_of] */
            const json_t *e = json_array_get(json_object_get(rec, "storages"), (size_t)i);
            const ms_rec_storage *st = &p->record->s[i];
            assert_int_equal(json_array_size(e), 6);
            assert_string_equal(json_string_value(json_array_get(e, 1)), ms_cat_name((ms_cat)st->cat));
            assert_int_equal(json_integer_value(json_array_get(e, 4)),
                             st->t_free == MS_REC_NEVER ? -1 : (json_int_t)st->t_free);
            assert_int_equal(json_integer_value(json_array_get(e, 5)), st->copy_of);
        }
        /* moments, compact: [layer, phase, t_begin, t_end]; none: no key */
        const json_t *ms = json_object_get(rec, "moments");
        if (p->record->n_moments == 0) assert_null(ms);
        else assert_int_equal(json_array_size(ms), p->record->n_moments);
        for (int i = 0; i < p->record->n_moments; i++) {
            const json_t *e = json_array_get(ms, (size_t)i);
            const ms_rec_moment *m = &p->record->m[i];
            assert_int_equal(json_array_size(e), 4);
            assert_int_equal(json_integer_value(json_array_get(e, 0)), m->layer);
            assert_string_equal(json_string_value(json_array_get(e, 1)), ms_phase_name((ms_phase)m->phase));
            assert_int_equal(json_integer_value(json_array_get(e, 2)), m->t_begin);
            assert_int_equal(json_integer_value(json_array_get(e, 3)), m->t_end);
        }
        /* the modules handed on: their paths in order; none: no key */
        const json_t *h = json_object_get(rec, "handed_on");
        if (p->record->n_handed_on == 0) assert_null(h);
        else assert_int_equal(json_array_size(h), p->record->n_handed_on);
        for (int i = 0; i < p->record->n_handed_on; i++)
            assert_string_equal(json_string_value(json_array_get(h, (size_t)i)), p->record->handed_on[i]);
        check_text_round_trip(p, j, 100 + it);
        drop(p);
    }
}

/* The random records hold moments of every kind the record pass makes:
 * outside any layer (-1), the loss outside the model (n_layers), of no
 * position, with gaps between them. */
static void test_record_moments_cover(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 31);
    int n = 0, outside = 0, loss = 0, empty = 0, gaps = 0, phases = 0;
    for (int it = 0; it < 12; it++) {
        ms_prog_record *x = pu_random_record(&r, 5, 1 + pu_int(&r, 400));
        assert_non_null(x);
        char err[256];
        if (ms_prog_record_validate(x, 5, err, sizeof err)) fail_msg("random record %d: %s", it, err);
        for (int i = 0; i < x->n_moments; i++) {
            const ms_rec_moment *m = &x->m[i];
            outside += m->layer == -1;
            loss += m->layer == 5;
            empty += m->t_begin == m->t_end;
            gaps += i > 0 && m->t_begin > x->m[i - 1].t_end;
            phases |= 1 << m->phase;
        }
        n += x->n_moments;
        ms_prog_record_free(x);
    }
    assert_true(n > 200 && outside > 0 && loss > 0 && empty > 0 && gaps > 0);
    assert_int_equal(phases, (1 << MS_PH_N) - 1);
}

/* The moments the record pass makes (bridge/record.c) are what the checks
 * take: one of the loss outside the model (layer n_layers, which the
 * bridge names so), several of no position (transitions with nothing
 * allocated between them), one outside any layer; the record passes the
 * planner's check and travels through the JSON whole. */
static void test_record_pass_moments(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "{\"ev\":\"hello\",\"pid\":1}",
        "{\"ev\":\"torch\",\"version\":\"1.13.0\",\"cuda\":false}",
        "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"h\",\"blocks\":[\"h.0\",\"h.1\"],"
        "\"fingerprint\":\"fnv64:00000000000000aa\",\"precision\":\"fp32\",\"device\":\"cpu\"}",
        "{\"ev\":\"a\",\"d\":0,\"k\":1,\"b\":100,\"c\":0,\"l\":0,\"p\":0}",
        "{\"ev\":\"placed\"}",
        "{\"ev\":\"w\",\"l\":0,\"p\":1}",
        "{\"ev\":\"a\",\"d\":0,\"k\":2,\"b\":50,\"c\":4,\"l\":0,\"p\":1}",
        "{\"ev\":\"w\",\"l\":1,\"p\":1}",
        "{\"ev\":\"w\",\"l\":2,\"p\":1}",
        "{\"ev\":\"a\",\"d\":2,\"k\":3,\"b\":60,\"c\":4,\"l\":2,\"p\":1}",
        "{\"ev\":\"w\",\"l\":4,\"p\":1}",          /* the loss, outside the model: layer n_layers */
        "{\"ev\":\"a\",\"d\":0,\"k\":4,\"b\":4,\"c\":5,\"l\":4,\"p\":1}",
        "{\"ev\":\"w\",\"l\":4,\"p\":2}",
        "{\"ev\":\"w\",\"l\":3,\"p\":2}",
        "{\"ev\":\"f\",\"d\":0,\"k\":4}",
        "{\"ev\":\"w\",\"l\":-1,\"p\":3}",
        "{\"ev\":\"step\",\"n\":1,\"accum\":1,\"micro_batch\":8}",
        "{\"ev\":\"done\",\"reason\":\"steps\"}",
    };
    msb_trace t;
    msb_trace_init(&t);
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        assert_int_equal(msb_trace_feed(&t, lines[i], strlen(lines[i]), 1), 0);
    ms_prog_record *r = NULL;
    char err[256];
    if (msb_build_record(&t, 4, &r, err, sizeof err)) fail_msg("build: %s", err);
    msb_trace_free(&t);
    static const ms_rec_moment want[] = {
        {0, MS_PH_FORWARD, 1, 2}, {1, MS_PH_FORWARD, 2, 2}, {2, MS_PH_FORWARD, 2, 3}, {4, MS_PH_FORWARD, 3, 4},
        {4, MS_PH_BACKWARD, 4, 4}, {3, MS_PH_BACKWARD, 4, 5}, {-1, MS_PH_OPTIMIZER, 5, 5},
    };
    assert_int_equal(r->t_end, 5);
    assert_int_equal(r->n_moments, (int)(sizeof want / sizeof want[0]));
    assert_memory_equal(r->m, want, sizeof want);
    if (ms_record_check(r, err, sizeof err)) fail_msg("the record pass's moments fail the check: %s", err);
    pu_rng g;
    pu_seed(&g, 4);
    int sizes[1] = {1};
    ms_profile *p = pu_random_profile(&g, 4, 1u, sizes, 1, 8);
    p->record = r;
    json_t *j = ms_profile_to_json(p);
    assert_non_null(j);
    check_text_round_trip(p, j, 200);
    drop(p);
}

/* No record: no "record" key, and none read back; null reads as none. */
static void test_no_record(void **state)
{
    (void)state;
    ms_profile *p = sample(8, 0);
    json_t *j = ms_profile_to_json(p);
    assert_null(json_object_get(j, "record"));
    ms_profile back;
    char err[256];
    assert_int_equal(ms_profile_from_json(j, &back, err, sizeof err), 0);
    assert_null(back.record);
    ms_profile_free(&back);
    json_object_set_new(j, "record", json_null());
    assert_int_equal(ms_profile_from_json(j, &back, err, sizeof err), 0);
    assert_null(back.record);
    ms_profile_free(&back);
    json_decref(j);
    drop(p);
}

/* Applies one edit to a copy of the valid document and expects a rejection
 * whose message contains `want`. */
typedef void (*edit_fn)(json_t *root);

static void expect_reject(const json_t *valid, edit_fn edit, const char *want)
{
    json_t *doc = json_deep_copy(valid);
    edit(doc);
    ms_profile p;
    char err[256] = "";
    int rc = ms_profile_from_json(doc, &p, err, sizeof err);
    json_decref(doc);
    if (rc == 0) {
        ms_profile_free(&p);
        fail_msg("accepted a document that should fail with '%s'", want);
    }
    if (!strstr(err, want)) fail_msg("message '%s' lacks '%s'", err, want);
    assert_int_equal(p.n_rows, 0);
    assert_null(p.rows);
}

static json_t *row(json_t *root, int i) { return json_array_get(json_object_get(root, "layers"), (size_t)i); }
static void e_no_fits(json_t *r) { json_object_del(r, "fits"); }
static void e_no_layers(json_t *r) { json_object_del(r, "layers"); }
static void e_no_model(json_t *r) { json_object_del(r, "model"); }
static void e_no_oom(json_t *r) { json_object_del(r, "oom"); }
static void e_no_nlayers(json_t *r) { json_object_del(json_object_get(r, "model"), "n_layers"); }
static void e_zero_batch(json_t *r) { json_object_set_new(json_object_get(r, "model"), "global_batch", json_integer(0)); }
static void e_row_no_act(json_t *r) { json_object_del(row(r, 2), "act"); }
static void e_row_no_fwd(json_t *r) { json_object_del(row(r, 1), "fwd_ms"); }
static void e_row_str_act(json_t *r) { json_object_set_new(row(r, 1), "act", json_string("big")); }
static void e_row_real_param(json_t *r) { json_object_set_new(row(r, 1), "param", json_real(1.5)); }
static void e_row_neg(json_t *r) { json_object_set_new(row(r, 0), "param", json_integer(-5)); }
static void e_row_huge(json_t *r) { json_object_set_new(row(r, 0), "grad", json_integer(1ll << 50)); }
static void e_row_neg_ms(json_t *r) { json_object_set_new(row(r, 0), "bwd_ms", json_real(-1.0)); }
static void e_row_prec(json_t *r) { json_object_set_new(row(r, 0), "precision", json_string("int8")); }
static void e_row_prec_case(json_t *r) { json_object_set_new(row(r, 0), "precision", json_string("FP32")); }
static void e_row_source(json_t *r) { json_object_set_new(row(r, 0), "source", json_string("partial")); }
static void e_row_mb(json_t *r) { json_object_set_new(row(r, 0), "micro_batch", json_integer(0)); }
static void e_row_index(json_t *r) { json_object_set_new(row(r, 0), "index", json_integer(999)); }
static void e_row_name(json_t *r)
{
    char name[MS_NAME_MAX + 8];
    memset(name, 'm', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    json_object_set_new(row(r, 0), "name", json_string(name));
}
static void e_row_not_obj(json_t *r) { json_array_set_new(json_object_get(r, "layers"), 1, json_integer(3)); }
static void e_missing_layer(json_t *r) { json_array_remove(json_object_get(r, "layers"), 1); }
static void e_dup_layer(json_t *r)
{
    json_t *ls = json_object_get(r, "layers");
    json_array_append_new(ls, json_deep_copy(json_array_get(ls, 0)));
}
static void e_empty_layers(json_t *r) { json_object_set_new(r, "layers", json_array()); }
static void e_fits_with_oom(json_t *r) { json_object_set_new(r, "fits", json_true()); }
static void e_oom_phase(json_t *r) { json_object_set_new(json_object_get(r, "oom"), "phase", json_string("sideways")); }
static void e_oom_cat(json_t *r) { json_object_set_new(json_object_get(json_object_get(r, "oom"), "live_bytes"), "foo", json_integer(1)); }
static void e_oom_layer(json_t *r) { json_object_set_new(json_object_get(r, "oom"), "layer", json_integer(500)); }
static void e_oom_by_layer(json_t *r)
{
    json_t *a = json_array();
    for (int i = 0; i < 600; i++) json_array_append_new(a, json_integer(i));
    json_object_set_new(json_object_get(r, "oom"), "live_by_layer", a);
}
static void e_oom_by_layer_neg(json_t *r)
{
    json_array_set_new(json_object_get(json_object_get(r, "oom"), "live_by_layer"), 0, json_integer(-1));
}
static void e_version(json_t *r) { json_object_set_new(r, "version", json_integer(MS_PROFILE_JSON_VERSION + 1)); }
static void e_device_type(json_t *r) { json_object_set_new(r, "device", json_integer(0)); }

/* Edits of a valid record: storages 0..5 of sample_with_record() */
static json_t *rec_of(json_t *root) { return json_object_get(root, "record"); }
static json_t *sto(json_t *root, int i) { return json_array_get(json_object_get(rec_of(root), "storages"), (size_t)i); }
static void set_sto(json_t *root, int i, int k, json_t *v) { json_array_set_new(sto(root, i), (size_t)k, v); }
static void r_not_obj(json_t *r) { json_object_set_new(r, "record", json_array()); }
static void r_no_storages(json_t *r) { json_object_del(rec_of(r), "storages"); }
static void r_storages_obj(json_t *r) { json_object_set_new(rec_of(r), "storages", json_object()); }
static void r_no_nlayers(json_t *r) { json_object_del(rec_of(r), "n_layers"); }
static void r_nlayers(json_t *r)
{
    json_t *n = json_object_get(json_object_get(r, "model"), "n_layers");
    json_object_set_new(rec_of(r), "n_layers", json_integer(json_integer_value(n) - 1));
}
static void r_tend_neg(json_t *r) { json_object_set_new(rec_of(r), "t_end", json_integer(-1)); }
static void r_tend_never(json_t *r) { json_object_set_new(rec_of(r), "t_end", json_integer(MS_REC_NEVER)); }
static void r_tfrom_str(json_t *r) { json_object_set_new(rec_of(r), "t_from", json_string("0")); }
static void r_tfrom_late(json_t *r) { json_object_set_new(rec_of(r), "t_from", json_integer(1000)); }
static void r_sto_obj(json_t *r) { json_array_set_new(json_object_get(rec_of(r), "storages"), 1, json_object()); }
static void r_sto_short(json_t *r) { json_array_remove(sto(r, 1), 5); }
static void r_sto_long(json_t *r) { json_array_append_new(sto(r, 1), json_integer(0)); }
static void r_layer_out(json_t *r)
{
    json_t *n = json_object_get(json_object_get(r, "model"), "n_layers");
    set_sto(r, 0, 0, json_integer(json_integer_value(n)));
}
static void r_layer_neg(json_t *r) { set_sto(r, 0, 0, json_integer(-1)); }
static void r_layer_real(json_t *r) { set_sto(r, 0, 0, json_real(1.0)); }
static void r_cat_name(json_t *r) { set_sto(r, 0, 1, json_string("weights")); }
static void r_cat_int(json_t *r) { set_sto(r, 0, 1, json_integer(2)); }
static void r_bytes_neg(json_t *r) { set_sto(r, 0, 2, json_integer(-4)); }
static void r_bytes_huge(json_t *r) { set_sto(r, 0, 2, json_integer((1ll << 48) + 1)); }
static void r_bytes_str(json_t *r) { set_sto(r, 0, 2, json_string("1 GiB")); }
static void r_alloc_back(json_t *r) { set_sto(r, 3, 3, json_integer(0)); }
static void r_alloc_end(json_t *r) { set_sto(r, 5, 3, json_integer(100)); }
static void r_alloc_never(json_t *r) { set_sto(r, 5, 3, json_integer(-1)); }
static void r_free_early(json_t *r) { set_sto(r, 2, 4, json_integer(20)); }
static void r_free_same(json_t *r) { set_sto(r, 2, 4, json_integer(30)); }
static void r_free_late(json_t *r) { set_sto(r, 2, 4, json_integer(101)); }
static void r_free_neg(json_t *r) { set_sto(r, 2, 4, json_integer(-2)); }
static void r_free_never(json_t *r) { set_sto(r, 2, 4, json_integer(MS_REC_NEVER)); }
static void r_copy_self(json_t *r) { set_sto(r, 4, 5, json_integer(4)); }
static void r_copy_later(json_t *r) { set_sto(r, 4, 5, json_integer(5)); }
static void r_copy_neg(json_t *r) { set_sto(r, 4, 5, json_integer(-2)); }
static void r_copy_null(json_t *r) { set_sto(r, 4, 5, json_null()); }
/* ... and of its moments 0..4 */
static json_t *mom(json_t *root, int i) { return json_array_get(json_object_get(rec_of(root), "moments"), (size_t)i); }
static void set_mom(json_t *root, int i, int k, json_t *v) { json_array_set_new(mom(root, i), (size_t)k, v); }
static void m_not_array(json_t *r) { json_object_set_new(rec_of(r), "moments", json_object()); }
static void m_null(json_t *r) { json_object_set_new(rec_of(r), "moments", json_null()); }
static void m_elem_obj(json_t *r) { json_array_set_new(json_object_get(rec_of(r), "moments"), 2, json_object()); }
static void m_short(json_t *r) { json_array_remove(mom(r, 1), 3); }
static void m_long(json_t *r) { json_array_append_new(mom(r, 1), json_integer(0)); }
static void m_layer_out(json_t *r) { set_mom(r, 1, 0, json_integer(4)); }
static void m_layer_neg(json_t *r) { set_mom(r, 1, 0, json_integer(-2)); }
static void m_layer_huge(json_t *r) { set_mom(r, 1, 0, json_integer(MS_MAX_LAYERS + 1)); }
static void m_layer_str(json_t *r) { set_mom(r, 1, 0, json_string("1")); }
static void m_phase_name(json_t *r) { set_mom(r, 1, 1, json_string("sideways")); }
static void m_phase_int(json_t *r) { set_mom(r, 1, 1, json_integer(1)); }
static void m_phase_case(json_t *r) { set_mom(r, 1, 1, json_string("Forward")); }
static void m_begin_real(json_t *r) { set_mom(r, 1, 2, json_real(10.0)); }
static void m_begin_str(json_t *r) { set_mom(r, 1, 2, json_string("10")); }
static void m_begin_neg(json_t *r) { set_mom(r, 1, 2, json_integer(-1)); }
static void m_end_null(json_t *r) { set_mom(r, 1, 3, json_null()); }
static void m_end_never(json_t *r) { set_mom(r, 4, 3, json_integer(MS_REC_NEVER)); }
static void m_end_beyond(json_t *r) { set_mom(r, 4, 3, json_integer(101)); }
static void m_backwards(json_t *r) { set_mom(r, 4, 2, json_integer(80)); set_mom(r, 4, 3, json_integer(70)); }
static void m_overlap(json_t *r) { set_mom(r, 3, 2, json_integer(15)); }
static void m_out_of_order(json_t *r)
{
    json_t *ms = json_object_get(rec_of(r), "moments");
    json_t *last = json_incref(json_array_get(ms, 4));
    json_array_remove(ms, 4);
    json_array_insert_new(ms, 0, last);
}
static void m_dup(json_t *r)
{
    json_t *ms = json_object_get(rec_of(r), "moments");
    json_array_append_new(ms, json_deep_copy(json_array_get(ms, 4)));
}

/* A profile with a small record, written out by hand:
 *  0 [0, param,  100, 10, -1, -1]     live to the end
 *  1 [1, act,    200, 20, 40, -1]
 *  2 [2, act,    300, 30, 60, -1]
 *  3 [1, act,    300, 30, 50,  2]     a copy of 2
 *  4 [0, grad,    50, 45, 90, -1]
 *  5 [2, transient, 7, 99, 100, -1]   ending at t_end
 * and its moments:
 *  0 [-1, init,       0,  10]         outside any layer
 *  1 [0,  forward,   10,  20]
 *  2 [1,  forward,   20,  20]         of no position
 *  3 [3,  backward,  25,  60]         the loss outside the model (layer n_layers), after a gap
 *  4 [2,  optimizer, 60, 100]         ending at t_end */
static ms_profile *sample_with_record(void)
{
    ms_profile *p = sample(42, 1);
    static const ms_rec_storage st[6] = {
        {0, MS_CAT_PARAM, 100, 10, MS_REC_NEVER, -1}, {1, MS_CAT_ACT, 200, 20, 40, -1},
        {2, MS_CAT_ACT, 300, 30, 60, -1},             {1, MS_CAT_ACT, 300, 30, 50, 2},
        {0, MS_CAT_GRAD, 50, 45, 90, -1},             {2, MS_CAT_TRANSIENT, 7, 99, 100, -1},
    };
    ms_prog_record *r = calloc(1, sizeof *r);
    r->s = malloc(sizeof st);
    memcpy(r->s, st, sizeof st);
    r->n = 6;
    r->n_layers = p->n_layers;
    r->t_from = 25;
    r->t_end = 100;
    static const ms_rec_moment mo[5] = {
        {-1, MS_PH_INIT, 0, 10}, {0, MS_PH_FORWARD, 10, 20}, {1, MS_PH_FORWARD, 20, 20},
        {3, MS_PH_BACKWARD, 25, 60}, {2, MS_PH_OPTIMIZER, 60, 100},
    };
    r->m = malloc(sizeof mo);
    memcpy(r->m, mo, sizeof mo);
    r->n_moments = 5;
    p->record = r;
    return p;
}

static void test_rejects_malformed_record(void **state)
{
    (void)state;
    ms_profile *p = sample_with_record();
    json_t *valid = ms_profile_to_json(p);
    assert_non_null(valid);
    struct { edit_fn f; const char *want; } cases[] = {
        {r_not_obj, "record: expected an object"},
        {r_no_storages, "record.storages: missing"},
        {r_storages_obj, "record.storages: expected an array"},
        {r_no_nlayers, "record.n_layers: missing"},
        {r_nlayers, "record.n_layers: 2, but the profile has 3 layers"},
        {r_tend_neg, "record.t_end"},
        {r_tend_never, "record.t_end"},
        {r_tfrom_str, "record.t_from: expected an integer"},
        {r_tfrom_late, "record.t_from: 1000 is after t_end 100"},
        {r_sto_obj, "record.storages[1]: expected [layer, category, bytes, t_alloc, t_free, copy_of]"},
        {r_sto_short, "record.storages[1]: expected ["},
        {r_sto_long, "record.storages[1]: expected ["},
        {r_layer_out, "record.storages[0].layer: 3 is outside 0..2"},
        {r_layer_neg, "record.storages[0].layer: expected an integer"},
        {r_layer_real, "record.storages[0].layer: expected an integer"},
        {r_cat_name, "record.storages[0].category: expected one of param|"},
        {r_cat_int, "record.storages[0].category"},
        {r_bytes_neg, "record.storages[0].bytes: expected an integer in 0..281474976710656"},
        {r_bytes_huge, "record.storages[0].bytes"},
        {r_bytes_str, "record.storages[0].bytes"},
        {r_alloc_back, "record.storages[3].t_alloc: 0 is before the previous storage's 30"},
        {r_alloc_end, "record.storages[5].t_alloc: 100 is not before t_end 100"},
        {r_alloc_never, "record.storages[5].t_alloc: expected an integer"},
        {r_free_early, "record.storages[2].t_free: 20 is outside 31..100 (-1: never freed)"},
        {r_free_same, "record.storages[2].t_free: 30 is outside"},
        {r_free_late, "record.storages[2].t_free: 101 is outside"},
        {r_free_neg, "record.storages[2].t_free: expected an integer in -1.."},
        {r_free_never, "record.storages[2].t_free: expected an integer"},
        {r_copy_self, "record.storages[4].copy_of: 4 is not -1 or an earlier storage"},
        {r_copy_later, "record.storages[4].copy_of: 5 is not"},
        {r_copy_neg, "record.storages[4].copy_of: expected an integer"},
        {r_copy_null, "record.storages[4].copy_of"},
        {m_not_array, "record.moments: expected an array"},
        {m_null, "record.moments: expected an array"},
        {m_elem_obj, "record.moments[2]: expected [layer, phase, t_begin, t_end]"},
        {m_short, "record.moments[1]: expected ["},
        {m_long, "record.moments[1]: expected ["},
        {m_layer_out, "record.moments[1].layer: 4 is outside -1..3"},
        {m_layer_neg, "record.moments[1].layer: expected an integer in -1..4096"},
        {m_layer_huge, "record.moments[1].layer: expected an integer"},
        {m_layer_str, "record.moments[1].layer: expected an integer"},
        {m_phase_name, "record.moments[1].phase: expected one of init|forward|backward|optimizer|validation"},
        {m_phase_int, "record.moments[1].phase"},
        {m_phase_case, "record.moments[1].phase"},
        {m_begin_real, "record.moments[1].t_begin: expected an integer"},
        {m_begin_str, "record.moments[1].t_begin: expected an integer"},
        {m_begin_neg, "record.moments[1].t_begin: expected an integer in 0..4294967294"},
        {m_end_null, "record.moments[1].t_end: expected an integer"},
        {m_end_never, "record.moments[4].t_end: expected an integer in 0..4294967294"},
        {m_end_beyond, "record.moments[4].t_end: 101 is beyond the record's t_end 100"},
        {m_backwards, "record.moments[4].t_begin: 80 is after its t_end 70"},
        {m_overlap, "record.moments[3].t_begin: 15 is before the previous moment's end 20"},
        {m_out_of_order, "record.moments[1].t_begin: 0 is before the previous moment's end 100"},
        {m_dup, "record.moments[5].t_begin: 60 is before the previous moment's end 100"},
    };
    assert_int_equal(p->n_layers, 3);   /* the messages above name it */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_reject(valid, cases[i].f, cases[i].want);
    /* the valid one reads, equal */
    ms_profile q;
    char err[256];
    assert_int_equal(ms_profile_from_json(valid, &q, err, sizeof err), 0);
    assert_same_profile(p, &q);
    ms_profile_free(&q);
    /* in memory: the same checks, through ms_profile_validate */
    assert_int_equal(ms_profile_validate(p, err, sizeof err), 0);
    p->record->s[3].copy_of = 3;
    assert_int_equal(ms_profile_validate(p, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.storages[3].copy_of"));
    p->record->s[3].copy_of = 2;
    p->record->n = 7;
    free(p->record->s);
    p->record->s = NULL;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "no list of them"));
    p->record->n = MS_PROFILE_MAX_REC_STORAGES + 1;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.storages:"));
    p->record->n = 0;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), 0);
    /* the moments in memory: the same checks (a phase JSON cannot name), their count bounded */
    p->record->m[2].phase = MS_PH_N;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.moments[2].phase: 5 is not a phase"));
    p->record->m[2].phase = -1;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), -1);
    p->record->m[2].phase = MS_PH_FORWARD;
    p->record->m[0].layer = -2;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.moments[0].layer: -2 is outside -1..3"));
    p->record->m[0].layer = -1;
    p->record->n_moments = MS_PROFILE_MAX_REC_MOMENTS + 1;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.moments: 16777217 moments"));
    p->record->n_moments = -1;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), -1);
    p->record->n_moments = 5;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), 0);
    free(p->record->m);
    p->record->m = NULL;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.moments: 5 moments (0..16777216) and no list of them"));
    p->record->n_moments = 0;
    assert_int_equal(ms_prog_record_validate(p->record, p->n_layers, err, sizeof err), 0);
    json_decref(valid);
    drop(p);
}

/* A record written before moments were kept (no "moments" key) reads with
 * none; an empty list is none too; and the hand-made record's moments
 * (outside any layer, of no position, the loss's layer n_layers, a gap)
 * read back as written. */
static void test_record_without_moments(void **state)
{
    (void)state;
    ms_profile *p = sample_with_record();
    json_t *j = ms_profile_to_json(p);
    assert_non_null(j);
    json_t *rec = json_object_get(j, "record");
    assert_int_equal(json_array_size(json_object_get(rec, "moments")), 5);
    char *text = json_dumps(json_object_get(rec, "moments"), JSON_COMPACT);
    assert_string_equal(text, "[[-1,\"init\",0,10],[0,\"forward\",10,20],[1,\"forward\",20,20],"
                              "[3,\"backward\",25,60],[2,\"optimizer\",60,100]]");
    free(text);
    ms_profile back;
    char err[256];
    if (ms_profile_from_json(j, &back, err, sizeof err)) fail_msg("with moments: %s", err);
    assert_same_profile(p, &back);
    ms_profile_free(&back);
    json_object_set_new(rec, "moments", json_array());
    if (ms_profile_from_json(j, &back, err, sizeof err)) fail_msg("empty moments: %s", err);
    assert_non_null(back.record);
    assert_int_equal(back.record->n_moments, 0);
    assert_int_equal(back.record->n, 6);
    ms_profile_free(&back);
    json_object_del(rec, "moments");
    if (ms_profile_from_json(j, &back, err, sizeof err)) fail_msg("no moments: %s", err);
    assert_int_equal(back.record->n_moments, 0);
    assert_null(back.record->m);
    json_t *again = ms_profile_to_json(&back);
    assert_null(json_object_get(json_object_get(again, "record"), "moments"));   /* none: no key */
    assert_true(json_equal(j, again));
    json_decref(again);
    ms_profile_free(&back);
    json_decref(j);
    drop(p);
}

/* Edits of the modules sample_handed_on() hands on */
static json_t *ho_of(json_t *root) { return json_object_get(rec_of(root), "handed_on"); }
static void h_not_array(json_t *r) { json_object_set_new(rec_of(r), "handed_on", json_string("model.layers.0")); }
static void h_null(json_t *r) { json_object_set_new(rec_of(r), "handed_on", json_null()); }
static void h_int(json_t *r) { json_array_set_new(ho_of(r), 1, json_integer(3)); }
static void h_empty(json_t *r) { json_array_set_new(ho_of(r), 2, json_string("")); }
static void h_dup(json_t *r) { json_array_append_new(ho_of(r), json_string("model.layers.0")); }
static void h_nul(json_t *r) { json_array_set_new(ho_of(r), 1, json_stringn("model\0x", 7)); }
static void h_utf8(json_t *r) { json_array_set_new(ho_of(r), 2, json_string_nocheck("model.\xc3(")); }
static void h_long(json_t *r)
{
    char name[MS_NAME_MAX + 1];
    memset(name, 'm', sizeof name - 1);
    name[MS_NAME_MAX] = '\0';   /* MS_NAME_MAX bytes: one too many */
    json_array_set_new(ho_of(r), 0, json_string(name));
}
static void h_many(json_t *r)
{
    json_t *a = json_array();
    for (int i = 0; i <= MS_REC_MAX_HANDED_ON; i++) {
        char name[32];
        snprintf(name, sizeof name, "m.%d", i);
        json_array_append_new(a, json_string(name));
    }
    json_object_set_new(rec_of(r), "handed_on", a);
}

/* sample_with_record() handing on three modules (one named beyond ASCII) */
static ms_profile *sample_handed_on(void)
{
    ms_profile *p = sample_with_record();
    static const char *const paths[] = { "model.layers.0", "model.layers.2", "model.bl\xc3\xb6" "ck.1" };
    ms_prog_record *r = p->record;
    r->handed_on = calloc(3, sizeof *r->handed_on);
    assert_non_null(r->handed_on);
    for (int i = 0; i < 3; i++) assert_non_null(r->handed_on[i] = strdup(paths[i]));
    r->n_handed_on = 3;
    return p;
}

/* The modules a record hands on travel as "handed_on", byte for byte, only
 * when there are any (a record that hands nothing on is written as
 * before, and one without the key reads as none); a list that is not one
 * of distinct, non-empty UTF-8 module paths of a path's length, at most
 * MS_REC_MAX_HANDED_ON, is refused with the entry named, from JSON and in
 * memory alike. */
static void test_record_handed_on(void **state)
{
    (void)state;
    ms_profile *p = sample_handed_on();
    json_t *valid = ms_profile_to_json(p);
    assert_non_null(valid);
    char *text = json_dumps(ho_of(valid), JSON_COMPACT);   /* the paths' bytes as they are */
    assert_string_equal(text, "[\"model.layers.0\",\"model.layers.2\",\"model.bl\xc3\xb6" "ck.1\"]");
    free(text);
    check_text_round_trip(p, json_incref(valid), 0);
    ms_profile q;
    char err[256];
    struct { edit_fn f; const char *want; } cases[] = {
        {h_not_array, "record.handed_on: expected an array of module paths"},
        {h_null, "record.handed_on: expected an array"},
        {h_int, "record.handed_on[1]: expected a module path (a string, no NUL byte)"},
        {h_empty, "record.handed_on[2]: empty"},
        {h_dup, "record.handed_on[3]: \"model.layers.0\" is in the list already"},
        {h_nul, "record.handed_on[1]: expected a module path"},
        {h_utf8, "record.handed_on[2]: not valid UTF-8"},
        {h_long, "record.handed_on[0]: longer than a module path may be (under 256 bytes)"},
        {h_many, "record.handed_on: 4097 modules is too many (at most 4096)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_reject(valid, cases[i].f, cases[i].want);
    /* none: no key, the same text as a record that never had the field */
    ms_str_list_free(p->record->handed_on, p->record->n_handed_on);
    p->record->handed_on = NULL;
    p->record->n_handed_on = 0;
    json_t *none = ms_profile_to_json(p);
    assert_null(ho_of(none));
    json_t *before = json_deep_copy(valid);
    json_object_del(rec_of(before), "handed_on");
    assert_true(json_equal(before, none));
    if (ms_profile_from_json(before, &q, err, sizeof err)) fail_msg("without the key: %s", err);
    assert_int_equal(q.record->n_handed_on, 0);
    assert_null(q.record->handed_on);
    ms_profile_free(&q);
    json_object_set_new(rec_of(before), "handed_on", json_array());   /* empty: none */
    if (ms_profile_from_json(before, &q, err, sizeof err)) fail_msg("an empty list: %s", err);
    assert_int_equal(q.record->n_handed_on, 0);
    ms_profile_free(&q);
    json_decref(before);
    json_decref(none);
    drop(p);

    /* in memory (the database's path): the same checks, and what JSON cannot hold */
    p = sample_handed_on();
    ms_prog_record *r = p->record;
    assert_int_equal(ms_profile_validate(p, err, sizeof err), 0);
    static const struct { const char *path, *want; } bad[] = {
        {"", "record.handed_on[1]: empty"},
        {"model.layers.0", "record.handed_on[1]: \"model.layers.0\" is in the list already"},
        {"model.\xc0\xae", "record.handed_on[1]: not valid UTF-8"},            /* overlong '.' */
        {"model.\xed\xa0\x80", "record.handed_on[1]: not valid UTF-8"},        /* a surrogate */
        {"model.\xf4\x90\x80\x80", "record.handed_on[1]: not valid UTF-8"},    /* past U+10FFFF */
        {"model.\xe6\xb3", "record.handed_on[1]: not valid UTF-8"},            /* cut short */
        {"model.\x1b[2J", NULL},   /* a control character is UTF-8: shown safely, not refused */
    };
    char *keep = r->handed_on[1];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r->handed_on[1] = (char *)bad[i].path;
        int rc = ms_prog_record_validate(r, p->n_layers, err, sizeof err);
        if (!bad[i].want) {
            assert_int_equal(rc, 0);
            continue;
        }
        assert_int_equal(rc, -1);
        if (!strstr(err, bad[i].want)) fail_msg("message '%s' lacks '%s'", err, bad[i].want);
    }
    /* a duplicate named in the message is shown, never raw */
    char *keep2 = r->handed_on[2];
    r->handed_on[1] = (char *)"\x1b]0;pwned\x07";
    r->handed_on[2] = (char *)"\x1b]0;pwned\x07";
    assert_int_equal(ms_prog_record_validate(r, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.handed_on[2]: \"\\x1b]0;pwned\\x07\""));
    assert_null(strchr(err, '\x1b'));
    r->handed_on[2] = keep2;
    r->handed_on[1] = NULL;
    assert_int_equal(ms_prog_record_validate(r, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.handed_on[1]: missing"));
    r->handed_on[1] = keep;
    assert_int_equal(ms_prog_record_validate(r, p->n_layers, err, sizeof err), 0);
    r->n_handed_on = MS_REC_MAX_HANDED_ON + 1;
    assert_int_equal(ms_prog_record_validate(r, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.handed_on: 4097 modules (0..4096)"));
    r->n_handed_on = -1;
    assert_int_equal(ms_prog_record_validate(r, p->n_layers, err, sizeof err), -1);
    r->n_handed_on = 3;
    char **list = r->handed_on;
    r->handed_on = NULL;
    assert_int_equal(ms_prog_record_validate(r, p->n_layers, err, sizeof err), -1);
    assert_non_null(strstr(err, "record.handed_on: 3 modules (0..4096) and no list of them"));
    r->handed_on = list;
    json_decref(valid);
    drop(p);
}

/* The most a record hands on (MS_REC_MAX_HANDED_ON, each of a path's
 * greatest length) round-trips and validates quickly; one more is refused. */
static void test_record_handed_on_most(void **state)
{
    (void)state;
    ms_profile *p = sample_with_record();
    ms_prog_record *r = p->record;
    r->handed_on = calloc(MS_REC_MAX_HANDED_ON, sizeof *r->handed_on);
    assert_non_null(r->handed_on);
    for (int i = 0; i < MS_REC_MAX_HANDED_ON; i++, r->n_handed_on++) {
        char path[MS_NAME_MAX];
        memset(path, 'a' + i % 26, sizeof path - 1);
        path[sizeof path - 1] = '\0';
        for (int k = 0; k < 4; k++) path[k] = (char)('A' + ((i >> (4 * k)) & 15));   /* the index keeps them apart */
        assert_non_null(r->handed_on[i] = strdup(path));
    }
    json_t *j = ms_profile_to_json(p);
    assert_non_null(j);
    check_text_round_trip(p, j, 0);
    drop(p);
}

static void test_rejects_malformed(void **state)
{
    (void)state;
    ms_profile *p = sample(42, 1);
    json_t *valid = ms_profile_to_json(p);
    struct { edit_fn f; const char *want; } cases[] = {
        {e_no_fits, "fits: missing"},
        {e_no_layers, "layers: missing"},
        {e_no_model, "model: missing"},
        {e_no_oom, "oom: missing"},
        {e_no_nlayers, "model.n_layers: missing"},
        {e_zero_batch, "model.global_batch"},
        {e_row_no_act, "layers[2].act: missing"},
        {e_row_no_fwd, "layers[1].fwd_ms: missing"},
        {e_row_str_act, "layers[1].act: expected an integer"},
        {e_row_real_param, "layers[1].param: expected an integer"},
        {e_row_neg, "layers[0].param: negative bytes"},
        {e_row_huge, "layers[0].grad"},
        {e_row_neg_ms, "layers[0].bwd_ms"},
        {e_row_prec, "not one of fp32|bf16|fp16"},
        {e_row_prec_case, "layers[0].precision"},
        {e_row_source, "layers[0].source"},
        {e_row_mb, "layers[0].micro_batch"},
        {e_row_index, "layers[0].index"},
        {e_row_name, "layers[0].name: longer than 255"},
        {e_row_not_obj, "layers[1]: expected an object"},
        {e_missing_layer, "is missing for precision"},
        {e_dup_layer, "appears twice"},
        {e_empty_layers, "no rows"},
        {e_fits_with_oom, "fits is true"},
        {e_oom_phase, "oom.phase"},
        {e_oom_cat, "not a memory category"},
        {e_oom_layer, "oom.layer"},
        {e_oom_by_layer, "oom.live_by_layer"},
        {e_oom_by_layer_neg, "oom.live_by_layer[0]"},
        {e_version, "version"},
        {e_device_type, "device: expected a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_reject(valid, cases[i].f, cases[i].want);

    /* not an object at all */
    ms_profile q;
    char err[128];
    json_t *arr = json_array();
    assert_int_equal(ms_profile_from_json(arr, &q, err, sizeof err), -1);
    assert_int_equal(ms_profile_from_json(NULL, &q, err, sizeof err), -1);
    json_decref(arr);
    /* the version and oom capacity are optional */
    json_t *doc = json_deep_copy(valid);
    json_object_del(doc, "version");
    json_object_del(json_object_get(doc, "oom"), "capacity_bytes");
    assert_int_equal(ms_profile_from_json(doc, &q, err, sizeof err), 0);
    assert_int_equal(q.oom.capacity, q.capacity);
    ms_profile_free(&q);
    json_decref(doc);
    json_decref(valid);
    drop(p);
}

/* In-memory profiles (the database path) get the same checks. */
static void test_validate_in_memory(void **state)
{
    (void)state;
    ms_profile *p = sample(5, 0);
    char err[200];
    assert_int_equal(ms_profile_validate(p, err, sizeof err), 0);
    p->rows[0].act = MS_PROFILE_MAX_ROW_BYTES + 1;
    assert_int_equal(ms_profile_validate(p, err, sizeof err), -1);
    assert_non_null(strstr(err, "layers[0].act"));
    p->rows[0].act = 1;
    p->rows[0].fwd_ms = NAN;
    assert_int_equal(ms_profile_validate(p, err, sizeof err), -1);
    p->rows[0].fwd_ms = 1;
    p->rows[1].precision = 7;
    assert_int_equal(ms_profile_validate(p, err, sizeof err), -1);
    p->rows[1].precision = p->rows[0].precision;
    p->n_layers = 0;
    assert_int_equal(ms_profile_validate(p, err, sizeof err), -1);
    drop(p);
}

static const json_t *pick_any(json_t *root, pu_rng *r, json_t **parent, const char **key)
{
    /* a random object among root, model, oom, oom.live_bytes, some layer row */
    json_t *objs[5] = {root, json_object_get(root, "model"), json_object_get(root, "oom"), NULL,
                       row(root, pu_int(r, (int)json_array_size(json_object_get(root, "layers"))))};
    if (json_is_object(objs[2])) objs[3] = json_object_get(objs[2], "live_bytes");
    json_t *o = objs[pu_int(r, 5)];
    if (!json_is_object(o) || json_object_size(o) == 0) return NULL;
    int k = pu_int(r, (int)json_object_size(o));
    void *it = json_object_iter(o);
    while (k-- > 0) it = json_object_iter_next(o, it);
    *parent = o;
    *key = json_object_iter_key(it);
    return json_object_iter_value(it);
}

static json_t *random_value(pu_rng *r)
{
    switch (pu_int(r, 10)) {
    case 0: return json_null();
    case 1: return json_true();
    case 2: return json_string("x");
    case 3: return json_integer(-1);
    case 4: return json_integer(0);
    case 5: return json_real(1e300);
    case 6: return json_integer(INT64_MAX);
    case 7: return json_array();
    case 8: return json_object();
    default: return json_integer((json_int_t)(pu_next(r) >> 40));
    }
}

static void check_outcome(json_t *doc, int *accepted)
{
    ms_profile q;
    char err[256];
    if (ms_profile_from_json(doc, &q, err, sizeof err) == 0) {
        (*accepted)++;
        assert_int_equal(ms_profile_validate(&q, err, sizeof err), 0);
        json_t *again = ms_profile_to_json(&q);
        assert_non_null(again);
        json_decref(again);
    } else {
        assert_true(strlen(err) > 0);
        assert_null(q.rows);
    }
    ms_profile_free(&q);
}

/* Random edits of a valid document: structural (a field deleted or replaced
 * by a value of another type) and textual (bytes changed). Nothing crashes;
 * anything accepted is a valid profile. */
static void test_fuzz(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 2718);
    ms_profile *p = sample(11, 1);
    json_t *valid = ms_profile_to_json(p);
    int accepted = 0, rejected = 0;
    for (int it = 0; it < 1500; it++) {
        json_t *doc = json_deep_copy(valid);
        int edits = 1 + pu_int(&r, 3);
        for (int e = 0; e < edits; e++) {
            json_t *parent;
            const char *key;
            if (!pick_any(doc, &r, &parent, &key)) continue;
            char k[64];
            snprintf(k, sizeof k, "%s", key);
            if (pu_int(&r, 3) == 0) json_object_del(parent, k);
            else json_object_set_new(parent, k, random_value(&r));
        }
        int before = accepted;
        check_outcome(doc, &accepted);
        rejected += accepted == before;
        json_decref(doc);
    }
    assert_true(rejected > 1000);

    char *text = json_dumps(valid, JSON_COMPACT);
    size_t len = strlen(text);
    static const char alphabet[] = "{}[]\",:-0123456789.eE aznul\\";
    int parsed = 0;
    for (int it = 0; it < 3000; it++) {
        char *m = strdup(text);
        int edits = 1 + pu_int(&r, 4);
        for (int e = 0; e < edits; e++) m[pu_int(&r, (int)len)] = alphabet[pu_int(&r, (int)sizeof alphabet - 1)];
        json_error_t je;
        json_t *doc = json_loads(m, 0, &je);
        if (doc) {
            parsed++;
            check_outcome(doc, &accepted);
            json_decref(doc);
        }
        free(m);
    }
    assert_true(parsed > 100); /* the mutations reached the validator, not only the JSON parser */
    free(text);
    json_decref(valid);
    drop(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_program_profile),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_rejects_malformed),
        cmocka_unit_test(test_record_round_trip),
        cmocka_unit_test(test_no_record),
        cmocka_unit_test(test_rejects_malformed_record),
        cmocka_unit_test(test_record_moments_cover),
        cmocka_unit_test(test_record_pass_moments),
        cmocka_unit_test(test_record_without_moments),
        cmocka_unit_test(test_record_handed_on),
        cmocka_unit_test(test_record_handed_on_most),
        cmocka_unit_test(test_validate_in_memory),
        cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
