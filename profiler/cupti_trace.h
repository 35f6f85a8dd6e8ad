/* cupti_trace.h — records every device allocation and free of a traced
 * process through CUPTI, twice: runtime/driver API exit callbacks (sizes,
 * return codes, failed allocations) and MEMORY2 activity records (an
 * independent ledger). Each callback event carries the innermost NVTX range
 * of its thread (ranges pushed with trainer/nvtx_ranges.h; call ms_nvtx_prepare()
 * before the process's first NVTX call, or no range is seen).
 *
 * Contract:
 *  - ms_trace_start subscribes only to the allocation/free callbacks and the
 *    NVTX push/pop callbacks (never a whole domain, never kernel launches)
 *    and enables CUPTI_ACTIVITY_KIND_MEMORY2. Without a GPU, a driver or
 *    CUPTI it returns -1 with a message and changes nothing.
 *  - A runtime call is recorded once: driver calls made inside a traced
 *    runtime call are not recorded again (per-thread nesting).
 *  - A free gets its size from the allocation at the same address (per
 *    source); a failed allocation is an MS_EV_FAIL event with the bytes asked.
 *  - Activity records arrive when CUPTI hands over a buffer: call
 *    ms_trace_flush() (or ms_trace_stop()) before reading events or ledgers.
 *  - Thread-safe: callbacks from any thread; every call here takes one mutex.
 * Every function returns 0 on success and -1 on error (message in err when
 * there is one); nothing aborts. See docs/profiler-cupti.md. */
#ifndef MS_CUPTI_TRACE_H
#define MS_CUPTI_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "profiler/cupti_ledger.h" /* ms_mem_event, ledgers, cross-check */

int ms_trace_start(char *err, size_t errlen);
/* For a CUPTI injection library (the PyTorch bridge): starts from inside
 * InitializeInjection, where the driver is being initialised, so it does
 * not probe the driver; subscribes the callbacks only (no MEMORY2), and
 * hands every callback event to sink as it happens (outside the tracer's
 * locks, on the calling thread) instead of keeping it, so a long program
 * does not grow the tracer's memory. 0 or -1 with err. */
typedef void (*ms_trace_sink)(const ms_mem_event *e, void *user);
int ms_trace_start_streaming(ms_trace_sink sink, void *user, char *err, size_t errlen);

/* Hands over all of CUPTI's buffered activity records (forced flush). */
int ms_trace_flush(void);
/* Flushes, then unsubscribes and disables the activity kind. Events stay. */
int ms_trace_stop(void);
/* 1 while tracing. */
int ms_trace_running(void);

/* The collected events of both sources in arrival order. The pointer is
 * valid until the next event arrives or ms_trace_clear(): read it after
 * ms_trace_stop(), or use ms_trace_events_copy() while tracing. */
int ms_trace_events(const ms_mem_event **ev, int *n);
/* A malloc'd snapshot (free() it); *ev is NULL when *n is 0. */
int ms_trace_events_copy(ms_mem_event **ev, int *n);
/* Forgets the events and the live-allocation maps. */
void ms_trace_clear(void);

/* Summary for the cross-check: live bytes now and the number of successful
 * allocations, per source (any pointer may be NULL). */
int ms_trace_ledgers(uint64_t *callback_live, uint64_t *activity_live,
                     uint64_t *callback_allocs, uint64_t *activity_allocs);

/* What the tracer itself knows went wrong or was left out. */
typedef struct ms_trace_stats {
    uint64_t activity_dropped;     /* records CUPTI reported as dropped */
    uint64_t activity_skipped;     /* MEMORY2 records of host, array or static memory,
                                      or stamped before ms_trace_start */
    uint64_t activity_unmatched;   /* records whose correlation id met no callback */
    uint64_t failed_frees;         /* free calls that returned an error */
    uint64_t untraced_frees;       /* callback frees of addresses not allocated while tracing */
    uint64_t nvtx_callbacks;       /* NVTX push/pop callbacks seen (0: no injection?) */
    uint64_t lost_events;          /* events not stored for lack of host memory */
    int nvtx_env_set;              /* NVTX_INJECTION64_PATH was set at start */
} ms_trace_stats;
int ms_trace_get_stats(ms_trace_stats *out);

/* CUPTI's own device memory: the drop in free device memory across
 * ms_trace_start, measured only if a CUDA context was current then, else 0.
 * With only MEMORY2 enabled CUPTI keeps no device buffers, so 0 is expected
 * (see docs/profiler-cupti.md). */
uint64_t ms_trace_reserve_bytes(void);

/* The innermost NVTX range the tracer has seen on the calling thread, ""
 * if none (what an allocation made now would be attributed to). */
const char *ms_trace_current_range(void);

/* Test hooks (CPU unit tests drive the real decoding with synthetic CUPTI
 * data; never used in production). test_begin starts recording without
 * CUPTI (-1 if a real trace is running), with the trace's start at 500 ns
 * on the activity clock; test_callback feeds one
 * CUpti_CallbackData / CUpti_NvtxData as CUPTI would; test_activity feeds
 * one CUpti_ActivityMemory4 record. */
int ms_trace_test_begin(void);
void ms_trace_test_end(void);
void ms_trace_test_callback(int domain, uint32_t cbid, const void *cbdata);
void ms_trace_test_activity(const void *memory_record);

#endif
