/* test_planner_json.c — the plan JSON: plans found on random profiles round
 * trip through the parser field for field; malformed plans are rejected with
 * a message naming the field; random mutations never crash the parser; the
 * table and the reasoning say what they should. */
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

#include "planner/explain.h"
#include "vocab/plan_json.h"
#include "planner/planner.h"
#include "tests/common/planner_util.h"

/* A plan found for a random profile on random devices (retries until one fits). */
static ms_plan found_plan(pu_rng *r, ms_profile **prof_out)
{
    for (;;) {
        int sizes[2] = {1, 2};
        ms_profile *p = pu_random_profile(r, 4 + pu_int(r, 20), 1u + (unsigned)pu_int(r, 7), sizes, 2, 8);
        p->capacity = 1ull << 30;
        if (pu_int(r, 2)) {
            p->oom.happened = 1;
            p->oom.layer = pu_int(r, p->n_layers);
            snprintf(p->oom.layer_name, sizeof p->oom.layer_name, "%s", p->rows[p->oom.layer * (p->n_rows / p->n_layers)].name);
            p->oom.phase = MS_PH_BACKWARD;
            p->oom.category = MS_CAT_ACT;
            p->oom.requested = 123456789;
            p->oom.live_by_cat[MS_CAT_ACT] = 900ull << 20;
            p->oom.live_by_cat[MS_CAT_PARAM] = 100ull << 20;
            snprintf(p->oom.what, sizeof p->oom.what, "attn_scores");
        } else {
            p->fits = 1;
            p->peak = 700ull << 20;
        }
        uint64_t scale = pu_one_device_bytes(p);
        int nd = 1 + pu_int(r, 6);
        ms_plan_device devs[8];
        for (int d = 0; d < nd; d++) {
            devs[d].capacity = (uint64_t)((double)scale * (0.1 + 0.6 * pu_uniform(r)));
            snprintf(devs[d].name, sizeof devs[d].name, "cuda:%d", d);
        }
        ms_plan_opts o;
        ms_plan_opts_default(&o);
        ms_plan pl;
        char err[256];
        int rc = ms_plan_search(p, devs, nd, &o, &pl, err, sizeof err);
        assert_int_not_equal(rc, MS_PLAN_ERROR);
        if (rc == MS_PLAN_OK) {
            pl.profile_run = pu_int(r, 2) ? 1 + pu_int(r, 100) : 0;
            if (pu_int(r, 2)) snprintf(pl.profile_file, sizeof pl.profile_file, "runs/profile-%d.json", pu_int(r, 9));
            assert_int_equal(ms_plan_explain(p, &pl), 0);
            *prof_out = p;
            return pl;
        }
        ms_profile_free(p);
        free(p);
    }
}

static void assert_same_plan(const ms_plan *a, const ms_plan *b)
{
    assert_int_equal(a->version, b->version);
    assert_string_equal(a->model, b->model);
    assert_int_equal(a->n_layers, b->n_layers);
    assert_int_equal(a->seq_len, b->seq_len);
    assert_int_equal(a->d_model, b->d_model);
    assert_int_equal(a->n_head, b->n_head);
    assert_int_equal(a->vocab, b->vocab);
    assert_int_equal(a->n_devices, b->n_devices);
    for (int i = 0; i < a->n_devices; i++) {
        assert_string_equal(a->devices[i].name, b->devices[i].name);
        assert_int_equal(a->devices[i].capacity, b->devices[i].capacity);
    }
    assert_int_equal(a->precision, b->precision);
    assert_int_equal(a->schedule, b->schedule);
    assert_int_equal(a->micro_batch, b->micro_batch);
    assert_int_equal(a->n_micro, b->n_micro);
    assert_int_equal(a->global_batch, b->global_batch);
    assert_memory_equal(&a->headroom, &b->headroom, sizeof(double));
    assert_memory_equal(&a->link_gbps, &b->link_gbps, sizeof(double));
    assert_memory_equal(&a->step_ms, &b->step_ms, sizeof(double));
    assert_int_equal(a->n_stages, b->n_stages);
    for (int s = 0; s < a->n_stages; s++) {
        const ms_plan_stage *x = &a->stages[s], *y = &b->stages[s];
        assert_int_equal(x->device, y->device);
        assert_int_equal(x->first, y->first);
        assert_int_equal(x->last, y->last);
        assert_int_equal(x->recompute, y->recompute);
        assert_memory_equal(x->bytes, y->bytes, sizeof x->bytes);
        assert_int_equal(x->peak, y->peak);
        assert_memory_equal(&x->fwd_ms, &y->fwd_ms, sizeof(double));
        assert_memory_equal(&x->bwd_ms, &y->bwd_ms, sizeof(double));
        assert_memory_equal(&x->comm_ms, &y->comm_ms, sizeof(double));
        assert_memory_equal(&x->opt_ms, &y->opt_ms, sizeof(double));
    }
    assert_int_equal(a->profile_run, b->profile_run);
    assert_string_equal(a->profile_file, b->profile_file);
    if (a->reasoning) assert_string_equal(a->reasoning, b->reasoning);
    else assert_null(b->reasoning);
    /* a program's block */
    assert_string_equal(a->program, b->program);
    assert_string_equal(a->fingerprint, b->fingerprint);
    assert_int_equal(a->layer_names != NULL, b->layer_names != NULL);
    for (int l = 0; a->layer_names && l < a->n_layers; l++) assert_string_equal(a->layer_names[l], b->layer_names[l]);
    assert_int_equal(a->reserve_allocator, b->reserve_allocator);
    assert_int_equal(a->n_handed_on, b->n_handed_on);
    assert_int_equal(a->handed_on != NULL, b->handed_on != NULL);
    for (int i = 0; i < a->n_handed_on; i++) assert_string_equal(a->handed_on[i], b->handed_on[i]);
}

