/* term_internal.h — text helpers shared by the terminal report files only. */
#ifndef MS_TERM_INTERNAL_H
#define MS_TERM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "reports/answer.h"
#include "vocab/profile.h"

/* Prints text as lines of at most width columns, breaking at spaces (a
 * word longer than a line is cut); lines after the first are indented by
 * indent spaces. Embedded newlines start a new line; every other control
 * character is printed visibly (vocab/visible.h: "\x1b"), whatever the
 * text holds. Ends with a newline. */
void rep_wrap(FILE *f, int width, int indent, const char *text);
/* The same, for text that continues a line already holding first_col
 * columns (e.g. after a padded label); spaces in text are word breaks. */
void rep_wrap_from(FILE *f, int width, int first_col, int indent, const char *text);

/* Columns text takes in a terminal: UTF-8 continuation bytes count 0. */
int rep_columns(const char *s, int nbytes);

/* The longest prefix of s of at most max_bytes bytes that ends at a UTF-8
 * character boundary, in bytes (for "%.*s", which would cut anywhere). */
int rep_prefix(const char *s, int max_bytes);

/* s in at most w columns (w >= 3): s itself when it fits, else its head
 * and its tail around a '~' ("model.tra~rmers.23"), cut at character
 * boundaries, in buf (at least 4 * w + 2 bytes). Returns what to print. */
const char *rep_cut(const char *s, int w, char *buf, size_t len);
/* s (at most w columns) left-aligned in w columns. */
void rep_pad(FILE *f, const char *s, int w);
/* A capacity as the reports say it: "20.00 MiB", or "no cap" for 0 (a
 * device used whole: the CPU backend without --gpu-mem). */
void rep_capacity(uint64_t capacity, char *buf, size_t len);
/* s (a name from the database) visible and in exactly w columns: cut
 * around a '~' at character boundaries when longer (rep_cut), padded. */
void rep_cell(FILE *f, const char *s, int w);

/* The lead of a program's doctor run (answer.h): the program, the module
 * that overflowed, the placement, measured against predicted per device,
 * the losses; one labelled field each, within width. */
void rep_answer(FILE *f, const ms_answer *a, int width);

#endif
