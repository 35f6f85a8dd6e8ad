/* rank_main.c — memsplit-rank, the one binary that links libmpi: what
 * mpirun (or srun) starts once per rank, directly or through memsplit,
 * which hands a `train` under a launcher over to it (run/launch_env.h).
 * A front end like memsplit's: parse and check on every rank, then every
 * rank agrees on one job (run/rank_agree.h: a rank that refused alone, or
 * runs another plan, config, steps, seed or data, stops them all, and only
 * rank 0 speaks) → the devices checked (mpi/launch_check.h) → one call
 * into the run floor (run/rank_train.h), with the MPI world of
 * mpi/mpi_world.h. */
#include "cli/args.h"
#include "cli/common.h"
#include "mpi/launch_check.h"
#include "mpi/mpi_world.h"
#include "run/interrupt.h"
#include "run/rank_agree.h"
#include "run/rank_train.h"
#include "run/rerun.h"
#include "reports/db.h"
#include "vocab/plan_json.h"
#include "vocab/plan_replicas.h"

#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

static const char main_usage[] =
    "usage: mpirun -np N memsplit-rank train --plan FILE (--preset NAME | --config FILE) [options]\n"
    "       (mpirun -np N memsplit train --plan FILE ... runs this binary)\n"
    "One rank of a plan's p stages x d replicas; see memsplit-rank train --help.\n";

static const char usage[] =
    "usage: mpirun -np N memsplit train --plan FILE (--preset NAME | --config FILE) [options]\n"
    "\n"
    "One rank per device: rank r runs stage r %% p of replica r / p of the plan's\n"
    "p stages x d replicas, so N must be p * d. Rank 0 prints progress, writes the\n"
    "database and the JSON summary.\n"
    "\n"
    "%s"
    "Rank options:\n"
    "  --plan FILE          the plan (memsplit plan -o FILE); required\n"
    "  --device DEV         cpu: every rank on the CPU backend (a device of the\n"
    "                       plan's capacity each); cuda:K: every rank on GPU K\n"
    "                       (refused: two ranks may not share a GPU); default:\n"
    "                       GPU <rank on its node> where there are GPUs, else cpu\n"
    "  --db FILE            rank 0 records the run, its steps and every rank's peak\n"
    "  --db-run ID          record into this existing run (memsplit doctor's)\n"
    MS_CLI_DB_TIMEOUT_HELP
    "  --checkpoint-dir DIR checkpoints there, as one part per stage and a manifest\n"
    "                       (step-NNNNNNNN.ckpt/); the newest two are kept\n"
    "  --checkpoint-every K a checkpoint every K steps (default: only at the end)\n"
    "  --resume             continue from the newest checkpoint in DIR, written by\n"
    "                       any layout (one process, a pipeline, other ranks)\n"
    "  --json               rank 0 prints one JSON summary object on stdout\n"
    "  --quiet              no progress lines\n"
    "  --inject-kill S:R    testing aid: in step S, rank R kills itself (SIGKILL) at\n"
    "                       its first transfer to another rank\n"
    "  --inject-fail S:R    testing aid: rank R fails alone before step S, as a\n"
    "                       failed step would (exit 2)\n"
    "  -h, --help           this text\n"
    "\n"
    "Every rank checks its own arguments and the ranks agree on one job (plan,\n"
    "config, steps, seed, data, checkpoint options) before anything else: ranks\n"
    "that disagree all refuse, naming the ranks and both values.\n"
    "\n"
    "Exit status: 0 trained; 1 usage error, a launch that does not match the\n"
    "plan, or ranks that disagree; 2 runtime error; 3 out of memory.\n";

typedef struct rank_args {
    ms_model_args ma;
    const char *plan;
    ms_rank_opts o;
} rank_args;

enum { O_MODEL = 1000, O_PLAN, O_DB, O_DBRUN, O_JSON, O_QUIET, O_KILL, O_CKDIR, O_CKEVERY, O_RESUME, O_DBTIME, O_FAIL };

/* A whole number in [lo, hi] from s: 0, or -1. */
static int whole(const char *s, long lo, long hi, long *out)
{
    char *end;
    *out = strtol(s, &end, 10);
    return !*s || *end || *out < lo || *out > hi ? -1 : 0;
}

/* One option into a: 0, or -1 with err. */
static int take_opt(rank_args *a, int c, const char *name, char *err, size_t errlen)
{
    ms_rank_opts *o = &a->o;
    switch (c) {
    case O_MODEL: return ms_cli_model_opt(&a->ma, name, optarg, err, errlen) < 0 ? -1 : 0;
    case O_PLAN: a->plan = optarg; return 0;
    case O_DB: o->db = optarg; return 0;
    case O_DBRUN:
        if (!whole(optarg, 1, LONG_MAX, &o->db_run)) return 0;
        snprintf(err, errlen, "--db-run needs a run id");
        return -1;
    case O_CKDIR: o->ckdir = optarg; return 0;
    case O_CKEVERY:
        if (!whole(optarg, 0, 1000000000, &o->ckevery)) return 0;
        snprintf(err, errlen, "--checkpoint-every needs N >= 0");
        return -1;
    case O_RESUME: o->resume = 1; return 0;
    case O_DBTIME: return ms_arg_seconds("--db-timeout", optarg, 3600, &o->db_timeout_ms, err, errlen);
    case O_JSON: o->json = 1; return 0;
    case O_QUIET: o->quiet = 1; return 0;
    case O_KILL: return ms_arg_step_rank("--inject-kill", optarg, &o->kill_step, &o->kill_rank, err, errlen);
    default: return ms_arg_step_rank("--inject-fail", optarg, &o->fail_step, &o->fail_rank, err, errlen); /* O_FAIL */
    }
}

