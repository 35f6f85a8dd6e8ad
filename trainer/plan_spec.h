/* plan_spec.h — a plan (vocab/plan.h) as the trainer's pipeline runs it
 * (pipeline.h's ms_pipe_spec): the stages' layer ranges and recompute
 * flags, the schedule and the micro-batching, on the devices that hold a
 * stage, each of the plan's capacity.
 *
 * Contract (each returns 0, or -1 with a one-line message in err):
 *  - ms_pipe_spec_of_plan(): one process runs the whole pipeline. Only the
 *    devices that hold a stage are opened, in plan order; plan_dev[k] is
 *    the plan's index of spec device k. device "cpu" or "cuda:N" puts them
 *    as virtual devices on it; NULL picks distinct GPUs when the machine
 *    has one for each, else virtual devices on GPU 0, else the CPU. A plan
 *    of replicas is refused (it runs as MPI ranks), as is one past
 *    MS_MAX_STAGES stages or MS_MAX_DEVICES devices.
 *  - ms_pipe_spec_of_rank(): one rank of an MPI run holds stage `stage`
 *    alone, on device `name` (a GPU, or the CPU backend with the plan
 *    device's capacity by accounting), with the replica's share of the
 *    micro-batches and the transport of dist; on a GPU everything is
 *    allocated at open (NCCL: nothing may be allocated mid-step). */
#ifndef MS_PLAN_SPEC_H
#define MS_PLAN_SPEC_H

#include <stddef.h>

#include "trainer/pipeline.h"
#include "vocab/plan.h"

int ms_pipe_spec_of_plan(const ms_plan *plan, const char *device, ms_pipe_spec *spec, int *plan_dev, char *err,
                         size_t errlen);
int ms_pipe_spec_of_rank(const ms_plan *plan, int stage, int plan_device, const char *name,
                         const struct ms_dist *dist, ms_pipe_spec *spec, char *err, size_t errlen);

#endif
