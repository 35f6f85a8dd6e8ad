/* collect.c — the program's lines into its trace (collect.h). */
#include "bridge/host/collect.h"

int msb_collect_line(const char *line, size_t len, int conn, void *collector)
{
    msb_collector *c = collector;
    if (line && c->record &&
        (fprintf(c->record, "%d\t", conn) < 0 || fwrite(line, 1, len, c->record) != len || fputc('\n', c->record) == EOF))
        return -1;
    int steps = c->t->n_steps, late = c->t->n_stepdata;
    if (msb_trace_feed(c->t, line, len, conn) != 0) return -1;
    if (c->on_step && (c->t->n_steps > steps || c->t->n_stepdata > late)) c->on_step(c->t, c->user);
    return 0;
}

int msb_collect(const msb_launch *l, msb_trace *t, FILE *record, msb_step_fn on_step, void *user, msb_exit *ex,
                char *err, size_t errlen)
{
    msb_collector c = { t, record, on_step, user };
    return msb_run_program(l, msb_collect_line, &c, ex, err, errlen);
}
