/* rerun.c — train with a plan; measured against predicted; OOM recovery. */
#include "cli/rerun.h"
#include "cli/common.h"
#include "planner/explain.h"
#include "planner/plan_json.h"
#include "trainer/checkpoint.h"

#include <dirent.h>
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

int ms_rerun_spec(const ms_plan *plan, const char *device, ms_pipe_spec *spec, char *err, size_t errlen)
{
    memset(spec, 0, sizeof *spec);
    if (plan->n_stages < 1 || plan->n_stages > MS_PIPE_MAX_STAGES || plan->n_devices > MS_PIPE_MAX_STAGES) {
        snprintf(err, errlen, "plan has %d stages over %d devices; memsplit runs 1..%d", plan->n_stages,
                 plan->n_devices, MS_PIPE_MAX_STAGES);
        return -1;
    }
    if (plan->replicas > 1) { /* memsplit train --plan refuses these first (cmd_doctor.c) */
        snprintf(err, errlen, "a plan of %d replicas runs as MPI ranks, not in one process", plan->replicas);
        return -1;
    }
    int gpus = ms_cuda_gpu_count();
    const char *kind = device;
    if (!kind) kind = gpus >= plan->n_devices && plan->n_devices > 1 ? "distinct" : gpus >= 1 ? "cuda:0" : "cpu";
    spec->n_devices = plan->n_devices;
    for (int d = 0; d < plan->n_devices; d++) {
        if (!strcmp(kind, "distinct")) snprintf(spec->device[d], sizeof spec->device[d], "cuda:%d", d);
        else snprintf(spec->device[d], sizeof spec->device[d], "%s", kind);
        spec->capacity[d] = plan->devices[d].capacity;
    }
    spec->virtual_share = strcmp(kind, "distinct") != 0 && plan->n_devices > 1;
    /* one real device of its own: its capacity is emulated by a ballast */
    if (plan->n_devices == 1 && strcmp(kind, "cpu")) spec->virtual_share = 0;
    spec->n_stages = plan->n_stages;
    for (int s = 0; s < plan->n_stages; s++) {
        spec->stage_device[s] = plan->stages[s].device;
        spec->first[s] = plan->stages[s].first;
        spec->last[s] = plan->stages[s].last;
        spec->recompute[s] = plan->stages[s].recompute;
    }
    spec->schedule = plan->schedule == MS_SCHED_GPIPE ? MS_PIPE_GPIPE : MS_PIPE_1F1B;
    spec->micro_batch = plan->micro_batch;
    spec->n_micro = plan->n_micro;
    return 0;
}

static json_t *device_entry(const ms_pipeline *p, const ms_plan *plan, int d, double *gap)
{
    const ms_device *dev = &p->devs[d];
    const ms_plan_stage *st = NULL;
    for (int s = 0; s < plan->n_stages; s++)
        if (plan->stages[s].device == d) st = &plan->stages[s];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(dev->name));
    json_object_set_new(o, "capacity_bytes", json_integer((json_int_t)dev->capacity));
    json_object_set_new(o, "predicted_peak_bytes", json_integer(st ? (json_int_t)st->peak : 0));
    json_object_set_new(o, "measured_peak_bytes", json_integer((json_int_t)dev->peak_total));
    *gap = st && st->peak ? fabs((double)dev->peak_total - (double)st->peak) / (double)st->peak : 0;
    json_object_set_new(o, "gap", json_real(*gap));
    json_object_set_new(o, "measured_by_category", ms_cli_cat_json(dev->peak));
    size_t pred[MS_CAT_N] = { 0 };
    for (int c = 0; st && c < MS_CAT_N; c++) pred[c] = st->bytes[c];
    json_object_set_new(o, "predicted_by_category", ms_cli_cat_json(pred));
    return o;
}

static void record_peaks(const ms_rerun_opts *o, const ms_pipeline *p, const ms_plan *plan)
{
    if (!o->db) return;
    for (int d = 0; d < p->n_dev; d++) {
        ms_device_peak dp;
        memset(&dp, 0, sizeof dp);
        dp.device = d;
        snprintf(dp.name, sizeof dp.name, "%.31s", p->devs[d].name);
        dp.capacity = p->devs[d].capacity;
        dp.measured_peak = p->devs[d].peak_total;
        for (int s = 0; s < plan->n_stages; s++)
            if (plan->stages[s].device == d) {
                dp.predicted_peak = plan->stages[s].peak;
                for (int c = 0; c < MS_CAT_N; c++) dp.predicted_by_cat[c] = plan->stages[s].bytes[c];
            }
        for (int c = 0; c < MS_CAT_N; c++) dp.measured_by_cat[c] = p->devs[d].peak[c];
        ms_db_add_device_peak(o->db, o->run, &dp);
    }
}

static void record_oom(const ms_rerun_opts *o, const ms_pipeline *p)
{
    if (!o->db || p->oom_stage < 0) return;
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
    ms_db_add_oom_event(o->db, o->run, d->name, &oi, 0);
}

