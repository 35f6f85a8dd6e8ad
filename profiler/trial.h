/* trial.h — the profiler's single-device trial and the profile it yields.
 *
 * ms_trial_run trains cfg on its one device for `steps` steps while
 * recording every allocation: the trainer's allocator hook on any backend,
 * and on a GPU also CUPTI (API callbacks and MEMORY2 activity records, with
 * layer/phase from the trainer's NVTX ranges). It builds one profile row per
 * layer from what it saw. If the trial runs out of memory it records the
 * diagnosis (layer, phase, bytes requested, live bytes by category and by
 * layer, capacity) and completes the profile by measuring, in isolation on
 * the same device (without the emulated cap: bytes are what is measured),
 * each distinct layer shape whose row is incomplete. Extra
 * precisions and micro-batch sizes are measured in isolation too. The
 * profiler never changes what the trainer allocates.
 *
 * Returns MS_OK (the model fits), MS_EOOM (ran out; profile complete and
 * diagnosis filled) or MS_EFAIL (r->err says why). */
#ifndef MS_TRIAL_H
#define MS_TRIAL_H

#include <stdio.h>
#include "vocab/mem_event.h"
#include "vocab/profile.h"
#include "trainer/config.h"

typedef struct ms_trial_opts {
    int steps;               /* training steps of the trial (>= 1) */
    int precisions[3];       /* precisions to measure; [0] is the trial's own */
    int n_prec;
    int batches[2];          /* micro-batch sizes; [0] is the trial's own */
    int n_batch;
    int use_cupti;           /* trace with CUPTI when the device is a GPU */
    FILE *progress;          /* progress lines (NULL = quiet) */
} ms_trial_opts;

typedef struct ms_ledger_check {
    int done;                    /* 0: not run (no CUPTI) */
    int allocs;                  /* allocator allocations during tracing */
    int matched_callback;        /* of those, found in the CUPTI callback ledger (address, bytes) */
    int matched_activity;        /* ... in the MEMORY2 activity ledger */
    int frees, frees_matched_callback, frees_matched_activity;
    int fail_seen_by_cupti;      /* the failed cudaMalloc, if any, seen by the callbacks with its bytes */
    int cupti_only;              /* CUPTI allocations the allocator did not make */
    uint64_t bytes_allocator, bytes_callback, bytes_activity;
    char detail[512];            /* first differences, human text */
} ms_ledger_check;

typedef struct ms_trial_result {
    ms_profile prof;
    ms_mem_event *events;        /* allocator events, then CUPTI events (for the database) */
    int n_events, cap_events;
    ms_ledger_check check;
    double step_ms;              /* mean step time of the trial (steps after the first, if any) */
    char oom_msg[512];
    char err[512];
} ms_trial_result;

int ms_trial_run(const ms_config *cfg, const ms_trial_opts *o, ms_trial_result *r);
void ms_trial_free(ms_trial_result *r);

/* Add rows for (precision, batch) to a profile by measuring each layer
 * shape in isolation (the planner chose a micro-batch size the trial did
 * not measure). MS_OK or MS_EFAIL with err. */
int ms_profile_measure(ms_profile *p, const ms_config *cfg, int precision, int batch, FILE *progress, char *err,
                       size_t errlen);

/* Measure one layer alone on cfg's device at cfg's precision and batch:
 * its parameters, saved activations, gradients, optimizer state, scratch
 * need and times. Fills row (source = isolated). MS_OK / MS_EOOM / MS_EFAIL. */
int ms_isolate_layer(const ms_config *cfg, int layer, ms_layer_row *row, char *err, size_t errlen);

#endif
