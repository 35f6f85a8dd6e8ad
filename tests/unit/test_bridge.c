/* test_bridge.c — the C half of the PyTorch bridge without a program: the
 * ledger and its cap, the choice of the block list and the fingerprint,
 * the event lines parsed into a trace, and the rows and OOM built from a
 * trace whose right answers are worked out by hand below. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/layers.h"
#include "bridge/ledger.h"
#include "bridge/rows.h"
#include "bridge/trace.h"

/* ---- the ledger --------------------------------------------------------- */

static void test_ledger_cap_and_labels(void **state)
{
    (void)state;
    msl_ledger L;
    msl_init(&L);
    assert_int_equal(msl_set_capacity(&L, 1, 1000), 0);
    msl_refusal why;
    assert_int_equal(msl_alloc(&L, 1, 0x10, 600, MS_CAT_PARAM, 0, &why), MSL_OK);
    assert_int_equal(msl_alloc(&L, 1, 0x20, 300, MS_CAT_ACT, 2, &why), MSL_OK);
    /* 600 + 300 + 200 > 1000: refused, nothing recorded, why filled */
    assert_int_equal(msl_alloc(&L, 1, 0x30, 200, MS_CAT_ACT, 2, &why), MSL_REFUSED);
    assert_int_equal(why.requested, 200);
    assert_int_equal(why.live, 900);
    assert_int_equal(why.capacity, 1000);
    assert_int_equal(L.dev[1].live, 900);
    assert_int_equal(L.dev[1].refusals, 1);
    /* exactly up to the cap is fine; device 0 has no cap */
    assert_int_equal(msl_alloc(&L, 1, 0x30, 100, MS_CAT_ACT, 2, &why), MSL_OK);
    assert_int_equal(msl_alloc(&L, 0, 0x40, 1ull << 40, MS_CAT_ACT, -1, &why), MSL_OK);
    assert_int_equal(L.dev[1].peak, 1000);
    assert_int_equal(msl_live_layer(&L, 1, 2), 400);
    /* a relabel moves bytes between categories and layers, not the peak */
    assert_int_equal(msl_relabel(&L, 0x20, MS_CAT_GRAD, 5), 0);
    assert_int_equal(L.dev[1].live_cat[MS_CAT_ACT], 100);
    assert_int_equal(L.dev[1].live_cat[MS_CAT_GRAD], 300);
    assert_int_equal(msl_live_layer(&L, 1, 5), 300);
    assert_int_equal(msl_live_layer(&L, 1, 2), 100);
    assert_int_equal(L.dev[1].peak, 1000);
    assert_int_equal(msl_relabel(&L, 0x999, MS_CAT_GRAD, 0), 0);   /* unknown: ignored */
    /* a key that comes back while live was released unseen: replaced */
    assert_int_equal(msl_alloc(&L, 1, 0x10, 50, MS_CAT_ACT, 0, &why), MSL_OK);
    assert_int_equal(L.dev[1].live, 450);
    assert_int_equal(L.dev[1].live_cat[MS_CAT_PARAM], 0);
    /* frees */
    int dev = -1;
    assert_int_equal(msl_free(&L, 0x20, &dev), 300);
    assert_int_equal(dev, 1);
    assert_int_equal(msl_free(&L, 0x20, &dev), 0);   /* twice: nothing */
    assert_int_equal(msl_alloc(&L, 1, 0x50, 0, MS_CAT_ACT, 0, &why), MSL_OK);   /* zero bytes: not tracked */
    assert_null(msl_find(&L, 0x50));
    assert_int_equal(msl_alloc(&L, 1, 0, 8, MS_CAT_ACT, 0, &why), -1);          /* key 0: refused as bad */
    assert_int_equal(msl_alloc(&L, MSL_MAX_DEVICES, 1, 8, MS_CAT_ACT, 0, &why), -1);
    /* many records, freed and reused: the sums stay exact */
    uint64_t sum = L.dev[2].live;
    for (uint64_t k = 1; k <= 5000; k++) {
        assert_int_equal(msl_alloc(&L, 2, k * 16, k, MS_CAT_TRANSIENT, (int)(k % 7), NULL), MSL_OK);
        sum += k;
        if (k % 3 == 0) { sum -= msl_free(&L, (k - 1) * 16, NULL); }
    }
    assert_int_equal(L.dev[2].live, sum);
    msl_free_all(&L);
}

