/* test_data.c — token sources of trainer/data.h: text, uint16 and builtin
 * formats, window order and wrap, cursor/seek resume, and refusals. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/common/trainer_files.h"
#include "trainer/config.h"
#include "trainer/data.h"

#define ERRLEN 1024

static char *dir_path;

static int setup(void **state) {
    (void)state;
    dir_path = tf_mkdtemp();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tf_rmtree(dir_path);
    free(dir_path);
    return 0;
}

static void assert_contains(const char *haystack, const char *needle) {
    if (!strstr(haystack, needle)) fail_msg("expected \"%s\" in \"%s\"", needle, haystack);
}

static ms_config tiny_with(const char *path, ms_data_format format) {
    ms_config c;
    char err[ERRLEN];
    assert_int_equal(ms_config_preset(&c, "tiny", err, sizeof err), 0);
    snprintf(c.data_path, sizeof c.data_path, "%s", path ? path : "");
    c.data_format = format;
    return c;
}

static ms_data *open_ok(const ms_config *c) {
    char err[ERRLEN];
    ms_data *d = ms_data_open(c, err, sizeof err);
    if (!d) fail_msg("open: %s", err);
    return d;
}

static void open_fails(const ms_config *c, const char *message) {
    char err[ERRLEN] = "";
    ms_data *d = ms_data_open(c, err, sizeof err);
    if (d) {
        ms_data_close(d);
        fail_msg("opened, expected \"%s\"", message);
    }
    assert_contains(err, message);
}

/* A file of n random bytes covering 0..255; returns the bytes (caller frees). */
static uint8_t *write_random_text(const char *path, size_t n, uint64_t seed) {
    uint8_t *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)tf_rand(&seed);
    tf_write(path, b, n);
    return b;
}

static uint16_t *write_u16(const char *path, size_t n, int vocab, uint64_t seed) {
    uint16_t *t = malloc(n * sizeof *t);
    uint8_t *le = malloc(2 * n);
    assert_true(t && le);
    for (size_t i = 0; i < n; i++) {
        t[i] = (uint16_t)(tf_rand(&seed) % (uint64_t)vocab);
        le[2 * i] = (uint8_t)(t[i] & 0xff);
        le[2 * i + 1] = (uint8_t)(t[i] >> 8);
    }
    tf_write(path, le, 2 * n);
    free(le);
    return t;
}

/* Windows of T+1 advance by T; a window past the end restarts at 0. */
static void test_text_windows_and_wrap(void **state) {
    (void)state;
    char *path = tf_join(dir_path, "w.txt");
    const size_t n = 20;
    uint8_t *bytes = write_random_text(path, n, 11);
    ms_config c = tiny_with(path, MS_DATA_AUTO);
    c.seq_len = 5;
    ms_data *d = open_ok(&c);
    assert_int_equal(ms_data_format_of(d), MS_DATA_TEXT);
    assert_int_equal(ms_data_tokens(d), n);
    int32_t in[32], tg[32]; /* room for the 1 x 19 windows below */
    /* starts 0, 5, 10; the window at 15 would need token 20: wraps to 0 */
    static const uint64_t starts[] = {0, 5, 10, 0, 5, 10};
    for (int call = 0; call < 2; call++) {
        assert_int_equal(ms_data_next(d, in, tg, 3, 5), 0);
        for (int b = 0; b < 3; b++)
            for (int t = 0; t < 5; t++) {
                uint64_t s = starts[call * 3 + b];
                assert_int_equal(in[b * 5 + t], bytes[s + (uint64_t)t]);
                assert_int_equal(tg[b * 5 + t], bytes[s + (uint64_t)t + 1]);
            }
    }
    assert_int_equal(ms_data_cursor(d), 15);
    int max = 0;
    for (size_t i = 0; i < n; i++)
        if (bytes[i] > max) max = bytes[i];
    assert_int_equal(ms_data_vocab_needed(d), max + 1);
    assert_contains(ms_data_describe(d), "20 tokens");

    /* exactly T+1 tokens: every window is the whole file */
    assert_int_equal(ms_data_next(d, in, tg, 1, 19), 0);
    assert_int_equal(ms_data_cursor(d), 19);
    assert_int_equal(ms_data_next(d, in, tg, 1, 19), 0);
    assert_int_equal(in[0], bytes[0]);
    assert_int_equal(tg[18], bytes[19]);
    /* bad arguments read nothing */
    uint64_t cur = ms_data_cursor(d);
    assert_int_equal(ms_data_next(d, in, tg, 1, 20), -1);
    assert_int_equal(ms_data_next(d, in, tg, 0, 5), -1);
    assert_int_equal(ms_data_next(d, in, tg, 1, 0), -1);
    assert_int_equal(ms_data_next(d, NULL, tg, 1, 5), -1);
    assert_int_equal(ms_data_next(d, in, NULL, 1, 5), -1);
    assert_int_equal(ms_data_next(NULL, in, tg, 1, 5), -1);
    assert_int_equal(ms_data_cursor(d), cur);
    ms_data_close(d);
    free(bytes);
    free(path);
}

