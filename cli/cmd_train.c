/* cmd_train.c — `memsplit train`: train on one device, with progress,
 * checkpoints and a JSON summary. */
#include "cli/args.h"
#include "cli/common.h"
#include "cli/steplog.h"
#include "cli/train_ktimes.h"
#include "cli/program.h"
#include "trainer/checkpoint.h"
#include "trainer/session.h"
#include "reports/db.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
    "usage: memsplit train (--preset NAME | --config FILE) [options]\n"
    "       memsplit train --plan FILE [options] -- PROGRAM [ARGS...]   (your own\n"
    "                    program; memsplit train --help -- PROGRAM lists its options)\n"
    "\n"
    "Train the model on one device and print progress (step, loss, tokens/s,\n"
    "peak memory) on stderr.\n"
    "\n"
    "%s"
    "Training options:\n"
    MS_CLI_RUN_HELP
    "  --checkpoint-dir DIR write checkpoints there (step-NNNNNNNN.ckpt); on one\n"
    "                       device every one is kept, with --plan the newest two\n"
    "  --checkpoint-every N a checkpoint every N steps (default: only at the end)\n"
    "  --resume             continue from the newest checkpoint in --checkpoint-dir\n"
    "                       that verifies (a corrupt one is skipped, said); one of\n"
    "                       another job (seed, data, global batch, ...) is refused\n"
    "  --plan FILE          train with a plan (memsplit plan -o FILE) over several\n"
    "                       devices: --device cpu or cuda:K gives virtual devices\n"
    "                       of the plan's capacities on it; by default distinct\n"
    "                       GPUs when there are enough\n"
    "  --db FILE            record the run, its steps and peaks in this SQLite\n"
    "                       database (with --plan, an OOM is re-planned from the\n"
    "                       plan's profile in FILE)\n"
    MS_CLI_DB_TIMEOUT_HELP
    "  --inject-oom S:D:SIZE  with --plan, a testing aid: at step S device D\n"
    "                       shrinks to SIZE (as if another process took memory),\n"
    "                       or with SIZE = P%%, keeps its reserve and P%% of what\n"
    "                       its tensors took at their peak\n"
    "  --kernel-times FILE  trace the last --kernel-steps steps through CUPTI and\n"
    "                       write where their time went to FILE (JSON: ms per step\n"
    "                       and %% of the step per kernel family, busy time, the gap\n"
    "                       of launch/host overhead, the longest kernels); a CUDA\n"
    "                       device only. Traced steps are not in tokens/s\n"
    "  --kernel-steps N     how many steps --kernel-times traces (default 3)\n"
    "  --json               print one JSON summary object on stdout\n"
    "  --quiet              no progress lines\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 trained; 1 usage or configuration error (also a plan for\n"
    "another model); 2 runtime error (device, data, checkpoint, or a record the\n"
    "database never took); 3 out of memory (the message names the layer, phase,\n"
    "category and bytes).\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A checkpoint is written after this step (numbered from 1). */
static int checkpoint_after(const ms_config *c, int step)
{
    return c->checkpoint_dir[0] && ((c->checkpoint_every && step % c->checkpoint_every == 0) || step == c->steps);
}

static json_t *device_json(const ms_device *d)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(d->name));
    json_object_set_new(o, "capacity_bytes", d->capacity == SIZE_MAX ? json_null() : json_integer((json_int_t)d->capacity));
    json_object_set_new(o, "peak_bytes", json_integer((json_int_t)d->peak_total));
    json_object_set_new(o, "peak_by_category", ms_cli_cat_json(d->peak));
    json_object_set_new(o, "at_peak_by_category", ms_cli_cat_json(d->at_peak));
    return o;
}

/* The model's shape, for FLOPs per token (bench/README.md) and for readers
 * that compare runs of the same shape. */
static json_t *shape_json(const ms_config *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "n_layer", json_integer(c->n_layer));
    json_object_set_new(o, "d_model", json_integer(c->d_model));
    json_object_set_new(o, "n_head", json_integer(c->n_head));
    json_object_set_new(o, "seq_len", json_integer(c->seq_len));
    json_object_set_new(o, "vocab", json_integer(c->vocab));
    json_object_set_new(o, "batch", json_integer(c->batch));
    json_object_set_new(o, "accum", json_integer(c->accum));
    json_object_set_new(o, "mlp_ratio", json_integer(c->mlp_ratio));
    json_object_set_new(o, "tied", json_boolean(c->tied));
    return o;
}

