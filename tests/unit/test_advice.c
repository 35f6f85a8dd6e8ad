/* test_advice.c — msb_fit_advice (bridge/advice.h) against what programs
 * measured: the floors no micro-batch lowers, at the forward's end and in
 * the optimizer's step. The figures are those of three CPU programs whose
 * advice was wrong before: an fp32 model under CPU bf16 autocast that fits
 * at batch 1 (the rows' autocast copies are not live in the optimizer's
 * step), a model whose Adam step alone is over the capacity (no batch
 * helps), and a plain loop where a smaller micro-batch fits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/advice.h"

/* n rows: one layer before, n - 2 blocks, one after; the totals spread evenly */
static void rows_of(ms_profile *p, ms_layer_row *rows, int n, uint64_t param, uint64_t master, uint64_t grad,
                    uint64_t optim, uint64_t topt, uint64_t act, uint64_t tr, int mb)
{
    memset(p, 0, sizeof *p);
    memset(rows, 0, (size_t)n * sizeof *rows);
    for (int i = 0; i < n; i++) {
        ms_layer_row *r = &rows[i];
        snprintf(r->kind, sizeof r->kind, "%s", i == 0 ? "pre" : i == n - 1 ? "post" : "block");
        r->param = param / (uint64_t)n;
        r->master = master / (uint64_t)n;
        r->grad = grad / (uint64_t)n;
        r->optim = optim / (uint64_t)n;
        r->transient_opt = topt / (uint64_t)n;
        r->act = act / (uint64_t)n;
        r->act_input = act / (uint64_t)(4 * n);
        r->transient_fwd = tr;
        r->micro_batch = mb;
    }
    p->rows = rows;
    p->n_rows = p->n_layers = n;
    p->oom.happened = 1;
    p->grads_freed = MS_GRADS_FREED_BEFORE_FORWARD;
}

static void has(const char *text, const char *want)
{
    if (!strstr(text, want)) fail_msg("no \"%s\" in:\n%s", want, text);
}

/* the advice for p under capacity, for a program that recomputes that many
 * units in backward (splitting: doctor's, which splits next) */
static const char *advise_recomputed(ms_profile *p, uint64_t capacity, int recomputed, int splitting)
{
    static char out[1024];
    p->capacity = capacity;
    msb_fit_advice(p, recomputed, splitting, out, sizeof out);
    return out;
}

static const char *advise(ms_profile *p, uint64_t capacity, int splitting)
{
    return advise_recomputed(p, capacity, 0, splitting);
}

/* CPU bf16 autocast, SGD with momentum, batch 8 (the session's cpuamp program):
 * 873,344 B of fp32 weights (master), 416,960 B of autocast's copies (param),
 * its gradients and momentum as large as the weights. Under a 2,679,989 B cap
 * it ran out at batch 8 and fitted at batch 1 (peak 2,642,411 B): the advice
 * must not say that no micro-batch helps. */
static void test_autocast_copies_not_in_the_step(void **state)
{
    (void)state;
    ms_profile p;
    ms_layer_row rows[8];
    rows_of(&p, rows, 8, 416960, 873344, 873344, 873344, 8000, 1400000, 60000, 8);
    const char *out = advise(&p, 2679989, 0);
    has(out, "micro-batch ");
    has(out, " instead of 8");
    assert_null(strstr(out, "no micro-batch"));
    assert_null(strstr(out, "bf16 autocast:"));     /* it is under autocast already */
}

/* Adam, the whole step over the capacity: parameters, gradients and two
 * states (1.63 MiB) and the step's temporaries are the batch's whatever it is */
static void test_the_optimizer_step_alone(void **state)
{
    (void)state;
    ms_profile p;
    ms_layer_row rows[8];
    rows_of(&p, rows, 8, 426368, 0, 426368, 852736, 120000, 900000, 40000, 32);
    const char *out = advise(&p, 1768113, 0);
    has(out, "no micro-batch: in the optimizer's step the parameters, gradients, optimizer state, the step's "
             "temporaries and the reserve alone take 1.74 MiB");
    has(out, "activation checkpointing of every block: peak ~");
    has(out, "does not fit");
    /* just over, the two read alike rounded: the exact bytes say it */
    out = advise(&p, 1825472 - 100, 0);
    has(out, "take 1.74 MiB (1825472 bytes against the capacity's 1825372)");
}

/* fp32, gradients freed before each forward: the forward's floor is the
 * parameters and the state; the gradients come only as activations go */
static void test_a_smaller_micro_batch(void **state)
{
    (void)state;
    ms_profile p;
    ms_layer_row rows[6];
    rows_of(&p, rows, 6, 600000, 0, 600000, 1200000, 30000, 2400000, 100000, 16);
    /* floor 1.8 MB; 1.2 MB for 2.5 MB of batch-16 activations */
    const char *out = advise(&p, 3000000, 1);
    has(out, "micro-batch 7 instead of 16");
    has(out, "bf16 autocast: peak ~");
    assert_null(strstr(out, "memsplit plan"));      /* doctor splits it next */
    /* the same with the gradients kept through the forward: 0.6 MB less room */
    p.grads_freed = MS_GRADS_KEPT;
    out = advise(&p, 3000000, 0);
    has(out, "micro-batch 3 instead of 16");
    has(out, "memsplit plan --db FILE --gpus 2 --gpu-mem 3000000");
}

/* a program that checkpoints its blocks itself (checkpoint_sequential):
 * told that it does, not offered what it already has */
static void test_a_program_that_checkpoints(void **state)
{
    (void)state;
    ms_profile p;
    ms_layer_row rows[10];
    rows_of(&p, rows, 10, 1000000, 0, 1000000, 2000000, 10000, 200000, 260000, 32);
    const char *out = advise_recomputed(&p, 4000000, 6, 0);
    has(out, "the program already recomputes 6 of its 10 units in backward");
    assert_null(strstr(out, "checkpointing of every block"));
    out = advise(&p, 4000000, 0);
    has(out, "activation checkpointing of every block: peak ~");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_autocast_copies_not_in_the_step),
        cmocka_unit_test(test_the_optimizer_step_alone),
        cmocka_unit_test(test_a_smaller_micro_batch),
        cmocka_unit_test(test_a_program_that_checkpoints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
