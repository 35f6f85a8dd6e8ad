/* pipeline.c — stages, their threads, the schedules, and one training step
 * over several devices (see pipeline.h). */
#include "trainer/pipeline.h"
#include "trainer/pipe_rank.h"
#include "trainer/nvtx_ranges.h"
#include "trainer/train_state.h"
#include "trainer/exec_internal.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ms_pipe_schedule_ops(ms_pipe_schedule sch, int s, int p, int m, int *ops)
{
    int n = 0;
    if (sch == MS_PIPE_GPIPE) {
        for (int i = 0; i < m; i++) ops[n++] = i + 1;
        for (int i = 0; i < m; i++) ops[n++] = -(i + 1);
        return n;
    }
    /* 1F1B: p-s-1 warm-up forwards, then one forward and one backward in
     * turn, then the remaining backwards. At most p-s micro-batches are
     * in flight on stage s. */
    int warm = p - s - 1 < m ? p - s - 1 : m, f = 0, b = 0;
    while (f < warm) ops[n++] = ++f;
    while (f < m) {
        ops[n++] = ++f;
        ops[n++] = -(++b);
    }
    while (b < m) ops[n++] = -(++b);
    return n;
}

static int in_flight(ms_pipe_schedule sch, int s, int p, int m)
{
    if (sch == MS_PIPE_GPIPE) return m;
    return p - s < m ? p - s : m;
}

static size_t act_bytes(const ms_pipeline *p) { return (size_t)p->model.B * p->model.T * p->model.C * ms_dtype_size(p->model.dt); }

/* Whether stage s runs in this process (always, unless ranks split the stages). */
static int here(const ms_pipeline *p, int s) { return !p->spec.dist || p->spec.dist->stage == s; }
static int n_replicas(const ms_pipeline *p) { return p->spec.dist ? p->spec.dist->replicas : 1; }

static int stage_fail(ms_pipeline *p, ms_stage *st, int rc, const char *msg)
{
    st->rc = rc;
    if (msg) snprintf(st->err, sizeof st->err, "%s", msg);
    else if (rc == MS_EFAIL) snprintf(st->err, sizeof st->err, "%s", st->dev->k.error[0] ? st->dev->k.error : "stage failed");
    for (int b = 0; b < p->tx.n; b++) {
        ms_channel_abort(&p->tx.fwd[b]);
        ms_channel_abort(&p->tx.bwd[b]);
    }
    return rc;
}

typedef struct stage_job {
    ms_pipeline *p;
    ms_stage *st;
} stage_job;

