/* pipe_rank.c — a pipeline that is one rank of a run (pipe_rank.h). */
#include "trainer/pipe_rank.h"
#include "trainer/nvtx_ranges.h"
#include "trainer/ckpt_parts.h"
#include "trainer/dist.h"
#include "trainer/opt_rank.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t msg_bytes(const ms_pipeline *p)
{
    return (size_t)p->model.B * p->model.T * p->model.C * ms_dtype_size(p->model.dt);
}

/* The local end of channel c, whose other end is stage `peer`. */
static void link_channel(ms_pipeline *p, ms_channel *c, int from, int to, int peer, int tag)
{
    const ms_dist *D = p->spec.dist;
    if (D->nccl_pipe) ms_channel_use_nccl(c, D->nccl_pipe, from, D->nccl_pipe, to, msg_bytes(p));
    else ms_channel_use_dist(c, D, peer, tag, msg_bytes(p));
}

/* NCCL connects a pair lazily, in a host-side handshake (transport.h):
 * make both neighbours' connections now, in one group, by swapping one
 * message with each (the contents are dropped). */
static int nccl_connect(ms_pipeline *p)
{
    const ms_dist *D = p->spec.dist;
    int s = D->stage, np = p->n_stages;
    ms_stage *st = &p->st[s];
    size_t bytes = msg_bytes(p);
    cudaStream_t sm = (cudaStream_t)st->dev->k.stream;
    ncclComm_t comm = (ncclComm_t)D->nccl_pipe;
    cudaSetDevice(st->dev->cuda_ordinal);
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess && s > 0) r = ncclSend(st->recv_act[0], bytes, ncclUint8, s - 1, comm, sm);
    if (r == ncclSuccess && s > 0) r = ncclRecv(st->recv_act[0], bytes, ncclUint8, s - 1, comm, sm);
    if (r == ncclSuccess && s < np - 1) r = ncclSend(st->recv_grad, bytes, ncclUint8, s + 1, comm, sm);
    if (r == ncclSuccess && s < np - 1) r = ncclRecv(st->recv_grad, bytes, ncclUint8, s + 1, comm, sm);
    ncclResult_t r2 = ncclGroupEnd();
    if (r == ncclSuccess) r = r2;
    if (r != ncclSuccess) {
        snprintf(p->err, sizeof p->err, "NCCL connect of stage %d to its neighbours: %s", s, ncclGetErrorString(r));
        return MS_EFAIL;
    }
    if (ms_dev_sync(st->dev)) {
        snprintf(p->err, sizeof p->err, "NCCL connect of stage %d: %s", s, st->dev->k.error);
        return MS_EFAIL;
    }
    return MS_OK;
}

int ms_pipe_rank_transport(ms_pipeline *p)
{
    const ms_dist *D = p->spec.dist;
    int s = D->stage, np = p->n_stages;
    ms_stage *st = &p->st[s];
    p->tx.fwd = calloc((size_t)(np - 1), sizeof *p->tx.fwd);
    p->tx.bwd = calloc((size_t)(np - 1), sizeof *p->tx.bwd);
    if (!p->tx.fwd || !p->tx.bwd) {
        snprintf(p->err, sizeof p->err, "out of host memory");
        return MS_EFAIL;
    }
    /* both ends of a channel are this device: the other is another process */
    int rc = 0;
    if (s > 0) {
        rc |= ms_channel_init(&p->tx.fwd[s - 1], st->dev, st->dev, st->k, st->recv_act);
        rc |= ms_channel_init(&p->tx.bwd[s - 1], st->dev, st->dev, 1, NULL);
        link_channel(p, &p->tx.fwd[s - 1], s - 1, s, s - 1, MS_TAG_ACT);
        link_channel(p, &p->tx.bwd[s - 1], s, s - 1, s - 1, MS_TAG_GRAD);
    }
    if (s < np - 1) {
        rc |= ms_channel_init(&p->tx.fwd[s], st->dev, st->dev, p->st[s + 1].k, NULL);
        rc |= ms_channel_init(&p->tx.bwd[s], st->dev, st->dev, 1, &st->recv_grad);
        link_channel(p, &p->tx.fwd[s], s, s + 1, s + 1, MS_TAG_ACT);
        link_channel(p, &p->tx.bwd[s], s + 1, s, s + 1, MS_TAG_GRAD);
    }
    if (rc) {
        snprintf(p->err, sizeof p->err, "cannot set up the transport of stage %d", s);
        return MS_EFAIL;
    }
    return D->nccl_pipe ? nccl_connect(p) : MS_OK;
}

int ms_pipe_rank_ensure_state(ms_pipeline *p, ms_layer *L)
{
    const ms_dist *D = p->spec.dist;
    if (L->mv || !D->zero || D->replicas < 2) return ms_opt_ensure_state(&p->model, L);
    size_t lo, hi;
    ms_opt_rank_share(D, L, &lo, &hi, 0);
    ms_dev_where(L->dev, L->index, MS_PH_OPTIMIZER);
    L->mv = ms_dev_alloc(L->dev, (hi - lo) * 8, MS_CAT_OPTIM, "adamw m+v (ZeRO-1 chunk)", 1);
    return L->mv ? MS_OK : MS_EOOM;
}

static int fail(ms_pipeline *p, int rc, const char *what)
{
    ms_stage *st = &p->st[p->spec.dist->stage];
    if (rc == MS_EOOM) {
        p->oom_stage = st->index;
        ms_pipe_oom_message(p, p->err, sizeof p->err);
    } else {
        snprintf(p->err, sizeof p->err, "stage %d, replica %d: %s: %s", st->index, p->spec.dist->replica, what,
                 p->spec.dist->err[0] ? p->spec.dist->err : st->dev->k.error);
    }
    return rc;
}

