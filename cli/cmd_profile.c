/* cmd_profile.c — `memsplit profile`: the single-device trial, the per-layer
 * table, the OOM diagnosis, the ledger cross-check; stored in SQLite. */
#include "cli/args.h"
#include "cli/common.h"
#include "cli/program.h"
#include "trainer/nvtx_ranges.h"
#include "vocab/profile_json.h"
#include "profiler/trial.h"
#include "reports/db.h"
#include "reports/term_report.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: memsplit profile (--preset NAME | --config FILE) [options]\n"
    "       memsplit profile [options] -- PROGRAM [ARGS...]   (your own program;\n"
    "                    memsplit profile --help -- PROGRAM lists its options)\n"
    "\n"
    "Run a training trial on one device and record, per layer, the bytes of\n"
    "parameters, master weights, gradients, optimizer state, saved activations\n"
    "and transients, forward and backward, with times. If the trial runs out of\n"
    "memory, say where and why (layer, phase, bytes requested, what was live),\n"
    "then measure the layers it did not reach in isolation so every layer has a\n"
    "row. On a GPU, CUPTI records every allocation and the profile prints how\n"
    "the allocator's ledger and CUPTI's two ledgers agree.\n"
    "\n"
    "%s"
    "Profile options:\n"
    "  --device DEV         cpu or cuda:N\n"
    "  --gpu-mem SIZE       emulate a device of SIZE bytes (512MiB, 24GiB, ...)\n"
    "  --precision P        fp32, bf16 or fp16: the trial's; or all: the trial runs\n"
    "                       the config's precision and the others are isolated\n"
    "  --batch A[,B]        micro-batch size(s) in sequences: the trial runs at A,\n"
    "                       B is also measured (the planner's two-point fit)\n"
    "  --steps N            training steps in the trial (default 1)\n"
    "  --db FILE            record the run in this SQLite database (created if new)\n"
    MS_CLI_DB_TIMEOUT_HELP
    "  --no-cupti           do not trace with CUPTI on a GPU\n"
    "  --json               print the profile as one JSON object on stdout\n"
    "                       (the table then goes to stderr)\n"
    "  --quiet              no progress lines\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 the model fits; 3 it ran out of memory (diagnosis printed,\n"
    "profile complete); 1 usage or configuration error; 2 runtime error.\n";

static int parse_batches(const char *s, int out[2], int *n)
{
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || a < 1 || a > (1 << 20)) return -1;
    out[0] = (int)a;
    *n = 1;
    if (*end == ',') {
        const char *q = end + 1;
        long b = strtol(q, &end, 10);
        if (end == q || b < 1 || b > (1 << 20) || b == a) return -1;
        out[1] = (int)b;
        *n = 2;
    }
    return *end ? -1 : 0;
}

static json_t *ledger_json(const ms_ledger_check *k)
{
    json_t *o = json_object();
    json_object_set_new(o, "cupti", json_boolean(k->done));
    if (k->done) {
        json_object_set_new(o, "allocator_allocs", json_integer(k->allocs));
        json_object_set_new(o, "allocator_bytes", json_integer((json_int_t)k->bytes_allocator));
        json_object_set_new(o, "callback_matched", json_integer(k->matched_callback));
        json_object_set_new(o, "activity_matched", json_integer(k->matched_activity));
        json_object_set_new(o, "frees", json_integer(k->frees));
        json_object_set_new(o, "frees_callback_matched", json_integer(k->frees_matched_callback));
        json_object_set_new(o, "frees_activity_matched", json_integer(k->frees_matched_activity));
        json_object_set_new(o, "cupti_only_allocs", json_integer(k->cupti_only));
        json_object_set_new(o, "failed_alloc_seen_by_cupti", json_integer(k->fail_seen_by_cupti));
        json_object_set_new(o, "agree", json_boolean(k->matched_callback == k->allocs && k->matched_activity == k->allocs &&
                                                     k->frees_matched_callback == k->frees &&
                                                     k->frees_matched_activity == k->frees && k->cupti_only == 0));
    }
    if (k->detail[0]) json_object_set_new(o, "detail", json_string(k->detail));
    return o;
}

