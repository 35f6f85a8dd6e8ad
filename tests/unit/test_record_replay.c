/* test_record_replay.c — a stage's peak from a program's record
 * (planner/record_replay.h): hand-built records with their peaks worked
 * out by hand (a chain with a skip, an elided copy extending its original,
 * chains of elided copies, a copy made because only one end is in the
 * range, storages live before t_from); the fast table of every range
 * against the plain replay on many random records; what ms_record_check
 * refuses; and the sequential search using the record's peaks where the
 * stage rules disagree (test_planner_sequential.c checks that search
 * against a brute force over every split, the record replayed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "planner/memory_model.h"
#include "planner/planner.h"
#include "planner/record_replay.h"
#include "planner/sequential.h"
#include "run/program.h"
#include "tests/common/planner_util.h"
#include "tests/common/record_util.h"
#include "vocab/limits.h"
#include "vocab/plan_json.h"
#include "vocab/profile_json.h"

#define NEVER MS_REC_NEVER

static ms_prog_record *make_record(int n_layers, uint32_t t_from, uint32_t t_end, const ms_rec_storage *s, int n)
{
    ms_prog_record *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->n_layers = n_layers;
    r->t_from = t_from;
    r->t_end = t_end;
    r->n = n;
    if (n) {
        r->s = malloc((size_t)n * sizeof *r->s);
        assert_non_null(r->s);
        memcpy(r->s, s, (size_t)n * sizeof *s);
    }
    return r;
}

/* Both ways of predicting agree on every range; returns the table. */
static uint64_t *table_checked(const ms_prog_record *r)
{
    const int L = r->n_layers;
    char err[256];
    if (ms_record_check(r, err, sizeof err)) fail_msg("not a valid record: %s", err);
    uint64_t *t = malloc((size_t)L * L * sizeof *t);
    assert_non_null(t);
    assert_int_equal(ms_record_range_peaks(r, t), 0);
    for (int a = 0; a < L; a++)
        for (int b = 0; b < L; b++) {
            uint64_t by[MS_CAT_N], sum = 0;
            if (b < a) {
                assert_int_equal(t[a * L + b], 0);
                continue;
            }
            uint64_t pk = ms_record_stage(r, a, b, by);
            for (int c = 0; c < MS_CAT_N; c++) sum += by[c];
            if (pk != t[a * L + b] || sum != pk)
                fail_msg("range [%d, %d]: table %llu, replay %llu, its categories %llu", a, b,
                         (unsigned long long)t[a * L + b], (unsigned long long)pk, (unsigned long long)sum);
        }
    return t;
}

/* Four layers: the root (0) holds the input x; layer 1 gets x copied in and
 * makes h1, which layer 2 reads (copied in) and layer 3 reads too (a skip
 * over layer 2); layer 2 makes h2, copied to layer 3; layer 3 has a large
 * transient. Parameters of every layer live from before t_from. */
