/* replica_model.h — what d data-parallel replicas of the pipeline, and
 * ZeRO-1 over them, cost and save per GPU, on top of a stage's model
 * (memory_model.h). docs/planner.md states the same in prose.
 *
 *  - Memory. Under ZeRO-1 a layer's AdamW state on a GPU is its largest
 *    chunk, ceil(optim / d) rounded up to 256 bytes (the trainer shards every
 *    layer's m and v and the CPU allocator's grain is 256 bytes; a GPU rounds
 *    to 2 MiB, so there this may be short by up to that per layer). The
 *    reductions run in place in the gradient and weight buffers, so they
 *    need no scratch. comm_reserve, the collective library's own buffers per
 *    GPU (NCCL's; 0 on the CPU, where MPI's buffers are host memory outside
 *    the device), is added to the reserve of every device of a run of more
 *    than one device.
 *  - Time. After its last backward each stage sums its gradients over the
 *    d replicas: a ring all-reduce moves 2 (d - 1) / d of the gradient bytes
 *    through each GPU at bus_gbps (ZeRO-1's reduce-scatter of the gradients
 *    and all-gather of the weights move the same bytes). ZeRO-1 divides the
 *    optimizer step by d. Both are part of the stage's opt_ms, so the step
 *    stays (m + p - 1) * max cycle + max opt, with m micro-batches per replica.
 *  - ms_replica_costs(): per-layer costs with the above folded in (linear
 *    in the layers, which is what the search's prefix sums need).
 *  - ms_stage_predict_replicas(): the reference evaluation of a stage, in
 *    plain loops over the unfolded costs (the search's results are recomputed
 *    with it, and tests compare the search with a brute force built on it). */
#ifndef MS_REPLICA_MODEL_H
#define MS_REPLICA_MODEL_H

#include "planner/memory_model.h"

uint64_t ms_zero_share(uint64_t optim_bytes, int d);
double ms_allreduce_ms(uint64_t bytes, int d, double bus_gbps);
/* Reserve of a device in a run of p stages x d replicas. */
uint64_t ms_device_reserve(uint64_t reserve, uint64_t comm_reserve, int p, int d);

void ms_replica_costs(const ms_layer_cost *L, int n_layers, int d, int zero, double bus_gbps, ms_layer_cost *out);

/* Stage `stage` of n_stages, layers [first, last], m micro-batches per
 * replica, d replicas; fills *out except device. */
void ms_stage_predict_replicas(const ms_layer_cost *L, int n_layers, int first, int last, int stage, int n_stages,
                               int schedule, int m, int recompute, uint64_t reserve, double link_gbps, int d,
                               int zero, double bus_gbps, uint64_t comm_reserve, ms_plan_stage *out);

#endif
