/* transport.c — push-model channels between pipeline stages (see transport.h). */
#include "trainer/transport.h"
#include "trainer/dist.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static int is_cuda(const ms_channel *c)
{
    return c->src->backend == MS_BACKEND_CUDA || c->dst->backend == MS_BACKEND_CUDA;
}

int ms_channel_init(ms_channel *c, ms_device *src, ms_device *dst, int n_slots, void **slots)
{
    memset(c, 0, sizeof *c);
    if (n_slots < 1 || n_slots > MS_TX_MAX_SLOTS) return MS_EFAIL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->src = src;
    c->dst = dst;
    c->n_slots = n_slots;
    c->slot = slots;
    if (!is_cuda(c)) return MS_OK;
    for (int i = 0; i < n_slots; i++) {
        cudaSetDevice(src->cuda_ordinal);
        if (cudaEventCreateWithFlags((cudaEvent_t *)&c->ev_sent[i], cudaEventDisableTiming) != cudaSuccess) return MS_EFAIL;
        cudaSetDevice(dst->cuda_ordinal);
        if (cudaEventCreateWithFlags((cudaEvent_t *)&c->ev_freed[i], cudaEventDisableTiming) != cudaSuccess) return MS_EFAIL;
    }
    return MS_OK;
}

void ms_channel_destroy(ms_channel *c)
{
    if (!c->src) return;
    for (int i = 0; i < c->n_slots; i++) {
        if (c->ev_sent[i]) cudaEventDestroy((cudaEvent_t)c->ev_sent[i]);
        if (c->ev_freed[i]) cudaEventDestroy((cudaEvent_t)c->ev_freed[i]);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    memset(c, 0, sizeof *c);
}

void ms_channel_abort(ms_channel *c)
{
    if (!c->src) return;
    pthread_mutex_lock(&c->mu);
    c->aborted = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void ms_channel_use_nccl(ms_channel *c, void *comm_src, int rank_src, void *comm_dst, int rank_dst, size_t bytes)
{
    c->nccl_src = comm_src;
    c->nccl_dst = comm_dst;
    c->rank_src = rank_src;
    c->rank_dst = rank_dst;
    c->bytes = bytes;
}

void ms_channel_use_dist(ms_channel *c, const ms_dist *dist, int peer, int tag, size_t bytes)
{
    c->dist = dist;
    c->peer = peer;
    c->tag = tag;
    c->bytes = bytes;
}

void ms_channel_group_begin(const ms_channel *c)
{
    if (c && c->dist) c->dist->group_begin(c->dist->ctx);
    else if (c && c->nccl_src) ncclGroupStart();
}

int ms_channel_group_end(const ms_channel *c)
{
    if (c && c->dist) return c->dist->group_end(c->dist->ctx) ? MS_EFAIL : MS_OK;
    if (c && c->nccl_src) return ncclGroupEnd() == ncclSuccess ? MS_OK : MS_EFAIL;
    return MS_OK;
}

/* A failed send or receive to another process: the message goes to the
 * local device, whose error the stage reports. */
static int dist_fail(ms_device *d, const ms_dist *dist)
{
    if (!d->k.status) {
        d->k.status = MS_EFAIL;
        snprintf(d->k.error, sizeof d->k.error, "%.150s", dist->err[0] ? dist->err : "transfer to another rank failed");
    }
    return MS_EFAIL;
}

static int nccl_fail(ms_device *d, ncclResult_t r, const char *what)
{
    if (!d->k.status) {
        d->k.status = MS_EFAIL;
        snprintf(d->k.error, sizeof d->k.error, "NCCL %s: %s", what, ncclGetErrorString(r));
    }
    return MS_EFAIL;
}

int ms_nccl_init(int n, const int *ordinals, void **comms, char *err, size_t errlen)
{
    setenv("NCCL_NVLS_ENABLE", "0", 0); /* NVLink multicast can take the host's GPUs down: never */
    ncclComm_t *cs = calloc((size_t)n, sizeof *cs);
    if (!cs) return MS_EFAIL;
    ncclResult_t r = ncclCommInitAll(cs, n, ordinals);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "NCCL: cannot create communicators for %d GPUs: %s", n, ncclGetErrorString(r));
        free(cs);
        return MS_EFAIL;
    }
    for (int i = 0; i < n; i++) comms[i] = cs[i];
    free(cs);
    return MS_OK;
}

