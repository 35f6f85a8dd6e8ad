/* session.c — one-device training session and its checkpoints. */
#include "trainer/session.h"
#include "trainer/train_state.h"
#include "trainer/nvtx_ranges.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int fail(ms_session *s, int rc, const char *msg)
{
    if (rc == MS_EOOM) {
        const ms_dev_oom *o = &s->dev.oom;
        const char *lname = o->layer >= 0 && o->layer < s->model.n_layers ? s->model.layers[o->layer].name : NULL;
        ms_dev_oom_message(&s->dev, lname, s->oom_msg, sizeof s->oom_msg);
        snprintf(s->err, sizeof s->err, "%s", s->oom_msg);
    } else if (msg && !s->err[0]) {
        snprintf(s->err, sizeof s->err, "%s", msg);
    } else if (!s->err[0]) {
        snprintf(s->err, sizeof s->err, "%s", s->dev.k.error[0] ? s->dev.k.error : "device error");
    }
    return rc;
}

int ms_session_open(ms_session *s, const ms_config *cfg, const ms_session_hooks *hooks)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    if (ms_model_init(&s->model, cfg, s->err, sizeof s->err)) return MS_EFAIL;
    /* one device, and with one micro-batch a step each backward is its
     * step's only one: the weight matrices' gradients are written, not
     * added (ms_model.wgrad_overwrite); MS_WGRAD_ADD=1 adds them anyway
     * (an A/B switch for measurements) */
    const char *add = getenv("MS_WGRAD_ADD");
    s->model.wgrad_overwrite = cfg->accum == 1 && !(add && strcmp(add, "1") == 0);
    s->data = ms_data_open(cfg, s->err, sizeof s->err);
    if (!s->data) return MS_EFAIL;
    if (ms_data_vocab_needed(s->data) > cfg->vocab) {
        snprintf(s->err, sizeof s->err, "the data has token ids up to %d but the model's vocab is %d (set model.vocab)",
                 ms_data_vocab_needed(s->data) - 1, cfg->vocab);
        return MS_EFAIL;
    }
    size_t N = (size_t)cfg->batch * cfg->seq_len;
    s->inputs = malloc(N * 4);
    s->targets = malloc(N * 4);
    s->fwd_ms = calloc((size_t)s->model.n_layers, sizeof(double));
    s->bwd_ms = calloc((size_t)s->model.n_layers, sizeof(double));
    s->scr_of = calloc((size_t)s->model.n_layers, sizeof *s->scr_of);
    s->need_fwd = calloc((size_t)s->model.n_layers, sizeof(size_t));
    s->need_bwd = calloc((size_t)s->model.n_layers, sizeof(size_t));
    if (!s->inputs || !s->targets || !s->fwd_ms || !s->bwd_ms || !s->scr_of || !s->need_fwd || !s->need_bwd) {
        snprintf(s->err, sizeof s->err, "out of host memory");
        return MS_EFAIL;
    }
    s->fwd_range = calloc((size_t)s->model.n_layers, sizeof *s->fwd_range);
    s->bwd_range = calloc((size_t)s->model.n_layers, sizeof *s->bwd_range);
    if (!s->fwd_range || !s->bwd_range) {
        snprintf(s->err, sizeof s->err, "out of host memory");
        return MS_EFAIL;
    }
    for (int i = 0; i < s->model.n_layers; i++) {
        snprintf(s->fwd_range[i], sizeof s->fwd_range[i], "%s/forward", s->model.layers[i].name);
        snprintf(s->bwd_range[i], sizeof s->bwd_range[i], "%s/backward", s->model.layers[i].name);
    }
    if (ms_dev_open(&s->dev, 0, cfg->device, cfg->gpu_mem, 0, s->err, sizeof s->err)) return MS_EFAIL;
    if (hooks) {
        s->dev.hook = hooks->alloc_hook;
        s->dev.hook_user = hooks->user;
        if (hooks->on_device && hooks->on_device(hooks->user, &s->dev)) {
            if (!s->err[0]) snprintf(s->err, sizeof s->err, "profiler could not start on %s", s->dev.name);
            return MS_EFAIL;
        }
    }
    s->scr.dev = &s->dev;
    for (int i = 0; i < s->model.n_layers; i++) {
        s->model.layers[i].dev = &s->dev;
        s->scr_of[i] = &s->scr;
    }
    ms_opt_init(&s->opt, cfg);
    int rc = ms_model_alloc_params(&s->model, 0, s->model.n_layers - 1);
    if (rc) return fail(s, rc, "cannot initialise the parameters");
    ms_dev_where(&s->dev, -1, MS_PH_INIT);
    return MS_OK;
}

static double dev_ms(ms_session *s, double t0)
{
    if (ms_dev_sync(&s->dev)) return -1;
    return now_ms() - t0;
}