static void test_chain_with_skip(void **state)
{
    (void)state;
    const ms_rec_storage s[] = {
        { 0, MS_CAT_PARAM, 1000, 0, NEVER, -1 },
        { 1, MS_CAT_PARAM, 100, 0, NEVER, -1 },
        { 2, MS_CAT_PARAM, 200, 0, NEVER, -1 },
        { 3, MS_CAT_PARAM, 400, 0, NEVER, -1 },
        { 0, MS_CAT_ACT, 10, 1, 20, -1 },        /* 4: x */
        { 1, MS_CAT_COMM, 10, 2, 8, 4 },         /* 5: x on layer 1 */
        { 1, MS_CAT_ACT, 30, 3, 18, -1 },        /* 6: h1 */
        { 2, MS_CAT_COMM, 30, 4, 9, 6 },         /* 7: h1 on layer 2 */
        { 2, MS_CAT_ACT, 50, 5, 15, -1 },        /* 8: h2 */
        { 3, MS_CAT_COMM, 50, 6, 12, 8 },        /* 9: h2 on layer 3 */
        { 3, MS_CAT_COMM, 30, 7, 11, 6 },        /* 10: h1 on layer 3 (the skip) */
        { 3, MS_CAT_TRANSIENT, 500, 8, 10, -1 }, /* 11 */
    };
    ms_prog_record *r = make_record(4, 1, 25, s, (int)(sizeof s / sizeof *s));
    assert_int_equal(ms_record_check(r, NULL, 0), 0);
    uint64_t *t = table_checked(r);
    /* each layer alone: every copy made, as in the record pass */
    assert_int_equal(t[0 * 4 + 0], 1000 + 10);
    assert_int_equal(t[1 * 4 + 1], 100 + 10 + 30);                  /* t 3..7 */
    assert_int_equal(t[2 * 4 + 2], 200 + 30 + 50);                  /* t 5..8 */
    assert_int_equal(t[3 * 4 + 3], 400 + 50 + 30 + 500);            /* t 8 */
    /* [2, 3]: h2's copy is elided (h2 lives to 15 > 12); h1's two copies
     * are made (h1 is on layer 1, outside): at t 8, 600 + 30 + 50 + 30 + 500 */
    assert_int_equal(t[2 * 4 + 3], 600 + 30 + 50 + 30 + 500);
    /* [1, 3]: every copy of h1 and h2 elided, x's copy made ([2, 8)): t 8 */
    assert_int_equal(t[1 * 4 + 3], 700 + 30 + 50 + 500);
    assert_int_equal(t[0 * 4 + 3], 1700 + 10 + 30 + 50 + 500);
    assert_int_equal(t[0 * 4 + 1], 1100 + 10 + 30);
    assert_int_equal(t[1 * 4 + 2], 300 + 10 + 30 + 50);             /* t 5 */
    assert_int_equal(t[0 * 4 + 2], 1300 + 10 + 30 + 50);
    uint64_t by[MS_CAT_N];
    assert_int_equal(ms_record_stage(r, 2, 3, by), 1210);
    assert_int_equal(by[MS_CAT_PARAM], 600);
    assert_int_equal(by[MS_CAT_COMM], 60);          /* the two copies of h1 */
    assert_int_equal(by[MS_CAT_ACT], 50);
    assert_int_equal(by[MS_CAT_TRANSIENT], 500);
    /* what a stage holds while a layer ran: layer 1's forward ran twice,
     * the most of the two counts; no such moment, or none kept: -1 */
    uint64_t live = 0;
    assert_int_equal(ms_record_live_at(r, 1, 1, 1, MS_PH_FORWARD, &live), -1);
    const ms_rec_moment m[] = { { 1, MS_PH_FORWARD, 3, 5 }, { 3, MS_PH_FORWARD, 8, 12 }, { 1, MS_PH_FORWARD, 20, 22 } };
    r->m = malloc(sizeof m);
    assert_non_null(r->m);
    memcpy(r->m, m, sizeof m);
    r->n_moments = 3;
    assert_int_equal(ms_record_live_at(r, 1, 1, 1, MS_PH_FORWARD, &live), 0);
    assert_int_equal(live, 100 + 10 + 30);                          /* at 3; only the 100 at 20..21 */
    assert_int_equal(ms_record_live_at(r, 2, 3, 3, MS_PH_FORWARD, &live), 0);
    assert_int_equal(live, 1210);                                   /* at 8, the stage's peak */
    assert_int_equal(ms_record_live_at(r, 2, 3, 2, MS_PH_BACKWARD, &live), -1);
    free(t);
    ms_prog_record_free(r);
}

/* The root's tensor (100 bytes) is freed at 5 in the record, but its copy
 * on layer 1 lives to 20: with both layers on one stage, the copy is not
 * made and the original lives to 20, through the root's large transient
 * at 10. */
