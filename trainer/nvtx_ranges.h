/* nvtx_ranges.h — the trainer's layer/phase markers ("block 17/forward"),
 * pushed as NVTX ranges on the default domain so that CUPTI's NVTX
 * callbacks (profiler/cupti_trace.h) attribute each allocation to the
 * innermost range of its thread. Any NVTX tool (Nsight Systems) sees them
 * too. They live with the trainer, which names and pushes them; the
 * profiler only reads them (through CUPTI), so no arrow runs from the
 * trainer up to the profiler.
 *
 * Contract:
 *  - ms_nvtx_prepare() must run before the process's first NVTX call and
 *    before other threads start (it calls setenv): NVTX reads
 *    NVTX_INJECTION64_PATH once, at its first call, and without it CUPTI
 *    never sees a range. It sets the variable to libcupti's path (found
 *    through the loaded library, else /usr/local/cuda/lib64/libcupti.so)
 *    unless the variable is already set.
 *    Returns 0 (set, or already naming libcupti), 1 (already set to another
 *    library, e.g. a profiler's: kept, message in err), -1 (libcupti not
 *    found, or a range was already pushed; message in err).
 *  - ms_range_push/ms_range_pop cost one NVTX call each (a no-op when no
 *    tool is attached); pushes and pops must pair on the same thread. */
#ifndef MS_NVTX_RANGES_H
#define MS_NVTX_RANGES_H

#include <stddef.h>

int ms_nvtx_prepare(char *err, size_t errlen);
void ms_range_push(const char *name);
void ms_range_pop(void);

#endif
