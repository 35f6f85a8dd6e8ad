/* search_dp.h — the two pieces of the exact search that search.c drives
 * (internal to planner/; planner.h is the public contract).
 *
 *  - ms_dev_space: the devices as a multiset of capacity classes. Classes are
 *    distinct capacities, largest first; states are the multisets of at most
 *    R devices, numbered compactly (state 0 is empty), with add[] giving the
 *    state with one more device of a class. Built by ms_dev_space_build()
 *    (0, or MS_PLAN_ERROR with err), freed by ms_dev_space_free().
 *  - ms_dp: the dynamic program over (layer suffix, devices used) for one
 *    configuration, keeping Pareto sets of (slowest cycle C, slowest
 *    optimizer step O). ms_dp_run() finds the plan with step time strictly
 *    below *best over every stage count, placement, split and recompute
 *    choice; it returns 1 with *best and the stages updated, 0 when nothing
 *    better fits, -1 when out of memory. docs/planner.md explains why this is
 *    exact. */
#ifndef MS_SEARCH_DP_H
#define MS_SEARCH_DP_H

#include <stddef.h>
#include <stdint.h>

#include "planner/memory_model.h"
#include "planner/planner.h"

#define MS_MAX_CLASSES 16
#define MS_MAX_FULL_STATES (1 << 16)

typedef struct ms_dev_space {
    int n_cls;
    int group;                      /* devices per stage (its replicas) */
    uint64_t cap[MS_MAX_CLASSES];   /* descending */
    uint64_t avail[MS_MAX_CLASSES]; /* usable after headroom */
    int count[MS_MAX_CLASSES];      /* devices of each class */
    int *devs;                      /* device indices grouped by class, ascending within a class */
    int dev_off[MS_MAX_CLASSES];
    int n_states;
    int *size;                      /* [n_states]: stages in the multiset (devices / group) */
    int *add;                       /* [n_states * n_cls]: with one more of class c, -1 none */
    int *by_size;                   /* states ordered by size */
    int *size_off;                  /* [R + 2] offsets into by_size */
} ms_dev_space;

int ms_dev_space_build(ms_dev_space *d, const ms_plan_device *devs, int n, int R, double headroom, char *err,
                       size_t errlen);
int ms_dev_space_build_groups(ms_dev_space *d, const ms_plan_device *devs, int n, int R, double headroom, int g,
                              char *err, size_t errlen);
void ms_dev_space_free(ms_dev_space *d);

/* One stage of a found plan: layers [first, last] on a device of class cls. */
typedef struct ms_stage_pick {
    int first, last, cls, rc;
} ms_stage_pick;

typedef struct ms_dp ms_dp;

/* A DP for n layers, at most R stages, over ds (which must outlive it).
 * allow_nr / allow_rc: whether stages may run without / with recompute.
 * comm_reserve is added to the reserve of every device of a run of more
 * than one device (replica_model.h); replicas: the copies of each stage. */
ms_dp *ms_dp_new(int n, int R, const ms_dev_space *ds, uint64_t reserve, double link_gbps, int allow_nr,
                 int allow_rc, uint64_t comm_reserve, int replicas);
void ms_dp_free(ms_dp *x);
int ms_dp_run(ms_dp *x, const ms_layer_cost *L, int sched, int m, double *best, ms_stage_pick *picks,
              int *n_picks);

#endif
