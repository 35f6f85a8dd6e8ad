/* html_timeline.c — chart (b) of the HTML report: live memory over the
 * trial's time, stacked by category (a step chart: memory changes only at
 * an allocation or a free), with the trial's phases shaded, the capacity and
 * the out-of-memory moment; and its table of exact bytes per category. */
#include "reports/html_internal.h"
#include "reports/run_facts.h"

#include <inttypes.h>
#include <string.h>

static uint64_t sum_cats(const uint64_t *v)
{
    uint64_t s = 0;
    for (int c = 0; c < H_NCAT; c++) s += v[c];
    return s;
}

/* Bytes of categories 0..c (inclusive) at a point: the top of band c. */
static double upto(const h_state *s, int c)
{
    uint64_t v = 0;
    for (int k = 0; k <= c; k++) v += s->by_cat[k];
    return (double)v;
}

typedef struct { double div; const char *unit; } time_unit;

static time_unit pick_unit(int64_t span_us)
{
    if (span_us < 5000) return (time_unit){ 1.0, "µs" };
    if (span_us < 20000000) return (time_unit){ 1000.0, "ms" };
    return (time_unit){ 1000000.0, "s" };
}

static char *t_text(int64_t t_us, time_unit u, char *buf, size_t len)
{
    snprintf(buf, len, u.div == 1.0 ? "%.0f %s" : "%.2f %s", (double)t_us / u.div, u.unit);
    return buf;
}

static const char *phase_word(int ph)
{
    return ph >= 0 && ph < MS_PH_N ? ms_phase_name((ms_phase)ph) : "outside any phase";
}

