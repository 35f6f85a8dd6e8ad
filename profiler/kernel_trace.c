/* kernel_trace.c — CUPTI activity records of kernels, copies and memsets
 * into an ms_ktimes. Contract: kernel_trace.h.
 *
 * Locking as in cupti_trace.c: `data_mu` guards the collected intervals and
 * is taken inside the buffer-completion callback; CUPTI may run that
 * callback synchronously inside cuptiActivityFlushAll, so no CUPTI call is
 * made with data_mu held. `ctl_mu` serialises start and stop. */
#include "profiler/kernel_trace.h"
#include "profiler/cupti_trace.h"
#include "vocab/errf.h"

#include <cupti.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const CUpti_ActivityKind KINDS[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
};
#define N_KINDS ((int)(sizeof KINDS / sizeof KINDS[0]))

/* ~40000 kernel records each; a few steps of seed17 fill about one */
#define BUFFER_BYTES ((size_t)8 << 20)

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t data_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int started, registered; /* ctl_mu */
    ms_ktimes k;             /* data_mu */
    uint64_t dropped;        /* data_mu */
    int oom;                 /* data_mu: an interval could not be stored */
} g;

static const char *copy_label(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[memcpy HtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[memcpy DtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[memcpy DtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "[memcpy HtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "[memcpy PtoP]";
    default: return "[memcpy]";
    }
}

static void CUPTIAPI on_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

/* One record into g.k; data_mu held. */
static void take(const CUpti_Activity *rec)
{
    const char *name = NULL;
    uint64_t s = 0, e = 0;
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const CUpti_ActivityKernel10 *r = (const void *)rec;
        name = r->name ? r->name : "[unnamed kernel]";
        s = r->start;
        e = r->end;
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const CUpti_ActivityMemcpy6 *r = (const void *)rec;
        name = copy_label(r->copyKind);
        s = r->start;
        e = r->end;
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const CUpti_ActivityMemset4 *r = (const void *)rec;
        name = "[memset]";
        s = r->start;
        e = r->end;
    } else {
        return;
    }
    if (ms_ktimes_add(&g.k, name, s, e)) g.oom = 1;
}

static void CUPTIAPI on_complete(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid)
{
    (void)size;
    if (!buffer) return;
    pthread_mutex_lock(&data_mu);
    CUpti_Activity *rec = NULL;
    while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) take(rec);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS) g.dropped += dropped;
    pthread_mutex_unlock(&data_mu);
    free(buffer);
}

static int cupti_fail(char *err, size_t errlen, const char *what, CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
    return ms_errf(err, errlen, "kernel tracing unavailable: %s failed: %s (%d)", what, s, (int)r);
}

int ms_ktrace_start(char *err, size_t errlen)
{
    pthread_mutex_lock(&ctl_mu);
    int rc = 0;
    if (g.started) {
        rc = ms_errf(err, errlen, "kernel tracing already started");
    } else if (ms_trace_running()) {
        rc = ms_errf(err, errlen, "kernel tracing unavailable: the memory tracer holds CUPTI's activity buffers");
    } else if (!g.registered) {
        CUptiResult r = cuptiActivityRegisterCallbacks(on_request, on_complete);
        if (r != CUPTI_SUCCESS) rc = cupti_fail(err, errlen, "cuptiActivityRegisterCallbacks", r);
        else g.registered = 1;
    }
    for (int i = 0; rc == 0 && i < N_KINDS; i++) {
        CUptiResult r = cuptiActivityEnable(KINDS[i]);
        if (r != CUPTI_SUCCESS) {
            rc = cupti_fail(err, errlen, "cuptiActivityEnable", r);
            while (--i >= 0) cuptiActivityDisable(KINDS[i]);
        }
    }
    if (rc == 0) {
        pthread_mutex_lock(&data_mu);
        ms_ktimes_free(&g.k);
        g.dropped = 0;
        g.oom = 0;
        pthread_mutex_unlock(&data_mu);
        g.started = 1;
    }
    pthread_mutex_unlock(&ctl_mu);
    return rc;
}

uint64_t ms_ktrace_now(void)
{
    uint64_t t = 0;
    return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? t : 0;
}

int ms_ktrace_stop(ms_ktimes *out, uint64_t *dropped, char *err, size_t errlen)
{
    pthread_mutex_lock(&ctl_mu);
    if (!g.started) {
        pthread_mutex_unlock(&ctl_mu);
        return ms_errf(err, errlen, "kernel tracing was not started");
    }
    /* hand over every record, stop the kinds, then take what is left */
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (int i = 0; i < N_KINDS; i++) cuptiActivityDisable(KINDS[i]);
    CUptiResult r2 = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    g.started = 0;
    pthread_mutex_lock(&data_mu);
    ms_ktimes_free(out);
    *out = g.k;
    ms_ktimes_init(&g.k);
    if (dropped) *dropped = g.dropped;
    int oom = g.oom;
    pthread_mutex_unlock(&data_mu);
    pthread_mutex_unlock(&ctl_mu);
    if (r != CUPTI_SUCCESS) return cupti_fail(err, errlen, "cuptiActivityFlushAll", r);
    if (r2 != CUPTI_SUCCESS) return cupti_fail(err, errlen, "cuptiActivityFlushAll", r2);
    if (oom) return ms_errf(err, errlen, "kernel tracing: out of host memory; some intervals are missing");
    return 0;
}