/* Seeking to a saved cursor reproduces the stream exactly (resume). */
static void test_cursor_seek_reproduces(void **state) {
    (void)state;
    char *path = tf_join(dir_path, "s.txt");
    uint8_t *bytes = write_random_text(path, 5000, 22);
    ms_config c = tiny_with(path, MS_DATA_TEXT);
    enum { B = 4, T = 32, STEPS = 60 };
    int32_t in[B * T], tg[B * T], in2[B * T], tg2[B * T];
    uint64_t rng = 99;
    for (int trial = 0; trial < 5; trial++) {
        ms_data *a = open_ok(&c);
        int k = (int)(tf_rand(&rng) % STEPS); /* the wrap is at ~39 batches */
        for (int i = 0; i < k; i++) assert_int_equal(ms_data_next(a, in, tg, B, T), 0);
        uint64_t saved = ms_data_cursor(a);
        ms_data *b = open_ok(&c);
        assert_int_equal(ms_data_seek(b, saved), 0);
        for (int i = 0; i < 2 * STEPS; i++) {
            assert_int_equal(ms_data_next(a, in, tg, B, T), 0);
            assert_int_equal(ms_data_next(b, in2, tg2, B, T), 0);
            assert_memory_equal(in, in2, sizeof in);
            assert_memory_equal(tg, tg2, sizeof tg);
            for (int j = 0; j + 1 < T; j++) assert_int_equal(tg[j], in[j + 1]);
        }
        assert_int_equal(ms_data_cursor(a), ms_data_cursor(b));
        assert_int_equal(ms_data_seek(b, ms_data_tokens(b)), -1);
        assert_int_equal(ms_data_seek(b, UINT64_MAX), -1);
        assert_int_equal(ms_data_seek(b, ms_data_tokens(b) - 1), 0); /* next() wraps it */
        assert_int_equal(ms_data_next(b, in2, tg2, 1, T), 0);
        assert_int_equal(in2[0], bytes[0]);
        ms_data_close(a);
        ms_data_close(b);
    }
    free(bytes);
    free(path);
}

static void test_u16_tokens(void **state) {
    (void)state;
    static const char *const names[] = {"tok.bin", "tok.u16", "tok.dat"};
    for (int i = 0; i < 3; i++) {
        char *path = tf_join(dir_path, names[i]);
        const int vocab = 50304;
        const size_t n = 3000;
        uint16_t *tok = write_u16(path, n, vocab, 33 + (uint64_t)i);
        ms_config c = tiny_with(path, i == 2 ? MS_DATA_U16 : MS_DATA_AUTO);
        c.vocab = vocab;
        ms_data *d = open_ok(&c);
        assert_int_equal(ms_data_format_of(d), MS_DATA_U16);
        assert_int_equal(ms_data_tokens(d), n);
        int max = 0;
        for (size_t j = 0; j < n; j++)
            if (tok[j] > max) max = tok[j];
        assert_int_equal(ms_data_vocab_needed(d), max + 1);
        assert_true(max > 255); /* really 16-bit tokens */
        int32_t in[2 * 32], tg[2 * 32];
        assert_int_equal(ms_data_seek(d, 100), 0);
        assert_int_equal(ms_data_next(d, in, tg, 2, 32), 0);
        for (int t = 0; t < 64; t++) {
            assert_int_equal(in[t], tok[100 + t]);
            assert_int_equal(tg[t], tok[101 + t]);
        }
        ms_data_close(d);
        free(tok);
        free(path);
    }
}

