/* json_io.c — strict JSON field readers and JSON file helpers shared by the
 * project's formats (profile, plan, bridge messages). */
#include "vocab/json_io.h"
#include "vocab/errf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>


/* ---- strict readers ------------------------------------------------- */

static const json_t *need(const json_t *obj, const char *ctx, const char *key, char *err, size_t errlen)
{
    if (!json_is_object(obj)) {
        ms_errf(err, errlen, "%s: expected an object", ctx);
        return NULL;
    }
    const json_t *v = json_object_get(obj, key);
    if (!v) ms_errf(err, errlen, "%s.%s: missing", ctx, key);
    return v;
}

int ms_json_get_int(const json_t *obj, const char *ctx, const char *key, long long lo, long long hi,
                    long long *out, char *err, size_t errlen)
{
    const json_t *v = need(obj, ctx, key, err, errlen);
    if (!v) return -1;
    if (!json_is_integer(v)) return ms_errf(err, errlen, "%s.%s: expected an integer", ctx, key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return ms_errf(err, errlen, "%s.%s: %lld is out of range [%lld, %lld]", ctx, key, x, lo, hi);
    *out = x;
    return 0;
}

int ms_json_get_u64(const json_t *obj, const char *ctx, const char *key, uint64_t max, uint64_t *out,
                    char *err, size_t errlen)
{
    const json_t *v = need(obj, ctx, key, err, errlen);
    if (!v) return -1;
    if (!json_is_integer(v)) return ms_errf(err, errlen, "%s.%s: expected an integer number of bytes", ctx, key);
    long long x = json_integer_value(v);
    if (x < 0) return ms_errf(err, errlen, "%s.%s: negative bytes (%lld)", ctx, key, x);
    if ((uint64_t)x > max)
        return ms_errf(err, errlen, "%s.%s: %lld bytes is beyond the limit %" PRIu64, ctx, key, x, max);
    *out = (uint64_t)x;
    return 0;
}

int ms_json_get_num(const json_t *obj, const char *ctx, const char *key, double lo, double hi,
                    double *out, char *err, size_t errlen)
{
    const json_t *v = need(obj, ctx, key, err, errlen);
    if (!v) return -1;
    if (!json_is_number(v)) return ms_errf(err, errlen, "%s.%s: expected a number", ctx, key);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return ms_errf(err, errlen, "%s.%s: %g is out of range [%g, %g]", ctx, key, x, lo, hi);
    *out = x;
    return 0;
}

int ms_json_get_str(const json_t *obj, const char *ctx, const char *key, char *out, size_t outlen,
                    char *err, size_t errlen)
{
    const json_t *v = need(obj, ctx, key, err, errlen);
    if (!v) return -1;
    if (!json_is_string(v)) return ms_errf(err, errlen, "%s.%s: expected a string", ctx, key);
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n >= outlen) return ms_errf(err, errlen, "%s.%s: longer than %zu characters", ctx, key, outlen - 1);
    if (memchr(s, 0, n)) return ms_errf(err, errlen, "%s.%s: contains a NUL character", ctx, key);
    memcpy(out, s, n);
    out[n] = 0;
    return 0;
}

int ms_json_get_bool(const json_t *obj, const char *ctx, const char *key, int *out, char *err,
                     size_t errlen)
{
    const json_t *v = need(obj, ctx, key, err, errlen);
    if (!v) return -1;
    if (!json_is_boolean(v)) return ms_errf(err, errlen, "%s.%s: expected true or false", ctx, key);
    *out = json_is_true(v);
    return 0;
}

json_t *ms_json_u64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? NULL : json_integer((json_int_t)v);
}

/* ---- files ----------------------------------------------------------- */

int ms_json_write_stream(FILE *f, json_t *j, const char *what, char *err, size_t errlen)
{
    if (!j) return ms_errf(err, errlen, "the %s cannot be written as JSON (a value is out of range)", what);
    int rc = json_dumpf(j, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (rc || fputc('\n', f) == EOF || fflush(f)) return ms_errf(err, errlen, "writing the %s JSON failed", what);
    return 0;
}

int ms_json_write_path(const char *path, json_t *j, const char *what, char *err, size_t errlen)
{
    if (!path || strcmp(path, "-") == 0) return ms_json_write_stream(stdout, j, what, err, errlen);
    FILE *f = fopen(path, "w");
    if (!f) {
        json_decref(j);
        return ms_errf(err, errlen, "%s: %s", path, strerror(errno));
    }
    int rc = ms_json_write_stream(f, j, what, err, errlen);
    if (fclose(f) && !rc) rc = ms_errf(err, errlen, "%s: %s", path, strerror(errno));
    return rc;
}

json_t *ms_json_read_path(const char *path, char *err, size_t errlen)
{
    json_error_t je;
    json_t *j = (!path || strcmp(path, "-") == 0) ? json_loadf(stdin, 0, &je) : json_load_file(path, 0, &je);
    if (!j && je.line < 1) ms_errf(err, errlen, "%s", je.text); /* could not open or read */
    else if (!j) ms_errf(err, errlen, "%s: line %d: %s", path ? path : "-", je.line, je.text);
    return j;
}

