/* profile_json.h — the profile (profile.h) as JSON: what `memsplit profile
 * --json` prints and what `memsplit plan --profile F` reads. The format is
 * documented in docs/plan-format.md ("The profile JSON").
 *
 * Contract:
 *  - ms_profile_to_json() builds the JSON object (caller json_decref()s it);
 *    NULL only when a value cannot be represented (bytes above 2^63).
 *  - ms_profile_from_json() fills *out from such an object after checking it
 *    strictly: every field present with its type, no negative or absurd
 *    bytes, names that fit, and the rows of every (precision, micro-batch)
 *    group covering layers 0..n_layers-1 exactly once. Returns 0, or -1 with
 *    a one-line message naming the field (e.g. "layers[3].act: ..."); on
 *    failure *out is left empty (safe to ms_profile_free()).
 *  - ms_profile_validate() applies the same structural checks to a profile
 *    built in memory (e.g. loaded from the database).
 *  - File helpers read/write a path ("-" is stdin/stdout).
 * Unknown keys are ignored (forward compatibility); nothing prints or aborts. */
#ifndef MS_PROFILE_JSON_H
#define MS_PROFILE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "profiler/profile.h"

#define MS_PROFILE_JSON_VERSION 1
/* Limits the validation enforces; with them every sum the planner forms over
 * a stage fits in 64 bits (4096 layers x 4 static fields x 2^48 < 2^64). */
#define MS_PROFILE_MAX_LAYERS 4096
#define MS_PROFILE_MAX_ROW_BYTES (1ull << 48)   /* 256 TiB per row field */
#define MS_PROFILE_MAX_BATCH (1 << 20)

json_t *ms_profile_to_json(const ms_profile *p);
int ms_profile_from_json(const json_t *root, ms_profile *out, char *err, size_t errlen);
int ms_profile_validate(const ms_profile *p, char *err, size_t errlen);

/* JSON files for the profile and the plan alike: write j (consumed; NULL
 * means it could not be built) to a stream or a path ("-"/NULL = stdout),
 * indented, with a newline; read a document from a path ("-"/NULL = stdin),
 * NULL with "path: line N: why" on failure. 0 or -1 with err. */
int ms_json_write_stream(FILE *f, json_t *j, const char *what, char *err, size_t errlen);
int ms_json_write_path(const char *path, json_t *j, const char *what, char *err, size_t errlen);
json_t *ms_json_read_path(const char *path, char *err, size_t errlen);

int ms_profile_write_json(FILE *f, const ms_profile *p, char *err, size_t errlen);
int ms_profile_save_json(const char *path, const ms_profile *p, char *err, size_t errlen);
int ms_profile_load_json(const char *path, ms_profile *out, char *err, size_t errlen);

/* Strict field readers shared by the project's JSON formats (profile, plan).
 * Each reads obj[key]; on a missing key or a wrong type/range it writes
 * "<ctx>.<key>: what is wrong" into err and returns -1, else 0. */
int ms_json_get_int(const json_t *obj, const char *ctx, const char *key, long long lo, long long hi,
                    long long *out, char *err, size_t errlen);
int ms_json_get_u64(const json_t *obj, const char *ctx, const char *key, uint64_t max, uint64_t *out,
                    char *err, size_t errlen);
/* Any JSON number (integer or real), finite, in [lo, hi]. */
int ms_json_get_num(const json_t *obj, const char *ctx, const char *key, double lo, double hi,
                    double *out, char *err, size_t errlen);
/* A string of at most outlen-1 bytes (longer is an error, not a cut). */
int ms_json_get_str(const json_t *obj, const char *ctx, const char *key, char *out, size_t outlen,
                    char *err, size_t errlen);
int ms_json_get_bool(const json_t *obj, const char *ctx, const char *key, int *out, char *err,
                     size_t errlen);
/* A JSON integer for a uint64 (NULL above INT64_MAX). */
json_t *ms_json_u64(uint64_t v);

#endif
