/* train_plan.h — `memsplit train --plan FILE` for the built-in model: the
 * last part of the doctor on its own, a plan's pipeline over several
 * devices (rerun.h), its records, and recovery from an OOM when the plan's
 * profile is in the database.
 *
 * Contract: ms_run_train_plan() loads and checks the plan (a plan of
 * replicas, or for another model, is a usage error naming the file),
 * records a "train" run when a->db_path is given, trains, says what it does
 * on stderr (unless quiet: then only errors) and returns the exit status
 * (run/exit.h). With a->json, *summary is the rerun's JSON summary with the
 * plan it ended with (a recovery's, after an OOM), for the caller to print
 * and free; else NULL. */
#ifndef MS_RUN_TRAIN_PLAN_H
#define MS_RUN_TRAIN_PLAN_H

#include <jansson.h>

#include "run/inject.h"
#include "trainer/config.h"

typedef struct ms_train_plan_args {
    const char *plan_path, *device, *db_path, *ckdir;   /* device, db_path, ckdir may be NULL */
    int ckevery, resume, json, quiet, db_timeout_ms;
    ms_inject inject;
} ms_train_plan_args;

int ms_run_train_plan(const ms_config *cfg, const ms_train_plan_args *a, json_t **summary);

#endif
