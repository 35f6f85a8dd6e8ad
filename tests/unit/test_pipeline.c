/* test_pipeline.c — the split run equals the single-device run on the CPU
 * backend: for 2, 3 and 4 stages, GPipe and 1F1B, recompute on and off,
 * layernorm and batchnorm, the per-step losses and the final weights match
 * the single-device run with the same micro-batch size and count (within
 * 1e-5 relative; on the CPU they are in fact bit-identical, since gradients
 * accumulate over micro-batches in the same order; weights compare by each
 * layer's relative norm). Also: the schedules'
 * op lists are valid and keep at most k micro-batches in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/pipeline.h"
#include "trainer/session.h"

#define STEPS 5
/* tests/gpu/test_pipeline_gpu.c builds this file for virtual devices on a GPU */
#ifndef PIPE_DEVICE
#define PIPE_DEVICE "cpu"
#define PIPE_TOL 1e-5
#define PIPE_D_MODEL 32
#define PIPE_HEADS 4
#endif

static int g_micro = 4; /* micro-batches per step (both runs) */

static void base_config(ms_config *c, ms_norm norm)
{
    char err[256];
    assert_int_equal(ms_config_preset(c, "tiny", err, sizeof err), 0);
    c->n_layer = 4;
    c->d_model = PIPE_D_MODEL;
    c->n_head = PIPE_HEADS;
    snprintf(c->device, sizeof c->device, "%s", PIPE_DEVICE);
    c->seq_len = 16;
    c->vocab = 128;
    c->batch = 2;
    c->accum = g_micro;
    c->norm = norm;
    /* the session never picks (only cmd_train sets it): the split run keeps
     * the heuristic's algorithms too, so both run the same kernels */
    c->matmul_pick = 0;
}

static void single_run(const ms_config *c, double *losses, float **weights)
{
    ms_session s;
    assert_int_equal(ms_session_open(&s, c, NULL), MS_OK);
    for (int i = 0; i < STEPS; i++) {
        assert_int_equal(ms_session_step(&s), MS_OK);
        losses[i] = s.last_loss;
    }
    for (int i = 0; i < s.model.n_layers; i++) {
        weights[i] = malloc(s.model.layers[i].n_params * 4);
        assert_int_equal(ms_dev_d2h(&s.dev, weights[i], s.model.layers[i].w, s.model.layers[i].n_params * 4), 0);
    }
    ms_session_close(&s);
}

static void split_spec(ms_pipe_spec *sp, int n_layers, int p, ms_pipe_schedule sch, int recompute)
{
    memset(sp, 0, sizeof *sp);
    sp->n_devices = p;
    sp->virtual_share = 1;
    sp->n_stages = p;
    sp->schedule = sch;
    sp->micro_batch = 2;
    sp->n_micro = g_micro;
    for (int s = 0; s < p; s++) {
#ifdef PIPE_DISTINCT
        snprintf(sp->device[s], sizeof sp->device[s], "cuda:%d", s); /* a GPU per stage: NCCL between them */
        sp->virtual_share = 0;
#else
        snprintf(sp->device[s], sizeof sp->device[s], "%s", PIPE_DEVICE);
#endif
        sp->stage_device[s] = s;
        sp->first[s] = s * n_layers / p;
        sp->last[s] = (s + 1) * n_layers / p - 1;
        sp->recompute[s] = recompute;
    }
}

static int n_checked;

#ifndef PIPE_MAX_P
#define PIPE_MAX_P() 4
#endif

