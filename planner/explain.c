/* explain.c — the plan's table and its paragraph of reasoning (explain.h). */
#include "planner/explain.h"

#include <stdlib.h>
#include <string.h>

#include "planner/memory_model.h"
#include "vocab/size.h"
#include "vocab/visible.h"

/* The layer's name as the text shows it: a name a program chose, visible
 * (vocab/visible.h: no control character raw), cut to len. */
static const char *layer_name(const ms_profile *prof, int layer, char *buf, size_t len)
{
    if (prof)
        for (int i = 0; i < prof->n_rows; i++)
            if (prof->rows[i].layer == layer && prof->rows[i].name[0]) {
                const char *v = ms_visible(prof->rows[i].name, buf, len);
                if (v != buf) snprintf(buf, len, "%s", v);
                if (strlen(v) >= len) snprintf(buf + len - 4, 4, "...");
                return buf;
            }
    snprintf(buf, len, "layer %d", layer);
    return buf;
}

/* What the plan's devices are: "GPU" when every one is a CUDA device, else
 * "device" (virtual devices on the CPU, a program's cpu stages). */
static const char *unit(const ms_plan *pl)
{
    for (int d = 0; d < pl->n_devices; d++)
        if (strncmp(pl->devices[d].name, "cuda", 4)) return "device";
    return "GPU";
}

static const char *bytes(uint64_t b, char *buf, size_t len) { return ms_fmt_bytes(b, buf, len); }

void ms_plan_print_table(FILE *f, const ms_plan *pl, const ms_profile *prof, int categories)
{
    char b1[32], b2[32];
    fprintf(f, "plan: %s, %s, %d micro-batch%s of %d (global batch %d), %d of %d %s%s,\n      predicted %.1f ms/step\n",
            ms_precision_name((ms_precision)pl->precision), ms_schedule_name(pl->schedule), pl->n_micro,
            pl->n_micro > 1 ? "es" : "", pl->micro_batch, pl->global_batch, pl->n_stages * (pl->replicas > 0 ? pl->replicas : 1), pl->n_devices,
            unit(pl), pl->n_devices > 1 ? "s" : "", pl->step_ms);
    if (pl->replicas > 1)
        fprintf(f, "replicas: %d copies of the %d-stage pipeline (%d %ss, %d ranks)%s; the table shows replica 0\n",
                pl->replicas, pl->n_stages, pl->replicas * pl->n_stages, unit(pl), pl->replicas * pl->n_stages,
                pl->zero ? ", ZeRO-1" : "");
    fprintf(f, "%-5s %-10s %-26s %-4s %-*s", "stage", "device", "layers", "rc", categories ? 28 : 0, "peak / capacity");
    for (int c = 0; categories && c < MS_CAT_N; c++) fprintf(f, " %10s", ms_cat_name((ms_cat)c));
    fputc('\n', f);
    for (int s = 0; s < pl->n_stages; s++) {
        const ms_plan_stage *st = &pl->stages[s];
        const ms_plan_device *d = &pl->devices[st->device];
        char range[640], peak[96], n1[MS_NAME_MAX], n2[MS_NAME_MAX], dev[4 * sizeof d->name];
        if (prof)
            snprintf(range, sizeof range, "%d-%d (%s..%s)", st->first, st->last,
                     layer_name(prof, st->first, n1, sizeof n1), layer_name(prof, st->last, n2, sizeof n2));
        else
            snprintf(range, sizeof range, "%d-%d", st->first, st->last);
        snprintf(peak, sizeof peak, "%s / %s %3.0f%%", bytes(st->peak, b1, sizeof b1),
                 bytes(d->capacity, b2, sizeof b2), d->capacity ? 100.0 * (double)st->peak / (double)d->capacity : 0);
        fprintf(f, "%-5d ", s);
        ms_print_cell(f, ms_visible(d->name, dev, sizeof dev), 10);
        fputc(' ', f);
        ms_print_cell(f, range, 26); /* cut at a character, never inside one */
        fprintf(f, " %-4s %-*s", st->recompute ? "yes" : "no", categories ? 28 : 0, peak);
        for (int c = 0; categories && c < MS_CAT_N; c++) fprintf(f, " %10s", bytes(st->bytes[c], b1, sizeof b1));
        fputc('\n', f);
    }
}

