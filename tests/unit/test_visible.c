/* test_visible.c — vocab/visible.h: untrusted text made visible for a
 * terminal (control characters escaped, UTF-8 text kept, cuts at character
 * boundaries), Python literals by repr's rules, strict UTF-8, table cells
 * that never cut inside a character; and vocab/tmpfile.h's leftover names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vocab/profile.h"
#include "vocab/tmpfile.h"
#include "vocab/visible.h"

static void test_utf8_strict(void **state)
{
    (void)state;
    uint32_t c;
    assert_int_equal(ms_utf8_next("a", 1, &c), 1);
    assert_int_equal(c, 'a');
    assert_int_equal(ms_utf8_next("\xc3\xa9", 2, &c), 2);
    assert_int_equal(c, 0xE9);
    assert_int_equal(ms_utf8_next("\xe2\x80\xae", 3, &c), 3);
    assert_int_equal(c, 0x202E);
    assert_int_equal(ms_utf8_next("\xf0\x9f\x98\x80", 4, &c), 4);
    assert_int_equal(c, 0x1F600);
    assert_int_equal(ms_utf8_next("\xc3", 1, &c), 0);              /* cut short */
    assert_int_equal(ms_utf8_next("\xc0\xaf", 2, &c), 0);          /* overlong '/' */
    assert_int_equal(ms_utf8_next("\xed\xa0\x80", 3, &c), 0);      /* a surrogate */
    assert_int_equal(ms_utf8_next("\xf4\x90\x80\x80", 4, &c), 0);  /* past U+10FFFF */
    assert_int_equal(ms_utf8_next("\x80", 1, &c), 0);              /* a lone continuation */
    assert_int_equal(c, 0x80);
}

