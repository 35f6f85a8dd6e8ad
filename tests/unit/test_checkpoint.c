/* test_checkpoint.c — trainer/checkpoint.h: round trip, every kind of damage
 * refused with the caller's memory untouched, model and section checks,
 * atomic replacement, latest(), the model hash and CRC-32C. */
#include <setjmp.h>
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/common/trainer_files.h"
#include "trainer/checkpoint.h"
#include "trainer/ckpt_parts.h"
#include "trainer/config.h"
#include "trainer/crc32c.h"
#include "trainer/job.h"

#define ERRLEN 1024
#define SENTINEL 0xA5

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

/* Entries of dir whose names start with prefix. */
static int count_named(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

/* A set of sections with random contents; sizes given, names "s0", "s1", ... */
typedef struct {
    int n;
    ms_ckpt_section s[64];
    char names[64][16];
} section_set;

static void make_sections(section_set *set, const size_t *sizes, int n, uint64_t seed) {
    set->n = n;
    for (int i = 0; i < n; i++) {
        snprintf(set->names[i], sizeof set->names[i], "s%d", i);
        set->s[i].name = set->names[i];
        set->s[i].bytes = sizes[i];
        set->s[i].data = sizes[i] ? malloc(sizes[i]) : NULL;
        unsigned char *p = set->s[i].data;
        for (size_t j = 0; j < sizes[i]; j++) p[j] = (unsigned char)tf_rand(&seed);
    }
}

/* Same names and sizes, buffers filled with SENTINEL: where loads go. */
static void make_targets(section_set *dst, const section_set *src) {
    dst->n = src->n;
    for (int i = 0; i < src->n; i++) {
        memcpy(dst->names[i], src->names[i], sizeof dst->names[i]);
        dst->s[i].name = dst->names[i];
        dst->s[i].bytes = src->s[i].bytes;
        dst->s[i].data = src->s[i].bytes ? malloc(src->s[i].bytes) : NULL;
        if (src->s[i].bytes) memset(dst->s[i].data, SENTINEL, src->s[i].bytes);
    }
}

static void free_sections(section_set *set) {
    for (int i = 0; i < set->n; i++) free(set->s[i].data);
    set->n = 0;
}

static void assert_untouched(const section_set *t) {
    for (int i = 0; i < t->n; i++) {
        const unsigned char *p = t->s[i].data;
        for (size_t j = 0; j < t->s[i].bytes; j++)
            if (p[j] != SENTINEL) fail_msg("section %d byte %zu written on a refused load", i, j);
    }
}

static ms_config tiny(void) {
    ms_config c;
    char err[ERRLEN];
    assert_int_equal(ms_config_preset(&c, "tiny", err, sizeof err), 0);
    return c;
}

static void make_meta(ms_ckpt_meta *m, const ms_config *c, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->model_hash = ms_config_model_hash(c);
    m->job = ms_job_fingerprint(c, 77);
    m->step = (int64_t)(tf_rand(&seed) % 1000000);
    m->data_cursor = tf_rand(&seed);
    m->loss_scale = 32768.0f;
    m->good_steps = (int32_t)(tf_rand(&seed) % 1000);
    m->rng_state = tf_rand(&seed);
    char *ini = ms_config_to_ini(c);
    assert_non_null(ini);
    snprintf(m->config_ini, sizeof m->config_ini, "%s", ini);
    free(ini);
}

/* The meta a load starts from: expected hash and this run's config. */
static ms_ckpt_meta expecting(const ms_ckpt_meta *saved) {
    ms_ckpt_meta m;
    memset(&m, 0x5A, sizeof m);
    m.model_hash = saved->model_hash;
    m.job = saved->job;
    snprintf(m.config_ini, sizeof m.config_ini, "%s", saved->config_ini);
    return m;
}

static void assert_meta_equal(const ms_ckpt_meta *a, const ms_ckpt_meta *b) {
    assert_true(a->model_hash == b->model_hash);
    assert_true(a->job == b->job);
    assert_true(a->step == b->step);
    assert_true(a->data_cursor == b->data_cursor);
    assert_true(a->loss_scale == b->loss_scale);
    assert_int_equal(a->good_steps, b->good_steps);
    assert_true(a->rng_state == b->rng_state);
    assert_string_equal(a->config_ini, b->config_ini);
}

/* Loads path expecting failure with message; checks nothing was written. */
static void load_refused(const char *path, const ms_ckpt_meta *saved, const section_set *src, const char *message) {
    section_set t;
    make_targets(&t, src);
    ms_ckpt_meta m = expecting(saved), before = m;
    char err[ERRLEN] = "";
    int rc = ms_ckpt_load(path, &m, t.s, t.n, err, sizeof err);
    if (rc != -1 && rc != MS_CKPT_FOREIGN) fail_msg("load returned %d, expected \"%s\"", rc, message);
    if (message) assert_contains(err, message);
    assert_untouched(&t);
    assert_memory_equal(&m, &before, sizeof m);
    free_sections(&t);
}

static char *saved_file(const char *name, const ms_ckpt_meta *m, const section_set *set) {
    char *path = tf_join(dir_path, name);
    char err[ERRLEN];
    if (ms_ckpt_save(path, m, set->s, set->n, err, sizeof err)) fail_msg("save: %s", err);
    return path;
}

static void test_round_trip(void **state) {
    (void)state;
    static const size_t sizes[] = {4096, 0, 1, 7, 100000, 333333};
    ms_config c = tiny();
    section_set src, dst;
    make_sections(&src, sizes, 6, 1);
    ms_ckpt_meta saved;
    make_meta(&saved, &c, 2);
    char *path = saved_file("rt.ckpt", &saved, &src);

    /* no temporary file is left behind */
    char *tmp = tf_join(dir_path, "rt.ckpt.tmp");
    assert_int_equal(count_named(dir_path, "rt.ckpt.tmp"), 0);

    make_targets(&dst, &src);
    ms_ckpt_meta m = expecting(&saved);
    char err[ERRLEN];
    if (ms_ckpt_load(path, &m, dst.s, dst.n, err, sizeof err)) fail_msg("load: %s", err);
    assert_meta_equal(&m, &saved);
    for (int i = 0; i < src.n; i++)
        if (src.s[i].bytes) assert_memory_equal(src.s[i].data, dst.s[i].data, src.s[i].bytes);

    /* model_hash 0 on entry: any model */
    ms_ckpt_meta any;
    memset(&any, 0, sizeof any);
    assert_int_equal(ms_ckpt_load(path, &any, dst.s, dst.n, err, sizeof err), 0);
    assert_meta_equal(&any, &saved);

    /* peek reads the header only */
    ms_ckpt_meta peeked;
    int n_sections = -1;
    assert_int_equal(ms_ckpt_peek(path, &peeked, &n_sections, err, sizeof err), 0);
    assert_meta_equal(&peeked, &saved);
    assert_int_equal(n_sections, 6);

    /* the saved config reads back as the same config */
    ms_config back;
    memset(&back, 0, sizeof back);
    char *ini = tf_join(dir_path, "back.ini");
    tf_write(ini, peeked.config_ini, strlen(peeked.config_ini));
    assert_int_equal(ms_config_load_ini(&back, ini, err, sizeof err), 0);
    assert_true(ms_config_model_hash(&back) == saved.model_hash);

    /* saving again replaces the file */
    saved.step += 1;
    free(saved_file("rt.ckpt", &saved, &src));
    assert_int_equal(ms_ckpt_load(path, &m, dst.s, dst.n, err, sizeof err), 0);
    assert_true(m.step == saved.step);

    /* no sections at all is a valid checkpoint */
    char *empty = saved_file("empty.ckpt", &saved, &(section_set){.n = 0});
    m = expecting(&saved);
    assert_int_equal(ms_ckpt_load(empty, &m, NULL, 0, err, sizeof err), 0);
    assert_meta_equal(&m, &saved);

    free(empty);
    free(ini);
    free(tmp);
    free(path);
    free_sections(&src);
    free_sections(&dst);
}

/* Every single byte of a small checkpoint, flipped, is refused. */
static void test_every_flipped_byte_refused(void **state) {
    (void)state;
    static const size_t sizes[] = {64, 3, 200};
    ms_config c = tiny();
    section_set src;
    make_sections(&src, sizes, 3, 3);
    ms_ckpt_meta saved;
    make_meta(&saved, &c, 4);
    snprintf(saved.config_ini, sizeof saved.config_ini, "[model]\nn_layer = 2\n"); /* keep the file small */
    char *path = saved_file("flip.ckpt", &saved, &src);
    size_t n;
    unsigned char *good = tf_read(path, &n);
    assert_true(n > 300 && n < 1000);
    uint64_t rng = 5;
    for (size_t pos = 0; pos < n; pos++) {
        unsigned char *bad = malloc(n);
        memcpy(bad, good, n);
        bad[pos] ^= (unsigned char)(1u << (tf_rand(&rng) % 8));
        tf_write(path, bad, n);
        const char *message = pos < 8    ? "not a memsplit checkpoint"
                              : pos < 12 ? "version"
                              : pos < 24 ? NULL /* sizes: "truncated" or "corrupt" */
                                         : "corrupt: checksum mismatch";
        load_refused(path, &saved, &src, message);
        free(bad);
    }
    free(good);
    free(path);
    free_sections(&src);
}

/* A larger file: random flips in the data, and every truncation point. */
static void test_damage_refused(void **state) {
    (void)state;
    static const size_t sizes[] = {1 << 16, 12345, 1 << 18};
    ms_config c = tiny();
    section_set src;
    make_sections(&src, sizes, 3, 6);
    ms_ckpt_meta saved;
    make_meta(&saved, &c, 7);
    char *path = saved_file("damage.ckpt", &saved, &src);
    size_t n;
    unsigned char *good = tf_read(path, &n);
    uint64_t rng = 8;
    for (int trial = 0; trial < 40; trial++) {
        unsigned char *bad = malloc(n);
        memcpy(bad, good, n);
        size_t pos = 24 + (size_t)(tf_rand(&rng) % (n - 24));
        bad[pos] ^= (unsigned char)(1 + tf_rand(&rng) % 255);
        tf_write(path, bad, n);
        load_refused(path, &saved, &src, "corrupt: checksum mismatch");
        free(bad);
    }
    /* truncated anywhere: the start, the header, the data, the CRC */
    static const size_t cuts[] = {0, 1, 7, 8, 11, 12, 40, 71, 72, 100, 500, 5000, 70000, 300000};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0] + 3; i++) {
        size_t len = i < sizeof cuts / sizeof cuts[0] ? cuts[i] : n - (i - sizeof cuts / sizeof cuts[0] + 1);
        tf_write(path, good, len);
        load_refused(path, &saved, &src, "truncated");
    }
    /* trailing bytes after a good file */
    unsigned char *longer = malloc(n + 1);
    memcpy(longer, good, n);
    longer[n] = 0;
    tf_write(path, longer, n + 1);
    load_refused(path, &saved, &src, "corrupt");
    free(longer);
    /* not a checkpoint at all */
    tf_write(path, "[model]\nn_layer = 2\n", 20);
    load_refused(path, &saved, &src, "not a memsplit checkpoint");
    /* another format version (a valid file otherwise) */
    unsigned char *v2 = malloc(n);
    memcpy(v2, good, n);
    v2[8] = 3;
    tf_write(path, v2, n);
    load_refused(path, &saved, &src, "has checkpoint format version 3; this build reads version 2");
    free(v2);
    /* missing file */
    char *missing = tf_join(dir_path, "missing.ckpt");
    load_refused(missing, &saved, &src, "cannot open checkpoint");
    load_refused(dir_path, &saved, &src, NULL); /* a folder */
    /* the good file still loads */
    tf_write(path, good, n);
    section_set t;
    make_targets(&t, &src);
    ms_ckpt_meta m = expecting(&saved);
    char err[ERRLEN];
    assert_int_equal(ms_ckpt_load(path, &m, t.s, t.n, err, sizeof err), 0);
    free_sections(&t);
    free(missing);
    free(good);
    free(path);
    free_sections(&src);
}

