/* undo_files.h — what a diagnostic pass left undone in the program's folders.
 *
 * In a diagnostic pass the bridge keeps a file of the program's that the
 * pass replaces under a hidden name beside it, and writes a file the
 * program opens for writing beside its path first (docs/bridge.md,
 * "Checkpoints"). At the pass's end it puts them back; a pass killed before
 * (SIGKILL after memsplit's grace) cannot. So the bridge keeps, in the
 * pass's scratch folder (run/scratch_dir.h), a file "undo" of what that end
 * would do now, and memsplit applies it after the pass, before removing the
 * folder. A pass that ended its own way removed the file.
 *
 * Format: records of NUL-terminated fields, "R" KEPT PATH (rename KEPT over
 * PATH: the program's file from before, back), "D" HIDDEN (remove the
 * pass's hidden file) or "N" PATH (remove a file the pass added in a
 * checkpoint's folder). Only the names the bridge makes are taken: absolute,
 * in one folder with PATH, named .NAME.memsplit-PID-N (KEPT: NAME is PATH's
 * own and the name ends ".before"), so that no file of the program's other
 * than PATH is renamed or removed whatever the file holds. An "N" removes a
 * regular file only, never one an "R" puts back, and only one changed since
 * the pass began (its ctime, which no program sets): nothing the program
 * could not have removed in the pass itself.
 *
 * Contract:
 * ms_undo_parse(buf, len, on_record, ctx): on_record(kind 'R', 'D' or 'N',
 * the hidden name (NULL for 'N'), PATH (NULL for 'D'), ctx) for each record
 * in order, after checking all of them; 0, or -1 where one is malformed
 * (then none is given).
 * ms_undo_apply(dir, since, &done, err, errlen): dir/undo applied, if there
 * is one (a name already gone is skipped; "N" records only with since, the
 * pass's start on CLOCK_REALTIME_COARSE, the clock files are stamped by);
 * done: the records applied. 0, or -1 with err (unreadable, malformed, a
 * rename or removal that failed; the others are still made). */
#ifndef MS_RUN_UNDO_FILES_H
#define MS_RUN_UNDO_FILES_H

#include <stddef.h>
#include <time.h>

#define MS_UNDO_FILE "undo"

typedef int (*ms_undo_record_fn)(char kind, const char *hidden, const char *path, void *ctx);

int ms_undo_parse(const char *buf, size_t len, ms_undo_record_fn on_record, void *ctx);
int ms_undo_apply(const char *dir, const struct timespec *since, int *done, char *err, size_t errlen);

#endif
