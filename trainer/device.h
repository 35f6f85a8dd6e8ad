/* device.h — a device memsplit computes on, and its tagged allocator.
 *
 * A device is the CPU or a CUDA GPU with a capacity in bytes. Several
 * *virtual* devices may share one physical GPU: each has its own capacity,
 * stream and accounting. Every byte the trainer places on a device goes
 * through ms_dev_alloc, which tags it with (layer, phase, category, what)
 * and keeps live and peak bytes per category and per layer.
 *
 * Capacity: on the CPU and on a virtual device the allocator refuses a
 * request that would take live bytes past the capacity. On a whole GPU with
 * --gpu-mem, a ballast allocation (taken at open, before tracing) leaves only
 * the capacity free, and the real cudaMalloc decides; requests are rounded
 * to the driver's 2 MiB granularity so that the accounting equals what the
 * GPU really gives out. Either way a failed allocation returns NULL and fills
 * dev->oom (layer, phase, category, bytes, live bytes): never an abort. */
#ifndef MS_DEVICE_H
#define MS_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/ops.h"
#include "vocab/limits.h"
#include "vocab/mem_event.h"
#include "vocab/vocab.h"

typedef enum { MS_BACKEND_CPU = 0, MS_BACKEND_CUDA = 1 } ms_backend;

enum { MS_OK = 0, MS_EFAIL = 1, MS_EOOM = 2 };

/* Every allocation, free and refusal, as hooks (the CPU-side profiler) see
 * it: source MS_EV_SRC_ALLOCATOR, device the virtual device index, t_us
 * since the device was opened, what the tensor group. */
typedef void (*ms_alloc_hook)(void *user, const ms_mem_event *ev);

/* What a failed allocation knew. */
typedef struct ms_dev_oom {
    int happened;
    int device;
    int layer;
    ms_phase phase;
    ms_cat cat;
    char what[48];
    size_t requested;          /* bytes asked (rounded) */
    size_t capacity;
    size_t live[MS_CAT_N];     /* live bytes by category at the failure */
    size_t live_total;
    int by_backend;            /* 1: cudaMalloc itself failed; 0: capacity accounting refused */
    char backend_error[96];
} ms_dev_oom;

typedef struct ms_alloc_rec ms_alloc_rec; /* private: live allocation table */

typedef struct ms_device {
    int index;                 /* virtual device index */
    char name[40];             /* "cpu", "cuda:0", "cuda:0/v1" */
    ms_backend backend;
    int cuda_ordinal;          /* physical GPU (CUDA) */
    int virtual_share;         /* 1 if other virtual devices share the GPU */
    int account_only;          /* 1: the accounting enforces the capacity even with a ballast
                                  (the capacity was lowered after open, e.g. by --inject-oom) */
    size_t capacity;           /* bytes; SIZE_MAX = unlimited */
    size_t grain;              /* allocation granularity in bytes */
    const ms_ops *ops;
    ms_kctx k;                 /* stream, cuBLASLt handle, workspace */
    void *ballast;             /* CUDA ballast allocation, if any */
    size_t ballast_bytes;

    /* accounting */
    size_t live[MS_CAT_N], peak[MS_CAT_N];
    size_t live_total, peak_total;
    size_t at_peak[MS_CAT_N];  /* breakdown at the moment of peak_total */
    size_t live_layer[MS_MAX_LAYERS]; /* live bytes per layer (layer >= 0) */
    size_t n_allocs, n_frees;

    /* what is running now (set by the trainer) */
    int cur_layer;
    ms_phase cur_phase;

    /* While a CUDA graph records the stream (trainer/step_graph.h), an
     * allocation or a free would not happen again when the graph replays:
     * both are refused (alloc returns NULL, free keeps the buffer), with
     * no OOM recorded, and capture_broken says the capture is unusable. */
    int capturing, capture_broken;

    void *mark;                /* cudaEvent_t of ms_dev_mark (made at its first call) */

    ms_dev_oom oom;
    ms_alloc_hook hook;
    void *hook_user;
    ms_alloc_rec *recs;        /* open-addressing table of live allocations */
    size_t recs_cap, recs_n;
    double t0;
} ms_device;

/* Open a device. spec: "cpu" or "cuda:N". capacity 0 = the whole device
 * (CPU: unlimited). virtual_share: the GPU is shared by several virtual
 * devices (accounting enforces the capacity; no ballast). Returns 0, or -1
 * with err (e.g. "no CUDA device: ..."). */
int ms_dev_open(ms_device *d, int index, const char *spec, size_t capacity, int virtual_share,
                char *err, size_t errlen);
void ms_dev_close(ms_device *d);

/* Tagged allocation on d for the current layer/phase; zero-filled when zero != 0.
 * Returns NULL on OOM (d->oom filled) or backend error. */
void *ms_dev_alloc(ms_device *d, size_t bytes, ms_cat cat, const char *what, int zero);
void ms_dev_free(ms_device *d, void *p);
/* Bytes accounted for p (rounded), 0 if unknown. */
size_t ms_dev_size_of(const ms_device *d, const void *p);

/* Count bytes another library took on d's GPU after it opened (CUPTI's
 * buffers in a trial) in category cat, so that the capacity check sees the
 * memory the GPU really has left; not undone before close. */
void ms_dev_account_foreign(ms_device *d, ms_cat cat, size_t bytes);

/* Set what is running (layer index or -1, phase); used for tags and ranges. */
void ms_dev_where(ms_device *d, int layer, ms_phase phase);

/* Copies (async on the device's stream where possible; ms_dev_sync waits). */
int ms_dev_h2d(ms_device *d, void *dst, const void *src, size_t bytes);
int ms_dev_d2h(ms_device *d, void *dst, const void *src, size_t bytes);
int ms_dev_d2d(ms_device *d, void *dst, const void *src, size_t bytes);
int ms_dev_memset0(ms_device *d, void *p, size_t bytes);
/* Wait for queued work; returns 0 or the first kernel error (message in d->k.error). */
int ms_dev_sync(ms_device *d);

/* Reads the host takes later, so that more work can be queued before it
 * waits: ms_dev_d2h_later queues a copy into dst without waiting (dst from
 * ms_dev_host_alloc: pinned on a GPU, where a copy into pageable memory
 * would wait for the stream), ms_dev_mark marks the stream's end, and
 * ms_dev_wait_mark waits until the device has passed the mark, not for
 * what was queued after it; it returns like ms_dev_sync. On the CPU the
 * copy happens at once and the mark is the stream's end. */
void *ms_dev_host_alloc(ms_device *d, size_t bytes);
void ms_dev_host_free(ms_device *d, void *p);
int ms_dev_d2h_later(ms_device *d, void *dst, const void *src, size_t bytes);
int ms_dev_mark(ms_device *d);
int ms_dev_wait_mark(ms_device *d);

/* Number of CUDA GPUs visible (0 without a GPU or driver). */
int ms_cuda_gpu_count(void);
/* Total memory of each visible GPU (at most max); returns how many. */
int ms_cuda_gpu_capacities(uint64_t *caps, int max);

/* Human message describing d->oom into buf. */
const char *ms_dev_oom_message(const ms_device *d, const char *layer_name, char *buf, size_t len);

#endif
