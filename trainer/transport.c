/* transport.c — push-model channels between pipeline stages (see transport.h). */
#include "trainer/transport.h"

#include <cuda_runtime_api.h>
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

int ms_channel_send(ms_channel *c, long msg, const void *src_buf, size_t bytes)
{
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
