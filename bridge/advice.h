/* advice.h — what would have fit, for a program that ran out of memory:
 * estimates from its own rows, labelled as estimates (the planner, which
 * splits across devices, uses measured rows only).
 *
 * Contract: msb_fit_advice() writes one short paragraph into out: the
 * largest micro-batch that fits the capacity when activations and
 * transients scale with it, whether activation checkpointing of the blocks
 * would fit (each block keeps only its input; one block's activations live
 * while it is recomputed), whether bf16 autocast would (fp32 programs:
 * 16-bit activations and weight copies beside fp32 masters), and, unless
 * splitting (doctor, which splits it next), the `memsplit plan` command
 * that splits it. Needs p->oom.happened and a capacity; otherwise writes
 * "". */
#ifndef MS_BRIDGE_ADVICE_H
#define MS_BRIDGE_ADVICE_H

#include <stddef.h>

#include "vocab/profile.h"

void msb_fit_advice(const ms_profile *p, int splitting, char *out, size_t len);

#endif
