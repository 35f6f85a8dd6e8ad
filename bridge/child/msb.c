/* msb.c — the bridge's C library inside the program: connection, writer,
 * ledger calls (msb.h). */
#include "bridge/child/msb.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bridge/layers.h"
#include "bridge/ledger.h"

static struct {
    pthread_mutex_t mu;
    int opened;          /* msb_open ran */
    int fd;              /* -1: inert */
    dev_t dev;           /* the socket's identity: the program may close fd and reuse the number */
    ino_t ino;
    pid_t pid;           /* the process that connected */
    double t0;
    int layer, phase;
    msl_ledger ledger;
    int batch;           /* msb_batch_transitions: `w` lines wait in pend */
    int flusher;         /* the thread that sends what waited PEND_WAIT_US is running */
    size_t pend_n;
    double pend_t0;      /* when the oldest waiting line was made */
    char pend[32768];
} S = { .mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .layer = -1 };

/* how long a transition's line may wait (msb_batch_transitions) */
#define PEND_WAIT_US 10000.0

static double mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Is S.fd still the socket msb_open connected? The program owns its
 * descriptors: it may close ours and get the number back for a file or a
 * socket of its own, which the bridge must neither write to nor close. */
static int still_ours(void)
{
    struct stat st;
    return S.fd >= 0 && fstat(S.fd, &st) == 0 && S.dev == st.st_dev && S.ino == st.st_ino;
}

/* The bridge goes inert: its socket is closed only if the descriptor is
 * still its own. */
static void let_go(void)
{
    if (still_ours()) close(S.fd);
    S.fd = -1;
    S.pend_n = 0;
}

/* A forked child (a DataLoader worker) must never write: the stream is the
 * parent process's. Closing here only drops the child's copy of the fd. */
static void after_fork_child(void)
{
    let_go();
    S.flusher = 0;       /* (a thread is not forked) */
    pthread_mutex_init(&S.mu, NULL);
}

int msb_open(void)
{
    pthread_mutex_lock(&S.mu);
    if (!S.opened) {
        S.opened = 1;
        S.t0 = mono_us();
        msl_init(&S.ledger);
        const char *path = getenv("MEMSPLIT_BRIDGE_SOCK");
        if (path && *path && strlen(path) < sizeof(((struct sockaddr_un *)0)->sun_path)) {
            int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            struct sockaddr_un a = { .sun_family = AF_UNIX };
            snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
            struct stat st;
            if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && fstat(fd, &st) == 0) {
                S.fd = fd;
                S.dev = st.st_dev;
                S.ino = st.st_ino;
                S.pid = getpid();
                pthread_atfork(NULL, NULL, after_fork_child);
            } else if (fd >= 0) {
                close(fd);
            }
        }
    }
    int rc = S.fd >= 0 ? 0 : -1;
    pthread_mutex_unlock(&S.mu);
    return rc;
}

int msb_active(void) { return S.fd >= 0 && S.pid == getpid(); }

double msb_now_us(void) { return mono_us() - S.t0; }

/* Writes one line; the caller holds the mutex. The descriptor is checked
 * to be the bridge's socket before each line (the program may have closed
 * it and reused the number). */
