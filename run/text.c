/* text.c — text wrapped to a width (text.h). */
#include "run/text.h"

#include <stdlib.h>
#include <string.h>

#include "vocab/visible.h"

void ms_print_wrapped(FILE *f, const char *text, int width)
{
    /* names from a program or a database may be in the text: every control
     * character is printed visibly (vocab/visible.h), a newline too */
    char *shown = ms_visible_dup(text ? text : "", 0);
    const char *s = shown ? shown : "(out of memory)";
    int col = 0;
    while (*s) {
        size_t w = strcspn(s, " ");
        if (col && col + 1 + (int)w > width) {
            fputc('\n', f);
            col = 0;
        } else if (col) {
            fputc(' ', f);
            col++;
        }
        fwrite(s, 1, w, f);
        col += (int)w;
        s += w;
        while (*s == ' ') s++;
    }
    fputc('\n', f);
    free(shown);
}

void ms_print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    }
    fflush(stdout);
}