/* A checkpoint of the tiny config with one section of `bytes`. */
static char *saved_tiny(const char *name, size_t bytes, uint64_t seed, ms_config *c, section_set *src,
                        ms_ckpt_meta *saved) {
    *c = tiny();
    make_sections(src, &bytes, 1, seed);
    make_meta(saved, c, seed + 1);
    return saved_file(name, saved, src);
}

static void test_different_model_refused(void **state) {
    (void)state;
    ms_config c;
    section_set src;
    ms_ckpt_meta saved;
    char *path = saved_tiny("model.ckpt", 128, 9, &c, &src, &saved);

    ms_config other = c;
    other.n_layer = 3;
    ms_ckpt_meta run;
    make_meta(&run, &other, 11);
    assert_true(run.model_hash != saved.model_hash);
    load_refused(path, &run, &src, "checkpoint is for a different model: model.n_layer = 2 in '");
    load_refused(path, &run, &src, "', 3 in this run");

    other = c;
    other.precision = MS_PREC_BF16;
    make_meta(&run, &other, 12);
    load_refused(path, &run, &src, "train.precision = fp32 in '");

    /* without this run's config the message falls back to the hashes */
    run.config_ini[0] = 0;
    load_refused(path, &run, &src, "checkpoint is for a different model:");
    load_refused(path, &run, &src, "model hash");
    free(path);
    free_sections(&src);
}

