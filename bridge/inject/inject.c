/* inject.c — libmemsplit_inject.so, loaded into a user's program by the
 * CUDA driver through CUDA_INJECTION64_PATH. At the driver's initialisation
 * it subscribes CUPTI's allocation callbacks (profiler/cupti_trace.h in
 * streaming mode: a runtime call counted once, not again as the driver's
 * cuMemAlloc beneath it) and streams each segment allocation, free and
 * failure to the memsplit parent through libmemsplit_bridge.so, tagged with
 * the layer and phase the Python hooks set. It adds nothing else: no NVTX
 * (the hooks pass names directly), no activity buffers. */
#include <stdio.h>

#include "bridge/child/msb.h"
#include "profiler/cupti_trace.h"

static void to_parent(const ms_mem_event *e, void *user)
{
    (void)user;
    msb_segment(e);
}

/* The entry point the driver calls; returns 1 on success. */
__attribute__((visibility("default"))) int InitializeInjection(void);
int InitializeInjection(void)
{
    static int done;                 /* the driver may call it more than once */
    if (done++) return 1;
    if (msb_open() != 0) return 1;   /* no parent: nothing to stream to, stay out of the way */
    char err[256];
    if (ms_trace_start_streaming(to_parent, NULL, err, sizeof err) != 0) {
        /* say why once, in the stream (e.g. another CUPTI client holds the subscriber) */
        msb_warn("cupti", err);
    }
    return 1;
}
