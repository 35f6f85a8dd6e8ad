/* html_devices.c — chart (c) of the HTML report: per device, a pair of
 * stacked bars (the predicted peak and the measured one, by category) under
 * the device's capacity, the gap between them, and its table of exact bytes
 * (see html_internal.h). */
#include "reports/html_internal.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static uint64_t sum_cats(const uint64_t *v)
{
    uint64_t s = 0;
    for (int c = 0; c < H_NCAT; c++) s += v[c];
    return s;
}

/* One stacked bar at x; categories when given, else one plain block of the
 * total (class c-total). */
static void stacked(FILE *f, const h_plot *pl, double x, double w, const uint64_t *by, uint64_t total,
                    const char *who, const char *what)
{
    char b1[32];
    uint64_t base = 0;
    if (sum_cats(by) == 0 && total) {
        double y1 = h_py(pl, (double)total), y0 = h_py(pl, 0);
        fprintf(f, "<rect class=\"c-total\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.2f\"><title>", x, y1, w, y0 - y1);
        h_esc(f, who);
        fprintf(f, " %s: %s in all (no split by category)</title></rect>\n", what, h_bytes(total, b1, sizeof b1));
        return;
    }
    for (int c = 0; c < H_NCAT; c++) {
        if (!by[c]) continue;
        double y1 = h_py(pl, (double)(base + by[c])), y0 = h_py(pl, (double)base);
        fprintf(f, "<rect class=\"c-%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.2f\"><title>", h_cat_name(c), x, y1,
                w, y0 - y1);
        h_esc(f, who);
        fprintf(f, " %s: %s %s (%" PRIu64 " bytes)</title></rect>", what, h_cat_name(c), h_bytes(by[c], b1, sizeof b1),
                by[c]);
        base += by[c];
    }
    fputc('\n', f);
}

/* A device's label: its name, with its index when another device has
 * the same name (virtual devices of one GPU or CPU: "cpu", "cpu"). */
static const char *label(const h_dev_bar *dv, int n, int i, char *buf, size_t len)
{
    for (int k = 0; k < n; k++)
        if (k != i && strcmp(dv[k].name, dv[i].name) == 0) {
            snprintf(buf, len, "%s (device %d)", dv[i].name, i);
            return buf;
        }
    return dv[i].name;
}

/* The table's gap cell: measured against predicted in percent, empty without a prediction. */
static void gap_cell(FILE *f, uint64_t meas, uint64_t pred, int over)
{
    if (!pred) {
        fputs("<td></td>", f);
        return;
    }
    double gap = 100.0 * ((double)meas - (double)pred) / (double)pred;
    fprintf(f, "<td class=\"n\" data-k=\"gap\" data-v=\"%.17g\">%+.2f%%%s</td>", gap, gap,
            over ? " (over capacity)" : "");
}

