/* mem_event.h — one memory event, whoever saw it: the trainer's tagged
 * allocator (trainer/device.h's hook), CUPTI's API callbacks and MEMORY2
 * records (profiler/cupti_trace.h), a program's storages and CUDA segments
 * through the bridge (bridge/trace.h, bridge/child/msb.h), and the run
 * database (reports/db.h), which stores the events as they come.
 *
 * Contract:
 *  - kind is MS_EV_ALLOC, MS_EV_FREE or MS_EV_FAIL (an allocation refused
 *    or failed: bytes is what was asked); source says who saw it, and the
 *    database keeps both numbers as they are (docs/database.md).
 *  - -1 is "unknown" for device, layer, phase and category (CUPTI and the
 *    caching allocator's segments know no category).
 *  - t_us: microseconds since the source started (its own clock); the
 *    database keeps whole microseconds.
 *  - what: the tensor group ("act", "qkv_w") for the trainer's allocator, the
 *    API call ("cudaMalloc", "memory2:device") for CUPTI, which names the
 *    same field api; "" when unknown.
 *  - range, api_result and correlation are CUPTI's alone (the calling
 *    thread's innermost NVTX range, from which the profiler reads layer and
 *    phase; the call's return code; its correlation id): "" and 0 for the
 *    other sources, and the database does not keep them. */
#ifndef MS_MEM_EVENT_H
#define MS_MEM_EVENT_H

#include <stdint.h>

typedef enum { MS_EV_ALLOC = 0, MS_EV_FREE = 1, MS_EV_FAIL = 2 } ms_mem_event_kind;
typedef enum {
    MS_EV_SRC_ALLOCATOR = 0,        /* the trainer's tagged allocator (CPU and GPU), or a program's
                                       storages in the bridge's ledger */
    MS_EV_SRC_CUPTI_CALLBACK = 1,   /* CUPTI runtime/driver API exit callbacks */
    MS_EV_SRC_CUPTI_ACTIVITY = 2    /* CUPTI MEMORY2 activity records */
} ms_mem_event_source;

typedef struct ms_mem_event {
    double t_us;          /* microseconds since the source started */
    int device;           /* virtual device index, CUDA ordinal, or the run's device index */
    int kind;             /* ms_mem_event_kind */
    int layer;            /* layer index, -1 outside any layer */
    int phase;            /* ms_phase, -1 unknown */
    int category;         /* ms_cat, -1 unknown */
    uint64_t bytes;       /* allocated, freed, or asked for (MS_EV_FAIL) */
    uint64_t address;     /* device address (a VMM handle for cuMemCreate/Release), storage key; 0 for a failure */
    union {
        char what[48];    /* tensor group, "" unknown */
        char api[48];     /* CUPTI: "cudaMalloc", "cuMemAlloc_v2", "memory2:device", ... */
    };
    int source;           /* ms_mem_event_source */
    char range[64];       /* CUPTI: innermost NVTX range of the calling thread, "" if none */
    int api_result;       /* CUPTI: cudaError_t / CUresult of the call; 0 for activity */
    uint32_t correlation; /* CUPTI: correlation id of the call or record */
} ms_mem_event;

#endif
