/* program_train.c — a program rerun with a plan applied by the bridge
 * (program.h): the bridge's config of the plan, the run, each device's
 * peak against its prediction, the OOM that stopped it, the records; and
 * `memsplit train --plan FILE -- PROGRAM` around it. */
#include "run/program.h"
#include "run/exit.h"
#include "run/records.h"
#include "run/stdin_keep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/host/collect.h"
#include "reports/db.h"
#include "trainer/device.h"
#include "vocab/errf.h"
#include "vocab/plan_json.h"
#include "vocab/profile_json.h"
#include "vocab/size.h"

/* The bridge's plan: what the applier needs, from the plan file. A
 * stage's capacity there is what its tensors may hold (the ledger holds a
 * stage that shares its device to it): the device's, less the reserve
 * (CUDA context, workspaces) that a GPU of that size also carries and the
 * ledger does not count; device_capacity is the whole device's, which the
 * ballast leaves to a GPU that a stage has alone (context included). */
json_t *ms_program_plan_config(const ms_plan *pl)
{
    json_t *stages = json_array(), *names = json_array();
    for (int s = 0; s < pl->n_stages; s++) {
        const ms_plan_stage *st = &pl->stages[s];
        uint64_t cap = pl->devices[st->device].capacity, reserve = st->bytes[MS_CAT_RESERVE];
        json_array_append_new(stages, json_pack("{s:s, s:i, s:i, s:I, s:I}", "device", pl->devices[st->device].name,
                                                "first", st->first, "last", st->last, "capacity",
                                                (json_int_t)(cap > reserve ? cap - reserve : cap), "device_capacity",
                                                (json_int_t)cap));
    }
    for (int l = 0; l < pl->n_layers; l++) json_array_append_new(names, json_string(pl->layer_names[l]));
    json_t *cfg = json_pack("{s:s, s:o, s:o}", "fingerprint", pl->fingerprint, "stages", stages, "layer_names", names);
    /* the modules whose outputs stay where they were made (the plan's peaks count no copy
       back for them); none: no key, as before */
    if (cfg && pl->n_handed_on > 0 &&
        json_object_set_new(cfg, "handed_on", ms_handed_on_to_json(pl->handed_on, pl->n_handed_on))) {
        json_decref(cfg);
        return NULL;
    }
    return cfg;
}

/* Physical GPUs the plan names (cuda:N, each counted once). */
static int plan_gpus(const ms_plan *pl, int *max_ordinal)
{
    int seen[MS_MAX_DEVICES] = { 0 }, n = 0;
    *max_ordinal = -1;
    for (int s = 0; s < pl->n_stages; s++) {
        const char *d = pl->devices[pl->stages[s].device].name;
        if (strncmp(d, "cuda:", 5)) continue;
        int o = atoi(d + 5);
        if (o >= 0 && o < MS_MAX_DEVICES && !seen[o]) {
            seen[o] = 1;
            n++;
            if (o > *max_ordinal) *max_ordinal = o;
        }
    }
    return n;
}

/* 1 when two stages share a physical device (virtual devices: cpu,cpu or
 * cuda:0,cuda:0, or cuda:0/v0,cuda:0/v1): each is held to its own capacity
 * by the ledger, which follows every tensor (the per-tensor trace, a test
 * mode). Stages each on a device of their own run without it: placement,
 * crossings and device checks happen at module boundaries, and each GPU's
 * peak comes from its caching allocator's counters (issue 40). */
static int plan_shares_a_device(const ms_plan *pl)
{
    for (int s = 0; s < pl->n_stages; s++)
        for (int o = 0; o < s; o++) {
            const char *a = pl->devices[pl->stages[s].device].name, *b = pl->devices[pl->stages[o].device].name;
            size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
            if (la == lb && !strncmp(a, b, la)) return 1;
        }
    return 0;
}

int ms_program_check_plan(const ms_plan *pl, char *err, size_t errlen)
{
    if (!pl->fingerprint[0] || !pl->layer_names)
        return ms_errf(err, errlen, "this plan is for memsplit's built-in model (it names no program): run it "
                                    "with memsplit train --plan FILE, without -- PROGRAM");
    if (pl->schedule != MS_SCHED_SEQUENTIAL)
        return ms_errf(err, errlen, "a program runs its stages one at a time: the plan's schedule must be sequential, "
                                    "not %s", ms_schedule_name(pl->schedule));
    int top, n = plan_gpus(pl, &top), have = ms_cuda_gpu_count();
    if (n > 0 && top >= have)
        return ms_errf(err, errlen, "the plan puts stages on %d GPU%s (up to cuda:%d) and this machine has %d; to "
                       "test on one GPU, plan with every stage on it explicitly (--devices cuda:0,cuda:0)",
                       n, n > 1 ? "s" : "", top, have);
    return 0;
}

