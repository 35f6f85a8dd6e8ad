/* test_planner_model.c — the stage model against hand-computed numbers:
 * bytes per category with and without recompute under both schedules, the
 * step-time formula, the micro-batch fits (two-point, bracketing, one-point
 * proportional, clamping), headroom and transfer arithmetic, saturation. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "planner/memory_model.h"
#include "vocab/profile_json.h"

typedef struct {
    uint64_t param, master, grad, optim, act, act_input, tf, tb, out;
    double fwd, bwd, opt;
} spec;

static ms_profile make(int n_layers, const spec *s, const int *sizes, int n_sizes)
{
    ms_profile p;
    memset(&p, 0, sizeof p);
    snprintf(p.model, sizeof p.model, "hand");
    p.n_layers = n_layers;
    p.seq_len = p.d_model = p.n_head = p.vocab = 1;
    p.global_batch = 4;
    p.reserve = 7;
    p.rows = calloc((size_t)(n_layers * n_sizes), sizeof *p.rows);
    for (int z = 0; z < n_sizes; z++)
        for (int l = 0; l < n_layers; l++) {
            const spec *q = &s[z * n_layers + l];
            ms_layer_row *w = &p.rows[p.n_rows++];
            w->layer = l;
            snprintf(w->name, sizeof w->name, "layer %d", l);
            w->micro_batch = sizes[z];
            w->param = q->param, w->master = q->master, w->grad = q->grad, w->optim = q->optim;
            w->act = q->act, w->act_input = q->act_input, w->transient_fwd = q->tf, w->transient_bwd = q->tb;
            w->out_bytes = q->out, w->fwd_ms = q->fwd, w->bwd_ms = q->bwd, w->opt_ms = q->opt;
        }
    return p;
}

static const spec three[3] = {
    {100, 0, 100, 200, 1000, 100, 50, 70, 10, 1, 2, 0.5},
    {200, 0, 200, 400, 2000, 300, 500, 20, 20, 2, 4, 1},
    {300, 0, 300, 600, 500, 50, 10, 10, 30, 3, 5, 2},
};

static void test_stage_bytes_by_hand(void **state)
{
    (void)state;
    int sz[] = {1};
    ms_profile p = make(3, three, sz, 1);
    char err[128];
    assert_int_equal(ms_profile_validate(&p, err, sizeof err), 0);
    ms_layer_cost L[3];
    assert_int_equal(ms_layer_costs(&p, 0, 1, L, err, sizeof err), 0);
    ms_plan_stage s;

    /* last stage (1 of 2), layers 1-2, 1F1B, m = 4: one micro-batch in flight */
    ms_stage_predict(L, 3, 1, 2, 1, 2, MS_SCHED_1F1B, 4, 0, 7, 8.0, &s);
    uint64_t want[MS_CAT_N] = {500, 0, 500, 1000, 2500, 500, 10, 7}; /* comm: 1 received input out[0] */
    assert_memory_equal(s.bytes, want, sizeof want);
    assert_int_equal(s.peak, 5017);
    assert_true(fabs(s.fwd_ms - 5) < 1e-12 && fabs(s.bwd_ms - 9) < 1e-12 && fabs(s.opt_ms - 3) < 1e-12);
    assert_true(fabs(s.comm_ms - 1e-5) < 1e-15); /* 10 bytes at 8 Gbit/s */

    /* same with recompute: inputs only, plus the largest layer's activations */
    ms_stage_predict(L, 3, 1, 2, 1, 2, MS_SCHED_1F1B, 4, 1, 7, 8.0, &s);
    assert_int_equal(s.bytes[MS_CAT_ACT], 350 + 2000);
    assert_int_equal(s.peak, 4867);
    assert_true(fabs(s.bwd_ms - 14) < 1e-12); /* backward + the forward again */

    /* first stage (0 of 2), layer 0: two in flight under 1F1B, four under GPipe */
    ms_stage_predict(L, 3, 0, 0, 0, 2, MS_SCHED_1F1B, 4, 0, 7, 8.0, &s);
    assert_int_equal(s.bytes[MS_CAT_ACT], 2000);
    assert_int_equal(s.bytes[MS_CAT_TRANSIENT], 70);
    assert_int_equal(s.bytes[MS_CAT_COMM], 10); /* the received gradient of out[0], no input */
    assert_int_equal(s.peak, 100 + 100 + 200 + 2000 + 70 + 10 + 7);
    ms_stage_predict(L, 3, 0, 0, 0, 2, MS_SCHED_GPIPE, 4, 0, 7, 8.0, &s);
    assert_int_equal(s.bytes[MS_CAT_ACT], 4000);
    /* a middle stage under GPipe: 4 received inputs, 1 received output gradient */
    ms_stage_predict(L, 3, 1, 1, 1, 3, MS_SCHED_GPIPE, 4, 0, 7, 8.0, &s);
    assert_int_equal(s.bytes[MS_CAT_COMM], 4 * 10 + 20);
    /* 1F1B never holds more micro-batches than there are */
    assert_int_equal(ms_inflight(MS_SCHED_1F1B, 2, 0, 8), 2);
    assert_int_equal(ms_inflight(MS_SCHED_1F1B, 8, 5, 8), 3);
    assert_int_equal(ms_inflight(MS_SCHED_GPIPE, 8, 5, 8), 8);
    ms_profile_free(&p);
}

