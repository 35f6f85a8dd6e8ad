/* test_term_report.c — the terminal report: compact byte units, the
 * per-layer table and the OOM diagnosis rendered from synthetic profiles
 * (random, seeded) into a memory stream: every line within 80 columns, the
 * key numbers and phrases present, totals right; long and UTF-8 layer names
 * whole or cut at character boundaries; the word wrapper; and a real doctor
 * run of a program under bf16 autocast (tests/browser/program_db.sh): its
 * answer first, in the program's own words, every figure the database's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reports/term_internal.h"
#include "reports/term_report.h"
#include "tests/common/reports_util.h"

typedef struct { char *text; size_t len; FILE *f; } capture;

static void cap_open(capture *c) { c->text = NULL; c->len = 0; c->f = open_memstream(&c->text, &c->len); assert_non_null(c->f); }
static void cap_close(capture *c) { fclose(c->f); }

/* Every line at most width columns (UTF-8 aware), no tabs; returns the
 * number of lines. */
static int assert_lines_fit(const char *text, int width)
{
    int lines = 0;
    const char *s = text;
    while (*s) {
        const char *nl = strchr(s, '\n');
        int n = nl ? (int)(nl - s) : (int)strlen(s);
        int cols = rep_columns(s, n);
        if (cols > width) fprintf(stderr, "line of %d columns: %.*s\n", cols, n, s);
        assert_true(cols <= width);
        assert_null(memchr(s, '\t', (size_t)n));
        lines++;
        s += n + (nl ? 1 : 0);
    }
    return lines;
}

/* A copy with every run of white space made one space. */
static char *squashed(const char *text)
{
    char *out = malloc(strlen(text) + 1), *w = out;
    assert_non_null(out);
    for (const char *r = text; *r; r++) {
        int space = *r == ' ' || *r == '\n';
        if (space && (w == out || w[-1] == ' ')) continue;
        *w++ = space ? ' ' : *r;
    }
    if (w > out && w[-1] == ' ') w--;
    *w = '\0';
    return out;
}

static void assert_has(const char *text, const char *phrase)
{
    if (!strstr(text, phrase)) fprintf(stderr, "missing phrase: '%s'\n", phrase);
    assert_non_null(strstr(text, phrase));
}

/* ---- units ------------------------------------------------------------ */

static double parse_short(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    const char *units = "KMGTPE";
    const char *u = *end ? strchr(units, *end) : NULL;
    for (int i = 0; u && i <= (int)(u - units); i++) v *= 1024.0;
    return v;
}

static void test_bytes_short(void **state)
{
    (void)state;
    char b[16];
    assert_string_equal(ms_term_bytes_short(0, b, sizeof b), "-");
    assert_string_equal(ms_term_bytes_short(512, b, sizeof b), "512");
    assert_string_equal(ms_term_bytes_short(12 * 1024, b, sizeof b), "12K");
    assert_string_equal(ms_term_bytes_short(340ull << 20, b, sizeof b), "340M");
    assert_string_equal(ms_term_bytes_short((uint64_t)(1.2 * (1ull << 30)), b, sizeof b), "1.2G");
    assert_string_equal(ms_term_bytes_short(1000ull << 20, b, sizeof b), "1.0G");   /* stays 4 wide */
    assert_string_equal(ms_term_bytes_short(UINT64_MAX, b, sizeof b), "16E");
    rp_rng rng;
    rp_seed(&rng, rp_test_seed());
    for (int i = 0; i < 20000; i++) {
        uint64_t v = rp_next(&rng) >> rp_below(&rng, 64);
        ms_term_bytes_short(v, b, sizeof b);
        assert_true(strlen(b) >= 1 && strlen(b) <= 4);
        if (v == 0) continue;
        /* One significant form everywhere: within 5% (2 digits) or exact. */
        double back = parse_short(b);
        assert_true(fabs(back - (double)v) <= 0.05 * (double)v + 0.5);
    }
}

static void test_bytes_sentence(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(ms_term_bytes(3ull << 29, b, sizeof b), "1.50 GiB");
    assert_string_equal(ms_term_bytes(1023, b, sizeof b), "1023 B");
    assert_string_equal(ms_term_bytes(1024, b, sizeof b), "1.00 KiB");
    assert_string_equal(ms_term_bytes(340ull << 20, b, sizeof b), "340.00 MiB");
    assert_string_equal(ms_term_bytes(40ull << 30, b, sizeof b), "40.00 GiB");
}