static void one_device(FILE *f, int64_t run, const ms_profile *p, const h_layers *L, const h_trace *t,
                       const h_dev_trace *d, int is_trial_dev)
{
    const uint64_t cap = is_trial_dev ? p->capacity : 0;
    const time_unit tu = pick_unit(d->t_max);
    char id[64], title[160], desc[256], b1[32], b2[32], tt[32], name[48];
    snprintf(id, sizeof id, "fig-b-%" PRId64 "-%d", run, d->device);
    unsigned mask = 0;
    for (int c = 0; c < H_NCAT; c++)
        if (d->cat_max[c]) mask |= 1u << c;
    uint64_t ymax = cap;
    if (sum_cats(d->peak.by_cat) > ymax) ymax = sum_cats(d->peak.by_cat);
    if (d->has_fail && sum_cats(d->fail.by_cat) + d->fail_bytes > ymax) ymax = sum_cats(d->fail.by_cat) + d->fail_bytes;

    fprintf(f, "<figure id=\"%s\">\n<figcaption><b>(b) Live memory over time</b>", id);
    if (t->n_dev > 1) fprintf(f, " on device %d", d->device);
    fputs(", by category: every allocation and free the trial made, replayed in order. The shaded bands are the "
          "trial&rsquo;s phases.", f);
    if (cap) fputs(" The dashed line is the capacity.", f);
    if (d->has_fail) fputs(" The red line is the moment the allocation failed.", f);
    if (d->downsampled)
        fprintf(f, " (%" PRId64 " events: each point of the chart is the fullest moment of one of %d equal slices "
                   "of time; the table below is exact.)", d->n_alloc + d->n_free + d->n_fail, H_MAX_PTS);
    fputs("</figcaption>\n", f);
    h_legend(f, mask, d->has_fail ? "<li><i class=\"sw oomsw\"></i>out of memory</li>" : NULL);

    h_plot pl = { .width = 960, .height = 340, .left = 84, .right = 16, .top = 34, .bottom = 48,
                  .xmin = d->t_min < 0 ? (double)d->t_min : 0.0, .xmax = (double)d->t_max,
                  .ymin = 0, .ymax = (double)(ymax ? ymax : 1) };
    if (pl.xmax <= pl.xmin) pl.xmax = pl.xmin + 1;
    snprintf(title, sizeof title, "Live memory over time, run %" PRId64 ", device %d", run, d->device);
    snprintf(desc, sizeof desc, "Stacked step chart of live bytes by category; peak %s%s.",
             h_bytes(sum_cats(d->peak.by_cat), b1, sizeof b1), d->has_fail ? "; out of memory marked" : "");
    h_svg_begin(f, &pl, id, title, desc);
    fprintf(f, "<defs><pattern id=\"hatchb-%" PRId64 "-%d\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
               "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" class=\"hatch-bg\"/>"
               "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" class=\"hatch-fg\"/></pattern></defs>\n", run, d->device);
    h_axis_y_bytes(f, &pl, "live bytes on the device");

    /* Phases as alternating bands, labelled where there is room. */
    for (int i = 0; i < d->n_phases; i++) {
        double x0 = h_px(&pl, (double)d->phase_t[i]);
        double x1 = h_px(&pl, i + 1 < d->n_phases ? (double)d->phase_t[i + 1] : pl.xmax);
        if (x1 - x0 < 0.5) continue;
        fprintf(f, "<rect class=\"band%d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", i % 2, x0, pl.top,
                x1 - x0, pl.height - pl.top - pl.bottom);
        if (x1 - x0 > 64)
            fprintf(f, "<text class=\"band-l\" x=\"%.1f\" y=\"%.1f\">%s</text>", x0 + 4, pl.top - 6,
                    phase_word(d->phase_of[i]));
        fputc('\n', f);
    }

    /* One band per category: along its top left to right, back along its
     * bottom (the top of the category below), both as steps. */
    int prev_c = -1;
    for (int c = 0; c < H_NCAT; c++) {
        if (!(mask & (1u << c))) continue;
        fprintf(f, "<path class=\"c-%s\" d=\"M%.1f %.1f", h_cat_name(c), h_px(&pl, pl.xmin), h_py(&pl, 0));
        for (int i = 0; i < d->n_pts; i++)
            fprintf(f, "H%.1fV%.1f", h_px(&pl, (double)d->pts[i].t_us), h_py(&pl, upto(&d->pts[i], c)));
        fprintf(f, "H%.1f", h_px(&pl, pl.xmax));
        if (d->n_pts) fprintf(f, "V%.1f", h_py(&pl, prev_c >= 0 ? upto(&d->pts[d->n_pts - 1], prev_c) : 0));
        for (int i = d->n_pts - 1; i >= 0; i--) {
            double below = i > 0 && prev_c >= 0 ? upto(&d->pts[i - 1], prev_c) : 0;
            fprintf(f, "H%.1fV%.1f", h_px(&pl, (double)d->pts[i].t_us), h_py(&pl, below));
        }
        fprintf(f, "H%.1fZ\"><title>%s: highest %s (%" PRIu64 " bytes)</title></path>\n", h_px(&pl, pl.xmin),
                h_cat_name(c), h_bytes(d->cat_max[c], b1, sizeof b1), d->cat_max[c]);
        prev_c = c;
    }
    if (cap) {
        snprintf(title, sizeof title, "capacity %s", h_bytes(cap, b1, sizeof b1));
        h_hline(f, &pl, (double)cap, "cap", title);
    }
    /* The peak, and the failure with the request it could not place. */
    uint64_t peak = sum_cats(d->peak.by_cat);
    if (!d->has_fail && peak) {
        double x = h_px(&pl, (double)d->peak.t_us), y = h_py(&pl, (double)peak);
        fprintf(f, "<circle class=\"peak-m\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/><text class=\"peak-l\" x=\"%.1f\" "
                   "y=\"%.1f\" text-anchor=\"%s\">peak %s</text>\n",
                x, y, x + (x > pl.width - 160 ? -8 : 8), y - 6, x > pl.width - 160 ? "end" : "start",
                h_bytes(peak, b1, sizeof b1));
    }
    if (d->has_fail) {
        double x = h_px(&pl, (double)d->fail.t_us);
        uint64_t live = sum_cats(d->fail.by_cat);
        double y0 = h_py(&pl, (double)live), y1 = h_py(&pl, (double)(live + d->fail_bytes));
        fprintf(f, "<line class=\"oom-line\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x, pl.top, x,
                pl.height - pl.bottom);
        fprintf(f, "<rect class=\"req\" fill=\"url(#hatchb-%" PRId64 "-%d)\" x=\"%.1f\" y=\"%.1f\" width=\"10\" "
                   "height=\"%.2f\"><title>refused: %s (%" PRIu64 " bytes)</title></rect>",
                run, d->device, x - 10, y1, y0 - y1, h_bytes(d->fail_bytes, b1, sizeof b1), d->fail_bytes);
        int right = x > pl.width * 0.6;
        fprintf(f, "<text class=\"oom-l\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">OOM at %s: ", right ? x - 14 : x + 6,
                pl.top + 14, right ? "end" : "start", t_text(d->fail.t_us, tu, tt, sizeof tt));
        h_esc(f, d->fail_layer >= 0 ? h_layer_name(L, d->fail_layer, name, sizeof name) : "outside any layer");
        fprintf(f, " %s asked %s</text>\n", d->fail_phase >= 0 ? phase_word(d->fail_phase) : "",
                h_bytes(d->fail_bytes, b2, sizeof b2));
    }
    char xt[64];
    snprintf(xt, sizeof xt, "time since the trial started (%s)", tu.unit);
    h_axis_x_num(f, &pl, xt, tu.div, "%g");
    h_svg_end(f);
    fputs("</figure>\n", f);

    /* ---- its table ---- */
    static const char *const src_names[] = { "the trainer&rsquo;s allocator", "CUPTI&rsquo;s API callbacks",
                                             "CUPTI&rsquo;s activity records" };
    fprintf(f, "<p class=\"facts\">%" PRId64 " events from %s on device %d: %" PRId64 " allocations, %" PRId64
               " frees, %" PRId64 " failed, from %s",
            d->n_alloc + d->n_free + d->n_fail,
            /* a program's allocator events are the bridge's count of its tensors */
            t->source == MS_EV_SRC_ALLOCATOR && rf_is_program(p) ? "memsplit&rsquo;s count of the program&rsquo;s tensors"
                                                                 : src_names[t->source],
            d->device, d->n_alloc, d->n_free, d->n_fail,
            t_text(d->t_min, tu, tt, sizeof tt));
    fprintf(f, " to %s. The peak, %s, came at %s", t_text(d->t_max, tu, b2, sizeof b2), h_bytes(peak, b1, sizeof b1),
            t_text(d->peak.t_us, tu, tt, sizeof tt));
    if (d->peak_layer >= 0) {
        fputs(" in ", f);
        h_esc(f, h_layer_name(L, d->peak_layer, name, sizeof name));
    }
    if (d->peak_phase >= 0) fprintf(f, " (%s)", phase_word(d->peak_phase));
    fputs(".</p>\n", f);

    fprintf(f, "<table class=\"t\" id=\"t-b-%" PRId64 "-%d\">\n<caption>The categories of (b), in bytes</caption>\n"
               "<thead><tr><th>category</th><th>its own highest</th><th>at the peak</th>%s</tr></thead>\n<tbody>\n",
            run, d->device, d->has_fail ? "<th>at the OOM</th>" : "");
    for (int c = 0; c < H_NCAT; c++) {
        if (!(mask & (1u << c)) && !(d->has_fail && d->fail_cat == c)) continue;
        fprintf(f, "<tr data-cat=\"%s\"><th class=\"rowh\"><i class=\"sw c-%s\"></i>%s</th>", h_cat_name(c),
                h_cat_name(c), h_cat_name(c));
        h_td_bytes(f, "max", d->cat_max[c]);
        h_td_bytes(f, "at-peak", d->peak.by_cat[c]);
        if (d->has_fail) h_td_bytes(f, "at-oom", d->fail.by_cat[c]);
        fputs("</tr>\n", f);
    }
    fputs("<tr data-cat=\"total\" class=\"total\"><th class=\"rowh\">total</th><td></td>", f);
    h_td_bytes(f, "at-peak", peak);
    if (d->has_fail) h_td_bytes(f, "at-oom", sum_cats(d->fail.by_cat));
    fputs("</tr>\n", f);
    if (d->has_fail) {
        fputs("<tr data-cat=\"refused\" class=\"oom\"><th class=\"rowh\">refused request</th><td></td><td></td>", f);
        h_td_bytes(f, "refused", d->fail_bytes);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

void h_chart_timeline(FILE *f, int64_t run, const ms_profile *p, const h_layers *L, const h_trace *t)
{
    if (!t || t->source < 0 || t->n_dev == 0) {
        fputs("<p class=\"note\"><b>(b) Live memory over time:</b> no memory events were recorded for this run, "
              "so there is no timeline to draw.</p>\n", f);
        return;
    }
    const h_dev_trace *trial = h_trial_device(t);
    for (int i = 0; i < t->n_dev; i++) one_device(f, run, p, L, t, &t->dev[i], &t->dev[i] == trial);
    if (t->n_skipped)
        fprintf(f, "<p class=\"note\">%" PRId64 " events on devices beyond the first %d are not drawn.</p>\n",
                t->n_skipped, H_MAX_DEV);
}
