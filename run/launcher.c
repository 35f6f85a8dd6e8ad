/* launcher.c — a launcher of MPI ranks as doctor's child (launcher.h). */
#include "run/launcher.h"
#include "run/interrupt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What the launcher said about the run's end. */

static int signal_of(const char *name)
{
    return !strncmp(name, "SIGINT", 6) ? SIGINT : !strncmp(name, "SIGTERM", 7) ? SIGTERM
         : !strncmp(name, "SIGHUP", 6) ? SIGHUP : 0;
}

/* OpenMPI's "process rank R with PID ... exited on signal S", MPI_Abort's
 * "invoked on rank R", memsplit-rank's "memsplit train: rank R (...): what:
 * why", and its "memsplit train: rank R: SIGTERM received" (run/interrupt.h).
 * A rank killed by a signal is the cause, whatever the others said after it:
 * when one dies, its peers may fail on the lost connection before the
 * launcher ends them. */
static void scan(const char *line, ms_launch_end *e)
{
    int r, sig;
    const char *p;
    char buf[200], name[16];
    if ((p = strstr(line, "process rank ")) && sscanf(p, "process rank %d", &r) == 1) {
        const char *s = strstr(p, "exited on signal ");
        if (s && sscanf(s, "exited on signal %d", &sig) == 1) {
            if (r >= 0 && r < e->n) e->killed[r] = sig;
            if (e->rank_of[0] < 0) {
                e->rank_of[0] = r;
                snprintf(e->why_of[0], sizeof e->why_of[0], "killed by signal %d", sig);
            }
        }
    } else if ((p = strstr(line, "invoked on rank ")) && sscanf(p, "invoked on rank %d", &r) == 1 && e->rank_of[1] < 0) {
        e->rank_of[1] = r;
    } else if (sscanf(line, "memsplit train: rank %d: %15s received", &r, name) == 2 && signal_of(name)) {
        if (r >= 0 && r < e->n) {
            e->said[r] = 1;
            if (!e->got[r]) e->got[r] = signal_of(name);
        }
    } else if (sscanf(line, "memsplit train: rank %d (", &r) == 1 && r >= 0) {
        const char *colon = strstr(line, "): ");
        snprintf(buf, sizeof buf, "%.180s", colon ? colon + 3 : line);
        buf[strcspn(buf, "\n")] = 0;
        if (r < e->n) e->said[r] = 1;
        if (r < 64 && !e->ours[r][0]) snprintf(e->ours[r], sizeof e->ours[r], "%s", buf);
        if (e->rank_of[2] < 0) {
            e->rank_of[2] = r;
            snprintf(e->why_of[2], sizeof e->why_of[2], "%s", buf);
        }
    }
}

static void settle(ms_launch_end *e)
{
    for (int k = 0; k < 3 && e->rank < 0; k++)
        if (e->rank_of[k] >= 0) {
            e->rank = e->rank_of[k];
            const char *own = e->rank < 64 ? e->ours[e->rank] : "";
            snprintf(e->why, sizeof e->why, "%s", k == 0 ? e->why_of[0] : own[0] ? own : "ended the run with an error");
        }
}

/* The children of process pid (0: doctor's own: the launcher, and ranks a
 * dead launcher left, which come to doctor as the subreaper), up to max
 * pids into out (Linux's /proc/PID/task/TID/children). */
static int children(pid_t pid, pid_t *out, int max)
{
    int n = 0;
    char dir[64];
    if (pid) snprintf(dir, sizeof dir, "/proc/%ld/task", (long)pid);
    else snprintf(dir, sizeof dir, "/proc/self/task");
    DIR *d = opendir(dir);
    struct dirent *t;
    while (d && (t = readdir(d)) && n < max) {
        if (t->d_name[0] == '.') continue;
        char path[128];
        snprintf(path, sizeof path, "%s/%.32s/children", dir, t->d_name);
        FILE *f = fopen(path, "r");
        long pid;
        while (f && n < max && fscanf(f, "%ld", &pid) == 1) out[n++] = (pid_t)pid;
        if (f) fclose(f);
    }
    if (d) closedir(d);
    return n;
}

/* After the launcher ended: ranks it left behind (it died and they were
 * orphaned to doctor) get grace_s to stop (they were told to: SIGTERM at
 * their parent's death, run/interrupt.h), then are killed; all are reaped,
 * so that no rank of this launch trains on beside the next one. */
