/* train.c — `memsplit train` on one device (train.h). */
#include "run/train.h"
#include "run/exit.h"
#include "run/interrupt.h"
#include "run/records.h"
#include "run/steplog.h"
#include "run/train_summary.h"
#include "trainer/checkpoint.h"
#include "trainer/session.h"
#include "vocab/size.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The run's records: the database, the run and its step log. */
typedef struct train_db {
    ms_db *db;
    int64_t run;
    ms_steplog *steps;
    int failed;
} train_db;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A checkpoint is written after this step (numbered from 1). */
static int checkpoint_after(const ms_config *c, int step)
{
    return c->checkpoint_dir[0] && ((c->checkpoint_every && step % c->checkpoint_every == 0) || step == c->steps);
}

static int open_records(const ms_config *cfg, const ms_train_args *a, train_db *r)
{
    char err[512];
    r->db = ms_db_open(a->db_path, 1, err, sizeof err);
    if (!r->db) { fprintf(stderr, "memsplit train: %s\n", err); return MS_EXIT_RUNTIME; }
    ms_db_set_busy_timeout(r->db, a->db_timeout_ms);
    char *ini = ms_config_to_ini(cfg);
    r->run = ms_db_run_begin(r->db, "train", a->cmdline, ini, NULL, cfg->preset[0] ? cfg->preset : "custom", 0);
    free(ini);
    if (r->run < 0) {
        fprintf(stderr, "memsplit train: %s\n", ms_db_errmsg(r->db));
        ms_db_close(r->db);
        r->db = NULL;
        return MS_EXIT_RUNTIME;
    }
    r->steps = ms_steplog_new(r->db, r->run, a->db_timeout_ms, a->quiet ? NULL : stderr);
    return 0;
}

/* Opens the session (and resumes it when asked): MS_OK, MS_EOOM, MS_EFAIL,
 * or -1 when the resumed step leaves too few steps for --kernel-steps (said). */
