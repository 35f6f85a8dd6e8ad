/* test_bridge_untrusted.c — the parent's side of the bridge against a
 * program that is untrusted input (issue 38): the event loop's reader with
 * idle, stalled and overlong connections, and the trace with forged
 * events, events from other processes and module names the records cannot
 * hold. A watchdog (alarm) turns a hang into a failure. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "bridge/host/reader.h"
#include "bridge/rows.h"
#include "bridge/trace.h"
#include "vocab/profile_json.h"

static void feed(msb_trace *t, int conn, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    alarm(10);                 /* a line that spins fails here, not forever */
    assert_int_equal(msb_trace_feed(t, line, strlen(line), conn), 0);
    alarm(0);
}

static void model(msb_trace *t, int conn, const char *blocks)
{
    feed(t, conn, "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"h: ModuleList\",\"blocks\":[%s],"
                  "\"fingerprint\":\"fnv64:00000000000000aa\",\"precision\":\"fp32\",\"device\":\"cpu\"}", blocks);
}

/* valid UTF-8, as jansson checks it: a string it accepts */
static int valid_utf8(const char *s)
{
    json_t *j = json_string(s);
    json_decref(j);
    return j != NULL;
}

/* ---- forged events ---------------------------------------------------------- */

static void test_member_without_module(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    model(&t, 1, "\"h.0\",\"h.1\"");
    feed(&t, 1, "{\"ev\":\"member\",\"l\":0,\"module\":\"wte\"}");
    feed(&t, 1, "{\"ev\":\"member\",\"l\":0}");               /* spun join() at 100% CPU */
    assert_string_equal(t.pre, "wte");
    assert_true(t.refused);
    assert_string_equal(t.refuse_what, "names");
    assert_non_null(strstr(t.refuse_text, "it is empty"));
    assert_int_equal(msb_trace_feed(&t, NULL, 0, 1), 0);       /* a line too long to keep */
    assert_int_equal(t.bad_lines, 1);
    msb_trace_free(&t);
}

/* A subprocess that trains another model later: its model, steps, OOM and
 * end are not the profile's; what a helper process said before the model
 * (its refusal, its end) is forgotten. */
