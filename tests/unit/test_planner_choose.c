/* test_planner_choose.c — ms_plan_choose (planner.h): among plans within 3%
 * of the fastest, the trial's precision, then fewer stages, then no
 * recompute, then the lower peak; a precision change is said and why; and
 * the choice does not flip with the noise of measured times (issue 11:
 * doctor trained bf16 once and fp32 the next time). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "planner/planner.h"
#include "tests/common/planner_util.h"

static void free_profile(ms_profile *p)
{
    ms_profile_free(p);
    free(p);
}

/* Random rows in fp32 and bf16; the trial ran `trial` (its rows are the
 * full run's); bf16 rows take `ratio` times the fp32 row's time. */
static ms_profile *two_precisions(pu_rng *r, int trial, double ratio)
{
    static const int sizes[] = { 1, 2 };
    ms_profile *p = pu_random_profile(r, 6, 0x3, sizes, 2, 4);
    for (int i = 0; i < p->n_rows; i++) {
        ms_layer_row *w = &p->rows[i];
        w->source = w->precision == trial ? MS_ROW_FULL : MS_ROW_ISOLATED;
        if (w->precision != 1) continue;
        const ms_layer_row *f = ms_profile_find(p, w->layer, 0, w->micro_batch);
        assert_non_null(f);
        w->fwd_ms = f->fwd_ms * ratio;
        w->bwd_ms = f->bwd_ms * ratio;
        w->opt_ms = f->opt_ms * ratio;
    }
    return p;
}

static ms_plan_device one_device(uint64_t cap)
{
    ms_plan_device d = { "cuda:0", cap };
    return d;
}

static int choose(const ms_profile *p, const ms_plan_device *d, int n, const ms_plan_opts *o, ms_plan *pl)
{
    char err[256];
    int rc = ms_plan_choose(p, d, n, o, pl, err, sizeof err);
    if (rc == MS_PLAN_ERROR) fail_msg("choose: %s", err);
    return rc;
}

static int search(const ms_profile *p, const ms_plan_device *d, int n, const ms_plan_opts *o, ms_plan *pl)
{
    char err[256];
    int rc = ms_plan_search(p, d, n, o, pl, err, sizeof err);
    if (rc == MS_PLAN_ERROR) fail_msg("search: %s", err);
    return rc;
}

static void test_keeps_trial_precision_within_tie(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 11);
    ms_profile *p = two_precisions(&r, 1, 1.02); /* the trial's bf16 is 2% slower */
    ms_plan_device d = one_device(4 * pu_one_device_bytes(p));
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    ms_plan fast, pick;
    assert_int_equal(search(p, &d, 1, &o, &fast), MS_PLAN_OK);
    assert_int_equal(fast.precision, 0);
    assert_int_equal(choose(p, &d, 1, &o, &pick), MS_PLAN_OK);
    assert_int_equal(pick.precision, 1);
    assert_true(pick.step_ms <= fast.step_ms * (1 + MS_PLAN_TIE));
    assert_non_null(strstr(pick.note, "keeps the trial's precision, bf16"));
    ms_plan_free(&fast);
    ms_plan_free(&pick);
    free_profile(p);
}

static void test_leaves_trial_precision_when_much_slower(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 12);
    ms_profile *p = two_precisions(&r, 1, 1.10);
    ms_plan_device d = one_device(4 * pu_one_device_bytes(p));
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    ms_plan pick;
    assert_int_equal(choose(p, &d, 1, &o, &pick), MS_PLAN_OK);
    assert_int_equal(pick.precision, 0);
    assert_non_null(strstr(pick.note, "not the trial's bf16"));
    assert_non_null(strstr(pick.note, "faster"));
    ms_plan_free(&pick);
    free_profile(p);
}

