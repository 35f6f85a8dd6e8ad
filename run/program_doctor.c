/* program_doctor.c — the whole loop for a user's own program (program.h):
 * the trial under the emulated capacity and its diagnosis, a plan over N
 * devices, the program rerun with the plan applied, measured against
 * predicted per device, and after an OOM in the rerun a new plan that keeps
 * more free (or counts what the OOM taught) and a restart, all recorded
 * under one doctor run. */
#include "run/program.h"
#include "run/exit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/host/launch.h"
#include "bridge/record.h"
#include "bridge/trace.h"
#include "planner/explain.h"
#include "reports/db.h"
#include "vocab/plan_json.h"
#include "vocab/size.h"

#define MAX_RESTARTS 3

/* What the runs' torch.save / torch.load said about resuming. */
typedef struct ckpt_seen {
    int saves, restarts, loads_on_restart;
    char last_save[512], load[512];
    int last_save_step;        /* the program's steps finished at its last save */
    int resumed_at;            /* the step the last restart resumed after (-1: none) */
    int done_before;           /* steps the run before the last restart had finished */
    int done;                  /* steps finished so far, by the program's count */
} ckpt_seen;

static void note_run(ckpt_seen *k, const ms_program_run *run, int restart)
{
    const msb_trace *t = &run->trace;
    if (restart) {
        k->restarts++;
        k->done_before = k->done;
        if (t->n_loads) {
            k->loads_on_restart++;
            snprintf(k->load, sizeof k->load, "%s", t->first_load);
        }
        k->resumed_at = run->step_base ? run->step_base : -1;
    }
    if (t->n_saves) {
        k->saves += t->n_saves;
        snprintf(k->last_save, sizeof k->last_save, "%s", t->last_save);
        k->last_save_step = run->step_base + t->last_save_step;
    }
    k->done = run->step_base + run->steps;
}

static void say_checkpoints(FILE *f, const ckpt_seen *k)
{
    if (!k->saves)
        fprintf(f, "checkpoints: none saved (torch.save)%s\n",
                k->restarts ? ": each restart began again from its first step\n  (its step rows replaced, not doubled)"
                            : ": a restart would begin at the first step");
    else if (k->restarts && k->loads_on_restart == k->restarts && k->resumed_at > 0) {
        fprintf(f, "checkpoints: the program saves them (last %s) and loaded %s on the restart, saved after step "
                   "%d: it resumed there, no finished step lost", k->last_save, k->load, k->resumed_at);
        if (k->done_before > k->resumed_at)
            fprintf(f, "; steps %d-%d ran again (their rows are in both runs, the later ones count)",
                    k->resumed_at + 1, k->done_before);
        fprintf(f, "\n");
    }
    else if (k->restarts && k->loads_on_restart == k->restarts)
        fprintf(f, "checkpoints: the program saves them (last %s) and loaded %s on the restart, not one its last "
                   "run saved: the steps it resumed from are its own\n", k->last_save, k->load);
    else
        fprintf(f, "checkpoints: the program saves them (last %s)%s\n", k->last_save,
                k->restarts ? " but loaded none on a restart: it began again from its first step"
                            : "; a restart resumes only if the program loads them");
}

/* What an OOM in the rerun teaches: the stage needed at least `need`
 * bytes where the plan said its peak was less. On the root stage the excess
 * is the program's own (what it keeps on its device from step to step, as
 * a buffer it makes at a later step): it goes with the root stage wherever
 * the next plan puts it (held on layer 0 throughout the record, or the
 * loss row's carry under the stage rules); on another stage the device it ran on
 * has that much less for the plan. learned says which, for the reason. */
