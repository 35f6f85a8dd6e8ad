/* term_run.c — a stored run in the terminal: header, then what is recorded
 * under it, then its child runs (see term_report.h). */
#include "reports/term_report.h"
#include "reports/term_internal.h"

#include <stdlib.h>
#include <string.h>

#include "reports/grow.h"
#include "reports/run_facts.h"
#include "vocab/plan_json.h"
#include "vocab/visible.h"
#include <unistd.h>

/* A doctor holds trial, plan and training runs; deeper nesting is not made
 * by memsplit, and the limit guards against a hand-edited cycle. */
#define MAX_DEPTH 4

void ms_term_report_run_line(FILE *f, const ms_run_info *r, int width)
{
    char line[640], parent[32] = "", kind[64], started[96], model[4 * sizeof r->model];
    if (r->parent) snprintf(parent, sizeof parent, " (in run %lld)", (long long)r->parent);
    int col = fprintf(f, "%5lld  %-7s  %-10s  %.19sZ  ", (long long)r->id, ms_visible(r->kind, kind, sizeof kind),
                      ms_run_state(r), ms_visible(r->started, started, sizeof started));
    snprintf(line, sizeof line, "%s%s", r->model[0] ? ms_visible(r->model, model, sizeof model) : "-", parent);
    rep_wrap_from(f, width, col, 7, line);
}

static void print_field(FILE *f, int width, const char *label, const char *value)
{
    fprintf(f, "%-9s ", label);
    rep_wrap_from(f, width, 10, 10, value);
}

/* A field of one line from outside (the command line, the model's name):
 * every control character visible, a newline too. */
static void print_field_line(FILE *f, int width, const char *label, const char *value)
{
    char *v = ms_visible_dup(value, 0);
    print_field(f, width, label, v ? v : "(out of memory)");
    free(v);
}

static void print_header(FILE *f, ms_db *db, const ms_run_info *r, int width)
{
    const char *state = ms_run_state(r);
    char line[512];
    snprintf(line, sizeof line, "== run %lld: %s, %s ==", (long long)r->id, r->kind, state);
    rep_wrap(f, width, 3, line);
    print_field(f, width, "started", r->started);
    if (r->finished[0]) {
        snprintf(line, sizeof line, "%s (after %.1f s)", r->finished, r->finished_unix - r->started_unix);
    } else if (strcmp(state, "running") == 0) {
        snprintf(line, sizeof line, "- (still running: process %d on %s)", r->pid, r->host);
    } else {
        char host[64] = "";
        gethostname(host, sizeof host - 1);
        if (strcmp(host, r->host) == 0)
            snprintf(line, sizeof line, "- (incomplete: its process, pid %d, is gone without recording "
                     "the end: killed or crashed)", r->pid);
        else
            snprintf(line, sizeof line, "- (incomplete: no end recorded; it ran on host '%s', which "
                     "this cannot check)", r->host[0] ? r->host : "?");
    }
    print_field(f, width, "finished", line);
    print_field_line(f, width, "model", r->model[0] ? r->model : "-");
    char devs[1024];
    if (rf_run_devices(db, r, devs, sizeof devs) == 0 || !devs[0]) snprintf(devs, sizeof devs, "- (none recorded)");
    print_field(f, width, "devices", devs);
    if (r->cmdline[0]) print_field_line(f, width, "command", r->cmdline);
    if (r->parent) {
        snprintf(line, sizeof line, "run %lld", (long long)r->parent);
        print_field(f, width, "part of", line);
    }
    if (r->notes[0]) print_field(f, width, "notes", r->notes);
}

/* ---- plans, peaks, steps, recoveries ------------------------------------ */

typedef struct { FILE *f; int width; int n; int brief; } printer;

static int print_plan(const ms_plan_info *pl, void *ctx)
{
    printer *pr = ctx;
    char stages[48] = "";
    ms_plan plan;
    if (ms_plan_read_loose(pl->plan_json, &plan) == 0 && plan.n_stages >= 0)
        snprintf(stages, sizeof stages, ", %d stage%s", plan.n_stages, plan.n_stages == 1 ? "" : "s");
    ms_plan_free(&plan);
    char line[256];
    snprintf(line, sizeof line, "plan %lld: %s%s, predicted %.2f ms per step", (long long)pl->id,
             pl->feasible ? "feasible" : "INFEASIBLE", stages, pl->predicted_step_ms);
    if (pr->n++ == 0 && !pr->brief) fprintf(pr->f, "\n");
    rep_wrap(pr->f, pr->width, 2, line);
    return 0;
}

