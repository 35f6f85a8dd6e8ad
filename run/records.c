/* records.c — the database writes' outcomes and the JSON the runs share
 * (records.h). */
#include "run/records.h"

#include <stdint.h>
#include <stdio.h>

long long ms_run_recorded(long long rc, ms_db *db, const char *cmd, const char *what, int *failed)
{
    if (rc < 0) {
        fprintf(stderr, "memsplit %s: recording %s in the database: %s\n", cmd, what, ms_db_errmsg(db));
        (*failed)++;
    }
    return rc;
}

char *ms_run_peaks_json(const ms_device *devs, int n)
{
    json_t *o = json_object();
    for (int d = 0; o && d < n; d++) json_object_set_new(o, devs[d].name, json_integer((json_int_t)devs[d].peak_total));
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

json_t *ms_run_cat_json(const size_t *bytes)
{
    json_t *o = json_object();
    for (int c = 0; c < MS_CAT_N; c++) json_object_set_new(o, ms_cat_name((ms_cat)c), json_integer((json_int_t)bytes[c]));
    return o;
}

json_t *ms_run_device_row(const char *name, size_t capacity, size_t predicted, size_t measured,
                          const size_t *pred_cat, const size_t *meas_cat, double *gap)
{
    double g = predicted && measured ? ((double)measured - (double)predicted) / (double)predicted : 0;
    if (gap) *gap = g;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "capacity_bytes", capacity == SIZE_MAX ? json_null() : json_integer((json_int_t)capacity));
    json_object_set_new(o, "predicted_peak_bytes", json_integer((json_int_t)predicted));
    json_object_set_new(o, "measured_peak_bytes", measured ? json_integer((json_int_t)measured) : json_null());
    json_object_set_new(o, "gap", measured && predicted ? json_real(g) : json_null());
    json_object_set_new(o, "predicted_by_category", ms_run_cat_json(pred_cat));
    json_object_set_new(o, "measured_by_category", meas_cat ? ms_run_cat_json(meas_cat) : json_null());
    return o;
}
