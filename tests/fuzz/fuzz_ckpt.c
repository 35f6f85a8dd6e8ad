/* fuzz_ckpt.c — checkpoint files as they are (trainer/checkpoint.h): the
 * magic, version, length and CRC checks, with the bytes exactly as fuzzed.
 * fuzz_ckpt_crc.c is its twin that gets past the checksums. */
#include <stddef.h>
#include <stdint.h>

#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_ckpt_exercise(data, size);
    return 0;
}
