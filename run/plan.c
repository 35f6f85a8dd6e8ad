/* plan.c — `memsplit plan` (plan.h). */
#include "run/plan.h"
#include "run/exit.h"
#include "run/program.h"
#include "run/text.h"
#include "planner/explain.h"
#include "reports/db.h"
#include "vocab/plan_json.h"
#include "vocab/profile_json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* What a planning needs and leaves behind. */
typedef struct plan_job {
    ms_plan_request *rq;
    ms_profile prof;
    ms_db *db;
    int64_t prof_run;
    ms_plan_device *devs;
    int n_devs;
    ms_plan plan;
} plan_job;

/* The profile, from its file or from the database: 0, or the exit status (said). */
static int load_profile(plan_job *j)
{
    ms_plan_request *rq = j->rq;
    char err[512];
    if (rq->profile) {
        if (!ms_profile_load_json(rq->profile, &j->prof, err, sizeof err)) return 0;
        fprintf(stderr, "memsplit plan: %s\n", err);
        return MS_EXIT_USAGE;
    }
    j->db = ms_db_open(rq->db, 0, err, sizeof err);
    if (!j->db) {
        fprintf(stderr, "memsplit plan: %s\n", err);
        return MS_EXIT_RUNTIME;
    }
    ms_db_set_busy_timeout(j->db, rq->db_timeout_ms);
    j->prof_run = rq->run ? rq->run : ms_db_latest_profile_run(j->db);
    if (j->prof_run <= 0) {
        fprintf(stderr, "memsplit plan: %s holds no profile%s\n", rq->db, j->prof_run < 0 ? " (read error)" : "");
        return MS_EXIT_RUNTIME;
    }
    if (ms_db_load_profile(j->db, j->prof_run, &j->prof, err, sizeof err)) {
        fprintf(stderr, "memsplit plan: run %" PRId64 ": %s\n", j->prof_run, err);
        return MS_EXIT_RUNTIME;
    }
    char verr[256];
    if (ms_profile_validate(&j->prof, verr, sizeof verr)) {
        fprintf(stderr, "memsplit plan: the profile of run %" PRId64 " is invalid: %s\n", j->prof_run, verr);
        return MS_EXIT_USAGE;
    }
    return 0;
}

/* Records the outcome under a new "plan" run in the database: 0 or -1. */
static int store(const plan_job *j, const char *json, double step_ms, int feasible)
{
    json_t *dj = json_array();
    for (int i = 0; dj && i < j->n_devs; i++)
        json_array_append_new(dj, json_pack("{s:s, s:I}", "device", j->devs[i].name, "capacity_bytes",
                                            (json_int_t)j->devs[i].capacity));
    char *dev_text = dj ? json_dumps(dj, JSON_COMPACT) : NULL;
    json_decref(dj);
    /* the plan run belongs to the run whose profile it used */
    int64_t run = ms_db_run_begin(j->db, "plan", j->rq->cmdline, NULL, dev_text, j->prof.model, j->prof_run);
    free(dev_text);
    if (run < 0) return -1;
    if (ms_db_add_plan(j->db, run, json, step_ms, feasible) < 0) return -1;
    return ms_db_run_finish(j->db, run, feasible ? "ok" : "infeasible");
}

static json_t *infeasible_json(const ms_infeasible *inf, const ms_profile *prof)
{
    json_t *j = json_object(), *fixes = json_array();
    json_object_set_new(j, "feasible", json_false());
    json_object_set_new(j, "model", json_string(prof->model));
    json_object_set_new(j, "message", json_string(inf->text));
    json_object_set_new(j, "gpus_given", json_integer(inf->gpus_given));
    json_object_set_new(j, "min_gpus", inf->min_gpus > 0 ? json_integer(inf->min_gpus) : json_null());
    json_object_set_new(j, "added_gpu_capacity_bytes", ms_json_u64(inf->added_capacity));
    json_object_set_new(j, "min_gpus_every_option_open",
                        inf->min_gpus_open > 0 ? json_integer(inf->min_gpus_open) : json_null());
    json_object_set_new(j, "capacity_needed_bytes",
                        inf->capacity_needed ? ms_json_u64(inf->capacity_needed) : json_null());
    for (int i = 0; i < inf->n_fixes; i++)
        json_array_append_new(fixes, json_pack("{s:s, s:i, s:f}", "option", inf->fixes[i].option, "n_stages",
                                               inf->fixes[i].n_stages, "predicted_step_ms", inf->fixes[i].step_ms));
    json_object_set_new(j, "fixes", fixes);
    return j;
}