static void learn_from_oom(ms_profile *prof, const ms_plan *pl, const ms_program_run *run, ms_plan_device *devs,
                           int n_devs, char *learned, size_t len)
{
    int s = run->oom_stage;
    /* the ledger's count leaves out the reserve, which the plan's peak has */
    uint64_t need = run->oom_need ? run->oom_need + prof->reserve : 0;
    if (s < 0 || s >= pl->n_stages || !need) return;
    /* against what the model has the stage hold at that moment (the OOM's
     * layer and phase), else at its peak */
    uint64_t expected = pl->stages[s].peak, at = 0;
    const msb_trace *t = &run->trace;
    if (t->oom.happened && ms_plan_stage_live_at(prof, pl, s, t->oom.layer, t->oom.phase, &at) == 0) expected = at;
    if (need <= expected) return;
    uint64_t excess = need - expected;
    char b[32];
    if (pl->stages[s].first == 0 && (prof->record || prof->loss.present)) {
        /* the root stage goes where the next plan puts it, and these bytes with it */
        if (prof->record) {
            if (msb_record_hold(prof->record, 0, MS_CAT_ACT, excess) != 0) return;
        } else {
            prof->loss.carry += excess;
            prof->loss.carry_loss += excess;
        }
        snprintf(learned, len, "%s above what the plan had it hold there; re-planned with them counted as the "
                 "program's own on the root stage", ms_fmt_bytes(excess, b, sizeof b));
        return;
    }
    int d = pl->stages[s].device;
    if (d < 0 || d >= n_devs || devs[d].capacity <= excess) return;
    devs[d].capacity -= excess;
    snprintf(learned, len, "%s above what the plan had it hold there; re-planned with them kept free on %s",
             ms_fmt_bytes(excess, b, sizeof b), devs[d].name);
}

/* One doctor run, as it goes. */
typedef struct doctor_job {
    const ms_program_doctor_args *a;
    ms_db *db;
    int64_t doc;               /* the doctor's run */
    FILE *out;                 /* what it says: stdout, stderr with --json */
    json_t *result, *recoveries;
    ms_program_trial *tr;
    ms_program_run *run;
    ms_plan plan;
    ms_plan_device devs[MS_MAX_STAGES];   /* the devices, less what an OOM taught */
    ckpt_seen seen;
    double headroom;
    int code;
    const char *status;        /* the doctor run's end, when not ok */
} doctor_job;

/* The plan for this attempt, said: 0, or 1 when the loop stops (code, status set). */
static int make_plan(doctor_job *j, int attempt)
{
    char err[1536];
    ms_program_trial *tr = j->tr;
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    o.headroom = j->headroom;
    if (ms_program_plan_opts(&tr->prof, &o, err, sizeof err)) {
        fprintf(stderr, "memsplit doctor: %s\n", err);
        j->code = MS_EXIT_USAGE;
        return 1;
    }
    ms_plan_free(&j->plan);
    /* the plan `memsplit plan` makes from this profile: among plans about
     * as fast, the same fixed order (ms_plan_choose) */
    int found = ms_plan_choose(&tr->prof, j->devs, j->a->gpus, &o, &j->plan, err, sizeof err);
    if (found == MS_PLAN_ERROR) {
        fprintf(stderr, "memsplit doctor: %s\n", err);
        j->code = MS_EXIT_USAGE;
        return 1;
    }
    if (found == MS_PLAN_INFEASIBLE) {
        ms_infeasible inf;
        if (ms_plan_explain_infeasible(&tr->prof, j->devs, j->a->gpus, &o, &inf, err, sizeof err) == 0)
            fprintf(stderr, "memsplit doctor: %s\n", inf.text);
        j->code = MS_EXIT_OOM;
        j->status = "infeasible";
        return 1;
    }
    j->plan.profile_run = tr->run;
    if (ms_plan_attach_program(&j->plan, &tr->prof) || ms_plan_explain(&tr->prof, &j->plan)) {
        j->code = MS_EXIT_RUNTIME;
        return 1;
    }
    fprintf(j->out, "doctor: plan %d: %d stage%s, predicted %.1f ms/step\n", attempt + 1, j->plan.n_stages,
            j->plan.n_stages > 1 ? "s" : "", j->plan.step_ms);
    ms_program_placement(j->out, &j->plan);
    json_object_set_new(j->result, "plan", ms_plan_to_json(&j->plan));
    return 0;
}

/* The program rerun with the plan, said: 0 when it ran out of memory (a
 * restart may follow), 1 when the loop stops (code, status set). */