static void test_elided_copy_extends_original(void **state)
{
    (void)state;
    const ms_rec_storage s[] = {
        { 0, MS_CAT_ACT, 100, 1, 5, -1 },
        { 1, MS_CAT_COMM, 100, 3, 20, 0 },
        { 0, MS_CAT_TRANSIENT, 1000, 10, 11, -1 },
        { 1, MS_CAT_ACT, 7, 12, 13, -1 },
    };
    ms_prog_record *r = make_record(2, 0, 30, s, 4);
    uint64_t *t = table_checked(r), by[MS_CAT_N];
    assert_int_equal(t[0], 1000);            /* [0, 0]: the original is gone at 10 */
    assert_int_equal(t[3], 107);             /* [1, 1]: the copy and layer 1's own */
    assert_int_equal(t[1], 1100);            /* [0, 1]: recorded sums never exceed 200 at 3 */
    assert_int_equal(ms_record_stage(r, 0, 1, by), 1100);
    assert_int_equal(by[MS_CAT_ACT], 100);
    assert_int_equal(by[MS_CAT_TRANSIENT], 1000);
    assert_int_equal(by[MS_CAT_COMM], 0);
    free(t);
    ms_prog_record_free(r);
}

/* i on layer 0 is copied to j, and j to k: with both copies elided, i
 * lives until the last of the three frees. Then the same with the middle
 * copy on the last layer, so the chain closes only when that layer joins. */
static void test_chain_of_elided_copies(void **state)
{
    (void)state;
    const ms_rec_storage s[] = {
        { 0, MS_CAT_ACT, 40, 1, 4, -1 },         /* i */
        { 1, MS_CAT_COMM, 40, 2, 6, 0 },         /* j = copy of i */
        { 2, MS_CAT_COMM, 40, 5, 9, 1 },         /* k = copy of j */
        { 1, MS_CAT_TRANSIENT, 20, 5, 6, -1 },
        { 0, MS_CAT_TRANSIENT, 300, 8, 9, -1 },
    };
    ms_prog_record *r = make_record(3, 0, 12, s, 5);
    uint64_t *t = table_checked(r);
    assert_int_equal(t[0 * 3 + 2], 340);     /* i lives to 9: at 8, 40 + 300 */
    assert_int_equal(t[0 * 3 + 1], 300);     /* i to 6 (k is made on layer 2, outside) */
    assert_int_equal(t[1 * 3 + 2], 60);      /* j to 9, k elided; at 5: 40 + 20 */
    assert_int_equal(t[2 * 3 + 2], 40);
    assert_int_equal(t[0 * 3 + 0], 300);
    free(t);
    ms_prog_record_free(r);

    const ms_rec_storage s2[] = {
        { 0, MS_CAT_ACT, 40, 1, 4, -1 },         /* i */
        { 2, MS_CAT_COMM, 40, 2, 6, 0 },         /* j = copy of i, on layer 2 */
        { 1, MS_CAT_COMM, 40, 5, 9, 1 },         /* k = copy of j, on layer 1 */
        { 0, MS_CAT_TRANSIENT, 300, 8, 9, -1 },
    };
    r = make_record(3, 0, 12, s2, 4);
    t = table_checked(r);
    assert_int_equal(t[0 * 3 + 1], 300 + 40);   /* k made (j outside): at 8, 300 + k */
    assert_int_equal(t[0 * 3 + 2], 340);        /* all one: i to 9 */
    assert_int_equal(t[1 * 3 + 2], 40);         /* j to 9, k elided */
    free(t);
    ms_prog_record_free(r);
}

/* t_from = 10: a storage freed before it or at it never counts; one
 * allocated before it and still live counts from it; an elided copy can
 * carry its original past t_from. */
static void test_live_before_t_from(void **state)
{
    (void)state;
    const ms_rec_storage s[] = {
        { 0, MS_CAT_ACT, 100, 0, 5, -1 },
        { 0, MS_CAT_ACT, 200, 2, 10, -1 },
        { 0, MS_CAT_PARAM, 300, 3, 12, -1 },
        { 0, MS_CAT_TRANSIENT, 1000, 4, 6, -1 },
        { 1, MS_CAT_COMM, 1000, 5, 11, 3 },
        { 0, MS_CAT_ACT, 50, 11, 15, -1 },
    };
    ms_prog_record *r = make_record(2, 10, 20, s, 6);
    uint64_t *t = table_checked(r), by[MS_CAT_N];
    assert_int_equal(t[0], 350);             /* at 11: 300 + 50 */
    assert_int_equal(t[3], 1000);            /* the copy, live at 10 */
    assert_int_equal(t[1], 1300);            /* the original lives to 11: at 10, 1000 + 300 */
    assert_int_equal(ms_record_stage(r, 0, 0, by), 350);
    assert_int_equal(by[MS_CAT_PARAM], 300);
    assert_int_equal(by[MS_CAT_ACT], 50);
    free(t);
    ms_prog_record_free(r);
    /* nothing counts from the end on */
    r = make_record(2, 20, 20, s, 6);
    t = table_checked(r);
    for (int k = 0; k < 4; k++) assert_int_equal(t[k], 0);
    free(t);
    ms_prog_record_free(r);
}

