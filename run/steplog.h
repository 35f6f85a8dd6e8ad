/* steplog.h — training steps on their way into the run database, none
 * dropped. A step row that cannot be written now (another process holds
 * the database past the busy timeout) is kept in memory and written before
 * the next one; while rows wait, later attempts do not wait for the lock,
 * so training does not stall once per step; the end of the run waits the
 * whole timeout once more. What is still unwritten then is the caller's
 * error to report: the run exits non-zero (2), and the message says how
 * many rows were lost and why.
 *
 * Contract: ms_steplog_add copies the row (its peaks text too) and returns 0
 * when every row so far is in the database, 1 when rows wait, -1 out of
 * memory (the row is lost: also an error). Notes about waiting go to
 * progress (may be NULL), once per busy spell. ms_steplog_finish returns 0,
 * or -1 with err. The log does not own the database. */
#ifndef MS_RUN_STEPLOG_H
#define MS_RUN_STEPLOG_H

#include <stdio.h>
#include "reports/db.h"

typedef struct ms_steplog ms_steplog;

ms_steplog *ms_steplog_new(ms_db *db, int64_t run, int timeout_ms, FILE *progress);
int ms_steplog_add(ms_steplog *l, const ms_step_rec *s);
int ms_steplog_finish(ms_steplog *l, char *err, size_t errlen);
int ms_steplog_pending(const ms_steplog *l);
void ms_steplog_free(ms_steplog *l);

#endif
