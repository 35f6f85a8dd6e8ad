/* fuzz_size.c — the size parser (vocab/size.h) behind --gpu-mem, the INI
 * size keys and --inject-oom: never a crash, and what it accepts prints
 * and parses back as the same number of bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "vocab/size.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256) return 0;   /* sizes are short; longer adds nothing */
    char *s = fz_cstr(data, size);
    if (!s) return 0;
    char err[256], human[64], digits[32];
    size_t v = 0, back = 0;
    if (ms_parse_size(s, &v, err, sizeof err) == 0) {
        ms_fmt_bytes(v, human, sizeof human);
        snprintf(digits, sizeof digits, "%zu", v);
        if (ms_parse_size(digits, &back, err, sizeof err) != 0 || back != v) fz_fail("plain bytes do not read back", s);
    }
    free(s);
    return 0;
}