static int open_session(ms_session *s, const ms_config *cfg, const ms_train_args *a)
{
    int rc = ms_session_open(s, cfg, NULL);
    /* here, not in the session: a trial never picks (matmul.cu); the first step times, the rest keep */
    s->dev.k.matmul_pick = cfg->matmul_pick;
    s->use_graph = cfg->cuda_graph;
    if (rc != MS_OK || !cfg->resume) return rc;
    char path[1024], note[1200], err[512];
    rc = ms_session_resume(s, cfg->checkpoint_dir, path, sizeof path, note, sizeof note);
    if (note[0] && !a->quiet) fprintf(stderr, "train: %s\n", note);
    if (rc == MS_OK && !a->quiet) fprintf(stderr, "resumed from %s at step %d\n", path, s->step);
    if (rc == MS_OK && ms_train_kt_check(a->kt, cfg, s->step, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s\n", err);
        return -1;
    }
    return rc;
}

/* One step's row, progress line and checkpoint. */
static int after_step(ms_session *s, const ms_config *cfg, const ms_train_args *a, train_db *r, ms_train_stats *st,
                      double dt)
{
    if (r->steps) {
        char *peaks = ms_run_peaks_json(&s->dev, 1);
        ms_step_rec sr = { s->step, s->last_loss, dt * 1e3, st->tokens_per_step / dt, cfg->lr,
                           cfg->precision == MS_PREC_FP16 ? s->opt.loss_scale : 0, !s->last_opt.applied, peaks };
        ms_steplog_add(r->steps, &sr);
        free(peaks);
    }
    int log_every = cfg->log_every > 0 ? cfg->log_every : (cfg->steps <= 20 ? 1 : cfg->steps / 20);
    if (!a->quiet && (s->step % log_every == 0 || s->step == cfg->steps || st->steps_run == 1)) {
        char pk[32];
        fprintf(stderr, "step %*d/%d | loss %.4f | %8.0f tok/s | %7.1f ms | peak %s%s\n",
                (int)snprintf(NULL, 0, "%d", cfg->steps), s->step, cfg->steps, s->last_loss,
                st->tokens_per_step / dt, dt * 1e3, ms_fmt_bytes(s->dev.peak_total, pk, sizeof pk),
                s->last_opt.applied ? "" : " | step skipped (non-finite gradients)");
    }
    if (!checkpoint_after(cfg, s->step)) return MS_OK;
    char path[1024];
    int rc = ms_session_checkpoint(s, cfg->checkpoint_dir, path, sizeof path);
    if (rc == MS_OK && !a->quiet) fprintf(stderr, "checkpoint %s\n", path);
    return rc;
}

static int steps(ms_session *s, const ms_config *cfg, const ms_train_args *a, train_db *r, ms_train_stats *st)
{
    ms_train_kt *kt = a->kt;
    int rc = MS_OK;
    /* a signal (run/interrupt.h) stops the loop between steps; a step
     * already queued ahead is finished first, so that the state is whole */
    while (rc == MS_OK && s->step < cfg->steps && (!ms_interrupt_signal() || s->ahead)) {
        int traced = ms_train_kt_traced(kt, s->step);
        ms_train_kt_before_step(kt, s->step);
        /* the next step may be queued before this one's loss is read where
         * it follows at once: no checkpoint between, and not the first
         * traced step (its kernels would run before tracing starts) */
        s->launch_ahead = cfg->launch_ahead && s->step + 1 < cfg->steps && !checkpoint_after(cfg, s->step + 1) &&
                          ms_train_kt_traced(kt, s->step + 1) == traced && !ms_interrupt_signal();
        double t0 = now_s();
        rc = ms_session_step(s);
        if (rc) break;
        double dt = now_s() - t0;
        ms_train_kt_after_step(kt, dt);
        st->steps_run++;
        /* the first step allocates everything, and traced steps pay for
         * the tracing: leave them out of the speed */
        if ((st->steps_run > 1 || cfg->steps - st->first_step == 1) && !traced) {
            st->t_steady += dt;
            st->tokens_steady += st->tokens_per_step;
            st->timed_steps++;
        }
        if (st->steps_run == 1) st->loss_first = s->last_loss;
        st->loss_last = s->last_loss;
        json_array_append_new(st->losses, json_real(s->last_loss));
        rc = after_step(s, cfg, a, r, st, dt);
    }
    return rc;
}

/* Stopped by a signal after a finished step: a checkpoint of that step
 * where there is a folder (unless the step just wrote one), and what
 * happened, on stderr. 0, or -1 when the checkpoint could not be written. */
static int stop_interrupted(ms_session *s, const ms_config *cfg, const ms_train_stats *st, int sig)
{
    char path[1024] = "";
    int rc = 0;
    if (cfg->checkpoint_dir[0] && s->step > st->first_step && !checkpoint_after(cfg, s->step)) {
        rc = ms_session_checkpoint(s, cfg->checkpoint_dir, path, sizeof path) == MS_OK ? 0 : -1;
        if (rc) fprintf(stderr, "memsplit train: interrupted, and the checkpoint of step %d failed: %s\n", s->step, s->err);
    } else if (cfg->checkpoint_dir[0] && s->step > 0) {
        ms_ckpt_path(cfg->checkpoint_dir, s->step, path, sizeof path);
    }
    if (!rc)
        fprintf(stderr, "memsplit train: interrupted by %s after step %d of %d; %s%s%s\n", ms_signal_name(sig), s->step,
                cfg->steps, path[0] ? "its checkpoint is " : "no checkpoint folder (--checkpoint-dir): the steps are not kept",
                path, path[0] ? " (--resume continues from it)" : "");
    return rc;
}

/* The end of the run on stderr: a failure, the CUDA graph, the speed. */
static int say_end(const ms_session *s, const ms_config *cfg, const ms_train_args *a, const ms_train_stats *st, int rc)
{
    char err[512];
    int code = MS_EXIT_OK;
    if (rc != MS_OK) {
        /* the config was validated: what fails now is the device, the data
         * or a checkpoint (2), or memory (3) */
        fprintf(stderr, "memsplit train: %s\n", s->err[0] ? s->err : "failed");
        code = rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
    }
    if (ms_train_kt_finish(a->kt, cfg, s->dev.ops ? s->dev.name : NULL, st->tokens_per_step, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s\n", err);
        if (code == MS_EXIT_OK) code = MS_EXIT_RUNTIME;
    }
    double tps = st->t_steady > 0 ? st->tokens_steady / st->t_steady : 0;
    if (!a->quiet && s->graph.why_not[0]) /* set only where a graph was tried: train on a GPU */
        fprintf(stderr, "train: ran without a CUDA graph: %s\n", s->graph.why_not);
    else if (!a->quiet && s->graph.captures)
        fprintf(stderr, "train: steps replayed a CUDA graph (%d captured; the last took %.1f ms to capture, %.1f MiB)\n",
                s->graph.captures, s->graph.capture_ms, s->graph.bytes / 1048576.0);
    if (!a->quiet && rc == MS_OK && s->step == cfg->steps) {
        char pk[32];
        fprintf(stderr, "done: %d steps in %.2f s, %.0f tokens/s, peak %s on %s\n", st->steps_run,
                now_s() - st->t_start, tps, ms_fmt_bytes(s->dev.peak_total, pk, sizeof pk), s->dev.name);
    }
    return code;
}

/* The last step rows, the device's peak and the run's end (sig: the run
 * was interrupted by it). */
static void close_records(const ms_session *s, train_db *r, int rc, int sig)
{
    char err[512];
    if (ms_steplog_finish(r->steps, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s\n", err);
        r->failed++;
    }
    if (s->dev.ops) {
        ms_device_peak dp;
        memset(&dp, 0, sizeof dp);
        snprintf(dp.name, sizeof dp.name, "%.31s", s->dev.name);
        dp.capacity = s->dev.capacity == SIZE_MAX ? 0 : s->dev.capacity;
        dp.measured_peak = s->dev.peak_total;
        for (int c = 0; c < MS_CAT_N; c++) dp.measured_by_cat[c] = s->dev.peak[c];
        ms_run_recorded(ms_db_add_device_peak(r->db, r->run, &dp), r->db, "train", "the device's peak", &r->failed);
    }
    const char *status = sig ? "interrupted" : rc == MS_OK ? "ok" : rc == MS_EOOM ? "oom" : "failed";
    ms_run_recorded(ms_db_run_finish(r->db, r->run, status), r->db, "train", "the run's end", &r->failed);
    ms_steplog_free(r->steps);
    ms_db_close(r->db);
}

int ms_run_train(const ms_config *cfg, const ms_train_args *a, json_t **summary)
{
    *summary = NULL;
    train_db r = { 0 };
    if (a->db_path) {
        int code = open_records(cfg, a, &r);
        if (code) return code;
    }
    ms_session s;
    int rc = open_session(&s, cfg, a);
    if (rc < 0) {
        ms_session_close(&s);
        return MS_EXIT_USAGE;
    }
    ms_train_stats st = { .loss_first = NAN, .loss_last = NAN, .t_start = now_s(), .first_step = s.step,
                       .tokens_per_step = (size_t)cfg->accum * cfg->batch * cfg->seq_len, .losses = json_array() };
    if (rc == MS_OK) rc = steps(&s, cfg, a, &r, &st);
    /* a signal stopped it before its last step: that step's checkpoint, the
     * run "interrupted", 128 + the signal (run/interrupt.h) */
    int sig = rc == MS_OK && s.step < cfg->steps ? ms_interrupt_signal() : 0;
    int lost = sig && stop_interrupted(&s, cfg, &st, sig); /* its checkpoint failed: an error (2) */
    int code = say_end(&s, cfg, a, &st, rc);
    if (sig && code == MS_EXIT_OK) code = lost ? MS_EXIT_RUNTIME : ms_interrupt_status(sig);
    if (r.db) {
        close_records(&s, &r, rc, sig);
        if (r.failed && code == MS_EXIT_OK) code = MS_EXIT_RUNTIME;
    }
    if (a->json) {
        *summary = ms_train_summary(&s, cfg, a->kt, rc, &st);
        if (*summary && sig) json_object_set_new(*summary, "interrupted", json_string(ms_signal_name(sig)));
    }
    json_decref(st.losses);
    ms_session_close(&s);
    return code;
}
