/* train_ktimes.h — `memsplit train --kernel-times FILE [--kernel-steps N]`:
 * the last N steps of a single-device run (3 by default) are traced through
 * CUPTI (profiler/kernel_trace.h) and FILE gets where those steps' time
 * went, per kernel family (profiler/kernel_times.h's summary, plus the
 * run's identity). The traced steps are left out of the run's tokens/s
 * (tracing costs a little per launch), so a benchmark that wants S timed
 * steps runs S + N + 1 (the first step allocates and is not timed either).
 *
 * Contract:
 *  - ms_train_kt_check (after the config is built, and again with the
 *    resumed step): FILE needs a CUDA device, N >= 1, and at least N + 1
 *    steps still to run; else -1 with err (a usage error).
 *  - ms_train_kt_traced(kt, step): 1 when the step after `step` completed
 *    steps is one of the traced ones.
 *  - ms_train_kt_before_step starts tracing before the first traced step
 *    (the device is idle between steps: each step ends synchronised).
 *    A tracing failure does not stop training: it is kept, said once on
 *    stderr, and written to FILE as {"error": ...}.
 *  - ms_train_kt_after_step(kt, dt) after each step with the step's time:
 *    the window ends after the last traced step, and the step time in FILE
 *    is the traced steps' own times (what is between steps, a progress
 *    line or a database row, is left out).
 *  - ms_train_kt_finish stops tracing after the last step and writes FILE
 *    (also when training failed or tracing never started: then FILE says
 *    why): the summary, and with any traced step also the intervals in
 *    kernel_times.h's event form ("names", "events"). Returns 0, or -1 with
 *    err when FILE cannot be written. */
#ifndef MS_RUN_TRAIN_KTIMES_H
#define MS_RUN_TRAIN_KTIMES_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/config.h"

typedef struct ms_train_kt {
    const char *path; /* NULL: off */
    int steps;        /* N */
    int from;         /* completed steps before the first traced one */
    int on, done;     /* tracing now; tracing has ended */
    uint64_t t0, t1;  /* the traced window, CUPTI's clock */
    int completed;    /* traced steps that completed */
    double wall_s;    /* the traced steps' own times, summed (host work between steps left out) */
    char error[512];  /* why there are no kernel times, "" if none */
} ms_train_kt;

void ms_train_kt_init(ms_train_kt *kt);
int ms_train_kt_check(ms_train_kt *kt, const ms_config *cfg, int done_steps, char *err, size_t errlen);
int ms_train_kt_traced(const ms_train_kt *kt, int step);
void ms_train_kt_before_step(ms_train_kt *kt, int step);
void ms_train_kt_after_step(ms_train_kt *kt, double dt_s);
/* dev_name: the device's name for FILE; tokens_per_step for tokens/s. */
int ms_train_kt_finish(ms_train_kt *kt, const ms_config *cfg, const char *dev_name, size_t tokens_per_step,
                       char *err, size_t errlen);

#endif
