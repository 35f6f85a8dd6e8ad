/* html_trial.c — section 1 of the HTML report: each stored trial (profile)
 * with its facts, its out-of-memory diagnosis, charts (a) and (b), and the
 * profile's per-layer rows in exact bytes (see html_internal.h). */
#include "reports/html_internal.h"
#include "reports/run_facts.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *phase_phrase(int phase)
{
    switch (phase) {
    case MS_PH_INIT: return "during the initialisation of";
    case MS_PH_FORWARD: return "in the forward pass of";
    case MS_PH_BACKWARD: return "in the backward pass of";
    case MS_PH_OPTIMIZER: return "in the optimizer step of";
    default: return "in";
    }
}

/* What a request the allocator saw asked for, against what was live and
 * the capacity, and the device that would have got past it. */
static void oom_asked(FILE *f, const ms_oom_info *o, uint64_t live, uint64_t cap)
{
    char b1[32], b2[32], b3[32], b4[32];
    fprintf(f, ": it asked for <b>%s</b> (%s", h_bytes(o->requested, b1, sizeof b1),
            o->category >= 0 && o->category < MS_CAT_N ? ms_cat_name((ms_cat)o->category) : "?");
    if (o->what[0]) {
        fputs(" &lsquo;", f);
        h_escn(f, o->what, sizeof o->what);
        fputs("&rsquo;", f);
    }
    fprintf(f, ") with %s live of %s capacity", h_bytes(live, b2, sizeof b2), h_bytes(cap, b3, sizeof b3));
    if (live + o->requested > cap)
        fprintf(f, "; %s were missing.", h_bytes(live + o->requested - cap, b4, sizeof b4));
    else
        fprintf(f, ". By memsplit&rsquo;s count %s were still free: the device refused anyway (fragmentation, or "
                   "memory used outside memsplit&rsquo;s count).", h_bytes(cap - live, b4, sizeof b4));
    fprintf(f, " A device of at least %s would have got past this allocation (not necessarily through the whole "
               "step).</p>\n", h_bytes(live + o->requested, b1, sizeof b1));
}

/* The facts table of the diagnosis: what was asked, what was live, what
 * was missing; id t-oom-RUN. */
static void oom_box(FILE *f, int64_t run, const ms_profile *p, const h_layers *L)
{
    const ms_oom_info *o = &p->oom;
    uint64_t live = 0;
    for (int c = 0; c < MS_CAT_N; c++) live += o->live_by_cat[c];
    const uint64_t cap = o->capacity ? o->capacity : p->capacity;
    char name[48], b2[32], b3[32];
    if (o->layer_name[0]) snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, o->layer_name);
    else h_layer_name(L, o->layer, name, sizeof name);

    fputs("<div class=\"oombox\" role=\"note\"><p><b>Out of memory</b> ", f);
    if (o->layer >= 0) {
        fprintf(f, "%s <b>", phase_phrase(o->phase));
        h_esc(f, name);
        if (o->step > 0) fprintf(f, "</b> (layer %d, step %d)", o->layer, o->step);
        else fprintf(f, "</b> (layer %d)", o->layer);
    } else {
        fputs(o->phase == MS_PH_OPTIMIZER ? "in the optimizer step" : "outside any layer", f);
        if (o->step > 0) fprintf(f, " (step %d)", o->step);
    }
    if (o->requested == 0)
        /* no allocator request was seen (term_report.c: oom_sentence) */
        fprintf(f, " with %s live of %s capacity: the bytes it asked for are not known (CUDA refused memory "
                   "outside PyTorch&rsquo;s allocator, as cuBLAS creating its handle does, or no observer saw the "
                   "request).</p>\n", h_bytes(live, b2, sizeof b2), h_bytes(cap, b3, sizeof b3));
    else
        oom_asked(f, o, live, cap);

    fprintf(f, "<table class=\"t kv\" id=\"t-oom-%" PRId64 "\"><caption>The diagnosis, exact</caption><tbody>\n", run);
    fputs("<tr><th class=\"rowh\">layer</th>", f);
    h_td_int(f, "layer", o->layer);
    fputs("</tr>\n<tr><th class=\"rowh\">layer name</th>", f);
    h_td_text(f, "layer-name", name);
    fputs("</tr>\n<tr><th class=\"rowh\">phase</th>", f);
    h_td_text(f, "phase", o->phase >= 0 && o->phase < MS_PH_N ? ms_phase_name((ms_phase)o->phase) : "?");
    fputs("</tr>\n<tr><th class=\"rowh\">step</th>", f);
    if (o->step > 0) h_td_int(f, "step", o->step);
    else h_td_text(f, "step", "not recorded");
    fputs("</tr>\n<tr><th class=\"rowh\">category</th>", f);
    h_td_text(f, "category", o->category >= 0 && o->category < MS_CAT_N ? ms_cat_name((ms_cat)o->category) : "?");
    fputs("</tr>\n<tr><th class=\"rowh\">requested</th>", f);
    if (o->requested == 0) h_td_text(f, "requested", "not known");
    else h_td_bytes(f, "requested", o->requested);
    fputs("</tr>\n", f);
    for (int c = 0; c < MS_CAT_N; c++) {
        if (!o->live_by_cat[c]) continue;
        char key[32];
        snprintf(key, sizeof key, "live-%s", ms_cat_name((ms_cat)c));
        fprintf(f, "<tr><th class=\"rowh\">live: <i class=\"sw c-%s\"></i>%s</th>", ms_cat_name((ms_cat)c),
                ms_cat_name((ms_cat)c));
        h_td_bytes(f, key, o->live_by_cat[c]);
        fputs("</tr>\n", f);
    }
    fputs("<tr class=\"total\"><th class=\"rowh\">live in all</th>", f);
    h_td_bytes(f, "live", live);
    fputs("</tr>\n<tr><th class=\"rowh\">capacity</th>", f);
    h_td_bytes(f, "capacity", cap);
    fputs("</tr>\n<tr><th class=\"rowh\">missing</th>", f);
    h_td_bytes(f, "missing", live + o->requested > cap ? live + o->requested - cap : 0);
    fputs("</tr>\n</tbody></table></div>\n", f);
}