/* Smallest capacity (to a MiB) at which one device fits under o. */
static uint64_t min_capacity(const ms_profile *p, const ms_plan_opts *o)
{
    uint64_t lo = 1, hi = 8 * pu_one_device_bytes(p);
    while (hi - lo > (1u << 20)) {
        uint64_t mid = lo + (hi - lo) / 2;
        ms_plan_device d = one_device(mid);
        ms_plan pl;
        if (search(p, &d, 1, o, &pl) == MS_PLAN_OK) hi = mid;
        else lo = mid;
        ms_plan_free(&pl);
    }
    return hi;
}

static void test_leaves_trial_precision_when_it_cannot_fit(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 13);
    ms_profile *p = two_precisions(&r, 0, 1.5); /* the trial ran fp32; bf16 much slower but smaller */
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    o.precision = 0;
    uint64_t fp32 = min_capacity(p, &o);
    o.precision = 1;
    uint64_t bf16 = min_capacity(p, &o);
    assert_true(bf16 + (2u << 20) < fp32);
    ms_plan_device d = one_device((bf16 + fp32) / 2);
    o.precision = -1;
    ms_plan pick;
    assert_int_equal(choose(p, &d, 1, &o, &pick), MS_PLAN_OK);
    assert_int_equal(pick.precision, 1);
    assert_non_null(strstr(pick.note, "no plan in fp32 fits"));
    ms_plan_free(&pick);
    free_profile(p);
}

/* Noise of 1% on every measured time: the fastest plan's precision flips,
 * the chosen one does not. */
static void test_noise_does_not_flip_the_choice(void **state)
{
    (void)state;
    pu_rng r, noise;
    pu_seed(&r, 14);
    pu_seed(&noise, 15);
    ms_profile *base = two_precisions(&r, 0, 1.0);
    ms_plan_device d[2] = { one_device(4 * pu_one_device_bytes(base)), one_device(4 * pu_one_device_bytes(base)) };
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    int flips = 0, first = -1, first_stages = -1;
    for (int it = 0; it < 30; it++) {
        ms_profile *p = two_precisions(&r, 0, 1.0);
        memcpy(p->rows, base->rows, (size_t)base->n_rows * sizeof *p->rows);
        for (int i = 0; i < p->n_rows; i++) {
            p->rows[i].fwd_ms *= 1 + 0.02 * (pu_uniform(&noise) - 0.5);
            p->rows[i].bwd_ms *= 1 + 0.02 * (pu_uniform(&noise) - 0.5);
        }
        ms_plan fast, pick;
        assert_int_equal(search(p, d, 2, &o, &fast), MS_PLAN_OK);
        assert_int_equal(choose(p, d, 2, &o, &pick), MS_PLAN_OK);
        flips += fast.precision != 0;
        assert_int_equal(pick.precision, 0);
        if (first < 0) { first = pick.micro_batch; first_stages = pick.n_stages; }
        assert_int_equal(pick.n_stages, first_stages);
        ms_plan_free(&fast);
        ms_plan_free(&pick);
        free_profile(p);
    }
    assert_true(flips > 0); /* the noise is enough to change the fastest plan */
    free_profile(base);
}

/* On random instances the choice obeys the stated order: within 3% of the
 * fastest; the trial's precision unless no plan in it is within 3%; no
 * fewer stages within 3%; recompute only when needed within 3%. */
