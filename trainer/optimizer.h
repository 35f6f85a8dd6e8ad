/* optimizer.h — one AdamW step over a range of layers (possibly on several
 * devices): gradient statistics (global norm, non-finite count) first, then
 * either a skipped step (non-finite gradients: fp16 overflow) or clipping and
 * the fused AdamW update, which also refreshes the low-precision copy; then
 * the gradients are zeroed for the next accumulation (with
 * m->wgrad_overwrite all but the grad_whole tensors', which the next
 * backward writes without reading). Optimizer state is
 * allocated at the first step (phase optimizer).
 * When every layer of the range is on one device, nothing waits for the
 * device until the end: the clipping multiplier and the skip decision are
 * made on the device (ops clip_scale, adamw's dmul) from the statistics,
 * with the host's arithmetic, and the statistics are read back once, after
 * the update is queued, for the reported norm. Over several devices the
 * per-device statistics are read and summed on the host first, as the
 * global norm needs all of them. Both give the same numbers. */
#ifndef MS_OPTIMIZER_H
#define MS_OPTIMIZER_H

#include "trainer/exec.h"

typedef struct ms_opt_state {
    int t;              /* AdamW steps applied (bias correction) */
    float loss_scale;   /* 1 unless fp16 */
    int good_steps;     /* fp16: consecutive applied steps since the scale last changed */
    int skipped;        /* steps skipped for non-finite gradients */
} ms_opt_state;

typedef struct ms_opt_result {
    int applied;        /* 0: skipped */
    double grad_norm;   /* unscaled global gradient norm (before clipping) */
} ms_opt_result;

void ms_opt_init(ms_opt_state *st, const ms_config *cfg);
/* Layers [first,last] of m; scratch[i] is the scratch of the device that holds
 * layer i (the same pointer for layers on one device). */
int ms_opt_step(ms_model *m, int first, int last, ms_scratch **scratch, ms_opt_state *st, ms_opt_result *res);
/* ms_opt_step's one-device path in two halves, so that the caller can queue
 * more work (the next step's graph) before it waits: ms_opt_queue queues
 * the step and a read of its records into rec (ms_opt_rec_bytes(last -
 * first + 1) bytes, ms_dev_host_alloc'd so that it does not wait) and
 * returns MS_OK, MS_EOOM or MS_EFAIL; once the device has passed the read
 * (ms_dev_wait_mark or a sync), ms_opt_finish takes st and res from rec.
 * Layers [first, last] all on one device, all of them on scratch s. */
size_t ms_opt_rec_bytes(int n_layers);
int ms_opt_queue(ms_model *m, int first, int last, ms_scratch *s, ms_opt_state *st, void *rec);
void ms_opt_finish(ms_model *m, int first, int last, ms_opt_state *st, const void *rec, ms_opt_result *res);
/* The clipping factor for an (unscaled) global gradient norm: 1 unless it
 * exceeds cfg.grad_clip. */
float ms_opt_clip_factor(const ms_config *c, double grad_norm);
/* The end of every step, applied or not: count a skipped one, zero layers
 * [first, last]'s gradients (as above), and adjust the fp16 loss scale (halve on
 * overflow, double after a window of good steps). */
void ms_opt_end_step(ms_model *m, int first, int last, ms_opt_state *st, int finite);
/* Make sure m/v exist for layer L (used by resume). */
int ms_opt_ensure_state(ms_model *m, ms_layer *L);

#endif
