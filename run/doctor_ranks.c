/* doctor_ranks.c — doctor's training as a child launcher of MPI ranks,
 * recovering from a rank that dies (doctor_ranks.h). */
#include "run/doctor_ranks.h"
#include "run/exit.h"
#include "run/interrupt.h"
#include "run/launch_env.h"
#include "run/launcher.h"
#include "planner/explain.h"
#include "vocab/plan_json.h"
#include "vocab/plan_replicas.h"
#include "trainer/checkpoint.h"
#include "vocab/errf.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ARGS 256

typedef struct argv_buf {
    char *v[MAX_ARGS + 1];
    char store[MAX_ARGS][64];
    int n;
} argv_buf;

static void add(argv_buf *a, const char *s)
{
    if (a->n < MAX_ARGS) a->v[a->n++] = (char *)s;
    a->v[a->n] = NULL;
}

static void addf(argv_buf *a, const char *fmt, long v)
{
    if (a->n >= MAX_ARGS) return;
    snprintf(a->store[a->n], sizeof a->store[0], fmt, v);
    add(a, a->store[a->n]);
}

static void build_argv(argv_buf *a, char *words, const char *rank_bin, const ms_config *cfg, const ms_plan *plan,
                       const char *plan_path, const char *ckdir, const ms_doctor_ranks_opts *o, int first)
{
    memset(a, 0, sizeof *a);
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) add(a, w);
    add(a, "-n");
    addf(a, "%ld", ms_plan_ranks(plan));
    add(a, rank_bin);
    add(a, "train");
    const ms_model_args *ma = o->ma;
    if (ma->preset) { add(a, "--preset"); add(a, ma->preset); }
    if (ma->config) { add(a, "--config"); add(a, ma->config); }
    for (int i = 0; i < ma->n_sets; i++) { add(a, "--set"); add(a, ma->sets[i]); }
    if (ma->data) { add(a, "--data"); add(a, ma->data); }
    if (o->device) { add(a, "--device"); add(a, o->device); }
    add(a, "--steps");
    addf(a, "%ld", cfg->steps);
    add(a, "--plan");
    add(a, plan_path);
    if (o->db_path) {
        add(a, "--db");
        add(a, o->db_path);
        add(a, "--db-run");
        addf(a, "%ld", (long)o->run);
        add(a, "--db-timeout");
        if (a->n < MAX_ARGS) { /* seconds, as the flag takes them */
            snprintf(a->store[a->n], sizeof a->store[0], "%d.%03d", o->db_timeout_ms / 1000, o->db_timeout_ms % 1000);
            add(a, a->store[a->n]);
        }
    }
    add(a, "--checkpoint-dir");
    add(a, ckdir);
    if (o->ckevery > 0) {
        add(a, "--checkpoint-every");
        addf(a, "%ld", o->ckevery);
    }
    if (!first) add(a, "--resume");
    if (first && o->inject_kill) { add(a, "--inject-kill"); add(a, o->inject_kill); }
    add(a, "--json");
    if (o->quiet) add(a, "--quiet");
}

/* The plan for the devices left when those marked in lost[] are gone. */
static int replan(const ms_doctor_ranks_opts *o, ms_plan *plan, const char *lost, char *err, size_t errlen)
{
    int n = 0;
    ms_plan_device *devs = calloc((size_t)plan->n_devices, sizeof *devs);
    if (!devs) return MS_EFAIL;
    for (int d = 0; d < plan->n_devices; d++)
        if (!lost[d]) devs[n++] = plan->devices[d];
    char what[64];
    snprintf(what, sizeof what, "the %d device%s that remain%s", n, n == 1 ? "" : "s", n == 1 ? "s" : "");
    int rc = n ? ms_rerun_replan(o->prof, &o->popts, devs, n, what, plan, err, errlen)
               : ms_errf(err, errlen, "no device is left") ? MS_EFAIL : MS_EFAIL;
    free(devs);
    return rc;
}

static int last_step(const ms_step_rec *s, void *ctx)
{
    *(int *)ctx = s->step;
    return 0;
}

