/* train_plan.c — `memsplit train --plan FILE` (train_plan.h). */
#include "run/train_plan.h"
#include "run/exit.h"
#include "run/interrupt.h"
#include "run/records.h"
#include "run/rerun.h"
#include "vocab/plan_json.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The plan, checked against the model and the launch: 0, or the exit status (said). */
static int load_plan(const ms_config *cfg, const ms_train_plan_args *a, ms_plan *plan, ms_rerun_opts *ro)
{
    char err[1024];
    if (ms_plan_load_json(a->plan_path, plan, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s\n", err); /* the message names the file */
        return MS_EXIT_USAGE;
    }
    if (plan->replicas > 1) {
        fprintf(stderr, "memsplit train: %s has %d replicas of its %d-stage pipeline, and one process runs one "
                "pipeline: run it as mpirun -np %d memsplit train --plan %s ...\n", a->plan_path, plan->replicas,
                plan->n_stages, plan->replicas * plan->n_stages, a->plan_path);
        return MS_EXIT_USAGE;
    }
    ro->inject = a->inject;
    ms_config c = *cfg;
    c.precision = (ms_precision)plan->precision;
    if (ms_rerun_check(&c, plan, ro, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s: %s\n", a->plan_path, err);
        return MS_EXIT_USAGE;
    }
    return 0;
}

/* The database and the run the steps go to, and the plan's profile for a
 * recovery when the database has it: 0, or the exit status (said). */
static int open_records(const ms_config *cfg, const ms_train_plan_args *a, const ms_plan *plan, ms_db **db,
                        ms_profile *prof, ms_rerun_opts *ro)
{
    char err[1024];
    *db = ms_db_open(a->db_path, 1, err, sizeof err);
    if (!*db) { fprintf(stderr, "memsplit train: %s\n", err); return MS_EXIT_RUNTIME; }
    ms_db_set_busy_timeout(*db, a->db_timeout_ms);
    if (plan->profile_run > 0 && ms_db_load_profile(*db, plan->profile_run, prof, err, sizeof err) == 0) ro->prof = prof;
    char *ini = ms_config_to_ini(cfg);
    ro->run = ms_db_run_begin(*db, "train", "memsplit train --plan", ini, NULL, cfg->preset, 0);
    free(ini);
    if (ro->run < 0) {
        fprintf(stderr, "memsplit train: %s\n", ms_db_errmsg(*db));
        ms_db_close(*db);
        *db = NULL;
        return MS_EXIT_RUNTIME;
    }
    ro->db = *db;
    return 0;
}

/* A re-plan after an OOM keeps what the plan was made with (its headroom
 * and link speed; rerun.c keeps its precision and global batch) and opens
 * the rest, as the doctor's does. */
static void rerun_opts(const ms_config *cfg, const ms_train_plan_args *a, const ms_plan *plan, ms_rerun_opts *ro)
{
    ms_plan_opts_default(&ro->popts);
    ro->popts.headroom = plan->headroom;
    ro->popts.link_gbps = plan->link_gbps;
    ro->device = a->device;
    ro->steps = cfg->steps;
    ro->ckpt_dir = a->ckdir;
    ro->ckpt_every = a->ckevery > 0 ? a->ckevery : INT_MAX; /* checkpoint.every = 0: only at the end */
    ro->resume = a->resume;
    ro->db_timeout_ms = a->db_timeout_ms;
    ro->progress = a->quiet ? NULL : stderr;
    ro->log_every = cfg->log_every;
}

int ms_run_train_plan(const ms_config *cfg, const ms_train_plan_args *a, json_t **summary)
{
    *summary = NULL;
    ms_plan plan;
    memset(&plan, 0, sizeof plan);
    ms_profile prof;
    memset(&prof, 0, sizeof prof);
    ms_rerun_opts ro;
    memset(&ro, 0, sizeof ro);
    ms_db *db = NULL;
    int code = load_plan(cfg, a, &plan, &ro);
    if (!code && a->db_path) code = open_records(cfg, a, &plan, &db, &prof, &ro);
    if (code) {
        ms_profile_free(&prof);
        ms_plan_free(&plan);
        return code;
    }
    rerun_opts(cfg, a, &plan, &ro);
    ms_rerun_result rr;
    int rc = ms_rerun(cfg, &plan, &ro, &rr);
    code = rc == MS_OK ? MS_EXIT_OK : rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
    if (rc != MS_OK) fprintf(stderr, "memsplit train: %s\n", rr.err);
    else if (!a->quiet) ms_rerun_print_devices(stderr, &rr);
    const char *status = rc == MS_OK ? "ok" : rc == MS_EOOM ? "oom" : "failed";
    if (rr.interrupted) { /* a signal stopped it between steps (run/interrupt.h) */
        status = "interrupted";
        if (rc == MS_OK) code = ms_interrupt_status(rr.interrupted);
        fprintf(stderr, "memsplit train: interrupted by %s after step %d of %d; %s%s%s\n",
                ms_signal_name(rr.interrupted), rr.steps, cfg->steps,
                rr.checkpoint[0] ? "its checkpoint is " : "no checkpoint folder (--checkpoint-dir): the steps are not kept",
                rr.checkpoint, rr.checkpoint[0] ? " (--resume continues from it)" : "");
    }
    if (db) {
        int dbf = rr.db_failed;
        ms_run_recorded(ms_db_run_finish(db, ro.run, status), db, "train", "the run's end", &dbf);
        ms_db_close(db);
        if (dbf && code == MS_EXIT_OK) code = MS_EXIT_RUNTIME;
    }
    if (a->json) {
        *summary = ms_rerun_result_json(&rr);
        json_t *pj = ms_plan_to_json(&plan); /* the plan it ended with (a recovery's, after an OOM) */
        if (pj) json_object_set_new(*summary, "plan", pj);
    }
    ms_rerun_result_free(&rr);
    ms_profile_free(&prof);
    ms_plan_free(&plan);
    return code;
}