static int rerun(doctor_job *j, int attempt)
{
    const ms_program_doctor_args *a = j->a;
    ms_program_run *run = j->run;
    char err[1536];
    msb_trace_free(&run->trace);
    ms_program_resume from = { j->seen.saves ? j->seen.last_save : NULL, j->seen.last_save_step };
    ms_program_train_args ta = { .plan = &j->plan, .prog = a->prog, .steps = a->train_steps, .json = a->json,
                                 .quiet = a->quiet, .db = j->db, .parent = j->doc, .resume = &from };
    if (ms_program_train(&ta, run, err, sizeof err) != 0) {
        fprintf(stderr, "memsplit doctor: %s\n", err);
        j->code = MS_EXIT_RUNTIME;
        return 1;
    }
    const msb_trace *now = &run->trace;
    note_run(&j->seen, run, attempt > 0);
    if (run->ex.interrupted) {
        char how[96];
        fprintf(stderr, "memsplit doctor: the program was interrupted (%s) after %d step%s\n",
                msb_exit_text(&run->ex, how, sizeof how), run->steps, run->steps == 1 ? "" : "s");
        j->code = MS_EXIT_STOPPED(run->ex.stop_signal);
        j->status = "interrupted";
        return 1;
    }
    if (run->failure[0]) {
        fprintf(stderr, "memsplit doctor: %s\n", run->failure);
        j->code = run->refused ? MS_EXIT_USAGE : MS_EXIT_RUNTIME;
        return 1;
    }
    fprintf(j->out, "doctor: trained %d step%s; measured peak per device against the plan:\n", run->steps,
            run->steps == 1 ? "" : "s");
    ms_program_print_devices(j->out, run);
    json_object_set_new(j->result, "train", ms_program_run_json(run));
    if (run->oom) return 0;
    say_checkpoints(j->out, &j->seen);
    if (run->ex.signaled || (run->ex.status && strcmp(now->done_reason, "steps"))) {
        char how[96];
        fprintf(stderr, "memsplit doctor: the program failed (%s)%s%s\n", msb_exit_text(&run->ex, how, sizeof how),
                now->done_exc[0] ? ": " : "", now->done_exc);
        j->code = MS_EXIT_RUNTIME;
        j->status = "failed";
    } else {
        j->code = MS_EXIT_OK;
        j->status = "ok";
    }
    return 1;
}

/* An OOM in the rerun: what it taught goes into the model; only when it
 * taught nothing (the stage's count was below its peak: fragmentation,
 * memory outside the count) does the next plan keep more free on every
 * device. 0 to restart, 1 when the loop stops (code, status set). */
static int restart(doctor_job *j, int attempt)
{
    ms_program_run *run = j->run;
    fprintf(j->out, "doctor: OUT OF MEMORY on stage %d (%s) in %s\n", run->oom_stage,
            run->oom_stage >= 0 ? run->dev[run->oom_stage].name : "?", run->oom_what);
    if (attempt + 1 >= MAX_RESTARTS) {
        fprintf(stderr, "memsplit doctor: still out of memory after %d plans; the last one is run %lld's\n",
                attempt + 1, (long long)run->run_id);
        j->code = MS_EXIT_OOM;
        j->status = "oom";
        return 1;
    }
    char reason[400], learned[200] = "";
    learn_from_oom(&j->tr->prof, &j->plan, run, j->devs, j->a->gpus, learned, sizeof learned);
    double next = j->headroom;
    if (!learned[0]) next = j->headroom + 0.5 * (1.0 - j->headroom) * 0.2 + 0.05;
    if (next > 0.9) next = 0.9;
    const char *oom_dev = run->oom_stage >= 0 ? run->dev[run->oom_stage].name : "?";
    if (learned[0])
        snprintf(reason, sizeof reason, "oom on %s (stage %d): %s", oom_dev, run->oom_stage, learned);
    else
        snprintf(reason, sizeof reason, "oom on %s (stage %d): re-planned with headroom %.0f%% (was %.0f%%)", oom_dev,
                 run->oom_stage, 100 * next, 100 * j->headroom);
    fprintf(j->out, "doctor: %s, restarting the program\n", reason);
    ms_recovery_rec rr = { .step = run->steps + 1, .resumed_step = -1 };
    snprintf(rr.reason, sizeof rr.reason, "%s", reason);
    if (ms_db_add_recovery(j->db, j->doc, &rr) < 0) {
        fprintf(stderr, "memsplit doctor: recording the recovery: %s\n", ms_db_errmsg(j->db));
        j->code = MS_EXIT_RUNTIME;
        return 1;
    }
    json_array_append_new(j->recoveries, json_pack("{s:i, s:s, s:f}", "stage", run->oom_stage, "reason", reason,
                                                   "headroom", next));
    j->headroom = next;
    return 0;
}

