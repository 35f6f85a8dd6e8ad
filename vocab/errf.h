/* errf.h — the one way every module writes its one-line error message.
 *
 * Contract: ms_errf formats into err (when err and errlen are non-zero,
 * always terminated, cut to fit) and returns -1, so that a failing function
 * can `return ms_errf(err, errlen, "...", ...)`. MS_PLAN_ERROR is -1 too. */
#ifndef MS_ERRF_H
#define MS_ERRF_H

#include <stddef.h>

__attribute__((format(printf, 3, 4))) int ms_errf(char *err, size_t errlen, const char *fmt, ...);

#endif
