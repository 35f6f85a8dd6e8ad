/* advice.c — estimates of what would have fit (advice.h). */
#include "bridge/advice.h"

#include <stdio.h>
#include <string.h>

#include "vocab/size.h"

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* bytes at or over the capacity, readably: where the two round alike, with the exact figures */
static const char *over(uint64_t bytes, uint64_t capacity, char *buf, size_t len)
{
    char a[32], c[32];
    ms_fmt_bytes(bytes, a, sizeof a);
    if (strcmp(a, ms_fmt_bytes(capacity, c, sizeof c)) != 0) snprintf(buf, len, "%s", a);
    else snprintf(buf, len, "%s (%llu bytes against the capacity's %llu)", a, (unsigned long long)bytes,
                  (unsigned long long)capacity);
    return buf;
}

void msb_fit_advice(const ms_profile *p, int recomputed, int splitting, char *out, size_t len)
{
    if (!out || !len) return;
    out[0] = '\0';
    if (!p || !p->oom.happened || !p->capacity || p->n_rows < 1) return;
    uint64_t param = 0, master = 0, grad = 0, optim = 0, topt = 0;
    uint64_t act = 0, act_nonblock = 0, keep_ckpt = 0, max_block_act = 0, tr = 0;
    int mb = p->rows[0].micro_batch > 0 ? p->rows[0].micro_batch : 1;
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *r = &p->rows[i];
        param += r->param;
        master += r->master;
        grad += r->grad;
        optim += r->optim;
        topt += r->transient_opt;
        act += r->act;
        if (strcmp(r->kind, "block") == 0) {
            keep_ckpt += r->act_input;
            if (r->act > max_block_act) max_block_act = r->act;
        } else {
            act_nonblock += r->act;
        }
        uint64_t t = r->transient_fwd > r->transient_bwd ? r->transient_fwd : r->transient_bwd;
        if (t > tr) tr = t;
    }
    /* What no micro-batch makes smaller, at the two moments that bound a
     * step. Under autocast a program's rows hold its fp32 weights as master
     * and autocast's 16-bit copies as param: the copies live from the
     * forward to their use in backward, not through the optimizer's step.
     * The forward's end: the weights, their copies, the optimizer state,
     * and the gradients unless the program frees them before its forward.
     * The optimizer's step: the weights, every gradient, the state and the
     * step's own temporaries, none of which scale with the batch. */
    const int autocast = master > 0;
    const uint64_t weights = autocast ? master : param, copies = autocast ? param : 0;
    const uint64_t fwd_floor = p->reserve + weights + copies + optim +
                               (p->grads_freed == MS_GRADS_FREED_BEFORE_FORWARD ? 0 : grad);
    const uint64_t opt_floor = p->reserve + weights + grad + optim + topt;
    char b1[32], b2[96];
    size_t n = (size_t)snprintf(out, len, "what would fit %s (estimates from these rows):",
                                ms_fmt_bytes(p->capacity, b1, sizeof b1));
    uint64_t dyn = act + tr;
    if (opt_floor >= p->capacity) {
        n += (size_t)snprintf(out + n, n < len ? len - n : 0,
                              "\n  no micro-batch: in the optimizer's step the parameters, gradients, optimizer "
                              "state, the step's temporaries and the reserve alone take %s",
                              over(opt_floor, p->capacity, b2, sizeof b2));
    } else if (fwd_floor >= p->capacity) {
        n += (size_t)snprintf(out + n, n < len ? len - n : 0,
                              "\n  no micro-batch: %s and the reserve alone take %s at the forward's end",
                              autocast ? "the weights, autocast's copies of them, optimizer state"
                                       : "parameters, optimizer state",
                              over(fwd_floor, p->capacity, b2, sizeof b2));
    } else if (dyn > 0) {
        uint64_t k = (p->capacity - fwd_floor) * (uint64_t)mb / dyn;
        if (k >= (uint64_t)mb) k = (uint64_t)mb - 1;   /* it did not fit at mb */
        n += (size_t)snprintf(out + n, n < len ? len - n : 0,
                              k ? "\n  micro-batch %llu instead of %d (activations and transients scale with it)"
                                : "\n  no smaller micro-batch (%llu of %d): the activations of one sequence do not fit",
                              (unsigned long long)k, mb);
    }
    uint64_t ckpt = max_u64(fwd_floor + act_nonblock + keep_ckpt + max_block_act + tr, opt_floor);
    if (recomputed > 0)   /* its rows are of a checkpointed program: the estimate would count it twice */
        n += (size_t)snprintf(out + n, n < len ? len - n : 0,
                              "\n  activation checkpointing: the program already recomputes %d of its %d units in "
                              "backward (their rows count the recompute as backward's)", recomputed, p->n_rows);
    else
        n += (size_t)snprintf(out + n, n < len ? len - n : 0, "\n  activation checkpointing of every block: peak ~%s, %s",
                              ms_fmt_bytes(ckpt, b2, sizeof b2), ckpt <= p->capacity ? "fits" : "does not fit");
    if (p->rows[0].precision == 0 && !autocast && param) {
        /* fp32 masters stay; 16-bit copies of the weights and activations come beside them */
        uint64_t half = max_u64(fwd_floor + param / 2 + dyn / 2, opt_floor);
        n += (size_t)snprintf(out + n, n < len ? len - n : 0, "\n  bf16 autocast: peak ~%s, %s",
                              ms_fmt_bytes(half, b2, sizeof b2), half <= p->capacity ? "fits" : "does not fit");
    }
    if (n < len && !splitting)
        snprintf(out + n, len - n, "\n  or split it over devices: memsplit plan --db FILE --gpus 2 --gpu-mem %llu",
                 (unsigned long long)p->capacity);
}