/* Progress of the rerun: "train: step N  loss L" for each step done, once
 * its loss is there (on a GPU it comes with the next step: the bridge
 * never waits for the GPU to read it). */
static void on_step(const msb_trace *t, void *user)
{
    int *shown = user;
    for (; *shown < t->n_steps && !t->steps[*shown].late; (*shown)++) {
        const msb_step *s = &t->steps[*shown];
        if (s->has_loss) fprintf(stderr, "train: step %d  loss %.4f\n", s->n, s->loss);
        else fprintf(stderr, "train: step %d\n", s->n);
    }
}

/* The bridge's config: steps, the pass, and the plan (compact JSON, malloc'd; NULL: out of memory). */
static char *config_text(const ms_plan *pl, long steps)
{
    json_t *cfg = json_pack("{s:I, s:s, s:s, s:o}", "steps", (json_int_t)steps, "pass", "train", "trace",
                            plan_shares_a_device(pl) ? "tensors" : "off",
                            "plan", ms_program_plan_config(pl));
    char *cfgs = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    return cfgs;
}

/* The "train" run, with the plan, before the program starts: its id, or -1 with err. */
static int64_t begin_record(const ms_program_train_args *a, const char *cfgs, char *err, size_t errlen)
{
    const ms_plan *pl = a->plan;
    json_t *dj = json_array();
    for (int i = 0; i < pl->n_devices; i++)
        json_array_append_new(dj, json_pack("{s:s, s:I}", "name", pl->devices[i].name, "capacity_bytes",
                                            (json_int_t)pl->devices[i].capacity));
    char *devs = json_dumps(dj, JSON_COMPACT), *plan_text = ms_plan_to_string(pl);
    json_decref(dj);
    char cmd[2048] = "memsplit train --plan -- ";
    for (int i = 0; a->prog[i]; i++) {
        strncat(cmd, a->prog[i], sizeof cmd - strlen(cmd) - 2);
        strncat(cmd, " ", sizeof cmd - strlen(cmd) - 1);
    }
    char *cmd_utf8 = msb_utf8_dup(cmd);   /* argv may hold any bytes */
    int have = devs && cmd_utf8;
    int64_t run = have ? ms_db_run_begin(a->db, "train", cmd_utf8, cfgs, devs, pl->program, a->parent) : -1;
    free(cmd_utf8);
    if (run < 0) {
        ms_errf(err, errlen, "recording the run: %s", have ? ms_db_errmsg(a->db) : "out of memory");
    } else if (!plan_text || ms_db_add_plan(a->db, run, plan_text, pl->step_ms, 1) < 0) {
        /* the run was begun: it ends failed, not running, and says why */
        ms_errf(err, errlen, "recording the run's plan: %s",
                plan_text ? ms_db_errmsg(a->db) : "the plan cannot be written as JSON (out of memory)");
        ms_db_run_finish(a->db, run, "failed");
        run = -1;
    }
    free(devs);
    free(plan_text);
    return run;
}

