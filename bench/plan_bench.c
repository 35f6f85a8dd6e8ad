/* plan_bench.c — how long the planner takes on the target case: 96 layers
 * (embedding, 94 blocks, head) over 8 GPUs of 80 GiB with every option open
 * (3 precisions, 2 schedules, every micro-batch size dividing a global batch
 * of 64, recompute per stage). The profile is synthetic but shaped like a
 * 2048-wide GPT at sequence length 2048 (rows at micro-batch 1 and 2), so
 * memory binds and the search cannot shortcut. Also times 8 x 24 GiB (so
 * tight that stages recompute) and 8 GPUs of 8 different capacities (the
 * costliest device space), all with one pipeline (no replicas). Then with
 * data-parallel replicas and ZeRO-1 open too: 8 x 80 GiB, and the target
 * case of issue 14, 96 layers over 64 GPUs of 80 GiB with every option open
 * (replicas d dividing the micro-batches, p * d <= 64). Last, a program's
 * profile with its record (issue 37: stage peaks from the record replayed,
 * planner/record_replay.h): 200 layers, a synthetic record pass of about
 * 60,000 storages, a quarter of them crossing copies (to and from the root,
 * layer 0, and between neighbouring layers), planned over 8 x 80 GiB with
 * the sequential schedule. Prints one line each; exit status 1 when a
 * target (100 ms for the first case, 1 s for 64 GPUs, 1 s for the record)
 * is missed.
 * Usage: plan_bench [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/planner.h"
#include "vocab/profile.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* GPT-like layer numbers for one row: d = 2048, T = 2048, 16 heads, vocab 50304. */
static void fill_row(ms_layer_row *w, int layer, int n_layers, int prec, int u)
{
    const double d = 2048, T = 2048, V = 50304, a = 16;
    int head = layer == n_layers - 1, embed = layer == 0;
    double params = embed ? V * d + T * d : head ? V * d + 2 * d : 12 * d * d + 13 * d;
    double half = prec == 0 ? 1.0 : 0.5;  /* 16-bit activations and weights */
    double act_per_seq = embed ? T * d * 4 : head ? T * V * 4 * half + T * d * 4
                                            : (T * d * 34 + 5 * a * T * T) * 2 / half * 0.5;
    double flops = 2 * params * T * u;
    double tflops = prec == 0 ? 60e12 : 400e12;
    w->layer = layer;
    snprintf(w->name, sizeof w->name, embed ? "embed" : head ? "head" : "block %d", layer);
    snprintf(w->kind, sizeof w->kind, embed ? "embed" : head ? "head" : "block");
    w->precision = prec;
    w->micro_batch = u;
    w->source = layer < 20 ? MS_ROW_FULL : MS_ROW_ISOLATED;
    w->param = (uint64_t)(params * 4 * half);
    w->master = prec == 0 ? 0 : (uint64_t)(params * 4);
    w->grad = (uint64_t)(params * 4 * half);
    w->optim = (uint64_t)(params * 8);
    w->act = (uint64_t)(act_per_seq * u);
    w->act_input = (uint64_t)(T * d * 4 * half * u);
    w->transient_fwd = (uint64_t)(a * T * T * 4 * half * u / 4);
    w->transient_bwd = (uint64_t)(a * T * T * 4 * half * u / 2);
    w->out_bytes = (uint64_t)(T * d * 4 * half * u);
    w->fwd_ms = flops / tflops * 1e3 + 0.05;
    w->bwd_ms = 2 * w->fwd_ms;
    w->opt_ms = params * 16 / 3e12 * 1e3;
}

static ms_profile make_profile(void)
{
    ms_profile p;
    memset(&p, 0, sizeof p);
    snprintf(p.model, sizeof p.model, "gpt-2048x94");
    p.n_layers = 96;
    p.seq_len = 2048;
    p.d_model = 2048;
    p.n_head = 16;
    p.vocab = 50304;
    p.global_batch = 64;
    snprintf(p.device, sizeof p.device, "cuda:0");
    p.capacity = 80ull << 30;
    p.reserve = 600ull << 20;
    p.rows = calloc(96 * 3 * 2, sizeof *p.rows);
    for (int prec = 0; prec < 3; prec++)
        for (int u = 1; u <= 2; u++)
            for (int l = 0; l < 96; l++) fill_row(&p.rows[p.n_rows++], l, 96, prec, u);
    return p;
}

