/* term_report.c — the per-layer table and the OOM diagnosis in the terminal
 * (see term_report.h). */
#include "reports/term_report.h"
#include "reports/term_internal.h"
#include "reports/run_facts.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024.0

char *ms_term_bytes_short(uint64_t bytes, char *buf, size_t len)
{
    static const char units[] = "KMGTPE";
    if (bytes == 0) { snprintf(buf, len, "-"); return buf; }
    if (bytes < 1000) { snprintf(buf, len, "%u", (unsigned)bytes); return buf; }
    double v = (double)bytes / KIB;
    int u = 0;
    /* Stay within 4 characters: "9.9X" below 10, "999X" below 1000,
     * otherwise the next unit up ("1.0X" for 1000..1023 of the unit). */
    while (v >= 999.5 && u < 5) { v /= KIB; u++; }
    if (v < 9.95) snprintf(buf, len, "%.1f%c", v, units[u]);
    else snprintf(buf, len, "%.0f%c", v, units[u]);
    return buf;
}

char *ms_term_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    if (bytes < 1024) { snprintf(buf, len, "%u B", (unsigned)bytes); return buf; }
    double v = (double)bytes / KIB;
    int u = 0;
    while (v >= KIB && u < 5) { v /= KIB; u++; }
    snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

/* ---- the per-layer table --------------------------------------------- */

/* Times in 6 characters: two decimals while they fit, fewer beyond. */
static void fmt_ms(double ms, char *buf, size_t len)
{
    for (int prec = 2; prec >= 0; prec--) {
        snprintf(buf, len, "%.*f", prec, ms);
        if (strlen(buf) <= 6) return;
    }
    snprintf(buf, len, "%.0e", ms);
}

typedef struct {
    int bw;           /* width of a byte column's value */
    int master;       /* show the master column */
    int nw;           /* width of the name column */
    const char *stem; /* the block list's path ("transformers."), said once above the table; NULL: names whole */
    int stem_len;
} table_layout;

static const char *layer_name_of(const ms_profile *p, int layer, char *buf, size_t len)
{
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].layer == layer && p->rows[i].name[0]) {
            snprintf(buf, len, "%.*s", rep_prefix(p->rows[i].name, (int)len - 1), p->rows[i].name);
            return buf;
        }
    snprintf(buf, len, "layer %d", layer);
    return buf;
}

static void print_header(FILE *f, const table_layout *t)
{
    /* Labels sized to the column: the narrow layout abbreviates. */
    int w = t->bw;
    fprintf(f, "%3s ", "#");
    rep_pad(f, "layer", t->nw);
    fprintf(f, " %s %*s", "s", w, "param");
    if (t->master) fprintf(f, " %*s", w, w >= 6 ? "master" : "mastr");
    fprintf(f, " %*s %*s %*s %*s %*s %6s %6s\n", w, "grad", w, "optim", w, "act", w, w >= 6 ? "tr.fwd" : "tr.fw",
            w, w >= 6 ? "tr.bwd" : "tr.bw", "fwd ms", "bwd ms");
}

static void print_bytes_cell(FILE *f, uint64_t v, int w)
{
    char b[16];
    fprintf(f, " %*s", w, ms_term_bytes_short(v, b, sizeof b));
}

/* What a row's name column says: a block of the list without the list's
 * path (".15" for "transformers.15") when the table says the path once. */
static const char *shown_name(const table_layout *t, const char *name)
{
    if (!t->stem || strncmp(name, t->stem, (size_t)t->stem_len) != 0 || !name[t->stem_len]) return name;
    for (const char *d = name + t->stem_len; *d; d++)
        if (*d < '0' || *d > '9') return name;   /* only the list's own elements */
    return name + t->stem_len - 1;
}

