/* rank_train.c — one rank of `memsplit train --plan` (rank_train.h). */
#include "run/rank_train.h"
#include "run/exit.h"
#include "run/interrupt.h"
#include "run/records.h"
#include "run/steplog.h"
#include "run/text.h"
#include "reports/db.h"
#include "trainer/checkpoint.h"
#include "trainer/ckpt_parts.h"
#include "trainer/pipeline.h"
#include "trainer/plan_spec.h"
#include "vocab/plan_replicas.h"
#include "vocab/size.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* What every rank sends rank 0 each step. */
typedef struct rank_rec {
    uint64_t peak_total, peak[MS_CAT_N], capacity;
    int64_t signal;         /* a signal this rank received (run/interrupt.h), 0 none */
} rank_rec;

typedef struct rank_run {
    const ms_world *w;
    int rank, size, stage, replica, device;
    const char *ckdir;
    char name[40];          /* this rank's device */
    char (*names)[40];      /* every rank's (rank 0) */
    rank_rec *recs;         /* every rank's, the last step */
    ms_db *db;
    int64_t run;
    ms_steplog *steps;      /* rank 0's step rows on their way into db */
    int db_failed;          /* records that could not be written: exit 2 */
    int own_run;            /* rank 0 began the run row (no --db-run): it records the run's end */
    /* every rank: the database and the run rank 0 records in (run_all 0:
     * none, or doctor's --db-run, whose end doctor records), so that a rank
     * failing alone can record the run's end itself before it aborts */
    const char *db_path;
    int db_timeout_ms;
    int64_t run_all;
    int first_step, last_step; /* steps this run has done: first_step+1 .. last_step */
    json_t *losses;
} rank_run;

/* Rank 0, before an abort: the step rows still waiting for a busy database
 * go in (the log waits its whole timeout once more), and the run's end is
 * recorded; what cannot be written is said. Other ranks: nothing. */
