/* fuzz_ini.c — the INI loader (trainer/config_ini.c): ms_config_load_ini on
 * a file holding the fuzzed bytes, overlaid on the tiny preset as --config
 * is. It reaches the file reader (size and NUL checks), our line reader
 * (long lines, indentation, inline comments), inih and every key's parser.
 * A config it accepts must survive INI text and back unchanged. */
#include "tests/fuzz/fuzz_util.h"
#include "trainer/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ms_config c;
    char err[1024];
    if (ms_config_preset(&c, "tiny", err, sizeof err)) fz_fail("preset tiny", err);
    if (ms_config_load_ini(&c, fz_file(data, size), err, sizeof err) == 0) fz_config_round_trip(&c, "an INI file");
    return 0;
}