static int collect_loss(const ms_step_rec *s, void *ctx)
{
    json_array_append_new((json_t *)ctx, json_real(s->loss));
    return 0;
}

/* A failure of the launch in the run's recovery events: what happened and
 * what was done (new_plan 0 and no checkpoint: nothing could be), and in
 * the run's notes. */
static void record_recovery(const ms_doctor_ranks_opts *o, const char *what, const char *ckdir, int64_t old_plan,
                            int64_t new_plan, int recovered)
{
    if (!o->db) return;
    ms_recovery_rec rr;
    memset(&rr, 0, sizeof rr);
    int done = 0;
    ms_db_list_steps(o->db, o->run, last_step, &done);
    rr.step = done + 1;
    rr.resumed_step = recovered ? 0 : -1;
    char ck[1024];
    if (recovered && ms_ckpt_latest(ckdir, ck, sizeof ck) == 1) {
        snprintf(rr.checkpoint, sizeof rr.checkpoint, "%.511s", ck);
        const char *b = strrchr(ck, '/');
        if (!b || sscanf(b, "/step-%d.ckpt", &rr.resumed_step) != 1) rr.resumed_step = -1;
    }
    snprintf(rr.reason, sizeof rr.reason, "%s", what);
    rr.old_plan_id = old_plan;
    rr.new_plan_id = recovered ? new_plan : 0;
    char note[1200];
    snprintf(note, sizeof note, "step %d: %s", rr.step, what);
    if (ms_db_add_recovery(o->db, o->run, &rr) < 0 || ms_db_run_note(o->db, o->run, note))
        fprintf(stderr, "memsplit doctor: could not record \"%s\": %s\n", what, ms_db_errmsg(o->db));
}

/* The last launch's JSON summary (rank 0's stdout) into r. */
static void read_summary(const char *path, const ms_doctor_ranks_opts *o, ms_rerun_result *r)
{
    json_t *j = json_load_file(path, 0, NULL);
    if (j) {
        r->steps = (int)json_integer_value(json_object_get(j, "steps"));
        r->tokens_per_s = json_real_value(json_object_get(j, "tokens_per_s"));
        r->worst_gap = json_real_value(json_object_get(j, "worst_gap"));
        r->devices = json_incref(json_object_get(j, "devices"));
        json_decref(j);
    }
    if (o->db) ms_db_list_steps(o->db, o->run, collect_loss, r->losses); /* every step, redone ones once */
    size_t n = json_array_size(r->losses);
    r->steps_run = (int)n;
    if (n) {
        r->loss_first = json_real_value(json_array_get(r->losses, 0));
        r->loss_last = json_real_value(json_array_get(r->losses, n - 1));
    }
}

/* Why the launch ended, and what doctor does about it (doctor_ranks.h):
 * MS_OK with r->interrupted (a signal stopped it: doctor's own, passed on,
 * or one its ranks received), MS_OK to launch again (a recovery recorded),
 * or MS_EFAIL with r->err (every death recorded, no recovery possible).
 * Clean ends (status 0) are MS_OK. */
