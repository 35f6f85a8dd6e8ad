/* fuzz_db.c — the run database as `memsplit report` and `plan --db` read
 * it: the fuzzed bytes are a database file, handed to SQLite through
 * sqlite3_deserialize (ms_db_open_image), recognised and upgraded as
 * ms_db_open does a file; then every report (--list, the terminal, --json,
 * --html) of the newest run and of the first listed runs, and the profile
 * plan --db loads and validates. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "reports/db.h"
#include "reports/html_report.h"
#include "reports/report_json.h"
#include "reports/term_report.h"
#include "tests/fuzz/fuzz_util.h"
#include "vocab/profile_json.h"

#define MAX_RUNS 4   /* runs reported per input: more repeats the same code */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct { FILE *f; int n; int64_t ids[MAX_RUNS]; } runs;

static int list_one(const ms_run_info *r, void *ctx)
{
    runs *l = ctx;
    ms_term_report_run_line(l->f, r, 80);
    if (l->n < MAX_RUNS) l->ids[l->n++] = r->id;
    return 0;
}

static void report(FILE *sink, ms_db *db, int64_t run)
{
    char err[512];
    ms_term_report_run(sink, db, run, 80);
    json_t *j = ms_report_run_json(db, run);
    if (j) json_dumpf(j, sink, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    ms_html_report_run(sink, db, run, err, sizeof err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w"))) fz_fail("cannot open /dev/null", NULL);
    char err[512];
    ms_db *db = ms_db_open_image(data, size, err, sizeof err);
    if (!db) return 0;
    runs l = { sink, 0, { 0 } };
    ms_db_list_runs(db, list_one, &l);
    int64_t top = ms_db_latest_top_run(db);
    if (top > 0) report(sink, db, top);
    for (int i = 0; i < l.n; i++)
        if (l.ids[i] != top) report(sink, db, l.ids[i]);
    int64_t prof_run = ms_db_latest_profile_run(db);
    if (prof_run > 0) {
        ms_profile p;
        if (ms_db_load_profile(db, prof_run, &p, err, sizeof err) == 0) ms_profile_validate(&p, err, sizeof err);
        ms_profile_free(&p);   /* left empty on failure: safe either way */
    }
    ms_db_close(db);
    return 0;
}
