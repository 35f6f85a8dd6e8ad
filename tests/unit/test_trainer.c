/* test_trainer.c — the embedded trainer on the CPU backend:
 *  - the whole model's gradient against central finite differences
 *    (layernorm, batchnorm, tied head), on a random sample of every tensor;
 *  - the tiny preset's loss falls within a few hundred steps;
 *  - save-then-resume reproduces the uninterrupted losses bit for bit;
 *  - an emulated capacity makes the OOM happen at the right layer and
 *    phase, and the reported boundary is the true one;
 *  - the one-device optimizer skips a non-finite step and clips a finite one;
 *  - one micro-batch a step writes the block weight gradients instead of
 *    adding them, with the same result.
 * FD: Richardson-extrapolated central differences (fd_check), compared
 * within 3e-2 relative + 1e-4 absolute. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/common/kern_util.h"
#include "trainer/exec.h"
#include "trainer/exec_internal.h"
#include "trainer/optimizer.h"
#include "trainer/session.h"

static void small_config(ms_config *c, ms_norm norm, int tied)
{
    char err[256];
    assert_int_equal(ms_config_preset(c, "tiny", err, sizeof err), 0);
    c->n_layer = 2;
    c->d_model = 16;
    c->n_head = 2;
    c->seq_len = 8;
    c->vocab = 128;
    c->batch = 2;
    c->norm = norm;
    c->tied = tied;
    c->grad_clip = 0;
    snprintf(c->device, sizeof c->device, "cpu");
}

/* One forward + backward over fixed inputs; returns the mean loss. */
static double loss_of(ms_session *s)
{
    ms_model *m = &s->model;
    double sum = 0;
    float dscale = 1.0f / (float)(m->B * m->T);
    for (int i = 0; i < m->n_layers; i++) {
        ms_layer *L = &m->layers[i];
        const int32_t *ids = L->kind == MS_LAYER_EMBED ? s->inputs : L->kind == MS_LAYER_HEAD ? s->targets : NULL;
        assert_int_equal(ms_layer_forward(m, L, &s->scr, i ? ms_layer_output(&m->layers[i - 1]) : NULL, ids), MS_OK);
    }
    for (int i = m->n_layers - 1; i >= 0; i--)
        assert_int_equal(ms_layer_backward(m, &m->layers[i], &s->scr,
                                           i ? ms_layer_output(&m->layers[i - 1]) : NULL, dscale, &sum), MS_OK);
    return sum / (m->B * m->T);
}

/* Central difference with Richardson extrapolation, (4 D(h/2) - D(h)) / 3:
 * truncation error O(h^4), so h can stay large enough (1e-2) that float
 * rounding of the loss (~5e-7) costs at most ~5e-5 in the gradient. */
static int fd_check(const char *what, ms_session *s, float *x, float analytic)
{
    const float h = 1e-2f;
    float x0 = *x;
    double d[2];
    for (int k = 0; k < 2; k++) {
        float e = k ? h / 2 : h;
        *x = x0 + e;
        double lp = loss_of(s);
        *x = x0 - e;
        double lm = loss_of(s);
        d[k] = (lp - lm) / (2.0 * e);
    }
    *x = x0;
    double fd = (4 * d[1] - d[0]) / 3, a = analytic;
    double tol = 1e-4 + 3e-2 * fmax(fabs(fd), fabs(a));
    if (fabs(fd - a) <= tol) return 0;
    printf("%s: analytic %.6g, finite difference %.6g\n", what, a, fd);
    return 1;
}

