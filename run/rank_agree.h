/* rank_agree.h — the ranks of one launch agree, before anything is
 * allocated, that they run one job.
 *
 * Every rank reads its own command line, config and plan file, and an MPMD
 * launch (mpirun -np 1 memsplit train --plan A : -np 1 ... --plan B) or a
 * rank given other flags would train something its peers do not: other
 * micro-batching crashed the transport, other split points trained wrong
 * losses silently, another --steps or model shape hung the run, another
 * seed trained on. So each rank states its job and every rank compares.
 *
 * Contract: ms_rank_agree() is collective over w; every rank calls it once,
 * whatever its own checks said (code: 0, the exit status of its own
 * failure, or -1 when it stops on purpose: --help; why: its message).
 * A rank's job is text of "key=value" lines: every config key (the model,
 * train.steps, train.seed, ...) but where its data lives (data.path: the
 * data's tokens count, by their hash) and its device (device.*); the plan,
 * every field flattened ("plan.stages[1].layers[0]=11"; its reasoning
 * left out); the data's hash; and the rank options every rank must share
 * (the checkpoint folder, its interval, --resume). Its job fingerprint is
 * the FNV-1a 64 of that text.
 * Returns, the same on every rank: 0 when every rank's checks passed and
 * every fingerprint is rank 0's; -1 when every rank stops on purpose;
 * else the exit status (a rank's own failure's, or MS_EXIT_USAGE for ranks
 * that disagree) with err saying which ranks and why, with both values:
 *   "rank 1 runs another job than rank 0 (fingerprint 8f..31 on rank 0,
 *    0c..7e on rank 1): train.steps is 3 on rank 0, 6 on rank 1"
 * for rank 0 to print. Values from outside (names in a plan) are visible
 * (vocab/visible.h). */
#ifndef MS_RUN_RANK_AGREE_H
#define MS_RUN_RANK_AGREE_H

#include <stddef.h>

#include "run/rank_train.h"
#include "trainer/config.h"
#include "trainer/dist.h"
#include "vocab/plan.h"

int ms_rank_agree(const ms_world *w, int code, const char *why, const ms_config *cfg, const ms_plan *plan,
                  const ms_rank_opts *o, char *err, size_t errlen);

#endif
