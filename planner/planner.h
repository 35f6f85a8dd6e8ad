/* planner.h — the plan: how to split a profiled model over devices.
 *
 * Contract:
 *  - ms_plan_search() finds the plan with the smallest predicted step time
 *    (memory_model.h states the model) over: the number of stages (1..number
 *    of devices, fewer if faster), which devices hold them and in what order
 *    (every subset and ordering of the given capacities), contiguous split
 *    points, the precision policy, the schedule, the micro-batch size (every
 *    divisor of the global batch) and full-block recompute per stage — each
 *    option either open or fixed by ms_plan_opts. Every stage's predicted
 *    peak must be <= floor(capacity * (1 - headroom)). The search is exact
 *    (dynamic programming over (layer suffix, devices used) with Pareto sets
 *    of (slowest stage time, slowest optimizer time); docs/planner.md).
 *    Returns MS_PLAN_OK and fills *out, MS_PLAN_INFEASIBLE when nothing fits
 *    (then ms_plan_explain_infeasible() says what would), or MS_PLAN_ERROR
 *    with a one-line message (bad profile, unknown option, missing rows).
 *  - ms_plan_choose() is the plan memsplit uses: of the plans whose predicted
 *    step time is within MS_PLAN_TIE (3%) of the fastest, which count as
 *    equal (measured times are noisy), it takes, in this order, the trial's
 *    precision (that of the profile's full-run rows), then fewer stages,
 *    then no recompute, then the lower peak (the most memory left free);
 *    the fastest plan with those choices fixed. plan->note says, when the
 *    precision was open, whether it kept the trial's and why not.
 *    ms_plan_search() alone is the exact fastest plan.
 *  - ms_plan_explain_infeasible() re-runs the search with relaxed settings:
 *    more GPUs, a larger capacity, each fixed option opened in turn.
 *  - Plans own their arrays: ms_plan_free(). Nothing prints or aborts. */
#ifndef MS_PLANNER_H
#define MS_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/limits.h"
#include "vocab/profile.h"

/* 2: optional keys: a program block (a program's fingerprint and module
 * names), the sequential schedule, replicas and ZeRO-1; version 1 plans
 * still load */
#define MS_PLAN_VERSION 2
#define MS_PLAN_OK 0
#define MS_PLAN_INFEASIBLE 1
#define MS_PLAN_ERROR (-1)

#define MS_PLAN_DEFAULT_HEADROOM 0.05
#define MS_PLAN_DEFAULT_LINK_GBPS 200.0  /* gigabits per second between stages */
/* All-reduce bus bandwidth when none was measured (bench/nccl_bw measures
 * it): the same PCIe-class figure as the stage links. */
#define MS_PLAN_DEFAULT_BUS_GBPS 200.0
/* Distinct capacities are searched as a multiset: at most this many states. */
#define MS_PLAN_MAX_DEVICE_STATES 4096

/* GPipe and 1F1B are the built-in trainer's pipelines (the search tries
 * both when the schedule is open). Sequential is model parallelism with one
 * stage busy at a time, the only schedule a single-process program can run
 * honestly (the PyTorch bridge): never chosen unless asked for. */
typedef enum { MS_SCHED_GPIPE = 0, MS_SCHED_1F1B = 1, MS_SCHED_SEQUENTIAL = 2, MS_SCHED_N } ms_schedule;
#define MS_SCHED_PIPELINES 2   /* the schedules an open search tries */
typedef enum { MS_RECOMPUTE_AUTO = 0, MS_RECOMPUTE_NEVER = 1, MS_RECOMPUTE_ALWAYS = 2 } ms_recompute_mode;

const char *ms_schedule_name(int s);            /* "gpipe", "1f1b" */
int ms_schedule_parse(const char *s);           /* -1 if unknown */
const char *ms_recompute_mode_name(int m);      /* "auto", "never", "always" */
int ms_recompute_mode_parse(const char *s);

typedef struct ms_plan_device {
    char name[32];          /* "cuda:0" */
    uint64_t capacity;      /* bytes */
} ms_plan_device;

typedef struct ms_plan_opts {
    int precision;          /* -1: any the profile has; else ms_precision */
    int schedule;           /* -1: any; else ms_schedule */
    int global_batch;       /* sequences per optimizer step; 0: the profile's */
    int micro_batch;        /* 0: any divisor of global_batch */
    int recompute;          /* ms_recompute_mode */
    int max_stages;         /* 0: as many as devices */
    int replicas;           /* data-parallel copies of the pipeline: 0 any, else fixed */
    int zero;               /* ZeRO-1 (AdamW state sharded over the replicas): -1 any, 0 off, 1 on */
    double bus_gbps;        /* all-reduce bus bandwidth, Gbit/s, > 0 */
    uint64_t comm_reserve;  /* bytes per device for the collective library's own buffers
                             * (NCCL's, measured by bench/nccl_bw; 0 on the CPU, where MPI's
                             * buffers are host memory outside the device's capacity) */
    double headroom;        /* fraction of each capacity kept free, [0, 1) */
    double link_gbps;       /* stage-to-stage bandwidth, Gbit/s, > 0 */
    int first_fit;          /* internal use: stop at the first plan that fits */
} ms_plan_opts;

