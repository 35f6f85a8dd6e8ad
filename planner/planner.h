/* planner.h — the search for a plan: how to split a profiled model over
 * devices.
 *
 * Contract:
 *  - ms_plan_search() finds the plan with the smallest predicted step time
 *    (memory_model.h states the model; the sequential schedule has its own,
 *    sequential.h, or replays a program's record when the profile has one,
 *    record_replay.h) over: the number of stages (1..number of devices,
 *    fewer if faster), which devices hold them and in what order
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
 *  - The plan itself (ms_plan, its stages and devices) and its JSON are the
 *    ground floor's: vocab/plan.h, vocab/plan_json.h. Plans own their
 *    arrays: ms_plan_free(). Nothing prints or aborts. */
#ifndef MS_PLANNER_H
#define MS_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/limits.h"
#include "vocab/plan.h"
#include "vocab/profile.h"

#define MS_PLAN_OK 0
#define MS_PLAN_INFEASIBLE 1
#define MS_PLAN_ERROR (-1)

#define MS_PLAN_DEFAULT_HEADROOM 0.05
#define MS_PLAN_DEFAULT_LINK_GBPS 200.0  /* gigabits per second between stages */
/* Distinct capacities are searched as a multiset: at most this many states. */
#define MS_PLAN_MAX_DEVICE_STATES 4096

typedef enum { MS_RECOMPUTE_AUTO = 0, MS_RECOMPUTE_NEVER = 1, MS_RECOMPUTE_ALWAYS = 2 } ms_recompute_mode;

const char *ms_recompute_mode_name(int m);      /* "auto", "never", "always" */
int ms_recompute_mode_parse(const char *s);

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

/* A program's plan carries its name, fingerprint and the module paths of
 * its layers (from the profile's rows), so that the bridge can apply it and
 * refuse it for another program; and, when its peaks are the profile's
 * record replayed (a sequential plan, a record of the profile's layers),
 * the modules that record hands on (handed_on, copied), none otherwise.
 * Call it once the plan's schedule is set. No-op for the built-in model;
 * -1 when out of memory. */
int ms_plan_attach_program(ms_plan *pl, const ms_profile *prof);

int ms_plan_search(const ms_profile *prof, const ms_plan_device *devs, int n_devs, const ms_plan_opts *opts,
                   ms_plan *out, char *err, size_t errlen);

#define MS_PLAN_TIE 0.03   /* predicted step times within 3% of each other count as equal */
int ms_plan_choose(const ms_profile *prof, const ms_plan_device *devs, int n_devs, const ms_plan_opts *opts,
                   ms_plan *out, char *err, size_t errlen);

/* A sequential plan's stage (a program's), asked about one moment: the
 * bytes the model predicts it holds at most while layer `layer` (n_layers:
 * the program's loss) runs its forward or backward (MS_PH_*), reserve
 * included, into *live. 0, or -1 when that stage never runs that moment.
 * With the profile's record, the record's moments say it (the stage's
 * layers replayed while that layer and phase ran in the record pass); -1
 * when the record kept none of them (one loaded from a file or the
 * database): the caller then has the stage's peak. */
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
