/* main.c — the memsplit front end: dispatches to a subcommand. */
#include "cli/cmd_plan.h"
#include "cli/cmd_report.h"
#include "cli/common.h"
#include "run/launch_env.h"
#include "trainer/device.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: memsplit COMMAND [options]   (memsplit COMMAND --help for each)\n"
    "\n"
    "Commands:\n"
    "  train     train a model on one device, or over several with --plan\n"
    "  profile   trial on one device: per-layer memory, OOM diagnosis, ledgers\n"
    "  plan      choose split points, precision, micro-batches and recompute\n"
    "  doctor    trial, diagnosis, plan and training with the plan, end to end\n"
    "  report    show a run database's runs, profiles and diagnoses\n"
    "  config    print a configuration as an INI file, or every key's reference\n"
    "\n"
    "Every command takes --json to print one machine-readable object on stdout.\n"
    "Exit status: 0 ok, 1 usage/configuration error, 2 runtime error, 3 out of memory.\n"
    "memsplit --version prints the version.\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return MS_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return MS_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("memsplit %s\n", MS_VERSION);
        return MS_EXIT_OK;
    }
    if (!strcmp(cmd, "config")) return ms_cmd_config(argc - 1, argv + 1);
    /* under mpirun/srun, one rank per device: memsplit-rank's work */
    if (!strcmp(cmd, "train") && ms_launch_wants_rank(argc, argv)) return ms_launch_exec_rank(argc, argv);
    if (!strcmp(cmd, "train")) return ms_cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "profile")) return ms_cmd_profile(argc - 1, argv + 1);
    /* the GPUs this machine has, for a plan whose flags leave them open */
    if (!strcmp(cmd, "plan")) return ms_cmd_plan_ex(argc - 1, argv + 1, ms_cuda_gpu_capacities);
    if (!strcmp(cmd, "doctor")) return ms_cmd_doctor(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return ms_cmd_report(argc - 1, argv + 1);
    fprintf(stderr, "memsplit: unknown command '%s'\n%s", cmd, usage);
    return MS_EXIT_USAGE;
}