static void check_model_grad(ms_norm norm, int tied)
{
    ms_config c;
    small_config(&c, norm, tied);
    ms_session s;
    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    assert_int_equal(ms_data_next(s.data, s.inputs, s.targets, c.batch, c.seq_len), 0);
    ms_model *m = &s.model;
    loss_of(&s); /* allocates everything */
    for (int i = 0; i < m->n_layers; i++) memset(m->layers[i].g, 0, m->layers[i].n_params * 4);
    double l0 = loss_of(&s);
    assert_true(isfinite(l0) && l0 > 0);
    ku_rng r;
    ku_seed(&r, 42 + (uint64_t)norm * 7 + (uint64_t)tied);
    int bad = 0, checked = 0;
    /* copy every gradient first: each FD evaluation runs backward again */
    float *an[64];
    assert_true(m->n_layers <= 64);
    for (int i = 0; i < m->n_layers; i++) {
        an[i] = malloc(m->layers[i].n_params * 4);
        memcpy(an[i], m->layers[i].g, m->layers[i].n_params * 4);
    }
    for (int i = 0; i < m->n_layers; i++) {
        ms_layer *L = &m->layers[i];
        float *analytic = an[i];
        for (int t = 0; t < L->n_tensors; t++) {
            const ms_tensor *T = &L->t[t];
            size_t n = T->rows * T->cols;
            for (int k = 0; k < 3; k++) {
                size_t j = T->off + (size_t)ku_int(&r, (int)n);
                char what[64];
                snprintf(what, sizeof what, "%s.%s[%zu]", L->name, T->name, j - T->off);
                bad += fd_check(what, &s, &L->w[j], analytic[j]);
                checked++;
            }
        }
        free(analytic);
    }
    assert_true(checked > 30);
    assert_int_equal(bad, 0);
    ms_session_close(&s);
}

static void test_grad_layernorm(void **st) { (void)st; check_model_grad(MS_NORM_LAYER, 0); }
static void test_grad_batchnorm(void **st) { (void)st; check_model_grad(MS_NORM_BATCH, 0); }
static void test_grad_tied(void **st) { (void)st; check_model_grad(MS_NORM_LAYER, 1); }

static void test_tiny_loss_falls(void **st)
{
    (void)st;
    ms_config c;
    char err[256];
    assert_int_equal(ms_config_preset(&c, "tiny", err, sizeof err), 0);
    ms_session s;
    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    double first = 0, last = 0;
    for (int i = 0; i < c.steps; i++) {
        assert_int_equal(ms_session_step(&s), MS_OK);
        if (i == 0) first = s.last_loss;
        last = s.last_loss;
    }
    printf("tiny: loss %.4f -> %.4f over %d steps\n", first, last, c.steps);
    assert_true(first > 4.5);          /* ~ln(256) at the start */
    assert_true(last < first - 2.0);   /* falls well */
    ms_session_close(&s);
}

static void run_steps(ms_session *s, int n, double *losses)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(ms_session_step(s), MS_OK);
        losses[i] = s->last_loss;
    }
}

static void check_resume(ms_precision prec, ms_norm norm)
{
    ms_config c;
    small_config(&c, norm, 0);
    c.precision = prec;
    double full[8], part[8];
    ms_session s;
    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    run_steps(&s, 8, full);
    ms_session_close(&s);

    char dir[] = "/tmp/ms_resume_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[1024];
    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    run_steps(&s, 3, part);
    assert_int_equal(ms_session_checkpoint(&s, dir, path, sizeof path), MS_OK);
    ms_session_close(&s);

    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    assert_int_equal(ms_session_load(&s, path), MS_OK);
    assert_int_equal(s.step, 3);
    run_steps(&s, 5, part + 3);
    ms_session_close(&s);
    for (int i = 0; i < 8; i++) {
        if (full[i] != part[i]) printf("step %d: %.9g vs %.9g\n", i, full[i], part[i]);
        assert_true(full[i] == part[i]);
    }

    /* a checkpoint of another model is refused */
    ms_config other = c;
    other.d_model = 32;
    assert_int_equal(ms_session_open(&s, &other, NULL), MS_OK);
    assert_int_not_equal(ms_session_load(&s, path), MS_OK);
    assert_non_null(strstr(s.err, "different model"));
    ms_session_close(&s);
    unlink(path);
    rmdir(dir);
}

static void test_resume_fp32(void **st) { (void)st; check_resume(MS_PREC_FP32, MS_NORM_LAYER); }
static void test_resume_bf16_batchnorm(void **st) { (void)st; check_resume(MS_PREC_BF16, MS_NORM_BATCH); }
static void test_resume_fp16(void **st) { (void)st; check_resume(MS_PREC_FP16, MS_NORM_LAYER); }

/* Blocks do not save norm2's output (backward recomputes it from res2 into
 * its scratch): a block keeps one [N,C] view less than ln1, att, res2, ln2,
 * out [N,C] + qkv [N,3C] + fc_pre, fc_gelu [N,H] + two mean/rstd pairs + lse,
 * and the recomputed values are forward's bit for bit: the tiny preset's
 * first 8 losses are those of the build that still saved it (2d7e0c3). */