static void print_ledgers(FILE *f, const ms_ledger_check *k, const char *dev)
{
    if (!k->done) {
        fprintf(f, "ledgers: %s: the trainer's allocator ledger only%s%s\n", dev,
                strncmp(dev, "cuda", 4) ? " (CUPTI needs a GPU)" : "", k->detail[0] ? "; " : "");
        if (k->detail[0]) fprintf(f, "  %s\n", k->detail);
        return;
    }
    int agree = k->matched_callback == k->allocs && k->matched_activity == k->allocs &&
                k->frees_matched_callback == k->frees && k->frees_matched_activity == k->frees && !k->cupti_only;
    fprintf(f, "ledgers: %s — allocator %d allocations (%llu bytes), %d frees\n", agree ? "AGREE" : "DIFFER",
            k->allocs, (unsigned long long)k->bytes_allocator, k->frees);
    fprintf(f, "  CUPTI callbacks: %d/%d allocations, %d/%d frees matched by address and bytes\n",
            k->matched_callback, k->allocs, k->frees_matched_callback, k->frees);
    fprintf(f, "  CUPTI MEMORY2:   %d/%d allocations, %d/%d frees matched\n", k->matched_activity, k->allocs,
            k->frees_matched_activity, k->frees);
    if (k->cupti_only) fprintf(f, "  %d allocations seen by CUPTI that the allocator did not make\n", k->cupti_only);
    if (k->fail_seen_by_cupti) fprintf(f, "  the failed allocation was seen by CUPTI with the same bytes\n");
    if (k->detail[0]) fprintf(f, "  %s\n", k->detail);
}

