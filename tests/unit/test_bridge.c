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
#include "bridge/record.h"
#include "bridge/rows.h"
#include "bridge/steps.h"
#include "bridge/trace.h"
#include "planner/record_replay.h"

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
    uint64_t sum = msl_dev(&L, 2)->live;
    for (uint64_t k = 1; k <= 5000; k++) {
        assert_int_equal(msl_alloc(&L, 2, k * 16, k, MS_CAT_TRANSIENT, (int)(k % 7), NULL), MSL_OK);
        sum += k;
        if (k % 3 == 0) { sum -= msl_free(&L, (k - 1) * 16, NULL); }
    }
    assert_int_equal(L.dev[2].live, sum);
    msl_free_all(&L);
}

/* A record pass makes a device per layer: devices are made as they are
 * used, up to the last layer's, and one never used reads as zero. */
static void test_ledger_many_devices(void **state)
{
    (void)state;
    msl_ledger L;
    msl_init(&L);
    const int last = MSL_MAX_DEVICES - 1;
    assert_int_equal(msl_alloc(&L, last, 0x10, 700, MS_CAT_ACT, last, NULL), MSL_OK);
    assert_int_equal(msl_alloc(&L, 3, 0x20, 5, MS_CAT_PARAM, 3, NULL), MSL_OK);
    assert_int_equal(msl_dev(&L, last)->live, 700);
    assert_int_equal(msl_live_layer(&L, last, last), 700);
    assert_int_equal(msl_dev(&L, 3)->live_cat[MS_CAT_PARAM], 5);
    assert_int_equal(msl_dev(&L, 2000)->live, 0);          /* between them, never used */
    assert_int_equal(msl_dev(&L, 2000)->peak, 0);
    assert_null(msl_dev(&L, MSL_MAX_DEVICES));
    assert_null(msl_dev(&L, -1));
    /* a storage moved from the last device to the first (msb_move) */
    int dev = -1;
    assert_int_equal(msl_free(&L, 0x10, &dev), 700);
    assert_int_equal(dev, last);
    assert_int_equal(msl_alloc(&L, 0, 0x10, 700, MS_CAT_ACT, last, NULL), MSL_OK);
    assert_int_equal(msl_dev(&L, last)->live, 0);
    assert_int_equal(msl_dev(&L, last)->peak, 700);
    msl_reset_peak(&L, last);
    assert_int_equal(msl_dev(&L, last)->peak, 0);
    msl_reset_peak(&L, 2000);                                /* never used: nothing to reset */
    assert_int_equal(msl_set_capacity(&L, last, 10), 0);
    assert_int_equal(msl_alloc(&L, last, 0x30, 11, MS_CAT_ACT, 0, NULL), MSL_REFUSED);
    assert_int_equal(msl_set_capacity(&L, MSL_MAX_DEVICES, 10), -1);
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

/* units: the module paths of each unit, "|" between units, "," between a unit's modules */
static void units_text(const char *tree, const char *layers, char *out, size_t len, int *n_out)
{
    int unit_of[64];
    char why[512];
    int n = msb_pick_units(tree, layers, unit_of, 64, why, sizeof why);
    *n_out = n;
    out[0] = '\0';
    if (n <= 0) {
        snprintf(out, len, "%s", why);
        return;
    }
    /* the tree's paths, in its order */
    char *copy = strdup(tree), *save = NULL;
    const char *path[64];
    int k = 0;
    for (char *line = strtok_r(copy, "\n", &save); line && k < 64; line = strtok_r(NULL, "\n", &save), k++) {
        char *f = strchr(line, '\t');
        f = strchr(f + 1, '\t') + 1;
        *strchr(f, '\t') = '\0';
        path[k] = f;
    }
    for (int u = 0; u < n; u++) {
        int first = 1;
        for (int j = 0; j < k; j++) {
            if (unit_of[j] != u) continue;
            size_t used = strlen(out);
            snprintf(out + used, len - used, "%s%s", first ? (u ? "|" : "") : ",", path[j]);
            first = 0;
        }
    }
    free(copy);
}

static void test_pick_units(void **state)
{
    (void)state;
    char got[1024];
    int n;
    /* what holds little stays whole; three blocks of a quarter each are opened */
    units_text(ref_tree, "", got, sizeof got, &n);
    assert_string_equal(got, "segment1|transformers.0.0|transformers.0.1|transformers.1.0|transformers.1.1|"
                             "transformers.2.0|transformers.2.1|segment2");
    /* a ResNet: small stages whole, a big one opened into its blocks (the first differs), the
     * activation and the pooling join a neighbour */
    const char resnet[] = "0\t-1\t\tResNet\t0\t1000\tR\n"
                          "1\t0\tconv1\tConv2d\t0\t10\tc\n2\t0\tbn1\tBatchNorm2d\t0\t1\tb\n"
                          "3\t0\trelu\tReLU\t0\t0\tr\n4\t0\tmaxpool\tMaxPool2d\t0\t0\tm\n"
                          "5\t0\tlayer1\tSequential\t1\t50\tS1\n6\t5\tlayer1.0\tBottleneck\t0\t25\tB0\n"
                          "7\t5\tlayer1.1\tBottleneck\t0\t25\tB1\n"
                          "8\t0\tlayer3\tSequential\t1\t800\tS3\n9\t8\tlayer3.0\tBottleneck\t0\t170\tD\n"
                          "10\t8\tlayer3.1\tBottleneck\t0\t90\tE\n11\t8\tlayer3.2\tBottleneck\t0\t90\tE\n"
                          "12\t8\tlayer3.3\tBottleneck\t0\t90\tE\n13\t8\tlayer3.4\tBottleneck\t0\t90\tE\n"
                          "14\t8\tlayer3.5\tBottleneck\t0\t270\tF\n15\t14\tlayer3.5.conv\tConv2d\t0\t270\tc2\n"
                          "16\t0\tavgpool\tAdaptiveAvgPool2d\t0\t0\ta\n17\t0\tfc\tLinear\t0\t139\tf\n";
    units_text(resnet, "", got, sizeof got, &n);
    assert_string_equal(got, "conv1|bn1,relu,maxpool|layer1|layer3.0|layer3.1|layer3.2|layer3.3|layer3.4|"
                             "layer3.5|avgpool,fc");
    assert_int_equal(n, 10);
    /* a block opened into one unit (its linear and its activation) is that unit, named as
     * itself; one whose children are two units stays open */
    const char mlp[] = "0\t-1\t\tNet\t0\t100\tR\n1\t0\tbody\tSequential\t1\t100\tB\n"
                       "2\t1\tbody.0\tBlock\t0\t30\tK\n3\t2\tbody.0.fc\tLinear\t0\t30\tL\n"
                       "4\t2\tbody.0.act\tGELU\t0\t0\tG\n"
                       "5\t1\tbody.1\tBlock\t0\t40\tK2\n6\t5\tbody.1.fc\tLinear\t0\t40\tL2\n"
                       "7\t5\tbody.1.act\tGELU\t0\t0\tG\n"
                       "8\t1\tbody.2\tPair\t0\t30\tP\n9\t8\tbody.2.a\tLinear\t0\t15\tL3\n"
                       "10\t8\tbody.2.b\tLinear\t0\t15\tL3\n";
    units_text(mlp, "", got, sizeof got, &n);
    assert_string_equal(got, "body.0|body.1|body.2.a|body.2.b");
    /* what --layers opened stays open */
    units_text(mlp, "body.1", got, sizeof got, &n);
    assert_string_equal(got, "body.0|body.1.fc,body.1.act|body.2");
    /* nested Sequentials of few children: opened down to the blocks */
    const char nested[] = "0\t-1\t\tNet\t0\t120\tR\n1\t0\tbody\tSequential\t1\t120\tB\n"
                          "2\t1\tbody.0\tSequential\t1\t40\tS\n3\t2\tbody.0.0\tBlock\t0\t20\tK\n"
                          "4\t2\tbody.0.1\tBlock\t0\t20\tK\n"
                          "5\t1\tbody.1\tSequential\t1\t40\tS\n6\t5\tbody.1.0\tBlock\t0\t20\tK\n"
                          "7\t5\tbody.1.1\tBlock\t0\t20\tK\n"
                          "8\t1\tbody.2\tSequential\t1\t40\tS\n9\t8\tbody.2.0\tBlock\t0\t20\tK\n"
                          "10\t8\tbody.2.1\tBlock\t0\t20\tK\n";
    units_text(nested, "", got, sizeof got, &n);
    assert_string_equal(got, "body.0.0|body.0.1|body.1.0|body.1.1|body.2.0|body.2.1");
    /* no list at all: the root's children */
    const char flat[] = "0\t-1\t\tFlat\t0\t9\tR\n1\t0\tembed\tEmbedding\t0\t3\tE\n2\t0\ta\tLinear\t0\t3\tA\n"
                        "3\t0\tact\tReLU\t0\t0\tQ\n4\t0\thead\tLinear\t0\t3\tH\n";
    units_text(flat, "", got, sizeof got, &n);
    assert_string_equal(got, "embed|a,act|head");
    /* --layers: what it names is opened and its children are units, whatever their size */
    units_text(ref_tree, "transformers.1,segment2", got, sizeof got, &n);
    assert_string_equal(got, "segment1|transformers.0|transformers.1.0|transformers.1.1|transformers.2|"
                             "segment2.0|segment2.1");
    units_text(ref_tree, "nope", got, sizeof got, &n);
    assert_int_equal(n, -1);
    assert_non_null(strstr(got, "--layers nope: the model has no module at that path"));
    units_text(ref_tree, "segment1", got, sizeof got, &n);
    assert_int_equal(n, -1);
    assert_non_null(strstr(got, "has no children"));
    /* one module: nothing to split, said */
    units_text("0\t-1\t\tLinear\t0\t9\tR\n", "", got, sizeof got, &n);
    assert_int_equal(n, 0);
    assert_non_null(strstr(got, "nothing to split"));
    /* too many modules for the caller's array */
    int unit_of[2];
    char why[256];
    assert_int_equal(msb_pick_units(ref_tree, "", unit_of, 2, why, sizeof why), -1);
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
static void steps_of(msb_trace *t, int n_steps, int oom_in_block, int frozen_block);
static int survive_in_block;   /* a block whose forward sees an OOM the program goes on after */
static void one_step(msb_trace *t, int n_steps, int oom_in_block) { steps_of(t, n_steps, oom_in_block, 0); }

/* frozen_block (1 or 2): that block's parameters need no gradient and
 * nothing below it does, so backward never reaches it (frozen blocks under
 * the first trainable one): no backward interval, no gradient, no state */
static void steps_of(msb_trace *t, int n_steps, int oom_in_block, int frozen_block)
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
            if (b == survive_in_block && s == 0)   /* an OOM the program caught (cuDNN's workspace) */
                feed(t, 1, "{\"ev\":\"oom\",\"l\":%d,\"p\":1,\"module\":\"h.%d.conv\",\"type\":\"Conv2d\","
                           "\"requested\":12,\"source\":\"cuda\",\"free\":3,\"step\":1}", b, b - 1);
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
        for (int b = 2; b >= 1 + (frozen_block == 1); b--) {
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
            if (frozen_block != 1) R(t, 1001, MS_CAT_GRAD, 1);
            R(t, 1002, MS_CAT_GRAD, 2);
            if (frozen_block != 1) A(t, 2001, 400, MS_CAT_TRANSIENT, -1);   /* block 1's state */
            A(t, 2002, 400, MS_CAT_TRANSIENT, -1);
        }
        A(t, 3000 + s, 500, MS_CAT_TRANSIENT, -1);  /* foreach temporary */
        F(t, 3000 + s);
        if (frozen_block != 1) R(t, 2001, MS_CAT_OPTIM, 1);
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

/* A block that ran its forward in a whole step and no backward (frozen,
 * below every trainable one) is measured so, not copied from its twin: no
 * gradient, no state, no backward temporaries; and nothing is partial. */
static void test_frozen_block_measured(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    steps_of(&t, 2, 0, 1);
    ms_profile p;
    int partial = -1;
    char why[256];
    const msb_rows_opts uncapped = { .model_name = "frozen.py" };
    if (msb_build_profile(&t, NULL, &uncapped, &p, &partial, why, sizeof why)) fail_msg("%s", why);
    assert_int_equal(partial, 0);
    assert_int_equal(p.rows[1].source, MS_ROW_FULL);
    assert_int_equal(p.rows[1].param, 200);
    assert_int_equal(p.rows[1].grad, 0);
    assert_int_equal(p.rows[1].optim, 0);
    assert_int_equal(p.rows[1].transient_bwd, 0);
    assert_int_equal(p.rows[1].act, 40);
    assert_int_equal(p.rows[2].source, MS_ROW_FULL);     /* its twin, trained, as before */
    assert_int_equal(p.rows[2].grad, 200);
    assert_int_equal(p.rows[2].optim, 400);
    assert_int_equal(p.rows[2].transient_bwd, 70);
    ms_profile_free(&p);
    msb_trace_free(&t);
}

/* The program caught an OOM in block 1 and went on (as cuDNN does when a
 * workspace is refused) to die in block 2: the diagnosis is of the last,
 * with what was live then, and the one survived is a warning. One caught
 * in a step that ends is no OOM at all. */
static void test_oom_survived(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    survive_in_block = 1;
    one_step(&t, 1, 2);
    survive_in_block = 0;
    feed(&t, 2, "{\"ev\":\"oom\",\"l\":1,\"p\":1,\"module\":\"x\",\"requested\":5}");   /* another process's */
    assert_int_equal(t.oom.survived, 1);
    assert_non_null(strstr(t.warnings, "caught an out-of-memory (12 bytes asked in h.0.conv)"));
    ms_profile p;
    int incomplete = 0;
    char err[256];
    msb_rows_opts o = { .capacity = 710, .model_name = "train.py" };
    if (msb_build_profile(&t, NULL, &o, &p, &incomplete, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.oom.layer, 2);
    assert_int_equal(p.oom.requested, 30);
    assert_string_equal(p.oom.what, "h.1.fc (Linear)");
    assert_int_equal(p.oom.category, MS_CAT_ACT);
    assert_int_equal(p.oom.live_by_cat[MS_CAT_ACT], 56);   /* at the last: block 1's 40 kept too */
    assert_int_equal(p.oom.live_by_layer[1], 240);
    ms_profile_free(&p);
    msb_trace_free(&t);
    /* one caught in a step that then ended: no OOM, the program fits */
    msb_trace_init(&t);
    survive_in_block = 2;
    one_step(&t, 2, 0);
    survive_in_block = 0;
    assert_false(t.oom.happened);
    assert_int_equal(t.oom.survived, 1);
    assert_non_null(strstr(t.warnings, "(12 bytes asked in h.1.conv) and went on"));
    if (msb_build_profile(&t, NULL, &o, &p, &incomplete, err, sizeof err)) fail_msg("%s", err);
    assert_true(p.fits);
    assert_false(p.oom.happened);
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

/* On a GPU a step's intervals and loss come a step later (stepdata): they
 * fill the step they name, once, from the training process only, and the
 * caller hears of them. */
static void test_late_step_data(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    feed(&t, 1, "{\"ev\":\"hello\",\"pid\":1}");
    feed(&t, 1, "{\"ev\":\"model\",\"root\":\"M\",\"blocks\":[\"a\",\"b\"],\"sigs\":[\"x\",\"x\"],\"fingerprint\":\"f\"}");
    feed(&t, 1, "{\"ev\":\"step\",\"n\":1,\"intervals\":null,\"loss\":null,\"late\":true}");
    feed(&t, 1, "{\"ev\":\"step\",\"n\":2,\"intervals\":null,\"loss\":null,\"late\":true}");
    assert_int_equal(t.n_steps, 2);
    assert_true(t.steps[0].late);
    assert_false(t.steps[0].has_loss);
    assert_int_equal(t.steps[0].n_iv, 0);
    /* another process's, a step that is not there, garbage: nothing */
    feed(&t, 2, "{\"ev\":\"stepdata\",\"n\":1,\"intervals\":[[0,1,9.0]],\"loss\":9.0}");
    feed(&t, 1, "{\"ev\":\"stepdata\",\"n\":7,\"intervals\":[[0,1,9.0]],\"loss\":9.0}");
    feed(&t, 1, "{\"ev\":\"stepdata\",\"n\":\"x\",\"intervals\":7,\"loss\":[]}");
    assert_int_equal(t.n_stepdata, 0);
    assert_true(t.steps[0].late);
    feed(&t, 1, "{\"ev\":\"stepdata\",\"n\":1,\"intervals\":[[0,1,1.5],[1,1,2.5],[-1,3,0.5]],\"loss\":2.25}");
    assert_int_equal(t.n_stepdata, 1);
    assert_false(t.steps[0].late);
    assert_true(t.steps[0].has_loss);
    assert_true(t.steps[0].loss == 2.25);
    assert_int_equal(t.steps[0].n_iv, 3);
    assert_int_equal(t.steps[0].iv[1].layer, 1);
    assert_true(t.steps[0].iv[1].ms == 2.5);
    /* a second stepdata for the same step changes nothing */
    feed(&t, 1, "{\"ev\":\"stepdata\",\"n\":1,\"intervals\":[[0,1,7.0]],\"loss\":7.0}");
    assert_int_equal(t.n_stepdata, 1);
    assert_true(t.steps[0].loss == 2.25);
    assert_int_equal(t.steps[0].n_iv, 3);
    assert_true(t.steps[1].late);
    msb_trace_free(&t);
}

/* The record pass's trace (each layer a stage: device d is layer d) into a
 * record: a storage moved to its stage is two storages, a crossing links
 * its copy to what it copied, the peaks count from the placement and the
 * record ends at the last step. */
static void test_record_from_a_pass(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    feed(&t, 1, "{\"ev\":\"hello\",\"pid\":1}");
    feed(&t, 1, "{\"ev\":\"torch\",\"version\":\"1.13.0\",\"cuda\":false}");
    A(&t, 1, 100, MS_CAT_TRANSIENT, -1);             /* a weight, made on the root */
    feed(&t, 1, "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"h\",\"blocks\":[\"h.0\",\"h.1\"],"
               "\"fingerprint\":\"fnv64:00000000000000aa\",\"precision\":\"fp32\",\"device\":\"cpu\"}");
    R(&t, 1, MS_CAT_PARAM, 1);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":1,\"k\":1,\"b\":100,\"c\":0,\"l\":1,\"p\":0}");   /* placed on stage 1 */
    feed(&t, 1, "{\"ev\":\"placed\"}");
    A(&t, 2, 50, MS_CAT_ACT, 0);                    /* the root's input */
    W(&t, 1, MS_PH_FORWARD);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":1,\"k\":3,\"b\":50,\"c\":5,\"l\":1,\"p\":1}");
    feed(&t, 1, "{\"ev\":\"c\",\"k\":3,\"o\":2}");  /* 3 is 2's copy on stage 1 */
    feed(&t, 1, "{\"ev\":\"c\",\"k\":2,\"o\":3}");  /* backwards in time: no copy */
    feed(&t, 1, "{\"ev\":\"c\",\"k\":9,\"o\":2}");  /* of nothing live: ignored */
    F(&t, 2);
    W(&t, 2, MS_PH_FORWARD);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":2,\"k\":4,\"b\":10,\"c\":5,\"l\":2,\"p\":1}");
    F(&t, 4);
    feed(&t, 1, "{\"ev\":\"step\",\"n\":1,\"accum\":1,\"micro_batch\":8}");
    feed(&t, 1, "{\"ev\":\"a\",\"d\":3,\"k\":5,\"b\":7,\"c\":5,\"l\":3,\"p\":1}");   /* after the last step */
    feed(&t, 1, "{\"ev\":\"done\",\"reason\":\"steps\"}");
    ms_prog_record *r = NULL;
    char err[256];
    assert_int_equal(msb_build_record(&t, 4, &r, err, sizeof err), 0);
    assert_int_equal(r->n, 5);
    assert_int_equal(r->n_layers, 4);
    assert_int_equal(r->t_from, 2);
    assert_int_equal(r->t_end, 7);
    /* the weight on the root until it moved, then on stage 1 to the end, a parameter both times */
    assert_int_equal(r->s[0].layer, 0);
    assert_int_equal(r->s[0].t_free, 1);
    assert_int_equal(r->s[0].cat, MS_CAT_PARAM);
    assert_int_equal(r->s[1].layer, 1);
    assert_true(r->s[1].t_free == MS_REC_NEVER);
    assert_int_equal(r->s[2].copy_of, -1);
    assert_int_equal(r->s[2].t_free, 4);
    assert_int_equal(r->s[3].copy_of, 2);
    assert_int_equal(r->s[3].layer, 1);
    assert_true(r->s[3].t_free == MS_REC_NEVER);
    assert_int_equal(r->s[4].layer, 2);
    assert_int_equal(r->s[4].t_alloc, 5);
    assert_int_equal(r->s[4].t_free, 6);
    /* what ran when: block 1's forward from position 3, block 2's from 5 to the end */
    assert_int_equal(r->n_moments, 2);
    assert_int_equal(r->m[0].layer, 1);
    assert_int_equal(r->m[0].phase, MS_PH_FORWARD);
    assert_int_equal(r->m[0].t_begin, 3);
    assert_int_equal(r->m[0].t_end, 5);
    assert_int_equal(r->m[1].t_begin, 5);
    assert_int_equal(r->m[1].t_end, 7);
    /* an OOM's lesson: 1000 bytes more on the root at every position, first, the copies' links kept */
    assert_int_equal(msb_record_hold(r, 0, MS_CAT_ACT, 1000), 0);
    assert_int_equal(r->n, 6);
    assert_int_equal(r->s[0].bytes, 1000);
    assert_int_equal(r->s[0].t_alloc, 0);
    assert_true(r->s[0].t_free == MS_REC_NEVER);
    assert_int_equal(r->s[4].copy_of, 3);
    assert_int_equal(r->s[3].bytes, 50);
    assert_int_equal(msb_record_hold(r, 4, MS_CAT_ACT, 1), -1);    /* no such layer */
    ms_prog_record_free(r);
    /* a device that is no layer: no record */
    assert_int_equal(msb_build_record(&t, 2, &r, err, sizeof err), -1);
    assert_null(r);
    assert_non_null(strstr(err, "stage"));
    msb_trace_free(&t);
    /* transitions up to the layer after the model's forward (4 layers: up to 4), and past it: no record */
    for (int past = 0; past <= 1; past++) {
        msb_trace_init(&t);
        feed(&t, 1, "{\"ev\":\"hello\",\"pid\":1}");
        feed(&t, 1, "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"h\",\"blocks\":[\"h.0\",\"h.1\"],"
                   "\"fingerprint\":\"fnv64:00000000000000aa\",\"precision\":\"fp32\",\"device\":\"cpu\"}");
        feed(&t, 1, "{\"ev\":\"placed\"}");
        W(&t, 1, MS_PH_FORWARD);
        A(&t, 1, 100, MS_CAT_ACT, 1);
        W(&t, 4 + past, MS_PH_FORWARD);
        A(&t, 2, 100, MS_CAT_ACT, 1);
        feed(&t, 1, "{\"ev\":\"step\",\"n\":1,\"accum\":1,\"micro_batch\":8}");
        feed(&t, 1, "{\"ev\":\"done\",\"reason\":\"steps\"}");
        assert_int_equal(msb_build_record(&t, 4, &r, err, sizeof err), past ? -1 : 0);
        if (past) assert_non_null(strstr(err, "layer 5"));
        else assert_int_equal(r->n_moments, 2);
        ms_prog_record_free(r);
        r = NULL;
        msb_trace_free(&t);
    }
    /* never placed: no record */
    msb_trace_init(&t);
    one_step(&t, 1, 0);
    assert_int_equal(msb_build_record(&t, 4, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "placed"));
    msb_trace_free(&t);
}

/* A module whose outputs the pass copied back to its caller, where only one
 * crossing read each copy, is handed on: its copies and the gradient copies
 * that answer them are left out, what they copied lives as long as they did,
 * and a copy of one is a copy of what it copied. A module something else
 * read the copy of (`nh`), or one with a copy the record cannot link, is
 * not; a bad `ho` or `nh` is a bad line. */
static void test_record_hands_on(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    feed(&t, 1, "{\"ev\":\"hello\",\"pid\":1}");
    feed(&t, 1, "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"h\",\"blocks\":[\"h.0\",\"h.1\"],"
               "\"fingerprint\":\"fnv64:00000000000000aa\",\"precision\":\"fp32\",\"device\":\"cpu\"}");
    feed(&t, 1, "{\"ev\":\"placed\"}");
    feed(&t, 1, "{\"ev\":\"ho\",\"id\":0,\"module\":\"h.0\"}");
    feed(&t, 1, "{\"ev\":\"ho\",\"id\":1,\"module\":\"h.1\"}");
    feed(&t, 1, "{\"ev\":\"ho\",\"id\":3,\"module\":\"h.3\"}");       /* not the next id */
    feed(&t, 1, "{\"ev\":\"ho\",\"id\":2,\"module\":\"h.0\"}");       /* a module said twice */
    feed(&t, 1, "{\"ev\":\"ho\",\"id\":2,\"module\":\"\"}");          /* no module path */
    feed(&t, 1, "{\"ev\":\"nh\",\"id\":7}");                          /* no such module */
    feed(&t, 1, "{\"ev\":\"c\",\"k\":3,\"o\":2,\"h\":5000}");         /* past MS_REC_MAX_HANDED_ON */
    assert_int_equal(t.bad_lines, 5);
    assert_int_equal(t.n_hops, 2);
    feed(&t, 1, "{\"ev\":\"ho\",\"id\":2,\"module\":\"h.2\"}");       /* one copy it cannot link */
    W(&t, 1, MS_PH_FORWARD);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":1,\"k\":10,\"b\":50,\"c\":5,\"l\":1,\"p\":1}");   /* 0: h.0's output */
    W(&t, 0, MS_PH_FORWARD);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":0,\"k\":11,\"b\":50,\"c\":5,\"l\":0,\"p\":1}");   /* 1: back to the caller */
    feed(&t, 1, "{\"ev\":\"c\",\"k\":11,\"o\":10,\"h\":0}");
    feed(&t, 1, "{\"ev\":\"c\",\"k\":99,\"o\":10,\"h\":2}");                           /* of nothing live */
    W(&t, 2, MS_PH_FORWARD);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":2,\"k\":12,\"b\":50,\"c\":5,\"l\":2,\"p\":1}");   /* 2: into h.1 */
    feed(&t, 1, "{\"ev\":\"c\",\"k\":12,\"o\":11}");
    feed(&t, 1, "{\"ev\":\"a\",\"d\":2,\"k\":13,\"b\":30,\"c\":5,\"l\":2,\"p\":1}");   /* 3: h.1's output */
    W(&t, 0, MS_PH_FORWARD);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":0,\"k\":14,\"b\":30,\"c\":5,\"l\":0,\"p\":1}");   /* 4: back, read there */
    feed(&t, 1, "{\"ev\":\"c\",\"k\":14,\"o\":13,\"h\":1}");
    feed(&t, 1, "{\"ev\":\"nh\",\"id\":1}");
    F(&t, 12);
    W(&t, 2, MS_PH_BACKWARD);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":2,\"k\":20,\"b\":50,\"c\":4,\"l\":2,\"p\":2}");   /* 5: 12's gradient */
    W(&t, 0, MS_PH_BACKWARD);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":0,\"k\":21,\"b\":50,\"c\":4,\"l\":0,\"p\":2}");   /* 6: to 11 */
    feed(&t, 1, "{\"ev\":\"c\",\"k\":21,\"o\":20,\"h\":0}");
    W(&t, 1, MS_PH_BACKWARD);
    feed(&t, 1, "{\"ev\":\"a\",\"d\":1,\"k\":22,\"b\":50,\"c\":4,\"l\":1,\"p\":2}");   /* 7: to 10 */
    feed(&t, 1, "{\"ev\":\"c\",\"k\":22,\"o\":21}");
    F(&t, 20);
    F(&t, 21);
    F(&t, 10);
    F(&t, 22);
    F(&t, 11);
    feed(&t, 1, "{\"ev\":\"step\",\"n\":1,\"accum\":1,\"micro_batch\":8}");
    feed(&t, 1, "{\"ev\":\"done\",\"reason\":\"steps\"}");
    assert_int_equal(t.bad_lines, 5);
    assert_true(t.hops[1].read && !t.hops[0].read);
    ms_prog_record *r = NULL;
    char err[256];
    assert_int_equal(msb_build_record(&t, 4, &r, err, sizeof err), 0);
    assert_int_equal(r->n_handed_on, 1);
    assert_string_equal(r->handed_on[0], "h.0");
    /* 10, 12, 13, 14, 20, 22: h.0's copies (11 and 21) are gone */
    assert_int_equal(r->n, 6);
    uint64_t want_bytes[6] = { 50, 50, 30, 30, 50, 50 };
    int want_layer[6] = { 1, 2, 2, 0, 2, 1 }, want_copy[6] = { -1, 0, -1, 2, -1, 4 };
    for (int i = 0; i < 6; i++) {
        assert_int_equal(r->s[i].bytes, want_bytes[i]);
        assert_int_equal(r->s[i].layer, want_layer[i]);
        assert_int_equal(r->s[i].copy_of, want_copy[i]);
    }
    /* 10 lives until 11 was freed (the caller held 11); 20 until 21 was */
    assert_int_equal(r->s[0].t_free, 13);
    assert_int_equal(r->s[4].t_free, 10);
    char e2[256];
    assert_int_equal(ms_record_check(r, e2, sizeof e2), 0);
    ms_prog_record_free(r);
    msb_trace_free(&t);
}

