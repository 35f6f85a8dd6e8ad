/* html_answer.c — the top of the page for a program's doctor run: its
 * answer (answer.h) before the sections that show how it was reached: what
 * the program is, the module that overflowed, the placement in module
 * paths, each device's measured peak against the prediction, the losses.
 * Tables t-place-RUN and t-answer-RUN carry the exact values. */
#include "reports/html_internal.h"

#include <inttypes.h>
#include <string.h>

#include "reports/run_facts.h"
#include "reports/term_report.h"

static void overflow(FILE *f, const ms_answer *a)
{
    char line[2048], b1[32], b2[32];
    fputs("<dt>overflow</dt>", f);
    if (!a->has_trial) {
        fputs("<dd class=\"muted\">no trial recorded</dd>", f);
        return;
    }
    const ms_profile *p = &a->trial;
    if (p->oom.happened) {
        ms_term_report_oom_sentence(p, line, sizeof line);
        fputs("<dd class=\"bad\" data-k=\"overflow\">", f);
        h_esc(f, line);
        fprintf(f, " <a href=\"#trial-%" PRId64 "\">The diagnosis</a></dd>", a->trial_run);
        return;
    }
    fprintf(f, "<dd data-k=\"overflow\">none: the trial %s: peak %s of %s on ", p->fits ? "fit" : "stopped",
            h_bytes(p->peak, b1, sizeof b1), h_bytes(p->capacity, b2, sizeof b2));
    h_escn(f, p->device, sizeof p->device);
    fputs("</dd>", f);
}

static void placement(FILE *f, const ms_answer *a)
{
    fputs("<dt>placement</dt>", f);
    if (!a->plan_id) {
        fprintf(f, "<dd class=\"muted\">none: %s</dd>", strcmp(a->state, "infeasible") == 0
                                                            ? "no plan fits the devices given (the run is infeasible)"
                                                            : "no plan recorded");
        return;
    }
    fprintf(f, "<dd>plan %" PRId64 "%s, %d stage%s (<a href=\"#plan-%" PRId64 "\">the plan</a>)</dd>", a->plan_id,
            a->plan_feasible ? "" : " (infeasible)", a->n_stages, a->n_stages == 1 ? "" : "s", a->plan_id);
}

static void loss(FILE *f, const ms_answer *a)
{
    char b1[32];
    fputs("<dt>loss</dt>", f);
    if (!a->n_steps) {
        fputs("<dd class=\"muted\">not measured: no training step recorded</dd>", f);
        return;
    }
    fprintf(f, "<dd><span data-k=\"loss-first\" data-v=\"%.17g\">%.4f</span> at step %d &rarr; <span "
               "data-k=\"loss-last\" data-v=\"%.17g\">%.4f</span> at step %d (%d step%s, %s each on average; %d OOM "
               "recover%s)</dd>",
            a->first_loss, a->first_loss, a->first_step, a->last_loss, a->last_loss, a->last_step, a->n_steps,
            a->n_steps == 1 ? "" : "s", h_ms(a->mean_ms, b1, sizeof b1), a->n_recoveries,
            a->n_recoveries == 1 ? "y" : "ies");
}

static void stages_table(FILE *f, const ms_answer *a)
{
    if (!a->n_stages) return;
    fprintf(f, "<table class=\"t\" id=\"t-place-%" PRId64 "\">\n<caption>Where the program&rsquo;s modules go "
               "(plan %" PRId64 ")</caption>\n<thead><tr><th>stage</th><th>modules</th><th>layers</th><th>device</th>"
               "<th>capacity</th></tr></thead>\n<tbody>\n", a->run, a->plan_id);
    for (int s = 0; s < a->n_stages; s++) {
        const ms_answer_stage *st = &a->stages[s];
        char dev[48], layers[32];
        snprintf(dev, sizeof dev, "%d: %s", st->device, st->device_name);
        snprintf(layers, sizeof layers, "%d-%d", st->first, st->last);
        fprintf(f, "<tr data-stage=\"%d\">", s);
        h_td_int(f, "stage", s);
        fputs("<td data-k=\"modules\" class=\"wrap\">", f);
        h_esc(f, st->modules);
        fputs("</td>", f);
        h_td_text(f, "layers", layers);
        h_td_text(f, "device", dev);
        h_td_bytes(f, "capacity", st->capacity);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void peaks_table(FILE *f, const ms_answer *a)
{
    if (!a->n_dev) {
        fputs("<p class=\"note\">Peaks per device: not measured (no training recorded).</p>\n", f);
        return;
    }
    fprintf(f, "<table class=\"t\" id=\"t-answer-%" PRId64 "\">\n<caption>Each device&rsquo;s peak in training "
               "(run %" PRId64 "), measured against predicted</caption>\n<thead><tr><th>device</th><th>capacity</th>"
               "<th>predicted</th><th>measured</th><th>measured &minus; predicted</th></tr></thead>\n<tbody>\n",
            a->run, a->train_run);
    for (int i = 0; i < a->n_dev; i++) {
        const ms_device_peak *d = &a->dev[i];
        char dev[48];
        snprintf(dev, sizeof dev, "%d: %.*s", d->device, (int)sizeof d->name, d->name);
        fprintf(f, "<tr data-device=\"%d\">", d->device);
        h_td_text(f, "device", dev);
        h_td_bytes(f, "capacity", d->capacity);
        if (d->predicted_peak) h_td_bytes(f, "predicted", d->predicted_peak);
        else fputs("<td class=\"muted\">not recorded</td>", f);
        h_td_bytes(f, "measured", d->measured_peak);
        if (d->predicted_peak)
            h_td_num(f, "gap", 100.0 * ((double)d->measured_peak - (double)d->predicted_peak) / (double)d->predicted_peak,
                     "%+.2f%%");
        else
            fputs("<td></td>", f);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

void h_answer(FILE *f, const ms_answer *a)
{
    fprintf(f, "<section id=\"answer\" class=\"answer\">\n<h2>The answer</h2>\n<dl class=\"facts\" id=\"answer-%" PRId64
               "\">", a->run);
    if (a->has_trial) {
        char about[1536];
        rf_model_text(&a->trial, about, sizeof about);
        fputs("<dt>program</dt><dd>", f);
        h_escn(f, a->trial.model, sizeof a->trial.model);
        fputs(": ", f);
        h_esc(f, about);
        fputs("</dd>", f);
    }
    overflow(f, a);
    placement(f, a);
    loss(f, a);
    fputs("</dl>\n", f);
    stages_table(f, a);
    peaks_table(f, a);
    fputs("</section>\n", f);
}