static int print_peak(const ms_device_peak *d, void *ctx)
{
    printer *pr = ctx;
    char cap[32], pred[32] = "-", meas[32], gap[16] = "-";
    if (pr->n++ == 0)
        fprintf(pr->f, "%s%-10s %11s %11s %11s %8s\n", pr->brief ? "" : "\n", "device", "capacity", "predicted",
                "measured", "gap");
    if (d->capacity) ms_term_bytes(d->capacity, cap, sizeof cap);
    else snprintf(cap, sizeof cap, "unlimited"); /* the CPU backend without --gpu-mem */
    ms_term_bytes(d->measured_peak, meas, sizeof meas);
    if (d->predicted_peak) {
        ms_term_bytes(d->predicted_peak, pred, sizeof pred);
        snprintf(gap, sizeof gap, "%+.2f%%",
                 100.0 * ((double)d->measured_peak - (double)d->predicted_peak) / (double)d->predicted_peak);
    }
    rep_cell(pr->f, d->name, 10);
    fprintf(pr->f, " %11s %11s %11s %8s%s\n", cap, pred, meas, gap,
            d->capacity && d->measured_peak > d->capacity ? "  OVER" : "");
    if (d->has_parts) {
        /* a program's stage alone on its GPU: the two parts, each beside its prediction, since
         * errors of opposite sign can cancel in the total (docs/bridge.md, "Workspaces and
         * libraries a split stage does not have") */
        char a[32], b[32], c[32], e[32];
        ms_term_bytes(d->allocator_peak, a, sizeof a);
        ms_term_bytes(d->predicted_allocator_peak, b, sizeof b);
        ms_term_bytes(d->beyond_allocator, c, sizeof c);
        ms_term_bytes(d->predicted_beyond_allocator, e, sizeof e);
        fprintf(pr->f, "  the allocator's peak %s (predicted %s), beyond it %s (context and libraries; "
                "predicted %s)\n", a, b, c, e);
    }
    return 0;
}

typedef struct {
    int n, skipped, first_step, last_step;
    double first_loss, last_loss, sum_ms, sum_tps;
} step_sum;

static int sum_step(const ms_step_rec *s, void *ctx)
{
    step_sum *a = ctx;
    if (a->n == 0) { a->first_step = s->step; a->first_loss = s->loss; }
    a->last_step = s->step;
    a->last_loss = s->loss;
    a->n++;
    a->skipped += s->skipped != 0;
    a->sum_ms += s->ms;
    a->sum_tps += s->tokens_per_s;
    return 0;
}

static void print_steps(FILE *f, const step_sum *a, int width, int brief)
{
    char line[256], speed[96];
    if (a->n == 0) return;
    /* A program's step holds no count of tokens (every row says 0): its
     * throughput was not measured, its time per step was. */
    if (a->sum_tps > 0)
        snprintf(speed, sizeof speed, "%.0f tokens/s", a->sum_tps / a->n);
    else
        snprintf(speed, sizeof speed, "%.2f ms per step (tokens/s not measured)", a->sum_ms / a->n);
    if (brief) {
        snprintf(line, sizeof line, "%d recorded (%d..%d), loss %.4f -> %.4f, %s", a->n, a->first_step, a->last_step,
                 a->first_loss, a->last_loss, speed);
        print_field(f, width, "steps", line);
        return;
    }
    fprintf(f, "\n");
    snprintf(line, sizeof line, "%d recorded (%d..%d), %d skipped", a->n, a->first_step, a->last_step, a->skipped);
    print_field(f, width, "steps", line);
    snprintf(line, sizeof line, "%.4f at step %d -> %.4f at step %d", a->first_loss, a->first_step, a->last_loss,
             a->last_step);
    print_field(f, width, "loss", line);
    if (a->sum_tps > 0)
        snprintf(line, sizeof line, "%.2f ms per step, %.0f tokens/s (means)", a->sum_ms / a->n, a->sum_tps / a->n);
    else
        snprintf(line, sizeof line, "%.2f ms per step (mean); tokens/s not measured", a->sum_ms / a->n);
    print_field(f, width, "speed", line);
}

static int print_recovery(const ms_recovery_rec *r, void *ctx)
{
    printer *pr = ctx;
    char line[2304], resumed[64] = "", plans[64] = "";
    if (r->resumed_step >= 0) snprintf(resumed, sizeof resumed, " from the checkpoint of step %d", r->resumed_step);
    if (r->old_plan_id || r->new_plan_id)
        snprintf(plans, sizeof plans, "; plan %lld -> plan %lld", (long long)r->old_plan_id, (long long)r->new_plan_id);
    if (!r->new_plan_id && !r->checkpoint[0] && r->resumed_step < 0) /* a failure nothing could recover */
        snprintf(line, sizeof line, "failure at step %d (%s): %s; not resumed", r->step, r->t, r->reason);
    else
        snprintf(line, sizeof line, "recovery at step %d (%s): %s; resumed%s%s%s%s", r->step, r->t, r->reason,
                 resumed, r->checkpoint[0] ? " in " : "", r->checkpoint, plans);
    if (pr->n++ == 0 && !pr->brief) fprintf(pr->f, "\n");
    rep_wrap(pr->f, pr->width, 2, line);
    return 0;
}

