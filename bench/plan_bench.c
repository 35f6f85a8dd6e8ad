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
 * (replicas d dividing the micro-batches, p * d <= 64). Prints one line each;
 * exit status 1 when a target (100 ms for the first case, 1 s for 64 GPUs)
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

    ms_plan_free(&plan);
    ms_profile_free(&p);
    return same <= 100.0 && dp64 <= 1000.0 ? 0 : 1;
}
