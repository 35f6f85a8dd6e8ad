/* cmd_plan.c — `memsplit plan` (see cmd_plan.h): parse → one call into
 * the run floor (run/plan.h), which reads the profile, plans, shows and
 * stores; the devices come from the flags here, once the profile is read. */
#include "cli/cmd_plan.h"
#include "cli/args.h"
#include "cli/common.h"
#include "run/plan.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/db.h"
#include "vocab/device_name.h"
#include "vocab/profile_json.h"
#include "vocab/size.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: memsplit plan (--profile FILE | --db FILE [--run ID]) [--gpus N]\n"
            "           [--gpu-mem SIZE[,SIZE...]] [--devices LIST] [--precision P]\n"
            "           [--schedule S] [--batch B] [--micro-batch U] [--recompute M]\n"
            "           [--max-stages K] [--headroom F] [--link-gbps X] [--replicas D]\n"
            "           [--zero Z] [--bus-gbps X] [--comm-reserve SIZE] [-o FILE]\n"
            "           [--json | --verbose]\n"
            "\n"
            "Finds the split of a profiled model over GPUs with the smallest predicted step\n"
            "time such that every GPU's predicted peak fits its capacity minus the headroom.\n"
            "It searches exactly over the number of stages (fewer GPUs than given if that is\n"
            "faster), which GPUs hold them and in what order, the split points, the precision\n"
            "policy, the schedule, the micro-batch size and per-stage recompute; a flag fixes\n"
            "an option instead. Plans within 3%% of the fastest count as equal (measured\n"
            "times are noisy); among them it takes the trial's precision, then fewer stages,\n"
            "then no recompute, then the lower peak. Prints a table (stage, device, layers,\n"
            "predicted peak against capacity) and a paragraph of reasoning. The model behind\n"
            "the predictions: docs/planner.md; the plan format: docs/plan-format.md.\n"
            "\n"
            "Input (one of):\n"
            "  --profile FILE       a profile as `memsplit profile --json` prints it\n"
            "                       (\"-\": stdin)\n"
            "  --db FILE            a run database: plan from the profile stored under\n"
            "                       --run ID (default: the newest) and store the plan there\n"
            MS_CLI_DB_TIMEOUT_HELP
            "  --run ID             the run whose profile to use (with --db)\n"
            "Devices:\n"
            "  --gpus N             number of GPUs, 1..%d (default: as many as --gpu-mem\n"
            "                       lists, else the GPUs this machine has, with their memory)\n"
            "  --gpu-mem SIZE[,...] capacity of each GPU, e.g. 40GiB, or one per GPU for\n"
            "                       mixed GPUs (80GiB,40GiB); a list's length must equal\n"
            "                       --gpus if both are given (default: the trial's capacity)\n"
            "  --devices LIST       device names: cuda:0,cuda:1, or cuda:0,cuda:0 (also\n"
            "                       cuda:0/v0,cuda:0/v1) for virtual devices on one GPU, cpu\n"
            "                       for a program's stage on the CPU (default: cuda:0 ...\n"
            "                       cuda:N-1; cpu/v0 ... cpu/vN-1 for a profile made on the\n"
            "                       CPU of a machine with no GPU)\n"
            "Options (each open unless given):\n"
            "  --precision P        fp32 | bf16 | fp16 | any (default: any the profile has)\n"
            "  --schedule S         gpipe | 1f1b | any (default any)\n"
            "  --batch B            the global batch: sequences per optimizer step (default:\n"
            "                       the trial's); train's and profile's --batch is the\n"
            "                       micro-batch\n"
            "  --micro-batch U      sequences per micro-batch, dividing B (default: any)\n"
            "  --recompute M        auto | never | always (default auto: a stage recomputes\n"
            "                       only when it would not fit otherwise)\n"
            "  --max-stages K       at most K stages, 1..%d (default: one per GPU)\n"
            "  --headroom F         fraction of each GPU kept free, 0.05 or 5%% (default %g)\n"
            "  --link-gbps X        stage-to-stage bandwidth in Gbit/s (default %g)\n"
            "  --replicas D         data-parallel copies of the pipeline: a number, or any\n"
            "                       (every D dividing the micro-batches, stages x D <= GPUs);\n"
            "                       default 1, the one pipeline a single process runs (D > 1\n"
            "                       runs under mpirun)\n"
            "  --zero Z             on | off | any: ZeRO-1, AdamW state sharded over the\n"
            "                       replicas (default any)\n"
            "  --bus-gbps X         all-reduce bus bandwidth in Gbit/s (default %g;\n"
            "                       bench/nccl_bw measures it)\n"
            "  --comm-reserve SIZE  NCCL's own buffers per GPU of a multi-GPU run (default 0;\n"
            "                       bench/nccl_bw measures it)\n"
            "Output:\n"
            "  -o FILE              also write the plan JSON to FILE\n"
            "  --verbose            the table with bytes per category too (wider)\n"
            "  --json               print only JSON on stdout: the plan, or when nothing\n"
            "                       fits {\"feasible\": false, \"message\": ..., ...}\n"
            "  -h, --help           this help\n"
            "\n"
            "Exit status: 0 a plan was found; 1 usage error, or the profile cannot be read\n"
            "or is invalid; 2 the database cannot be opened, read or written, or -o FILE\n"
            "cannot be written; 3 no plan fits (the message says what would: how many\n"
            "GPUs, how much memory, or which option).\n",
            MS_MAX_DEVICES, MS_MAX_STAGES, MS_PLAN_DEFAULT_HEADROOM, MS_PLAN_DEFAULT_LINK_GBPS,
            MS_PLAN_DEFAULT_BUS_GBPS);
}

