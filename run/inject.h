/* inject.h — the testing aid --inject-oom STEP:DEVICE:SIZE or
 * STEP:DEVICE:P%: at the start of step `step` (>= 1; 0: none), plan device
 * `dev` shrinks to `bytes`, or, with frac > 0, to its reserve plus frac of
 * what its tensors took at their peak, as if another process took the rest
 * (run/rerun.c applies it; cli/args.h parses it). */
#ifndef MS_RUN_INJECT_H
#define MS_RUN_INJECT_H

#include <stddef.h>

typedef struct ms_inject {
    int step, dev;      /* step 0: none */
    size_t bytes;
    double frac;        /* in (0, 1); 0: use bytes */
} ms_inject;

#endif
