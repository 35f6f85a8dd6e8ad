/* ballast.c — msb_ballast (msb.h): emulate a smaller GPU for a program by
 * taking what lies beyond the capacity, through the driver API loaded with
 * dlopen, so the library needs no CUDA at link time and loads on machines
 * without a GPU. The ballast is taken in the program's primary context (the
 * one the CUDA runtime and PyTorch use) and never freed. */
#include "bridge/child/msb.h"

#include <dlfcn.h>
#include <stdio.h>

#include "vocab/errf.h"

typedef int CUresult_t;
typedef int CUdevice_t;
typedef void *CUcontext_t;
typedef unsigned long long CUdeviceptr_t;

void msb_emit_ballast(int ordinal, uint64_t taken, uint64_t total, uint64_t free_before, uint64_t capacity);

static __thread int in_ballast;
int msb_in_ballast(void) { return in_ballast; }

int64_t msb_ballast(int ordinal, uint64_t capacity, char *err, size_t errlen)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return ms_errf(err, errlen, "the ballast needs the CUDA driver: %s", dlerror());
    CUresult_t (*cuInit)(unsigned) = (CUresult_t(*)(unsigned))dlsym(h, "cuInit");
    CUresult_t (*cuDeviceGet)(CUdevice_t *, int) = (CUresult_t(*)(CUdevice_t *, int))dlsym(h, "cuDeviceGet");
    CUresult_t (*retain)(CUcontext_t *, CUdevice_t) =
        (CUresult_t(*)(CUcontext_t *, CUdevice_t))dlsym(h, "cuDevicePrimaryCtxRetain");
    CUresult_t (*push)(CUcontext_t) = (CUresult_t(*)(CUcontext_t))dlsym(h, "cuCtxPushCurrent_v2");
    CUresult_t (*pop)(CUcontext_t *) = (CUresult_t(*)(CUcontext_t *))dlsym(h, "cuCtxPopCurrent_v2");
    CUresult_t (*meminfo)(size_t *, size_t *) = (CUresult_t(*)(size_t *, size_t *))dlsym(h, "cuMemGetInfo_v2");
    CUresult_t (*alloc)(CUdeviceptr_t *, size_t) = (CUresult_t(*)(CUdeviceptr_t *, size_t))dlsym(h, "cuMemAlloc_v2");
    if (!cuInit || !cuDeviceGet || !retain || !push || !pop || !meminfo || !alloc)
        return ms_errf(err, errlen, "the CUDA driver lacks an entry point the ballast needs");
    CUdevice_t dev;
    CUcontext_t ctx, prev;
    CUresult_t r;
    in_ballast = 1;
    if ((r = cuInit(0)) || (r = cuDeviceGet(&dev, ordinal)) || (r = retain(&ctx, dev)) || (r = push(ctx))) {
        in_ballast = 0;
        return ms_errf(err, errlen, "cannot open CUDA device %d for the ballast (driver error %d)", ordinal, r);
    }
    size_t free_b = 0, total = 0;
    int64_t taken = 0;
    if ((r = meminfo(&free_b, &total))) {
        taken = ms_errf(err, errlen, "cuMemGetInfo failed (driver error %d)", r);
    } else if (capacity < total) {
        /* After the ballast, free = capacity - used: the device is `capacity`
         * bytes, context and anything already taken included. */
        size_t used = total - free_b;
        if (capacity <= used) {
            taken = ms_errf(err, errlen, "--gpu-mem %llu bytes is less than the %llu bytes device %d already uses "
                            "(its CUDA context)", (unsigned long long)capacity, (unsigned long long)used, ordinal);
        } else {
            size_t want = free_b - (size_t)(capacity - used);
            CUdeviceptr_t p = 0;
            /* the driver hands out 2 MiB pages; step down if fragmentation refuses the exact size */
            while (want > 0 && alloc(&p, want) != 0) want = want > (2u << 20) ? want - (2u << 20) : 0;
            if (!want) taken = ms_errf(err, errlen, "could not take the ballast on device %d", ordinal);
            else taken = (int64_t)want;
        }
    }
    pop(&prev);
    in_ballast = 0;
    if (taken >= 0) msb_emit_ballast(ordinal, (uint64_t)taken, total, free_b, capacity);
    return taken;
}
