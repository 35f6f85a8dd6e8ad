/* doctor.c — `memsplit doctor` for the built-in model (doctor.h). */
#include "run/doctor.h"
#include "run/doctor_ranks.h"
#include "run/exit.h"
#include "run/interrupt.h"
#include "run/records.h"
#include "run/rerun.h"
#include "run/text.h"
#include "planner/explain.h"
#include "profiler/trial.h"
#include "reports/term_report.h"
#include "trainer/nvtx_ranges.h"
#include "vocab/plan_json.h"
#include "vocab/profile_json.h"
#include "vocab/size.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One doctor run, as it goes. */
typedef struct doctor_job {
    const ms_config *cfg;
    const ms_doctor_args *a;
    FILE *pg, *out;            /* progress (NULL: quiet); what it says */
    ms_db *db;
    int dbf;                   /* records the database refused */
    const char *model;
    char *ini;
    int64_t top, trial_run, plan_id;
    ms_trial_result tr;
    int trial_rc;              /* MS_OK fits, MS_EOOM ran out */
    ms_plan_opts po;
    ms_plan plan;
    ms_rerun_result rr;
    int code;
    int interrupted;           /* the signal that stopped it (run/interrupt.h), 0 none */
} doctor_job;

/* A signal since the last look: doctor stops here, between its parts
 * (the part in progress was finished and recorded). 1 when it does. */
static int stopped(doctor_job *j, const char *after)
{
    int sig = ms_interrupt_signal();
    if (!sig) return 0;
    j->interrupted = sig;
    j->code = ms_interrupt_status(sig);
    fprintf(stderr, "memsplit doctor: interrupted by %s after %s\n", ms_signal_name(sig), after);
    return 1;
}

/* The trial's profile as the terminal shows it: the diagnosis (or that it
 * fits), the full tables only when asked for. */
static void print_trial(FILE *out, const ms_profile *prof, int verbose, const char *db_path)
{
    if (verbose) {
        ms_term_report_profile(out, prof, 80);
        return;
    }
    char b1[32], b2[32];
    if (prof->oom.happened) ms_term_report_oom(out, prof, 80);
    else
        fprintf(out, "The trial fits: peak %s of %s on %s.\n", ms_term_bytes(prof->peak, b1, sizeof b1),
                ms_term_bytes(prof->capacity, b2, sizeof b2), prof->device);
    fprintf(out, "(per-layer tables: --verbose, or memsplit report --db %s)\n\n", db_path);
}

/* What a user does once memory is back: the model options of this run and
 * the checkpoint folder. */
static void print_resume_hint(FILE *f, const ms_doctor_args *a, const ms_config *cfg, const ms_rerun_result *rr)
{
    fprintf(f, "memsplit doctor: the last checkpoint, %s (step %d), is intact and belongs to this job; resume it with\n"
               "  memsplit train", rr->checkpoint, rr->checkpoint_step);
    if (a->ma->preset) fprintf(f, " --preset %s", a->ma->preset);
    if (a->ma->config) fprintf(f, " --config %s", a->ma->config);
    for (int i = 0; i < a->ma->n_sets; i++) fprintf(f, " --set %s", a->ma->sets[i]);
    if (a->ma->data) fprintf(f, " --data %s", a->ma->data);
    if (a->device) fprintf(f, " --device %s", a->device);
    fprintf(f, " --precision %s --checkpoint-dir %.*s --resume\n", ms_precision_name(cfg->precision),
            (int)(strrchr(rr->checkpoint, '/') ? strrchr(rr->checkpoint, '/') - rr->checkpoint : 1),
            strrchr(rr->checkpoint, '/') ? rr->checkpoint : ".");
    fprintf(f, "  (with --plan FILE from memsplit plan for the memory there is then)\n");
}

