/* train.h — `memsplit train` on one device: the session, its steps with
 * progress, checkpoints, the --kernel-times window, the records (the run,
 * its steps, the device's peak) and the JSON summary.
 *
 * Contract: ms_run_train() trains cfg (validated by the caller, with its
 * checkpoint folder, interval and resume set) from its newest checkpoint
 * when cfg->resume, to cfg->steps. Progress, checkpoints and the end go to
 * stderr unless quiet; errors always. A step row the database refuses is
 * kept and retried (steplog.h). Returns the exit status (run/exit.h): 1 when
 * the resumed step leaves --kernel-steps too few steps, 2 a device, data,
 * checkpoint or database failure (also a record never written), 3 out of
 * memory, 128 + N when signal N (armed by run/interrupt.h) stopped it
 * between steps: the last finished step is checkpointed where there is a
 * folder and the run recorded "interrupted". With a->json, *summary is the summary object for the caller to
 * print and free; else NULL. */
#ifndef MS_RUN_TRAIN_H
#define MS_RUN_TRAIN_H

#include <jansson.h>

#include "run/train_ktimes.h"
#include "trainer/config.h"

typedef struct ms_train_args {
    const char *db_path;       /* NULL: no records */
    const char *cmdline;       /* the command as given, for the run's record */
    int db_timeout_ms, json, quiet;
    ms_train_kt *kt;           /* --kernel-times (kt->path NULL: off) */
} ms_train_args;

int ms_run_train(const ms_config *cfg, const ms_train_args *a, json_t **summary);

#endif
