/* program.h — the run floor's side of the PyTorch bridge (docs/bridge.md):
 * a user's own program profiled, planned for, rerun with a plan applied,
 * and the doctor's whole loop around them.
 *
 *  - program_trial.c: finding the bridge beside the memsplit binary, one
 *    pass of the program, why a pass gave no model, the trial (a pass under
 *    the capacity, an uncapped pass after an OOM, the rows, the table, the
 *    records) and --ballast-only;
 *  - program_plan.c: a plan's options for a program's profile, and its
 *    placement said in the program's module paths;
 *  - program_train.c: the program rerun with a plan (memsplit train --plan
 *    FILE -- PROGRAM);
 *  - program_doctor.c: trial → plan → rerun → restart after an OOM
 *    (memsplit doctor -- PROGRAM).
 * What is printed goes to stdout, or to stderr when the caller prints JSON
 * on stdout; errors say "memsplit CMD: ..." on stderr. */
#ifndef MS_RUN_PROGRAM_H
#define MS_RUN_PROGRAM_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "bridge/host/launch.h"
#include "bridge/trace.h"
#include "planner/planner.h"
#include "reports/db.h"

/* ---- one pass, the trial (program_trial.c) ----------------------------- */

/* $MEMSPLIT_BRIDGE_DIR, else <memsplit's folder>/bridge; checks that the
 * Python package and the library are there. 0 or -1 with err. */
int ms_program_bridge_dir(char *out, size_t len, char *err, size_t errlen);
/* Runs prog once with config (docs/bridge.md), collecting into t (which the
 * caller initialised); progress lines "profile: LABEL: step k/N done";
 * with json the program's stdout goes to stderr; record (may be NULL) gets
 * every event line (--record-events). */
int ms_program_pass(char *const *prog, const char *bridge_dir, json_t *config, const char *phase, int inject,
                    const char *label, int quiet, int json, FILE *record, msb_trace *t, msb_exit *ex, char *err,
                    size_t errlen);
/* Why the pass gave no model (no handshake, no torch, a refusal, it ended
 * before training), or NULL when it gave one. */
const char *ms_program_failure(const msb_trace *t, const msb_exit *ex, char *buf, size_t len);
/* The program's name: the first argument ending in .py, else argv[0]. */
void ms_program_name(char *const *prog, char *out, size_t len);

/* The trial of a program: a pass under the capacity, an uncapped pass after
 * an OOM, the rows, the table (or with brief only the diagnosis) and the
 * recording under a "profile" run (child of parent). Returns memsplit's
 * exit code for it (0 fits, 3 out of memory, 1 refused, 2 failed). */
typedef struct ms_program_trial_args {
    char *const *prog;
    size_t capacity;
    long steps;
    const char *layers;
    int diag, second, json, quiet, brief;
    int record_pass;           /* after the trial, the record pass (below) for the profile */
    int no_cupti;              /* GPU: CUPTI stays out of the program (no segment events) */
    ms_db *db;
    int64_t parent;
    const char *cmdline;
    const char *who;           /* "profile", "doctor": the messages' prefix */
    FILE *record;              /* --record-events (NULL: none) */
} ms_program_trial_args;

typedef struct ms_program_trial {
    ms_profile prof;
    int have_prof, have_u, recorded, code;
    const char *status;
    int64_t run;
    msb_trace t;
    msb_exit ex;
    char fail[1200];
    char name[128];
    int record_tried;          /* a record pass was asked for: prof.record, or why not */
    char record_why[1200];
} ms_program_trial;

int ms_program_run_trial(const ms_program_trial_args *a, ms_program_trial *r);
json_t *ms_program_trial_json(const ms_program_trial *r);
void ms_program_trial_free(ms_program_trial *r);

/* --ballast-only: the emulated capacity and nothing else (no hooks, no
 * tracking), on a GPU; says in which module the program died, if it did.
 * The exit status; with json, *summary is {oom, module, type, exit}. */
int ms_program_ballast_only(char *const *prog, size_t capacity, int json, int quiet, json_t **summary);

/* The record pass (program_record.c; docs/program-record.md): the program
 * run once more for steps steps, uncapped, each of the profile's layers a
 * stage of its own on the trial's device (virtual devices), every crossing
 * the applier makes said with what it copied. Its record goes to
 * prof->record, which the planner replays under each placement; on a GPU
 * the library buffers it measures (record.h: msb_record_untracked) take
 * the place of the trial's in prof->reserve. 0, or -1
 * with why (one layer, more layers than stages, the pass failed or ran
 * out): the plan then uses the stage rules. */
typedef struct ms_program_record_args {
    char *const *prog;
    long steps;
    int json, quiet;
    int brief;                 /* one line said, no step's progress (doctor's screen) */
    const char *who;           /* "doctor": the messages' prefix */
    FILE *events;              /* --record-events (NULL: none) */
    int no_cupti;              /* GPU: CUPTI stays out of the program */
    uint64_t libs;             /* of prof->reserve, the library buffers the trial measured (rows.h);
                                  the pass measures them again and puts its figure in their place */
} ms_program_record_args;
int ms_program_record_pass(const ms_program_record_args *a, ms_profile *prof, char *why, size_t whylen);

/* ---- plans (program_plan.c) -------------------------------------------- */

/* memsplit plan on a program's profile: the program's precision and batch
 * fixed, the schedule sequential, no recompute; -1 with err when an option
 * asks to change what is the program's own. No-op for the built-in model. */