/* ---- the block list ------------------------------------------------------ */

/* the reference model: transformers = ModuleList of 3 ModuleList(attn, ff) */
static const char ref_tree[] =
    "0\t-1\t\tModel\t0\t1000\tS0\n"
    "1\t0\tsegment1\tEmbedding\t0\t100\tSE\n"
    "2\t0\ttransformers\tModuleList\t1\t800\tST\n"
    "3\t2\ttransformers.0\tModuleList\t1\t266\tSB\n"
    "4\t3\ttransformers.0.0\tAttn\t0\t100\tSA\n"
    "5\t3\ttransformers.0.1\tSequential\t1\t166\tSF\n"
    "6\t2\ttransformers.1\tModuleList\t1\t266\tSB\n"
    "7\t6\ttransformers.1.0\tAttn\t0\t100\tSA\n"
    "8\t6\ttransformers.1.1\tSequential\t1\t166\tSF\n"
    "9\t2\ttransformers.2\tModuleList\t1\t266\tSB\n"
    "10\t9\ttransformers.2.0\tAttn\t0\t100\tSA\n"
    "11\t9\ttransformers.2.1\tSequential\t1\t166\tSF\n"
    "12\t0\tsegment2\tSequential\t1\t100\tSH\n"
    "13\t12\tsegment2.0\tLayerNorm\t0\t2\tSL\n"
    "14\t12\tsegment2.1\tLinear\t0\t98\tSX\n";

static void test_pick_layers(void **state)
{
    (void)state;
    char why[512];
    assert_int_equal(msb_pick_layers(ref_tree, "", why, sizeof why), 2);
    assert_string_equal(why, "transformers: ModuleList of 3 identical ModuleList (the longest such list)");
    /* --layers: any module with children, "." the root */
    assert_int_equal(msb_pick_layers(ref_tree, "segment2", why, sizeof why), 12);
    assert_non_null(strstr(why, "given by --layers"));
    assert_int_equal(msb_pick_layers(ref_tree, ".", why, sizeof why), 0);
    assert_int_equal(msb_pick_layers(ref_tree, "nope", why, sizeof why), -1);
    assert_non_null(strstr(why, "no module at that path"));
    assert_int_equal(msb_pick_layers(ref_tree, "segment1", why, sizeof why), -1);
    assert_non_null(strstr(why, "no children"));
    /* two lists of equal length: more parameter bytes wins */
    const char two[] = "0\t-1\t\tM\t0\t0\tR\n"
                       "1\t0\ta\tSequential\t1\t10\tA\n2\t1\ta.0\tL\t0\t5\tx\n3\t1\ta.1\tL\t0\t5\tx\n"
                       "4\t0\tb\tModuleList\t1\t90\tB\n5\t4\tb.0\tL\t0\t45\ty\n6\t4\tb.1\tL\t0\t45\ty\n";
    assert_int_equal(msb_pick_layers(two, NULL, why, sizeof why), 4);
    /* children that differ are not a block list; the message names candidates and --layers */
    const char none[] = "0\t-1\t\tFlat\t0\t9\tR\n1\t0\tembed\tEmbedding\t0\t3\tE\n2\t0\ta\tLinear\t0\t3\tA\n"
                        "3\t0\tmlp\tSequential\t1\t3\tS\n4\t3\tmlp.0\tLinear\t0\t1\tP\n5\t3\tmlp.1\tReLU\t0\t0\tQ\n";
    assert_int_equal(msb_pick_layers(none, "", why, sizeof why), -1);
    assert_non_null(strstr(why, "no nn.ModuleList or nn.Sequential of identical blocks"));
    assert_non_null(strstr(why, "--layers PATH"));
    assert_non_null(strstr(why, "mlp (Sequential, 2 children)"));
    /* malformed trees */
    assert_int_equal(msb_pick_layers("", "", why, sizeof why), -1);
    assert_int_equal(msb_pick_layers("0\t-1\tx\n", "", why, sizeof why), -1);
    assert_non_null(strstr(why, "7 tab-separated fields"));
    assert_int_equal(msb_pick_layers("0\t-1\t\tM\t0\t0\tR\n1\t7\ta\tL\t0\t0\tx\n", "", why, sizeof why), -1);
    assert_non_null(strstr(why, "bad parent"));
    assert_int_equal(msb_pick_layers("1\t-1\t\tM\t0\t0\tR\n", "", why, sizeof why), -1);
}

