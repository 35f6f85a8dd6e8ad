/* term_report.h — memsplit's reports in the terminal: the per-layer table,
 * the OOM diagnosis, and a stored run with everything recorded under it.
 *
 * Contract: output is plain ASCII text meant to be read in `width` columns
 * (80 is the design target; every line of the profile table and the
 * diagnosis fits in 80). Byte counts in tables use one compact binary-unit
 * form everywhere ("512", "12K", "340M", "1.2G", "-" for zero; K = 1024);
 * sentences use two decimals ("1.50 GiB"). Nothing here changes data. */
#ifndef MS_TERM_REPORT_H
#define MS_TERM_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "vocab/profile.h"
#include "reports/db.h"

/* The profile: header, one per-layer table per (precision, micro-batch)
 * measured, totals, capacity and peak, and the OOM diagnosis when the trial
 * ran out. */
void ms_term_report_profile(FILE *f, const ms_profile *p, int width);

/* Only the OOM diagnosis block (nothing when p->oom.happened is 0). */
void ms_term_report_oom(FILE *f, const ms_profile *p, int width);
/* Only its first sentence: where, what was requested, what was live, what was missing. */
void ms_term_report_oom_headline(FILE *f, const ms_profile *p, int width);
/* That sentence as one line of text into line (the HTML report says it too). */
void ms_term_report_oom_sentence(const ms_profile *p, char *line, size_t len);

/* Compact table form of a byte count into buf (at least 8 bytes): at most
 * 4 characters. Returns buf. */
char *ms_term_bytes_short(uint64_t bytes, char *buf, size_t len);
/* Sentence form: "1.50 GiB", "340.00 MiB", "12.00 KiB", "512 B". */
char *ms_term_bytes(uint64_t bytes, char *buf, size_t len);

/* One line per run: id, kind, state ("incomplete" for a run whose process
 * died), start time, model. */
void ms_term_report_run_line(FILE *f, const ms_run_info *r, int width);

/* A stored run in full: its header (id, kind, state, times, model, devices
 * with their capacities, command), then what is recorded under it (profile
 * and diagnosis, plans, per-device peaks, steps, recoveries), then the same
 * for its child runs (a doctor's trial, plan and training). A doctor run of
 * a program leads, under its header, with its answer (answer.h): the
 * program, the module that overflowed, the placement in module paths, the
 * measured against the predicted peak per device, the first and last loss.
 * A value not measured (a program's tokens/s) says so, never 0. Returns 0,
 * or -1 with the reason in ms_db_errmsg(db). */
int ms_term_report_run(FILE *f, ms_db *db, int64_t run, int width);
/* The same in brief, for a screen: one line per run, the diagnosis's first
 * sentence instead of the per-layer tables, a line per plan, the
 * per-device peaks, one line of steps, the recoveries; no blank lines.
 * Under a program's doctor run, whose answer leads, the runs it contains
 * do not repeat the diagnosis, the peaks and the steps. */
int ms_term_report_run_brief(FILE *f, ms_db *db, int64_t run, int width);

#endif