/* The database, the doctor's run and its trial's: 0, or the exit status (said). */
static int begin(doctor_job *j)
{
    const ms_doctor_args *a = j->a;
    char err[2048];
    j->db = ms_db_open(a->db_path, 1, err, sizeof err);
    if (!j->db) { fprintf(stderr, "memsplit doctor: %s\n", err); return MS_EXIT_RUNTIME; }
    ms_db_set_busy_timeout(j->db, a->db_timeout_ms);
    j->model = j->cfg->preset[0] ? j->cfg->preset : "custom";
    j->ini = ms_config_to_ini(j->cfg);
    j->top = ms_db_run_begin(j->db, "doctor", a->cmdline, j->ini, NULL, j->model, 0);
    j->trial_run = j->top > 0 ? ms_db_run_begin(j->db, "profile", a->cmdline, j->ini, NULL, j->model, j->top) : -1;
    if (j->top >= 0 && j->trial_run >= 0) return 0;
    fprintf(stderr, "memsplit doctor: %s\n", ms_db_errmsg(j->db));
    free(j->ini);
    ms_db_close(j->db);
    return MS_EXIT_RUNTIME;
}

/* 1. the trial, its records and its diagnosis: 0, or 1 when it failed (code set). */
static int trial(doctor_job *j)
{
    const ms_config *cfg = j->cfg;
    char b1[32];
    if (j->pg)
        fprintf(j->pg, "doctor: 1/3 trial of %s on %s (capacity %s)\n", j->model, cfg->device,
                ms_fmt_bytes(cfg->gpu_mem, b1, sizeof b1));
    ms_trial_opts to;
    memset(&to, 0, sizeof to);
    to.steps = 1;
    to.use_cupti = 1;
    to.precisions[0] = cfg->precision;
    to.n_prec = 1;
    for (int p = 0; p < 3; p++)
        if (p != (int)cfg->precision) to.precisions[to.n_prec++] = p;
    to.batches[0] = cfg->batch;
    to.n_batch = 1;
    if (cfg->batch > 1) to.batches[to.n_batch++] = cfg->batch / 2;
    to.progress = j->a->verbose ? j->pg : NULL;
    ms_db *db = j->db;
    j->trial_rc = ms_trial_run(cfg, &to, &j->tr);
    if (j->trial_rc == MS_EFAIL) {
        fprintf(stderr, "memsplit doctor: trial: %s\n", j->tr.err);
        ms_run_recorded(ms_db_run_finish(db, j->trial_run, "failed"), db, "doctor", "the trial's end", &j->dbf);
        j->code = MS_EXIT_RUNTIME;
        return 1;
    }
    ms_run_recorded(ms_db_add_mem_events(db, j->trial_run, j->tr.events, j->tr.n_events), db, "doctor",
                    "the trial's memory events", &j->dbf);
    ms_run_recorded(ms_db_add_rows(db, j->trial_run, &j->tr.prof), db, "doctor", "the profile", &j->dbf);
    ms_run_recorded(ms_db_run_finish(db, j->trial_run, j->trial_rc == MS_OK ? "ok" : "oom"), db, "doctor",
                    "the trial's end", &j->dbf);
    print_trial(j->out, &j->tr.prof, j->a->verbose, j->a->db_path);
    fflush(j->out);
    return 0;
}

/* The plan as the terminal shows it, and its records under a "plan" run. */
static void show_and_record_plan(doctor_job *j, int64_t plan_run)
{
    const ms_doctor_args *a = j->a;
    FILE *out = j->out;
    j->plan.profile_run = j->trial_run;
    ms_plan_print_table(out, &j->plan, &j->tr.prof, a->verbose);
    if (a->verbose && j->plan.reasoning) {
        fputc('\n', out);
        ms_print_wrapped(out, j->plan.reasoning, 80);
    } else if (j->plan.note[0]) {
        ms_print_wrapped(out, j->plan.note, 80);
    }
    if (!a->verbose) fprintf(out, "(the planner's reasoning: --verbose, or memsplit report --db %s)\n", a->db_path);
    fputc('\n', out);
    fflush(out);
    char *pjs = ms_plan_to_string(&j->plan);
    j->plan_id = pjs && plan_run > 0 ? ms_db_add_plan(j->db, plan_run, pjs, j->plan.step_ms, 1) : -1;
    free(pjs);
    ms_run_recorded(j->plan_id, j->db, "doctor", "the plan", &j->dbf);
    if (plan_run > 0) ms_run_recorded(ms_db_run_finish(j->db, plan_run, "ok"), j->db, "doctor", "the plan's end", &j->dbf);
}