static void test_step_formula(void **state)
{
    (void)state;
    int sz[] = {1};
    ms_profile p = make(3, three, sz, 1);
    ms_layer_cost L[3];
    assert_int_equal(ms_layer_costs(&p, 0, 1, L, NULL, 0), 0);
    ms_plan_stage st[2];
    ms_stage_predict(L, 3, 0, 0, 0, 2, MS_SCHED_1F1B, 4, 0, 7, 8.0, &st[0]);
    ms_stage_predict(L, 3, 1, 2, 1, 2, MS_SCHED_1F1B, 4, 0, 7, 8.0, &st[1]);
    /* (4 + 2 - 1) * max(1 + 2 + 1e-5, 5 + 9 + 1e-5) + max(0.5, 3) */
    assert_true(fabs(ms_step_ms(st, 2, 4) - (5 * (14 + 1e-5) + 3)) < 1e-9);
    /* one stage: plain gradient accumulation */
    ms_stage_predict(L, 3, 0, 2, 0, 1, MS_SCHED_1F1B, 4, 0, 7, 8.0, &st[0]);
    assert_true(fabs(ms_step_ms(st, 1, 4) - (4 * 17 + 3.5)) < 1e-9);
    assert_int_equal(st[0].bytes[MS_CAT_COMM], 0);
    ms_profile_free(&p);
}

static void test_two_point_fit(void **state)
{
    (void)state;
    int sz[] = {2, 4};
    spec s[2] = {
        {10, 0, 10, 20, 100, 40, 30, 50, 8, 1.0, 2.0, 0.25},
        {12, 0, 10, 20, 180, 80, 50, 60, 16, 1.5, 3.0, 0.75},
    };
    ms_profile p = make(1, s, sz, 2);
    ms_layer_cost c;
    assert_int_equal(ms_layer_costs(&p, 0, 3, &c, NULL, 0), 0); /* between */
    assert_int_equal(c.act, 140);
    assert_int_equal(c.act_input, 60);
    assert_int_equal(c.transient, 55); /* max(fwd, bwd) fitted: 50 -> 60 */
    assert_int_equal(c.out_bytes, 12);
    assert_true(fabs(c.fwd_ms - 1.25) < 1e-12 && fabs(c.bwd_ms - 2.5) < 1e-12);
    assert_int_equal(c.param, 10);   /* static: the nearer size, 2 on a tie */
    assert_true(c.opt_ms == 0.25);
    assert_int_equal(ms_layer_costs(&p, 0, 8, &c, NULL, 0), 0); /* above: extrapolated */
    assert_int_equal(c.act, 340);
    assert_int_equal(c.param, 12);
    assert_true(c.opt_ms == 0.75);
    assert_int_equal(ms_layer_costs(&p, 0, 1, &c, NULL, 0), 0); /* below */
    assert_int_equal(c.act, 60);
    assert_int_equal(ms_layer_costs(&p, 0, 4, &c, NULL, 0), 0); /* measured: as is */
    assert_int_equal(c.act, 180);
    assert_int_equal(c.param, 12);
    /* a falling line is clamped at zero, never wraps */
    p.rows[1].act = 20;
    assert_int_equal(ms_layer_costs(&p, 0, 8, &c, NULL, 0), 0);
    assert_int_equal(c.act, 0);
    ms_profile_free(&p);
}