static void test_block_recomputes_norm2(void **st)
{
    (void)st;
    static const struct { ms_precision prec; ms_norm norm; double loss[8]; } runs[] = {
        { MS_PREC_FP32, MS_NORM_LAYER, { 0x1.62f28b24p+2, 0x1.5d6ce5acp+2, 0x1.58bddbdcp+2, 0x1.56fcc6c8p+2,
          0x1.5220853cp+2, 0x1.502d368cp+2, 0x1.4e195440p+2, 0x1.4a710088p+2 } },
        { MS_PREC_BF16, MS_NORM_LAYER, { 0x1.62f492d8p+2, 0x1.5d6db908p+2, 0x1.58be23f0p+2, 0x1.56ff2b64p+2,
          0x1.52205f34p+2, 0x1.502c4794p+2, 0x1.4e19f7d0p+2, 0x1.4a70922cp+2 } },
        { MS_PREC_FP32, MS_NORM_BATCH, { 0x1.62ee0944p+2, 0x1.60f79aecp+2, 0x1.5eef551cp+2, 0x1.5e0c188cp+2,
          0x1.5db0b520p+2, 0x1.5b945430p+2, 0x1.5b0b9a98p+2, 0x1.5a18683cp+2 } },
        { MS_PREC_BF16, MS_NORM_BATCH, { 0x1.62ef1168p+2, 0x1.60f7ae40p+2, 0x1.5eeea08cp+2, 0x1.5e0ae1c0p+2,
          0x1.5dadd6d8p+2, 0x1.5b95cc90p+2, 0x1.5b0ce598p+2, 0x1.5a18ee04p+2 } },
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        ms_config c;
        char err[256];
        assert_int_equal(ms_config_preset(&c, "tiny", err, sizeof err), 0);
        c.precision = runs[r].prec;
        c.norm = runs[r].norm;
        ms_session s;
        assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
        const ms_model *m = &s.model;
        size_t N = (size_t)m->B * m->T, C = m->C, H = m->H, es = ms_dtype_size(m->dt);
        size_t stat = c.norm == MS_NORM_BATCH ? C : N;
#define A(x) (((x) + 255) / 256 * 256)
        size_t saved_ln2 = 5 * A(N * C * es) + A(N * 3 * C * es) + 2 * A(N * H * es) + 4 * A(stat * 4) +
                           A((size_t)m->B * m->NH * m->T * 4);
        assert_int_equal(ms_layer_act_bytes(m, &m->layers[1], m->B), saved_ln2 - A(N * C * es));
#undef A
        for (int i = 0; i < 8; i++) {
            assert_int_equal(ms_session_step(&s), MS_OK);
            if (s.last_loss != runs[r].loss[i])
                printf("run %zu step %d: loss %a, %a before\n", r, i, s.last_loss, runs[r].loss[i]);
            assert_true(s.last_loss == runs[r].loss[i]);
        }
        ms_session_close(&s);
    }
}

/* Run one step at a capacity; fill where it ran out (-1 if it fit). */
static int oom_at(const ms_config *base, size_t cap, ms_dev_oom *out)
{
    ms_config c = *base;
    c.gpu_mem = cap;
    ms_session s;
    int rc = ms_session_open(&s, &c, NULL);
    if (rc == MS_OK) rc = ms_session_step(&s);
    *out = s.dev.oom;
    ms_session_close(&s);
    return rc == MS_EOOM ? 1 : rc == MS_OK ? 0 : -1;
}

static void test_seed17_cpu_oom(void **st)
{
    (void)st;
    ms_config c;
    char err[256];
    assert_int_equal(ms_config_preset(&c, "seed17-cpu", err, sizeof err), 0);
    assert_true(c.gpu_mem > 0);
    ms_dev_oom o;
    assert_int_equal(oom_at(&c, c.gpu_mem, &o), 1);
    assert_int_equal(o.layer, 17);
    assert_int_equal(o.phase, MS_PH_FORWARD);
    assert_int_equal(o.cat, MS_CAT_ACT);
    assert_true(o.live_total <= o.capacity);
    assert_true(o.live_total + o.requested > o.capacity);
}