/* Re-plan for the capacities that remain (the OOM device at what it has). */
static int replan(const ms_rerun_opts *o, const ms_pipeline *p, ms_plan *plan, char *err, size_t errlen)
{
    int n = plan->n_devices;
    ms_plan_device devs[MS_PIPE_MAX_STAGES];
    for (int d = 0; d < n; d++) {
        devs[d] = plan->devices[d];
        if (d < p->n_dev) devs[d].capacity = p->devs[d].capacity;
    }
    ms_plan np;
    memset(&np, 0, sizeof np);
    ms_plan_opts po = o->popts;
    po.global_batch = plan->global_batch;
    po.precision = plan->precision;   /* the checkpoint's weights are of this policy */
    int rc = ms_plan_search(o->prof, devs, n, &po, &np, err, errlen);
    if (rc == MS_PLAN_INFEASIBLE) {
        ms_infeasible inf;
        if (ms_plan_explain_infeasible(o->prof, devs, n, &po, &inf, err, errlen) == 0)
            snprintf(err, errlen, "no plan fits the capacity that remains: %.900s", inf.text);
        return MS_EOOM;
    }
    if (rc != MS_PLAN_OK) return MS_EFAIL;
    np.profile_run = plan->profile_run;
    ms_plan_explain(o->prof, &np);
    ms_plan_free(plan);
    *plan = np;
    return MS_OK;
}

/* Recovery needs only the newest checkpoint (and one before it, in case the
 * newest is being written when the process dies): older ones go, so a long
 * run of a large model does not fill the disk. */
static void prune_ckpts(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char names[64][64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        int step;
        char tail;
        if (sscanf(e->d_name, "step-%d.ckp%c", &step, &tail) == 2 && tail == 't' && strlen(e->d_name) < 64)
            snprintf(names[n++], sizeof names[0], "%.63s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i + 2 < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%.900s/%.63s", dir, names[i]);
        unlink(path);
    }
}

static int latest_ckpt(const char *dir, char *path, size_t len)
{
    if (!dir) return 0;
    return ms_ckpt_latest(dir, path, len) == 1;
}

