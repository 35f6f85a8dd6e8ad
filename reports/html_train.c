/* html_train.c — section 3 of the HTML report: chart (d), each training
 * run's loss and throughput over its steps with the OOM recoveries marked,
 * and the steps and recoveries in tables (see html_internal.h).
 *
 * Long runs are thinned for drawing (each slice of steps keeps its lowest
 * and highest value, so spikes stay visible) and for the table (every k-th
 * step plus the first, the last and the steps around each recovery); the
 * text says when that happened. */
#include "reports/html_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/grow.h"

#define MAX_DRAWN 1200      /* points per line before thinning */
#define MAX_TABLE 200       /* table rows before thinning */

typedef struct {
    int step, skipped;
    double loss, ms, tps, lr, scale;
} step_row;

typedef struct { step_row *s; int n, cap, oom; } step_list;
typedef struct { ms_recovery_rec *r; int n, cap, oom; } rec_list;

static int add_step(const ms_step_rec *s, void *ctx)
{
    step_list *l = ctx;
    if (ms_grow((void **)&l->s, &l->cap, l->n, sizeof *l->s, 64)) { l->oom = 1; return 1; }
    l->s[l->n++] = (step_row){ s->step, s->skipped, s->loss, s->ms, s->tokens_per_s, s->lr, s->loss_scale };
    return 0;
}

static int add_rec(const ms_recovery_rec *r, void *ctx)
{
    rec_list *l = ctx;
    if (ms_grow((void **)&l->r, &l->cap, l->n, sizeof *l->r, 8)) { l->oom = 1; return 1; }
    l->r[l->n++] = *r;
    return 0;
}

static double field(const step_row *s, int which) { return which == 0 ? s->loss : which == 1 ? s->tps : s->ms; }

/* One line chart over the steps: loss (which 0), tokens/s (1) or the time
 * per step in ms (2: a program's, whose steps give no count of tokens). */