static void check_split_prec(ms_norm norm, int p, ms_pipe_schedule sch, int recompute, ms_precision prec, double tol)
{
    if (p > PIPE_MAX_P()) p = PIPE_MAX_P(); /* one GPU per stage: no more stages than GPUs */
    ms_config c;
    base_config(&c, norm);
    c.precision = prec;
    double ref[STEPS], got[STEPS];
    float *w[16];
    single_run(&c, ref, w);
    ms_pipe_spec sp;
    split_spec(&sp, c.n_layer + 2, p, sch, recompute);
    ms_pipeline pl;
    int rc = ms_pipe_open(&pl, &c, &sp);
    if (rc) printf("open: %s\n", pl.err);
    assert_int_equal(rc, MS_OK);
    for (int i = 0; i < STEPS; i++) {
        rc = ms_pipe_step(&pl);
        if (rc) printf("step: %s\n", pl.err);
        assert_int_equal(rc, MS_OK);
        got[i] = pl.last_loss;
        double rel = fabs(got[i] - ref[i]) / fabs(ref[i]);
        if (rel > tol) printf("p=%d %s rc=%d step %d: %.9g vs %.9g\n", p, sch ? "1f1b" : "gpipe", recompute, i, got[i], ref[i]);
        assert_true(rel <= tol);
    }
    for (int i = 0; i < pl.model.n_layers; i++) {
        const ms_layer *L = &pl.model.layers[i];
        float *wl = malloc(L->n_params * 4);
        assert_int_equal(ms_dev_d2h(L->dev, wl, L->w, L->n_params * 4), 0); /* device memory on a GPU */
        /* per layer, the relative norm of the difference: a weight that sits
         * near zero under AdamW moves by about lr whatever the sign of a
         * tiny gradient, so element-wise bounds would test float noise */
        double dd = 0, nn = 0;
        for (size_t j = 0; j < L->n_params; j++) {
            double a = wl[j], b = w[i][j];
            dd += (a - b) * (a - b);
            nn += b * b;
        }
        double wtol = tol;
#ifdef PIPE_WTOL_BATCHNORM
        if (norm == MS_NORM_BATCH) wtol = PIPE_WTOL_BATCHNORM;
#endif
        if (sqrt(dd) > wtol * sqrt(nn)) {
            printf("layer %d weights: |split - single| = %.3g, |single| = %.3g\n", i, sqrt(dd), sqrt(nn));
            fail();
        }
        free(wl);
        free(w[i]);
    }
    /* every device holds only its stage's layers */
    for (int s = 0; s < p; s++) assert_true(pl.st[s].dev->peak[MS_CAT_PARAM] > 0);
    ms_pipe_close(&pl);
    n_checked++;
}

static void check_split(ms_norm norm, int p, ms_pipe_schedule sch, int recompute)
{
    check_split_prec(norm, p, sch, recompute, MS_PREC_FP32, PIPE_TOL);
}

static void test_equal_layernorm(void **st)
{
    (void)st;
    for (int p = 2; p <= PIPE_MAX_P(); p++)
        for (int sch = 0; sch < 2; sch++)
            for (int rc = 0; rc < 2; rc++) check_split(MS_NORM_LAYER, p, (ms_pipe_schedule)sch, rc);
}

/* fewer micro-batches than stages, and a count that is not a multiple of
 * the in-flight depth (slots and channel buffers wrap mid-step) */
static void test_micro_counts(void **st)
{
    (void)st;
    int counts[] = { 1, 3, 5 };
    for (int i = 0; i < 3; i++) {
        g_micro = counts[i];
        check_split(MS_NORM_LAYER, PIPE_MAX_P() < 4 ? PIPE_MAX_P() : 4, MS_PIPE_1F1B, i == 1);
        check_split(MS_NORM_LAYER, PIPE_MAX_P() < 3 ? PIPE_MAX_P() : 3, MS_PIPE_GPIPE, 0);
    }
    g_micro = 4;
}

/* Right after open, the run whose open made a kernel warm-up pass (b) holds
 * exactly what the lazy run (a) holds: zero gradients and the same batchnorm
 * running statistics (they do not enter the loss, so compare them here,
 * before training noise on a GPU could hide a difference). */
static void no_trace_of_warmup(ms_pipeline *a, ms_pipeline *b)
{
    for (int i = 0; i < a->model.n_layers; i++) {
        const ms_layer *La = &a->model.layers[i], *Lb = &b->model.layers[i];
        if (Lb->g) {
            float *g = malloc(Lb->n_params * 4);
            assert_int_equal(ms_dev_d2h(Lb->dev, g, Lb->g, Lb->n_params * 4), 0);
            for (size_t j = 0; j < Lb->n_params; j++) assert_true(g[j] == 0.0f);
            free(g);
        }
        if (!La->bn_run) continue;
        size_t n = ms_layer_bn_bytes(&a->model, La);
        float *ra = malloc(n), *rb = malloc(n);
        assert_int_equal(ms_dev_d2h(La->dev, ra, La->bn_run, n), 0);
        assert_int_equal(ms_dev_d2h(Lb->dev, rb, Lb->bn_run, n), 0);
        if (memcmp(ra, rb, n)) printf("layer %d: batchnorm running statistics moved at open\n", i);
        assert_memory_equal(ra, rb, n);
        free(ra);
        free(rb);
    }
}

/* everything allocated at open (what NCCL runs need) computes the same, and
 * measures the same peaks as the lazy run: the kernel warm-up pass that
 * comes with it leaves no trace (gradients, batchnorm running statistics) */
