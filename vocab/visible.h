/* visible.h — text from outside shown safely: in a terminal, and as a
 * Python string literal.
 *
 * A program's module and class names, a recorded command line, anything a
 * database holds, is untrusted input. Printed raw, ESC, CR, BS and OSC
 * sequences in it drive the terminal (clear the screen, rewrite a line, set
 * the title or a link), and bidirectional controls reorder what is read;
 * pasted into code, a quote ends the string and what follows runs.
 *
 * Contract (UTF-8 is decoded strictly: no overlong forms, no surrogates,
 * nothing past U+10FFFF; a byte that starts no character is "invalid"):
 *  - ms_utf8_next(): the length (1..4) of the character at s (n bytes
 *    there), its code point in *cp; 0 for an invalid byte (*cp = the byte).
 *  - ms_visible(): s as a terminal may show it: valid UTF-8 text as it is
 *    (a backslash too), and what a terminal would act on written visibly:
 *    C0 controls, DEL and C1 controls as \xHH (\t \n \r as such), invalid
 *    bytes as \xHH, invisible format characters (bidirectional controls,
 *    zero-width marks, line and paragraph separators, U+FEFF) as \uHHHH.
 *    Returns s itself when nothing needs it, else buf holding the visible
 *    form, cut to fit len at a character boundary (never inside an escape),
 *    with "..." when cut. len >= 8.
 *  - ms_visible_dup(): the same, malloc'd and whole (NULL: out of memory);
 *    keep_newlines leaves '\n' as a line break (text of several lines).
 *  - ms_visible_field(): a fixed-size string field (cap bytes) rewritten in
 *    place to its visible form, cut to fit as ms_visible cuts ("?" when
 *    memory ran out; emptied when it holds no NUL or cap < 8).
 *  - ms_py_literal(): s as a Python str literal, by repr's rules: in single
 *    quotes; backslash and quote escaped; \t \n \r; other controls and the
 *    characters Python does not print (C1, separators, format characters,
 *    U+00A0 ...) as \xHH / \uHHHH; an invalid byte as \udcHH (Python's
 *    surrogateescape, so a name read as bytes round-trips). Returns 0, or -1
 *    when it does not fit len (buf then ""). Evaluated by Python, it gives
 *    back s exactly (for valid UTF-8).
 *  - ms_print_cell(): below. */
#ifndef MS_VISIBLE_H
#define MS_VISIBLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

size_t ms_utf8_next(const char *s, size_t n, uint32_t *cp);
const char *ms_visible(const char *s, char *buf, size_t len);
char *ms_visible_dup(const char *s, int keep_newlines);
void ms_visible_field(char *field, size_t cap);
int ms_py_literal(const char *s, char *buf, size_t len);
/* s in exactly w columns of f, a character a column (as the reports count
 * them): cut after w characters, never inside one (printf's "%-10.10s"
 * cuts bytes), and padded with spaces. s should be visible already. */
void ms_print_cell(FILE *f, const char *s, int w);

#endif