static void line_chart(FILE *f, int64_t run, const step_list *sl, const rec_list *rl, int which)
{
    static const char *const whats[] = { "loss", "tokens per second", "ms per step" };
    static const char *const ids[] = { "loss", "tps", "ms" };
    static const char *const titles[] = { "Loss", "Tokens per second", "Time per step" };
    const char *what = whats[which];
    double lo = INFINITY, hi = -INFINITY;
    int n_bad = 0;
    for (int i = 0; i < sl->n; i++) {
        double v = field(&sl->s[i], which);
        if (!isfinite(v)) { n_bad++; continue; }
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    if (lo > hi) { lo = 0; hi = 1; }
    char id[64], title[96], desc[160];
    snprintf(id, sizeof id, "fig-d-%" PRId64 "-%s", run, ids[which]);
    h_plot pl = { .width = 960, .height = 250, .left = 84, .right = 16, .top = 26, .bottom = 46,
                  .xmin = sl->s[0].step, .xmax = sl->s[sl->n - 1].step, .ymin = lo, .ymax = hi };
    /* Recoveries belong on the axis even where no step was recorded (a
     * killed run's last failure). */
    for (int k = 0; k < rl->n; k++) {
        if (rl->r[k].step < pl.xmin) pl.xmin = rl->r[k].step;
        if (rl->r[k].step > pl.xmax) pl.xmax = rl->r[k].step;
    }
    if (pl.xmax <= pl.xmin) { pl.xmin -= 0.5; pl.xmax += 0.5; }
    snprintf(title, sizeof title, "%s over steps, run %" PRId64, titles[which], run);
    snprintf(desc, sizeof desc, "%d steps from %d to %d; %d recoveries marked.", sl->n, sl->s[0].step,
             sl->s[sl->n - 1].step, rl->n);
    h_svg_begin(f, &pl, id, title, desc);
    h_axis_y_num(f, &pl, what, which != 0);

    for (int k = 0; k < rl->n; k++) {
        double x = h_px(&pl, rl->r[k].step);
        fprintf(f, "<line class=\"oom-line\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"><title>", x, pl.top, x,
                pl.height - pl.bottom);
        h_escn(f, rl->r[k].reason, sizeof rl->r[k].reason);
        fputs("</title></line>", f);
        int right = x > pl.width * 0.7;
        fprintf(f, "<text class=\"oom-l\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", right ? x - 4 : x + 4,
                pl.top + 12 + 14 * (k % 3), right ? "end" : "start");
        if (rl->r[k].resumed_step >= 0)
            fprintf(f, "OOM at step %d, resumed from %d", rl->r[k].step, rl->r[k].resumed_step);
        else
            fprintf(f, "OOM at step %d", rl->r[k].step);
        fputs("</text>\n", f);
    }

    /* The line, broken where a value is not finite; thinned when long. */
    int per = sl->n > MAX_DRAWN ? (sl->n + MAX_DRAWN / 2 - 1) / (MAX_DRAWN / 2) : 1;
    fputs("<path class=\"line\" d=\"", f);
    int pen_down = 0;
    for (int i = 0; i < sl->n; i += per) {
        int end = i + per < sl->n ? i + per : sl->n;
        int imin = -1, imax = -1;
        for (int k = i; k < end; k++) {
            double v = field(&sl->s[k], which);
            if (!isfinite(v)) continue;
            if (imin < 0 || v < field(&sl->s[imin], which)) imin = k;
            if (imax < 0 || v > field(&sl->s[imax], which)) imax = k;
        }
        if (imin < 0) { pen_down = 0; continue; }
        int a = imin < imax ? imin : imax, b = imin < imax ? imax : imin;
        fprintf(f, "%c%.1f %.1f", pen_down ? 'L' : 'M', h_px(&pl, sl->s[a].step), h_py(&pl, field(&sl->s[a], which)));
        if (b != a) fprintf(f, "L%.1f %.1f", h_px(&pl, sl->s[b].step), h_py(&pl, field(&sl->s[b], which)));
        pen_down = 1;
    }
    fputs("\"/>\n", f);
    /* Dots when few enough to tell apart; skipped updates always. */
    int dots = sl->n <= 120;
    int n_skip_drawn = 0;
    for (int i = 0; i < sl->n; i++) {
        double v = field(&sl->s[i], which);
        if (!isfinite(v)) continue;
        if (sl->s[i].skipped && n_skip_drawn < 400) {
            n_skip_drawn++;
            fprintf(f, "<circle class=\"skip-m\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\"><title>step %d: update skipped</title>"
                       "</circle>", h_px(&pl, sl->s[i].step), h_py(&pl, v), sl->s[i].step);
        } else if (dots) {
            fprintf(f, "<circle class=\"dot\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\"><title>step %d: %.6g</title></circle>",
                    h_px(&pl, sl->s[i].step), h_py(&pl, v), sl->s[i].step, v);
        }
    }
    fputc('\n', f);
    h_axis_x_num(f, &pl, "training step", 1.0, "%d");
    h_svg_end(f);
    if (n_bad) fprintf(f, "<p class=\"note\">%d steps with a %s that is not a finite number are left out of the line.</p>\n", n_bad, what);
}

/* Whether step row i goes in a thinned table. */
static int keep_row(const step_list *sl, const rec_list *rl, int i, int every)
{
    if (every <= 1 || i == 0 || i == sl->n - 1 || i % every == 0 || sl->s[i].skipped) return 1;
    for (int k = 0; k < rl->n; k++)
        if (abs(sl->s[i].step - rl->r[k].step) <= 1 || sl->s[i].step == rl->r[k].resumed_step) return 1;
    return 0;
}

static void one_run(FILE *f, const ms_run_info *r, const step_list *sl, const rec_list *rl)
{
    char b1[32];
    fprintf(f, "<article class=\"run\" id=\"train-%" PRId64 "\">\n<h3>Run %" PRId64 " (", r->id, r->id);
    h_esc(f, r->kind);
    fputs(", ", f);
    h_esc(f, ms_run_state(r));
    fputs(")", f);
    if (r->model[0]) { fputs(": ", f); h_escn(f, r->model, sizeof r->model); }
    fputs("</h3>\n", f);
    if (sl->n == 0) {
        fprintf(f, "<p class=\"note\">No steps recorded; %d recover%s below.</p>\n", rl->n, rl->n == 1 ? "y" : "ies");
    } else {
        int skipped = 0;
        double sum_ms = 0, sum_tps = 0;
        /* A program's steps give no count of tokens and no learning rate:
         * every row holds 0 there, which says "not measured", not zero. */
        int tps = 0, lr = 0;
        for (int i = 0; i < sl->n; i++) {
            skipped += sl->s[i].skipped != 0;
            sum_ms += sl->s[i].ms;
            sum_tps += sl->s[i].tps;
            tps |= sl->s[i].tps > 0;
            lr |= sl->s[i].lr != 0;
        }
        char speed[64];
        if (tps) snprintf(speed, sizeof speed, "%.0f tokens/s", sum_tps / sl->n);
        else snprintf(speed, sizeof speed, "tokens/s not measured");
        fprintf(f, "<p class=\"facts\">%d steps recorded (%d to %d), %d skipped; loss %.4f at step %d, %.4f at step %d; "
                   "%s per step on average, %s; %d OOM recover%s.</p>\n",
                sl->n, sl->s[0].step, sl->s[sl->n - 1].step, skipped, sl->s[0].loss, sl->s[0].step, sl->s[sl->n - 1].loss,
                sl->s[sl->n - 1].step, h_ms(sum_ms / sl->n, b1, sizeof b1), speed, rl->n, rl->n == 1 ? "y" : "ies");
        fprintf(f, "<figure id=\"fig-d-%" PRId64 "\">\n<figcaption><b>(d) Training.</b> Loss (top) and %s (bottom) at "
                   "each step.%s Red lines: out-of-memory recoveries (the step that failed; training resumed from the "
                   "checkpoint named in the table).%s</figcaption>\n",
                r->id, tps ? "tokens per second" : "the time per step",
                tps ? "" : " Tokens per second were not measured: the program&rsquo;s steps give no count of tokens.",
                skipped ? " Hollow circles: steps whose update was skipped (fp16 overflow)." : "");
        fputs("<ul class=\"legend\"><li><i class=\"sw linesw\"></i>value per step</li>", f);
        if (rl->n) fputs("<li><i class=\"sw oomsw\"></i>OOM recovery</li>", f);
        if (skipped) fputs("<li><i class=\"sw skipsw\"></i>skipped update</li>", f);
        fputs("</ul>\n", f);
        line_chart(f, r->id, sl, rl, 0);
        line_chart(f, r->id, sl, rl, tps ? 1 : 2);
        fputs("</figure>\n", f);

        int every = sl->n > MAX_TABLE ? (sl->n + MAX_TABLE - 1) / MAX_TABLE : 1;
        int scaled = 0;
        for (int i = 0; i < sl->n; i++) scaled |= sl->s[i].scale != 0;
        fprintf(f, "<table class=\"t\" id=\"t-d-%" PRId64 "\">\n<caption>The steps of (d)%s</caption>\n<thead><tr>"
                   "<th>step</th><th>loss</th><th>time</th><th>tokens/s</th><th>learning rate</th>%s<th>update</th>"
                   "</tr></thead>\n<tbody>\n",
                r->id, every > 1 ? ": every step is not shown (see the note below)" : "", scaled ? "<th>loss scale</th>" : "");
        int shown = 0;
        for (int i = 0; i < sl->n; i++) {
            if (!keep_row(sl, rl, i, every)) continue;
            shown++;
            const step_row *s = &sl->s[i];
            fprintf(f, "<tr data-step=\"%d\"%s>", s->step, s->skipped ? " class=\"skip\"" : "");
            h_td_int(f, "step", s->step);
            h_td_num(f, "loss", s->loss, "%.6f");
            h_td_num(f, "ms", s->ms, "%.2f ms");
            if (tps) h_td_num(f, "tokens_per_s", s->tps, "%.0f");
            else fputs("<td class=\"muted\">not measured</td>", f);
            if (lr) h_td_num(f, "lr", s->lr, "%.3g");
            else fputs("<td class=\"muted\">not measured</td>", f);
            if (scaled) h_td_num(f, "loss_scale", s->scale, "%.0f");
            h_td_text(f, "update", s->skipped ? "skipped" : "applied");
            fputs("</tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
        if (every > 1)
            fprintf(f, "<p class=\"note\">%d of %d steps listed: every %d-th, the first and the last, skipped ones and "
                       "those around each recovery. <code>memsplit report --json</code> gives all.</p>\n",
                    shown, sl->n, every);
    }
    if (rl->n) {
        fprintf(f, "<table class=\"t\" id=\"t-rec-%" PRId64 "\">\n<caption>Out-of-memory recoveries</caption>\n<thead><tr>"
                   "<th>failed at step</th><th>resumed from step</th><th>reason</th><th>plan</th><th>checkpoint</th>"
                   "<th>time</th></tr></thead>\n<tbody>\n", r->id);
        for (int k = 0; k < rl->n; k++) {
            const ms_recovery_rec *x = &rl->r[k];
            char plans[64] = "";
            fprintf(f, "<tr data-recovery=\"%" PRId64 "\">", x->id);
            h_td_int(f, "step", x->step);
            if (x->resumed_step >= 0) h_td_int(f, "resumed_step", x->resumed_step);
            else fputs("<td class=\"muted\">unknown</td>", f);
            fputs("<td data-k=\"reason\" class=\"wrap\">", f);
            h_escn(f, x->reason, sizeof x->reason);
            fputs("</td>", f);
            if (x->old_plan_id || x->new_plan_id)
                snprintf(plans, sizeof plans, "%" PRId64 " \xe2\x86\x92 %" PRId64, x->old_plan_id, x->new_plan_id);
            h_td_text(f, "plans", plans);
            fputs("<td data-k=\"checkpoint\" class=\"wrap\"><code>", f);
            h_escn(f, x->checkpoint, sizeof x->checkpoint);
            fputs("</code></td><td data-k=\"t\">", f);
            h_escn(f, x->t, sizeof x->t);
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    fputs("</article>\n", f);
}

int h_section_train(FILE *f, ms_db *db, const ms_run_info *runs, int n, char *err, size_t errlen)
{
    fputs("<section id=\"training\">\n<h2>3. Training</h2>\n", f);
    int shown = 0;
    for (int i = 0; i < n; i++) {
        step_list sl = { 0 };
        rec_list rl = { 0 };
        if (ms_db_list_steps(db, runs[i].id, add_step, &sl) != 0 || ms_db_list_recoveries(db, runs[i].id, add_rec, &rl) != 0 ||
            sl.oom || rl.oom) {
            snprintf(err, errlen, "%s", sl.oom || rl.oom ? "out of memory" : ms_db_errmsg(db));
            free(sl.s);
            free(rl.r);
            return -1;
        }
        if (sl.n || rl.n) {
            one_run(f, &runs[i], &sl, &rl);
            shown++;
        }
        free(sl.s);
        free(rl.r);
    }
    if (!shown)
        fprintf(f, "<p class=\"empty\">No training recorded for run %" PRId64 " or the runs it contains.</p>\n",
                n ? runs[0].id : 0);
    fputs("</section>\n", f);
    return 0;
}
