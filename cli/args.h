/* args.h — command-line values, checked the same way for every flag and
 * worded the same way: "--steps: 4294967297 is out of range [0, 2147483647]".
 *
 * Contract: each parser returns 0 and writes *out, or -1 with a one-line
 * message in err that starts with the flag's name (the caller adds only
 * "memsplit CMD: "); on error *out is unchanged (a size list may be
 * partly written). Integers are decimal,
 * never wrap (an out-of-range value is refused, not cut to int), and the
 * flags that set a config key take that key's range from the key table
 * (trainer/config_table.c), so --steps and train.steps accept the same. */
#ifndef MS_CLI_ARGS_H
#define MS_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "run/inject.h"

int ms_arg_int(const char *flag, const char *s, long long lo, long long hi, int *out, char *err, size_t errlen);
/* The range of the config key (e.g. "train.steps"), which must be an integer key. */
int ms_arg_key_int(const char *flag, const char *key, const char *s, int *out, char *err, size_t errlen);
/* A number, "5%" meaning 0.05 (finite). */
int ms_arg_number(const char *flag, const char *s, double *out, char *err, size_t errlen);
/* The same, in [0, 1). */
int ms_arg_fraction(const char *flag, const char *s, double *out, char *err, size_t errlen);
/* Seconds (a number in [0, max_s]) as milliseconds. */
int ms_arg_seconds(const char *flag, const char *s, double max_s, int *ms, char *err, size_t errlen);
/* "SIZE" or "SIZE,SIZE,..." (vocab/size.h): every element present and
 * above zero, at most max of them; *n gets the count. */
int ms_arg_sizes(const char *flag, const char *s, uint64_t *out, int max, int *n, char *err, size_t errlen);
/* "STEP:RANK" (the ranks' testing aids): STEP >= 1, RANK >= 0; the message
 * is "FLAG takes STEP:RANK". */
int ms_arg_step_rank(const char *flag, const char *s, int *step, int *rank, char *err, size_t errlen);

/* --inject-oom STEP:DEVICE:SIZE or STEP:DEVICE:P% (run/inject.h). */
int ms_arg_inject(const char *s, ms_inject *out, char *err, size_t errlen);

#endif
