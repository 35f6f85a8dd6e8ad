/* test_planner_sequential.c — the sequential schedule's search (a program's
 * plan) against brute force: on random small program profiles and random
 * mixed devices, every stage count, every ordered choice of devices and
 * every contiguous split is tried with the same stage model (the stage
 * rules, or the profile's record replayed when it has one); the search
 * must find the same best step time (and say infeasible exactly when
 * nothing fits), and every stage it returns must fit its device. */
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
#include "planner/planner.h"
#include "planner/record_replay.h"
#include "planner/sequential.h"
#include "tests/common/planner_util.h"
#include "tests/common/record_util.h"

#define MAXL 7
#define MAXD 3

typedef struct bf {
    const ms_layer_cost *L;
    const ms_prog_record *rec;  /* the stages' peaks when set, else the rules */
    int n, grads_freed, m;
    const ms_loss_row *loss;
    uint64_t reserve;
    double link, best;
    uint64_t avail[MAXD];
    int n_dev;
} bf;

static double stage_ms(const ms_layer_cost *L, int a, int b, int last, double link)
{
    double t = 0;
    for (int l = a; l <= b; l++) t += L[l].fwd_ms + L[l].bwd_ms;
    if (!last) t += 2 * ms_transfer_ms(L[b].out_bytes, link);
    return t;
}

/* stage s starts at layer a; used: devices taken; acc: time so far */
static void search(bf *x, int a, unsigned used, double acc)
{
    if (a == x->n) {
        double opt = 0;
        for (int l = 0; l < x->n; l++) opt += x->L[l].opt_ms;
        double ms = x->m * acc + opt;
        if (ms < x->best) x->best = ms;
        return;
    }
    for (int d = 0; d < x->n_dev; d++) {
        if (used & (1u << d)) continue;
        for (int b = a; b < x->n; b++) {
            uint64_t by[MS_CAT_N];
            uint64_t in = a > 0 ? x->L[a - 1].out_bytes : 0, out = b < x->n - 1 ? x->L[b].out_bytes : 0;
            uint64_t pk = x->rec ? ms_record_stage(x->rec, a, b, by) + x->reserve
                                 : ms_seq_stage_peak(x->L, x->n, a, b, in, out, x->grads_freed, 1, x->loss, x->reserve, by);
            if (pk > x->avail[d]) continue;
            search(x, b + 1, used | (1u << d), acc + stage_ms(x->L, a, b, b == x->n - 1, x->link));
        }
    }
}

/* with_record: each profile has a record of its layers (most bytes in
 * steps of 64 KiB), and each stage of a plan must be its range replayed
 * plus the reserve, its categories too. */
