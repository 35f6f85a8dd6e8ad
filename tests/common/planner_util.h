/* planner_util.h — synthetic profiles and a brute-force planner for the
 * planner's tests.
 *
 *  - pu_rng: a seeded splitmix64 PRNG (deterministic per seed).
 *  - pu_random_profile(): a profile of n_layers layers with rows for every
 *    precision in prec_mask and every micro-batch size in sizes[], random but
 *    plausible: static bytes per layer, per-micro-batch bytes and times that
 *    grow linearly with the micro-batch size (so a two-point fit is exact),
 *    mixed precision with master weights, an optional OOM record. Never all
 *    zeros. Caller frees with ms_profile_free() and free().
 *  - pu_random_record(): a valid program record (vocab/profile.h) of n
 *    storages over n_layers layers: allocations in order (some at one
 *    position), some live to the end (MS_REC_NEVER), copies of earlier
 *    storages still live, one storage of the largest bytes a profile takes;
 *    moments as the record pass makes them (in order, some of no position,
 *    a gap now and then, layers -1 to n_layers). Caller frees with
 *    ms_prog_record_free().
 *  - pu_hand_on(): gives a record n modules handed on (replacing any),
 *    all different, module paths as a program names them, some with
 *    characters beyond ASCII and one of the longest a path may be. 0, or
 *    -1 when memory ran out.
 *  - pu_record_diff(): 0 when two records are equal field for field, moments
 *    and the modules handed on (byte for byte) included (either NULL:
 *    both), else 1 with the first difference described in why.
 *  - pu_brute_force(): the best step time over every split, stage count,
 *    ordered choice of devices, recompute choice, precision, schedule,
 *    micro-batch size, replica count and ZeRO-1 setting allowed by opts (each
 *    of a stage's replicas on its own device, the stage fitting the smallest),
 *    evaluated with the reference stage model only (replica_model.h).
 *    Returns INFINITY when nothing fits. Small instances only. */
#ifndef PLANNER_UTIL_H
#define PLANNER_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/planner.h"
#include "vocab/profile.h"

typedef struct { uint64_t s; } pu_rng;

void pu_seed(pu_rng *r, uint64_t seed);
uint64_t pu_next(pu_rng *r);
double pu_uniform(pu_rng *r);           /* [0, 1) */
int pu_int(pu_rng *r, int n);           /* [0, n) */

ms_profile *pu_random_profile(pu_rng *r, int n_layers, unsigned prec_mask, const int *sizes, int n_sizes,
                              int global_batch);
ms_prog_record *pu_random_record(pu_rng *r, int n_layers, int n);
int pu_hand_on(pu_rng *r, ms_prog_record *rec, int n);
int pu_record_diff(const ms_prog_record *a, const ms_prog_record *b, char *why, size_t len);
/* A rough one-device peak of the profile (fp32 if present, smallest size,
 * all micro-batches in flight): a scale for choosing capacities. */
uint64_t pu_one_device_bytes(const ms_profile *p);

double pu_brute_force(const ms_profile *prof, const ms_plan_device *devs, int n_devs, const ms_plan_opts *o);

/* Checks a plan against its own model: stages cover every layer once, in
 * order, on distinct devices, each stage's numbers equal the reference
 * model's and fit its device; step time equals the formula. Returns 0, or
 * -1 after printing what is wrong. */
int pu_check_plan(const ms_profile *prof, const ms_plan *pl);

#endif
