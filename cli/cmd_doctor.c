/* cmd_doctor.c — `memsplit doctor`: trial → diagnosis → plan → training,
 * all recorded in one database, with progress throughout; and `memsplit
 * train --plan` (the last part on its own). */
#include "cli/common.h"
#include "cli/program.h"
#include "cli/doctor_ranks.h"
#include "cli/rerun.h"
#include "planner/explain.h"
#include "planner/plan_json.h"
#include "profiler/nvtx_ranges.h"
#include "vocab/profile_json.h"
#include "profiler/trial.h"
#include "reports/term_report.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: memsplit doctor (--preset NAME | --config FILE) --gpus N [options]\n"
    "\n"
    "The whole loop: a training trial on one device (memsplit profile); if the\n"
    "model fits, training on that device; if not, the diagnosis, a plan over N\n"
    "devices (memsplit plan), and training with that plan, automatically. An OOM\n"
    "during training is caught, recorded, the model re-planned for the capacity\n"
    "that remains, and training resumes from the last checkpoint.\n"
    "\n"
    "%s"
    "Doctor options:\n"
    "  --gpus N             devices to plan for (default 2)\n"
    "  --gpu-mem SIZE[,..]  capacity of the trial's device and of each planned\n"
    "                       device (one size, or one per device)\n"
    "  --device DEV         cpu: N virtual devices on the CPU backend; cuda:K: N\n"
    "                       virtual devices on GPU K; default: distinct GPUs when\n"
    "                       there are N, else virtual devices on GPU 0, else CPU\n"
    "  --steps S            training steps (default: the config's)\n"
    "  --db FILE            run database (default memsplit.db)\n"
    "  --checkpoint-dir DIR checkpoints for recovery (default FILE.ckpt beside --db;\n"
    "                       the newest two are kept)\n"
    "  --checkpoint-every K steps between checkpoints (default 5; 0: none, and a\n"
    "                       recovery restarts from step 0)\n"
    "  --headroom F         fraction of each device the plan keeps free, 0.05 or\n"
    "                       5%% (default 5%%; also for re-plans after an OOM)\n"
    "  --inject-oom S:D:SIZE  testing aid: at step S, device D shrinks to SIZE, or\n"
    "                       with SIZE = P%%, keeps its reserve and P%% of what its\n"
    "                       tensors took at their peak\n"
    "  --launch CMD         train as MPI ranks, one per device, with CMD as the\n"
    "                       launcher (e.g. \"mpirun\", \"mpirun --oversubscribe\", \"srun\";\n"
    "                       words split at spaces; doctor adds -n N): doctor runs it as\n"
    "                       its child, and when a rank dies re-plans without its\n"
    "                       device and resumes from the last checkpoint\n"
    "  --replicas D         data-parallel copies of the pipeline: a number or any\n"
    "                       (default 1; more than one needs --launch)\n"
    "  --zero Z             on | off | any: ZeRO-1 over the replicas (default any)\n"
    "  --inject-kill S:R    with --launch, a testing aid: in step S, rank R kills\n"
    "                       itself with SIGKILL mid-step\n"
    "  --json               one JSON object on stdout: trial, plan, train\n"
    "  --quiet              no progress lines\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 trained; 3 out of memory and no plan fits (the message says\n"
    "what would); 1 usage error; 2 runtime error.\n";

static int parse_caps(const char *s, size_t *caps, int max, int *n, char *err, size_t errlen)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == max) { snprintf(err, errlen, "too many sizes in --gpu-mem"); return -1; }
        if (ms_parse_size(tok, &caps[*n], err, errlen)) return -1;
        if (!caps[*n]) { snprintf(err, errlen, "--gpu-mem: a device needs some memory"); return -1; }
        (*n)++;
    }
    return *n ? 0 : -1;
}

static int parse_inject(const char *s, ms_rerun_opts *o)
{
    char size[64];
    if (sscanf(s, "%d:%d:%63s", &o->inject_step, &o->inject_dev, size) != 3 || o->inject_step < 1 || o->inject_dev < 0)
        return -1;
    if (strchr(size, '%')) /* "90%": the device keeps 90% of what its tensors took at their peak */
        return ms_cli_parse_fraction(size, &o->inject_frac) || o->inject_frac <= 0 ? -1 : 0;
    char err[128];
    return ms_parse_size(size, &o->inject_bytes, err, sizeof err);
}

