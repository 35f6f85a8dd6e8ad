/* inject.c — libmemsplit_inject.so, loaded into a user's program by the
 * CUDA driver through CUDA_INJECTION64_PATH. At the driver's initialisation
 * it subscribes CUPTI's allocation callbacks (profiler/cupti_trace.h in
 * streaming mode: a runtime call counted once, not again as the driver's
 * cuMemAlloc beneath it) and streams each segment allocation, free and
 * failure to the memsplit parent through libmemsplit_bridge.so, tagged with
 * the layer and phase the Python hooks set. It adds nothing else: no NVTX
 * (the hooks pass names directly), no activity buffers, on the host or the
 * device. */
#include <cupti.h>
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
    /* CUPTI pre-allocates 3 device buffers for kernel timestamps in every
     * context it sees made, whether or not an activity is enabled: after the
     * ballast, so the program had 12 MiB less than alone (an H100, ResNet-152
     * under 20 GiB: beyond PyTorch 64,217,743,360 B under memsplit against
     * 64,205,160,448 alone, and it ran out one convolution earlier). These
     * callbacks record no activity: none is made, before any context is. */
    size_t none = 0, size = sizeof none;
    if (cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, &size, &none) != CUPTI_SUCCESS)
        msb_warn("cupti", "CUPTI would not leave out its device buffers: the program has about 12 MiB less of the "
                          "device than alone, so it may run out slightly earlier");
    char err[256];
    if (ms_trace_start_streaming(to_parent, NULL, err, sizeof err) != 0) {
        /* say why once, in the stream (e.g. another CUPTI client holds the subscriber) */
        msb_warn("cupti", err);
    }
    return 1;
}
