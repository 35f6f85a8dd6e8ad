/* steps.h — whether a program's training steps ran the same units, on
 * inputs of the same size.
 *
 * A program may run a unit in some steps and not in others: LayerDrop
 * skips blocks at random, a router sends no token to an expert. The rows
 * and the record's replay hold the steps the trial ran, so a later step
 * that runs more of a stage's units than any of those may need more than
 * predicted. This says so from the trace, with no rule about programs.
 *
 * Contract: msb_units_not_every_step() looks at the training process's
 * (model_conn's) complete steps, those a step event ends, that ran at
 * least one unit's forward (layers 1..n_blocks, phase forward; a
 * recompute runs in backward, a validation pass in validation). It writes
 * into out the names (t->blocks) of the units whose forward ran in some of
 * those steps and not in all, ", "-separated in layer order and cut with
 * "..." to fit outlen, and returns how many there are: 0 (out "") when
 * there are fewer than two such steps or each ran the same units; -1 when
 * out of memory.
 *
 * A program's inputs may change size from step to step (batches padded to
 * their longest sequence, packed sequences, images of several sizes); so
 * do its activations, and the steps the trial ran may not hold its
 * largest. msb_unit_inputs_differ() looks at the same steps and at the
 * bytes entering each unit's forward calls (the WHERE events' xin; a unit
 * called several times in a step: the largest). It returns how many units
 * had different input bytes in two such steps that called them (0 when
 * none or fewer than two steps; -1 when out of memory), and names the one
 * whose largest exceeds its smallest by the most bytes in name (cut to
 * namelen), with the two in *lo and *hi. */
#ifndef MS_BRIDGE_STEPS_H
#define MS_BRIDGE_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "bridge/trace.h"

int msb_units_not_every_step(const msb_trace *t, char *out, size_t outlen);
int msb_unit_inputs_differ(const msb_trace *t, char *name, size_t namelen, uint64_t *lo, uint64_t *hi);

#endif