static void test_round_trip(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 4242);
    for (int it = 0; it < 30; it++) {
        ms_profile *prof;
        ms_plan pl = found_plan(&r, &prof);
        char *text = ms_plan_to_string(&pl);
        assert_non_null(text);
        json_error_t je;
        json_t *j = json_loads(text, 0, &je);
        assert_non_null(j);
        ms_plan back;
        char err[256];
        if (ms_plan_from_json(j, &back, err, sizeof err)) fail_msg("round trip %d: %s\n%s", it, err, text);
        assert_same_plan(&pl, &back);
        char *again = ms_plan_to_string(&back);
        assert_string_equal(text, again);
        free(again);
        ms_plan_free(&back);
        json_decref(j);
        free(text);
        ms_plan_free(&pl);
        ms_profile_free(prof);
        free(prof);
    }
}

static void test_files(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 9);
    ms_profile *prof;
    ms_plan pl = found_plan(&r, &prof);
    char path[] = "/tmp/ms_plan_json_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[256];
    assert_int_equal(ms_plan_save_json(path, &pl, err, sizeof err), 0);
    ms_plan back;
    assert_int_equal(ms_plan_load_json(path, &back, err, sizeof err), 0);
    assert_same_plan(&pl, &back);
    ms_plan_free(&back);
    unlink(path);
    assert_int_equal(ms_plan_load_json(path, &back, err, sizeof err), -1);
    assert_null(back.stages);
    ms_plan_free(&pl);
    ms_profile_free(prof);
    free(prof);
}

/* pl made a program's plan: its name, fingerprint, a module path a layer
 * and n_handed_on of them handed on (the last beyond ASCII). */
static void make_program_plan(ms_plan *pl, int n_handed_on)
{
    snprintf(pl->program, sizeof pl->program, "train.py");
    snprintf(pl->fingerprint, sizeof pl->fingerprint, "fnv64:0123456789abcdef");
    pl->layer_names = calloc((size_t)pl->n_layers, sizeof *pl->layer_names);
    assert_non_null(pl->layer_names);
    for (int l = 0; l < pl->n_layers; l++) {
        char name[32];
        snprintf(name, sizeof name, "model.layers.%d", l);
        assert_non_null(pl->layer_names[l] = strdup(name));
    }
    pl->reserve_allocator = n_handed_on > 0 ? 66u << 20 : 0;    /* a program's library buffers, or none */
    if (n_handed_on <= 0) return;
    pl->handed_on = calloc((size_t)n_handed_on, sizeof *pl->handed_on);
    assert_non_null(pl->handed_on);
    for (int i = 0; i < n_handed_on; i++, pl->n_handed_on++) {
        char name[48];
        snprintf(name, sizeof name, i == n_handed_on - 1 ? "model.\xce\xb1\xce\xb2.%d" : "model.layers.%d", i);
        assert_non_null(pl->handed_on[i] = strdup(name));
    }
}