static void test_other_processes(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    feed(&t, 3, "{\"ev\":\"refuse\",\"what\":\"torch\",\"text\":\"old torch\"}");
    feed(&t, 3, "{\"ev\":\"done\",\"reason\":\"exit\"}");
    model(&t, 1, "\"h.0\",\"h.1\"");
    assert_false(t.refused);
    assert_false(t.done);
    feed(&t, 1, "{\"ev\":\"step\",\"n\":1}");
    model(&t, 2, "\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"");
    feed(&t, 2, "{\"ev\":\"member\",\"l\":0,\"module\":\"other\"}");
    for (int i = 1; i <= 4; i++) feed(&t, 2, "{\"ev\":\"step\",\"n\":%d}", i);
    feed(&t, 2, "{\"ev\":\"oom\",\"l\":3,\"p\":1,\"module\":\"x\",\"requested\":5}");
    feed(&t, 2, "{\"ev\":\"done\",\"reason\":\"exception\"}");
    model(&t, 1, "\"z\"");                                      /* a second model of its own: ignored */
    assert_int_equal(t.model_conn, 1);
    assert_int_equal(t.n_blocks, 2);
    assert_int_equal(t.n_steps, 1);
    assert_string_equal(t.pre, "");
    assert_false(t.oom.happened);
    assert_false(t.done);
    assert_non_null(strstr(t.warnings, "another process also trained a model"));
    msb_trace_free(&t);
}

/* ---- names ---------------------------------------------------------------- */

static void test_names_travel_whole_or_not_at_all(void **state)
{
    (void)state;
    char name[600], blocks[1400];
    msb_trace t;
    /* 255 bytes travel; 256 are refused, never cut */
    memset(name, 'x', 255);
    name[255] = '\0';
    snprintf(blocks, sizeof blocks, "\"%s\",\"b\"", name);
    msb_trace_init(&t);
    model(&t, 1, blocks);
    assert_false(t.refused);
    assert_string_equal(t.blocks[0], name);
    msb_trace_free(&t);
    snprintf(blocks, sizeof blocks, "\"%sy\",\"b\"", name);
    msb_trace_init(&t);
    model(&t, 1, blocks);
    assert_true(t.refused);
    assert_non_null(strstr(t.refuse_text, "longer than the 255 bytes"));
    msb_trace_free(&t);
    /* a NUL inside a name: refused, the name shown escaped */
    msb_trace_init(&t);
    model(&t, 1, "\"h.0\",\"h\\u0000\\u001b1\"");
    assert_true(t.refused);
    assert_non_null(strstr(t.refuse_text, "'h\\x00\\x1b1'"));
    assert_non_null(strstr(t.refuse_text, "NUL"));
    msb_trace_free(&t);
    /* a newline and a tab travel */
    msb_trace_init(&t);
    model(&t, 1, "\"h.\\n0\",\"h.\\t1\"");
    assert_false(t.refused);
    assert_string_equal(t.blocks[0], "h.\n0");
    /* members: comma-joined into their layer's name */
    feed(&t, 1, "{\"ev\":\"member\",\"l\":0,\"module\":\"a,b\"}");
    assert_true(t.refused);
    assert_non_null(strstr(t.refuse_text, "comma"));
    msb_trace_free(&t);
    msb_trace_init(&t);
    model(&t, 1, "\"h.0\"");
    for (int i = 0; i < 12; i++) feed(&t, 1, "{\"ev\":\"member\",\"l\":5,\"module\":\"post_module_%02d_xxxxxxx\"}", i);
    assert_true(t.refused);
    assert_non_null(strstr(t.refuse_text, "that layer's name longer"));
    assert_true(strlen(t.post) < MS_NAME_MAX);
    msb_trace_free(&t);
}

/* Text fields are cut at a character, never inside one; a NUL shows as
 * U+FFFD; the profile made from them writes as JSON. */
static void test_text_stays_utf8(void **state)
{
    (void)state;
    char why[1200] = "x", module[1200] = "", line[3000];
    for (int i = 0; i < 100; i++) strcat(why, "\xe4\xb8\xad");      /* 1 + 300 bytes */
    for (int i = 0; i < 150; i++) strcat(module, "\xc3\xa9");
    msb_trace t;
    msb_trace_init(&t);
    snprintf(line, sizeof line, "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"%s\",\"blocks\":[\"h.0\"],"
             "\"precision\":\"fp32\"}", why);
    feed(&t, 1, "%s", line);
    assert_true(strlen(t.why) <= 255 && strlen(t.why) >= 250);
    assert_true(valid_utf8(t.why));
    feed(&t, 1, "{\"ev\":\"w\",\"l\":1,\"p\":1}");
    feed(&t, 1, "{\"ev\":\"a\",\"d\":0,\"k\":1,\"b\":64,\"c\":4,\"l\":1,\"p\":1}");
    snprintf(line, sizeof line, "{\"ev\":\"oom\",\"l\":1,\"p\":1,\"module\":\"a\\u0000b%s\",\"type\":\"%s\","
             "\"requested\":8,\"source\":\"cap\"}", module, module);
    feed(&t, 1, "%s", line);
    assert_true(t.oom.happened);
    assert_memory_equal(t.oom.module, "a\xef\xbf\xbd" "b\xc3\xa9", 7);
    assert_true(valid_utf8(t.oom.module));
    ms_profile p;
    int incomplete;
    char err[256];
    msb_rows_opts o = { .capacity = 1000, .model_name = "x.py" };
    assert_int_equal(msb_build_profile(&t, NULL, &o, &p, &incomplete, err, sizeof err), 0);
    assert_true(valid_utf8(p.layer_list));
    assert_true(valid_utf8(p.oom.what));
    json_t *j = ms_profile_to_json(&p);
    assert_non_null(j);
    char *text = json_dumps(j, 0);
    assert_non_null(text);
    free(text);
    json_decref(j);
    ms_profile_free(&p);
    msb_trace_free(&t);
    /* any bytes in, valid UTF-8 out */
    char out[16];
    msb_utf8_copy(out, sizeof out, "a\xff\xc3", (size_t)-1);
    assert_string_equal(out, "a\xef\xbf\xbd\xef\xbf\xbd");
    msb_utf8_copy(out, 5, "\xe4\xb8\xad\xe4\xb8\xad", (size_t)-1);
    assert_string_equal(out, "\xe4\xb8\xad");
}

/* ---- the reader ------------------------------------------------------------- */

typedef struct lines {
    int n, dropped;
    char text[8][64];
    int conn[8];
} lines;

static int on_line(const char *line, size_t len, int conn, void *user)
{
    lines *l = user;
    if (!line) {
        l->dropped++;
        return 0;
    }
    if (l->n < 8) {
        snprintf(l->text[l->n], sizeof l->text[0], "%.*s", (int)len, line);
        l->conn[l->n] = conn;
    }
    l->n++;
    return 0;
}

static int connect_to(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* 40 idle connections accepted in the same pass as the one that writes:
 * reading never waits on an idle one (it did: read() blocked on a
 * connection whose poll result was never filled in). A connection that
 * stalls in the middle of a line holds up nothing; an overlong line is
 * dropped and said; the last unterminated line comes at the end. */
static void test_reader_idle_and_stalled(void **state)
{
    (void)state;
    char dir[] = "/tmp/msb-reader-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/s", dir);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 64), 0);
    lines got = { 0 };
    msb_reader *r = msb_reader_new(lfd, on_line, &got);
    int idle[40];
    for (int i = 0; i < 40; i++) idle[i] = connect_to(path);
    int staller = connect_to(path), writer = connect_to(path), flood = connect_to(path);
    assert_int_equal(write(staller, "{\"ev\":\"hel", 10), 10);
    assert_int_equal(write(writer, "one\ntwo\nthr", 11), 11);
    char *big = malloc(MSB_MAX_LINE + 10);
    memset(big, 'a', MSB_MAX_LINE + 9);
    big[MSB_MAX_LINE + 9] = '\n';
    char err[256];
    alarm(20);
    size_t sent = 0;
    for (int i = 0; i < 400 && (got.n < 3 || sent < MSB_MAX_LINE + 10); i++) {
        if (sent < MSB_MAX_LINE + 10) {
            ssize_t w = send(flood, big + sent, MSB_MAX_LINE + 10 - sent, MSG_DONTWAIT);
            if (w > 0) sent += (size_t)w;
        }
        if (i == 5) {
            assert_int_equal(write(writer, "ee\n", 3), 3);
            assert_int_equal(write(writer, "four", 4), 4);
            close(writer);
        }
        assert_int_equal(msb_reader_step(r, 20, err, sizeof err), 0);
    }
    for (int i = 0; i < 20; i++) assert_int_equal(msb_reader_step(r, 10, err, sizeof err), 0);
    alarm(0);
    assert_int_equal(msb_reader_accepted(r), 43);
    assert_int_equal(msb_reader_open(r), 42);                     /* the writer closed */
    assert_int_equal(got.n, 4);
    assert_string_equal(got.text[0], "one");
    assert_string_equal(got.text[1], "two");
    assert_string_equal(got.text[2], "three");
    assert_string_equal(got.text[3], "four");                     /* unterminated, at its end */
    assert_int_equal(got.conn[0], 41);
    assert_int_equal(got.dropped, 1);                             /* the overlong line */
    int pids[64];
    assert_int_equal(msb_reader_peers(r, pids, 64), 42);
    assert_int_equal(pids[0], getpid());
    msb_reader_free(r);
    for (int i = 0; i < 40; i++) close(idle[i]);
    close(staller);
    close(flood);
    close(lfd);
    free(big);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_member_without_module),
        cmocka_unit_test(test_other_processes),
        cmocka_unit_test(test_names_travel_whole_or_not_at_all),
        cmocka_unit_test(test_text_stays_utf8),
        cmocka_unit_test(test_reader_idle_and_stalled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
