/* test_planner_replicas.c — the search with data-parallel replicas and
 * ZeRO-1 open, against the brute force (tests/common/planner_util.h) over
 * every layout on small random instances: every precision, micro-batch size,
 * replica count d (dividing the micro-batches), ZeRO-1 on and off, schedule,
 * stage count, split, assignment of the p * d (stage, replica) slots to
 * distinct devices (a stage must fit the smallest of its d devices) and
 * recompute choice, evaluated with the reference model only (replica_model.h). Also: every
 * found plan checks against that model; the replica model's own numbers on
 * a hand-made case; plans with replicas round-trip through JSON. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vocab/plan_json.h"
#include "vocab/plan_replicas.h"
#include "planner/planner.h"
#include "planner/replica_model.h"
#include "tests/common/planner_util.h"

static int rel_close(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-12; }

/* ---- a plan against the reference model ------------------------------- */

static int check_plan(const ms_profile *prof, const ms_plan *pl)
{
    const int d = pl->replicas, m = pl->n_micro / d;
    ms_layer_cost *L = malloc((size_t)prof->n_layers * sizeof *L);
    unsigned char taken[64] = {0};
    int bad = ms_layer_costs(prof, pl->precision, pl->micro_batch, L, NULL, 0) ? printf("no costs\n") : 0;
    if (pl->micro_batch * pl->n_micro != pl->global_batch || pl->n_micro % d) bad = printf("batch does not split\n");
    for (int s = 0; s < pl->n_stages && !bad; s++) {
        const ms_plan_stage *st = &pl->stages[s];
        ms_plan_stage ref;
        ms_stage_predict_replicas(L, prof->n_layers, st->first, st->last, s, pl->n_stages, pl->schedule, m,
                                  st->recompute, prof->reserve, pl->link_gbps, d, pl->zero, pl->bus_gbps,
                                  pl->comm_reserve, &ref);
        if (memcmp(ref.bytes, st->bytes, sizeof ref.bytes) || ref.peak != st->peak) bad = printf("stage %d: bytes\n", s);
        if (!rel_close(ref.opt_ms, st->opt_ms) || !rel_close(ref.fwd_ms, st->fwd_ms)) bad = printf("stage %d: times\n", s);
        if (pl->replica_devices[s * d] != st->device) bad = printf("stage %d: replica 0 is not its device\n", s);
        for (int r = 0; r < d && !bad; r++) {
            int dev = pl->replica_devices[s * d + r];
            if (dev < 0 || dev >= pl->n_devices || taken[dev]) bad = printf("stage %d replica %d: device %d\n", s, r, dev);
            else if (st->peak > ms_usable_bytes(pl->devices[dev].capacity, pl->headroom)) bad = printf("stage %d: over\n", s);
            else taken[dev] = 1;
        }
    }
    if (!bad && !rel_close(ms_step_ms(pl->stages, pl->n_stages, m), pl->step_ms)) bad = printf("step time\n");
    free(L);
    return bad ? -1 : 0;
}

static void test_brute_force(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 1414);
    int feasible = 0, infeasible = 0, with_replicas = 0, with_zero = 0, mixed = 0;
    for (int it = 0; it < 300; it++) {
        static const int sizes[2] = {1, 2};
        int n = 2 + pu_int(&r, 4), G = (int[]){2, 4, 8, 12}[pu_int(&r, 4)];
        ms_profile *p = pu_random_profile(&r, n, 1u + (unsigned)pu_int(&r, 3), sizes, 1 + pu_int(&r, 2), G);
        uint64_t scale = pu_one_device_bytes(p);
        ms_plan_device devs[4];
        int nd = 1 + pu_int(&r, 4), homog = pu_int(&r, 2);
        double f0 = 0.1 + 0.9 * pu_uniform(&r);
        for (int k = 0; k < nd; k++) {
            devs[k].capacity = (uint64_t)((double)scale * (homog ? f0 : 0.1 + 0.9 * pu_uniform(&r)));
            snprintf(devs[k].name, sizeof devs[k].name, "cuda:%d", k);
        }
        ms_plan_opts o;
        ms_plan_opts_default(&o);
        o.replicas = pu_int(&r, 4) ? 0 : 2;
        o.zero = pu_int(&r, 3) - 1;
        if (o.zero == 1 && o.replicas == 1) o.zero = -1;
        o.recompute = pu_int(&r, 3);
        if (pu_int(&r, 3) == 0) o.schedule = pu_int(&r, 2);
        o.headroom = pu_int(&r, 2) ? 0.05 : 0.2 * pu_uniform(&r);
        o.link_gbps = pu_int(&r, 2) ? 200 : 1 + 50 * pu_uniform(&r);
        o.bus_gbps = pu_int(&r, 2) ? 200 : 0.5 + 20 * pu_uniform(&r); /* slow: replicas cost */
        if (pu_int(&r, 3) == 0) o.comm_reserve = (uint64_t)((double)scale * 0.05 * pu_uniform(&r));
        double want = pu_brute_force(p, devs, nd, &o);
        ms_plan pl;
        char err[256];
        int rc = ms_plan_search(p, devs, nd, &o, &pl, err, sizeof err);
        if (rc == MS_PLAN_ERROR) fail_msg("instance %d: %s", it, err);
        if (isinf(want)) {
            if (rc != MS_PLAN_INFEASIBLE) fail_msg("instance %d: brute force finds nothing, search %g ms", it, pl.step_ms);
            infeasible++;
        } else {
            if (rc != MS_PLAN_OK) fail_msg("instance %d: brute force finds %g ms, search nothing", it, want);
            if (!rel_close(want, pl.step_ms)) fail_msg("instance %d: brute force %.12g ms, search %.12g ms", it, want, pl.step_ms);
            if (check_plan(p, &pl)) fail_msg("instance %d: the plan is not its own model's", it);
            feasible++;
            with_replicas += pl.replicas > 1;
            with_zero += pl.zero;
            mixed += pl.replicas > 1 && !homog;
        }
        ms_plan_free(&pl);
        ms_profile_free(p);
        free(p);
    }
    printf("replicas: %d feasible (%d with replicas, %d of them ZeRO-1, %d on mixed GPUs), %d infeasible\n", feasible,
           with_replicas, with_zero, mixed, infeasible);
    assert_true(feasible > 100 && infeasible > 20);
    assert_true(with_replicas > 30 && with_zero > 10 && mixed > 5); /* the instances exercise what is new */
}