static int after_launch(const ms_doctor_ranks_opts *o, const ms_config *cfg, ms_plan *plan, int64_t *plan_id,
                        const ms_launch_end *e, const char *dir, int *launcher_deaths, ms_rerun_result *r)
{
    (void)cfg;
    int n = e->n, got = 0, named = 0, dead = 0, oom = 0;
    if (e->status == 0) return MS_OK;
    for (int k = 0; k < n; k++) {
        named += e->killed[k] != 0;
        if (!got && e->got[k]) got = e->got[k];
    }
    char ck[1024] = "";
    if (ms_ckpt_latest(dir, ck, sizeof ck) != 1) ck[0] = 0;
    /* 1. doctor was told to stop, and told the launcher: interrupted */
    snprintf(r->checkpoint, sizeof r->checkpoint, "%s", ck); /* what a resume would take, said on every stop */
    const char *b = strrchr(ck, '/');
    if (!b || sscanf(b, "/step-%d.ckpt", &r->checkpoint_step) != 1) r->checkpoint_step = 0;
    if (e->interrupted || (!named && e->rank < 0 && got)) {
        r->interrupted = e->interrupted ? e->interrupted : got;
        if (!e->interrupted && o->progress)
            fprintf(o->progress, "doctor: the ranks were stopped by %s from outside\n", ms_signal_name(got));
        return MS_OK;
    }
    /* 2. ranks died: those the launcher names killed, and, when one was, every
     * rank that said nothing at all (the launcher names only the first);
     * else 3. a rank's own failure (an out-of-memory, a device error), which
     * costs its device, as before. Said with the plan they ran under. */
    char *lost = calloc((size_t)plan->n_devices, 1);
    char (*deaths)[400] = calloc((size_t)n, sizeof *deaths);
    char what[1024];
    if (!lost || !deaths) {
        free(lost);
        free(deaths);
        return ms_errf(r->err, sizeof r->err, "out of host memory") ? MS_EFAIL : MS_EFAIL;
    }
    for (int k = 0; k < n; k++) {
        char how[220];
        if (e->killed[k]) snprintf(how, sizeof how, "killed by signal %d", e->killed[k]);
        else if (named && !e->said[k]) snprintf(how, sizeof how, "killed (it said nothing; the launcher names the first death only)");
        else if (!named && k == e->rank && e->status != MS_EXIT_USAGE) {
            snprintf(how, sizeof how, "%.200s", e->why);
            oom = e->status == MS_EXIT_OOM || strstr(e->why, "out of memory") != NULL; /* its own out-of-memory */
        } else continue;
        int stage, replica, dev = ms_plan_rank_device(plan, k, &stage, &replica);
        lost[dev] = 1;
        dead++;
        snprintf(deaths[k], sizeof deaths[k], "rank %d (stage %d, replica %d, device %d %.31s) died: %s", k, stage,
                 replica, dev, plan->devices[dev].name, how);
        if (o->progress) fprintf(o->progress, "doctor: %s\n", deaths[k]);
    }
    int64_t old_plan = *plan_id;
    if (!dead) {
        free(lost);
        free(deaths);
        /* 4. the launcher itself was killed, and no rank died of it: launch
         * again as it was, from the last checkpoint, once in a row */
        if (e->signaled && e->rank < 0 && (*launcher_deaths)++ < 1) {
            snprintf(what, sizeof what, "the launcher (%.60s) was killed by signal %d%s; no rank died: launched again "
                     "with the same plan", o->launch, e->status - 128, e->orphans ? ", its ranks ended by doctor" : "");
            if (o->progress) fprintf(o->progress, "doctor: %s\n", what);
            record_recovery(o, what, dir, old_plan, old_plan, 1);
            r->recoveries++;
            return MS_OK;
        }
        snprintf(r->err, sizeof r->err, "the ranks ended with status %d%s%s", e->status, e->why[0] ? ": " : "", e->why);
        if (e->signaled) {
            snprintf(what, sizeof what, "the launcher (%.60s) was killed by signal %d again, before any progress",
                     o->launch, e->status - 128);
            record_recovery(o, what, dir, old_plan, 0, 0);
            snprintf(r->err, sizeof r->err, "%s", what);
        }
        return MS_EFAIL;
    }
    *launcher_deaths = 0;
    /* the devices of the dead are lost: re-plan for the rest and resume;
     * every death is recorded, recovered or not */
    char why[600];
    int prc = replan(o, plan, lost, why, sizeof why);
    if (prc == MS_OK) {
        char *js = ms_plan_to_string(plan);
        *plan_id = o->db && js ? ms_db_add_plan(o->db, o->run, js, plan->step_ms, 1) : 0;
        free(js);
    }
    for (int k = 0; k < n; k++) {
        if (!deaths[k][0]) continue;
        snprintf(what, sizeof what, "%s%s%s", deaths[k], prc == MS_OK ? "" : "; not recovered: ",
                 prc == MS_OK ? "" : why);
        record_recovery(o, what, dir, old_plan, *plan_id, prc == MS_OK);
        r->recoveries += prc == MS_OK;
    }
    free(lost);
    free(deaths);
    if (prc != MS_OK) {
        /* no plan for what remains: after a rank's own out-of-memory, that
         * (exit 3); after a killed rank a failure, never an out-of-memory */
        if (oom) snprintf(r->err, sizeof r->err, "%s", why);
        else snprintf(r->err, sizeof r->err, "%d rank%s died, and %s", dead, dead == 1 ? "" : "s", why);
        if (o->progress && ck[0]) fprintf(o->progress, "doctor: stopped; the last checkpoint, %s, is intact\n", ck);
        r->oom_unrecovered = oom && prc == MS_EOOM;
        return r->oom_unrecovered ? MS_EOOM : MS_EFAIL;
    }
    if (o->progress) {
        fprintf(o->progress, "doctor: re-planned without the device%s of the rank%s that died:\n", dead == 1 ? "" : "s",
                dead == 1 ? "" : "s");
        ms_plan_print_table(o->progress, plan, o->prof, 0);
        fprintf(o->progress, "doctor: resuming from the last checkpoint\n");
    }
    return MS_OK;
}