/* Runs one step's schedule on one stage. */
static void *stage_main(void *arg)
{
    stage_job *job = arg;
    ms_pipeline *p = job->p;
    ms_stage *st = job->st;
    ms_model *m = &p->model;
    int s = st->index, np = p->n_stages, nm = p->spec.n_micro;
    size_t N = (size_t)m->B * m->T, bytes = act_bytes(p);
    /* the loss is the mean over every replica's micro-batches, as on one device */
    float dscale = p->opt.loss_scale / (float)(N * nm * (size_t)n_replicas(p));
    if (st->dev->backend == MS_BACKEND_CUDA) cudaSetDevice(st->dev->cuda_ordinal);
    int ops[2 * 4096];
    int n_ops = ms_pipe_schedule_ops(p->spec.schedule, s, np, nm, ops);
    void *x_in[MS_TX_MAX_SLOTS] = { 0 };
    void *ahead = NULL;   /* a receive issued together with the previous op's send */
    st->loss_sum = 0;
#define FAIL(rc, msg) return (void *)(intptr_t)stage_fail(p, st, (rc), (msg))
#define ABORTED "aborted: another stage failed"
    for (int o = 0; o < n_ops; o++) {
        int fwd = ops[o] > 0, mb = (fwd ? ops[o] : -ops[o]) - 1;
        long base = (long)(p->step - p->step_base) * nm; /* message numbers since the channels began */
        long g = base + mb;
        int slot = (int)(g % st->k);
        /* the next op, if it starts with a receive on the boundary this op ends on */
        int nxt = o + 1 < n_ops ? ops[o + 1] : 0;
        long g2 = base + (nxt > 0 ? nxt : -nxt) - 1;
        for (int i = st->first; i <= st->last; i++) ms_layer_select(&m->layers[i], slot);
        if (fwd) {
            if (s > 0) {
                x_in[slot] = ahead ? ahead : ms_channel_recv(&p->tx.fwd[s - 1], g);
                ahead = NULL;
                if (!x_in[slot]) FAIL(MS_EFAIL, st->dev->k.error[0] ? NULL : ABORTED);
            }
            for (int i = st->first; i <= st->last; i++) {
                ms_layer *L = &m->layers[i];
                const int32_t *ids = L->kind == MS_LAYER_EMBED ? p->inputs + mb * N
                                   : L->kind == MS_LAYER_HEAD ? p->targets + mb * N : NULL;
                const void *x = i == st->first ? x_in[slot] : ms_layer_output(&m->layers[i - 1]);
                int rc = ms_layer_forward(m, L, &st->scr, x, ids);
                if (rc) FAIL(rc, NULL);
            }
            if (s < np - 1) {
                /* send the activation; fuse it with the next backward's gradient receive */
                ms_channel_group_begin(&p->tx.fwd[s]);
                int rc = ms_channel_send(&p->tx.fwd[s], g, ms_layer_output(&m->layers[st->last]), bytes);
                if (!rc && nxt < 0) ahead = ms_channel_recv(&p->tx.bwd[s], g2);
                if (ms_channel_group_end(&p->tx.fwd[s]) || rc || (nxt < 0 && !ahead))
                    FAIL(MS_EFAIL, st->dev->k.error[0] ? NULL : ABORTED);
            }
        } else {
            if (s < np - 1) {
                void *gbuf = ahead ? ahead : ms_channel_recv(&p->tx.bwd[s], g);
                ahead = NULL;
                if (!gbuf) FAIL(MS_EFAIL, st->dev->k.error[0] ? NULL : ABORTED);
                ms_dev_where(st->dev, st->last, MS_PH_BACKWARD);
                void *dres = ms_scratch_get(&st->scr, MS_TR_DRES, bytes);
                if (!dres) FAIL(MS_EOOM, NULL);
                ms_dev_d2d(st->dev, dres, gbuf, bytes);
                ms_channel_release(&p->tx.bwd[s], g);
            }
            for (int i = st->last; i >= st->first; i--) {
                ms_layer *L = &m->layers[i];
                const void *x = i == st->first ? x_in[slot] : ms_layer_output(&m->layers[i - 1]);
                int rc = ms_layer_backward(m, L, &st->scr, x, dscale, &st->loss_sum);
                if (rc) FAIL(rc, NULL);
            }
            if (s > 0) {
                /* send the input gradient; free the input slot; fuse with the next forward's receive */
                ms_channel_group_begin(&p->tx.bwd[s - 1]);
                int rc = ms_channel_send(&p->tx.bwd[s - 1], g, st->scr.buf[MS_TR_DRES], bytes);
                if (!rc) rc = ms_channel_release(&p->tx.fwd[s - 1], g);
                if (!rc && nxt > 0) ahead = ms_channel_recv(&p->tx.fwd[s - 1], g2);
                if (ms_channel_group_end(&p->tx.bwd[s - 1]) || rc || (nxt > 0 && !ahead))
                    FAIL(MS_EFAIL, st->dev->k.error[0] ? NULL : ABORTED);
            }
        }
    }
#undef FAIL
#undef ABORTED
    if (ms_dev_sync(st->dev)) return (void *)(intptr_t)stage_fail(p, st, MS_EFAIL, NULL);
    return NULL;
}

static int open_fail(ms_pipeline *p, int rc, int stage)
{
    p->oom_stage = stage;
    if (rc == MS_EOOM && stage >= 0) ms_pipe_oom_message(p, p->err, sizeof p->err);
    return rc;
}