/* p through compact text and back: equal field for field, and the same text again. */
static void check_plan_text_round_trip(const ms_plan *p)
{
    char *text = ms_plan_to_string(p);
    assert_non_null(text);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    assert_non_null(j);
    ms_plan back;
    char err[256];
    if (ms_plan_from_json(j, &back, err, sizeof err)) fail_msg("round trip: %s\n%s", err, text);
    assert_same_plan(p, &back);
    char *again = ms_plan_to_string(&back);
    assert_string_equal(text, again);
    free(again);
    ms_plan_free(&back);
    json_decref(j);
    free(text);
}

typedef void (*edit_fn)(json_t *root);

/* valid, edited by f, must be refused with a message holding want; back is
 * what the reader left (its lists for the caller to check are empty). */
static void refused(const json_t *valid, edit_fn f, const char *want, ms_plan *back)
{
    json_t *doc = json_deep_copy(valid);
    f(doc);
    char err[256] = "";
    int rc = ms_plan_from_json(doc, back, err, sizeof err);
    json_decref(doc);
    if (rc == 0) {
        ms_plan_free(back);
        fail_msg("accepted a plan that should fail with '%s'", want);
    }
    if (!strstr(err, want)) fail_msg("message '%s' lacks '%s'", err, want);
}
static json_t *stage(json_t *r, int i) { return json_array_get(json_object_get(r, "stages"), (size_t)i); }
/* edits of a program plan's handed_on (make_program_plan(pl, 3)) */
static json_t *ho(json_t *r) { return json_object_get(json_object_get(r, "program"), "handed_on"); }
static void h_not_array(json_t *r) { json_object_set_new(json_object_get(r, "program"), "handed_on", json_object()); }
static void h_int(json_t *r) { json_array_set_new(ho(r), 0, json_integer(1)); }
static void h_empty(json_t *r) { json_array_set_new(ho(r), 1, json_string("")); }
static void h_dup(json_t *r) { json_array_set_new(ho(r), 2, json_string("model.layers.0")); }
static void h_nul(json_t *r) { json_array_set_new(ho(r), 1, json_stringn("a\0b", 3)); }
static void h_utf8(json_t *r) { json_array_set_new(ho(r), 1, json_string_nocheck("model.\xff")); }
static void h_long(json_t *r)
{
    char name[MS_NAME_MAX + 1];
    memset(name, 'x', sizeof name - 1);
    name[MS_NAME_MAX] = '\0';
    json_array_set_new(ho(r), 2, json_string(name));
}
static void h_many(json_t *r)
{
    json_t *a = json_array();
    for (int i = 0; i <= MS_REC_MAX_HANDED_ON; i++) json_array_append_new(a, json_sprintf("m.%d", i));
    json_object_set_new(json_object_get(r, "program"), "handed_on", a);
}

/* A program's plan carries the modules its rerun hands on in its program
 * block ("handed_on"), byte for byte, only when there are any (a plan that
 * hands nothing on is written as before, and one without the key reads as
 * none); a list that is not one of distinct, non-empty UTF-8 module paths
 * of a path's length, at most MS_REC_MAX_HANDED_ON, is refused with the
 * entry named. */
static void test_program_handed_on(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 77);
    ms_profile *prof;
    ms_plan pl = found_plan(&r, &prof);
    make_program_plan(&pl, 3);
    check_plan_text_round_trip(&pl);
    json_t *valid = ms_plan_to_json(&pl);
    char *text = json_dumps(ho(valid), JSON_COMPACT);
    assert_string_equal(text, "[\"model.layers.0\",\"model.layers.1\",\"model.\xce\xb1\xce\xb2.2\"]");
    free(text);
    struct { edit_fn f; const char *want; } cases[] = {
        {h_not_array, "program.handed_on: expected an array of module paths"},
        {h_int, "program.handed_on[0]: expected a module path (a string, no NUL byte)"},
        {h_empty, "program.handed_on[1]: empty"},
        {h_dup, "program.handed_on[2]: \"model.layers.0\" is in the list already"},
        {h_nul, "program.handed_on[1]: expected a module path"},
        {h_utf8, "program.handed_on[1]: not valid UTF-8"},
        {h_long, "program.handed_on[2]: longer than a module path may be"},
        {h_many, "program.handed_on: 4097 modules is too many (at most 4096)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ms_plan back;
        refused(valid, cases[i].f, cases[i].want, &back);
        assert_null(back.handed_on);
        assert_int_equal(back.n_handed_on, 0);
    }
    /* none: no key; the text of a plan that never had the field */
    ms_str_list_free(pl.handed_on, pl.n_handed_on);
    pl.handed_on = NULL;
    pl.n_handed_on = 0;
    json_t *none = ms_plan_to_json(&pl);
    assert_null(ho(none));
    json_object_del(json_object_get(valid, "program"), "handed_on");
    assert_true(json_equal(valid, none));
    check_plan_text_round_trip(&pl);
    json_decref(none);
    json_decref(valid);
    ms_plan_free(&pl);
    ms_profile_free(prof);
    free(prof);
}

