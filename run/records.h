/* records.h — what the runs write into the run database and their JSON
 * summaries share: a write's outcome said once and counted, the per-device
 * peaks of a step row, and bytes per category as JSON.
 *
 * Contract:
 *  - ms_run_recorded(): when rc < 0 says on stderr "memsplit CMD: recording
 *    WHAT in the database: why" and counts it in *failed, so that the run
 *    ends with exit status 2 rather than losing a record silently. Returns rc.
 *  - ms_run_peaks_json(): {"cpu/v0": peak bytes, ...} of n devices, compact,
 *    malloc'd (NULL: out of memory).
 *  - ms_run_cat_json(): {"param": n, ...} from an array of MS_CAT_N sizes.
 *  - ms_run_device_row(): one device's row of a rerun, the same for the
 *    built-in model, its MPI ranks and a program (docs/database.md, "Device
 *    rows"): name, capacity_bytes (null when unbounded: SIZE_MAX),
 *    predicted_peak_bytes, measured_peak_bytes and gap (null when the
 *    device's peak was not measured: measured 0), predicted_by_category and
 *    measured_by_category (null when meas_cat is NULL); *gap (may be NULL)
 *    gets the gap, 0 when not measured. */
#ifndef MS_RUN_RECORDS_H
#define MS_RUN_RECORDS_H

#include <jansson.h>

#include "reports/db.h"
#include "trainer/device.h"

long long ms_run_recorded(long long rc, ms_db *db, const char *cmd, const char *what, int *failed);
char *ms_run_peaks_json(const ms_device *devs, int n);
json_t *ms_run_cat_json(const size_t *bytes);
json_t *ms_run_device_row(const char *name, size_t capacity, size_t predicted, size_t measured,
                          const size_t *pred_cat, const size_t *meas_cat, double *gap);

#endif