static void print_row(FILE *f, const table_layout *t, const char *idx, const char *name, const char *src,
                      const ms_layer_row *r)
{
    char fw[16], bw[16], cut[4 * MS_NAME_MAX];
    fprintf(f, "%3s ", idx);
    rep_pad(f, rep_cut(shown_name(t, name), t->nw, cut, sizeof cut), t->nw);
    fprintf(f, " %s", src);
    print_bytes_cell(f, r->param, t->bw);
    if (t->master) print_bytes_cell(f, r->master, t->bw);
    print_bytes_cell(f, r->grad, t->bw);
    print_bytes_cell(f, r->optim, t->bw);
    print_bytes_cell(f, r->act, t->bw);
    print_bytes_cell(f, r->transient_fwd, t->bw);
    print_bytes_cell(f, r->transient_bwd, t->bw);
    fmt_ms(r->fwd_ms, fw, sizeof fw);
    fmt_ms(r->bwd_ms, bw, sizeof bw);
    fprintf(f, " %6s %6s\n", fw, bw);
}

/* The path the blocks share up to their index ("transformers." of
 * transformers.0 .. transformers.23), or 0 bytes when they share none. */
static int block_stem(const ms_layer_row *const *rows, int n)
{
    int stem = -1;
    const char *first = NULL;
    for (int i = 0; i < n; i++) {
        const char *s = rows[i]->name;
        if (strcmp(rows[i]->kind, "block")) continue;
        size_t len = strlen(s), k = len;
        while (k > 0 && s[k - 1] >= '0' && s[k - 1] <= '9') k--;
        if (k == len || k < 2 || s[k - 1] != '.') return 0;
        if (!first) {
            first = s;
            stem = (int)k;
        } else if ((int)k != stem || strncmp(s, first, k)) {
            return 0;
        }
    }
    return stem > 0 ? stem : 0;
}

/* The name column: names whole in the room the other columns leave at 80
 * (narrower byte columns when that makes them fit); else the block list's
 * path said once, and what is still too long cut in the middle, its whole
 * name listed under the table. Returns the number of names cut. */
static int fit_names(table_layout *t, const ms_layer_row *const *rows, int n, int width)
{
    const int n_byte_cols = 6 + t->master;
    int room6 = width - (20 + n_byte_cols * 7), room5 = width - (20 + n_byte_cols * 6);
    int longest = 0, cut = 0;
    for (int pass = 0; pass < 2; pass++) {
        longest = 0;
        for (int i = 0; i < n; i++) {
            const char *s = shown_name(t, rows[i]->name);
            int c = rep_columns(s, (int)strlen(s));
            if (c > longest) longest = c;
        }
        if (longest <= room6 || longest <= room5 || pass == 1) break;
        t->stem_len = block_stem(rows, n);
        if (!t->stem_len) break;
        for (int i = 0; i < n && !t->stem; i++)
            if (!strcmp(rows[i]->kind, "block")) t->stem = rows[i]->name;
    }
    t->bw = (longest > 9 ? longest : 9) <= room6 ? 6 : 5;
    int room = t->bw == 6 ? room6 : room5;
    t->nw = longest > 9 ? longest : 9;
    if (t->nw > room) t->nw = room > 9 ? room : 9;
    for (int i = 0; i < n; i++) {
        const char *s = shown_name(t, rows[i]->name);
        cut += rep_columns(s, (int)strlen(s)) > t->nw;
    }
    return cut;
}

static int cmp_row_ptr(const void *a, const void *b)
{
    const ms_layer_row *x = *(const ms_layer_row *const *)a, *y = *(const ms_layer_row *const *)b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return x < y ? -1 : x > y;   /* stable: keep stored order among equals */
}

static const char *precision_text(int p)
{
    static const char *const names[] = { "fp32", "bf16", "fp16" };
    return p >= 0 && p < 3 ? names[p] : "?";
}

