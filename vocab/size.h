/* size.h — byte sizes in and out: "24GiB" <-> 25769803776 <-> "24.00 GiB".
 *
 * Contract: ms_parse_size accepts "123", "512MiB", "24GiB", "1.5GB",
 * "64KiB", "4kB": binary (K/KiB/M/MiB/G/GiB/T/TiB; single letters are
 * binary) and decimal (kB/MB/GB/TB) units, case-insensitive, an optional
 * space before the unit; integer arithmetic, so "1.5GB" is exactly
 * 1500000000 and overflow is an error, not a wrap. Returns 0 or -1 with a
 * message in err. ms_fmt_bytes writes the human form into buf. */
#ifndef MS_SIZE_H
#define MS_SIZE_H

#include <stddef.h>

int ms_parse_size(const char *s, size_t *out, char *err, size_t errlen);
char *ms_fmt_bytes(size_t bytes, char *buf, size_t len);

#endif
