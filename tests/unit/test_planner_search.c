/* test_planner_search.c — the plan search: agreement with brute force on
 * small random instances, monotonicity in memory, heterogeneous devices, and
 * a property test that every plan fits its own model and covers every layer. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "planner/memory_model.h"
#include "planner/planner.h"
#include "tests/common/planner_util.h"

static int rel_close(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)); }

static void free_profile(ms_profile *p)
{
    ms_profile_free(p);
    free(p);
}

/* Random small instance: profile, devices, options. */
static ms_profile *random_instance(pu_rng *r, int max_layers, int max_devs, ms_plan_device *devs, int *n_devs,
                                   ms_plan_opts *o)
{
    static const int size_sets[3][2] = {{1, 2}, {2, 0}, {1, 3}};
    int set = pu_int(r, 3), n_sizes = size_sets[set][1] ? 2 : 1;
    int n = 2 + pu_int(r, max_layers - 1);
    int G = (int[]){2, 4, 6, 12}[pu_int(r, 4)];
    unsigned mask = 1u + (unsigned)pu_int(r, 7); /* nonempty subset of fp32/bf16/fp16 */
    ms_profile *p = pu_random_profile(r, n, mask, size_sets[set], n_sizes, G);
    uint64_t scale = pu_one_device_bytes(p);
    *n_devs = 1 + pu_int(r, max_devs);
    int homog = pu_int(r, 2);
    double f0 = 0.08 + 0.9 * pu_uniform(r);
    for (int d = 0; d < *n_devs; d++) {
        double f = homog ? f0 : 0.08 + 0.9 * pu_uniform(r);
        devs[d].capacity = (uint64_t)((double)scale * f);
        snprintf(devs[d].name, sizeof devs[d].name, "cuda:%d", d);
    }
    ms_plan_opts_default(o);
    if (pu_int(r, 3) == 0) o->precision = pu_int(r, 3);
    if (o->precision >= 0 && !(mask & (1u << o->precision))) o->precision = -1;
    if (pu_int(r, 3) == 0) o->schedule = pu_int(r, 2);
    if (pu_int(r, 4) == 0) o->micro_batch = (int[]){1, 2}[pu_int(r, 2)];
    o->recompute = pu_int(r, 3);
    o->headroom = pu_int(r, 2) ? 0.05 : 0.2 * pu_uniform(r);
    o->link_gbps = pu_int(r, 2) ? 200 : 1 + 50 * pu_uniform(r); /* slow links make boundaries matter */
    return p;
}

static void test_brute_force_agreement(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 20240601);
    int feasible = 0, infeasible = 0;
    for (int it = 0; it < 400; it++) {
        ms_plan_device devs[4];
        int nd;
        ms_plan_opts o;
        ms_profile *p = random_instance(&r, 6, 3, devs, &nd, &o);
        double bf = pu_brute_force(p, devs, nd, &o);
        ms_plan pl;
        char err[256];
        int rc = ms_plan_search(p, devs, nd, &o, &pl, err, sizeof err);
        if (rc == MS_PLAN_ERROR) fail_msg("instance %d: %s", it, err);
        if (isinf(bf)) {
            if (rc != MS_PLAN_INFEASIBLE) fail_msg("instance %d: brute force finds nothing, search finds %g ms", it, pl.step_ms);
            infeasible++;
        } else {
            if (rc != MS_PLAN_OK) fail_msg("instance %d: brute force finds %g ms, search finds nothing", it, bf);
            if (!rel_close(bf, pl.step_ms))
                fail_msg("instance %d: brute force %.12g ms, search %.12g ms", it, bf, pl.step_ms);
            assert_int_equal(pu_check_plan(p, &pl), 0);
            feasible++;
        }
        ms_plan_free(&pl);
        free_profile(p);
    }
    /* the instances must exercise both outcomes */
    assert_true(feasible > 100);
    assert_true(infeasible > 20);
}

/* Four devices, every ordering: the brute force tries all 4! placements. */
static void test_brute_force_four_devices(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 77);
    for (int it = 0; it < 60; it++) {
        ms_plan_device devs[4];
        int nd;
        ms_plan_opts o;
        ms_profile *p = random_instance(&r, 7, 4, devs, &nd, &o);
        double bf = pu_brute_force(p, devs, nd, &o);
        ms_plan pl;
        char err[256];
        int rc = ms_plan_search(p, devs, nd, &o, &pl, err, sizeof err);
        assert_int_not_equal(rc, MS_PLAN_ERROR);
        assert_int_equal(rc == MS_PLAN_OK, !isinf(bf));
        if (rc == MS_PLAN_OK) assert_true(rel_close(bf, pl.step_ms));
        ms_plan_free(&pl);
        free_profile(p);
    }
}