/* Another job (issue 11: doctor resumed another run's checkpoint): refused
 * as foreign, with both fingerprints and the key that differs. */
static void test_other_job_refused(void **state) {
    (void)state;
    ms_config c;
    section_set src;
    ms_ckpt_meta saved;
    char *path = saved_tiny("job.ckpt", 64, 31, &c, &src, &saved);
    char err[ERRLEN];

    ms_config other = c;
    assert_int_equal(ms_config_set(&other, "train.seed=1", err, sizeof err), 0);
    ms_ckpt_meta run;
    make_meta(&run, &other, 33);
    assert_true(run.job != saved.job && run.model_hash == saved.model_hash);
    section_set t;
    make_targets(&t, &src);
    ms_ckpt_meta m = run;
    assert_int_equal(ms_ckpt_load(path, &m, t.s, t.n, err, sizeof err), MS_CKPT_FOREIGN);
    char a[20], b[20];
    snprintf(a, sizeof a, "%016llx", (unsigned long long)saved.job);
    snprintf(b, sizeof b, "%016llx", (unsigned long long)run.job);
    assert_contains(err, "belongs to another job");
    assert_contains(err, a);
    assert_contains(err, b);
    assert_contains(err, "train.seed is 1337 there, 1 here");
    assert_untouched(&t);
    free_sections(&t);

    /* the same job with other data: said so */
    make_meta(&run, &c, 34);
    run.job = ms_job_fingerprint(&c, 78);
    load_refused(path, &run, &src, "the data differs");
    /* 0: any job */
    make_targets(&t, &src);
    m = expecting(&saved);
    m.job = 0;
    assert_int_equal(ms_ckpt_load(path, &m, t.s, t.n, err, sizeof err), 0);
    free_sections(&t);
    free(path);
    free_sections(&src);
}

