/* plan.c — option defaults, the names of recompute modes, and a program's
 * names on its plan. */
#include "planner/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const recompute_names[] = {"auto", "never", "always"};

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
