/* cmd_doctor.c — `memsplit doctor`: parse → one call into the run floor
 * (run/doctor.h: trial → diagnosis → plan → training, all recorded in one
 * database; run/program.h for a program) → the JSON summary. */
#include "cli/args.h"
#include "cli/common.h"
#include "run/doctor.h"
#include "run/interrupt.h"
#include "reports/db.h"
#include "trainer/device.h"
#include "vocab/device_name.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

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

/* The doctor's own options, parsed. */
typedef struct doctor_args {
    ms_model_args ma;
    const char *gpu_mem, *device, *db_path, *ckdir;
    const char *launch, *kill;  /* --launch CMD, --inject-kill S:R (NULL: none) */
    int gpus, json, quiet, verbose, ckpt_every, db_timeout_ms;
    int replicas, zero;         /* --replicas (0: any), --zero (-1: any) */
    double headroom;        /* -1: the planner's default */
    ms_inject inject;
} doctor_args;

enum { O_MODEL = 1000, O_GPUS, O_GPUMEM, O_DEVICE, O_DB, O_CKDIR, O_CKEVERY, O_INJECT, O_HEADROOM, O_JSON,
       O_QUIET, O_VERBOSE, O_DBTIME, O_LAUNCH, O_REPLICAS, O_ZERO, O_KILL };

/* One option into a: 0, or -1 with err. */
static int take_opt(doctor_args *a, int c, const char *name, char *err, size_t errlen)
{
    int ks, kr;
    switch (c) {
    case O_MODEL: return ms_cli_model_opt(&a->ma, name, optarg, err, errlen) < 0 ? -1 : 0;
    case O_GPUS: return ms_arg_int("--gpus", optarg, 1, MS_MAX_DEVICES, &a->gpus, err, errlen);
    case O_GPUMEM: a->gpu_mem = optarg; return 0;
    case O_DEVICE: a->device = optarg; return 0;
    case O_DB: a->db_path = optarg; return 0;
    case O_CKDIR: a->ckdir = optarg; return 0;
    case O_CKEVERY: return ms_arg_key_int("--checkpoint-every", "checkpoint.every", optarg, &a->ckpt_every, err, errlen);
    case O_INJECT: return ms_arg_inject(optarg, &a->inject, err, errlen);
    case O_HEADROOM: return ms_arg_fraction("--headroom", optarg, &a->headroom, err, errlen);
    case O_DBTIME: return ms_arg_seconds("--db-timeout", optarg, 3600, &a->db_timeout_ms, err, errlen);
    case O_JSON: a->json = 1; return 0;
    case O_QUIET: a->quiet = 1; return 0;
    case O_VERBOSE: a->verbose = 1; return 0;
    case O_LAUNCH: a->launch = optarg; return 0;
    case O_KILL:
        if (ms_arg_step_rank("--inject-kill", optarg, &ks, &kr, err, errlen)) return -1;
        a->kill = optarg;
        return 0;
    case O_REPLICAS:
        if (!strcmp(optarg, "any")) a->replicas = 0;
        else return ms_arg_int("--replicas", optarg, 1, MS_MAX_DEVICES, &a->replicas, err, errlen);
        return 0;
    default: /* O_ZERO */
        a->zero = !strcmp(optarg, "on") ? 1 : !strcmp(optarg, "off") ? 0 : !strcmp(optarg, "any") ? -1 : -2;
        if (a->zero != -2) return 0;
        snprintf(err, errlen, "--zero takes on, off or any");
        return -1;
    }
}

/* What the options ask that they cannot have together: 0, or -1 (printed). */
static int check_args(const doctor_args *a)
{
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

/* 0 parsed, 1 help printed, -1 usage error (printed). */
static int parse_args(int argc, char **argv, doctor_args *a)
{
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
    ms_model_args_init(&a->ma);
    a->db_path = "memsplit.db";
    a->gpus = 2;
    a->ckpt_every = 5;
    a->headroom = -1;
    a->db_timeout_ms = MS_DB_BUSY_MS;
    a->replicas = 1;
    a->zero = -1;
    char err[512];
    int idx = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        if (c == 'h') { printf(usage, ms_cli_model_help); return 1; }
        if (c == '?') { fprintf(stderr, "memsplit doctor: see --help\n"); return -1; }
        if (take_opt(a, c, opts[idx].name, err, sizeof err)) { fprintf(stderr, "memsplit doctor: %s\n", err); return -1; }
    }
    if (optind < argc) { fprintf(stderr, "memsplit doctor: unexpected argument '%s'\n", argv[optind]); return -1; }
    return check_args(a);
}

