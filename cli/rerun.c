/* rerun.c — train with a plan; measured against predicted; OOM recovery. */
#include "cli/rerun.h"
#include "cli/common.h"
#include "cli/steplog.h"
#include "planner/explain.h"
#include "vocab/plan_json.h"
#include "trainer/checkpoint.h"
#include "trainer/plan_spec.h"
#include "vocab/errf.h"

#include <math.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int ms_rerun_check(const ms_config *cfg, const ms_plan *plan, const ms_rerun_opts *o, char *err, size_t errlen)
{
    const char *name = cfg->preset[0] ? cfg->preset : "custom";
    struct { const char *what; long long plan, here; } f[] = {
        { "layers", plan->n_layers, (long long)cfg->n_layer + 2 }, { "seq_len", plan->seq_len, cfg->seq_len },
        { "d_model", plan->d_model, cfg->d_model },                { "n_head", plan->n_head, cfg->n_head },
        { "vocab", plan->vocab, cfg->vocab },
    };
    if (strcmp(plan->model, name))
        return ms_errf(err, errlen, "the plan is for model '%s'; this run's model is '%s'", plan->model, name);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].plan != f[i].here)
            return ms_errf(err, errlen, "the plan is for a model with %s %lld; this run's model has %s %lld", f[i].what,
                           f[i].plan, f[i].what, f[i].here);
    if (o && o->inject.step > 0) {
        int held = 0;
        for (int s = 0; s < plan->n_stages; s++) held |= plan->stages[s].device == o->inject.dev;
        if (o->inject.dev >= plan->n_devices)
            return ms_errf(err, errlen, "--inject-oom: device %d is not one of the plan's %d (0..%d)", o->inject.dev,
                           plan->n_devices, plan->n_devices - 1);
        if (!held) return ms_errf(err, errlen, "--inject-oom: device %d holds no stage of the plan", o->inject.dev);
    }
    return 0;
}

static json_t *device_entry(const ms_pipeline *p, const ms_plan *plan, int k, int d, double *gap)
{
    const ms_device *dev = &p->devs[k];
    const ms_plan_stage *st = NULL;
    for (int s = 0; s < plan->n_stages; s++)
        if (plan->stages[s].device == d) st = &plan->stages[s];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(dev->name));
    json_object_set_new(o, "plan_device", json_integer(d));
    json_object_set_new(o, "capacity_bytes", json_integer((json_int_t)dev->capacity));
    json_object_set_new(o, "predicted_peak_bytes", json_integer(st ? (json_int_t)st->peak : 0));
    json_object_set_new(o, "measured_peak_bytes", json_integer((json_int_t)dev->peak_total));
    *gap = st && st->peak ? ((double)dev->peak_total - (double)st->peak) / (double)st->peak : 0;
    json_object_set_new(o, "gap", json_real(*gap));
    json_object_set_new(o, "measured_by_category", ms_cli_cat_json(dev->peak));
    size_t pred[MS_CAT_N] = { 0 };
    for (int c = 0; st && c < MS_CAT_N; c++) pred[c] = st->bytes[c];
    json_object_set_new(o, "predicted_by_category", ms_cli_cat_json(pred));
    return o;
}

/* What one opening of the pipeline needs to carry between its parts. */
typedef struct run_ctx {
    const ms_rerun_opts *o;
    ms_rerun_result *r;
    ms_steplog *steps;
    char kept[2][1024];        /* the checkpoints this run keeps, older first ("": none) */
} run_ctx;

static void record_peaks(run_ctx *x, const ms_pipeline *p, const ms_plan *plan, const int *plan_dev)
{
    if (!x->o->db) return;
    for (int k = 0; k < p->n_dev; k++) {
        ms_device_peak dp;
        memset(&dp, 0, sizeof dp);
        dp.device = plan_dev[k];
        snprintf(dp.name, sizeof dp.name, "%.31s", p->devs[k].name);
        dp.capacity = p->devs[k].capacity;
        dp.measured_peak = p->devs[k].peak_total;
        for (int s = 0; s < plan->n_stages; s++)
            if (plan->stages[s].device == plan_dev[k]) {
                dp.predicted_peak = plan->stages[s].peak;
                for (int c = 0; c < MS_CAT_N; c++) dp.predicted_by_cat[c] = plan->stages[s].bytes[c];
            }
        for (int c = 0; c < MS_CAT_N; c++) dp.measured_by_cat[c] = p->devs[k].peak[c];
        ms_cli_recorded(ms_db_add_device_peak(x->o->db, x->o->run, &dp), x->o->db, "train", "a device's peak",
                        &x->r->db_failed);
    }
}