static void against_brute_force(int with_record)
{
    pu_rng r;
    pu_seed(&r, with_record ? 777 : 4242);
    int feasible = 0, infeasible = 0, rules_differ = 0;
    for (int it = 0; it < 400; it++) {
        int n = 2 + pu_int(&r, MAXL - 1);
        int sizes[1] = {1 + pu_int(&r, 4)};
        ms_profile *p = pu_random_profile(&r, n, 1u, sizes, 1, sizes[0]);
        snprintf(p->fingerprint, sizeof p->fingerprint, "fnv64:%016x", it);   /* a program's profile */
        p->grads_freed = pu_int(&r, 3);   /* kept, freed before the forward, or before backward */
        for (int i = 0; i < p->n_rows; i++) p->rows[i].transient_opt = (pu_next(&r) % 8) << 20;
        if (pu_int(&r, 4)) {   /* a loss row (most programs'): made by the last layer or a tied layer 0 */
            p->loss = (ms_loss_row){ .present = 1, .made_in = pu_int(&r, 2) ? n - 1 : 0 };
            uint64_t *f[6] = { &p->loss.outputs, &p->loss.held, &p->loss.transient_fwd, &p->loss.transient_bwd,
                               &p->loss.carry, &p->loss.carry_loss };
            for (int k = 0; k < 6; k++) *f[k] = (pu_next(&r) % 64) << 20;
            if (p->loss.carry_loss > p->loss.carry) p->loss.carry_loss = p->loss.carry;
        }
        ms_layer_cost L[MAXL];
        assert_int_equal(ms_layer_costs(p, 0, sizes[0], L, NULL, 0), 0);
        int nd = 1 + pu_int(&r, MAXD);
        ms_plan_device devs[MAXD];
        uint64_t total = 0;
        for (int l = 0; l < n; l++) total += L[l].param + L[l].grad + L[l].optim + L[l].act;
        if (with_record) {
            p->record = ru_random_record(&r, n, 10 + pu_int(&r, 80), 60);
            assert_non_null(p->record);
            total = 0;
            for (int i = 0; i < p->record->n; i++) {
                p->record->s[i].bytes = (p->record->s[i].bytes % 1000) << 16;
                total += p->record->s[i].bytes;
            }
            total /= 3;   /* storages live a fraction of the record: the sum is far above any peak */
        }
        for (int d = 0; d < nd; d++) {
            snprintf(devs[d].name, sizeof devs[d].name, "cuda:%d", d);
            devs[d].capacity = p->reserve + total / (uint64_t)(1 + pu_int(&r, 3)) + (pu_next(&r) % (64ull << 20));
        }
        ms_plan_opts o;
        ms_plan_opts_default(&o);
        o.headroom = 0;
        o.schedule = MS_SCHED_SEQUENTIAL;
        o.recompute = MS_RECOMPUTE_NEVER;
        o.micro_batch = sizes[0];          /* a program's batch is its own */
        o.precision = 0;
        bf x = { .L = L, .rec = p->record, .n = n, .grads_freed = p->grads_freed, .m = 1, .loss = &p->loss,
                 .reserve = p->reserve, .link = o.link_gbps, .best = INFINITY, .n_dev = nd };
        for (int d = 0; d < nd; d++) x.avail[d] = devs[d].capacity;
        search(&x, 0, 0, 0);
        ms_plan pl;
        char err[256];
        int rc = ms_plan_search(p, devs, nd, &o, &pl, err, sizeof err);
        if (isinf(x.best)) {
            if (rc != MS_PLAN_INFEASIBLE) fail_msg("instance %d: brute force finds nothing, search says %d", it, rc);
            infeasible++;
        } else {
            if (rc != MS_PLAN_OK) fail_msg("instance %d: brute force %.6f ms, search %d (%s)", it, x.best, rc, err);
            if (fabs(pl.step_ms - x.best) > 1e-9 * x.best)
                fail_msg("instance %d: brute force %.9f ms, search %.9f ms", it, x.best, pl.step_ms);
            for (int s = 0; s < pl.n_stages; s++) {
                const ms_plan_stage *st = &pl.stages[s];
                assert_true(st->peak <= devs[st->device].capacity);
                if (!with_record) continue;
                uint64_t by[MS_CAT_N], sum = 0, at;
                assert_int_equal(st->peak, ms_record_stage(p->record, st->first, st->last, by) + p->reserve);
                assert_int_equal(st->bytes[MS_CAT_RESERVE], by[MS_CAT_RESERVE] + p->reserve);
                for (int c = 0; c < MS_CAT_N; c++) sum += st->bytes[c];
                assert_int_equal(sum, st->peak);
                /* a record's moments are positions: no (layer, phase) answer */
                assert_int_equal(ms_plan_stage_live_at(p, &pl, s, st->first, MS_PH_FORWARD, &at), -1);
                uint64_t in = st->first > 0 ? L[st->first - 1].out_bytes : 0;
                uint64_t out = st->last < n - 1 ? L[st->last].out_bytes : 0;
                rules_differ += ms_seq_stage_peak(L, n, st->first, st->last, in, out, p->grads_freed, 1, &p->loss,
                                                  p->reserve, by) != st->peak;
            }
            assert_int_equal(pl.schedule, MS_SCHED_SEQUENTIAL);
            feasible++;
            ms_plan_free(&pl);
        }
        ms_profile_free(p);
        free(p);
    }
    assert_true(feasible > 50 && infeasible > 10);   /* both kinds of instance were met */
    assert_true(!with_record || rules_differ > 50);  /* and the record, not the rules, decided */
}

static void test_against_brute_force(void **state)
{
    (void)state;
    against_brute_force(0);
}

static void test_record_against_brute_force(void **state)
{
    (void)state;
    against_brute_force(1);
}