/* What is one job: the layout may change, the learning may not. */
static void test_job_fingerprint(void **state) {
    (void)state;
    ms_config base = tiny();
    char err[ERRLEN];
    uint64_t h = ms_job_fingerprint(&base, 5);
    assert_true(h != 0 && h == ms_job_fingerprint(&base, 5));
    assert_true(ms_job_fingerprint(&base, 6) != h);
    static const char *const other[] = {"seed=4", "lr=0.1", "n_layer=3", "precision=bf16", "weight_decay=0",
                                        "batch=8", "beta2=0.9", "grad_clip=0.5"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        ms_config c = base;
        assert_int_equal(ms_config_set(&c, other[i], err, sizeof err), 0);
        if (ms_job_fingerprint(&c, 5) == h) fail_msg("%s did not change the job", other[i]);
    }
    /* the tiny preset's micro-batch is 4: 2 x 2 and 1 x 4 are the same global batch */
    static const char *const same[][2] = {{"batch=2", "accum=2"}, {"batch=1", "accum=4"}, {"steps=9", "log_every=3"},
                                          {"device=cuda:1", "gpu_mem=1GiB"}, {"checkpoint.dir=c", "checkpoint.every=3"},
                                          {"head_chunk=16", "data.path="}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        ms_config c = base;
        assert_int_equal(ms_config_set(&c, same[i][0], err, sizeof err), 0);
        assert_int_equal(ms_config_set(&c, same[i][1], err, sizeof err), 0);
        if (ms_job_fingerprint(&c, 5) != h) fail_msg("%s %s changed the job", same[i][0], same[i][1]);
    }
    char why[256];
    char *ini = ms_config_to_ini(&base);
    ms_config c = base;
    c.accum = 2;
    ms_job_mismatch(ini, &c, why, sizeof why);
    assert_contains(why, "global batch (train.batch x train.accum) is 4 there, 8 here");
    ms_job_mismatch(ini, &base, why, sizeof why);
    assert_string_equal(why, "");
    free(ini);
}

