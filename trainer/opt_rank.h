/* opt_rank.h — the AdamW step of one rank (dist.h): its stage's layers,
 * or under ZeRO-1 only its chunk of each layer (ms_shard_lo/hi), with the
 * global gradient norm taken over every rank's share, so that clipping and
 * the skip of a non-finite step are the same on every rank and the same as
 * on one device.
 *
 * Contract:
 *  - ms_opt_rank_share(): the elements [lo, hi) of layer L whose gradient
 *    statistics this rank contributes (ZeRO: its chunk; otherwise the whole
 *    layer on replica 0 and nothing elsewhere) and whose m/v it holds.
 *  - ms_opt_rank_stats(): those statistics, layer by layer, into
 *    sumsq[layer] (other entries untouched) and *nonfinite.
 *  - ms_opt_rank_apply(): given the global norm, clip and update. Under
 *    ZeRO-1 each replica updates its chunk and the chunks are then gathered
 *    (dist->dp_allgather), the low-precision copy recast from them; without
 *    it every replica updates the whole layer from the same reduced
 *    gradient. Then the fp16 loss scale and zeroed gradients, as
 *    ms_opt_step does. MS_OK, MS_EOOM or MS_EFAIL. */
#ifndef MS_OPT_RANK_H
#define MS_OPT_RANK_H

#include "trainer/dist.h"
#include "trainer/optimizer.h"

void ms_opt_rank_share(const ms_dist *dist, const ms_layer *L, size_t *lo, size_t *hi, int for_stats);
int ms_opt_rank_stats(ms_model *m, int first, int last, ms_scratch *scr, const ms_dist *dist, double *sumsq,
                      long *nonfinite);
int ms_opt_rank_apply(ms_model *m, int first, int last, ms_opt_state *st, const ms_dist *dist, double grad_norm,
                      int finite, ms_opt_result *res);

#endif
