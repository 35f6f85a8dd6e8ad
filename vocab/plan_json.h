/* plan_json.h — a plan (plan.h) as JSON: what `memsplit plan --json`
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

#include "vocab/plan.h"

json_t *ms_plan_to_json(const ms_plan *p);
int ms_plan_from_json(const json_t *root, ms_plan *out, char *err, size_t errlen);

/* Plan text (indented JSON + newline) to a stream / a path ("-": stdout). */
int ms_plan_write_json(FILE *f, const ms_plan *p, char *err, size_t errlen);
int ms_plan_save_json(const char *path, const ms_plan *p, char *err, size_t errlen);
int ms_plan_load_json(const char *path, ms_plan *out, char *err, size_t errlen);
/* The plan as a compact JSON string (malloc'd; caller frees), NULL on failure. */
char *ms_plan_to_string(const ms_plan *p);

/* The plan JSON as a report reads it (plan_loose.c): whatever is there and
 * of the right type, nothing refused, so that a stored plan of any version,
 * or an infeasible outcome (no stages), shows what it has. Absent or
 * mistyped (or out of an int's range): precision, schedule and a stage's
 * device -1, headroom -1, micro_batch and n_micro 0, bytes, times and
 * layers 0, names "",
 * reasoning NULL, layer_names NULL unless the plan names every layer by
 * a string (a program's program.layer_names: then n_layers is their
 * count), and n_stages -1 when there is no "stages" array (an
 * array's entries are read whatever they hold). Device k is the entry
 * whose "index" is k (its position when it has none). Returns 0, or -1
 * when text is not JSON or memory ran out (*out is then empty). */
int ms_plan_read_loose(const char *text, ms_plan *out);

#endif
