/* term_text.c — word wrapping for the terminal reports. */
#include "reports/term_internal.h"

#include <string.h>

int rep_columns(const char *s, int nbytes)
{
    int cols = 0;
    for (int i = 0; i < nbytes && s[i]; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) cols++;
    return cols;
}

/* Bytes of s that fit in cols columns, not splitting a UTF-8 sequence. */
static int bytes_for_columns(const char *s, int len, int cols)
{
    int i = 0, used = 0;
    while (i < len) {
        int start = i++;
        while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        if (++used > cols) return start;
    }
    return len;
}

void rep_wrap(FILE *f, int width, int indent, const char *text) { rep_wrap_from(f, width, 0, indent, text); }

void rep_wrap_from(FILE *f, int width, int first_col, int indent, const char *text)
{
    if (width < 20) width = 20;
    if (indent > width / 2) indent = width / 2;
    const char *s = text ? text : "";
    if (first_col < 0) first_col = 0;
    if (first_col > width - 10) {   /* no room left on the first line */
        fputc('\n', f);
        first_col = indent;
        fprintf(f, "%*s", indent, "");
    }
    int col = first_col; /* columns used on the current line */
    int start = 0;      /* indentation still to print on a fresh line */
    int fresh = 1;      /* nothing printed on this line yet */
    while (*s) {
        if (*s == ' ') { s++; continue; }
        if (*s == '\n') {
            fputc('\n', f);
            col = 0, start = indent, fresh = 1;
            s++;
            continue;
        }
        int len = (int)strcspn(s, " \n");
        int wcols = rep_columns(s, len);
        if (!fresh && col + 1 + wcols > width) {
            fputc('\n', f);
            col = 0, start = indent, fresh = 1;
        }
        if (fresh) {
            fprintf(f, "%*s", start, "");
            col += start;
        } else {
            fputc(' ', f);
            col++;
        }
        fresh = 0;
        if (col + wcols > width) {
            /* A word longer than a line: cut it at the line's end and
             * carry the rest to the next line. */
            int take = bytes_for_columns(s, len, width - col);
            if (take <= 0) take = 1;
            fwrite(s, 1, (size_t)take, f);
            s += take;
            fputc('\n', f);
            col = 0, start = indent, fresh = 1;
            continue;
        }
        fwrite(s, 1, (size_t)len, f);
        col += wcols;
        s += len;
    }
    if (!fresh || !*(text ? text : "")) fputc('\n', f);
}
