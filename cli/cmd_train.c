/* cmd_train.c — `memsplit train`: parse → one call into the run floor
 * (run/train.h on one device, run/train_plan.h with --plan, run/program.h
 * for a program) → the JSON summary. */
#include "cli/args.h"
#include "cli/common.h"
#include "run/interrupt.h"
#include "run/program.h"
#include "run/train.h"
#include "run/train_plan.h"
#include "reports/db.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: memsplit train (--preset NAME | --config FILE) [options]\n"
    "       memsplit train --plan FILE [options] -- PROGRAM [ARGS...]   (your own\n"
    "                    program; memsplit train --help -- PROGRAM lists its options)\n"
    "\n"
    "Train the model on one device and print progress (step, loss, tokens/s,\n"
    "peak memory) on stderr.\n"
    "\n"
    "%s"
    "Training options:\n"
    MS_CLI_RUN_HELP
    "  --checkpoint-dir DIR write checkpoints there (step-NNNNNNNN.ckpt); on one\n"
    "                       device every one is kept, with --plan the newest two\n"
    "  --checkpoint-every N a checkpoint every N steps (default: only at the end)\n"
    "  --resume             continue from the newest checkpoint in --checkpoint-dir\n"
    "                       that verifies (a corrupt one is skipped, said); one of\n"
    "                       another job (seed, data, global batch, ...) is refused\n"
    "  --plan FILE          train with a plan (memsplit plan -o FILE) over several\n"
    "                       devices: --device cpu or cuda:K gives virtual devices\n"
    "                       of the plan's capacities on it; by default distinct\n"
    "                       GPUs when there are enough\n"
    "  --db FILE            record the run, its steps and peaks in this SQLite\n"
    "                       database (with --plan, an OOM is re-planned from the\n"
    "                       plan's profile in FILE)\n"
    MS_CLI_DB_TIMEOUT_HELP
    "  --inject-oom S:D:SIZE  with --plan, a testing aid: at step S device D\n"
    "                       shrinks to SIZE (as if another process took memory),\n"
    "                       or with SIZE = P%%, keeps its reserve and P%% of what\n"
    "                       its tensors took at their peak\n"
    "  --kernel-times FILE  trace the last --kernel-steps steps through CUPTI and\n"
    "                       write where their time went to FILE (JSON: ms per step\n"
    "                       and %% of the step per kernel family, busy time, the gap\n"
    "                       of launch/host overhead, the longest kernels); a CUDA\n"
    "                       device only. Traced steps are not in tokens/s\n"
    "  --kernel-steps N     how many steps --kernel-times traces (default 3)\n"
    "  --json               print one JSON summary object on stdout\n"
    "  --quiet              no progress lines\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 trained; 1 usage or configuration error (also a plan for\n"
    "another model); 2 runtime error (device, data, checkpoint, or a record the\n"
    "database never took); 3 out of memory (the message names the layer, phase,\n"
    "category and bytes).\n";

typedef struct train_args {
    ms_model_args ma;
    const char *ckdir, *plan_path, *db_path, *inject;
    int ckevery, resume, json, quiet, db_timeout_ms;
    ms_train_kt kt;
} train_args;

enum { O_CKDIR = 1000, O_CKEVERY, O_RESUME, O_JSON, O_QUIET, O_MODEL, O_PLAN, O_DB, O_INJECT, O_DBTIME, O_KTIMES, O_KSTEPS };

/* One option into a: 0, or -1 with err. */
static int take_opt(train_args *a, int c, const char *name, char *err, size_t errlen)
{
    switch (c) {
    case O_MODEL: return ms_cli_model_opt(&a->ma, name, optarg, err, errlen) < 0 ? -1 : 0;
    case O_CKDIR: a->ckdir = optarg; return 0;
    case O_CKEVERY: return ms_arg_key_int("--checkpoint-every", "checkpoint.every", optarg, &a->ckevery, err, errlen);
    case O_RESUME: a->resume = 1; return 0;
    case O_PLAN: a->plan_path = optarg; return 0;
    case O_DB: a->db_path = optarg; return 0;
    case O_INJECT: a->inject = optarg; return 0;
    case O_DBTIME: return ms_arg_seconds("--db-timeout", optarg, 3600, &a->db_timeout_ms, err, errlen);
    case O_KTIMES: a->kt.path = optarg; return 0;
    case O_KSTEPS: return ms_arg_int("--kernel-steps", optarg, 1, 1000, &a->kt.steps, err, errlen);
    case O_JSON: a->json = 1; return 0;
    default: a->quiet = 1; return 0; /* O_QUIET */
    }
}

