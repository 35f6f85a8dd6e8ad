/* profile_program.c — `memsplit profile [options] -- PROGRAM [ARGS...]`: the
 * trial of a user's own PyTorch program through the bridge (docs/bridge.md):
 * per-module rows, the OOM where the program really dies, recorded in the
 * run database like memsplit's own trial. */
#include "cli/program.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge/advice.h"
#include "bridge/host/launch.h"
#include "bridge/rows.h"
#include "bridge/trace.h"
#include "cli/common.h"
#include "reports/db.h"
#include "reports/term_report.h"
#include "vocab/profile_json.h"
#include "vocab/errf.h"
#include "vocab/size.h"

static const char ms_profile_program_usage[] =
    "usage: memsplit profile [options] -- PROGRAM [ARGS...]\n"
    "\n"
    "Run your own PyTorch (or Lightning) program, unchanged, for a short trial\n"
    "and record per module the bytes of parameters, master weights, gradients,\n"
    "optimizer state, activations and transients, forward and backward, with\n"
    "times. If it runs out of memory, say in which module and phase, how many\n"
    "bytes it asked for and what was live. PROGRAM is usually `python train.py`;\n"
    "`bash run.sh` or `torchrun` work too (the bridge rides in the environment).\n"
    "\n"
    "Options:\n"
    "  --gpu-mem SIZE     emulate a device of SIZE bytes (24GiB, 512MiB): on a GPU\n"
    "                     the whole device, CUDA context included; on the CPU an\n"
    "                     accounting cap on the program's tensors\n"
    "  --steps N          optimizer steps in the trial (default 2), then the program\n"
    "                     is stopped cleanly (MEMSPLIT_PHASE=trial is set meanwhile)\n"
    "  --layers PATH      the module whose children are the blocks (\".\" for the\n"
    "                     root; default: the longest nn.ModuleList/nn.Sequential of\n"
    "                     identical modules)\n"
    "  --diagnose-only    GPU: no per-tensor trace (module boundaries, the caching\n"
    "                     allocator's counters and CUPTI only; lowest overhead)\n"
    "  --no-second-pass   after an OOM, do not run the program again uncapped to\n"
    "                     measure the layers the trial never reached\n"
    "  --ballast-only     GPU: the emulated capacity and nothing else (no hooks, no\n"
    "                     tracking): run the program and say from its traceback in\n"
    "                     which module it died, to compare with the profile\n"
    "  --record-events FILE  write every event line the program sent to FILE\n"
    "                     (a test fixture, a bug report)\n"
    "  --db FILE          record the run in this SQLite database (created if new)\n"
    "  --json             print the profile as one JSON object on stdout (the\n"
    "                     program's own stdout then goes to stderr)\n"
    "  --quiet            no progress lines\n"
    "  -h, --help         this text\n"
    "\n"
    "On the CPU the accounting is exact for the CPU kernels the program runs; it is\n"
    "not a forecast for a GPU, whose kernels differ.\n"
    "\n"
    "Exit status: 0 the program fits; 3 it ran out of memory (diagnosis printed);\n"
    "1 usage error; 2 the program could not be profiled (its own exit status or\n"
    "signal is in the message and in the JSON).\n";

typedef struct pass_ctx {
    msb_trace *trace;
    int quiet, steps_wanted, shown_steps;
    const char *label;
    FILE *record;
} pass_ctx;

static FILE *g_record;   /* --record-events */

static int on_line(const char *line, size_t len, int conn, void *user)
{
    pass_ctx *c = user;
    if (c->record && fprintf(c->record, "%d\t%.*s\n", conn, (int)len, line) < 0) return -1;
    if (msb_trace_feed(c->trace, line, len, conn) != 0) return -1;
    if (!c->quiet && c->trace->n_steps > c->shown_steps) {
        c->shown_steps = c->trace->n_steps;
        fprintf(stderr, "%s: step %d/%d done\n", c->label, c->shown_steps, c->steps_wanted);
    }
    return 0;
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
                    const char *label, int quiet, int json, msb_trace *t, msb_exit *ex, char *err, size_t errlen)
{
    char *cfg = json_dumps(config, JSON_COMPACT);
    if (!cfg) return ms_errf(err, errlen, "out of memory");
    msb_launch l = { .argv = prog, .bridge_dir = bridge_dir, .config_json = cfg, .phase = phase, .inject = inject,
                     .stdout_to_stderr = json };
    long long steps = json_integer_value(json_object_get(config, "steps"));
    pass_ctx c = { .trace = t, .quiet = quiet, .steps_wanted = (int)steps, .label = label, .record = g_record };
    if (g_record) fprintf(g_record, "#\tpass %s\n", label);
    int rc = msb_run_program(&l, on_line, &c, ex, err, errlen);
    free(cfg);
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
            snprintf(out, len, "%s", base_name(prog[i]));
            return;
        }
    }
    snprintf(out, len, "%s", base_name(prog[0]));
}