/* The units in the order the program first called them (event `order`):
 * every layer field of the trace follows, and the units' names and
 * signatures; layers 0 and n + 1 stay. An order that is no permutation of
 * the units is a bad line, and renumbering by one changes nothing. */
static void test_units_in_call_order(void **state)
{
    (void)state;
    msb_trace t;
    msb_trace_init(&t);
    feed(&t, 1, "{\"ev\":\"hello\",\"pid\":1}");
    feed(&t, 1, "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"h\",\"blocks\":[\"h.0\",\"h.1\",\"h.2\"],"
               "\"sigs\":[\"a\",\"b\",\"c\"],\"fingerprint\":\"fnv64:00000000000000aa\",\"precision\":\"fp32\","
               "\"device\":\"cpu\"}");
    feed(&t, 1, "{\"ev\":\"order\",\"units\":[3,2]}");          /* too short */
    feed(&t, 1, "{\"ev\":\"order\",\"units\":[3,3,1]}");        /* not a permutation */
    feed(&t, 1, "{\"ev\":\"order\",\"units\":[3,2,\"1\"]}");    /* not a layer */
    assert_int_equal(t.bad_lines, 3);
    assert_null(t.order);
    W(&t, 3, MS_PH_FORWARD);
    A(&t, 1, 100, MS_CAT_ACT, 3);
    W(&t, 2, MS_PH_FORWARD);
    A(&t, 2, 50, MS_CAT_ACT, 2);
    W(&t, 4, MS_PH_FORWARD);
    feed(&t, 1, "{\"ev\":\"w\",\"l\":1,\"p\":2,\"alloc\":-1,\"peak\":-1,\"xin\":8,\"xl\":3}");
    feed(&t, 1, "{\"ev\":\"oom\",\"l\":2,\"p\":1,\"module\":\"h.1.fc\",\"type\":\"Linear\",\"requested\":8,"
               "\"message\":\"m\",\"source\":\"cap\"}");
    feed(&t, 1, "{\"ev\":\"step\",\"n\":1,\"accum\":1,\"micro_batch\":8,\"intervals\":[[3,1,1.5],[0,1,0.5]]}");
    feed(&t, 1, "{\"ev\":\"order\",\"units\":[3,2,1]}");
    feed(&t, 1, "{\"ev\":\"order\",\"units\":[1,2,3]}");        /* said once: the first stays */
    assert_int_equal(t.bad_lines, 3);
    assert_non_null(t.order);
    assert_int_equal(msb_trace_in_call_order(&t, (int[]){ 1, 1, 2 }, 3), -1);
    assert_int_equal(msb_trace_in_call_order(&t, (int[]){ 1, 2 }, 2), -1);
    assert_string_equal(t.blocks[0], "h.0");
    assert_int_equal(msb_trace_in_call_order(&t, t.order, t.n_order), 0);
    assert_string_equal(t.blocks[0], "h.2");
    assert_string_equal(t.blocks[1], "h.1");
    assert_string_equal(t.blocks[2], "h.0");
    assert_string_equal(t.sigs[0], "c");
    /* layer 3 is now 1, 2 stays 2, 1 is now 3; 4 (after the units) stays */
    int want[] = { 1, 1, 2, 2, 4, 3 };
    int k = 0;
    for (int i = 0; i < t.n_ev; i++)
        if (t.ev[i].kind == MSB_EV_WHERE || t.ev[i].kind == MSB_EV_ALLOC) {
            assert_true(k < 6);
            assert_int_equal(t.ev[i].m.layer, want[k++]);
        }
    assert_int_equal(k, 6);
    int xl = -1;
    for (int i = 0; i < t.n_ev; i++)
        if (t.ev[i].kind == MSB_EV_WHERE && t.ev[i].m.phase == MS_PH_BACKWARD) xl = t.ev[i].xl;
    assert_int_equal(xl, 1);
    assert_int_equal(t.oom.layer, 2);
    assert_int_equal(t.steps[0].iv[0].layer, 1);
    assert_int_equal(t.steps[0].iv[1].layer, 0);
    msb_trace_free(&t);
}

