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

#define MAX_CONNS 64
#define MAX_LINE (1 << 20)        /* a longer line is cut off and reported as bad */
#define DRAIN_MS 2000

static volatile sig_atomic_t g_child = 0, g_interrupted = 0;

/* A signal from the terminal already reached the program (same process
 * group); one sent to memsplit alone (kill, a job scheduler) is passed on. */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    g_interrupted = 1;
    if (g_child > 0 && si && si->si_code != SI_KERNEL) kill((pid_t)g_child, sig);
}

typedef struct conn {
    int fd;
    char *buf;
    size_t len, cap;
    int overflow;
} conn;

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
    if (l->stdout_to_stderr) ok &= dup2(2, 1) == 1;
    if (ok) execvp(l->argv[0], l->argv);
    int e = ok ? errno : ENOMEM;
    ssize_t w = write(report_fd, &e, sizeof e);
    (void)w;
    _exit(127);
}

static int read_conn(conn *c, int id, msb_line_fn on_line, void *user)
{
    char chunk[65536];
    ssize_t n = read(c->fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
    if (n <= 0) return 0;       /* closed */
    for (ssize_t i = 0; i < n; i++) {
        char ch = chunk[i];
        if (ch == '\n') {
            if (!c->overflow && on_line(c->buf ? c->buf : "", c->len, id, user) != 0) return -1;
            c->len = 0;
            c->overflow = 0;
            continue;
        }
        if (c->len + 1 >= c->cap) {
            if (c->cap >= MAX_LINE) { c->overflow = 1; continue; }
            size_t ncap = c->cap ? c->cap * 2 : 4096;
            char *g = realloc(c->buf, ncap);
            if (!g) return -1;
            c->buf = g;
            c->cap = ncap;
        }
        c->buf[c->len++] = ch;
        c->buf[c->len] = '\0';
    }
    return 1;
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

int msb_run_program(const msb_launch *l, msb_line_fn on_line, void *user, msb_exit *ex, char *err, size_t errlen)
{
    memset(ex, 0, sizeof *ex);
    if (!l || !l->argv || !l->argv[0]) return ms_errf(err, errlen, "no program to run after --");
    char dir[] = "/tmp/memsplit-bridge-XXXXXX";
    if (!mkdtemp(dir)) return ms_errf(err, errlen, "cannot make a folder for the bridge socket: %s", strerror(errno));
    char sock[sizeof dir + 8];
    snprintf(sock, sizeof sock, "%s/s", dir);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    int pipefd[2] = { -1, -1 };
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 16) != 0 ||
        pipe2(pipefd, O_CLOEXEC) != 0) {
        ms_errf(err, errlen, "cannot open the bridge socket %s: %s", sock, strerror(errno));
        if (lfd >= 0) close(lfd);
        unlink(sock);
        rmdir(dir);
        return -1;
    }
    fcntl(lfd, F_SETFL, O_NONBLOCK);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    g_interrupted = 0;
    g_child = 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) child_exec(l, sock, pipefd[1]);
    close(pipefd[1]);
    int rc = 0;
    if (pid < 0) {
        rc = ms_errf(err, errlen, "cannot start the program: %s", strerror(errno));
    } else {
        g_child = pid;
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        int e = 0;
        if (read(pipefd[0], &e, sizeof e) == (ssize_t)sizeof e) {   /* exec failed: EOF otherwise */
            waitpid(pid, NULL, 0);
            rc = ms_errf(err, errlen, "cannot run %s: %s", l->argv[0], strerror(e));
        }
    }
    close(pipefd[0]);
    conn conns[MAX_CONNS];
    int n_conns = 0, alive = rc == 0 && pid > 0, status = 0;
    double exited_at = 0;
    while (rc == 0) {
        struct pollfd pf[MAX_CONNS + 1];
        pf[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < n_conns; i++) pf[i + 1] = (struct pollfd){ .fd = conns[i].fd, .events = POLLIN };
        int open_conns = 0;
        for (int i = 0; i < n_conns; i++) open_conns += conns[i].fd >= 0;
        if (!alive && (open_conns == 0 || now_ms() - exited_at > DRAIN_MS)) break;
        int k = poll(pf, (nfds_t)n_conns + 1, 100);
        if (k < 0 && errno != EINTR) { rc = ms_errf(err, errlen, "poll: %s", strerror(errno)); break; }
        if (k > 0 && (pf[0].revents & POLLIN)) {
            int fd;
            while ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
                if (n_conns == MAX_CONNS) { close(fd); continue; }
                conns[n_conns++] = (conn){ .fd = fd };
                ex->connections++;
            }
        }
        for (int i = 0; k > 0 && i < n_conns; i++) {
            if (conns[i].fd < 0 || !(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            int r;
            while ((r = read_conn(&conns[i], i, on_line, user)) == 1 && (pf[i + 1].revents & POLLIN)) {
                /* one read per wake-up is enough unless more is waiting */
                struct pollfd one = { .fd = conns[i].fd, .events = POLLIN };
                if (poll(&one, 1, 0) <= 0) break;
            }
            if (r <= 0) {
                close(conns[i].fd);
                conns[i].fd = -1;
                if (r < 0) rc = ms_errf(err, errlen, "out of memory reading the program's events");
            }
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
    ex->interrupted = g_interrupted;
    if (pid > 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    g_child = 0;
    for (int i = 0; i < n_conns; i++) {
        if (conns[i].fd >= 0) close(conns[i].fd);
        free(conns[i].buf);
    }
    close(lfd);
    unlink(sock);
    rmdir(dir);
    return rc;
}
