/* html_layers.c — chart (a) of the HTML report: the trial's memory layer by
 * layer, stacked by category, against the device's capacity, with the
 * layer that ran out marked; and its table of exact bytes.
 *
 * A layer's bar is what was live on the device at the trial's fullest
 * moment inside that layer (forward or backward), replayed from the
 * allocator's events, so the bars climb towards the capacity the way the
 * trial did and the OOM layer's bar, topped by the refused request, crosses
 * it. Without events the bars fall back to each layer's own bytes from the
 * profile (and the text says so). */
#include "reports/html_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *h_layer_name(const h_layers *L, int i, char *buf, size_t len)
{
    if (i >= 0 && i < L->n && L->row[i] && L->row[i]->name[0])
        snprintf(buf, len, "%.*s", (int)sizeof L->row[i]->name, L->row[i]->name);
    else
        snprintf(buf, len, "layer %d", i);
    return buf;
}

const h_dev_trace *h_trial_device(const h_trace *t)
{
    if (!t || t->n_dev == 0) return NULL;
    for (int i = 0; i < t->n_dev; i++)
        if (t->dev[i].has_fail) return &t->dev[i];
    const h_dev_trace *best = &t->dev[0];
    for (int i = 1; i < t->n_dev; i++)
        if (t->dev[i].device < best->device) best = &t->dev[i];
    return best;
}

static uint64_t sum_cats(const uint64_t *v)
{
    uint64_t s = 0;
    for (int c = 0; c < H_NCAT; c++) s += v[c];
    return s;
}

/* A layer's own bytes from its profile row, by category. */
static void row_bytes(const ms_layer_row *r, uint64_t *out)
{
    memset(out, 0, H_NCAT * sizeof *out);
    if (!r) return;
    out[MS_CAT_PARAM] = r->param;
    out[MS_CAT_MASTER] = r->master;
    out[MS_CAT_GRAD] = r->grad;
    out[MS_CAT_OPTIM] = r->optim;
    out[MS_CAT_ACT] = r->act;
    out[MS_CAT_TRANSIENT] = r->transient_fwd > r->transient_bwd ? r->transient_fwd : r->transient_bwd;
}

/* Cuts a name to 24 bytes for the chart (the table has it whole), at a
 * UTF-8 character boundary, marking the cut with an ellipsis. */
static void short_label(char *name)
{
    size_t len = strlen(name);
    if (len <= 24) return;
    size_t cut = 22;
    while (cut > 0 && ((unsigned char)name[cut] & 0xC0) == 0x80) cut--;
    memcpy(name + cut, "\xe2\x80\xa6", 4);
}

static const char *phase_word(int ph)
{
    return ph >= 0 && ph < MS_PH_N ? ms_phase_name((ms_phase)ph) : "?";
}