/* One table: the rows measured at (precision, micro_batch). */
static void print_group(FILE *f, const ms_profile *p, int precision, int micro_batch, int width)
{
    int n = 0;
    const ms_layer_row **rows = malloc((size_t)p->n_rows * sizeof *rows);
    if (!rows) { fprintf(f, "(out of memory printing the table)\n"); return; }
    table_layout t = { .bw = 6, .master = 0 };
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *r = &p->rows[i];
        if (r->precision != precision || r->micro_batch != micro_batch) continue;
        rows[n++] = r;
        t.master |= r->master != 0;
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_row_ptr);
    int n_cut = fit_names(&t, rows, n, width > 0 ? width : 80);

    fprintf(f, "\n%s, micro-batch %d:\n", precision_text(precision), micro_batch);
    if (t.stem) {
        char line[2 * MS_NAME_MAX];
        snprintf(line, sizeof line, "(.N below is %.*sN)", t.stem_len, t.stem);
        rep_wrap(f, width, 1, line);
    }
    print_header(f, &t);
    ms_layer_row total;
    memset(&total, 0, sizeof total);
    int n_isolated = 0, n_other = 0;
    static const char *const letter[MS_ROW_N] = { "F", "I", "C", "U" };
    for (int i = 0; i < n; i++) {
        const ms_layer_row *r = rows[i];
        char idx[16];
        snprintf(idx, sizeof idx, "%d", r->layer);
        print_row(f, &t, idx, r->name, r->source >= 0 && r->source < MS_ROW_N ? letter[r->source] : "?", r);
        n_isolated += r->source == MS_ROW_ISOLATED;
        n_other += r->source == MS_ROW_COPIED || r->source == MS_ROW_UNCAPPED;
        total.param += r->param;
        total.master += r->master;
        total.grad += r->grad;
        total.optim += r->optim;
        total.act += r->act;
        if (r->transient_fwd > total.transient_fwd) total.transient_fwd = r->transient_fwd;
        if (r->transient_bwd > total.transient_bwd) total.transient_bwd = r->transient_bwd;
        total.fwd_ms += r->fwd_ms;
        total.bwd_ms += r->bwd_ms;
    }
    print_row(f, &t, "", "total", " ", &total);
    rep_wrap(f, width, 0,
             n_other ? "s: F = measured in the full run, C = copied from an identical block the run "
                       "completed, U = measured in a second pass without the cap. tr.: transient peak while "
                       "the layer runs (the total row shows the largest). Act, transient and times are per "
                       "micro-batch."
                     : "s: F = measured in the full run, I = measured in isolation. tr.: transient peak "
                       "while the layer runs (the total row shows the largest). Act, transient and times are "
                       "per micro-batch.");
    if (n_isolated) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "%d of %d rows here were completed in isolation: the trial did not run these layers "
                 "through a whole step at this precision and micro-batch size.",
                 n_isolated, n);
        rep_wrap(f, width, 0, msg);
    }
    if (n_cut) fprintf(f, "Names cut above, whole:\n");
    for (int i = 0; i < n && n_cut; i++) {
        const char *s = shown_name(&t, rows[i]->name);
        if (rep_columns(s, (int)strlen(s)) <= t.nw || (i > 0 && rows[i - 1]->layer == rows[i]->layer)) continue;
        char line[MS_NAME_MAX + 48];
        snprintf(line, sizeof line, "layer %d: %s", rows[i]->layer, rows[i]->name);
        fputs("  ", f);
        rep_wrap_from(f, width, 2, 4, line);
    }
    free(rows);
}

/* The exact bytes of a request the allocator saw, and the device that
 * would have got past it. */
static void oom_bytes_known(FILE *f, const ms_oom_info *o, uint64_t live, uint64_t cap, int width)
{
    char line[640];
    snprintf(line, sizeof line, "Exact bytes: requested %" PRIu64 ", live %" PRIu64 ", capacity %" PRIu64 ".",
             o->requested, live, cap);
    rep_wrap(f, width, 2, line);
    char need[32], capb[32], exact[64] = "";
    ms_term_bytes(live + o->requested, need, sizeof need);
    if (!strcmp(need, ms_term_bytes(cap, capb, sizeof capb)) && live + o->requested > cap)
        /* rounded, the two read alike: the bytes it lacked say the difference */
        snprintf(exact, sizeof exact, " (%" PRIu64 " bytes more than the capacity)", live + o->requested - cap);
    snprintf(line, sizeof line, "A device of at least %s%s would have got past this allocation (not "
             "necessarily through the whole step).", need, exact);
    rep_wrap(f, width, 2, line);
}