/* The trial, in one sentence. */
static void say_trial(FILE *f, const ms_profile *prof)
{
    char b1[32], b2[32], b3[32], n1[MS_NAME_MAX], what[MS_NAME_MAX], dev[4 * sizeof prof->device];
    const ms_oom_info *o = &prof->oom;
    if (o->happened) {
        const char *who = o->layer_name[0] ? ms_visible(o->layer_name, n1, sizeof n1)
                          : o->layer >= 0  ? layer_name(prof, o->layer, n1, sizeof n1)
                                           : "code outside any layer";
        uint64_t live = 0, top = 0;
        int top_c = 0;
        for (int c = 0; c < MS_CAT_N; c++) {
            live += o->live_by_cat[c];
            if (o->live_by_cat[c] > top) {
                top = o->live_by_cat[c];
                top_c = c;
            }
        }
        uint64_t cap = o->capacity ? o->capacity : prof->capacity;
        fprintf(f, "In the trial, %s overflowed the %s %s in the %s pass: it asked for %s", who,
                bytes(cap, b1, sizeof b1), ms_visible(prof->device, dev, sizeof dev), ms_phase_name((ms_phase)o->phase),
                bytes(o->requested, b2, sizeof b2));
        if (o->what[0]) fprintf(f, " (%s, %s)", ms_visible(o->what, what, sizeof what), ms_cat_name((ms_cat)o->category));
        fprintf(f, " with %s already live", bytes(live, b3, sizeof b3));
        if (top) fprintf(f, ", most of it %s (%s)", ms_cat_name((ms_cat)top_c), bytes(top, b1, sizeof b1));
        fprintf(f, ". ");
    } else if (prof->fits && !prof->capacity) {
        fprintf(f, "The trial fit on %s with no cap: peak %s. ", ms_visible(prof->device, dev, sizeof dev),
                bytes(prof->peak, b1, sizeof b1));
    } else if (prof->fits) {
        fprintf(f, "The trial fit on %s: peak %s of %s. ", ms_visible(prof->device, dev, sizeof dev),
                bytes(prof->peak, b1, sizeof b1), bytes(prof->capacity, b2, sizeof b2));
    } else {
        fprintf(f, "The trial on %s did not finish (no OOM was recorded). ", ms_visible(prof->device, dev, sizeof dev));
    }
}

