/* test_html_report.c — the HTML report (reports/html_report.h) from a
 * database built through reports/db.h: a doctor run holding a trial that ran
 * out of memory (profile, allocator events, plus CUPTI events that must not
 * be mixed in), a plan, per-device peaks, training steps and a recovery.
 *
 * Checks: the page fetches nothing (no http(s) reference but the SVG
 * namespace, only known tags, no event-handler attributes, links only within
 * the page); every string from the database is escaped; and the numbers the
 * tables show (read back from their data-v cells, and the exact bytes
 * printed beside each human form) equal what went into the database, or
 * what replaying the events must give. Then the plain cases (no plan, no
 * training), many events (thinned chart, exact table), garbage events, and
 * writing to a file. Random inputs, seeded ($MS_TEST_SEED replays). Last, a
 * real doctor run of a program under bf16 autocast
 * (tests/browser/program_db.sh): its answer at the top in module paths,
 * every chart's categories the profile's (fp32 master weights as master),
 * devices with capacities, nothing shown that was not measured; and an
 * older database whose events lack those categories, said so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reports/db.h"
#include "reports/html_report.h"
#include "reports/term_report.h"
#include "tests/common/reports_util.h"

#define EVIL_MODEL "<script>alert('x')</script> & \"q\""
#define EVIL_MODEL_ESC "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
#define EVIL_LAYER "blk<1>&\"i\""
#define EVIL_LAYER_ESC "blk&lt;1&gt;&amp;&quot;i&quot;"
#define EVIL_REASON "oom on cuda:1 <img src=x onerror=alert(1)>"
#define EVIL_REASON_ESC "oom on cuda:1 &lt;img src=x onerror=alert(1)&gt;"

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ms_test_html_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static ms_db *open_new(const char *name)
{
    char path[400], err[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    ms_db *db = ms_db_open(path, 1, err, sizeof err);
    if (!db) fprintf(stderr, "open: %s\n", err);
    assert_non_null(db);
    return db;
}

/* The page for run, in memory (caller frees). */
static char *render(ms_db *db, int64_t run)
{
    char *text = NULL, err[512] = "";
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    int rc = ms_html_report_run(f, db, run, err, sizeof err);
    if (rc != 0) fprintf(stderr, "html: %s\n", err);
    assert_int_equal(rc, 0);
    fclose(f);
    /* MS_HTML_DUMP=DIR keeps every page rendered, to look at in a browser. */
    static int n_pages;
    const char *dump = getenv("MS_HTML_DUMP");
    if (dump) {
        char path[512];
        snprintf(path, sizeof path, "%s/page-%d.html", dump, n_pages++);
        FILE *out = fopen(path, "w");
        if (out) { fputs(text, out); fclose(out); }
    }
    return text;
}

/* ---- reading the page --------------------------------------------------- */

/* "1.38 MiB": the page's human form of a byte count (ms_term_bytes). */
static const char *h_bytes_for_test(uint64_t v, char *buf32) { return ms_term_bytes(v, buf32, 32); }

/* The table with that id: [*start, *start + *len). */
static const char *table_of(const char *html, const char *id, size_t *len)
{
    char pat[128];
    snprintf(pat, sizeof pat, "<table class=\"t\" id=\"%s\">", id);
    const char *s = strstr(html, pat);
    if (!s) snprintf(pat, sizeof pat, "<table class=\"t kv\" id=\"%s\">", id), s = strstr(html, pat);
    if (!s) fprintf(stderr, "no table %s\n", id);
    assert_non_null(s);
    const char *e = strstr(s, "</table>");
    assert_non_null(e);
    *len = (size_t)(e - s);
    return s;
}

static const char *find_in(const char *s, size_t len, const char *pat)
{
    size_t n = strlen(pat);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(s + i, pat, n) == 0) return s + i;
    return NULL;
}

/* The row of a table whose <tr> carries attr (e.g. data-layer="3"). */
static const char *row_of(const char *tbl, size_t tlen, const char *attr, size_t *rlen)
{
    char pat[96];
    snprintf(pat, sizeof pat, "<tr %s", attr);
    const char *r = find_in(tbl, tlen, pat);
    if (!r) fprintf(stderr, "no row %s\n", attr);
    assert_non_null(r);
    const char *e = find_in(r, tlen - (size_t)(r - tbl), "</tr>");
    assert_non_null(e);
    *rlen = (size_t)(e - r);
    return r;
}

/* The data-v text of the cell with data-k key in [s, s+len); 0 if found. */
static int cell_text(const char *s, size_t len, const char *key, char *out, size_t outlen)
{
    char pat[96];
    snprintf(pat, sizeof pat, "data-k=\"%s\" data-v=\"", key);
    const char *c = find_in(s, len, pat);
    if (!c) return -1;
    c += strlen(pat);
    const char *q = strchr(c, '"');
    assert_non_null(q);
    snprintf(out, outlen, "%.*s", (int)(q - c), c);
    return 0;
}

static void grouped(uint64_t v, char *buf)
{
    char d[32];
    int n = snprintf(d, sizeof d, "%" PRIu64, v), w = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[w++] = ',';
        buf[w++] = d[i];
    }
    buf[w] = '\0';
}

/* A byte cell: its data-v, and the exact bytes it shows must agree. */
static uint64_t cell_bytes(const char *s, size_t len, const char *key)
{
    char v[48];
    if (cell_text(s, len, key, v, sizeof v) != 0) fprintf(stderr, "no cell %s in: %.*s\n", key, (int)len, s);
    assert_int_equal(cell_text(s, len, key, v, sizeof v), 0);
    char *end;
    uint64_t x = strtoull(v, &end, 10);
    assert_true(*end == '\0' && end != v);
    char pat[96], g[40];
    snprintf(pat, sizeof pat, "data-k=\"%s\" data-v=\"%s\">", key, v);
    const char *c = find_in(s, len, pat);
    assert_non_null(c);
    c += strlen(pat);
    if (x == 0) {
        assert_true(strncmp(c, "&ndash;", 7) == 0);
    } else {
        grouped(x, g);
        snprintf(pat, sizeof pat, "<small>%s</small>", g);
        const char *e = strstr(c, "</td>");
        assert_non_null(e);
        assert_non_null(find_in(c, (size_t)(e - c), pat));
        assert_true(strstr(c, " B<small>") || strstr(c, "iB<small>"));
    }
    return x;
}

static double cell_double(const char *s, size_t len, const char *key)
{
    char v[64];
    assert_int_equal(cell_text(s, len, key, v, sizeof v), 0);
    return strtod(v, NULL);
}

static uint64_t row_bytes(const char *html, const char *table, const char *attr, const char *key)
{
    size_t tl, rl;
    const char *t = table_of(html, table, &tl);
    const char *r = row_of(t, tl, attr, &rl);
    return cell_bytes(r, rl, key);
}

/* ---- what a self-contained page may hold -------------------------------- */

static const char *const ALLOWED_TAGS[] = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "footer", "nav", "section", "article",
    "h1", "h2", "h3", "h4", "p", "b", "i", "code", "small", "span", "div", "ul", "li", "dl", "dt", "dd", "a",
    "table", "caption", "thead", "tbody", "tr", "th", "td", "figure", "figcaption", "details", "summary",
    "svg", "desc", "defs", "pattern", "g", "rect", "line", "path", "circle", "text", NULL,
};