static void flush_records(rank_run *r, int code)
{
    if (r->rank != 0 || !r->db) return;
    char err[512];
    if (r->steps && ms_steplog_finish(r->steps, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s\n", err);
        r->db_failed++;
    }
    if (r->own_run)
        ms_run_recorded(ms_db_run_finish(r->db, r->run, code == MS_EXIT_OOM ? "oom" : "failed"), r->db, "train",
                        "the run's end", &r->db_failed);
    r->own_run = 0;
}

/* Counts the step rows in (ctx[0], ctx[1]] into ctx[2]. */
static int count_rows(const ms_step_rec *s, void *ctx)
{
    int *c = ctx;
    if (s->step > c[0] && s->step <= c[1]) c[2]++;
    return 0;
}

/* Another rank than 0, failing alone: rank 0 may be waiting on it inside a
 * step and cannot record the run's end before the abort kills it, so this
 * rank records it in rank 0's run row (its own connection to the same
 * database). Rank 0 dies with the step rows still waiting in it for a busy
 * database, and cannot say so: this rank counts the rows the run's steps
 * left in the database and says how many are missing (in the run's notes
 * too, where it can). What cannot be written or read is said. */
static void record_lone_end(rank_run *r, int code)
{
    if (r->rank == 0 || !r->db_path || r->run_all <= 0) return;
    char err[512], line[512];
    ms_db *db = ms_db_open(r->db_path, 0, err, sizeof err);
    const char *why = db ? NULL : err;
    if (db) ms_db_set_busy_timeout(db, r->db_timeout_ms);
    if (db && ms_db_run_finish(db, r->run_all, code == MS_EXIT_OOM ? "oom" : "failed")) why = ms_db_errmsg(db);
    if (why) fprintf(stderr, "memsplit train: rank %d could not record the run's end in %s: %s\n", r->rank, r->db_path, why);
    if (!db) return;
    int c[3] = { r->first_step, r->last_step, 0 }, done = r->last_step - r->first_step;
    if (done > 0 && ms_db_list_steps(db, r->run_all, count_rows, c))
        snprintf(line, sizeof line, "rank %d failed alone after step %d; the database could not be read (%s), so "
                 "the step rows rank 0 still held, lost with it, were not counted", r->rank, r->last_step,
                 ms_db_errmsg(db));
    else if (done > 0 && c[2] < done)
        snprintf(line, sizeof line, "rank %d failed alone after step %d; the database holds %d of the %d step rows of "
                 "steps %d..%d, and the other %d, still waiting in rank 0 for the busy database, are lost with it",
                 r->rank, r->last_step, c[2], done, r->first_step + 1, r->last_step, done - c[2]);
    else
        line[0] = 0;
    if (line[0]) {
        fprintf(stderr, "memsplit train: %s\n", line);
        if (ms_db_run_note(db, r->run_all, line))
            fprintf(stderr, "memsplit train: rank %d could not note that in the run's record: %s\n", r->rank,
                    ms_db_errmsg(db));
    }
    ms_db_close(db);
}

/* Says which rank failed and why, lets rank 0 write its records, and ends
 * the run. agreed: every rank has the same verdict and comes here (a
 * checkpoint: its parts are saved collectively), so no rank aborts before
 * rank 0 has written, since the first abort kills all. Otherwise (a failure
 * of this rank alone) the others may be waiting on it inside a step: it
 * aborts at once, after recording the run's end itself and saying how many
 * step rows, still waiting in rank 0 for a busy database, are lost with rank
 * 0 (record_lone_end). */
static void end_run(rank_run *r, int code, const char *what, const char *msg, int agreed)
{
    fprintf(stderr, "memsplit train: rank %d (stage %d, replica %d, %s): %s: %s\n", r->rank, r->stage, r->replica,
            r->name, what, msg);
    fflush(stderr);
    flush_records(r, code);
    if (!agreed) record_lone_end(r, code);
    fflush(stderr);
    if (agreed) r->w->barrier();
    r->w->abort(code);
}
static void die(rank_run *r, int code, const char *what, const char *msg) { end_run(r, code, what, msg, 0); }

static void gather_recs(rank_run *r, const ms_pipeline *p)
{
    rank_rec mine;
    memset(&mine, 0, sizeof mine);
    const ms_device *d = &p->devs[0];
    mine.peak_total = d->peak_total;
    mine.capacity = d->capacity;
    for (int c = 0; c < MS_CAT_N; c++) mine.peak[c] = d->peak[c];
    mine.signal = ms_interrupt_signal();
    r->w->allgather(&mine, sizeof mine, r->recs);
}

/* The first signal any rank received, from the last gather: every rank
 * sees the same, so all of them stop after the same step. */
static int any_signal(const rank_run *r)
{
    for (int k = 0; k < r->size; k++)
        if (r->recs[k].signal) return (int)r->recs[k].signal;
    return 0;
}

/* {"cpu/v0": bytes, ...} over every rank, malloc'd */
static char *peaks_json(const rank_run *r)
{
    json_t *o = json_object();
    for (int k = 0; k < r->size; k++) json_object_set_new(o, r->names[k], json_integer((json_int_t)r->recs[k].peak_total));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

static void record_step(rank_run *r, const ms_pipeline *p, const ms_plan *plan, double dt, const ms_rank_opts *o,
                        int steps)
{
    if (r->rank != 0) return;
    size_t tokens = (size_t)plan->global_batch * p->model.T;
    json_array_append_new(r->losses, json_real(p->last_loss));
    char *peaks = peaks_json(r);
    if (r->db) {
        ms_step_rec sr = { p->step, p->last_loss, dt * 1e3, tokens / dt, p->cfg.lr,
                           p->cfg.precision == MS_PREC_FP16 ? p->opt.loss_scale : 0, !p->last_opt.applied, peaks };
        ms_steplog_add(r->steps, &sr); /* kept and retried while the database is busy */
    }
    if (!o->quiet)
        fprintf(stderr, "train: step %d/%d | loss %.4f | %8.0f tok/s | %7.1f ms | %d ranks | peaks %s\n", p->step, steps,
                p->last_loss, tokens / dt, dt * 1e3, r->size, peaks);
    free(peaks);
}

/* Rank 0: each rank's device, measured against its stage's prediction. */
static json_t *devices_json(rank_run *r, const ms_plan *plan, double *worst)
{
    json_t *a = json_array();
    *worst = 0;
    for (int k = 0; k < r->size; k++) {
        int s, rep, dev = ms_plan_rank_device(plan, k, &s, &rep);
        const ms_plan_stage *st = &plan->stages[s];
        const rank_rec *x = &r->recs[k];
        double gap = st->peak ? fabs((double)x->peak_total - (double)st->peak) / (double)st->peak : 0;
        if (gap > *worst) *worst = gap;
        size_t meas[MS_CAT_N], pred[MS_CAT_N];
        for (int c = 0; c < MS_CAT_N; c++) {
            meas[c] = (size_t)x->peak[c];
            pred[c] = (size_t)st->bytes[c];
        }
        json_t *o = ms_run_device_row(r->names[k], x->capacity, st->peak, x->peak_total, pred, meas, NULL);
        json_object_set_new(o, "rank", json_integer(k));
        json_object_set_new(o, "stage", json_integer(s));
        json_object_set_new(o, "replica", json_integer(rep));
        json_object_set_new(o, "plan_device", json_integer(dev));
        json_array_append_new(a, o);
        if (r->db) {
            ms_device_peak dp;
            memset(&dp, 0, sizeof dp);
            dp.device = k;
            snprintf(dp.name, sizeof dp.name, "%.31s", r->names[k]);
            dp.capacity = x->capacity == SIZE_MAX ? 0 : x->capacity;
            dp.measured_peak = x->peak_total;
            dp.predicted_peak = st->peak;
            for (int c = 0; c < MS_CAT_N; c++) {
                dp.measured_by_cat[c] = x->peak[c];
                dp.predicted_by_cat[c] = st->bytes[c];
            }
            ms_run_recorded(ms_db_add_device_peak(r->db, r->run, &dp), r->db, "train", "a rank's peak", &r->db_failed);
        }
    }
    return a;
}

/* Rank 0: the summary, as memsplit train --plan --json prints it, plus the layout. */
static void print_summary(rank_run *r, const ms_plan *plan, const ms_pipeline *p, double tps, int json)
{
    double worst;
    json_t *devs = devices_json(r, plan, &worst);
    size_t n = json_array_size(r->losses);
    if (!json) {
        fprintf(stderr, "measured against predicted peak, per rank:\n");
        size_t i;
        json_t *d;
        json_array_foreach(devs, i, d) {
            char a[32], b[32];
            fprintf(stderr, "  rank %2d stage %2d replica %2d %-10s predicted %10s  measured %10s  gap %.2f%%\n", (int)i,
                    (int)json_integer_value(json_object_get(d, "stage")),
                    (int)json_integer_value(json_object_get(d, "replica")), r->names[i],
                    ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "predicted_peak_bytes")), a, sizeof a),
                    ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "measured_peak_bytes")), b, sizeof b),
                    100 * json_real_value(json_object_get(d, "gap")));
        }
        json_decref(devs);
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "ranks", json_integer(r->size));
    json_object_set_new(o, "stages", json_integer(plan->n_stages));
    json_object_set_new(o, "replicas", json_integer(plan->replicas));
    json_object_set_new(o, "zero", json_boolean(plan->zero));
    json_object_set_new(o, "steps", json_integer(p->step));
    json_object_set_new(o, "loss_first", n ? json_real(json_real_value(json_array_get(r->losses, 0))) : json_null());
    json_object_set_new(o, "loss_last", n ? json_real(p->last_loss) : json_null());
    json_object_set_new(o, "tokens_per_s", json_real(tps));
    json_object_set_new(o, "losses", json_incref(r->losses));
    json_object_set_new(o, "devices", devs);
    json_object_set_new(o, "worst_gap", json_real(worst));
    ms_print_json(o);
    json_decref(o);
}