static void test_u16_refusals(void **state) {
    (void)state;
    char *path = tf_join(dir_path, "bad.bin");
    uint16_t *tok = write_u16(path, 400, 1000, 44);
    /* one token too large, at token 123 */
    uint8_t *raw = malloc(800);
    for (int i = 0; i < 400; i++) {
        raw[2 * i] = (uint8_t)(tok[i] & 0xff);
        raw[2 * i + 1] = (uint8_t)(tok[i] >> 8);
    }
    raw[2 * 123] = (uint8_t)(1234 & 0xff);
    raw[2 * 123 + 1] = (uint8_t)(1234 >> 8);
    tf_write(path, raw, 800);
    ms_config c = tiny_with(path, MS_DATA_AUTO);
    c.vocab = 1000;
    open_fails(&c, "token 1234 at token offset 123 (byte 246) is not below model.vocab = 1000");
    c.vocab = 1235; /* now it fits */
    ms_data *d = open_ok(&c);
    assert_int_equal(ms_data_vocab_needed(d), 1235);
    ms_data_close(d);

    tf_write(path, raw, 799); /* odd length */
    open_fails(&c, "odd number of bytes (799)");
    tf_write(path, raw, 2 * 32); /* 32 tokens < seq_len + 1 */
    open_fails(&c, "32 tokens, fewer than model.seq_len + 1 = 33");
    tf_write(path, raw, 2 * 33);
    d = open_ok(&c);
    ms_data_close(d);
    free(raw);
    free(tok);
    free(path);
}

static void test_file_refusals(void **state) {
    (void)state;
    char *missing = tf_join(dir_path, "missing.txt");
    ms_config c = tiny_with(missing, MS_DATA_AUTO);
    open_fails(&c, "cannot open data file");
    open_fails(&c, "No such file");

    char *empty = tf_join(dir_path, "empty.txt");
    tf_write(empty, "", 0);
    c = tiny_with(empty, MS_DATA_AUTO);
    open_fails(&c, "is empty");

    char *short_file = tf_join(dir_path, "short.txt");
    tf_write(short_file, "hello world", 11);
    c = tiny_with(short_file, MS_DATA_AUTO);
    open_fails(&c, "11 tokens, fewer than model.seq_len + 1 = 33");
    c.seq_len = 10;
    ms_data *d = open_ok(&c);
    ms_data_close(d);
    c.vocab = 128; /* text needs a byte-sized vocabulary */
    open_fails(&c, "needs model.vocab >= 256");

    c = tiny_with(dir_path, MS_DATA_TEXT);
    open_fails(&c, "not a regular file");
    c = tiny_with("", MS_DATA_TEXT);
    open_fails(&c, "data.format = text needs data.path");
    c = tiny_with("", MS_DATA_U16);
    open_fails(&c, "data.format = u16 needs data.path");
    c = tiny_with(short_file, MS_DATA_BUILTIN);
    open_fails(&c, "data.format = builtin but data.path is set");
    char err[64];
    assert_null(ms_data_open(NULL, err, sizeof err));
    free(missing);
    free(empty);
    free(short_file);
}

/* H(next | previous two bytes) in nats, from counts over the corpus. */
static double trigram_entropy(const uint8_t *b, size_t n) {
    uint32_t *counts = calloc((size_t)128 * 128 * 128, sizeof *counts);
    assert_non_null(counts);
    for (size_t i = 2; i < n; i++) counts[((size_t)b[i - 2] * 128 + b[i - 1]) * 128 + b[i]]++;
    double h = 0;
    for (size_t ctx = 0; ctx < 128 * 128; ctx++) {
        double total = 0;
        for (int x = 0; x < 128; x++) total += counts[ctx * 128 + (size_t)x];
        for (int x = 0; x < 128 && total > 0; x++) {
            double k = counts[ctx * 128 + (size_t)x];
            if (k > 0) h -= k / (double)(n - 2) * log(k / total);
        }
    }
    free(counts);
    return h;
}

static double unigram_entropy(const uint8_t *b, size_t n) {
    double counts[256] = {0}, h = 0;
    for (size_t i = 0; i < n; i++) counts[b[i]]++;
    for (int x = 0; x < 256; x++)
        if (counts[x] > 0) h -= counts[x] / (double)n * log(counts[x] / (double)n);
    return h;
}