/* The most a plan hands on, each of a path's greatest length: round trip. */
static void test_program_handed_on_most(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 78);
    ms_profile *prof;
    ms_plan pl = found_plan(&r, &prof);
    make_program_plan(&pl, 0);
    pl.handed_on = calloc(MS_REC_MAX_HANDED_ON, sizeof *pl.handed_on);
    assert_non_null(pl.handed_on);
    for (int i = 0; i < MS_REC_MAX_HANDED_ON; i++, pl.n_handed_on++) {
        char name[MS_NAME_MAX];
        int k = snprintf(name, sizeof name, "m.%d.", i);
        memset(name + k, 'z', sizeof name - 1 - (size_t)k);
        name[sizeof name - 1] = '\0';
        assert_non_null(pl.handed_on[i] = strdup(name));
    }
    check_plan_text_round_trip(&pl);
    ms_plan_free(&pl);
    ms_profile_free(prof);
    free(prof);
}
static void e_version(json_t *r) { json_object_set_new(r, "version", json_integer(9)); }
static void e_no_stages(json_t *r) { json_object_del(r, "stages"); }
static void e_no_devices(json_t *r) { json_object_del(r, "devices"); }
static void e_no_reasoning(json_t *r) { json_object_del(r, "reasoning"); }
static void e_schedule(json_t *r) { json_object_set_new(r, "schedule", json_string("zigzag")); }
static void e_precision(json_t *r) { json_object_set_new(r, "precision", json_string("fp8")); }
static void e_batch(json_t *r) { json_object_set_new(r, "global_batch", json_integer(7)); }
static void e_headroom(json_t *r) { json_object_set_new(r, "headroom", json_real(1.5)); }
static void e_dev_index(json_t *r) { json_object_set_new(json_array_get(json_object_get(r, "devices"), 0), "index", json_integer(5)); }
static void e_stage_device(json_t *r) { json_object_set_new(stage(r, 0), "device", json_integer(99)); }
static void e_stage_layers(json_t *r) { json_object_set_new(stage(r, 0), "layers", json_pack("[i]", 0)); }
static void e_stage_start(json_t *r) { json_object_set_new(stage(r, 0), "layers", json_pack("[ii]", 1, 1)); }
static void e_stage_end(json_t *r)
{
    json_t *st = json_object_get(r, "stages");
    json_t *last = json_array_get(st, json_array_size(st) - 1);
    json_t *ly = json_object_get(last, "layers");
    json_array_set_new(ly, 1, json_integer(json_integer_value(json_array_get(ly, 1)) - 1));
}
static void e_stage_peak(json_t *r)
{
    json_t *s = stage(r, 0);
    json_object_set_new(s, "predicted_peak_bytes", json_integer(json_integer_value(json_object_get(s, "predicted_peak_bytes")) + 1));
}
static void e_stage_bytes(json_t *r) { json_object_del(json_object_get(stage(r, 0), "bytes"), "comm"); }
static void e_stage_neg(json_t *r) { json_object_set_new(json_object_get(stage(r, 0), "bytes"), "act", json_integer(-1)); }
static void e_stage_rc(json_t *r) { json_object_set_new(stage(r, 0), "recompute", json_integer(1)); }
static void e_profile_run(json_t *r) { json_object_set_new(json_object_get(r, "profile"), "run_id", json_string("x")); }
static void e_reasoning(json_t *r) { json_object_set_new(r, "reasoning", json_integer(3)); }

