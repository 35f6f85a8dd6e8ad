/* test_config.c — presets, --set, INI loading, validation, sizes and the
 * to_ini round trip of trainer/config.h (key table: trainer/config_keys.h). */
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
#include "trainer/config_keys.h"

#define ERRLEN 2048

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

static ms_config preset(const char *name) {
    ms_config c;
    char err[ERRLEN];
    if (ms_config_preset(&c, name, err, sizeof err)) fail_msg("preset %s: %s", name, err);
    return c;
}

/* to_ini as the canonical text of a whole config, for comparisons. */
static char *ini_of(const ms_config *c) {
    char *s = ms_config_to_ini(c);
    assert_non_null(s);
    return s;
}

static void assert_same_config(const ms_config *a, const ms_config *b) {
    char *x = ini_of(a), *y = ini_of(b);
    assert_string_equal(x, y);
    free(x);
    free(y);
}

static int load_text(ms_config *c, const char *text, char *err) {
    char *path = tf_join(dir_path, "t.ini");
    tf_write(path, text, strlen(text));
    int rc = ms_config_load_ini(c, path, err, ERRLEN);
    free(path);
    return rc;
}

/* A valid value for key k that differs from its value in cur. Strings are
 * plain (no quoting needed) so that they can go into an INI file as is. */
static void random_value(const ms_config_key *k, const ms_config *cur, uint64_t *rng, char *out, size_t len) {
    char now[MS_CONFIG_VALUE_MAX];
    assert_int_equal(ms_config_key_format(k, cur, 0, now, sizeof now), 0);
    for (int tries = 0; tries < 100; tries++) {
        switch (k->type) {
        case MS_KEY_INT: {
            double hi = k->max < k->min + 5000 ? k->max : k->min + 5000;
            long long v = (long long)k->min + (long long)(tf_rand(rng) % (uint64_t)(hi - k->min + 1));
            snprintf(out, len, "%lld", v);
            break;
        }
        case MS_KEY_FLOAT: {
            double hi = k->max < k->min + 10 ? k->max : k->min + 10;
            double u = 0.001 + 0.998 * (double)(tf_rand(rng) >> 11) / 9007199254740992.0;
            snprintf(out, len, "%.6g", k->min + u * (hi - k->min));
            break;
        }
        case MS_KEY_U64: snprintf(out, len, "%llu", (unsigned long long)tf_rand(rng)); break;
        case MS_KEY_SIZE: snprintf(out, len, "%lluMiB", (unsigned long long)(tf_rand(rng) % 100000)); break;
        case MS_KEY_BOOL: snprintf(out, len, "%s", strcmp(now, "1") ? "yes" : "no"); break;
        case MS_KEY_ENUM: {
            int count = 0;
            while (k->choices[count]) count++;
            snprintf(out, len, "%s", k->choices[tf_rand(rng) % (uint64_t)count]);
            break;
        }
        case MS_KEY_STR:
            if (!strcmp(k->name, "device")) snprintf(out, len, "cuda:%d", (int)(tf_rand(rng) % 8));
            else snprintf(out, len, "runs/x-%llu/f_%d.dat", (unsigned long long)(tf_rand(rng) % 100000), tries);
            break;
        case MS_KEY_PRESET: snprintf(out, len, "gpt2-small"); break;
        }
        /* compare in canonical form: parse into a copy and format */
        ms_config tmp = *cur;
        char err[ERRLEN], canon[MS_CONFIG_VALUE_MAX];
        if (ms_config_key_parse(k, &tmp, out, err, sizeof err)) fail_msg("generated bad value: %s", err);
        assert_int_equal(ms_config_key_format(k, &tmp, 0, canon, sizeof canon), 0);
        if (strcmp(canon, now)) return;
    }
    fail_msg("no distinct value for %s", k->name);
}

/* ---- presets ---- */

