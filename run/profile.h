/* profile.h — `memsplit profile` of the built-in model: the trial on one
 * device (profiler/trial.h), its table, OOM diagnosis and ledgers printed
 * as it ends, and its records in the run database.
 *
 * Contract: ms_run_profile() prepares NVTX for CUPTI on a GPU (a warning
 * when it cannot), records a "profile" run before the trial starts (so that
 * a killed profile shows as incomplete), runs the trial, prints the
 * per-layer table and the ledgers (on stdout, on stderr with json), and
 * records the memory events, the rows and the run's end. Returns the exit
 * status (run/exit.h: 0 fits, 3 out of memory, 2 a device, data or database
 * failure). With a->json, *summary is the profile's JSON with its ledgers,
 * run id and trial step time, for the caller to print and free; else NULL. */
#ifndef MS_RUN_PROFILE_H
#define MS_RUN_PROFILE_H

#include <jansson.h>

#include "profiler/trial.h"
#include "trainer/config.h"

typedef struct ms_profile_args {
    const char *db_path;       /* NULL: no records */
    const char *cmdline;       /* the command as given, for the run's record */
    int db_timeout_ms, json, quiet;
    ms_trial_opts trial;       /* precisions, batches, steps, CUPTI; progress is set here */
} ms_profile_args;

int ms_run_profile(const ms_config *cfg, ms_profile_args *a, json_t **summary);

#endif
