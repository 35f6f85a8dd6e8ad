/* program_trial.c — a program's trial through the bridge (program.h):
 * finding the bridge, running one pass of the program, saying why a pass
 * gave no model, and the trial itself (a pass under the capacity, an
 * uncapped pass after an OOM, the rows, the table and the records); and
 * --ballast-only, the capacity and nothing else. */
#include "run/program.h"
#include "run/exit.h"
#include "run/scratch_dir.h"
#include "run/stdin_keep.h"
#include "run/undo_files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge/advice.h"
#include "bridge/host/collect.h"
#include "bridge/host/launch.h"
#include "bridge/rows.h"
#include "bridge/steps.h"
#include "bridge/trace.h"
#include "reports/db.h"
#include "reports/term_report.h"
#include "trainer/device.h"
#include "vocab/errf.h"
#include "vocab/profile_json.h"
#include "vocab/size.h"

/* Progress of a pass: "LABEL: step k/N done" as each step ends. */
typedef struct pass_ctx {
    int quiet, steps_wanted, shown_steps;
    const char *label;
} pass_ctx;

static void on_step(const msb_trace *t, void *user)
{
    pass_ctx *c = user;
    if (!c->quiet && t->n_steps > c->shown_steps) {
        c->shown_steps = t->n_steps;
        fprintf(stderr, "%s: step %d/%d done\n", c->label, c->shown_steps, c->steps_wanted);
    }
}

int ms_program_bridge_dir(char *out, size_t len, char *err, size_t errlen)
{
    const char *env = getenv("MEMSPLIT_BRIDGE_DIR");
    if (env && *env) {
        snprintf(out, len, "%s", env);
    } else {
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) return ms_errf(err, errlen, "cannot find memsplit's own folder");
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        snprintf(out, len, "%s/bridge", exe);
    }
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/python/memsplit_bridge/__init__.py", out);
    if (access(probe, R_OK) != 0) return ms_errf(err, errlen, "the PyTorch bridge is not built (%s is missing): run make", probe);
    snprintf(probe, sizeof probe, "%s/libmemsplit_bridge.so", out);
    if (access(probe, R_OK) != 0) return ms_errf(err, errlen, "the PyTorch bridge is not built (%s is missing): run make", probe);
    return 0;
}

int ms_program_pass(char *const *prog, const char *bridge_dir, json_t *config, const char *phase, int inject,
                    const char *label, int quiet, int json, FILE *record, msb_trace *t, msb_exit *ex, char *err,
                    size_t errlen)
{
    if (ms_stdin_for_pass(err, errlen) != 0) return -1;   /* every pass reads the input the first did */
    /* the program's saves go to files here (the bridge); removed after, however the program ends. Not
     * made: the bridge makes its own, which Python's exit removes */
    char scratch[4096];
    if (ms_scratch_make(scratch, sizeof scratch) == 0)
        json_object_set_new(config, "scratch_dir", json_string(scratch));
    else {
        int e = errno;
        fprintf(stderr, "%s: warning: no folder for the pass's checkpoint files in %s (%s)\n", label,
                ms_scratch_base(), strerror(e));
    }
    char *cfg = json_dumps(config, JSON_COMPACT);
    json_object_del(config, "scratch_dir");
    int rc = -1;
    struct timespec began;
    int have_began = 0;
    if (!cfg) {
        ms_errf(err, errlen, "out of memory");
    } else {
        msb_launch l = { .argv = prog, .bridge_dir = bridge_dir, .config_json = cfg, .phase = phase,
                         .inject = inject, .stdout_to_stderr = json };
        long long steps = json_integer_value(json_object_get(config, "steps"));
        pass_ctx c = { .quiet = quiet, .steps_wanted = (int)steps, .label = label };
        /* on the clock files are stamped by: a file changed in the pass has a ctime from then on */
        if (clock_gettime(CLOCK_REALTIME_COARSE, &began) == 0) have_began = 1;
        if (record) fprintf(record, "#\tpass %s\n", label);
        rc = msb_collect(&l, t, record, on_step, &c, ex, err, errlen);
        free(cfg);
    }
    if (scratch[0]) {
        /* a pass killed before its end put back none of the program's files it held: memsplit does */
        int done = 0;
        char uerr[1024];
        if (ms_undo_apply(scratch, have_began ? &began : NULL, &done, uerr, sizeof uerr) != 0)
            fprintf(stderr, "%s: warning: the pass's files in the program's folders: %s\n", label, uerr);
        if (done)
            fprintf(stderr, "%s: the pass ended before putting back the program's files: memsplit put back or "
                    "removed %d of them\n", label, done);
    }
    if (scratch[0] && ms_scratch_remove(scratch) != 0)
        fprintf(stderr, "%s: warning: could not remove %s, the pass's checkpoint files (%s)\n", label, scratch,
                strerror(errno));
    return rc;
}