/* One forward and backward of a zero micro-batch per stage, one stage after
 * the other, before any step. Why: CUDA loads kernels lazily, at their
 * first launch, and a load may wait for the whole device to go idle; during
 * a step a device is not idle while an NCCL kernel waits on its peer, whose
 * host thread may itself be loading a kernel: both would wait forever. After
 * this pass every kernel a step launches is loaded. It leaves no trace:
 * gradients are zeroed and batchnorm running statistics restored; the
 * buffers it uses were all allocated at open. */
static int warm_kernels(ms_pipeline *p)
{
    ms_model *m = &p->model;
    size_t N = (size_t)m->B * m->T, bytes = act_bytes(p);
    int32_t *ids = calloc(N, sizeof *ids);
    if (!ids) return MS_EFAIL;
    int rc = MS_OK;
    for (int s = 0; s < p->n_stages && !rc; s++) {
        ms_stage *st = &p->st[s];
        if (!here(p, s)) continue;
        const void *x0 = s > 0 ? st->recv_act[0] : NULL; /* the stage's input: zeros */
        float **bn_save = calloc((size_t)(st->last - st->first + 1), sizeof *bn_save); /* [layer - first] */
        if (!bn_save) { rc = MS_EFAIL; break; }
        for (int i = st->first; i <= st->last && !rc; i++) {
            ms_layer *L = &m->layers[i];
            ms_layer_select(L, 0);
            if (!L->bn_run) continue;
            float *h = bn_save[i - st->first] = malloc(ms_layer_bn_bytes(m, L));
            if (!h || ms_dev_d2h(st->dev, h, L->bn_run, ms_layer_bn_bytes(m, L))) rc = MS_EFAIL;
        }
        if (!rc && x0) rc = ms_dev_memset0(st->dev, st->recv_act[0], bytes);
        for (int i = st->first; i <= st->last && !rc; i++)
            rc = ms_layer_forward(m, &m->layers[i], &st->scr, i == st->first ? x0 : ms_layer_output(&m->layers[i - 1]), ids);
        if (!rc && s < p->n_stages - 1) {
            void *dres = ms_scratch_get(&st->scr, MS_TR_DRES, bytes);
            rc = dres ? ms_dev_memset0(st->dev, dres, bytes) : MS_EOOM;
        }
        for (int i = st->last; i >= st->first && !rc; i--)
            rc = ms_layer_backward(m, &m->layers[i], &st->scr, i == st->first ? x0 : ms_layer_output(&m->layers[i - 1]),
                                   1.0f / (float)N, NULL);
        for (int i = st->first; i <= st->last; i++) {
            ms_layer *L = &m->layers[i];
            float *h = bn_save[i - st->first];
            if (!rc && L->g) rc = ms_dev_memset0(st->dev, L->g, L->n_params * 4);
            if (!rc && h) rc = ms_dev_h2d(st->dev, L->bn_run, h, ms_layer_bn_bytes(m, L));
        }
        if (!rc && ms_dev_sync(st->dev)) rc = MS_EFAIL;
        for (int i = st->first; i <= st->last; i++) free(bn_save[i - st->first]);
        free(bn_save);
        ms_dev_where(st->dev, -1, MS_PH_INIT);
        if (rc) snprintf(p->err, sizeof p->err, "stage %d: kernel warm-up pass failed: %s", s,
                         st->dev->k.error[0] ? st->dev->k.error : "out of memory");
    }
    free(ids);
    return rc;
}

