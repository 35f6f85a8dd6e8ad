/* plan.c — option defaults, the names of recompute modes, and a program's
 * names on its plan. */
#include "planner/planner.h"
#include "planner/sequential.h"

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

/* The program's lists a plan holds, freed: attached again, a plan's are
 * replaced, never leaked. */
static void drop_program_lists(ms_plan *pl)
{
    ms_str_list_free(pl->layer_names, pl->n_layers);
    pl->layer_names = NULL;
    ms_str_list_free(pl->handed_on, pl->n_handed_on);
    pl->handed_on = NULL;
    pl->n_handed_on = 0;
}

int ms_plan_attach_program(ms_plan *pl, const ms_profile *prof)
{
    if (!prof->fingerprint[0]) return 0;
    drop_program_lists(pl);
    snprintf(pl->program, sizeof pl->program, "%s", prof->model);
    snprintf(pl->fingerprint, sizeof pl->fingerprint, "%s", prof->fingerprint);
    pl->reserve_allocator = prof->reserve_allocator;
    pl->layer_names = calloc((size_t)pl->n_layers, sizeof *pl->layer_names);
    if (!pl->layer_names) return -1;
    for (int l = 0; l < pl->n_layers; l++) {
        const char *name = "";
        for (int i = 0; i < prof->n_rows; i++)
            if (prof->rows[i].layer == l) { name = prof->rows[i].name; break; }
        if (!(pl->layer_names[l] = strdup(name))) return -1;
    }
    /* the modules the record pass handed on, only when the plan's peaks are
     * that record replayed (a sequential plan of a usable record): its
     * rerun must hand on the same, or it makes copies the plan never
     * counted; a plan by the stage rules hands nothing on */
    const ms_prog_record *rec = pl->schedule == MS_SCHED_SEQUENTIAL ? ms_seq_record(prof) : NULL;
    if (rec && ms_str_list_copy(rec->handed_on, rec->n_handed_on, &pl->handed_on)) return -1;
    pl->n_handed_on = pl->handed_on ? rec->n_handed_on : 0;
    return 0;
}