static void oom_text(FILE *f, const ms_profile *p, int width);

static void profile_text(FILE *f, const ms_profile *p, int width)
{
    if (width <= 0) width = 80;
    char line[2048], about[1536], b1[32], b2[32], b3[32];
    rf_model_text(p, about, sizeof about);   /* a program in its own terms, memsplit's model by its shape */
    snprintf(line, sizeof line, "Profile of %.*s: %s; on %.*s.", rep_prefix(p->model, 128), p->model, about,
             rep_prefix(p->device, (int)sizeof p->device), p->device);
    rep_wrap(f, width, 0, line);

    /* One table per (precision, micro-batch), in order of first appearance. */
    for (int i = 0; i < p->n_rows; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = p->rows[j].precision == p->rows[i].precision && p->rows[j].micro_batch == p->rows[i].micro_batch;
        if (!seen) print_group(f, p, p->rows[i].precision, p->rows[i].micro_batch, width);
    }
    if (p->n_rows == 0) fprintf(f, "\n(no layer rows recorded)\n");

    fprintf(f, "\n");
    rep_capacity(p->capacity, b1, sizeof b1);
    ms_term_bytes(p->reserve, b2, sizeof b2);
    snprintf(line, sizeof line, "%s on %.*s (reserve: %s before any tensor)", b1, (int)sizeof p->device,
             p->device, b2);
    fprintf(f, "capacity  ");
    rep_wrap_from(f, width, 10, 10, line);
    ms_term_bytes(p->peak, b3, sizeof b3);
    if (p->capacity)
        fprintf(f, "peak      %s (%.1f%% of capacity)\n", b3, 100.0 * (double)p->peak / (double)p->capacity);
    else
        fprintf(f, "peak      %s\n", b3);
    if (p->oom.happened) {
        fprintf(f, "result    OUT OF MEMORY (diagnosis below)\n\n");
        oom_text(f, p, width);
    } else {
        fprintf(f, "result    %s\n", p->fits ? "fits: the trial finished without running out of memory"
                                             : "did not finish (no out-of-memory recorded)");
    }
}

/* ---- the diagnosis ---------------------------------------------------- */

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

/* Bytes in a given unit's scale so that one sentence reads in one unit;
 * falls back to the value's own unit below a tenth of the shared one, where
 * two decimals would say little ("0.06 GiB"). */
static char *bytes_in(uint64_t v, uint64_t scale_of, char *buf, size_t len)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    double unit = 1.0;
    while (u < 4 && (double)scale_of >= unit * KIB) { unit *= KIB; u++; }
    if (u == 0 || (double)v < unit / 10.0) return ms_term_bytes(v, buf, len);
    snprintf(buf, len, "%.2f %s", (double)v / unit, units[u]);
    return buf;
}

typedef struct { int layer; uint64_t bytes; } layer_live;

static int cmp_live_desc(const void *a, const void *b)
{
    const layer_live *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->layer - y->layer;
}

