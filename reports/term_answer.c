/* term_answer.c — the lead of a program's doctor run in the terminal: what
 * the program is, the module that overflowed, the placement in module
 * paths, measured against predicted per device, the losses (see
 * answer.h; term_run.c prints it under the run's header). */
#include "reports/term_internal.h"

#include <stdlib.h>
#include <string.h>

#include "reports/run_facts.h"
#include "reports/term_report.h"
#include "vocab/visible.h"

static void field(FILE *f, int width, const char *label, const char *value)
{
    fprintf(f, "%-9s ", label);
    rep_wrap_from(f, width, 10, 10, value);
}

static void say_trial(FILE *f, const ms_answer *a, int width)
{
    char line[2048], b1[32], b2[32];
    if (!a->has_trial) {
        field(f, width, "trial", "not recorded");
        return;
    }
    const ms_profile *p = &a->trial;
    char about[1536];
    rf_model_text(p, about, sizeof about);
    snprintf(line, sizeof line, "%.*s: %s", rep_prefix(p->model, 128), p->model, about);
    field(f, width, "program", line);
    if (p->oom.happened) {
        ms_term_report_oom_sentence(p, line, sizeof line);
    } else {
        rep_capacity(p->capacity, b2, sizeof b2);
        snprintf(line, sizeof line, "none: the trial %s: peak %s of %s on %s", p->fits ? "fit" : "stopped",
                 ms_term_bytes(p->peak, b1, sizeof b1), b2, p->device);
    }
    field(f, width, "overflow", line);
}

static void say_placement(FILE *f, const ms_answer *a, int width)
{
    char line[8192], b[32];
    size_t used = 0;
    if (!a->plan_id) {
        field(f, width, "placement", strcmp(a->state, "infeasible") == 0
                                         ? "none: no plan fits the devices given (the doctor run is infeasible)"
                                         : "none: no plan recorded");
        return;
    }
    line[0] = '\0';
    for (int s = 0; s < a->n_stages && used + 1 < sizeof line; s++) {
        const ms_answer_stage *st = &a->stages[s];
        if (st->capacity) ms_term_bytes(st->capacity, b, sizeof b);
        else snprintf(b, sizeof b, "no capacity set");
        char *mods = ms_visible_dup(st->modules, 0), dev[4 * sizeof st->device_name];
        int n = snprintf(line + used, sizeof line - used, "%s%s -> device %d, %s (%s)", s ? "; " : "",
                         mods ? mods : "?", st->device, ms_visible(st->device_name, dev, sizeof dev), b);
        free(mods);
        if (n > 0) used += (size_t)n < sizeof line - used ? (size_t)n : sizeof line - used - 1;
    }
    if (used + 1 < sizeof line)
        snprintf(line + used, sizeof line - used, "%s(plan %lld%s)", a->n_stages ? " " : "", (long long)a->plan_id,
                 a->plan_feasible ? "" : ", infeasible");
    field(f, width, "placement", line);
}

/* Each device's measured peak against the plan's prediction, as a table
 * under the label: devices of one kind tell apart by their index. */
static void say_devices(FILE *f, const ms_answer *a, int width)
{
    char cap[32], meas[32], pred[32], gap[16];
    if (!a->n_dev) {
        field(f, width, "peaks", "not measured: no training recorded");
        return;
    }
    fprintf(f, "%-9s %-12s %11s %11s %11s %8s\n", "peaks", "device", "capacity", "predicted", "measured", "gap");
    for (int i = 0; i < a->n_dev; i++) {
        const ms_device_peak *d = &a->dev[i];
        char name[48];
        snprintf(name, sizeof name, "%d %.*s", d->device, rep_prefix(d->name, (int)sizeof d->name), d->name);
        if (d->capacity) ms_term_bytes(d->capacity, cap, sizeof cap);
        else snprintf(cap, sizeof cap, "none set");
        snprintf(pred, sizeof pred, "not recorded");
        snprintf(gap, sizeof gap, "-");
        if (d->predicted_peak) {
            ms_term_bytes(d->predicted_peak, pred, sizeof pred);
            snprintf(gap, sizeof gap, "%+.2f%%",
                     100.0 * ((double)d->measured_peak - (double)d->predicted_peak) / (double)d->predicted_peak);
        }
        fprintf(f, "%-9s ", "");
        rep_cell(f, name, 12);
        fprintf(f, " %11s %11s %11s %8s\n", cap, pred, ms_term_bytes(d->measured_peak, meas, sizeof meas), gap);
    }
    (void)width;
}

static void say_loss(FILE *f, const ms_answer *a, int width)
{
    char line[256];
    if (!a->n_steps) {
        field(f, width, "loss", "not measured: no training step recorded");
        return;
    }
    snprintf(line, sizeof line, "%.4f at step %d -> %.4f at step %d (%d step%s, %.2f ms each on average; %d OOM "
             "recover%s)", a->first_loss, a->first_step, a->last_loss, a->last_step, a->n_steps,
             a->n_steps == 1 ? "" : "s", a->mean_ms, a->n_recoveries, a->n_recoveries == 1 ? "y" : "ies");
    field(f, width, "loss", line);
}

void rep_answer(FILE *f, const ms_answer *a, int width)
{
    say_trial(f, a, width);
    say_placement(f, a, width);
    say_devices(f, a, width);
    say_loss(f, a, width);
}
