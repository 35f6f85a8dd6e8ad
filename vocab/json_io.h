/* json_io.h — the JSON helpers every format shares (jansson underneath).
 *
 * Contract: the strict readers check a field's presence, type and range and
 * name it in the message ("<ctx>.<key>: what is wrong"); the file helpers
 * read and write whole documents ("-" or NULL is stdin/stdout). Every
 * function returns 0 (or a value) on success and -1 (or NULL) with a
 * one-line message in err; nothing prints or aborts. */
#ifndef MS_JSON_IO_H
#define MS_JSON_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* JSON files for the profile and the plan alike: write j (consumed; NULL
 * means it could not be built) to a stream or a path ("-"/NULL = stdout),
 * indented, with a newline; read a document from a path ("-"/NULL = stdin),
 * NULL with "path: line N: why" on failure. 0 or -1 with err. */
int ms_json_write_stream(FILE *f, json_t *j, const char *what, char *err, size_t errlen);
int ms_json_write_path(const char *path, json_t *j, const char *what, char *err, size_t errlen);
json_t *ms_json_read_path(const char *path, char *err, size_t errlen);

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