/* ---- the table ---------------------------------------------------------- */

static void test_profile_that_fits(void **state)
{
    (void)state;
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 1);
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 12, .n_prec = 1, .n_mb = 1, .isolated_from = -1 };
    assert_int_equal(rp_make_profile(&p, &spec, &rng), 0);
    capture c;
    cap_open(&c);
    ms_term_report_profile(c.f, &p, 80);
    cap_close(&c);
    int lines = assert_lines_fit(c.text, 80);
    assert_true(lines >= p.n_rows + 6);
    assert_has(c.text, "fits");
    assert_null(strstr(c.text, "OUT OF MEMORY"));
    assert_null(strstr(c.text, "master"));   /* fp32: no master column */

    /* The total row: param summed, transient the largest, times summed. */
    uint64_t param = 0, trf = 0;
    double fwd = 0;
    for (int i = 0; i < p.n_rows; i++) {
        param += p.rows[i].param;
        if (p.rows[i].transient_fwd > trf) trf = p.rows[i].transient_fwd;
        fwd += p.rows[i].fwd_ms;
    }
    char want[MS_NAME_MAX + 32], b1[16], b2[16], line_start[8];
    const char *total = strstr(c.text, "total");
    assert_non_null(total);
    const char *eol = strchr(total, '\n');
    char *row = strndup(total, (size_t)(eol - total));
    char *sq = squashed(row);
    /* total param grad optim act tr.fwd ... */
    snprintf(want, sizeof want, "total %s ", ms_term_bytes_short(param, b1, sizeof b1));
    assert_has(sq, want);
    snprintf(want, sizeof want, " %s ", ms_term_bytes_short(trf, b2, sizeof b2));
    assert_has(sq, want);
    snprintf(want, sizeof want, " %.2f ", fwd);
    assert_has(sq, want);
    free(sq);
    free(row);

    /* Each layer has its row: index, name and the source letter. */
    for (int i = 0; i < p.n_rows; i++) {
        snprintf(line_start, sizeof line_start, "%3d ", p.rows[i].layer);
        snprintf(want, sizeof want, "\n%s%-9s F", line_start, p.rows[i].name);
        assert_has(c.text, want);
    }
    char capb[32];
    snprintf(want, sizeof want, "capacity  %s on %s", ms_term_bytes(p.capacity, capb, sizeof capb), p.device);
    assert_has(c.text, want);
    assert_has(c.text, "peak      ");
    free(c.text);
    ms_profile_free(&p);
}

static void test_profile_with_oom(void **state)
{
    (void)state;
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 2);
    ms_profile p;
    /* 40 GiB, 1.5 GiB asked with 38.92 GiB live: 0.42 GiB missing. */
    rp_profile_spec spec = { .n_blocks = 24, .n_prec = 1, .n_mb = 1, .isolated_from = 17, .oom = 1, .oom_layer = 17,
                             .capacity = 40ull << 30, .requested = 3ull << 29, .missing = 450971566ull };
    assert_int_equal(rp_make_profile(&p, &spec, &rng), 0);
    capture c;
    cap_open(&c);
    ms_term_report_profile(c.f, &p, 80);
    cap_close(&c);
    assert_lines_fit(c.text, 80);
    char *sq = squashed(c.text);
    assert_has(sq, "OUT OF MEMORY in the forward pass of block 17 (layer 17): requested 1.50 GiB "
                   "(act 'fc_pre') with 38.92 GiB live of 40.00 GiB capacity; 0.42 GiB missing.");
    char want[160];
    snprintf(want, sizeof want, "Exact bytes: requested %" PRIu64 ", live %" PRIu64 ", capacity %" PRIu64 ".",
             spec.requested, spec.capacity + spec.missing - spec.requested, spec.capacity);
    assert_has(sq, want);
    assert_has(sq, "A device of at least 40.42 GiB");
    assert_has(sq, "result OUT OF MEMORY");
    free(sq);
    free(c.text);
    /* a later step's OOM says so: its gradients and optimizer state are live */
    p.oom.step = 2;
    cap_open(&c);
    ms_term_report_profile(c.f, &p, 80);
    cap_close(&c);
    sq = squashed(c.text);
    assert_has(sq, "OUT OF MEMORY in the forward pass of block 17 (layer 17, step 2): requested 1.50 GiB ");
    assert_has(sq, "8 of 26 rows here were completed in");
    /* Live by category: each non-zero category with its bytes. */
    for (int k = 0; k < MS_CAT_N; k++) {
        char b[32];
        if (!p.oom.live_by_cat[k]) continue;
        snprintf(want, sizeof want, " %s %s ", ms_cat_name((ms_cat)k), ms_term_bytes(p.oom.live_by_cat[k], b, sizeof b));
        assert_has(sq, want);
    }
    /* Top layers: the OOM layer holds the most here, so it comes first. */
    const char *top = strstr(c.text, "Layers holding the most");
    assert_non_null(top);
    assert_has(top, "\n  layer  17  block 17");
    const char *first = strstr(top, "\n  layer ");
    assert_true(first == strstr(top, "\n  layer  17"));
    assert_has(sq, "more layers hold");
    free(sq);
    free(c.text);

    /* The diagnosis block alone, narrower: still within its width. */
    cap_open(&c);
    ms_term_report_oom(c.f, &p, 60);
    cap_close(&c);
    assert_lines_fit(c.text, 60);
    assert_has(c.text, "OUT OF MEMORY in the forward pass of");
    assert_null(strstr(c.text, "layer s "));   /* no table */
    free(c.text);
    ms_profile_free(&p);
}

