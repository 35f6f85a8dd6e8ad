/* test_step_graph.c — a session that replays its micro-batches as a CUDA
 * graph (trainer/step_graph.h) trains like one that launches every kernel:
 *  - per-step losses and final weights with use_graph 1 against 0, in fp32
 *    and bf16, with one and with two micro-batches per step, and in fp16
 *    with a loss scale that doubles every two steps (each new scale needs a
 *    new graph);
 *  - a capture begun while the step still allocates is thrown away: the
 *    micro-batch runs as usual, no OOM is reported, the next capture holds;
 *  - while capturing, the device refuses to allocate or free and says so,
 *    and a scratch buffer that would have to grow is refused, not freed;
 *  - with launch_ahead (the next step's first micro-batch queued before a
 *    step's reads), the same losses and weights, in fp32 and bf16, with one
 *    and two micro-batches; never under fp16; while one is queued a
 *    checkpoint is refused and the run goes on unharmed.
 * On the CPU (GRAPH_DEVICE "cpu") no graph is ever made and the runs are
 * bit for bit the same. tests/gpu/test_step_graph_gpu.c runs this on cuda:0,
 * where every run must replay graphs, within GRAPH_TOL: the kernels and
 * algorithms are the same (no timed pick), but float atomics sum in another
 * order from run to run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/exec.h"
#include "trainer/session.h"

#ifndef GRAPH_DEVICE
#define GRAPH_DEVICE "cpu"
#define GRAPH_TOL 0.0
#define GRAPH_TOL16 0.0
#define GRAPH_ON_GPU 0
#endif

#define STEPS 6

typedef struct run_out {
    double loss[STEPS];
    float **w;
    int n_layers;
    ms_step_graph graph;
    int launched_ahead;
} run_out;

static void config(ms_config *c, ms_precision prec, int accum)
{
    char err[256];
    assert_int_equal(ms_config_preset(c, "tiny", err, sizeof err), 0);
    c->n_layer = 3;
    c->d_model = 64;
    c->n_head = 2;
    c->seq_len = 32;
    c->vocab = 128;
    c->batch = 2;
    c->accum = accum;
    c->precision = prec;
    c->loss_scale = 1024.0f;
    c->loss_scale_window = 2;
    c->steps = STEPS;
    c->matmul_pick = 0; /* both runs on the heuristic's algorithms */
    snprintf(c->device, sizeof c->device, "%s", GRAPH_DEVICE);
}

/* early_capture: claim a step has run, so that the first micro-batch tries
 * to capture while every buffer is still to be allocated. ahead: set
 * launch_ahead before every step but the last, as train does; with
 * ckpt_step, also try a checkpoint after that step while the next one is
 * queued (it must be refused). */
static void train_ex(const ms_config *c, int use_graph, int early_capture, int ahead, int ckpt_step, run_out *out)
{
    ms_session s;
    assert_int_equal(ms_session_open(&s, c, NULL), MS_OK);
    s.use_graph = use_graph;
    if (early_capture) s.steps_run = 1;
    for (int i = 0; i < STEPS; i++) {
        s.launch_ahead = ahead && i + 1 < STEPS;
        int rc = ms_session_step(&s);
        if (rc != MS_OK) fail_msg("step %d: %s", i + 1, s.err);
        out->loss[i] = s.last_loss;
        if (i + 1 == ckpt_step) {
            char path[64];
            snprintf(path, sizeof path, "/tmp/ms_step_graph_%d.ckpt", (int)getpid());
            rc = ms_session_save(&s, path);
            if (GRAPH_ON_GPU) assert_true(s.ahead);
            if (s.ahead) {
                assert_int_equal(rc, MS_EFAIL);
                assert_non_null(strstr(s.err, "while the next step is queued"));
                s.err[0] = '\0';
            } else {
                assert_int_equal(rc, MS_OK);
            }
            remove(path);
        }
    }
    assert_false(s.dev.oom.happened);
    out->n_layers = s.model.n_layers;
    out->w = calloc((size_t)out->n_layers, sizeof *out->w);
    for (int i = 0; i < out->n_layers; i++) {
        size_t n = s.model.layers[i].n_params;
        out->w[i] = malloc(n * 4);
        assert_int_equal(ms_dev_d2h(&s.dev, out->w[i], s.model.layers[i].w, n * 4), 0);
    }
    assert_false(s.ahead); /* never past the last step */
    out->graph = s.graph;
    out->graph.exec = out->graph.graph = NULL;
    out->launched_ahead = s.launched_ahead;
    ms_session_close(&s);
}