int ms_rerun(const ms_config *cfg, ms_plan *plan, const ms_rerun_opts *o, ms_rerun_result *r)
{
    memset(r, 0, sizeof *r);
    r->losses = json_array();
    r->loss_first = r->loss_last = NAN;
    ms_config c = *cfg;
    c.precision = (ms_precision)plan->precision;
    if (plan->n_layers != c.n_layer + 2 || plan->seq_len != c.seq_len || plan->d_model != c.d_model) {
        snprintf(r->err, sizeof r->err, "the plan is for a model of %d layers (d_model %d, seq %d); the config has %d",
                 plan->n_layers, plan->d_model, plan->seq_len, c.n_layer + 2);
        return MS_EFAIL;
    }
    int resume = o->resume, rc = MS_OK;
    double t_steady = 0, tok_steady = 0;
    int inject_done = 0;
    for (;;) {
        ms_pipe_spec spec;
        if (ms_rerun_spec(plan, o->device, &spec, r->err, sizeof r->err)) return MS_EFAIL;
        ms_pipeline p;
        rc = ms_pipe_open(&p, &c, &spec);
        char path[1024];
        if (rc == MS_OK && resume && latest_ckpt(o->ckpt_dir, path, sizeof path)) {
            rc = ms_pipe_load(&p, path);
            if (rc == MS_OK && o->progress) fprintf(o->progress, "train: resumed from %s at step %d\n", path, p.step);
        }
        size_t tokens = (size_t)plan->global_batch * c.seq_len;
        int first_in_open = 1;
        while (rc == MS_OK && p.step < o->steps) {
            if (!inject_done && o->inject_step > 0 && p.step + 1 == o->inject_step && o->inject_dev < p.n_dev) {
                /* another process takes memory: shrink, and hand the transients back */
                ms_device *d = &p.devs[o->inject_dev];
                size_t res = d->peak[MS_CAT_RESERVE];
                d->capacity = o->inject_frac > 0 ? res + (size_t)((double)(d->peak_total - res) * o->inject_frac)
                                                 : o->inject_bytes;
                d->account_only = 1; /* on a GPU with a ballast the accounting must now decide */
                for (int s = 0; s < p.n_stages; s++)
                    if (p.st[s].dev == d) ms_scratch_release(&p.st[s].scr);
                inject_done = 1;
                if (o->progress)
                    fprintf(o->progress, "train: [test] %s now has %zu bytes (another process took the rest)\n", d->name,
                            d->capacity);
            }
            double t0 = now_s();
            rc = ms_pipe_step(&p);
            if (rc) break;
            double dt = now_s() - t0;
            r->steps_run++;
            if (!first_in_open) { t_steady += dt; tok_steady += tokens; }
            first_in_open = 0;
            if (isnan(r->loss_first)) r->loss_first = p.last_loss;
            r->loss_last = p.last_loss;
            /* a step redone after a recovery replaces its earlier loss */
            while ((int)json_array_size(r->losses) >= p.step) json_array_remove(r->losses, json_array_size(r->losses) - 1);
            json_array_append_new(r->losses, json_real(p.last_loss));
            char peaks[512] = "{";
            for (int d = 0; d < p.n_dev; d++) {
                size_t u = strlen(peaks);
                snprintf(peaks + u, sizeof peaks - u, "%s\"%s\": %zu", d ? ", " : "", p.devs[d].name, p.devs[d].peak_total);
            }
            strncat(peaks, "}", sizeof peaks - strlen(peaks) - 1);
            if (o->db) {
                ms_step_rec sr = { p.step, p.last_loss, dt * 1e3, tokens / dt, c.lr,
                                   c.precision == MS_PREC_FP16 ? p.opt.loss_scale : 0, !p.last_opt.applied, peaks };
                ms_db_add_step(o->db, o->run, &sr);
            }
            if (o->progress)
                fprintf(o->progress, "train: step %d/%d | loss %.4f | %8.0f tok/s | %7.1f ms | peaks %s\n", p.step, o->steps,
                        p.last_loss, tokens / dt, dt * 1e3, peaks);
            if (o->ckpt_dir && o->ckpt_every > 0 && (p.step % o->ckpt_every == 0 || p.step == o->steps)) {
                if (ms_pipe_checkpoint(&p, o->ckpt_dir, path, sizeof path) != MS_OK) {
                    snprintf(r->err, sizeof r->err, "checkpoint: %s", p.err);
                    ms_pipe_close(&p);
                    return MS_EFAIL;
                }
                prune_ckpts(o->ckpt_dir);
            }
        }
        r->steps = p.step;
        if (rc == MS_OK) {
            /* measured against predicted, per device */
            r->devices = json_array();
            for (int d = 0; d < p.n_dev; d++) {
                double gap;
                json_array_append_new(r->devices, device_entry(&p, plan, d, &gap));
                if (gap > r->worst_gap) r->worst_gap = gap;
            }
            record_peaks(o, &p, plan);
            ms_pipe_close(&p);
            break;
        }
        if (rc != MS_EOOM) {
            snprintf(r->err, sizeof r->err, "%s", p.err);
            ms_pipe_close(&p);
            return rc;
        }
        /* an OOM mid-run: record, re-plan for what remains, resume */
        char msg[600];
        snprintf(msg, sizeof msg, "%s", p.err);
        if (o->progress) fprintf(o->progress, "train: OUT OF MEMORY at step %d: %s\n", p.step + 1, msg);
        record_oom(o, &p);
        int failed_step = p.step + 1;
        if (!o->prof) {
            snprintf(r->err, sizeof r->err, "%s; no profile to re-plan from (run memsplit doctor, or give --db with the profiled run)", msg);
            ms_pipe_close(&p);
            r->oom_unrecovered = 1;
            return MS_EOOM;
        }
        int64_t old_plan = o->plan_id;
        int prc = replan(o, &p, plan, r->err, sizeof r->err);
        ms_pipe_close(&p);
        if (prc != MS_OK) {
            r->oom_unrecovered = 1;
            char ck[1024] = "";
            if (latest_ckpt(o->ckpt_dir, ck, sizeof ck) && o->progress)
                fprintf(o->progress, "train: stopped cleanly; the last checkpoint, %s, is intact\n", ck);
            return prc;
        }
        r->recoveries++;
        int64_t new_plan = 0;
        if (o->db) {
            char *js = ms_plan_to_string(plan);
            if (js) new_plan = ms_db_add_plan(o->db, o->run, js, plan->step_ms, 1);
            free(js);
            ms_recovery_rec rr;
            memset(&rr, 0, sizeof rr);
            rr.step = failed_step;
            rr.resumed_step = -1;
            char ck[1024] = "";
            if (latest_ckpt(o->ckpt_dir, ck, sizeof ck)) {
                snprintf(rr.checkpoint, sizeof rr.checkpoint, "%.511s", ck);
                ms_ckpt_meta meta;
                int nsec;
                char e2[128];
                if (ms_ckpt_peek(ck, &meta, &nsec, e2, sizeof e2) == 0) rr.resumed_step = (int)meta.step;
            } else {
                rr.resumed_step = 0;
            }
            snprintf(rr.reason, sizeof rr.reason, "%.127s", msg);
            rr.old_plan_id = old_plan;
            rr.new_plan_id = new_plan;
            ms_db_add_recovery(o->db, o->run, &rr);
        }
        if (o->progress) {
            fprintf(o->progress, "train: re-planned for the capacity that remains:\n");
            ms_plan_print_table(o->progress, plan, o->prof);
            fprintf(o->progress, "train: resuming from the last checkpoint\n");
        }
        resume = 1;
    }
    r->tokens_per_s = t_steady > 0 ? tok_steady / t_steady : 0;
    return MS_OK;
}

void ms_rerun_result_free(ms_rerun_result *r)
{
    json_decref(r->losses);
    json_decref(r->devices);
    r->losses = r->devices = NULL;
}