void ms_nccl_destroy(int n, void **comms)
{
    for (int i = 0; i < n; i++)
        if (comms[i]) ncclCommDestroy((ncclComm_t)comms[i]);
}

int ms_transport_nccl_connect(ms_transport *tx, char *err, size_t errlen)
{
    if (tx->n < 1 || !tx->fwd[0].nccl_src) return MS_OK;
    /* the gradient buffer of stage b and input slot 0 of stage b+1 swap
     * contents: both sides send and receive, so every connection is made */
    for (int b = 0; b < tx->n; b++) {
        ms_channel *f = &tx->fwd[b], *g = &tx->bwd[b];
        if (ms_dev_memset0(f->src, g->slot[0], g->bytes) || ms_dev_memset0(f->dst, f->slot[0], f->bytes)) {
            snprintf(err, errlen, "NCCL connect: cannot clear the stage buffers");
            return MS_EFAIL;
        }
    }
    ncclResult_t r = ncclGroupStart();
    for (int b = 0; r == ncclSuccess && b < tx->n; b++) {
        ms_channel *f = &tx->fwd[b], *g = &tx->bwd[b];
        cudaStream_t sa = (cudaStream_t)f->src->k.stream, sc = (cudaStream_t)f->dst->k.stream;
        r = ncclSend(g->slot[0], f->bytes, ncclUint8, f->rank_dst, (ncclComm_t)f->nccl_src, sa);
        if (r == ncclSuccess) r = ncclRecv(f->slot[0], f->bytes, ncclUint8, f->rank_src, (ncclComm_t)f->nccl_dst, sc);
        if (r == ncclSuccess) r = ncclSend(f->slot[0], g->bytes, ncclUint8, g->rank_dst, (ncclComm_t)g->nccl_src, sc);
        if (r == ncclSuccess) r = ncclRecv(g->slot[0], g->bytes, ncclUint8, g->rank_src, (ncclComm_t)g->nccl_dst, sa);
    }
    ncclResult_t r2 = ncclGroupEnd();
    if (r == ncclSuccess) r = r2;
    if (r != ncclSuccess) {
        snprintf(err, errlen, "NCCL connect between the stages: %s", ncclGetErrorString(r));
        return MS_EFAIL;
    }
    for (int b = 0; b < tx->n; b++)
        for (int e = 0; e < 2; e++) {
            ms_device *d = e ? tx->fwd[b].dst : tx->fwd[b].src;
            if (ms_dev_sync(d)) {
                snprintf(err, errlen, "NCCL connect between stages %d and %d: %s: %s", b, b + 1, d->name, d->k.error);
                return MS_EFAIL;
            }
        }
    return MS_OK;
}