int ms_cmd_train(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)      /* `-- PROGRAM ...`: the user's own program with a plan */
        if (!strcmp(argv[i], "--")) return ms_cmd_train_program(argc, argv);
    enum { O_CKDIR = 1000, O_CKEVERY, O_RESUME, O_JSON, O_QUIET, O_MODEL, O_PLAN, O_DB, O_INJECT, O_DBTIME, O_KTIMES, O_KSTEPS };
    static const struct option opts[] = {
        { "preset", required_argument, 0, O_MODEL }, { "config", required_argument, 0, O_MODEL },
        { "set", required_argument, 0, O_MODEL }, { "device", required_argument, 0, O_MODEL },
        { "precision", required_argument, 0, O_MODEL }, { "gpu-mem", required_argument, 0, O_MODEL },
        { "steps", required_argument, 0, O_MODEL }, { "batch", required_argument, 0, O_MODEL },
        { "data", required_argument, 0, O_MODEL },
        { "checkpoint-dir", required_argument, 0, O_CKDIR }, { "checkpoint-every", required_argument, 0, O_CKEVERY },
        { "resume", no_argument, 0, O_RESUME }, { "json", no_argument, 0, O_JSON },
        { "quiet", no_argument, 0, O_QUIET }, { "help", no_argument, 0, 'h' },
        { "plan", required_argument, 0, O_PLAN }, { "db", required_argument, 0, O_DB },
        { "inject-oom", required_argument, 0, O_INJECT }, { "db-timeout", required_argument, 0, O_DBTIME },
        { "kernel-times", required_argument, 0, O_KTIMES }, { "kernel-steps", required_argument, 0, O_KSTEPS },
        { 0, 0, 0, 0 },
    };
    ms_cli_model_args ma;
    ms_cli_model_args_init(&ma);
    const char *ckdir = NULL, *plan_path = NULL, *db_path = NULL, *inject = NULL;
    int ckevery = -1, resume = 0, json = 0, quiet = 0, idx = 0, c, db_timeout_ms = MS_DB_BUSY_MS;
    char err[512];
    ms_train_kt kt;
    ms_train_kt_init(&kt);
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case O_MODEL:
            if (ms_cli_model_opt(&ma, opts[idx].name, optarg, err, sizeof err) < 0) {
                fprintf(stderr, "memsplit train: %s\n", err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_CKDIR: ckdir = optarg; break;
        case O_CKEVERY:
            if (ms_arg_key_int("--checkpoint-every", "checkpoint.every", optarg, &ckevery, err, sizeof err)) {
                fprintf(stderr, "memsplit train: %s\n", err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_RESUME: resume = 1; break;
        case O_PLAN: plan_path = optarg; break;
        case O_DB: db_path = optarg; break;
        case O_INJECT: inject = optarg; break;
        case O_DBTIME:
            if (ms_arg_seconds("--db-timeout", optarg, 3600, &db_timeout_ms, err, sizeof err)) {
                fprintf(stderr, "memsplit train: %s\n", err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_KTIMES: kt.path = optarg; break;
        case O_KSTEPS:
            if (ms_arg_int("--kernel-steps", optarg, 1, 1000, &kt.steps, err, sizeof err)) {
                fprintf(stderr, "memsplit train: %s\n", err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_JSON: json = 1; break;
        case O_QUIET: quiet = 1; break;
        case 'h': printf(usage, ms_cli_model_help); return MS_EXIT_OK;
        default: fprintf(stderr, "memsplit train: see --help\n"); return MS_EXIT_USAGE;
        }
    }
    if (optind < argc) { fprintf(stderr, "memsplit train: unexpected argument '%s'\n", argv[optind]); return MS_EXIT_USAGE; }
    ms_config cfg;
    if (ms_cli_build_config(&ma, &cfg, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s\n", err);
        return MS_EXIT_USAGE;
    }
    if (ckdir) snprintf(cfg.checkpoint_dir, sizeof cfg.checkpoint_dir, "%s", ckdir);
    if (ckevery >= 0) cfg.checkpoint_every = ckevery;
    if (resume) cfg.resume = 1;
    if (cfg.resume && !cfg.checkpoint_dir[0]) { fprintf(stderr, "memsplit train: --resume needs --checkpoint-dir\n"); return MS_EXIT_USAGE; }

    if (kt.path && plan_path) { fprintf(stderr, "memsplit train: --kernel-times is for one device, not --plan\n"); return MS_EXIT_USAGE; }
    if (ms_train_kt_check(&kt, &cfg, 0, err, sizeof err)) { fprintf(stderr, "memsplit train: %s\n", err); return MS_EXIT_USAGE; }
    if (inject && !plan_path) { fprintf(stderr, "memsplit train: --inject-oom goes with --plan\n"); return MS_EXIT_USAGE; }
    if (plan_path) {
        ms_train_plan_args pa = { plan_path, ma.device, db_path, cfg.checkpoint_dir[0] ? cfg.checkpoint_dir : NULL,
                                  cfg.checkpoint_every, cfg.resume, json, quiet, db_timeout_ms, { 0, 0, 0, 0 } };
        if (inject && ms_arg_inject(inject, &pa.inject, err, sizeof err)) {
            fprintf(stderr, "memsplit train: %s\n", err);
            return MS_EXIT_USAGE;
        }
        return ms_cmd_train_plan(&cfg, &pa);
    }

    ms_db *db = NULL;
    ms_steplog *steps = NULL;
    int64_t run = 0;
    int db_failed = 0;
    if (db_path) {
        db = ms_db_open(db_path, 1, err, sizeof err);
        if (!db) { fprintf(stderr, "memsplit train: %s\n", err); return MS_EXIT_RUNTIME; }
        ms_db_set_busy_timeout(db, db_timeout_ms);
        char *cmd = ms_cli_cmdline(argc, argv), *ini = ms_config_to_ini(&cfg);
        run = ms_db_run_begin(db, "train", cmd, ini, NULL, cfg.preset[0] ? cfg.preset : "custom", 0);
        free(cmd);
        free(ini);
        if (run < 0) { fprintf(stderr, "memsplit train: %s\n", ms_db_errmsg(db)); ms_db_close(db); return MS_EXIT_RUNTIME; }
        steps = ms_steplog_new(db, run, db_timeout_ms, quiet ? NULL : stderr);
    }
    ms_session s;
    int rc = ms_session_open(&s, &cfg, NULL);
    /* here, not in the session: a trial never picks (matmul.cu); the first step times, the rest keep */
    s.dev.k.matmul_pick = cfg.matmul_pick;
    s.use_graph = cfg.cuda_graph;
    if (rc == MS_OK && cfg.resume) {
        char path[1024], note[1200];
        rc = ms_session_resume(&s, cfg.checkpoint_dir, path, sizeof path, note, sizeof note);
        if (note[0] && !quiet) fprintf(stderr, "train: %s\n", note);
        if (rc == MS_OK && !quiet) fprintf(stderr, "resumed from %s at step %d\n", path, s.step);
        if (rc == MS_OK && ms_train_kt_check(&kt, &cfg, s.step, err, sizeof err)) {
            fprintf(stderr, "memsplit train: %s\n", err);
            ms_session_close(&s);
            return MS_EXIT_USAGE;
        }
    }
    int log_every = cfg.log_every > 0 ? cfg.log_every : (cfg.steps <= 20 ? 1 : cfg.steps / 20);
    double loss_first = NAN, loss_last = NAN, t_start = now_s(), t_steady = 0, tokens_steady = 0;
    int first_step = s.step, steps_run = 0, timed_steps = 0;
    size_t tokens_per_step = (size_t)cfg.accum * cfg.batch * cfg.seq_len;
    json_t *losses = json_array();
    while (rc == MS_OK && s.step < cfg.steps) {
        int traced = ms_train_kt_traced(&kt, s.step);
        ms_train_kt_before_step(&kt, s.step);
        /* the next step may be queued before this one's loss is read where
         * it follows at once: no checkpoint between, and not the first
         * traced step (its kernels would run before tracing starts) */
        s.launch_ahead = cfg.launch_ahead && s.step + 1 < cfg.steps && !checkpoint_after(&cfg, s.step + 1) &&
                         ms_train_kt_traced(&kt, s.step + 1) == traced;
        double t0 = now_s();
        rc = ms_session_step(&s);
        if (rc) break;
        double dt = now_s() - t0;
        ms_train_kt_after_step(&kt, dt);
        steps_run++;
        /* the first step allocates everything, and traced steps pay for
         * the tracing: leave them out of the speed */
        if ((steps_run > 1 || cfg.steps - first_step == 1) && !traced) {
            t_steady += dt;
            tokens_steady += tokens_per_step;
            timed_steps++;
        }
        if (steps_run == 1) loss_first = s.last_loss;
        loss_last = s.last_loss;
        json_array_append_new(losses, json_real(s.last_loss));
        if (steps) {
            char *peaks = ms_cli_peaks_json(&s.dev, 1);
            ms_step_rec sr = { s.step, s.last_loss, dt * 1e3, tokens_per_step / dt, cfg.lr,
                               cfg.precision == MS_PREC_FP16 ? s.opt.loss_scale : 0, !s.last_opt.applied, peaks };
            ms_steplog_add(steps, &sr);
            free(peaks);
        }
        if (!quiet && (s.step % log_every == 0 || s.step == cfg.steps || steps_run == 1)) {
            char pk[32];
            fprintf(stderr, "step %*d/%d | loss %.4f | %8.0f tok/s | %7.1f ms | peak %s%s\n",
                    (int)snprintf(NULL, 0, "%d", cfg.steps), s.step, cfg.steps, s.last_loss,
                    tokens_per_step / dt, dt * 1e3, ms_fmt_bytes(s.dev.peak_total, pk, sizeof pk),
                    s.last_opt.applied ? "" : " | step skipped (non-finite gradients)");
        }
        if (checkpoint_after(&cfg, s.step)) {
            char path[1024];
            rc = ms_session_checkpoint(&s, cfg.checkpoint_dir, path, sizeof path);
            if (rc == MS_OK && !quiet) fprintf(stderr, "checkpoint %s\n", path);
        }
    }
    int exit_code = MS_EXIT_OK;
    if (rc != MS_OK) {
        /* the config was validated above: what fails now is the device, the
         * data or a checkpoint (2), or memory (3) */
        fprintf(stderr, "memsplit train: %s\n", s.err[0] ? s.err : "failed");
        exit_code = rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
    }
    if (ms_train_kt_finish(&kt, &cfg, s.dev.ops ? s.dev.name : NULL, tokens_per_step, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s\n", err);
        if (exit_code == MS_EXIT_OK) exit_code = MS_EXIT_RUNTIME;
    }
    double tps = t_steady > 0 ? tokens_steady / t_steady : 0;
    if (!quiet && s.graph.why_not[0]) /* set only where a graph was tried: train on a GPU */
        fprintf(stderr, "train: ran without a CUDA graph: %s\n", s.graph.why_not);
    else if (!quiet && s.graph.captures)
        fprintf(stderr, "train: steps replayed a CUDA graph (%d captured; the last took %.1f ms to capture, %.1f MiB)\n",
                s.graph.captures, s.graph.capture_ms, s.graph.bytes / 1048576.0);
    if (!quiet && rc == MS_OK) {
        char pk[32];
        fprintf(stderr, "done: %d steps in %.2f s, %.0f tokens/s, peak %s on %s\n", steps_run, now_s() - t_start, tps,
                ms_fmt_bytes(s.dev.peak_total, pk, sizeof pk), s.dev.name);
    }
    if (db) {
        if (ms_steplog_finish(steps, err, sizeof err)) {
            fprintf(stderr, "memsplit train: %s\n", err);
            db_failed++;
        }
        if (s.dev.ops) {
            ms_device_peak dp;
            memset(&dp, 0, sizeof dp);
            snprintf(dp.name, sizeof dp.name, "%.31s", s.dev.name);
            dp.capacity = s.dev.capacity == SIZE_MAX ? 0 : s.dev.capacity;
            dp.measured_peak = s.dev.peak_total;
            for (int c = 0; c < MS_CAT_N; c++) dp.measured_by_cat[c] = s.dev.peak[c];
            ms_cli_recorded(ms_db_add_device_peak(db, run, &dp), db, "train", "the device's peak", &db_failed);
        }
        ms_cli_recorded(ms_db_run_finish(db, run, rc == MS_OK ? "ok" : rc == MS_EOOM ? "oom" : "failed"), db, "train",
                        "the run's end", &db_failed);
        ms_steplog_free(steps);
        ms_db_close(db);
        if (db_failed && exit_code == MS_EXIT_OK) exit_code = MS_EXIT_RUNTIME;
    }
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "ok", json_boolean(rc == MS_OK));
        json_object_set_new(o, "preset", json_string(cfg.preset));
        json_object_set_new(o, "precision", json_string(ms_precision_name(cfg.precision)));
        json_object_set_new(o, "steps", json_integer(s.step));
        json_object_set_new(o, "steps_run", json_integer(steps_run));
        json_object_set_new(o, "loss_first", isnan(loss_first) ? json_null() : json_real(loss_first));
        json_object_set_new(o, "loss_last", isnan(loss_last) ? json_null() : json_real(loss_last));
        json_object_set_new(o, "losses", losses);
        losses = NULL;
        json_object_set_new(o, "tokens_per_s", json_real(tps));
        json_object_set_new(o, "timed_steps", json_integer(timed_steps));
        json_object_set_new(o, "step_ms", json_real(timed_steps ? t_steady / timed_steps * 1e3 : 0.0));
        json_object_set_new(o, "tokens_per_step", json_integer((json_int_t)tokens_per_step));
        json_object_set_new(o, "shape", shape_json(&cfg));
        json_object_set_new(o, "kernel_times", kt.path ? json_string(kt.path) : json_null());
        json_object_set_new(o, "kernel_times_error", kt.error[0] ? json_string(kt.error) : json_null());
        json_object_set_new(o, "skipped_steps", json_integer(s.opt.skipped));
        json_object_set_new(o, "loss_scale", json_real(s.opt.loss_scale));
        json_t *gj = json_object();
        json_object_set_new(gj, "enabled", json_boolean(s.use_graph));
        json_object_set_new(gj, "captures", json_integer(s.graph.captures));
        json_object_set_new(gj, "thrown_away", json_integer(s.graph.thrown));
        json_object_set_new(gj, "bytes", json_integer((json_int_t)s.graph.bytes));
        json_object_set_new(gj, "capture_ms", json_real(s.graph.capture_ms));
        json_object_set_new(gj, "launched_ahead", json_integer(s.launched_ahead));
        const char *no_graph = s.graph.why_not[0] ? s.graph.why_not
                               : s.use_graph && s.dev.backend != MS_BACKEND_CUDA ? "CUDA graphs need a GPU" : NULL;
        json_object_set_new(gj, "not_used", no_graph ? json_string(no_graph) : json_null());
        json_object_set_new(o, "cuda_graph", gj);
        json_t *pk = json_object(), *devs = json_array();
        if (s.dev.ops) {
            json_object_set_new(pk, s.dev.name, json_integer((json_int_t)s.dev.peak_total));
            json_array_append_new(devs, device_json(&s.dev));
            json_object_set_new(o, "peak_by_category", ms_cli_cat_json(s.dev.peak));
        }
        json_object_set_new(o, "peak_bytes", pk);
        json_object_set_new(o, "devices", devs);
        if (rc == MS_EOOM) {
            const ms_dev_oom *x = &s.dev.oom;
            json_t *oj = json_object();
            json_object_set_new(oj, "layer", json_integer(x->layer));
            json_object_set_new(oj, "layer_name", json_string(x->layer >= 0 && x->layer < s.model.n_layers ? s.model.layers[x->layer].name : ""));
            json_object_set_new(oj, "phase", json_string(ms_phase_name(x->phase)));
            json_object_set_new(oj, "category", json_string(ms_cat_name(x->cat)));
            json_object_set_new(oj, "requested_bytes", json_integer((json_int_t)x->requested));
            json_object_set_new(oj, "capacity_bytes", json_integer((json_int_t)x->capacity));
            json_object_set_new(oj, "live_bytes", ms_cli_cat_json(x->live));
            json_object_set_new(o, "oom", oj);
        } else {
            json_object_set_new(o, "oom", json_null());
        }
        if (rc != MS_OK) json_object_set_new(o, "error", json_string(s.err));
        ms_cli_print_json(o);
        json_decref(o);
    }
    json_decref(losses);
    ms_session_close(&s);
    return exit_code;
}
