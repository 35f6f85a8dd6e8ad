/* exec_internal.h — helpers shared by the layer implementations (not a public API). */
#ifndef MS_EXEC_INTERNAL_H
#define MS_EXEC_INTERNAL_H

#include "trainer/exec.h"

/* Low-precision compute copy of tensor `name` (dt), its fp32 weights, its gradient. */
static inline void *wc_of(const ms_model *m, const ms_layer *L, const char *name)
{
    const ms_tensor *t = ms_layer_tensor(L, name);
    return (char *)L->wc + t->off * (L->wc == (void *)L->w ? 4 : ms_dtype_size(m->dt));
}
static inline float *w_of(const ms_layer *L, const char *name) { return L->w + ms_layer_tensor(L, name)->off; }
static inline float *g_of(const ms_layer *L, const char *name) { return L->g + ms_layer_tensor(L, name)->off; }
static inline void *row_ptr(const void *p, size_t row, size_t cols, ms_dtype dt)
{
    return (char *)p + row * cols * ms_dtype_size(dt);
}

/* Allocate L's saved-activation arena at its first forward. */
int ms_exec_ensure_acts(ms_model *m, ms_layer *L);
/* The same, for recomputing blocks too (their views go into s's recompute arena). */
int ms_exec_ensure_acts_s(ms_model *m, ms_layer *L, ms_scratch *s);
/* Allocate L's gradients (zeroed) at its first backward. */
int ms_exec_ensure_grads(ms_model *m, ms_layer *L);

/* Normalisation forward/backward with the configured norm (layernorm or batchnorm). */
void ms_exec_norm_fwd(ms_model *m, ms_layer *L, int which, void *out, float *mean, float *rstd,
                      const void *x, const float *w, const float *b);
/* Recompute a norm's output (forward not saving it) from the same input x,
 * bit-identical to what forward wrote. stats: ms_exec_norm_recompute_need(m)
 * bytes of scratch for the statistics (and batchnorm's running update, which
 * is dropped: the forward already made it). */
size_t ms_exec_norm_recompute_need(const ms_model *m);
void ms_exec_norm_recompute(ms_model *m, ms_layer *L, void *out, float *stats, const void *x, const float *w,
                            const float *b);
void ms_exec_norm_bwd(ms_model *m, ms_layer *L, void *dx, const void *dresid, float *dw, float *db,
                      const void *dout, const void *x, const float *mean, const float *rstd, const float *w);

/* Arena bytes a layer's backward asks for (what ms_scratch_arena receives);
 * for a block also at least what its forward asks for. */
size_t ms_block_scratch_need(const ms_model *m, const ms_layer *L);
size_t ms_head_scratch_need(const ms_model *m);
/* Logit rows the head computes at once: train.head_chunk where set (at most
 * B*T), else B*T split into the fewest equal chunks of at most 320 MiB. */
int ms_head_chunk_rows(const ms_model *m);

int ms_embed_forward(ms_model *m, ms_layer *L, const int32_t *ids);
int ms_embed_backward(ms_model *m, ms_layer *L, ms_scratch *s);
int ms_block_forward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x);
int ms_block_backward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x);
int ms_head_forward(ms_model *m, ms_layer *L, const void *x, const int32_t *ids);
int ms_head_backward(ms_model *m, ms_layer *L, ms_scratch *s, const void *x, float dscale, double *loss_sum);
int ms_head_add_loss(ms_model *m, ms_layer *L, double *loss_sum);

#endif
