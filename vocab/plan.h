/* plan.h — a plan (how a model is split over devices: its stages, the
 * devices that hold them, the precision, schedule and micro-batching), as
 * the planner makes it (planner/planner.h), the reports show it, the
 * trainer runs it and memsplit stores it. Its JSON: plan_json.h; its
 * replicas and ranks: plan_replicas.h; the format: docs/plan-format.md.
 *
 * Contract: a plan owns its arrays (devices, stages, replica_devices,
 * reasoning, layer_names, handed_on); ms_plan_free() frees them and leaves the plan
 * zeroed (a zeroed plan is empty and safe to free). ms_schedule_name()
 * gives "?" for an unknown schedule; ms_schedule_parse() -1. */
#ifndef MS_PLAN_H
#define MS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/limits.h"
#include "vocab/profile.h"

/* 2: optional keys: a program block (a program's fingerprint and module
 * names), the sequential schedule, replicas and ZeRO-1; version 1 plans
 * still load */
#define MS_PLAN_VERSION 2

/* All-reduce bus bandwidth when none was measured (bench/nccl_bw measures
 * it): the same PCIe-class figure as the stage links. */
#define MS_PLAN_DEFAULT_BUS_GBPS 200.0

/* GPipe and 1F1B are the built-in trainer's pipelines (the search tries
 * both when the schedule is open). Sequential is model parallelism with one
 * stage busy at a time, the only schedule a single-process program can run
 * honestly (the PyTorch bridge): never chosen unless asked for. */
typedef enum { MS_SCHED_GPIPE = 0, MS_SCHED_1F1B = 1, MS_SCHED_SEQUENTIAL = 2, MS_SCHED_N } ms_schedule;
#define MS_SCHED_PIPELINES 2   /* the schedules an open search tries */

const char *ms_schedule_name(int s);            /* "gpipe", "1f1b" */
int ms_schedule_parse(const char *s);           /* -1 if unknown */

typedef struct ms_plan_device {
    char name[32];          /* "cuda:0" */
    uint64_t capacity;      /* bytes */
} ms_plan_device;

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
    /* the modules whose outputs the rerun hands on where they were made, with no copy back
       to their caller's stage: the record's (ms_prog_record.handed_on) when the plan's peaks
       are that record replayed, else none; the bridge is told (program_train.c) */
    int n_handed_on;
    char **handed_on;           /* module paths (owned), as the record's: profile_json.h */
    /* of each GPU stage's reserve, what the caching allocator holds (ms_profile.reserve_allocator):
       a rerun compares the allocator's peak with the tensors predicted plus this */
    uint64_t reserve_allocator;
} ms_plan;

void ms_plan_free(ms_plan *p);

#endif