static int count_of(const char *s, const char *pat)
{
    int n = 0;
    for (const char *p = strstr(s, pat); p; p = strstr(p + 1, pat)) n++;
    return n;
}

static void assert_self_contained(const char *html)
{
    /* No reference leaves the page: the only URL (of any scheme) is the SVG
     * namespace, and nothing is protocol-relative. */
    for (const char *p = strstr(html, "://"); p; p = strstr(p + 1, "://")) {
        int ok = p - html >= 11 && strncmp(p - 11, "xmlns=\"http://www.w3.org/2000/svg\"", 34) == 0;
        if (!ok) fprintf(stderr, "reference: %.60s\n", p - 8);
        assert_true(ok);
    }
    assert_null(strstr(html, "https:"));
    assert_null(strstr(html, "=\"//"));
    assert_null(strstr(html, "(//"));
    assert_null(strstr(html, "@import"));
    assert_null(strstr(html, "@font-face"));
    for (const char *p = strstr(html, "url("); p; p = strstr(p + 1, "url(")) assert_true(p[4] == '#');
    for (const char *p = strstr(html, "href=\""); p; p = strstr(p + 1, "href=\"")) assert_true(p[6] == '#');
    /* Only known tags, no script, no event handlers, no src. */
    for (const char *p = strchr(html, '<'); p; p = strchr(p + 1, '<')) {
        if (p[1] == '/' || p[1] == '!') continue;
        char name[16];
        int n = 0;
        while (n < 15 && (isalnum((unsigned char)p[1 + n]))) { name[n] = (char)tolower((unsigned char)p[1 + n]); n++; }
        name[n] = '\0';
        int known = 0;
        for (int k = 0; ALLOWED_TAGS[k] && !known; k++) known = strcmp(name, ALLOWED_TAGS[k]) == 0;
        if (!known) fprintf(stderr, "tag: %.40s\n", p);
        assert_true(known);
        const char *end = strchr(p, '>');
        assert_non_null(end);
        for (const char *a = p; a < end; a++) {
            if (!isspace((unsigned char)a[0])) continue;
            assert_false(strncasecmp(a + 1, "on", 2) == 0 && isalpha((unsigned char)a[3]));
            assert_false(strncasecmp(a + 1, "src=", 4) == 0);
        }
    }
    assert_null(strcasestr(html, "<script"));
    /* Balanced structure. */
    static const char *const pairs[][2] = {
        { "<table", "</table>" }, { "<tr", "</tr>" }, { "<svg", "</svg>" }, { "<figure", "</figure>" },
        { "<section", "</section>" }, { "<article", "</article>" }, { "<text", "</text>" }, { "<title", "</title>" },
    };
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
        assert_int_equal(count_of(html, pairs[k][0]), count_of(html, pairs[k][1]));
    /* Ids are unique (tables and charts are found by them). */
    const char *ids[512];
    size_t id_len[512];
    int n_ids = 0;
    for (const char *p = strstr(html, " id=\""); p; p = strstr(p + 1, " id=\"")) {
        const char *v = p + 5, *q = strchr(v, '"');
        assert_non_null(q);
        for (int k = 0; k < n_ids; k++)
            if (id_len[k] == (size_t)(q - v) && memcmp(ids[k], v, id_len[k]) == 0) {
                fprintf(stderr, "duplicate id %.*s\n", (int)(q - v), v);
                fail();
            }
        if (n_ids < 512) { ids[n_ids] = v; id_len[n_ids++] = (size_t)(q - v); }
    }
    assert_non_null(strstr(html, "prefers-color-scheme:dark"));
    assert_non_null(strstr(html, "@media print"));
    assert_non_null(strstr(html, "</html>\n"));
}

/* ---- the scenario ---------------------------------------------------------- */

#define N_BLOCKS 8
#define N_LAYERS (N_BLOCKS + 2)
#define OOM_LAYER 6
#define N_STEPS 40
#define N_DEV 2

typedef struct {
    ms_db *db;
    int64_t doctor, trial, plan_run, train, plan_id;
    ms_profile p;
    uint64_t param[N_LAYERS], act[N_LAYERS], scratch[N_LAYERS], requested;
    ms_device_peak dp[N_DEV];
    ms_step_rec steps[N_STEPS];
    uint64_t stage_bytes[2][MS_CAT_N];
    uint64_t stage_cap[2];
} scenario;

static uint64_t around(rp_rng *r, uint64_t typical) { return typical / 2 + rp_below(r, typical) + 1; }

static void add_events(scenario *s, rp_rng *r)
{
    ms_mem_event ev[4 * N_LAYERS + 8];
    int n = 0;
    int64_t t = 0;
    uint64_t addr = 0x7f0000000000ull;
#define EV(kind_, layer_, phase_, cat_, bytes_, address_, what_)                                               \
    do {                                                                                                       \
        memset(&ev[n], 0, sizeof ev[n]);                                                                       \
        t += 1 + (int64_t)rp_below(r, 900);                                                                    \
        ev[n] = (ms_mem_event){ .t_us = t, .device = 0, .kind = (kind_), .layer = (layer_), .phase = (phase_), \
                                .category = (cat_), .bytes = (bytes_), .address = (address_),                  \
                                .source = MS_EV_SRC_ALLOCATOR };                                               \
        snprintf(ev[n].what, sizeof ev[n].what, "%s", what_);                                                  \
        n++;                                                                                                   \
    } while (0)
    for (int l = 0; l < N_LAYERS; l++) EV(MS_EV_ALLOC, l, MS_PH_INIT, MS_CAT_PARAM, s->param[l], addr + 0x1000000ull * l, "weights");
    for (int l = 0; l < OOM_LAYER; l++) {
        uint64_t a_act = addr + 0x100000000ull + 0x1000000ull * l, a_tmp = addr + 0x200000000ull;
        EV(MS_EV_ALLOC, l, MS_PH_FORWARD, MS_CAT_ACT, s->act[l], a_act, "saved");
        EV(MS_EV_ALLOC, l, MS_PH_FORWARD, MS_CAT_TRANSIENT, s->scratch[l], a_tmp, "scratch");
        /* A free that names neither category nor size: both from its address. */
        EV(MS_EV_FREE, l, MS_PH_FORWARD, -1, 0, a_tmp, "");
    }
    EV(MS_EV_FAIL, OOM_LAYER, MS_PH_FORWARD, MS_CAT_ACT, s->requested, 0, "saved");
#undef EV
    assert_int_equal(ms_db_add_mem_events(s->db, s->trial, ev, n), 0);
    /* What CUPTI saw: another ledger, which must not be added in. */
    ms_mem_event cupti[3];
    for (int i = 0; i < 3; i++)
        cupti[i] = (ms_mem_event){ .t_us = 5 + i, .device = 0, .kind = MS_EV_ALLOC, .layer = 1, .phase = MS_PH_FORWARD,
                                   .category = -1, .bytes = 1ull << 40, .address = 99 + (uint64_t)i,
                                   .source = MS_EV_SRC_CUPTI_ACTIVITY };
    assert_int_equal(ms_db_add_mem_events(s->db, s->trial, cupti, 3), 0);
}

