/* collect.c — the program's lines into its trace (collect.h). */
#include "bridge/host/collect.h"

typedef struct collect_ctx {
    msb_trace *t;
    FILE *record;
    msb_step_fn on_step;
    void *user;
} collect_ctx;

static int on_line(const char *line, size_t len, int conn, void *user)
{
    collect_ctx *c = user;
    if (c->record && fprintf(c->record, "%d\t%.*s\n", conn, (int)len, line) < 0) return -1;
    int steps = c->t->n_steps;
    if (msb_trace_feed(c->t, line, len, conn) != 0) return -1;
    if (c->on_step && c->t->n_steps > steps) c->on_step(c->t, c->user);
    return 0;
}

int msb_collect(const msb_launch *l, msb_trace *t, FILE *record, msb_step_fn on_step, void *user, msb_exit *ex,
                char *err, size_t errlen)
{
    collect_ctx c = { t, record, on_step, user };
    return msb_run_program(l, on_line, &c, ex, err, errlen);
}
