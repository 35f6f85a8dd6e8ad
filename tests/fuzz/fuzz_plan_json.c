/* fuzz_plan_json.c — plan JSON (vocab/plan_json.h) as `train --plan` and
 * `doctor` read it: jansson's parse, then ms_plan_from_json's strict checks.
 * A plan it accepts must write and read back to the same text (the
 * contract: "equal field for field"). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/plan_json.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, 0, &je);   /* the flags ms_json_read_path uses */
    if (!j) return 0;
    ms_plan p;
    char err[512];
    if (ms_plan_from_json(j, &p, err, sizeof err) == 0) {
        char *text = ms_plan_to_string(&p);
        if (!text) fz_fail("a plan that was read cannot be written", NULL);
        json_t *j2 = json_loads(text, 0, &je);
        if (!j2) fz_fail("ms_plan_to_string wrote text jansson cannot read", text);
        ms_plan back;
        if (ms_plan_from_json(j2, &back, err, sizeof err)) fz_fail(err, text);
        char *again = ms_plan_to_string(&back);
        if (!again || strcmp(text, again)) fz_fail("plan JSON does not read back equal", text);
        free(again);
        ms_plan_free(&back);
        json_decref(j2);
        free(text);
        ms_plan_free(&p);
    }
    json_decref(j);
    return 0;
}
