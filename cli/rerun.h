/* rerun.h — training with a plan over several devices (memsplit train
 * --plan, and the last part of memsplit doctor): maps the plan's devices to
 * real ones (distinct GPUs, virtual devices on one GPU, or on the CPU),
 * trains, checkpoints, records steps and each device's measured peak against
 * the plan's prediction, and recovers from an OOM mid-run by re-planning for
 * the capacity that remains and resuming from the last checkpoint. */
#ifndef MS_CLI_RERUN_H
#define MS_CLI_RERUN_H

#include <jansson.h>
#include <stdio.h>
#include "planner/planner.h"
#include "reports/db.h"
#include "trainer/config.h"
#include "trainer/pipeline.h"

typedef struct ms_rerun_opts {
    const char *device;        /* "cpu", "cuda:N" (virtual devices on it), or NULL: auto */
    int steps;                 /* optimizer steps to reach */
    const char *ckpt_dir;      /* checkpoints (needed for recovery); NULL = none */
    int ckpt_every;            /* steps between checkpoints; 0 = none (a recovery restarts from step 0) */
    int resume;                /* start from the newest checkpoint in ckpt_dir */
    /* testing aid: at the start of step inject_step, device inject_dev
     * shrinks to inject_bytes (as if another process took the rest) and its
     * transient buffers are handed back, so the step must allocate again */
    int inject_step, inject_dev;
    size_t inject_bytes;
    double inject_frac;     /* > 0: instead, keep this fraction of what the device's
                             * tensors took at their peak so far (its reserve stays) */
    const ms_profile *prof;    /* for re-planning after an OOM (NULL: no recovery) */
    ms_plan_opts popts;        /* the options the plan was made with */
    ms_db *db;                 /* record steps, peaks, OOMs, recoveries (may be NULL) */
    int64_t run;
    int64_t plan_id;           /* the plan's id in db, 0 if none */
    FILE *progress;            /* NULL = quiet */
} ms_rerun_opts;

typedef struct ms_rerun_result {
    int steps, steps_run, recoveries;
    double loss_first, loss_last, tokens_per_s;
    json_t *losses;            /* per step (owned) */
    json_t *devices;           /* [{name, capacity_bytes, predicted_peak_bytes, measured_peak_bytes, gap, by category}] */
    double worst_gap;          /* max over devices of |measured - predicted| / predicted */
    int oom_unrecovered;       /* 1: stopped because no plan fits any more */
    char err[1024];
} ms_rerun_result;

/* Returns MS_OK, MS_EOOM (stopped cleanly: nothing fits; the checkpoint is
 * intact; r->err says what is needed) or MS_EFAIL. *plan may be replaced by
 * the recovery's new plan. */
int ms_rerun(const ms_config *cfg, ms_plan *plan, const ms_rerun_opts *o, ms_rerun_result *r);
void ms_rerun_result_free(ms_rerun_result *r);

/* The pipeline spec of a plan on the given device kind. */
int ms_rerun_spec(const ms_plan *plan, const char *device, ms_pipe_spec *spec, char *err, size_t errlen);

#endif