static json_t *train_json(const ms_rerun_result *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "steps", json_integer(r->steps));
    json_object_set_new(o, "loss_first", isnan(r->loss_first) ? json_null() : json_real(r->loss_first));
    json_object_set_new(o, "loss_last", isnan(r->loss_last) ? json_null() : json_real(r->loss_last));
    json_object_set_new(o, "tokens_per_s", json_real(r->tokens_per_s));
    json_object_set_new(o, "recoveries", json_integer(r->recoveries));
    json_object_set_new(o, "losses", json_incref(r->losses));
    json_object_set_new(o, "devices", r->devices ? json_incref(r->devices) : json_array());
    json_object_set_new(o, "worst_gap", json_real(r->worst_gap));
    return o;
}

static void print_devices(FILE *f, const ms_rerun_result *r)
{
    if (!r->devices) return;
    fprintf(f, "measured against predicted peak, per device:\n");
    size_t i;
    json_t *d;
    json_array_foreach(r->devices, i, d) {
        char a[32], b[32], c[32];
        fprintf(f, "  %-12s capacity %10s  predicted %10s  measured %10s  gap %.2f%%\n",
                json_string_value(json_object_get(d, "name")),
                ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "capacity_bytes")), a, sizeof a),
                ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "predicted_peak_bytes")), b, sizeof b),
                ms_fmt_bytes((size_t)json_integer_value(json_object_get(d, "measured_peak_bytes")), c, sizeof c),
                100 * json_real_value(json_object_get(d, "gap")));
    }
}

/* Plan over the given capacities; make sure the chosen micro-batch size was
 * measured (isolating it and re-planning if not). */
static int make_plan(ms_profile *prof, const ms_config *cfg, const size_t *caps, int n, const char *dev_name,
                     ms_plan_opts *po, ms_plan *plan, FILE *progress, char *err, size_t errlen)
{
    ms_plan_device devs[MS_PIPE_MAX_STAGES];
    for (int d = 0; d < n; d++) {
        snprintf(devs[d].name, sizeof devs[d].name, "%s/%d", dev_name, d);
        devs[d].capacity = caps[d];
    }
    for (int round = 0; round < 4; round++) {
        memset(plan, 0, sizeof *plan);
        int rc = ms_plan_search(prof, devs, n, po, plan, err, errlen);
        if (rc == MS_PLAN_INFEASIBLE) {
            ms_infeasible inf;
            if (ms_plan_explain_infeasible(prof, devs, n, po, &inf, err, errlen) == 0)
                snprintf(err, errlen, "%s", inf.text);
            return MS_EOOM;
        }
        if (rc != MS_PLAN_OK) return MS_EFAIL;
        if (ms_profile_find(prof, 0, plan->precision, plan->micro_batch)) break;
        if (progress)
            fprintf(progress, "doctor: the plan wants micro-batches of %d, not measured yet: measuring\n", plan->micro_batch);
        ms_config c = *cfg;
        c.precision = (ms_precision)plan->precision;
        int mb = plan->micro_batch, pr = plan->precision;
        ms_plan_free(plan);
        if (ms_profile_measure(prof, &c, pr, mb, progress, err, errlen)) return MS_EFAIL;
    }
    ms_plan_explain(prof, plan);
    return MS_OK;
}