static void test_bracketing_and_one_point(void **state)
{
    (void)state;
    int sz3[] = {1, 2, 4};
    spec s3[3] = {
        {10, 0, 0, 0, 999, 1, 1, 1, 1, 9.0, 9.0, 0}, /* size 1 is off the line: must not be used for 3 */
        {10, 0, 0, 0, 100, 1, 1, 1, 1, 1.0, 1.0, 0},
        {10, 0, 0, 0, 180, 1, 1, 1, 1, 2.0, 2.0, 0},
    };
    ms_profile p = make(1, s3, sz3, 3);
    ms_layer_cost c;
    assert_int_equal(ms_layer_costs(&p, 0, 3, &c, NULL, 0), 0);
    assert_int_equal(c.act, 140);
    assert_int_equal(ms_layer_costs(&p, 0, 8, &c, NULL, 0), 0); /* the two largest */
    assert_int_equal(c.act, 340);
    ms_profile_free(&p);

    int sz1[] = {2};
    spec s1[1] = {{10, 5, 10, 20, 100, 30, 7, 9, 8, 1.0, 2.0, 0.5}};
    p = make(1, s1, sz1, 1);
    assert_int_equal(ms_layer_costs(&p, 0, 6, &c, NULL, 0), 0); /* proportional: x3 */
    assert_int_equal(c.act, 300);
    assert_int_equal(c.act_input, 90);
    assert_int_equal(c.transient, 27);
    assert_int_equal(c.out_bytes, 24);
    assert_true(fabs(c.fwd_ms - 3.0) < 1e-12 && fabs(c.bwd_ms - 6.0) < 1e-12);
    assert_int_equal(c.param, 10);
    assert_int_equal(c.master, 5);
    assert_true(c.opt_ms == 0.5);
    assert_int_equal(ms_layer_costs(&p, 0, 1, &c, NULL, 0), 0);
    assert_int_equal(c.act, 50);
    assert_int_equal(c.out_bytes, 4);
    char err[128];
    assert_int_equal(ms_layer_costs(&p, 1, 2, &c, err, sizeof err), -1); /* no bf16 rows */
    ms_profile_free(&p);
}

static void test_arithmetic_helpers(void **state)
{
    (void)state;
    assert_int_equal(ms_usable_bytes(1000, 0.05), 950);
    assert_int_equal(ms_usable_bytes(1001, 0.05), 950); /* floor */
    assert_int_equal(ms_usable_bytes(80ull << 30, 0), 80ull << 30);
    assert_true(fabs(ms_transfer_ms(1000000000ull, 8.0) - 1000.0) < 1e-9); /* 1 GB at 8 Gbit/s: 1 s */
    assert_int_equal(ms_sat_add(UINT64_MAX - 1, 5), UINT64_MAX);
    assert_int_equal(ms_sat_mul(1ull << 40, 1ull << 30), UINT64_MAX);
    assert_int_equal(ms_sat_mul(0, UINT64_MAX), 0);
    /* a stage whose activations overflow 64 bits saturates rather than wrapping to a small number */
    ms_stage_sums s;
    memset(&s, 0, sizeof s);
    s.act = 1ull << 48;
    uint64_t b[MS_CAT_N];
    assert_int_equal(ms_stage_bytes(&s, 1 << 20, 0, 1, b), UINT64_MAX);
}

/* Measured sizes are listed ascending, capped, and precisions as a mask. */
static void test_sizes_listing(void **state)
{
    (void)state;
    int sz[] = {4, 1, 2};
    spec s[3];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 3; i++) s[i].act = 1 + (uint64_t)i;
    ms_profile p = make(1, s, sz, 3);
    int got[4];
    assert_int_equal(ms_profile_sizes(&p, 0, got, 4), 3);
    assert_int_equal(got[0], 1);
    assert_int_equal(got[1], 2);
    assert_int_equal(got[2], 4);
    assert_int_equal(ms_profile_sizes(&p, 0, got, 2), 2); /* keeps the smallest */
    assert_int_equal(got[0], 1);
    assert_int_equal(got[1], 2);
    assert_int_equal(ms_profile_precisions(&p), 1u);
    ms_profile_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage_bytes_by_hand),
        cmocka_unit_test(test_step_formula),
        cmocka_unit_test(test_two_point_fit),
        cmocka_unit_test(test_bracketing_and_one_point),
        cmocka_unit_test(test_arithmetic_helpers),
        cmocka_unit_test(test_sizes_listing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