/* The GPU preset cannot run here: simulate its first step's allocation order
 * (reserve, every layer's weights, then saved activations layer by layer,
 * each rounded to the 2 MiB the driver gives out) for reserves from 0.3 to
 * 1.5 GiB (an H200's is ~0.6), and check that the 40 GiB capacity
 * overflows at block 18 (trainer/config.c says why not 17 any more). */
static void test_seed17_gpu_capacity(void **st)
{
    (void)st;
    ms_config c;
    char err[256];
    assert_int_equal(ms_config_preset(&c, "seed17", err, sizeof err), 0);
    ms_model m;
    assert_int_equal(ms_model_init(&m, &c, err, sizeof err), 0);
    const size_t g = 2u << 20;
#define RND(b) (((b) + g - 1) / g * g)
    for (size_t reserve = 300u << 20; reserve <= (3u << 29); reserve += 100u << 20) {
        size_t live = reserve;
        for (int i = 0; i < m.n_layers; i++) {
            live += RND(m.layers[i].n_params * 4);
            live += RND(m.layers[i].n_copy * ms_dtype_size(m.dt));
        }
        int oom_layer = -1;
        for (int i = 0; i < m.n_layers && oom_layer < 0; i++) {
            size_t a = RND(ms_layer_act_bytes(&m, &m.layers[i], m.B));
            if (live + a > c.gpu_mem) oom_layer = i;
            live += a;
        }
        assert_int_equal(oom_layer, 18);
    }
#undef RND
    ms_model_free(&m);
}

/* Lower capacities never move the OOM later; the boundary is the true one. */
static void test_oom_boundary_monotone(void **st)
{
    (void)st;
    ms_config c;
    small_config(&c, MS_NORM_LAYER, 0);
    c.n_layer = 6;
    ms_session s;
    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    assert_int_equal(ms_session_step(&s), MS_OK);
    size_t peak = s.dev.peak_total;
    ms_session_close(&s);
    int prev_rank = -1;
    for (size_t cap = peak / 8; cap < peak; cap += peak / 97) {
        ms_dev_oom o;
        int r = oom_at(&c, cap, &o);
        assert_int_equal(r, 1);
        assert_true(o.live_total <= cap);
        assert_true(o.live_total + o.requested > cap);
        /* position in the step: init < forward(layer) < backward(reverse layer) < optimizer */
        int rank = o.phase == MS_PH_INIT ? o.layer + 1
                 : o.phase == MS_PH_FORWARD ? 1000 + o.layer
                 : o.phase == MS_PH_BACKWARD ? 2000 + (100 - o.layer) : 3000 + o.layer;
        assert_true(rank >= prev_rank);
        prev_rank = rank;
    }
    ms_dev_oom o;
    assert_int_equal(oom_at(&c, peak, &o), 0);
}

/* 1 if L's gradients are as the optimizer leaves them for the next step:
 * zero, except (with m->wgrad_overwrite) the grad_whole tensors', which the
 * next backward writes without reading. */
static int grads_zeroed(const ms_model *m, const ms_layer *L)
{
    for (size_t k = 0; k < L->n_params; k++) {
        int whole = 0;
        for (int t = 0; t < L->n_tensors; t++)
            whole |= L->t[t].grad_whole && k >= L->t[t].off && k < L->t[t].off + L->t[t].rows * L->t[t].cols;
        if (!(m->wgrad_overwrite && whole) && L->g[k] != 0.0f) return 0;
    }
    return 1;
}

/* The optimizer on one device decides clipping and skipping on the device
 * (trainer/optimizer.h): a non-finite gradient skips the step (weights and
 * step count untouched, gradients zeroed as grads_zeroed says, the skip
 * counted), and a finite one reports the true global norm and applies. */