static int write_raw(const char *buf, size_t n)
{
    if (S.fd < 0 || S.pid != getpid()) return -1;
    if (!still_ours()) {
        S.fd = -1;              /* not ours any more: never written to, never closed */
        return -1;
    }
    while (n > 0) {
        ssize_t w = send(S.fd, buf, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            let_go();           /* the parent is gone: run on, inert */
            return -1;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The waiting transitions' lines, in one send (the caller holds the mutex). */
static int flush_pend(void)
{
    if (!S.pend_n) return 0;
    size_t n = S.pend_n;
    S.pend_n = 0;
    return write_raw(S.pend, n);
}

/* One line, after every line that waits: the stream keeps the order the
 * lines were made in (the caller holds the mutex). */
static int write_line(const char *buf, size_t n)
{
    int rc = flush_pend();
    return write_raw(buf, n) != 0 ? -1 : rc;
}

int msb_send(const char *obj)
{
    if (!obj || !msb_active()) return msb_active() ? -1 : 0;
    size_t n = strlen(obj);
    char small[4096];
    char *buf = n + 2 <= sizeof small ? small : malloc(n + 2);
    if (!buf) return -1;
    memcpy(buf, obj, n);
    buf[n] = '\n';
    pthread_mutex_lock(&S.mu);
    int rc = write_line(buf, n + 1);
    pthread_mutex_unlock(&S.mu);
    if (buf != small) free(buf);
    return rc;
}

/* Appends s to out as the body of a JSON string (no quotes), cut to fit. */
static void json_escape(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; s && *s && n + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') { out[n++] = '\\'; out[n++] = (char)ch; }
        else if (ch < 0x20) n += (size_t)snprintf(out + n, cap - n, "\\u%04x", ch);
        else out[n++] = (char)ch;
    }
    out[n] = '\0';
}

int msb_warn(const char *what, const char *text)
{
    char w[64], t[1024], line[1200];
    json_escape(w, sizeof w, what);
    json_escape(t, sizeof t, text);
    snprintf(line, sizeof line, "{\"ev\":\"warn\",\"what\":\"%s\",\"text\":\"%s\"}", w, t);
    return msb_send(line);
}

static void queue_line(const char *line, size_t n);

/* A printf-style line (the caller holds the mutex), written at once or,
 * where wait, queued to go with the next (queue_line). */
static void vemit(int wait, const char *fmt, va_list ap)
{
    char buf[512];
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    if (n < 0 || (size_t)n >= sizeof buf - 1) return;   /* only numbers and fixed names: never long */
    buf[n++] = '\n';
    if (wait) queue_line(buf, (size_t)n);
    else write_line(buf, (size_t)n);
}

__attribute__((format(printf, 1, 2))) static void emitf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vemit(0, fmt, ap);
    va_end(ap);
}

void msb_where(int layer, int phase)
{
    pthread_mutex_lock(&S.mu);
    S.layer = layer;
    S.phase = phase;
    pthread_mutex_unlock(&S.mu);
}

/* Sends the transitions that waited PEND_WAIT_US, every PEND_WAIT_US,
 * until the bridge goes inert: a program that stops making events (a hang,
 * a long step) still has its last unit boundaries said. */
static void *flusher(void *arg)
{
    (void)arg;
    const struct timespec nap = { 0, (long)(PEND_WAIT_US * 1000.0) };
    for (;;) {
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&S.mu);
        int live = msb_active();
        if (live && S.pend_n && mono_us() - S.pend_t0 >= PEND_WAIT_US) flush_pend();
        if (!live) S.flusher = 0;
        pthread_mutex_unlock(&S.mu);
        if (!live) return NULL;
    }
}

/* At the program's exit: what waits is sent. */
static void flush_at_exit(void)
{
    pthread_mutex_lock(&S.mu);
    if (msb_active()) flush_pend();
    pthread_mutex_unlock(&S.mu);
}

/* The flusher, once a process (the caller holds the mutex); its thread
 * takes no signal, which stay the program's main thread's. Where no thread
 * can be made, the lines still go with the next other line or the next
 * transition after PEND_WAIT_US; that is not tried again. */