int ms_pipe_open(ms_pipeline *p, const ms_config *cfg, const ms_pipe_spec *spec)
{
    memset(p, 0, sizeof *p);
    p->oom_stage = -1;
    p->cfg = *cfg;
    p->spec = *spec;
    p->cfg.batch = spec->micro_batch;
    p->cfg.accum = spec->n_micro;
    if (ms_model_init(&p->model, &p->cfg, p->err, sizeof p->err)) return MS_EFAIL;
    ms_model *m = &p->model;
    int np = spec->n_stages;
    if (np < 1 || np > MS_MAX_STAGES || spec->n_devices < 1 || spec->n_devices > MS_MAX_STAGES) {
        snprintf(p->err, sizeof p->err, "a pipeline needs 1..%d stages and devices", MS_MAX_STAGES);
        return MS_EFAIL;
    }
    if (spec->dist && (spec->dist->stages != np || spec->dist->stage < 0 || spec->dist->stage >= np)) {
        snprintf(p->err, sizeof p->err, "rank of stage %d of %d, but the spec has %d stages", spec->dist->stage,
                 spec->dist->stages, np);
        return MS_EFAIL;
    }
    for (int s = 0, next = 0; s < np; s++) {
        int dev_ok = !here(p, s) || (spec->stage_device[s] >= 0 && spec->stage_device[s] < spec->n_devices);
        if (spec->first[s] != next || spec->last[s] < spec->first[s] || spec->last[s] >= m->n_layers || !dev_ok) {
            snprintf(p->err, sizeof p->err, "stage %d (layers %d-%d on device %d) does not continue a split of layers 0-%d",
                     s, spec->first[s], spec->last[s], spec->stage_device[s], m->n_layers - 1);
            return MS_EFAIL;
        }
        for (int t = 0; t < s && here(p, s); t++)
            if (here(p, t) && spec->stage_device[t] == spec->stage_device[s]) {
                snprintf(p->err, sizeof p->err, "stages %d and %d are on the same device", t, s);
                return MS_EFAIL;
            }
        next = spec->last[s] + 1;
        if (s == np - 1 && next != m->n_layers) {
            snprintf(p->err, sizeof p->err, "the stages end at layer %d; the model has layers 0-%d", next - 1, m->n_layers - 1);
            return MS_EFAIL;
        }
    }
    if (m->cfg.tied && np > 1 && (spec->dist || spec->stage_device[0] != spec->stage_device[np - 1])) {
        snprintf(p->err, sizeof p->err, "a tied embedding/head cannot be split across devices (set model.tied=0)");
        return MS_EFAIL;
    }
    if (spec->n_micro > 4096 || spec->n_micro < 1) {
        snprintf(p->err, sizeof p->err, "micro-batches per step must be 1..4096");
        return MS_EFAIL;
    }
    p->data = ms_data_open(&p->cfg, p->err, sizeof p->err);
    if (!p->data) return MS_EFAIL;
    if (ms_data_vocab_needed(p->data) > p->cfg.vocab) {
        snprintf(p->err, sizeof p->err, "the data has token ids up to %d but the model's vocab is %d",
                 ms_data_vocab_needed(p->data) - 1, p->cfg.vocab);
        return MS_EFAIL;
    }
    size_t N = (size_t)m->B * m->T;
    /* one more micro-batch: where a rank reads the other replicas' share */
    p->inputs = malloc(N * (spec->n_micro + 1) * 4);
    p->targets = malloc(N * (spec->n_micro + 1) * 4);
    p->devs = calloc((size_t)spec->n_devices, sizeof *p->devs);
    p->st = calloc((size_t)np, sizeof *p->st);
    p->scr_of = calloc((size_t)m->n_layers, sizeof *p->scr_of);
    if (!p->inputs || !p->targets || !p->devs || !p->st || !p->scr_of) {
        snprintf(p->err, sizeof p->err, "out of host memory");
        return MS_EFAIL;
    }
    for (int d = 0; d < spec->n_devices; d++) {
        if (ms_dev_open(&p->devs[d], d, spec->device[d], spec->capacity[d], spec->virtual_share, p->err, sizeof p->err))
            return MS_EFAIL;
        p->devs[d].k.matmul_pick = cfg->matmul_pick; /* a pipeline only trains: see matmul.cu's pick */
        p->n_dev = d + 1;
    }
    p->n_stages = np;
    ms_opt_init(&p->opt, &p->cfg);
    /* stages: parameters, in-flight slots, receive buffers (comm) */
    for (int s = 0; s < np; s++) {
        ms_stage *st = &p->st[s];
        st->index = s;
        st->first = spec->first[s];
        st->last = spec->last[s];
        st->dev = &p->devs[spec->stage_device[s]];
        st->scr.dev = st->dev;
        st->k = in_flight(spec->schedule, s, np, spec->n_micro);
        if (!here(p, s)) continue; /* another rank's */
        for (int i = st->first; i <= st->last; i++) {
            ms_layer *L = &m->layers[i];
            L->dev = st->dev;
            L->recompute = spec->recompute[s] && L->kind == MS_LAYER_BLOCK;
            p->scr_of[i] = &st->scr;
            if (ms_layer_set_slots(L, st->k)) { snprintf(p->err, sizeof p->err, "out of host memory"); return MS_EFAIL; }
        }
        int rc = ms_model_alloc_params(m, st->first, st->last);
        if (rc) return open_fail(p, rc, s);
        ms_dev_where(st->dev, st->first, MS_PH_INIT);
        size_t bytes = act_bytes(p);
        if (s > 0) {
            st->recv_act = calloc((size_t)st->k, sizeof *st->recv_act);
            if (!st->recv_act) return MS_EFAIL;
            for (int j = 0; j < st->k; j++) {
                st->recv_act[j] = ms_dev_alloc(st->dev, bytes, MS_CAT_COMM, "received activation", 0);
                if (!st->recv_act[j]) return open_fail(p, MS_EOOM, s);
            }
        }
        if (s < np - 1) {
            ms_dev_where(st->dev, st->last, MS_PH_INIT);
            st->recv_grad = ms_dev_alloc(st->dev, bytes, MS_CAT_COMM, "received gradient", 0);
            if (!st->recv_grad) return open_fail(p, MS_EOOM, s);
        }
        ms_dev_where(st->dev, -1, MS_PH_INIT);
    }
    /* distinct GPUs: NCCL between them (one communicator per GPU, rank = device index) */
    int distinct = np > 1 && !spec->virtual_share && !spec->dist; /* ranks: the communicators are dist's */
    for (int a = 0; distinct && a < p->n_dev; a++) {
        if (p->devs[a].backend != MS_BACKEND_CUDA) distinct = 0;
        for (int b = 0; distinct && b < a; b++)
            if (p->devs[a].cuda_ordinal == p->devs[b].cuda_ordinal) distinct = 0;
    }
    if (distinct) {
        int ords[MS_MAX_STAGES];
        for (int d = 0; d < p->n_dev; d++) ords[d] = p->devs[d].cuda_ordinal;
        if (ms_nccl_init(p->n_dev, ords, p->nccl, p->err, sizeof p->err)) return MS_EFAIL;
        p->n_nccl = p->n_dev;
    }
    /* With NCCL nothing may be allocated during a step (cudaFree waits for
     * the device while a peer's transfer may wait on this thread): take
     * everything now, largest scratch first so the arena never regrows. */
    if (p->n_nccl || spec->preallocate) {
        for (int s = 0; s < np; s++) {
            ms_stage *st = &p->st[s];
            if (!here(p, s)) continue;
            size_t need = 0;
            for (int i = st->first; i <= st->last; i++) {
                ms_layer *L = &m->layers[i];
                size_t n = L->kind == MS_LAYER_BLOCK ? ms_block_scratch_need(m, L) : L->kind == MS_LAYER_HEAD ? ms_head_scratch_need(m) : 0;
                if (n > need) need = n;
            }
            ms_dev_where(st->dev, st->last, MS_PH_BACKWARD);
            if (need && !ms_scratch_arena(&st->scr, need)) return open_fail(p, MS_EOOM, s);
            for (int k = 0; k < st->k; k++)
                for (int i = st->first; i <= st->last; i++) {
                    ms_layer_select(&m->layers[i], k);
                    int rc = ms_layer_preallocate(m, &m->layers[i], &st->scr);
                    if (rc) return open_fail(p, rc, s);
                }
            for (int i = st->first; i <= st->last; i++) {
                ms_layer_select(&m->layers[i], 0);
                int rc = spec->dist ? ms_pipe_rank_ensure_state(p, &m->layers[i]) : ms_opt_ensure_state(m, &m->layers[i]);
                if (rc) return open_fail(p, rc, s);
            }
            if (ms_dev_sync(st->dev)) return MS_EFAIL;
            ms_dev_where(st->dev, -1, MS_PH_INIT);
        }
    }
    p->tx.n = np - 1;
    if (np > 1 && spec->dist) {
        if (ms_pipe_rank_transport(p)) return MS_EFAIL;
    } else if (np > 1) {
        p->tx.fwd = calloc((size_t)(np - 1), sizeof *p->tx.fwd);
        p->tx.bwd = calloc((size_t)(np - 1), sizeof *p->tx.bwd);
        if (!p->tx.fwd || !p->tx.bwd) return MS_EFAIL;
        for (int b = 0; b < np - 1; b++) {
            ms_stage *a = &p->st[b], *c = &p->st[b + 1];
            if (ms_channel_init(&p->tx.fwd[b], a->dev, c->dev, c->k, c->recv_act) ||
                ms_channel_init(&p->tx.bwd[b], c->dev, a->dev, 1, &a->recv_grad)) {
                snprintf(p->err, sizeof p->err, "cannot set up the transport between stages %d and %d", b, b + 1);
                return MS_EFAIL;
            }
            if (p->n_nccl) {
                int da = spec->stage_device[b], dc = spec->stage_device[b + 1];
                ms_channel_use_nccl(&p->tx.fwd[b], p->nccl[da], da, p->nccl[dc], dc, act_bytes(p));
                ms_channel_use_nccl(&p->tx.bwd[b], p->nccl[dc], dc, p->nccl[da], da, act_bytes(p));
            }
        }
        if (ms_transport_nccl_connect(&p->tx, p->err, sizeof p->err)) return MS_EFAIL;
    }
    if ((p->n_nccl || spec->preallocate) && warm_kernels(p)) return MS_EFAIL;
    return MS_OK;
}

