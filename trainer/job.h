/* job.h — a training job's fingerprint: what must be equal for one run to
 * continue another's checkpoint.
 *
 * Contract: ms_job_fingerprint() hashes (FNV-1a 64, never 0) the keys that
 * decide what is learnt — the model's shape and numerics, the optimizer's
 * hyper-parameters, the precision policy, train.seed — with the data's hash
 * (ms_data_hash) and the global batch (train.batch x train.accum). It leaves
 * out how the work is laid out: the split over devices, the micro-batch
 * size and count, recompute, the devices and their capacities, the number
 * of steps, logging and checkpoint settings. So a re-planned run, a run
 * resumed after a kill (with more steps, say) and a single-device run of a
 * pipeline's checkpoint are one job; another seed, other data or another
 * global batch is another. It depends on nothing but the config and a
 * number, so a checkpoint made of per-rank parts can carry it in each part
 * and in its manifest.
 * ms_job_mismatch() says why two configs are different jobs: the first key
 * that differs with both values, or the data or the global batch. */
#ifndef MS_JOB_H
#define MS_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/config.h"

uint64_t ms_job_fingerprint(const ms_config *c, uint64_t data_hash);

/* "train.seed is 1337 there, 1 here"; "" when the configs agree on every
 * key of the job (then the data differs). a is the checkpoint's config as
 * INI text, b this run's config. */
void ms_job_mismatch(const char *a_ini, const ms_config *b, char *out, size_t len);

#endif