/* Nothing fits: what would, said, printed as JSON when asked, and stored. */
static int infeasible(plan_job *j)
{
    ms_plan_request *rq = j->rq;
    char err[512];
    ms_infeasible inf;
    if (ms_plan_explain_infeasible(&j->prof, j->devs, j->n_devs, &rq->opts, &inf, err, sizeof err)) {
        fprintf(stderr, "memsplit plan: %s\n", err);
        return MS_EXIT_USAGE;
    }
    fprintf(stderr, "memsplit plan: ");
    ms_print_wrapped(stderr, inf.text, 80);
    json_t *js = infeasible_json(&inf, &j->prof);
    if (rq->json) {
        json_dumpf(js, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    }
    char *s = json_dumps(js, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(js);
    int code = MS_EXIT_OOM;
    if (j->db && (!s || store(j, s, 0, 0))) {
        fprintf(stderr, "memsplit plan: storing the outcome in %s failed: %s\n", rq->db, ms_db_errmsg(j->db));
        code = MS_EXIT_RUNTIME;
    }
    free(s);
    return code;
}

/* The plan on stdout: its JSON, or the table, the reasoning and a program's placement. */
static int show(const plan_job *j)
{
    const ms_plan_request *rq = j->rq;
    char err[512];
    if (rq->json) {
        if (!ms_plan_write_json(stdout, &j->plan, err, sizeof err)) return MS_EXIT_OK;
        fprintf(stderr, "memsplit plan: %s\n", err);
        return MS_EXIT_RUNTIME;
    }
    ms_plan_print_table(stdout, &j->plan, &j->prof, rq->verbose);
    fputc('\n', stdout);
    ms_print_wrapped(stdout, j->plan.reasoning, 80);
    if (j->plan.fingerprint[0]) {
        ms_program_placement(stdout, &j->plan);
        fputc('\n', stdout);
        ms_program_snippet(stdout, &j->plan);
    }
    if (rq->out) printf("plan written to %s\n", rq->out);
    return MS_EXIT_OK;
}

/* A plan was found: its names and reasoning, -o FILE, shown, stored. */
static int found(plan_job *j)
{
    ms_plan_request *rq = j->rq;
    char err[512];
    j->plan.profile_run = j->prof_run;
    if (ms_plan_attach_program(&j->plan, &j->prof)) {
        fprintf(stderr, "memsplit plan: out of memory\n");
        return MS_EXIT_USAGE;
    }
    if (rq->profile) snprintf(j->plan.profile_file, sizeof j->plan.profile_file, "%s", rq->profile);
    if (ms_plan_explain(&j->prof, &j->plan)) {
        fprintf(stderr, "memsplit plan: out of memory\n");
        return MS_EXIT_RUNTIME;
    }
    if (rq->out && ms_plan_save_json(rq->out, &j->plan, err, sizeof err)) {
        fprintf(stderr, "memsplit plan: %s\n", err);
        return MS_EXIT_RUNTIME;
    }
    int code = show(j);
    if (!j->db) return code;
    char *text = ms_plan_to_string(&j->plan);
    if (!text || store(j, text, j->plan.step_ms, 1)) {
        fprintf(stderr, "memsplit plan: storing the plan in %s failed: %s\n", rq->db, ms_db_errmsg(j->db));
        code = MS_EXIT_RUNTIME;
    }
    free(text);
    return code;
}

static int plan(plan_job *j)
{
    ms_plan_request *rq = j->rq;
    char err[512];
    int code = load_profile(j);
    if (code) return code;
    if (ms_program_plan_opts(&j->prof, &rq->opts, err, sizeof err)) {
        fprintf(stderr, "memsplit plan: %s\n", err);
        return MS_EXIT_USAGE;
    }
    if (rq->devices(rq->user, &j->prof, &j->devs, &j->n_devs)) return MS_EXIT_USAGE;
    int rc = ms_plan_choose(&j->prof, j->devs, j->n_devs, &rq->opts, &j->plan, err, sizeof err);
    if (rc == MS_PLAN_ERROR) {
        fprintf(stderr, "memsplit plan: %s\n", err);
        return MS_EXIT_USAGE;
    }
    return rc == MS_PLAN_INFEASIBLE ? infeasible(j) : found(j);
}

int ms_run_plan(ms_plan_request *rq)
{
    plan_job j;
    memset(&j, 0, sizeof j);
    j.rq = rq;
    int code = plan(&j);
    ms_plan_free(&j.plan);
    free(j.devs);
    ms_profile_free(&j.prof);
    if (j.db) ms_db_close(j.db);
    return code;
}