/* Per device: the highest the run reached, beside the prediction. */
void ms_program_measure(const ms_plan *pl, const msb_trace *t, ms_program_run *out)
{
    out->n_dev = pl->n_stages;
    const msb_step *last = t->n_steps ? &t->steps[t->n_steps - 1] : NULL;
    for (int s = 0; s < pl->n_stages; s++) {
        const ms_plan_stage *st = &pl->stages[s];
        ms_program_device *d = &out->dev[s];
        snprintf(d->name, sizeof d->name, "%s", pl->devices[st->device].name);
        d->capacity = pl->devices[st->device].capacity;
        d->predicted = st->peak;
        uint64_t tensors = last && s < last->n_stage_peaks ? last->stage_peaks[s] : 0;
        uint64_t beyond = st->bytes[MS_CAT_RESERVE];   /* the ledger counts tensors: the reserve is on top */
        /* a stage alone on its GPU: the caching allocator's own peak there (library buffers in it
         * included), and what the device holds beyond the allocator, as this run measured it */
        int alone = 1;
        for (int o = 0; o < pl->n_stages; o++)
            if (o != s && !strcmp(pl->devices[pl->stages[o].device].name, d->name)) alone = 0;
        d->own_gpu = 0;
        for (int k = 0; alone && last && k < last->n_device_peaks; k++)
            if (!strcmp(last->device_names[k], d->name)) {
                tensors = last->device_peaks[k];
                if (last->device_context[k] >= 0) beyond = (uint64_t)last->device_context[k];
                d->own_gpu = last->device_context[k] >= 0;
            }
        d->measured = tensors ? tensors + beyond : 0;
        d->allocator_peak = d->own_gpu ? tensors : 0;
        d->beyond = d->own_gpu ? beyond : 0;
        uint64_t res = st->bytes[MS_CAT_RESERVE], held = pl->reserve_allocator < res ? pl->reserve_allocator : res;
        d->predicted_beyond = d->own_gpu ? res - held : 0;
        d->predicted_allocator_peak = d->own_gpu && d->predicted > res - held ? d->predicted - (res - held) : 0;
        memcpy(d->predicted_by_cat, st->bytes, sizeof d->predicted_by_cat);
        /* on its own GPU the ledger follows the parameters' tensors only: its breakdown is no
         * breakdown of the device's peak */
        d->has_cats = d->measured && !d->own_gpu && last && last->stage_peak_cats && s < last->n_stage_peaks;
        for (int c = 0; d->has_cats && c < MS_CAT_N; c++) d->measured_by_cat[c] = last->stage_peak_cats[s][c];
        if (d->has_cats) d->measured_by_cat[MS_CAT_RESERVE] += st->bytes[MS_CAT_RESERVE];
        d->gap = d->predicted && d->measured ? ((double)d->measured - (double)d->predicted) / (double)d->predicted : 0;
    }
}

/* Which stage ran out, where, and the bytes it held and asked for then. */
static void find_oom(const ms_plan *pl, const msb_trace *t, ms_program_run *out)
{
    out->oom = 1;
    out->oom_stage = t->oom.stage >= 0 && t->oom.stage < pl->n_stages ? t->oom.stage : -1;
    for (int i = t->oom.ev_index - 1; i >= 0 && i >= t->oom.ev_index - 4; i--)
        if (t->ev[i].kind == MSB_EV_REFUSED && t->ev[i].m.device >= 0 && t->ev[i].m.device < pl->n_stages) {
            out->oom_stage = t->ev[i].m.device;
            if (t->ev[i].alloc >= 0) out->oom_need = (uint64_t)t->ev[i].alloc + t->ev[i].m.bytes;
        }
    for (int s = 0; out->oom_stage < 0 && s < pl->n_stages; s++)
        if (t->oom.layer >= pl->stages[s].first && t->oom.layer <= pl->stages[s].last) out->oom_stage = s;
    /* past the last layer: the program's own code after the model (its loss) runs on the root stage */
    if (out->oom_stage < 0 && t->oom.layer > pl->stages[pl->n_stages - 1].last) out->oom_stage = 0;
    out->oom_step = t->oom.step > 0 ? t->oom.step + out->step_base : 0;
    char step[32] = "";
    if (out->oom_step) snprintf(step, sizeof step, ", step %d", out->oom_step);
    if (t->oom.module[0])
        snprintf(out->oom_what, sizeof out->oom_what, "%.200s (%.40s), layer %d, %s%s", t->oom.module, t->oom.type,
                 t->oom.layer, ms_phase_name((ms_phase)t->oom.phase), step);
    else   /* no module ran (a backward, the program's own code) */
        snprintf(out->oom_what, sizeof out->oom_what, "layer %d, %s%s", t->oom.layer,
                 ms_phase_name((ms_phase)t->oom.phase), step);
}

/* The steps (each stage's peak so far), the devices' peaks and the run's end: 0 or -1. */
void ms_program_device_peak(const ms_plan *pl, const ms_program_run *r, int s, ms_device_peak *dp)
{
    const ms_program_device *d = &r->dev[s];
    memset(dp, 0, sizeof *dp);
    dp->device = s;
    dp->capacity = d->capacity;
    dp->predicted_peak = d->predicted;
    dp->measured_peak = d->measured;
    snprintf(dp->name, sizeof dp->name, "%s", d->name);
    memcpy(dp->predicted_by_cat, pl->stages[s].bytes, sizeof dp->predicted_by_cat);
    if (d->has_cats) memcpy(dp->measured_by_cat, d->measured_by_cat, sizeof dp->measured_by_cat);
    if (d->own_gpu && d->measured) {
        dp->has_parts = 1;
        dp->allocator_peak = d->allocator_peak;
        dp->beyond_allocator = d->beyond;
        dp->predicted_allocator_peak = d->predicted_allocator_peak;
        dp->predicted_beyond_allocator = d->predicted_beyond;
    }
}

