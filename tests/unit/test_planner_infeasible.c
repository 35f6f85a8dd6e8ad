/* test_planner_infeasible.c — when nothing fits, the explanation's numbers
 * are what searching says: the fewest GPUs (checked by trying every count),
 * the capacity needed (fits there, not a step below), and the options that
 * would fit (each one checked against a direct search). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "planner/planner.h"
#include "tests/common/planner_util.h"

static const uint64_t MiB = 1ull << 20;

static int fits_uniform(const ms_profile *p, int n, uint64_t cap, const ms_plan_opts *o, ms_plan *keep)
{
    ms_plan_device d[64];
    for (int i = 0; i < n; i++) {
        d[i].capacity = cap;
        snprintf(d[i].name, sizeof d[i].name, "cuda:%d", i);
    }
    ms_plan pl;
    char err[256];
    int rc = ms_plan_search(p, d, n, o, &pl, err, sizeof err);
    if (rc == MS_PLAN_ERROR) fail_msg("%s", err);
    if (keep && rc == MS_PLAN_OK) *keep = pl;
    else ms_plan_free(&pl);
    return rc == MS_PLAN_OK;
}

/* The smallest uniform capacity (to 64 KiB) on n GPUs that fits, by bisection here. */
static uint64_t need(const ms_profile *p, int n, const ms_plan_opts *o)
{
    uint64_t lo = 0, hi = 1ull << 40;
    if (!fits_uniform(p, n, hi, o, NULL)) return 0;
    while (hi - lo > 65536) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (fits_uniform(p, n, mid, o, NULL)) hi = mid;
        else lo = mid;
    }
    return hi;
}

static ms_profile *profile(uint64_t seed, int n_layers, unsigned mask)
{
    pu_rng r;
    pu_seed(&r, seed);
    int sizes[2] = {1, 2};
    return pu_random_profile(&r, n_layers, mask, sizes, 2, 8);
}

static void drop(ms_profile *p)
{
    ms_profile_free(p);
    free(p);
}

static int explain(const ms_profile *p, int n, uint64_t cap, const ms_plan_opts *o, ms_infeasible *inf)
{
    ms_plan_device d[64];
    for (int i = 0; i < n; i++) {
        d[i].capacity = cap;
        snprintf(d[i].name, sizeof d[i].name, "cuda:%d", i);
    }
    char err[256];
    int rc = ms_plan_explain_infeasible(p, d, n, o, inf, err, sizeof err);
    if (rc) fail_msg("%s", err);
    return rc;
}

static void test_min_gpus_and_capacity(void **state)
{
    (void)state;
    int checked = 0, with_count = 0;
    for (int it = 0; it < 12; it++) {
        ms_profile *p = profile(100 + (uint64_t)it, 6 + it % 7, it % 2 ? 7u : 1u);
        ms_plan_opts o;
        ms_plan_opts_default(&o);
        o.recompute = it % 3 == 0 ? MS_RECOMPUTE_NEVER : MS_RECOMPUTE_AUTO;
        uint64_t one = need(p, 1, &o), cap = one / 3 + MiB;
        int n = 2;
        if (fits_uniform(p, n, cap, &o, NULL)) { /* not an infeasible instance */
            drop(p);
            continue;
        }
        /* the fewest GPUs, by trying every count */
        int want = 0;
        for (int k = n + 1; k <= p->n_layers && !want; k++)
            if (fits_uniform(p, k, cap, &o, NULL)) want = k;
        ms_infeasible inf;
        explain(p, n, cap, &o, &inf);
        assert_int_equal(inf.min_gpus, want);
        assert_int_equal(inf.gpus_given, n);
        assert_int_equal(inf.added_capacity, cap);
        /* the capacity: fits there, not a resolution step below */
        assert_true(inf.capacity_needed > cap);
        assert_true(fits_uniform(p, n, inf.capacity_needed, &o, NULL));
        uint64_t step = MiB + (inf.capacity_needed / 1000 > MiB ? inf.capacity_needed / 1000 : MiB);
        assert_false(fits_uniform(p, n, inf.capacity_needed - step, &o, NULL));
        assert_non_null(strstr(inf.text, "No plan fits 2 GPUs"));
        if (want) {
            char s[64];
            snprintf(s, sizeof s, "It would fit on %d GPUs of", want);
            assert_non_null(strstr(inf.text, s));
            with_count++;
        }
        checked++;
        drop(p);
    }
    assert_true(checked >= 8);
    assert_true(with_count >= 4);
}

static int has_fix(const ms_infeasible *inf, const char *option, ms_infeasible_fix *out)
{
    for (int i = 0; i < inf->n_fixes; i++)
        if (strcmp(inf->fixes[i].option, option) == 0) {
            if (out) *out = inf->fixes[i];
            return 1;
        }
    return 0;
}