static void test_presets_valid(void **state) {
    (void)state;
    char err[ERRLEN];
    for (int i = 0; ms_preset_names[i]; i++) {
        ms_config c = preset(ms_preset_names[i]);
        if (ms_config_validate(&c, err, sizeof err)) fail_msg("%s: %s", ms_preset_names[i], err);
        assert_string_equal(c.preset, ms_preset_names[i]);
        /* shared defaults */
        assert_true(c.beta1 == 0.9f && c.beta2 == 0.95f && c.eps == 1e-8f);
        assert_true(c.weight_decay == 0.1f && c.grad_clip == 1.0f && c.bn_momentum == 0.1f);
        assert_int_equal(c.accum, 1);
        assert_true(c.loss_scale == 65536.0f);
        assert_int_equal(c.loss_scale_window, 1000);
        assert_int_equal(c.head_chunk, 0);
        assert_int_equal(c.seed, 1337);
        assert_int_equal(c.mlp_ratio, 4);
        assert_int_equal(c.norm, MS_NORM_LAYER);
        assert_int_equal(c.tied, 0);
        assert_string_equal(c.data_path, "");
        assert_string_equal(c.checkpoint_dir, "");
    }
    ms_config t = preset("tiny");
    assert_int_equal(t.n_layer, 2);
    assert_int_equal(t.d_model, 32);
    assert_int_equal(t.n_head, 4);
    assert_int_equal(t.seq_len, 32);
    assert_int_equal(t.vocab, 256);
    assert_int_equal(t.batch, 4);
    assert_int_equal(t.steps, 300);
    assert_true(t.lr == 1e-3f);
    assert_int_equal(t.precision, MS_PREC_FP32);
    assert_string_equal(t.device, "cpu");

    ms_config g = preset("gpt2-small");
    assert_int_equal(g.n_layer, 12);
    assert_int_equal(g.d_model, 768);
    assert_int_equal(g.seq_len, 1024);
    assert_int_equal(g.vocab, 50304);
    assert_int_equal(g.batch, 16);
    assert_int_equal(g.steps, 20);
    assert_true(g.lr == 3e-4f);
    assert_int_equal(g.precision, MS_PREC_BF16);
    assert_string_equal(g.device, "cuda:0");

    ms_config s = preset("seed17");
    assert_int_equal(s.n_layer, 24);
    assert_int_equal(s.d_model, 2048);
    assert_int_equal(s.n_head, 16);
    assert_int_equal(s.seq_len, 2048);
    assert_int_equal(s.batch, 15);
    assert_true(s.gpu_mem == (size_t)40 << 30);
    assert_int_equal(s.precision, MS_PREC_BF16);
    assert_string_equal(s.device, "cuda:0");

    ms_config sc = preset("seed17-cpu");
    assert_int_equal(sc.n_layer, 20);
    assert_int_equal(sc.d_model, 64);
    assert_int_equal(sc.seq_len, 64);
    assert_int_equal(sc.vocab, 256);
    assert_int_equal(sc.precision, MS_PREC_FP32);
    assert_string_equal(sc.device, "cpu");

    ms_config c = t;
    assert_int_equal(ms_config_preset(&c, "huge", err, sizeof err), -1);
    assert_contains(err, "unknown preset 'huge'");
    assert_contains(err, "seed17-cpu");
    assert_same_config(&c, &t); /* unchanged on error */
}

/* ---- the key table ---- */

static void test_key_table_names_unique(void **state) {
    (void)state;
    int n = ms_config_key_count();
    assert_true(n >= 30);
    char *ini = ini_of(&(ms_config){.n_head = 1});
    for (int i = 0; i < n; i++) {
        const ms_config_key *a = ms_config_key_at(i);
        assert_non_null(a->help);
        char line[96];
        snprintf(line, sizeof line, "\n%s = ", a->name);
        assert_contains(ini, line); /* to_ini writes every key */
        for (int j = 0; j < i; j++) {
            const ms_config_key *b = ms_config_key_at(j);
            /* bare names and aliases must be unambiguous */
            assert_string_not_equal(a->name, b->name);
            if (a->alias) assert_string_not_equal(a->alias, b->name);
            if (b->alias) assert_string_not_equal(b->alias, a->name);
        }
    }
    free(ini);
    assert_null(ms_config_key_at(n));
    assert_null(ms_config_key_at(-1));
}

/* Every key: "section.name=v", the bare name, the alias and an INI file all
 * give the same config, which differs from the one before. */
