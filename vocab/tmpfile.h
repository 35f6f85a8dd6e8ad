/* tmpfile.h — temporary names beside a file that is then renamed into
 * place (checkpoints, the HTML report, a checkpoint's folder of parts).
 *
 * A predictable temporary name ("x.tmp", "x.tmp.<pid>") is a trap in a
 * folder others can write: a symlink planted there is followed, and the
 * data lands in its target. So every temporary entry is created new, under
 * a random name, by a call that fails rather than open what is there.
 *
 * Contract:
 *  - ms_tmp_create(): creates <path>.tmp.XXXXXX (six random characters of
 *    [A-Za-z0-9]) with O_CREAT | O_EXCL | O_NOFOLLOW, write-only,
 *    close-on-exec, mode 0644 less the umask; returns the descriptor, its
 *    name in tmp (len bytes), or -1 with errno set (tmp is then "").
 *  - ms_tmp_mkdir(): the same for a folder (mkdir, which never follows or
 *    reuses an entry), mode 0777 less the umask; 0, or -1 with errno.
 *  - ms_tmp_is_ours(): whether name (a file name, no folder) is one of
 *    these temporaries of `base` (base + ".tmp." + six characters), or the
 *    old fixed "base.tmp" name: leftovers a sweep may remove.
 * Neither ever reuses an existing entry; each tries fresh names a bounded
 * number of times (EEXIST after that). */
#ifndef MS_TMPFILE_H
#define MS_TMPFILE_H

#include <stddef.h>

int ms_tmp_create(const char *path, char *tmp, size_t len);
int ms_tmp_mkdir(const char *path, char *tmp, size_t len);
int ms_tmp_is_ours(const char *name, const char *base);

#endif
