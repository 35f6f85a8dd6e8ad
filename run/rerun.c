/* rerun.c — train with a plan; measured against predicted; OOM recovery. */
#include "run/rerun.h"
#include "run/interrupt.h"
#include "run/recover.h"
#include "run/records.h"
#include "run/steplog.h"
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

/* What one opening of the pipeline needs to carry between its parts. */
typedef struct run_ctx {
    const ms_rerun_opts *o;
    ms_rerun_result *r;
    ms_steplog *steps;
    char kept[2][1024];        /* the checkpoints this run keeps, older first ("": none) */
} run_ctx;

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

/* Stopped by a signal after a finished step: its checkpoint, where the run
 * has a folder and the step has none yet (run/interrupt.h). */
static int checkpoint_interrupted(run_ctx *x, ms_pipeline *p)
{
    char path[1024];
    if (!x->o->ckpt_dir || p->step <= 0 || x->r->checkpoint_step == p->step) return MS_OK;
    if (ms_pipe_checkpoint(p, x->o->ckpt_dir, path, sizeof path) != MS_OK) {
        snprintf(x->r->err, sizeof x->r->err, "interrupted, and the checkpoint of step %d failed: %s", p->step, p->err);
        return MS_EFAIL;
    }
    keep_ckpt(x, path, p->step);
    return MS_OK;
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
        if ((r->interrupted = ms_interrupt_signal())) break; /* between steps: run/interrupt.h */
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
        char *peaks = ms_run_peaks_json(p->devs, p->n_dev);
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
    if (rc == MS_OK && r->interrupted) rc = checkpoint_interrupted(x, p);
    return rc;
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
            ms_rerun_measured(o, r, &p, plan, plan_dev);
            ms_pipe_close(&p);
            break;
        }
        if (rc != MS_EOOM) {
            if (!r->err[0]) snprintf(r->err, sizeof r->err, "%s", p.err);
            ms_pipe_close(&p);
            break;
        }
        /* an OOM mid-run: record, re-plan for what remains, resume */
        if ((rc = ms_rerun_recover(o, r, &p, plan_dev, plan, plan_id)) != MS_OK) break;
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

