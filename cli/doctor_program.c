/* doctor_program.c — `memsplit doctor [options] -- PROGRAM [ARGS...]`: the
 * whole loop for a user's own program: the trial under the emulated
 * capacity and its diagnosis, a plan over N devices, the program rerun with
 * the plan applied, measured against predicted per device, and after an OOM
 * in the rerun a new plan that keeps more free and a restart. Recorded in
 * the run database under one doctor run. */
#include "cli/program.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"
#include "planner/explain.h"
#include "vocab/plan_json.h"
#include "reports/db.h"
#include "trainer/device.h"
#include "vocab/device_name.h"
#include "vocab/errf.h"
#include "vocab/profile_json.h"
#include "vocab/size.h"

#define MAX_RESTARTS 3

static const char usage[] =
    "usage: memsplit doctor --gpus N --gpu-mem SIZE [options] -- PROGRAM [ARGS...]\n"
    "\n"
    "The whole loop for your own PyTorch program: a trial on one device of SIZE\n"
    "(where it runs out and why), a plan that splits its modules over N devices of\n"
    "SIZE, the program rerun with the plan applied (each device's measured peak\n"
    "beside its prediction) and, if the rerun runs out of memory, a new plan that\n"
    "keeps more free and a restart. The program's precision, batch and\n"
    "checkpointing stay its own. Devices: N real GPUs when the machine has them,\n"
    "else N stages on cuda:0 (or on cpu), each held to SIZE.\n"
    "\n"
    "Options:\n"
    "  --gpus N          devices to split over (required)\n"
    "  --gpu-mem SIZE    the capacity of each, the trial's too (required)\n"
    "  --devices LIST    the devices, e.g. cuda:0,cuda:1 or cpu,cpu (default: as above)\n"
    "  --steps N         optimizer steps of the trial (default 2)\n"
    "  --train-steps N   stop the rerun after N steps (default: the program runs to its end)\n"
    "  --headroom F      fraction of each device the plan keeps free (default 0.05)\n"
    "  --layers PATH     the module whose children are the blocks (as in profile)\n"
    "  --db FILE         record everything here (default: memsplit.db)\n"
    "  --json            print one JSON object on stdout (trial, plan, train)\n"
    "  --quiet           no progress lines\n"
    "  -h, --help        this text\n"
    "\n"
    "Exit status: 0 trained with the plan; 3 no plan fits (or every restart ran out);\n"
    "1 usage error; 2 the program failed.\n";

typedef struct doctor_args {
    int gpus;
    size_t cap;
    const char *devices, *layers, *db_path;
    long steps, train_steps;
    double headroom;
    int json, quiet;
} doctor_args;

