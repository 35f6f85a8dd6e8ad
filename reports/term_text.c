/* term_text.c — word wrapping for the terminal reports. */
#include "reports/term_internal.h"

#include <stdlib.h>
#include <string.h>

#include "reports/term_report.h"
#include "vocab/visible.h"

#define MS_VIS_CELL 128 /* the widest cell rep_cell fills */

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

int rep_prefix(const char *s, int max_bytes)
{
    int n = 0;
    while (n < max_bytes && s[n]) n++;
    if (n < max_bytes || !s[n]) return n;           /* all of s fits */
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;   /* s[n] starts the cut character */
    return n;
}

/* Bytes of the last cols columns of s (len bytes), from a character start. */
static int tail_for_columns(const char *s, int len, int cols)
{
    int i = len, used = 0;
    while (i > 0 && used < cols) {
        i--;
        while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
        used++;
    }
    return len - i;
}

const char *rep_cut(const char *s, int w, char *buf, size_t len)
{
    int n = (int)strlen(s);
    if (rep_columns(s, n) <= w || w < 3) return s;
    /* the tail tells siblings apart (an index), the head says where they live */
    int tail_cols = (w - 1) / 2, head_cols = w - 1 - tail_cols;
    int head = bytes_for_columns(s, n, head_cols), tail = tail_for_columns(s, n, tail_cols);
    snprintf(buf, len, "%.*s~%s", head, s, s + n - tail);
    return buf;
}

void rep_cell(FILE *f, const char *s, int w)
{
    char vis[4 * MS_VIS_CELL + 8], cut[4 * MS_VIS_CELL + 8];
    if (w > MS_VIS_CELL) w = MS_VIS_CELL;
    rep_pad(f, rep_cut(ms_visible(s ? s : "", vis, sizeof vis), w, cut, sizeof cut), w);
}

void rep_pad(FILE *f, const char *s, int w)
{
    int cols = rep_columns(s, (int)strlen(s));
    fputs(s, f);
    if (cols < w) fprintf(f, "%*s", w - cols, "");
}

static void wrap_visible(FILE *f, int width, int first_col, int indent, const char *text);

void rep_wrap(FILE *f, int width, int indent, const char *text) { rep_wrap_from(f, width, 0, indent, text); }

void rep_capacity(uint64_t capacity, char *buf, size_t len)
{
    if (capacity) ms_term_bytes(capacity, buf, len);
    else snprintf(buf, len, "no cap");
}

void rep_wrap_from(FILE *f, int width, int first_col, int indent, const char *text)
{
    /* whatever the text holds, no control character but a line break
     * reaches the terminal (vocab/visible.h) */
    char *shown = ms_visible_dup(text ? text : "", 1);
    wrap_visible(f, width, first_col, indent, shown ? shown : "(out of memory)");
    free(shown);
}

static void wrap_visible(FILE *f, int width, int first_col, int indent, const char *text)
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