static void gpu_model(msb_trace *t)   /* a program of two blocks on a GPU, conn 1 */
{
    feed(t, 1, "{\"ev\":\"hello\",\"pid\":1}");
    feed(t, 1, "{\"ev\":\"model\",\"root\":\"M\",\"list\":\"h\",\"why\":\"h\",\"blocks\":[\"h.0\",\"h.1\"],"
              "\"fingerprint\":\"fnv64:00000000000000aa\",\"precision\":\"fp32\",\"device\":\"cuda:0\"}");
}

/* What the allocator held beyond the pass's storages when its last step
 * ended: a storage moved or freed counts once, another process's events
 * not at all, a transition with no count (the CPU) says nothing. */
static void test_record_untracked(void **state)
{
    (void)state;
    msb_trace t;
    uint64_t b = 7;
    for (int cpu = 0; cpu <= 1; cpu++) {
        msb_trace_init(&t);
        gpu_model(&t);
        feed(&t, 2, "{\"ev\":\"hello\",\"pid\":2}");
        A(&t, 1, 1000, MS_CAT_PARAM, 1);
        feed(&t, 1, "{\"ev\":\"a\",\"d\":1,\"k\":1,\"b\":1000,\"c\":0,\"l\":1,\"p\":0}");   /* moved */
        feed(&t, 2, "{\"ev\":\"a\",\"d\":0,\"k\":9,\"b\":5000,\"c\":5,\"l\":1,\"p\":1}"); /* a worker's */
        A(&t, 2, 300, MS_CAT_ACT, 1);
        feed(&t, 1, "{\"ev\":\"w\",\"l\":1,\"p\":1,\"alloc\":%d,\"peak\":-1,\"xin\":-1}", cpu ? -1 : 1300 + 4096);
        F(&t, 2);
        feed(&t, 1, "{\"ev\":\"w\",\"l\":-1,\"p\":3,\"alloc\":%d,\"peak\":-1,\"xin\":-1}", cpu ? -1 : 1000 + 8192);
        feed(&t, 1, "{\"ev\":\"step\",\"n\":1,\"accum\":1,\"micro_batch\":8}");
        A(&t, 3, 64, MS_CAT_ACT, 1);   /* after the last step */
        feed(&t, 1, "{\"ev\":\"w\",\"l\":1,\"p\":1,\"alloc\":%d,\"peak\":-1,\"xin\":-1}", cpu ? -1 : 99999);
        feed(&t, 1, "{\"ev\":\"done\",\"reason\":\"steps\"}");
        b = 7;
        if (cpu) {
            assert_int_equal(msb_record_untracked(&t, &b), -1);
        } else {
            assert_int_equal(msb_record_untracked(&t, &b), 0);
            assert_int_equal(b, 8192);
        }
        msb_trace_free(&t);
    }
    /* more tracked than the allocator counts (a free never said): none, not a negative */
    msb_trace_init(&t);
    gpu_model(&t);
    A(&t, 1, 1000, MS_CAT_ACT, 1);
    feed(&t, 1, "{\"ev\":\"w\",\"l\":-1,\"p\":3,\"alloc\":512,\"peak\":-1,\"xin\":-1}");
    feed(&t, 1, "{\"ev\":\"step\",\"n\":1,\"accum\":1,\"micro_batch\":8}");
    assert_int_equal(msb_record_untracked(&t, &b), 0);
    assert_int_equal(b, 0);
    msb_trace_free(&t);
    /* no step: unknown */
    msb_trace_init(&t);
    gpu_model(&t);
    feed(&t, 1, "{\"ev\":\"w\",\"l\":-1,\"p\":3,\"alloc\":4096,\"peak\":-1,\"xin\":-1}");
    assert_int_equal(msb_record_untracked(&t, &b), -1);
    msb_trace_free(&t);
}

