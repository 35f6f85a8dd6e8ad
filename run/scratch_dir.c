/* scratch_dir.c — a diagnostic pass's own folder (scratch_dir.h). */
#define _XOPEN_SOURCE 700
#include "run/scratch_dir.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ms_scratch_base(void)
{
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

int ms_scratch_make(char *out, size_t len)
{
    int n = snprintf(out, len, "%s/memsplit-checkpoints-XXXXXX", ms_scratch_base());
    if (n < 0 || (size_t)n >= len) {
        if (len) out[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!mkdtemp(out)) {
        int e = errno;
        out[0] = '\0';
        errno = e;
        return -1;
    }
    return 0;
}

static int first_errno;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    if (remove(path) != 0 && !first_errno) first_errno = errno;
    return 0;                  /* on: what can be removed is */
}

int ms_scratch_remove(const char *dir)
{
    first_errno = 0;
    /* depth first, the links themselves, within the folder's own file system */
    if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0 && !first_errno) first_errno = errno;
    if (first_errno) {
        errno = first_errno;
        return -1;
    }
    return 0;
}
