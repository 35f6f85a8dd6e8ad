/* doctor_program.c — `memsplit doctor [options] -- PROGRAM [ARGS...]`:
 * parse → the whole loop for a user's own program (run/program.h: the
 * trial and its diagnosis, a plan over N devices, the rerun with the plan
 * applied, restarts after an OOM, all under one doctor run) → its JSON. */
#include "cli/args.h"
#include "cli/common.h"
#include "run/program.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/device.h"
#include "vocab/device_name.h"
#include "vocab/errf.h"
#include "vocab/size.h"

static const char usage[] =
    "usage: memsplit doctor --gpus N --gpu-mem SIZE [options] -- PROGRAM [ARGS...]\n"
    "\n"
    "The whole loop for your own PyTorch program: a trial on one device of SIZE\n"
    "(where it runs out and why), a record pass (the program once more, uncapped,\n"
    "each of its layers a stage of its own, so that what a split's crossings cost\n"
    "is measured), a plan that splits its modules over N devices of SIZE (each\n"
    "device's peak the record replayed under the placement), the program rerun\n"
    "with the plan applied (each device's measured peak beside its prediction)\n"
    "and, if the rerun runs out of memory, a new plan that keeps more free and a\n"
    "restart. The program's precision, batch and checkpointing stay its own.\n"
    "Devices: N real GPUs when the machine has them, else N stages on cuda:0 (or\n"
    "on cpu), each held to SIZE.\n"
    "\n"
    "Options:\n"
    "  --gpus N          devices to split over (required)\n"
    "  --gpu-mem SIZE    the capacity of each, the trial's too (required)\n"
    "  --devices LIST    the devices, e.g. cuda:0,cuda:1 or cpu,cpu (default: as above)\n"
    "  --steps N         optimizer steps of the trial (default 2, at least 2)\n"
    "  --train-steps N   stop the rerun after N steps (default: the program runs to its end)\n"
    "  --headroom F      fraction of each device the plan keeps free (default 0.05)\n"
    "  --layers P[,P...] open these modules into units (as in profile; the rerun\n"
    "                    takes the plan's units)\n"
    "  --db FILE         record everything here (default: memsplit.db)\n"
    "  --json            print one JSON object on stdout (trial, plan, train)\n"
    "  --quiet           no progress lines\n"
    "  -h, --help        this text\n"
    "\n"
    "Exit status: 0 trained with the plan; 3 no plan fits (or every restart ran out);\n"
    "1 usage error; 2 the program failed; 130, 143, 129 memsplit was stopped by\n"
    "SIGINT, SIGTERM or SIGHUP (the program too; the runs are recorded interrupted).\n";

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

enum { O_GPUS = 1000, O_MEM, O_DEVICES, O_STEPS, O_TSTEPS, O_HEAD, O_LAYERS, O_DB, O_JSON, O_QUIET };

/* One option into a: 0, or -1 (printed). */
static int take_opt(doctor_args *a, int c)
{
    char err[1536];
    long v;
    switch (c) {
    case O_GPUS:
        if (parse_long_arg("gpus", optarg, 1, MS_MAX_STAGES, &v)) return -1;
        a->gpus = (int)v;
        return 0;
    case O_MEM:
        if (ms_parse_size(optarg, &a->cap, err, sizeof err) || !a->cap) {
            fprintf(stderr, "memsplit doctor: --gpu-mem: %s\n", a->cap ? err : "must be above 0");
            return -1;
        }
        return 0;
    case O_DEVICES: a->devices = optarg; return 0;
    case O_STEPS: return parse_long_arg("steps", optarg, 2, 1000000, &a->steps);   /* run/program.h: 2 or more */
    case O_TSTEPS: return parse_long_arg("train-steps", optarg, 1, 100000000, &a->train_steps);
    case O_HEAD:
        if (!ms_arg_fraction("--headroom", optarg, &a->headroom, err, sizeof err)) return 0;
        fprintf(stderr, "memsplit doctor: %s\n", err);
        return -1;
    case O_LAYERS: a->layers = optarg; return 0;
    case O_DB: a->db_path = optarg; return 0;
    case O_JSON: a->json = 1; return 0;
    default: a->quiet = 1; return 0; /* O_QUIET */
    }
}

/* 0 parsed, 1 help printed, -1 usage error (printed); *dd: argv[*dd] is "--". */
static int parse_args(int argc, char **argv, doctor_args *a, int *dd)
{
    static const struct option opts[] = {
        { "gpus", required_argument, 0, O_GPUS }, { "gpu-mem", required_argument, 0, O_MEM },
        { "devices", required_argument, 0, O_DEVICES }, { "steps", required_argument, 0, O_STEPS },
        { "train-steps", required_argument, 0, O_TSTEPS }, { "headroom", required_argument, 0, O_HEAD },
        { "layers", required_argument, 0, O_LAYERS }, { "db", required_argument, 0, O_DB },
        { "json", no_argument, 0, O_JSON }, { "quiet", no_argument, 0, O_QUIET }, { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 },
    };
    *a = (doctor_args){ .steps = 2, .headroom = MS_PLAN_DEFAULT_HEADROOM, .db_path = "memsplit.db" };
    int c, idx = 0;
    *dd = 1;
    while (*dd < argc && strcmp(argv[*dd], "--")) (*dd)++;
    optind = 1;
    while ((c = getopt_long(*dd, argv, "h", opts, &idx)) != -1) {
        if (c == 'h') { fputs(usage, stdout); return 1; }
        if (c == '?') { fprintf(stderr, "memsplit doctor: see --help\n"); return -1; }
        if (take_opt(a, c)) return -1;
    }
    if (optind < *dd) {
        fprintf(stderr, "memsplit doctor: unexpected argument '%s' before --\n", argv[optind]);
        return -1;
    }
    if (!a->gpus || !a->cap) {
        fprintf(stderr, "memsplit doctor: a program needs --gpus N and --gpu-mem SIZE\n");
        return -1;
    }
    if (*dd + 1 >= argc) {
        fprintf(stderr, "memsplit doctor: no program after --\n");
        return -1;
    }
    return 0;
}

int ms_cmd_doctor_program(int argc, char **argv)
{
    doctor_args a;
    int dd, prc = parse_args(argc, argv, &a, &dd);
    if (prc) return prc > 0 ? MS_EXIT_OK : MS_EXIT_USAGE;
    ms_plan_device devs[MS_MAX_STAGES];
    char err[1536];
    if (build_devices(&a, devs, err, sizeof err)) {
        fprintf(stderr, "memsplit doctor: %s\n", err);
        return MS_EXIT_USAGE;
    }
    char *cmdline = ms_cli_cmdline(argc, argv);
    ms_program_doctor_args da = { .prog = argv + dd + 1, .gpus = a.gpus, .devs = devs, .cap = a.cap,
                                  .steps = a.steps, .train_steps = a.train_steps, .headroom = a.headroom,
                                  .layers = a.layers, .db_path = a.db_path, .cmdline = cmdline, .json = a.json,
                                  .quiet = a.quiet };
    json_t *summary = NULL;
    int code = ms_run_doctor_program(&da, &summary);
    free(cmdline);
    return ms_cli_summary(code, summary);
}