int ms_cmd_doctor(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)      /* `-- PROGRAM ...`: the user's own program */
        if (!strcmp(argv[i], "--")) return ms_cmd_doctor_program(argc, argv);
    enum { O_MODEL = 1000, O_GPUS, O_GPUMEM, O_DEVICE, O_DB, O_CKDIR, O_CKEVERY, O_INJECT, O_HEADROOM, O_JSON, O_QUIET,
           O_LAUNCH, O_REPLICAS, O_ZERO, O_KILL };
    static const struct option opts[] = {
        { "preset", required_argument, 0, O_MODEL }, { "config", required_argument, 0, O_MODEL },
        { "set", required_argument, 0, O_MODEL }, { "precision", required_argument, 0, O_MODEL },
        { "steps", required_argument, 0, O_MODEL }, { "batch", required_argument, 0, O_MODEL },
        { "data", required_argument, 0, O_MODEL }, { "gpus", required_argument, 0, O_GPUS },
        { "gpu-mem", required_argument, 0, O_GPUMEM }, { "device", required_argument, 0, O_DEVICE },
        { "db", required_argument, 0, O_DB }, { "checkpoint-dir", required_argument, 0, O_CKDIR },
        { "checkpoint-every", required_argument, 0, O_CKEVERY }, { "inject-oom", required_argument, 0, O_INJECT },
        { "headroom", required_argument, 0, O_HEADROOM }, { "json", no_argument, 0, O_JSON },
        { "quiet", no_argument, 0, O_QUIET }, { "help", no_argument, 0, 'h' },
        { "launch", required_argument, 0, O_LAUNCH }, { "replicas", required_argument, 0, O_REPLICAS },
        { "zero", required_argument, 0, O_ZERO }, { "inject-kill", required_argument, 0, O_KILL },
        { 0, 0, 0, 0 },
    };
    ms_cli_model_args ma;
    ms_cli_model_args_init(&ma);
    ms_rerun_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ckpt_every = 5;
    const char *gpu_mem = NULL, *device = NULL, *db_path = "memsplit.db", *ckdir = NULL, *launch = NULL, *kill = NULL;
    int replicas = 1, zero = -1;
    int gpus = 2, json = 0, quiet = 0, idx = 0, c;
    double headroom = -1; /* -1: the planner's default */
    char err[2048];
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case O_MODEL:
            if (ms_cli_model_opt(&ma, opts[idx].name, optarg) < 0) return MS_EXIT_USAGE;
            break;
        case O_GPUS: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > MS_PIPE_MAX_STAGES) { fprintf(stderr, "memsplit doctor: --gpus needs 1..%d\n", MS_PIPE_MAX_STAGES); return MS_EXIT_USAGE; }
            gpus = (int)v;
            break;
        }
        case O_GPUMEM: gpu_mem = optarg; break;
        case O_DEVICE: device = optarg; break;
        case O_DB: db_path = optarg; break;
        case O_CKDIR: ckdir = optarg; break;
        case O_CKEVERY: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 0) { fprintf(stderr, "memsplit doctor: --checkpoint-every needs N >= 0\n"); return MS_EXIT_USAGE; }
            ro.ckpt_every = (int)v;
            break;
        }
        case O_INJECT:
            if (parse_inject(optarg, &ro)) { fprintf(stderr, "memsplit doctor: --inject-oom takes STEP:DEVICE:SIZE\n"); return MS_EXIT_USAGE; }
            break;
        case O_HEADROOM:
            if (ms_cli_parse_fraction(optarg, &headroom)) {
                fprintf(stderr, "memsplit doctor: --headroom '%s' is not a fraction in [0, 1) (e.g. 0.05 or 5%%)\n", optarg);
                return MS_EXIT_USAGE;
            }
            break;
        case O_JSON: json = 1; break;
        case O_QUIET: quiet = 1; break;
        case O_LAUNCH: launch = optarg; break;
        case O_KILL: {
            int ks, kr;
            if (sscanf(optarg, "%d:%d", &ks, &kr) != 2 || ks < 1 || kr < 0) {
                fprintf(stderr, "memsplit doctor: --inject-kill takes STEP:RANK\n");
                return MS_EXIT_USAGE;
            }
            kill = optarg;
            break;
        }
        case O_REPLICAS: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!strcmp(optarg, "any")) replicas = 0;
            else if (!*optarg || *end || v < 1 || v > MS_PLAN_MAX_DEVICES) {
                fprintf(stderr, "memsplit doctor: --replicas takes a count or any\n");
                return MS_EXIT_USAGE;
            } else replicas = (int)v;
            break;
        }
        case O_ZERO:
            if ((zero = !strcmp(optarg, "on") ? 1 : !strcmp(optarg, "off") ? 0 : !strcmp(optarg, "any") ? -1 : -2) == -2) {
                fprintf(stderr, "memsplit doctor: --zero takes on, off or any\n");
                return MS_EXIT_USAGE;
            }
            break;
        case 'h': printf(usage, ms_cli_model_help); return MS_EXIT_OK;
        default: fprintf(stderr, "memsplit doctor: see --help\n"); return MS_EXIT_USAGE;
        }
    }
    if (optind < argc) { fprintf(stderr, "memsplit doctor: unexpected argument '%s'\n", argv[optind]); return MS_EXIT_USAGE; }
    if (!launch && (replicas != 1 || kill)) {
        fprintf(stderr, "memsplit doctor: %s runs as MPI ranks: give --launch (e.g. --launch mpirun)\n",
                kill ? "--inject-kill" : "a plan of replicas");
        return MS_EXIT_USAGE;
    }
    ms_config cfg;
    if (ms_cli_build_config(&ma, &cfg, err, sizeof err)) { fprintf(stderr, "memsplit doctor: %s\n", err); return MS_EXIT_USAGE; }
    if (device) {
        if (strcmp(device, "cpu") && strncmp(device, "cuda:", 5)) { fprintf(stderr, "memsplit doctor: --device is cpu or cuda:K\n"); return MS_EXIT_USAGE; }
        snprintf(cfg.device, sizeof cfg.device, "%s", device);
    } else if (!ma.preset || ms_cuda_gpu_count() == 0) {
        /* no GPU: the CPU backend */
        if (ms_cuda_gpu_count() == 0) snprintf(cfg.device, sizeof cfg.device, "cpu");
    }
    size_t caps[MS_PIPE_MAX_STAGES];
    int n_caps = 0;
    if (gpu_mem) {
        if (parse_caps(gpu_mem, caps, MS_PIPE_MAX_STAGES, &n_caps, err, sizeof err)) {
            fprintf(stderr, "memsplit doctor: --gpu-mem: %s\n", err);
            return MS_EXIT_USAGE;
        }
        if (n_caps > 1 && n_caps != gpus) { fprintf(stderr, "memsplit doctor: --gpus %d but --gpu-mem lists %d sizes\n", gpus, n_caps); return MS_EXIT_USAGE; }
        cfg.gpu_mem = caps[0];
    }
    if (!cfg.gpu_mem) { fprintf(stderr, "memsplit doctor: give --gpu-mem (the capacity of each device)\n"); return MS_EXIT_USAGE; }
    for (int d = n_caps; d < gpus; d++) caps[d] = n_caps > 1 ? caps[d] : cfg.gpu_mem;
    if (n_caps <= 1) n_caps = gpus;
    FILE *pg = quiet ? NULL : stderr;
    FILE *out = json ? stderr : stdout;
    if (!strncmp(cfg.device, "cuda", 4)) ms_nvtx_prepare(err, sizeof err);

    ms_db *db = ms_db_open(db_path, 1, err, sizeof err);
    if (!db) { fprintf(stderr, "memsplit doctor: %s\n", err); return MS_EXIT_RUNTIME; }
    char *cmd = ms_cli_cmdline(argc, argv), *ini = ms_config_to_ini(&cfg);
    int64_t top = ms_db_run_begin(db, "doctor", cmd, ini, NULL, cfg.preset[0] ? cfg.preset : "custom", 0);
    int64_t trial_run = ms_db_run_begin(db, "profile", cmd, ini, NULL, cfg.preset[0] ? cfg.preset : "custom", top);
    free(cmd);
    if (top < 0 || trial_run < 0) { fprintf(stderr, "memsplit doctor: %s\n", ms_db_errmsg(db)); free(ini); ms_db_close(db); return MS_EXIT_RUNTIME; }

    /* 1. the trial */
    if (pg) fprintf(pg, "doctor: 1/3 trial of %s on %s (capacity %zu bytes)\n", cfg.preset, cfg.device, cfg.gpu_mem);
    ms_trial_opts to;
    memset(&to, 0, sizeof to);
    to.steps = 1;
    to.use_cupti = 1;
    to.precisions[0] = cfg.precision;
    to.n_prec = 1;
    for (int p = 0; p < 3; p++)
        if (p != (int)cfg.precision) to.precisions[to.n_prec++] = p;
    to.batches[0] = cfg.batch;
    to.n_batch = 1;
    if (cfg.batch > 1) to.batches[to.n_batch++] = cfg.batch / 2;
    to.progress = pg;
    ms_trial_result tr;
    int rc = ms_trial_run(&cfg, &to, &tr);
    int code = MS_EXIT_OK;
    json_t *jout = json_object();
    ms_plan plan;
    memset(&plan, 0, sizeof plan);
    ms_rerun_result rr;
    memset(&rr, 0, sizeof rr);
    if (rc == MS_EFAIL) {
        fprintf(stderr, "memsplit doctor: trial: %s\n", tr.err);
        ms_db_run_finish(db, trial_run, "failed");
        code = MS_EXIT_RUNTIME;
        goto done;
    }
    ms_db_add_mem_events(db, trial_run, tr.events, tr.n_events);
    ms_db_add_rows(db, trial_run, &tr.prof);
    ms_db_run_finish(db, trial_run, rc == MS_OK ? "ok" : "oom");
    ms_term_report_profile(out, &tr.prof, 80);
    json_t *tj = ms_profile_to_json(&tr.prof);
    if (tj) json_object_set_new(jout, "trial", tj);

    /* 2. the plan: one device if it fits, else N */
    int n_plan = rc == MS_OK ? 1 : gpus;
    if (pg) fprintf(pg, "doctor: 2/3 %s\n", rc == MS_OK ? "the model fits: planning for one device"
                                                        : "it does not fit: planning over the devices given");
    ms_plan_opts po;
    ms_plan_opts_default(&po);
    if (headroom >= 0) po.headroom = headroom;
    po.replicas = replicas;
    po.zero = zero;
    if (ma.precision) po.precision = cfg.precision; /* asked for: the plan keeps it */
    tr.prof.global_batch = cfg.batch * cfg.accum;
    if (rc == MS_OK) caps[0] = cfg.gpu_mem;
    int prc = make_plan(&tr.prof, &cfg, caps, n_plan, strncmp(cfg.device, "cuda", 4) ? "cpu" : "cuda", &po, &plan, pg,
                        err, sizeof err);
    int64_t plan_run = ms_db_run_begin(db, "plan", NULL, NULL, NULL, cfg.preset, top);
    if (prc != MS_OK) {
        fprintf(stderr, "memsplit doctor: no plan: %s\n", err);
        ms_db_run_finish(db, plan_run, "infeasible");
        code = prc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
        goto done;
    }
    plan.profile_run = trial_run;
    ms_plan_print_table(out, &plan, &tr.prof);
    if (plan.reasoning) fprintf(out, "\n%s\n\n", plan.reasoning);
    char *pjs = ms_plan_to_string(&plan);
    int64_t plan_id = pjs ? ms_db_add_plan(db, plan_run, pjs, plan.step_ms, 1) : 0;
    free(pjs);
    ms_db_run_finish(db, plan_run, "ok");

    /* 3. training with the plan */
    if (pg) fprintf(pg, "doctor: 3/3 training %d steps with the plan\n", cfg.steps);
    int64_t train_run = ms_db_run_begin(db, "train", NULL, ini, NULL, cfg.preset, top);
    char ckbuf[600];
    if (!ckdir) {
        snprintf(ckbuf, sizeof ckbuf, "%s.ckpt", db_path);
        ckdir = ckbuf;
    }
    ro.device = device ? device : (!strncmp(cfg.device, "cuda", 4) ? NULL : "cpu");
    ro.steps = cfg.steps;
    ro.ckpt_dir = ckdir;
    ro.prof = &tr.prof;
    ro.popts = po;
    ro.db = db;
    ro.run = train_run;
    ro.plan_id = plan_id;
    ro.progress = pg;
    if (launch) {
        ms_doctor_ranks_opts dr = { launch, &ma, device, db_path, db, train_run, ckdir, ro.ckpt_every, kill,
                                    &tr.prof, po, quiet, pg };
        rc = ms_doctor_ranks(&cfg, &plan, &dr, plan_id, &rr);
    } else {
        rc = ms_rerun(&cfg, &plan, &ro, &rr);
    }
    ms_db_run_finish(db, train_run, rc == MS_OK ? "ok" : rc == MS_EOOM ? "oom" : "failed");
    if (rc != MS_OK) {
        fprintf(stderr, "memsplit doctor: training: %s\n", rr.err);
        code = rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
    } else {
        print_devices(out, &rr);
        fprintf(out, "trained %d steps: loss %.4f -> %.4f, %.0f tokens/s, %d recover%s\n", rr.steps, rr.loss_first,
                rr.loss_last, rr.tokens_per_s, rr.recoveries, rr.recoveries == 1 ? "y" : "ies");
    }
