/* recover.h — a rerun's recovery from an OOM mid-run (run/rerun.c): the
 * OOM recorded, the model re-planned for the capacity that remains (the
 * OOM device at what it has now; ms_rerun_replan, rerun.h), the recovery
 * recorded (the new plan, the step that failed, the checkpoint it resumes
 * from) and said on the progress stream.
 *
 * Contract: ms_rerun_recover() takes the pipeline that ran out (p->err says
 * how) and closes it. MS_OK: *plan is the recovery's, and the rerun opens
 * it again from r->checkpoint (step 0 when none). Otherwise the rerun stops
 * with the value returned: MS_EOOM when no plan fits or there is no profile
 * to re-plan from (r->oom_unrecovered, r->err says what would fit), else
 * MS_EFAIL. old_plan is the plan's id in the database (0: none). */
#ifndef MS_RUN_RECOVER_H
#define MS_RUN_RECOVER_H

#include "run/rerun.h"

int ms_rerun_recover(const ms_rerun_opts *o, ms_rerun_result *r, ms_pipeline *p, const int *plan_dev, ms_plan *plan,
                     int64_t old_plan);

#endif