/* Rank 0 opens the database and the run the steps go to. */
static int open_db(rank_run *r, const ms_rank_opts *o, const ms_config *cfg, char *err, size_t errlen)
{
    if (r->rank != 0 || !o->db) return 0;
    r->db = ms_db_open(o->db, 1, err, errlen);
    if (!r->db) return -1;
    ms_db_set_busy_timeout(r->db, o->db_timeout_ms);
    if (o->db_run) {
        r->run = o->db_run;
    } else {
        char *ini = ms_config_to_ini(cfg), cmd[64];
        snprintf(cmd, sizeof cmd, "memsplit train --plan (%d ranks)", r->size);
        r->run = ms_db_run_begin(r->db, "train", cmd, ini, NULL, cfg->preset, 0);
        free(ini);
        if (r->run < 0) {
            snprintf(err, errlen, "%s", ms_db_errmsg(r->db));
            return -1;
        }
        r->own_run = 1;
    }
    r->steps = ms_steplog_new(r->db, r->run, o->db_timeout_ms, o->quiet ? NULL : stderr);
    if (!r->steps) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    return 0;
}

/* Every rank resumes from the checkpoint rank 0 found (any layout wrote it). */
static void resume(rank_run *r, ms_pipeline *p)
{
    char path[1024] = "";
    if (r->rank == 0 && ms_ckpt_latest(r->ckdir, path, sizeof path) < 0) path[0] = 0;
    r->w->bcast(path, sizeof path);
    if (!path[0]) return; /* nothing to resume: start at step 0, as a one-process run does not */
    if (ms_pipe_load(p, path)) die(r, MS_EXIT_RUNTIME, "resume", p->err);
    if (r->rank == 0) ms_ckpt_sweep(r->ckdir); /* the run owns the folder now: what saves cut short left goes */
    if (r->rank == 0) fprintf(stderr, "train: resumed from %s at step %d (%d ranks)\n", path, p->step, r->size);
}