/* 2. the plan: one device if it fits, else N. 0, or 1 when none (code set). */
static int plan(doctor_job *j)
{
    const ms_doctor_args *a = j->a;
    const ms_config *cfg = j->cfg;
    char err[2048];
    int fits = j->trial_rc == MS_OK;
    if (j->pg) fprintf(j->pg, "doctor: 2/3 %s\n", fits ? "the model fits: planning for one device"
                                                      : "it does not fit: planning over the devices given");
    ms_plan_opts_default(&j->po);
    if (a->headroom >= 0) j->po.headroom = a->headroom;
    j->po.replicas = a->replicas;
    j->po.zero = a->zero;
    j->tr.prof.global_batch = cfg->batch * cfg->accum;
    if (fits) a->caps[0] = cfg->gpu_mem;
    int prc = ms_doctor_make_plan(&j->tr.prof, cfg, a->caps, fits ? 1 : a->gpus, a->device, a->ma->precision != NULL,
                                  &j->po, &j->plan, j->pg, a->verbose, err, sizeof err);
    int64_t plan_run = ms_db_run_begin(j->db, "plan", NULL, NULL, NULL, j->model, j->top);
    ms_run_recorded(plan_run, j->db, "doctor", "the plan's run", &j->dbf);
    if (prc != MS_OK) {
        fprintf(stderr, "memsplit doctor: no plan: %s\n", err);
        if (plan_run > 0)
            ms_run_recorded(ms_db_run_finish(j->db, plan_run, "infeasible"), j->db, "doctor", "the plan's end", &j->dbf);
        j->code = prc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
        return 1;
    }
    show_and_record_plan(j, plan_run);
    return 0;
}

/* The rerun's options: each doctor run its own checkpoint folder, so that
 * two runs on one database never see each other's checkpoints (a foreign
 * one would be refused anyway). ckbase gets the folder the ranks' go under. */
static void rerun_opts(doctor_job *j, int64_t train_run, ms_rerun_opts *ro, char *ckbase, size_t baselen, char *ckbuf,
                       size_t buflen)
{
    const ms_doctor_args *a = j->a;
    const char *ckdir = a->ckdir;
    if (ckdir) {
        snprintf(ckbase, baselen, "%s", ckdir);
    } else {
        snprintf(ckbase, baselen, "%s.ckpt", a->db_path);
        mkdir(ckbase, 0777);
        snprintf(ckbuf, buflen, "%s/run-%lld", ckbase, (long long)j->top);
        ckdir = ckbuf;
    }
    ro->device = a->device ? a->device : (!strncmp(j->cfg->device, "cuda", 4) ? NULL : "cpu");
    ro->steps = j->cfg->steps;
    ro->ckpt_dir = ckdir; /* checkpoints every ckpt_every steps (0: none), and one when a signal stops it */
    ro->ckpt_every = a->ckpt_every;
    ro->prof = &j->tr.prof;
    ro->popts = j->po;
    ro->db = train_run > 0 ? j->db : NULL;
    ro->run = train_run;
    ro->plan_id = j->plan_id > 0 ? j->plan_id : 0;
    ro->db_timeout_ms = a->db_timeout_ms;
    ro->progress = j->pg;
    ro->log_every = a->verbose ? 1 : 0;
}