static void add_plan(scenario *s, rp_rng *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "version", json_integer(1));
    json_t *devs = json_array(), *stages = json_array();
    for (int d = 0; d < 2; d++) {
        s->stage_cap[d] = around(r, 40ull << 30);
        json_t *o = json_object();
        json_object_set_new(o, "index", json_integer(d));
        char name[24];
        snprintf(name, sizeof name, "cuda:%d", d);
        json_object_set_new(o, "device", json_string(name));
        json_object_set_new(o, "capacity_bytes", json_integer((json_int_t)s->stage_cap[d]));
        json_array_append_new(devs, o);
        json_t *st = json_object(), *by = json_object();
        json_object_set_new(st, "device", json_integer(d));
        json_t *ly = json_array();
        json_array_append_new(ly, json_integer(d == 0 ? 0 : 5));
        json_array_append_new(ly, json_integer(d == 0 ? 4 : N_LAYERS - 1));
        json_object_set_new(st, "layers", ly);
        json_object_set_new(st, "recompute", json_boolean(d == 1));
        uint64_t sum = 0;
        for (int c = 0; c < MS_CAT_N; c++) {
            s->stage_bytes[d][c] = c == MS_CAT_COMM ? 0 : around(r, 2ull << 30);
            sum += s->stage_bytes[d][c];
            json_object_set_new(by, ms_cat_name((ms_cat)c), json_integer((json_int_t)s->stage_bytes[d][c]));
        }
        json_object_set_new(st, "bytes", by);
        json_object_set_new(st, "predicted_peak_bytes", json_integer((json_int_t)sum));
        json_object_set_new(st, "fwd_ms", json_real(rp_unit(r) * 20));
        json_object_set_new(st, "bwd_ms", json_real(rp_unit(r) * 40));
        json_array_append_new(stages, st);
    }
    json_object_set_new(j, "devices", devs);
    json_object_set_new(j, "stages", stages);
    json_object_set_new(j, "precision", json_string("bf16"));
    json_object_set_new(j, "schedule", json_string("1f1b"));
    json_object_set_new(j, "micro_batch", json_integer(4));
    json_object_set_new(j, "n_micro", json_integer(8));
    json_object_set_new(j, "reasoning", json_string("Stage 1 <b>fits</b> & recomputes."));
    char *text = json_dumps(j, 0);
    s->plan_id = ms_db_add_plan(s->db, s->plan_run, text, 123.5, 1);
    assert_true(s->plan_id > 0);
    free(text);
    json_decref(j);
}

static void build(scenario *s, rp_rng *r, const char *file)
{
    memset(s, 0, sizeof *s);
    s->db = open_new(file);
    s->doctor = ms_db_run_begin(s->db, "doctor", "memsplit doctor --preset x <&>", NULL, "[{\"name\":\"cuda:0\"}]",
                                EVIL_MODEL, 0);
    s->trial = ms_db_run_begin(s->db, "profile", NULL, NULL, NULL, EVIL_MODEL, s->doctor);
    s->plan_run = ms_db_run_begin(s->db, "plan", NULL, NULL, NULL, EVIL_MODEL, s->doctor);
    s->train = ms_db_run_begin(s->db, "train", NULL, NULL, NULL, EVIL_MODEL, s->doctor);
    assert_true(s->doctor > 0 && s->trial > 0 && s->plan_run > 0 && s->train > 0);

    /* The trial: a profile (rows at two precisions and two micro-batch sizes;
     * the first are the trial's own) and events consistent with an OOM. */
    for (int l = 0; l < N_LAYERS; l++) {
        s->param[l] = around(r, 3ull << 20);
        s->act[l] = around(r, 9ull << 20);
        s->scratch[l] = around(r, 5ull << 20);
    }
    s->requested = around(r, 9ull << 20);
    rp_profile_spec spec = { .n_blocks = N_BLOCKS, .n_prec = 2, .n_mb = 2, .isolated_from = OOM_LAYER, .oom = 1,
                             .oom_layer = OOM_LAYER, .capacity = around(r, 80ull << 20), .requested = s->requested,
                             .missing = around(r, 1ull << 20), .scale = 4ull << 20 };
    assert_int_equal(rp_make_profile(&s->p, &spec, r), 0);
    snprintf(s->p.model, sizeof s->p.model, "%s", EVIL_MODEL);
    for (int i = 0; i < s->p.n_rows; i++)
        if (s->p.rows[i].layer == 1) snprintf(s->p.rows[i].name, sizeof s->p.rows[i].name, "%s", EVIL_LAYER);
    assert_int_equal(ms_db_add_rows(s->db, s->trial, &s->p), 0);
    add_events(s, r);
    assert_int_equal(ms_db_run_finish(s->db, s->trial, "oom"), 0);

    add_plan(s, r);
    assert_int_equal(ms_db_run_finish(s->db, s->plan_run, "ok"), 0);

    /* Training: per-device peaks, steps (some skipped), one recovery. */
    for (int d = 0; d < N_DEV; d++) {
        ms_device_peak *dp = &s->dp[d];
        dp->device = d;
        snprintf(dp->name, sizeof dp->name, "cuda:%d", d);
        dp->capacity = s->stage_cap[d];
        for (int c = 0; c < MS_CAT_N; c++) {
            dp->predicted_by_cat[c] = s->stage_bytes[d][c];
            dp->measured_by_cat[c] = c == MS_CAT_COMM ? 0 : around(r, 2ull << 30);
            dp->predicted_peak += dp->predicted_by_cat[c];
            dp->measured_peak += dp->measured_by_cat[c];
        }
        assert_int_equal(ms_db_add_device_peak(s->db, s->train, dp), 0);
    }
    double loss = 5.5 + rp_unit(r);
    for (int i = 0; i < N_STEPS; i++) {
        loss *= 0.97 + 0.02 * rp_unit(r);
        s->steps[i] = (ms_step_rec){ .step = i + 1, .loss = loss, .ms = 50 + 10 * rp_unit(r),
                                     .tokens_per_s = 9000 + 2000 * rp_unit(r), .lr = 3e-4 * rp_unit(r),
                                     .loss_scale = 65536, .skipped = rp_below(r, 8) == 0, .peaks_json = NULL };
        assert_int_equal(ms_db_add_step(s->db, s->train, &s->steps[i]), 0);
    }
    ms_recovery_rec rec = { .step = 17, .resumed_step = 15, .old_plan_id = s->plan_id, .new_plan_id = s->plan_id };
    snprintf(rec.reason, sizeof rec.reason, "%s", EVIL_REASON);
    snprintf(rec.checkpoint, sizeof rec.checkpoint, "/tmp/ck/step-00000015.ckpt");
    assert_true(ms_db_add_recovery(s->db, s->train, &rec) > 0);
    /* A failure after the last recorded step (the run was killed then). */
    rec.step = N_STEPS + 3;
    rec.resumed_step = -1;
    assert_true(ms_db_add_recovery(s->db, s->train, &rec) > 0);
    assert_int_equal(ms_db_run_finish(s->db, s->train, "ok"), 0);
    assert_int_equal(ms_db_run_finish(s->db, s->doctor, "ok"), 0);
}

