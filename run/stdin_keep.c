/* stdin_keep.c — the program's standard input, kept once and replayed to
 * every pass (stdin_keep.h). */
#include "run/stdin_keep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vocab/errf.h"

static int kept;        /* 1 once the first pass's call decided; fd 0 seeks then if seekable */

/* The pipe on fd 0, read to its end into an unlinked file that takes its place. */
static int keep_stream(char *err, size_t errlen)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/memsplit-stdin-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return ms_errf(err, errlen, "keeping the program's standard input: %s: %s", path, strerror(errno));
    unlink(path);   /* nobody else can open it, and it goes when memsplit does */
    char buf[1 << 16];
    unsigned long long total = 0;
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return ms_errf(err, errlen, "reading the program's standard input: %s", strerror(e));
        }
        if (n == 0) break;
        total += (unsigned long long)n;
        if (total > MS_STDIN_MAX) {
            close(fd);
            return ms_errf(err, errlen, "the program's standard input is larger than %llu MiB: memsplit keeps it to "
                           "give every pass the same input; give the program a file instead",
                           MS_STDIN_MAX >> 20);
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                int e = errno;
                close(fd);
                return ms_errf(err, errlen, "keeping the program's standard input: %s", strerror(e));
            }
            off += w;
        }
    }
    if (dup2(fd, 0) < 0) {
        int e = errno;
        close(fd);
        return ms_errf(err, errlen, "keeping the program's standard input: %s", strerror(e));
    }
    close(fd);
    return 0;
}

int ms_stdin_for_pass(char *err, size_t errlen)
{
    struct stat st;
    if (fstat(0, &st) != 0 || isatty(0)) return 0;   /* none, or a terminal: the program's own */
    if (!kept) {
        kept = 1;
        if ((S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) && keep_stream(err, errlen) != 0) return -1;
    }
    if (lseek(0, 0, SEEK_SET) < 0 && errno != ESPIPE)
        return ms_errf(err, errlen, "rewinding the program's standard input: %s", strerror(errno));
    return 0;
}
