/* cupti_ledger.h — the bookkeeping half of the CUPTI memory tracer, with no
 * CUPTI in it, so that the CPU tests can drive it with synthetic events.
 *
 * Contract:
 *  - An event (ms_mem_event) is one allocation, free or failed allocation,
 *    seen either by an API callback (MS_EV_SRC_CUPTI_CALLBACK) or by a
 *    MEMORY2 activity record (MS_EV_SRC_CUPTI_ACTIVITY). Byte counts are
 *    exact bytes; 0 bytes on a callback free means the address was not
 *    allocated while tracing.
 *  - ms_addr_map (vocab/addr_map.h): address -> bytes of live allocations,
 *    to give a free its size.
 *  - ms_event_log: a growable array of events in arrival order.
 *  - ms_trace_ledger_compute / ms_trace_crosscheck are pure functions of an
 *    event array: the ledger of one source, and the byte-for-byte agreement
 *    of the two sources (same address and bytes for every allocation and
 *    every free). Callback events on VMM handles (cuMemCreate/cuMemRelease,
 *    whose "address" is a handle) take no part in the cross-check.
 * Nothing here locks: the caller (cupti_trace.c) holds its mutex. */
#ifndef MS_CUPTI_LEDGER_H
#define MS_CUPTI_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/addr_map.h"
#include "vocab/mem_event.h"

/* The tracer's events are the one memory event (vocab/mem_event.h): source
 * MS_EV_SRC_CUPTI_CALLBACK or MS_EV_SRC_CUPTI_ACTIVITY, what (alias api) the
 * call, range the NVTX range, layer, phase and category -1 (the profiler
 * reads layer and phase from the range), device the CUDA ordinal. These are
 * its older names, which the tracer's tests use. */
typedef ms_mem_event ms_trace_event;
enum { MS_TEV_ALLOC = MS_EV_ALLOC, MS_TEV_FREE = MS_EV_FREE, MS_TEV_FAIL = MS_EV_FAIL };
enum { MS_TEV_CALLBACK = MS_EV_SRC_CUPTI_CALLBACK, MS_TEV_ACTIVITY = MS_EV_SRC_CUPTI_ACTIVITY };

/* ---- event log ---- */
typedef struct ms_event_log {
    ms_mem_event *ev;
    int n, cap;
} ms_event_log;

/* Appends a copy; returns its index, or -1 if out of memory. */
int ms_event_log_push(ms_event_log *l, const ms_mem_event *e);
void ms_event_log_clear(ms_event_log *l); /* frees the storage */

/* Is this callback event on a VMM handle rather than an address? */
int ms_trace_event_is_handle(const ms_mem_event *e);

/* ---- ledgers and cross-check (pure) ---- */
typedef struct ms_trace_ledger {
    uint64_t live_bytes;      /* allocated and not freed at the end */
    uint64_t peak_bytes;      /* highest live_bytes along the way */
    uint64_t alloc_bytes;     /* sum over successful allocations */
    uint64_t free_bytes;      /* sum over frees of traced allocations */
    int allocs, frees, fails;
    int untraced_frees;       /* frees of addresses not allocated while tracing */
} ms_trace_ledger;

/* Replays the events of one source (callback events in arrival order,
 * activity events by timestamp) and fills *out. 0, or -1 on bad arguments
 * or out of memory. */
int ms_trace_ledger_compute(const ms_mem_event *ev, int n, int source, ms_trace_ledger *out);

/* One difference between the two ledgers. */
typedef struct ms_trace_diff {
    int kind;          /* MS_EV_ALLOC or MS_EV_FREE */
    int only_in;       /* the source that has it: MS_EV_SRC_CUPTI_CALLBACK or MS_EV_SRC_CUPTI_ACTIVITY */
    uint64_t address, bytes;
} ms_trace_diff;

#define MS_TRACE_MAX_DIFFS 8
typedef struct ms_trace_xcheck {
    int allocs_matched, frees_matched;
    uint64_t bytes_matched;           /* allocated bytes on which both agree */
    int allocs_callback_only, allocs_activity_only;
    int frees_callback_only, frees_activity_only;
    int frees_untraced;               /* either source: address never allocated while tracing */
    int n_diffs;                      /* first MS_TRACE_MAX_DIFFS differences */
    ms_trace_diff diffs[MS_TRACE_MAX_DIFFS];
} ms_trace_xcheck;

/* Compares callback and activity ledgers as multisets of (address, bytes),
 * allocations and frees separately. Returns 0 when they agree, 1 when they
 * differ (out says how), -1 on bad arguments or out of memory. */
int ms_trace_crosscheck(const ms_mem_event *ev, int n, ms_trace_xcheck *out);

#endif