static void print_top_layers(FILE *f, const ms_profile *p, uint64_t live, int width)
{
    const ms_oom_info *o = &p->oom;
    layer_live *ll = o->n_live_layers > 0 ? malloc((size_t)o->n_live_layers * sizeof *ll) : NULL;
    int n = 0;
    for (int i = 0; ll && i < o->n_live_layers; i++)
        if (o->live_by_layer[i]) ll[n++] = (layer_live){ i, o->live_by_layer[i] };
    if (n == 0) { free(ll); return; }
    qsort(ll, (size_t)n, sizeof *ll, cmp_live_desc);
    const int top = n < 5 ? n : 5;
    fprintf(f, "\nLayers holding the most, at that moment:\n");
    /* Names as wide as the line leaves (34 columns go to the rest): whole
     * when they fit, else cut in the middle, keeping the index at the end. */
    char name[MS_NAME_MAX], cut[4 * MS_NAME_MAX];
    int nw = 12, room = width - 34 > 12 ? width - 34 : 12;
    for (int i = 0; i < top; i++) {
        int c = rep_columns(layer_name_of(p, ll[i].layer, name, sizeof name), (int)strlen(name));
        if (c > nw) nw = c < room ? c : room;
    }
    uint64_t rest = 0;
    for (int i = 0; i < n; i++) {
        char b[32];
        if (i >= top) { rest += ll[i].bytes; continue; }
        layer_name_of(p, ll[i].layer, name, sizeof name);
        fprintf(f, "  layer %3d  ", ll[i].layer);
        rep_pad(f, rep_cut(name, nw, cut, sizeof cut), nw);
        fprintf(f, " %12s  %5.1f%%\n", ms_term_bytes(ll[i].bytes, b, sizeof b),
                live ? 100.0 * (double)ll[i].bytes / (double)live : 0.0);
    }
    if (n > top) {
        char b[32], line[160];
        snprintf(line, sizeof line, "... %d more layers hold %s.", n - top, ms_term_bytes(rest, b, sizeof b));
        fprintf(f, "  ");
        rep_wrap_from(f, width, 2, 6, line);
    }
    free(ll);
}

static void oom_sentence(const ms_profile *p, char *line, size_t len)
{
    const ms_oom_info *o = &p->oom;
    uint64_t live = 0;
    for (int c = 0; c < MS_CAT_N; c++) live += o->live_by_cat[c];
    uint64_t cap = o->capacity ? o->capacity : p->capacity;

    char where[2 * MS_NAME_MAX], name[MS_NAME_MAX], req[32], lv[32], capb[32], miss[32], step[24] = "";
    /* the step it happened in: a later step's OOM has gradients and optimizer state live */
    if (o->step > 0) snprintf(step, sizeof step, "step %d", o->step);
    const int named_outside = o->layer < 0 && o->what[0] && (o->phase == MS_PH_FORWARD || o->phase == MS_PH_BACKWARD);
    if (named_outside) {
        /* a program's own code outside its layers (its loss): what says which */
        snprintf(where, sizeof where, "%s %.*s%s%s%s", phase_phrase(o->phase), rep_prefix(o->what, 150), o->what,
                 step[0] ? " (" : "", step, step[0] ? ")" : "");
    } else if (o->layer < 0) {
        /* the optimizer's step is no layer's: what says whose state it was making, where known */
        snprintf(where, sizeof where, "%s%s%s%s", o->phase == MS_PH_OPTIMIZER ? "in the optimizer step" : "outside any layer",
                 step[0] ? " (" : "", step, step[0] ? ")" : "");
    } else {
        if (o->layer_name[0]) snprintf(name, sizeof name, "%.*s", rep_prefix(o->layer_name, (int)sizeof name - 1), o->layer_name);
        else layer_name_of(p, o->layer, name, sizeof name);
        snprintf(where, sizeof where, "%s %s (layer %d%s%s)", phase_phrase(o->phase), name, o->layer,
                 step[0] ? ", " : "", step);
    }
    char what[MS_NAME_MAX + 32];
    if (o->what[0] && !named_outside)
        snprintf(what, sizeof what, "%s '%.*s'", ms_cat_name((ms_cat)o->category), rep_prefix(o->what, 60), o->what);
    else
        snprintf(what, sizeof what, "%s", ms_cat_name((ms_cat)o->category));
    bytes_in(o->requested, cap, req, sizeof req);
    bytes_in(live, cap, lv, sizeof lv);
    bytes_in(cap, cap, capb, sizeof capb);
    if (o->requested == 0) {
        /* no allocator request was seen: CUDA itself refused (a library asking the driver, as
         * cuBLAS creating its handle), or the OOM reached no observer */
        snprintf(line, len,
                 "OUT OF MEMORY %s with %s live of %s capacity: the bytes it asked for are not known (CUDA "
                 "refused memory outside PyTorch's allocator, as cuBLAS creating its handle does, or no "
                 "observer saw the request).", where, lv, capb);
    } else if (live + o->requested > cap) {
        bytes_in(live + o->requested - cap, cap, miss, sizeof miss);
        snprintf(line, len,
                 "OUT OF MEMORY %s: requested %s (%s) with %s live of %s capacity; %s missing.", where, req, what,
                 lv, capb, miss);
    } else {
        /* The count says it fits: the refusal came from somewhere the
         * count does not see. Say so rather than invent a shortfall. */
        char freeb[32];
        bytes_in(cap - live, cap, freeb, sizeof freeb);
        snprintf(line, len,
                 "OUT OF MEMORY %s: requested %s (%s) with %s live of %s capacity. By memsplit's count %s "
                 "were still free: the device refused the request anyway (fragmentation, or memory "
                 "used outside memsplit's count).", where, req, what, lv, capb, freeb);
    }
}

