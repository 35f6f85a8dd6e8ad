/* layer_embed.c — layer 0: token + position embedding. */
#include "trainer/exec_internal.h"

int ms_embed_forward(ms_model *m, ms_layer *L, const int32_t *ids)
{
    ms_device *d = L->dev;
    size_t N = (size_t)m->B * m->T;
    if (ms_dev_h2d(d, L->a.tokens, ids, N * 4)) return MS_EFAIL;
    d->ops->embedding_fwd(&d->k, m->dt, L->a.out, L->a.tokens, wc_of(m, L, "wte"), wc_of(m, L, "wpe"),
                          m->B, m->T, m->C);
    return MS_OK;
}

int ms_embed_backward(ms_model *m, ms_layer *L, ms_scratch *s)
{
    ms_device *d = L->dev;
    d->ops->embedding_bwd(&d->k, m->dt, g_of(L, "wte"), g_of(L, "wpe"), s->buf[MS_TR_DRES], L->a.tokens,
                          m->B, m->T, m->C);
    return MS_OK;
}
