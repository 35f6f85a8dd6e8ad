/* common.h — what every memsplit front end shares: the version, the exit
 * codes (run/exit.h), the model options (--preset/--config/--set/--device/
 * --precision/--steps/--gpu-mem/--data/--batch) parsed into the run floor's
 * ms_model_args (run/model_args.h), and their help. Printing is run/text.h's. */
#ifndef MS_CLI_COMMON_H
#define MS_CLI_COMMON_H

#include <jansson.h>
#include <stdio.h>
#include "cli/args.h"
#include "run/exit.h"
#include "run/model_args.h"
#include "run/text.h"

/* What memsplit --version says; raised with each release. */
#define MS_VERSION "0.11.0"

/* Handles one of the shared long options; returns 1 if it was one, 0 if not,
 * -1 on a usage error (message in err, starting with the flag). */
int ms_cli_model_opt(ms_model_args *a, const char *name, const char *arg, char *err, size_t errlen);
/* The help text for the model options every command shares; each command
 * lists its own --device, --precision, --gpu-mem, --steps and --batch (their
 * meanings differ: MS_CLI_RUN_HELP is train's). */
extern const char ms_cli_model_help[];
#define MS_CLI_RUN_HELP                                                                   \
    "  --device DEV         cpu or cuda:N\n"                                             \
    "  --precision P        fp32, bf16 or fp16\n"                                        \
    "  --gpu-mem SIZE       emulate a device of SIZE bytes (512MiB, 24GiB, ...)\n"       \
    "  --steps N            optimizer steps\n"                                           \
    "  --batch N            micro-batch size in sequences; the global batch is this x\n" \
    "                       train.accum (plan's --batch is the global batch)\n"

/* "memsplit " + argv[0..argc-1] (argv[0] is the subcommand), malloc'd. */
char *ms_cli_cmdline(int argc, char **argv);

/* --db-timeout: seconds a write waits for another process's lock. */
#define MS_CLI_DB_TIMEOUT_HELP                                                            \
    "  --db-timeout S       seconds a database write waits while another process\n"     \
    "                       holds the database (default 30); a step row that still\n"   \
    "                       cannot be written is kept and written later, and the\n"     \
    "                       run exits 2 if it never can\n"


/* The run's JSON summary (NULL: none) printed on stdout and freed; returns code. */
int ms_cli_summary(int code, json_t *summary);

int ms_cmd_train(int argc, char **argv);
int ms_cmd_profile(int argc, char **argv);
int ms_cmd_doctor(int argc, char **argv);
int ms_cmd_config(int argc, char **argv);
/* The same for a user's own program, after `--` (the PyTorch bridge). */
int ms_cmd_profile_program(int argc, char **argv);
int ms_cmd_train_program(int argc, char **argv);
int ms_cmd_doctor_program(int argc, char **argv);

#endif
