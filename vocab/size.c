/* size.c — byte sizes in and out ("24GiB" <-> 25769803776 <-> "24.00 GiB").
 * Sizes are parsed with integer arithmetic so that
 * "1.5GB" is exactly 1500000000 and overflow is detected, not wrapped. */
#include "vocab/size.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *name;
    uint64_t mult;
} size_unit;

/* Matched case-insensitively; single letters are binary (24G = 24GiB),
 * two-letter forms are decimal (24GB = 24e9), as size.h states. */
static const size_unit units[] = {
    {"", 1},         {"b", 1},
    {"k", 1ull << 10}, {"kib", 1ull << 10}, {"kb", 1000ull},
    {"m", 1ull << 20}, {"mib", 1ull << 20}, {"mb", 1000000ull},
    {"g", 1ull << 30}, {"gib", 1ull << 30}, {"gb", 1000000000ull},
    {"t", 1ull << 40}, {"tib", 1ull << 40}, {"tb", 1000000000000ull},
};

int ms_parse_size(const char *s, size_t *out, char *err, size_t errlen) {
    if (!s) s = "";
    const char *p = s;
    while (isspace((unsigned char)*p)) p++;
    if (*p == '-') {
        snprintf(err, errlen, "size '%s' is negative", s);
        return -1;
    }
    if (*p == '+') p++;
    /* mantissa: at most 20 significant digits so that mantissa * unit fits
     * comfortably in 128 bits (10^20 * 2^40 < 2^107) */
    unsigned __int128 mant = 0;
    int digits = 0, frac_digits = 0, seen_dot = 0;
    for (;; p++) {
        if (isdigit((unsigned char)*p)) {
            if (mant != 0 || *p != '0') digits++; /* leading zeros are free */
            if (digits > 20) {
                snprintf(err, errlen, "size '%s' is too large", s);
                return -1;
            }
            mant = mant * 10 + (unsigned)(*p - '0');
            if (seen_dot) frac_digits++;
            if (frac_digits > 18) {
                snprintf(err, errlen, "size '%s' has too many decimals", s);
                return -1;
            }
        } else if (*p == '.' && !seen_dot) {
            seen_dot = 1;
        } else {
            break;
        }
    }
    /* at least one digit before the unit ("." or "GiB" alone are not sizes) */
    const char *num_end = p;
    int any_digit = 0;
    for (const char *q = s; q < num_end; q++)
        if (isdigit((unsigned char)*q)) any_digit = 1;
    if (!any_digit) {
        snprintf(err, errlen, "'%s' is not a size (e.g. 512MiB, 24GiB, 1.5GB, 4096)", s);
        return -1;
    }
    while (*p == ' ' || *p == '\t') p++;
    char unit[8];
    size_t ul = 0;
    while (isalpha((unsigned char)*p) && ul < sizeof unit - 1) unit[ul++] = (char)*p++;
    unit[ul] = 0;
    while (isspace((unsigned char)*p)) p++;
    uint64_t mult = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(unit, units[i].name)) mult = units[i].mult;
    if (*p || !mult) {
        snprintf(err, errlen, "'%s' is not a size: unknown unit (use B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)", s);
        return -1;
    }
    unsigned __int128 pow10 = 1;
    for (int i = 0; i < frac_digits; i++) pow10 *= 10;
    unsigned __int128 num = mant * mult;
    /* "1.1GiB" is not a whole number of bytes: round down (a capacity a
     * byte smaller is harmless), but a fractional plain byte count is a typo */
    if (mult == 1 && num % pow10) {
        snprintf(err, errlen, "size '%s' is not a whole number of bytes", s);
        return -1;
    }
    unsigned __int128 bytes = num / pow10;
    if (bytes > (unsigned __int128)SIZE_MAX) {
        snprintf(err, errlen, "size '%s' is too large", s);
        return -1;
    }
    *out = (size_t)bytes;
    return 0;
}

char *ms_fmt_bytes(size_t bytes, char *buf, size_t len) {
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (!buf || !len) return buf;
    if (bytes < 1024) {
        snprintf(buf, len, "%zu B", bytes);
        return buf;
    }
    int u = 0;
    double v = (double)bytes;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    /* 1023.999 KiB would print as "1024.00 KiB": step up a unit instead */
    if (v >= 1023.995 && u < 6) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.2f %s", v, names[u]);
    return buf;
}