static void test_fingerprint(void **state)
{
    (void)state;
    char a[MS_FINGERPRINT_MAX], b[MS_FINGERPRINT_MAX];
    assert_int_equal(msb_fingerprint(ref_tree, a, sizeof a), 0);
    assert_int_equal(strlen(a), 22);
    assert_memory_equal(a, "fnv64:", 6);
    /* parameter bytes are not part of it (field 5) */
    char *t = strdup(ref_tree);
    char *p = strstr(t, "\t1000\t");
    memcpy(p, "\t9999\t", 6);
    msb_fingerprint(t, b, sizeof b);
    assert_string_equal(a, b);
    /* a signature is */
    p = strstr(t, "\tSX\n");
    p[2] = 'Y';
    msb_fingerprint(t, b, sizeof b);
    assert_string_not_equal(a, b);
    free(t);
    assert_int_equal(msb_fingerprint(ref_tree, a, 8), -1);
}

/* ---- a trace, its rows and its OOM ---------------------------------------- */

static void feed(msb_trace *t, int conn, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    assert_int_equal(msb_trace_feed(t, line, strlen(line), conn), 0);
}

#define W(t, l, p) feed(t, 1, "{\"ev\":\"w\",\"l\":%d,\"p\":%d,\"alloc\":-1,\"peak\":-1,\"xin\":%d}", l, p, (l) > 0 ? 64 : -1)
#define A(t, k, b, c, l) feed(t, 1, "{\"ev\":\"a\",\"d\":0,\"k\":%d,\"b\":%d,\"c\":%d,\"l\":%d,\"p\":1}", k, b, c, l)
#define F(t, k) feed(t, 1, "{\"ev\":\"f\",\"d\":0,\"k\":%d}", k)
#define R(t, k, c, l) feed(t, 1, "{\"ev\":\"r\",\"k\":%d,\"c\":%d,\"l\":%d}", k, c, l)

/* A program with 2 blocks (layers: 0 pre, 1 and 2 blocks, 3 post), one step:
 *  params: layer 0 has 100 bytes, blocks 200 each, post 50;
 *  forward of each block: a 30-byte temporary, then 40 bytes kept (act);
 *  backward of each block: a 70-byte temporary, its grads (200), its acts freed;
 *  optimizer: state 2x params, a 500-byte foreach temporary. */