/* A fixed option that makes it infeasible is named, with the plan that opening it gives. */
static void test_option_fixes(void **state)
{
    (void)state;
    int seen_prec = 0, seen_rc = 0, seen_mb = 0, seen_head = 0;
    for (int it = 0; it < 10; it++) {
        ms_profile *p = profile(700 + (uint64_t)it, 8, 7u);
        ms_plan_opts any, o;
        ms_plan_opts_default(&any);
        const int n = 2;

        /* precision: fp32 needs more than any */
        o = any;
        o.precision = 0;
        uint64_t c32 = need(p, n, &o), cany = need(p, n, &any);
        if (cany < c32) {
            uint64_t cap = cany + (c32 - cany) / 2;
            ms_infeasible inf;
            explain(p, n, cap, &o, &inf);
            ms_infeasible_fix f = {0};
            assert_true(has_fix(&inf, "--precision any", &f));
            ms_plan pl;
            assert_true(fits_uniform(p, n, cap, &any, &pl));
            assert_int_equal(f.n_stages, pl.n_stages);
            assert_true(fabs(f.step_ms - pl.step_ms) < 1e-9 * pl.step_ms);
            ms_plan_free(&pl);
            assert_non_null(strstr(inf.text, "Opening an option also makes it fit: --precision any"));
            seen_prec++;
        }
        /* recompute never vs auto */
        o = any;
        o.recompute = MS_RECOMPUTE_NEVER;
        uint64_t cnever = need(p, n, &o);
        if (cany < cnever) {
            ms_infeasible inf;
            explain(p, n, cany + (cnever - cany) / 2, &o, &inf);
            assert_true(has_fix(&inf, "--recompute auto", NULL));
            seen_rc++;
        }
        /* the largest micro-batch vs any */
        o = any;
        o.micro_batch = 8;
        uint64_t cbig = need(p, n, &o);
        if (cany < cbig) {
            ms_infeasible inf;
            explain(p, n, cany + (cbig - cany) / 2, &o, &inf);
            assert_true(has_fix(&inf, "--micro-batch any", NULL));
            seen_mb++;
        }
        /* the headroom: fits at 0, not at 5 % */
        {
            ms_plan_opts h0 = any;
            h0.headroom = 0;
            uint64_t c0 = need(p, n, &h0);
            uint64_t cap = c0 + c0 / 100; /* 1 % above what fits at 0 headroom */
            ms_infeasible inf;
            if (!fits_uniform(p, n, cap, &any, NULL)) {
                explain(p, n, cap, &any, &inf);
                assert_true(has_fix(&inf, "--headroom 0", NULL));
                seen_head++;
            }
        }
        drop(p);
    }
    assert_true(seen_prec > 3);
    assert_true(seen_rc > 3);
    assert_true(seen_mb > 3);
    assert_true(seen_head > 3);
}

/* Two fixed options, neither enough alone, both together enough. */
static void test_every_option_open(void **state)
{
    (void)state;
    int seen = 0;
    for (int it = 0; it < 20 && !seen; it++) {
        ms_profile *p = profile(900 + (uint64_t)it, 8, 3u);
        const int n = 2;
        ms_plan_opts any, fixed, a, b;
        ms_plan_opts_default(&any);
        fixed = any;
        fixed.precision = 0;
        fixed.recompute = MS_RECOMPUTE_NEVER;
        a = fixed;
        a.precision = -1;
        b = fixed;
        b.recompute = MS_RECOMPUTE_AUTO;
        uint64_t ca = need(p, n, &a), cb = need(p, n, &b), cany = need(p, n, &any);
        uint64_t lo = ca < cb ? ca : cb;
        if (cany + 2 * MiB < lo) {
            ms_infeasible inf;
            explain(p, n, cany + MiB, &fixed, &inf);
            assert_int_equal(inf.n_fixes, 1);
            assert_true(has_fix(&inf, "every option open", NULL));
            assert_non_null(strstr(inf.text, "every option open"));
            seen++;
        }
        drop(p);
    }
    assert_true(seen > 0);
}

/* A layer that fits on no GPU alone: no count of GPUs helps, only memory. */
static void test_layer_too_big(void **state)
{
    (void)state;
    ms_profile *p = profile(55, 6, 1u);
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].layer == 3) p->rows[i].optim = 4096 * MiB;
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    ms_infeasible inf;
    explain(p, 3, 2048 * MiB, &o, &inf);
    assert_int_equal(inf.min_gpus, 0);
    assert_true(inf.capacity_needed > 4096 * MiB);
    assert_non_null(strstr(inf.text, "Not even one layer per GPU"));
    assert_non_null(strstr(inf.text, "it needs 3 GPUs of at least"));
    assert_non_null(strstr(inf.text, "already tried"));
    drop(p);
}

/* Mixed capacities: more GPUs are copies of the largest. */
static void test_heterogeneous_more_gpus(void **state)
{
    (void)state;
    ms_profile *p = profile(77, 10, 1u);
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    uint64_t one = need(p, 1, &o);
    ms_plan_device d[2] = {{"cuda:0", one / 4}, {"cuda:1", one / 8}};
    ms_infeasible inf;
    char err[256];
    assert_int_equal(ms_plan_explain_infeasible(p, d, 2, &o, &inf, err, sizeof err), 0);
    if (inf.min_gpus > 0) {
        assert_int_equal(inf.added_capacity, one / 4);
        ms_plan_device more[64];
        memcpy(more, d, sizeof d);
        for (int i = 2; i < inf.min_gpus; i++) more[i] = (ms_plan_device){"x", one / 4};
        ms_plan pl;
        assert_int_equal(ms_plan_search(p, more, inf.min_gpus, &o, &pl, err, sizeof err), MS_PLAN_OK);
        ms_plan_free(&pl);
        assert_int_equal(ms_plan_search(p, more, inf.min_gpus - 1, &o, &pl, err, sizeof err), MS_PLAN_INFEASIBLE);
        char s[64];
        snprintf(s, sizeof s, "with %d more GPU", inf.min_gpus - 2);
        assert_non_null(strstr(inf.text, s));
    }
    assert_true(inf.min_gpus > 2);
    /* and a request that fits says so */
    d[0].capacity = d[1].capacity = one * 2;
    assert_int_equal(ms_plan_explain_infeasible(p, d, 2, &o, &inf, err, sizeof err), 0);
    assert_non_null(strstr(inf.text, "A plan fits"));
    drop(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_min_gpus_and_capacity),
        cmocka_unit_test(test_option_fixes),
        cmocka_unit_test(test_every_option_open),
        cmocka_unit_test(test_layer_too_big),
        cmocka_unit_test(test_heterogeneous_more_gpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