/* The OOM block at 80 columns, every line within them, squashed (whitespace runs as one space) */
static char *oom_block(const ms_profile *p)
{
    capture c;
    cap_open(&c);
    ms_term_report_oom(c.f, p, 80);
    cap_close(&c);
    assert_lines_fit(c.text, 80);
    char *sq = squashed(c.text);
    free(c.text);
    return sq;
}

/* Just over the capacity: rounded, "at least" and the capacity read
 * alike, so the sentence says the bytes it lacked; an OOM in the
 * optimizer's step is said so, not "outside any layer". */
static void test_oom_just_over_in_the_optimizer(void **state)
{
    (void)state;
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 5);
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 4, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .oom = 1, .oom_layer = 2,
                             .capacity = 1768113, .requested = 16384, .missing = 3355 };
    assert_int_equal(rp_make_profile(&p, &spec, &rng), 0);
    p.oom.layer = -1;
    p.oom.phase = MS_PH_OPTIMIZER;
    snprintf(p.oom.what, sizeof p.oom.what, "blocks.1.fc1.weight (Adam state)");
    char *sq = oom_block(&p);
    assert_has(sq, "OUT OF MEMORY in the optimizer step: requested 16.00 KiB");
    assert_has(sq, "'blocks.1.fc1.weight (Adam state)'");
    assert_has(sq, "A device of at least 1.69 MiB (3355 bytes more than the capacity) would have got past");
    free(sq);
    ms_profile_free(&p);
}

/* CUDA refused memory no allocator request asked for (cuBLAS creating its
 * handle): the bytes asked are not known, and no "device of at least"
 * follows from them. */
static void test_oom_bytes_not_known(void **state)
{
    (void)state;
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 7);
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 4, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .oom = 1, .oom_layer = 2,
                             .capacity = 8ull << 30, .requested = 64ull << 20, .missing = 1 << 20 };
    assert_int_equal(rp_make_profile(&p, &spec, &rng), 0);
    p.oom.requested = 0;
    p.oom.step = 3;
    char *sq = oom_block(&p);
    char want[MS_NAME_MAX + 96];
    snprintf(want, sizeof want, "OUT OF MEMORY in the forward pass of %s (layer 2, step 3) with ", p.oom.layer_name);
    assert_has(sq, want);
    assert_has(sq, "capacity: the bytes it asked for are not known (CUDA refused memory outside PyTorch's allocator");
    assert_has(sq, "Exact bytes: requested not known, live ");
    assert_null(strstr(sq, "A device of at least"));
    assert_null(strstr(sq, "requested 0"));
    free(sq);
    ms_profile_free(&p);
}

