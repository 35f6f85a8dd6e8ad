/* args.c — command-line value parsers (args.h). */
#include "cli/args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/config_keys.h"
#include "vocab/errf.h"
#include "vocab/limits.h"
#include "vocab/size.h"

int ms_arg_int(const char *flag, const char *s, long long lo, long long hi, int *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || end == s) return ms_errf(err, errlen, "%s: '%s' is not an integer", flag, s);
    /* ERANGE: beyond long long, so beyond any range we accept */
    if (errno == ERANGE || v < lo || v > hi || v < INT32_MIN || v > INT32_MAX)
        return ms_errf(err, errlen, "%s: %s is out of range [%lld, %lld]", flag, s, lo, hi);
    *out = (int)v;
    return 0;
}

int ms_arg_key_int(const char *flag, const char *key, const char *s, int *out, char *err, size_t errlen)
{
    const ms_config_key *k = ms_config_key_find(NULL, key, err, errlen);
    if (!k || k->type != MS_KEY_INT) return ms_errf(err, errlen, "%s: internal error (%s is no integer key)", flag, key);
    return ms_arg_int(flag, s, (long long)k->min, (long long)k->max, out, err, errlen);
}

int ms_arg_number(const char *flag, const char *s, double *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v)) return ms_errf(err, errlen, "%s: '%s' is not a number", flag, s);
    if (*end == '%' && end[1] == 0) v /= 100;
    else if (*end) return ms_errf(err, errlen, "%s: '%s' is not a number", flag, s);
    *out = v;
    return 0;
}

int ms_arg_fraction(const char *flag, const char *s, double *out, char *err, size_t errlen)
{
    double v;
    if (ms_arg_number(flag, s, &v, err, errlen) || !(v >= 0 && v < 1))
        return ms_errf(err, errlen, "%s: '%s' is not a fraction in [0, 1) (e.g. 0.05 or 5%%)", flag, s);
    *out = v;
    return 0;
}

int ms_arg_seconds(const char *flag, const char *s, double max_s, int *ms, char *err, size_t errlen)
{
    double v;
    if (ms_arg_number(flag, s, &v, err, errlen) || strchr(s, '%') || !(v >= 0 && v <= max_s))
        return ms_errf(err, errlen, "%s: '%s' is not a number of seconds in [0, %g]", flag, s, max_s);
    *ms = (int)lround(v * 1000);
    return 0;
}

int ms_arg_step_rank(const char *flag, const char *s, int *step, int *rank, char *err, size_t errlen)
{
    int st, rk;
    if (sscanf(s, "%d:%d", &st, &rk) != 2 || st < 1 || rk < 0) return ms_errf(err, errlen, "%s takes STEP:RANK", flag);
    *step = st;
    *rank = rk;
    return 0;
}

int ms_arg_sizes(const char *flag, const char *s, uint64_t *out, int max, int *n, char *err, size_t errlen)
{
    int k = 0;
    for (const char *p = s;; k++) {
        size_t len = strcspn(p, ",");
        char tok[64], why[160];
        size_t sz;
        if (k == max) return ms_errf(err, errlen, "%s: more than %d sizes", flag, max);
        if (len == 0) return ms_errf(err, errlen, "%s '%s': size %d is empty", flag, s, k + 1);
        if (len >= sizeof tok) return ms_errf(err, errlen, "%s '%s': size %d is too long", flag, s, k + 1);
        memcpy(tok, p, len);
        tok[len] = 0;
        if (ms_parse_size(tok, &sz, why, sizeof why)) return ms_errf(err, errlen, "%s: %s", flag, why);
        if (sz == 0) return ms_errf(err, errlen, "%s '%s': a device needs some memory", flag, tok);
        out[k] = sz;
        if (!p[len]) break;
        p += len + 1;
    }
    *n = k + 1;
    return 0;
}

int ms_arg_inject(const char *s, ms_inject *o, char *err, size_t errlen)
{
    static const char form[] = "--inject-oom takes STEP:DEVICE:SIZE or STEP:DEVICE:P% (0 < P < 100)";
    char buf[96], why[256];
    const char *part[3];
    if (strlen(s) >= sizeof buf) return ms_errf(err, errlen, "%s; '%.40s...' is too long", form, s);
    snprintf(buf, sizeof buf, "%s", s);
    char *p = buf;
    for (int i = 0; i < 3; i++) {
        part[i] = p;
        char *colon = strchr(p, ':');
        if ((i < 2) != (colon != NULL)) return ms_errf(err, errlen, "%s, not '%s'", form, s);
        if (colon) { *colon = 0; p = colon + 1; }
    }
    int step, dev;
    if (ms_arg_int("step", part[0], 1, INT_MAX, &step, why, sizeof why) ||
        ms_arg_int("device", part[1], 0, MS_MAX_DEVICES - 1, &dev, why, sizeof why))
        return ms_errf(err, errlen, "%s: %s", form, why);
    double frac = 0;
    size_t bytes = 0;
    if (strchr(part[2], '%')) { /* "90%": the device keeps 90% of what its tensors took at their peak */
        if (ms_arg_number("size", part[2], &frac, why, sizeof why) || !(frac > 0 && frac < 1))
            return ms_errf(err, errlen, "%s, not '%s'", form, s);
    } else if (ms_parse_size(part[2], &bytes, why, sizeof why)) {
        return ms_errf(err, errlen, "%s: %s", form, why);
    }
    o->step = step;
    o->dev = dev;
    o->frac = frac;
    o->bytes = bytes;
    return 0;
}