static void test_every_key_settable(void **state) {
    (void)state;
    uint64_t rng = 0x5eed0001;
    const ms_config base = preset("tiny");
    char err[ERRLEN];
    for (int i = 0; i < ms_config_key_count(); i++) {
        const ms_config_key *k = ms_config_key_at(i);
        if (k->type == MS_KEY_PRESET) continue;
        for (int round = 0; round < 5; round++) {
            char value[MS_CONFIG_VALUE_MAX], kv[MS_CONFIG_VALUE_MAX + 64];
            random_value(k, &base, &rng, value, sizeof value);

            ms_config by_full = base;
            snprintf(kv, sizeof kv, "%s.%s=%s", k->section, k->name, value);
            if (ms_config_set(&by_full, kv, err, sizeof err)) fail_msg("%s: %s", kv, err);

            ms_config by_bare = base;
            snprintf(kv, sizeof kv, "  %s =  %s  ", k->alias ? k->alias : k->name, value);
            if (ms_config_set(&by_bare, kv, err, sizeof err)) fail_msg("%s: %s", kv, err);
            assert_same_config(&by_full, &by_bare);

            ms_config by_name = base;
            snprintf(kv, sizeof kv, "%s=%s", k->name, value);
            if (ms_config_set(&by_name, kv, err, sizeof err)) fail_msg("%s: %s", kv, err);
            assert_same_config(&by_full, &by_name);

            ms_config by_ini = base;
            snprintf(kv, sizeof kv, "; set one key\n[%s]\n%s = %s\n", k->section, k->name, value);
            if (load_text(&by_ini, kv, err)) fail_msg("%s: %s", kv, err);
            assert_same_config(&by_full, &by_ini);

            char *before = ini_of(&base), *after = ini_of(&by_full);
            assert_string_not_equal(before, after);
            free(before);
            free(after);

            /* the value reads back through ms_config_get */
            char got[MS_CONFIG_VALUE_MAX], want[MS_CONFIG_VALUE_MAX];
            snprintf(kv, sizeof kv, "%s.%s", k->section, k->name);
            assert_int_equal(ms_config_get(&by_full, kv, got, sizeof got, err, sizeof err), 0);
            assert_int_equal(ms_config_key_format(k, &by_full, 0, want, sizeof want), 0);
            assert_string_equal(got, want);
        }
    }
}

static void test_set_specific_values(void **state) {
    (void)state;
    char err[ERRLEN];
    ms_config c = preset("tiny");
    assert_int_equal(ms_config_set(&c, "model.n_layer=12", err, sizeof err), 0);
    assert_int_equal(c.n_layer, 12);
    assert_int_equal(ms_config_set(&c, "n_layer=7", err, sizeof err), 0);
    assert_int_equal(c.n_layer, 7);
    assert_int_equal(ms_config_set(&c, "gpu-mem=1.5GB", err, sizeof err), 0); /* '-' for '_' */
    assert_int_equal(c.gpu_mem, 1500000000u);
    assert_int_equal(ms_config_set(&c, "device.gpu_mem=24GiB", err, sizeof err), 0);
    assert_int_equal(c.gpu_mem, (size_t)24 << 30);
    assert_int_equal(ms_config_set(&c, "data_path=corpus.txt", err, sizeof err), 0);
    assert_string_equal(c.data_path, "corpus.txt");
    assert_int_equal(ms_config_set(&c, "data.path=", err, sizeof err), 0);
    assert_string_equal(c.data_path, "");
    assert_int_equal(ms_config_set(&c, "checkpoint_dir=\"with space ; \\\"q\\\"\"", err, sizeof err), 0);
    assert_string_equal(c.checkpoint_dir, "with space ; \"q\"");
    assert_int_equal(ms_config_set(&c, "lr=2.5e-4", err, sizeof err), 0);
    assert_true(c.lr == 2.5e-4f);
    assert_int_equal(ms_config_set(&c, "precision=BF16", err, sizeof err), 0);
    assert_int_equal(c.precision, MS_PREC_BF16);
    assert_int_equal(ms_config_set(&c, "seed=18446744073709551615", err, sizeof err), 0);
    assert_true(c.seed == UINT64_MAX);
    assert_int_equal(ms_config_set(&c, "device=cuda:3", err, sizeof err), 0);
    assert_string_equal(c.device, "cuda:3");

    static const char *const yes[] = {"1", "true", "TRUE", "yes", "Yes", "on"};
    static const char *const no[] = {"0", "false", "False", "no", "NO", "off"};
    for (int i = 0; i < 6; i++) {
        char kv[64];
        snprintf(kv, sizeof kv, "tied=%s", yes[i]);
        assert_int_equal(ms_config_set(&c, kv, err, sizeof err), 0);
        assert_int_equal(c.tied, 1);
        snprintf(kv, sizeof kv, "checkpoint.resume=%s", no[i]);
        assert_int_equal(ms_config_set(&c, kv, err, sizeof err), 0);
        assert_int_equal(c.resume, 0);
        snprintf(kv, sizeof kv, "tied=%s", no[i]);
        assert_int_equal(ms_config_set(&c, kv, err, sizeof err), 0);
        assert_int_equal(c.tied, 0);
    }

    /* preset=... starts over from that preset */
    assert_int_equal(ms_config_set(&c, "preset=gpt2-small", err, sizeof err), 0);
    ms_config g = preset("gpt2-small");
    assert_same_config(&c, &g);
}