static void destroy(scenario *s)
{
    ms_profile_free(&s->p);
    ms_db_close(s->db);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_full_report(void **state)
{
    (void)state;
    rp_rng r;
    rp_seed(&r, rp_test_seed());
    scenario s;
    build(&s, &r, "full.db");
    char *html = render(s.db, s.doctor);
    assert_self_contained(html);
    char id[64], attr[48];

    /* Escaping. */
    assert_non_null(strstr(html, EVIL_MODEL_ESC));
    assert_non_null(strstr(html, EVIL_LAYER_ESC));
    assert_non_null(strstr(html, EVIL_REASON_ESC));
    assert_non_null(strstr(html, "Stage 1 &lt;b&gt;fits&lt;/b&gt; &amp; recomputes."));
    assert_null(strstr(html, "<script>alert"));
    assert_null(strstr(html, "<img"));

    /* The trial's facts and the diagnosis. */
    char pat[96];
    snprintf(pat, sizeof pat, "data-k=\"capacity\" data-v=\"%" PRIu64 "\"", s.p.capacity);
    assert_non_null(strstr(html, pat));
    snprintf(pat, sizeof pat, "data-k=\"peak\" data-v=\"%" PRIu64 "\"", s.p.peak);
    assert_non_null(strstr(html, pat));
    size_t tl;
    snprintf(id, sizeof id, "t-oom-%" PRId64, s.trial);
    const char *t = table_of(html, id, &tl);
    char v[64];
    assert_int_equal(cell_text(t, tl, "layer", v, sizeof v), 0);
    assert_int_equal(atoi(v), OOM_LAYER);
    assert_int_equal(cell_bytes(t, tl, "requested"), s.requested);
    assert_int_equal(cell_bytes(t, tl, "capacity"), s.p.oom.capacity);
    uint64_t live = 0;
    for (int c = 0; c < MS_CAT_N; c++) {
        live += s.p.oom.live_by_cat[c];
        char key[32];
        snprintf(key, sizeof key, "live-%s", ms_cat_name((ms_cat)c));
        if (s.p.oom.live_by_cat[c]) assert_int_equal(cell_bytes(t, tl, key), s.p.oom.live_by_cat[c]);
    }
    assert_int_equal(cell_bytes(t, tl, "live"), live);
    assert_int_equal(cell_bytes(t, tl, "missing"), live + s.requested - s.p.oom.capacity);

    /* The profile's rows at the trial's own setting (the first rows). */
    snprintf(id, sizeof id, "t-rows-%" PRId64, s.trial);
    for (int l = 0; l < N_LAYERS; l++) {
        const ms_layer_row *row = &s.p.rows[l];   /* the first N_LAYERS rows: fp32, micro-batch 4 */
        assert_int_equal(row->layer, l);
        snprintf(attr, sizeof attr, "data-layer=\"%d\"", l);
        assert_int_equal(row_bytes(html, id, attr, "param"), row->param);
        assert_int_equal(row_bytes(html, id, attr, "grad"), row->grad);
        assert_int_equal(row_bytes(html, id, attr, "optim"), row->optim);
        assert_int_equal(row_bytes(html, id, attr, "act"), row->act);
        assert_int_equal(row_bytes(html, id, attr, "transient_fwd"), row->transient_fwd);
        assert_int_equal(row_bytes(html, id, attr, "transient_bwd"), row->transient_bwd);
        assert_int_equal(row_bytes(html, id, attr, "held"), s.p.oom.live_by_layer[l]);
        size_t rl;
        const char *tt = table_of(html, id, &tl);
        const char *rr = row_of(tt, tl, attr, &rl);
        assert_true(cell_double(rr, rl, "fwd_ms") == row->fwd_ms);
    }
    /* The other settings, each in its own table. */
    snprintf(id, sizeof id, "t-rows-%" PRId64 "-fp32-8", s.trial);
    assert_int_equal(row_bytes(html, id, "data-layer=\"3\"", "act"), s.p.rows[N_LAYERS + 3].act);
    snprintf(id, sizeof id, "t-rows-%" PRId64 "-bf16-4", s.trial);
    assert_int_equal(row_bytes(html, id, "data-layer=\"2\"", "param"), s.p.rows[2 * N_LAYERS + 2].param);

    /* (a): live by category at each layer's fullest moment, from the
     * allocator's events only. */
    uint64_t P = 0, A = 0;
    for (int l = 0; l < N_LAYERS; l++) P += s.param[l];
    snprintf(id, sizeof id, "t-a-%" PRId64, s.trial);
    uint64_t peak_total = 0, peak_act = 0, peak_tr = 0, max_scratch = 0;
    for (int l = 0; l < OOM_LAYER; l++) {
        A += s.act[l];
        snprintf(attr, sizeof attr, "data-layer=\"%d\"", l);
        assert_int_equal(row_bytes(html, id, attr, "param"), P);
        assert_int_equal(row_bytes(html, id, attr, "act"), A);
        assert_int_equal(row_bytes(html, id, attr, "transient"), s.scratch[l]);
        assert_int_equal(row_bytes(html, id, attr, "total"), P + A + s.scratch[l]);
        if (P + A + s.scratch[l] > peak_total) { peak_total = P + A + s.scratch[l]; peak_act = A; peak_tr = s.scratch[l]; }
        if (s.scratch[l] > max_scratch) max_scratch = s.scratch[l];
    }
    snprintf(attr, sizeof attr, "data-layer=\"%d\"", OOM_LAYER);
    assert_int_equal(row_bytes(html, id, attr, "act"), A);
    assert_int_equal(row_bytes(html, id, attr, "transient"), 0);
    assert_int_equal(row_bytes(html, id, attr, "refused"), s.requested);
    size_t rl;
    const char *ta = table_of(html, id, &tl);
    snprintf(attr, sizeof attr, "data-layer=\"%d\"", OOM_LAYER + 1);
    const char *ra = row_of(ta, tl, attr, &rl);
    assert_non_null(find_in(ra, rl, "not reached"));

    /* (b): each category's highest, the peak, the OOM moment. */
    snprintf(id, sizeof id, "t-b-%" PRId64 "-0", s.trial);
    assert_int_equal(row_bytes(html, id, "data-cat=\"param\"", "max"), P);
    assert_int_equal(row_bytes(html, id, "data-cat=\"act\"", "max"), A);
    assert_int_equal(row_bytes(html, id, "data-cat=\"transient\"", "max"), max_scratch);
    assert_int_equal(row_bytes(html, id, "data-cat=\"act\"", "at-peak"), peak_act);
    assert_int_equal(row_bytes(html, id, "data-cat=\"transient\"", "at-peak"), peak_tr);
    assert_int_equal(row_bytes(html, id, "data-cat=\"total\"", "at-peak"), peak_total);
    assert_int_equal(row_bytes(html, id, "data-cat=\"act\"", "at-oom"), A);
    assert_int_equal(row_bytes(html, id, "data-cat=\"transient\"", "at-oom"), 0);
    assert_int_equal(row_bytes(html, id, "data-cat=\"total\"", "at-oom"), P + A);
    assert_int_equal(row_bytes(html, id, "data-cat=\"refused\"", "refused"), s.requested);
    /* CUPTI's ledger (bytes of no category) was not mixed in. */
    assert_null(strstr(html, "data-cat=\"unattributed\""));
    assert_null(strstr(html, "class=\"c-unattributed\" x="));

    /* The plan's stages. */
    snprintf(id, sizeof id, "t-plan-%" PRId64, s.plan_id);
    for (int d = 0; d < 2; d++) {
        uint64_t sum = 0;
        snprintf(attr, sizeof attr, "data-stage=\"%d\"", d);
        for (int c = 0; c < MS_CAT_N; c++) sum += s.stage_bytes[d][c];
        assert_int_equal(row_bytes(html, id, attr, "predicted"), sum);
        assert_int_equal(row_bytes(html, id, attr, "capacity"), s.stage_cap[d]);
    }

    /* (c): predicted against measured per device. */
    snprintf(id, sizeof id, "t-c-%" PRId64, s.train);
    for (int d = 0; d < N_DEV; d++) {
        snprintf(attr, sizeof attr, "data-device=\"%d\" data-cat=\"total\"", d);
        assert_int_equal(row_bytes(html, id, attr, "capacity"), s.dp[d].capacity);
        assert_int_equal(row_bytes(html, id, attr, "predicted"), s.dp[d].predicted_peak);
        assert_int_equal(row_bytes(html, id, attr, "measured"), s.dp[d].measured_peak);
        for (int c = 0; c < MS_CAT_N; c++) {
            if (!s.dp[d].predicted_by_cat[c] && !s.dp[d].measured_by_cat[c]) continue;
            snprintf(attr, sizeof attr, "data-device=\"%d\" data-cat=\"%s\"", d, ms_cat_name((ms_cat)c));
            assert_int_equal(row_bytes(html, id, attr, "predicted"), s.dp[d].predicted_by_cat[c]);
            assert_int_equal(row_bytes(html, id, attr, "measured"), s.dp[d].measured_by_cat[c]);
        }
    }

    /* (d): every step's loss, exactly; the recovery. */
    snprintf(id, sizeof id, "t-d-%" PRId64, s.train);
    t = table_of(html, id, &tl);
    for (int i = 0; i < N_STEPS; i++) {
        snprintf(attr, sizeof attr, "data-step=\"%d\"", s.steps[i].step);
        const char *row = row_of(t, tl, attr, &rl);
        assert_true(cell_double(row, rl, "loss") == s.steps[i].loss);
        assert_true(cell_double(row, rl, "tokens_per_s") == s.steps[i].tokens_per_s);
        assert_true(find_in(row, rl, s.steps[i].skipped ? ">skipped<" : ">applied<") != NULL);
    }
    snprintf(id, sizeof id, "t-rec-%" PRId64, s.train);
    t = table_of(html, id, &tl);
    assert_int_equal(cell_text(t, tl, "step", v, sizeof v), 0);
    assert_int_equal(atoi(v), 17);
    assert_int_equal(cell_text(t, tl, "resumed_step", v, sizeof v), 0);
    assert_int_equal(atoi(v), 15);
    snprintf(id, sizeof id, "fig-d-%" PRId64 "-loss", s.train);
    const char *fig = strstr(html, id);
    assert_non_null(fig);
    /* Both recoveries on the plot: within the frame (84 .. 960 - 16). */
    int n_lines = 0;
    for (const char *l = strstr(fig, "<line class=\"oom-line\" x1=\""); l && l < strstr(fig, "</svg>");
         l = strstr(l + 1, "<line class=\"oom-line\" x1=\"")) {
        double x = strtod(l + strlen("<line class=\"oom-line\" x1=\""), NULL);
        assert_true(x >= 84 && x <= 944);
        n_lines++;
    }
    assert_int_equal(n_lines, 2);
    assert_non_null(strstr(html, "OOM at step 43<"));
    assert_non_null(strstr(html, "OOM at step 17, resumed from 15"));

    /* Each chart is there. */
    snprintf(id, sizeof id, "id=\"fig-a-%" PRId64 "\"", s.trial);
    assert_non_null(strstr(html, id));
    snprintf(id, sizeof id, "id=\"fig-b-%" PRId64 "-0\"", s.trial);
    assert_non_null(strstr(html, id));
    snprintf(id, sizeof id, "id=\"fig-c-%" PRId64 "\"", s.train);
    assert_non_null(strstr(html, id));
    snprintf(id, sizeof id, "id=\"fig-c-%" PRId64 "\"", s.plan_run);
    assert_null(strstr(html, id));   /* measured peaks exist: no predictions-only chart */
    assert_null(strstr(html, "Nothing was measured yet"));
    assert_null(strstr(html, "No plan recorded"));
    assert_null(strstr(html, "No training recorded"));

    free(html);
    destroy(&s);
}

static void test_nothing_planned_or_trained(void **state)
{
    (void)state;
    rp_rng r;
    rp_seed(&r, rp_test_seed() + 1);
    scenario s;
    build(&s, &r, "plain.db");
    /* The trial alone: no plan, no training under it. */
    char *html = render(s.db, s.trial);
    assert_self_contained(html);
    assert_non_null(strstr(html, "No plan recorded yet"));
    assert_non_null(strstr(html, "No training recorded"));
    free(html);
    /* The plan alone: a chart of predictions with nothing measured. */
    html = render(s.db, s.plan_run);
    assert_self_contained(html);
    assert_non_null(strstr(html, "No trial recorded"));
    assert_non_null(strstr(html, "Nothing was measured yet"));
    char id[48];
    snprintf(id, sizeof id, "t-c-%" PRId64, s.plan_run);
    for (int d = 0; d < 2; d++) {
        char attr[64];
        uint64_t sum = 0;
        for (int c = 0; c < MS_CAT_N; c++) {
            sum += s.stage_bytes[d][c];
            if (!s.stage_bytes[d][c]) continue;
            snprintf(attr, sizeof attr, "data-device=\"%d\" data-cat=\"%s\"", d, ms_cat_name((ms_cat)c));
            assert_int_equal(row_bytes(html, id, attr, "predicted"), s.stage_bytes[d][c]);
        }
        snprintf(attr, sizeof attr, "data-device=\"%d\" data-cat=\"total\"", d);
        assert_int_equal(row_bytes(html, id, attr, "capacity"), s.stage_cap[d]);
        assert_int_equal(row_bytes(html, id, attr, "predicted"), sum);
    }
    free(html);
    destroy(&s);

    /* A profile that fits, without events: bars from the rows. */
    ms_db *db = open_new("fits.db");
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 3, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .oom = 0, .scale = 1 << 20 };
    assert_int_equal(rp_make_profile(&p, &spec, &r), 0);
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "fits", 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    html = render(db, run);
    assert_self_contained(html);
    assert_non_null(strstr(html, "no memory events were recorded"));
    snprintf(id, sizeof id, "t-a-%" PRId64, run);
    const ms_layer_row *row = &p.rows[2];
    uint64_t tr = row->transient_fwd > row->transient_bwd ? row->transient_fwd : row->transient_bwd;
    assert_int_equal(row_bytes(html, id, "data-layer=\"2\"", "transient"), tr);
    assert_int_equal(row_bytes(html, id, "data-layer=\"2\"", "total"), row->param + row->grad + row->optim + row->act + tr + row->master);
    assert_null(strstr(html, "t-oom-"));
    free(html);
    ms_profile_free(&p);
    ms_db_close(db);
}

