/* launch.c — starting the program and reading its bridge (launch.h). */
#include "bridge/host/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vocab/errf.h"

#define DRAIN_MS 2000

/* The stop signals memsplit got (msb_stop_catch): the first, how many, and
 * whether the last came from the terminal (which sends it to the whole
 * foreground process group). */
static volatile sig_atomic_t g_stop = 0, g_stops = 0, g_from_tty = 0;
static int g_caught = 0;

static void on_stop(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (!g_stop) g_stop = sig;
    g_stops = g_stops + 1;
    g_from_tty = si && si->si_code == SI_KERNEL;
}

void msb_stop_catch(void)
{
    if (g_caught) return;
    g_caught = 1;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_stop;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL);
}

int msb_stop_signal(void) { return g_stop; }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int env_prepend(const char *name, const char *dir)
{
    const char *old = getenv(name);
    if (!old || !*old) return setenv(name, dir, 1);
    size_t n = strlen(dir) + strlen(old) + 2;
    char *v = malloc(n);
    if (!v) return -1;
    snprintf(v, n, "%s:%s", dir, old);
    int rc = setenv(name, v, 1);
    free(v);
    return rc;
}

/* In the forked child: the bridge's environment, then exec. On failure the
 * errno goes back through the pipe. */
static void child_exec(const msb_launch *l, const char *sock, int report_fd)
{
    char path[4096];
    int ok = 1;
    snprintf(path, sizeof path, "%s/python", l->bridge_dir);
    ok &= env_prepend("PYTHONPATH", path) == 0;
    ok &= setenv("MEMSPLIT_BRIDGE_SOCK", sock, 1) == 0;
    snprintf(path, sizeof path, "%s/libmemsplit_bridge.so", l->bridge_dir);
    ok &= setenv("MEMSPLIT_BRIDGE_LIB", path, 1) == 0;
    ok &= setenv("MEMSPLIT_BRIDGE_CONFIG", l->config_json ? l->config_json : "{}", 1) == 0;
    ok &= setenv("MEMSPLIT_PHASE", l->phase ? l->phase : "trial", 1) == 0;
    if (l->inject) {
        snprintf(path, sizeof path, "%s/libmemsplit_inject.so", l->bridge_dir);
        ok &= setenv("CUDA_INJECTION64_PATH", path, 1) == 0;
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (signal(SIGHUP, SIG_DFL) == SIG_IGN) signal(SIGHUP, SIG_IGN);   /* nohup stays */
    if (l->stdout_to_stderr) ok &= dup2(2, 1) == 1;
    if (ok) execvp(l->argv[0], l->argv);
    int e = ok ? errno : ENOMEM;
    ssize_t w = write(report_fd, &e, sizeof e);
    (void)w;
    _exit(127);
}

const char *msb_exit_text(const msb_exit *ex, char *buf, size_t len)
{
    if (ex->signaled)
        snprintf(buf, len, "%skilled by signal %d (%s)", ex->interrupted ? "interrupted: " : "", ex->signo,
                 strsignal(ex->signo));
    else
        snprintf(buf, len, "%sexit status %d", ex->interrupted ? "interrupted: " : "", ex->status);
    return buf;
}

/* Signal sig to the program: to its own process group when it has one (it
 * left memsplit's with setsid()), else to the program itself, unless the
 * terminal sent the signal to the group they share; then to every other
 * process still connected to the bridge that has not had it that way. */
static void signal_program(pid_t pid, int alive, const msb_reader *rd, int sig, int from_tty)
{
    pid_t ours = getpgrp(), group = -1, one = -1;
    if (alive) {
        pid_t pg = getpgid(pid);
        if (pg == pid) kill(-(group = pid), sig);
        else if (!(from_tty && pg == ours)) kill(one = pid, sig);
    }
    int peers[MSB_MAX_OPEN];
    int n = msb_reader_peers(rd, peers, MSB_MAX_OPEN);
    for (int i = 0; i < n; i++) {
        pid_t pg = getpgid(peers[i]);
        if (pg < 0 || peers[i] == getpid() || peers[i] == one || pg == group || (from_tty && pg == ours)) continue;
        kill(peers[i], sig);
    }
}

int msb_run_program(const msb_launch *l, msb_line_fn on_line, void *user, msb_exit *ex, char *err, size_t errlen)
{
    memset(ex, 0, sizeof *ex);
    if (!l || !l->argv || !l->argv[0]) return ms_errf(err, errlen, "no program to run after --");
    msb_stop_catch();
    if (g_stop)
        return ms_errf(err, errlen, "memsplit was asked to stop (%s) before the program started", strsignal(g_stop));
    char dir[] = "/tmp/memsplit-bridge-XXXXXX";
    if (!mkdtemp(dir)) return ms_errf(err, errlen, "cannot make a folder for the bridge socket: %s", strerror(errno));
    char sock[sizeof dir + 8];
    snprintf(sock, sizeof sock, "%s/s", dir);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    int pipefd[2] = { -1, -1 };
    msb_reader *rd = NULL;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 64) != 0 ||
        pipe2(pipefd, O_CLOEXEC) != 0 || !(rd = msb_reader_new(lfd, on_line, user))) {
        ms_errf(err, errlen, "cannot open the bridge socket %s: %s", sock, rd || errno ? strerror(errno) : "out of memory");
        if (lfd >= 0) close(lfd);
        if (pipefd[0] >= 0) close(pipefd[0]);
        if (pipefd[1] >= 0) close(pipefd[1]);
        unlink(sock);
        rmdir(dir);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) child_exec(l, sock, pipefd[1]);
    close(pipefd[1]);
    int rc = 0;
    if (pid < 0) {
        rc = ms_errf(err, errlen, "cannot start the program: %s", strerror(errno));
    } else {
        int e = 0;
        if (read(pipefd[0], &e, sizeof e) == (ssize_t)sizeof e) {   /* exec failed: EOF otherwise */
            waitpid(pid, NULL, 0);
            rc = ms_errf(err, errlen, "cannot run %s: %s", l->argv[0], strerror(e));
        }
    }
    close(pipefd[0]);
    int alive = rc == 0 && pid > 0, status = 0, handled = 0, killed = 0;
    double exited_at = 0, kill_at = 0, killed_at = 0;
    while (rc == 0) {
        int stops = g_stops;
        if (stops > handled) {
            if (!kill_at) {       /* the first: passed on, and a grace period for a clean end */
                signal_program(pid, alive, rd, g_stop, g_from_tty);
                kill_at = now_ms() + MSB_STOP_GRACE_MS;
            } else {
                kill_at = now_ms();   /* a second: at once */
            }
            handled = stops;
        }
        int open = msb_reader_open(rd);
        double now = now_ms();
        if (kill_at && !killed && now >= kill_at && (alive || open)) {
            signal_program(pid, alive, rd, SIGKILL, 0);
            killed = 1;
            killed_at = now;
        }
        if (!alive) {
            if (open == 0) break;
            if (killed && now - killed_at > DRAIN_MS) break;
            if (!kill_at && now - exited_at > DRAIN_MS) break;
        }
        if (msb_reader_step(rd, 100, err, errlen) != 0) {
            rc = -1;
            break;
        }
        if (alive && waitpid(pid, &status, WNOHANG) == pid) {
            alive = 0;
            exited_at = now_ms();
        }
    }
    if (alive) {          /* an error above: do not leave the program running unwatched */
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
    }
    if (pid > 0 && rc == 0) {
        ex->exited = WIFEXITED(status);
        ex->status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
        ex->signaled = WIFSIGNALED(status);
        ex->signo = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    ex->connections = msb_reader_accepted(rd);
    if (g_stops > 0) {
        ex->interrupted = 1;
        ex->stop_signal = g_stop;
    }
    msb_reader_free(rd);
    close(lfd);
    unlink(sock);
    rmdir(dir);
    return rc;
}
