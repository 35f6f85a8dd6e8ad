/* html_internal.h — pieces shared by the HTML report's files only:
 * escaping, number cells, the SVG plot frame and its axes, the trace of a
 * run's memory events, and the three sections (trial, plan, training).
 *
 * Conventions every file keeps: every string that came from the database
 * goes through h_esc(); every number a table shows carries its exact value
 * in data-v (bytes as integers, other numbers with 17 digits) next to a
 * human form, so tests and scripts read the tables without guessing; the
 * charts use CSS classes (colours live in the stylesheet's variables, so
 * light, dark and print schemes need no change here). */
#ifndef MS_HTML_INTERNAL_H
#define MS_HTML_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vocab/profile.h"
#include "reports/answer.h"
#include "reports/db.h"

/* Categories of the charts: the vocabulary's eight (vocab/vocab.h), plus bytes whose category
 * is unknown (events seen only by CUPTI). */
#define H_CAT_UNKNOWN MS_CAT_N
#define H_NCAT (MS_CAT_N + 1)
const char *h_cat_name(int c);          /* "param" ... "reserve", "unattributed" */

/* ---- text ------------------------------------------------------------- */

void h_esc(FILE *f, const char *s);                 /* HTML-escaped; NULL prints nothing */
void h_escn(FILE *f, const char *s, size_t max);    /* at most max bytes of s (a fixed field) */
char *h_bytes(uint64_t v, char *buf, size_t len);   /* "1.50 GiB", "512 B" */
char *h_grouped(uint64_t v, char *buf, size_t len); /* "1,056,768" */
char *h_ms(double ms, char *buf, size_t len);       /* "0.84 ms", "12.5 s" */

/* Table cells: <td data-k="key" data-v="exact">human<small>exact</small></td>.
 * A byte cell shows its value in human units and in exact bytes; zero shows
 * as a dash (data-v still 0). */
void h_td_bytes(FILE *f, const char *key, uint64_t v);
void h_td_num(FILE *f, const char *key, double v, const char *shown_fmt);
void h_td_int(FILE *f, const char *key, long long v);
void h_td_text(FILE *f, const char *key, const char *text);   /* escaped */

/* The legend above a chart: one swatch per category whose bit is set in
 * mask (bit c for category c). */
void h_legend(FILE *f, unsigned mask, const char *extra_html);

/* ---- the SVG plot frame ---------------------------------------------- */

typedef struct h_plot {
    double width, height;                 /* the viewBox */
    double left, right, top, bottom;      /* margins */
    double xmin, xmax, ymin, ymax;        /* data range */
} h_plot;

double h_px(const h_plot *p, double x);
double h_py(const h_plot *p, double y);

/* <svg ...><title>..</title><desc>..</desc> (both escaped); the caller
 * closes it with h_svg_end(). id names it for aria. */
void h_svg_begin(FILE *f, const h_plot *p, const char *id, const char *title, const char *desc);
void h_svg_end(FILE *f);

/* A tidy tick step (1, 2 or 5 times a power of ten) giving at most about
 * `target` intervals over range. */
double h_nice_step(double range, int target);

/* The y axis in bytes: picks a binary unit from ymax, sets p->ymax to the
 * last tick at or above it, draws grid lines, tick labels ("5 MiB") and the
 * axis title. Call before drawing data (it fixes the scale). */
void h_axis_y_bytes(FILE *f, h_plot *p, const char *title);
/* A plain numeric y axis (loss, tokens/s); sets p->ymin/ymax to ticks. */
void h_axis_y_num(FILE *f, h_plot *p, const char *title, int from_zero);
/* A numeric x axis (time, steps): ticks, labels with fmt applied to the
 * tick value divided by div, title. */
void h_axis_x_num(FILE *f, const h_plot *p, const char *title, double div, const char *fmt);
/* A dashed horizontal line at y (bytes) with a label at its right end. */
void h_hline(FILE *f, const h_plot *p, double y, const char *cls, const char *label);

/* ---- the memory-event trace of a run (html_trace.c) -------------------- */

#define H_MAX_DEV 8
#define H_MAX_PTS 1500
#define H_MAX_PHASES 64

typedef struct h_state { int64_t t_us; uint64_t by_cat[H_NCAT]; } h_state;

typedef struct h_layer_state {
    int reached;                 /* an event in forward or backward */
    int phase;                   /* of the fullest moment */
    h_state at;                  /* live bytes at that moment */
} h_layer_state;