/* Thousands of events: the chart is thinned, the table stays exact. */
static void test_many_events(void **state)
{
    (void)state;
    rp_rng r;
    rp_seed(&r, rp_test_seed() + 2);
    ms_db *db = open_new("many.db");
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 4, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .oom = 0, .scale = 1 << 20 };
    assert_int_equal(rp_make_profile(&p, &spec, &r), 0);
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "many", 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    enum { N = 20000 };
    ms_mem_event *ev = calloc(N, sizeof *ev);
    assert_non_null(ev);
    uint64_t live = 0, peak = 0, held[64] = { 0 };
    for (int i = 0; i < N; i++) {
        int slot = (int)rp_below(&r, 64);
        ms_mem_event *e = &ev[i];
        e->t_us = 10 * i + (int64_t)rp_below(&r, 10);
        e->layer = (int)rp_below(&r, 6);
        e->phase = MS_PH_FORWARD;
        e->category = MS_CAT_TRANSIENT;
        e->address = 0x1000 + (uint64_t)slot * 0x100000;
        e->source = MS_EV_SRC_ALLOCATOR;
        if (held[slot]) {
            e->kind = MS_EV_FREE;
            e->bytes = held[slot];
            live -= held[slot];
            held[slot] = 0;
        } else {
            e->kind = MS_EV_ALLOC;
            e->bytes = 1 + rp_below(&r, 1 << 20);
            held[slot] = e->bytes;
            live += e->bytes;
            if (live > peak) peak = live;
        }
    }
    assert_int_equal(ms_db_add_mem_events(db, run, ev, N), 0);
    free(ev);
    char *html = render(db, run);
    assert_self_contained(html);
    assert_true(strlen(html) < 600000);
    char id[48];
    snprintf(id, sizeof id, "t-b-%" PRId64 "-0", run);
    assert_int_equal(row_bytes(html, id, "data-cat=\"transient\"", "max"), peak);
    assert_int_equal(row_bytes(html, id, "data-cat=\"total\"", "at-peak"), peak);
    assert_non_null(strstr(html, "equal slices of time"));
    free(html);
    ms_profile_free(&p);
    ms_db_close(db);
}

