/* profile_program.c — `memsplit profile [options] -- PROGRAM [ARGS...]`:
 * parse → the trial of a user's own PyTorch program through the bridge
 * (run/program.h: per-module rows, the OOM where the program really dies,
 * recorded like memsplit's own trial) → its JSON. */
#include "cli/common.h"
#include "run/program.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/db.h"
#include "vocab/size.h"

static const char ms_profile_program_usage[] =
    "usage: memsplit profile [options] -- PROGRAM [ARGS...]\n"
    "\n"
    "Run your own PyTorch (or Lightning) program, unchanged, for a short trial\n"
    "and record per module the bytes of parameters, master weights, gradients,\n"
    "optimizer state, activations and transients, forward and backward, with\n"
    "times. If it runs out of memory, say in which module and phase, how many\n"
    "bytes it asked for and what was live. PROGRAM is usually `python train.py`;\n"
    "`bash run.sh` or `torchrun` work too (the bridge rides in the environment).\n"
    "\n"
    "Options:\n"
    "  --gpu-mem SIZE     emulate a device of SIZE bytes (24GiB, 512MiB): on a GPU\n"
    "                     the whole device, CUDA context included; on the CPU an\n"
    "                     accounting cap on the program's tensors\n"
    "  --steps N          optimizer steps in the trial (default 2, at least 2), then\n"
    "                     the program is stopped cleanly (MEMSPLIT_PHASE=trial is\n"
    "                     set meanwhile)\n"
    "  --layers P[,P...]  open these modules (\".\" the root): their children are\n"
    "                     units, whatever their size (default: the units are chosen\n"
    "                     from the module tree and the parameter bytes)\n"
    "  --diagnose-only    GPU: no per-tensor trace (module boundaries, the caching\n"
    "                     allocator's counters and CUPTI only; lowest overhead)\n"
    "  --no-cupti         GPU: do not load CUPTI into the program (its segment\n"
    "                     allocations and frees, beside the tensors, are then not\n"
    "                     recorded; lower overhead)\n"
    "  --no-second-pass   after an OOM, do not run the program again uncapped to\n"
    "                     measure the layers the trial never reached\n"
    "  --no-record-pass   do not run the record pass: after the trial the program\n"
    "                     runs once more, uncapped, each layer a stage of its own,\n"
    "                     so that a plan predicts each stage from what crosses a\n"
    "                     split (docs/program-record.md); without it a plan from\n"
    "                     this profile uses the stage rules. --diagnose-only makes\n"
    "                     none\n"
    "  --ballast-only     GPU: the emulated capacity and nothing else (no hooks, no\n"
    "                     tracking): run the program and say from its traceback in\n"
    "                     which module it died, to compare with the profile\n"
    "  --record-events FILE  write every event line the program sent to FILE\n"
    "                     (a test fixture, a bug report)\n"
    "  --db FILE          record the run in this SQLite database (created if new)\n"
    "  --json             print the profile as one JSON object on stdout (the\n"
    "                     program's own stdout then goes to stderr)\n"
    "  --quiet            no progress lines\n"
    "  -h, --help         this text\n"
    "\n"
    "On the CPU the accounting is exact for the CPU kernels the program runs; it is\n"
    "not a forecast for a GPU, whose kernels differ.\n"
    "\n"
    "Exit status: 0 the program fits; 3 it ran out of memory (diagnosis printed);\n"
    "1 usage error, or a program memsplit refuses (a module name it cannot carry);\n"
    "2 the program could not be profiled, or the profile is partial (it failed or\n"
    "ended before the steps were measured: its own exit status or signal is in\n"
    "the message and in the JSON); 130, 143, 129 memsplit was stopped by SIGINT,\n"
    "SIGTERM or SIGHUP (the program too; the run is recorded interrupted).\n";

typedef struct profile_program_args {
    size_t capacity;
    long steps;
    const char *layers, *db_path, *record;
    int diag, second, record_pass, json, quiet, ballast_only, no_cupti;
    int dd;                    /* argv[dd] is "--" */
} profile_program_args;

enum { O_GPUMEM = 1000, O_STEPS, O_LAYERS, O_DIAG, O_NOSECOND, O_NORECORD, O_DB, O_JSON, O_QUIET, O_BALLAST, O_RECORD, O_NOCUPTI };