/* The fast table against the plain replay, every range of many random
 * records (copies, chains of them, storages before t_from). */
static void test_table_against_replay(void **state)
{
    (void)state;
    pu_rng g;
    pu_seed(&g, 20261207);
    int copies = 0, elided_somewhere = 0;
    for (int it = 0; it < 3000; it++) {
        int L = 1 + pu_int(&g, 8), n = pu_int(&g, 60);
        ms_prog_record *r = ru_random_record(&g, L, n, 10 + pu_int(&g, 60));
        char err[256];
        if (ms_record_check(r, err, sizeof err)) fail_msg("instance %d: %s", it, err);
        for (int i = 0; i < n; i++) copies += r->s[i].copy_of >= 0;
        uint64_t *t = table_checked(r);
        /* a range can peak below one of its layers alone (a copy elided)... */
        for (int a = 0; a + 1 < L; a++)
            if (t[a * L + a + 1] < t[a * L + a] || t[a * L + a + 1] < t[(a + 1) * L + a + 1]) elided_somewhere++;
        free(t);
        ms_prog_record_free(r);
    }
    assert_true(copies > 10000);
    assert_true(elided_somewhere > 50);   /* ...and the records met that case */
    /* a few larger ones */
    for (int it = 0; it < 20; it++) {
        ms_prog_record *r = ru_random_record(&g, 24, 3000, 2000);
        assert_int_equal(ms_record_check(r, NULL, 0), 0);
        free(table_checked(r));
        ms_prog_record_free(r);
    }
}

static void expect_refused(ms_prog_record *r, const char *what)
{
    char err[256] = "";
    if (ms_record_check(r, err, sizeof err) != -1) fail_msg("accepted: %s", what);
    assert_true(err[0] != 0);
}