/* ---- a program with its record ------------------------------------------ */

typedef struct rec_build {
    ms_rec_storage *s;
    int n, cap;
    uint32_t t;
    uint64_t rng;
} rec_build;

static uint64_t rb_rand(rec_build *b)
{
    uint64_t z = (b->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A storage allocated now, live until rb_free; its index. A copy has its
 * original's bytes; others vary by up to +-25% around the nominal. */
static int rb_alloc(rec_build *b, int layer, int cat, uint64_t bytes, int copy_of)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 4096;
        b->s = realloc(b->s, (size_t)b->cap * sizeof *b->s);
        if (!b->s) abort();
    }
    if (copy_of >= 0) bytes = b->s[copy_of].bytes;
    else if (bytes / 2) bytes = bytes - bytes / 4 + rb_rand(b) % (bytes / 2);
    b->s[b->n] = (ms_rec_storage){ layer, cat, bytes, b->t++, MS_REC_NEVER, copy_of };
    return b->n++;
}

static void rb_free(rec_build *b, int i) { b->s[i].t_free = b->t++; }

#define REC_LAYERS 200
#define REC_STEPS 3
#define REC_IN 6         /* a block's inputs copied from the root (hidden state, mask, rotary, ...) */
#define REC_NEXT 3       /* tensors copied from the previous block's stage (its saved outputs) */
#define REC_OUT 3        /* outputs copied back to the root */
#define REC_GRAD 8       /* copies into a block's backward (its output's gradient, side inputs), and back out */
#define REC_ACT 24       /* saved activations per block */
#define REC_TR 20        /* transients per block, forward and backward each */
#define REC_PARAMS 12    /* parameter tensors per layer (and gradient, 2 optimizer states each) */

/* The record pass of a 200-layer program (layer 0: the root, the embedding
 * and the program's own code; 1..198 blocks; 199 the head), each layer a
 * stage of its own, three steps: parameters before t_from (the placement),
 * then per step a forward that copies each block's inputs from the root and
 * from the previous block and its outputs back, the loss on the root, a
 * backward that copies the gradients in and out the same way, and the
 * optimizer (its state made in the first step). Bytes are those of a
 * 2048-wide model at 8 x 2048 tokens in bf16. */