/* CUDA refused memory no allocator request asked for (term_report's
 * test_oom_bytes_not_known): the box says the bytes are not known, the
 * table's requested cell too, and no device size follows from them. */
static void test_oom_bytes_not_known(void **state)
{
    (void)state;
    rp_rng r;
    rp_seed(&r, rp_test_seed() + 9);
    ms_db *db = open_new("unknown.db");
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 3, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .oom = 1, .oom_layer = 2,
                             .capacity = 1 << 30, .requested = 1 << 20, .missing = 1 << 10, .scale = 1 << 20 };
    assert_int_equal(rp_make_profile(&p, &spec, &r), 0);
    p.oom.requested = 0;
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "unknown", 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    assert_int_equal(ms_db_run_finish(db, run, "oom"), 0);
    char *html = render(db, run);
    assert_self_contained(html);
    assert_non_null(strstr(html, "the bytes it asked for are not known (CUDA refused memory outside"));
    assert_null(strstr(html, "A device of at least"));
    char id[64];
    snprintf(id, sizeof id, "t-oom-%" PRId64, run);
    size_t tl;
    const char *t = table_of(html, id, &tl);
    assert_non_null(find_in(t, tl, "<td data-k=\"requested\">not known</td>"));
    free(html);
    ms_profile_free(&p);
    ms_db_close(db);
}

/* Events that make no sense must not break the page. */
static void test_garbage_events(void **state)
{
    (void)state;
    rp_rng r;
    rp_seed(&r, rp_test_seed() + 3);
    ms_db *db = open_new("garbage.db");
    ms_profile p;
    rp_profile_spec spec = { .n_blocks = 2, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .oom = 1, .oom_layer = 2,
                             .capacity = 1 << 30, .requested = 1 << 20, .missing = 1 << 10, .scale = 1 << 20 };
    assert_int_equal(rp_make_profile(&p, &spec, &r), 0);
    int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "garbage", 0);
    assert_int_equal(ms_db_add_rows(db, run, &p), 0);
    enum { N = 3000 };
    ms_mem_event *ev = calloc(N, sizeof *ev);
    assert_non_null(ev);
    for (int i = 0; i < N; i++) {
        ms_mem_event *e = &ev[i];
        e->t_us = (int64_t)rp_below(&r, 1000000) - 1000;
        e->device = (int)rp_below(&r, 12);
        e->kind = (int)rp_below(&r, 3);
        e->layer = (int)rp_below(&r, 40) - 1;
        e->phase = (int)rp_below(&r, MS_PH_N + 1) - 1;
        e->category = (int)rp_below(&r, MS_CAT_N + 1) - 1;
        e->bytes = rp_next(&r) >> (int)rp_below(&r, 64);
        e->address = rp_below(&r, 50);
        snprintf(e->what, sizeof e->what, "<x%d>", i);
        e->source = (int)rp_below(&r, 3);
    }
    assert_int_equal(ms_db_add_mem_events(db, run, ev, N), 0);
    free(ev);
    char *html = render(db, run);
    assert_self_contained(html);
    assert_non_null(strstr(html, "beyond the first"));   /* devices past the eighth are said, not drawn */
    free(html);
    ms_profile_free(&p);
    ms_db_close(db);
}

/* A long run: the line is thinned, the table lists a sample that keeps the
 * first and last steps and those around the recovery, and says so. */
static void test_long_training(void **state)
{
    (void)state;
    rp_rng r;
    rp_seed(&r, rp_test_seed() + 5);
    ms_db *db = open_new("long.db");
    int64_t run = ms_db_run_begin(db, "train", NULL, NULL, NULL, "long", 0);
    enum { N = 3000 };
    double loss = 7.0;
    for (int i = 1; i <= N; i++) {
        loss *= 0.9995 + 0.0004 * rp_unit(&r);
        ms_step_rec st = { .step = i, .loss = loss, .ms = 10 + rp_unit(&r), .tokens_per_s = 1000 + 100 * rp_unit(&r),
                           .lr = 1e-3 };
        assert_int_equal(ms_db_add_step(db, run, &st), 0);
    }
    ms_recovery_rec rec = { .step = 1777, .resumed_step = 1750 };
    snprintf(rec.reason, sizeof rec.reason, "oom on cuda:0");
    assert_true(ms_db_add_recovery(db, run, &rec) > 0);
    char *html = render(db, run);
    assert_self_contained(html);
    char id[48];
    snprintf(id, sizeof id, "t-d-%" PRId64, run);
    size_t tl, rl;
    const char *t = table_of(html, id, &tl);
    int rows = 0;
    for (const char *p = find_in(t, tl, "<tr data-step="); p && p < t + tl; p = strstr(p + 1, "<tr data-step=")) rows++;
    assert_true(rows >= 150 && rows <= 230);
    static const int must[] = { 1, N, 1776, 1777, 1778, 1750 };
    for (size_t k = 0; k < sizeof must / sizeof must[0]; k++) {
        char attr[32];
        snprintf(attr, sizeof attr, "data-step=\"%d\"", must[k]);
        row_of(t, tl, attr, &rl);
    }
    assert_non_null(strstr(html, "of 3000 steps listed"));
    /* The loss line: at most two points per slice of steps. */
    snprintf(id, sizeof id, "id=\"fig-d-%" PRId64 "-loss-t\"", run);
    const char *fig = strstr(html, id);
    assert_non_null(fig);
    const char *path = strstr(fig, "<path class=\"line\" d=\"");
    assert_non_null(path);
    const char *end = strchr(path + 25, '"');
    int points = 0;
    for (const char *c = path + 25; c < end; c++) points += *c == 'L' || *c == 'M';
    assert_true(points > 100 && points <= 1300);
    free(html);
    ms_db_close(db);
}

