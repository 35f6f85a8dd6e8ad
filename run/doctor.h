/* doctor.h — `memsplit doctor` for the built-in model: trial → diagnosis →
 * plan → training with the plan, all recorded in one database under a
 * "doctor" run (its trial, plan and train runs), with progress throughout
 * and OOM recovery mid-run (rerun.h; as MPI ranks with a launcher,
 * doctor_ranks.h).
 *
 * Contract:
 *  - ms_run_doctor() runs the whole loop on cfg (validated; its device and
 *    gpu_mem set by the caller) over a->gpus devices of a->caps: one device
 *    when the trial fits. It prints the diagnosis, the plan and the measured
 *    peaks on stdout (stderr with json; the per-layer tables and the
 *    planner's reasoning only when verbose), progress on stderr unless
 *    quiet, and on an OOM that nothing fits the command that resumes the
 *    last checkpoint. Returns the exit status: 0 trained, 1 a plan the model
 *    refuses, 2 a runtime failure (also a record the database never took),
 *    3 no plan fits. *summary is {trial, plan, train} for the caller to
 *    print and free (json), else NULL.
 *  - ms_doctor_make_plan() plans over n devices of caps (named as the rerun
 *    will open them) in the trial's precision, or, when none fits and no
 *    precision was given, in any (saying why in plan->note); when the plan
 *    wants a micro-batch size the profile lacks, it measures it and plans
 *    again. MS_OK, MS_EOOM (err says what would fit) or MS_EFAIL. */
#ifndef MS_RUN_DOCTOR_H
#define MS_RUN_DOCTOR_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "planner/planner.h"
#include "run/inject.h"
#include "run/model_args.h"
#include "trainer/config.h"

typedef struct ms_doctor_args {
    const ms_model_args *ma;   /* as given: passed on to the ranks, and in the resume hint */
    const char *device;        /* --device (NULL: distinct GPUs when there are enough, else virtual devices) */
    const char *db_path, *ckdir, *cmdline;   /* ckdir NULL: DB.ckpt/run-N */
    const char *launch, *kill; /* --launch CMD, --inject-kill S:R (NULL: none) */
    uint64_t *caps;            /* gpus capacities (caps[0] becomes the trial's when it fits) */
    int gpus;
    int json, quiet, verbose, ckpt_every, db_timeout_ms;
    int replicas, zero;        /* --replicas (0: any), --zero (-1: any) */
    double headroom;           /* -1: the planner's default */
    ms_inject inject;
} ms_doctor_args;

int ms_run_doctor(const ms_config *cfg, const ms_doctor_args *a, json_t **summary);

int ms_doctor_make_plan(ms_profile *prof, const ms_config *cfg, const uint64_t *caps, int n, const char *device,
                        int precision_given, ms_plan_opts *po, ms_plan *plan, FILE *progress, int verbose, char *err,
                        size_t errlen);

#endif