static void start_flusher(void)
{
    static int at_exit;
    static pid_t failed_in;
    if (S.flusher || failed_in == S.pid) return;
    if (!at_exit) at_exit = atexit(flush_at_exit) == 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t t;
    pthread_attr_t at;
    if (pthread_attr_init(&at) == 0) {
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        S.flusher = pthread_create(&t, &at, flusher, NULL) == 0;
        pthread_attr_destroy(&at);
    }
    if (!S.flusher) failed_in = S.pid;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void msb_batch_transitions(int on)
{
    pthread_mutex_lock(&S.mu);
    S.batch = on != 0;
    if (!S.batch) flush_pend();
    pthread_mutex_unlock(&S.mu);
}

/* A line that waits (msb_batch_transitions): sent with the next other
 * line, when the buffer is full, when the oldest has waited PEND_WAIT_US
 * (here or by the flusher), or at exit (the caller holds the mutex). */
static void queue_line(const char *line, size_t n)
{
    double now = mono_us();
    if (S.pend_n + n > sizeof S.pend || (S.pend_n && now - S.pend_t0 >= PEND_WAIT_US)) flush_pend();
    if (!S.pend_n) S.pend_t0 = now;
    memcpy(S.pend + S.pend_n, line, n);
    S.pend_n += n;
    start_flusher();
}

__attribute__((format(printf, 2, 3))) static void emit_maybe_waiting(int wait, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vemit(wait, fmt, ap);
    va_end(ap);
}

int msb_transition(int layer, int phase, int64_t alloc, int64_t peak, int64_t reserved, int64_t rpeak, int64_t xin,
                   int xl, int fp)
{
    pthread_mutex_lock(&S.mu);
    S.layer = layer;
    S.phase = phase;
    if (msb_active())
        emit_maybe_waiting(S.batch,
                           "{\"ev\":\"w\",\"l\":%d,\"p\":%d,\"alloc\":%" PRId64 ",\"peak\":%" PRId64
                           ",\"reserved\":%" PRId64 ",\"rpeak\":%" PRId64 ",\"xin\":%" PRId64 ",\"xl\":%d,\"fp\":%d}",
                           layer, phase, alloc, peak, reserved, rpeak, xin, xl, fp);
    pthread_mutex_unlock(&S.mu);
    return 0;
}

int msb_current_layer(void) { return S.layer; }
int msb_current_phase(void) { return S.phase; }

int msb_set_capacity(int dev, uint64_t bytes)
{
    pthread_mutex_lock(&S.mu);
    int rc = msl_set_capacity(&S.ledger, dev, bytes);
    pthread_mutex_unlock(&S.mu);
    return rc;
}

/* Event `x`: an allocation the accounting cap refused (called locked). */
static void emit_refusal(double t, int dev, uint64_t bytes, int cat, int layer, int phase, const msl_refusal *why)
{
    emitf("{\"ev\":\"x\",\"t\":%.1f,\"d\":%d,\"b\":%" PRIu64 ",\"c\":%d,\"l\":%d,\"p\":%d,\"live\":%" PRIu64
          ",\"cap\":%" PRIu64 "}",
          t, dev, bytes, cat, layer, phase, why->live, why->capacity);
}

int msb_alloc(int dev, uint64_t key, uint64_t bytes, int cat, int layer)
{
    if (!msb_active()) return 0;
    pthread_mutex_lock(&S.mu);
    msl_refusal why;
    int rc = msl_alloc(&S.ledger, dev, key, bytes, cat, layer, &why);
    double t = msb_now_us();
    if (rc == MSL_OK && bytes)
        emitf("{\"ev\":\"a\",\"t\":%.1f,\"d\":%d,\"k\":%" PRIu64 ",\"b\":%" PRIu64 ",\"c\":%d,\"l\":%d,\"p\":%d}", t,
              dev, key, bytes, cat, layer, S.phase);
    else if (rc == MSL_REFUSED)
        emit_refusal(t, dev, bytes, cat, layer, S.phase, &why);
    pthread_mutex_unlock(&S.mu);
    return rc;
}

/* A replayed run of events goes out as batch lines (event `m`, docs/
 * bridge.md): one array per field, so a step's allocator trace is a few
 * lines the parent parses in a fraction of the time one line per event
 * takes (0.49 against 2.2 us an event, measured on the CPU machine) and a
 * third of the bytes. Each field's numbers gather in a buffer of their own;
 * a line is written when they near BATCH_BYTES, below the parent's line
 * limit (bridge/host/reader.h). */
#define BATCH_BYTES (256 * 1024)
enum { BF_T, BF_K, BF_B, BF_C, BF_L, BF_D, BF_N };
static const char *const batch_key[BF_N] = { "t", "k", "b", "c", "l", "d" };

typedef struct {
    char *f[BF_N], *ops;       /* the fields' numbers, comma-separated; the ops */
    size_t n[BF_N], n_ops, cap;
    int phase, failed;
    int n_fields;              /* BF_D: device 0 throughout, no "d" array; BF_N: with one */
} batch;

static void batch_flush(batch *b)
{
    if (!b->n_ops) return;
    size_t total = 64 + b->n_ops;
    for (int i = 0; i < b->n_fields; i++) total += b->n[i] + 8;
    char *line = malloc(total);
    if (!line) {
        b->failed = 1;
    } else {
        size_t k = (size_t)snprintf(line, total, "{\"ev\":\"m\",\"p\":%d,\"o\":\"%.*s\"", b->phase, (int)b->n_ops,
                                    b->ops);
        for (int i = 0; i < b->n_fields; i++)
            k += (size_t)snprintf(line + k, total - k, ",\"%s\":[%.*s]", batch_key[i], (int)b->n[i], b->f[i]);
        k += (size_t)snprintf(line + k, total - k, "}\n");
        if (write_line(line, k) != 0) b->failed = 1;
        free(line);
    }
    b->n_ops = 0;
    for (int i = 0; i < BF_N; i++) b->n[i] = 0;
}

/* v in decimal at p, with a minus sign where neg (v is then the magnitude);
 * its length. snprintf took 3.5 ms for a ResNet-152 step's 40,000 numbers
 * on the CPU machine, this 0.6 ms (issue 40: the trace's cost a step). */
static size_t put_dec(char *p, uint64_t v, int neg)
{
    char t[20];
    size_t n = 0, k = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (neg) p[k++] = '-';
    while (n) p[k++] = t[--n];
    return k;
}

/* One event into the batch: op and its numbers (its device where the
 * batch carries devices). */
static void batch_add(batch *b, char op, uint64_t t, uint64_t key, uint64_t bytes, int cat, int layer, int dev)
{
    size_t used = b->n_ops;
    for (int i = 0; i < b->n_fields; i++) used += b->n[i];
    if (used > BATCH_BYTES) batch_flush(b);
    const uint64_t v[BF_N] = { t, key, bytes, (uint64_t)cat, (uint64_t)layer, (uint64_t)dev };
    for (int i = 0; i < b->n_fields; i++) {
        int neg = (i == BF_C || i == BF_L) && (int64_t)v[i] < 0;   /* a layer of -1: outside any */
        char *p = b->f[i] + b->n[i];
        size_t k = 0;
        if (b->n_ops) p[k++] = ',';
        k += put_dec(p + k, neg ? (uint64_t)0 - v[i] : v[i], neg);
        b->n[i] += k;
    }
    b->ops[b->n_ops++] = op;
}

int msb_replay(int n, const char *op, const uint64_t *key, const uint64_t *bytes, const int *cat, const int *layer,
               const int *dev, int phase, const double *t)
{
    if (n < 0 || (n > 0 && (!op || !key || !bytes || !cat || !layer || !t))) return -1;
    for (int i = 0; dev && i < n; i++)
        if (dev[i] < 0 || dev[i] >= MSL_MAX_DEVICES) return -1;
    if (!msb_active()) return 0;
    /* a buffer holds BATCH_BYTES and one more event's number (at most 21
     * characters and a comma) */
    batch b = { .cap = BATCH_BYTES + 64, .phase = phase, .n_fields = dev ? BF_N : BF_D };
    int ok = 1;
    for (int i = 0; i < BF_N; i++) ok &= (b.f[i] = malloc(b.cap)) != NULL;
    ok &= (b.ops = malloc(b.cap)) != NULL;
    if (!ok) {
        for (int i = 0; i < BF_N; i++) free(b.f[i]);
        free(b.ops);
        return -1;
    }
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < n; i++) {
        uint64_t ti = t[i] > 0 ? (uint64_t)(t[i] + 0.5) : 0;   /* whole microseconds, as the database keeps them */
        int d = dev ? dev[i] : 0;
        if (op[i] == 'a') {
            msl_refusal why;
            int rc = msl_alloc(&S.ledger, d, key[i], bytes[i], cat[i], layer[i], &why);
            if (rc == MSL_OK && bytes[i]) {
                batch_add(&b, 'a', ti, key[i], bytes[i], cat[i], layer[i], d);
            } else if (rc == MSL_REFUSED) {
                batch_flush(&b);     /* the events before it come first */
                emit_refusal((double)ti, d, bytes[i], cat[i], layer[i], phase, &why);
            }
        } else if (op[i] == 'f') {
            if (msl_free(&S.ledger, key[i], NULL)) batch_add(&b, 'f', ti, key[i], 0, 0, 0, 0);
        } else if (op[i] == 'r') {
            const msl_rec *r = msl_find(&S.ledger, key[i]);
            if (r && (r->cat != cat[i] || r->layer != layer[i]) && msl_relabel(&S.ledger, key[i], cat[i], layer[i]) == 0)
                batch_add(&b, 'r', ti, key[i], 0, cat[i], layer[i], r->dev);
        }
    }
    batch_flush(&b);
    pthread_mutex_unlock(&S.mu);
    for (int i = 0; i < BF_N; i++) free(b.f[i]);
    free(b.ops);
    return b.failed ? -1 : 0;
}

