/* report_json.h — a stored run as one JSON object, for `memsplit report
 * --json`.
 *
 * Contract: ms_report_run_json() returns an object with the run (id, kind,
 * status, state — "incomplete" for a run whose process died —, started,
 * finished or null, model, devices, cmdline, parent, notes), "profile" (null,
 * or exactly the object `memsplit profile --json` prints:
 * ms_profile_to_json()), "plans", "device_peaks", "steps", "recoveries", and
 * "children" (the same for each run it contains). A new reference, or NULL
 * with the reason in ms_db_errmsg(db) (for a profile that JSON cannot hold,
 * a generic message). Field list: docs/database.md. */
#ifndef MS_REPORT_JSON_H
#define MS_REPORT_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "vocab/profile.h"
#include "reports/db.h"

json_t *ms_report_run_json(ms_db *db, int64_t run);

#endif