static int end_orphans(int grace_s)
{
    pid_t kids[256];
    int found = 0;
    for (int waited = 0;; waited += 50) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        int n = children(0, kids, 256);
        if (n > found) found = n;
        if (!n) return found;
        if (waited >= grace_s * 1000) {
            for (int i = 0; i < n; i++) kill(kids[i], SIGKILL);
            for (int i = 0; i < n; i++) waitpid(kids[i], NULL, 0);
            return found;
        }
        usleep(50000);
    }
}

/* One complete line of the launcher's stderr. */
static void take_line(const char *line, FILE *progress, ms_launch_end *e)
{
    if (progress) fputs(line, progress);
    scan(line, e);
}

int ms_launcher_run(char **argv, const char *out_path, int n_ranks, FILE *progress, ms_launch_end *e, char *err,
                     size_t errlen)
{
    int pfd[2];
    int *arrays = calloc((size_t)n_ranks * 3, sizeof *arrays);
    memset(e, 0, sizeof *e);
    e->rank = e->rank_of[0] = e->rank_of[1] = e->rank_of[2] = -1;
    e->n = n_ranks;
    e->said = arrays;
    e->got = arrays ? arrays + n_ranks : NULL;
    e->killed = arrays ? arrays + 2 * n_ranks : NULL;
    if (!arrays) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    if (pipe2(pfd, O_CLOEXEC)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* ranks a dead launcher leaves come to doctor */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() == 1) _exit(128 + SIGTERM); /* doctor is already gone */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || in < 0 || dup2(in, 0) < 0 || dup2(fd, 1) < 0 || dup2(pfd[1], 2) < 0) _exit(127);
        execvp(argv[0], argv);
        fprintf(stderr, "memsplit doctor: cannot start %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    char line[4096];
    size_t have = 0;
    int st = 0, done = 0, forwarded = 0;
    struct timespec t0, now;
    for (;;) {
        int sig = ms_interrupt_signal();
        if (sig && !forwarded) {
            /* doctor was told to stop: so are the ranks, once. Told
             * directly where they are its launcher's children here, so that
             * each stops after its step, checkpointed, in its own time (a
             * launcher told to stop kills its ranks a second later: OpenMPI's
             * odls_base_sigkill_timeout); else the launcher is */
            pid_t kids[1024];
            int n = children(pid, kids, 1024);
            for (int i = 0; i < n; i++) kill(kids[i], SIGTERM);
            if (!n) kill(pid, SIGTERM);
            forwarded = n ? 1 : 2;
            e->interrupted = sig;
            clock_gettime(CLOCK_MONOTONIC, &t0);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double told = forwarded ? (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 : 0;
        if (forwarded == 1 && told > 60 && !done) { /* the ranks did not stop in a minute: the launcher is told */
            kill(pid, SIGTERM);
            forwarded = 2;
        }
        if (forwarded == 2 && told > 120 && !done) { /* nor it in another: ended */
            kill(-pid, SIGKILL);
            forwarded = 3;
        }
        struct pollfd pf = { pfd[0], POLLIN, 0 };
        int ready = poll(&pf, 1, 200);
        if (ready > 0) {
            ssize_t k = read(pfd[0], line + have, sizeof line - 1 - have);
            if (k <= 0 && (k == 0 || errno != EINTR)) break; /* EOF: every writer is gone */
            if (k > 0) have += (size_t)k;
            line[have] = 0;
            char *nl;
            while ((nl = strchr(line, '\n'))) { /* whole lines to progress and scan */
                char keep = nl[1];
                nl[1] = 0;
                take_line(line, progress, e);
                nl[1] = keep;
                have -= (size_t)(nl + 1 - line);
                memmove(line, nl + 1, have + 1);
            }
            if (have == sizeof line - 1) { /* a line longer than the buffer: its head */
                take_line(line, progress, e);
                have = 0;
            }
        }
        if (!done && waitpid(pid, &st, WNOHANG) == pid) done = 1;
        if (done && ready <= 0) break; /* ended, and nothing more to read now */
    }
    close(pfd[0]);
    if (have) {
        line[have] = 0;
        take_line(line, progress, e);
    }
    if (!done)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    e->signaled = WIFSIGNALED(st);
    e->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (e->signaled) kill(-pid, SIGTERM); /* what else of its group is left */
    e->orphans = end_orphans(10);
    settle(e);
    return 0;
}

void ms_launch_end_free(ms_launch_end *e)
{
    free(e->said);
    e->said = e->got = e->killed = NULL;
}

