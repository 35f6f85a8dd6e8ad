/* kernel_times.h — GPU activity intervals (kernels, copies, memsets) of a
 * few training steps, and their summary: per kernel family (kernel_family.h)
 * milliseconds per step and share of the step, the device's busy time (the
 * union of the intervals), and the gap (step time minus busy time: launch
 * and host overhead, synchronisation, idle device). Filled by the CUPTI
 * collector (kernel_trace.h) or read from a JSON file of the same events
 * (bench/torch_ref.py writes one from torch.profiler's trace), so memsplit
 * and PyTorch are summed by the same code.
 *
 * Contract:
 *  - ms_ktimes_add interns the name (one copy per distinct name) and keeps
 *    the interval [start_ns, end_ns); an interval with end <= start is not
 *    kept and is counted in `skipped`. Times are on any one clock in ns.
 *  - ms_ktimes_summary(k, steps, begin, end, wall_ns, top): with begin < end
 *    intervals are clipped to [begin, end) and the step time is
 *    (end - begin) / steps unless wall_ns > 0 is given; with begin >= end
 *    nothing is clipped and the step time is wall_ns / steps, or the span
 *    from the first start to the last end / steps when wall_ns is 0. Family
 *    and kernel sums add durations, so with concurrent streams they may add
 *    up to more than the busy time; busy never exceeds the window. `top`
 *    names the longest kernels (at most top; 0: none). Returns a new JSON
 *    object (NULL only when out of memory or steps < 1):
 *      {"steps", "step_ms", "busy_ms", "gap_ms", "busy_pct", "gap_pct",
 *       "kernel_ms", "calls_per_step",
 *       "families": {name: {"label", "ms", "pct", "calls"}} in enum order,
 *       "top": [{"name", "family", "ms", "pct", "calls"}],
 *       "idle": {"under_5us", "5_to_50us", "over_50us": {"ms", "count"},
 *                "edges_ms"}, "skipped"}
 *    where ms and calls are per step and pct is of step_ms. "idle" splits
 *    the gap: the idle stretches between busy ones by length (short ones
 *    are the device's launch latency, long ones the host or a wait), and
 *    edges_ms, the rest of the gap (before the first and after the last).
 *  - The event file: {"steps": N, "wall_ns": W, "names": [...],
 *    "events": [[name_index, start_ns, end_ns], ...]}; ms_ktimes_read_json
 *    appends its events to k and gives steps and wall_ns (0 when absent),
 *    and ms_ktimes_events_json writes k in that form.
 * Nothing here needs a GPU. */
#ifndef MS_KERNEL_TIMES_H
#define MS_KERNEL_TIMES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ms_kevent {
    int name; /* index into ms_ktimes.names */
    uint64_t start_ns, end_ns;
} ms_kevent;

typedef struct ms_ktimes {
    char **names;
    int n_names, cap_names;
    ms_kevent *ev;
    int n, cap;
    uint64_t skipped; /* intervals not kept: end <= start */
    int last;         /* the name matched last (records of one kernel come in runs) */
} ms_ktimes;

void ms_ktimes_init(ms_ktimes *k);
void ms_ktimes_free(ms_ktimes *k);
/* 0, or -1 when out of memory (nothing kept). */
int ms_ktimes_add(ms_ktimes *k, const char *name, uint64_t start_ns, uint64_t end_ns);

json_t *ms_ktimes_summary(const ms_ktimes *k, int steps, uint64_t begin_ns, uint64_t end_ns, uint64_t wall_ns,
                          int top);

int ms_ktimes_read_json(ms_ktimes *k, const json_t *file, int *steps, uint64_t *wall_ns, char *err, size_t errlen);
json_t *ms_ktimes_events_json(const ms_ktimes *k, int steps, uint64_t wall_ns);

#endif
