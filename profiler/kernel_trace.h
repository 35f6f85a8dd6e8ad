/* kernel_trace.h — collects the GPU's kernels, memcpys and memsets of a
 * stretch of a run through CUPTI activity records
 * (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, MEMCPY, MEMSET) into an
 * ms_ktimes (kernel_times.h), for `memsplit train --kernel-times`.
 *
 * Contract:
 *  - ms_ktrace_start enables the three activity kinds; call it with a CUDA
 *    context current and the device idle, and take the window's start with
 *    ms_ktrace_now() after it (CUPTI's clock, the clock of the records).
 *    It fails (-1, message in err) without CUPTI or a driver, when already
 *    started, and while the memory tracer (cupti_trace.h) runs: both hand
 *    CUPTI one process-wide pair of activity-buffer callbacks, so a process
 *    uses one of them (memsplit train never starts the memory tracer).
 *  - ms_ktrace_stop flushes every buffered record (call it once the device
 *    is idle), disables the kinds and moves the intervals into *out (which
 *    must be initialised; it owns them afterwards). Kernels are named as
 *    CUPTI names them (mangled), copies "[memcpy HtoD]", "[memcpy DtoH]",
 *    ..., memsets "[memset]". *dropped (may be NULL) gets the number of
 *    records CUPTI reported dropped; records without both timestamps are
 *    counted in out->skipped. 0, or -1 with err.
 *  - Tracing costs a little on every launch: the caller keeps the traced
 *    steps out of its timed ones. */
#ifndef MS_KERNEL_TRACE_H
#define MS_KERNEL_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "profiler/kernel_times.h"

int ms_ktrace_start(char *err, size_t errlen);
uint64_t ms_ktrace_now(void);
int ms_ktrace_stop(ms_ktimes *out, uint64_t *dropped, char *err, size_t errlen);

#endif