static void test_check_refuses(void **state)
{
    (void)state;
    const ms_rec_storage good[] = {
        { 0, MS_CAT_ACT, 10, 1, 5, -1 },
        { 1, MS_CAT_COMM, 10, 2, NEVER, 0 },
        { 1, MS_CAT_ACT, 10, 4, 9, -1 },
        { 0, MS_CAT_COMM, 10, 6, 9, 2 },
    };
    ms_prog_record *r = make_record(2, 0, 10, good, 4);
    assert_int_equal(ms_record_check(r, NULL, 0), 0);
    expect_refused(NULL, "no record");
#define BAD(what, stmt)                                   \
    do {                                                  \
        ms_prog_record *x_ = make_record(2, 0, 10, good, 4); \
        stmt;                                             \
        expect_refused(x_, what);                         \
        ms_prog_record_free(x_);                          \
    } while (0)
    BAD("no layers", x_->n_layers = 0);
    BAD("too many layers", x_->n_layers = MS_MAX_LAYERS + 1);
    BAD("t_from after t_end", x_->t_from = 11);
    BAD("negative count", x_->n = -1);
    BAD("too many storages", x_->n = MS_PROFILE_MAX_REC_STORAGES + 1);
    BAD("no storages list", (free(x_->s), x_->s = NULL));
    BAD("negative layer", x_->s[2].layer = -1);
    BAD("layer past the last", x_->s[2].layer = 2);
    BAD("negative category", x_->s[0].cat = -1);
    BAD("category past the last", x_->s[0].cat = MS_CAT_N);
    BAD("allocated at the end", (x_->s[3].t_alloc = 10, x_->s[3].t_free = NEVER));
    BAD("allocations out of order", x_->s[2].t_alloc = 1);
    BAD("freed when allocated", x_->s[2].t_free = 4);
    BAD("freed before allocated", x_->s[2].t_free = 3);
    BAD("freed past the end", x_->s[2].t_free = 11);
    BAD("a copy of itself", x_->s[1].copy_of = 1);
    BAD("a copy of a later storage", x_->s[1].copy_of = 2);
    BAD("copy_of below -1", x_->s[1].copy_of = -2);
    BAD("a copy of a freed storage", x_->s[2].t_free = 6);
    BAD("a copy made as its original is freed", x_->s[0].t_free = 2);
    BAD("more bytes than can be summed", (x_->s[0].bytes = MS_REC_MAX_TOTAL_BYTES, x_->s[3].bytes = 1));
#undef BAD
    /* more layers x storages than a plan replays: refused, one under it accepted */
    const int many = (int)(MS_REC_MAX_WORK / MS_MAX_LAYERS) + 1;
    ms_rec_storage *big = calloc((size_t)many, sizeof *big);
    assert_non_null(big);
    for (int i = 0; i < many; i++) big[i] = (ms_rec_storage){ 0, MS_CAT_ACT, 1, (uint32_t)i, NEVER, -1 };
    ms_prog_record *w = make_record(MS_MAX_LAYERS, 0, (uint32_t)many, big, many);
    expect_refused(w, "too much work");
    w->n = many - 1;
    assert_int_equal(ms_record_check(w, NULL, 0), 0);
    ms_prog_record_free(w);
    free(big);
    /* the edges: freed at the end, counted from the end, a full layer list */
    r->s[2].t_free = 10;
    r->t_from = 10;
    r->n_layers = MS_MAX_LAYERS;
    assert_int_equal(ms_record_check(r, NULL, 0), 0);
    ms_prog_record_free(r);
}

/* ---- the sequential search with a record ------------------------------- */

static ms_profile *program_profile(pu_rng *g, int n)
{
    int sizes[1] = { 1 };
    ms_profile *p = pu_random_profile(g, n, 1u, sizes, 1, 1);
    snprintf(p->fingerprint, sizeof p->fingerprint, "fnv64:%016llx", (unsigned long long)pu_next(g));
    p->loss = (ms_loss_row){ .present = 1, .made_in = n - 1, .outputs = 1 << 20, .held = 2 << 20 };
    return p;
}

/* Two layers whose rules and record disagree: in the record, layer 1 has a
 * large transient while the root's tensor, copied to it, is live. Together
 * the copy is elided and the stage needs 1100 MiB; apart, layer 1 alone
 * needs as much (its copy). One byte less and nothing fits, though the
 * rules' peak (a few hundred MiB) does. A record of other layers is not
 * used; a malformed one is an error. */