static void test_preallocated(void **st)
{
    (void)st;
    for (int v = 0; v < 4; v++) {
        int rc = v & 1;
        ms_config c;
        base_config(&c, v & 2 ? MS_NORM_BATCH : MS_NORM_LAYER);
        ms_pipe_spec sp;
        split_spec(&sp, c.n_layer + 2, PIPE_MAX_P() < 3 ? PIPE_MAX_P() : 3, MS_PIPE_1F1B, rc);
        ms_pipeline a, b;
        assert_int_equal(ms_pipe_open(&a, &c, &sp), MS_OK);
        sp.preallocate = 1;
        assert_int_equal(ms_pipe_open(&b, &c, &sp), MS_OK);
        no_trace_of_warmup(&a, &b);
        for (int i = 0; i < STEPS; i++) {
            assert_int_equal(ms_pipe_step(&a), MS_OK);
            assert_int_equal(ms_pipe_step(&b), MS_OK);
            assert_true(fabs(a.last_loss - b.last_loss) <= PIPE_TOL * fabs(a.last_loss));
        }
        for (int d = 0; d < a.n_dev; d++) assert_true(a.devs[d].peak_total == b.devs[d].peak_total);
        ms_pipe_close(&a);
        ms_pipe_close(&b);
    }
}

static void test_equal_batchnorm(void **st)
{
    (void)st;
    check_split(MS_NORM_BATCH, 2, MS_PIPE_1F1B, 1);
    check_split(MS_NORM_BATCH, 3, MS_PIPE_GPIPE, 0);
}

/* bf16: the same activations and kernels; on a GPU, atomics (embedding and
 * attention gradients) make the last bits vary, and 16-bit rounding can
 * flip with them, so 1e-2 relative (the kernels' own bf16 bound). */
static void test_equal_bf16(void **st)
{
    (void)st;
    check_split_prec(MS_NORM_LAYER, 2, MS_PIPE_1F1B, 0, MS_PREC_BF16, 1e-2);
    check_split_prec(MS_NORM_LAYER, 3, MS_PIPE_GPIPE, 1, MS_PREC_BF16, 1e-2);
}

static void test_schedules(void **st)
{
    (void)st;
    int ops[64];
    for (int sch = 0; sch < 2; sch++)
        for (int p = 1; p <= 5; p++)
            for (int m = 1; m <= 9; m++)
                for (int s = 0; s < p; s++) {
                    int n = ms_pipe_schedule_ops((ms_pipe_schedule)sch, s, p, m, ops);
                    assert_int_equal(n, 2 * m);
                    int fdone = 0, bdone = 0, maxfl = 0;
                    for (int i = 0; i < n; i++) {
                        if (ops[i] > 0) assert_int_equal(ops[i], ++fdone);   /* forwards in order */
                        else assert_int_equal(-ops[i], ++bdone);             /* backwards in order */
                        assert_true(bdone <= fdone);
                        if (fdone - bdone > maxfl) maxfl = fdone - bdone;
                    }
                    int k = sch == MS_PIPE_GPIPE ? m : (p - s < m ? p - s : m);
                    assert_true(maxfl <= k);
                }
}

/* A pipeline checkpoint resumes in a single-device session and continues identically. */
static void test_checkpoint_interop(void **st)
{
    (void)st;
    ms_config c;
    base_config(&c, MS_NORM_LAYER);
    double ref[STEPS];
    float *w[16];
    single_run(&c, ref, w);
    for (int i = 0; i < c.n_layer + 2; i++) free(w[i]);
    ms_pipe_spec sp;
    split_spec(&sp, c.n_layer + 2, PIPE_MAX_P() < 3 ? PIPE_MAX_P() : 3, MS_PIPE_1F1B, 0);
    ms_pipeline pl;
    assert_int_equal(ms_pipe_open(&pl, &c, &sp), MS_OK);
    for (int i = 0; i < 2; i++) assert_int_equal(ms_pipe_step(&pl), MS_OK);
    char dir[] = "/tmp/ms_pipe_XXXXXX", path[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/p.ckpt", dir);
    assert_int_equal(ms_pipe_save(&pl, path), MS_OK);
    ms_pipe_close(&pl);
    ms_session s;
    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    assert_int_equal(ms_session_load(&s, path), MS_OK);
    for (int i = 2; i < STEPS; i++) {
        assert_int_equal(ms_session_step(&s), MS_OK);
        assert_true(fabs(s.last_loss - ref[i]) <= PIPE_TOL * fabs(ref[i]));
    }
    ms_session_close(&s);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_equal_layernorm),
        cmocka_unit_test(test_equal_batchnorm),
        cmocka_unit_test(test_equal_bf16),
        cmocka_unit_test(test_preallocated),
        cmocka_unit_test(test_micro_counts),
        cmocka_unit_test(test_checkpoint_interop),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    printf("pipeline: %d split runs checked against the single-device run\n", n_checked);
    return r;
}
