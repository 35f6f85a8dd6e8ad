/* nvtx_ranges.c — NVTX range wrappers and the injection setup that lets
 * CUPTI see them. Contract: nvtx_ranges.h. */
#include "trainer/nvtx_ranges.h"

#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVTX_ENV "NVTX_INJECTION64_PATH"
#define CUPTI_FALLBACK "/usr/local/cuda/lib64/libcupti.so"

static atomic_int ranges_used; /* set by the first push: too late to prepare */

/* Path of the file that defines `sym` in library `lib`, if that library is
 * loaded in this process. dlsym on the library's own handle gives the
 * definition itself, not a PLT stub of the executable. */
static int loaded_path(const char *lib, const char *sym, char *out, size_t cap)
{
    void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return -1;
    void *addr = dlsym(h, sym);
    Dl_info info;
    int rc = -1;
    if (addr && dladdr(addr, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
        strstr(info.dli_fname, "cupti") && (size_t)snprintf(out, cap, "%s", info.dli_fname) < cap)
        rc = 0;
    dlclose(h);
    return rc;
}

static int find_libcupti(char *out, size_t cap)
{
    if (loaded_path("libcupti.so.13", "cuptiSubscribe", out, cap) == 0) return 0;
    if (loaded_path("libcupti.so", "cuptiSubscribe", out, cap) == 0) return 0;
    if (access(CUPTI_FALLBACK, R_OK) == 0) {
        snprintf(out, cap, "%s", CUPTI_FALLBACK);
        return 0;
    }
    return -1;
}

int ms_nvtx_prepare(char *err, size_t errlen)
{
    char scratch[8];
    if (!err || errlen == 0) { err = scratch; errlen = sizeof scratch; }
    err[0] = '\0';
    const char *cur = getenv(NVTX_ENV);
    if (cur && cur[0]) {
        if (strstr(cur, "cupti")) return 0;
        snprintf(err, errlen, "%s=%s does not name libcupti: kept, but the CUPTI tracer will see no NVTX range",
                 NVTX_ENV, cur);
        return 1;
    }
    if (atomic_load(&ranges_used)) {
        snprintf(err, errlen, "NVTX was already used by an earlier range: call ms_nvtx_prepare before the first "
                              "ms_range_push, or set %s before the program starts", NVTX_ENV);
        return -1;
    }
    char path[PATH_MAX];
    if (find_libcupti(path, sizeof path) != 0) {
        snprintf(err, errlen, "libcupti not found (not loaded, no %s): set %s yourself", CUPTI_FALLBACK, NVTX_ENV);
        return -1;
    }
    if (setenv(NVTX_ENV, path, 1) != 0) {
        snprintf(err, errlen, "setenv(%s) failed", NVTX_ENV);
        return -1;
    }
    return 0;
}

void ms_range_push(const char *name)
{
    atomic_store_explicit(&ranges_used, 1, memory_order_relaxed);
    nvtxRangePushA(name ? name : "");
}

void ms_range_pop(void)
{
    nvtxRangePop();
}