static void test_record_decides_split(void **state)
{
    (void)state;
    pu_rng g;
    pu_seed(&g, 99);
    ms_profile *p = program_profile(&g, 2);
    const uint64_t M = 1 << 20;
    const ms_rec_storage s[] = {
        { 0, MS_CAT_ACT, 600 * M, 1, 8, -1 },
        { 1, MS_CAT_COMM, 600 * M, 2, 4, 0 },
        { 1, MS_CAT_TRANSIENT, 500 * M, 3, 4, -1 },
    };
    p->record = make_record(2, 0, 10, s, 3);
    ms_layer_cost L[2];
    assert_int_equal(ms_layer_costs(p, 0, 1, L, NULL, 0), 0);
    uint64_t rb[MS_CAT_N];
    uint64_t rules = ms_seq_stage_peak(L, 2, 0, 1, 0, 0, p->grads_freed, 1, &p->loss, p->reserve, rb);
    /* together: the copy is elided, 600 + 500 at 3; apart: 600 and 1100 */
    uint64_t by[MS_CAT_N];
    assert_int_equal(ms_record_stage(p->record, 0, 1, by), 1100 * M);
    uint64_t cap = (rules > 1100 * M ? rules : 1100 * M) + p->reserve;
    ms_plan_device devs[2] = { { .capacity = cap }, { .capacity = cap } };
    snprintf(devs[0].name, sizeof devs[0].name, "cuda:0");
    snprintf(devs[1].name, sizeof devs[1].name, "cuda:1");
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    o.headroom = 0;
    o.schedule = MS_SCHED_SEQUENTIAL;
    o.recompute = MS_RECOMPUTE_NEVER;
    ms_plan pl;
    char err[256];
    assert_int_equal(ms_plan_search(p, devs, 2, &o, &pl, err, sizeof err), MS_PLAN_OK);
    assert_int_equal(pl.n_stages, 1);        /* it fits the record together */
    assert_int_equal(pl.stages[0].peak, 1100 * M + p->reserve);
    assert_int_equal(pl.stages[0].bytes[MS_CAT_TRANSIENT], 500 * M);
    assert_int_equal(pl.stages[0].bytes[MS_CAT_ACT], 600 * M);
    assert_int_equal(pl.stages[0].bytes[MS_CAT_RESERVE], p->reserve);
    ms_plan_free(&pl);
    /* the same record changed in place: the search sees the change */
    p->record->s[2].bytes = 400 * M;
    assert_int_equal(ms_plan_search(p, devs, 2, &o, &pl, err, sizeof err), MS_PLAN_OK);
    assert_int_equal(pl.stages[0].peak, 1000 * M + p->reserve);
    ms_plan_free(&pl);
    p->record->s[2].bytes = 500 * M;
    /* one byte less: together (1100) does not fit, and neither does layer 1
     * alone (600 + 500); nothing fits, whatever the rules say */
    devs[0].capacity = devs[1].capacity = 1100 * M + p->reserve - 1;
    assert_true(rules <= devs[0].capacity);
    assert_int_equal(ms_plan_search(p, devs, 2, &o, &pl, err, sizeof err), MS_PLAN_INFEASIBLE);
    /* a record of another layer count (ms_plan_search refuses the profile;
     * the sequential search alone): the rules serve */
    devs[0].capacity = devs[1].capacity = cap;
    p->record->n_layers = 3;
    assert_int_equal(ms_plan_search_sequential(p, devs, 2, &o, &pl, err, sizeof err), MS_PLAN_OK);
    assert_int_equal(pl.n_stages, 1);
    assert_int_equal(pl.stages[0].peak, rules);
    ms_plan_free(&pl);
    /* malformed in a way only the replay sees (a copy of a storage already
     * freed): an error saying so */
    p->record->n_layers = 2;
    p->record->s[0].t_free = 2;
    assert_int_equal(ms_plan_search(p, devs, 2, &o, &pl, err, sizeof err), MS_PLAN_ERROR);
    assert_non_null(strstr(err, "malformed"));
    ms_profile_free(p);
    free(p);
}

/* The rerun's bridge config of pl names exactly its modules handed on
 * (no key when none). */
static void assert_config_hands_on(const ms_plan *pl)
{
    json_t *cfg = ms_program_plan_config(pl);
    assert_non_null(cfg);
    const json_t *h = json_object_get(cfg, "handed_on");
    if (pl->n_handed_on == 0) assert_null(h);
    else assert_int_equal(json_array_size(h), pl->n_handed_on);
    for (int i = 0; i < pl->n_handed_on; i++)
        assert_string_equal(json_string_value(json_array_get(h, (size_t)i)), pl->handed_on[i]);
    json_decref(cfg);
}

/* A plan whose peaks are the profile's record replayed carries the modules
 * the record hands on (a copy of its own, which outlives the profile) to
 * its JSON and the rerun's bridge config; a plan by the stage rules (the
 * record not used) or of another schedule hands nothing on. */