/* 3. training with the plan, here or as MPI ranks, and how it ended. */
static void train(doctor_job *j)
{
    const ms_doctor_args *a = j->a;
    const ms_config *cfg = j->cfg;
    char err[2048], ckbuf[1200], ckbase[1100];
    ms_rerun_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.inject = a->inject;
    if (ms_rerun_check(cfg, &j->plan, &ro, err, sizeof err)) {
        fprintf(stderr, "memsplit doctor: %s\n", err);
        j->code = MS_EXIT_USAGE;
        return;
    }
    if (j->pg) fprintf(j->pg, "doctor: 3/3 training %d steps with the plan\n", cfg->steps);
    int64_t train_run = ms_db_run_begin(j->db, "train", NULL, j->ini, NULL, j->model, j->top);
    ms_run_recorded(train_run, j->db, "doctor", "the training run", &j->dbf);
    rerun_opts(j, train_run, &ro, ckbase, sizeof ckbase, ckbuf, sizeof ckbuf);
    int rc;
    if (a->launch) {
        /* the ranks' checkpoints go to <folder>/run-<train run> (doctor_ranks.h) */
        ms_doctor_ranks_opts dr = { a->launch, a->ma, a->device, a->db_path, ro.db, train_run, ckbase, a->ckpt_every,
                                    a->kill, &j->tr.prof, j->po, a->quiet, j->pg, a->db_timeout_ms };
        rc = ms_doctor_ranks(cfg, &j->plan, &dr, ro.plan_id, &j->rr);
    } else {
        rc = ms_rerun(cfg, &j->plan, &ro, &j->rr);
    }
    ms_rerun_result *rr = &j->rr;
    j->dbf += rr->db_failed;
    const char *status = rr->interrupted ? "interrupted" : rc == MS_OK ? "ok" : rc == MS_EOOM ? "oom" : "failed";
    if (train_run > 0)
        ms_run_recorded(ms_db_run_finish(j->db, train_run, status), j->db, "doctor", "the training's end", &j->dbf);
    if (rr->interrupted) {
        /* a signal stopped the training after a finished step, whose checkpoint it wrote */
        j->interrupted = rr->interrupted;
        j->code = rc == MS_OK ? ms_interrupt_status(rr->interrupted) : MS_EXIT_RUNTIME;
        fprintf(stderr, "memsplit doctor: training interrupted by %s after step %d of %d%s%s\n",
                ms_signal_name(rr->interrupted), rr->steps, cfg->steps, rc == MS_OK ? "" : ": ",
                rc == MS_OK ? "" : rr->err);
        if (rr->checkpoint[0]) print_resume_hint(stderr, a, cfg, rr);
        return;
    }
    if (rc != MS_OK) {
        fprintf(stderr, "memsplit doctor: training: %s\n", rr->err);
        j->code = rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
        char note[1200];
        snprintf(note, sizeof note, "training: %s", rr->err);
        ms_run_recorded(ms_db_run_note(j->db, j->top, note), j->db, "doctor", "the training's failure", &j->dbf);
        if ((rr->oom_unrecovered || a->launch) && rr->checkpoint[0]) print_resume_hint(stderr, a, cfg, rr);
    } else {
        ms_rerun_print_devices(j->out, rr);
        fprintf(j->out, "trained %d steps: loss %.4f -> %.4f, %.0f tokens/s, %d recover%s\n", rr->steps,
                rr->loss_first, rr->loss_last, rr->tokens_per_s, rr->recoveries, rr->recoveries == 1 ? "y" : "ies");
    }
}

int ms_run_doctor(const ms_config *cfg, const ms_doctor_args *a, json_t **summary)
{
    *summary = NULL;
    char err[2048];
    doctor_job j;
    memset(&j, 0, sizeof j);
    j.cfg = cfg;
    j.a = a;
    j.pg = a->quiet ? NULL : stderr;
    j.out = a->json ? stderr : stdout;
    if (!strncmp(cfg->device, "cuda", 4)) ms_nvtx_prepare(err, sizeof err);
    int code = begin(&j);
    if (code) return code;
    json_t *jout = json_object();
    if (!stopped(&j, "its start") && !trial(&j)) {
        json_t *tj = ms_profile_to_json(&j.tr.prof);
        if (tj) json_object_set_new(jout, "trial", tj);
        if (!stopped(&j, "the trial") && !plan(&j) && !stopped(&j, "the plan")) train(&j);
    }
    if (j.plan.n_stages) {
        json_t *pj = ms_plan_to_json(&j.plan);
        if (pj) json_object_set_new(jout, "plan", pj);
    }
    if (j.rr.losses) json_object_set_new(jout, "train", ms_rerun_result_json(&j.rr));
    code = j.code;
    const char *status = j.interrupted ? "interrupted" : code == MS_EXIT_OK ? "ok" : code == MS_EXIT_OOM ? "oom" : "failed";
    if (j.interrupted) json_object_set_new(jout, "interrupted", json_string(ms_signal_name(j.interrupted)));
    ms_run_recorded(ms_db_run_finish(j.db, j.top, status), j.db, "doctor", "the run's end", &j.dbf);
    if (j.dbf && code == MS_EXIT_OK) code = MS_EXIT_RUNTIME;
    if (a->json) *summary = json_incref(jout);
    json_decref(jout);
    ms_rerun_result_free(&j.rr);
    ms_plan_free(&j.plan);
    ms_trial_free(&j.tr);
    free(j.ini);
    ms_db_close(j.db);
    return code;
}
