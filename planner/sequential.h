/* sequential.h — the exact search for the sequential schedule (internal to
 * planner/; planner.h is the public contract).
 *
 * Sequential model parallelism runs one micro-batch at a time through every
 * stage, forward then backward, one stage busy at a time: what a single
 * process (a user's PyTorch program) can run honestly. A stage's memory is
 * followed through the step layer by layer (sequential.c: seq_peak), with
 * the gradients there from the start or, for a program that frees them
 * each step (the profile's grads_freed), appearing in backward: freed before
 * the forward (a plain loop's zero_grad first) or after it, when the loss's
 * backward begins (Lightning's closure: last step's gradients live through
 * the forward). A profile with a record of as many layers (prof->record)
 * has its stages' memory from the record replayed instead
 * (record_replay.h), the stage rules unused; a malformed record is an
 * error. The step takes m * sum over stages of (fwd + bwd + comm) + sum of
 * the optimizer steps, so splits differ only in what crosses their boundaries: the search
 * minimises the predicted step time, then the largest share of a device any
 * stage takes (balance), over every stage count, choice of devices and
 * contiguous split — a dynamic program over (layers placed, devices used),
 * exact because both criteria combine monotonically. Same returns as
 * ms_plan_search. */
#ifndef MS_PLANNER_SEQUENTIAL_H
#define MS_PLANNER_SEQUENTIAL_H

#include <stddef.h>

#include "planner/memory_model.h"
#include "planner/planner.h"

/* The model: stage layers [a, b] of the n in L, in/out the boundary
 * tensors (0 at the ends), grads_freed as the profile says, program: a
 * program's stage, whose loss row (loss->present) says what its root
 * device and the stage making its outputs hold beyond the layers (without
 * it, layer 0's row carries the loss). Returns the peak; bytes[] the
 * categories at that moment. */
uint64_t ms_seq_stage_peak(const ms_layer_cost *L, int n, int a, int b, uint64_t in, uint64_t out, int grads_freed,
                           int program, const ms_loss_row *loss, uint64_t reserve, uint64_t bytes[MS_CAT_N]);

/* The same walk, asked about one moment: the most the stage holds while
 * layer `layer` (n: the program's loss) runs its forward or backward
 * (MS_PH_*), as the model predicts it, into *live. -1 when the stage never
 * runs that moment (another stage's layer). */
int ms_seq_stage_live_at(const ms_layer_cost *L, int n, int a, int b, uint64_t in, uint64_t out, int grads_freed,
                         const ms_loss_row *loss, uint64_t reserve, int layer, int phase, uint64_t *live);

/* The profile's record when the search replays it (a record of the
 * profile's layers), else NULL: the stage rules serve. A sequential plan's
 * peaks are that record's, and its rerun hands on what the record did
 * (plan.c: ms_plan_attach_program). */
const ms_prog_record *ms_seq_record(const ms_profile *prof);

int ms_plan_search_sequential(const ms_profile *prof, const ms_plan_device *devs, int n_devs,
                              const ms_plan_opts *o, ms_plan *out, char *err, size_t errlen);

#endif