static void oom_headline(FILE *f, const ms_profile *p, int width)
{
    char line[4 * MS_NAME_MAX];
    if (!p->oom.happened) return;
    oom_sentence(p, line, sizeof line);
    rep_wrap(f, width > 0 ? width : 80, 2, line);
}

static void oom_text(FILE *f, const ms_profile *p, int width)
{
    const ms_oom_info *o = &p->oom;
    if (!o->happened) return;
    if (width <= 0) width = 80;
    uint64_t live = 0;
    for (int c = 0; c < MS_CAT_N; c++) live += o->live_by_cat[c];
    uint64_t cap = o->capacity ? o->capacity : p->capacity;
    char line[640];
    oom_headline(f, p, width);
    if (o->requested == 0) {
        snprintf(line, sizeof line, "Exact bytes: requested not known, live %" PRIu64 ", capacity %" PRIu64 ".",
                 live, cap);
        rep_wrap(f, width, 2, line);
    } else {
        oom_bytes_known(f, o, live, cap, width);
    }
    fprintf(f, "\nLive at that moment, by category:\n");
    for (int c = 0; c < MS_CAT_N; c++) {
        char b[32];
        if (!o->live_by_cat[c]) continue;
        fprintf(f, "  %-10s %12s  %5.1f%% of capacity\n", ms_cat_name((ms_cat)c),
                ms_term_bytes(o->live_by_cat[c], b, sizeof b),
                cap ? 100.0 * (double)o->live_by_cat[c] / (double)cap : 0.0);
    }
    char b[32];
    fprintf(f, "  %-10s %12s\n", "total", ms_term_bytes(live, b, sizeof b));
    print_top_layers(f, p, live, width);
}

/* ---- the entry points: each prints a copy of the profile whose strings
 * are in their visible form (vocab/visible.h), so that no module or class
 * name a program chose, and nothing else the database holds, reaches the
 * terminal with a control character in it ---------------------------- */

void ms_term_report_profile(FILE *f, const ms_profile *p, int width)
{
    ms_profile v;
    ms_profile_visible_copy(p, &v);
    profile_text(f, &v, width);
    ms_profile_free(&v);
}

void ms_term_report_oom(FILE *f, const ms_profile *p, int width)
{
    ms_profile v;
    ms_profile_visible_copy(p, &v);
    oom_text(f, &v, width);
    ms_profile_free(&v);
}

void ms_term_report_oom_headline(FILE *f, const ms_profile *p, int width)
{
    ms_profile v;
    ms_profile_visible_copy(p, &v);
    oom_headline(f, &v, width);
    ms_profile_free(&v);
}

void ms_term_report_oom_sentence(const ms_profile *p, char *line, size_t len)
{
    ms_profile v;
    ms_profile_visible_copy(p, &v);
    oom_sentence(&v, line, len);
    ms_profile_free(&v);
}