static void test_write_file(void **state)
{
    (void)state;
    rp_rng r;
    rp_seed(&r, rp_test_seed() + 4);
    scenario s;
    build(&s, &r, "file.db");
    char path[400], err[512];
    snprintf(path, sizeof path, "%s/report.html", tmpdir);
    assert_int_equal(ms_html_report_write(path, s.db, s.doctor, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > 10000);
    /* A folder that does not exist: an error, nothing left behind. */
    snprintf(path, sizeof path, "%s/none/report.html", tmpdir);
    err[0] = '\0';
    assert_int_equal(ms_html_report_write(path, s.db, s.doctor, err, sizeof err), -1);
    assert_true(strlen(err) > 0);
    /* A run that is not there. */
    snprintf(path, sizeof path, "%s/absent.html", tmpdir);
    err[0] = '\0';
    assert_int_equal(ms_html_report_write(path, s.db, 9999, err, sizeof err), -1);
    assert_non_null(strstr(err, "9999"));
    assert_int_not_equal(access(path, F_OK), 0);
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) assert_null(strstr(e->d_name, "absent.html.tmp"));
    closedir(d);
    /* A symlink planted at the temporary names a writer could predict (the
     * old "<page>.tmp.<pid>", "<page>.tmp"): never followed; its target is
     * left as it was and the page is written where it was asked to be. */
    char victim[420], planted[480];
    snprintf(path, sizeof path, "%s/planted.html", tmpdir);
    snprintf(victim, sizeof victim, "%s/victim.txt", tmpdir);
    FILE *v = fopen(victim, "w");
    assert_non_null(v);
    fputs("mine\n", v);
    fclose(v);
    snprintf(planted, sizeof planted, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(symlink(victim, planted), 0);
    snprintf(planted, sizeof planted, "%s.tmp", path);
    assert_int_equal(symlink(victim, planted), 0);
    assert_int_equal(ms_html_report_write(path, s.db, s.doctor, err, sizeof err), 0);
    assert_int_equal(stat(victim, &st), 0);
    assert_int_equal((int)st.st_size, 5);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode) && st.st_size > 10000);
    destroy(&s);
}

/* ---- a program's doctor run, recorded for real -------------------------------- */

static int collect_peak(const ms_device_peak *d, void *ctx)
{
    ms_device_peak *out = ctx;
    if (d->device >= 0 && d->device < 2) out[d->device] = *d;
    return 0;
}

typedef struct { int n; double first, last; } loss_span;

static int collect_loss(const ms_step_rec *st, void *ctx)
{
    loss_span *l = ctx;
    if (l->n++ == 0) l->first = st->loss;
    l->last = st->loss;
    return 0;
}

/* The text between the first pat and the next end, in html (NULL: none). */
static const char *part(const char *html, const char *pat, const char *end, size_t *len)
{
    const char *s = strstr(html, pat);
    if (!s) fprintf(stderr, "not in the page: %s\n", pat);
    assert_non_null(s);
    const char *e = strstr(s, end);
    assert_non_null(e);
    *len = (size_t)(e - s);
    return s;
}