typedef struct {
    const char *kv;
    const char *message;
} bad_case;

static void test_set_refuses_bad_input(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"foo=1", "unknown key 'foo' (known: preset, model.n_layer, model.d_model"},
        {"n_layers=3", "unknown key 'n_layers' (did you mean 'model.n_layer'?)"},
        {"model.nlayer=3", "did you mean 'model.n_layer'?"},
        {"learning_rate=1", "unknown key 'learning_rate'"},
        {"model.n_layer=abc", "model.n_layer: 'abc' is not an integer"},
        {"n_layer=12abc", "model.n_layer: '12abc' is not an integer"},
        {"n_layer=1.5", "model.n_layer: '1.5' is not an integer"},
        {"n_layer=", "model.n_layer: '' is not an integer"},
        {"n_layer=0", "model.n_layer: 0 is out of range [1, 4094]"},
        /* one limit (vocab/limits.h): the largest model the trainer tracks */
        {"n_layer=4095", "model.n_layer: 4095 is out of range [1, 4094]"},
        {"n_layer=-1", "model.n_layer: -1 is out of range [1, 4094]"},
        {"n_layer=99999999999", "model.n_layer: 99999999999 is out of range"},
        {"batch=-4", "train.batch: -4 is out of range"},
        {"lr=0", "train.lr: 0 is out of range (0, 10]"},
        {"lr=1e-60", "train.lr: 1e-60 is out of range"},
        {"lr=-1", "out of range"},
        {"lr=nan", "train.lr: 'nan' is not a finite number"},
        {"lr=inf", "is not a finite number"},
        {"lr=fast", "train.lr: 'fast' is not a finite number"},
        {"beta1=1", "train.beta1: 1 is out of range [0, 1)"},
        {"beta2=1.5", "train.beta2: 1.5 is out of range"},
        {"eps=0", "train.eps: 0 is out of range"},
        {"mlp_ratio=0", "model.mlp_ratio: 0 is out of range"},
        {"vocab=1", "model.vocab: 1 is out of range"},
        {"steps=-1", "train.steps: -1 is out of range"},
        {"bn_momentum=2", "model.bn_momentum: 2 is out of range"},
        {"norm=groupnorm", "model.norm: 'groupnorm' is not one of layernorm|batchnorm"},
        {"precision=fp8", "train.precision: 'fp8' is not one of fp32|bf16|fp16"},
        {"data.format=csv", "data.format: 'csv' is not one of auto|text|u16|builtin"},
        {"tied=maybe", "model.tied: 'maybe' is not a boolean"},
        {"resume=2", "checkpoint.resume: '2' is not a boolean"},
        {"device=gpu0", "device.device: 'gpu0' is not a device (cpu or cuda:N)"},
        {"device=cuda:", "is not a device"},
        {"device=cuda:x", "is not a device"},
        {"gpu_mem=-1GiB", "device.gpu_mem: size '-1GiB' is negative"},
        {"gpu_mem=lots", "device.gpu_mem: 'lots' is not a size"},
        {"seed=-1", "train.seed: '-1' is not a non-negative integer"},
        {"seed=18446744073709551616", "train.seed: '18446744073709551616' does not fit in 64 bits"},
        {"train.n_layer=3", "key 'n_layer' belongs in section [model], not [train]"},
        {"model.preset=tiny", "key 'preset' belongs at the top of the file"},
        {"n_layer", "'n_layer' is not key=value"},
        {"=3", "has no key before '='"},
        {"preset=huge", "preset: unknown preset 'huge'"},
        {"data.path=\"unterminated", "data.path: quoted value must end"},
        {"data.path=\"bad \\q escape\"", "unknown escape"},
    };
    char err[ERRLEN];
    const ms_config base = preset("tiny");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ms_config c = base;
        err[0] = 0;
        if (ms_config_set(&c, cases[i].kv, err, sizeof err) != -1) fail_msg("accepted '%s'", cases[i].kv);
        if (!strstr(err, cases[i].message))
            fail_msg("'%s': expected \"%s\", got \"%s\"", cases[i].kv, cases[i].message, err);
        assert_same_config(&c, &base);
    }
    /* a value longer than the field */
    char kv[1200] = "data.path=";
    memset(kv + strlen(kv), 'p', 600);
    ms_config c = base;
    assert_int_equal(ms_config_set(&c, kv, err, sizeof err), -1);
    assert_contains(err, "data.path: value is too long (600 characters, at most 511)");
    /* a tiny error buffer is truncated, never overrun */
    char small[8];
    memset(small, 'x', sizeof small);
    assert_int_equal(ms_config_set(&c, "foo=1", small, 5), -1);
    assert_int_equal(small[4], 0);
    assert_int_equal(small[5], 'x');
}