static int cmp_row_ptr(const void *a, const void *b)
{
    const ms_layer_row *x = *(const ms_layer_row *const *)a, *y = *(const ms_layer_row *const *)b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The profile's rows at one (precision, micro-batch), one per layer; id
 * t-rows-RUN for the trial's own setting, t-rows-RUN-PREC-MB otherwise. */
static void rows_table(FILE *f, int64_t run, const ms_profile *p, int precision, int mb, int own)
{
    int master = 0;
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].precision == precision && p->rows[i].micro_batch == mb) master |= p->rows[i].master != 0;
    const int held = own && p->oom.happened && p->oom.n_live_layers > 0;
    if (own)
        fprintf(f, "<table class=\"t\" id=\"t-rows-%" PRId64 "\">\n", run);
    else
        fprintf(f, "<table class=\"t\" id=\"t-rows-%" PRId64 "-%s-%d\">\n", run, h_precision_name(precision), mb);
    fprintf(f, "<caption>What each layer holds, measured at %s, micro-batch %d%s (activations, transients and times "
               "per micro-batch)</caption>\n<thead><tr><th>#</th><th>layer</th><th>measured</th><th>param</th>%s"
               "<th>grad</th><th>optim</th><th>act</th><th>transient fwd</th><th>transient bwd</th>"
               "<th>fwd</th><th>bwd</th>%s</tr></thead>\n<tbody>\n",
            h_precision_name(precision), mb, own ? ", the trial&rsquo;s own setting" : "", master ? "<th>master</th>" : "",
            held ? "<th>held at the OOM</th>" : "");
    /* Rows in layer order, stable among equals. */
    const ms_layer_row **sel = malloc((p->n_rows > 0 ? (size_t)p->n_rows : 1) * sizeof *sel);
    int ns = 0;
    for (int i = 0; sel && i < p->n_rows; i++)
        if (p->rows[i].precision == precision && p->rows[i].micro_batch == mb) sel[ns++] = &p->rows[i];
    if (sel) qsort(sel, (size_t)ns, sizeof *sel, cmp_row_ptr);
    for (int i = 0; i < ns; i++) {
        const ms_layer_row *r = sel[i];
        char name[40];
        snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, r->name);
        fprintf(f, "<tr data-layer=\"%d\"%s>", r->layer,
                own && p->oom.happened && r->layer == p->oom.layer ? " class=\"oom\"" : "");
        h_td_int(f, "layer", r->layer);
        h_td_text(f, "name", name);
        h_td_text(f, "source", r->source == MS_ROW_ISOLATED ? "isolated"
                               : r->source == MS_ROW_COPIED ? "copied"
                               : r->source == MS_ROW_UNCAPPED ? "uncapped pass"
                                                               : "trial");
        h_td_bytes(f, "param", r->param);
        if (master) h_td_bytes(f, "master", r->master);
        h_td_bytes(f, "grad", r->grad);
        h_td_bytes(f, "optim", r->optim);
        h_td_bytes(f, "act", r->act);
        h_td_bytes(f, "transient_fwd", r->transient_fwd);
        h_td_bytes(f, "transient_bwd", r->transient_bwd);
        h_td_num(f, "fwd_ms", r->fwd_ms, "%.3f ms");
        h_td_num(f, "bwd_ms", r->bwd_ms, "%.3f ms");
        if (held) {
            if (r->layer >= 0 && r->layer < p->oom.n_live_layers) h_td_bytes(f, "held", p->oom.live_by_layer[r->layer]);
            else fputs("<td></td>", f);
        }
        fputs("</tr>\n", f);
    }
    if (!sel) fputs("<tr><td colspan=\"3\">(out of memory listing the rows)</td></tr>\n", f);
    free(sel);
    fputs("</tbody></table>\n", f);
}