int ms_program_plan_opts(const ms_profile *p, ms_plan_opts *o, char *err, size_t errlen);
/* "placement: segment1, transformers.0-12 → cuda:0; transformers.13-23, segment2 → cuda:1" */
void ms_program_placement(FILE *f, const ms_plan *pl);
/* Python that places the modules by hand, on the plan's devices. */
void ms_program_snippet(FILE *f, const ms_plan *pl);

/* ---- a plan's rerun of a program (program_train.c) --------------------- */

#define MS_PROGRAM_MAX_LOSSES 100000

typedef struct ms_program_device {
    char name[32];
    uint64_t capacity, predicted, measured;   /* measured 0: the run never got a step done */
    double gap;                               /* (measured - predicted) / predicted */
    int has_cats;                             /* the program sent its stage's breakdown */
    uint64_t measured_by_cat[MS_CAT_N];       /* the stage's tensors at its ledger peak, + the reserve */
    uint64_t predicted_by_cat[MS_CAT_N];
    /* a stage alone on its GPU, measured by the device's own counters (no ledger of its
     * activations there, so no breakdown): the caching allocator's peak and what the GPU held
     * beyond the allocator (context, libraries), the two parts of `measured` */
    int own_gpu;
    uint64_t allocator_peak, beyond;
    /* the same two parts of `predicted`: the tensors plus the reserve's part the allocator
     * holds (library buffers: ms_plan.reserve_allocator), and the rest of the reserve */
    uint64_t predicted_allocator_peak, predicted_beyond;
} ms_program_device;

typedef struct ms_program_run {
    int64_t run_id;            /* its run in the database, 0 without one */
    msb_trace trace;           /* everything the program sent (the caller frees it) */
    msb_exit ex;
    char failure[1200];        /* why it gave no model (a refusal, no handshake); "" when it ran */
    int refused;
    int steps, n_losses;
    double losses[MS_PROGRAM_MAX_LOSSES];
    int n_dev;
    ms_program_device dev[MS_MAX_STAGES];   /* one per stage */
    int oom, oom_stage;        /* a device ran out: which stage, where */
    int oom_step;              /* the step it ran out in (the program's own count), 0 unknown */
    uint64_t oom_need;         /* the bytes live there and asked for when it did (0 unknown) */
    int step_base;             /* steps finished before this run began: it resumed from a
                                  checkpoint saved after that many (0: from the start) */
    char oom_what[300];
} ms_program_run;

/* The bridge's plan (docs/bridge.md, "Applying a plan"): each stage's
 * device, layers and capacity, the fingerprint and the layers' module
 * paths, as the applier reads them, and "handed_on" (the plan's, when it
 * has any: the modules whose outputs stay where they were made). NULL
 * when out of memory. */
json_t *ms_program_plan_config(const ms_plan *pl);
/* The plan is a program's, sequential, and the machine has its GPUs. */
int ms_program_check_plan(const ms_plan *pl, char *err, size_t errlen);
/* A checkpoint an earlier run of the program saved: its path, and the
 * steps finished when it was saved. */
typedef struct ms_program_resume {
    const char *path;
    int step;
} ms_program_resume;

typedef struct ms_program_train_args {
    const ms_plan *plan;
    char *const *prog;
    long steps;                /* 0: to its end */
    int json, quiet;
    ms_db *db;                 /* record under a "train" run (child of parent); NULL: none */
    int64_t parent;
    const ms_program_resume *resume;   /* may be NULL */
} ms_program_train_args;

/* Runs the program under the plan. When it loads resume's checkpoint, its
 * steps are numbered from there. 0 when it ran (out says how), -1 with err
 * when it could not be started or recorded. */
int ms_program_train(const ms_program_train_args *a, ms_program_run *out, char *err, size_t errlen);
void ms_program_print_devices(FILE *f, const ms_program_run *r);
/* Each stage's measured peak from the run's last step, beside the plan's prediction (out->dev). */
void ms_program_measure(const ms_plan *pl, const msb_trace *t, ms_program_run *out);
/* Stage s of such a run as the database keeps it (dp): a stage alone on its GPU with its two parts. */
void ms_program_device_peak(const ms_plan *pl, const ms_program_run *r, int s, ms_device_peak *dp);
json_t *ms_program_run_json(const ms_program_run *r);

/* `memsplit train --plan FILE -- PROGRAM`: the plan loaded and checked,
 * the placement said, the rerun, how it ended and each device's peak
 * against the plan. The exit status (0 trained, 1 a plan for another
 * program or a refusal, 2 the program failed, 3 a device ran out); with
 * json, *summary is the run's JSON, for the caller to print and free. */
typedef struct ms_train_program_args {
    const char *plan_path, *db_path;   /* db_path may be NULL */
    char *const *prog;
    long steps;
    int json, quiet;
} ms_train_program_args;
int ms_run_train_program(const ms_train_program_args *a, json_t **summary);

/* ---- the doctor's loop (program_doctor.c) ------------------------------ */

/* `memsplit doctor -- PROGRAM`: the trial, then up to three plans and
 * reruns, recorded under one "doctor" run in db_path. The exit status (0
 * trained with the plan, 3 no plan fits or every restart ran out, 1 a
 * usage error or refusal, 2 the program failed); with json, *summary is
 * {trial, recoveries, plan, train}, for the caller to print and free. */
typedef struct ms_program_doctor_args {
    char *const *prog;
    int gpus;
    const ms_plan_device *devs;        /* gpus of them, each of capacity cap */
    size_t cap;
    long steps, train_steps;           /* the trial's; the rerun's (0: to its end) */
    double headroom;
    const char *layers, *db_path, *cmdline;
    int json, quiet;
} ms_program_doctor_args;
int ms_run_doctor_program(const ms_program_doctor_args *a, json_t **summary);

#endif