/* Growing every capacity never makes the best plan slower. */
static void test_more_memory_never_slower(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 99);
    int improved = 0;
    for (int it = 0; it < 60; it++) {
        ms_plan_device devs[8];
        int nd;
        ms_plan_opts o;
        ms_profile *p = random_instance(&r, 12, 6, devs, &nd, &o);
        double prev = INFINITY;
        for (int step = 0; step < 6; step++) {
            ms_plan pl;
            char err[256];
            int rc = ms_plan_search(p, devs, nd, &o, &pl, err, sizeof err);
            assert_int_not_equal(rc, MS_PLAN_ERROR);
            double t = rc == MS_PLAN_OK ? pl.step_ms : INFINITY;
            if (!(t <= prev * (1 + 1e-9))) fail_msg("instance %d: %g ms after %g ms with more memory", it, t, prev);
            if (t < prev * (1 - 1e-9) && !isinf(prev)) improved++;
            prev = t;
            ms_plan_free(&pl);
            /* grow one device (sometimes all) */
            if (pu_int(&r, 2)) devs[pu_int(&r, nd)].capacity += devs[0].capacity / 3 + (1 << 20);
            else
                for (int d = 0; d < nd; d++) devs[d].capacity = devs[d].capacity * 5 / 4;
        }
        /* a device more never hurts either */
        if (nd < 8) {
            ms_plan pl;
            char err[256];
            devs[nd] = devs[pu_int(&r, nd)];
            int rc = ms_plan_search(p, devs, nd + 1, &o, &pl, err, sizeof err);
            assert_int_not_equal(rc, MS_PLAN_ERROR);
            double t = rc == MS_PLAN_OK ? pl.step_ms : INFINITY;
            assert_true(t <= prev * (1 + 1e-9));
            ms_plan_free(&pl);
        }
        free_profile(p);
    }
    assert_true(improved > 5); /* the growth mattered somewhere */
}

/* With 1F1B, stage 0 holds the most micro-batches: given a small and a big
 * GPU in that order, the planner puts stage 0 on the big one. */
static void test_heterogeneous_order(void **state)
{
    (void)state;
    int sizes[] = {1};
    pu_rng r;
    pu_seed(&r, 5);
    ms_profile *p = pu_random_profile(&r, 8, 1u, sizes, 1, 8);
    /* uniform layers: same bytes and times everywhere */
    for (int i = 0; i < p->n_rows; i++) {
        ms_layer_row *w = &p->rows[i];
        w->param = w->grad = 4 << 20;
        w->master = 0;
        w->optim = 8 << 20;
        w->act = 64 << 20;
        w->act_input = 8 << 20;
        w->transient_fwd = w->transient_bwd = 1 << 20;
        w->out_bytes = 1 << 20;
        w->fwd_ms = 1;
        w->bwd_ms = 2;
        w->opt_ms = 0.1;
    }
    p->reserve = 0;
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    o.schedule = MS_SCHED_1F1B;
    o.micro_batch = 1;
    o.recompute = MS_RECOMPUTE_NEVER;
    o.headroom = 0;
    /* 4 layers per stage: static 64 MiB; stage 0 holds 2 micro-batches
     * (512 MiB act + 2 MiB comm), stage 1 holds 1 (256 MiB + 3 MiB comm). */
    ms_plan_device devs[2] = {{"cuda:0", 400ull << 20}, {"cuda:1", 800ull << 20}};
    ms_plan pl;
    char err[256];
    assert_int_equal(ms_plan_search(p, devs, 2, &o, &pl, err, sizeof err), MS_PLAN_OK);
    assert_int_equal(pl.n_stages, 2);
    assert_int_equal(pl.stages[0].device, 1); /* the big GPU first */
    assert_int_equal(pl.stages[1].device, 0);
    assert_int_equal(pl.stages[0].last, 3);
    assert_int_equal(pu_check_plan(p, &pl), 0);
    ms_plan_free(&pl);

    /* Equal capacities are used in index order. */
    ms_plan_device same[3] = {{"cuda:0", 2ull << 30}, {"cuda:1", 2ull << 30}, {"cuda:2", 2ull << 30}};
    assert_int_equal(ms_plan_search(p, same, 3, &o, &pl, err, sizeof err), MS_PLAN_OK);
    for (int s = 0; s < pl.n_stages; s++) assert_int_equal(pl.stages[s].device, s);
    ms_plan_free(&pl);
    free_profile(p);
}

/* Property: over random mid-size profiles every returned plan fits its own
 * model and covers every layer once, in order, on distinct devices. */