static void test_oom_outside_a_layer_without_shortfall(void **state)
{
    (void)state;
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 3);
    ms_profile p;
    /* "missing" wraps to a surplus: live + requested < capacity by 1 MiB. */
    rp_profile_spec spec = { .n_blocks = 4, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .oom = 1, .oom_layer = 2,
                             .capacity = 8ull << 30, .requested = 64ull << 20, .missing = (uint64_t)-(1 << 20) };
    assert_int_equal(rp_make_profile(&p, &spec, &rng), 0);
    p.oom.layer = -1;
    p.oom.phase = MS_PH_INIT;
    p.oom.what[0] = '\0';
    char *sq = oom_block(&p);
    assert_has(sq, "OUT OF MEMORY outside any layer: requested 64.00 MiB (act) with");
    assert_has(sq, "65.00 MiB were still free");
    assert_null(strstr(sq, "missing"));
    free(sq);
    /* a program's loss, outside its layers, in the forward: named by what ran */
    p.oom.phase = MS_PH_FORWARD;
    p.oom.category = MS_CAT_TRANSIENT;
    snprintf(p.oom.what, sizeof p.oom.what, "the program's own code after the model's forward (its loss)");
    sq = oom_block(&p);
    assert_has(sq, "OUT OF MEMORY in the forward pass of the program's own code after the model's forward (its "
                   "loss): requested 64.00 MiB (transient) with");
    free(sq);
    ms_profile_free(&p);
}

/* Many layers, three precisions and two micro-batch sizes (one table each),
 * huge byte counts and long times: the layout still holds in 80 columns. */
static void test_wide_profiles_fit(void **state)
{
    (void)state;
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 4);
    for (int trial = 0; trial < 4; trial++) {
        ms_profile p;
        rp_profile_spec spec = { .n_blocks = 100 + (int)rp_below(&rng, 60), .n_prec = 3, .n_mb = 2,
                                 .isolated_from = 50, .oom = trial % 2, .oom_layer = 77,
                                 .capacity = 80ull << 30, .requested = 1ull << 30, .missing = 5ull << 28,
                                 .scale = (uint64_t)1 << (20 + rp_below(&rng, 22)) };
        assert_int_equal(rp_make_profile(&p, &spec, &rng), 0);
        for (int i = 0; i < p.n_rows; i += 7) {
            p.rows[i].fwd_ms = rp_unit(&rng) * 2e6;
            p.rows[i].bwd_ms = rp_unit(&rng) * 1e4;
        }
        snprintf(p.model, sizeof p.model, "a-model-name-that-is-rather-long-for-a-header-line-%d", trial);
        capture c;
        cap_open(&c);
        ms_term_report_profile(c.f, &p, 80);
        cap_close(&c);
        int lines = assert_lines_fit(c.text, 80);
        assert_true(lines > p.n_rows);
        /* One table per (precision, micro-batch), bf16 and fp16 with master. */
        assert_has(c.text, "fp32, micro-batch 4:");
        assert_has(c.text, "fp16, micro-batch 8:");
        char *t = strstr(c.text, "bf16, micro-batch 4:");
        assert_non_null(t);
        assert_has(t, "master");
        free(c.text);
        ms_profile_free(&p);
    }
}

/* ---- wrapping ------------------------------------------------------------ */

static void test_wrap_keeps_words_and_width(void **state)
{
    (void)state;
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 5);
    for (int trial = 0; trial < 300; trial++) {
        char text[600];
        int n = 0;
        int words = 1 + (int)rp_below(&rng, 60);
        for (int w = 0; w < words && n < 500; w++) {
            int len = 1 + (int)rp_below(&rng, rp_below(&rng, 10) ? 12 : 90);   /* some longer than a line */
            for (int k = 0; k < len && n < 560; k++) text[n++] = (char)('a' + rp_below(&rng, 26));
            int spaces = 1 + (int)rp_below(&rng, 3);
            while (spaces-- && n < 590) text[n++] = ' ';
        }
        text[n] = '\0';
        int width = 20 + (int)rp_below(&rng, 81), indent = (int)rp_below(&rng, 9);
        int first = (int)rp_below(&rng, 12);
        capture c;
        cap_open(&c);
        fprintf(c.f, "%*s", first, "");
        rep_wrap_from(c.f, width, first, indent, text);
        cap_close(&c);
        assert_lines_fit(c.text, width);
        assert_true(c.len > 0 && c.text[c.len - 1] == '\n');
        /* Nothing lost: the letters in order are the same (long words may
         * be cut, so compare without white space). */
        char *a = malloc(strlen(text) + 1), *b = malloc(c.len + 1);
        int na = 0, nb = 0;
        for (const char *s = text; *s; s++) if (*s != ' ') a[na++] = *s;
        for (const char *s = c.text; *s; s++) if (*s != ' ' && *s != '\n') b[nb++] = *s;
        a[na] = b[nb] = '\0';
        assert_string_equal(a, b);
        free(a);
        free(b);
        free(c.text);
    }
}