/* Whether the events carry other categories than the profile: a program
 * under autocast always has fp32 master weights live from its start, so
 * allocator events with none at all were written before memsplit stored
 * each tensor's final category (a database of an older memsplit). */
static int stale_categories(const ms_profile *p, const h_trace *t)
{
    uint64_t master = 0, seen = 0;
    for (int i = 0; i < p->n_rows; i++) master += p->rows[i].master;
    for (int i = 0; i < t->n_dev; i++) seen += t->dev[i].cat_max[MS_CAT_MASTER];
    return rf_is_program(p) && master && t->source == MS_EV_SRC_ALLOCATOR && !seen;
}

static int one_trial(FILE *f, ms_db *db, const ms_run_info *r, char *err, size_t errlen)
{
    ms_profile p;
    if (ms_db_load_profile(db, r->id, &p, err, errlen) != 0) return -1;
    char b1[32], b2[32];

    /* The trial's own setting: its first row's (the profiler stores the
     * trial's rows first). */
    h_layers L = { 0 };
    int n = p.n_layers;
    for (int i = 0; i < p.n_rows; i++)
        if (p.rows[i].layer >= n) n = p.rows[i].layer + 1;
    if (n > 1 << 16) n = 1 << 16;
    if (p.oom.happened && p.oom.layer >= n && p.oom.layer < 1 << 16) n = p.oom.layer + 1;
    L.n = n;
    L.row = calloc(n > 0 ? (size_t)n : 1, sizeof *L.row);
    if (!L.row) { ms_profile_free(&p); snprintf(err, errlen, "out of memory"); return -1; }
    if (p.n_rows) { L.precision = p.rows[0].precision; L.micro_batch = p.rows[0].micro_batch; }
    for (int i = 0; i < p.n_rows; i++) {
        const ms_layer_row *row = &p.rows[i];
        if (row->precision == L.precision && row->micro_batch == L.micro_batch && row->layer >= 0 && row->layer < n &&
            !L.row[row->layer])
            L.row[row->layer] = row;
    }
    h_trace t;
    if (h_trace_load(db, r->id, n, &t, err, errlen) != 0) { free(L.row); ms_profile_free(&p); return -1; }

    fprintf(f, "<article class=\"run\" id=\"trial-%" PRId64 "\">\n<h3>Run %" PRId64 ": the trial of ", r->id, r->id);
    h_escn(f, p.model, sizeof p.model);
    fputs("</h3>\n<dl class=\"facts\">", f);
    char about[1536];
    rf_model_text(&p, about, sizeof about);   /* a program in its own terms, memsplit's model by its shape */
    fprintf(f, "<dt>%s</dt><dd>", rf_is_program(&p) ? "program" : "model");
    h_esc(f, about);
    fputs("</dd>", f);
    if (p.layer_list[0]) {
        fputs("<dt>its blocks</dt><dd>", f);
        h_escn(f, p.layer_list, sizeof p.layer_list);
        fputs("</dd>", f);
    }
    fputs("<dt>device</dt><dd>", f);
    h_escn(f, p.device, sizeof p.device);
    fprintf(f, "</dd><dt>capacity</dt><dd data-k=\"capacity\" data-v=\"%" PRIu64 "\">", p.capacity);
    if (p.capacity) fprintf(f, "%s (%" PRIu64 " bytes)", h_bytes(p.capacity, b1, sizeof b1), p.capacity);
    else fputs("none set (the trial ran without a cap)", f);
    fprintf(f, "</dd><dt>peak</dt><dd data-k=\"peak\" data-v=\"%" PRIu64 "\">%s (%" PRIu64 " bytes", p.peak,
            h_bytes(p.peak, b1, sizeof b1), p.peak);
    if (p.capacity) fprintf(f, ", %.1f%% of capacity", 100.0 * (double)p.peak / (double)p.capacity);
    fprintf(f, ")</dd><dt>reserve</dt><dd data-k=\"reserve\" data-v=\"%" PRIu64 "\">%s before any tensor</dd>",
            p.reserve, h_bytes(p.reserve, b2, sizeof b2));
    fprintf(f, "<dt>result</dt><dd class=\"%s\">%s</dd></dl>\n", p.oom.happened ? "bad" : p.fits ? "good" : "",
            p.oom.happened ? "out of memory (diagnosis below)"
            : p.fits       ? "fits: the trial finished without running out of memory"
                           : "did not finish (no out-of-memory recorded)");
    if (p.oom.happened) oom_box(f, r->id, &p, &L);

    const int stale = stale_categories(&p, &t);
    if (stale)
        fputs("<p class=\"note\">This trial&rsquo;s memory events were recorded by a memsplit that stored each tensor "
              "under the category it was first seen as, so the program&rsquo;s fp32 master weights, gradients and "
              "optimizer state read as transient there. Chart (a) therefore shows each layer&rsquo;s own bytes from "
              "the profile, whose categories are right; in (b) only the total over time is right, not its split. "
              "A new trial records them right.</p>\n", f);
    h_chart_layers(f, r->id, &p, &L, stale ? NULL : h_trial_device(&t), stale);
    h_chart_timeline(f, r->id, &p, &L, &t);

    int n_iso = 0, n_own = 0;
    for (int i = 0; i < n; i++)
        if (L.row[i]) { n_own++; n_iso += L.row[i]->source == MS_ROW_ISOLATED; }
    fputs("<h4>The profile&rsquo;s rows</h4>\n", f);
    if (p.n_rows == 0) {
        fputs("<p class=\"note\">No layer rows were recorded.</p>\n", f);
    } else {
        if (n_iso)
            fprintf(f, "<p class=\"note\">%d of %d layers were measured in isolation: the trial stopped before it "
                       "completed their rows, and the planner needs a measured row for every layer.</p>\n", n_iso, n_own);
        rows_table(f, r->id, &p, L.precision, L.micro_batch, 1);
        /* Other settings the profiler measured, each once, in order of
         * first appearance. */
        int others = 0;
        for (int i = 0; i < p.n_rows; i++) {
            const ms_layer_row *row = &p.rows[i];
            if (row->precision == L.precision && row->micro_batch == L.micro_batch) continue;
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = p.rows[j].precision == row->precision && p.rows[j].micro_batch == row->micro_batch;
            if (seen) continue;
            if (others++ == 0)
                fputs("<details class=\"more\"><summary>The other precisions and micro-batch sizes measured"
                      "</summary>\n", f);
            rows_table(f, r->id, &p, row->precision, row->micro_batch, 0);
        }
        if (others) fputs("</details>\n", f);
    }
    fputs("</article>\n", f);
    h_trace_free(&t);
    free(L.row);
    ms_profile_free(&p);
    return 0;
}

int h_section_trial(FILE *f, ms_db *db, const ms_run_info *runs, int n, char *err, size_t errlen)
{
    fputs("<section id=\"trial\">\n<h2>1. The trial</h2>\n", f);
    int shown = 0;
    for (int i = 0; i < n; i++) {
        if (!runs[i].has_profile) continue;
        if (one_trial(f, db, &runs[i], err, errlen) != 0) return -1;
        shown++;
    }
    if (!shown)
        fprintf(f, "<p class=\"empty\">No trial recorded: run %" PRId64 " holds no profile (nor do the runs it "
                   "contains). <code>memsplit profile --db FILE</code> records one.</p>\n",
                n ? runs[0].id : 0);
    fputs("</section>\n", f);
    return 0;
}