static void test_order_on_random_instances(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 16);
    static const int sizes[] = { 1, 2 };
    int kept = 0, fewer = 0;
    for (int it = 0; it < 60; it++) {
        ms_profile *p = pu_random_profile(&r, 3 + pu_int(&r, 6), 0x3, sizes, 2, 4);
        int trial = pu_int(&r, 2);
        for (int i = 0; i < p->n_rows; i++) p->rows[i].source = p->rows[i].precision == trial ? MS_ROW_FULL : MS_ROW_ISOLATED;
        int n = 1 + pu_int(&r, 4);
        ms_plan_device d[4];
        for (int k = 0; k < n; k++) d[k] = one_device((uint64_t)((double)pu_one_device_bytes(p) * (0.3 + pu_uniform(&r))));
        ms_plan_opts o;
        ms_plan_opts_default(&o);
        o.link_gbps = 5 + 100 * pu_uniform(&r);
        ms_plan fast, pick, t;
        if (search(p, d, n, &o, &fast) != MS_PLAN_OK) {
            assert_int_equal(choose(p, d, n, &o, &pick), MS_PLAN_INFEASIBLE);
            free_profile(p);
            continue;
        }
        double limit = fast.step_ms * (1 + MS_PLAN_TIE);
        assert_int_equal(choose(p, d, n, &o, &pick), MS_PLAN_OK);
        assert_true(pick.step_ms <= limit * (1 + 1e-12));
        for (int s = 0; s < pick.n_stages; s++)
            assert_true(pick.stages[s].peak <= (uint64_t)floor((double)d[pick.stages[s].device].capacity * (1 - o.headroom)));
        ms_plan_opts q = o;
        if (pick.precision != trial) {
            q.precision = trial;
            if (search(p, d, n, &q, &t) == MS_PLAN_OK) assert_true(t.step_ms > limit);
            ms_plan_free(&t);
        } else {
            kept++;
        }
        q = o;
        q.precision = pick.precision;
        if (pick.n_stages > 1) {
            q.max_stages = pick.n_stages - 1;
            if (search(p, d, n, &q, &t) == MS_PLAN_OK) assert_true(t.step_ms > limit);
            ms_plan_free(&t);
        }
        fewer += pick.n_stages < fast.n_stages;
        int rc_any = 0;
        for (int s = 0; s < pick.n_stages; s++) rc_any |= pick.stages[s].recompute;
        if (rc_any) {
            q.max_stages = pick.n_stages;
            q.recompute = MS_RECOMPUTE_NEVER;
            if (search(p, d, n, &q, &t) == MS_PLAN_OK) assert_true(t.step_ms > limit);
            ms_plan_free(&t);
        }
        ms_plan_free(&fast);
        ms_plan_free(&pick);
        free_profile(p);
    }
    assert_true(kept > 10);
    assert_true(fewer > 0); /* some instances tie a longer pipeline with a shorter one */
}

/* A fixed schedule stays fixed: a program's plan (run/program_plan.c) asks
 * for the sequential schedule, which an open search never picks, and every
 * search the choice makes keeps it. */
static void test_fixed_schedule_is_kept(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 17);
    static const int sizes[] = { 1, 2 };
    for (int it = 0; it < 20; it++) {
        ms_profile *p = pu_random_profile(&r, 3 + pu_int(&r, 6), 0x3, sizes, 2, 4);
        ms_plan_device d[3];
        for (int k = 0; k < 3; k++) d[k] = one_device((uint64_t)((double)pu_one_device_bytes(p) * (0.4 + pu_uniform(&r))));
        ms_plan_opts o;
        ms_plan_opts_default(&o);
        ms_plan open, fast, pick;
        if (search(p, d, 3, &o, &open) == MS_PLAN_OK) assert_int_not_equal(open.schedule, MS_SCHED_SEQUENTIAL);
        ms_plan_free(&open);
        o.schedule = MS_SCHED_SEQUENTIAL;
        int rc = search(p, d, 3, &o, &fast);
        assert_int_equal(choose(p, d, 3, &o, &pick), rc);
        if (rc == MS_PLAN_OK) {
            assert_int_equal(pick.schedule, MS_SCHED_SEQUENTIAL);
            assert_true(pick.step_ms <= fast.step_ms * (1 + MS_PLAN_TIE) * (1 + 1e-12));
            if (pick.precision == fast.precision) assert_true(pick.n_stages <= fast.n_stages);
            ms_plan_free(&pick);
        }
        ms_plan_free(&fast);
        free_profile(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keeps_trial_precision_within_tie),
        cmocka_unit_test(test_leaves_trial_precision_when_much_slower),
        cmocka_unit_test(test_leaves_trial_precision_when_it_cannot_fit),
        cmocka_unit_test(test_noise_does_not_flip_the_choice),
        cmocka_unit_test(test_order_on_random_instances),
        cmocka_unit_test(test_fixed_schedule_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
