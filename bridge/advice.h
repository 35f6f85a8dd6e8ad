/* advice.h — what would have fit, for a program that ran out of memory:
 * estimates from its own rows, labelled as estimates (the planner, which
 * splits across devices, uses measured rows only).
 *
 * Contract: msb_fit_advice() writes one short paragraph into out: the
 * largest micro-batch that fits the capacity when activations and
 * transients scale with it, above what no micro-batch lowers (at the
 * forward's end: the weights, autocast's copies of them, the optimizer
 * state and the gradients unless freed before the forward; in the
 * optimizer's step: the weights, gradients, state and the step's
 * temporaries), whether activation checkpointing of the blocks
 * would fit (each block keeps only its input; one block's activations live
 * while it is recomputed) or, where the program already recomputes
 * `recomputed` units in backward, that it does, whether bf16 autocast would (fp32 programs not
 * under autocast: 16-bit activations and weight copies beside fp32
 * masters), and, unless
 * splitting (doctor, which splits it next), the `memsplit plan` command
 * that splits it. Needs p->oom.happened and a capacity; otherwise writes
 * "". */
#ifndef MS_BRIDGE_ADVICE_H
#define MS_BRIDGE_ADVICE_H

#include <stddef.h>

#include "vocab/profile.h"

void msb_fit_advice(const ms_profile *p, int recomputed, int splitting, char *out, size_t len);

#endif
