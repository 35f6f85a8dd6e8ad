/* record.h — a program's record (vocab/profile.h, ms_prog_record) from the
 * trace of its record pass: the program run with each of its n layers a
 * stage of its own on one device, uncapped (docs/program-record.md).
 *
 * Contract: msb_build_record() walks the training process's memory events
 * in order. Each allocation is a storage on the layer of its ledger device
 * (stage i is layer i), with its final category (msb_final_labels); a free,
 * or the same key allocated again (a storage moved to its stage), ends it.
 * A crossing event (MSB_EV_CROSS) marks the copy's storage as a copy of the
 * one it copied, when both are live. A module the pass copied the outputs
 * of back to its caller's stage, where only one crossing read each copy
 * (trace.h: hops), is handed on (r->handed_on): those copies, and the
 * gradient copies that answer them in backward, are left out, what each
 * copied lives as long as the longer of the two, and a copy of one is a
 * copy of what it copied, as in a rerun that leaves the outputs where the
 * module made them. Each transition (MSB_EV_WHERE)
 * begins a moment (vocab/profile.h: ms_rec_moment). The peaks count from the first
 * placement (MSB_EV_PLACED) and end at the pass's last step, as a rerun's
 * stage peaks do. Returns 0 with *out (free with
 * ms_prog_record_free), or -1 with err: no placement or no step, a device that is no
 * layer, a transition to a layer outside -1..n_layers or to no phase, more
 * events than positions, out of memory. */
#ifndef MS_BRIDGE_RECORD_H
#define MS_BRIDGE_RECORD_H

#include <stddef.h>

#include "bridge/trace.h"
#include "vocab/profile.h"

int msb_build_record(const msb_trace *t, int n_layers, ms_prog_record **out, char *err, size_t errlen);

/* bytes more on layer's stage at every position: what a rerun's OOM taught
 * that the record pass never saw (a buffer the program makes at a later
 * step), as a storage of category cat live from position 0 to the end,
 * first in the record (the copies' indices shift with it). 0, or -1 (out
 * of memory, a record with no positions, layer out of range). */
int msb_record_hold(ms_prog_record *r, int layer, int cat, uint64_t bytes);

/* What the caching allocator held beyond the storages the pass tracked, at
 * the transition that closed its last step (GPU): buffers that libraries
 * keep there and no operator made (a cuBLAS workspace for each thread that
 * multiplies: the forward's and autograd's), which every GPU stage of a
 * rerun holds too. The record pass tracks operators' outputs (no
 * allocator record under a plan), so the difference is exactly those;
 * the trial's allocator record counts them as storages of whatever layer
 * made them first. 0 with *bytes, or -1 when the pass said no allocator
 * count there (the CPU) or finished no step. */
int msb_record_untracked(const msb_trace *t, uint64_t *bytes);

#endif