static json_t *exit_json(const msb_exit *ex)
{
    char how[96];
    return json_pack("{s:b, s:i, s:b, s:i, s:b, s:s}", "exited", ex->exited, "status", ex->status, "signaled",
                     ex->signaled, "signal", ex->signo, "interrupted", ex->interrupted, "text",
                     msb_exit_text(ex, how, sizeof how));
}

/* The trial of a program (memsplit profile -- ..., and doctor's first
 * step): one pass under the capacity, an uncapped pass after an OOM, the
 * rows, the table and diagnosis, recorded under a "profile" run. */
int ms_program_run_trial(const ms_program_trial_args *a, ms_program_trial *r)
{
    memset(r, 0, sizeof *r);
    char err[1024] = "";
    const char *who = a->who ? a->who : "profile";
    char bdir[4096];
    if (ms_program_bridge_dir(bdir, sizeof bdir, err, sizeof err)) {
        fprintf(stderr, "memsplit %s: %s\n", who, err);
        snprintf(r->fail, sizeof r->fail, "%s", err);
        return r->code = MS_EXIT_RUNTIME;
    }
    char *const *prog = a->prog;
    ms_program_name(prog, r->name, sizeof r->name);
    int gpu = ms_cuda_gpu_count() > 0;
    json_t *cfg = json_pack("{s:I, s:I, s:s, s:s, s:s}", "steps", (json_int_t)a->steps, "capacity",
                            (json_int_t)a->capacity, "layers", a->layers ? a->layers : "", "trace",
                            a->diag ? "off" : "tensors", "pass", "trial");
    ms_db *db = a->db;
    if (db) {
        char *cfgs = json_dumps(cfg, JSON_COMPACT);
        char devs[160];
        snprintf(devs, sizeof devs, "[{\"name\": \"%s\", \"capacity_bytes\": %zu}]", gpu ? "cuda:0" : "cpu",
                 a->capacity);
        r->run = ms_db_run_begin(db, "profile", a->cmdline, cfgs, devs, r->name, a->parent);
        free(cfgs);
        if (r->run < 0) {
            fprintf(stderr, "memsplit %s: %s\n", who, ms_db_errmsg(db));
            snprintf(r->fail, sizeof r->fail, "%s", ms_db_errmsg(db));
            json_decref(cfg);
            return r->code = MS_EXIT_RUNTIME;
        }
    }
    int quiet = a->quiet, json = a->json;
    if (!quiet) fprintf(stderr, "%s: running %s for %ld step%s%s\n", who, r->name, a->steps, a->steps == 1 ? "" : "s",
                        a->capacity ? " under the emulated capacity" : "");
    msb_trace *tp = &r->t, u;
    msb_trace_init(tp);
    msb_trace_init(&u);
    msb_exit exu;
    memset(&exu, 0, sizeof exu);
    int code = MS_EXIT_OK, have_u = 0;
    const char *status = "ok";
    char label[64];
    snprintf(label, sizeof label, "%s: trial", who);
    if (ms_program_pass(prog, bdir, cfg, "trial", gpu, label, quiet, json, tp, &r->ex, err, sizeof err) != 0) {
        fprintf(stderr, "memsplit %s: %s\n", who, err);
        snprintf(r->fail, sizeof r->fail, "%s", err);
        code = MS_EXIT_RUNTIME;
        status = "failed";
    }
    const msb_trace *t = tp;
    const char *fail = code == MS_EXIT_OK ? ms_program_failure(t, &r->ex, r->fail, sizeof r->fail) : NULL;
    if (code == MS_EXIT_OK && fail) {
        fprintf(stderr, "memsplit %s: %s\n", who, fail);
        code = t->refused && strcmp(t->refuse_what, "torch") ? MS_EXIT_USAGE : MS_EXIT_RUNTIME;
        status = r->ex.interrupted ? "interrupted" : "failed";
    }
    if (code == MS_EXIT_OK && t->oom.happened && a->second && !r->ex.interrupted) {
        if (!quiet) fprintf(stderr, "%s: out of memory; measuring the layers the trial did not reach "
                                    "in a second, uncapped pass\n", who);
        json_object_set_new(cfg, "capacity", json_integer(0));
        json_object_set_new(cfg, "pass", json_string("uncapped"));
        err[0] = '\0';
        snprintf(label, sizeof label, "%s: uncapped pass", who);
        if (ms_program_pass(prog, bdir, cfg, "trial", gpu, label, quiet, json, &u, &exu, err, sizeof err) == 0 &&
            u.model_conn >= 0)
            have_u = 1;
        else if (!quiet)
            fprintf(stderr, "%s: the uncapped pass gave nothing usable%s%s\n", who, err[0] ? ": " : "", err);
    }
    r->have_u = have_u;
    if (have_u && u.warnings[0] && !strstr(tp->warnings, u.warnings)) {   /* what the second pass said too */
        size_t n = strlen(tp->warnings);
        snprintf(tp->warnings + n, sizeof tp->warnings - n, "%suncapped pass: %s", n ? "; " : "", u.warnings);
    }
    ms_profile *p = &r->prof;
    int incomplete = 0;
    if (code == MS_EXIT_OK) {
        msb_rows_opts ro = { .capacity = a->capacity, .model_name = r->name };
        if (msb_build_profile(t, have_u ? &u : NULL, &ro, p, &incomplete, err, sizeof err) != 0) {
            fprintf(stderr, "memsplit %s: %s\n", who, err);
            snprintf(r->fail, sizeof r->fail, "%s", err);
            code = MS_EXIT_RUNTIME;
            status = "failed";
        } else {
            r->have_prof = 1;
        }
    }
    char how[96];
    msb_exit_text(&r->ex, how, sizeof how);
    if (r->have_prof) {
        FILE *out = json ? stderr : stdout;
        if (!a->brief) {
            fprintf(out, "program: %s — %s; torch %s on %s\n", r->name, t->why, t->torch_version,
                    t->cuda ? "a GPU" : "the CPU");
            ms_term_report_profile(out, p, 80);
        } else if (p->oom.happened) {
            ms_term_report_oom(out, p, 80);
        }
        if (p->oom.happened) {
            char advice[1024];
            msb_fit_advice(p, advice, sizeof advice);
            fprintf(out, "%s\n", advice);
        }
        if (!t->cuda)
            fprintf(out, "note: CPU accounting, exact for the CPU kernels this program ran; not a forecast for a GPU\n");
        if (incomplete)
            fprintf(out, "note: some layers never ran backward and no uncapped pass measured them: their rows "
                         "are partial\n");
        if (t->warnings[0]) fprintf(out, "warnings: %s\n", t->warnings);
        if (p->oom.happened) {
            code = MS_EXIT_OOM;
            status = "oom";
        } else if (r->ex.interrupted) {
            code = MS_EXIT_RUNTIME;
            status = "interrupted";
            fprintf(stderr, "memsplit %s: the program was interrupted (%s)\n", who, how);
        } else if (strcmp(t->done_reason, "steps") && (r->ex.signaled || r->ex.status != 0)) {
            code = MS_EXIT_RUNTIME;
            status = "failed";
            fprintf(stderr, "memsplit %s: the program failed (%s)%s%s\n", who, how, t->done_exc[0] ? ": " : "",
                    t->done_exc);
        }
    }
    if (db && r->run > 0) {
        int ok = 1;
        if (r->have_prof) {
            ms_mem_event *mev = NULL;
            int n = msb_trace_mem_events(t, &mev);
            if (n < 0 || ms_db_add_mem_events(db, r->run, mev, n) != 0 || ms_db_add_rows(db, r->run, p) != 0) ok = 0;
            free(mev);
        }
        char note[256];
        snprintf(note, sizeof note, "program: %s", how);
        if (ok && ms_db_run_note(db, r->run, note) != 0) ok = 0;
        if (ms_db_run_finish(db, r->run, status) != 0) ok = 0;
        if (!ok) {
            fprintf(stderr, "memsplit %s: recording the trial: %s\n", who, ms_db_errmsg(db));
            code = MS_EXIT_RUNTIME;
        } else {
            r->recorded = 1;
        }
    }
    msb_trace_free(&u);
    json_decref(cfg);
    r->status = status;
    return r->code = code;
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
    if (!r->have_prof) json_object_set_new(o, "error", json_string(r->fail));
    if (r->run > 0) json_object_set_new(o, "run_id", json_integer(r->run));
    return o;
}