/* A batch line (msb_replay's event m) is the events of its own lines, in
 * order; one that does not hold together is a bad line. */
static void test_batch_line(void **state)
{
    (void)state;
    msb_trace one, many;
    msb_trace_init(&one);
    msb_trace_init(&many);
    feed(&one, 1, "{\"ev\":\"a\",\"t\":5,\"d\":0,\"k\":4096,\"b\":512,\"c\":5,\"l\":2,\"p\":1}");
    feed(&one, 1, "{\"ev\":\"r\",\"k\":4096,\"c\":3,\"l\":-1,\"p\":1}");
    feed(&one, 1, "{\"ev\":\"f\",\"t\":9,\"d\":0,\"k\":4096,\"p\":1}");
    feed(&many, 1, "{\"ev\":\"m\",\"p\":1,\"o\":\"arf\",\"t\":[5,0,9],\"k\":[4096,4096,4096],\"b\":[512,0,0],"
                   "\"c\":[5,3,0],\"l\":[2,-1,0]}");
    assert_int_equal(many.n_ev, 3);
    assert_int_equal(one.n_ev, 3);
    for (int i = 0; i < 3; i++) {
        const msb_ev *x = &one.ev[i], *y = &many.ev[i];
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->m.address, y->m.address);
        assert_int_equal(x->m.bytes, y->m.bytes);
        assert_int_equal(x->m.kind, y->m.kind);
        assert_int_equal(x->m.phase, y->m.phase);
        assert_true(x->m.t_us == y->m.t_us);
        if (x->kind != MSB_EV_FREE) {
            assert_int_equal(x->m.category, y->m.category);
            assert_int_equal(x->m.layer, y->m.layer);
        }
    }
    assert_int_equal(many.bad_lines, 0);
    for (int i = 0; i < 3; i++) assert_int_equal(many.ev[i].m.device, 0);
    /* a batch of a plan's stages: each event on its own device, as its own line says */
    feed(&one, 1, "{\"ev\":\"a\",\"t\":11,\"d\":1,\"k\":8192,\"b\":256,\"c\":2,\"l\":3,\"p\":3}");
    feed(&one, 1, "{\"ev\":\"a\",\"t\":11,\"d\":0,\"k\":12288,\"b\":128,\"c\":3,\"l\":0,\"p\":3}");
    feed(&many, 1, "{\"ev\":\"m\",\"p\":3,\"o\":\"aa\",\"t\":[11,11],\"k\":[8192,12288],\"b\":[256,128],"
                   "\"c\":[2,3],\"l\":[3,0],\"d\":[1,0]}");
    assert_int_equal(many.n_ev, 5);
    for (int i = 3; i < 5; i++) {
        assert_int_equal(one.ev[i].m.device, many.ev[i].m.device);
        assert_int_equal(one.ev[i].m.address, many.ev[i].m.address);
        assert_int_equal(one.ev[i].m.bytes, many.ev[i].m.bytes);
        assert_int_equal(one.ev[i].m.layer, many.ev[i].m.layer);
    }
    assert_int_equal(many.ev[3].m.device, 1);
    assert_int_equal(many.bad_lines, 0);
    /* arrays of another length, a missing one, an op that is no ledger event, bytes past any device,
     * devices of another length */
    feed(&many, 1, "{\"ev\":\"m\",\"p\":1,\"o\":\"aa\",\"t\":[1],\"k\":[1,2],\"b\":[1,2],\"c\":[1,2],\"l\":[1,2]}");
    feed(&many, 1, "{\"ev\":\"m\",\"p\":1,\"o\":\"a\",\"t\":[1],\"k\":[1],\"b\":[1],\"c\":[1]}");
    feed(&many, 1, "{\"ev\":\"m\",\"p\":1,\"o\":\"xa\",\"t\":[1,2],\"k\":[1,2],\"b\":[1,2],\"c\":[1,2],\"l\":[1,2]}");
    feed(&many, 1, "{\"ev\":\"m\",\"p\":1,\"o\":\"a\",\"t\":[1],\"k\":[3],\"b\":[1e300],\"c\":[1],\"l\":[1]}");
    feed(&many, 1, "{\"ev\":\"m\",\"p\":1,\"o\":\"a\",\"t\":[1],\"k\":[3],\"b\":[1],\"c\":[1],\"l\":[1],\"d\":[0,1]}");
    assert_int_equal(many.bad_lines, 5);
    assert_int_equal(many.n_ev, 6);                     /* the 'a' after the 'x' */
    msb_trace_free(&one);
    msb_trace_free(&many);
}

