/* train_program.c — `memsplit train --plan plan.json -- PROGRAM [ARGS...]`:
 * parse → the user's program rerun with the plan's stages placed on their
 * devices by the bridge (run/program.h; docs/bridge.md, "Applying a plan")
 * → its JSON. */
#include "cli/common.h"
#include "run/program.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: memsplit train --plan FILE [options] -- PROGRAM [ARGS...]\n"
    "\n"
    "Run your own PyTorch program with a plan that `memsplit plan` made from its\n"
    "profile: each stage's modules are placed on the stage's device (after every\n"
    "placement your framework makes), inputs follow the modules across stages and\n"
    "the model's outputs come back to the first device, so the program's loss,\n"
    "metrics and logging work unchanged. One stage works at a time (sequential\n"
    "model parallelism). Stages that share one physical device (cpu,cpu or\n"
    "cuda:0,cuda:0, for testing) are each held to their own capacity.\n"
    "\n"
    "Options:\n"
    "  --plan FILE     the plan (required; made for this program)\n"
    "  --steps N       stop the program cleanly after N optimizer steps (default: let\n"
    "                  it run to its end); MEMSPLIT_PHASE=train is set\n"
    "  --db FILE       record the run (steps, losses, per-device peaks) in this database\n"
    "  --json          print the outcome as one JSON object on stdout (the program's\n"
    "                  own stdout then goes to stderr)\n"
    "  --quiet         no progress lines\n"
    "  -h, --help      this text\n"
    "\n"
    "Exit status: 0 trained; 3 a device ran out of memory; 1 usage error (a plan for\n"
    "another program, more stages than GPUs); 2 the program failed; 130, 143, 129\n"
    "memsplit was stopped by SIGINT, SIGTERM or SIGHUP (the program too; the run is\n"
    "recorded interrupted).\n";

/* 0 parsed, 1 help printed, -1 usage error (printed); *dd: argv[*dd] is "--". */
static int parse_args(int argc, char **argv, ms_train_program_args *a, int *dd)
{
    enum { O_PLAN = 1000, O_STEPS, O_DB, O_JSON, O_QUIET };
    static const struct option opts[] = {
        { "plan", required_argument, 0, O_PLAN }, { "steps", required_argument, 0, O_STEPS },
        { "db", required_argument, 0, O_DB }, { "json", no_argument, 0, O_JSON },
        { "quiet", no_argument, 0, O_QUIET }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    memset(a, 0, sizeof *a);
    *dd = 1;
    while (*dd < argc && strcmp(argv[*dd], "--")) (*dd)++;
    int c, idx = 0;
    optind = 1;
    while ((c = getopt_long(*dd, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case O_PLAN: a->plan_path = optarg; break;
        case O_STEPS: {
            char *end;
            a->steps = strtol(optarg, &end, 10);
            if (!*optarg || *end || a->steps < 1 || a->steps > 100000000) {
                fprintf(stderr, "memsplit train: --steps takes a whole number from 1 to 100000000, got '%s'\n", optarg);
                return -1;
            }
            break;
        }
        case O_DB: a->db_path = optarg; break;
        case O_JSON: a->json = 1; break;
        case O_QUIET: a->quiet = 1; break;
        case 'h': fputs(usage, stdout); return 1;
        default: fprintf(stderr, "memsplit train: see --help\n"); return -1;
        }
    }
    if (optind < *dd) {
        fprintf(stderr, "memsplit train: with a program, the options are --plan, --steps, --db, --json and --quiet "
                        "(got '%s')\n", argv[optind]);
        return -1;
    }
    if (!a->plan_path) {
        fprintf(stderr, "memsplit train: a program needs --plan FILE (memsplit plan makes one from its profile)\n");
        return -1;
    }
    if (*dd + 1 >= argc) {
        fprintf(stderr, "memsplit train: no program after --\n");
        return -1;
    }
    return 0;
}

int ms_cmd_train_program(int argc, char **argv)
{
    ms_train_program_args a;
    int dd, prc = parse_args(argc, argv, &a, &dd);
    if (prc) return prc > 0 ? MS_EXIT_OK : MS_EXIT_USAGE;
    a.prog = argv + dd + 1;
    json_t *summary = NULL;
    int code = ms_run_train_program(&a, &summary);
    return ms_cli_summary(code, summary);
}