/* Forward and backward of one micro-batch whose token ids are in ids and
 * targets (gradients accumulate). loss_sum NULL: the loss stays on the device. */
static int run_layers(ms_session *s, const int32_t *ids, const int32_t *targets, float dscale, double *loss_sum)
{
    ms_model *m = &s->model;
    int nl = m->n_layers, rc;
    for (int i = 0; i < nl; i++) {
        ms_layer *L = &m->layers[i];
        const int32_t *li = L->kind == MS_LAYER_EMBED ? ids : L->kind == MS_LAYER_HEAD ? targets : NULL;
        double t0 = s->measure ? now_ms() : 0;
        ms_range_push(s->fwd_range[i]);
        rc = ms_layer_forward(m, L, &s->scr, i ? ms_layer_output(&m->layers[i - 1]) : NULL, li);
        ms_range_pop();
        if (rc) return fail(s, rc, NULL);
        if (s->measure) {
            s->fwd_ms[i] += dev_ms(s, t0);
            if (s->scr.last_need > s->need_fwd[i]) s->need_fwd[i] = s->scr.last_need;
        }
    }
    s->mb_fwd++;
    for (int i = nl - 1; i >= 0; i--) {
        ms_layer *L = &m->layers[i];
        double t0 = s->measure ? now_ms() : 0;
        ms_range_push(s->bwd_range[i]);
        rc = ms_layer_backward(m, L, &s->scr, i ? ms_layer_output(&m->layers[i - 1]) : NULL, dscale, loss_sum);
        ms_range_pop();
        if (rc) return fail(s, rc, NULL);
        if (s->measure) {
            s->bwd_ms[i] += dev_ms(s, t0);
            if (s->scr.last_need > s->need_bwd[i]) s->need_bwd[i] = s->scr.last_need;
        }
    }
    s->mb_bwd++;
    return MS_OK;
}

/* Captures thrown away (the step allocated) before graphs are given up. */
enum { GRAPH_TRIES = 3 };

static int graph_wanted(const ms_session *s)
{
    return s->use_graph && !s->graph.why_not[0] && s->dev.backend == MS_BACKEND_CUDA && s->steps_run > 0 &&
           !s->measure && !s->dev.hook && s->dev.k.matmul_pick != 1;
}

/* Records one micro-batch into s->graph; nothing runs. Returns MS_OK whether
 * or not a graph came of it (without one, micro-batches run as before), or
 * the error of a layer that failed for another reason than the capture's
 * refusal to allocate. */
static int capture(ms_session *s, float dscale)
{
    ms_step_graph *g = &s->graph;
    if (g->thrown >= GRAPH_TRIES) {
        snprintf(g->why_not, sizeof g->why_not, "the step still allocated after %d captures", GRAPH_TRIES);
        return MS_OK;
    }
    if (ms_step_graph_begin(g, &s->dev, (size_t)s->model.B * s->model.T)) return MS_OK;
    int mb_fwd = s->mb_fwd, mb_bwd = s->mb_bwd;
    int rc = run_layers(s, g->ids[0], g->targets[0], dscale, NULL);
    int refused = s->dev.capture_broken;
    s->mb_fwd = mb_fwd;
    s->mb_bwd = mb_bwd;
    ms_step_graph_end(g, &s->dev, rc == MS_OK, dscale);
    if (rc != MS_OK && !refused) return rc;
    if (rc != MS_OK) s->err[0] = s->oom_msg[0] = '\0'; /* the refusal, not an OOM: nothing ran */
    return MS_OK;
}

/* One micro-batch: the next data, then its graph or its layers one by one
 * (or nothing more, where the last step queued it: s->ahead). A replayed
 * graph's loss is read at once (the read waits for the graph), except with
 * *defer_loss set (the step's last micro-batch): then it is left to the
 * caller, which queues the optimizer first, and *defer_loss says whether it
 * was left. */
static int run_microbatch(ms_session *s, float dscale, double *loss_sum, int *defer_loss)
{
    int defer = defer_loss && *defer_loss;
    if (defer_loss) *defer_loss = 0;
    ms_model *m = &s->model;
    int rc;
    if (s->ahead) {
        s->ahead = 0;
    } else {
        if (ms_data_next(s->data, s->inputs, s->targets, m->B, m->T)) return fail(s, MS_EFAIL, "data read failed");
        if (graph_wanted(s) && !ms_step_graph_ready(&s->graph, &s->dev, dscale) && (rc = capture(s, dscale)))
            return rc;
        if (!graph_wanted(s) || !ms_step_graph_ready(&s->graph, &s->dev, dscale))
            return run_layers(s, s->inputs, s->targets, dscale, loss_sum);
        if (ms_step_graph_launch(&s->graph, &s->dev, s->inputs, s->targets)) return fail(s, MS_EFAIL, NULL);
    }
    if (defer)
        *defer_loss = 1;
    else if ((rc = ms_layer_add_loss(m, &m->layers[m->n_layers - 1], loss_sum)))
        return fail(s, rc, NULL);
    s->mb_fwd++;
    s->mb_bwd++;
    return MS_OK;
}

