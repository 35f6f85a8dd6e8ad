/* html_svg.c — the SVG plot frame of the HTML report: scales, axes with
 * tidy ticks in human units, reference lines (see html_internal.h). */
#include "reports/html_internal.h"

#include <math.h>
#include <string.h>

double h_px(const h_plot *p, double x)
{
    double span = p->xmax - p->xmin;
    double inner = p->width - p->left - p->right;
    return p->left + (span > 0 ? (x - p->xmin) / span * inner : 0.0);
}

double h_py(const h_plot *p, double y)
{
    double span = p->ymax - p->ymin;
    double inner = p->height - p->top - p->bottom;
    return p->height - p->bottom - (span > 0 ? (y - p->ymin) / span * inner : 0.0);
}

void h_svg_begin(FILE *f, const h_plot *p, const char *id, const char *title, const char *desc)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" class=\"chart\" role=\"img\" "
               "aria-labelledby=\"%s-t %s-d\">\n<title id=\"%s-t\">", p->width, p->height, id, id, id);
    h_esc(f, title);
    fprintf(f, "</title><desc id=\"%s-d\">", id);
    h_esc(f, desc);
    fputs("</desc>\n", f);
}

void h_svg_end(FILE *f) { fputs("</svg>\n", f); }

double h_nice_step(double range, int target)
{
    if (!(range > 0) || !isfinite(range)) return 1.0;
    if (target < 1) target = 1;
    double raw = range / target;
    double mag = pow(10.0, floor(log10(raw)));
    double frac = raw / mag;
    double nice = frac <= 1.0 ? 1.0 : frac <= 2.0 ? 2.0 : frac <= 5.0 ? 5.0 : 10.0;
    return nice * mag;
}

/* A tick value without trailing noise: "2.5", "10", "0.25". */
static void tick_text(double v, char *buf, size_t len)
{
    if (fabs(v) < 1e-12) v = 0.0;
    snprintf(buf, len, "%.6g", v);
}

void h_axis_y_bytes(FILE *f, h_plot *p, const char *title)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double top = p->ymax > 1.0 ? p->ymax : 1024.0;
    int u = 0;
    double unit = 1.0;
    while (u < 5 && top >= unit * 1024.0) { unit *= 1024.0; u++; }
    double step = h_nice_step(top / unit, 5);
    if (u == 0 && step < 1.0) step = 1.0;
    p->ymin = 0.0;
    p->ymax = ceil(top / unit / step - 1e-9) * step * unit;
    double x0 = p->left, x1 = p->width - p->right;
    fputs("<g class=\"axis\">\n", f);
    for (double v = 0.0; v <= p->ymax / unit / step + 0.5; v += 1.0) {
        double val = v * step;
        double y = h_py(p, val * unit);
        char t[32];
        tick_text(val, t, sizeof t);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                   "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">"
                   "%s %s</text>\n",
                x0, y, x1, y, x0 - 6, y, t, units[u]);
    }
    fprintf(f, "<line class=\"frame\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0, h_py(p, 0), x1,
            h_py(p, 0));
    double my = (p->top + p->height - p->bottom) / 2;
    fprintf(f, "<text class=\"atitle\" transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">", my);
    h_esc(f, title);
    fputs("</text>\n</g>\n", f);
}

void h_axis_y_num(FILE *f, h_plot *p, const char *title, int from_zero)
{
    double lo = from_zero ? 0.0 : p->ymin, hi = p->ymax;
    if (!(hi > lo)) { hi = lo + (lo != 0 ? fabs(lo) * 0.1 : 1.0); }
    double step = h_nice_step(hi - lo, 5);
    p->ymin = floor(lo / step + 1e-9) * step;
    p->ymax = ceil(hi / step - 1e-9) * step;
    if (!(p->ymax > p->ymin)) p->ymax = p->ymin + step;
    double x0 = p->left, x1 = p->width - p->right;
    fputs("<g class=\"axis\">\n", f);
    int n = (int)floor((p->ymax - p->ymin) / step + 0.5);
    for (int i = 0; i <= n && i <= 50; i++) {
        double val = p->ymin + i * step;
        double y = h_py(p, val);
        char t[32];
        tick_text(val, t, sizeof t);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                   "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">"
                   "%s</text>\n",
                x0, y, x1, y, x0 - 6, y, t);
    }
    fprintf(f, "<line class=\"frame\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0, h_py(p, p->ymin),
            x1, h_py(p, p->ymin));
    double my = (p->top + p->height - p->bottom) / 2;
    fprintf(f, "<text class=\"atitle\" transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">", my);
    h_esc(f, title);
    fputs("</text>\n</g>\n", f);
}

void h_axis_x_num(FILE *f, const h_plot *p, const char *title, double div, const char *fmt)
{
    if (!(div > 0)) div = 1.0;
    double lo = p->xmin / div, hi = p->xmax / div;
    double inner = p->width - p->left - p->right;
    double step = h_nice_step(hi - lo, inner > 600 ? 10 : 6);
    if (strchr(fmt, 'd') && step < 1.0) step = 1.0;   /* integer axis (steps) */
    double y = p->height - p->bottom;
    fputs("<g class=\"axis\">\n", f);
    int count = 0;
    for (double v = ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9 && count < 60; v += step, count++) {
        double x = h_px(p, v * div);
        char t[48];
        if (strchr(fmt, 'd')) snprintf(t, sizeof t, fmt, (int)llround(v));
        else snprintf(t, sizeof t, fmt, fabs(v) < 1e-12 ? 0.0 : v);
        fprintf(f, "<line class=\"tickmark\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                   "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                x, y, x, y + 5, x, y + 18, t);
    }
    fprintf(f, "<text class=\"atitle\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
            p->left + inner / 2, p->height - 6);
    h_esc(f, title);
    fputs("</text>\n</g>\n", f);
}

void h_hline(FILE *f, const h_plot *p, double y, const char *cls, const char *label)
{
    double py = h_py(p, y), x0 = p->left, x1 = p->width - p->right;
    fprintf(f, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", cls, x0, py, x1, py);
    if (label) {
        /* At the left end: data in these charts mostly grows to the right,
         * where marks (the OOM) would collide with a label. */
        fprintf(f, "<text class=\"%s-l\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"start\">", cls, x0 + 6, py - 5);
        h_esc(f, label);
        fputs("</text>", f);
    }
    fputc('\n', f);
}
