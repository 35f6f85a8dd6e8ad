/* cmd_doctor.c — `memsplit doctor`: trial → diagnosis → plan → training,
 * all recorded in one database, with progress throughout; and `memsplit
 * train --plan` (the last part on its own). */
#include "cli/args.h"
#include "cli/common.h"
#include "cli/program.h"
#include "cli/doctor_ranks.h"
#include "cli/rerun.h"
#include "planner/explain.h"
#include "vocab/plan_json.h"
#include "trainer/nvtx_ranges.h"
#include "vocab/profile_json.h"
#include "profiler/trial.h"
#include "reports/term_report.h"
#include "trainer/config_keys.h"
#include "vocab/errf.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char usage[] =
    "usage: memsplit doctor (--preset NAME | --config FILE) --gpu-mem SIZE[,...]\n"
    "                       [--gpus N] [options]\n"
    "       memsplit doctor --gpus N --gpu-mem SIZE [options] -- PROGRAM [ARGS...]\n"
    "                       (your own program; memsplit doctor --help -- PROGRAM\n"
    "                       lists its options)\n"
    "\n"
    "The whole loop: a training trial on one device (memsplit profile); if the\n"
    "model fits, training on that device; if not, the diagnosis, a plan over N\n"
    "devices (memsplit plan), and training with that plan, automatically. An OOM\n"
    "during training is caught, recorded, the model re-planned for the capacity\n"
    "that remains, and training resumes from the last checkpoint.\n"
    "\n"
    "%s"
    "Doctor options:\n"
    "  --precision P        fp32, bf16 or fp16: the trial's, which the plan keeps\n"
    "                       unless nothing fits in it (it says so)\n"
    "  --batch N            the trial's micro-batch size in sequences (the global\n"
    "                       batch is this x train.accum)\n"
    "  --gpus N             devices to plan for (default 2)\n"
    "  --gpu-mem SIZE[,..]  capacity of the trial's device and of each planned\n"
    "                       device (one size, or one per device)\n"
    "  --device DEV         cpu: N virtual devices on the CPU backend; cuda:K: N\n"
    "                       virtual devices on GPU K; default: distinct GPUs when\n"
    "                       there are N, else virtual devices on GPU 0, else CPU\n"
    "  --steps S            training steps (default: the config's)\n"
    "  --db FILE            run database (default memsplit.db)\n"
    MS_CLI_DB_TIMEOUT_HELP
    "  --checkpoint-dir DIR checkpoints for recovery (default FILE.ckpt/run-N beside\n"
    "                       --db, N the run's id; the newest two it wrote are kept)\n"
    "  --checkpoint-every K steps between checkpoints (default 5; 0: none, and a\n"
    "                       recovery restarts from step 0)\n"
    "  --headroom F         fraction of each device the plan keeps free, 0.05 or\n"
    "                       5%% (default 5%%; also for re-plans after an OOM)\n"
    "  --inject-oom S:D:SIZE  testing aid: at step S, device D shrinks to SIZE, or\n"
    "                       with SIZE = P%%, keeps its reserve and P%% of what its\n"
    "                       tensors took at their peak\n"
    "  --launch CMD         train as MPI ranks, one per device, with CMD as the\n"
    "                       launcher (e.g. \"mpirun\", \"mpirun --oversubscribe\", \"srun\";\n"
    "                       words split at spaces; doctor adds -n N): doctor runs it as\n"
    "                       its child, and when a rank dies re-plans without its\n"
    "                       device and resumes from the last checkpoint\n"
    "  --replicas D         data-parallel copies of the pipeline: a number or any\n"
    "                       (default 1; more than one needs --launch)\n"
    "  --zero Z             on | off | any: ZeRO-1 over the replicas (default any)\n"
    "  --inject-kill S:R    with --launch, a testing aid: in step S, rank R kills\n"
    "                       itself with SIGKILL mid-step\n"
    "  --json               one JSON object on stdout: trial, plan, train\n"
    "  --verbose            the per-layer tables, the plan's bytes per category and\n"
    "                       the planner's reasoning too (memsplit report has them)\n"
    "  --quiet              no progress lines\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 trained; 3 out of memory and no plan fits (the message says\n"
    "what would, and names the last checkpoint, which a later run resumes);\n"
    "1 usage error; 2 runtime error (also a record the database never took).\n";

