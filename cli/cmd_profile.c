/* cmd_profile.c — `memsplit profile`: parse → one call into the run floor
 * (run/profile.h; run/program.h for a program) → the JSON summary. */
#include "cli/args.h"
#include "cli/common.h"
#include "run/profile.h"
#include "run/program.h"
#include "reports/db.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: memsplit profile (--preset NAME | --config FILE) [options]\n"
    "       memsplit profile [options] -- PROGRAM [ARGS...]   (your own program;\n"
    "                    memsplit profile --help -- PROGRAM lists its options)\n"
    "\n"
    "Run a training trial on one device and record, per layer, the bytes of\n"
    "parameters, master weights, gradients, optimizer state, saved activations\n"
    "and transients, forward and backward, with times. If the trial runs out of\n"
    "memory, say where and why (layer, phase, bytes requested, what was live),\n"
    "then measure the layers it did not reach in isolation so every layer has a\n"
    "row. On a GPU, CUPTI records every allocation and the profile prints how\n"
    "the allocator's ledger and CUPTI's two ledgers agree.\n"
    "\n"
    "%s"
    "Profile options:\n"
    "  --device DEV         cpu or cuda:N\n"
    "  --gpu-mem SIZE       emulate a device of SIZE bytes (512MiB, 24GiB, ...)\n"
    "  --precision P        fp32, bf16 or fp16: the trial's; or all: the trial runs\n"
    "                       the config's precision and the others are isolated\n"
    "  --batch A[,B]        micro-batch size(s) in sequences: the trial runs at A,\n"
    "                       B is also measured (the planner's two-point fit)\n"
    "  --steps N            training steps in the trial (default 1)\n"
    "  --db FILE            record the run in this SQLite database (created if new)\n"
    MS_CLI_DB_TIMEOUT_HELP
    "  --no-cupti           do not trace with CUPTI on a GPU\n"
    "  --json               print the profile as one JSON object on stdout\n"
    "                       (the table then goes to stderr)\n"
    "  --quiet              no progress lines\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 the model fits; 3 it ran out of memory (diagnosis printed,\n"
    "profile complete); 1 usage or configuration error; 2 runtime error.\n";

static int parse_batches(const char *s, int out[2], int *n)
{
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || a < 1 || a > (1 << 20)) return -1;
    out[0] = (int)a;
    *n = 1;
    if (*end == ',') {
        const char *q = end + 1;
        long b = strtol(q, &end, 10);
        if (end == q || b < 1 || b > (1 << 20) || b == a) return -1;
        out[1] = (int)b;
        *n = 2;
    }
    return *end ? -1 : 0;
}

typedef struct profile_args {
    ms_model_args ma;
    const char *prec;
    int batches[2], n_batch;
    ms_profile_args run;
} profile_args;

enum { O_MODEL = 1000, O_PREC, O_BATCH, O_STEPS, O_DB, O_NOCUPTI, O_JSON, O_QUIET, O_DBTIME };

/* One option into a: 0, or -1 (printed). */
static int take_opt(profile_args *a, int c, const char *name)
{
    char err[512];
    int bad = 0;
    switch (c) {
    case O_MODEL: bad = ms_cli_model_opt(&a->ma, name, optarg, err, sizeof err) < 0; break;
    case O_PREC: a->prec = optarg; break;
    case O_BATCH:
        if (parse_batches(optarg, a->batches, &a->n_batch)) {
            fprintf(stderr, "memsplit profile: --batch takes N or A,B (two different sizes >= 1), got '%s'\n", optarg);
            return -1;
        }
        break;
    case O_STEPS: bad = ms_arg_int("--steps", optarg, 1, 1000000, &a->run.trial.steps, err, sizeof err); break;
    case O_DB: a->run.db_path = optarg; break;
    case O_DBTIME: bad = ms_arg_seconds("--db-timeout", optarg, 3600, &a->run.db_timeout_ms, err, sizeof err); break;
    case O_NOCUPTI: a->run.trial.use_cupti = 0; break;
    case O_JSON: a->run.json = 1; break;
    default: a->run.quiet = 1; break; /* O_QUIET */
    }
    if (bad) fprintf(stderr, "memsplit profile: %s\n", err);
    return bad ? -1 : 0;
}

/* 0 parsed, 1 help printed, -1 usage error (printed). */
static int parse_args(int argc, char **argv, profile_args *a)
{
    static const struct option opts[] = {
        { "preset", required_argument, 0, O_MODEL }, { "config", required_argument, 0, O_MODEL },
        { "set", required_argument, 0, O_MODEL }, { "device", required_argument, 0, O_MODEL },
        { "gpu-mem", required_argument, 0, O_MODEL }, { "data", required_argument, 0, O_MODEL },
        { "precision", required_argument, 0, O_PREC }, { "batch", required_argument, 0, O_BATCH },
        { "steps", required_argument, 0, O_STEPS }, { "db", required_argument, 0, O_DB },
        { "no-cupti", no_argument, 0, O_NOCUPTI }, { "json", no_argument, 0, O_JSON },
        { "quiet", no_argument, 0, O_QUIET }, { "db-timeout", required_argument, 0, O_DBTIME },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    memset(a, 0, sizeof *a);
    ms_model_args_init(&a->ma);
    a->run.trial.steps = 1;
    a->run.trial.use_cupti = 1;
    a->run.db_timeout_ms = MS_DB_BUSY_MS;
    int idx = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        if (c == 'h') { printf(usage, ms_cli_model_help); return 1; }
        if (c == '?') { fprintf(stderr, "memsplit profile: see --help\n"); return -1; }
        if (take_opt(a, c, opts[idx].name)) return -1;
    }
    if (optind < argc) { fprintf(stderr, "memsplit profile: unexpected argument '%s'\n", argv[optind]); return -1; }
    return 0;
}

/* The config, and the trial's precisions and micro-batch sizes: 0, or -1 (printed). */
static int build_config(profile_args *a, ms_config *cfg)
{
    char err[512];
    if (ms_model_args_config(&a->ma, cfg, err, sizeof err)) { fprintf(stderr, "memsplit profile: %s\n", err); return -1; }
    ms_trial_opts *to = &a->run.trial;
    to->precisions[0] = cfg->precision;
    to->n_prec = 1;
    if (a->prec && !strcmp(a->prec, "all")) {
        for (int p = 0; p < 3; p++)
            if (p != (int)cfg->precision) to->precisions[to->n_prec++] = p;
    } else if (a->prec) {
        ms_precision p;
        if (ms_precision_parse(a->prec, &p)) { fprintf(stderr, "memsplit profile: --precision must be fp32, bf16, fp16 or all\n"); return -1; }
        to->precisions[0] = p;
        cfg->precision = p;
    }
    to->batches[0] = a->n_batch ? a->batches[0] : cfg->batch;
    to->batches[1] = a->batches[1];
    to->n_batch = a->n_batch ? a->n_batch : 1;
    if (a->n_batch) cfg->batch = a->batches[0];
    return 0;
}

int ms_cmd_profile(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)      /* `-- PROGRAM ...`: the user's own program */
        if (!strcmp(argv[i], "--")) return ms_cmd_profile_program(argc, argv);
    profile_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc) return prc > 0 ? MS_EXIT_OK : MS_EXIT_USAGE;
    ms_config cfg;
    if (build_config(&a, &cfg)) return MS_EXIT_USAGE;
    char *cmd = ms_cli_cmdline(argc, argv);
    a.run.cmdline = cmd;
    json_t *summary = NULL;
    int code = ms_run_profile(&cfg, &a.run, &summary);
    free(cmd);
    return ms_cli_summary(code, summary);
}
