/* tmpfile.c — temporary names that cannot be planted (tmpfile.h). */
#include "vocab/tmpfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SUFFIX 6
#define TRIES 100

static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/* path + ".tmp." + six random letters into tmp: 0, or -1 (ENAMETOOLONG). */
static int name(const char *path, char *tmp, size_t len)
{
    unsigned char r[SUFFIX];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        /* no entropy yet (early boot): the clock and the pid still make a
         * name nobody can know ahead; O_EXCL keeps it safe regardless */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 20 ^ (uint64_t)ts.tv_sec;
        for (int i = 0; i < SUFFIX; i++, x = x * 6364136223846793005ull + 1442695040888963407ull) r[i] = (unsigned char)(x >> 56);
    }
    char s[SUFFIX + 1];
    for (int i = 0; i < SUFFIX; i++) s[i] = letters[r[i] % (sizeof letters - 1)];
    s[SUFFIX] = 0;
    int n = snprintf(tmp, len, "%s.tmp.%s", path, s);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int ms_tmp_create(const char *path, char *tmp, size_t len)
{
    for (int i = 0; i < TRIES; i++) {
        if (name(path, tmp, len)) break;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) return fd;
        if (errno != EEXIST) break;
    }
    int e = errno;
    if (len) tmp[0] = 0;
    errno = e;
    return -1;
}

int ms_tmp_mkdir(const char *path, char *tmp, size_t len)
{
    for (int i = 0; i < TRIES; i++) {
        if (name(path, tmp, len)) break;
        if (mkdir(tmp, 0777) == 0) return 0;
        if (errno != EEXIST) break;
    }
    int e = errno;
    if (len) tmp[0] = 0;
    errno = e;
    return -1;
}

int ms_tmp_is_ours(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) || strncmp(name + n, ".tmp", 4)) return 0;
    const char *s = name + n + 4;
    if (!*s) return 1; /* the fixed name of older versions */
    if (*s++ != '.' || strlen(s) != SUFFIX) return 0;
    for (; *s; s++)
        if (!strchr(letters, *s)) return 0;
    return 1;
}
