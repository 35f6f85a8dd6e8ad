/* visible.c — untrusted text for terminals and Python (visible.h). */
#include "vocab/visible.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t ms_utf8_next(const char *str, size_t n, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    *cp = n ? s[0] : 0;
    if (!n) return 0;
    if (s[0] < 0x80) return 1;
    size_t k = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (!k || k > n || s[0] > 0xF4) return 0;
    uint32_t c = s[0] & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (c < least[k] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return k;
}

/* Characters that show nothing themselves but change how text reads:
 * bidirectional controls, zero-width marks, separators, the BOM. */
static int invisible(uint32_t c)
{
    return c == 0xAD || c == 0x61C || c == 0x180E || (c >= 0x200B && c <= 0x200F) || (c >= 0x2028 && c <= 0x202E) ||
           (c >= 0x2060 && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB);
}

/* What Python's repr escapes besides those: the spaces other than ' ' and
 * the private-use and non-character code points it knows not to print. */
static int py_unprintable(uint32_t c)
{
    return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x202F || c == 0x205F || c == 0x3000 ||
           (c >= 0xE000 && c <= 0xF8FF) || (c & 0xFFFE) == 0xFFFE || c >= 0xF0000 || (c >= 0xE0000 && c <= 0xE007F);
}

/* The escape for one character or invalid byte (k = 0) into e (at least
 * 12 bytes), or "" when it is shown as it is. */
static void escape_of(uint32_t c, size_t k, int py, int keep_nl, char *e)
{
    e[0] = 0;
    if (!k) { snprintf(e, 12, py ? "\\udc%02x" : "\\x%02x", (unsigned)c); return; }
    if (c == '\n' && keep_nl) return;
    if (c == '\n' || c == '\r' || c == '\t') { snprintf(e, 12, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't'); return; }
    if (py && (c == '\\' || c == '\'')) { snprintf(e, 12, "\\%c", (char)c); return; }
    if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0) || (py && (c == 0xA0 || c == 0xAD))) {
        snprintf(e, 12, "\\x%02x", (unsigned)c);
        return;
    }
    if (invisible(c) || (py && py_unprintable(c))) snprintf(e, 12, c > 0xFFFF ? "\\U%08x" : "\\u%04x", (unsigned)c);
}

/* One piece of the escaped form: the character at s (or its escape). */
typedef struct piece {
    const char *p;
    size_t len, step;   /* bytes to write, bytes of s it stands for */
    char e[12];
} piece;

static void next_piece(const char *s, size_t n, int py, int keep_nl, piece *x)
{
    uint32_t c;
    size_t k = ms_utf8_next(s, n, &c);
    escape_of(c, k, py, keep_nl, x->e);
    x->p = x->e[0] ? x->e : s;
    x->len = x->e[0] ? strlen(x->e) : k;
    x->step = k ? k : 1;
}

/* Bytes the escaped form of s takes (no NUL); *same: 1 when it is s. */
static size_t measure(const char *s, int py, int keep_nl, int *same)
{
    size_t n = strlen(s), need = 0;
    *same = 1;
    for (size_t i = 0; i < n;) {
        piece x;
        next_piece(s + i, n - i, py, keep_nl, &x);
        if (x.e[0]) *same = 0;
        need += x.len;
        i += x.step;
    }
    return need;
}

/* The escaped form of s into out (cap >= 4 bytes): whole when it fits,
 * else the whole pieces that fit before "..." (mark_cut) or before the
 * end. Returns 1 when it was cut. */
static int render(const char *s, int py, int keep_nl, char *out, size_t cap, int mark_cut)
{
    int same;
    size_t n = strlen(s), room = cap - 1, o = 0;
    int cut = measure(s, py, keep_nl, &same) > room;
    if (cut && mark_cut) room -= 3;
    for (size_t i = 0; i < n;) {
        piece x;
        next_piece(s + i, n - i, py, keep_nl, &x);
        if (o + x.len > room) break;
        memcpy(out + o, x.p, x.len);
        o += x.len;
        i += x.step;
    }
    if (cut && mark_cut) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
    return cut;
}

const char *ms_visible(const char *s, char *buf, size_t len)
{
    int same;
    if (!s) return "";
    measure(s, 0, 0, &same);
    if (same || len < 8) return same ? s : "";
    render(s, 0, 0, buf, len, 1);
    return buf;
}

char *ms_visible_dup(const char *s, int keep_newlines)
{
    int same;
    if (!s) s = "";
    size_t need = measure(s, 0, keep_newlines, &same);
    char *out = malloc(need + 4);
    if (out) render(s, 0, keep_newlines, out, need + 4, 0);
    return out;
}

void ms_visible_field(char *field, size_t cap)
{
    int same;
    if (cap < 8 || !memchr(field, 0, cap)) { /* too small to say anything visibly, or not a string: nothing */
        if (cap) field[0] = 0;
        return;
    }
    measure(field, 0, 0, &same);
    char *tmp = same ? NULL : malloc(cap);
    if (same) return;
    if (!tmp) {
        snprintf(field, cap, "?");
        return;
    }
    render(field, 0, 0, tmp, cap, 1);
    memcpy(field, tmp, strlen(tmp) + 1);
    free(tmp);
}

int ms_py_literal(const char *s, char *buf, size_t len)
{
    if (len < 6) {
        if (len) buf[0] = 0;
        return -1;
    }
    buf[0] = '\'';
    int cut = render(s ? s : "", 1, 0, buf + 1, len - 2, 0);
    size_t o = strlen(buf);
    if (cut) {
        buf[0] = 0;
        return -1;
    }
    buf[o] = '\'';
    buf[o + 1] = 0;
    return 0;
}

void ms_print_cell(FILE *f, const char *s, int w)
{
    size_t n = strlen(s ? s : ""), i = 0;
    int cols = 0;
    while (i < n && cols < w) {
        uint32_t c;
        size_t k = ms_utf8_next(s + i, n - i, &c);
        i += k ? k : 1;
        cols++;
    }
    fwrite(s, 1, i, f);
    for (; cols < w; cols++) fputc(' ', f);
}