/* ---- INI ---- */

static void test_ini_loads_full_file(void **state) {
    (void)state;
    char err[ERRLEN];
    ms_config c = preset("tiny");
    const char *text =
        "# a memsplit config\n"
        "preset = seed17-cpu\n"
        "\n"
        "[model]\n"
        "n_layer = 6 ; inline comment\n"
        "   d_model=128\n"
        "n_head: 8\n"
        "norm = batchnorm\n"
        "tied = yes\n"
        "\r\n"
        "[train]\r\n"
        "lr = 6e-4\r\n"
        "precision = fp16\n"
        "seed = 42\n"
        "[data]\n"
        "path = data/tiny shakespeare.txt\n"
        "format = text\n"
        "[device]\n"
        "gpu_mem = 512 MiB\n"
        "[checkpoint]\n"
        "dir = \"ck;pts\"\n"
        "every = 50\n"
        "resume = 1\n";
    assert_int_equal(load_text(&c, text, err), 0);
    assert_string_equal(c.preset, "seed17-cpu");
    assert_int_equal(c.n_layer, 6);
    assert_int_equal(c.d_model, 128);
    assert_int_equal(c.n_head, 8);
    assert_int_equal(c.norm, MS_NORM_BATCH);
    assert_int_equal(c.tied, 1);
    assert_true(c.lr == 6e-4f);
    assert_int_equal(c.precision, MS_PREC_FP16);
    assert_int_equal(c.seed, 42);
    assert_string_equal(c.data_path, "data/tiny shakespeare.txt");
    assert_int_equal(c.data_format, MS_DATA_TEXT);
    assert_int_equal(c.gpu_mem, (size_t)512 << 20);
    assert_string_equal(c.checkpoint_dir, "ck;pts");
    assert_int_equal(c.checkpoint_every, 50);
    assert_int_equal(c.resume, 1);
    assert_int_equal(c.seq_len, 64); /* from the preset */
    assert_int_equal(ms_config_validate(&c, err, sizeof err), 0);
}

static void test_ini_errors(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"[model]\nn_layer = 2\nthis line has no equals\n", "t.ini:3: syntax error in 'this line has no equals'"},
        {"[model\nn_layer = 2\n", "t.ini:1: syntax error"},
        {"[model]\n\n\nn_layrs = 2\n", "t.ini:4: unknown key 'model.n_layrs' (did you mean 'model.n_layer'?)"},
        {"[train]\nn_layer = 2\n", "t.ini:2: key 'n_layer' belongs in section [model], not [train]"},
        {"[model]\nn_layer = two\n", "t.ini:2: model.n_layer: 'two' is not an integer"},
        {"[model]\nn_head = 0\n", "t.ini:2: model.n_head: 0 is out of range"},
        {"[model]\nnorm = rmsnorm\n", "t.ini:2: model.norm: 'rmsnorm' is not one of layernorm|batchnorm"},
        {"[model]\nn_layer = 3\n[train]\nbogus = 1\n[model]\nn_layer = x\n", "t.ini:4: unknown key"},
        {"[model]\nn_layer = 3\n\npreset = tiny\n", "belongs at the top"},
        {"n_layer = 3\npreset = tiny\n", "t.ini:2: preset must be the first key"},
        {"[whatever]\nkey = 1\n", "unknown key 'whatever.key'"},
    };
    char err[ERRLEN];
    const ms_config base = preset("tiny");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ms_config c = base;
        err[0] = 0;
        if (load_text(&c, cases[i].kv, err) != -1) fail_msg("accepted:\n%s", cases[i].kv);
        if (!strstr(err, cases[i].message))
            fail_msg("expected \"%s\", got \"%s\" for:\n%s", cases[i].message, err, cases[i].kv);
        assert_same_config(&c, &base); /* nothing applied from a refused file */
    }
    ms_config c = base;
    char *missing = tf_join(dir_path, "nope.ini");
    assert_int_equal(ms_config_load_ini(&c, missing, err, sizeof err), -1);
    assert_contains(err, "cannot open config");
    assert_contains(err, "nope.ini");
    assert_contains(err, "No such file");
    free(missing);
    assert_int_equal(ms_config_load_ini(&c, dir_path, err, sizeof err), -1); /* a folder */
    assert_contains(err, "config");
    char *bin = tf_join(dir_path, "bin.ini");
    tf_write(bin, "[model]\0n_layer=2\n", 18);
    assert_int_equal(ms_config_load_ini(&c, bin, err, sizeof err), -1);
    assert_contains(err, "not a text file");
    free(bin);
    assert_same_config(&c, &base);
}

