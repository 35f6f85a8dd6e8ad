/* plan.c — option defaults, the names of schedules and recompute modes, and
 * freeing a plan. */
#include "planner/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sched_names[MS_SCHED_N] = {"gpipe", "1f1b", "sequential"};
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

int ms_plan_attach_program(ms_plan *pl, const ms_profile *prof)
{
    if (!prof->fingerprint[0]) return 0;
    snprintf(pl->program, sizeof pl->program, "%s", prof->model);
    snprintf(pl->fingerprint, sizeof pl->fingerprint, "%s", prof->fingerprint);
    pl->layer_names = calloc((size_t)pl->n_layers, sizeof *pl->layer_names);
    if (!pl->layer_names) return -1;
    for (int l = 0; l < pl->n_layers; l++) {
        const char *name = "";
        for (int i = 0; i < prof->n_rows; i++)
            if (prof->rows[i].layer == l) { name = prof->rows[i].name; break; }
        if (!(pl->layer_names[l] = strdup(name))) return -1;
    }
    return 0;
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
    memset(p, 0, sizeof *p);
}