/* memsplit was asked to stop (a signal between the program's runs): 1,
 * the loop ends interrupted; else 0. */
static int stop_asked(doctor_job *j)
{
    int sig = msb_stop_signal();
    if (!sig) return 0;
    fprintf(stderr, "memsplit doctor: stopped (%s)\n", strsignal(sig));
    j->code = MS_EXIT_STOPPED(sig);
    j->status = "interrupted";
    return 1;
}

/* 1. the trial; 2. plan, 3. rerun, with restarts after an OOM. */
static void doctor(doctor_job *j)
{
    const ms_program_doctor_args *a = j->a;
    char b[32];
    ms_program_trial_args ta = { .prog = a->prog, .capacity = a->cap, .steps = a->steps, .layers = a->layers,
                                 .second = 1, .record_pass = 1, .json = a->json, .quiet = a->quiet, .brief = 1,
                                 .db = j->db,
                                 .parent = j->doc, .cmdline = a->cmdline, .who = "doctor" };
    j->code = j->tr && j->run ? ms_program_run_trial(&ta, j->tr) : MS_EXIT_RUNTIME;
    if (j->tr) json_object_set_new(j->result, "trial", ms_program_trial_json(j->tr));
    if (j->tr && j->tr->status && !strcmp(j->tr->status, "interrupted")) {   /* the trial's own exit status */
        j->status = "interrupted";
        return;
    }
    if (stop_asked(j)) return;
    if (j->code == MS_EXIT_OK && j->tr->have_prof)
        fprintf(j->out, "doctor: the program fits one device of %s; splitting it anyway as asked\n",
                ms_fmt_bytes(a->cap, b, sizeof b));
    if (j->code != MS_EXIT_OK && j->code != MS_EXIT_OOM) return;
    j->headroom = a->headroom;
    j->recoveries = json_array();
    json_object_set_new(j->result, "recoveries", j->recoveries);
    for (int attempt = 0;; attempt++)
        if (stop_asked(j) || make_plan(j, attempt) || stop_asked(j) || rerun(j, attempt) || restart(j, attempt))
            return;
}

int ms_run_doctor_program(const ms_program_doctor_args *a, json_t **summary)
{
    *summary = NULL;
    msb_stop_catch();          /* a stop signal ends the program and the loop, recorded interrupted */
    char err[1536], name[128];
    ms_db *db = ms_db_open(a->db_path, 1, err, sizeof err);
    if (!db) {
        fprintf(stderr, "memsplit doctor: %s\n", err);
        return MS_EXIT_RUNTIME;
    }
    ms_program_name(a->prog, name, sizeof name);
    char *cmd = msb_utf8_dup(a->cmdline ? a->cmdline : "");   /* argv may hold any bytes */
    int64_t doc = cmd ? ms_db_run_begin(db, "doctor", cmd, NULL, NULL, name, 0) : -1;
    free(cmd);
    if (doc < 0) {
        fprintf(stderr, "memsplit doctor: %s\n", ms_db_errmsg(db));
        ms_db_close(db);
        return MS_EXIT_RUNTIME;
    }
    doctor_job j = { .a = a, .db = db, .doc = doc, .out = a->json ? stderr : stdout, .result = json_object(),
                     .tr = calloc(1, sizeof *j.tr), .run = calloc(1, sizeof *j.run), .status = "failed" };
    memcpy(j.devs, a->devs, (size_t)a->gpus * sizeof *j.devs);
    doctor(&j);
    int code = j.code;
    if (ms_db_run_finish(db, doc, code == MS_EXIT_OK ? "ok" : j.status) != 0) {
        fprintf(stderr, "memsplit doctor: recording the run: %s\n", ms_db_errmsg(db));
        code = MS_EXIT_RUNTIME;
    }
    if (!a->quiet) fprintf(stderr, "doctor: recorded as run %lld in %s\n", (long long)doc, a->db_path);
    if (a->json) *summary = json_incref(j.result);
    json_decref(j.result);
    ms_plan_free(&j.plan);
    if (j.run) msb_trace_free(&j.run->trace);
    free(j.run);
    if (j.tr) ms_program_trial_free(j.tr);
    free(j.tr);
    ms_db_close(db);
    return code;
}