void h_chart_layers(FILE *f, int64_t run, const ms_profile *p, const h_layers *L, const h_dev_trace *d, int stale)
{
    const int n = L->n;
    int from_events = 0;
    for (int i = 0; d && i < d->n_layers && i < n; i++) from_events |= d->layers[i].reached;
    const int oom_layer = p->oom.happened ? p->oom.layer : -1;
    const uint64_t requested = p->oom.happened ? p->oom.requested : 0;
    const int req_cat = p->oom.happened && p->oom.category >= 0 && p->oom.category < MS_CAT_N ? p->oom.category
                                                                                                : H_CAT_UNKNOWN;

    uint64_t(*bar)[H_NCAT] = calloc(n > 0 ? (size_t)n : 1, sizeof *bar);
    int *reached = calloc(n > 0 ? (size_t)n : 1, sizeof *reached);
    int *phase = calloc(n > 0 ? (size_t)n : 1, sizeof *phase);
    if (!bar || !reached || !phase) {
        fputs("<p class=\"note\">(out of memory drawing the chart)</p>\n", f);
        free(bar); free(reached); free(phase);
        return;
    }
    unsigned mask = 0;
    uint64_t ymax = p->capacity;
    for (int i = 0; i < n; i++) {
        if (from_events) {
            reached[i] = i < d->n_layers && d->layers[i].reached;
            if (reached[i]) memcpy(bar[i], d->layers[i].at.by_cat, sizeof bar[i]);
            phase[i] = reached[i] ? d->layers[i].phase : -1;
        } else {
            reached[i] = L->row[i] != NULL;
            row_bytes(L->row[i], bar[i]);
            phase[i] = -1;
        }
        uint64_t tot = sum_cats(bar[i]);
        uint64_t top = tot + (i == oom_layer ? requested : 0);
        if (top > ymax) ymax = top;
        for (int c = 0; c < H_NCAT; c++)
            if (bar[i][c]) mask |= 1u << c;
    }
    if (oom_layer >= 0 && oom_layer < n && requested) mask |= 1u << req_cat;

    /* ---- the chart ---- */
    char id[48], title[160], desc[512], name[48], b1[32];
    snprintf(id, sizeof id, "fig-a-%" PRId64, run);
    fprintf(f, "<figure id=\"%s\">\n<figcaption><b>(a) Memory per layer.</b> ", id);
    if (from_events)
        fputs("Each bar is what was live on the device at the trial&rsquo;s fullest moment inside that layer "
              "(forward or backward), by category, replayed from the allocator&rsquo;s events. ", f);
    else if (stale)
        fputs("Each bar is the layer&rsquo;s own bytes from the profile (transient: the larger of forward and "
              "backward), not the events, whose categories are not the profile&rsquo;s (see above). ", f);
    else
        fputs("No memory events were recorded for this run: each bar is the layer&rsquo;s own bytes from "
              "the profile (transient: the larger of forward and backward). ", f);
    if (p->capacity) fprintf(f, "The dashed line is the device&rsquo;s capacity (%s). ", h_bytes(p->capacity, b1, sizeof b1));
    if (oom_layer >= 0)
        fputs("The hatched block on the red bar is the request that did not fit.", f);
    fputs("</figcaption>\n", f);
    h_legend(f, mask, oom_layer >= 0 ? "<li><i class=\"sw hatch\"></i>refused request</li>" : NULL);

    /* Room under the bars for the names: slanted at 50 degrees when many. */
    int longest = 4;
    for (int i = 0; i < n; i++) {
        int len = (int)strlen(h_layer_name(L, i, name, sizeof name));
        if (len > longest) longest = len;
    }
    double bottom = n > 8 ? 34 + 5.3 * (longest < 24 ? longest : 24) : 46;
    h_plot pl = { .width = 960, .height = 304 + bottom, .left = 84, .right = 16, .top = 34, .bottom = bottom,
                  .xmin = 0, .xmax = n > 0 ? n : 1, .ymin = 0, .ymax = (double)(ymax ? ymax : 1) };
    snprintf(title, sizeof title, "Memory per layer, run %" PRId64, run);
    snprintf(desc, sizeof desc, "Stacked bars for %d layers; capacity %s; %s.", n, h_bytes(p->capacity, b1, sizeof b1),
             oom_layer >= 0 ? "out of memory" : "no out-of-memory");
    h_svg_begin(f, &pl, id, title, desc);
    fprintf(f, "<defs><pattern id=\"hatch-%" PRId64 "\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
               "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" class=\"hatch-bg\"/>"
               "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" class=\"hatch-fg\"/></pattern></defs>\n", run);
    h_axis_y_bytes(f, &pl, "live bytes on the device");

    const double slot = (pl.width - pl.left - pl.right) / (n > 0 ? n : 1);
    const double bw = slot * 0.72;
    /* Layers the trial never reached: one shaded band, said in words. */
    if (from_events) {
        for (int i = 0; i < n;) {
            if (reached[i]) { i++; continue; }
            int j = i;
            while (j < n && !reached[j]) j++;
            double x0 = h_px(&pl, i), x1 = h_px(&pl, j);
            fprintf(f, "<rect class=\"unreached\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", x0, pl.top,
                    x1 - x0, pl.height - pl.top - pl.bottom);
            if (x1 - x0 > 70)
                fprintf(f, "<text class=\"note-t\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">not reached</text>",
                        (x0 + x1) / 2, pl.top + 14);
            fputc('\n', f);
            i = j;
        }
    }
    for (int i = 0; i < n; i++) {
        double x = h_px(&pl, i) + (slot - bw) / 2;
        uint64_t base = 0;
        h_layer_name(L, i, name, sizeof name);
        fprintf(f, "<g class=\"bar%s\">", i == oom_layer ? " oom" : "");
        for (int c = 0; c < H_NCAT; c++) {
            if (!bar[i][c]) continue;
            double y1 = h_py(&pl, (double)(base + bar[i][c])), y0 = h_py(&pl, (double)base);
            fprintf(f, "<rect class=\"c-%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.2f\"><title>", h_cat_name(c),
                    x, y1, bw, y0 - y1);
            h_esc(f, name);
            fprintf(f, ": %s %s (%" PRIu64 " bytes)</title></rect>", h_cat_name(c), h_bytes(bar[i][c], b1, sizeof b1),
                    bar[i][c]);
            base += bar[i][c];
        }
        if (i == oom_layer && requested) {
            double y1 = h_py(&pl, (double)(base + requested)), y0 = h_py(&pl, (double)base);
            fprintf(f, "<rect class=\"req\" fill=\"url(#hatch-%" PRId64 ")\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                       "height=\"%.2f\"><title>refused: %s %s (%" PRIu64 " bytes)</title></rect>",
                    run, x, y1, bw, y0 - y1, h_cat_name(req_cat), h_bytes(requested, b1, sizeof b1), requested);
            base += requested;
        }
        fputs("</g>\n", f);
        if (i == oom_layer) {
            double tx = x + bw / 2, ty = h_py(&pl, (double)base) - 8;
            const char *anchor = tx > pl.width - 140 ? "end" : tx < 140 ? "start" : "middle";
            fprintf(f, "<text class=\"oom-l\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">OOM: +%s</text>\n",
                    tx, ty < pl.top ? pl.top : ty, anchor, h_bytes(requested, b1, sizeof b1));
        }
    }
    if (p->capacity) {
        snprintf(title, sizeof title, "capacity %s", h_bytes(p->capacity, b1, sizeof b1));
        h_hline(f, &pl, (double)p->capacity, "cap", title);
    }
    /* Layer names under the bars: slanted when many, thinned when crowded. */
    int every = 1;
    while (slot * every < 13) every++;
    double ly = pl.height - pl.bottom + 10;
    for (int i = 0; i < n; i += every) {
        double cx = h_px(&pl, i) + slot / 2;
        h_layer_name(L, i, name, sizeof name);
        short_label(name);
        if (n > 8)
            fprintf(f, "<text class=\"tick%s\" transform=\"translate(%.1f %.1f) rotate(-50)\" text-anchor=\"end\">",
                    i == oom_layer ? " oom-t" : "", cx + 3, ly);
        else
            fprintf(f, "<text class=\"tick%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", i == oom_layer ? " oom-t" : "",
                    cx, ly + 8);
        h_esc(f, name);
        fputs("</text>\n", f);
    }
    fprintf(f, "<text class=\"atitle\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">layer, in the order the model "
               "runs them</text>\n", pl.left + (pl.width - pl.left - pl.right) / 2, pl.height - 4);
    h_svg_end(f);
    fputs("</figure>\n", f);

    /* ---- its table ---- */
    int show[H_NCAT];
    for (int c = 0; c < H_NCAT; c++)
        show[c] = c <= MS_CAT_TRANSIENT || (mask & (1u << c));
    fprintf(f, "<table class=\"t\" id=\"t-a-%" PRId64 "\">\n<caption>The bars of (a), in bytes%s</caption>\n<thead><tr>"
               "<th>#</th><th>layer</th>%s", run, from_events ? " (live on the device)" : " (each layer&rsquo;s own)",
            from_events ? "<th>phase</th>" : "");
    for (int c = 0; c < H_NCAT; c++)
        if (show[c]) fprintf(f, "<th>%s</th>", h_cat_name(c));
    fprintf(f, "<th>total</th>%s</tr></thead>\n<tbody>\n", oom_layer >= 0 ? "<th>refused</th>" : "");
    for (int i = 0; i < n; i++) {
        fprintf(f, "<tr data-layer=\"%d\"%s>", i, i == oom_layer ? " class=\"oom\"" : "");
        h_td_int(f, "layer", i);
        h_td_text(f, "name", h_layer_name(L, i, name, sizeof name));
        if (!reached[i]) {
            /* the columns after the name: phase, categories, total, refused */
            int span = (from_events ? 1 : 0) + 1 + (oom_layer >= 0 ? 1 : 0);
            for (int c = 0; c < H_NCAT; c++) span += show[c];
            fprintf(f, "<td colspan=\"%d\" class=\"muted\">%s</td></tr>\n", span,
                    from_events ? "not reached by the trial" : "no profile row");
            continue;
        }
        if (from_events) h_td_text(f, "phase", phase_word(phase[i]));
        for (int c = 0; c < H_NCAT; c++)
            if (show[c]) h_td_bytes(f, h_cat_name(c), bar[i][c]);
        h_td_bytes(f, "total", sum_cats(bar[i]));
        if (oom_layer >= 0) {
            if (i == oom_layer) h_td_bytes(f, "refused", requested);
            else fputs("<td></td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    free(bar);
    free(reached);
    free(phase);
}
