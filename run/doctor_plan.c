/* doctor_plan.c — the doctor's plan for the built-in model (doctor.h:
 * ms_doctor_make_plan). */
#include "run/doctor.h"
#include "planner/explain.h"
#include "profiler/trial.h"
#include "trainer/device.h"
#include "vocab/errf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The devices named as the rerun will open them (rerun.c, trainer/device.c):
 * --device D gives virtual devices on D; without it, distinct GPUs when
 * there are enough, else virtual devices on GPU 0 (or the CPU). */
static void device_names(ms_plan_device *devs, int n, const char *device, const char *cfg_device)
{
    int cuda = !strncmp(device ? device : cfg_device, "cuda", 4);
    int distinct = !device && cuda && n > 1 && ms_cuda_gpu_count() >= n;
    const char *base = device ? device : cuda ? "cuda:0" : "cpu";
    for (int d = 0; d < n; d++) {
        if (distinct) snprintf(devs[d].name, sizeof devs[d].name, "cuda:%d", d);
        else if (n == 1) snprintf(devs[d].name, sizeof devs[d].name, "%.31s", base);
        else snprintf(devs[d].name, sizeof devs[d].name, "%.20s/v%d", base, d & 0x3ff);
    }
}

/* One search: 0, or MS_EOOM / MS_EFAIL with err. */
static int choose(ms_profile *prof, ms_plan_device *devs, int n, const ms_plan_opts *po, ms_plan *plan, char *err,
                  size_t errlen)
{
    int rc = ms_plan_choose(prof, devs, n, po, plan, err, errlen);
    if (rc == MS_PLAN_INFEASIBLE) {
        ms_infeasible inf;
        if (ms_plan_explain_infeasible(prof, devs, n, po, &inf, err, errlen) == 0) snprintf(err, errlen, "%s", inf.text);
        return MS_EOOM;
    }
    return rc == MS_PLAN_OK ? MS_OK : MS_EFAIL;
}

/* Plan over the given capacities in the trial's precision, or, when none
 * fits and no --precision was given, in any (saying why); make sure the
 * chosen micro-batch size was measured (isolating it and re-planning if not). */
int ms_doctor_make_plan(ms_profile *prof, const ms_config *cfg, const uint64_t *caps, int n, const char *device,
                        int precision_given, ms_plan_opts *po, ms_plan *plan, FILE *progress, int verbose, char *err,
                        size_t errlen)
{
    ms_plan_device *devs = calloc((size_t)n, sizeof *devs);
    if (!devs) {
        ms_errf(err, errlen, "out of memory");
        return MS_EFAIL;
    }
    device_names(devs, n, device, cfg->device);
    for (int d = 0; d < n; d++) devs[d].capacity = caps[d];
    int rc = MS_OK;
    char why[512] = "";
    for (int round = 0; round < 4; round++) {
        memset(plan, 0, sizeof *plan);
        po->precision = cfg->precision;
        rc = choose(prof, devs, n, po, plan, err, errlen);
        if (rc == MS_EOOM && !precision_given) {
            /* the trial's precision cannot fit: the only reason to leave it */
            snprintf(why, sizeof why, "No plan in the trial's precision, %s, fits (%.300s); so the plan leaves it. ",
                     ms_precision_name(cfg->precision), err);
            po->precision = -1;
            rc = choose(prof, devs, n, po, plan, err, errlen);
        }
        if (rc != MS_OK) break;
        if (ms_profile_find(prof, 0, plan->precision, plan->micro_batch)) break;
        if (progress)
            fprintf(progress, "doctor: the plan wants micro-batches of %d, not measured yet: measuring them\n",
                    plan->micro_batch);
        ms_config c = *cfg;
        c.precision = (ms_precision)plan->precision;
        int mb = plan->micro_batch, pr = plan->precision;
        ms_plan_free(plan);
        if (ms_profile_measure(prof, &c, pr, mb, verbose ? progress : NULL, err, errlen)) { rc = MS_EFAIL; break; }
    }
    free(devs);
    if (rc != MS_OK) return rc;
    if (why[0]) {
        snprintf(plan->note, sizeof plan->note, "%s", why);
        if (progress) fprintf(progress, "doctor: %s\n", why);
    }
    ms_plan_explain(prof, plan);
    return MS_OK;
}
