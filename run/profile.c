/* profile.c — `memsplit profile` of the built-in model (profile.h). */
#include "run/profile.h"
#include "run/exit.h"
#include "run/ledgers.h"
#include "reports/db.h"
#include "reports/term_report.h"
#include "trainer/device.h"
#include "trainer/nvtx_ranges.h"
#include "vocab/profile_json.h"

#include <stdlib.h>
#include <string.h>

/* The run is recorded before the trial starts: a killed profile shows as
 * incomplete. 0, or the exit status (said). */
static int begin_run(const ms_config *cfg, const ms_profile_args *a, ms_db **db, int64_t *run)
{
    char err[512];
    *db = ms_db_open(a->db_path, 1, err, sizeof err);
    if (!*db) { fprintf(stderr, "memsplit profile: %s\n", err); return MS_EXIT_RUNTIME; }
    ms_db_set_busy_timeout(*db, a->db_timeout_ms);
    char *ini = ms_config_to_ini(cfg);
    char devs[128];
    snprintf(devs, sizeof devs, "[{\"name\": \"%s\", \"capacity_bytes\": %zu}]", cfg->device, cfg->gpu_mem);
    *run = ms_db_run_begin(*db, "profile", a->cmdline, ini, devs, cfg->preset[0] ? cfg->preset : "custom", 0);
    free(ini);
    if (*run < 0) {
        fprintf(stderr, "memsplit profile: %s\n", ms_db_errmsg(*db));
        ms_db_close(*db);
        return MS_EXIT_RUNTIME;
    }
    return 0;
}

/* The trial's events, rows and end: the exit status, worse when a record fails. */
static int end_run(ms_db *db, int64_t run, const ms_profile_args *a, const ms_trial_result *r, int rc, int code)
{
    int ok = 1;
    if (rc != MS_EFAIL) {
        if (ms_db_add_mem_events(db, run, r->events, r->n_events) != 0) ok = 0;
        if (ok && ms_db_add_rows(db, run, &r->prof) != 0) ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "memsplit profile: recording in %s: %s\n", a->db_path, ms_db_errmsg(db));
        code = MS_EXIT_RUNTIME;
    }
    if (ms_db_run_finish(db, run, rc == MS_OK ? "ok" : rc == MS_EOOM ? "oom" : "failed")) {
        fprintf(stderr, "memsplit profile: recording the run's end in %s: %s\n", a->db_path, ms_db_errmsg(db));
        code = MS_EXIT_RUNTIME;
        ok = 0;
    }
    if (!a->quiet && ok) fprintf(stderr, "profile: recorded as run %lld in %s\n", (long long)run, a->db_path);
    ms_db_close(db);
    return code;
}

int ms_run_profile(const ms_config *cfg, ms_profile_args *a, json_t **summary)
{
    *summary = NULL;
    char err[512];
    a->trial.progress = a->quiet ? NULL : stderr;
    if (!strncmp(cfg->device, "cuda", 4) && a->trial.use_cupti && ms_nvtx_prepare(err, sizeof err) != 0 && !a->quiet)
        fprintf(stderr, "profile: warning: %s\n", err);
    ms_db *db = NULL;
    int64_t run = 0;
    if (a->db_path) {
        int code = begin_run(cfg, a, &db, &run);
        if (code) return code;
    }
    ms_trial_result r;
    int rc = ms_trial_run(cfg, &a->trial, &r);
    int code = rc == MS_OK ? MS_EXIT_OK : rc == MS_EOOM ? MS_EXIT_OOM : MS_EXIT_RUNTIME;
    if (rc == MS_EFAIL) {
        fprintf(stderr, "memsplit profile: %s\n", r.err); /* the config was checked: device or data (2) */
    } else {
        FILE *out = a->json ? stderr : stdout;
        ms_term_report_profile(out, &r.prof, 80);
        ms_ledgers_print(out, &r.check, r.prof.device);
    }
    if (db) code = end_run(db, run, a, &r, rc, code);
    if (a->json && rc != MS_EFAIL && (*summary = ms_profile_to_json(&r.prof))) {
        json_object_set_new(*summary, "ledgers", ms_ledgers_json(&r.check));
        if (run > 0) json_object_set_new(*summary, "run_id", json_integer(run));
        json_object_set_new(*summary, "trial_step_ms", json_real(r.step_ms));
    }
    ms_trial_free(&r);
    return code;
}
