/* test_undo_files.c — run/undo_files.h: the journal a killed pass leaves is
 * applied (the program's file from before renamed back over its path, the
 * pass's hidden files removed, a name already gone skipped, the files the
 * pass added in a checkpoint's folder removed, but none from before it),
 * and nothing in a journal whose names are not the bridge's (another
 * folder, another name, a relative path, a cut record) renames or removes
 * anything. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run/undo_files.h"
#include "tests/common/trainer_files.h"

static char *base;

static int setup(void **state)
{
    (void)state;
    base = tf_mkdtemp();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tf_rmtree(base);
    free(base);
    return 0;
}

static void put(const char *name, const char *text)
{
    char *p = tf_join(base, name);
    tf_write(p, text, strlen(text));
    free(p);
}

static int holds(const char *name, const char *text)
{
    char *p = tf_join(base, name);
    struct stat st;
    int there = lstat(p, &st) == 0;
    size_t n = 0;
    char *got = there ? tf_read(p, &n) : NULL;
    int same = got && n == strlen(text) && memcmp(got, text, n) == 0;
    free(got);
    free(p);
    return same;
}

static int exists(const char *name)
{
    char *p = tf_join(base, name);
    struct stat st;
    int there = lstat(p, &st) == 0;
    free(p);
    return there;
}

/* a journal of the fields up to NULL: a kind (one character) and an absolute path as they are,
 * "rel:NAME" as NAME (relative), any other name in base */
static size_t journal(char *buf, size_t cap, const char *const *fields)
{
    size_t at = 0;
    for (int i = 0; fields[i]; i++) {
        char f[256];
        if (strlen(fields[i]) == 1 || fields[i][0] == '/')
            snprintf(f, sizeof f, "%s", fields[i]);
        else if (!strncmp(fields[i], "rel:", 4))
            snprintf(f, sizeof f, "%s", fields[i] + 4);
        else
            snprintf(f, sizeof f, "%s/%s", base, fields[i]);
        size_t n = strlen(f) + 1;
        assert_true(at + n <= cap);
        memcpy(buf + at, f, n);
        at += n;
    }
    return at;
}

static void write_journal(const char *buf, size_t len)
{
    char *p = tf_join(base, MS_UNDO_FILE);
    tf_write(p, buf, len);
    free(p);
}

static void a_killed_pass_is_undone(void **state)
{
    (void)state;
    put("config.json", "the pass's");
    put(".config.json.memsplit-41-0.before", "from before");
    put(".log.json.memsplit-41-1.before", "an output's old contents");
    put(".model.bin.memsplit-41-2", "half written");
    const char *const fields[] = { "R", ".config.json.memsplit-41-0.before", "config.json",
                                   "D", ".log.json.memsplit-41-1.before",
                                   "D", ".model.bin.memsplit-41-2",
                                   "D", ".gone.memsplit-41-3", NULL };   /* removed already: skipped */
    char buf[2048];
    write_journal(buf, journal(buf, sizeof buf, fields));
    int done = -1;
    char err[512] = "";
    assert_int_equal(ms_undo_apply(base, NULL, &done, err, sizeof err), 0);
    assert_int_equal(done, 3);
    assert_true(holds("config.json", "from before"));
    assert_false(exists(".config.json.memsplit-41-0.before"));
    assert_false(exists(".log.json.memsplit-41-1.before"));
    assert_false(exists(".model.bin.memsplit-41-2"));
}

static void no_journal_nothing_done(void **state)
{
    (void)state;
    int done = -1;
    char err[256] = "";
    assert_int_equal(ms_undo_apply(base, NULL, &done, err, sizeof err), 0);
    assert_int_equal(done, 0);
}

static void names_not_the_bridges_change_nothing(void **state)
{
    (void)state;
    put("keep.txt", "the program's");
    put(".x.memsplit-1-2.before", "x");
    const char *const bad[][8] = {
        { "D", "keep.txt", NULL },                                          /* not a hidden name */
        { "R", ".x.memsplit-1-2.before", "keep.txt", NULL },                /* another name's */
        { "R", ".keep.txt.memsplit-1-2", "keep.txt", NULL },                /* no .before */
        { "R", ".keep.txt.memsplit-1-2.before", "/tmp/keep.txt", NULL },    /* another folder */
        { "D", "rel:x/.x.memsplit-1-2", NULL },                             /* relative */
        { "D", ".x.memsplit-1-.before", NULL },                             /* no N */
        { "D", ".x.memsplit-a-2", NULL },                                   /* no PID */
        { "X", ".x.memsplit-1-2.before", NULL },                            /* no such kind */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[1024];
        const char *const fields[] = { "D", ".x.memsplit-1-2.before", bad[i][0], bad[i][1], bad[i][2], NULL };
        write_journal(buf, journal(buf, sizeof buf, fields));
        int done = -1;
        char err[512] = "";
        assert_int_equal(ms_undo_apply(base, NULL, &done, err, sizeof err), -1);
        assert_int_equal(done, 0);
        assert_non_null(strstr(err, "is not what the bridge writes"));
        assert_true(holds("keep.txt", "the program's"));
        assert_true(exists(".x.memsplit-1-2.before"));          /* the good record before it: not applied either */
    }
    /* a record cut short (no NUL after its last field) */
    char buf[256];
    size_t len = journal(buf, sizeof buf, (const char *const[]){ "D", ".x.memsplit-1-2.before", NULL });
    write_journal(buf, len - 1);
    int done = -1;
    char err[512] = "";
    assert_int_equal(ms_undo_apply(base, NULL, &done, err, sizeof err), -1);
    assert_true(exists(".x.memsplit-1-2.before"));
}