/* The devices named as the rerun will open them (rerun.c, trainer/device.c):
 * --device D gives virtual devices on D; without it, distinct GPUs when
 * there are enough, else virtual devices on GPU 0 (or the CPU). */
static void device_names(ms_plan_device *devs, int n, const char *device, const char *cfg_device)
{
    int cuda = !strncmp(device ? device : cfg_device, "cuda", 4);
    int distinct = !device && cuda && n > 1 && ms_cuda_gpu_count() >= n;
    const char *base = device ? device : cuda ? "cuda:0" : "cpu";
    for (int d = 0; d < n; d++) {
        if (distinct) snprintf(devs[d].name, sizeof devs[d].name, "cuda:%d", d);
        else if (n == 1) snprintf(devs[d].name, sizeof devs[d].name, "%.31s", base);
        else snprintf(devs[d].name, sizeof devs[d].name, "%.20s/v%d", base, d & 0x3ff);
    }
}

/* One search: 0, or MS_EOOM / MS_EFAIL with err. */
static int choose(ms_profile *prof, ms_plan_device *devs, int n, const ms_plan_opts *po, ms_plan *plan, char *err,
                  size_t errlen)
{
    int rc = ms_plan_choose(prof, devs, n, po, plan, err, errlen);
    if (rc == MS_PLAN_INFEASIBLE) {
        ms_infeasible inf;
        if (ms_plan_explain_infeasible(prof, devs, n, po, &inf, err, errlen) == 0) snprintf(err, errlen, "%s", inf.text);
        return MS_EOOM;
    }
    return rc == MS_PLAN_OK ? MS_OK : MS_EFAIL;
}

/* Plan over the given capacities in the trial's precision, or, when none
 * fits and no --precision was given, in any (saying why); make sure the
 * chosen micro-batch size was measured (isolating it and re-planning if not). */
static int make_plan(ms_profile *prof, const ms_config *cfg, const uint64_t *caps, int n, const char *device,
                     int precision_given, ms_plan_opts *po, ms_plan *plan, FILE *progress, int verbose, char *err,
                     size_t errlen)
{
    ms_plan_device *devs = calloc((size_t)n, sizeof *devs);
    if (!devs) {
        ms_errf(err, errlen, "out of memory");
        return MS_EFAIL;
    }
    device_names(devs, n, device, cfg->device);
    for (int d = 0; d < n; d++) devs[d].capacity = caps[d];
    int rc = MS_OK;
    char why[512] = "";
    for (int round = 0; round < 4; round++) {
        memset(plan, 0, sizeof *plan);
        po->precision = cfg->precision;
        rc = choose(prof, devs, n, po, plan, err, errlen);
        if (rc == MS_EOOM && !precision_given) {
            /* the trial's precision cannot fit: the only reason to leave it */
            snprintf(why, sizeof why, "No plan in the trial's precision, %s, fits (%.300s); so the plan leaves it. ",
                     ms_precision_name(cfg->precision), err);
            po->precision = -1;
            rc = choose(prof, devs, n, po, plan, err, errlen);
        }
        if (rc != MS_OK) break;
        if (ms_profile_find(prof, 0, plan->precision, plan->micro_batch)) break;
        if (progress)
            fprintf(progress, "doctor: the plan wants micro-batches of %d, not measured yet: measuring them\n",
                    plan->micro_batch);
        ms_config c = *cfg;
        c.precision = (ms_precision)plan->precision;
        int mb = plan->micro_batch, pr = plan->precision;
        ms_plan_free(plan);
        if (ms_profile_measure(prof, &c, pr, mb, verbose ? progress : NULL, err, errlen)) { rc = MS_EFAIL; break; }
    }
    free(devs);
    if (rc != MS_OK) return rc;
    if (why[0]) {
        snprintf(plan->note, sizeof plan->note, "%s", why);
        if (progress) fprintf(progress, "doctor: %s\n", why);
    }
    ms_plan_explain(prof, plan);
    return MS_OK;
}

