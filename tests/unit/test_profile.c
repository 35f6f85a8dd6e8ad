/* test_profile.c — the profiler's trial on the CPU backend:
 *  - seed17-cpu at its capacity runs out in the forward pass of block 17,
 *    and the profile is completed (every layer has a row);
 *  - a model that fits says so, with full rows;
 *  - for capacities below the full-run peak, live <= capacity < live +
 *    requested, and a larger capacity never moves the OOM earlier;
 *  - identical blocks have identical byte rows;
 *  - a block's act bytes equal the analytic count of what it keeps;
 *  - --precision all / two batch sizes give rows for every combination,
 *    and act scales with the micro-batch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "profiler/trial.h"
#include "trainer/device.h"

static ms_trial_opts opts1(const ms_config *c)
{
    ms_trial_opts o;
    memset(&o, 0, sizeof o);
    o.steps = 1;
    o.precisions[0] = c->precision;
    o.n_prec = 1;
    o.batches[0] = c->batch;
    o.n_batch = 1;
    return o;
}

static void small(ms_config *c)
{
    char err[256];
    assert_int_equal(ms_config_preset(c, "tiny", err, sizeof err), 0);
    c->n_layer = 4;
    c->seq_len = 16;
    c->vocab = 128;
}

static void test_seed17_cpu(void **st)
{
    (void)st;
    ms_config c;
    char err[256];
    assert_int_equal(ms_config_preset(&c, "seed17-cpu", err, sizeof err), 0);
    ms_trial_opts o = opts1(&c);
    ms_trial_result r;
    assert_int_equal(ms_trial_run(&c, &o, &r), MS_EOOM);
    const ms_profile *p = &r.prof;
    assert_false(p->fits);
    assert_true(p->oom.happened);
    assert_int_equal(p->oom.layer, 17);
    assert_string_equal(p->oom.layer_name, "block 17");
    assert_int_equal(p->oom.phase, MS_PH_FORWARD);
    assert_int_equal(p->oom.category, MS_CAT_ACT);
    uint64_t live = 0;
    for (int k = 0; k < MS_CAT_N; k++) live += p->oom.live_by_cat[k];
    assert_true(live <= p->oom.capacity);
    assert_true(live + p->oom.requested > p->oom.capacity);
    /* live by layer adds up to the live bytes held by layers */
    uint64_t by_layer = 0;
    for (int i = 0; i < p->oom.n_live_layers; i++) by_layer += p->oom.live_by_layer[i];
    assert_true(by_layer == live);
    /* completed: every layer has a full set of bytes */
    assert_int_equal(p->n_rows, c.n_layer + 2);
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *row = &p->rows[i];
        assert_int_equal(row->layer, i);
        assert_true(row->param > 0 && row->grad > 0 && row->optim > 0 && row->act > 0);
        assert_true(row->transient_bwd > 0);
    }
    assert_int_equal(p->rows[17].source, MS_ROW_ISOLATED);
    ms_trial_free(&r);
}