/* A fresh trace of a model whose units are blocks (a JSON list's items). */
static void trace_of_units(msb_trace *t, const char *blocks)
{
    msb_trace_init(t);
    feed(t, 1, "{\"ev\":\"model\",\"root\":\"M\",\"blocks\":[%s],\"fingerprint\":\"fnv64:00000000000000aa\","
               "\"precision\":\"fp32\",\"device\":\"cpu\"}", blocks);
}

/* A step that runs `ran` (a string of unit numbers, "123"), forward then
 * backward, then a validation forward of unit 3, then its step event. */
static void step_running(msb_trace *t, int n, const char *ran)
{
    for (const char *c = ran; *c; c++) W(t, *c - '0', MS_PH_FORWARD);
    for (const char *c = ran + strlen(ran); c > ran; c--) W(t, c[-1] - '0', MS_PH_BACKWARD);
    W(t, -1, MS_PH_OPTIMIZER);
    W(t, 3, MS_PH_VALIDATION);
    feed(t, 1, "{\"ev\":\"step\",\"n\":%d,\"accum\":1,\"micro_batch\":8}", n);
}

/* Units that ran in some steps and not others (LayerDrop) are named; a
 * validation forward, a step cut short (an OOM) and another process's
 * steps are not steps of the program's training. */
