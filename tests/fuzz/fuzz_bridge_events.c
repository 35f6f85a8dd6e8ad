/* fuzz_bridge_events.c — the program's side of the bridge socket, the
 * untrusted input memsplit reads while a program runs: the event loop's
 * reader (bridge/host/reader.h) over real Unix connections, the collector
 * (bridge/host/collect.h) and the trace (bridge/trace.h), then the rows and
 * memory events made from the trace (bridge/rows.h), as a trial does.
 *
 * The input is a script, one operation per line:
 *   w K TEXT   client K (0-7, connected on first use) writes TEXT and '\n'
 *   p K TEXT   client K writes TEXT with no newline (a line that stalls)
 *   c K        client K closes          h K   client K shuts its writing half
 *   s          one pass of the reader (it must never wait on a connection)
 *   anything else: written as a line by client 0
 * (K is one character, its value mod 8; "w3{...}" writes on client 3). So
 * a recorded event stream (--record-events) is a seed after
 * `sed 's/^\([0-9]\)\t/w\1/'`. At the end every client closes and the
 * reader drains. Checked beyond no crash, leak
 * or hang: every line reaches the collector (as an event or a bad line:
 * one per newline written, plus one per connection that ended in the
 * middle of a line), on_step is called once per step, and a profile made
 * from the trace writes as JSON (its text is valid UTF-8), and a record
 * made from it as a record pass's (bridge/record.h) passes the planner's
 * check, its range table equal to the plain replay of each range; what
 * the trial says of its steps (bridge/steps.h) counts no more units than
 * there are, names them in valid UTF-8 within the buffer, and gives a
 * smallest input no larger than the largest. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bridge/host/collect.h"
#include "bridge/host/reader.h"
#include "bridge/record.h"
#include "bridge/rows.h"
#include "bridge/steps.h"
#include "bridge/trace.h"
#include "planner/record_replay.h"
#include "tests/fuzz/fuzz_util.h"
#include "vocab/profile_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CLIENTS 8

static int g_listen = -1;
static struct sockaddr_un g_addr;
static socklen_t g_addrlen;

/* One listening socket for the process, in the abstract namespace (no file). */
static void listen_once(void)
{
    if (g_listen >= 0) return;
    g_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&g_addr, 0, sizeof g_addr);
    g_addr.sun_family = AF_UNIX;
    int n = snprintf(g_addr.sun_path + 1, sizeof g_addr.sun_path - 1, "memsplit-fuzz-bridge-%d", (int)getpid());
    g_addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (g_listen < 0 || bind(g_listen, (struct sockaddr *)&g_addr, g_addrlen) != 0 || listen(g_listen, 64) != 0)
        fz_fail("cannot listen", strerror(errno));
}

typedef struct run {
    msb_reader *r;
    int fd[CLIENTS];
    int partial[CLIENTS];      /* the connection's last line is unfinished */
    int shut[CLIENTS];         /* it shut its writing half: its end is seen */
    long expected;             /* lines the collector must get */
    long got;                  /* lines it got */
    msb_collector *c;
} run;

/* jansson takes only valid UTF-8 into a string */
static int utf8_ok(const char *s)
{
    json_t *j = json_string(s);
    json_decref(j);
    return j != NULL;
}

static int count_line(const char *line, size_t len, int conn, void *user)
{
    run *x = user;
    x->got++;
    return msb_collect_line(line, len, conn, x->c);
}

/* client k's connection ends (it closes, or shuts its writing half) */
static void ends(run *x, int k)
{
    if (!x->shut[k] && x->partial[k]) x->expected++;
    x->partial[k] = 0;
    x->shut[k] = 1;
}

static void step(run *x)
{
    char err[256];
    if (msb_reader_step(x->r, 0, err, sizeof err) != 0) fz_fail("the reader failed", err);
}

static int client(run *x, int k)
{
    if (x->fd[k] >= 0) return x->fd[k];
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&g_addr, g_addrlen) != 0) fz_fail("cannot connect", strerror(errno));
    x->partial[k] = x->shut[k] = 0;
    return x->fd[k] = fd;
}

/* Writes all of p, letting the reader drain the socket when it is full;
 * counts the lines it completes. */
static void put(run *x, int k, const char *p, size_t n)
{
    int fd = client(x, k);
    if (x->shut[k]) return;    /* shut for writing: nothing more goes */
    for (int tries = 0; n > 0 && tries < 1000; tries++) {
        ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            for (ssize_t i = 0; i < w; i++) {
                if (p[i] == '\n') x->expected++;
                x->partial[k] = p[i] != '\n';
            }
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            fz_fail("a client could not write", strerror(errno));
        } else {
            step(x);
        }
    }
    if (n) fz_fail("a client could not write", "the reader never drained its socket");
}