void ms_plan_opts_default(ms_plan_opts *o);

typedef struct ms_plan_stage {
    int device;             /* index into ms_plan.devices */
    int first, last;        /* layer range, inclusive */
    int recompute;          /* 1: full-block recompute of every layer in the stage */
    uint64_t bytes[MS_CAT_N];   /* predicted peak by category (ms_cat order) */
    uint64_t peak;          /* sum of bytes[] */
    double fwd_ms, bwd_ms;  /* per micro-batch; bwd includes the recompute forward */
    double comm_ms;         /* per micro-batch: its sends (activation forward, gradient backward) */
    double opt_ms;          /* optimizer step of its layers */
} ms_plan_stage;

typedef struct ms_plan {
    int version;
    char model[128];
    int n_layers, seq_len, d_model, n_head, vocab;
    int n_devices;
    ms_plan_device *devices;    /* every device given, in order (owned) */
    int precision;              /* ms_precision */
    int schedule;               /* ms_schedule */
    int micro_batch, n_micro, global_batch;
    double headroom, link_gbps;
    int n_stages;
    ms_plan_stage *stages;      /* in pipeline order (owned) */
    int replicas;               /* d >= 1 copies of the pipeline, each on its own devices */
    int zero;                   /* 1: ZeRO-1 over each stage's d replicas */
    double bus_gbps;            /* the all-reduce bandwidth the time model assumed */
    uint64_t comm_reserve;      /* per device, counted in each stage's comm bytes */
    int *replica_devices;       /* [n_stages * replicas]: device of stage s in replica r at
                                 * s * replicas + r; r = 0 is stages[s].device (owned) */
    double step_ms;             /* predicted time of one optimizer step */
    int64_t profile_run;        /* run id the profile came from, 0: none */
    char profile_file[512];     /* file the profile came from, "": none */
    char *reasoning;            /* the paragraph (owned, may be NULL) */
    char note[512];             /* how ms_plan_choose() chose among equals ("": nothing to say) */
    /* a program's plan (the bridge): "" and NULL for the built-in model */
    char program[128];          /* the script, e.g. "train.py" */
    char fingerprint[MS_FINGERPRINT_MAX];
    char **layer_names;         /* n_layers module paths (owned) */
} ms_plan;

void ms_plan_free(ms_plan *p);
/* A program's plan carries its name, fingerprint and the module paths of
 * its layers (from the profile's rows), so that the bridge can apply it and
 * refuse it for another program. No-op for the built-in model; -1 when out
 * of memory. */
int ms_plan_attach_program(ms_plan *pl, const ms_profile *prof);

int ms_plan_search(const ms_profile *prof, const ms_plan_device *devs, int n_devs, const ms_plan_opts *opts,
                   ms_plan *out, char *err, size_t errlen);

#define MS_PLAN_TIE 0.03   /* predicted step times within 3% of each other count as equal */
int ms_plan_choose(const ms_profile *prof, const ms_plan_device *devs, int n_devs, const ms_plan_opts *opts,
                   ms_plan *out, char *err, size_t errlen);

/* A sequential plan's stage (a program's), asked about one moment: the
 * bytes the model predicts it holds at most while layer `layer` (n_layers:
 * the program's loss) runs its forward or backward (MS_PH_*), reserve
 * included, into *live. 0, or -1 when that stage never runs that moment. */
int ms_plan_stage_live_at(const ms_profile *prof, const ms_plan *pl, int stage, int layer, int phase, uint64_t *live);

/* What would make an infeasible request fit, each found by a search. */
typedef struct ms_infeasible_fix {
    char option[48];        /* e.g. "--precision any", "--recompute auto", "--headroom 0" */
    int n_stages;
    double step_ms;
} ms_infeasible_fix;

typedef struct ms_infeasible {
    int gpus_given;
    int min_gpus;               /* GPUs needed (the given ones plus copies of the largest); 0: none up to one per layer */
    uint64_t added_capacity;    /* capacity of the added GPUs */
    uint64_t capacity_needed;   /* per GPU, with gpus_given GPUs all of it; 0: not found */
    int min_gpus_open;          /* as min_gpus with every option open, when some were fixed and
                                   opening them alone did not fit; 0: not computed or none */
    int n_fixes;
    ms_infeasible_fix fixes[6];
    char text[1536];            /* the whole explanation, one paragraph */
} ms_infeasible;

int ms_plan_explain_infeasible(const ms_profile *prof, const ms_plan_device *devs, int n_devs,
                               const ms_plan_opts *opts, ms_infeasible *out, char *err, size_t errlen);

#endif
