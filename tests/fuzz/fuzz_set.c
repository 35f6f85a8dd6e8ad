/* fuzz_set.c — `--set KEY=VALUE` (ms_config_set): the input is a list of
 * --set arguments separated by NUL bytes, applied in order to the tiny
 * preset, as the command line would. A config that took them must validate
 * without crashing and survive INI text and back unchanged, since that is
 * how runs are recorded and checkpoints compared. */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "trainer/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *s = fz_cstr(data, size);
    if (!s) return 0;
    ms_config c;
    char err[1024];
    if (ms_config_preset(&c, "tiny", err, sizeof err)) fz_fail("preset tiny", err);
    int ok = 1;
    for (size_t i = 0; i <= size && ok; i += strlen(s + i) + 1) ok = ms_config_set(&c, s + i, err, sizeof err) == 0;
    if (ok) fz_config_round_trip(&c, s);
    free(s);
    return 0;
}