/* ---- names ------------------------------------------------------------------ */

/* Every byte sequence well-formed UTF-8 (no character cut in two). */
static void assert_utf8(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        int n = *u < 0x80 ? 0 : (*u & 0xE0) == 0xC0 ? 1 : (*u & 0xF0) == 0xE0 ? 2 : (*u & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0) fprintf(stderr, "bad UTF-8 lead byte at: %.20s\n", (const char *)u);
        assert_true(n >= 0);
        for (int k = 1; k <= n; k++) {
            if ((u[k] & 0xC0) != 0x80) fprintf(stderr, "cut UTF-8 character at: %.20s\n", (const char *)u);
            assert_true((u[k] & 0xC0) == 0x80);
        }
        u += n + 1;
    }
}

/* A program whose module paths are longer than the table's room: the list's
 * path is said once and each block by its index; the rest is cut in the
 * middle, never inside a character, and named whole under the table. The
 * diagnosis's "Layers holding the most" keeps them whole where they fit. */
static void test_long_names(void **state)
{
    (void)state;
    rp_rng rng;
    rp_seed(&rng, rp_test_seed() + 6);
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 24, .n_prec = 2, .n_mb = 1, .isolated_from = -1, .oom = 1, .oom_layer = 18,
                             .capacity = 40ull << 30, .requested = 1ull << 30, .missing = 1ull << 28 };
    assert_int_equal(rp_make_profile(&p, &spec, &rng), 0);
    snprintf(p.fingerprint, sizeof p.fingerprint, "fnv64:0123456789abcdef");
    const char *pre = "model.embed_tokens,model.embed_positions,model.dropout_of_the_embeddings";
    const char *post = "model.norm_f\xc3\xbcr_\xe5\x90\x8d\xe5\x89\x8d_der_Ausgabe,model.lm_head_projection";
    for (int i = 0; i < p.n_rows; i++) {
        ms_layer_row *r = &p.rows[i];
        if (r->layer == 0) snprintf(r->name, sizeof r->name, "%s", pre);
        else if (r->layer == spec.n_blocks + 1) snprintf(r->name, sizeof r->name, "%s", post);
        else snprintf(r->name, sizeof r->name, "model.backbone.encoder.layers.%d", r->layer - 1);
    }
    snprintf(p.oom.layer_name, sizeof p.oom.layer_name, "model.backbone.encoder.layers.17");
    capture c;
    cap_open(&c);
    ms_term_report_profile(c.f, &p, 80);
    cap_close(&c);
    assert_lines_fit(c.text, 80);
    assert_utf8(c.text);
    assert_has(c.text, "(.N below is model.backbone.encoder.layers.N)");
    assert_has(c.text, "\n 18 .17 ");
    assert_null(strstr(c.text, "~ormers"));
    /* the names still too long: cut in the middle, then said whole */
    assert_has(c.text, "\n  0 model.em");
    const char *whole = strstr(c.text, "Names cut above, whole:");
    assert_non_null(whole);
    char *sq = squashed(whole), want[256];
    snprintf(want, sizeof want, "layer 0: %s", pre);
    assert_has(sq, want);
    snprintf(want, sizeof want, "layer 25: %s", post);
    assert_has(sq, want);
    free(sq);
    /* the diagnosis: block names whole, in the room the line leaves */
    const char *top = strstr(c.text, "Layers holding the most");
    assert_non_null(top);
    assert_has(top, "  layer  18  model.backbone.encoder.layers.17 ");
    free(c.text);

    /* A narrower diagnosis: the names cut in the middle, keeping the index. */
    cap_open(&c);
    ms_term_report_oom(c.f, &p, 50);
    cap_close(&c);
    assert_lines_fit(c.text, 50);
    assert_utf8(c.text);
    top = strstr(c.text, "Layers holding the most");
    assert_non_null(top);
    assert_has(top, "  layer  18  model.ba~yers.17 ");
    free(c.text);
    ms_profile_free(&p);
}