static void on_step(const msb_trace *t, void *user)
{
    (void)t;
    (*(int *)user)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w"))) fz_fail("cannot open /dev/null", NULL);
    listen_once();
    msb_trace t;
    msb_trace_init(&t);
    int steps_seen = 0;
    msb_collector c = { &t, sink, on_step, &steps_seen };
    run x = { .c = &c };
    x.r = msb_reader_new(g_listen, count_line, &x);
    if (!x.r) fz_fail("out of memory", NULL);
    for (int k = 0; k < CLIENTS; k++) x.fd[k] = -1;
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char op = len ? p[0] : 0;
        int k = len > 1 ? (unsigned char)p[1] % CLIENTS : 0;
        const char *text = len > 2 ? p + 2 : "";
        size_t tlen = len > 2 ? len - 2 : 0;
        if (op == 'w' || op == 'p') {
            /* the text and its newline in one write, as the bridge's writer does */
            char *line = malloc(tlen + 1);
            if (!line) fz_fail("out of memory", NULL);
            memcpy(line, text, tlen);
            line[tlen] = '\n';
            put(&x, k, line, tlen + (op == 'w'));
            free(line);
        } else if (op == 'c' && x.fd[k] >= 0) {
            ends(&x, k);
            close(x.fd[k]);
            x.fd[k] = -1;
        } else if (op == 'h' && x.fd[k] >= 0) {
            ends(&x, k);
            shutdown(x.fd[k], SHUT_WR);
        } else if (op == 's') {
            step(&x);
        } else if (op != 'c' && op != 'h') {
            char *line = malloc(len + 1);
            if (!line) fz_fail("out of memory", NULL);
            memcpy(line, p, len);
            line[len] = '\n';
            put(&x, 0, line, len + 1);
            free(line);
        }
        p += len + (nl ? 1 : 0);
    }
    for (int k = 0; k < CLIENTS; k++)
        if (x.fd[k] >= 0) {
            ends(&x, k);
            close(x.fd[k]);
        }
    /* drained: every connection accepted, read to its end and closed */
    for (int i = 0; i < 1000 && (msb_reader_open(x.r) > 0 || i < 2); i++) step(&x);
    if (msb_reader_open(x.r) > 0) fz_fail("connections still open after every client closed", NULL);
    if (x.got != x.expected) {
        char d[96];
        snprintf(d, sizeof d, "%ld lines written, %ld read", x.expected, x.got);
        fz_fail("a line was lost or made up between the program and the collector", d);
    }
    if (steps_seen != t.n_steps + t.n_stepdata)
        fz_fail("on_step was not called once per step and once per step's late data", NULL);
    msb_reader_free(x.r);

    ms_mem_event *ev = NULL;
    int n = msb_trace_mem_events(&t, &ev);
    if (n < 0) fz_fail("out of memory", NULL);
    free(ev);
    ms_profile prof;
    int incomplete = 0;
    char err[512];
    msb_rows_opts o = { .capacity = 1 << 20, .model_name = "fuzz.py" };
    for (int pass = 0; pass < 2; pass++) {
        /* the trial alone, then with itself as the uncapped pass */
        if (msb_build_profile(&t, pass ? &t : NULL, &o, &prof, &incomplete, err, sizeof err) == 0) {
            json_t *j = ms_profile_to_json(&prof);
            if (!j) fz_fail("a profile made from the trace does not write as JSON", prof.layer_list);
            char *text = json_dumps(j, JSON_COMPACT);
            if (!text) fz_fail("a profile made from the trace does not dump", NULL);
            fputs(text, sink);
            free(text);
            json_decref(j);
        }
        ms_profile_free(&prof);
        if (!t.oom.happened) break;
    }
    /* the steps' units and inputs, into buffers small enough to cut names */
    char names[24];
    uint64_t lo, hi;
    int k = msb_units_not_every_step(&t, names, sizeof names);
    if (k < -1 || k > t.n_blocks || strlen(names) >= sizeof names || !utf8_ok(names))
        fz_fail("the units that differ between steps are miscounted or misnamed", names);
    k = msb_unit_inputs_differ(&t, names, sizeof names, &lo, &hi);
    if (k < -1 || k > t.n_blocks || strlen(names) >= sizeof names || !utf8_ok(names) || lo > hi ||
        (k > 0 && hi == 0))
        fz_fail("the units whose inputs changed size are miscounted or misnamed", names);
    k = msb_live_grew(&t, &lo, &hi);
    if (k < -1 || k > 1 || (k == 1 && hi <= lo) || (k == 0 && hi > lo && hi - lo > lo / 100))
        fz_fail("the growth of the memory live between steps is misjudged", "");
    /* the trace as a record pass's: whatever the program sent, a record
     * made of it is one the planner accepts, and replays */
    int layers = t.n_blocks + 2;
    ms_prog_record *rec = NULL;
    if (msb_build_record(&t, layers, &rec, err, sizeof err) == 0) {
        /* the trace's bytes may sum to MSB_MAX_ALLOCATED, above what a record may: that alone is refused */
        int ok = ms_record_check(rec, err, sizeof err) == 0;
        if (!ok && !strstr(err, "2^60")) fz_fail("a record made from the trace is not valid", err);
        uint64_t by[MS_CAT_N];
        if (ok && layers <= 8) {
            uint64_t *pk = calloc((size_t)layers * (size_t)layers, sizeof *pk);
            if (!pk || ms_record_range_peaks(rec, pk) != 0) fz_fail("out of memory", NULL);
            for (int a = 0; a < layers; a++)
                for (int b = a; b < layers; b++)
                    if (pk[a * layers + b] != ms_record_stage(rec, a, b, by))
                        fz_fail("the range table and the plain replay disagree", NULL);
            free(pk);
        }
        ms_prog_record_free(rec);
    }
    /* the libraries' buffers a record pass measures: never more than the allocator counted */
    uint64_t libs;
    if (msb_record_untracked(&t, &libs) == 0 && libs > MSB_MAX_BYTES)
        fz_fail("a record pass's library buffers exceed any count the trace holds", NULL);
    msb_trace_free(&t);
    return 0;
}