static ms_prog_record *make_record(void)
{
    const uint64_t MiB = 1 << 20, hid = 64 * MiB, par = 8 * MiB;
    rec_build b = { .rng = 20261207 };
    int params[REC_LAYERS][REC_PARAMS];
    for (int l = 0; l < REC_LAYERS; l++)
        for (int k = 0; k < REC_PARAMS; k++)
            params[l][k] = rb_alloc(&b, l, MS_CAT_PARAM, l == 0 || l == REC_LAYERS - 1 ? 16 * par : par, -1);
    uint32_t t_from = b.t;
    static int ins[REC_LAYERS][REC_IN + REC_NEXT], acts[REC_LAYERS][REC_ACT], outs[REC_LAYERS];
    for (int step = 0; step < REC_STEPS; step++) {
        int batch = rb_alloc(&b, 0, MS_CAT_ACT, MiB, -1);
        int root[REC_IN];   /* what the root holds for the next block: its hidden state and side inputs */
        for (int k = 0; k < REC_IN; k++) root[k] = rb_alloc(&b, 0, MS_CAT_ACT, k ? hid / 8 : hid, -1);
        for (int l = 1; l < REC_LAYERS; l++) {
            for (int k = 0; k < REC_IN; k++)
                ins[l][k] = rb_alloc(&b, l, MS_CAT_COMM, 0, root[k]);
            for (int k = 0; k < REC_NEXT; k++)
                ins[l][REC_IN + k] = l > 1 ? rb_alloc(&b, l, MS_CAT_COMM, 0, acts[l - 1][REC_ACT - 1 - k]) : -1;
            int tr = -1;
            for (int k = 0; k < REC_ACT; k++) {
                acts[l][k] = rb_alloc(&b, l, MS_CAT_ACT, hid / 2, -1);
                if (k < REC_TR) {
                    int x = rb_alloc(&b, l, MS_CAT_TRANSIENT, 2 * hid, -1);
                    if (tr >= 0) rb_free(&b, tr);
                    tr = x;
                }
            }
            rb_free(&b, tr);
            outs[l] = rb_alloc(&b, l, MS_CAT_ACT, hid, -1);
            /* the hidden state goes back to the root (with a few of the
             * block's other results); the old one there is dropped once the
             * new one arrived */
            int back[REC_OUT];
            for (int k = 0; k < REC_OUT; k++) back[k] = rb_alloc(&b, 0, MS_CAT_COMM, 0, k ? acts[l][k] : outs[l]);
            for (int k = 1; k < REC_OUT; k++) rb_free(&b, back[k]);
            if (l > 1) rb_free(&b, root[0]);
            root[0] = back[0];
            for (int k = REC_IN / 2; k < REC_IN; k++) rb_free(&b, ins[l][k]);   /* inputs not saved */
        }
        int loss = rb_alloc(&b, 0, MS_CAT_TRANSIENT, 4 * hid, -1);
        int g = rb_alloc(&b, 0, MS_CAT_TRANSIENT, hid, -1);
        rb_free(&b, loss);
        for (int l = REC_LAYERS - 1; l >= 1; l--) {
            int gin[REC_GRAD];
            /* the output's gradient, and the root's side inputs again */
            for (int k = 0; k < REC_GRAD; k++)
                gin[k] = rb_alloc(&b, l, MS_CAT_COMM, 0, k ? root[1 + (k - 1) % (REC_IN - 1)] : g);
            int tr = -1;
            for (int k = 0; k < REC_TR; k++) {
                int x = rb_alloc(&b, l, MS_CAT_TRANSIENT, 2 * hid, -1);
                if (tr >= 0) rb_free(&b, tr);
                tr = x;
                if (step == 0 && k < REC_PARAMS) rb_alloc(&b, l, MS_CAT_GRAD, b.s[params[l][k]].bytes, -1);
            }
            rb_free(&b, tr);
            for (int k = 0; k < REC_ACT; k++) rb_free(&b, acts[l][k]);
            for (int k = 0; k < REC_IN / 2; k++) rb_free(&b, ins[l][k]);
            for (int k = 0; k < REC_NEXT; k++)
                if (ins[l][REC_IN + k] >= 0) rb_free(&b, ins[l][REC_IN + k]);
            rb_free(&b, outs[l]);
            int gx = rb_alloc(&b, l, MS_CAT_TRANSIENT, hid, -1);
            for (int k = 0; k < REC_GRAD; k++) rb_free(&b, gin[k]);
            int ng = -1;
            for (int k = 0; k < REC_GRAD; k++) {
                int c = rb_alloc(&b, 0, MS_CAT_COMM, 0, gx);
                if (k) rb_free(&b, c);
                else ng = c;
            }
            rb_free(&b, gx);
            rb_free(&b, g);
            g = ng;
        }
        rb_free(&b, g);
        if (step == 0)
            for (int k = 0; k < REC_PARAMS; k++) rb_alloc(&b, 0, MS_CAT_GRAD, b.s[params[0][k]].bytes, -1);
        for (int l = 0; l < REC_LAYERS; l++) {
            if (step == 0)
                for (int k = 0; k < 2 * REC_PARAMS; k++)
                    rb_alloc(&b, l, MS_CAT_OPTIM, 2 * b.s[params[l][k / 2]].bytes, -1);
            int x = rb_alloc(&b, l, MS_CAT_TRANSIENT, 4 * par, -1);
            rb_free(&b, x);
        }
        for (int k = 0; k < REC_IN; k++) rb_free(&b, root[k]);
        rb_free(&b, batch);
    }
    ms_prog_record *r = calloc(1, sizeof *r);
    if (!r) abort();
    *r = (ms_prog_record){ .n_layers = REC_LAYERS, .t_from = t_from, .t_end = b.t, .n = b.n, .s = b.s };
    return r;
}

/* The program's profile: rows shaped like fill_row's blocks in bf16 at its
 * own batch (8), a loss row, and the record. */
