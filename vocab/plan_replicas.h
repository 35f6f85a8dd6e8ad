/* plan_replicas.h — the data-parallel part of a plan (format version 2):
 * d replicas of the p-stage pipeline, optional ZeRO-1, the bus bandwidth and
 * per-device collective buffers the time and memory models assumed, and
 * which device runs each (stage, replica).
 *
 * Contract:
 *  - Keys are optional, so version-1 plans load as one replica without
 *    ZeRO: "replicas" (>= 1), "zero" (bool, only with replicas > 1),
 *    "bus_gbps", "comm_reserve_bytes", and per stage "replica_devices" (the
 *    d devices of that stage, replica 0 first and equal to "device";
 *    required when replicas > 1). No device holds two (stage, replica)
 *    pairs; p * d <= devices. n_micro counts the micro-batches of a step
 *    over every replica (micro_batch * n_micro = global_batch still), so
 *    each replica runs n_micro / d of them.
 *  - Ranks: world rank r runs stage r % p of replica r / p (consecutive
 *    ranks form one pipeline). ms_plan_rank_device() gives its device.
 *  - Every function returns 0, or -1 with a one-line message. */
#ifndef MS_PLAN_REPLICAS_H
#define MS_PLAN_REPLICAS_H

#include <jansson.h>
#include <stddef.h>

#include "vocab/plan.h"

/* Adds the keys to a plan object being written (root) and its stages. */
int ms_plan_replicas_to_json(const ms_plan *p, json_t *root, char *err, size_t errlen);
/* Reads them from root after the stages were read (p->stages set). */
int ms_plan_replicas_from_json(const json_t *root, ms_plan *p, char *err, size_t errlen);
/* Sets replicas = 1 and each stage's device as its only replica (plans built in memory). */
int ms_plan_replicas_single(ms_plan *p);

/* Ranks a plan needs (p * d), and the device index, stage and replica of a rank. */
int ms_plan_ranks(const ms_plan *p);
int ms_plan_rank_device(const ms_plan *p, int rank, int *stage, int *replica);

#endif
