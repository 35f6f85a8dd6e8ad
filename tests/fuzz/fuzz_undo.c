/* fuzz_undo.c — the journal a diagnostic pass leaves for memsplit to apply
 * if it is killed (run/undo_files.h), parsed: never a crash, and every
 * record it gives is one of the bridge's (an 'R' with a kept name in its
 * path's folder, a 'D' with a hidden name, an 'N' with an absolute path
 * free of "." and ".."), or none at all. */
#include <stdlib.h>
#include <string.h>

#include "run/undo_files.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check(char kind, const char *hidden, const char *path, void *ctx)
{
    (void)ctx;
    if (kind == 'N') {
        if (hidden || !path || path[0] != '/' || strstr(path, "/./") || strstr(path, "/../") || strstr(path, "//"))
            fz_fail("an added file's name not absolute and plain", path ? path : "(none)");
        size_t n = strlen(path);
        if (path[n - 1] == '/' || (n >= 2 && !strcmp(path + n - 2, "/.")) || (n >= 3 && !strcmp(path + n - 3, "/..")))
            fz_fail("an added file's name not absolute and plain", path);
        return 0;
    }
    if (hidden[0] != '/' || !strstr(hidden, "/.") || !strstr(hidden, ".memsplit-")) fz_fail("a name not the bridge's", hidden);
    if (kind == 'R') {
        size_t n = strlen(hidden);
        if (!path || path[0] != '/' || n < 7 || strcmp(hidden + n - 7, ".before") != 0)
            fz_fail("a rename not of a kept file", hidden);
        const char *slash = strrchr(path, '/');
        if (strncmp(hidden, path, (size_t)(slash - path) + 1) != 0 || strchr(hidden + (slash - path) + 1, '/'))
            fz_fail("a rename across folders", path);
    } else if (kind != 'D' || path) {
        fz_fail("a record of no kind", hidden);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    char *copy = malloc(size ? size : 1);     /* exactly the bytes: a read past them is a crash */
    if (!copy) return 0;
    memcpy(copy, data, size);
    ms_undo_parse(copy, size, check, NULL);
    free(copy);
    return 0;
}