static void train(const ms_config *c, int use_graph, int early_capture, run_out *out)
{
    train_ex(c, use_graph, early_capture, 0, 0, out);
}

static void free_out(run_out *o)
{
    for (int i = 0; i < o->n_layers; i++) free(o->w[i]);
    free(o->w);
}

static size_t n_params_of(const ms_config *c, int layer)
{
    ms_model m;
    char err[256];
    assert_int_equal(ms_model_init(&m, c, err, sizeof err), 0);
    size_t n = m.layers[layer].n_params;
    ms_model_free(&m);
    return n;
}

static void compare(const ms_config *c, const run_out *a, const run_out *b, double tol)
{
    for (int i = 0; i < STEPS; i++) {
        double d = fabs(a->loss[i] - b->loss[i]) / fmax(fabs(a->loss[i]), 1e-12);
        if (d > tol) fail_msg("step %d: loss %.9g with the graph, %.9g without (rel %.3g)", i + 1, a->loss[i], b->loss[i], d);
    }
    for (int l = 0; l < a->n_layers; l++) {
        size_t n = n_params_of(c, l);
        double num = 0, den = 0;
        for (size_t k = 0; k < n; k++) {
            double e = (double)a->w[l][k] - b->w[l][k];
            num += e * e;
            den += (double)b->w[l][k] * b->w[l][k];
        }
        double rel = sqrt(num / fmax(den, 1e-30));
        if (rel > tol) fail_msg("layer %d: weights differ by %.3g relative", l, rel);
    }
}

static void check_run(ms_precision prec, int accum, double tol)
{
    ms_config c;
    config(&c, prec, accum);
    run_out with, without;
    train(&c, 1, 0, &with);
    train(&c, 0, 0, &without);
    compare(&c, &with, &without, tol);
    assert_int_equal(without.graph.captures, 0);
    if (GRAPH_ON_GPU) {
        if (with.graph.why_not[0]) fail_msg("no graph: %s", with.graph.why_not);
        /* once after the first step; fp16's scale doubles every 2 steps: again after each */
        assert_true(with.graph.captures >= 1);
        if (prec == MS_PREC_FP16) assert_true(with.graph.captures >= 2);
        assert_int_equal(with.graph.thrown, 0);
    } else {
        assert_int_equal(with.graph.captures, 0);
    }
    free_out(&with);
    free_out(&without);
}

/* The same with launch_ahead: from the second replayed step on, each step
 * queues the next (steps 2..STEPS-1 do: the first makes the graph at its
 * end, the last has no next), except under fp16. */
static void check_ahead(ms_precision prec, int accum, double tol, int ckpt_step)
{
    ms_config c;
    config(&c, prec, accum);
    run_out ahead, plain;
    train_ex(&c, 1, 0, 1, ckpt_step, &ahead);
    train(&c, 0, 0, &plain);
    compare(&c, &ahead, &plain, tol);
    if (GRAPH_ON_GPU) {
        if (ahead.graph.why_not[0]) fail_msg("no graph: %s", ahead.graph.why_not);
        assert_int_equal(ahead.launched_ahead, prec == MS_PREC_FP16 ? 0 : STEPS - 2);
    } else {
        assert_int_equal(ahead.launched_ahead, 0);
    }
    free_out(&ahead);
    free_out(&plain);
}

static void test_fp32(void **st) { (void)st; check_run(MS_PREC_FP32, 1, GRAPH_TOL); }
static void test_fp32_ahead(void **st) { (void)st; check_ahead(MS_PREC_FP32, 1, GRAPH_TOL, 0); }
static void test_fp32_two_micro_ahead(void **st) { (void)st; check_ahead(MS_PREC_FP32, 2, GRAPH_TOL, 0); }
static void test_bf16_ahead(void **st) { (void)st; check_ahead(MS_PREC_BF16, 1, GRAPH_TOL16, 0); }
static void test_fp16_never_ahead(void **st) { (void)st; check_ahead(MS_PREC_FP16, 1, GRAPH_TOL16, 0); }
/* a checkpoint tried after step 3, while step 4 is queued: refused, and the
 * run's losses and weights are still the plain run's */