static void test_fits_and_rows(void **st)
{
    (void)st;
    ms_config c;
    small(&c);
    ms_trial_opts o = opts1(&c);
    ms_trial_result r;
    assert_int_equal(ms_trial_run(&c, &o, &r), MS_OK);
    const ms_profile *p = &r.prof;
    assert_true(p->fits);
    assert_false(p->oom.happened);
    assert_true(p->peak > 0);
    for (int i = 0; i < p->n_rows; i++) assert_int_equal(p->rows[i].source, MS_ROW_FULL);
    /* identical blocks, identical byte rows */
    for (int i = 2; i <= c.n_layer; i++) {
        const ms_layer_row *a = &p->rows[1], *b = &p->rows[i];
        assert_true(a->param == b->param && a->master == b->master && a->grad == b->grad && a->optim == b->optim);
        assert_true(a->act == b->act && a->transient_bwd == b->transient_bwd && a->out_bytes == b->out_bytes);
    }
    /* analytic act of a block (model.c): ln1, att, res2, out [N,C] (not ln2:
     * backward recomputes it); qkv [N,3C];
     * fc_pre, fc_gelu [N,H]; two mean/rstd pairs [N]; lse [B,nh,T] fp32; each
     * view 256-byte aligned, the arena rounded to the CPU's 256-byte grain. */
    size_t N = (size_t)c.batch * c.seq_len, C = c.d_model, H = (size_t)c.mlp_ratio * C, es = 4;
#define A(x) (((x) + 255) / 256 * 256)
    size_t act = 4 * A(N * C * es) + A(N * 3 * C * es) + 2 * A(N * H * es) + 4 * A(N * 4) +
                 A((size_t)c.batch * c.n_head * c.seq_len * 4);
#undef A
    assert_true(p->rows[1].act == act);
    /* the trial's peak is within the sum of the rows' static bytes + acts + largest transient */
    uint64_t sum = 0, tr = 0;
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *row = &p->rows[i];
        sum += row->param + row->master + row->grad + row->optim + row->act;
        if (row->transient_bwd > tr) tr = row->transient_bwd;
    }
    assert_true(p->peak >= sum);
    assert_true(p->peak <= sum + tr + 4096);
    ms_trial_free(&r);
}

static void test_boundary(void **st)
{
    (void)st;
    ms_config c;
    small(&c);
    ms_trial_opts o = opts1(&c);
    ms_trial_result r;
    assert_int_equal(ms_trial_run(&c, &o, &r), MS_OK);
    uint64_t peak = r.prof.peak;
    ms_trial_free(&r);
    int prev = -1;
    for (uint64_t cap = peak / 6; cap < peak; cap += peak / 23) {
        c.gpu_mem = cap;
        assert_int_equal(ms_trial_run(&c, &o, &r), MS_EOOM);
        const ms_oom_info *x = &r.prof.oom;
        uint64_t live = 0;
        for (int k = 0; k < MS_CAT_N; k++) live += x->live_by_cat[k];
        assert_true(live <= cap);
        assert_true(live + x->requested > cap);
        int rank = x->phase == MS_PH_INIT ? x->layer
                 : x->phase == MS_PH_FORWARD ? 1000 + x->layer
                 : x->phase == MS_PH_BACKWARD ? 2000 + (1000 - x->layer) : 4000;
        assert_true(rank >= prev);
        prev = rank;
        ms_trial_free(&r);
    }
}

static void test_all_precisions_two_batches(void **st)
{
    (void)st;
    ms_config c;
    small(&c);
    ms_trial_opts o = opts1(&c);
    o.precisions[1] = MS_PREC_BF16;
    o.precisions[2] = MS_PREC_FP16;
    o.n_prec = 3;
    o.batches[1] = 2 * c.batch;
    o.n_batch = 2;
    ms_trial_result r;
    assert_int_equal(ms_trial_run(&c, &o, &r), MS_OK);
    const ms_profile *p = &r.prof;
    int nl = c.n_layer + 2;
    assert_int_equal(p->n_rows, nl * 6);
    for (int prec = 0; prec < 3; prec++)
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < nl; i++) assert_non_null(ms_profile_find(p, i, prec, b ? 2 * c.batch : c.batch));
    const ms_layer_row *f1 = ms_profile_find(p, 1, MS_PREC_FP32, c.batch);
    const ms_layer_row *b1 = ms_profile_find(p, 1, MS_PREC_BF16, c.batch);
    const ms_layer_row *b2 = ms_profile_find(p, 1, MS_PREC_BF16, 2 * c.batch);
    assert_true(b1->master > 0 && f1->master == 0);
    assert_true(b1->act < f1->act);          /* 16-bit activations */
    assert_true(b2->act > b1->act);          /* more sequences, more activations */
    assert_true(b2->param == b1->param);     /* parameters do not depend on the batch */
    ms_trial_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed17_cpu),
        cmocka_unit_test(test_fits_and_rows),
        cmocka_unit_test(test_boundary),
        cmocka_unit_test(test_all_precisions_two_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