int ms_pipe_step(ms_pipeline *p)
{
    ms_model *m = &p->model;
    int nm = p->spec.n_micro, np = p->n_stages;
    size_t N = (size_t)m->B * m->T;
    /* every replica reads the whole global batch, keeping its own share
     * (micro-batches replica * nm .. + nm - 1; the rest lands in slot nm), so
     * the data position after a step is the same in every layout */
    int skip = p->spec.dist ? p->spec.dist->replica * nm : 0;
    if (p->steps_run++ == 1) /* the first step timed cuBLASLt's candidates: keep what it found */
        for (int d = 0; d < p->n_dev; d++)
            if (p->devs[d].k.matmul_pick == 1) p->devs[d].k.matmul_pick = 2;
    for (int i = 0; i < nm * n_replicas(p); i++) {
        int k = i - skip >= 0 && i - skip < nm ? i - skip : nm;
        if (ms_data_next(p->data, p->inputs + k * N, p->targets + k * N, m->B, m->T)) {
            snprintf(p->err, sizeof p->err, "data read failed");
            return MS_EFAIL;
        }
    }
    stage_job jobs[MS_MAX_STAGES];
    pthread_t th[MS_MAX_STAGES];
    for (int s = 0; s < np; s++) {
        p->st[s].rc = 0;
        p->st[s].err[0] = 0;
        jobs[s] = (stage_job){ p, &p->st[s] };
    }
    int started = 0;
    if (p->spec.dist) /* one stage here: run it on this thread (MPI is called from one thread only) */
        stage_main(&jobs[p->spec.dist->stage]);
    for (int s = 0; s < np && !p->spec.dist; s++, started++)
        if (pthread_create(&th[s], NULL, stage_main, &jobs[s]) != 0) {
            stage_fail(p, &p->st[s], MS_EFAIL, "cannot start a stage thread");
            break;
        }
    for (int s = 0; s < started; s++) pthread_join(th[s], NULL);
    /* the first real failure wins: an OOM over "aborted" */
    int rc = MS_OK;
    for (int s = 0; s < np; s++)
        if (p->st[s].rc == MS_EOOM) { rc = MS_EOOM; p->oom_stage = s; break; }
    if (rc == MS_OK)
        for (int s = 0; s < np; s++)
            if (p->st[s].rc && !strstr(p->st[s].err, "aborted")) {
                snprintf(p->err, sizeof p->err, "stage %d: %s", s, p->st[s].err);
                return MS_EFAIL;
            }
    if (rc == MS_EOOM) {
        ms_pipe_oom_message(p, p->err, sizeof p->err);
        return rc;
    }
    if (p->spec.dist) return ms_pipe_rank_finish(p);
    ms_range_push("optimizer");
    rc = ms_opt_step(m, 0, m->n_layers - 1, p->scr_of, &p->opt, &p->last_opt);
    ms_range_pop();
    if (rc) {
        for (int s = 0; s < np; s++)
            if (p->st[s].dev->oom.happened) p->oom_stage = s;
        if (rc == MS_EOOM) ms_pipe_oom_message(p, p->err, sizeof p->err);
        else snprintf(p->err, sizeof p->err, "optimizer step failed");
        return rc;
    }
    for (int d = 0; d < p->n_dev; d++) ms_dev_where(&p->devs[d], -1, MS_PH_INIT);
    p->last_loss = p->st[np - 1].loss_sum / (double)(N * nm);
    p->step++;
    return MS_OK;
}