int ms_doctor_ranks(const ms_config *cfg, ms_plan *plan, const ms_doctor_ranks_opts *o, int64_t plan_id,
                    ms_rerun_result *r)
{
    memset(r, 0, sizeof *r);
    r->losses = json_array();
    r->loss_first = r->loss_last = NAN;
    char rank_bin[4200], dir[1100], plan_path[1200], out_path[1200];
    if (ms_launch_rank_path(rank_bin, sizeof rank_bin)) {
        snprintf(r->err, sizeof r->err, "memsplit-rank is not beside memsplit");
        return MS_EFAIL;
    }
    snprintf(dir, sizeof dir, "%.1000s/run-%lld", o->ckdir, (long long)o->run);
    snprintf(plan_path, sizeof plan_path, "%s/plan.json", dir);
    snprintf(out_path, sizeof out_path, "%s/train.json", dir);
    if ((mkdir(o->ckdir, 0777) && errno != EEXIST) || (mkdir(dir, 0777) && errno != EEXIST)) {
        snprintf(r->err, sizeof r->err, "cannot create %.900s: %s", dir, strerror(errno));
        return MS_EFAIL;
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1); /* every rank: NVLink multicast can take the host's GPUs down */
    int launcher_deaths = 0;
    for (int launch = 0;; launch++) {
        char err[1024];
        if (ms_plan_save_json(plan_path, plan, err, sizeof err)) {
            snprintf(r->err, sizeof r->err, "%s", err);
            return MS_EFAIL;
        }
        char words[1024];
        snprintf(words, sizeof words, "%s", o->launch);
        argv_buf a;
        build_argv(&a, words, rank_bin, cfg, plan, plan_path, dir, o, launch == 0);
        if (o->progress)
            fprintf(o->progress, "doctor: launching %d ranks (%d stages x %d replicas): %s -n %d ...\n",
                    ms_plan_ranks(plan), plan->n_stages, plan->replicas, o->launch, ms_plan_ranks(plan));
        ms_launch_end e;
        int n_ranks = ms_plan_ranks(plan);
        if (ms_launcher_run(a.v, out_path, n_ranks, o->progress, &e, err, sizeof err)) {
            ms_launch_end_free(&e);
            snprintf(r->err, sizeof r->err, "%s", err);
            return MS_EFAIL;
        }
        int rc = after_launch(o, cfg, plan, &plan_id, &e, dir, &launcher_deaths, r);
        ms_launch_end_free(&e);
        if (rc == MS_OK && !r->interrupted && e.status) continue; /* recovered: launch again, resuming */
        if (rc != MS_OK) return rc;
        break;
    }
    read_summary(out_path, o, r);
    return MS_OK;
}
