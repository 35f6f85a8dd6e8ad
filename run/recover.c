/* recover.c — a rerun's recovery from an OOM mid-run (recover.h). */
#include "run/recover.h"
#include "run/records.h"
#include "planner/explain.h"
#include "vocab/errf.h"
#include "vocab/plan_json.h"

#include <stdlib.h>
#include <string.h>

/* The OOM, recorded: its event id, 0 when none. */
static int64_t record_oom(const ms_rerun_opts *o, ms_rerun_result *r, const ms_pipeline *p)
{
    if (!o->db || p->oom_stage < 0) return 0;
    const ms_device *d = p->st[p->oom_stage].dev;
    ms_oom_info oi;
    memset(&oi, 0, sizeof oi);
    oi.happened = 1;
    oi.layer = d->oom.layer;
    snprintf(oi.layer_name, sizeof oi.layer_name, "%s",
             d->oom.layer >= 0 && d->oom.layer < p->model.n_layers ? p->model.layers[d->oom.layer].name : "");
    oi.phase = d->oom.phase;
    oi.category = d->oom.cat;
    oi.requested = d->oom.requested;
    oi.capacity = d->oom.capacity;
    for (int c = 0; c < MS_CAT_N; c++) oi.live_by_cat[c] = d->oom.live[c];
    snprintf(oi.what, sizeof oi.what, "%s", d->oom.what);
    int64_t id = ms_db_add_oom_event(o->db, o->run, d->name, &oi, 0);
    ms_run_recorded(id, o->db, "train", "the OOM", &r->db_failed);
    return id > 0 ? id : 0;
}

int ms_rerun_replan(const ms_profile *prof, const ms_plan_opts *popts, const ms_plan_device *devs, int n,
                    const char *what, ms_plan *plan, char *err, size_t errlen)
{
    ms_plan np;
    memset(&np, 0, sizeof np);
    ms_plan_opts po = *popts;
    po.global_batch = plan->global_batch;
    po.precision = plan->precision;   /* the checkpoint's job has this policy (trainer/job.h) */
    int rc = n ? ms_plan_choose(prof, devs, n, &po, &np, err, errlen) : MS_PLAN_INFEASIBLE;
    if (rc == MS_PLAN_INFEASIBLE) {
        ms_infeasible inf;
        if (!n) ms_errf(err, errlen, "no device is left");
        else if (ms_plan_explain_infeasible(prof, devs, n, &po, &inf, err, errlen) == 0)
            snprintf(err, errlen, "no plan fits %s: %.900s", what, inf.text);
        return MS_EOOM;
    }
    if (rc != MS_PLAN_OK) return MS_EFAIL;
    np.profile_run = plan->profile_run;
    ms_plan_explain(prof, &np);
    ms_plan_free(plan);
    *plan = np;
    return MS_OK;
}

/* Re-plan for the capacities that remain (the OOM device at what it has). */
static int replan(const ms_rerun_opts *o, const ms_pipeline *p, const int *plan_dev, ms_plan *plan, char *err,
                  size_t errlen)
{
    int n = plan->n_devices;
    ms_plan_device *devs = malloc((size_t)n * sizeof *devs);
    if (!devs) {
        ms_errf(err, errlen, "out of memory");
        return MS_EFAIL;
    }
    memcpy(devs, plan->devices, (size_t)n * sizeof *devs);
    for (int k = 0; k < p->n_dev; k++) devs[plan_dev[k]].capacity = p->devs[k].capacity;
    int rc = ms_rerun_replan(o->prof, &o->popts, devs, n, "the capacity that remains", plan, err, errlen);
    free(devs);
    return rc;
}

/* After an OOM that could be re-planned: the recovery's record. */
static void record_recovery(const ms_rerun_opts *o, ms_rerun_result *r, const ms_plan *plan, int failed_step,
                            int64_t old_plan, int64_t oom_id, const char *msg)
{
    if (!o->db) return;
    char *js = ms_plan_to_string(plan);
    int64_t new_plan = js ? ms_db_add_plan(o->db, o->run, js, plan->step_ms, 1) : -1;
    free(js);
    ms_run_recorded(new_plan, o->db, "train", "the new plan", &r->db_failed);
    ms_recovery_rec rr;
    memset(&rr, 0, sizeof rr);
    rr.step = failed_step;
    rr.resumed_step = r->checkpoint[0] ? r->checkpoint_step : 0;
    snprintf(rr.checkpoint, sizeof rr.checkpoint, "%s", r->checkpoint);
    snprintf(rr.reason, sizeof rr.reason, "%s", msg);
    rr.oom_event = oom_id;
    rr.old_plan_id = old_plan;
    rr.new_plan_id = new_plan > 0 ? new_plan : 0;
    ms_run_recorded(ms_db_add_recovery(o->db, o->run, &rr), o->db, "train", "the recovery", &r->db_failed);
}

int ms_rerun_recover(const ms_rerun_opts *o, ms_rerun_result *r, ms_pipeline *p, const int *plan_dev, ms_plan *plan,
                     int64_t old_plan)
{
    char msg[600];
    snprintf(msg, sizeof msg, "%s", p->err);
    if (o->progress) fprintf(o->progress, "train: OUT OF MEMORY at step %d: %s\n", p->step + 1, msg);
    int64_t oom_id = record_oom(o, r, p);
    int failed_step = p->step + 1;
    if (!o->prof) {
        snprintf(r->err, sizeof r->err, "%s; no profile to re-plan from (run memsplit doctor, or give --db with the profiled run)", msg);
        ms_pipe_close(p);
        r->oom_unrecovered = 1;
        return MS_EOOM;
    }
    int prc = replan(o, p, plan_dev, plan, r->err, sizeof r->err);
    ms_pipe_close(p);
    if (prc != MS_OK) {
        r->oom_unrecovered = prc == MS_EOOM;
        return prc;
    }
    r->recoveries++;
    record_recovery(o, r, plan, failed_step, old_plan, oom_id, msg);
    if (o->progress) {
        fprintf(o->progress, "train: re-planned for the capacity that remains:\n");
        ms_plan_print_table(o->progress, plan, o->prof, 0);
        fprintf(o->progress, "train: resuming from %s\n", r->checkpoint[0] ? r->checkpoint : "step 0 (no checkpoint yet)");
    }
    return MS_OK;
}