static void test_section_mismatch_refused(void **state) {
    (void)state;
    static const size_t sizes[] = {100, 200, 300};
    ms_config c = tiny();
    section_set src;
    make_sections(&src, sizes, 3, 13);
    ms_ckpt_meta saved;
    make_meta(&saved, &c, 14);
    char *path = saved_file("sections.ckpt", &saved, &src);

    section_set want;
    make_targets(&want, &src);
    snprintf(want.names[1], sizeof want.names[1], "w1");
    load_refused(path, &saved, &want, "section 1 of '");
    load_refused(path, &saved, &want, "is 's1' (200 bytes); this run expects 'w1' (200 bytes)");
    free_sections(&want);

    make_targets(&want, &src);
    free(want.s[2].data);
    want.s[2].bytes = 301;
    want.s[2].data = malloc(301);
    load_refused(path, &saved, &want, "is 's2' (300 bytes); this run expects 's2' (301 bytes)");
    free_sections(&want);

    make_targets(&want, &src);
    want.n = 2; /* the caller knows fewer sections */
    load_refused(path, &saved, &want, "has 3 sections, this run expects 2 (first extra: 's2')");
    want.n = 3;
    free_sections(&want);

    static const size_t more[] = {100, 200, 300, 50};
    section_set four;
    make_sections(&four, more, 4, 15);
    load_refused(path, &saved, &four, "has 3 sections, this run expects 4 (first missing: 's3')");
    free_sections(&four);
    free(path);
    free_sections(&src);
}

