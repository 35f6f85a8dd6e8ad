/* model_args.h — the model options as a command was given them
 * (--preset, --config, --set, --device, --precision, --gpu-mem, --data,
 * --steps, --batch), kept as given so that a run can pass them on (to MPI
 * ranks, in a resume hint), and the one validated ms_config they make.
 *
 * Contract: ms_model_args_init() leaves nothing given (steps and batch -1).
 * ms_model_args_config() applies the preset, then the config file, then
 * each --set in order, then the dedicated flags, and validates: 0, or -1
 * with a one-line message in err (no preset and no config file is an
 * error). The front ends parse the flags into it (cli/common.h). */
#ifndef MS_RUN_MODEL_ARGS_H
#define MS_RUN_MODEL_ARGS_H

#include <stddef.h>

#include "trainer/config.h"

#define MS_MODEL_MAX_SETS 128

typedef struct ms_model_args {
    const char *preset;
    const char *config;
    const char *sets[MS_MODEL_MAX_SETS];
    int n_sets;
    const char *device;
    const char *precision;
    const char *gpu_mem;
    const char *data;
    int steps;             /* -1 = keep */
    int batch;             /* -1 = keep */
} ms_model_args;

void ms_model_args_init(ms_model_args *a);
int ms_model_args_config(const ms_model_args *a, ms_config *c, char *err, size_t errlen);

#endif