static ms_profile make_program_profile(void)
{
    ms_profile p;
    memset(&p, 0, sizeof p);
    snprintf(p.model, sizeof p.model, "program-200");
    snprintf(p.fingerprint, sizeof p.fingerprint, "fnv64:00000000000000c8");
    p.n_layers = REC_LAYERS;
    p.global_batch = 8;
    snprintf(p.device, sizeof p.device, "cuda:0");
    p.capacity = 80ull << 30;
    p.reserve = 600ull << 20;
    p.loss = (ms_loss_row){ .present = 1, .made_in = REC_LAYERS - 1, .outputs = 64 << 20, .held = 256 << 20 };
    p.rows = calloc(REC_LAYERS, sizeof *p.rows);
    for (int l = 0; l < REC_LAYERS; l++) {
        fill_row(&p.rows[p.n_rows++], l, REC_LAYERS, 1, 8);
        p.rows[l].source = MS_ROW_FULL;
        snprintf(p.rows[l].kind, sizeof p.rows[l].kind, l == 0 ? "pre" : l == REC_LAYERS - 1 ? "post" : "block");
    }
    p.record = make_record();
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median wall time of `reps` searches; the plan of the last one in *out. */
static double time_search_opts(const ms_profile *p, const ms_plan_device *devs, int n, int reps, ms_plan *out,
                               int replicas_open)
{
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    if (replicas_open) o.replicas = 0; /* any d; ZeRO-1 is open by default (-1) */
    double *t = malloc((size_t)reps * sizeof *t);
    char err[256];
    for (int r = 0; r < reps; r++) {
        ms_plan_free(out);
        double t0 = now_ms();
        int rc = ms_plan_search(p, devs, n, &o, out, err, sizeof err);
        t[r] = now_ms() - t0;
        if (rc == MS_PLAN_ERROR) {
            fprintf(stderr, "plan_bench: %s\n", err);
            free(t);
            return -1;
        }
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    double med = t[reps / 2];
    free(t);
    return med;
}

static double max_peak_gib(const ms_plan *pl)
{
    uint64_t m = 0;
    for (int s = 0; s < pl->n_stages; s++)
        if (pl->stages[s].peak > m) m = pl->stages[s].peak;
    return (double)m / (double)(1ull << 30);
}

static double time_search(const ms_profile *p, const ms_plan_device *devs, int n, int reps, ms_plan *out)
{
    return time_search_opts(p, devs, n, reps, out, 0);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 11;
    if (reps < 1) reps = 1;
    ms_profile p = make_profile();
    ms_plan_device devs[64];
    ms_plan plan;
    memset(&plan, 0, sizeof plan);

    for (int d = 0; d < 8; d++) {
        snprintf(devs[d].name, sizeof devs[d].name, "cuda:%d", d);
        devs[d].capacity = 80ull << 30;
    }
    double same = time_search(&p, devs, 8, reps, &plan);
    if (same < 0) return 2;
    printf("plan_bench: 96 layers over 8 x 80 GiB, every option open: %.1f ms (median of %d); "
           "plan: %d stages, %s, %s, %d x %d, %.1f ms/step\n",
           same, reps, plan.n_stages, plan.precision == 0 ? "fp32" : plan.precision == 1 ? "bf16" : "fp16",
           ms_schedule_name(plan.schedule), plan.n_micro, plan.micro_batch, plan.step_ms);

    for (int d = 0; d < 8; d++) devs[d].capacity = 24ull << 30;
    double tight = time_search(&p, devs, 8, reps, &plan);
    if (tight < 0) return 2;
    int n_rc = 0;
    for (int s = 0; s < plan.n_stages; s++) n_rc += plan.stages[s].recompute;
    printf("plan_bench: 96 layers over 8 x 24 GiB (memory-bound), every option open: %.1f ms (median of %d); "
           "plan: %d stages, %d recomputing, %d x %d\n", tight, reps, plan.n_stages, n_rc, plan.n_micro,
           plan.micro_batch);

    for (int d = 0; d < 8; d++) devs[d].capacity = (uint64_t)(24 + 8 * d) << 30; /* 24..80 GiB */
    double mixed = time_search(&p, devs, 8, reps, &plan);
    if (mixed < 0) return 2;
    printf("plan_bench: 96 layers over 8 GPUs of 8 different capacities (24..80 GiB): %.1f ms (median of %d); "
           "plan: %d stages\n", mixed, reps, plan.n_stages);

    for (int d = 0; d < 64; d++) {
        snprintf(devs[d].name, sizeof devs[d].name, "cuda:%d", d);
        devs[d].capacity = 80ull << 30;
    }
    double dp8 = time_search_opts(&p, devs, 8, reps, &plan, 1);
    if (dp8 < 0) return 2;
    printf("plan_bench: 96 layers over 8 x 80 GiB, replicas and ZeRO-1 open too: %.1f ms (median of %d); "
           "plan: %d stages x %d replicas%s, %.1f ms/step\n", dp8, reps, plan.n_stages, plan.replicas,
           plan.zero ? " (ZeRO-1)" : "", plan.step_ms);
    double dp64 = time_search_opts(&p, devs, 64, reps, &plan, 1);
    if (dp64 < 0) return 2;
    printf("plan_bench: 96 layers over 64 x 80 GiB, every option open (replicas, ZeRO-1): %.1f ms (median of %d; "
           "target 1000 ms); plan: %d stages x %d replicas%s, %s, %d x %d, %.1f ms/step\n", dp64, reps, plan.n_stages,
           plan.replicas, plan.zero ? " (ZeRO-1)" : "", ms_schedule_name(plan.schedule), plan.n_micro, plan.micro_batch,
           plan.step_ms);

    /* a program with its record: the sequential schedule (what a program
     * runs), its own precision and batch. The search keeps the last
     * record's table for the next (sequential.c); each timed search gets a
     * record of its own (its end moved by one position), so that every one
     * replays it. Then ms_plan_choose, which searches the same profile
     * again and again (what `memsplit plan` and doctor run), from cold. */
    ms_profile pr = make_program_profile();
    int n_copies = 0;
    for (int i = 0; i < pr.record->n; i++) n_copies += pr.record->s[i].copy_of >= 0;
    for (int d = 0; d < 8; d++) devs[d].capacity = 80ull << 30;
    ms_plan_opts o;
    ms_plan_opts_default(&o);
    o.schedule = MS_SCHED_SEQUENTIAL;
    o.precision = 1;
    o.micro_batch = 8;
    o.recompute = MS_RECOMPUTE_NEVER;
    int rreps = reps < 5 ? reps : 5;   /* each replays the record: a third of a second or so */
    double *rt = malloc(2 * (size_t)rreps * sizeof *rt), *ct = rt + rreps;
    char err[256];
    int rrc = MS_PLAN_OK;
    for (int r = 0; r < 2 * rreps && rrc != MS_PLAN_ERROR; r++) {
        pr.record->t_end++;
        ms_plan_free(&plan);
        double t0 = now_ms();
        rrc = r < rreps ? ms_plan_search(&pr, devs, 8, &o, &plan, err, sizeof err)
                        : ms_plan_choose(&pr, devs, 8, &o, &plan, err, sizeof err);
        rt[r] = now_ms() - t0;
    }
    if (rrc == MS_PLAN_ERROR) {
        fprintf(stderr, "plan_bench: %s\n", err);
        return 2;
    }
    qsort(rt, (size_t)rreps, sizeof *rt, cmp_double);
    qsort(ct, (size_t)rreps, sizeof *ct, cmp_double);
    double rec = rt[rreps / 2], rec_choose = ct[rreps / 2];
    free(rt);
    printf("plan_bench: a program of 200 layers with its record (%d storages, %d copies) over 8 x 80 GiB, "
           "sequential: search %.1f ms, the plan chosen (ms_plan_choose) %.1f ms (medians of %d; target 1000 ms: "
           "%s); plan: %d stages, largest peak %.1f GiB\n",
           pr.record->n, n_copies, rec, rec_choose, rreps, rec <= 1000.0 && rec_choose <= 1000.0 ? "MET" : "MISSED",
           plan.n_stages, max_peak_gib(&plan));

    ms_plan_free(&plan);
    ms_profile_free(&pr);
    ms_profile_free(&p);
    return same <= 100.0 && dp64 <= 1000.0 && rec <= 1000.0 && rec_choose <= 1000.0 ? 0 : 1;
}
