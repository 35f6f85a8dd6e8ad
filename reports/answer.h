/* answer.h — the answer a doctor run of a user's program gives, read back
 * from the run database: the module that overflowed in the trial, the
 * placement the plan made in the program's module paths, each device's
 * measured peak against the predicted one, and the losses' first and last
 * values. Both reports lead such a run with it (term_run.c, html_answer.c).
 *
 * Contract:
 *  - ms_answer_load() reads the run and the runs it contains (the trial,
 *    the plan, the training), nothing else. It returns 1 and fills *a when
 *    run is a doctor run of a program (its trial's profile carries the
 *    program's fingerprint, or its plan names the program), 0 when it is
 *    not (*a is then empty), and -1 on a database error (ms_db_errmsg).
 *  - What was not recorded is absent (a zero id or count), never made up:
 *    a doctor that stopped before training has no devices and no steps.
 *  - The plan is the newest recorded under the run (after a recovery, the
 *    one the last training ran); the devices and steps are those of the
 *    last training run that recorded any.
 *  - ms_answer_free() releases it (safe on an empty or freed answer). */
#ifndef MS_ANSWER_H
#define MS_ANSWER_H

#include <stdint.h>

#include "reports/db.h"

typedef struct ms_answer_stage {
    int device;                 /* index among the plan's devices */
    char device_name[32];
    uint64_t capacity;          /* 0: none given */
    int first, last;            /* its layers */
    char modules[1024];         /* those layers in module paths: "segment1, transformers.0-2" */
} ms_answer_stage;

typedef struct ms_answer {
    int64_t run;
    char state[16];             /* ms_run_state() of the doctor run */
    int64_t trial_run;          /* 0: no trial recorded */
    int has_trial;              /* trial holds its profile */
    ms_profile trial;
    int64_t plan_id;            /* 0: no plan recorded */
    int plan_feasible;
    int n_stages;
    ms_answer_stage *stages;
    int64_t train_run;          /* 0: no training recorded */
    int n_dev;
    ms_device_peak *dev;        /* measured (and predicted) peak per device */
    int n_steps, first_step, last_step;
    double first_loss, last_loss, mean_ms;
    int n_recoveries;           /* under the doctor run and the runs it contains */
} ms_answer;

int ms_answer_load(ms_db *db, int64_t run, ms_answer *a);
void ms_answer_free(ms_answer *a);

#endif