static int parse_long_arg(const char *name, const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "memsplit doctor: --%s takes a whole number from %ld to %ld, got '%s'\n", name, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* The plan's devices: --devices, else N GPUs when there are N, else N
 * stages on cuda:0 (one GPU) or on cpu. */
static int build_devices(const doctor_args *a, ms_plan_device *devs, char *err, size_t errlen)
{
    if (a->devices) {
        int n = 0;
        const char *p = a->devices;
        while (*p) {
            size_t k = strcspn(p, ",");
            if (!k || k >= sizeof devs[0].name || n == a->gpus)
                return ms_errf(err, errlen, "--devices %s: expected %d device names separated by commas", a->devices,
                               a->gpus);
            snprintf(devs[n].name, sizeof devs[n].name, "%.*s", (int)k, p);
            if (!ms_device_name_valid(devs[n].name))
                return ms_errf(err, errlen, "--devices: '%s' is not cpu or cuda:N", devs[n].name);
            devs[n++].capacity = a->cap;
            p += k + (p[k] == ',');
        }
        if (n != a->gpus) return ms_errf(err, errlen, "--devices names %d devices, --gpus says %d", n, a->gpus);
        return 0;
    }
    int have = ms_cuda_gpu_count();
    for (int i = 0; i < a->gpus; i++) {
        if (have >= a->gpus) snprintf(devs[i].name, sizeof devs[i].name, "cuda:%d", i);
        else snprintf(devs[i].name, sizeof devs[i].name, "%s", have > 0 ? "cuda:0" : "cpu");
        devs[i].capacity = a->cap;
    }
    return 0;
}

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
        fprintf(f, "checkpoints: the program saved none with torch.save%s\n",
                k->restarts ? ": each restart began again from its first step (its step rows replaced, not doubled)"
                            : "; a restart would begin again from its first step");
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
 * a buffer it makes at a later step): it goes with the loss row's carry,
 * wherever the root stage goes next; on another stage the device it ran on
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
    if (pl->stages[s].first == 0 && prof->loss.present) {
        prof->loss.carry += excess;
        prof->loss.carry_loss += excess;
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

int ms_cmd_doctor_program(int argc, char **argv)
{
    enum { O_GPUS = 1000, O_MEM, O_DEVICES, O_STEPS, O_TSTEPS, O_HEAD, O_LAYERS, O_DB, O_JSON, O_QUIET };
    static const struct option opts[] = {
        { "gpus", required_argument, 0, O_GPUS }, { "gpu-mem", required_argument, 0, O_MEM },
        { "devices", required_argument, 0, O_DEVICES }, { "steps", required_argument, 0, O_STEPS },
        { "train-steps", required_argument, 0, O_TSTEPS }, { "headroom", required_argument, 0, O_HEAD },
        { "layers", required_argument, 0, O_LAYERS }, { "db", required_argument, 0, O_DB },
        { "json", no_argument, 0, O_JSON }, { "quiet", no_argument, 0, O_QUIET }, { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 },
    };
    doctor_args a = { .steps = 2, .headroom = MS_PLAN_DEFAULT_HEADROOM, .db_path = "memsplit.db" };
    int dd = 1, c, idx = 0;
    while (dd < argc && strcmp(argv[dd], "--")) dd++;
    char err[1536];
    long v;
    optind = 1;
    while ((c = getopt_long(dd, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case O_GPUS:
            if (parse_long_arg("gpus", optarg, 1, MS_MAX_STAGES, &v)) return MS_EXIT_USAGE;
            a.gpus = (int)v;
            break;
        case O_MEM:
            if (ms_parse_size(optarg, &a.cap, err, sizeof err) || !a.cap) {
                fprintf(stderr, "memsplit doctor: --gpu-mem: %s\n", a.cap ? err : "must be above 0");
                return MS_EXIT_USAGE;
            }
            break;
        case O_DEVICES: a.devices = optarg; break;
        case O_STEPS:
            if (parse_long_arg("steps", optarg, 1, 1000000, &a.steps)) return MS_EXIT_USAGE;
            break;
        case O_TSTEPS:
            if (parse_long_arg("train-steps", optarg, 1, 100000000, &a.train_steps)) return MS_EXIT_USAGE;
            break;
        case O_HEAD:
            if (ms_arg_fraction("--headroom", optarg, &a.headroom, err, sizeof err)) {
                fprintf(stderr, "memsplit doctor: %s\n", err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_LAYERS: a.layers = optarg; break;
        case O_DB: a.db_path = optarg; break;
        case O_JSON: a.json = 1; break;
        case O_QUIET: a.quiet = 1; break;
        case 'h': fputs(usage, stdout); return MS_EXIT_OK;
        default: fprintf(stderr, "memsplit doctor: see --help\n"); return MS_EXIT_USAGE;
        }
    }
    if (optind < dd) {
        fprintf(stderr, "memsplit doctor: unexpected argument '%s' before --\n", argv[optind]);
        return MS_EXIT_USAGE;
    }
    if (!a.gpus || !a.cap) {
        fprintf(stderr, "memsplit doctor: a program needs --gpus N and --gpu-mem SIZE\n");
        return MS_EXIT_USAGE;
    }
    if (dd + 1 >= argc) {
        fprintf(stderr, "memsplit doctor: no program after --\n");
        return MS_EXIT_USAGE;
    }
    char *const *prog = argv + dd + 1;
    ms_plan_device devs[MS_MAX_STAGES];
    if (build_devices(&a, devs, err, sizeof err)) {
        fprintf(stderr, "memsplit doctor: %s\n", err);
        return MS_EXIT_USAGE;
    }
    ms_db *db = ms_db_open(a.db_path, 1, err, sizeof err);
    if (!db) {
        fprintf(stderr, "memsplit doctor: %s\n", err);
        return MS_EXIT_RUNTIME;
    }
    char *cmdline = ms_cli_cmdline(argc, argv);
    char name[128];
    ms_program_name(prog, name, sizeof name);
    int64_t doc = ms_db_run_begin(db, "doctor", cmdline, NULL, NULL, name, 0);
    if (doc < 0) {
        fprintf(stderr, "memsplit doctor: %s\n", ms_db_errmsg(db));
        free(cmdline);
        ms_db_close(db);
        return MS_EXIT_RUNTIME;
    }
    FILE *out = a.json ? stderr : stdout;
    json_t *result = json_object();
    /* 1. the trial */
    ms_program_trial_args ta = { .prog = prog, .capacity = a.cap, .steps = a.steps, .layers = a.layers, .second = 1,
                                 .json = a.json, .quiet = a.quiet, .brief = 1, .db = db, .parent = doc,
                                 .cmdline = cmdline, .who = "doctor" };
    ms_program_trial *tr = calloc(1, sizeof *tr);
    ms_program_run *run = calloc(1, sizeof *run);
    ms_plan plan;
    memset(&plan, 0, sizeof plan);
    int code = tr && run ? ms_program_run_trial(&ta, tr) : MS_EXIT_RUNTIME;
    const char *status = "failed";
    if (tr) json_object_set_new(result, "trial", ms_program_trial_json(tr));
    if (code == MS_EXIT_OK && tr->have_prof)
        fprintf(out, "doctor: the program fits one device of %s; splitting it anyway as asked\n",
                ms_fmt_bytes(a.cap, err, sizeof err));
    if (code != MS_EXIT_OK && code != MS_EXIT_OOM) goto done;
    /* 2. plan, 3. rerun, with restarts after an OOM */
    double headroom = a.headroom;
    json_t *recoveries = json_array();
    json_object_set_new(result, "recoveries", recoveries);
    ckpt_seen seen;
    memset(&seen, 0, sizeof seen);
    for (int attempt = 0;; attempt++) {
        ms_plan_opts o;
        ms_plan_opts_default(&o);
        o.headroom = headroom;
        if (ms_program_plan_opts(&tr->prof, &o, err, sizeof err)) {
            fprintf(stderr, "memsplit doctor: %s\n", err);
            code = MS_EXIT_USAGE;
            break;
        }
        ms_plan_free(&plan);
        /* the plan `memsplit plan` makes from this profile: among plans about
         * as fast, the same fixed order (ms_plan_choose) */
        int found = ms_plan_choose(&tr->prof, devs, a.gpus, &o, &plan, err, sizeof err);
        if (found == MS_PLAN_ERROR) {
            fprintf(stderr, "memsplit doctor: %s\n", err);
            code = MS_EXIT_USAGE;
            break;
        }
        if (found == MS_PLAN_INFEASIBLE) {
            ms_infeasible inf;
            if (ms_plan_explain_infeasible(&tr->prof, devs, a.gpus, &o, &inf, err, sizeof err) == 0)
                fprintf(stderr, "memsplit doctor: %s\n", inf.text);
            code = MS_EXIT_OOM;
            status = "infeasible";
            break;
        }
        plan.profile_run = tr->run;
        if (ms_plan_attach_program(&plan, &tr->prof) || ms_plan_explain(&tr->prof, &plan)) {
            code = MS_EXIT_RUNTIME;
            break;
        }
        fprintf(out, "doctor: plan %d: %d stage%s, predicted %.1f ms/step\n", attempt + 1, plan.n_stages,
                plan.n_stages > 1 ? "s" : "", plan.step_ms);
        ms_program_placement(out, &plan);
        json_object_set_new(result, "plan", ms_plan_to_json(&plan));
        msb_trace_free(&run->trace);
        ms_program_resume from = { seen.saves ? seen.last_save : NULL, seen.last_save_step };
        if (ms_program_train(&plan, prog, a.train_steps, a.json, a.quiet, db, doc, &from, run, err,
                             sizeof err) != 0) {
            fprintf(stderr, "memsplit doctor: %s\n", err);
            code = MS_EXIT_RUNTIME;
            break;
        }
        const msb_trace *now = &run->trace;
        note_run(&seen, run, attempt > 0);
        if (run->failure[0]) {
            fprintf(stderr, "memsplit doctor: %s\n", run->failure);
            code = run->refused ? MS_EXIT_USAGE : MS_EXIT_RUNTIME;
            break;
        }
        fprintf(out, "doctor: trained %d step%s; measured peak per device against the plan:\n", run->steps,
                run->steps == 1 ? "" : "s");
        ms_program_print_devices(out, run);
        json_object_set_new(result, "train", ms_program_run_json(run));
        if (!run->oom) {
            say_checkpoints(out, &seen);
            if (run->ex.interrupted || run->ex.signaled ||
                (run->ex.status && strcmp(now->done_reason, "steps"))) {
                char how[96];
                fprintf(stderr, "memsplit doctor: the program failed (%s)%s%s\n",
                        msb_exit_text(&run->ex, how, sizeof how), now->done_exc[0] ? ": " : "", now->done_exc);
                code = MS_EXIT_RUNTIME;
                status = run->ex.interrupted ? "interrupted" : "failed";
            } else {
                code = MS_EXIT_OK;
                status = "ok";
            }
            break;
        }
        /* an OOM in the rerun: keep more free on every device and restart */
        fprintf(out, "doctor: OUT OF MEMORY on stage %d (%s) in %s\n", run->oom_stage,
                run->oom_stage >= 0 ? run->dev[run->oom_stage].name : "?", run->oom_what);
        if (attempt + 1 >= MAX_RESTARTS) {
            fprintf(stderr, "memsplit doctor: still out of memory after %d plans; the last one is run %lld's\n",
                    attempt + 1, (long long)run->run_id);
            code = MS_EXIT_OOM;
            status = "oom";
            break;
        }
        /* what it learned goes into the model; only when it learned nothing
         * (the stage's count was below its peak: fragmentation, memory
         * outside the count) does it keep more free on every device */
        char reason[400], learned[200] = "";
        learn_from_oom(&tr->prof, &plan, run, devs, a.gpus, learned, sizeof learned);
        double next = headroom;
        if (!learned[0]) next = headroom + 0.5 * (1.0 - headroom) * 0.2 + 0.05;
        if (next > 0.9) next = 0.9;
        const char *oom_dev = run->oom_stage >= 0 ? run->dev[run->oom_stage].name : "?";
        if (learned[0])
            snprintf(reason, sizeof reason, "oom on %s (stage %d): %s", oom_dev, run->oom_stage, learned);
        else
            snprintf(reason, sizeof reason, "oom on %s (stage %d): re-planned with headroom %.0f%% (was %.0f%%)",
                     oom_dev, run->oom_stage, 100 * next, 100 * headroom);
        fprintf(out, "doctor: %s, restarting the program\n", reason);
        ms_recovery_rec rr = { .step = run->steps + 1, .resumed_step = -1 };
        snprintf(rr.reason, sizeof rr.reason, "%s", reason);
        if (ms_db_add_recovery(db, doc, &rr) < 0) {
            fprintf(stderr, "memsplit doctor: recording the recovery: %s\n", ms_db_errmsg(db));
            code = MS_EXIT_RUNTIME;
            break;
        }
        json_array_append_new(recoveries, json_pack("{s:i, s:s, s:f}", "stage", run->oom_stage, "reason", reason,
                                                     "headroom", next));
        headroom = next;
    }
done:
    if (ms_db_run_finish(db, doc, code == MS_EXIT_OK ? "ok" : status) != 0) {
        fprintf(stderr, "memsplit doctor: recording the run: %s\n", ms_db_errmsg(db));
        code = MS_EXIT_RUNTIME;
    }
    if (!a.quiet) fprintf(stderr, "doctor: recorded as run %lld in %s\n", (long long)doc, a.db_path);
    if (a.json) ms_cli_print_json(result);
    json_decref(result);
    ms_plan_free(&plan);
    if (run) msb_trace_free(&run->trace);
    free(run);
    if (tr) ms_program_trial_free(tr);
    free(tr);
    free(cmdline);
    ms_db_close(db);
    return code;
}
