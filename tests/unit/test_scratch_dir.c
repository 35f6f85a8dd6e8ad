/* test_scratch_dir.c — run/scratch_dir.h: a pass's folder is made in
 * $TMPDIR, private, and removed whole after the pass; a symbolic link the
 * program left inside is removed, not followed (what it points to stays);
 * a $TMPDIR where no folder can be made is an error, not a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/scratch_dir.h"

static char base[64];

static int setup(void **state)
{
    (void)state;
    snprintf(base, sizeof base, "/tmp/ms_test_scratch_XXXXXX");
    if (!mkdtemp(base)) return -1;
    return setenv("TMPDIR", base, 1);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void made_private_in_tmpdir_and_removed_whole(void **state)
{
    (void)state;
    char dir[4096], p[4200];
    assert_int_equal(ms_scratch_make(dir, sizeof dir), 0);
    assert_int_equal(strncmp(dir, base, strlen(base)), 0);
    assert_non_null(strstr(dir, "/memsplit-checkpoints-"));
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    /* what a program's process leaves: its own folder, a file in it, one beside it */
    snprintf(p, sizeof p, "%s/memsplit-checkpoints-abc", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/memsplit-checkpoints-abc/0-last.ckpt", dir);
    write_file(p, "weights");
    snprintf(p, sizeof p, "%s/1-best.pt", dir);
    write_file(p, "more");
    assert_int_equal(ms_scratch_remove(dir), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_int_equal(errno, ENOENT);
}

static void a_link_inside_is_removed_not_followed(void **state)
{
    (void)state;
    char dir[4096], keep[128], sub[128], p[4200];
    snprintf(keep, sizeof keep, "%s/program_file", base);
    write_file(keep, "the program's own");
    snprintf(sub, sizeof sub, "%s/program_dir", base);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(p, sizeof p, "%s/inside", sub);
    write_file(p, "x");
    assert_int_equal(ms_scratch_make(dir, sizeof dir), 0);
    snprintf(p, sizeof p, "%s/to_file", dir);
    assert_int_equal(symlink(keep, p), 0);
    snprintf(p, sizeof p, "%s/to_dir", dir);
    assert_int_equal(symlink(sub, p), 0);
    assert_int_equal(ms_scratch_remove(dir), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_int_equal(access(keep, R_OK), 0);          /* the targets stay */
    snprintf(p, sizeof p, "%s/inside", sub);
    assert_int_equal(access(p, R_OK), 0);
}

static void no_folder_where_none_can_be_made(void **state)
{
    (void)state;
    char dir[4096];
    assert_int_equal(setenv("TMPDIR", "/nonexistent/memsplit-test", 1), 0);
    assert_int_equal(ms_scratch_make(dir, sizeof dir), -1);
    assert_int_equal(errno, ENOENT);
    assert_string_equal(dir, "");
    char tiny[8];
    assert_int_equal(setenv("TMPDIR", base, 1), 0);
    assert_int_equal(ms_scratch_make(tiny, sizeof tiny), -1);   /* the name does not fit */
    assert_int_equal(errno, ENAMETOOLONG);
    assert_int_equal(ms_scratch_remove("/nonexistent/memsplit-test/x"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(made_private_in_tmpdir_and_removed_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(a_link_inside_is_removed_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(no_folder_where_none_can_be_made, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
