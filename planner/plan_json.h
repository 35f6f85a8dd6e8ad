/* plan_json.h — a plan (planner.h) as JSON: what `memsplit plan --json`
 * prints, `-o plan.json` writes, the database stores and the trainer's
 * multi-device rerun reads. Format: docs/plan-format.md.
 *
 * Contract: ms_plan_to_json() builds the object (NULL only for values JSON
 * cannot hold); ms_plan_from_json() reads one back, checking it strictly
 * (version, every field and type, stages covering layers 0..n_layers-1
 * exactly once in order on distinct devices that exist, predicted peak equal
 * to the sum of its categories, micro_batch * n_micro = global_batch) and
 * returns 0, or -1 with a one-line message naming the field, leaving *out
 * empty. A plan written and read back is equal field for field. */
#ifndef MS_PLAN_JSON_H
#define MS_PLAN_JSON_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "planner/planner.h"

json_t *ms_plan_to_json(const ms_plan *p);
int ms_plan_from_json(const json_t *root, ms_plan *out, char *err, size_t errlen);

/* Plan text (indented JSON + newline) to a stream / a path ("-": stdout). */
int ms_plan_write_json(FILE *f, const ms_plan *p, char *err, size_t errlen);
int ms_plan_save_json(const char *path, const ms_plan *p, char *err, size_t errlen);
int ms_plan_load_json(const char *path, ms_plan *out, char *err, size_t errlen);
/* The plan as a compact JSON string (malloc'd; caller frees), NULL on failure. */
char *ms_plan_to_string(const ms_plan *p);

#endif