typedef struct {
    const char *profile, *db, *out, *gpu_mem, *devices;
    int64_t run;
    int gpus, json, verbose, db_timeout_ms;
    ms_plan_opts opts;
    int (*detect)(uint64_t *caps, int max);
} plan_args;

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "memsplit plan: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see memsplit plan --help)\n");
    return -1;
}

enum { O_PROFILE = 256, O_DB, O_RUN, O_GPUS, O_GPU_MEM, O_DEVICES, O_PREC, O_SCHED, O_BATCH, O_MICRO,
       O_RECOMPUTE, O_MAX_STAGES, O_HEADROOM, O_LINK, O_JSON, O_VERBOSE, O_DBTIME, O_REPLICAS, O_ZERO, O_BUS,
       O_COMM };

/* One of the input, device and output options into a: 1 taken, 0 not one
 * of them, -1 usage error (printed). */
static int take_io_opt(plan_args *a, int c, const char *arg)
{
    int v;
    char e[256];
    switch (c) {
    case 'o': a->out = arg; break;
    case O_PROFILE: a->profile = arg; break;
    case O_DB: a->db = arg; break;
    case O_RUN:
        if (ms_arg_int("--run", arg, 1, INT32_MAX, &v, e, sizeof e)) return bad("%s", e);
        a->run = v;
        break;
    case O_GPUS:
        if (ms_arg_int("--gpus", arg, 1, MS_MAX_DEVICES, &a->gpus, e, sizeof e)) return bad("%s", e);
        break;
    case O_GPU_MEM: a->gpu_mem = arg; break;
    case O_DEVICES: a->devices = arg; break;
    case O_JSON: a->json = 1; break;
    case O_VERBOSE: a->verbose = 1; break;
    case O_DBTIME:
        if (ms_arg_seconds("--db-timeout", arg, 3600, &a->db_timeout_ms, e, sizeof e)) return bad("%s", e);
        break;
    default: return 0;
    }
    return 1;
}