static int record(ms_db *db, int64_t run, const ms_plan *pl, const ms_program_run *out)
{
    const msb_trace *t = &out->trace;
    int ok = 1;
    for (int i = 0; ok && i < t->n_steps; i++) {
        const msb_step *s = &t->steps[i];
        double ms = 0;
        for (int k = 0; k < s->n_iv; k++) ms += s->iv[k].ms;
        json_t *pk = json_object();
        for (int d = 0; d < pl->n_stages && d < s->n_stage_peaks; d++) {
            char key[48];
            snprintf(key, sizeof key, "%s#%d", pl->devices[pl->stages[d].device].name, d);
            json_object_set_new(pk, key, json_integer((json_int_t)s->stage_peaks[d]));
        }
        char *pks = json_dumps(pk, JSON_COMPACT);
        json_decref(pk);
        ms_step_rec r = { .step = s->n + out->step_base, .loss = s->has_loss ? s->loss : NAN, .ms = ms, .peaks_json = pks };
        if (ms_db_add_step(db, run, &r) != 0) ok = 0;
        free(pks);
    }
    for (int s = 0; ok && s < pl->n_stages; s++) {
        ms_device_peak dp;
        ms_program_device_peak(pl, out, s, &dp);
        if (ms_db_add_device_peak(db, run, &dp) != 0) ok = 0;
    }
    const char *status = out->oom ? "oom" : out->failure[0] ? (out->ex.interrupted ? "interrupted" : "failed")
                       : (out->ex.signaled || (out->ex.status && strcmp(t->done_reason, "steps"))) ? "failed"
                                                                                                : "ok";
    if (out->ex.interrupted) status = "interrupted";
    if (ms_db_run_finish(db, run, status) != 0) ok = 0;
    return ok ? 0 : -1;
}

int ms_program_train(const ms_program_train_args *a, ms_program_run *out, char *err, size_t errlen)
{
    const ms_plan *pl = a->plan;
    memset(out, 0, sizeof *out);
    out->run_id = 0;
    char bdir[4096];
    if (ms_program_bridge_dir(bdir, sizeof bdir, err, errlen)) return -1;
    char *cfgs = config_text(pl, a->steps);
    if (!cfgs) return ms_errf(err, errlen, "out of memory");
    if (ms_stdin_for_pass(err, errlen) != 0) {   /* the rerun reads the input the trial did */
        free(cfgs);
        return -1;
    }
    int64_t run = a->db ? begin_record(a, cfgs, err, errlen) : 0;
    if (run < 0) {
        free(cfgs);
        return -1;
    }
    out->run_id = run;
    msb_trace_init(&out->trace);
    int gpu = plan_gpus(pl, &(int){ 0 }) > 0;
    msb_launch l = { .argv = a->prog, .bridge_dir = bdir, .config_json = cfgs, .phase = "train", .inject = gpu,
                     .stdout_to_stderr = a->json };
    int shown = 0;
    int rc = msb_collect(&l, &out->trace, NULL, a->quiet ? NULL : on_step, &shown, &out->ex, err, errlen);
    free(cfgs);
    const msb_trace *t = &out->trace;
    for (; !a->quiet && shown < t->n_steps; shown++)   /* a step whose loss never came (the program died) */
        fprintf(stderr, "train: step %d\n", t->steps[shown].n);
    char why[1200];
    if (rc == 0 && ms_program_failure(t, &out->ex, why, sizeof why)) {
        snprintf(out->failure, sizeof out->failure, "%s", why);
        out->refused = t->refused;
    }
    ms_program_measure(pl, t, out);
    out->steps = t->n_steps;
    /* it loaded the checkpoint an earlier run saved after step k: its
     * steps are k + 1, ... (the earlier run keeps its own rows) */
    const ms_program_resume *resume = a->resume;
    if (resume && resume->path && resume->path[0] && t->n_loads && !strcmp(t->first_load, resume->path))
        out->step_base = resume->step;
    for (int i = 0; i < t->n_steps && i < MS_PROGRAM_MAX_LOSSES; i++) out->losses[out->n_losses++] = t->steps[i].loss;
    if (t->oom.happened) find_oom(pl, t, out);
    if (a->db && run > 0 && record(a->db, run, pl, out) && rc == 0)
        rc = ms_errf(err, errlen, "recording the run: %s", ms_db_errmsg(a->db));
    return rc;
}