static void one_step(msb_trace *t, int n_steps, int oom_in_block)
{
    feed(t, 1, "{\"ev\":\"hello\",\"pid\":1}");
    feed(t, 1, "{\"ev\":\"torch\",\"version\":\"1.13.0\",\"cuda\":false}");
    A(t, 1, 100, MS_CAT_TRANSIENT, -1);     /* parameters, made before the model is known */
    A(t, 2, 200, MS_CAT_TRANSIENT, -1);
    A(t, 3, 200, MS_CAT_TRANSIENT, -1);
    A(t, 4, 50, MS_CAT_TRANSIENT, -1);
    feed(t, 1, "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"h: ModuleList of 2 identical B\","
               "\"blocks\":[\"h.0\",\"h.1\"],\"fingerprint\":\"fnv64:00000000000000aa\",\"precision\":\"fp32\","
               "\"device\":\"cpu\"}");
    R(t, 1, MS_CAT_PARAM, 0);
    R(t, 2, MS_CAT_PARAM, 1);
    R(t, 3, MS_CAT_PARAM, 2);
    R(t, 4, MS_CAT_PARAM, 0);               /* post, until its module runs */
    for (int s = 0; s < n_steps; s++) {
        int base = 100 * (s + 1);
        W(t, 0, MS_PH_FORWARD);
        feed(t, 1, "{\"ev\":\"member\",\"l\":0,\"module\":\"wte\"}");
        A(t, base + 1, 16, MS_CAT_ACT, 0);  /* layer 0 keeps 16 */
        for (int b = 1; b <= 2; b++) {
            W(t, b, MS_PH_FORWARD);
            if (b == oom_in_block) {
                feed(t, 1, "{\"ev\":\"x\",\"d\":0,\"b\":30,\"c\":4,\"l\":%d,\"p\":1,\"live\":700,\"cap\":710}", b);
                feed(t, 1, "{\"ev\":\"oom\",\"l\":%d,\"p\":1,\"module\":\"h.%d.fc\",\"type\":\"Linear\","
                           "\"requested\":30,\"source\":\"cap\"}", b, b - 1);
                feed(t, 1, "{\"ev\":\"done\",\"reason\":\"exception\",\"exc\":\"OutOfMemoryError: x\"}");
                return;
            }
            A(t, base + 10 * b, 30, MS_CAT_ACT, b);      /* temporary */
            A(t, base + 10 * b + 1, 40, MS_CAT_ACT, b);  /* kept */
            F(t, base + 10 * b);
        }
        W(t, 3, MS_PH_FORWARD);
        feed(t, 1, "{\"ev\":\"member\",\"l\":3,\"module\":\"head\"}");
        R(t, 4, MS_CAT_PARAM, 3);
        A(t, base + 40, 24, MS_CAT_ACT, 3);
        W(t, 3, MS_PH_BACKWARD);
        A(t, base + 41, 10, MS_CAT_TRANSIENT, 3);
        F(t, base + 41);
        F(t, base + 40);
        for (int b = 2; b >= 1; b--) {
            W(t, b, MS_PH_BACKWARD);
            A(t, base + 50 + b, 70, MS_CAT_TRANSIENT, b);
            if (s == 0) A(t, 1000 + b, 200, MS_CAT_TRANSIENT, b);   /* its gradient, labelled below */
            F(t, base + 50 + b);
            F(t, base + 10 * b + 1);
        }
        W(t, 0, MS_PH_BACKWARD);
        F(t, base + 1);
        W(t, -1, MS_PH_OPTIMIZER);
        if (s == 0) {
            R(t, 1001, MS_CAT_GRAD, 1);
            R(t, 1002, MS_CAT_GRAD, 2);
            A(t, 2001, 400, MS_CAT_TRANSIENT, -1);   /* block 1's state */
            A(t, 2002, 400, MS_CAT_TRANSIENT, -1);
        }
        A(t, 3000 + s, 500, MS_CAT_TRANSIENT, -1);  /* foreach temporary */
        F(t, 3000 + s);
        R(t, 2001, MS_CAT_OPTIM, 1);
        R(t, 2002, MS_CAT_OPTIM, 2);
        W(t, -1, MS_PH_INIT);
        feed(t, 1, "{\"ev\":\"step\",\"n\":%d,\"accum\":1,\"micro_batch\":8,\"intervals\":"
                   "[[0,1,1.0],[1,1,2.0],[2,1,2.0],[3,1,0.5],[3,2,0.5],[2,2,4.0],[1,2,4.0],[0,2,0.25],[-1,3,3.0]]}",
             s + 1);
    }
    feed(t, 1, "{\"ev\":\"done\",\"reason\":\"steps\"}");
}