const char *ms_pipe_oom_message(const ms_pipeline *p, char *buf, size_t len)
{
    if (p->oom_stage < 0) {
        snprintf(buf, len, "no out-of-memory recorded");
        return buf;
    }
    const ms_device *d = p->st[p->oom_stage].dev;
    int l = d->oom.layer;
    char msg[448];
    ms_dev_oom_message(d, l >= 0 && l < p->model.n_layers ? p->model.layers[l].name : NULL, msg, sizeof msg);
    snprintf(buf, len, "stage %d: %s", p->oom_stage, msg);
    return buf;
}

void ms_pipe_close(ms_pipeline *p)
{
    for (int b = 0; b < p->tx.n; b++) {
        ms_channel_destroy(&p->tx.fwd[b]);
        ms_channel_destroy(&p->tx.bwd[b]);
    }
    free(p->tx.fwd);
    free(p->tx.bwd);
    ms_nccl_destroy(p->n_nccl, p->nccl);
    for (int s = 0; p->st && s < p->n_stages; s++) free(p->st[s].recv_act);
    for (int d = 0; d < p->n_dev; d++) ms_dev_close(&p->devs[d]);
    free(p->devs);
    free(p->st);
    free(p->scr_of);
    if (p->data) ms_data_close(p->data);
    ms_model_free(&p->model);
    free(p->inputs);
    free(p->targets);
    memset(p, 0, sizeof *p);
}