static void test_opt_step_one_device(void **st)
{
    (void)st;
    ms_config c;
    small_config(&c, MS_NORM_LAYER, 0);
    ms_session s;
    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    assert_int_equal(ms_session_step(&s), MS_OK); /* state allocated, t = 1 */
    ms_model *m = &s.model;
    int nl = m->n_layers;
    size_t total = 0;
    for (int i = 0; i < nl; i++) total += m->layers[i].n_params;
    float *before = malloc(total * sizeof(float));
    assert_non_null(before);

    /* a NaN in one gradient: skipped */
    loss_of(&s);
    m->layers[nl - 1].g[3] = NAN;
    for (size_t i = 0, o = 0; i < (size_t)nl; o += m->layers[i].n_params, i++)
        memcpy(before + o, m->layers[i].w, m->layers[i].n_params * sizeof(float));
    int t0 = s.opt.t, skipped0 = s.opt.skipped;
    ms_opt_result res;
    assert_int_equal(ms_opt_step(m, 0, nl - 1, s.scr_of, &s.opt, &res), MS_OK);
    assert_int_equal(res.applied, 0);
    assert_int_equal(s.opt.t, t0);
    assert_int_equal(s.opt.skipped, skipped0 + 1);
    for (size_t i = 0, o = 0; i < (size_t)nl; o += m->layers[i].n_params, i++) {
        assert_memory_equal(before + o, m->layers[i].w, m->layers[i].n_params * sizeof(float));
        assert_true(grads_zeroed(m, &m->layers[i]));
    }

    /* finite, clipped at half the norm: applied, the norm as the host sums it */
    loss_of(&s);
    double sumsq = 0;
    for (int i = 0; i < nl; i++)
        for (size_t k = 0; k < m->layers[i].n_params; k++) sumsq += (double)m->layers[i].g[k] * m->layers[i].g[k];
    double norm = sqrt(sumsq);
    m->cfg.grad_clip = (float)(0.5 * norm);
    assert_int_equal(ms_opt_step(m, 0, nl - 1, s.scr_of, &s.opt, &res), MS_OK);
    assert_int_equal(res.applied, 1);
    assert_int_equal(s.opt.t, t0 + 1);
    assert_true(fabs(res.grad_norm - norm) <= 1e-5 * norm);
    int moved = 0;
    for (size_t i = 0, o = 0; i < (size_t)nl; o += m->layers[i].n_params, i++)
        moved |= memcmp(before + o, m->layers[i].w, m->layers[i].n_params * sizeof(float)) != 0;
    assert_true(moved);
    free(before);
    ms_session_close(&s);

    /* fp16: a finite step that doubles the loss scale reports its norm
     * unscaled by the scale the step ran with, not the next one */
    small_config(&c, MS_NORM_LAYER, 0);
    c.precision = MS_PREC_FP16;
    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    assert_int_equal(ms_session_step(&s), MS_OK);
    m = &s.model;
    loss_of(&s);
    sumsq = 0;
    for (int i = 0; i < nl; i++)
        for (size_t k = 0; k < m->layers[i].n_params; k++) sumsq += (double)m->layers[i].g[k] * m->layers[i].g[k];
    float scale0 = s.opt.loss_scale;
    s.opt.good_steps = c.loss_scale_window - 1;
    assert_int_equal(ms_opt_step(m, 0, nl - 1, s.scr_of, &s.opt, &res), MS_OK);
    assert_int_equal(res.applied, 1);
    assert_true(s.opt.loss_scale == 2 * scale0);
    assert_true(fabs(res.grad_norm - sqrt(sumsq) / scale0) <= 1e-5 * res.grad_norm);
    ms_session_close(&s);
}

/* With one micro-batch a step the session writes the block weight
 * matrices' gradients instead of adding them into zeroed ones
 * (ms_model.wgrad_overwrite): the same losses and weights, bit for bit,
 * as adding (the flag cleared), in fp32 and bf16, even with NaN left in
 * those gradients between steps (nothing reads them before the write);
 * the optimizer zeroes the rest; two micro-batches a step add. */