/* One of the search's options into a->opts: 0, or -1 (printed). */
static int take_search_opt(plan_args *a, int c, const char *arg)
{
    char e[256];
    switch (c) {
    case O_PREC: {
        ms_precision p;
        if (!strcmp(arg, "any")) a->opts.precision = -1;
        else if (ms_precision_parse(arg, &p) == 0) a->opts.precision = (int)p;
        else return bad("--precision '%s' is not fp32, bf16, fp16 or any", arg);
        break;
    }
    case O_SCHED:
        if (!strcmp(arg, "any")) a->opts.schedule = -1;
        else if ((a->opts.schedule = ms_schedule_parse(arg)) < 0)
            return bad("--schedule '%s' is not gpipe, 1f1b or any", arg);
        break;
    case O_BATCH:
        if (ms_arg_int("--batch", arg, 1, MS_PROFILE_MAX_BATCH, &a->opts.global_batch, e, sizeof e))
            return bad("%s", e);
        break;
    case O_MICRO:
        if (!strcmp(arg, "any")) a->opts.micro_batch = 0;
        else if (ms_arg_int("--micro-batch", arg, 1, MS_PROFILE_MAX_BATCH, &a->opts.micro_batch, e, sizeof e))
            return bad("%s", e);
        break;
    case O_RECOMPUTE:
        if ((a->opts.recompute = ms_recompute_mode_parse(arg)) < 0)
            return bad("--recompute '%s' is not auto, never or always", arg);
        break;
    case O_MAX_STAGES:
        if (ms_arg_int("--max-stages", arg, 1, MS_MAX_STAGES, &a->opts.max_stages, e, sizeof e)) return bad("%s", e);
        break;
    case O_HEADROOM:
        if (ms_arg_fraction("--headroom", arg, &a->opts.headroom, e, sizeof e)) return bad("%s", e);
        break;
    case O_LINK:
        if (ms_arg_number("--link-gbps", arg, &a->opts.link_gbps, e, sizeof e) ||
            !(a->opts.link_gbps > 0 && a->opts.link_gbps < 1e9))
            return bad("--link-gbps '%s' is not a positive bandwidth", arg);
        break;
    case O_REPLICAS:
        if (!strcmp(arg, "any")) a->opts.replicas = 0;
        else if (ms_arg_int("--replicas", arg, 1, MS_MAX_DEVICES, &a->opts.replicas, e, sizeof e))
            return bad("%s (a count or any)", e);
        break;
    case O_ZERO:
        if (!strcmp(arg, "any")) a->opts.zero = -1;
        else if (!strcmp(arg, "on")) a->opts.zero = 1;
        else if (!strcmp(arg, "off")) a->opts.zero = 0;
        else return bad("--zero '%s' is not on, off or any", arg);
        break;
    case O_BUS:
        if (ms_arg_number("--bus-gbps", arg, &a->opts.bus_gbps, e, sizeof e) ||
            !(a->opts.bus_gbps > 0 && a->opts.bus_gbps < 1e9))
            return bad("--bus-gbps '%s' is not a positive bandwidth", arg);
        break;
    case O_COMM: {
        size_t sz;
        char e2[128];
        if (ms_parse_size(arg, &sz, e2, sizeof e2)) return bad("--comm-reserve: %s", e2);
        a->opts.comm_reserve = sz;
        break;
    }
    }
    return 0;
}

/* One option (not -h, :, ?) into a: 0, or -1 (printed). */
static int take_opt(plan_args *a, int c, const char *arg)
{
    int rc = take_io_opt(a, c, arg);
    return rc < 0 ? -1 : rc > 0 ? 0 : take_search_opt(a, c, arg);
}

/* 0 parsed, 1 help printed, -1 usage error (printed) */
static int parse_args(int argc, char **argv, plan_args *a)
{
    static const struct option opts[] = {
        {"profile", required_argument, NULL, O_PROFILE}, {"db", required_argument, NULL, O_DB},
        {"run", required_argument, NULL, O_RUN}, {"gpus", required_argument, NULL, O_GPUS},
        {"gpu-mem", required_argument, NULL, O_GPU_MEM}, {"devices", required_argument, NULL, O_DEVICES},
        {"precision", required_argument, NULL, O_PREC}, {"schedule", required_argument, NULL, O_SCHED},
        {"batch", required_argument, NULL, O_BATCH}, {"micro-batch", required_argument, NULL, O_MICRO},
        {"recompute", required_argument, NULL, O_RECOMPUTE}, {"max-stages", required_argument, NULL, O_MAX_STAGES},
        {"headroom", required_argument, NULL, O_HEADROOM}, {"link-gbps", required_argument, NULL, O_LINK},
        {"json", no_argument, NULL, O_JSON}, {"verbose", no_argument, NULL, O_VERBOSE},
        {"db-timeout", required_argument, NULL, O_DBTIME},
        {"replicas", required_argument, NULL, O_REPLICAS}, {"zero", required_argument, NULL, O_ZERO},
        {"bus-gbps", required_argument, NULL, O_BUS}, {"comm-reserve", required_argument, NULL, O_COMM},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    a->db_timeout_ms = MS_DB_BUSY_MS;
    ms_plan_opts_default(&a->opts);
    optind = 0; /* glibc: full re-initialisation */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        if (c == 'h') { usage(stdout); return 1; }
        if (c == ':') return bad("%s needs a value", argv[optind - 1]);
        if (c == '?') return bad("unknown option '%s'", argv[optind - 1]);
        if (take_opt(a, c, optarg)) return -1;
    }
    if (optind < argc) return bad("unexpected argument '%s'", argv[optind]);
    if (!a->profile == !a->db) return bad("%s", "give exactly one of --profile FILE or --db FILE");
    if (a->run && !a->db) return bad("%s", "--run needs --db");
    return 0;
}