/* One option into a: 0, or -1 (printed). */
static int take_opt(profile_program_args *a, int c)
{
    char err[1024];
    switch (c) {
    case O_GPUMEM:
        if (ms_parse_size(optarg, &a->capacity, err, sizeof err) || a->capacity == 0) {
            fprintf(stderr, "memsplit profile: --gpu-mem: %s\n", a->capacity == 0 && !err[0] ? "must be above 0" : err);
            return -1;
        }
        return 0;
    case O_STEPS: {
        char *end;
        a->steps = strtol(optarg, &end, 10);
        if (!*optarg || *end || a->steps < 2 || a->steps > 1000000) {
            fprintf(stderr, "memsplit profile: --steps takes a whole number from 2 to 1000000 (the optimizer's state, "
                    "made in the first step, is live from the second on), got '%s'\n", optarg);
            return -1;
        }
        return 0;
    }
    case O_LAYERS: a->layers = optarg; return 0;
    case O_DIAG: a->diag = 1; return 0;
    case O_NOSECOND: a->second = 0; return 0;
    case O_NORECORD: a->record_pass = 0; return 0;
    case O_DB: a->db_path = optarg; return 0;
    case O_JSON: a->json = 1; return 0;
    case O_QUIET: a->quiet = 1; return 0;
    case O_BALLAST: a->ballast_only = 1; return 0;
    case O_NOCUPTI: a->no_cupti = 1; return 0;
    default: a->record = optarg; return 0; /* O_RECORD */
    }
}

/* 0 parsed, 1 help printed, -1 usage error (printed). */
static int parse_args(int argc, char **argv, profile_program_args *a)
{
    static const struct option opts[] = {
        { "gpu-mem", required_argument, 0, O_GPUMEM }, { "steps", required_argument, 0, O_STEPS },
        { "layers", required_argument, 0, O_LAYERS }, { "diagnose-only", no_argument, 0, O_DIAG },
        { "no-second-pass", no_argument, 0, O_NOSECOND }, { "no-record-pass", no_argument, 0, O_NORECORD },
        { "no-cupti", no_argument, 0, O_NOCUPTI },
        { "db", required_argument, 0, O_DB },
        { "json", no_argument, 0, O_JSON }, { "quiet", no_argument, 0, O_QUIET },
        { "ballast-only", no_argument, 0, O_BALLAST }, { "record-events", required_argument, 0, O_RECORD },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    memset(a, 0, sizeof *a);
    a->steps = 2;
    a->layers = "";
    a->second = 1;
    a->record_pass = 1;
    a->dd = 1;
    while (a->dd < argc && strcmp(argv[a->dd], "--")) a->dd++;
    int c, idx = 0;
    optind = 1;
    while ((c = getopt_long(a->dd, argv, "h", opts, &idx)) != -1) {
        if (c == 'h') { fputs(ms_profile_program_usage, stdout); return 1; }
        if (c == '?') { fprintf(stderr, "memsplit profile: see --help\n"); return -1; }
        if (take_opt(a, c)) return -1;
    }
    if (optind < a->dd) {
        fprintf(stderr, "memsplit profile: unexpected argument '%s' before --\n", argv[optind]);
        return -1;
    }
    if (a->dd + 1 >= argc) {
        fprintf(stderr, "memsplit profile: no program after --; e.g. memsplit profile -- python train.py\n");
        return -1;
    }
    return 0;
}

/* The trial, recorded in --db, its events in --record-events. */
static int trial(int argc, char **argv, const profile_program_args *a, json_t **summary)
{
    char err[1024];
    FILE *record = NULL;
    if (a->record && !(record = fopen(a->record, "w"))) {
        fprintf(stderr, "memsplit profile: --record-events %s: %s\n", a->record, strerror(errno));
        return MS_EXIT_RUNTIME;
    }
    ms_db *db = NULL;
    if (a->db_path && !(db = ms_db_open(a->db_path, 1, err, sizeof err))) {
        fprintf(stderr, "memsplit profile: %s\n", err);
        if (record) fclose(record);
        return MS_EXIT_RUNTIME;
    }
    char *cmdline = ms_cli_cmdline(argc, argv);
    ms_program_trial_args ta = { .prog = argv + a->dd + 1, .capacity = a->capacity, .steps = a->steps,
                                 .layers = a->layers, .diag = a->diag, .second = a->second,
                                 .record_pass = a->record_pass && !a->diag, .json = a->json,
                                 .quiet = a->quiet, .no_cupti = a->no_cupti, .db = db, .cmdline = cmdline,
                                 .who = "profile", .record = record };
    ms_program_trial *r = calloc(1, sizeof *r);
    int code = r ? ms_program_run_trial(&ta, r) : MS_EXIT_RUNTIME;
    free(cmdline);
    if (r && db && r->run > 0 && !a->quiet && r->recorded)
        fprintf(stderr, "profile: recorded as run %lld in %s\n", (long long)r->run, a->db_path);
    if (a->json && r) *summary = ms_program_trial_json(r);
    if (db) ms_db_close(db);
    if (r) ms_program_trial_free(r);
    free(r);
    if (record && fclose(record) != 0) {
        fprintf(stderr, "memsplit profile: --record-events: %s\n", strerror(errno));
        code = MS_EXIT_RUNTIME;
    }
    return code;
}

int ms_cmd_profile_program(int argc, char **argv)
{
    profile_program_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc) return prc > 0 ? MS_EXIT_OK : MS_EXIT_USAGE;
    json_t *summary = NULL;
    int code = a.ballast_only ? ms_program_ballast_only(argv + a.dd + 1, a.capacity, a.json, a.quiet, &summary)
                              : trial(argc, argv, &a, &summary);
    return ms_cli_summary(code, summary);
}