/* The config, and the capacity of each planned device (caps, MS_MAX_DEVICES
 * long): 0, or the exit status (said). */
static int build_config(const doctor_args *a, ms_config *cfg, uint64_t *caps)
{
    char err[2048];
    if (ms_model_args_config(&a->ma, cfg, err, sizeof err)) { fprintf(stderr, "memsplit doctor: %s\n", err); return MS_EXIT_USAGE; }
    if (a->device) snprintf(cfg->device, sizeof cfg->device, "%s", a->device);
    /* as profile and train do: a GPU model on a machine without one is an
     * error, never a silent CPU run of a model sized for a GPU */
    if (!strncmp(cfg->device, "cuda", 4) && ms_cuda_gpu_count() == 0) {
        fprintf(stderr, "memsplit doctor: no CUDA GPU here, and %s runs on %s (give --device cpu%s)\n",
                cfg->preset[0] ? cfg->preset : "the model", cfg->device,
                !strcmp(cfg->preset, "seed17") ? ", or its CPU twin --preset seed17-cpu" : "");
        return MS_EXIT_RUNTIME;
    }
    int n_caps = 0, gpus = a->gpus;
    if (a->gpu_mem) {
        if (ms_arg_sizes("--gpu-mem", a->gpu_mem, caps, MS_MAX_DEVICES, &n_caps, err, sizeof err)) {
            fprintf(stderr, "memsplit doctor: %s\n", err);
            return MS_EXIT_USAGE;
        }
        if (n_caps > 1 && n_caps != gpus) {
            fprintf(stderr, "memsplit doctor: --gpus %d but --gpu-mem lists %d sizes\n", gpus, n_caps);
            return MS_EXIT_USAGE;
        }
        cfg->gpu_mem = caps[0];
    }
    if (!cfg->gpu_mem) { fprintf(stderr, "memsplit doctor: give --gpu-mem (the capacity of each device)\n"); return MS_EXIT_USAGE; }
    for (int d = n_caps; d < gpus; d++) caps[d] = n_caps > 1 ? caps[d] : cfg->gpu_mem;
    return 0;
}

int ms_cmd_doctor(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)      /* `-- PROGRAM ...`: the user's own program */
        if (!strcmp(argv[i], "--")) return ms_cmd_doctor_program(argc, argv);
    doctor_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc) return prc > 0 ? MS_EXIT_OK : MS_EXIT_USAGE;
    ms_config cfg;
    uint64_t *caps = calloc(MS_MAX_DEVICES, sizeof *caps);
    if (!caps) return MS_EXIT_RUNTIME;
    int code = build_config(&a, &cfg, caps);
    if (code) {
        free(caps);
        return code;
    }
    char *cmd = ms_cli_cmdline(argc, argv);
    ms_doctor_args da = { .ma = &a.ma, .device = a.device, .db_path = a.db_path, .ckdir = a.ckdir, .cmdline = cmd,
                          .launch = a.launch, .kill = a.kill, .caps = caps, .gpus = a.gpus, .json = a.json,
                          .quiet = a.quiet, .verbose = a.verbose, .ckpt_every = a.ckpt_every,
                          .db_timeout_ms = a.db_timeout_ms, .replicas = a.replicas, .zero = a.zero,
                          .headroom = a.headroom, .inject = a.inject };
    json_t *summary = NULL;
    ms_interrupt_arm("memsplit doctor"); /* a signal stops it between steps, checkpointed (run/interrupt.h) */
    code = ms_run_doctor(&cfg, &da, &summary);
    free(cmd);
    free(caps);
    return ms_cli_summary(code, summary);
}