/* The doctor's own options, parsed. */
typedef struct doctor_args {
    ms_cli_model_args ma;
    const char *gpu_mem, *device, *db_path, *ckdir;
    const char *launch, *kill;  /* --launch CMD, --inject-kill S:R (NULL: none) */
    int gpus, json, quiet, verbose, ckpt_every, db_timeout_ms;
    int replicas, zero;         /* --replicas (0: any), --zero (-1: any) */
    double headroom;        /* -1: the planner's default */
    ms_inject inject;
} doctor_args;

/* 0 parsed, 1 help printed, -1 usage error (printed). */
static int parse_args(int argc, char **argv, doctor_args *a)
{
    enum { O_MODEL = 1000, O_GPUS, O_GPUMEM, O_DEVICE, O_DB, O_CKDIR, O_CKEVERY, O_INJECT, O_HEADROOM, O_JSON,
           O_QUIET, O_VERBOSE, O_DBTIME, O_LAUNCH, O_REPLICAS, O_ZERO, O_KILL };
    static const struct option opts[] = {
        { "preset", required_argument, 0, O_MODEL }, { "config", required_argument, 0, O_MODEL },
        { "set", required_argument, 0, O_MODEL }, { "precision", required_argument, 0, O_MODEL },
        { "steps", required_argument, 0, O_MODEL }, { "batch", required_argument, 0, O_MODEL },
        { "data", required_argument, 0, O_MODEL }, { "gpus", required_argument, 0, O_GPUS },
        { "gpu-mem", required_argument, 0, O_GPUMEM }, { "device", required_argument, 0, O_DEVICE },
        { "db", required_argument, 0, O_DB }, { "checkpoint-dir", required_argument, 0, O_CKDIR },
        { "checkpoint-every", required_argument, 0, O_CKEVERY }, { "inject-oom", required_argument, 0, O_INJECT },
        { "headroom", required_argument, 0, O_HEADROOM }, { "json", no_argument, 0, O_JSON },
        { "quiet", no_argument, 0, O_QUIET }, { "verbose", no_argument, 0, O_VERBOSE },
        { "db-timeout", required_argument, 0, O_DBTIME }, { "help", no_argument, 0, 'h' },
        { "launch", required_argument, 0, O_LAUNCH }, { "replicas", required_argument, 0, O_REPLICAS },
        { "zero", required_argument, 0, O_ZERO }, { "inject-kill", required_argument, 0, O_KILL },
        { 0, 0, 0, 0 },
    };
    memset(a, 0, sizeof *a);
    ms_cli_model_args_init(&a->ma);
    a->db_path = "memsplit.db";
    a->gpus = 2;
    a->ckpt_every = 5;
    a->headroom = -1;
    a->db_timeout_ms = MS_DB_BUSY_MS;
    a->replicas = 1;
    a->zero = -1;
    char err[512];
    int idx = 0, c, bad = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case O_MODEL: bad = ms_cli_model_opt(&a->ma, opts[idx].name, optarg, err, sizeof err) < 0; break;
        case O_GPUS: bad = ms_arg_int("--gpus", optarg, 1, MS_MAX_DEVICES, &a->gpus, err, sizeof err); break;
        case O_GPUMEM: a->gpu_mem = optarg; break;
        case O_DEVICE: a->device = optarg; break;
        case O_DB: a->db_path = optarg; break;
        case O_CKDIR: a->ckdir = optarg; break;
        case O_CKEVERY:
            bad = ms_arg_key_int("--checkpoint-every", "checkpoint.every", optarg, &a->ckpt_every, err, sizeof err);
            break;
        case O_INJECT: bad = ms_arg_inject(optarg, &a->inject, err, sizeof err); break;
        case O_HEADROOM: bad = ms_arg_fraction("--headroom", optarg, &a->headroom, err, sizeof err); break;
        case O_DBTIME: bad = ms_arg_seconds("--db-timeout", optarg, 3600, &a->db_timeout_ms, err, sizeof err); break;
        case O_JSON: a->json = 1; break;
        case O_QUIET: a->quiet = 1; break;
        case O_VERBOSE: a->verbose = 1; break;
        case O_LAUNCH: a->launch = optarg; break;
        case O_KILL: {
            int ks, kr;
            if (ms_arg_step_rank("--inject-kill", optarg, &ks, &kr, err, sizeof err)) {
                fprintf(stderr, "memsplit doctor: %s\n", err);
                return -1;
            }
            a->kill = optarg;
            break;
        }
        case O_REPLICAS:
            if (!strcmp(optarg, "any")) a->replicas = 0;
            else bad = ms_arg_int("--replicas", optarg, 1, MS_MAX_DEVICES, &a->replicas, err, sizeof err);
            break;
        case O_ZERO:
            if ((a->zero = !strcmp(optarg, "on") ? 1 : !strcmp(optarg, "off") ? 0 : !strcmp(optarg, "any") ? -1 : -2) == -2) {
                fprintf(stderr, "memsplit doctor: --zero takes on, off or any\n");
                return -1;
            }
            break;
        case 'h': printf(usage, ms_cli_model_help); return 1;
        default: fprintf(stderr, "memsplit doctor: see --help\n"); return -1;
        }
        if (bad) { fprintf(stderr, "memsplit doctor: %s\n", err); return -1; }
    }
    if (optind < argc) { fprintf(stderr, "memsplit doctor: unexpected argument '%s'\n", argv[optind]); return -1; }
    if (!a->launch && (a->replicas != 1 || a->kill)) {
        fprintf(stderr, "memsplit doctor: %s runs as MPI ranks: give --launch (e.g. --launch mpirun)\n",
                a->kill ? "--inject-kill" : "a plan of replicas");
        return -1;
    }
    if (a->device && !ms_device_name_valid(a->device)) {
        fprintf(stderr, "memsplit doctor: --device '%s' is not cpu or cuda:K\n", a->device);
        return -1;
    }
    if (a->inject.step && a->inject.dev >= a->gpus) {
        fprintf(stderr, "memsplit doctor: --inject-oom: device %d is not one of the %d planned (0..%d)\n", a->inject.dev,
                a->gpus, a->gpus - 1);
        return -1;
    }
    return 0;
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
static void print_resume_hint(FILE *f, const doctor_args *a, const ms_config *cfg, const ms_rerun_result *rr)
{
    fprintf(f, "memsplit doctor: the last checkpoint, %s (step %d), is intact and belongs to this job; resume it with\n"
               "  memsplit train", rr->checkpoint, rr->checkpoint_step);
    if (a->ma.preset) fprintf(f, " --preset %s", a->ma.preset);
    if (a->ma.config) fprintf(f, " --config %s", a->ma.config);
    for (int i = 0; i < a->ma.n_sets; i++) fprintf(f, " --set %s", a->ma.sets[i]);
    if (a->ma.data) fprintf(f, " --data %s", a->ma.data);
    if (a->device) fprintf(f, " --device %s", a->device);
    fprintf(f, " --precision %s --checkpoint-dir %.*s --resume\n", ms_precision_name(cfg->precision),
            (int)(strrchr(rr->checkpoint, '/') ? strrchr(rr->checkpoint, '/') - rr->checkpoint : 1),
            strrchr(rr->checkpoint, '/') ? rr->checkpoint : ".");
    fprintf(f, "  (with --plan FILE from memsplit plan for the memory there is then)\n");
}