/* 0 parsed, 1 help printed, -1 usage error (printed). */
static int parse_args(int argc, char **argv, train_args *a)
{
    static const struct option opts[] = {
        { "preset", required_argument, 0, O_MODEL }, { "config", required_argument, 0, O_MODEL },
        { "set", required_argument, 0, O_MODEL }, { "device", required_argument, 0, O_MODEL },
        { "precision", required_argument, 0, O_MODEL }, { "gpu-mem", required_argument, 0, O_MODEL },
        { "steps", required_argument, 0, O_MODEL }, { "batch", required_argument, 0, O_MODEL },
        { "data", required_argument, 0, O_MODEL },
        { "checkpoint-dir", required_argument, 0, O_CKDIR }, { "checkpoint-every", required_argument, 0, O_CKEVERY },
        { "resume", no_argument, 0, O_RESUME }, { "json", no_argument, 0, O_JSON },
        { "quiet", no_argument, 0, O_QUIET }, { "help", no_argument, 0, 'h' },
        { "plan", required_argument, 0, O_PLAN }, { "db", required_argument, 0, O_DB },
        { "inject-oom", required_argument, 0, O_INJECT }, { "db-timeout", required_argument, 0, O_DBTIME },
        { "kernel-times", required_argument, 0, O_KTIMES }, { "kernel-steps", required_argument, 0, O_KSTEPS },
        { 0, 0, 0, 0 },
    };
    memset(a, 0, sizeof *a);
    ms_model_args_init(&a->ma);
    a->ckevery = -1;
    a->db_timeout_ms = MS_DB_BUSY_MS;
    ms_train_kt_init(&a->kt);
    char err[512];
    int idx = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        if (c == 'h') { printf(usage, ms_cli_model_help); return 1; }
        if (c == '?') { fprintf(stderr, "memsplit train: see --help\n"); return -1; }
        if (take_opt(a, c, opts[idx].name, err, sizeof err)) { fprintf(stderr, "memsplit train: %s\n", err); return -1; }
    }
    if (optind < argc) { fprintf(stderr, "memsplit train: unexpected argument '%s'\n", argv[optind]); return -1; }
    return 0;
}

/* The config, with the checkpoint flags, checked against the other flags: 0, or -1 (printed). */
static int build_config(train_args *a, ms_config *cfg)
{
    char err[512];
    if (ms_model_args_config(&a->ma, cfg, err, sizeof err)) { fprintf(stderr, "memsplit train: %s\n", err); return -1; }
    if (a->ckdir) snprintf(cfg->checkpoint_dir, sizeof cfg->checkpoint_dir, "%s", a->ckdir);
    if (a->ckevery >= 0) cfg->checkpoint_every = a->ckevery;
    if (a->resume) cfg->resume = 1;
    if (cfg->resume && !cfg->checkpoint_dir[0]) { fprintf(stderr, "memsplit train: --resume needs --checkpoint-dir\n"); return -1; }
    if (a->kt.path && a->plan_path) { fprintf(stderr, "memsplit train: --kernel-times is for one device, not --plan\n"); return -1; }
    if (ms_train_kt_check(&a->kt, cfg, 0, err, sizeof err)) { fprintf(stderr, "memsplit train: %s\n", err); return -1; }
    if (a->inject && !a->plan_path) { fprintf(stderr, "memsplit train: --inject-oom goes with --plan\n"); return -1; }
    return 0;
}

/* --plan FILE: the plan's pipeline over several devices. */
static int train_plan(const ms_config *cfg, const train_args *a, json_t **summary)
{
    ms_train_plan_args pa = { a->plan_path, a->ma.device, a->db_path, cfg->checkpoint_dir[0] ? cfg->checkpoint_dir : NULL,
                              cfg->checkpoint_every, cfg->resume, a->json, a->quiet, a->db_timeout_ms, { 0, 0, 0, 0 } };
    char err[512];
    if (a->inject && ms_arg_inject(a->inject, &pa.inject, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s\n", err);
        return MS_EXIT_USAGE;
    }
    return ms_run_train_plan(cfg, &pa, summary);
}

int ms_cmd_train(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)      /* `-- PROGRAM ...`: the user's own program with a plan */
        if (!strcmp(argv[i], "--")) return ms_cmd_train_program(argc, argv);
    train_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc) return prc > 0 ? MS_EXIT_OK : MS_EXIT_USAGE;
    ms_config cfg;
    if (build_config(&a, &cfg)) return MS_EXIT_USAGE;
    json_t *summary = NULL;
    int code;
    ms_interrupt_arm("memsplit train"); /* a signal stops it between steps, checkpointed (run/interrupt.h) */
    if (a.plan_path) {
        code = train_plan(&cfg, &a, &summary);
    } else {
        char *cmd = ms_cli_cmdline(argc, argv);
        ms_train_args ta = { a.db_path, cmd, a.db_timeout_ms, a.json, a.quiet, &a.kt };
        code = ms_run_train(&cfg, &ta, &summary);
        free(cmd);
    }
    return ms_cli_summary(code, summary);
}
