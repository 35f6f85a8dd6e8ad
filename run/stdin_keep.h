/* stdin_keep.h — the program's standard input, kept once and given whole
 * to every pass memsplit runs of it (the trial, the uncapped pass, the
 * rerun after it, a restart after an OOM).
 *
 * Contract: ms_stdin_for_pass() is called before each pass starts the
 * program. The first call keeps the input: a pipe, FIFO or socket on fd 0
 * is read to its end (at most MS_STDIN_MAX bytes) into an unlinked
 * temporary file that then stands on fd 0; a regular file is kept as it is.
 * Every call puts fd 0 back at the start, so each pass reads what the first
 * did. A terminal, or no fd 0, is left alone: an interactive program reads
 * the terminal as it would without memsplit. 0, or -1 with err (the input
 * was larger than MS_STDIN_MAX, or could not be read or kept). */
#ifndef MS_RUN_STDIN_KEEP_H
#define MS_RUN_STDIN_KEEP_H

#include <stddef.h>

#define MS_STDIN_MAX (1024ull << 20)

int ms_stdin_for_pass(char *err, size_t errlen);

#endif