int ms_cmd_profile(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)      /* `-- PROGRAM ...`: the user's own program */
        if (!strcmp(argv[i], "--")) return ms_cmd_profile_program(argc, argv);
    enum { O_MODEL = 1000, O_PREC, O_BATCH, O_STEPS, O_DB, O_NOCUPTI, O_JSON, O_QUIET, O_DBTIME };
    static const struct option opts[] = {
        { "preset", required_argument, 0, O_MODEL }, { "config", required_argument, 0, O_MODEL },
        { "set", required_argument, 0, O_MODEL }, { "device", required_argument, 0, O_MODEL },
        { "gpu-mem", required_argument, 0, O_MODEL }, { "data", required_argument, 0, O_MODEL },
        { "precision", required_argument, 0, O_PREC }, { "batch", required_argument, 0, O_BATCH },
        { "steps", required_argument, 0, O_STEPS }, { "db", required_argument, 0, O_DB },
        { "no-cupti", no_argument, 0, O_NOCUPTI }, { "json", no_argument, 0, O_JSON },
        { "quiet", no_argument, 0, O_QUIET }, { "db-timeout", required_argument, 0, O_DBTIME },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    ms_cli_model_args ma;
    ms_cli_model_args_init(&ma);
    ms_trial_opts to;
    memset(&to, 0, sizeof to);
    to.steps = 1;
    to.use_cupti = 1;
    const char *prec = NULL, *db_path = NULL;
    int batches[2], n_batch = 0, json = 0, quiet = 0, idx = 0, c, db_timeout_ms = MS_DB_BUSY_MS;
    char err[512];
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case O_MODEL:
            if (ms_cli_model_opt(&ma, opts[idx].name, optarg, err, sizeof err) < 0) {
                fprintf(stderr, "memsplit profile: %s\n", err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_PREC: prec = optarg; break;
        case O_BATCH:
            if (parse_batches(optarg, batches, &n_batch)) {
                fprintf(stderr, "memsplit profile: --batch takes N or A,B (two different sizes >= 1), got '%s'\n", optarg);
                return MS_EXIT_USAGE;
            }
            break;
        case O_STEPS:
            if (ms_arg_int("--steps", optarg, 1, 1000000, &to.steps, err, sizeof err)) {
                fprintf(stderr, "memsplit profile: %s\n", err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_DB: db_path = optarg; break;
        case O_DBTIME:
            if (ms_arg_seconds("--db-timeout", optarg, 3600, &db_timeout_ms, err, sizeof err)) {
                fprintf(stderr, "memsplit profile: %s\n", err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_NOCUPTI: to.use_cupti = 0; break;
        case O_JSON: json = 1; break;
        case O_QUIET: quiet = 1; break;
        case 'h': printf(usage, ms_cli_model_help); return MS_EXIT_OK;
        default: fprintf(stderr, "memsplit profile: see --help\n"); return MS_EXIT_USAGE;
        }
    }
    if (optind < argc) { fprintf(stderr, "memsplit profile: unexpected argument '%s'\n", argv[optind]); return MS_EXIT_USAGE; }
    ms_config cfg;
    if (ms_cli_build_config(&ma, &cfg, err, sizeof err)) {
        fprintf(stderr, "memsplit profile: %s\n", err);
        return MS_EXIT_USAGE;
    }
    to.precisions[0] = cfg.precision;
    to.n_prec = 1;
    if (prec && !strcmp(prec, "all")) {
        for (int p = 0; p < 3; p++)
            if (p != (int)cfg.precision) to.precisions[to.n_prec++] = p;
    } else if (prec) {
        ms_precision p;
        if (ms_precision_parse(prec, &p)) { fprintf(stderr, "memsplit profile: --precision must be fp32, bf16, fp16 or all\n"); return MS_EXIT_USAGE; }
        to.precisions[0] = p;
        cfg.precision = p;
    }
    if (n_batch) {
        to.batches[0] = batches[0];
        to.batches[1] = batches[1];
        to.n_batch = n_batch;
        cfg.batch = batches[0];
    } else {
        to.batches[0] = cfg.batch;
        to.n_batch = 1;
    }
    to.progress = quiet ? NULL : stderr;
    if (!strncmp(cfg.device, "cuda", 4) && to.use_cupti && ms_nvtx_prepare(err, sizeof err) != 0 && !quiet)
        fprintf(stderr, "profile: warning: %s\n", err);

    /* the run is recorded before the trial starts: a killed profile shows as incomplete */
    ms_db *db = NULL;
    int64_t run = 0;
    if (db_path) {
        db = ms_db_open(db_path, 1, err, sizeof err);
        if (!db) { fprintf(stderr, "memsplit profile: %s\n", err); return MS_EXIT_RUNTIME; }
        ms_db_set_busy_timeout(db, db_timeout_ms);
        char *cmdline = ms_cli_cmdline(argc, argv), *ini = ms_config_to_ini(&cfg);
        char devs[128];
        snprintf(devs, sizeof devs, "[{\"name\": \"%s\", \"capacity_bytes\": %zu}]", cfg.device, cfg.gpu_mem);
        run = ms_db_run_begin(db, "profile", cmdline, ini, devs, cfg.preset[0] ? cfg.preset : "custom", 0);
        free(cmdline);
        free(ini);
        if (run < 0) { fprintf(stderr, "memsplit profile: %s\n", ms_db_errmsg(db)); ms_db_close(db); return MS_EXIT_RUNTIME; }
    }
    ms_trial_result r;
    int rc = ms_trial_run(&cfg, &to, &r);
    int code = rc == MS_OK ? MS_EXIT_OK : rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
    if (rc == MS_EFAIL) {
        fprintf(stderr, "memsplit profile: %s\n", r.err); /* the config was checked: device or data (2) */
    } else {
        FILE *out = json ? stderr : stdout;
        ms_term_report_profile(out, &r.prof, 80);
        print_ledgers(out, &r.check, r.prof.device);
    }
    if (db) {
        int ok = 1;
        if (rc != MS_EFAIL) {
            if (ms_db_add_mem_events(db, run, r.events, r.n_events) != 0) ok = 0;
            if (ok && ms_db_add_rows(db, run, &r.prof) != 0) ok = 0;
        }
        if (!ok) { fprintf(stderr, "memsplit profile: recording in %s: %s\n", db_path, ms_db_errmsg(db)); code = MS_EXIT_RUNTIME; }
        if (ms_db_run_finish(db, run, rc == MS_OK ? "ok" : rc == MS_EOOM ? "oom" : "failed")) {
            fprintf(stderr, "memsplit profile: recording the run's end in %s: %s\n", db_path, ms_db_errmsg(db));
            code = MS_EXIT_RUNTIME;
            ok = 0;
        }
        if (!quiet && ok) fprintf(stderr, "profile: recorded as run %lld in %s\n", (long long)run, db_path);
        ms_db_close(db);
    }
    if (json && rc != MS_EFAIL) {
        json_t *o = ms_profile_to_json(&r.prof);
        if (o) {
            json_object_set_new(o, "ledgers", ledger_json(&r.check));
            if (run > 0) json_object_set_new(o, "run_id", json_integer(run));
            json_object_set_new(o, "trial_step_ms", json_real(r.step_ms));
            ms_cli_print_json(o);
            json_decref(o);
        }
    }
    ms_trial_free(&r);
    return code;
}
