/* model.h — the model as a sequential layer list and its parameter layout.
 *
 * Layer 0 is the token+position embedding, layers 1..n_layer are the
 * pre-norm transformer blocks (block i is layer i), layer n_layer+1 is the
 * head (final norm, LM head, softmax cross-entropy). Each layer owns its
 * parameters as contiguous arrays on its device:
 *   w   fp32 weights  — category param (fp32 policy) or master (bf16/fp16)
 *   wc  low-precision compute copy of the matmul/embedding tensors, which
 *       come first in the layout (norm tensors stay fp32 and are read from w)
 *   g   fp32 gradients (allocated when backward first reaches the layer)
 *   m,v AdamW state, one allocation (at the first optimizer step)
 * Initial values depend only on (seed, layer, tensor), never on the device
 * or on how the model is split, so every split starts from the same weights. */
#ifndef MS_MODEL_H
#define MS_MODEL_H

#include <stddef.h>
#include "kernels/dtype.h"
#include "trainer/config.h"
#include "trainer/device.h"

typedef enum { MS_LAYER_EMBED = 0, MS_LAYER_BLOCK = 1, MS_LAYER_HEAD = 2 } ms_layer_kind;

#define MS_MAX_TENSORS 16

typedef struct ms_tensor {
    char name[16];
    size_t rows, cols;  /* numel = rows * cols */
    size_t off;         /* element offset into w / g / m / v */
    int lowp;           /* 1: also in the compute copy wc (same offset) */
    int grad_whole;     /* 1: the layer's backward writes this tensor's whole
                           gradient in one product (a block's weight
                           matrices), so with wgrad_overwrite it needs no
                           zeroing between steps */
    float init_std;     /* normal(0, std) init; 0 = constant init_const */
    float init_const;
} ms_tensor;

/* Saved-for-backward tensors of one layer: one arena, these views into it. */
typedef struct ms_acts {
    void *arena;
    size_t bytes;          /* sum of the views, each 256-byte aligned */
    int32_t *tokens;       /* embed: inputs [N] */
    int32_t *targets;      /* head: targets [N] */
    void *out;             /* the layer's output [N,C] (embed, block) */
    void *ln1, *qkv, *att, *res2, *fc_pre, *fc_gelu; /* block (norm2's output is recomputed) */
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lse;
    void *lnf;             /* head */
    float *lnf_mean, *lnf_rstd, *losses;
} ms_acts;

typedef struct ms_layer {
    int index;
    ms_layer_kind kind;
    char name[32];
    ms_device *dev;
    int n_tensors;
    ms_tensor t[MS_MAX_TENSORS];
    size_t n_params;       /* fp32 elements in w, g, m, v */
    size_t n_copy;         /* leading elements mirrored in wc */
    float *w, *g, *mv;     /* mv: m then v, 2*n_params */
    void *wc;              /* == w under fp32 */
    float *bn_run;         /* batchnorm running mean/var: 2 norms x 2 x C (blocks), 2 x C (head) */
    ms_acts a;             /* the saved activations in use (of slot cur_slot) */
    ms_acts *slots;        /* pipeline: one set per in-flight micro-batch (NULL: just a) */
    int n_slots, cur_slot;
    int recompute;         /* blocks: keep only the output per micro-batch; backward
                              recomputes the rest into the device's recompute arena */
    float *bn_backup;      /* recompute with batchnorm: running stats saved around the re-run */
} ms_layer;

typedef struct ms_model {
    ms_config cfg;
    ms_dtype dt;            /* activation / compute dtype */
    int n_layers;           /* n_layer + 2 */
    ms_layer *layers;
    int B, T, C, V, NH, H;  /* micro-batch, seq, width, vocab, heads, mlp hidden */
    /* 1: every backward is its step's only one (one micro-batch a step, one
     * device), so the grad_whole tensors' gradients are written (beta 0),
     * not added, and the optimizer leaves them unzeroed: a step saves a
     * memset and a read of those gradients. Set by the session; 0 (add
     * into zeroed gradients) everywhere else. */
    int wgrad_overwrite;
} ms_model;

/* Build the layer list and layouts (no allocation). */
int ms_model_init(ms_model *m, const ms_config *cfg, char *err, size_t errlen);
void ms_model_free(ms_model *m);
/* Tensor by name within a layer, or NULL. */
const ms_tensor *ms_layer_tensor(const ms_layer *L, const char *name);
/* Allocate and initialise the parameters of layers [first, last] on their
 * devices (phase init). Returns MS_OK, MS_EOOM or MS_EFAIL. */
int ms_model_alloc_params(ms_model *m, int first, int last);
/* Bytes of a layer's saved activations for micro-batch B (the analytic count
 * of what forward keeps; equals the arena's size). */
size_t ms_layer_act_bytes(const ms_model *m, const ms_layer *L, int B);
/* Bytes of a layer's batchnorm running statistics (mean and variance per
 * norm: 2 norms in a block, 1 in the head); 0 without batchnorm. */
size_t ms_layer_bn_bytes(const ms_model *m, const ms_layer *L);
/* Pipeline: give L n in-flight activation sets (allocated lazily) / use set k. */
int ms_layer_set_slots(ms_layer *L, int n);
void ms_layer_select(ms_layer *L, int k);
void ms_layer_free_slots(ms_layer *L);

/* Lay out a layer's saved activations for micro-batch B: with base == NULL
 * only computes the size; else points a's views into base. Returns bytes. */
size_t ms_acts_layout(const ms_model *m, const ms_layer *L, int B, ms_acts *a, char *base);
/* Fill host buffer w (n_params floats) with the layer's initial weights. */
void ms_layer_init_host(const ms_model *m, const ms_layer *L, float *w);

#endif