static void test_cut_keeps_characters(void **state)
{
    (void)state;
    char buf[256];
    /* fits: itself */
    assert_string_equal(rep_cut("transformers.0", 14, buf, sizeof buf), "transformers.0");
    /* head and tail around '~', the index kept */
    const char *cut = rep_cut("model.transformers.23", 12, buf, sizeof buf);
    assert_int_equal(rep_columns(cut, (int)strlen(cut)), 12);
    assert_non_null(strstr(cut, "~"));
    assert_int_equal(strcmp(cut + strlen(cut) - 3, ".23"), 0);
    /* multi-byte characters on both sides of the cut */
    const char *s = "\xe5\x90\x8d\xe5\x89\x8d\xe5\x90\x8d\xe5\x89\x8d.\xc3\xbc\xc3\xbc\xc3\xbc.\xe5\x90\x8d\xe5\x89\x8d";
    for (int w = 3; w < 14; w++) {
        cut = rep_cut(s, w, buf, sizeof buf);
        assert_true(rep_columns(cut, (int)strlen(cut)) <= w);
        assert_utf8(cut);
    }
    assert_int_equal(rep_prefix("a\xc3\xbc", 2), 1);
    assert_int_equal(rep_prefix("a\xc3\xbc", 3), 3);
    assert_int_equal(rep_prefix("ab", 9), 2);
}

/* ---- a program's doctor run, recorded for real -------------------------------- */

static char fixture_dir[64], fixture_db[160];
static int fixture_state;   /* 0 not made, 1 made, -1 not here (skip), -2 failed */

static int make_fixture(void)
{
    if (fixture_state) return fixture_state;
    snprintf(fixture_dir, sizeof fixture_dir, "/tmp/ms_test_term_XXXXXX");
    if (!mkdtemp(fixture_dir)) return fixture_state = -2;
    int rc = rp_program_db(fixture_dir, fixture_db, sizeof fixture_db);
    return fixture_state = rc == 0 ? 1 : rc == 1 ? -1 : -2;
}

static ms_db *open_fixture(void)
{
    int st = make_fixture();
    if (st == -1) return NULL;
    assert_int_equal(st, 1);
    char err[256];
    ms_db *db = ms_db_open_readonly(fixture_db, err, sizeof err);
    if (!db) fprintf(stderr, "%s\n", err);
    assert_non_null(db);
    return db;
}

static int collect_peak(const ms_device_peak *d, void *ctx)
{
    ms_device_peak *out = ctx;
    if (d->device >= 0 && d->device < 2) out[d->device] = *d;
    return 0;
}

typedef struct { int n, first_step, last_step; double first, last; } loss_span;

static int collect_loss(const ms_step_rec *s, void *ctx)
{
    loss_span *l = ctx;
    if (l->n++ == 0) { l->first = s->loss; l->first_step = s->step; }
    l->last = s->loss;
    l->last_step = s->step;
    return 0;
}

