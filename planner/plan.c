/* plan.c — option defaults, the names of schedules and recompute modes, and
 * freeing a plan. */
#include "planner/planner.h"

#include <stdlib.h>
#include <string.h>

static const char *const sched_names[MS_SCHED_N] = {"gpipe", "1f1b"};
static const char *const recompute_names[] = {"auto", "never", "always"};

const char *ms_schedule_name(int s) { return s >= 0 && s < MS_SCHED_N ? sched_names[s] : "?"; }

int ms_schedule_parse(const char *s)
{
    for (int i = 0; s && i < MS_SCHED_N; i++)
        if (strcmp(s, sched_names[i]) == 0) return i;
    return -1;
}

const char *ms_recompute_mode_name(int m) { return m >= 0 && m < 3 ? recompute_names[m] : "?"; }

int ms_recompute_mode_parse(const char *s)
{
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, recompute_names[i]) == 0) return i;
    return -1;
}

void ms_plan_opts_default(ms_plan_opts *o)
{
    memset(o, 0, sizeof *o);
    o->precision = -1;
    o->schedule = -1;
    o->recompute = MS_RECOMPUTE_AUTO;
    o->headroom = MS_PLAN_DEFAULT_HEADROOM;
    o->link_gbps = MS_PLAN_DEFAULT_LINK_GBPS;
    o->replicas = 1; /* one pipeline: what one process runs; 0 opens it (ranks) */
    o->zero = -1;
    o->bus_gbps = MS_PLAN_DEFAULT_BUS_GBPS;
}

void ms_plan_free(ms_plan *p)
{
    if (!p) return;
    free(p->devices);
    free(p->stages);
    free(p->replica_devices);
    free(p->reasoning);
    memset(p, 0, sizeof *p);
}
