/* cupti_ledger.h — the bookkeeping half of the CUPTI memory tracer, with no
 * CUPTI in it, so that the CPU tests can drive it with synthetic events.
 *
 * Contract:
 *  - ms_trace_event is one allocation, free or failed allocation, seen either
 *    by an API callback (MS_TEV_CALLBACK) or by a MEMORY2 activity record
 *    (MS_TEV_ACTIVITY). Byte counts are exact bytes; 0 bytes on a callback
 *    free means the address was not allocated while tracing.
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

enum { MS_TEV_ALLOC = 0, MS_TEV_FREE = 1, MS_TEV_FAIL = 2 };
enum { MS_TEV_CALLBACK = 0, MS_TEV_ACTIVITY = 1 };

typedef struct ms_trace_event {
    double t_us;          /* microseconds since ms_trace_start (CUPTI clock) */
    int kind;             /* MS_TEV_ALLOC, MS_TEV_FREE, MS_TEV_FAIL */
    uint64_t address;     /* device address; for cuMemCreate/Release the handle */
    uint64_t bytes;       /* allocated, freed (by address), or requested (FAIL) */
    int api_result;       /* cudaError_t / CUresult of the call; 0 for activity */
    uint32_t correlation; /* CUPTI correlation id of the call or record */
    int source;           /* MS_TEV_CALLBACK, MS_TEV_ACTIVITY */
    int device;           /* CUDA device ordinal, -1 if unknown */
    char range[64];       /* innermost NVTX range of the calling thread, "" if none */
    char api[32];         /* "cudaMalloc", "cuMemAlloc_v2", ... */
} ms_trace_event;

/* ---- event log ---- */
typedef struct ms_event_log {
    ms_trace_event *ev;
    int n, cap;
} ms_event_log;

/* Appends a copy; returns its index, or -1 if out of memory. */
int ms_event_log_push(ms_event_log *l, const ms_trace_event *e);
void ms_event_log_clear(ms_event_log *l); /* frees the storage */

/* Is this callback event on a VMM handle rather than an address? */
int ms_trace_event_is_handle(const ms_trace_event *e);

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
int ms_trace_ledger_compute(const ms_trace_event *ev, int n, int source, ms_trace_ledger *out);

/* One difference between the two ledgers. */
typedef struct ms_trace_diff {
    int kind;          /* MS_TEV_ALLOC or MS_TEV_FREE */
    int only_in;       /* the source that has it: MS_TEV_CALLBACK or MS_TEV_ACTIVITY */
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
int ms_trace_crosscheck(const ms_trace_event *ev, int n, ms_trace_xcheck *out);

#endif