void ms_program_print_devices(FILE *f, const ms_program_run *r)
{
    char a[32], b[32], c[32];
    fprintf(f, "%-4s %-10s %12s %12s %12s %8s\n", "dev", "device", "capacity", "predicted", "measured", "gap");
    for (int s = 0; s < r->n_dev; s++) {
        const ms_program_device *d = &r->dev[s];
        char gap[16] = "-";      /* a device whose peak was not measured (a CPU stage beside a GPU) */
        if (d->measured) snprintf(gap, sizeof gap, "%+7.2f%%", 100.0 * d->gap);
        fprintf(f, "%-4d %-10s %12s %12s %12s %8s\n", s, d->name, ms_fmt_bytes(d->capacity, a, sizeof a),
                ms_fmt_bytes(d->predicted, b, sizeof b), d->measured ? ms_fmt_bytes(d->measured, c, sizeof c) : "-",
                gap);
    }
    /* a GPU's measured peak in its two parts, each beside its prediction: errors of opposite sign
     * can cancel in the total (docs/bridge.md, "Workspaces and libraries a split stage does not have") */
    for (int s = 0; s < r->n_dev; s++) {
        const ms_program_device *d = &r->dev[s];
        if (!d->own_gpu || !d->measured) continue;
        char e[32];
        fprintf(f, "  %s: the allocator's peak %s (predicted %s), beyond it %s (context and libraries; "
                "predicted %s)\n", d->name, ms_fmt_bytes(d->allocator_peak, a, sizeof a),
                ms_fmt_bytes(d->predicted_allocator_peak, b, sizeof b), ms_fmt_bytes(d->beyond, c, sizeof c),
                ms_fmt_bytes(d->predicted_beyond, e, sizeof e));
    }
}

json_t *ms_program_run_json(const ms_program_run *r)
{
    json_t *devs = json_array(), *losses = json_array();
    for (int s = 0; s < r->n_dev; s++) {
        size_t pred[MS_CAT_N], meas[MS_CAT_N];
        for (int c = 0; c < MS_CAT_N; c++) {
            pred[c] = (size_t)r->dev[s].predicted_by_cat[c];
            meas[c] = (size_t)r->dev[s].measured_by_cat[c];
        }
        /* the ledger's breakdown at the stage's own peak: null when the program did not send it */
        json_t *d = ms_run_device_row(r->dev[s].name, r->dev[s].capacity, r->dev[s].predicted, r->dev[s].measured, pred,
                                      r->dev[s].has_cats ? meas : NULL, NULL);
        json_object_set_new(d, "stage", json_integer(s));
        /* a stage alone on its GPU: the measured peak's two parts (null elsewhere) */
        const ms_program_device *pd = &r->dev[s];
        json_object_set_new(d, "measured_allocator_peak_bytes",
                            pd->own_gpu && pd->measured ? json_integer((json_int_t)pd->allocator_peak) : json_null());
        json_object_set_new(d, "measured_beyond_allocator_bytes",
                            pd->own_gpu && pd->measured ? json_integer((json_int_t)pd->beyond) : json_null());
        json_object_set_new(d, "predicted_allocator_peak_bytes", pd->own_gpu && pd->measured ?
                            json_integer((json_int_t)pd->predicted_allocator_peak) : json_null());
        json_object_set_new(d, "predicted_beyond_allocator_bytes", pd->own_gpu && pd->measured ?
                            json_integer((json_int_t)pd->predicted_beyond) : json_null());
        json_array_append_new(devs, d);
    }
    for (int i = 0; i < r->n_losses; i++)
        json_array_append_new(losses, isnan(r->losses[i]) ? json_null() : json_real(r->losses[i]));
    char how[96];
    json_t *o = json_pack("{s:i, s:o, s:o, s:b, s:s}", "steps", r->steps, "losses", losses, "devices", devs, "oom",
                          r->oom, "exit", msb_exit_text(&r->ex, how, sizeof how));
    if (r->oom) {
        json_object_set_new(o, "oom_stage", json_integer(r->oom_stage));
        json_object_set_new(o, "oom_where", json_string(r->oom_what));
        json_object_set_new(o, "oom_step", r->oom_step ? json_integer(r->oom_step) : json_null());
    }
    if (r->failure[0]) json_object_set_new(o, "error", json_string(r->failure));
    if (r->run_id > 0) json_object_set_new(o, "run_id", json_integer(r->run_id));
    return o;
}