static void test_rejects_malformed(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 31);
    ms_profile *prof;
    ms_plan pl;
    do { /* a plan with at least two stages, so that stage edits can break the chain */
        pl = found_plan(&r, &prof);
        if (pl.n_stages >= 2) break;
        ms_plan_free(&pl);
        ms_profile_free(prof);
        free(prof);
    } while (1);
    json_t *valid = ms_plan_to_json(&pl);
    struct { edit_fn f; const char *want; } cases[] = {
        {e_version, "plan.version"},
        {e_no_stages, "stages: missing"},
        {e_no_devices, "devices: missing"},
        {e_no_reasoning, "reasoning: missing"},
        {e_schedule, "plan.schedule"},
        {e_precision, "plan.precision"},
        {e_batch, "is not global_batch"},
        {e_headroom, "plan.headroom"},
        {e_dev_index, "devices[0].index"},
        {e_stage_device, "stages[0].device"},
        {e_stage_layers, "stages[0].layers: expected [first, last]"},
        {e_stage_start, "stages[0].layers: starts at 1"},
        {e_stage_end, "stages: end at layer"},
        {e_stage_peak, "not the sum of its bytes"},
        {e_stage_bytes, "stages[0].bytes.comm: missing"},
        {e_stage_neg, "stages[0].bytes.act: negative"},
        {e_stage_rc, "stages[0].recompute"},
        {e_profile_run, "profile.run_id"},
        {e_reasoning, "plan.reasoning"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ms_plan back;
        refused(valid, cases[i].f, cases[i].want, &back);
        assert_null(back.stages);
        assert_null(back.devices);
    }
    /* two stages on one device */
    json_t *doc = json_deep_copy(valid);
    json_object_set(stage(doc, 1), "device", json_object_get(stage(doc, 0), "device"));
    ms_plan back;
    char err[256];
    assert_int_equal(ms_plan_from_json(doc, &back, err, sizeof err), -1);
    assert_non_null(strstr(err, "already holds a stage"));
    json_decref(doc);

    /* mutated text never crashes; anything accepted re-serialises */
    char *text = json_dumps(valid, JSON_COMPACT);
    size_t len = strlen(text);
    static const char alphabet[] = "{}[]\",:-0123456789.e tfaln";
    for (int it = 0; it < 2000; it++) {
        char *m = strdup(text);
        for (int e = 1 + pu_int(&r, 3); e > 0; e--) m[pu_int(&r, (int)len)] = alphabet[pu_int(&r, (int)sizeof alphabet - 1)];
        json_error_t je;
        json_t *j = json_loads(m, 0, &je);
        if (j && ms_plan_from_json(j, &back, err, sizeof err) == 0) {
            char *s2 = ms_plan_to_string(&back);
            assert_non_null(s2);
            free(s2);
            ms_plan_free(&back);
        }
        json_decref(j);
        free(m);
    }
    free(text);
    json_decref(valid);
    ms_plan_free(&pl);
    ms_profile_free(prof);
    free(prof);
}

/* The reasoning names the trial's OOM and every stage; the table has a row per stage. */
static void test_reasoning_and_table(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 5150);
    int with_oom = 0, with_rc = 0;
    for (int it = 0; it < 40; it++) {
        ms_profile *prof;
        ms_plan pl = found_plan(&r, &prof);
        const char *why = pl.reasoning;
        assert_non_null(why);
        if (prof->oom.happened) {
            char want[MS_NAME_MAX + 16];
            snprintf(want, sizeof want, "%s overflowed", prof->oom.layer_name);
            assert_non_null(strstr(why, want));
            assert_non_null(strstr(why, "backward pass"));
            assert_non_null(strstr(why, "which overflowed in the trial, now has"));
            with_oom++;
        } else {
            assert_non_null(strstr(why, "The trial fit"));
        }
        for (int s = 0; s < pl.n_stages; s++) {
            char want[64];
            snprintf(want, sizeof want, "Stage %d takes layers %d-%d", s, pl.stages[s].first, pl.stages[s].last);
            assert_non_null(strstr(why, want));
            if (pl.stages[s].recompute) {
                assert_non_null(strstr(why, "recomputes its layers"));
                with_rc++;
            }
        }
        char step[32];
        snprintf(step, sizeof step, "= %.1f ms", pl.step_ms);
        assert_non_null(strstr(why, step));

        for (int categories = 0; categories < 2; categories++) {
            char *buf = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&buf, &len);
            ms_plan_print_table(f, &pl, prof, categories);
            fclose(f);
            int lines = 0, col = 0, widest = 0;
            for (char *c = buf; *c; c++) {
                if (*c == '\n') { lines++; col = 0; }
                else if (++col > widest) widest = col;
            }
            assert_int_equal(lines, 3 + pl.n_stages);
            /* the terminal's 80 columns, unless the categories are asked for */
            if (categories) assert_non_null(strstr(buf, "transient"));
            else assert_true(widest <= 80 && !strstr(buf, "transient"));
            free(buf);
        }
        ms_plan_free(&pl);
        ms_profile_free(prof);
        free(prof);
    }
    assert_true(with_oom > 5);
    assert_true(with_rc > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_rejects_malformed),
        cmocka_unit_test(test_program_handed_on),
        cmocka_unit_test(test_program_handed_on_most),
        cmocka_unit_test(test_reasoning_and_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