static void test_rows_from_a_trace(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    one_step(&t, 2, 0);
    feed(&t, 1, "not json");
    feed(&t, 1, "{\"ev\":\"from-the-future\",\"x\":1}");
    assert_int_equal(t.bad_lines, 1);
    assert_int_equal(t.n_steps, 2);
    assert_string_equal(t.pre, "wte");
    assert_string_equal(t.post, "head");
    ms_profile p;
    int incomplete = -1;
    char err[256];
    msb_rows_opts o = { .capacity = 0, .model_name = "train.py" };
    if (msb_build_profile(&t, NULL, &o, &p, &incomplete, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(incomplete, 0);
    assert_int_equal(p.n_layers, 4);
    assert_int_equal(p.n_rows, 4);
    assert_string_equal(p.model, "train.py");
    assert_string_equal(p.rows[0].name, "wte");
    assert_string_equal(p.rows[1].name, "h.0");
    assert_string_equal(p.rows[3].name, "head");
    assert_string_equal(p.rows[3].kind, "post");
    assert_string_equal(p.fingerprint, "fnv64:00000000000000aa");
    assert_true(p.fits);
    for (int l = 1; l <= 2; l++) {
        const ms_layer_row *r = &p.rows[l];
        assert_int_equal(r->source, MS_ROW_FULL);
        assert_int_equal(r->param, 200);
        assert_int_equal(r->grad, 200);
        assert_int_equal(r->optim, 400);
        assert_int_equal(r->act, 40);             /* kept across the forward */
        assert_int_equal(r->transient_fwd, 30);   /* the temporary above it */
        assert_int_equal(r->transient_bwd, 70);   /* the backward temporary above the start */
        assert_int_equal(r->micro_batch, 8);
        assert_true(r->fwd_ms == 2.0 && r->bwd_ms == 4.0);
        assert_int_equal(r->act_input, 64);
    }
    assert_int_equal(p.rows[0].param, 100);
    assert_int_equal(p.rows[0].act, 16);
    assert_int_equal(p.rows[3].param, 50);        /* relabelled to post when head ran */
    assert_int_equal(p.rows[3].act, 24);
    assert_int_equal(p.rows[3].transient_bwd, 10);
    /* the optimizer's 500-byte temporary shared out by parameter bytes (550 in all) */
    uint64_t opt = 0;
    for (int l = 0; l < 4; l++) opt += p.rows[l].transient_opt;
    assert_true(opt >= 497 && opt <= 500);
    assert_int_equal(p.rows[1].transient_opt, 500 * 200 / 550);
    /* peak: params 550 + grads 400 + state 800 + the 500 temporary (step 2) */
    assert_int_equal(p.peak, 550 + 400 + 800 + 500);
    assert_int_equal(p.global_batch, 8);
    ms_profile_free(&p);
    msb_trace_free(&t);
}

static void test_oom_and_the_uncapped_pass(void **state)
{
    (void)state;
    msb_trace t, u;
    msb_trace_init(&t);
    msb_trace_init(&u);
    one_step(&t, 1, 2);     /* dies in the forward of block 2 (layer 2) */
    one_step(&u, 2, 0);
    ms_profile p;
    int incomplete = 0;
    char err[256];
    msb_rows_opts o = { .capacity = 710, .model_name = "train.py" };
    /* without the uncapped pass: copies, and partial rows said so */
    if (msb_build_profile(&t, NULL, &o, &p, &incomplete, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(incomplete, 1);
    assert_false(p.fits);
    assert_true(p.oom.happened);
    assert_int_equal(p.oom.layer, 2);
    assert_string_equal(p.oom.layer_name, "h.1");
    assert_int_equal(p.oom.phase, MS_PH_FORWARD);
    assert_int_equal(p.oom.requested, 30);
    assert_int_equal(p.oom.category, MS_CAT_ACT);
    assert_int_equal(p.oom.capacity, 710);
    assert_string_equal(p.oom.what, "h.1.fc (Linear)");
    /* live then: params 550, layer 0's 16, block 1's 40 */
    assert_int_equal(p.oom.live_by_cat[MS_CAT_PARAM], 550);
    assert_int_equal(p.oom.live_by_cat[MS_CAT_ACT], 56);
    assert_int_equal(p.oom.n_live_layers, 4);
    assert_int_equal(p.oom.live_by_layer[1], 240);
    assert_int_equal(p.rows[2].source, MS_ROW_COPIED);
    ms_profile_free(&p);
    /* with it: every layer the trial did not complete comes from the second pass */
    if (msb_build_profile(&t, &u, &o, &p, &incomplete, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(incomplete, 0);
    for (int l = 0; l < 4; l++) assert_int_equal(p.rows[l].source, MS_ROW_UNCAPPED);
    assert_int_equal(p.rows[2].act, 40);
    assert_int_equal(p.rows[2].transient_bwd, 70);
    assert_string_equal(p.rows[3].name, "head");   /* named by the pass that got there */
    assert_true(p.oom.happened);
    ms_profile_free(&p);
    /* a trace with no model: a plain error */
    msb_trace e;
    msb_trace_init(&e);
    feed(&e, 1, "{\"ev\":\"hello\"}");
    assert_int_equal(msb_build_profile(&e, NULL, &o, &p, &incomplete, err, sizeof err), -1);
    assert_non_null(strstr(err, "never ran a training forward"));
    msb_trace_free(&e);
    msb_trace_free(&t);
    msb_trace_free(&u);
}

/* A GPU program in Lightning's order, with the caching allocator's counters
 * in every transition (peaks reset at each): training_step, then zero_grad,
 * then backward. One block (layers: 0 pre, 1 block, 2 post, 3 outside). In
 * step 2 the last step's gradients (350 bytes) are live through the forward
 * and zero_grad frees them inside the loss interval, after the loss's
 * 100-byte temporary: that temporary is the loss's transient, not 450. */
typedef struct gpu_trace { msb_trace *t; long live, peak; } gpu_trace;
static void g_alloc(gpu_trace *g, int k, int b, int c, int l)
{
    feed(g->t, 1, "{\"ev\":\"a\",\"d\":0,\"k\":%d,\"b\":%d,\"c\":%d,\"l\":%d,\"p\":1}", k, b, c, l);
    g->live += b;
    if (g->live > g->peak) g->peak = g->live;
}
static void g_free(gpu_trace *g, int k, int b)
{
    feed(g->t, 1, "{\"ev\":\"f\",\"d\":0,\"k\":%d}", k);
    g->live -= b;
}
static void g_where(gpu_trace *g, int l, int p, int xin, int xl)
{
    feed(g->t, 1, "{\"ev\":\"w\",\"l\":%d,\"p\":%d,\"alloc\":%ld,\"peak\":%ld,\"xin\":%d,\"xl\":%d,\"fp\":1}", l, p,
         g->live, g->peak, xin, xl);
    g->peak = g->live;
}

static void test_lightning_order_on_a_gpu(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    gpu_trace g = { &t, 0, 0 };
    feed(&t, 1, "{\"ev\":\"hello\",\"pid\":1}");
    feed(&t, 1, "{\"ev\":\"torch\",\"version\":\"2.11.0\",\"cuda\":true}");
    g_alloc(&g, 1, 100, MS_CAT_TRANSIENT, -1);
    g_alloc(&g, 2, 200, MS_CAT_TRANSIENT, -1);
    g_alloc(&g, 3, 50, MS_CAT_TRANSIENT, -1);
    feed(&t, 1, "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"h: ModuleList of 1 B\","
                "\"blocks\":[\"h.0\"],\"fingerprint\":\"fnv64:00000000000000bb\",\"precision\":\"fp32\","
                "\"device\":\"cuda:0\"}");
    R(&t, 1, MS_CAT_PARAM, 0);
    R(&t, 2, MS_CAT_PARAM, 1);
    R(&t, 3, MS_CAT_PARAM, 2);
    for (int s = 0; s < 2; s++) {
        int k = 100 * (s + 1);
        g_where(&g, 0, MS_PH_FORWARD, -1, -1);
        g_alloc(&g, k + 1, 16, MS_CAT_ACT, 0);
        g_where(&g, 1, MS_PH_FORWARD, 16, 0);
        g_alloc(&g, k + 2, 40, MS_CAT_ACT, 1);
        g_where(&g, 2, MS_PH_FORWARD, 40, 1);
        g_alloc(&g, k + 3, 24, MS_CAT_ACT, 2);               /* the logits */
        g_where(&g, 3, MS_PH_FORWARD, 24, 2);                /* the loss, outside the model */
        g_alloc(&g, k + 4, 100, MS_CAT_ACT, 3);              /* its temporary */
        g_alloc(&g, k + 5, 30, MS_CAT_ACT, 3);               /* what it saves */
        g_free(&g, k + 4, 100);
        if (s > 0) {                                         /* zero_grad, after training_step */
            g_free(&g, 1001, 100);
            g_free(&g, 1002, 200);
            g_free(&g, 1003, 50);
        }
        g_where(&g, 3, MS_PH_BACKWARD, -1, -1);
        g_alloc(&g, k + 6, 10, MS_CAT_TRANSIENT, 3);
        g_free(&g, k + 6, 10);
        g_where(&g, 2, MS_PH_BACKWARD, -1, -1);
        g_alloc(&g, 1003, 50, MS_CAT_TRANSIENT, 2);          /* gradients, labelled in the optimizer phase */
        g_free(&g, k + 3, 24);
        g_where(&g, 1, MS_PH_BACKWARD, -1, -1);
        g_alloc(&g, 1002, 200, MS_CAT_TRANSIENT, 1);
        g_free(&g, k + 2, 40);
        g_where(&g, 0, MS_PH_BACKWARD, -1, -1);
        g_alloc(&g, 1001, 100, MS_CAT_TRANSIENT, 0);
        g_free(&g, k + 1, 16);
        g_free(&g, k + 5, 30);
        g_where(&g, -1, MS_PH_OPTIMIZER, -1, -1);
        R(&t, 1001, MS_CAT_GRAD, 0);
        R(&t, 1002, MS_CAT_GRAD, 1);
        R(&t, 1003, MS_CAT_GRAD, 2);
        g_where(&g, -1, MS_PH_INIT, -1, -1);
        feed(&t, 1, "{\"ev\":\"step\",\"n\":%d,\"accum\":1,\"micro_batch\":4,\"intervals\":[]}", s + 1);
    }
    feed(&t, 1, "{\"ev\":\"done\",\"reason\":\"steps\"}");
    ms_profile p;
    int incomplete = 0;
    char err[256];
    msb_rows_opts o = { .capacity = 0, .model_name = "fit.py" };
    if (msb_build_profile(&t, NULL, &o, &p, &incomplete, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.grads_freed, MS_GRADS_FREED_BEFORE_BACKWARD);
    assert_true(p.loss.present);
    assert_int_equal(p.loss.made_in, 2);
    assert_int_equal(p.loss.outputs, 24);
    assert_int_equal(p.loss.held, 24 + 30);         /* the logits, still referenced, and what it saved */
    assert_int_equal(p.loss.transient_fwd, 100);   /* 450 when the freed gradients counted as its own */
    assert_int_equal(p.rows[1].grad, 200);
    ms_profile_free(&p);
    msb_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ledger_cap_and_labels),
        cmocka_unit_test(test_pick_layers),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_rows_from_a_trace),
        cmocka_unit_test(test_oom_and_the_uncapped_pass),
        cmocka_unit_test(test_lightning_order_on_a_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