static void test_program_doctor_page(void **state)
{
    (void)state;
    char path[400], err[512], id[64], attr[96], want[512], b1[32], b2[32], v[64];
    int rc = rp_program_db(tmpdir, path, sizeof path);
    if (rc == 1) skip();
    assert_int_equal(rc, 0);
    ms_db *db = ms_db_open_readonly(path, err, sizeof err);
    assert_non_null(db);
    ms_profile p;   /* run 1 the doctor, 2 its trial, 3 the training */
    assert_int_equal(ms_db_load_profile(db, 2, &p, err, sizeof err), 0);
    assert_true(p.oom.happened && p.oom.live_by_cat[MS_CAT_MASTER] > 0);
    ms_device_peak dp[2];
    memset(dp, 0, sizeof dp);
    assert_int_equal(ms_db_list_device_peaks(db, 3, collect_peak, dp), 0);
    loss_span ls = { 0 };
    assert_int_equal(ms_db_list_steps(db, 3, collect_loss, &ls), 0);
    char *html = render(db, 1);
    assert_self_contained(html);
    size_t tl, rl, al;

    /* 4. The answer comes first: the module that overflowed, the placement
     * in module paths, measured against predicted per device, the losses. */
    const char *ans = part(html, "<section id=\"answer\"", "</section>", &al);
    assert_true(ans < strstr(html, "<section id=\"trial\""));
    char step[24] = "";      /* the step it happened in, when the trial recorded it */
    if (p.oom.step > 0) snprintf(step, sizeof step, ", step %d", p.oom.step);
    snprintf(want, sizeof want, "OUT OF MEMORY in the forward pass of %s (layer %d%s)", p.oom.layer_name, p.oom.layer,
             step);
    assert_non_null(find_in(ans, al, want));
    const char *t = table_of(html, "t-place-1", &tl);
    const char *r = row_of(t, tl, "data-stage=\"0\"", &rl);
    assert_non_null(find_in(r, rl, "<td data-k=\"modules\" class=\"wrap\">segment1, transformers.0-"));
    assert_int_equal(cell_bytes(r, rl, "capacity"), dp[0].capacity);
    r = row_of(t, tl, "data-stage=\"1\"", &rl);
    assert_non_null(find_in(r, rl, ", segment2</td>"));
    for (int d = 0; d < 2; d++) {
        snprintf(attr, sizeof attr, "data-device=\"%d\"", d);
        assert_int_equal(row_bytes(html, "t-answer-1", attr, "measured"), dp[d].measured_peak);
        assert_int_equal(row_bytes(html, "t-answer-1", attr, "predicted"), dp[d].predicted_peak);
        assert_int_equal(row_bytes(html, "t-answer-1", attr, "capacity"), dp[d].capacity);
    }
    assert_int_equal(cell_text(ans, al, "loss-first", v, sizeof v), 0);
    assert_true(strtod(v, NULL) == ls.first);
    assert_int_equal(cell_text(ans, al, "loss-last", v, sizeof v), 0);
    assert_true(strtod(v, NULL) == ls.last);

    /* 2. What the program has, in its own words. */
    snprintf(want, sizeof want, "<dt>devices</dt><dd>cpu (%s), cpu (%s) (as run 3, train, recorded them)</dd>",
             h_bytes_for_test(dp[0].capacity, b1), h_bytes_for_test(dp[1].capacity, b2));
    assert_non_null(strstr(html, want));
    assert_non_null(strstr(html, "<dt>program</dt><dd>8 layers in its own module paths (segment1, transformers.0-5, "
                                 "segment2); bf16 under autocast (fp32 master weights); batch 4;"));
    assert_null(strstr(html, "sequence 0"));
    assert_null(strstr(html, "d_model 0"));
    assert_null(strstr(html, "capacity_bytes"));
    assert_non_null(strstr(html, "<td data-k=\"layers\" data-v=\"0-"));
    assert_non_null(strstr(html, ": segment1, transformers.0-"));
    assert_non_null(strstr(html, "cpu (device 1)"));

    /* 1. Every chart and table in the profile's categories: the master
     * weights are master everywhere, as the diagnosis says. */
    t = table_of(html, "t-oom-2", &tl);
    assert_int_equal(cell_bytes(t, tl, "live-master"), p.oom.live_by_cat[MS_CAT_MASTER]);
    size_t fl;
    const char *leg = part(html, "<figure id=\"fig-a-2\">", "<svg", &fl);
    assert_non_null(find_in(leg, fl, "class=\"sw c-master\""));
    snprintf(attr, sizeof attr, "data-layer=\"%d\"", p.oom.layer);
    for (int c = 0; c <= MS_CAT_TRANSIENT; c++) {
        /* the bar of the layer that ran out is the moment it ran out */
        assert_int_equal(row_bytes(html, "t-a-2", attr, ms_cat_name((ms_cat)c)), p.oom.live_by_cat[c]);
        snprintf(id, sizeof id, "data-cat=\"%s\"", ms_cat_name((ms_cat)c));
        if (p.oom.live_by_cat[c]) assert_int_equal(row_bytes(html, "t-b-2-0", id, "at-oom"), p.oom.live_by_cat[c]);
    }
    for (int l = 0; l < p.oom.layer; l++) {   /* the fp32 weights are live from the start, as master */
        snprintf(attr, sizeof attr, "data-layer=\"%d\"", l);
        assert_int_equal(row_bytes(html, "t-a-2", attr, "master"), p.oom.live_by_cat[MS_CAT_MASTER]);
    }
    for (int i = 0; i < p.n_rows; i++) {
        snprintf(attr, sizeof attr, "data-layer=\"%d\"", p.rows[i].layer);
        assert_int_equal(row_bytes(html, "t-rows-2", attr, "master"), p.rows[i].master);
    }
    for (int d = 0; d < 2; d++) {
        snprintf(attr, sizeof attr, "data-device=\"%d\" data-cat=\"master\"", d);
        assert_int_equal(row_bytes(html, "t-c-3", attr, "measured"), dp[d].measured_by_cat[MS_CAT_MASTER]);
        assert_int_equal(row_bytes(html, "t-c-3", attr, "predicted"), dp[d].predicted_by_cat[MS_CAT_MASTER]);
    }
    assert_null(strstr(html, "read as transient"));   /* recorded right: no note of old categories */

    /* Nothing that was not measured: a program's steps count no tokens. */
    assert_non_null(strstr(html, "tokens/s not measured"));
    assert_non_null(strstr(html, "id=\"fig-d-3-ms-t\""));
    assert_null(strstr(html, "id=\"fig-d-3-tps-t\""));
    assert_null(strstr(html, "data-k=\"tokens_per_s\""));
    assert_null(strstr(html, " 0 tokens/s"));
    free(html);
    ms_profile_free(&p);
    ms_db_close(db);
}

/* A database an older memsplit wrote: a program's events under the category
 * each tensor was first seen as (its master weights as transient). (a) then
 * draws the profile's rows and the page says why. */
static void test_stale_categories(void **state)
{
    (void)state;
    rp_rng r;
    rp_seed(&r, rp_test_seed() + 6);
    for (int with_master = 0; with_master < 2; with_master++) {
        ms_db *db = open_new(with_master ? "fresh.db" : "stale.db");
        ms_profile p;
        rp_profile_spec spec = { .n_blocks = 3, .n_prec = 1, .n_mb = 1, .isolated_from = -1, .scale = 1 << 20 };
        assert_int_equal(rp_make_profile(&p, &spec, &r), 0);
        snprintf(p.fingerprint, sizeof p.fingerprint, "fnv64:0123456789abcdef");
        for (int i = 0; i < p.n_rows; i++) {
            p.rows[i].precision = MS_PREC_BF16;
            p.rows[i].master = 2 * p.rows[i].param;
        }
        int64_t run = ms_db_run_begin(db, "profile", NULL, NULL, NULL, "train.py", 0);
        assert_int_equal(ms_db_add_rows(db, run, &p), 0);
        ms_mem_event ev[2 * 5];
        int n = 0;
        for (int l = 0; l < 5; l++) {
            ev[n++] = (ms_mem_event){ .t_us = n, .kind = MS_EV_ALLOC, .layer = l, .phase = MS_PH_FORWARD,
                                      .category = with_master ? MS_CAT_MASTER : MS_CAT_TRANSIENT,
                                      .bytes = p.rows[l].master, .address = 0x1000 + (uint64_t)l * 0x100000,
                                      .source = MS_EV_SRC_ALLOCATOR };
            ev[n++] = (ms_mem_event){ .t_us = n, .kind = MS_EV_ALLOC, .layer = l, .phase = MS_PH_FORWARD,
                                      .category = MS_CAT_ACT, .bytes = p.rows[l].act,
                                      .address = 0x9000000 + (uint64_t)l * 0x100000, .source = MS_EV_SRC_ALLOCATOR };
        }
        assert_int_equal(ms_db_add_mem_events(db, run, ev, n), 0);
        char *html = render(db, run);
        assert_self_contained(html);
        char id[48];
        snprintf(id, sizeof id, "t-a-%" PRId64, run);
        if (with_master) {
            assert_null(strstr(html, "read as transient"));
            assert_int_equal(row_bytes(html, id, "data-layer=\"2\"", "master"),
                             p.rows[0].master + p.rows[1].master + p.rows[2].master);
        } else {
            assert_non_null(strstr(html, "under the category it was first seen as"));
            assert_non_null(strstr(html, "not the events, whose categories are not the profile"));
            assert_int_equal(row_bytes(html, id, "data-layer=\"2\"", "master"), p.rows[2].master);
            assert_int_equal(row_bytes(html, id, "data-layer=\"2\"", "transient"), 0 + (p.rows[2].transient_fwd >
                             p.rows[2].transient_bwd ? p.rows[2].transient_fwd : p.rows[2].transient_bwd));
        }
        free(html);
        ms_profile_free(&p);
        ms_db_close(db);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_report),
        cmocka_unit_test(test_nothing_planned_or_trained),
        cmocka_unit_test(test_many_events),
        cmocka_unit_test(test_garbage_events),
        cmocka_unit_test(test_oom_bytes_not_known),
        cmocka_unit_test(test_long_training),
        cmocka_unit_test(test_write_file),
        cmocka_unit_test(test_stale_categories),
        cmocka_unit_test(test_program_doctor_page),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