static void test_visible(void **state)
{
    (void)state;
    char buf[256];
    const char *plain = "transformer.h.0 caf\xc3\xa9 \xe2\x86\x92 back\\slash";
    assert_ptr_equal(ms_visible(plain, buf, sizeof buf), plain); /* nothing to do: s itself */
    assert_string_equal(ms_visible("a\x1b[2Jb\rc\bd\x7f", buf, sizeof buf), "a\\x1b[2Jb\\rc\\x08d\\x7f");
    assert_string_equal(ms_visible("\x1b]0;title\x07", buf, sizeof buf), "\\x1b]0;title\\x07");
    assert_string_equal(ms_visible("x\ny\tz", buf, sizeof buf), "x\\ny\\tz");
    assert_string_equal(ms_visible("c1 \xc2\x9b" "2J", buf, sizeof buf), "c1 \\x9b2J");       /* U+009B, CSI */
    assert_string_equal(ms_visible("bidi \xe2\x80\xae" "x", buf, sizeof buf), "bidi \\u202ex"); /* U+202E */
    assert_string_equal(ms_visible("bad \xff\xc3", buf, sizeof buf), "bad \\xff\\xc3");         /* invalid bytes */
    /* cut to fit: at a character, never inside an escape, "..." said */
    char small[12];
    const char *v = ms_visible("\x1b\x1b\x1b\x1b", small, sizeof small);
    assert_string_equal(v, "\\x1b\\x1b...");
    v = ms_visible("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\x1b", small, sizeof small);
    assert_string_equal(v, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9...");
    char *d = ms_visible_dup("one\ntwo\x1b", 1);
    assert_string_equal(d, "one\ntwo\\x1b");
    free(d);
    d = ms_visible_dup("one\ntwo", 0);
    assert_string_equal(d, "one\\ntwo");
    free(d);
    char field[16] = "ab\x1b\x1b\x1b\x1b\x1b";
    ms_visible_field(field, sizeof field);
    assert_string_equal(field, "ab\\x1b\\x1b...");
}

static void test_py_literal(void **state)
{
    (void)state;
    char buf[256];
    assert_int_equal(ms_py_literal("transformer.h.0", buf, sizeof buf), 0);
    assert_string_equal(buf, "'transformer.h.0'");
    assert_int_equal(ms_py_literal("x\"), __import__('os').system('x'), (\"", buf, sizeof buf), 0);
    assert_string_equal(buf, "'x\"), __import__(\\'os\\').system(\\'x\\'), (\"'");
    assert_int_equal(ms_py_literal("a\\b\n\r\t\x1b\x7f", buf, sizeof buf), 0);
    assert_string_equal(buf, "'a\\\\b\\n\\r\\t\\x1b\\x7f'");
    assert_int_equal(ms_py_literal("caf\xc3\xa9 \xc2\xa0\xe2\x80\xae\xef\xbb\xbf", buf, sizeof buf), 0);
    assert_string_equal(buf, "'caf\xc3\xa9 \\xa0\\u202e\\ufeff'");
    assert_int_equal(ms_py_literal("raw \xff", buf, sizeof buf), 0); /* surrogateescape */
    assert_string_equal(buf, "'raw \\udcff'");
    assert_int_equal(ms_py_literal("\x1b\x1b\x1b\x1b", buf, 12), -1); /* does not fit: nothing */
    assert_string_equal(buf, "");
}

static void test_print_cell(void **state)
{
    (void)state;
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ms_print_cell(f, "x\xc3\xa9\xc3\xa9\xc3\xa9", 3); /* 3 columns: x and two characters, whole */
    fputc('|', f);
    ms_print_cell(f, "ab", 4);
    fputc('|', f);
    fclose(f);
    assert_string_equal(out, "x\xc3\xa9\xc3\xa9|ab  |");
    free(out);
}

/* A profile's visible copy: every string visible, the original untouched. */
static void test_profile_copy(void **state)
{
    (void)state;
    ms_profile p, v;
    memset(&p, 0, sizeof p);
    ms_layer_row rows[2];
    memset(rows, 0, sizeof rows);
    snprintf(rows[0].name, sizeof rows[0].name, "h.0\x1b[2J");
    snprintf(rows[1].name, sizeof rows[1].name, "h.1");
    p.rows = rows;
    p.n_rows = 2;
    snprintf(p.model, sizeof p.model, "m\r");
    snprintf(p.oom.what, sizeof p.oom.what, "qkv (Lin\x1b]8;;x\x07" "ear)");
    assert_int_equal(ms_profile_visible_copy(&p, &v), 0);
    assert_string_equal(v.rows[0].name, "h.0\\x1b[2J");
    assert_string_equal(v.rows[1].name, "h.1");
    assert_string_equal(v.model, "m\\r");
    assert_string_equal(v.oom.what, "qkv (Lin\\x1b]8;;x\\x07" "ear)");
    assert_string_equal(rows[0].name, "h.0\x1b[2J");
    ms_profile_free(&v);
}

static void test_tmp_names(void **state)
{
    (void)state;
    assert_true(ms_tmp_is_ours("step-00000002.ckpt.tmp.Ab3dE1", "step-00000002.ckpt"));
    assert_true(ms_tmp_is_ours("step-00000002.ckpt.tmp", "step-00000002.ckpt"));
    assert_false(ms_tmp_is_ours("step-00000002.ckpt.tmp.Ab3d", "step-00000002.ckpt"));
    assert_false(ms_tmp_is_ours("step-00000002.ckpt.tmp.Ab3dE1x", "step-00000002.ckpt"));
    assert_false(ms_tmp_is_ours("step-00000002.ckpt", "step-00000002.ckpt"));
    assert_false(ms_tmp_is_ours("step-00000002.ckpt.tmp.Ab/dE1", "step-00000002.ckpt"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_strict), cmocka_unit_test(test_visible),     cmocka_unit_test(test_py_literal),
        cmocka_unit_test(test_print_cell),  cmocka_unit_test(test_profile_copy), cmocka_unit_test(test_tmp_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
