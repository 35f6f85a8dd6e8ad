/* exec.h — running layers: forward and backward of each layer kind on its
 * device, with the transients they share.
 *
 * Buffers appear when the first step reaches them, as in a framework, so an
 * OOM happens at the layer and phase that overflows: a layer's saved
 * activations at its first forward, its gradients at its first backward,
 * the shared transients (activation gradients in flight, attention scratch,
 * logits chunks) when a layer first needs them (grown if a later one needs
 * more). Every function returns MS_OK, MS_EOOM (dev->oom says where) or
 * MS_EFAIL (dev->k.error says why). */
#ifndef MS_EXEC_H
#define MS_EXEC_H

#include "trainer/model.h"

/* The transients of one device, in three buffers:
 *  DRES   the activation gradient flowing from layer to layer in backward
 *         ([N,C]; written by the head, updated in place by each block);
 *  ARENA  one buffer that each layer carves its own scratch from during its
 *         forward or backward (activation gradients of width C and 4C,
 *         attention scratch, logits chunks): nothing in it outlives the
 *         layer, so it is as large as the largest single need, and the
 *         transient peak of a set of layers is DRES + the largest need;
 *  STATS  a few bytes for the optimizer's gradient statistics;
 *  RECOMP (category act) one block's full saved activations, shared by the
 *         blocks that recompute: each keeps only its output per micro-batch
 *         and re-runs its forward into this arena just before its backward. */
enum { MS_TR_DRES = 0, MS_TR_ARENA, MS_TR_STATS, MS_TR_RECOMP, MS_TR_N };

typedef struct ms_scratch {
    ms_device *dev;
    void *buf[MS_TR_N];
    size_t bytes[MS_TR_N];
    size_t last_need;   /* bytes of the arena the last layer asked for */
} ms_scratch;

/* A buffer of at least `bytes` for slot (reallocated if smaller; contents
 * are not kept), or NULL on OOM. */
void *ms_scratch_get(ms_scratch *s, int slot, size_t bytes);
void *ms_scratch_get_as(ms_scratch *s, int slot, size_t bytes, ms_cat cat);
/* The arena, at least `bytes`; records the need in s->last_need. */
void *ms_scratch_arena(ms_scratch *s, size_t bytes);
/* Round a view size up so views carved from the arena stay 256-byte aligned. */
static inline size_t ms_scratch_round(size_t b) { return (b + 255) / 256 * 256; }
void ms_scratch_release(ms_scratch *s);

/* Forward of layer L for one micro-batch of m->B sequences.
 * x: the previous layer's output [N,C] (NULL for the embedding).
 * ids: host token ids [N]: inputs for the embedding, targets for the head
 * (NULL for blocks). */
int ms_layer_forward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x, const int32_t *ids);

/* Backward of layer L. x: the same input as in forward. dres (in the
 * device's MS_TR_DRES scratch): in, the gradient of L's output (ignored for
 * the head); out, the gradient of L's input (not for the embedding).
 * dscale multiplies the loss gradient (1/tokens per step, times the loss
 * scale under fp16). The head adds the micro-batch's summed loss to *loss_sum
 * (reading it waits for the device), or leaves it on the device when
 * loss_sum is NULL, for ms_layer_add_loss to read later. */
int ms_layer_backward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x, float dscale, double *loss_sum);
/* Adds the summed loss of head L's last backward to *loss_sum; waits for L's device. */
int ms_layer_add_loss(ms_model *m, ms_layer *L, double *loss_sum);
/* The same in two halves, so that more work can be queued before the wait:
 * ms_layer_read_loss_later queues a copy of head L's per-row losses into
 * host (ms_layer_loss_rows(m) floats from ms_dev_host_alloc); once the
 * device has passed it (ms_dev_wait_mark), ms_layer_loss_sum sums them. */
size_t ms_layer_loss_rows(const ms_model *m);
int ms_layer_read_loss_later(ms_model *m, ms_layer *L, float *host);
double ms_layer_loss_sum(const ms_model *m, const float *host);

/* Allocate, now, every buffer L's forward and backward would allocate
 * lazily in the current activation slot (saved activations, gradients) and
 * grow the device's transients to what L needs. Used where allocating in
 * the middle of a step is unsafe (NCCL in flight: cudaFree synchronises the
 * device while a peer may wait on this thread). */
int ms_layer_preallocate(ms_model *m, ms_layer *L, ms_scratch *s);

/* The output activation of L (the next layer's input). */
const void *ms_layer_output(const ms_layer *L);

#endif
