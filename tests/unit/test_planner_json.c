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

typedef void (*edit_fn)(json_t *root);
static json_t *stage(json_t *r, int i) { return json_array_get(json_object_get(r, "stages"), (size_t)i); }
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
        json_t *doc = json_deep_copy(valid);
        cases[i].f(doc);
        ms_plan back;
        char err[256] = "";
        int rc = ms_plan_from_json(doc, &back, err, sizeof err);
        json_decref(doc);
        if (rc == 0) {
            ms_plan_free(&back);
            fail_msg("accepted a plan that should fail with '%s'", cases[i].want);
        }
        if (!strstr(err, cases[i].want)) fail_msg("message '%s' lacks '%s'", err, cases[i].want);
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
        cmocka_unit_test(test_reasoning_and_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