/* 1. the stage's gradients, summed over its replicas (ZeRO-1: each keeps its chunk) */
static int reduce_grads(ms_pipeline *p, ms_stage *st)
{
    const ms_dist *D = p->spec.dist;
    for (int i = st->first; i <= st->last && D->replicas > 1; i++) {
        ms_layer *L = &p->model.layers[i];
        if (!L->g) continue;
        int rc = D->zero ? D->dp_reduce_scatter(D->ctx, st->dev, L->g, L->n_params)
                         : D->dp_allreduce(D->ctx, st->dev, L->g, L->n_params);
        if (rc) return MS_EFAIL;
    }
    return MS_OK;
}

/* 4. batchnorm running statistics: the mean over the replicas */
static int average_bn(ms_pipeline *p, ms_stage *st)
{
    const ms_dist *D = p->spec.dist;
    for (int i = st->first; i <= st->last && D->replicas > 1; i++) {
        ms_layer *L = &p->model.layers[i];
        if (!L->bn_run) continue;
        size_t n = ms_layer_bn_bytes(&p->model, L) / sizeof(float);
        if (D->dp_allreduce(D->ctx, st->dev, L->bn_run, n)) return MS_EFAIL;
        st->dev->ops->scale(&st->dev->k, L->bn_run, n, 1.0f / (float)D->replicas);
    }
    return ms_dev_sync(st->dev) ? MS_EFAIL : MS_OK;
}

int ms_pipe_rank_finish(ms_pipeline *p)
{
    const ms_dist *D = p->spec.dist;
    ms_model *m = &p->model;
    ms_stage *st = &p->st[D->stage];
    const int nl = m->n_layers, rec = nl + 2; /* per rank: sumsq per layer, non-finite count, loss sum */
    ms_range_push("optimizer");
    int rc = reduce_grads(p, st);
    if (rc) {
        ms_range_pop();
        return fail(p, rc, "gradient reduction");
    }
    for (int i = st->first; i <= st->last && !rc; i++) rc = ms_pipe_rank_ensure_state(p, &m->layers[i]);
    if (rc) {
        ms_range_pop();
        return fail(p, rc, "optimizer state");
    }
    double *mine = calloc((size_t)rec, sizeof *mine), *all = calloc((size_t)rec * (size_t)D->size, sizeof *all);
    long nonfinite = 0;
    if (!mine || !all) rc = MS_EFAIL;
    if (!rc) rc = ms_opt_rank_stats(m, st->first, st->last, &st->scr, D, mine, &nonfinite);
    if (!rc) {
        mine[nl] = (double)nonfinite;
        mine[nl + 1] = st->index == p->n_stages - 1 ? st->loss_sum : 0;
        if (D->allgather(D->ctx, mine, (size_t)rec * sizeof *mine, all)) rc = MS_EFAIL;
    }
    /* every rank sums the same numbers in the same order: per layer over
     * the ranks, then over the layers in layer order */
    double sumsq = 0, bad = 0, loss = 0;
    for (int l = 0; !rc && l <= nl + 1; l++) {
        double v = 0;
        for (int r = 0; r < D->size; r++) v += all[(size_t)r * rec + l];
        if (l < nl) sumsq += v;
        else if (l == nl) bad = v;
        else loss = v;
    }
    free(mine);
    free(all);
    if (!rc) {
        double norm = sqrt(sumsq) / p->opt.loss_scale;
        rc = ms_opt_rank_apply(m, st->first, st->last, &p->opt, D, norm, bad == 0 && isfinite(norm), &p->last_opt);
    }
    if (!rc) rc = average_bn(p, st);
    ms_range_pop();
    if (rc) return fail(p, rc, "optimizer step");
    ms_dev_where(st->dev, -1, MS_PH_INIT);
    size_t N = (size_t)m->B * m->T;
    p->last_loss = loss / (double)(N * (size_t)p->spec.n_micro * (size_t)D->replicas);
    p->step++;
    return MS_OK;
}

static int ensure_all(ms_pipeline *p)
{
    ms_stage *st = &p->st[p->spec.dist->stage];
    for (int i = st->first; i <= st->last; i++) {
        int rc = ms_pipe_rank_ensure_state(p, &p->model.layers[i]);
        if (rc) return fail(p, rc, "optimizer state");
    }
    return MS_OK;
}

int ms_pipe_rank_checkpoint(ms_pipeline *p, const char *dir, char *path_out, size_t len)
{
    /* agreed, like the save's own steps: every rank returns the same verdict */
    int rc = ensure_all(p);
    if (!ms_ckpt_all_ok(p->spec.dist, rc == MS_OK)) {
        if (rc == MS_OK) snprintf(p->err, sizeof p->err, "another rank could not make its optimizer state");
        return rc ? rc : MS_EFAIL;
    }
    ms_train_state t = { &p->cfg, &p->model, &p->opt, &p->step, p->data, p->spec.dist->replicas };
    ms_ckpt_layout lay = { p->n_stages, p->spec.first, p->spec.last };
    return ms_ckpt_parts_save(&t, p->spec.dist, &lay, dir, path_out, len, p->err, sizeof p->err);
}

int ms_pipe_rank_load(ms_pipeline *p, const char *path)
{
    int rc = ensure_all(p);
    if (rc) return rc;
    ms_train_state t = { &p->cfg, &p->model, &p->opt, &p->step, p->data, p->spec.dist->replicas };
    rc = ms_ckpt_parts_load(&t, p->spec.dist, path, NULL, p->err, sizeof p->err);
    p->step_base = p->step; /* the channels have carried nothing yet */
    ms_dev_where(p->st[p->spec.dist->stage].dev, -1, MS_PH_INIT);
    return rc;
}
