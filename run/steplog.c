/* steplog.c — step rows kept until the database takes them (steplog.h). */
#include "run/steplog.h"

#include <stdlib.h>
#include <string.h>

struct ms_steplog {
    ms_db *db;
    int64_t run;
    int timeout_ms;
    FILE *progress;
    ms_step_rec *q;     /* waiting rows, oldest first; peaks_json owned */
    int n, cap;
    int lost;           /* rows that could not even be kept (out of memory) */
    char why[512];      /* the database's last refusal */
};

ms_steplog *ms_steplog_new(ms_db *db, int64_t run, int timeout_ms, FILE *progress)
{
    ms_steplog *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->db = db;
    l->run = run;
    l->timeout_ms = timeout_ms;
    l->progress = progress;
    return l;
}

/* Writes the waiting rows in order until one is refused. */
static void flush(ms_steplog *l)
{
    int done = 0;
    while (done < l->n && ms_db_add_step(l->db, l->run, &l->q[done]) == 0) free((char *)l->q[done++].peaks_json);
    if (done < l->n) snprintf(l->why, sizeof l->why, "%s", ms_db_errmsg(l->db));
    memmove(l->q, l->q + done, (size_t)(l->n - done) * sizeof *l->q);
    l->n -= done;
}

int ms_steplog_add(ms_steplog *l, const ms_step_rec *s)
{
    int waited = l->n > 0;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        ms_step_rec *q = realloc(l->q, (size_t)cap * sizeof *q);
        if (!q) { l->lost++; return -1; }
        l->q = q;
        l->cap = cap;
    }
    ms_step_rec r = *s;
    if (s->peaks_json && !(r.peaks_json = strdup(s->peaks_json))) { l->lost++; return -1; }
    l->q[l->n++] = r;
    /* rows already wait: the lock was held past a whole timeout, so try
     * without waiting for it again */
    if (waited) ms_db_set_busy_timeout(l->db, 0);
    flush(l);
    if (waited) ms_db_set_busy_timeout(l->db, l->timeout_ms);
    if (l->progress) {
        if (!waited && l->n)
            fprintf(l->progress, "train: the database is busy (%s); keeping step %d to write later\n", l->why, s->step);
        else if (waited && !l->n)
            fprintf(l->progress, "train: the database took the steps it was keeping (up to step %d)\n", s->step);
    }
    return l->n ? 1 : l->lost ? -1 : 0;
}

int ms_steplog_finish(ms_steplog *l, char *err, size_t errlen)
{
    if (l->n) {
        int last = l->q[l->n - 1].step;
        flush(l);
        if (!l->n && l->progress)
            fprintf(l->progress, "train: the database took the steps it was keeping (up to step %d)\n", last);
    }
    if (!l->n && !l->lost) return 0;
    if (l->n)
        snprintf(err, errlen, "%d step row%s (steps %d..%d) could not be written to the database: %s", l->n,
                 l->n == 1 ? "" : "s", l->q[0].step, l->q[l->n - 1].step, l->why);
    else
        snprintf(err, errlen, "%d step row%s could not be kept for the database (out of memory)", l->lost,
                 l->lost == 1 ? "" : "s");
    return -1;
}

int ms_steplog_pending(const ms_steplog *l) { return l ? l->n + l->lost : 0; }

void ms_steplog_free(ms_steplog *l)
{
    if (!l) return;
    for (int i = 0; i < l->n; i++) free((char *)l->q[i].peaks_json);
    free(l->q);
    free(l);
}