/* What went wrong when a pass gave no model, in one sentence; NULL if it did. */
const char *ms_program_failure(const msb_trace *t, const msb_exit *ex, char *buf, size_t len)
{
    char how[96];
    msb_exit_text(ex, how, sizeof how);
    if (t->refused) snprintf(buf, len, "%s", t->refuse_text);
    else if (t->n_hello == 0)
        snprintf(buf, len, "the program never started Python with memsplit's bridge (%s); memsplit profiles "
                 "Python programs that use PyTorch", how);
    else if (!t->torch_seen)
        snprintf(buf, len, "the program never imported torch (%s)", how);
    else if (t->model_conn < 0)
        snprintf(buf, len, "the program ended (%s) before a training forward pass of a model%s%s", how,
                 t->done_exc[0] ? ": " : "", t->done_exc);
    else return NULL;
    return buf;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The script a program runs: the first argument ending in .py, else argv[0]. */
void ms_program_name(char *const *prog, char *out, size_t len)
{
    for (int i = 0; prog[i]; i++) {
        size_t n = strlen(prog[i]);
        if (n > 3 && !strcmp(prog[i] + n - 3, ".py")) {
            msb_utf8_copy(out, len, base_name(prog[i]), (size_t)-1);   /* recorded: valid UTF-8 */
            return;
        }
    }
    msb_utf8_copy(out, len, base_name(prog[0]), (size_t)-1);
}

static json_t *exit_json(const msb_exit *ex)
{
    char how[96];
    return json_pack("{s:b, s:i, s:b, s:i, s:b, s:s}", "exited", ex->exited, "status", ex->status, "signaled",
                     ex->signaled, "signal", ex->signo, "interrupted", ex->interrupted, "text",
                     msb_exit_text(ex, how, sizeof how));
}

/* One trial, as it goes. */
typedef struct trial_job {
    const ms_program_trial_args *a;
    ms_program_trial *r;
    const char *who;           /* the messages' prefix */
    char bdir[4096];
    int gpu, inject;           /* a GPU; CUPTI loaded into the program (not with --no-cupti) */
    json_t *cfg;               /* the bridge's config of the pass */
    msb_trace u;               /* the uncapped pass (have_u) */
    msb_exit exu;
    int incomplete;            /* rows copied where no pass measured a backward */
    uint64_t libs;             /* of the profile's reserve, the library buffers the rows' pass measured */
    int code;
    const char *status;
    char said[600];            /* how the trial ended, when not as asked (verdict) */
    int said_is_note;          /* said is a note beside a result, not an error */
} trial_job;

/* The bridge, the program's name, the pass's config and the "profile" run:
 * 0, or the exit status (said). */
static int begin(trial_job *j)
{
    const ms_program_trial_args *a = j->a;
    ms_program_trial *r = j->r;
    char err[1024] = "";
    if (ms_program_bridge_dir(j->bdir, sizeof j->bdir, err, sizeof err)) {
        fprintf(stderr, "memsplit %s: %s\n", j->who, err);
        snprintf(r->fail, sizeof r->fail, "%s", err);
        return MS_EXIT_RUNTIME;
    }
    ms_program_name(a->prog, r->name, sizeof r->name);
    j->gpu = ms_cuda_gpu_count() > 0;
    j->inject = j->gpu && !a->no_cupti;   /* CUPTI in the program: its segments */
    j->cfg = json_pack("{s:I, s:I, s:s, s:s, s:s}", "steps", (json_int_t)a->steps, "capacity",
                       (json_int_t)a->capacity, "layers", a->layers ? a->layers : "", "trace",
                       a->diag ? "off" : "tensors", "pass", "trial");
    if (!a->db) return 0;
    char *cfgs = json_dumps(j->cfg, JSON_COMPACT);
    char devs[160];
    snprintf(devs, sizeof devs, "[{\"name\": \"%s\", \"capacity_bytes\": %zu}]", j->gpu ? "cuda:0" : "cpu",
             a->capacity);
    char *cmd = msb_utf8_dup(a->cmdline ? a->cmdline : "");   /* argv may hold any bytes */
    r->run = cmd ? ms_db_run_begin(a->db, "profile", cmd, cfgs, devs, r->name, a->parent) : -1;
    free(cmd);
    free(cfgs);
    if (r->run >= 0) return 0;
    fprintf(stderr, "memsplit %s: %s\n", j->who, ms_db_errmsg(a->db));
    snprintf(r->fail, sizeof r->fail, "%s", ms_db_errmsg(a->db));
    return MS_EXIT_RUNTIME;
}

/* Stopped by a signal: the trial's status and exit status. */
static void stopped(trial_job *j, int sig)
{
    j->code = MS_EXIT_STOPPED(sig);
    j->status = "interrupted";
}

/* The pass under the capacity and, after an OOM, the uncapped one. */
static void passes(trial_job *j)
{
    const ms_program_trial_args *a = j->a;
    ms_program_trial *r = j->r;
    char err[1024] = "", label[64];
    if (msb_stop_signal()) {
        snprintf(r->fail, sizeof r->fail, "memsplit was asked to stop (%s) before the trial began",
                 strsignal(msb_stop_signal()));
        fprintf(stderr, "memsplit %s: %s\n", j->who, r->fail);
        stopped(j, msb_stop_signal());
        return;
    }
    if (!a->quiet)
        fprintf(stderr, "%s: running %s for %ld step%s%s\n", j->who, r->name, a->steps, a->steps == 1 ? "" : "s",
                a->capacity ? " under the emulated capacity" : "");
    snprintf(label, sizeof label, "%s: trial", j->who);
    if (ms_program_pass(a->prog, j->bdir, j->cfg, "trial", j->inject, label, a->quiet, a->json, a->record, &r->t, &r->ex,
                        err, sizeof err) != 0) {
        fprintf(stderr, "memsplit %s: %s\n", j->who, err);
        snprintf(r->fail, sizeof r->fail, "%s", err);
        j->code = MS_EXIT_RUNTIME;
        j->status = "failed";
        if (msb_stop_signal()) stopped(j, msb_stop_signal());
    }
    const msb_trace *t = &r->t;
    const char *fail = j->code == MS_EXIT_OK ? ms_program_failure(t, &r->ex, r->fail, sizeof r->fail) : NULL;
    if (j->code == MS_EXIT_OK && fail) {
        fprintf(stderr, "memsplit %s: %s\n", j->who, fail);
        j->code = t->refused && strcmp(t->refuse_what, "torch") ? MS_EXIT_USAGE : MS_EXIT_RUNTIME;
        j->status = "failed";
        if (r->ex.interrupted) stopped(j, r->ex.stop_signal);
    }
    if (j->code != MS_EXIT_OK || !t->oom.happened || !a->second || r->ex.interrupted || msb_stop_signal()) return;
    if (!a->quiet)
        fprintf(stderr, "%s: out of memory; a second, uncapped pass measures what it did not reach\n", j->who);
    json_object_set_new(j->cfg, "capacity", json_integer(0));
    json_object_set_new(j->cfg, "pass", json_string("uncapped"));
    err[0] = '\0';
    snprintf(label, sizeof label, "%s: uncapped pass", j->who);
    if (ms_program_pass(a->prog, j->bdir, j->cfg, "trial", j->inject, label, a->quiet, a->json, a->record, &j->u, &j->exu,
                        err, sizeof err) == 0 && j->u.model_conn >= 0 && !j->exu.interrupted)
        r->have_u = 1;
    else if (!a->quiet)
        fprintf(stderr, "%s: the uncapped pass gave nothing usable%s%s\n", j->who, err[0] ? ": " : "", err);
}

/* Units that ran in some of the program's steps and not in others, and
 * units whose inputs changed size between steps, from the uncapped pass
 * when there was one (it ran more steps): warnings. */
/* A steps check's verdict k: below 0 it could not look (out of memory), above 0 item says what it found. */
static void steps_say(msb_trace *tp, int k, const char *checked, const char *item)
{
    char m[160];
    if (k < 0) {
        snprintf(m, sizeof m, "steps: %s was not checked (out of memory)", checked);
        msb_trace_warn(tp, m);
    } else if (k > 0) {
        msb_trace_warn(tp, item);
    }
}

static void steps_differ(msb_trace *tp, const msb_trace *u)
{
    const msb_trace *s = u ? u : tp;
    char names[400], item[720], a[32], b[32];
    int k = msb_units_not_every_step(s, names, sizeof names);
    snprintf(item, sizeof item, "steps: the program's steps ran different units (as LayerDrop or a router "
             "does): %s ran in some steps and not in others; the rows and the plan hold the steps the trial "
             "ran, and a step that runs more of one stage's units may need more than predicted", names);
    steps_say(tp, k, "whether every step ran the same units", item);
    uint64_t lo, hi;
    k = msb_unit_inputs_differ(s, names, sizeof names, &lo, &hi);
    snprintf(item, sizeof item, "steps: the tensors entering %d unit%s changed size between the trial's steps "
             "(%s: %s to %s), as batches of varying sequence lengths do; the rows and the plan hold the "
             "largest step the trial ran, and a larger input needs more than predicted: run the trial on the "
             "largest batch, or with more steps (--steps)", k, k == 1 ? "" : "s", names,
             ms_fmt_bytes((size_t)lo, a, sizeof a), ms_fmt_bytes((size_t)hi, b, sizeof b));
    steps_say(tp, k, "whether the units' inputs kept their size", item);
    k = msb_live_grew(s, &lo, &hi);
    snprintf(item, sizeof item, "steps: the memory live when a step ended grew from %s to %s over the trial's "
             "last two steps: something made in the last step stayed (a copy of the model, outputs gathered "
             "without .detach(), a loss summed with its graph and no backward, a cache that fills); the rows "
             "and the plan hold the steps the trial ran, and if each step keeps more, a later one needs more "
             "than predicted: run the trial with more steps (--steps) to see whether it keeps growing",
             ms_fmt_bytes((size_t)lo, a, sizeof a), ms_fmt_bytes((size_t)hi, b, sizeof b));
    steps_say(tp, k, "whether the memory live between steps grew", item);
}

/* The rows, from the trial (and the uncapped pass). */
static void rows(trial_job *j)
{
    ms_program_trial *r = j->r;
    msb_trace *tp = &r->t;
    /* the units in the order the program first called them (the trial's word, for its
     * uncapped pass too): the profile, and every pass a plan drives, follow it. An
     * uncapped pass that cannot take it (other units) is left out, not mixed in */
    if (tp->order && msb_trace_in_call_order(tp, tp->order, tp->n_order) == 0 && r->have_u &&
        msb_trace_in_call_order(&j->u, tp->order, tp->n_order) != 0) {
        r->have_u = 0;
        msb_trace_warn(tp, "uncapped pass: its units differ from the trial's; left out of the rows");
    }
    if (r->have_u && j->u.warnings[0] && !strstr(tp->warnings, j->u.warnings)) {   /* what the second pass said too */
        char item[sizeof j->u.warnings + 16];
        snprintf(item, sizeof item, "uncapped pass: %s", j->u.warnings);
        msb_trace_warn(tp, item);
    }
    steps_differ(tp, r->have_u ? &j->u : NULL);
    if (j->code != MS_EXIT_OK) return;
    char err[1024];
    msb_rows_opts ro = { .capacity = j->a->capacity, .model_name = r->name, .libs = &j->libs };
    if (msb_build_profile(tp, r->have_u ? &j->u : NULL, &ro, &r->prof, &j->incomplete, err, sizeof err) != 0) {
        fprintf(stderr, "memsplit %s: %s\n", j->who, err);
        snprintf(r->fail, sizeof r->fail, "%s", err);
        j->code = MS_EXIT_RUNTIME;
        j->status = "failed";
    } else {
        r->have_prof = 1;
    }
}

/* How the trial ended, when there is a profile: the exit status, the run's
 * status and what to say. A profile says it fits only when its steps were
 * measured: not when the program was interrupted, failed, or ended where
 * the bridge could not see it (os._exit), nor before its first step. */
static void verdict(trial_job *j, const char *how)
{
    ms_program_trial *r = j->r;
    const msb_trace *t = &r->t;
    ms_profile *p = &r->prof;
    int k = t->n_steps;
    long want = j->a->steps;
    if (r->ex.interrupted || j->exu.interrupted) {   /* in the trial, or in the uncapped pass after it */
        stopped(j, r->ex.interrupted ? r->ex.stop_signal : j->exu.stop_signal);
        p->fits = 0;
        snprintf(j->said, sizeof j->said, "the program was interrupted (%s) after %d of the %ld steps asked", how, k,
                 want);
    } else if (p->oom.happened) {
        j->code = MS_EXIT_OOM;
        j->status = "oom";
    } else if (!t->done && !r->ex.signaled) {
        j->code = MS_EXIT_RUNTIME;
        j->status = "failed";
        p->fits = 0;
        snprintf(j->said, sizeof j->said, "the program ended (%s) in step %d, without the bridge seeing it end "
                 "(os._exit, or a process that ended from inside): the profile is partial", how, k + 1);
    } else if (strcmp(t->done_reason, "steps") && (r->ex.signaled || r->ex.status != 0)) {
        j->code = MS_EXIT_RUNTIME;
        j->status = "failed";
        p->fits = 0;
        snprintf(j->said, sizeof j->said, "the program failed (%s)%s%.400s", how, t->done_exc[0] ? ": " : "",
                 t->done_exc);
    } else if (k == 0) {
        j->code = MS_EXIT_RUNTIME;
        j->status = "failed";
        p->fits = 0;
        snprintf(j->said, sizeof j->said, "the program ended (%s) before its first optimizer step finished: no whole "
                 "step was measured", how);
    } else if (k < want && strcmp(t->done_reason, "steps")) {
        j->said_is_note = 1;
        snprintf(j->said, sizeof j->said, "note: the program ended by itself (%s) after %d of the %ld steps asked; "
                 "the profile is of those", how, k, want);
    }
}

/* The table (or with brief only the diagnosis), the notes, and how the program ended. */
static void show(trial_job *j)
{
    const ms_program_trial_args *a = j->a;
    ms_program_trial *r = j->r;
    const msb_trace *t = &r->t;
    const ms_profile *p = &r->prof;
    FILE *out = a->json ? stderr : stdout;
    if (!a->brief) {
        fprintf(out, "program: %s — %s; torch %s on %s\n", r->name, t->why, t->torch_version,
                t->cuda ? "a GPU" : "the CPU");
        ms_term_report_profile(out, p, 80);
    } else if (p->oom.happened) {
        ms_term_report_oom(out, p, 80);
    }
    if (p->oom.happened) {
        char advice[1024];
        msb_fit_advice(p, t->n_recomputed, a->brief, advice, sizeof advice);   /* doctor (brief) splits it next */
        fprintf(out, "%s\n", advice);
    }
    if (!t->cuda)
        fprintf(out, "note: CPU accounting, exact for the CPU kernels this program ran;\n  not a forecast for a GPU\n");
    if (j->incomplete)
        fprintf(out, "note: some layers never ran backward and no uncapped pass measured them: their rows are partial\n");
    if (t->warnings[0]) fprintf(out, "warnings: %s\n", t->warnings);
    if (j->said[0] && j->said_is_note) fprintf(out, "%s\n", j->said);
    else if (j->said[0]) fprintf(stderr, "memsplit %s: %s\n", j->who, j->said);
}

/* The record pass, when asked, after a trial that fitted or ran out of
 * memory: the profile's record, or why there is none (said). */
static void record_pass(trial_job *j)
{
    const ms_program_trial_args *a = j->a;
    ms_program_trial *r = j->r;
    if (!a->record_pass || (j->code != MS_EXIT_OK && j->code != MS_EXIT_OOM) || msb_stop_signal()) return;
    r->record_tried = 1;
    ms_program_record_args ra = { .prog = a->prog, .steps = a->steps, .json = a->json, .quiet = a->quiet,
                                  .brief = a->brief, .who = j->who, .events = a->record,
                                  .no_cupti = a->no_cupti, .libs = j->libs };
    if (ms_program_record_pass(&ra, &r->prof, r->record_why, sizeof r->record_why) == 0) return;
    if (msb_stop_signal()) {
        stopped(j, msb_stop_signal());
        return;
    }
    fprintf(a->json ? stderr : stdout, "note: no record of what crosses a split (%s): a plan from this profile "
            "predicts each stage by the stage rules\n", r->record_why);
}

/* The memory events, the rows, how the program ended and the run's end. */
static void record(trial_job *j, const char *how)
{
    ms_db *db = j->a->db;
    ms_program_trial *r = j->r;
    int ok = 1;
    if (r->have_prof) {
        ms_mem_event *mev = NULL;
        int n = msb_trace_mem_events(&r->t, &mev);
        if (n < 0 || ms_db_add_mem_events(db, r->run, mev, n) != 0 || ms_db_add_rows(db, r->run, &r->prof) != 0) ok = 0;
        free(mev);
    }
    char note[800];
    snprintf(note, sizeof note, "program: %s%s%s", how, j->said[0] ? "; " : "", j->said);
    if (ok && ms_db_run_note(db, r->run, note) != 0) ok = 0;
    if (ok && r->t.warnings[0]) {   /* what the profile warned of is the run's too (its report shows notes) */
        char line[sizeof r->t.warnings + 16];
        snprintf(line, sizeof line, "warnings: %s", r->t.warnings);
        if (ms_db_run_note(db, r->run, line) != 0) ok = 0;
    }
    if (ms_db_run_finish(db, r->run, j->status) != 0) ok = 0;
    if (!ok) {
        fprintf(stderr, "memsplit %s: recording the trial: %s\n", j->who, ms_db_errmsg(db));
        j->code = MS_EXIT_RUNTIME;
    } else {
        r->recorded = 1;
    }
}

int ms_program_run_trial(const ms_program_trial_args *a, ms_program_trial *r)
{
    memset(r, 0, sizeof *r);
    msb_stop_catch();
    if (a->steps < 2) {
        fprintf(stderr, "memsplit %s: --steps %ld: a program's trial takes 2 steps or more: the optimizer's state, "
                "made in the first step, is live only from the second on, so one step cannot say whether it fits\n",
                a->who ? a->who : "profile", a->steps);
        snprintf(r->fail, sizeof r->fail, "a program's trial takes 2 steps or more");
        r->status = "failed";
        return r->code = MS_EXIT_USAGE;
    }
    trial_job j = { .a = a, .r = r, .who = a->who ? a->who : "profile", .code = MS_EXIT_OK, .status = "ok" };
    int code = begin(&j);
    if (code) {
        json_decref(j.cfg);
        return r->code = code;
    }
    msb_trace_init(&r->t);
    msb_trace_init(&j.u);
    passes(&j);
    rows(&j);
    char how[96];
    msb_exit_text(&r->ex, how, sizeof how);
    if (r->have_prof) {
        verdict(&j, how);
        show(&j);
        record_pass(&j);
    }
    if (a->db && r->run > 0) record(&j, how);
    msb_trace_free(&j.u);
    json_decref(j.cfg);
    r->status = j.status;
    return r->code = j.code;
}

json_t *ms_program_trial_json(const ms_program_trial *r)
{
    json_t *o = r->have_prof ? ms_profile_to_json(&r->prof) : json_object();
    if (!o) return NULL;
    json_t *pr = json_object_get(o, "program");
    if (!pr) {
        pr = json_object();
        json_object_set_new(o, "program", pr);
    }
    json_object_set_new(pr, "name", json_string(r->name));
    json_object_set_new(pr, "exit", exit_json(&r->ex));
    json_object_set_new(pr, "warnings", json_string(r->t.warnings));
    json_object_set_new(pr, "second_pass", json_boolean(r->have_u));
    json_object_set_new(pr, "steps_done", json_integer(r->t.n_steps));
    if (r->record_tried)
        json_object_set_new(pr, "record", json_pack("{s:b, s:s}", "made", r->prof.record != NULL, "why",
                                                    r->record_why));
    json_object_set_new(pr, "status", json_string(r->status ? r->status : "failed"));
    if (!r->have_prof) json_object_set_new(o, "error", json_string(r->fail));
    if (r->run > 0) json_object_set_new(o, "run_id", json_integer(r->run));
    return o;
}

void ms_program_trial_free(ms_program_trial *r)
{
    ms_profile_free(&r->prof);
    msb_trace_free(&r->t);
}

int ms_program_ballast_only(char *const *prog, size_t capacity, int json, int quiet, json_t **summary)
{
    *summary = NULL;
    char bdir[4096], err[1024], why[1200];
    if (ms_program_bridge_dir(bdir, sizeof bdir, err, sizeof err)) {
        fprintf(stderr, "memsplit profile: %s\n", err);
        return MS_EXIT_RUNTIME;
    }
    if (ms_cuda_gpu_count() < 1 || !capacity) {
        fprintf(stderr, "memsplit profile: --ballast-only needs a GPU and --gpu-mem\n");
        return MS_EXIT_USAGE;
    }
    json_t *cfg = json_pack("{s:I, s:I, s:b, s:s}", "steps", (json_int_t)1000000, "capacity", (json_int_t)capacity,
                            "observe", 0, "pass", "ballast-only");
    msb_trace t;
    msb_trace_init(&t);
    msb_exit ex;
    int code = MS_EXIT_OK;
    if (ms_program_pass(prog, bdir, cfg, "trial", 0, "ballast only", 1, json, NULL, &t, &ex, err, sizeof err) != 0) {
        fprintf(stderr, "memsplit profile: %s\n", err);
        code = MS_EXIT_RUNTIME;
    } else if (t.n_hello == 0 || !t.torch_seen) {
        fprintf(stderr, "memsplit profile: %s\n", ms_program_failure(&t, &ex, why, sizeof why));
        code = MS_EXIT_RUNTIME;
    } else {
        char how[96];
        msb_exit_text(&ex, how, sizeof how);
        if (t.oom.happened) {
            code = MS_EXIT_OOM;
            fprintf(json ? stderr : stdout, "under the emulated capacity alone the program died of an OOM %s %s (%s)\n",
                    t.oom.module[0] ? "in the forward of" : "outside any module's forward (in backward or the "
                    "optimizer)", t.oom.module, t.oom.type);
        } else if (!quiet) {
            fprintf(json ? stderr : stdout, "under the emulated capacity alone the program did not run out of memory (%s)\n", how);
        }
        if (json)
            *summary = json_pack("{s:b, s:s, s:s, s:o}", "oom", t.oom.happened, "module", t.oom.module, "type",
                                 t.oom.type, "exit", exit_json(&ex));
    }
    msb_trace_free(&t);
    json_decref(cfg);
    return code;
}
