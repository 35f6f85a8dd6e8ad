/* explain.h — a plan in words: the short table `memsplit plan` prints and
 * the paragraph of reasoning stored in the plan.
 *
 * Contract: ms_plan_reasoning() returns a malloc'd paragraph (NULL on
 * out-of-memory) that names what happened in the trial (the layer, phase and
 * bytes of its OOM, or its peak when it fit), what each stage takes and why
 * it recomputes, where the OOM layer now sits, and which stage bounds the
 * step time by the formula. ms_plan_explain() stores it in plan->reasoning.
 * ms_plan_print_table() writes one header line and one row per stage
 * (device, layers, recompute, predicted peak against capacity) in 80
 * columns; with categories, also the bytes per category in human units
 * (wider). prof may be NULL for the table (no layer names). */
#ifndef MS_EXPLAIN_H
#define MS_EXPLAIN_H

#include <stdio.h>

#include "planner/planner.h"
#include "vocab/profile.h"

char *ms_plan_reasoning(const ms_profile *prof, const ms_plan *plan);
int ms_plan_explain(const ms_profile *prof, ms_plan *plan);
void ms_plan_print_table(FILE *f, const ms_plan *plan, const ms_profile *prof, int categories);

#endif
