/* fuzz_profile_json.c — profile JSON (vocab/profile_json.h) as `plan
 * --profile F` reads it. A profile it accepts must pass ms_profile_validate
 * (the same checks, on the struct), print as the terminal report does, and
 * write and read back to the same JSON. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/term_report.h"
#include "tests/fuzz/fuzz_util.h"
#include "vocab/profile_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *dump(const json_t *j) { return j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w"))) fz_fail("cannot open /dev/null", NULL);
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, 0, &je);   /* the flags ms_json_read_path uses */
    if (!j) return 0;
    ms_profile p;
    char err[512];
    if (ms_profile_from_json(j, &p, err, sizeof err) == 0) {
        if (ms_profile_validate(&p, err, sizeof err)) fz_fail("read, but does not validate", err);
        ms_term_report_profile(sink, &p, 80);
        json_t *j2 = ms_profile_to_json(&p);
        char *text = dump(j2);
        if (!text) fz_fail("a profile that was read cannot be written", NULL);
        ms_profile back;
        if (ms_profile_from_json(j2, &back, err, sizeof err)) fz_fail(err, text);
        json_t *j3 = ms_profile_to_json(&back);
        char *again = dump(j3);
        if (!again || strcmp(text, again)) fz_fail("profile JSON does not read back equal", text);
        free(again);
        json_decref(j3);
        ms_profile_free(&back);
        free(text);
        json_decref(j2);
        ms_profile_free(&p);
    }
    json_decref(j);
    return 0;
}
