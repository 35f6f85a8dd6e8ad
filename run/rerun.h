/* rerun.h — training with a plan over several devices (memsplit train
 * --plan, and the last part of memsplit doctor): maps the plan's devices to
 * real ones (distinct GPUs, virtual devices on one GPU, or on the CPU),
 * trains, checkpoints, records steps and each device's measured peak against
 * the plan's prediction, and recovers from an OOM mid-run by re-planning for
 * the capacity that remains and resuming from the last checkpoint it wrote.
 *
 * Only the devices that hold a stage are opened (a plan may list up to
 * MS_MAX_DEVICES, a pipeline has up to MS_MAX_STAGES: vocab/limits.h); the
 * records keep the plan's device indices. Of the checkpoints it writes, the
 * newest two are kept (recovery needs the newest; the one before covers a
 * process killed while writing); it deletes no file it did not write or
 * resume from. No step row or record is dropped: a write the database
 * refuses is kept and retried (steplog.h), and a record that is never
 * written makes r->db_failed non-zero. A signal armed by run/interrupt.h
 * stops it between steps, with a checkpoint of the last finished one where
 * it has a folder (r->interrupted). The recovery itself is recover.h's;
 * each device's outcome (JSON, records, lines) is rerun_result.c's. */
#ifndef MS_RUN_RERUN_H
#define MS_RUN_RERUN_H

#include <jansson.h>
#include <stdio.h>
#include "run/inject.h"
#include "planner/planner.h"
#include "reports/db.h"
#include "trainer/config.h"
#include "trainer/pipeline.h"

typedef struct ms_rerun_opts {
    const char *device;        /* "cpu", "cuda:N" (virtual devices on it), or NULL: auto */
    int steps;                 /* optimizer steps to reach */
    const char *ckpt_dir;      /* checkpoints (needed for recovery); NULL = none */
    int ckpt_every;            /* steps between checkpoints; 0 = none (a recovery restarts from step 0) */
    int resume;                /* start from the newest sound checkpoint of this job in ckpt_dir */
    /* testing aid: at the start of step inject.step, plan device inject.dev
     * shrinks (as if another process took memory) and its transient
     * buffers are handed back, so the step must allocate again */
    ms_inject inject;
    const ms_profile *prof;    /* for re-planning after an OOM (NULL: no recovery) */
    ms_plan_opts popts;        /* the options the plan was made with */
    ms_db *db;                 /* record steps, peaks, OOMs, recoveries (may be NULL) */
    int64_t run;
    int64_t plan_id;           /* the plan's id in db, 0 if none */
    int db_timeout_ms;         /* the database's busy timeout (MS_DB_BUSY_MS) */
    FILE *progress;            /* NULL = quiet */
    int log_every;             /* a progress line every N steps; 0: about five lines a run */
} ms_rerun_opts;

typedef struct ms_rerun_result {
    int steps, steps_run, recoveries;
    double loss_first, loss_last, tokens_per_s;
    json_t *losses;            /* per step (owned) */
    json_t *devices;           /* [{name, capacity_bytes, predicted_peak_bytes, measured_peak_bytes, gap, by category}] */
    double worst_gap;          /* max over devices of |measured - predicted| / predicted */
    int oom_unrecovered;       /* 1: stopped because no plan fits any more */
    int interrupted;           /* the signal that stopped it between steps (run/interrupt.h), 0 none: the
                                  last finished step is checkpointed where there is a folder; MS_OK */
    char checkpoint[1024];     /* the last checkpoint written or resumed from ("": none): a run
                                  stopped by an OOM can resume it (same job: trainer/job.h) */
    int checkpoint_step;
    int db_failed;             /* records the database never took (each said on stderr) */
    char err[1024];
} ms_rerun_result;

/* Whether plan can train the model of cfg: the model's name and shape
 * (layers, seq_len, d_model, n_head, vocab) must equal the config's, and
 * the inject device (when o->inject.step > 0) must hold a stage. 0, or -1
 * with a message that shows both values. */
int ms_rerun_check(const ms_config *cfg, const ms_plan *plan, const ms_rerun_opts *o, char *err, size_t errlen);

/* Returns MS_OK, MS_EOOM (stopped cleanly: nothing fits; r->checkpoint is
 * intact; r->err says what is needed) or MS_EFAIL. *plan may be replaced by
 * the recovery's new plan. */
int ms_rerun(const ms_config *cfg, ms_plan *plan, const ms_rerun_opts *o, ms_rerun_result *r);
void ms_rerun_result_free(ms_rerun_result *r);

/* The result as doctor and train --plan print it: JSON, and the
 * measured-against-predicted lines (gap = (measured - predicted) / predicted,
 * signed, as memsplit report shows it). */
json_t *ms_rerun_result_json(const ms_rerun_result *r);
/* The recovery's plan: the model re-planned over devs (n of them; 0: none
 * left) with popts, in *plan's precision and global batch (so its
 * checkpoint stays this job's: trainer/job.h), chosen as ms_plan_choose
 * chooses. Replaces *plan on MS_OK; MS_EOOM when nothing fits (err says
 * what would, of `what`, e.g. "the capacity that remains"), else MS_EFAIL. */
int ms_rerun_replan(const ms_profile *prof, const ms_plan_opts *popts, const ms_plan_device *devs, int n,
                    const char *what, ms_plan *plan, char *err, size_t errlen);
void ms_rerun_print_devices(FILE *f, const ms_rerun_result *r);
/* The run ended with p open: each device's peak against its stage's
 * prediction into r (devices, worst_gap) and, with a database, its record
 * (rerun_result.c). */
void ms_rerun_measured(const ms_rerun_opts *o, ms_rerun_result *r, const ms_pipeline *p, const ms_plan *plan,
                       const int *plan_dev);

#endif