/* Host buffers for the step's reads: pinned where the next step may be
 * queued before the wait (a copy into pageable memory waits for the whole
 * stream), plain otherwise (so a trial makes no pinned allocation). */
static void free_readback(ms_session *s)
{
    if (s->rb_pinned) {
        ms_dev_host_free(&s->dev, s->rb_opt);
        ms_dev_host_free(&s->dev, s->rb_loss);
    } else {
        free(s->rb_opt);
        free(s->rb_loss);
    }
    s->rb_opt = s->rb_loss = NULL;
}

static int readback_buffers(ms_session *s)
{
    int pinned = s->rb_pinned || (s->launch_ahead && s->dev.backend == MS_BACKEND_CUDA); /* once pinned, kept */
    if (s->rb_opt && s->rb_pinned == pinned) return MS_OK;
    free_readback(s);
    size_t opt = ms_opt_rec_bytes(s->model.n_layers), loss = ms_layer_loss_rows(&s->model) * sizeof *s->rb_loss;
    s->rb_pinned = pinned;
    s->rb_opt = pinned ? ms_dev_host_alloc(&s->dev, opt) : malloc(opt);
    s->rb_loss = pinned ? ms_dev_host_alloc(&s->dev, loss) : malloc(loss);
    return s->rb_opt && s->rb_loss ? MS_OK : fail(s, MS_EFAIL, "out of host memory");
}

/* The next step's first micro-batch, queued now behind this step's
 * optimizer and reads (launch_ahead): only as a replayed graph, and only
 * where its loss scale is known before the reads (not fp16, whose scale
 * moves with what they say) and a next step is due. */
static int launch_next(ms_session *s, size_t tokens)
{
    float next = s->opt.loss_scale / (float)tokens;
    if (!s->launch_ahead || s->cfg.precision == MS_PREC_FP16 || s->step + 2 > s->cfg.steps ||
        !graph_wanted(s) || !ms_step_graph_ready(&s->graph, &s->dev, next))
        return MS_OK;
    ms_model *m = &s->model;
    if (ms_data_next(s->data, s->inputs, s->targets, m->B, m->T)) return fail(s, MS_EFAIL, "data read failed");
    if (ms_step_graph_launch(&s->graph, &s->dev, s->inputs, s->targets)) return fail(s, MS_EFAIL, NULL);
    s->ahead = 1;
    s->launched_ahead++;
    return MS_OK;
}

int ms_session_step(ms_session *s)
{
    ms_model *m = &s->model;
    int nl = m->n_layers, rc;
    double loss_sum = 0;
    size_t tokens = (size_t)s->cfg.accum * m->B * m->T;
    float dscale = s->opt.loss_scale / (float)tokens;
    if (s->measure)
        for (int i = 0; i < nl; i++) s->fwd_ms[i] = s->bwd_ms[i] = 0;
    if ((rc = readback_buffers(s))) return rc;
    s->mb_fwd = s->mb_bwd = 0;
    int deferred = 0;
    for (int mb = 0; mb < s->cfg.accum; mb++) {
        deferred = mb == s->cfg.accum - 1;
        if ((rc = run_microbatch(s, dscale, &loss_sum, &deferred))) return rc;
    }
    double t0 = now_ms();
    ms_range_push("optimizer");
    rc = ms_opt_queue(m, 0, nl - 1, &s->scr, &s->opt, s->rb_opt);
    ms_range_pop();
    if (rc) return fail(s, rc, NULL);
    /* the last graph's loss: its buffer outlives the optimizer, which was
     * queued behind the graph without waiting for it */
    if (deferred && (rc = ms_layer_read_loss_later(m, &m->layers[nl - 1], s->rb_loss))) return fail(s, rc, NULL);
    /* with pinned buffers the next step may be queued before the wait */
    if (s->rb_pinned)
        rc = ms_dev_mark(&s->dev) ? MS_EFAIL : launch_next(s, tokens);
    if (!rc && (s->rb_pinned ? ms_dev_wait_mark(&s->dev) : ms_dev_sync(&s->dev))) rc = MS_EFAIL;
    if (rc) return fail(s, rc, NULL);
    ms_opt_finish(m, 0, nl - 1, &s->opt, s->rb_opt, &s->last_opt);
    if (deferred) loss_sum += ms_layer_loss_sum(m, s->rb_loss);
    s->opt_ms = now_ms() - t0; /* it ends with the wait for the reads */
    ms_dev_where(&s->dev, -1, MS_PH_INIT);
    s->last_loss = loss_sum / (double)tokens;
    s->step++;
    s->steps_run++;
    if (s->dev.k.matmul_pick == 1) s->dev.k.matmul_pick = 2; /* timed in this step: keep what it found */
    /* the next step's graph, made now while the device is idle (normally
     * once, in the first step, which also allocates and times the pick);
     * none after the run's last step, nor while the next one runs */
    float next = s->opt.loss_scale / (float)tokens;
    if (!s->ahead && s->step < s->cfg.steps && graph_wanted(s) && !ms_step_graph_ready(&s->graph, &s->dev, next) &&
        (rc = capture(s, next)))
        return rc;
    return MS_OK;
}

