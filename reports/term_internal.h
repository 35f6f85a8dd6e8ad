/* term_internal.h — text helpers shared by the terminal report files only. */
#ifndef MS_TERM_INTERNAL_H
#define MS_TERM_INTERNAL_H

#include <stdio.h>

/* Prints text as lines of at most width columns, breaking at spaces (a
 * word longer than a line is cut); lines after the first are indented by
 * indent spaces. Embedded newlines start a new line. Ends with a newline. */
void rep_wrap(FILE *f, int width, int indent, const char *text);
/* The same, for text that continues a line already holding first_col
 * columns (e.g. after a padded label); spaces in text are word breaks. */
void rep_wrap_from(FILE *f, int width, int first_col, int indent, const char *text);

/* Columns text takes in a terminal: UTF-8 continuation bytes count 0. */
int rep_columns(const char *s, int nbytes);

#endif
