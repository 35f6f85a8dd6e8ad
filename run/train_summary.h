/* train_summary.h — what `memsplit train --json` prints for a run on one
 * device (run/train.c): the outcome, losses, speed, the model's shape, the
 * kernel-times file, the CUDA graph, the device's peaks, and the OOM (its
 * layer, phase, category, bytes asked and live) or null.
 *
 * Contract: ms_train_summary() reads the session before it is closed and
 * the steps' tally; it keeps no reference to st->losses (it copies them). */
#ifndef MS_RUN_TRAIN_SUMMARY_H
#define MS_RUN_TRAIN_SUMMARY_H

#include <jansson.h>
#include <stddef.h>

#include "run/train_ktimes.h"
#include "trainer/session.h"

/* What a run's steps leave for its end. */
typedef struct ms_train_stats {
    double loss_first, loss_last, t_start, t_steady, tokens_steady;
    int first_step, steps_run, timed_steps;
    size_t tokens_per_step;
    json_t *losses;            /* per step (owned by the run) */
} ms_train_stats;

json_t *ms_train_summary(const ms_session *s, const ms_config *cfg, const ms_train_kt *kt, int rc,
                         const ms_train_stats *st);

#endif