typedef struct h_dev_trace {
    int device;                  /* index among the run's devices */
    int64_t n_alloc, n_free, n_fail;
    int64_t t_min, t_max;
    h_state *pts;                /* the step chart's points (live after each event) */
    int n_pts;
    int downsampled;             /* 1: each point is the fullest moment of a time slice */
    uint64_t cat_max[H_NCAT];    /* each category's own highest */
    h_state peak;                /* the fullest moment */
    int peak_layer, peak_phase;
    int has_fail;
    h_state fail;                /* live just before the failed request */
    int fail_layer, fail_phase, fail_cat;
    uint64_t fail_bytes;
    char fail_what[48];
    int n_phases;                /* phase changes, for the chart's bands */
    int phase_of[H_MAX_PHASES];
    int64_t phase_t[H_MAX_PHASES];
    int n_layers;
    h_layer_state *layers;       /* n_layers entries */
} h_dev_trace;

typedef struct h_trace {
    int source;                  /* ms_mem_event_source replayed; -1: no events */
    int64_t n_by_source[3];
    int64_t n_skipped;           /* events of devices beyond H_MAX_DEV */
    int n_dev;
    h_dev_trace dev[H_MAX_DEV];
} h_trace;

/* Replays the run's events of one source (the allocator's when present,
 * else CUPTI's activity, else its callbacks) per device and category;
 * n_layers sizes the per-layer states. 0, or -1 (reason in err). */
int h_trace_load(ms_db *db, int64_t run, int n_layers, h_trace *t, char *err, size_t errlen);
void h_trace_free(h_trace *t);

/* ---- the trial's charts ------------------------------------------------- */

/* The profile's row of each layer at the trial's own precision and
 * micro-batch size (those of its first row), NULL where none; n entries. */
typedef struct h_layers {
    int n;
    const ms_layer_row **row;
    int precision, micro_batch;
} h_layers;

/* A layer's name for display (unescaped): the row's, else "layer i". */
const char *h_layer_name(const h_layers *L, int i, char *buf, size_t len);
/* The trial's device among the trace's: the one that failed, else the
 * first; NULL when the run has no events. */
const h_dev_trace *h_trial_device(const h_trace *t);

/* (a) memory per layer, stacked by category, with capacity and the OOM;
 * then its table (from the profile's rows when d is NULL: stale says the
 * run has events whose categories are not the profile's). (b) live memory
 * over time per device; then its table. */
void h_chart_layers(FILE *f, int64_t run, const ms_profile *p, const h_layers *L, const h_dev_trace *d, int stale);
void h_chart_timeline(FILE *f, int64_t run, const ms_profile *p, const h_layers *L, const h_trace *t);

/* ---- chart (c) -------------------------------------------------------------- */

typedef struct h_dev_bar {
    char name[64];
    uint64_t capacity;                     /* 0: unknown */
    int has_pred, has_meas;
    uint64_t pred, meas;                   /* totals */
    uint64_t pred_by[H_NCAT], meas_by[H_NCAT];   /* all zero: only the total is known */
    /* a program's stage alone on its GPU: the measured total in two parts, the
     * allocator's peak (against the tensors predicted) and beyond it (against the reserve) */
    int has_parts;
    uint64_t meas_alloc, meas_beyond, pred_alloc, pred_beyond;
} h_dev_bar;

/* Pairs of bars (predicted, measured) per device against capacity, then
 * the table t-c-RUN. measured_any 0: the caption says nothing was measured. */
void h_chart_devices(FILE *f, int64_t run, const h_dev_bar *dv, int n, int measured_any);

/* ---- the sections ------------------------------------------------------- */

/* Each writes its part for the runs[0..n) of the report (the chosen run and
 * the runs it contains, parents first); 0, or -1 with the reason in err. */
int h_section_trial(FILE *f, ms_db *db, const ms_run_info *runs, int n, char *err, size_t errlen);
int h_section_plan(FILE *f, ms_db *db, const ms_run_info *runs, int n, char *err, size_t errlen);
int h_section_train(FILE *f, ms_db *db, const ms_run_info *runs, int n, char *err, size_t errlen);

/* The answer of a program's doctor run (answer.h), at the top of the page:
 * section #answer with tables t-place-RUN and t-answer-RUN. */
void h_answer(FILE *f, const ms_answer *a);

const char *h_precision_name(int p);    /* "fp32", "bf16", "fp16", "?" */

#endif
