/* plan.c — the schedules' names and freeing a plan (plan.h). */
#include "vocab/plan.h"

#include <stdlib.h>
#include <string.h>

static const char *const sched_names[MS_SCHED_N] = {"gpipe", "1f1b", "sequential"};

const char *ms_schedule_name(int s) { return s >= 0 && s < MS_SCHED_N ? sched_names[s] : "?"; }

int ms_schedule_parse(const char *s)
{
    for (int i = 0; s && i < MS_SCHED_N; i++)
        if (strcmp(s, sched_names[i]) == 0) return i;
    return -1;
}

void ms_plan_free(ms_plan *p)
{
    if (!p) return;
    free(p->devices);
    free(p->stages);
    free(p->replica_devices);
    free(p->reasoning);
    if (p->layer_names)
        for (int i = 0; i < p->n_layers; i++) free(p->layer_names[i]);
    free(p->layer_names);
    ms_str_list_free(p->handed_on, p->n_handed_on);
    memset(p, 0, sizeof *p);
}
