/* common.h — what every memsplit subcommand shares: exit codes, the model
 * options (--preset/--config/--set/--device/--precision/--steps/--gpu-mem)
 * turned into one validated ms_config, and JSON helpers. */
#ifndef MS_CLI_COMMON_H
#define MS_CLI_COMMON_H

#include <jansson.h>
#include <stdio.h>
#include "trainer/config.h"
#include "trainer/device.h"

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
    long steps;            /* -1 = keep */
    long batch;            /* -1 = keep */
} ms_cli_model_args;

void ms_cli_model_args_init(ms_cli_model_args *a);
/* Handles one of the shared long options; returns 1 if it was one, 0 if not,
 * -1 on a usage error (message printed). */
int ms_cli_model_opt(ms_cli_model_args *a, const char *name, const char *arg);
/* Preset, then config file, then --set in order, then the dedicated flags. */
int ms_cli_build_config(const ms_cli_model_args *a, ms_config *c, char *err, size_t errlen);
/* The help text for the shared options. */
extern const char ms_cli_model_help[];

/* A number, "5%" meaning 0.05; 0, or -1 if s is not one. */
int ms_cli_parse_number(const char *s, double *out);
/* The same, in [0, 1). */
int ms_cli_parse_fraction(const char *s, double *out);

/* "memsplit " + argv[0..argc-1] (argv[0] is the subcommand), malloc'd. */
char *ms_cli_cmdline(int argc, char **argv);

/* Print a JSON value on stdout (one object, newline). */
void ms_cli_print_json(json_t *j);
/* Per-category object {"param": n, ...} from an array of MS_CAT_N sizes. */
json_t *ms_cli_cat_json(const size_t *bytes);

int ms_cmd_train(int argc, char **argv);
int ms_cmd_profile(int argc, char **argv);
int ms_cmd_doctor(int argc, char **argv);
/* `memsplit train --plan FILE`: the plan's pipeline (cli/cmd_doctor.c). */
int ms_cmd_train_plan(const ms_config *cfg, const char *plan_path, const char *device, const char *db_path,
                      const char *ckdir, int ckevery, int resume, const char *inject, int json, int quiet);

#endif