/* Lines longer than inih's 200-character buffer are not cut. */
static void test_ini_long_lines(void **state) {
    (void)state;
    char err[ERRLEN], path[512], text[2048];
    memset(path, 0, sizeof path);
    for (int i = 0; i < 450; i++) path[i] = (char)('a' + i % 26);
    path[100] = '/';
    snprintf(text, sizeof text, "[data]\npath = %s   ; a comment after it\n[model]\nn_layer = 5\n", path);
    ms_config c = preset("tiny");
    assert_int_equal(load_text(&c, text, err), 0);
    assert_string_equal(c.data_path, path);
    assert_int_equal(c.n_layer, 5);

    /* a long comment is fine; a long line without '=' is an error with its line */
    char comment[400];
    memset(comment, '-', sizeof comment);
    comment[0] = ';';
    comment[sizeof comment - 1] = 0;
    snprintf(text, sizeof text, "%s\n[model]\nn_layer = 4\n", comment);
    assert_int_equal(load_text(&c, text, err), 0);
    assert_int_equal(c.n_layer, 4);
    snprintf(text, sizeof text, "[model]\n%s\n", comment + 1);
    assert_int_equal(load_text(&c, text, err), -1);
    assert_contains(err, "t.ini:2: line too long");
    /* too long for the field */
    char longer[700];
    memset(longer, 'z', sizeof longer);
    longer[sizeof longer - 1] = 0;
    snprintf(text, sizeof text, "[checkpoint]\ndir = %s\n", longer);
    assert_int_equal(load_text(&c, text, err), -1);
    assert_contains(err, "t.ini:2: checkpoint.dir: value is too long");
}

/* load_ini(to_ini(c)) == c for random configs, whatever the starting config. */
static void test_to_ini_round_trip(void **state) {
    (void)state;
    uint64_t rng = 0xc0ffee;
    char err[ERRLEN];
    static const char nasty[] = "ab ;#=:\"\\\t[]é/\r\n\x01 ";
    for (int round = 0; round < 40; round++) {
        ms_config c = preset(ms_preset_names[round % 4]);
        for (int i = 0; i < ms_config_key_count(); i++) {
            const ms_config_key *k = ms_config_key_at(i);
            if (k->type == MS_KEY_PRESET || tf_rand(&rng) % 3 == 0) continue;
            char value[MS_CONFIG_VALUE_MAX];
            random_value(k, &c, &rng, value, sizeof value);
            if (ms_config_key_parse(k, &c, value, err, sizeof err)) fail_msg("%s", err);
        }
        /* strings with every character INI treats specially, up to full length */
        size_t len = round == 0 ? MS_PATH_MAX - 1 : (size_t)(tf_rand(&rng) % 300);
        for (size_t i = 0; i < len; i++) c.data_path[i] = nasty[tf_rand(&rng) % (sizeof nasty - 1)];
        c.data_path[len] = 0;
        snprintf(c.checkpoint_dir, sizeof c.checkpoint_dir, " \"%d\" ; ", round);
        c.gpu_mem = (size_t)tf_rand(&rng);
        c.lr = (float)((tf_rand(&rng) % 1000000 + 1) * 1e-9);
        /* floats that need all 9 digits to come back exactly */
        c.bn_momentum = (float)((double)(tf_rand(&rng) >> 40) / 16777216.0);
        c.weight_decay = (float)(tf_rand(&rng) % 10000000) / 1048577.0f;
        c.eps = (float)((double)(tf_rand(&rng) % 1000000 + 1) * 1.234567e-13);
        if (round % 5 == 0) c.preset[0] = 0;

        char *ini = ini_of(&c);
        ms_config back;
        memset(&back, 0, sizeof back);
        if (round % 2) back = preset("gpt2-small");
        char *path = tf_join(dir_path, "rt.ini");
        tf_write(path, ini, strlen(ini));
        if (ms_config_load_ini(&back, path, err, sizeof err)) fail_msg("%s\n%s", err, ini);
        free(path);
        assert_same_config(&c, &back);
        assert_string_equal(back.preset, c.preset);
        assert_string_equal(back.data_path, c.data_path);
        assert_string_equal(back.checkpoint_dir, c.checkpoint_dir);
        assert_true(back.lr == c.lr);
        assert_true(back.bn_momentum == c.bn_momentum);
        assert_true(back.weight_decay == c.weight_decay);
        assert_true(back.eps == c.eps);
        assert_true(back.gpu_mem == c.gpu_mem);
        assert_true(back.seed == c.seed);

        ms_config from_text;
        memset(&from_text, 0, sizeof from_text);
        assert_int_equal(ms_config_load_ini_text(&from_text, ini, "mem", err, sizeof err), 0);
        assert_same_config(&c, &from_text);
        free(ini);
    }
}