void msb_free(uint64_t key)
{
    if (!msb_active()) return;
    pthread_mutex_lock(&S.mu);
    int dev = 0;
    uint64_t b = msl_free(&S.ledger, key, &dev);
    if (b) emitf("{\"ev\":\"f\",\"t\":%.1f,\"d\":%d,\"k\":%" PRIu64 "}", msb_now_us(), dev, key);
    pthread_mutex_unlock(&S.mu);
}

int msb_relabel(uint64_t key, int cat, int layer)
{
    if (!msb_active()) return 0;
    pthread_mutex_lock(&S.mu);
    const msl_rec *r = msl_find(&S.ledger, key);
    int rc = 0;
    if (r && (r->cat != cat || r->layer != layer)) {
        rc = msl_relabel(&S.ledger, key, cat, layer);
        if (rc == 0) emitf("{\"ev\":\"r\",\"k\":%" PRIu64 ",\"c\":%d,\"l\":%d}", key, cat, layer);
    }
    pthread_mutex_unlock(&S.mu);
    return rc;
}

uint64_t msb_live(int dev, int cat)
{
    if (dev < 0 || dev >= MSL_MAX_DEVICES || cat < -1 || cat >= MS_CAT_N) return 0;
    pthread_mutex_lock(&S.mu);
    const msl_device *D = msl_dev(&S.ledger, dev);
    uint64_t v = cat < 0 ? D->live : D->live_cat[cat];
    pthread_mutex_unlock(&S.mu);
    return v;
}