void h_chart_devices(FILE *f, int64_t run, const h_dev_bar *dv, int n, int measured_any)
{
    char lb[96];
    char id[48], b1[32];
    snprintf(id, sizeof id, "fig-c-%" PRId64, run);
    unsigned mask = 0;
    uint64_t ymax = 0;
    int plain = 0;
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < H_NCAT; c++)
            if (dv[i].pred_by[c] || dv[i].meas_by[c]) mask |= 1u << c;
        plain |= (dv[i].has_pred && !sum_cats(dv[i].pred_by)) || (dv[i].has_meas && !sum_cats(dv[i].meas_by));
        uint64_t m = dv[i].capacity;
        if (dv[i].pred > m) m = dv[i].pred;
        if (dv[i].meas > m) m = dv[i].meas;
        if (m > ymax) ymax = m;
    }
    fprintf(f, "<figure id=\"%s\">\n<figcaption><b>(c) The plan on each device.</b> For each device, the left bar "
               "is the peak the plan predicted and the right bar the peak measured in training, both by category; "
               "the dashed line over them is the device&rsquo;s capacity.%s</figcaption>\n",
            id, measured_any ? "" : " Nothing was measured yet: no training is recorded in the runs of this report.");
    h_legend(f, mask, plain ? "<li><i class=\"sw c-total\"></i>total only</li>" : NULL);
    h_plot pl = { .width = 960, .height = 340, .left = 84, .right = 16, .top = 34, .bottom = 64,
                  .xmin = 0, .xmax = n > 0 ? n : 1, .ymin = 0, .ymax = (double)(ymax ? ymax : 1) };
    char title[96], desc[160];
    snprintf(title, sizeof title, "Predicted and measured peak per device, run %" PRId64, run);
    snprintf(desc, sizeof desc, "%d devices; pairs of stacked bars against each device's capacity.", n);
    h_svg_begin(f, &pl, id, title, desc);
    h_axis_y_bytes(f, &pl, "peak bytes on the device");
    const double slot = (pl.width - pl.left - pl.right) / (n > 0 ? n : 1);
    double bw = slot * 0.28;
    if (bw > 90) bw = 90;
    for (int i = 0; i < n; i++) {
        const h_dev_bar *d = &dv[i];
        double cx = h_px(&pl, i) + slot / 2;
        double xp = cx - bw - 3, xm = cx + 3;
        if (d->has_pred) stacked(f, &pl, xp, bw, d->pred_by, d->pred, label(dv, n, i, lb, sizeof lb), "predicted");
        if (d->has_meas) stacked(f, &pl, xm, bw, d->meas_by, d->meas, label(dv, n, i, lb, sizeof lb), "measured");
        double ybase = pl.height - pl.bottom;
        fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">predicted</text>"
                   "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">measured</text>\n",
                xp + bw / 2, ybase + 16, xm + bw / 2, ybase + 16);
        if (!d->has_pred)
            fprintf(f, "<text class=\"note-t\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">none</text>", xp + bw / 2, ybase - 6);
        if (!d->has_meas)
            fprintf(f, "<text class=\"note-t\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">not yet</text>", xm + bw / 2,
                    ybase - 6);
        fprintf(f, "<text class=\"dev-l\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", cx, ybase + 36);
        h_esc(f, label(dv, n, i, lb, sizeof lb));
        fputs("</text>\n", f);
        if (d->capacity) {
            double y = h_py(&pl, (double)d->capacity);
            fprintf(f, "<line class=\"cap\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                       "<text class=\"cap-l\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">capacity %s</text>\n",
                    xp - 14, y, xm + bw + 14, y, cx, y - 6, h_bytes(d->capacity, b1, sizeof b1));
        }
        if (d->has_meas && d->has_pred && d->pred) {
            double gap = 100.0 * ((double)d->meas - (double)d->pred) / (double)d->pred;
            double y = h_py(&pl, (double)d->meas) - 6;
            if (d->capacity && fabs(h_py(&pl, (double)d->capacity) - 6 - y) < 14) y -= 14;
            fprintf(f, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%+.1f%%%s</text>\n",
                    d->capacity && d->meas > d->capacity ? "oom-l" : "gap-l", xm + bw / 2, y, gap,
                    d->capacity && d->meas > d->capacity ? " OVER" : "");
        }
    }
    h_svg_end(f);
    fputs("</figure>\n", f);

    /* The table: per device its totals, then its categories. */
    fprintf(f, "<table class=\"t\" id=\"t-c-%" PRId64 "\">\n<caption>The bars of (c), in bytes</caption>\n<thead><tr>"
               "<th>device / category</th><th>capacity</th><th>predicted</th><th>measured</th>"
               "<th>measured &minus; predicted</th></tr></thead>\n<tbody>\n", run);
    for (int i = 0; i < n; i++) {
        const h_dev_bar *d = &dv[i];
        fprintf(f, "<tr data-device=\"%d\" data-cat=\"total\" class=\"total\"><th class=\"rowh\">", i);
        h_esc(f, label(dv, n, i, lb, sizeof lb));
        fputs("</th>", f);
        h_td_bytes(f, "capacity", d->capacity);
        if (d->has_pred) h_td_bytes(f, "predicted", d->pred); else fputs("<td class=\"muted\">none</td>", f);
        if (d->has_meas) h_td_bytes(f, "measured", d->meas); else fputs("<td class=\"muted\">not yet</td>", f);
        if (d->has_pred && d->has_meas) gap_cell(f, d->meas, d->pred, d->capacity && d->meas > d->capacity);
        else fputs("<td></td>", f);
        fputs("</tr>\n", f);
        if (d->has_parts) {
            /* the measured total in its two parts, each beside its prediction: errors of
             * opposite sign can cancel in the total */
            const struct { const char *key, *name; uint64_t pred, meas; } part[2] = {
                { "allocator", "the allocator&rsquo;s peak (tensors, library buffers)", d->pred_alloc, d->meas_alloc },
                { "beyond", "beyond the allocator (context, libraries)", d->pred_beyond, d->meas_beyond } };
            for (int k = 0; k < 2; k++) {
                fprintf(f, "<tr data-device=\"%d\" data-cat=\"%s\"><th class=\"rowh sub\">%s</th><td></td>", i,
                        part[k].key, part[k].name);
                h_td_bytes(f, "predicted", part[k].pred);
                h_td_bytes(f, "measured", part[k].meas);
                gap_cell(f, part[k].meas, part[k].pred, 0);
                fputs("</tr>\n", f);
            }
        }
        for (int c = 0; c < H_NCAT; c++) {
            if (!d->pred_by[c] && !d->meas_by[c]) continue;
            fprintf(f, "<tr data-device=\"%d\" data-cat=\"%s\"><th class=\"rowh sub\"><i class=\"sw c-%s\"></i>%s</th>"
                       "<td></td>", i, h_cat_name(c), h_cat_name(c), h_cat_name(c));
            h_td_bytes(f, "predicted", d->pred_by[c]);
            /* a program's rerun measures each stage's total only: no
             * category was measured, which is not a measured zero */
            if (sum_cats(d->meas_by)) h_td_bytes(f, "measured", d->meas_by[c]);
            else fputs("<td class=\"muted\">not measured</td>", f);
            fputs("<td></td></tr>\n", f);
        }
    }
    fputs("</tbody></table>\n", f);
}