int ms_cmd_doctor(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)      /* `-- PROGRAM ...`: the user's own program */
        if (!strcmp(argv[i], "--")) return ms_cmd_doctor_program(argc, argv);
    doctor_args a;
    int prc0 = parse_args(argc, argv, &a);
    if (prc0) return prc0 > 0 ? MS_EXIT_OK : MS_EXIT_USAGE;
    ms_config cfg;
    char err[2048];
    if (ms_cli_build_config(&a.ma, &cfg, err, sizeof err)) { fprintf(stderr, "memsplit doctor: %s\n", err); return MS_EXIT_USAGE; }
    if (a.device) snprintf(cfg.device, sizeof cfg.device, "%s", a.device);
    /* as profile and train do: a GPU model on a machine without one is an
     * error, never a silent CPU run of a model sized for a GPU */
    if (!strncmp(cfg.device, "cuda", 4) && ms_cuda_gpu_count() == 0) {
        fprintf(stderr, "memsplit doctor: no CUDA GPU here, and %s runs on %s (give --device cpu%s)\n",
                cfg.preset[0] ? cfg.preset : "the model", cfg.device,
                !strcmp(cfg.preset, "seed17") ? ", or its CPU twin --preset seed17-cpu" : "");
        return MS_EXIT_RUNTIME;
    }
    uint64_t *caps = calloc(MS_MAX_DEVICES, sizeof *caps);
    if (!caps) return MS_EXIT_RUNTIME;
    int n_caps = 0, gpus = a.gpus;
    if (a.gpu_mem) {
        if (ms_arg_sizes("--gpu-mem", a.gpu_mem, caps, MS_MAX_DEVICES, &n_caps, err, sizeof err)) {
            fprintf(stderr, "memsplit doctor: %s\n", err);
            free(caps);
            return MS_EXIT_USAGE;
        }
        if (n_caps > 1 && n_caps != gpus) {
            fprintf(stderr, "memsplit doctor: --gpus %d but --gpu-mem lists %d sizes\n", gpus, n_caps);
            free(caps);
            return MS_EXIT_USAGE;
        }
        cfg.gpu_mem = caps[0];
    }
    if (!cfg.gpu_mem) { fprintf(stderr, "memsplit doctor: give --gpu-mem (the capacity of each device)\n"); free(caps); return MS_EXIT_USAGE; }
    for (int d = n_caps; d < gpus; d++) caps[d] = n_caps > 1 ? caps[d] : cfg.gpu_mem;
    FILE *pg = a.quiet ? NULL : stderr;
    FILE *out = a.json ? stderr : stdout;
    if (!strncmp(cfg.device, "cuda", 4)) ms_nvtx_prepare(err, sizeof err);

    ms_db *db = ms_db_open(a.db_path, 1, err, sizeof err);
    if (!db) { fprintf(stderr, "memsplit doctor: %s\n", err); free(caps); return MS_EXIT_RUNTIME; }
    ms_db_set_busy_timeout(db, a.db_timeout_ms);
    int dbf = 0; /* records the database refused */
    const char *model = cfg.preset[0] ? cfg.preset : "custom";
    char *cmd = ms_cli_cmdline(argc, argv), *ini = ms_config_to_ini(&cfg);
    int64_t top = ms_db_run_begin(db, "doctor", cmd, ini, NULL, model, 0);
    int64_t trial_run = top > 0 ? ms_db_run_begin(db, "profile", cmd, ini, NULL, model, top) : -1;
    free(cmd);
    if (top < 0 || trial_run < 0) {
        fprintf(stderr, "memsplit doctor: %s\n", ms_db_errmsg(db));
        free(ini);
        free(caps);
        ms_db_close(db);
        return MS_EXIT_RUNTIME;
    }

    /* 1. the trial */
    char b1[32];
    if (pg) fprintf(pg, "doctor: 1/3 trial of %s on %s (capacity %s)\n", model, cfg.device, ms_fmt_bytes(cfg.gpu_mem, b1, sizeof b1));
    ms_trial_opts to;
    memset(&to, 0, sizeof to);
    to.steps = 1;
    to.use_cupti = 1;
    to.precisions[0] = cfg.precision;
    to.n_prec = 1;
    for (int p = 0; p < 3; p++)
        if (p != (int)cfg.precision) to.precisions[to.n_prec++] = p;
    to.batches[0] = cfg.batch;
    to.n_batch = 1;
    if (cfg.batch > 1) to.batches[to.n_batch++] = cfg.batch / 2;
    to.progress = a.verbose ? pg : NULL;
    ms_trial_result tr;
    int rc = ms_trial_run(&cfg, &to, &tr);
    int code = MS_EXIT_OK;
    json_t *jout = json_object();
    ms_plan plan;
    memset(&plan, 0, sizeof plan);
    ms_rerun_result rr;
    memset(&rr, 0, sizeof rr);
    if (rc == MS_EFAIL) {
        fprintf(stderr, "memsplit doctor: trial: %s\n", tr.err);
        ms_cli_recorded(ms_db_run_finish(db, trial_run, "failed"), db, "doctor", "the trial's end", &dbf);
        code = MS_EXIT_RUNTIME;
        goto done;
    }
    ms_cli_recorded(ms_db_add_mem_events(db, trial_run, tr.events, tr.n_events), db, "doctor", "the trial's memory events", &dbf);
    ms_cli_recorded(ms_db_add_rows(db, trial_run, &tr.prof), db, "doctor", "the profile", &dbf);
    ms_cli_recorded(ms_db_run_finish(db, trial_run, rc == MS_OK ? "ok" : "oom"), db, "doctor", "the trial's end", &dbf);
    print_trial(out, &tr.prof, a.verbose, a.db_path);
    fflush(out);
    json_t *tj = ms_profile_to_json(&tr.prof);
    if (tj) json_object_set_new(jout, "trial", tj);

    /* 2. the plan: one device if it fits, else N */
    int n_plan = rc == MS_OK ? 1 : gpus;
    if (pg) fprintf(pg, "doctor: 2/3 %s\n", rc == MS_OK ? "the model fits: planning for one device"
                                                        : "it does not fit: planning over the devices given");
    ms_plan_opts po;
    ms_plan_opts_default(&po);
    if (a.headroom >= 0) po.headroom = a.headroom;
    po.replicas = a.replicas;
    po.zero = a.zero;
    tr.prof.global_batch = cfg.batch * cfg.accum;
    if (rc == MS_OK) caps[0] = cfg.gpu_mem;
    int prc = make_plan(&tr.prof, &cfg, caps, n_plan, a.device, a.ma.precision != NULL, &po,
                        &plan, pg, a.verbose, err, sizeof err);
    int64_t plan_run = ms_db_run_begin(db, "plan", NULL, NULL, NULL, model, top);
    ms_cli_recorded(plan_run, db, "doctor", "the plan's run", &dbf);
    if (prc != MS_OK) {
        fprintf(stderr, "memsplit doctor: no plan: %s\n", err);
        if (plan_run > 0) ms_cli_recorded(ms_db_run_finish(db, plan_run, "infeasible"), db, "doctor", "the plan's end", &dbf);
        code = prc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
        goto done;
    }
    plan.profile_run = trial_run;
    ms_plan_print_table(out, &plan, &tr.prof, a.verbose);
    if (a.verbose && plan.reasoning) {
        fputc('\n', out);
        ms_cli_print_wrapped(out, plan.reasoning, 80);
    } else if (plan.note[0]) {
        ms_cli_print_wrapped(out, plan.note, 80);
    }
    if (!a.verbose) fprintf(out, "(the planner's reasoning: --verbose, or memsplit report --db %s)\n", a.db_path);
    fputc('\n', out);
    fflush(out);
    char *pjs = ms_plan_to_string(&plan);
    int64_t plan_id = pjs && plan_run > 0 ? ms_db_add_plan(db, plan_run, pjs, plan.step_ms, 1) : -1;
    free(pjs);
    ms_cli_recorded(plan_id, db, "doctor", "the plan", &dbf);
    if (plan_run > 0) ms_cli_recorded(ms_db_run_finish(db, plan_run, "ok"), db, "doctor", "the plan's end", &dbf);

    /* 3. training with the plan */
    ms_rerun_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.inject = a.inject;
    if (ms_rerun_check(&cfg, &plan, &ro, err, sizeof err)) {
        fprintf(stderr, "memsplit doctor: %s\n", err);
        code = MS_EXIT_USAGE;
        goto done;
    }
    if (pg) fprintf(pg, "doctor: 3/3 training %d steps with the plan\n", cfg.steps);
    int64_t train_run = ms_db_run_begin(db, "train", NULL, ini, NULL, model, top);
    ms_cli_recorded(train_run, db, "doctor", "the training run", &dbf);
    /* each doctor run its own folder: two runs on one database never see
     * each other's checkpoints (and a foreign one would be refused anyway) */
    char ckbuf[1200], ckbase[1100];
    if (a.ckdir) {
        snprintf(ckbase, sizeof ckbase, "%s", a.ckdir);
    } else {
        snprintf(ckbase, sizeof ckbase, "%s.ckpt", a.db_path);
        mkdir(ckbase, 0777);
        snprintf(ckbuf, sizeof ckbuf, "%s/run-%lld", ckbase, (long long)top);
        a.ckdir = ckbuf;
    }
    ro.device = a.device ? a.device : (!strncmp(cfg.device, "cuda", 4) ? NULL : "cpu");
    ro.steps = cfg.steps;
    ro.ckpt_dir = a.ckpt_every > 0 ? a.ckdir : NULL;
    ro.ckpt_every = a.ckpt_every;
    ro.prof = &tr.prof;
    ro.popts = po;
    ro.db = train_run > 0 ? db : NULL;
    ro.run = train_run;
    ro.plan_id = plan_id > 0 ? plan_id : 0;
    ro.db_timeout_ms = a.db_timeout_ms;
    ro.progress = pg;
    ro.log_every = a.verbose ? 1 : 0;
    if (a.launch) {
        /* the ranks' checkpoints go to <folder>/run-<train run> (doctor_ranks.h) */
        ms_doctor_ranks_opts dr = { a.launch, &a.ma, a.device, a.db_path, ro.db, train_run, ckbase, a.ckpt_every,
                                    a.kill, &tr.prof, po, a.quiet, pg, a.db_timeout_ms };
        rc = ms_doctor_ranks(&cfg, &plan, &dr, ro.plan_id, &rr);
    } else {
        rc = ms_rerun(&cfg, &plan, &ro, &rr);
    }
    dbf += rr.db_failed;
    if (train_run > 0)
        ms_cli_recorded(ms_db_run_finish(db, train_run, rc == MS_OK ? "ok" : rc == MS_EOOM ? "oom" : "failed"), db,
                        "doctor", "the training's end", &dbf);
    if (rc != MS_OK) {
        fprintf(stderr, "memsplit doctor: training: %s\n", rr.err);
        code = rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
        if (rr.oom_unrecovered && rr.checkpoint[0]) print_resume_hint(stderr, &a, &cfg, &rr);
    } else {
        ms_rerun_print_devices(out, &rr);
        fprintf(out, "trained %d steps: loss %.4f -> %.4f, %.0f tokens/s, %d recover%s\n", rr.steps, rr.loss_first,
                rr.loss_last, rr.tokens_per_s, rr.recoveries, rr.recoveries == 1 ? "y" : "ies");
    }
done:
    if (plan.n_stages) {
        json_t *pj = ms_plan_to_json(&plan);
        if (pj) json_object_set_new(jout, "plan", pj);
    }
    if (rr.losses) json_object_set_new(jout, "train", ms_rerun_result_json(&rr));
    ms_cli_recorded(ms_db_run_finish(db, top, code == MS_EXIT_OK ? "ok" : code == MS_EXIT_OOM ? "oom" : "failed"), db,
                    "doctor", "the run's end", &dbf);
    if (dbf && code == MS_EXIT_OK) code = MS_EXIT_RUNTIME;
    if (a.json) ms_cli_print_json(jout);
    json_decref(jout);
    ms_rerun_result_free(&rr);
    ms_plan_free(&plan);
    ms_trial_free(&tr);
    free(ini);
    free(caps);
    ms_db_close(db);
    return code;
}