/* What the options cannot be without: 0, or -1 with err. */
static int check_args(const rank_args *a, char *err, size_t errlen)
{
    if (a->o.resume && !a->o.ckdir) snprintf(err, errlen, "--resume needs --checkpoint-dir");
    else if (!a->plan) snprintf(err, errlen, "under mpirun, train needs --plan FILE (one rank per device)");
    else return 0;
    return -1;
}

/* 0 parsed, -1 help printed (on rank 0), or the exit status of a usage
 * error with its message in err (the ranks agree before anyone says it). */
static int parse(int argc, char **argv, int rank, rank_args *a, char *err, size_t errlen)
{
    static const struct option opts[] = {
        { "preset", required_argument, 0, O_MODEL }, { "config", required_argument, 0, O_MODEL },
        { "set", required_argument, 0, O_MODEL }, { "device", required_argument, 0, O_MODEL },
        { "precision", required_argument, 0, O_MODEL }, { "steps", required_argument, 0, O_MODEL },
        { "data", required_argument, 0, O_MODEL }, { "plan", required_argument, 0, O_PLAN },
        { "db", required_argument, 0, O_DB }, { "db-run", required_argument, 0, O_DBRUN },
        { "json", no_argument, 0, O_JSON }, { "quiet", no_argument, 0, O_QUIET },
        { "inject-kill", required_argument, 0, O_KILL }, { "inject-fail", required_argument, 0, O_FAIL },
        { "help", no_argument, 0, 'h' },
        { "checkpoint-dir", required_argument, 0, O_CKDIR }, { "checkpoint-every", required_argument, 0, O_CKEVERY },
        { "resume", no_argument, 0, O_RESUME }, { "db-timeout", required_argument, 0, O_DBTIME }, { 0, 0, 0, 0 },
    };
    memset(a, 0, sizeof *a);
    ms_model_args_init(&a->ma);
    a->o.kill_step = a->o.fail_step = -1;
    a->o.db_timeout_ms = MS_DB_BUSY_MS;
    int idx = 0, c;
    optind = 1;
    opterr = rank == 0;
    err[0] = 0;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        if (c == 'h') {
            if (rank == 0) printf(usage, ms_cli_model_help);
            return -1;
        }
        if (c == '?') {
            snprintf(err, errlen, "an option it does not take, or one without its value (see memsplit train --help)");
            return MS_EXIT_USAGE;
        }
        if (take_opt(a, c, opts[idx].name, err, errlen)) return MS_EXIT_USAGE;
    }
    if (optind < argc) snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
    else if (check_args(a, err, errlen) == 0) return 0;
    return MS_EXIT_USAGE;
}

/* The config, the plan and the launch's size, checked on this rank: 0, or
 * the exit status with err. */
static int check_here(rank_args *a, ms_config *cfg, ms_plan *plan, char *err, size_t errlen)
{
    if (ms_model_args_config(&a->ma, cfg, err, errlen)) return MS_EXIT_USAGE;
    if (ms_plan_load_json(a->plan, plan, err, errlen)) return MS_EXIT_USAGE;
    if (ms_rerun_check(cfg, plan, NULL, err, errlen)) return MS_EXIT_USAGE; /* another model: both values */
    if (ms_launch_check_size(plan, err, errlen)) return MS_EXIT_USAGE;
    return 0;
}

/* The device and the GPU claims, alike on every rank (collective): 0, or
 * the exit status (said on rank 0). */
static int check_devices(const ms_world *w, rank_args *a, char *device, size_t len)
{
    char err[1024];
    ms_launch_device(a->ma.device, device, len);
    a->o.device = device;
    if (!ms_launch_check_claims(device, err, sizeof err)) return 0;
    if (w->rank == 0) fprintf(stderr, "memsplit train: %s\n", err);
    return MS_EXIT_USAGE;
}

static int rank_train(const ms_world *w, int argc, char **argv)
{
    rank_args a;
    ms_config cfg;
    ms_plan plan;
    memset(&cfg, 0, sizeof cfg);
    memset(&plan, 0, sizeof plan);
    char err[1024], said[4096], device[40];
    /* every rank checks its own arguments, then all of them agree on one
     * job (run/rank_agree.h) before anything collective is tried: a rank
     * that refused alone, or that runs another job (an MPMD launch with
     * another plan, --steps or seed), would leave the others waiting */
    int code = parse(argc, argv, w->rank, &a, err, sizeof err);
    if (!code) code = check_here(&a, &cfg, &plan, err, sizeof err);
    code = ms_rank_agree(w, code, err, &cfg, &plan, &a.o, said, sizeof said);
    if (code > 0 && w->rank == 0) fprintf(stderr, "memsplit train: %s\n", said);
    if (!code) code = check_devices(w, &a, device, sizeof device);
    if (!code) code = ms_run_rank_train(w, &cfg, &plan, &a.o);
    ms_plan_free(&plan);
    return code < 0 ? MS_EXIT_OK : code;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "train")) {
        fputs(main_usage, stderr);
        return MS_EXIT_USAGE;
    }
    /* a rank whose launcher dies (mpirun killed) is told to stop, as when
     * the launcher stops it, rather than train on, orphaned */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    ms_mpi_init(&argc, &argv);
    ms_world w;
    ms_mpi_world(&w);
    char who[64];
    snprintf(who, sizeof who, "memsplit train: rank %d", w.rank);
    ms_interrupt_arm(who); /* a signal stops every rank after the same step, checkpointed (run/interrupt.h) */
    int rc = rank_train(&w, argc - 1, argv + 1);
    ms_mpi_finalize();
    return rc;
}