/* The devices: capacities from --gpu-mem (one or a list), the count from
 * --gpus or the list, names from --devices. 0 or -1 (printed). */
static int build_devices(const plan_args *a, const ms_profile *prof, ms_plan_device **out, int *n_out)
{
    uint64_t caps[MS_MAX_DEVICES], det[MS_MAX_DEVICES];
    int n_caps = 0, n_det = 0;
    char err[256];
    if (a->gpu_mem && ms_arg_sizes("--gpu-mem", a->gpu_mem, caps, MS_MAX_DEVICES, &n_caps, err, sizeof err))
        return bad("%s", err);
    if (a->detect && n_caps <= 1 && !(a->gpus && n_caps == 1)) n_det = a->detect(det, MS_MAX_DEVICES);
    int n;
    if (n_caps > 1) {
        if (a->gpus && a->gpus != n_caps) {
            fprintf(stderr, "memsplit plan: --gpus %d but --gpu-mem lists %d capacities\n", a->gpus, n_caps);
            return -1;
        }
        n = n_caps;
    } else if (a->gpus) {
        n = a->gpus;
    } else if (n_caps == 1) {
        n = n_det > 0 ? n_det : 1;
    } else if (n_det > 0) {
        n = n_det;
    } else {
        return bad("%s", "no GPUs to plan for: give --gpus N (and --gpu-mem SIZE)");
    }
    ms_plan_device *d = calloc((size_t)n, sizeof *d);
    if (!d) return bad("%s", "out of memory");
    /* a profile made on the CPU, on a machine with no GPU: its plan is for
     * this machine's CPU (virtual devices that train --plan runs here), not
     * for GPUs it does not have; --devices names any others */
    const int on_cpu = n_det == 0 && !strncmp(prof->device, "cpu", 3);
    for (int i = 0; i < n; i++) {
        if (n_caps) d[i].capacity = caps[n_caps > 1 ? i : 0];
        else if (i < n_det) d[i].capacity = det[i];
        else d[i].capacity = prof->capacity; /* the trial's GPU */
        if (!d[i].capacity) {
            free(d);
            return bad("%s", "the profile records no capacity: give --gpu-mem SIZE");
        }
        if (on_cpu) snprintf(d[i].name, sizeof d[i].name, "cpu/v%d", i);
        else snprintf(d[i].name, sizeof d[i].name, "cuda:%d", i);
    }
    if (a->devices) {
        char *copy = strdup(a->devices), *save = NULL;
        int k = 0;
        int bad_name = 0;
        for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save), k++) {
            if (!ms_device_label_valid(tok) && !bad_name++)
                fprintf(stderr, "memsplit plan: --devices: '%s' is not a device (cpu or cuda:N, or cpu/vK, cuda:N/vK "
                        "for a virtual one)\n", tok);
            if (k < n) snprintf(d[k].name, sizeof d[k].name, "%.31s", tok);
        }
        free(copy);
        if (bad_name) {
            free(d);
            return -1;
        }
        if (k != n) {
            fprintf(stderr, "memsplit plan: --devices names %d device%s for %d GPU%s\n", k, k == 1 ? "" : "s", n,
                    n == 1 ? "" : "s");
            free(d);
            return -1;
        }
    }
    *out = d;
    *n_out = n;
    return 0;
}

/* run/plan.h's devices(): the flags' devices, once the profile is read. */
static int devices_of(void *user, const ms_profile *prof, ms_plan_device **out, int *n)
{
    return build_devices(user, prof, out, n);
}

int ms_cmd_plan_ex(int argc, char **argv, int (*detect)(uint64_t *caps, int max))
{
    plan_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc > 0 ? MS_EXIT_OK : MS_EXIT_USAGE;
    a.detect = detect;
    char *cmd = ms_cli_cmdline(argc, argv);
    ms_plan_request rq = { .profile = a.profile, .db = a.db, .out = a.out, .run = a.run, .json = a.json,
                           .verbose = a.verbose, .db_timeout_ms = a.db_timeout_ms, .opts = a.opts, .cmdline = cmd,
                           .devices = devices_of, .user = &a };
    rc = ms_run_plan(&rq);
    free(cmd);
    return rc;
}

int ms_cmd_plan(int argc, char **argv) { return ms_cmd_plan_ex(argc, argv, NULL); }
