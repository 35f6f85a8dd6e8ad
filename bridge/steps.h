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
 * namelen), with the two in *lo and *hi.
 *
 * A program may keep something from every step (a loss kept with its
 * graph, a list of outputs, a cache that fills): the memory live when a
 * step ends then grows from step to step, and a later step needs more than
 * the trial's. msb_live_grew() follows the training process's allocations
 * and frees (by address; an address given out again without its free
 * counts once) to the ends of its complete steps, and writes the live bytes
 * at the last two into *before and *after. It returns 1 when *after exceeds
 * *before by more than 1% of *before, 0 when not or when fewer than two
 * steps ended (*before = *after = 0), -1 when out of memory. */
#ifndef MS_BRIDGE_STEPS_H
#define MS_BRIDGE_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "bridge/trace.h"

int msb_units_not_every_step(const msb_trace *t, char *out, size_t outlen);
int msb_unit_inputs_differ(const msb_trace *t, char *name, size_t namelen, uint64_t *lo, uint64_t *hi);
int msb_live_grew(const msb_trace *t, uint64_t *before, uint64_t *after);

#endif