static void check_wgrad_overwrite(ms_precision prec)
{
    ms_config c;
    small_config(&c, MS_NORM_LAYER, 0);
    c.precision = prec;
    enum { STEPS = 4 };
    double loss[2][STEPS];
    float *w[2] = { NULL, NULL };
    size_t total = 0;
    for (int run = 0; run < 2; run++) {
        ms_session s;
        assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
        ms_model *m = &s.model;
        assert_int_equal(m->wgrad_overwrite, 1);
        if (run == 1) m->wgrad_overwrite = 0;
        for (int i = 0; i < STEPS; i++) {
            assert_int_equal(ms_session_step(&s), MS_OK);
            loss[run][i] = s.last_loss;
            int blocks = 0;
            for (int l = 0; l < m->n_layers; l++) {
                ms_layer *L = &m->layers[l];
                assert_true(grads_zeroed(m, L));
                for (int t = 0; run == 0 && t < L->n_tensors; t++)
                    if (L->t[t].grad_whole) {
                        for (size_t k = 0; k < L->t[t].rows * L->t[t].cols; k++) L->g[L->t[t].off + k] = NAN;
                        blocks += L->kind == MS_LAYER_BLOCK;
                    }
            }
            if (run == 0) assert_int_equal(blocks, 4 * c.n_layer); /* qkv, att, fc, proj */
        }
        total = 0;
        for (int l = 0; l < m->n_layers; l++) total += m->layers[l].n_params;
        w[run] = malloc(total * sizeof(float));
        assert_non_null(w[run]);
        for (size_t l = 0, o = 0; l < (size_t)m->n_layers; o += m->layers[l].n_params, l++)
            memcpy(w[run] + o, m->layers[l].w, m->layers[l].n_params * sizeof(float));
        ms_session_close(&s);
    }
    for (int i = 0; i < STEPS; i++) {
        assert_true(isfinite(loss[0][i]));
        assert_true(loss[0][i] == loss[1][i]);
    }
    for (size_t k = 0; k < total; k++) assert_true(w[0][k] == w[1][k]);
    free(w[0]);
    free(w[1]);

    c.accum = 2;
    ms_session s;
    assert_int_equal(ms_session_open(&s, &c, NULL), MS_OK);
    assert_int_equal(s.model.wgrad_overwrite, 0);
    ms_session_close(&s);
}
static void test_wgrad_overwrite_fp32(void **st) { (void)st; check_wgrad_overwrite(MS_PREC_FP32); }
static void test_wgrad_overwrite_bf16(void **st) { (void)st; check_wgrad_overwrite(MS_PREC_BF16); }

/* The head's auto chunking: the fewest chunks of at most 320 MiB of logits,
 * all equal (the last at most one row short per chunk); the configured
 * head_chunk wins, capped at B*T. */
static void check_chunks(const char *preset, ms_precision prec, int want_rows)
{
    ms_config c;
    char err[256];
    assert_int_equal(ms_config_preset(&c, preset, err, sizeof err), 0);
    c.precision = prec;
    ms_model m;
    assert_int_equal(ms_model_init(&m, &c, err, sizeof err), 0);
    const size_t cap = (size_t)320 << 20, per_row = (size_t)m.V * ms_dtype_size(m.dt);
    const int N = m.B * m.T, r = ms_head_chunk_rows(&m);
    const int chunks = (N + r - 1) / r, last = N - (chunks - 1) * r;
    if (want_rows) assert_int_equal(r, want_rows);
    assert_true((size_t)r * per_row <= cap || r == 1);
    assert_int_equal(chunks, (int)(((size_t)N + cap / per_row - 1) / (cap / per_row))); /* the fewest */
    assert_true(last > 0 && r - last < chunks);                                      /* equal */
    m.cfg.head_chunk = N / 2 + 1;
    assert_int_equal(ms_head_chunk_rows(&m), N / 2 + 1);
    m.cfg.head_chunk = N + 5;
    assert_int_equal(ms_head_chunk_rows(&m), N);
    ms_model_free(&m);
}
static void test_head_chunks(void **st)
{
    (void)st;
    check_chunks("gpt2-small", MS_PREC_BF16, 3277); /* 16384 rows in five */
    check_chunks("seed17", MS_PREC_BF16, 3072);     /* 30720 in ten */
    check_chunks("gpt2-small", MS_PREC_FP32, 1639); /* 4-byte logits: ten */
    check_chunks("tiny", MS_PREC_FP32, 128);        /* all rows in one */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_layernorm),
        cmocka_unit_test(test_grad_batchnorm),
        cmocka_unit_test(test_grad_tied),
        cmocka_unit_test(test_tiny_loss_falls),
        cmocka_unit_test(test_resume_fp32),
        cmocka_unit_test(test_resume_bf16_batchnorm),
        cmocka_unit_test(test_resume_fp16),
        cmocka_unit_test(test_block_recomputes_norm2),
        cmocka_unit_test(test_seed17_cpu_oom),
        cmocka_unit_test(test_seed17_gpu_capacity),
        cmocka_unit_test(test_oom_boundary_monotone),
        cmocka_unit_test(test_opt_step_one_device),
        cmocka_unit_test(test_wgrad_overwrite_fp32),
        cmocka_unit_test(test_wgrad_overwrite_bf16),
        cmocka_unit_test(test_head_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
