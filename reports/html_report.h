/* html_report.h — a stored run as one self-contained HTML page: charts in
 * inline SVG, styles inline, no script and no fetch of anything (a
 * Content-Security-Policy in the page forbids it), readable in light and
 * dark colour schemes and on paper.
 *
 * Contract:
 *  - A doctor run of a user's program opens with its answer (answer.h):
 *    the program, the module that overflowed, the placement in module
 *    paths, measured against predicted per device, the first and last loss.
 *  - The page covers the run and the runs it contains (a doctor's trial,
 *    plan and training), in four charts, each followed by a table of its
 *    exact numbers: (a) the trial's memory per layer by category against
 *    the capacity, OOM marked; (b) the trial's live memory over time by
 *    category, OOM marked; (c) per device, predicted against measured peak
 *    by category, against capacity; (d) loss and tokens/s over the steps of
 *    each training run, recoveries marked. A part with nothing recorded
 *    says so in words; so does a value that was not measured (a
 *    program's tokens/s), which is never drawn as 0. Every chart has the
 *    profile's categories (a program's fp32 master weights are master).
 *  - Every string from the database is HTML-escaped. Every number in a
 *    table carries its exact value in a data-v attribute (bytes as exact
 *    integers) beside its human form (KiB/MiB/GiB); tables have stable ids
 *    (docs/html-report.md lists them).
 *  - Reads the database only. Returns 0, or -1 with the reason in err;
 *    never aborts. ms_html_report_write() writes to a new temporary file
 *    beside path (a random name, created exclusively, never through a
 *    symlink planted there: vocab/tmpfile.h) and renames it, so path is
 *    never left half-written and nothing but path is written. */
#ifndef MS_HTML_REPORT_H
#define MS_HTML_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "reports/db.h"

int ms_html_report_run(FILE *f, ms_db *db, int64_t run, char *err, size_t errlen);
int ms_html_report_write(const char *path, ms_db *db, int64_t run, char *err, size_t errlen);

#endif
