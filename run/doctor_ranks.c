/* doctor_ranks.c — doctor's training as a child launcher of MPI ranks,
 * recovering from a rank that dies (doctor_ranks.h). */
#include "run/doctor_ranks.h"
#include "run/exit.h"
#include "run/launch_env.h"
#include "planner/explain.h"
#include "vocab/plan_json.h"
#include "vocab/plan_replicas.h"
#include "trainer/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* What the launcher said about the run's end. */
typedef struct child_end {
    int status;       /* exit status, 128 + signal when killed */
    int rank;         /* the rank that failed first, -1: not said */
    char why[200];
    int rank_of[3];   /* by evidence: 0 killed by a signal (the launcher), 1 MPI_Abort, 2 memsplit's own line */
    char why_of[3][200];
    char ours[64][200]; /* memsplit's own line of each rank (the first 64), "" none */
} child_end;

/* OpenMPI's "process rank R with PID ... exited on signal S", MPI_Abort's
 * "invoked on rank R", memsplit-rank's "memsplit train: rank R (...): what: why".
 * A rank killed by a signal is the cause, whatever the others said after it:
 * when one dies, its peers may fail on the lost connection before the
 * launcher ends them. */
static void scan(const char *line, child_end *e)
{
    int r, sig;
    const char *p;
    char buf[200];
    if ((p = strstr(line, "process rank ")) && sscanf(p, "process rank %d", &r) == 1 && e->rank_of[0] < 0) {
        const char *s = strstr(p, "exited on signal ");
        if (s && sscanf(s, "exited on signal %d", &sig) == 1) {
            e->rank_of[0] = r;
            snprintf(e->why_of[0], sizeof e->why_of[0], "killed by signal %d", sig);
        }
    } else if ((p = strstr(line, "invoked on rank ")) && sscanf(p, "invoked on rank %d", &r) == 1 && e->rank_of[1] < 0) {
        e->rank_of[1] = r;
    } else if (sscanf(line, "memsplit train: rank %d (", &r) == 1 && r >= 0) {
        const char *colon = strstr(line, "): ");
        snprintf(buf, sizeof buf, "%.180s", colon ? colon + 3 : line);
        buf[strcspn(buf, "\n")] = 0;
        if (r < 64 && !e->ours[r][0]) snprintf(e->ours[r], sizeof e->ours[r], "%s", buf);
        if (e->rank_of[2] < 0) {
            e->rank_of[2] = r;
            snprintf(e->why_of[2], sizeof e->why_of[2], "%s", buf);
        }
    }
}

static void settle(child_end *e)
{
    for (int k = 0; k < 3 && e->rank < 0; k++)
        if (e->rank_of[k] >= 0) {
            e->rank = e->rank_of[k];
            const char *own = e->rank < 64 ? e->ours[e->rank] : "";
            snprintf(e->why, sizeof e->why, "%s", k == 0 ? e->why_of[0] : own[0] ? own : "ended the run with an error");
        }
}

/* Runs the launcher; its stdout (rank 0's JSON) goes to out_path, its stderr
 * through progress and scan(). */
static int run_child(char **argv, const char *out_path, FILE *progress, child_end *e, char *err, size_t errlen)
{
    int pfd[2];
    memset(e, 0, sizeof *e);
    e->rank = e->rank_of[0] = e->rank_of[1] = e->rank_of[2] = -1;
    if (pipe(pfd)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(pfd[1], 2) < 0) _exit(127);
        close(pfd[0]);
        execvp(argv[0], argv);
        fprintf(stderr, "memsplit doctor: cannot start %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    FILE *f = fdopen(pfd[0], "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (progress) fputs(line, progress);
        scan(line, e);
    }
    if (f) fclose(f);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    e->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    settle(e);
    return 0;
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

/* The plan for the devices left when `lost` is gone. */
static int replan(const ms_doctor_ranks_opts *o, ms_plan *plan, int lost, char *err, size_t errlen)
{
    int n = 0;
    ms_plan_device *devs = calloc((size_t)plan->n_devices, sizeof *devs);
    if (!devs) return MS_EFAIL;
    for (int d = 0; d < plan->n_devices; d++)
        if (d != lost) devs[n++] = plan->devices[d];
    char what[64];
    snprintf(what, sizeof what, "the %d devices that remain", n);
    int rc = ms_rerun_replan(o->prof, &o->popts, devs, n, what, plan, err, errlen);
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

static void record_recovery(const ms_doctor_ranks_opts *o, const child_end *e, const char *dead, const char *ckdir,
                            int64_t old_plan, int64_t new_plan)
{
    if (!o->db) return;
    ms_recovery_rec rr;
    memset(&rr, 0, sizeof rr);
    int done = 0;
    ms_db_list_steps(o->db, o->run, last_step, &done);
    rr.step = done + 1;
    rr.resumed_step = 0;
    char ck[1024];
    if (ms_ckpt_latest(ckdir, ck, sizeof ck) == 1) {
        snprintf(rr.checkpoint, sizeof rr.checkpoint, "%.511s", ck);
        const char *b = strrchr(ck, '/');
        if (!b || sscanf(b, "/step-%d.ckpt", &rr.resumed_step) != 1) rr.resumed_step = -1;
    }
    snprintf(rr.reason, sizeof rr.reason, "rank %d (%.31s) died: %.80s", e->rank, dead, e->why);
    rr.old_plan_id = old_plan;
    rr.new_plan_id = new_plan;
    ms_db_add_recovery(o->db, o->run, &rr);
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
        child_end e;
        if (run_child(a.v, out_path, o->progress, &e, err, sizeof err)) {
            snprintf(r->err, sizeof r->err, "%s", err);
            return MS_EFAIL;
        }
        if (e.status == 0) break;
        if (e.status == MS_EXIT_USAGE || e.rank < 0 || e.rank >= ms_plan_ranks(plan)) {
            snprintf(r->err, sizeof r->err, "the ranks ended with status %d%s%s", e.status, e.why[0] ? ": " : "", e.why);
            return MS_EFAIL;
        }
        /* a rank died: its device is lost; re-plan for the rest and resume */
        int stage, replica, dev = ms_plan_rank_device(plan, e.rank, &stage, &replica);
        if (o->progress)
            fprintf(o->progress, "doctor: rank %d (stage %d, replica %d, device %d %s) died: %s\n", e.rank, stage,
                    replica, dev, plan->devices[dev].name, e.why);
        char dead[32];
        snprintf(dead, sizeof dead, "%.31s", plan->devices[dev].name);
        int64_t old_plan = plan_id;
        int prc = replan(o, plan, dev, r->err, sizeof r->err);
        if (prc != MS_OK) {
            r->oom_unrecovered = prc == MS_EOOM;
            char ck[1024];
            if (o->progress && ms_ckpt_latest(dir, ck, sizeof ck) == 1)
                fprintf(o->progress, "doctor: stopped; the last checkpoint, %s, is intact\n", ck);
            return prc;
        }
        char *js = ms_plan_to_string(plan);
        plan_id = o->db && js ? ms_db_add_plan(o->db, o->run, js, plan->step_ms, 1) : 0;
        free(js);
        record_recovery(o, &e, dead, dir, old_plan, plan_id);
        r->recoveries++;
        if (o->progress) {
            fprintf(o->progress, "doctor: re-planned without %s:\n", dead);
            ms_plan_print_table(o->progress, plan, o->prof, 0);
            fprintf(o->progress, "doctor: resuming from the last checkpoint\n");
        }
    }
    read_summary(out_path, o, r);
    return MS_OK;
}
