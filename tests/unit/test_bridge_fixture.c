/* test_bridge_fixture.c — attribution checked against what PyTorch itself
 * counted on an H200: tests/fixtures/bridge_ref_h200.tsv is the event
 * stream of `memsplit profile --record-events` over the reference model's
 * shape (4 blocks, d 512, bf16 autocast, torch 2.11), with the program's own
 * report appended ("#\ttorch {...}": its parameters, gradients and
 * optimizer state as the caching allocator counts them, and
 * max_memory_allocated). Replayed here through the same trace parser and
 * row builder the parent uses, with no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "bridge/ledger.h"
#include "bridge/rows.h"
#include "bridge/trace.h"

#ifndef FIXTURE
#define FIXTURE "tests/fixtures/bridge_ref_h200.tsv"
#endif

/* Feeds the first pass's lines; *torch gets the report line's object. */
static void load(msb_trace *t, json_t **torch)
{
    FILE *f = fopen(FIXTURE, "r");
    if (!f) fail_msg("cannot open %s (run the tests from the repository root)", FIXTURE);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int passes = 0;
    *torch = NULL;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n') line[--n] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        if (line[0] == '#') {
            if (!strncmp(tab + 1, "pass ", 5)) passes++;
            else if (!strncmp(tab + 1, "torch ", 6)) *torch = json_loads(tab + 7, 0, NULL);
            continue;
        }
        if (passes == 1) assert_int_equal(msb_trace_feed(t, tab + 1, strlen(tab + 1), atoi(line)), 0);
    }
    free(line);
    fclose(f);
    assert_non_null(*torch);
}

static uint64_t num(const json_t *o, const char *k) { return (uint64_t)json_integer_value(json_object_get(o, k)); }

/* The caching allocator's bytes beyond the tensors the ledger saw, at the
 * last step's end (the buffers cuBLAS keeps there), replayed here apart
 * from the row builder. */
static uint64_t library_buffers(const msb_trace *t)
{
    msl_ledger L;
    msl_init(&L);
    int64_t untracked = 0, at_step = 0;
    for (int i = 0; i < t->n_ev; i++) {
        const msb_ev *e = &t->ev[i];
        if (e->conn != t->model_conn) continue;
        if (e->kind == MSB_EV_ALLOC) msl_alloc(&L, 0, e->m.address, e->m.bytes, e->m.category, e->m.layer, NULL);
        else if (e->kind == MSB_EV_FREE) msl_free(&L, e->m.address, NULL);
        else if (e->kind == MSB_EV_WHERE && e->alloc >= 0) untracked = e->alloc - (int64_t)L.dev[0].live;
        else if (e->kind == MSB_EV_STEP) at_step = untracked;
    }
    msl_free_all(&L);
    return at_step > 0 ? (uint64_t)at_step : 0;
}

static void test_rows_equal_torchs_accounting(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    json_t *torch;
    load(&t, &torch);
    assert_true(t.cuda);
    assert_int_equal(t.n_blocks, 4);
    assert_int_equal(t.n_steps, 2);
    ms_profile p;
    char err[256];
    int incomplete;
    msb_rows_opts o = { 0 };
    if (msb_build_profile(&t, NULL, &o, &p, &incomplete, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(p.accounting, "cuda-caching-allocator");
    assert_int_equal(p.rows[1].precision, 1);   /* bf16 autocast */
    /* fp32 weights under autocast are masters; with gradients and AdamW's
     * state they equal what torch counted, byte for byte */
    uint64_t master = 0, grad = 0, optim = 0, param = 0;
    for (int i = 0; i < p.n_rows; i++) {
        master += p.rows[i].master;
        grad += p.rows[i].grad;
        optim += p.rows[i].optim;
        param += p.rows[i].param;
    }
    assert_int_equal(master, num(torch, "param"));
    assert_int_equal(grad, num(torch, "grad"));
    assert_int_equal(optim, num(torch, "optim"));
    assert_true(param > 0 && param < master);    /* the 16-bit copies autocast made */
    /* the reserve holds the device's context and the buffers libraries keep
     * in the caching allocator (cuBLAS workspaces: tens of MiB, no
     * operator's output); the allocated peak, those buffers included, is
     * max_memory_allocated() (1% is the target; it is exact) */
    uint64_t libs = library_buffers(&t);
    assert_true(libs >= (16u << 20) && libs <= p.reserve);
    uint64_t peak = p.peak - p.reserve + libs, want = num(torch, "max_allocated");
    assert_true(peak >= want - want / 100 && peak <= want + want / 100);
    /* identical blocks, identical rows; forward, backward and the
     * optimizer's transients all measured */
    for (int b = 2; b <= 4; b++) {
        assert_int_equal(p.rows[b].act, p.rows[1].act);
        assert_int_equal(p.rows[b].master, p.rows[1].master);
    }
    assert_true(p.rows[1].act > 0 && p.rows[1].transient_fwd > 0 && p.rows[1].transient_bwd > 0);
    assert_true(p.rows[1].transient_fwd < p.rows[1].act);   /* a transient, not the run's peak */
    assert_true(p.reserved_peak >= want);
    /* CUPTI saw the caching allocator's segments: every segment event is a
     * cudaMalloc or cudaFree, and the reserved counter never exceeds them */
    int segs = 0;
    uint64_t live = 0, most = 0;
    for (int i = 0; i < t.n_ev; i++) {
        const msb_ev *e = &t.ev[i];
        if (e->kind != MSB_EV_SEGMENT || e->m.kind == MS_EV_FAIL) continue;
        segs++;
        if (e->m.kind == MS_EV_FREE) live -= e->m.bytes < live ? e->m.bytes : live;
        else live += e->m.bytes;
        if (live > most) most = live;
    }
    assert_true(segs > 0);
    assert_true(most >= p.reserved_peak);
    ms_profile_free(&p);
    msb_trace_free(&t);
    json_decref(torch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_equal_torchs_accounting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
