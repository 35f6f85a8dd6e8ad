/* common.h — what every memsplit subcommand shares: exit codes, the model
 * options (--preset/--config/--set/--device/--precision/--steps/--gpu-mem)
 * turned into one validated ms_config, and JSON helpers. */
#ifndef MS_CLI_COMMON_H
#define MS_CLI_COMMON_H

#include <jansson.h>
#include <stdio.h>
#include "cli/args.h"
#include "reports/db.h"
#include "trainer/config.h"
#include "trainer/device.h"

/* What memsplit --version says; raised with each release. */
#define MS_VERSION "0.11.0"

enum {
    MS_EXIT_OK = 0,       /* success (for profile: the model fits) */
    MS_EXIT_USAGE = 1,    /* bad flags, bad config, bad input file */
    MS_EXIT_RUNTIME = 2,  /* I/O, CUDA or checkpoint failure */
    MS_EXIT_OOM = 3,      /* ran out of memory / no plan fits */
};

#define MS_CLI_MAX_SETS 128

typedef struct ms_cli_model_args {
    const char *preset;
    const char *config;
    const char *sets[MS_CLI_MAX_SETS];
    int n_sets;
    const char *device;
    const char *precision;
    const char *gpu_mem;
    const char *data;
    int steps;             /* -1 = keep */
    int batch;             /* -1 = keep */
} ms_cli_model_args;

void ms_cli_model_args_init(ms_cli_model_args *a);
/* Handles one of the shared long options; returns 1 if it was one, 0 if not,
 * -1 on a usage error (message in err, starting with the flag). */
int ms_cli_model_opt(ms_cli_model_args *a, const char *name, const char *arg, char *err, size_t errlen);
/* Preset, then config file, then --set in order, then the dedicated flags. */
int ms_cli_build_config(const ms_cli_model_args *a, ms_config *c, char *err, size_t errlen);
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

/* {"cpu/v0": peak bytes, ...} of n devices, compact, malloc'd (NULL: out of memory). */
char *ms_cli_peaks_json(const ms_device *devs, int n);

/* The outcome of a database write: when rc < 0, says so on stderr
 * ("memsplit CMD: recording WHAT in the database: why") and counts it in
 * *failed, so that the run ends with exit status 2 rather than losing a
 * record silently. Returns rc. */
long long ms_cli_recorded(long long rc, ms_db *db, const char *cmd, const char *what, int *failed);

/* --db-timeout: seconds a write waits for another process's lock. */
#define MS_CLI_DB_TIMEOUT_HELP                                                            \
    "  --db-timeout S       seconds a database write waits while another process\n"     \
    "                       holds the database (default 30); a step row that still\n"   \
    "                       cannot be written is kept and written later, and the\n"     \
    "                       run exits 2 if it never can\n"

/* Text wrapped at width columns, at spaces, with a final newline. */
void ms_cli_print_wrapped(FILE *f, const char *s, int width);

/* Print a JSON value on stdout (one object, newline). */
void ms_cli_print_json(json_t *j);
/* Per-category object {"param": n, ...} from an array of MS_CAT_N sizes. */
json_t *ms_cli_cat_json(const size_t *bytes);
/* One device's row of a rerun, the same for the built-in model, its MPI
 * ranks and a program (docs/database.md, "Device rows"): name,
 * capacity_bytes (null when unbounded: SIZE_MAX), predicted_peak_bytes,
 * measured_peak_bytes and gap (null when the device's peak was not
 * measured: measured 0), predicted_by_category and measured_by_category
 * (null when meas_cat is NULL). *gap gets the gap (0 when not measured). */
json_t *ms_cli_device_row(const char *name, size_t capacity, size_t predicted, size_t measured,
                          const size_t *pred_cat, const size_t *meas_cat, double *gap);

int ms_cmd_train(int argc, char **argv);
int ms_cmd_profile(int argc, char **argv);
int ms_cmd_doctor(int argc, char **argv);
int ms_cmd_config(int argc, char **argv);
/* `memsplit train --plan FILE`: the plan's pipeline (cli/cmd_train_plan.c). */
typedef struct ms_train_plan_args {
    const char *plan_path, *device, *db_path, *ckdir;   /* device, db_path, ckdir may be NULL */
    int ckevery, resume, json, quiet, db_timeout_ms;
    ms_inject inject;
} ms_train_plan_args;
int ms_cmd_train_plan(const ms_config *cfg, const ms_train_plan_args *a);

#endif