static void test_units_not_every_step(void **state)
{
    (void)state;
    msb_trace t;
    trace_of_units(&t, "\"layers.0\",\"layers.1\",\"layers.2\",\"layers.3\"");
    char out[64];
    step_running(&t, 1, "1234");
    assert_int_equal(msb_units_not_every_step(&t, out, sizeof out), 0);   /* one step: nothing to compare */
    step_running(&t, 2, "124");             /* unit 3 skipped; its validation forward is no training */
    step_running(&t, 3, "1234");
    assert_int_equal(msb_units_not_every_step(&t, out, sizeof out), 1);
    assert_string_equal(out, "layers.2");
    step_running(&t, 4, "34");
    W(&t, 1, MS_PH_FORWARD);                /* a step cut short: no step event */
    feed(&t, 2, "{\"ev\":\"w\",\"l\":2,\"p\":1}");     /* another process */
    feed(&t, 2, "{\"ev\":\"step\",\"n\":5}");
    assert_int_equal(msb_units_not_every_step(&t, out, sizeof out), 3);
    assert_string_equal(out, "layers.0, layers.1, layers.2");
    assert_int_equal(msb_units_not_every_step(&t, out, 20), 3);          /* cut to fit */
    assert_string_equal(out, "layers.0, ...");
    assert_int_equal(msb_units_not_every_step(&t, out, 4), 3);
    assert_string_equal(out, "...");
    msb_trace_free(&t);
}