int ms_channel_send(ms_channel *c, long msg, const void *src_buf, size_t bytes)
{
    if (c->dist) {
        if (c->dist->send(c->dist->ctx, c->peer, c->tag, src_buf, bytes)) return dist_fail(c->src, c->dist);
        c->sent = msg + 1;
        return MS_OK;
    }
    if (c->nccl_src) {
        /* the receiver's slot is free by its own stream order (it posts the
         * receive only when it forwards this micro-batch) */
        ms_device *d = c->src;
        cudaSetDevice(d->cuda_ordinal);
        ncclResult_t r = ncclSend(src_buf, bytes, ncclUint8, c->rank_dst, (ncclComm_t)c->nccl_src,
                                  (cudaStream_t)d->k.stream);
        if (r != ncclSuccess) return nccl_fail(d, r, "send");
        pthread_mutex_lock(&c->mu);
        c->sent = msg + 1;
        pthread_mutex_unlock(&c->mu);
        return MS_OK;
    }
    pthread_mutex_lock(&c->mu);
    while (!c->aborted && msg - c->freed >= c->n_slots) pthread_cond_wait(&c->cv, &c->mu);
    int aborted = c->aborted;
    pthread_mutex_unlock(&c->mu);
    if (aborted) return MS_EFAIL;
    int k = (int)(msg % c->n_slots);
    if (is_cuda(c)) {
        ms_device *d = c->src;
        cudaStream_t st = (cudaStream_t)d->k.stream;
        cudaSetDevice(d->cuda_ordinal);
        cudaError_t e = cudaSuccess;
        /* the receiver's work that read this slot's previous message comes first */
        if (msg >= c->n_slots) e = cudaStreamWaitEvent(st, (cudaEvent_t)c->ev_freed[k], 0);
        if (e == cudaSuccess) e = cudaMemcpyAsync(c->slot[k], src_buf, bytes, cudaMemcpyDefault, st);
        if (e == cudaSuccess) e = cudaEventRecord((cudaEvent_t)c->ev_sent[k], st);
        if (e != cudaSuccess) {
            if (!d->k.status) {
                d->k.status = MS_EFAIL;
                snprintf(d->k.error, sizeof d->k.error, "stage transfer: %s", cudaGetErrorString(e));
            }
            return MS_EFAIL;
        }
    } else {
        memcpy(c->slot[k], src_buf, bytes);
    }
    pthread_mutex_lock(&c->mu);
    c->sent = msg + 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return MS_OK;
}

void *ms_channel_recv(ms_channel *c, long msg)
{
    if (c->dist) {
        void *buf = c->slot[msg % c->n_slots];
        if (c->dist->recv(c->dist->ctx, c->peer, c->tag, buf, c->bytes)) {
            dist_fail(c->dst, c->dist);
            return NULL;
        }
        return buf;
    }
    if (c->nccl_dst) {
        ms_device *d = c->dst;
        int k = (int)(msg % c->n_slots);
        cudaSetDevice(d->cuda_ordinal);
        ncclResult_t r = ncclRecv(c->slot[k], c->bytes, ncclUint8, c->rank_src, (ncclComm_t)c->nccl_dst,
                                  (cudaStream_t)d->k.stream);
        if (r != ncclSuccess) {
            nccl_fail(d, r, "recv");
            return NULL;
        }
        return c->slot[k];
    }
    pthread_mutex_lock(&c->mu);
    while (!c->aborted && c->sent <= msg) pthread_cond_wait(&c->cv, &c->mu);
    int aborted = c->aborted;
    pthread_mutex_unlock(&c->mu);
    if (aborted) return NULL;
    int k = (int)(msg % c->n_slots);
    if (is_cuda(c)) {
        ms_device *d = c->dst;
        cudaSetDevice(d->cuda_ordinal);
        if (cudaStreamWaitEvent((cudaStream_t)d->k.stream, (cudaEvent_t)c->ev_sent[k], 0) != cudaSuccess) return NULL;
    }
    return c->slot[k];
}

int ms_channel_release(ms_channel *c, long msg)
{
    if (c->nccl_dst || c->dist) return MS_OK; /* stream (or program) order protects the buffer */
    int k = (int)(msg % c->n_slots);
    if (is_cuda(c)) {
        ms_device *d = c->dst;
        cudaSetDevice(d->cuda_ordinal);
        if (cudaEventRecord((cudaEvent_t)c->ev_freed[k], (cudaStream_t)d->k.stream) != cudaSuccess) return MS_EFAIL;
    }
    pthread_mutex_lock(&c->mu);
    if (msg + 1 > c->freed) c->freed = msg + 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return MS_OK;
}