static void checkpoint(rank_run *r, ms_pipeline *p, const ms_rank_opts *o)
{
    char path[1024];
    if (ms_pipe_checkpoint(p, o->ckdir, path, sizeof path)) end_run(r, MS_EXIT_RUNTIME, "checkpoint", p->err, 1);
    if (r->rank != 0) return;
    ms_ckpt_prune(o->ckdir, 2); /* a recovery needs the newest, and one before it in case that is cut short */
    if (!o->quiet) fprintf(stderr, "train: checkpoint %s\n", path);
}

static int train(rank_run *r, const ms_rank_opts *o, const ms_config *cfg, const ms_plan *plan)
{
    char err[512];
    int cuda = !strncmp(r->name, "cuda", 4), ord = -1;
    if (cuda) sscanf(r->name, "cuda:%d", &ord);
    ms_dist D;
    if (r->w->open_dist(&D, plan->n_stages, plan->replicas, plan->zero, ord, err, sizeof err))
        die(r, MS_EXIT_RUNTIME, "communicators", err);
    ms_pipe_spec sp;
    if (ms_pipe_spec_of_rank(plan, r->stage, r->device, r->name, &D, &sp, err, sizeof err)) die(r, MS_EXIT_USAGE, "plan", err);
    ms_config c = *cfg;
    c.precision = (ms_precision)plan->precision;
    ms_pipeline p;
    int rc = ms_pipe_open(&p, &c, &sp);
    if (rc) die(r, rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME, "open", p.err);
    /* the CPU backend's devices are the plan's virtual ones: name them so */
    const char *pn = plan->devices[r->device].name;
    if (!cuda && !strncmp(pn, "cpu", 3)) snprintf(p.devs[0].name, sizeof p.devs[0].name, "%.39s", pn);
    else if (!cuda) snprintf(p.devs[0].name, sizeof p.devs[0].name, "cpu/v%d", r->device);
    snprintf(r->name, sizeof r->name, "%s", p.devs[0].name);
    r->w->allgather(r->name, sizeof r->name, r->names);
    if (open_db(r, o, &c, err, sizeof err)) die(r, MS_EXIT_RUNTIME, "database", err);
    int64_t run = r->own_run ? r->run : 0; /* doctor's own run row (--db-run) is doctor's to end */
    r->w->bcast(&run, sizeof run);
    r->db_path = o->db;
    r->db_timeout_ms = o->db_timeout_ms;
    r->run_all = run;
    if (o->resume) resume(r, &p);
    r->first_step = r->last_step = p.step;
    double t_steady = 0, tok_steady = 0;
    int first = 1, sig = 0;
    while (p.step < c.steps && !sig) {
        if (p.step + 1 == o->kill_step && r->rank == o->kill_rank) r->w->arm_kill(&D);
        if (p.step + 1 == o->fail_step && r->rank == o->fail_rank) die(r, MS_EXIT_RUNTIME, "step", "injected (--inject-fail)");
        double t0 = now_s();
        rc = ms_pipe_step(&p);
        if (rc) die(r, rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME, rc == MS_EOOM ? "out of memory" : "step", p.err);
        double dt = now_s() - t0;
        if (!first) {
            t_steady += dt;
            tok_steady += (double)plan->global_batch * c.seq_len;
        }
        first = 0;
        r->last_step = p.step;
        gather_recs(r, &p);
        record_step(r, &p, plan, dt, o, c.steps);
        int ck = o->ckdir && ((o->ckevery && p.step % o->ckevery == 0) || p.step == c.steps);
        /* a signal on any rank: every rank stops after this step, checkpointed */
        if ((sig = p.step < c.steps ? any_signal(r) : 0) && o->ckdir) ck = 1;
        if (ck) checkpoint(r, &p, o);
    }
    if (sig && r->rank == 0)
        fprintf(stderr, "memsplit train: interrupted by %s after step %d of %d%s%s%s\n", ms_signal_name(sig), p.step,
                c.steps, o->ckdir ? "; its checkpoint is in " : " (no --checkpoint-dir: the steps are not kept)",
                o->ckdir ? o->ckdir : "", o->ckdir ? " (--resume continues from it)" : "");
    gather_recs(r, &p);
    if (r->rank == 0) print_summary(r, plan, &p, t_steady > 0 ? tok_steady / t_steady : 0, o->json);
    ms_pipe_close(&p);
    r->w->close_dist(&D);
    return sig ? ms_interrupt_status(sig) : MS_EXIT_OK;
}