/* What must not happen while the next step's micro-batch is queued (the
 * data has moved on by it, and it is adding to the gradients). */
static int refuse_ahead(ms_session *s, const char *what)
{
    if (!s->ahead) return MS_OK;
    snprintf(s->err, sizeof s->err, "%s while the next step is queued (launch_ahead was set for the last step)", what);
    return MS_EFAIL;
}

int ms_session_timing_pass(ms_session *s)
{
    ms_model *m = &s->model;
    int saved = s->measure, rc;
    double loss = 0;
    if ((rc = refuse_ahead(s, "no timing pass"))) return rc;
    s->measure = 1;
    for (int i = 0; i < m->n_layers; i++) s->fwd_ms[i] = s->bwd_ms[i] = 0;
    s->mb_fwd = s->mb_bwd = 0;
    rc = run_microbatch(s, 1.0f / (float)((size_t)m->B * m->T), &loss, NULL);
    s->measure = saved;
    if (rc) return rc;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].g) ms_dev_memset0(&s->dev, m->layers[i].g, m->layers[i].n_params * 4);
    ms_dev_where(&s->dev, -1, MS_PH_INIT);
    return ms_dev_sync(&s->dev) ? fail(s, MS_EFAIL, NULL) : MS_OK;
}

void ms_session_close(ms_session *s)
{
    if (s->ahead) ms_dev_sync(&s->dev); /* a queued graph still reads its slot */
    ms_step_graph_free(&s->graph); /* before the device's stream goes */
    free_readback(s);
    if (s->dev.ops) ms_dev_close(&s->dev);
    if (s->data) ms_data_close(s->data);
    ms_model_free(&s->model);
    free(s->inputs);
    free(s->targets);
    free(s->fwd_ms);
    free(s->bwd_ms);
    free(s->scr_of);
    free(s->need_fwd);
    free(s->need_bwd);
    free(s->fwd_range);
    free(s->bwd_range);
    memset(s, 0, sizeof *s);
}

/* ---- checkpoints (trainer/train_state.c does the work) ------------------- */

static ms_train_state state_of(ms_session *s)
{
    ms_train_state t = { &s->cfg, &s->model, &s->opt, &s->step, s->data, 1 };
    return t;
}

int ms_session_save(ms_session *s, const char *path)
{
    ms_train_state t = state_of(s);
    int rc = refuse_ahead(s, "no checkpoint");
    if (rc) return rc;
    rc = ms_train_state_save(&t, path, s->err, sizeof s->err);
    if (rc == MS_EOOM) fail(s, rc, NULL);
    return rc;
}

int ms_session_load(ms_session *s, const char *path)
{
    ms_train_state t = state_of(s);
    int rc = refuse_ahead(s, "no checkpoint loads");
    if (rc) return rc;
    rc = ms_train_state_load(&t, path, s->err, sizeof s->err);
    if (rc == MS_EOOM) fail(s, rc, NULL);
    ms_dev_where(&s->dev, -1, MS_PH_INIT);
    return rc;
}

int ms_session_resume(ms_session *s, const char *dir, char *path_out, size_t len, char *note, size_t notelen)
{
    ms_train_state t = state_of(s);
    int rc = refuse_ahead(s, "no resume");
    if (rc) return rc;
    rc = ms_train_state_resume(&t, dir, path_out, len, note, notelen, s->err, sizeof s->err);
    if (rc == MS_EOOM) fail(s, rc, NULL);
    ms_dev_where(&s->dev, -1, MS_PH_INIT);
    return rc;
}

int ms_session_checkpoint(ms_session *s, const char *dir, char *path_out, size_t len)
{
    ms_train_state t = state_of(s);
    if (refuse_ahead(s, "no checkpoint")) return MS_EFAIL;
    return ms_train_state_checkpoint(&t, dir, path_out, len, s->err, sizeof s->err);
}