/* ---- validation ---- */

static void test_validate_rules(void **state) {
    (void)state;
    typedef struct {
        const char *sets[3];
        const char *message;
    } rule_case;
    static const rule_case cases[] = {
        {{"d_model=100", "n_head=3"}, "model.d_model (100) must be divisible by model.n_head (3)"},
        {{"d_model=12", "n_head=4"}, "head size d_model/n_head = 12/4 = 3 must be even"},
        {{"resume=1"}, "checkpoint.resume = 1 needs checkpoint.dir"},
        {{"checkpoint.every=10"}, "checkpoint.every = 10 needs checkpoint.dir"},
        {{"data.format=text"}, "data.format = text needs data.path"},
        {{"data.format=u16"}, "data.format = u16 needs data.path"},
        {{"data.format=builtin", "data.path=x.txt"}, "data.format = builtin but data.path is set"},
        {{"data.format=text", "data.path=x.txt", "vocab=100"}, "needs model.vocab >= 256"},
    };
    char err[ERRLEN];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ms_config c = preset("tiny");
        for (int j = 0; j < 3 && cases[i].sets[j]; j++)
            if (ms_config_set(&c, cases[i].sets[j], err, sizeof err)) fail_msg("%s", err);
        assert_int_equal(ms_config_validate(&c, err, sizeof err), -1);
        if (!strstr(err, cases[i].message)) fail_msg("expected \"%s\", got \"%s\"", cases[i].message, err);
    }
    /* fields changed behind the table's back are caught by the same ranges */
    ms_config c = preset("tiny");
    c.n_layer = 0;
    assert_int_equal(ms_config_validate(&c, err, sizeof err), -1);
    assert_contains(err, "model.n_layer: 0 is out of range [1, 4094]");
    c = preset("tiny");
    c.lr = 0;
    assert_int_equal(ms_config_validate(&c, err, sizeof err), -1);
    assert_contains(err, "train.lr: 0 is out of range (0, 10]");
    c = preset("tiny");
    c.beta2 = 1.0f;
    assert_int_equal(ms_config_validate(&c, err, sizeof err), -1);
    assert_contains(err, "train.beta2");
    c = preset("tiny");
    snprintf(c.device, sizeof c.device, "tpu:0");
    assert_int_equal(ms_config_validate(&c, err, sizeof err), -1);
    assert_contains(err, "'tpu:0' is not a device");
    c = preset("tiny");
    c.precision = (ms_precision)7;
    assert_int_equal(ms_config_validate(&c, err, sizeof err), -1);
    assert_contains(err, "train.precision: 7 is not a valid choice");
    c = preset("tiny");
    c.steps = 0; /* zero steps is allowed: load, evaluate, save */
    assert_int_equal(ms_config_validate(&c, err, sizeof err), 0);
    c.batch = 1 << 20;
    c.seq_len = 1 << 20;
    assert_int_equal(ms_config_validate(&c, err, sizeof err), -1);
    assert_contains(err, "too large");
}

/* ---- sizes ---- */

