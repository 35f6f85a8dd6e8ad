/* fuzz_ckpt_crc.c — checkpoint files with their length and CRC-32C fields
 * rewritten after mutation: a random change otherwise fails the checksum
 * and never reaches the header parser (config text, section table, sizes)
 * or the loads that follow it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    fz_ckpt_fix_checksums(buf, size);
    fz_ckpt_exercise(buf, size);
    free(buf);
    return 0;
}
