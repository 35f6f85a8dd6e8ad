/* text.h — text as the runs and the front ends print it.
 * ms_print_wrapped(): s wrapped at width columns, at spaces (runs of
 * spaces collapse to one), with a final newline; every control character
 * in s (a newline too) is printed visibly (vocab/visible.h), since the text
 * may hold names a program chose.
 * ms_print_json(): one JSON value on stdout, indented, in its keys' order,
 * with a newline; stdout is flushed. */
#ifndef MS_RUN_TEXT_H
#define MS_RUN_TEXT_H

#include <stdio.h>

#include <jansson.h>

void ms_print_wrapped(FILE *f, const char *s, int width);
void ms_print_json(json_t *j);

#endif
