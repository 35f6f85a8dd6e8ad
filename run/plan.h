/* plan.h — `memsplit plan`: the profile read (a file, or a run in the
 * database), the plan chosen for the devices (planner/planner.h), shown as
 * a table and its reasoning (a program's also as its placement and the
 * Python that places it by hand) or as JSON, written to -o FILE, and
 * stored under a "plan" run of the profile's run; when nothing fits, what
 * would, said and stored too.
 *
 * Contract: ms_run_plan() returns the exit status: 0 a plan was found; 1 an
 * unreadable or invalid profile, an option a program's profile refuses, or
 * devices the caller refused; 2 the database cannot be opened, read or
 * written, or FILE cannot be written; 3 no plan fits. Every failure is said
 * on stderr ("memsplit plan: ..."). The caller's devices() is called once
 * the profile is read (its capacity is the default): 0 with a malloc'd
 * array that the run frees, or -1 when it has said why not. */
#ifndef MS_RUN_PLAN_H
#define MS_RUN_PLAN_H

#include <stdint.h>

#include "planner/planner.h"

typedef struct ms_plan_request {
    const char *profile, *db, *out;   /* --profile FILE ("-": stdin) or --db FILE; -o FILE (NULL: none) */
    int64_t run;                      /* the profile's run (0: the newest) */
    int json, verbose, db_timeout_ms;
    ms_plan_opts opts;
    const char *cmdline;              /* the command as given, for the plan's run */
    int (*devices)(void *user, const ms_profile *prof, ms_plan_device **out, int *n);
    void *user;
} ms_plan_request;

int ms_run_plan(ms_plan_request *rq);

#endif