static void test_plan_hands_on_what_its_record_did(void **state)
{
    (void)state;
    pu_rng g;
    pu_seed(&g, 99);
    ms_profile *p = program_profile(&g, 2);
    const uint64_t M = 1 << 20;
    const ms_rec_storage s[] = {
        { 0, MS_CAT_ACT, 600 * M, 1, 8, -1 },
        { 1, MS_CAT_COMM, 600 * M, 2, 4, 0 },
        { 1, MS_CAT_TRANSIENT, 500 * M, 3, 4, -1 },
    };
    p->record = make_record(2, 0, 10, s, 3);
    static const char *const paths[] = { "model.layers.1", "model.\xe2\x84\x96" "1" };
    p->record->handed_on = calloc(2, sizeof *p->record->handed_on);
    assert_non_null(p->record->handed_on);
    for (int i = 0; i < 2; i++) assert_non_null(p->record->handed_on[i] = strdup(paths[i]));
    p->record->n_handed_on = 2;
    ms_plan_device devs[2] = { { .capacity = 4096 * M + p->reserve }, { .capacity = 4096 * M + p->reserve } };
    snprintf(devs[0].name, sizeof devs[0].name, "cuda:0");
    snprintf(devs[1].name, sizeof devs[1].name, "cuda:1");
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    o.schedule = MS_SCHED_SEQUENTIAL;
    o.recompute = MS_RECOMPUTE_NEVER;
    ms_plan pl, none = { 0 };   /* ms_plan_search_sequential fills a zeroed plan (ms_plan_search zeroes it) */
    char err[256];
    assert_true(ms_seq_record(p) == p->record);
    assert_int_equal(ms_plan_search(p, devs, 2, &o, &pl, err, sizeof err), MS_PLAN_OK);
    p->reserve_allocator = p->reserve / 4;                 /* the record pass's library buffers */
    assert_int_equal(ms_plan_attach_program(&pl, p), 0);
    assert_int_equal(ms_plan_attach_program(&pl, p), 0);   /* again: replaced, not leaked */
    assert_int_equal(pl.reserve_allocator, p->reserve / 4);    /* for the rerun's two parts */
    assert_int_equal(pl.n_handed_on, 2);
    assert_true(pl.handed_on != p->record->handed_on);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(pl.handed_on[i], paths[i]);
        assert_true(pl.handed_on[i] != p->record->handed_on[i]);
    }
    assert_config_hands_on(&pl);
    /* the record not used (of another layer count: the rules serve): nothing handed on */
    p->record->n_layers = 3;
    assert_null(ms_seq_record(p));
    assert_int_equal(ms_plan_search_sequential(p, devs, 2, &o, &none, err, sizeof err), MS_PLAN_OK);
    assert_int_equal(ms_plan_attach_program(&none, p), 0);
    assert_int_equal(none.n_handed_on, 0);
    assert_null(none.handed_on);
    assert_config_hands_on(&none);
    char *text = ms_plan_to_string(&none);
    assert_non_null(text);
    assert_null(strstr(text, "handed_on"));
    free(text);
    /* used, but the plan is of another schedule: its peaks are not the record's */
    p->record->n_layers = 2;
    none.schedule = MS_SCHED_GPIPE;
    assert_int_equal(ms_plan_attach_program(&none, p), 0);
    assert_int_equal(none.n_handed_on, 0);
    assert_null(none.handed_on);
    ms_plan_free(&none);
    /* the plan's list is its own: the profile gone, it is written and read back whole */
    ms_profile_free(p);
    free(p);
    text = ms_plan_to_string(&pl);
    assert_non_null(text);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    ms_plan back;
    if (ms_plan_from_json(j, &back, err, sizeof err)) fail_msg("read back: %s", err);
    assert_int_equal(back.n_handed_on, 2);
    for (int i = 0; i < 2; i++) assert_string_equal(back.handed_on[i], paths[i]);
    assert_config_hands_on(&back);
    ms_plan_free(&back);
    json_decref(j);
    free(text);
    ms_plan_free(&pl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_with_skip),
        cmocka_unit_test(test_elided_copy_extends_original),
        cmocka_unit_test(test_chain_of_elided_copies),
        cmocka_unit_test(test_live_before_t_from),
        cmocka_unit_test(test_table_against_replay),
        cmocka_unit_test(test_check_refuses),
        cmocka_unit_test(test_record_decides_split),
        cmocka_unit_test(test_plan_hands_on_what_its_record_did),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