uint64_t msb_peak(int dev)
{
    if (dev < 0 || dev >= MSL_MAX_DEVICES) return 0;
    pthread_mutex_lock(&S.mu);
    uint64_t v = msl_dev(&S.ledger, dev)->peak;
    pthread_mutex_unlock(&S.mu);
    return v;
}

uint64_t msb_peak_cat(int dev, int cat)
{
    if (dev < 0 || dev >= MSL_MAX_DEVICES || cat < 0 || cat >= MS_CAT_N) return 0;
    pthread_mutex_lock(&S.mu);
    uint64_t v = msl_dev(&S.ledger, dev)->peak_cat[cat];
    pthread_mutex_unlock(&S.mu);
    return v;
}

void msb_reset_peak(int dev)
{
    if (dev < 0 || dev >= MSL_MAX_DEVICES) return;
    pthread_mutex_lock(&S.mu);
    msl_reset_peak(&S.ledger, dev);
    pthread_mutex_unlock(&S.mu);
}

int msb_is(uint64_t key, int cat, int *layer)
{
    pthread_mutex_lock(&S.mu);
    const msl_rec *r = msl_find(&S.ledger, key);
    int yes = r && r->cat == cat;
    if (yes && layer) *layer = r->layer;
    pthread_mutex_unlock(&S.mu);
    return yes;
}