#define WX(t, l, x) feed(t, 1, "{\"ev\":\"w\",\"l\":%d,\"p\":1,\"alloc\":-1,\"peak\":-1,\"xin\":%d}", l, x)

/* Units whose inputs change size between steps (sequences of varying
 * length) are counted; the one that changed by the most bytes is named,
 * with its smallest and largest step (a unit called twice in a step: its
 * larger input). A step an OOM cut short, a validation pass and a forward
 * call with no input said (-1) are not compared. */
static void test_unit_inputs_differ(void **state)
{
    (void)state;
    msb_trace t;
    trace_of_units(&t, "\"emb\",\"rnn\",\"head\"");
    char name[8];
    uint64_t lo = 1, hi = 1;
    const int rnn[3][2] = { { 100, -1 }, { 150, 40 }, { 90, 120 } }, head[3] = { 10, 20, 10 };
    for (int s = 0; s < 3; s++) {
        WX(&t, 1, 64);
        for (int k = 0; k < 2; k++)
            if (rnn[s][k] != -1) WX(&t, 2, rnn[s][k]);
        WX(&t, 2, -1);                      /* a call whose inputs were not said */
        WX(&t, 3, head[s]);
        feed(&t, 1, "{\"ev\":\"w\",\"l\":2,\"p\":4,\"xin\":9999}");   /* validation */
        feed(&t, 1, "{\"ev\":\"step\",\"n\":%d,\"accum\":1,\"micro_batch\":8}", s + 1);
        if (s == 0) {
            assert_int_equal(msb_unit_inputs_differ(&t, name, sizeof name, &lo, &hi), 0);
            assert_true(lo == 0 && hi == 0 && name[0] == '\0');
        }
    }
    WX(&t, 2, 5000);                        /* a step cut short */
    assert_int_equal(msb_unit_inputs_differ(&t, name, sizeof name, &lo, &hi), 2);
    assert_string_equal(name, "rnn");
    assert_int_equal(lo, 100);
    assert_int_equal(hi, 150);
    assert_int_equal(msb_unit_inputs_differ(&t, name, 3, &lo, &hi), 2);   /* the name cut to fit */
    assert_string_equal(name, "rn");
    msb_trace_free(&t);
}