static void two_names_of_one_file(void **state)
{
    (void)state;
    /* killed between the link and the rename over the path: both name the program's file */
    put("state.json", "from before");
    char *a = tf_join(base, "state.json"), *b = tf_join(base, ".state.json.memsplit-7-0.before");
    assert_int_equal(link(a, b), 0);
    free(a);
    free(b);
    char buf[512];
    write_journal(buf, journal(buf, sizeof buf,
                               (const char *const[]){ "R", ".state.json.memsplit-7-0.before", "state.json", NULL }));
    int done = -1;
    char err[256] = "";
    assert_int_equal(ms_undo_apply(base, NULL, &done, err, sizeof err), 0);
    assert_true(holds("state.json", "from before"));
    assert_false(exists(".state.json.memsplit-7-0.before"));
}

static struct timespec now_coarse(void)
{
    struct timespec t;
    assert_int_equal(clock_gettime(CLOCK_REALTIME_COARSE, &t), 0);
    return t;
}

/* "N": a file the pass added is removed where it changed since the pass began; a file from before
 * (older), a folder, a link, the path an "R" puts back, and every "N" without the pass's start stay */
static void files_the_pass_added(void **state)
{
    (void)state;
    put("old.json", "from before the pass");
    char *old = tf_join(base, "old.json");
    struct timespec past[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
    assert_int_equal(utimensat(AT_FDCWD, old, past, 0), 0);     /* its ctime is now: see below */
    free(old);
    struct timespec began = now_coarse();
    began.tv_sec += 1;       /* old.json's ctime (the utimensat above) is before this */
    /* the pass's files: stamped after began (a ctime a second on) */
    struct timespec wait = { 1, 100000000 };
    nanosleep(&wait, NULL);
    char *dir = tf_join(base, "sub");
    assert_int_equal(mkdir(dir, 0700), 0);
    free(dir);
    char *link_to = tf_join(base, "link.bin");
    assert_int_equal(symlink("old.json", link_to), 0);
    free(link_to);
    put("scheduler.pt", "the pass's");
    put("config.json", "the pass's");
    put(".config.json.memsplit-41-0.before", "from before");
    const char *const fields[] = { "N", "scheduler.pt", "N", "old.json", "N", "sub", "N", "link.bin",
                                   "R", ".config.json.memsplit-41-0.before", "config.json", "N", "config.json",
                                   "N", "gone.pt", NULL };
    char buf[2048];
    size_t len = journal(buf, sizeof buf, fields);
    write_journal(buf, len);
    int done = -1;
    char err[512] = "";
    assert_int_equal(ms_undo_apply(base, NULL, &done, err, sizeof err), 0);   /* no start: no N applied */
    assert_int_equal(done, 1);
    assert_true(exists("scheduler.pt"));
    assert_true(holds("config.json", "from before"));
    write_journal(buf, len);
    assert_int_equal(ms_undo_apply(base, &began, &done, err, sizeof err), 0);
    assert_int_equal(done, 1);                      /* scheduler.pt; the R's file is gone already */
    assert_false(exists("scheduler.pt"));
    assert_true(holds("config.json", "from before"));   /* put back, then not removed as an N */
    assert_true(holds("old.json", "from before the pass"));
    assert_true(exists("sub"));
    assert_true(exists("link.bin"));
    /* an N that is not an added file's name: the journal is refused whole */
    const char *const bad[] = { "rel:scheduler.pt", "/tmp/../etc/x", "/tmp/./x", "/tmp/x/", "/tmp//x",
                                "/tmp/.x.memsplit-1-2", NULL };
    for (int i = 0; bad[i]; i++) {
        put("scheduler.pt", "the pass's");
        const char *const f[] = { "N", "scheduler.pt", "N", bad[i], NULL };
        write_journal(buf, journal(buf, sizeof buf, f));
        assert_int_equal(ms_undo_apply(base, &began, &done, err, sizeof err), -1);
        assert_non_null(strstr(err, "is not what the bridge writes"));
        assert_true(exists("scheduler.pt"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_killed_pass_is_undone, setup, teardown),
        cmocka_unit_test_setup_teardown(no_journal_nothing_done, setup, teardown),
        cmocka_unit_test_setup_teardown(names_not_the_bridges_change_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(two_names_of_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(files_the_pass_added, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
