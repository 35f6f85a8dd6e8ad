/* rows.h — a program's profile from what the bridge collected.
 *
 * Contract: msb_build_profile() replays the trace of the trial (t) through
 * the same ledger the program ran (ledger.h), with each storage's final
 * category (a gradient is a gradient from its allocation on), and makes one
 * row per layer — the units of the program's module tree (layers.h), the
 * first and last of them layers 0 and n+1 — at the program's precision and
 * micro-batch, from its last complete step (its steady state; the first
 * step when none completed), and the program's loss row (prof->loss: the
 * model's outputs and the layer that made them, what the loss holds and
 * its transients, what the program carries between steps; docs/bridge.md
 * "The memory model of a program's stage"). Bytes the program carried into
 * the step and frees in an interval are not that interval's work. The
 * optimizer's temporaries count with the layer of the parameter they are
 * made for. docs/bridge.md "Categories" says what each category counts. A layer the trial did not complete takes its row from
 * the uncapped pass u when given (source uncapped), else from the last
 * identical block that completed (source copied; *incomplete is set when
 * some backward was never measured). When the trial ran out of memory the
 * OOM is filled: layer, phase, requested bytes, what was live by category
 * and by layer, the capacity, and the innermost module. Returns 0, or -1
 * with err (the program never reached a training forward, or nothing to
 * make rows from); *prof is then empty (safe to free). */
#ifndef MS_BRIDGE_ROWS_H
#define MS_BRIDGE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "bridge/trace.h"
#include "vocab/profile.h"

typedef struct msb_rows_opts {
    uint64_t capacity;         /* the emulated capacity, 0: none */
    const char *model_name;    /* the program's script, e.g. "train.py" */
    uint64_t *libs;            /* when set, told what of prof->reserve is library buffers the
                                  allocator holds (measured; 0 on the CPU): what a record pass
                                  that measures them better replaces (record.h) */
} msb_rows_opts;


int msb_build_profile(const msb_trace *t, const msb_trace *u, const msb_rows_opts *o, ms_profile *prof,
                      int *incomplete, char *err, size_t errlen);

#endif
