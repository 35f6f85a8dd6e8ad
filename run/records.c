/* records.c — the database writes' outcomes and the JSON the runs share
 * (records.h). */
#include "run/records.h"

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
