/* reader.c — the program's connections read into lines (reader.h). */
#include "bridge/host/reader.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vocab/errf.h"

typedef struct conn {
    int fd, id;
    int pid;                   /* the peer's, when it connected (SO_PEERCRED), 0 unknown */
    char *buf;                 /* the line so far */
    size_t len, cap;
    int overflow;              /* the line is past MSB_MAX_LINE: dropped at its end */
} conn;

struct msb_reader {
    int lfd;
    msb_line_fn on_line;
    void *user;
    conn *c;                   /* the open connections, in the order accepted */
    int n, cap;
    int accepted;
    int backoff;               /* out of descriptors: the listening socket sits out one step */
    struct pollfd *pf;
    int pf_cap;
};

msb_reader *msb_reader_new(int listen_fd, msb_line_fn on_line, void *user)
{
    msb_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->lfd = listen_fd;
    r->on_line = on_line;
    r->user = user;
    if (listen_fd >= 0) {
        int fl = fcntl(listen_fd, F_GETFL);
        if (fl >= 0) fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK);
    }
    return r;
}

int msb_reader_open(const msb_reader *r) { return r ? r->n : 0; }
int msb_reader_accepted(const msb_reader *r) { return r ? r->accepted : 0; }

int msb_reader_peers(const msb_reader *r, int *pids, int max)
{
    int k = 0;
    for (int i = 0; r && i < r->n && k < max; i++)
        if (r->c[i].pid > 0) pids[k++] = r->c[i].pid;
    return k;
}

void msb_reader_free(msb_reader *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        close(r->c[i].fd);
        free(r->c[i].buf);
    }
    free(r->c);
    free(r->pf);
    free(r);
}

/* The line c holds is complete: on to the caller. */
static int emit(msb_reader *r, conn *c, char *err, size_t errlen)
{
    int rc = c->overflow ? r->on_line(NULL, 0, c->id, r->user)
                         : r->on_line(c->buf ? c->buf : "", c->len, c->id, r->user);
    c->len = 0;
    c->overflow = 0;
    return rc ? ms_errf(err, errlen, "the program's events could not be kept (out of memory, or the record of "
                                     "them could not be written)")
              : 0;
}

static int append(conn *c, const char *p, size_t k)
{
    if (c->len + k > c->cap) {
        size_t ncap = c->cap ? c->cap : 4096;
        while (ncap < c->len + k) ncap *= 2;
        if (ncap > MSB_MAX_LINE) ncap = MSB_MAX_LINE;
        char *g = realloc(c->buf, ncap);
        if (!g) return -1;
        c->buf = g;
        c->cap = ncap;
    }
    memcpy(c->buf + c->len, p, k);
    c->len += k;
    return 0;
}

/* Bytes that arrived on c, cut into lines. */
static int take(msb_reader *r, conn *c, const char *p, size_t n, char *err, size_t errlen)
{
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) : n;
        if (!c->overflow) {
            if (c->len + k > MSB_MAX_LINE) {
                c->overflow = 1;
                c->len = 0;
            } else if (k && append(c, p, k) != 0) {
                return ms_errf(err, errlen, "out of memory reading the program's events");
            }
        }
        if (!nl) break;
        if (emit(r, c, err, errlen) != 0) return -1;
        p += k + 1;
        n -= k + 1;
    }
    return 0;
}

/* Reads what c has, up to the budget: 1 open, 0 closed (its last line
 * passed on), -1 with err. */
static int read_conn(msb_reader *r, conn *c, char *err, size_t errlen)
{
    char chunk[65536];
    size_t got = 0;
    while (got < MSB_READ_BUDGET) {
        ssize_t n = read(c->fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
        if (n <= 0) {          /* the end (or a reset): the unterminated last line, if any */
            if ((c->len || c->overflow) && emit(r, c, err, errlen) != 0) return -1;
            return 0;
        }
        if (take(r, c, chunk, (size_t)n, err, errlen) != 0) return -1;
        got += (size_t)n;
        if ((size_t)n < sizeof chunk) return 1;    /* nothing more waiting, most likely */
    }
    return 1;
}

static void accept_all(msb_reader *r)
{
    for (;;) {
        int fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) r->backoff = 1;   /* EMFILE and the like */
            return;
        }
        if (r->n >= MSB_MAX_OPEN) {
            close(fd);
            continue;
        }
        if (r->n == r->cap) {
            int ncap = r->cap ? 2 * r->cap : 16;
            conn *g = realloc(r->c, (size_t)ncap * sizeof *g);
            if (!g) {
                close(fd);
                r->backoff = 1;
                return;
            }
            r->c = g;
            r->cap = ncap;
        }
        struct ucred cred;
        socklen_t cl = sizeof cred;
        int pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 ? (int)cred.pid : 0;
        r->c[r->n++] = (conn){ .fd = fd, .id = r->accepted++, .pid = pid };
    }
}

int msb_reader_step(msb_reader *r, int timeout_ms, char *err, size_t errlen)
{
    if (r->pf_cap < r->n + 1) {
        int ncap = r->n + 1 + 16;
        struct pollfd *g = realloc(r->pf, (size_t)ncap * sizeof *g);
        if (!g) return ms_errf(err, errlen, "out of memory reading the program's events");
        r->pf = g;
        r->pf_cap = ncap;
    }
    /* the poll set: the connections open now, then the listening socket */
    int polled = r->n, np = 0;
    for (int i = 0; i < polled; i++) r->pf[np++] = (struct pollfd){ .fd = r->c[i].fd, .events = POLLIN };
    int listening = r->lfd >= 0 && !r->backoff;
    if (listening) r->pf[np++] = (struct pollfd){ .fd = r->lfd, .events = POLLIN };
    r->backoff = 0;
    int k = poll(r->pf, (nfds_t)np, timeout_ms);
    if (k < 0) return errno == EINTR ? 0 : ms_errf(err, errlen, "poll: %s", strerror(errno));
    if (k == 0) return 0;
    int rc = 0;
    for (int i = 0; i < polled; i++) {
        if (!(r->pf[i].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) continue;
        int s = read_conn(r, &r->c[i], err, errlen);
        if (s < 0) {
            rc = -1;
            break;
        }
        if (s == 0) {
            close(r->c[i].fd);
            r->c[i].fd = -1;
        }
    }
    int w = 0;                 /* the closed ones out, the order kept */
    for (int i = 0; i < r->n; i++) {
        if (r->c[i].fd >= 0) r->c[w++] = r->c[i];
        else free(r->c[i].buf);
    }
    r->n = w;
    if (rc == 0 && listening && (r->pf[polled].revents & POLLIN)) accept_all(r);
    return rc;
}