/* ---- the run and its children ----------------------------------------- */

/* The brief form's one line for a run. */
static void print_header_brief(FILE *f, const ms_run_info *r, int width)
{
    char line[512], took[48] = "";
    if (r->finished[0]) snprintf(took, sizeof took, " after %.1f s", r->finished_unix - r->started_unix);
    snprintf(line, sizeof line, "%s run %lld: %s, %s%s, %s%s", r->parent ? "--" : "==", (long long)r->id, r->kind,
             ms_run_state(r), took, r->model[0] ? r->model : "-", r->parent ? "" : " ==");
    rep_wrap(f, width, 3, line);
}

static void print_profile_brief(FILE *f, const ms_profile *p, int width)
{
    char b1[32], b2[32], line[256];
    if (p->oom.happened) {
        fprintf(f, "  ");
        ms_term_report_oom_headline(f, p, width - 2);
        return;
    }
    rep_capacity(p->capacity, b2, sizeof b2);
    snprintf(line, sizeof line, "%s: peak %s of %s on %s", p->fits ? "fits" : "did not finish",
             ms_term_bytes(p->peak, b1, sizeof b1), b2, p->device);
    print_field(f, width, "profile", line);
}

/* answered: a doctor run above led with the program's answer; in brief,
 * what it said is not said again. */
static int report_run(FILE *f, ms_db *db, int64_t run, int width, int depth, int brief, int answered)
{
    ms_run_info *r = malloc(sizeof *r);
    if (!r) return -1;
    if (ms_db_get_run(db, run, r) != 0) { free(r); return -1; }
    if (brief) {
        print_header_brief(f, r, width);
    } else {
        if (depth > 0) fprintf(f, "\n");
        print_header(f, db, r, width);
    }
    ms_answer a;
    int lead = ms_answer_load(db, run, &a);   /* a program's doctor run leads with its answer */
    if (lead == 1) {
        if (!brief) fprintf(f, "\n");
        rep_answer(f, &a, width);
        ms_answer_free(&a);
        answered |= brief;
    }

    int ret = lead < 0 ? -1 : 0;
    if (ret == 0 && r->has_profile && !(brief && answered)) {
        ms_profile p;
        char err[256];
        if (ms_db_load_profile(db, run, &p, err, sizeof err) == 0) {
            if (brief) {
                print_profile_brief(f, &p, width);
            } else {
                fprintf(f, "\n");
                ms_term_report_profile(f, &p, width);
            }
            ms_profile_free(&p);
        } else {
            ret = -1;
        }
    }
    printer pr = { f, width, 0, brief };
    if (ret == 0) ret = ms_db_list_plans(db, run, print_plan, &pr);
    pr.n = 0;
    if (ret == 0 && !(brief && answered)) ret = ms_db_list_device_peaks(db, run, print_peak, &pr);
    step_sum steps;
    memset(&steps, 0, sizeof steps);
    if (ret == 0) ret = ms_db_list_steps(db, run, sum_step, &steps);
    if (ret == 0 && !(brief && answered)) print_steps(f, &steps, width, brief);
    pr.n = 0;
    if (ret == 0) ret = ms_db_list_recoveries(db, run, print_recovery, &pr);
    free(r);
    if (ret != 0) return -1;

    int64_t *kids = NULL;
    int n_kids = depth + 1 < MAX_DEPTH ? rf_child_runs(db, run, &kids) : 0;
    if (n_kids < 0) ret = -1;
    for (int i = 0; ret == 0 && i < n_kids; i++) ret = report_run(f, db, kids[i], width, depth + 1, brief, answered);
    free(kids);
    return ret;
}

int ms_term_report_run(FILE *f, ms_db *db, int64_t run, int width)
{
    if (!f || !db) return -1;
    if (width <= 0) width = 80;
    return report_run(f, db, run, width, 0, 0, 0);
}

int ms_term_report_run_brief(FILE *f, ms_db *db, int64_t run, int width)
{
    if (!f || !db) return -1;
    if (width <= 0) width = 80;
    return report_run(f, db, run, width, 0, 1, 0);
}