static void test_program_doctor_run(void **state)
{
    (void)state;
    ms_db *db = open_fixture();
    if (!db) skip();
    ms_profile p;
    char err[256], want[512], b1[32], b2[32], b3[32];
    assert_int_equal(ms_db_load_profile(db, 2, &p, err, sizeof err), 0);
    assert_true(p.oom.happened && p.oom.layer >= 1 && p.oom.layer <= 6);
    ms_device_peak dp[2];
    memset(dp, 0, sizeof dp);
    assert_int_equal(ms_db_list_device_peaks(db, 3, collect_peak, dp), 0);
    loss_span ls = { 0 };
    assert_int_equal(ms_db_list_steps(db, 3, collect_loss, &ls), 0);
    assert_int_equal(ls.n, 6);

    /* --brief leads with the answer, in the program's words, then the runs */
    capture c;
    cap_open(&c);
    assert_int_equal(ms_term_report_run_brief(c.f, db, 1, 80), 0);
    cap_close(&c);
    assert_lines_fit(c.text, 80);
    char *sq = squashed(c.text);
    assert_has(sq, "program models.py: 8 layers in its own module paths (segment1, transformers.0-5, segment2); "
                   "bf16 under autocast (fp32 master weights); batch 4;");
    char step[24] = "";      /* the step it happened in, when the trial recorded it */
    if (p.oom.step > 0) snprintf(step, sizeof step, ", step %d", p.oom.step);
    snprintf(want, sizeof want, "overflow OUT OF MEMORY in the forward pass of %s (layer %d%s): requested %s",
             p.oom.layer_name, p.oom.layer, step, "");
    want[strlen(want) - 1] = '\0';
    assert_has(sq, want);
    assert_has(sq, "placement segment1, transformers.0-");
    assert_has(sq, "-> device 0, cpu (");
    assert_has(sq, "-> device 1, cpu (");
    for (int d = 0; d < 2; d++) {
        assert_true(dp[d].predicted_peak > 0);
        snprintf(want, sizeof want, "%d cpu %s %s %s %+.2f%%", d, ms_term_bytes(dp[d].capacity, b1, sizeof b1),
                 ms_term_bytes(dp[d].predicted_peak, b2, sizeof b2), ms_term_bytes(dp[d].measured_peak, b3, sizeof b3),
                 100.0 * ((double)dp[d].measured_peak - (double)dp[d].predicted_peak) / (double)dp[d].predicted_peak);
        assert_has(sq, want);
    }
    snprintf(want, sizeof want, "loss %.4f at step %d -> %.4f at step %d (6 steps,", ls.first, ls.first_step, ls.last,
             ls.last_step);
    assert_has(sq, want);
    assert_true(strstr(c.text, "overflow") < strstr(c.text, "-- run 2"));
    assert_null(strstr(c.text, "0 tokens/s"));
    assert_null(strstr(c.text, "d_model 0"));
    free(sq);
    free(c.text);

    /* the whole report: devices with capacities, no raw JSON, names whole,
     * the master weights as master, no throughput that was not measured */
    cap_open(&c);
    assert_int_equal(ms_term_report_run(c.f, db, 1, 80), 0);
    cap_close(&c);
    assert_lines_fit(c.text, 80);
    sq = squashed(c.text);
    snprintf(want, sizeof want, "devices cpu (%s), cpu (%s) (as run 3, train, recorded them)",
             ms_term_bytes(dp[0].capacity, b1, sizeof b1), ms_term_bytes(dp[1].capacity, b2, sizeof b2));
    assert_has(sq, want);
    snprintf(want, sizeof want, "devices cpu (%s) command", ms_term_bytes(p.capacity, b1, sizeof b1));
    assert_has(sq, want);
    assert_null(strstr(c.text, "capacity_bytes"));
    assert_null(strstr(c.text, "[{"));
    assert_has(sq, "Profile of models.py: 8 layers in its own module paths");
    assert_null(strstr(c.text, "d_model 0"));
    for (int l = 1; l <= 6; l++) {
        snprintf(want, sizeof want, "\n%3d transformers.%d ", l, l - 1);
        assert_has(c.text, want);
    }
    assert_null(strstr(c.text, "~"));
    snprintf(want, sizeof want, " master %s ", ms_term_bytes(p.oom.live_by_cat[MS_CAT_MASTER], b1, sizeof b1));
    assert_true(p.oom.live_by_cat[MS_CAT_MASTER] > 0);
    assert_has(sq, want);
    const char *top = strstr(c.text, "Layers holding the most");
    assert_non_null(top);
    assert_has(top, "  transformers.");
    assert_has(sq, "tokens/s not measured");
    assert_null(strstr(c.text, "0 tokens/s"));
    free(sq);
    free(c.text);
    ms_profile_free(&p);
    ms_db_close(db);
}

static int remove_fixture(void **state)
{
    (void)state;
    if (fixture_state == 1 || fixture_state == -2) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", fixture_dir);
        if (fixture_dir[0] && system(cmd) != 0) return -1;
    }
    return 0;
}

int main(void)
{
    rp_test_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_short),
        cmocka_unit_test(test_bytes_sentence),
        cmocka_unit_test(test_profile_that_fits),
        cmocka_unit_test(test_profile_with_oom),
        cmocka_unit_test(test_oom_just_over_in_the_optimizer),
        cmocka_unit_test(test_oom_outside_a_layer_without_shortfall),
        cmocka_unit_test(test_oom_bytes_not_known),
        cmocka_unit_test(test_wide_profiles_fit),
        cmocka_unit_test(test_wrap_keeps_words_and_width),
        cmocka_unit_test(test_long_names),
        cmocka_unit_test(test_cut_keeps_characters),
        cmocka_unit_test(test_program_doctor_run),
    };
    return cmocka_run_group_tests(tests, NULL, remove_fixture);
}