static void test_builtin_corpus_properties(void **state) {
    (void)state;
    size_t n1, n2, n3;
    uint8_t *a = ms_data_builtin_corpus(1337, &n1);
    uint8_t *b = ms_data_builtin_corpus(1337, &n2);
    uint8_t *other = ms_data_builtin_corpus(7, &n3);
    assert_true(a && b && other);
    assert_true(n1 >= (size_t)1 << 20);
    assert_true(n1 < ((size_t)1 << 20) + 4096);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1); /* deterministic */
    assert_true(n1 != n3 || memcmp(a, other, n1) != 0);
    size_t differ = 0, common = n1 < n3 ? n1 : n3;
    for (size_t i = 0; i < common; i++) differ += a[i] != other[i];
    assert_true(differ > common / 2); /* another seed is another text, not a shift */

    size_t letters = 0, spaces = 0, sentences = 0, lines = 0;
    for (size_t i = 0; i < n1; i++) {
        assert_true(a[i] < 128);
        assert_true(a[i] == '\n' || (a[i] >= 32 && a[i] < 127));
        letters += (a[i] >= 'a' && a[i] <= 'z') || (a[i] >= 'A' && a[i] <= 'Z');
        spaces += a[i] == ' ';
        lines += a[i] == '\n';
        if ((a[i] == '.' || a[i] == '?') && i + 2 < n1) {
            sentences++;
            /* a sentence ends, the next starts with a capital */
            size_t j = i + 1;
            if (a[j] == ' ' || a[j] == '\n') j++;
            assert_true(a[j] >= 'A' && a[j] <= 'Z');
        }
    }
    assert_true(letters > n1 * 7 / 10);
    assert_true(spaces > n1 / 10);
    assert_true(sentences > 10000);
    assert_true(lines > 1000);
    assert_true(a[n1 - 1] == '.' || a[n1 - 1] == '?' || a[n1 - 1] == '\n'); /* ends cleanly */
    /* learnable: many symbols, but the next byte is well predicted by the
     * two before it (a tiny model's loss can fall far below log 256 = 5.55) */
    double h1 = unigram_entropy(a, n1), h3 = trigram_entropy(a, n1);
    assert_true(h1 > 2.5);
    assert_true(h3 < 1.3);
    print_message("builtin corpus: %zu bytes, H1 %.2f nats, H(x|2 prev) %.2f nats\n", n1, h1, h3);
    free(a);
    free(b);
    free(other);
}

static void test_builtin_stream(void **state) {
    (void)state;
    ms_config c = tiny_with("", MS_DATA_AUTO);
    ms_data *d = open_ok(&c);
    assert_int_equal(ms_data_format_of(d), MS_DATA_BUILTIN);
    assert_true(ms_data_tokens(d) >= (1u << 20));
    assert_true(ms_data_vocab_needed(d) <= 128);
    assert_contains(ms_data_describe(d), "builtin corpus");
    assert_contains(ms_data_describe(d), "seed 1337");
    size_t n;
    uint8_t *corpus = ms_data_builtin_corpus(c.seed, &n);
    assert_int_equal(n, ms_data_tokens(d));
    int max = 0;
    for (size_t i = 0; i < n; i++)
        if (corpus[i] > max) max = corpus[i];
    assert_int_equal(ms_data_vocab_needed(d), max + 1);
    int32_t in[4 * 32], tg[4 * 32];
    for (int step = 0; step < 10; step++) {
        uint64_t start = ms_data_cursor(d);
        assert_int_equal(ms_data_next(d, in, tg, 4, 32), 0);
        for (int i = 0; i < 4 * 32; i++) {
            assert_int_equal(in[i], corpus[start + (uint64_t)i]);
            assert_int_equal(tg[i], corpus[start + (uint64_t)i + 1]);
        }
    }
    ms_data_close(d);
    /* explicit builtin works too; a vocab below the corpus's symbols does not */
    c.data_format = MS_DATA_BUILTIN;
    d = open_ok(&c);
    ms_data_close(d);
    c.vocab = 64;
    open_fails(&c, "not below model.vocab = 64");
    free(corpus);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_windows_and_wrap),
        cmocka_unit_test(test_cursor_seek_reproduces),
        cmocka_unit_test(test_u16_tokens),
        cmocka_unit_test(test_u16_refusals),
        cmocka_unit_test(test_file_refusals),
        cmocka_unit_test(test_builtin_corpus_properties),
        cmocka_unit_test(test_builtin_stream),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