/* The plan, checked to be the program's, and the database: 0, or the exit status (said). */
static int open_plan(const ms_train_program_args *a, ms_plan *pl, ms_db **db)
{
    char err[1024];
    if (ms_plan_load_json(a->plan_path, pl, err, sizeof err) || ms_program_check_plan(pl, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s\n", err);
        return MS_EXIT_USAGE;
    }
    if (a->db_path && !(*db = ms_db_open(a->db_path, 1, err, sizeof err))) {
        fprintf(stderr, "memsplit train: %s\n", err);
        return MS_EXIT_RUNTIME;
    }
    return 0;
}

/* How the rerun ended, said: the exit status. */
static int outcome(const ms_train_program_args *a, const ms_program_run *r)
{
    FILE *f = a->json ? stderr : stdout;
    int code = MS_EXIT_OK;
    if (r->ex.interrupted) {
        char how[96];
        fprintf(stderr, "memsplit train: the program was interrupted (%s) after %d step%s\n",
                msb_exit_text(&r->ex, how, sizeof how), r->steps, r->steps == 1 ? "" : "s");
        code = MS_EXIT_STOPPED(r->ex.stop_signal);
    } else if (r->failure[0]) {
        fprintf(stderr, "memsplit train: %s\n", r->failure);
        code = r->refused ? MS_EXIT_USAGE : MS_EXIT_RUNTIME;
    } else if (r->oom) {
        fprintf(stderr, "memsplit train: OUT OF MEMORY on stage %d (%s) in %s\n", r->oom_stage,
                r->oom_stage >= 0 ? r->dev[r->oom_stage].name : "?", r->oom_what);
        code = MS_EXIT_OOM;
    } else if (r->ex.interrupted || r->ex.signaled || (r->ex.status && strcmp(r->trace.done_reason, "steps"))) {
        char how[96];
        fprintf(stderr, "memsplit train: the program failed (%s)%s%s\n", msb_exit_text(&r->ex, how, sizeof how),
                r->trace.done_exc[0] ? ": " : "", r->trace.done_exc);
        code = MS_EXIT_RUNTIME;
    }
    if (!r->failure[0]) {
        fprintf(f, "trained %d step%s; measured peak per device against the plan:\n", r->steps, r->steps == 1 ? "" : "s");
        ms_program_print_devices(f, r);
    }
    if (r->trace.warnings[0]) fprintf(f, "warnings: %s\n", r->trace.warnings);
    return code;
}

int ms_run_train_program(const ms_train_program_args *a, json_t **summary)
{
    *summary = NULL;
    msb_stop_catch();          /* a stop signal ends the program and this run, recorded interrupted */
    ms_plan pl;
    ms_db *db = NULL;
    int code = open_plan(a, &pl, &db);
    if (code) {
        ms_plan_free(&pl);
        return code;
    }
    if (!a->quiet) {
        fprintf(stderr, "train: %s with the plan's %d stages\n", pl.program, pl.n_stages);
        ms_program_placement(stderr, &pl);
    }
    ms_program_run *r = calloc(1, sizeof *r);
    char err[1024];
    ms_program_train_args ta = { .plan = &pl, .prog = a->prog, .steps = a->steps, .json = a->json, .quiet = a->quiet,
                                 .db = db };
    if (!r || ms_program_train(&ta, r, err, sizeof err) != 0) {
        fprintf(stderr, "memsplit train: %s\n", r ? err : "out of memory");
        code = msb_stop_signal() ? MS_EXIT_STOPPED(msb_stop_signal()) : MS_EXIT_RUNTIME;
    } else {
        code = outcome(a, r);
        if (a->json) *summary = ms_program_run_json(r);
    }
    if (r) msb_trace_free(&r->trace);
    free(r);
    if (db) ms_db_close(db);
    ms_plan_free(&pl);
    return code;
}