static void test_parse_size(void **state) {
    (void)state;
    typedef struct {
        const char *text;
        size_t bytes;
    } ok_case;
    static const ok_case ok[] = {
        {"0", 0},
        {"123", 123},
        {"512MiB", (size_t)512 << 20},
        {"24GiB", (size_t)24 << 30},
        {"24gib", (size_t)24 << 30},
        {"1.5GB", 1500000000u},
        {"64KiB", 65536},
        {"4kB", 4000},
        {"4KB", 4000},
        {"4 KiB", 4096},
        {"  7  ", 7},
        {"10B", 10},
        {"10 b", 10},
        {"1.5 GiB", (size_t)3 << 29},
        {"1.1GiB", 1181116006u}, /* 1181116006.4 rounds down */
        {"2TiB", (size_t)2 << 40},
        {"3TB", 3000000000000u},
        {"24G", (size_t)24 << 30},
        {"16M", (size_t)16 << 20},
        {"8k", 8192},
        {".5MiB", (size_t)1 << 19},
        {"0.000001MB", 1},
        {"007", 7},
        {"+12", 12},
        {"18446744073709551615", SIZE_MAX},
        {"16777215TiB", (size_t)16777215 << 40},
    };
    char err[ERRLEN];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t v = 12345;
        if (ms_parse_size(ok[i].text, &v, err, sizeof err)) fail_msg("'%s': %s", ok[i].text, err);
        if (v != ok[i].bytes) fail_msg("'%s': got %zu, want %zu", ok[i].text, v, ok[i].bytes);
    }
    static const bad_case bad[] = {
        {"", "is not a size"},
        {"   ", "is not a size"},
        {"abc", "is not a size"},
        {"GiB", "is not a size"},
        {".", "is not a size"},
        {"-1", "is negative"},
        {"-5MiB", "is negative"},
        {" -0", "is negative"},
        {"1.5", "not a whole number of bytes"},
        {"12XB", "unknown unit"},
        {"1e9", "unknown unit"},
        {"1.2.3", "unknown unit"},
        {"1 2", "unknown unit"},
        {"0x10", "unknown unit"},
        {"5 GiB extra", "unknown unit"},
        {"4EiB", "unknown unit"},
        {"18446744073709551616", "too large"},
        {"16777216TiB", "too large"},
        {"99999999999TiB", "too large"},
        {"123456789012345678901", "too large"},
        {"1.0000000000000000001", "too many decimals"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 777;
        if (ms_parse_size(bad[i].kv, &v, err, sizeof err) != -1) fail_msg("accepted '%s' as %zu", bad[i].kv, v);
        if (!strstr(err, bad[i].message)) fail_msg("'%s': expected \"%s\", got \"%s\"", bad[i].kv, bad[i].message, err);
        assert_int_equal(v, 777); /* untouched */
    }
    size_t v;
    assert_int_equal(ms_parse_size(NULL, &v, err, sizeof err), -1);
}

static void test_fmt_bytes(void **state) {
    (void)state;
    typedef struct {
        size_t bytes;
        const char *text;
    } fmt_case;
    static const fmt_case cases[] = {
        {0, "0 B"},
        {512, "512 B"},
        {1023, "1023 B"},
        {1024, "1.00 KiB"},
        {1536, "1.50 KiB"},
        {(size_t)3 << 20, "3.00 MiB"},
        {(size_t)3 << 29, "1.50 GiB"},
        {(size_t)24 << 30, "24.00 GiB"},
        {((size_t)1 << 20) - 1, "1.00 MiB"},
        {(size_t)5 << 40, "5.00 TiB"},
        {SIZE_MAX, "16.00 EiB"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        assert_ptr_equal(ms_fmt_bytes(cases[i].bytes, buf, sizeof buf), buf);
        assert_string_equal(buf, cases[i].text);
    }
    char tiny[4];
    ms_fmt_bytes((size_t)3 << 20, tiny, sizeof tiny); /* truncated, terminated */
    assert_int_equal(strlen(tiny), 3);
}

static void test_precision_names(void **state) {
    (void)state;
    ms_precision p;
    assert_string_equal(ms_precision_name(MS_PREC_FP32), "fp32");
    assert_string_equal(ms_precision_name(MS_PREC_BF16), "bf16");
    assert_string_equal(ms_precision_name(MS_PREC_FP16), "fp16");
    assert_int_equal(ms_precision_parse("bf16", &p), 0);
    assert_int_equal(p, MS_PREC_BF16);
    assert_int_equal(ms_precision_parse("FP16", &p), 0);
    assert_int_equal(p, MS_PREC_FP16);
    assert_int_equal(ms_precision_parse("fp8", &p), -1);
    assert_int_equal(ms_precision_parse(NULL, &p), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_valid),
        cmocka_unit_test(test_key_table_names_unique),
        cmocka_unit_test(test_every_key_settable),
        cmocka_unit_test(test_set_specific_values),
        cmocka_unit_test(test_set_refuses_bad_input),
        cmocka_unit_test(test_ini_loads_full_file),
        cmocka_unit_test(test_ini_errors),
        cmocka_unit_test(test_ini_long_lines),
        cmocka_unit_test(test_to_ini_round_trip),
        cmocka_unit_test(test_validate_rules),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_fmt_bytes),
        cmocka_unit_test(test_precision_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
