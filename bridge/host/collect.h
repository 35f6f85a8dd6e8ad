/* collect.h — a program's run collected into a trace: launch.h's run with
 * every line the program's processes write fed into the trace (trace.h),
 * in each connection's order, and copied to a record file when asked (a
 * test fixture, a bug report). The caller hears only of the steps done.
 *
 * Contract: msb_collect() returns what msb_run_program() returns (0 when
 * the program ran, its end in *ex; -1 with err when it could not start);
 * a line that cannot be recorded or kept (out of memory, a failed write to
 * the record) ends the reading as a failed callback does there. on_step
 * (may be NULL) is called on the reading thread after each line that
 * completed a step (t->n_steps grew) or brought a step's late intervals
 * and loss (t->n_stepdata grew). record lines are "CONN<TAB>LINE"; a
 * line too long to keep (reader.h) is counted as bad and not recorded.
 * t must be initialised by the caller. msb_collect_line() is that callback
 * on its own (an msb_line_fn over a msb_collector), for a caller that runs
 * the reading itself (the fuzz harness). */
#ifndef MS_BRIDGE_COLLECT_H
#define MS_BRIDGE_COLLECT_H

#include <stdio.h>

#include "bridge/host/launch.h"
#include "bridge/trace.h"

typedef void (*msb_step_fn)(const msb_trace *t, void *user);

typedef struct msb_collector {
    msb_trace *t;
    FILE *record;              /* may be NULL */
    msb_step_fn on_step;       /* may be NULL */
    void *user;
} msb_collector;

int msb_collect_line(const char *line, size_t len, int conn, void *collector);

int msb_collect(const msb_launch *l, msb_trace *t, FILE *record, msb_step_fn on_step, void *user, msb_exit *ex,
                char *err, size_t errlen);

#endif