/* When the program frees its gradients decides what is live at the loss:
 * one root stage of two layers (grads 100 + 200), the loss's backward
 * transient (1000) above its forward one (10). Kept: the gradients are
 * there at the loss's backward. Freed before the forward: none are there
 * yet. Freed after the forward (Lightning): there through the forward,
 * gone when the loss's backward begins; so the loss's backward moment has
 * none, and a forward moment, not the loss, can be the peak. */
static void test_when_gradients_are_freed(void **state)
{
    (void)state;
    ms_layer_cost L[2] = {
        { .param = 50, .grad = 100, .optim = 200, .act = 40, .transient_fwd = 5, .transient_bwd = 20 },
        { .param = 60, .grad = 200, .optim = 400, .act = 30, .transient_fwd = 700, .transient_bwd = 20 },
    };
    ms_loss_row loss = { .present = 1, .made_in = 1, .outputs = 8, .held = 16, .transient_fwd = 10,
                         .transient_bwd = 1000 };
    uint64_t by[MS_CAT_N];
    const uint64_t fixed = 50 + 60 + 200 + 400;
    uint64_t kept = ms_seq_stage_peak(L, 2, 0, 1, 0, 0, MS_GRADS_KEPT, 1, &loss, 0, by);
    assert_int_equal(kept, fixed + 300 + 70 + 16 + 1000);
    assert_int_equal(by[MS_CAT_GRAD], 300);
    uint64_t first = ms_seq_stage_peak(L, 2, 0, 1, 0, 0, MS_GRADS_FREED_BEFORE_FORWARD, 1, &loss, 0, by);
    assert_int_equal(first, fixed + 70 + 16 + 1000);
    assert_int_equal(by[MS_CAT_GRAD], 0);
    /* Lightning: the loss's backward has no gradients (fixed + 1086); layer
     * 1's forward has them all: fixed + 300 + 40 + 30 + 700 = fixed + 1070;
     * the loss's backward still wins here */
    uint64_t late = ms_seq_stage_peak(L, 2, 0, 1, 0, 0, MS_GRADS_FREED_BEFORE_BACKWARD, 1, &loss, 0, by);
    assert_int_equal(late, fixed + 70 + 16 + 1000);
    assert_int_equal(by[MS_CAT_GRAD], 0);
    loss.transient_bwd = 900;   /* now the forward with last step's gradients is the peak */
    late = ms_seq_stage_peak(L, 2, 0, 1, 0, 0, MS_GRADS_FREED_BEFORE_BACKWARD, 1, &loss, 0, by);
    assert_int_equal(late, fixed + 300 + 70 + 700);
    assert_int_equal(by[MS_CAT_GRAD], 300);
    assert_int_equal(by[MS_CAT_TRANSIENT], 700);
    /* asked about one moment (what doctor compares an OOM with): layer 1's
     * forward is the peak here; the loss's backward holds no gradients;
     * a layer the stage never runs has no answer */
    uint64_t at = 0;
    assert_int_equal(ms_seq_stage_live_at(L, 2, 0, 1, 0, 0, MS_GRADS_FREED_BEFORE_BACKWARD, &loss, 0, 1, MS_PH_FORWARD,
                                          &at), 0);
    assert_int_equal(at, fixed + 300 + 70 + 700);
    assert_int_equal(ms_seq_stage_live_at(L, 2, 0, 1, 0, 0, MS_GRADS_FREED_BEFORE_BACKWARD, &loss, 0, 2, MS_PH_BACKWARD,
                                          &at), 0);
    assert_int_equal(at, fixed + 70 + 16 + 900);
    assert_int_equal(ms_seq_stage_live_at(L, 2, 0, 1, 0, 0, MS_GRADS_KEPT, &loss, 0, 0, MS_PH_FORWARD, &at), 0);
    assert_int_equal(at, fixed + 300 + 40 + 5);
    assert_int_equal(ms_seq_stage_live_at(L, 2, 1, 1, 0, 0, MS_GRADS_KEPT, &loss, 0, 0, MS_PH_FORWARD, &at), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_brute_force),
        cmocka_unit_test(test_record_against_brute_force),
        cmocka_unit_test(test_when_gradients_are_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
