/* scratch_dir.h — a diagnostic pass's own folder for the program's saves.
 *
 * A trial (and the uncapped, record and ballast-only passes) sends the
 * program's checkpoint saves to files of memsplit's own (the bridge,
 * docs/bridge.md). The bridge removed them when Python exited; a program
 * killed (SIGKILL after the grace) or ending with os._exit left them. The
 * folder is made here before the pass and removed here after it, however
 * the program ended.
 *
 * Contract: ms_scratch_base(): where the folders go, $TMPDIR (else /tmp).
 * ms_scratch_make(out, len): a new folder, mode 0700, there, named
 * memsplit-checkpoints-XXXXXX; 0, or -1 with errno.
 * ms_scratch_remove(dir): the folder and all in it (symbolic links removed,
 * never followed); 0, or -1 with errno of the first thing it could not
 * remove. */
#ifndef MS_RUN_SCRATCH_DIR_H
#define MS_RUN_SCRATCH_DIR_H

#include <stddef.h>

const char *ms_scratch_base(void);
int ms_scratch_make(char *out, size_t len);
int ms_scratch_remove(const char *dir);

#endif