static void test_checkpoint_refused_ahead(void **st) { (void)st; check_ahead(MS_PREC_FP32, 1, GRAPH_TOL, 3); }
static void test_fp32_two_micro(void **st) { (void)st; check_run(MS_PREC_FP32, 2, GRAPH_TOL); }
static void test_bf16(void **st) { (void)st; check_run(MS_PREC_BF16, 1, GRAPH_TOL16); }
static void test_fp16_scale_moves(void **st) { (void)st; check_run(MS_PREC_FP16, 2, GRAPH_TOL16); }

static void test_capture_while_allocating(void **st)
{
    (void)st;
    ms_config c;
    config(&c, MS_PREC_FP32, 2);
    run_out early, plain;
    train(&c, 1, 1, &early);
    train(&c, 0, 0, &plain);
    compare(&c, &early, &plain, GRAPH_TOL);
    if (GRAPH_ON_GPU) {
        if (early.graph.why_not[0]) fail_msg("no graph: %s", early.graph.why_not);
        assert_int_equal(early.graph.thrown, 1); /* the first micro-batch's: it allocates */
        assert_true(early.graph.captures >= 1);
    }
    free_out(&early);
    free_out(&plain);
}

static void test_device_refuses_while_capturing(void **st)
{
    (void)st;
    ms_device d;
    char err[256];
    memset(&d, 0, sizeof d);
    assert_int_equal(ms_dev_open(&d, 0, "cpu", 0, 0, err, sizeof err), 0);
    void *p = ms_dev_alloc(&d, 4096, MS_CAT_ACT, "kept", 0);
    assert_non_null(p);
    size_t live = d.live_total, allocs = d.n_allocs, frees = d.n_frees;
    ms_scratch scr;
    memset(&scr, 0, sizeof scr);
    scr.dev = &d;
    void *sp = ms_scratch_get(&scr, MS_TR_ARENA, 1024);
    assert_non_null(sp);
    live = d.live_total;
    allocs = d.n_allocs;

    d.capturing = 1;
    assert_null(ms_dev_alloc(&d, 4096, MS_CAT_ACT, "refused", 0));
    assert_int_equal(d.capture_broken, 1);
    assert_false(d.oom.happened);
    d.capture_broken = 0;
    ms_dev_free(&d, p);
    assert_int_equal(d.capture_broken, 1);
    assert_int_equal(ms_dev_size_of(&d, p), 4096 > d.grain ? 4096 : d.grain);
    d.capture_broken = 0;
    assert_ptr_equal(ms_scratch_get(&scr, MS_TR_ARENA, 512), sp); /* fits: no allocation, fine */
    assert_int_equal(d.capture_broken, 0);
    assert_null(ms_scratch_get(&scr, MS_TR_ARENA, 1 << 20)); /* would grow: refused, kept */
    assert_int_equal(d.capture_broken, 1);
    assert_ptr_equal(scr.buf[MS_TR_ARENA], sp);
    assert_int_equal(d.live_total, live);
    assert_int_equal(d.n_allocs, allocs);
    assert_int_equal(d.n_frees, frees);

    d.capturing = 0;
    ms_dev_free(&d, p);
    assert_int_equal(ms_dev_size_of(&d, p), 0);
    assert_non_null(ms_scratch_get(&scr, MS_TR_ARENA, 1 << 20));
    ms_scratch_release(&scr);
    assert_int_equal(d.live_total, (size_t)0);
    ms_dev_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_refuses_while_capturing),
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_fp32_two_micro),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_fp16_scale_moves),
        cmocka_unit_test(test_capture_while_allocating),
        cmocka_unit_test(test_fp32_ahead),
        cmocka_unit_test(test_fp32_two_micro_ahead),
        cmocka_unit_test(test_bf16_ahead),
        cmocka_unit_test(test_fp16_never_ahead),
        cmocka_unit_test(test_checkpoint_refused_ahead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