int ms_run_rank_train(const ms_world *w, const ms_config *cfg, const ms_plan *plan, const ms_rank_opts *o)
{
    char err[1024];
    rank_run r;
    memset(&r, 0, sizeof r);
    r.w = w;
    r.rank = w->rank;
    r.size = w->size;
    snprintf(r.name, sizeof r.name, "%s", o->device);
    r.device = ms_plan_rank_device(plan, r.rank, &r.stage, &r.replica);
    r.ckdir = o->ckdir;
    r.names = calloc((size_t)r.size, sizeof *r.names);
    r.recs = calloc((size_t)r.size, sizeof *r.recs);
    r.losses = json_array();
    if (!r.names || !r.recs) die(&r, MS_EXIT_RUNTIME, "start", "out of host memory");
    int code = train(&r, o, cfg, plan);
    if (r.db) {
        if (ms_steplog_finish(r.steps, err, sizeof err)) {
            fprintf(stderr, "memsplit train: %s\n", err);
            r.db_failed++;
        }
        if (r.own_run)
            ms_run_recorded(ms_db_run_finish(r.db, r.run, code == MS_EXIT_OK ? "ok" : code > 128 ? "interrupted" : "failed"),
                            r.db, "train", "the run's end", &r.db_failed);
        ms_steplog_free(r.steps);
        ms_db_close(r.db);
        if (r.db_failed && code == MS_EXIT_OK) code = MS_EXIT_RUNTIME;
    }
    json_decref(r.losses);
    free(r.names);
    free(r.recs);
    return code;
}