done:
    if (plan.n_stages) {
        json_t *pj = ms_plan_to_json(&plan);
        if (pj) json_object_set_new(jout, "plan", pj);
    }
    if (rr.losses) json_object_set_new(jout, "train", train_json(&rr));
    ms_db_run_finish(db, top, code == MS_EXIT_OK ? "ok" : code == MS_EXIT_OOM ? "oom" : "failed");
    if (json) ms_cli_print_json(jout);
    json_decref(jout);
    ms_rerun_result_free(&rr);
    ms_plan_free(&plan);
    ms_trial_free(&tr);
    free(ini);
    ms_db_close(db);
    return code;
}

int ms_cmd_train_plan(const ms_config *cfg, const char *plan_path, const char *device, const char *db_path,
                      const char *ckdir, int ckevery, int resume, const char *inject, int json, int quiet)
{
    char err[1024];
    ms_plan plan;
    memset(&plan, 0, sizeof plan);
    if (ms_plan_load_json(plan_path, &plan, err, sizeof err)) {
        fprintf(stderr, "memsplit train: %s: %s\n", plan_path, err);
        return MS_EXIT_USAGE;
    }
    if (plan.replicas > 1) {
        fprintf(stderr, "memsplit train: %s has %d replicas of its %d-stage pipeline, and one process runs one "
                "pipeline: run it as mpirun -np %d memsplit train --plan %s ...\n", plan_path, plan.replicas,
                plan.n_stages, plan.replicas * plan.n_stages, plan_path);
        ms_plan_free(&plan);
        return MS_EXIT_USAGE;
    }
    ms_rerun_opts ro;
    memset(&ro, 0, sizeof ro);
    if (inject && parse_inject(inject, &ro)) {
        fprintf(stderr, "memsplit train: --inject-oom takes STEP:DEVICE:SIZE\n");
        ms_plan_free(&plan);
        return MS_EXIT_USAGE;
    }
    ms_db *db = NULL;
    ms_profile prof;
    memset(&prof, 0, sizeof prof);
    int64_t run = 0;
    if (db_path) {
        db = ms_db_open(db_path, 1, err, sizeof err);
        if (!db) { fprintf(stderr, "memsplit train: %s\n", err); ms_plan_free(&plan); return MS_EXIT_RUNTIME; }
        if (plan.profile_run > 0 && ms_db_load_profile(db, plan.profile_run, &prof, err, sizeof err) == 0) ro.prof = &prof;
        char *ini = ms_config_to_ini(cfg);
        run = ms_db_run_begin(db, "train", "memsplit train --plan", ini, NULL, cfg->preset, 0);
        free(ini);
    }
    ms_plan_opts_default(&ro.popts);
    ro.device = device;
    ro.steps = cfg->steps;
    ro.ckpt_dir = ckdir;
    ro.ckpt_every = ckevery > 0 ? ckevery : INT_MAX; /* checkpoint.every = 0: only at the end */
    ro.resume = resume;
    ro.db = db;
    ro.run = run;
    ro.progress = quiet ? NULL : stderr;
    ms_rerun_result rr;
    int rc = ms_rerun(cfg, &plan, &ro, &rr);
    int code = rc == MS_OK ? MS_EXIT_OK : rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
    if (rc != MS_OK) fprintf(stderr, "memsplit train: %s\n", rr.err);
    else if (!quiet) print_devices(stderr, &rr);
    if (db) {
        ms_db_run_finish(db, run, rc == MS_OK ? "ok" : rc == MS_EOOM ? "oom" : "failed");
        ms_db_close(db);
    }
    if (json) {
        json_t *o = train_json(&rr);
        ms_cli_print_json(o);
        json_decref(o);
    }
    ms_rerun_result_free(&rr);
    ms_profile_free(&prof);
    ms_plan_free(&plan);
    return code;
}