static void test_save_failures_keep_old_file(void **state) {
    (void)state;
    static const size_t sizes[] = {256};
    ms_config c = tiny();
    section_set src;
    make_sections(&src, sizes, 1, 16);
    ms_ckpt_meta saved;
    make_meta(&saved, &c, 17);
    char *path = saved_file("keep.ckpt", &saved, &src);
    size_t n0;
    unsigned char *before = tf_read(path, &n0);
    char err[ERRLEN];

    /* a bad section: nothing is written, the old file is intact */
    ms_ckpt_section bad[2] = {src.s[0], {"", NULL, 0}};
    assert_int_equal(ms_ckpt_save(path, &saved, bad, 2, err, sizeof err), -1);
    assert_contains(err, "section 1 needs a name");
    bad[1] = (ms_ckpt_section){"x", NULL, 10};
    assert_int_equal(ms_ckpt_save(path, &saved, bad, 2, err, sizeof err), -1);
    assert_contains(err, "section 'x' has no data");
    ms_ckpt_meta unterminated = saved;
    memset(unterminated.config_ini, 'x', sizeof unterminated.config_ini);
    assert_int_equal(ms_ckpt_save(path, &unterminated, src.s, 1, err, sizeof err), -1);
    assert_contains(err, "not NUL-terminated");
    size_t n1;
    unsigned char *after = tf_read(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    char *tmp = tf_join(dir_path, "keep.ckpt.tmp");
    assert_int_equal(count_named(dir_path, "keep.ckpt.tmp"), 0);

    /* a folder that does not exist */
    char *nowhere = tf_join(dir_path, "no/such/dir/x.ckpt");
    assert_int_equal(ms_ckpt_save(nowhere, &saved, src.s, 1, err, sizeof err), -1);
    assert_contains(err, "cannot create");
    assert_int_equal(ms_ckpt_save(NULL, &saved, src.s, 1, err, sizeof err), -1);
    assert_int_equal(ms_ckpt_save(path, NULL, src.s, 1, err, sizeof err), -1);
    free(nowhere);
    free(tmp);
    free(before);
    free(after);
    free(path);
    free_sections(&src);
}

/* Symlinks planted at the temporary names a writer could predict
 * ("x.ckpt.tmp", and the step-N.ckpt.tmp of a folder of parts) are never
 * followed: the save lands in a new file of its own, their targets are left
 * as they were, and a sweep removes the links themselves (and the leftovers
 * of saves cut short), never what they point to. */
static void test_planted_symlinks(void **state) {
    (void)state;
    static const size_t sizes[] = {100, 3000};
    ms_config c = tiny();
    section_set src;
    make_sections(&src, sizes, 2, 31);
    ms_ckpt_meta meta;
    make_meta(&meta, &c, 3);
    char *dir = tf_join(dir_path, "planted");
    assert_int_equal(mkdir(dir, 0755), 0);
    char *victim = tf_join(dir_path, "victim.txt"), *vdir = tf_join(dir_path, "victim-dir");
    char *vfile = tf_join(vdir, "keep.txt");
    tf_write(victim, "mine", 4);
    assert_int_equal(mkdir(vdir, 0755), 0);
    tf_write(vfile, "also mine", 9);
    char *path = tf_join(dir, "step-00000003.ckpt"), *man = tf_join(dir, "manifest.json");
    char *link1 = tf_join(dir, "step-00000003.ckpt.tmp"), *link2 = tf_join(dir, "manifest.json.tmp");
    char *link3 = tf_join(dir, "step-00000004.ckpt.tmp");
    assert_int_equal(symlink(victim, link1), 0);
    assert_int_equal(symlink(victim, link2), 0);
    assert_int_equal(symlink(vdir, link3), 0);
    char err[ERRLEN];
    if (ms_ckpt_save(path, &meta, src.s, src.n, err, sizeof err)) fail_msg("save: %s", err);
    if (ms_ckpt_write_atomic(man, "{}", 2, err, sizeof err)) fail_msg("write: %s", err);
    size_t n;
    char *got = tf_read(victim, &n);
    assert_int_equal((int)n, 4); /* the target is as it was */
    assert_memory_equal(got, "mine", 4);
    free(got);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    ms_ckpt_meta back = expecting(&meta);
    section_set dst;
    make_targets(&dst, &src);
    assert_int_equal(ms_ckpt_load(path, &back, dst.s, dst.n, err, sizeof err), 0);
    /* leftovers of saves cut short go; the links go, their targets stay */
    char *cut = tf_join(dir, "step-00000002.ckpt.tmp.Ab3xYz"), *cutdir = tf_join(dir, "step-00000005.ckpt.tmp.Qq7Rr8");
    char *inside = tf_join(cutdir, "part-000.ckpt");
    tf_write(cut, "x", 1);
    assert_int_equal(mkdir(cutdir, 0755), 0);
    tf_write(inside, "x", 1);
    ms_ckpt_sweep(dir);
    assert_int_equal(count_named(dir, "step-00000002.ckpt.tmp"), 0);
    assert_int_equal(count_named(dir, "step-00000003.ckpt.tmp"), 0);
    assert_int_equal(count_named(dir, "step-00000004.ckpt.tmp"), 0);
    assert_int_equal(count_named(dir, "step-00000005.ckpt.tmp"), 0);
    assert_int_equal(count_named(dir, "step-00000003.ckpt"), 1);
    assert_int_equal(access(vfile, F_OK), 0);
    assert_int_equal(access(victim, F_OK), 0);
    unlink(link2);
    unlink(man);
    unlink(path);
    rmdir(dir);
    unlink(vfile);
    rmdir(vdir);
    char *ptrs[] = {dir, victim, vdir, vfile, path, man, link1, link2, link3, cut, cutdir, inside};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
    free_sections(&src);
    free_sections(&dst);
}

static void test_many_sections(void **state) {
    (void)state;
    enum { N = 64 };
    size_t sizes[N];
    uint64_t rng = 18;
    for (int i = 0; i < N; i++) sizes[i] = (size_t)(tf_rand(&rng) % 3000);
    ms_config c = tiny();
    section_set src, dst;
    make_sections(&src, sizes, N, 19);
    /* long names up to the limit */
    static char long_name[MS_CKPT_NAME_MAX + 1];
    memset(long_name, 'n', MS_CKPT_NAME_MAX);
    src.s[5].name = long_name;
    ms_ckpt_meta saved;
    make_meta(&saved, &c, 20);
    char *path = saved_file("many.ckpt", &saved, &src);
    make_targets(&dst, &src);
    dst.s[5].name = long_name;
    ms_ckpt_meta m = expecting(&saved);
    char err[ERRLEN];
    assert_int_equal(ms_ckpt_load(path, &m, dst.s, dst.n, err, sizeof err), 0);
    for (int i = 0; i < N; i++)
        if (sizes[i]) assert_memory_equal(src.s[i].data, dst.s[i].data, sizes[i]);
    /* one byte over the name limit is refused at save */
    static char too_long[MS_CKPT_NAME_MAX + 2];
    memset(too_long, 'n', MS_CKPT_NAME_MAX + 1);
    src.s[5].name = too_long;
    assert_int_equal(ms_ckpt_save(path, &saved, src.s, N, err, sizeof err), -1);
    assert_contains(err, "section 5 needs a name");
    free(path);
    free_sections(&src);
    free_sections(&dst);
}

static void test_latest(void **state) {
    (void)state;
    char *dir = tf_join(dir_path, "ckpts");
    assert_int_equal(mkdir(dir, 0755), 0);
    char out[1024];
    assert_int_equal(ms_ckpt_latest(dir, out, sizeof out), 0);
    char *missing = tf_join(dir_path, "not-there");
    assert_int_equal(ms_ckpt_latest(missing, out, sizeof out), 0);
    free(missing);

    static const char *const names[] = {"step-00000001.ckpt", "step-00000042.ckpt", "step-00000007.ckpt",
                                        "step-00000100.ckpt.tmp", "step-99.ckpt.bak", "notes.txt",
                                        "step-abc.ckpt", "step-.ckpt", "xstep-00000500.ckpt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *p = tf_join(dir, names[i]);
        tf_write(p, "x", 1);
        free(p);
    }
    assert_int_equal(ms_ckpt_latest(dir, out, sizeof out), 1);
    char *want = tf_join(dir, "step-00000042.ckpt");
    assert_string_equal(out, want);
    free(want);

    /* numeric, not alphabetical: 8 digits are a width, not a limit */
    char built[1024];
    assert_int_equal(ms_ckpt_path(dir, 123456789, built, sizeof built), 0);
    assert_contains(built, "/step-123456789.ckpt");
    tf_write(built, "x", 1);
    assert_int_equal(ms_ckpt_latest(dir, out, sizeof out), 1);
    assert_string_equal(out, built);
    assert_int_equal(ms_ckpt_path(dir, 42, built, sizeof built), 0);
    assert_contains(built, "/step-00000042.ckpt");

    assert_int_equal(ms_ckpt_latest(dir, out, 10), -1); /* does not fit */
    assert_int_equal(ms_ckpt_path(dir, 1, built, 10), -1);
    assert_int_equal(ms_ckpt_path(dir, -1, built, sizeof built), -1);
    char *file = tf_join(dir, "notes.txt");
    assert_int_equal(ms_ckpt_latest(file, out, sizeof out), -1); /* not a folder */
    free(file);

    /* a real save lands where ms_ckpt_path says and latest() finds it */
    ms_config c = tiny();
    ms_ckpt_meta saved;
    make_meta(&saved, &c, 21);
    assert_int_equal(ms_ckpt_path(dir, 200000000, built, sizeof built), 0);
    char err[ERRLEN];
    assert_int_equal(ms_ckpt_save(built, &saved, NULL, 0, err, sizeof err), 0);
    assert_int_equal(ms_ckpt_latest(dir, out, sizeof out), 1);
    assert_string_equal(out, built);
    free(dir);
}

static void test_model_hash(void **state) {
    (void)state;
    ms_config base = tiny();
    uint64_t h = ms_config_model_hash(&base);
    assert_true(h != 0);
    assert_true(ms_config_model_hash(&base) == h);
    /* each key that fixes shapes or numerics changes it */
    static const char *const changes[] = {"n_layer=3",  "d_model=64",     "n_head=8",  "seq_len=64",
                                          "vocab=512",  "mlp_ratio=2",    "norm=batchnorm", "tied=1",
                                          "precision=bf16"};
    char err[ERRLEN];
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        ms_config c = base;
        assert_int_equal(ms_config_set(&c, changes[i], err, sizeof err), 0);
        if (ms_config_model_hash(&c) == h) fail_msg("%s did not change the model hash", changes[i]);
    }
    /* the rest of the run does not */
    static const char *const same[] = {"lr=0.1",   "batch=9",       "steps=5",      "seed=4",   "device=cuda:1",
                                       "gpu_mem=1GiB", "data.path=x.txt", "checkpoint.dir=c", "accum=4",
                                       "bn_momentum=0.5", "grad_clip=0"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        ms_config c = base;
        assert_int_equal(ms_config_set(&c, same[i], err, sizeof err), 0);
        if (ms_config_model_hash(&c) != h) fail_msg("%s changed the model hash", same[i]);
    }
    ms_config g;
    assert_int_equal(ms_config_preset(&g, "gpt2-small", err, sizeof err), 0);
    assert_true(ms_config_model_hash(&g) != h);
}