static int64_t record_oom(run_ctx *x, const ms_pipeline *p)
{
    if (!x->o->db || p->oom_stage < 0) return 0;
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
    int64_t id = ms_db_add_oom_event(x->o->db, x->o->run, d->name, &oi, 0);
    ms_cli_recorded(id, x->o->db, "train", "the OOM", &x->r->db_failed);
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

/* A checkpoint this run wrote (or resumed from): keep it and the one before,
 * delete the one before that. */
static void keep_ckpt(run_ctx *x, const char *path, int step)
{
    snprintf(x->r->checkpoint, sizeof x->r->checkpoint, "%s", path);
    x->r->checkpoint_step = step;
    if (!strcmp(path, x->kept[1])) return;
    if (x->kept[0][0] && strcmp(x->kept[0], path)) unlink(x->kept[0]);
    memcpy(x->kept[0], x->kept[1], sizeof x->kept[0]);
    snprintf(x->kept[1], sizeof x->kept[1], "%s", path);
}

/* Shrinks the injected device at the start of its step (a testing aid). */
static void inject(run_ctx *x, ms_pipeline *p, const int *plan_dev)
{
    const ms_inject *in = &x->o->inject;
    for (int k = 0; k < p->n_dev; k++) {
        if (plan_dev[k] != in->dev) continue;
        ms_device *d = &p->devs[k];
        size_t res = d->peak[MS_CAT_RESERVE];
        d->capacity = in->frac > 0 ? res + (size_t)((double)(d->peak_total - res) * in->frac) : in->bytes;
        d->account_only = 1; /* on a GPU with a ballast the accounting must now decide */
        for (int s = 0; s < p->n_stages; s++)
            if (p->st[s].dev == d) ms_scratch_release(&p->st[s].scr);
        if (x->o->progress)
            fprintf(x->o->progress, "train: [test] %s now has %zu bytes (another process took the rest)\n", d->name,
                    d->capacity);
    }
}

/* The steps of one opening of the pipeline, from p->step to o->steps. */
static int run_steps(run_ctx *x, ms_pipeline *p, const ms_plan *plan, const int *plan_dev, int *inject_done,
                     double *t_steady, double *tok_steady)
{
    const ms_rerun_opts *o = x->o;
    ms_rerun_result *r = x->r;
    size_t tokens = (size_t)plan->global_batch * p->cfg.seq_len;
    int first_in_open = 1, rc = MS_OK;
    while (rc == MS_OK && p->step < o->steps) {
        if (!*inject_done && o->inject.step > 0 && p->step + 1 == o->inject.step) {
            inject(x, p, plan_dev);
            *inject_done = 1;
        }
        double t0 = now_s();
        rc = ms_pipe_step(p);
        if (rc) break;
        double dt = now_s() - t0;
        r->steps_run++;
        if (!first_in_open) { *t_steady += dt; *tok_steady += tokens; }
        if (isnan(r->loss_first)) r->loss_first = p->last_loss;
        r->loss_last = p->last_loss;
        /* a step redone after a recovery replaces its earlier loss */
        while ((int)json_array_size(r->losses) >= p->step) json_array_remove(r->losses, json_array_size(r->losses) - 1);
        json_array_append_new(r->losses, json_real(p->last_loss));
        char *peaks = ms_cli_peaks_json(p->devs, p->n_dev);
        if (x->steps) {
            ms_step_rec sr = { p->step, p->last_loss, dt * 1e3, tokens / dt, p->cfg.lr,
                               p->cfg.precision == MS_PREC_FP16 ? p->opt.loss_scale : 0, !p->last_opt.applied, peaks };
            ms_steplog_add(x->steps, &sr);
        }
        int every = o->log_every > 0 ? o->log_every : o->steps <= 10 ? 1 : o->steps / 5;
        if (o->progress && (first_in_open || p->step % every == 0 || p->step == o->steps)) {
            /* one line in 80 columns: the fullest device's peak (every device's is in the database) */
            int top = 0;
            for (int k = 1; k < p->n_dev; k++)
                if (p->devs[k].peak_total > p->devs[top].peak_total) top = k;
            char pk[32];
            fprintf(o->progress, "train: step %d/%d, loss %.4f, %.0f tok/s, %.0f ms, peak %s (%s)\n", p->step,
                    o->steps, p->last_loss, tokens / dt, dt * 1e3, ms_fmt_bytes(p->devs[top].peak_total, pk, sizeof pk),
                    p->devs[top].name);
        }
        free(peaks);
        first_in_open = 0;
        if (o->ckpt_dir && o->ckpt_every > 0 && (p->step % o->ckpt_every == 0 || p->step == o->steps)) {
            char path[1024];
            if (ms_pipe_checkpoint(p, o->ckpt_dir, path, sizeof path) != MS_OK) {
                snprintf(r->err, sizeof r->err, "checkpoint: %s", p->err);
                return MS_EFAIL;
            }
            keep_ckpt(x, path, p->step);
        }
    }
    return rc;
}

/* After an OOM that could be re-planned: the recovery's record. */
static void record_recovery(run_ctx *x, const ms_plan *plan, int failed_step, int64_t old_plan, int64_t oom_id,
                            const char *msg)
{
    const ms_rerun_opts *o = x->o;
    if (!o->db) return;
    char *js = ms_plan_to_string(plan);
    int64_t new_plan = js ? ms_db_add_plan(o->db, o->run, js, plan->step_ms, 1) : -1;
    free(js);
    ms_cli_recorded(new_plan, o->db, "train", "the new plan", &x->r->db_failed);
    ms_recovery_rec rr;
    memset(&rr, 0, sizeof rr);
    rr.step = failed_step;
    rr.resumed_step = x->r->checkpoint[0] ? x->r->checkpoint_step : 0;
    snprintf(rr.checkpoint, sizeof rr.checkpoint, "%s", x->r->checkpoint);
    snprintf(rr.reason, sizeof rr.reason, "%s", msg);
    rr.oom_event = oom_id;
    rr.old_plan_id = old_plan;
    rr.new_plan_id = new_plan > 0 ? new_plan : 0;
    ms_cli_recorded(ms_db_add_recovery(o->db, o->run, &rr), o->db, "train", "the recovery", &x->r->db_failed);
}

int ms_rerun(const ms_config *cfg, ms_plan *plan, const ms_rerun_opts *o, ms_rerun_result *r)
{
    memset(r, 0, sizeof *r);
    r->losses = json_array();
    r->loss_first = r->loss_last = NAN;
    ms_config c = *cfg;
    c.precision = (ms_precision)plan->precision;
    if (ms_rerun_check(&c, plan, o, r->err, sizeof r->err)) return MS_EFAIL;
    run_ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.r = r;
    if (o->db && !(x.steps = ms_steplog_new(o->db, o->run, o->db_timeout_ms, o->progress))) {
        ms_errf(r->err, sizeof r->err, "out of memory");
        return MS_EFAIL;
    }
    int resume = o->resume, rc = MS_OK, inject_done = 0;
    int64_t plan_id = o->plan_id;
    double t_steady = 0, tok_steady = 0;
    for (;;) {
        ms_pipe_spec spec;
        int plan_dev[MS_MAX_STAGES];
        if (ms_pipe_spec_of_plan(plan, o->device, &spec, plan_dev, r->err, sizeof r->err)) { rc = MS_EFAIL; break; }
        ms_pipeline p;
        rc = ms_pipe_open(&p, &c, &spec);
        if (rc == MS_OK && resume && o->ckpt_dir) {
            /* the first opening: the newest sound checkpoint of this job in the folder */
            char path[1024], note[1200];
            rc = ms_pipe_resume(&p, o->ckpt_dir, path, sizeof path, note, sizeof note);
            if (note[0] && o->progress) fprintf(o->progress, "train: %s\n", note);
            if (rc == MS_OK) keep_ckpt(&x, path, p.step);
            if (rc == MS_OK && o->progress) fprintf(o->progress, "train: resumed from %s at step %d\n", path, p.step);
        } else if (rc == MS_OK && r->checkpoint[0]) {
            /* after a recovery: the last checkpoint this run wrote */
            rc = ms_pipe_load(&p, r->checkpoint);
            if (rc == MS_OK && o->progress) fprintf(o->progress, "train: resumed from %s at step %d\n", r->checkpoint, p.step);
        }
        resume = 0;
        if (rc == MS_OK) rc = run_steps(&x, &p, plan, plan_dev, &inject_done, &t_steady, &tok_steady);
        r->steps = p.step;
        if (rc == MS_OK) {
            /* measured against predicted, per device */
            r->devices = json_array();
            for (int k = 0; k < p.n_dev; k++) {
                double gap;
                json_array_append_new(r->devices, device_entry(&p, plan, k, plan_dev[k], &gap));
                if (fabs(gap) > r->worst_gap) r->worst_gap = fabs(gap);
            }
            record_peaks(&x, &p, plan, plan_dev);
            ms_pipe_close(&p);
            break;
        }
        if (rc != MS_EOOM) {
            if (!r->err[0]) snprintf(r->err, sizeof r->err, "%s", p.err);
            ms_pipe_close(&p);
            break;
        }
        /* an OOM mid-run: record, re-plan for what remains, resume */
        char msg[600];
        snprintf(msg, sizeof msg, "%s", p.err);
        if (o->progress) fprintf(o->progress, "train: OUT OF MEMORY at step %d: %s\n", p.step + 1, msg);
        int64_t oom_id = record_oom(&x, &p);
        int failed_step = p.step + 1;
        if (!o->prof) {
            snprintf(r->err, sizeof r->err, "%s; no profile to re-plan from (run memsplit doctor, or give --db with the profiled run)", msg);
            ms_pipe_close(&p);
            r->oom_unrecovered = 1;
            break;
        }
        int prc = replan(o, &p, plan_dev, plan, r->err, sizeof r->err);
        ms_pipe_close(&p);
        if (prc != MS_OK) {
            r->oom_unrecovered = prc == MS_EOOM;
            rc = prc;
            break;
        }
        r->recoveries++;
        record_recovery(&x, plan, failed_step, plan_id, oom_id, msg);
        if (o->progress) {
            fprintf(o->progress, "train: re-planned for the capacity that remains:\n");
            ms_plan_print_table(o->progress, plan, o->prof, 0);
            fprintf(o->progress, "train: resuming from %s\n", r->checkpoint[0] ? r->checkpoint : "step 0 (no checkpoint yet)");
        }
    }
    if (x.steps) {
        char err[600];
        if (ms_steplog_finish(x.steps, err, sizeof err)) {
            fprintf(stderr, "memsplit train: %s\n", err);
            r->db_failed++;
        }
        ms_steplog_free(x.steps);
    }
    r->tokens_per_s = t_steady > 0 ? tok_steady / t_steady : 0;
    return rc;
}

void ms_rerun_result_free(ms_rerun_result *r)
{
    json_decref(r->losses);
    json_decref(r->devices);
    r->losses = r->devices = NULL;
}

json_t *ms_rerun_result_json(const ms_rerun_result *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "steps", json_integer(r->steps));
    json_object_set_new(o, "loss_first", isnan(r->loss_first) ? json_null() : json_real(r->loss_first));
    json_object_set_new(o, "loss_last", isnan(r->loss_last) ? json_null() : json_real(r->loss_last));
    json_object_set_new(o, "tokens_per_s", json_real(r->tokens_per_s));
    json_object_set_new(o, "recoveries", json_integer(r->recoveries));
    json_object_set_new(o, "losses", r->losses ? json_incref(r->losses) : json_array());
    json_object_set_new(o, "devices", r->devices ? json_incref(r->devices) : json_array());
    json_object_set_new(o, "worst_gap", json_real(r->worst_gap));
    json_object_set_new(o, "checkpoint", r->checkpoint[0] ? json_string(r->checkpoint) : json_null());
    return o;
}

void ms_rerun_print_devices(FILE *f, const ms_rerun_result *r)
{
    if (!r->devices) return;
    fprintf(f, "measured against predicted peak, per device:\n");
    fprintf(f, "  %-14s %12s %12s %12s %9s\n", "device", "capacity", "predicted", "measured", "gap");
    size_t i;
    json_t *d;
    json_array_foreach(r->devices, i, d) {
        char a[32], b[32], c[32];
        fprintf(f, "  %-14.14s %12s %12s %12s %+8.2f%%\n",
                json_string_value(json_object_get(d, "name")),
                ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "capacity_bytes")), a, sizeof a),
                ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "predicted_peak_bytes")), b, sizeof b),
                ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "measured_peak_bytes")), c, sizeof c),
                100 * json_real_value(json_object_get(d, "gap")));
    }
}