/* The model on numbers worked out by hand. */
static void test_model_by_hand(void **state)
{
    (void)state;
    assert_int_equal(ms_zero_share(8000, 1), 8000);
    assert_int_equal(ms_zero_share(8192, 2), 4096);
    assert_int_equal(ms_zero_share(8193, 2), 4352); /* ceil to 4097, up to the 256-byte grain */
    /* 1 GB of gradients over 4 replicas at 100 Gbit/s: 2 * 3/4 * 80 ms */
    assert_true(rel_close(ms_allreduce_ms(1000000000, 4, 100), 120.0));
    assert_true(ms_allreduce_ms(1000000000, 1, 100) == 0);
    assert_int_equal(ms_device_reserve(10, 5, 1, 1), 10);
    assert_int_equal(ms_device_reserve(10, 5, 1, 2), 15);
    assert_int_equal(ms_device_reserve(10, 5, 2, 1), 15);
    ms_layer_cost L[2];
    memset(L, 0, sizeof L);
    for (int l = 0; l < 2; l++) {
        L[l].param = L[l].grad = 1 << 20;
        L[l].optim = 2 << 20;
        L[l].opt_ms = 4;
    }
    ms_plan_stage st;
    ms_stage_predict_replicas(L, 2, 0, 1, 0, 1, MS_SCHED_1F1B, 1, 0, 0, 200, 2, 1, 8, 0, &st);
    assert_int_equal(st.bytes[MS_CAT_OPTIM], 2 << 20); /* 4 MiB of m/v over 2 */
    /* 8 ms of optimizer over 2, plus 2 MiB of gradients all-reduced: 2 * 1/2 * 2 MiB * 8 bit / 8 Gbit/s */
    assert_true(rel_close(st.opt_ms, 4.0 + (double)(2 << 20) * 8e-6 / 8));
}

/* A plan with replicas written and read back; a version-1 plan loads as one replica. */
static void test_json(void **state)
{
    (void)state;
    pu_rng r;
    pu_seed(&r, 3);
    static const int sizes[1] = {1};
    ms_profile *p = pu_random_profile(&r, 4, 1u, sizes, 1, 8);
    ms_plan_device devs[4];
    for (int k = 0; k < 4; k++) devs[k] = (ms_plan_device){"cuda:0", pu_one_device_bytes(p) * 2};
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    o.replicas = 2;
    o.zero = 1;
    o.max_stages = 2;
    ms_plan a, b;
    char err[256];
    assert_int_equal(ms_plan_search(p, devs, 4, &o, &a, err, sizeof err), MS_PLAN_OK);
    assert_int_equal(a.replicas, 2);
    assert_int_equal(a.zero, 1);
    json_t *j = ms_plan_to_json(&a);
    assert_int_equal(ms_plan_from_json(j, &b, err, sizeof err), 0);
    assert_int_equal(b.replicas, 2);
    assert_int_equal(b.zero, 1);
    assert_int_equal(ms_plan_ranks(&b), 2 * a.n_stages);
    for (int k = 0; k < ms_plan_ranks(&a); k++) assert_int_equal(ms_plan_rank_device(&a, k, NULL, NULL), ms_plan_rank_device(&b, k, NULL, NULL));
    ms_plan_free(&b);
    /* a device twice */
    json_t *st = json_object_get(json_array_get(json_object_get(j, "stages"), 0), "replica_devices");
    json_array_set_new(st, 1, json_integer(json_integer_value(json_array_get(st, 0))));
    assert_int_equal(ms_plan_from_json(j, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "already runs a stage"));
    /* version 1, no replica keys: one replica */
    json_object_set_new(j, "version", json_integer(1));
    json_object_del(j, "replicas");
    json_object_del(j, "zero");
    json_object_del(j, "bus_gbps");
    json_object_del(j, "comm_reserve_bytes");
    assert_int_equal(ms_plan_from_json(j, &b, err, sizeof err), 0);
    assert_int_equal(b.replicas, 1);
    assert_int_equal(b.zero, 0);
    ms_plan_free(&b);
    json_decref(j);
    ms_plan_free(&a);
    ms_profile_free(p);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_by_hand),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_brute_force),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
