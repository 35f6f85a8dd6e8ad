/* advice.c — estimates of what would have fit (advice.h). */
#include "bridge/advice.h"

#include <stdio.h>
#include <string.h>

#include "vocab/size.h"

void msb_fit_advice(const ms_profile *p, int splitting, char *out, size_t len)
{
    if (!out || !len) return;
    out[0] = '\0';
    if (!p || !p->oom.happened || !p->capacity || p->n_rows < 1) return;
    uint64_t stat = p->reserve, act = 0, act_nonblock = 0, keep_ckpt = 0, max_block_act = 0, tr = 0, params = 0;
    int mb = p->rows[0].micro_batch > 0 ? p->rows[0].micro_batch : 1;
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *r = &p->rows[i];
        stat += r->param + r->master + r->grad + r->optim;
        params += r->param;
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
    char b1[32], b2[32];
    size_t n = (size_t)snprintf(out, len, "what would fit %s (estimates from these rows):",
                                ms_fmt_bytes(p->capacity, b1, sizeof b1));
    uint64_t dyn = act + tr;
    if (stat >= p->capacity) {
        n += (size_t)snprintf(out + n, n < len ? len - n : 0,
                              "\n  no micro-batch: parameters, gradients, optimizer state and the reserve alone take %s",
                              ms_fmt_bytes(stat, b2, sizeof b2));
    } else if (dyn > 0) {
        uint64_t k = (p->capacity - stat) * (uint64_t)mb / dyn;
        if (k >= (uint64_t)mb) k = (uint64_t)mb - 1;   /* it did not fit at mb */
        n += (size_t)snprintf(out + n, n < len ? len - n : 0,
                              k ? "\n  micro-batch %llu instead of %d (activations and transients scale with it)"
                                : "\n  no smaller micro-batch (%llu of %d): the activations of one sequence do not fit",
                              (unsigned long long)k, mb);
    }
    uint64_t ckpt = stat + act_nonblock + keep_ckpt + max_block_act + tr;
    n += (size_t)snprintf(out + n, n < len ? len - n : 0, "\n  activation checkpointing of every block: peak ~%s, %s",
                          ms_fmt_bytes(ckpt, b2, sizeof b2), ckpt <= p->capacity ? "fits" : "does not fit");
    if (p->rows[0].precision == 0 && params) {
        uint64_t half = stat + params / 2 + dyn / 2;
        n += (size_t)snprintf(out + n, n < len ? len - n : 0, "\n  bf16 autocast: peak ~%s, %s",
                              ms_fmt_bytes(half, b2, sizeof b2), half <= p->capacity ? "fits" : "does not fit");
    }
    if (n < len && !splitting)
        snprintf(out + n, len - n, "\n  or split it over devices: memsplit plan --db FILE --gpus 2 --gpu-mem %llu",
                 (unsigned long long)p->capacity);
}
