/* plan_spec.c — a plan's pipeline, in one process or as one rank
 * (plan_spec.h). */
#include "trainer/plan_spec.h"
#include "trainer/device.h"
#include "vocab/errf.h"

#include <stdio.h>
#include <string.h>

/* What the whole pipeline shares: stages, schedule, micro-batch size. */
static void stages_of(const ms_plan *plan, ms_pipe_spec *spec)
{
    spec->n_stages = plan->n_stages;
    for (int s = 0; s < plan->n_stages; s++) {
        spec->first[s] = plan->stages[s].first;
        spec->last[s] = plan->stages[s].last;
        spec->recompute[s] = plan->stages[s].recompute;
    }
    spec->schedule = plan->schedule == MS_SCHED_GPIPE ? MS_PIPE_GPIPE : MS_PIPE_1F1B;
    spec->micro_batch = plan->micro_batch;
}

int ms_pipe_spec_of_plan(const ms_plan *plan, const char *device, ms_pipe_spec *spec, int *plan_dev, char *err,
                         size_t errlen)
{
    memset(spec, 0, sizeof *spec);
    if (plan->n_stages < 1 || plan->n_stages > MS_MAX_STAGES || plan->n_devices < 1 || plan->n_devices > MS_MAX_DEVICES)
        return ms_errf(err, errlen, "plan has %d stages over %d devices; memsplit runs 1..%d stages over 1..%d devices",
                       plan->n_stages, plan->n_devices, MS_MAX_STAGES, MS_MAX_DEVICES);
    if (plan->replicas > 1) /* memsplit train --plan refuses these first (run/train_plan.c) */
        return ms_errf(err, errlen, "a plan of %d replicas runs as MPI ranks, not in one process", plan->replicas);
    /* the devices that hold a stage, in plan order */
    int spec_of[MS_MAX_DEVICES], n = 0, top = 0;
    for (int d = 0; d < plan->n_devices; d++) spec_of[d] = -1;
    for (int s = 0; s < plan->n_stages; s++) spec_of[plan->stages[s].device] = 0;
    for (int d = 0; d < plan->n_devices; d++)
        if (spec_of[d] == 0) {
            plan_dev[n] = d;
            spec_of[d] = n++;
            top = d;
        }
    int gpus = ms_cuda_gpu_count();
    const char *kind = device;
    if (!kind) kind = gpus > top && n > 1 ? "distinct" : gpus >= 1 ? "cuda:0" : "cpu";
    spec->n_devices = n;
    for (int k = 0; k < n; k++) {
        if (!strcmp(kind, "distinct")) snprintf(spec->device[k], sizeof spec->device[k], "cuda:%d", plan_dev[k]);
        else snprintf(spec->device[k], sizeof spec->device[k], "%s", kind);
        spec->capacity[k] = plan->devices[plan_dev[k]].capacity;
    }
    spec->virtual_share = strcmp(kind, "distinct") != 0 && n > 1;
    stages_of(plan, spec);
    for (int s = 0; s < plan->n_stages; s++) spec->stage_device[s] = spec_of[plan->stages[s].device];
    spec->n_micro = plan->n_micro;
    return 0;
}

int ms_pipe_spec_of_rank(const ms_plan *plan, int stage, int plan_device, const char *name,
                         const struct ms_dist *dist, ms_pipe_spec *spec, char *err, size_t errlen)
{
    memset(spec, 0, sizeof *spec);
    if (plan->n_stages > MS_MAX_STAGES)
        return ms_errf(err, errlen, "the plan has %d stages; memsplit runs 1..%d", plan->n_stages, MS_MAX_STAGES);
    spec->n_devices = 1;
    snprintf(spec->device[0], sizeof spec->device[0], "%s", name);
    spec->capacity[0] = plan->devices[plan_device].capacity;
    int cuda = !strncmp(name, "cuda", 4);
    spec->virtual_share = !cuda; /* CPU: "cpu/vN", capacity by accounting; a GPU: a ballast */
    stages_of(plan, spec);
    spec->stage_device[stage] = 0;
    spec->n_micro = plan->n_micro / plan->replicas;
    spec->preallocate = cuda; /* NCCL: nothing may be allocated mid-step (pipeline.c) */
    spec->dist = dist;
    return 0;
}