/* The memory live at the ends of the last two complete steps: a step that
 * keeps something (a tensor never freed) grows it; an address given out
 * again without its free counts once; another process's allocations and a
 * step cut short are not the program's steps. */
static void test_live_grew(void **state)
{
    (void)state;
    msb_trace t;
    trace_of_units(&t, "\"a\"");
    uint64_t lo = 1, hi = 1;
    A(&t, 4096, 1000, 1, 1);                /* the weights */
    A(&t, 8192, 500, 4, 1);                 /* a step's activation, freed */
    F(&t, 8192);
    feed(&t, 1, "{\"ev\":\"step\",\"n\":1,\"accum\":1,\"micro_batch\":8}");
    assert_int_equal(msb_live_grew(&t, &lo, &hi), 0);        /* one step: nothing to compare */
    assert_true(lo == 0 && hi == 0);
    A(&t, 8192, 500, 4, 1);
    F(&t, 8192);
    A(&t, 12288, 300, 4, 1);                /* given out again, its free unseen: counts once */
    A(&t, 12288, 300, 4, 1);
    F(&t, 12288);
    feed(&t, 2, "{\"ev\":\"a\",\"d\":0,\"k\":16384,\"b\":900,\"c\":4,\"l\":1,\"p\":1}");  /* another process */
    feed(&t, 1, "{\"ev\":\"step\",\"n\":2,\"accum\":1,\"micro_batch\":8}");
    assert_int_equal(msb_live_grew(&t, &lo, &hi), 0);
    assert_int_equal(lo, 1000);
    assert_int_equal(hi, 1000);
    A(&t, 20480, 10, 4, 1);                 /* kept: 1% of 1000 is not more than 1% */
    feed(&t, 1, "{\"ev\":\"step\",\"n\":3,\"accum\":1,\"micro_batch\":8}");
    assert_int_equal(msb_live_grew(&t, &lo, &hi), 0);
    A(&t, 24576, 200, 4, 1);                /* a loss kept with its graph */
    feed(&t, 1, "{\"ev\":\"step\",\"n\":4,\"accum\":1,\"micro_batch\":8}");
    A(&t, 28672, 5000, 4, 1);               /* a step cut short */
    assert_int_equal(msb_live_grew(&t, &lo, &hi), 1);
    assert_int_equal(lo, 1010);
    assert_int_equal(hi, 1210);
    msb_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ledger_cap_and_labels),
        cmocka_unit_test(test_live_grew),
        cmocka_unit_test(test_ledger_many_devices),
        cmocka_unit_test(test_pick_units),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_rows_from_a_trace),
        cmocka_unit_test(test_frozen_block_measured),
        cmocka_unit_test(test_oom_and_the_uncapped_pass),
        cmocka_unit_test(test_oom_survived),
        cmocka_unit_test(test_lightning_order_on_a_gpu),
        cmocka_unit_test(test_late_step_data),
        cmocka_unit_test(test_record_from_a_pass),
        cmocka_unit_test(test_record_hands_on),
        cmocka_unit_test(test_units_in_call_order),
        cmocka_unit_test(test_record_untracked),
        cmocka_unit_test(test_batch_line),
        cmocka_unit_test(test_units_not_every_step),
        cmocka_unit_test(test_unit_inputs_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