void ms_program_trial_free(ms_program_trial *r)
{
    ms_profile_free(&r->prof);
    msb_trace_free(&r->t);
}

/* --ballast-only: the capacity and nothing else; where did it die? */
static int ballast_only_run(char *const *prog, size_t capacity, int json, int quiet)
{
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
    if (ms_program_pass(prog, bdir, cfg, "trial", 0, "ballast only", 1, json, &t, &ex, err, sizeof err) != 0) {
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
        if (json) {
            json_t *o = json_pack("{s:b, s:s, s:s, s:o}", "oom", t.oom.happened, "module", t.oom.module, "type",
                                  t.oom.type, "exit", exit_json(&ex));
            ms_cli_print_json(o);
            json_decref(o);
        }
    }
    msb_trace_free(&t);
    json_decref(cfg);
    return code;
}

int ms_cmd_profile_program(int argc, char **argv)
{
    enum { O_GPUMEM = 1000, O_STEPS, O_LAYERS, O_DIAG, O_NOSECOND, O_DB, O_JSON, O_QUIET, O_BALLAST, O_RECORD };
    static const struct option opts[] = {
        { "gpu-mem", required_argument, 0, O_GPUMEM }, { "steps", required_argument, 0, O_STEPS },
        { "layers", required_argument, 0, O_LAYERS }, { "diagnose-only", no_argument, 0, O_DIAG },
        { "no-second-pass", no_argument, 0, O_NOSECOND }, { "db", required_argument, 0, O_DB },
        { "json", no_argument, 0, O_JSON }, { "quiet", no_argument, 0, O_QUIET },
        { "ballast-only", no_argument, 0, O_BALLAST }, { "record-events", required_argument, 0, O_RECORD },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int dd = 1;
    while (dd < argc && strcmp(argv[dd], "--")) dd++;
    size_t capacity = 0;
    long steps = 2;
    const char *layers = "", *db_path = NULL, *record = NULL;
    int diag = 0, second = 1, json = 0, quiet = 0, ballast_only = 0, c, idx = 0;
    char err[1024];
    optind = 1;
    while ((c = getopt_long(dd, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case O_GPUMEM:
            if (ms_parse_size(optarg, &capacity, err, sizeof err) || capacity == 0) {
                fprintf(stderr, "memsplit profile: --gpu-mem: %s\n", capacity == 0 && !err[0] ? "must be above 0" : err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_STEPS: {
            char *end;
            steps = strtol(optarg, &end, 10);
            if (!*optarg || *end || steps < 1 || steps > 1000000) {
                fprintf(stderr, "memsplit profile: --steps takes a whole number from 1 to 1000000, got '%s'\n", optarg);
                return MS_EXIT_USAGE;
            }
            break;
        }
        case O_LAYERS: layers = optarg; break;
        case O_DIAG: diag = 1; break;
        case O_NOSECOND: second = 0; break;
        case O_DB: db_path = optarg; break;
        case O_JSON: json = 1; break;
        case O_QUIET: quiet = 1; break;
        case O_BALLAST: ballast_only = 1; break;
        case O_RECORD: record = optarg; break;
        case 'h': fputs(ms_profile_program_usage, stdout); return MS_EXIT_OK;
        default: fprintf(stderr, "memsplit profile: see --help\n"); return MS_EXIT_USAGE;
        }
    }
    if (optind < dd) {
        fprintf(stderr, "memsplit profile: unexpected argument '%s' before --\n", argv[optind]);
        return MS_EXIT_USAGE;
    }
    if (dd + 1 >= argc) {
        fprintf(stderr, "memsplit profile: no program after --; e.g. memsplit profile -- python train.py\n");
        return MS_EXIT_USAGE;
    }
    char *const *prog = argv + dd + 1;
    if (ballast_only) return ballast_only_run(prog, capacity, json, quiet);
    if (record && !(g_record = fopen(record, "w"))) {
        fprintf(stderr, "memsplit profile: --record-events %s: %s\n", record, strerror(errno));
        return MS_EXIT_RUNTIME;
    }
    ms_db *db = NULL;
    if (db_path && !(db = ms_db_open(db_path, 1, err, sizeof err))) {
        fprintf(stderr, "memsplit profile: %s\n", err);
        return MS_EXIT_RUNTIME;
    }
    char *cmdline = ms_cli_cmdline(argc, argv);
    ms_program_trial_args a = { .prog = prog, .capacity = capacity, .steps = steps, .layers = layers, .diag = diag,
                                .second = second, .json = json, .quiet = quiet, .db = db, .cmdline = cmdline,
                                .who = "profile" };
    ms_program_trial *r = calloc(1, sizeof *r);
    int code = r ? ms_program_run_trial(&a, r) : MS_EXIT_RUNTIME;
    free(cmdline);
    if (r && db && r->run > 0 && !quiet && r->recorded)
        fprintf(stderr, "profile: recorded as run %lld in %s\n", (long long)r->run, db_path);
    if (json && r) {
        json_t *o = ms_program_trial_json(r);
        if (o) {
            ms_cli_print_json(o);
            json_decref(o);
        }
    }
    if (db) ms_db_close(db);
    if (r) ms_program_trial_free(r);
    free(r);
    if (g_record && fclose(g_record) != 0) {
        fprintf(stderr, "memsplit profile: --record-events: %s\n", strerror(errno));
        code = MS_EXIT_RUNTIME;
    }
    g_record = NULL;
    return code;
}