int msb_device_of(uint64_t key)
{
    pthread_mutex_lock(&S.mu);
    const msl_rec *r = msl_find(&S.ledger, key);
    int d = r ? r->dev : -1;
    pthread_mutex_unlock(&S.mu);
    return d;
}

int msb_move(uint64_t key, int dev)
{
    if (!msb_active()) return 0;
    pthread_mutex_lock(&S.mu);
    const msl_rec *r = msl_find(&S.ledger, key);
    int rc = -1;
    if (r && r->dev == dev) {
        rc = 0;
    } else if (r) {
        msl_rec old = *r;
        msl_refusal why;
        msl_free(&S.ledger, key, NULL);
        rc = msl_alloc(&S.ledger, dev, key, old.bytes, old.cat, old.layer, &why);
        if (rc == MSL_OK)
            emitf("{\"ev\":\"a\",\"t\":%.1f,\"d\":%d,\"k\":%" PRIu64 ",\"b\":%" PRIu64 ",\"c\":%d,\"l\":%d,\"p\":%d}",
                  msb_now_us(), dev, key, old.bytes, old.cat, old.layer, S.phase);
        else
            msl_alloc(&S.ledger, old.dev, key, old.bytes, old.cat, old.layer, NULL);   /* it stays */
    }
    pthread_mutex_unlock(&S.mu);
    return rc;
}

int msb_units(const char *tree_tsv, const char *layers, int *unit_of, int cap, char *why, size_t whylen)
{
    return msb_pick_units(tree_tsv, layers, unit_of, cap, why, whylen);
}

int msb_fingerprint_of(const char *tree_tsv, char *out, size_t outlen)
{
    return msb_fingerprint(tree_tsv, out, outlen);
}

void msb_segment(const ms_mem_event *e)
{
    if (!msb_active() || msb_in_ballast()) return;
    int result = e->kind == MS_EV_FAIL ? (e->api_result ? e->api_result : 2) : 0, is_free = e->kind == MS_EV_FREE;
    pthread_mutex_lock(&S.mu);
    emitf("{\"ev\":\"seg\",\"t\":%.1f,\"api\":\"%.40s\",\"b\":%" PRIu64 ",\"addr\":%" PRIu64
          ",\"rc\":%d,\"free\":%d,\"l\":%d,\"p\":%d}",
          msb_now_us(), e->api, e->bytes, e->address, result, is_free, S.layer, S.phase);
    pthread_mutex_unlock(&S.mu);
}

/* For the ballast (ballast.c), which writes its own event. */
void msb_emit_ballast(int ordinal, uint64_t taken, uint64_t total, uint64_t free_before, uint64_t capacity);
void msb_emit_ballast(int ordinal, uint64_t taken, uint64_t total, uint64_t free_before, uint64_t capacity)
{
    pthread_mutex_lock(&S.mu);
    emitf("{\"ev\":\"ballast\",\"t\":%.1f,\"device\":%d,\"b\":%" PRIu64 ",\"total\":%" PRIu64 ",\"free\":%" PRIu64
          ",\"capacity\":%" PRIu64 "}",
          msb_now_us(), ordinal, taken, total, free_before, capacity);
    pthread_mutex_unlock(&S.mu);
}