static ms_train_state state_of(ms_pipeline *p)
{
    ms_train_state t = { &p->cfg, &p->model, &p->opt, &p->step, p->data, n_replicas(p) };
    return t;
}

int ms_pipe_save(ms_pipeline *p, const char *path)
{
    if (p->spec.dist) { /* one rank holds one stage: only all of them together make a checkpoint */
        snprintf(p->err, sizeof p->err, "a rank saves its part with ms_pipe_checkpoint");
        return MS_EFAIL;
    }
    ms_train_state t = state_of(p);
    return ms_train_state_save(&t, path, p->err, sizeof p->err);
}

int ms_pipe_load(ms_pipeline *p, const char *path)
{
    if (p->spec.dist) return ms_pipe_rank_load(p, path);
    ms_train_state t = state_of(p);
    int rc = ms_train_state_load(&t, path, p->err, sizeof p->err);
    p->step_base = p->step; /* the channels have carried nothing yet */
    for (int d = 0; d < p->n_dev; d++) ms_dev_where(&p->devs[d], -1, MS_PH_INIT);
    return rc;
}

int ms_pipe_resume(ms_pipeline *p, const char *dir, char *path_out, size_t len, char *note, size_t notelen)
{
    ms_train_state t = state_of(p);
    int rc = ms_train_state_resume(&t, dir, path_out, len, note, notelen, p->err, sizeof p->err);
    p->step_base = p->step;
    for (int d = 0; d < p->n_dev; d++) ms_dev_where(&p->devs[d], -1, MS_PH_INIT);
    return rc;
}

int ms_pipe_checkpoint(ms_pipeline *p, const char *dir, char *path_out, size_t len)
{
    if (p->spec.dist) return ms_pipe_rank_checkpoint(p, dir, path_out, len);
    ms_train_state t = state_of(p);
    return ms_train_state_checkpoint(&t, dir, path_out, len, p->err, sizeof p->err);
}