static void test_crc32c(void **state) {
    (void)state;
    assert_int_equal(ms_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(ms_crc32c_portable(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(ms_crc32c(0, "", 0), 0);
    uint64_t rng = 22;
    unsigned char *buf = malloc(70000);
    for (size_t i = 0; i < 70000; i++) buf[i] = (unsigned char)tf_rand(&rng);
    for (int trial = 0; trial < 200; trial++) {
        size_t off = (size_t)(tf_rand(&rng) % 64), len = (size_t)(tf_rand(&rng) % 69000);
        uint32_t a = ms_crc32c(0, buf + off, len), b = ms_crc32c_portable(0, buf + off, len);
        assert_int_equal(a, b);
        size_t cut = len ? (size_t)(tf_rand(&rng) % len) : 0;
        assert_int_equal(ms_crc32c(ms_crc32c(0, buf + off, cut), buf + off + cut, len - cut), a);
        assert_int_equal(ms_crc32c_portable(ms_crc32c_portable(0, buf + off, cut), buf + off + cut, len - cut), a);
        if (len) { /* any single-bit change changes it */
            size_t pos = off + (size_t)(tf_rand(&rng) % len);
            buf[pos] ^= 0x10;
            assert_true(ms_crc32c(0, buf + off, len) != a);
            buf[pos] ^= 0x10;
        }
    }
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_every_flipped_byte_refused),
        cmocka_unit_test(test_damage_refused),
        cmocka_unit_test(test_different_model_refused),
        cmocka_unit_test(test_other_job_refused),
        cmocka_unit_test(test_job_fingerprint),
        cmocka_unit_test(test_section_mismatch_refused),
        cmocka_unit_test(test_save_failures_keep_old_file),
        cmocka_unit_test(test_many_sections),
        cmocka_unit_test(test_planted_symlinks),
        cmocka_unit_test(test_latest),
        cmocka_unit_test(test_model_hash),
        cmocka_unit_test(test_crc32c),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