static void test_property_random_profiles(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 31337);
    int ok = 0;
    for (int it = 0; it < 80; it++) {
        int n = 3 + pu_int(&r, 40);
        int sizes[2] = {1 + pu_int(&r, 2), 4};
        int G = (int[]){8, 16, 24, 32}[pu_int(&r, 4)];
        ms_profile *p = pu_random_profile(&r, n, 1u + (unsigned)pu_int(&r, 7), sizes, 1 + pu_int(&r, 2), G);
        uint64_t scale = pu_one_device_bytes(p);
        ms_plan_device devs[8];
        int nd = 1 + pu_int(&r, 8);
        for (int d = 0; d < nd; d++) {
            devs[d].capacity = (uint64_t)((double)scale * (0.05 + 0.5 * pu_uniform(&r)));
            snprintf(devs[d].name, sizeof devs[d].name, "cuda:%d", d);
        }
        ms_plan_opts o;
        ms_plan_opts_default(&o);
        o.recompute = pu_int(&r, 3);
        ms_plan pl;
        char err[256];
        int rc = ms_plan_search(p, devs, nd, &o, &pl, err, sizeof err);
        if (rc == MS_PLAN_ERROR) fail_msg("instance %d: %s", it, err);
        if (rc == MS_PLAN_OK) {
            if (pu_check_plan(p, &pl)) fail_msg("instance %d: plan does not fit its model", it);
            assert_true(pl.n_stages <= nd);
            if (o.recompute == MS_RECOMPUTE_NEVER)
                for (int s = 0; s < pl.n_stages; s++) assert_false(pl.stages[s].recompute);
            if (o.recompute == MS_RECOMPUTE_ALWAYS)
                for (int s = 0; s < pl.n_stages; s++) assert_true(pl.stages[s].recompute);
            ok++;
        }
        ms_plan_free(&pl);
        free_profile(p);
    }
    assert_true(ok > 20);
}

/* Bad requests are errors with a message, not crashes or plans. */
static void test_bad_requests(void **state)
{
    (void)state;
    int sizes[] = {1};
    pu_rng r;
    pu_seed(&r, 8);
    ms_profile *p = pu_random_profile(&r, 4, 1u, sizes, 1, 4); /* fp32 only */
    ms_plan_device d = {"cuda:0", 1ull << 40};
    ms_plan_opts o;
    ms_plan pl;
    char err[256];
    ms_plan_opts_default(&o);
    o.precision = 1;
    assert_int_equal(ms_plan_search(p, &d, 1, &o, &pl, err, sizeof err), MS_PLAN_ERROR);
    assert_non_null(strstr(err, "no bf16 rows"));
    ms_plan_opts_default(&o);
    o.micro_batch = 3;
    assert_int_equal(ms_plan_search(p, &d, 1, &o, &pl, err, sizeof err), MS_PLAN_ERROR);
    assert_non_null(strstr(err, "does not divide"));
    ms_plan_opts_default(&o);
    o.headroom = 1.0;
    assert_int_equal(ms_plan_search(p, &d, 1, &o, &pl, err, sizeof err), MS_PLAN_ERROR);
    ms_plan_opts_default(&o);
    assert_int_equal(ms_plan_search(p, &d, 0, &o, &pl, err, sizeof err), MS_PLAN_ERROR);
    p->rows[2].layer = 1; /* layer 2 missing, layer 1 twice */
    assert_int_equal(ms_plan_search(p, &d, 1, &o, &pl, err, sizeof err), MS_PLAN_ERROR);
    assert_non_null(strstr(err, "twice"));
    free_profile(p);
}

/* Degenerate sizes: one layer, a global batch of one, more GPUs than layers. */
static void test_tiny_cases(void **state)
{
    (void)state;
    int sizes[] = {1};
    pu_rng r;
    pu_seed(&r, 3);
    ms_profile *p = pu_random_profile(&r, 1, 1u, sizes, 1, 1);
    ms_plan_device d[3] = {{"cuda:0", 1ull << 40}, {"cuda:1", 1ull << 40}, {"cuda:2", 1ull << 41}};
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    ms_plan pl;
    char err[256];
    assert_int_equal(ms_plan_search(p, d, 3, &o, &pl, err, sizeof err), MS_PLAN_OK);
    assert_int_equal(pl.n_stages, 1);
    assert_int_equal(pl.n_micro, 1);
    assert_int_equal(pl.stages[0].bytes[MS_CAT_COMM], 0);
    assert_int_equal(pu_check_plan(p, &pl), 0);
    ms_plan_free(&pl);
    free_profile(p);

    p = pu_random_profile(&r, 3, 1u, sizes, 1, 1);
    assert_int_equal(ms_plan_search(p, d, 3, &o, &pl, err, sizeof err), MS_PLAN_OK);
    assert_int_equal(pu_check_plan(p, &pl), 0);
    assert_true(pl.n_stages <= 3);
    ms_plan_free(&pl);
    /* a GPU too small for anything is never used */
    ms_plan_device z[2] = {{"cuda:0", 0}, {"cuda:1", 1ull << 40}};
    assert_int_equal(ms_plan_search(p, z, 2, &o, &pl, err, sizeof err), MS_PLAN_OK);
    for (int s = 0; s < pl.n_stages; s++) assert_int_equal(pl.stages[s].device, 1);
    ms_plan_free(&pl);
    free_profile(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brute_force_agreement),
        cmocka_unit_test(test_brute_force_four_devices),
        cmocka_unit_test(test_more_memory_never_slower),
        cmocka_unit_test(test_heterogeneous_order),
        cmocka_unit_test(test_property_random_profiles),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_tiny_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