char *ms_plan_reasoning(const ms_profile *prof, const ms_plan *pl)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    char b1[32], b2[32], n1[MS_NAME_MAX], n2[MS_NAME_MAX], dev[4 * sizeof pl->devices[0].name];
    ms_layer_cost *L = malloc((size_t)prof->n_layers * sizeof *L);
    int have_costs = L && ms_layer_costs(prof, pl->precision, pl->micro_batch, L, NULL, 0) == 0;

    say_trial(f, prof);
    if (pl->note[0]) fputs(pl->note, f);
    fprintf(f, "The plan trains in %s with the %s schedule, %d micro-batch%s of %d sequence%s (global batch %d), on %d of the %d %s%s given.",
            ms_precision_name((ms_precision)pl->precision), ms_schedule_name(pl->schedule), pl->n_micro,
            pl->n_micro > 1 ? "es" : "", pl->micro_batch, pl->micro_batch > 1 ? "s" : "", pl->global_batch,
            pl->n_stages * (pl->replicas > 0 ? pl->replicas : 1), pl->n_devices, unit(pl), pl->n_devices > 1 ? "s" : "");
    for (int s = 0; s < pl->n_stages; s++) {
        const ms_plan_stage *st = &pl->stages[s];
        const ms_plan_device *d = &pl->devices[st->device];
        int top = 0;
        for (int c = 1; c < MS_CAT_N; c++)
            if (st->bytes[c] > st->bytes[top]) top = c;
        fprintf(f, " Stage %d takes layers %d-%d (%s to %s) on %s: predicted peak %s of %s, mostly %s", s, st->first,
                st->last, layer_name(prof, st->first, n1, sizeof n1), layer_name(prof, st->last, n2, sizeof n2),
                ms_visible(d->name, dev, sizeof dev), bytes(st->peak, b1, sizeof b1), bytes(d->capacity, b2, sizeof b2),
                ms_cat_name((ms_cat)top));
        if (st->recompute && have_costs) {
            ms_plan_stage nr;
            ms_stage_predict(L, prof->n_layers, st->first, st->last, s, pl->n_stages, pl->schedule, pl->n_micro, 0,
                             prof->reserve, pl->link_gbps, &nr);
            fprintf(f, "; it recomputes its layers in backward because keeping every activation would need %s",
                    bytes(nr.peak, b1, sizeof b1));
        }
        const ms_oom_info *o = &prof->oom;
        if (o->happened && o->layer >= st->first && o->layer <= st->last)
            fprintf(f, "; %s, which overflowed in the trial, now has %s to spare here",
                    layer_name(prof, o->layer, n1, sizeof n1),
                    bytes(d->capacity > st->peak ? d->capacity - st->peak : 0, b2, sizeof b2));
        fprintf(f, ".");
    }
    if (prof->fingerprint[0] && pl->schedule == MS_SCHED_SEQUENTIAL)   /* a program's: where the peaks come from */
        fprintf(f, prof->record && prof->record->n_layers == prof->n_layers
                       ? " Each stage's peak is the program's own record replayed under this placement: its record "
                         "pass ran every layer as a stage of its own, so the copies this split makes are measured."
                       : " Each stage's peak follows the stage rules: the profile has no record of the program "
                         "(docs/program-record.md), so what crosses the split other than at its boundaries is not "
                         "counted.");
    if (pl->replicas > 1)
        fprintf(f, " The pipeline runs as %d replicas, %d %ss in all, each replica with %d of the micro-batches; each "
                "stage's gradients are all-reduced over its replicas at %g Gbit/s%s, which the optimizer times below include.",
                pl->replicas, pl->replicas * pl->n_stages, unit(pl), pl->n_micro / pl->replicas, pl->bus_gbps,
                pl->zero ? ", and ZeRO-1 shards its AdamW state over them" : "");
    int slow = 0, slow_o = 0;
    for (int s = 1; s < pl->n_stages; s++) {
        if (ms_stage_cycle_ms(&pl->stages[s]) > ms_stage_cycle_ms(&pl->stages[slow])) slow = s;
        if (pl->stages[s].opt_ms > pl->stages[slow_o].opt_ms) slow_o = s;
    }
    const ms_plan_stage *ss = &pl->stages[slow];
    if (pl->schedule == MS_SCHED_SEQUENTIAL) {
        double cyc = 0, opt = 0;
        for (int s = 0; s < pl->n_stages; s++) {
            cyc += ms_stage_cycle_ms(&pl->stages[s]);
            opt += pl->stages[s].opt_ms;
        }
        fprintf(f, " One stage works at a time: a micro-batch takes %.2f ms through all of them (transfers "
                   "included), so a step takes %d x %.2f + %.2f (optimizer) = %.1f ms, as on one device plus the "
                   "transfers.",
                cyc, pl->n_micro, cyc, opt, pl->step_ms);
    } else {
        fprintf(f, " Stage %d is the slowest at %.2f ms per micro-batch (forward %.2f, backward %.2f, transfers %.2f), so a step takes (%d + %d - 1) x %.2f + %.2f (optimizer, stage %d) = %.1f ms.",
                slow, ms_stage_cycle_ms(ss), ss->fwd_ms, ss->bwd_ms, ss->comm_ms, pl->n_micro / (pl->replicas > 0 ? pl->replicas : 1), pl->n_stages,
                ms_stage_cycle_ms(ss), pl->stages[slow_o].opt_ms, slow_o, pl->step_ms);
    }
    int used = pl->n_stages * (pl->replicas > 0 ? pl->replicas : 1);
    if (used < pl->n_devices)
        fprintf(f, " The other %d %s%s stay idle: no plan that uses them is more than %.0f%% faster.", pl->n_devices - used,
                unit(pl), pl->n_devices - used > 1 ? "s" : "", 100 * MS_PLAN_TIE);
    free(L);
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}

int ms_plan_explain(const ms_profile *prof, ms_plan *plan)
{
    char *r = ms_plan_reasoning(prof, plan);
    if (!r) return -1;
    free(plan->reasoning);
    plan->reasoning = r;
    return 0;
}
