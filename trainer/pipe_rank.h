/* pipe_rank.h — what a pipeline adds when it is one rank of a run
 * (ms_pipe_spec.dist, dist.h): the channels to the neighbouring stages'
 * processes, its m/v (a ZeRO-1 chunk or whole), and the end of each step.
 *
 * The end of a step, in order: the stage's gradients are summed over its
 * replicas (dp_allreduce; under ZeRO-1 dp_reduce_scatter, each replica
 * keeping its chunk); every rank's per-layer gradient statistics and
 * summed loss are gathered, so the global norm is summed per layer in layer
 * order as on one device; the optimizer updates the rank's share
 * (opt_rank.h); batchnorm running statistics are averaged over the replicas.
 *
 * BatchNorm across replicas: training normalises each micro-batch by its own
 * statistics, so losses, gradients and weights equal one device's. The
 * running statistics (used only for evaluation) are updated by each replica
 * over its own micro-batches, then set on every replica to their mean over
 * the replicas (the sum times 1/d) at the end of every step. They are not
 * one device's, which would update them over all d*m micro-batches in turn.
 *
 * Every call returns MS_OK, MS_EOOM or MS_EFAIL with p->err set. */
#ifndef MS_PIPE_RANK_H
#define MS_PIPE_RANK_H

#include "trainer/dist.h"
#include "trainer/pipeline.h"

/* Message tags: activations forward, gradients back. */
enum { MS_TAG_ACT = 1, MS_TAG_GRAD = 2 };

int ms_pipe_rank_transport(ms_pipeline *p);
int ms_pipe_rank_ensure_state(ms_pipeline *p, ms_layer *L);
int ms_pipe_rank_finish(ms_pipeline *p);
/* Checkpoints of a rank's pipeline (ckpt_parts.h): save is collective over
 * the run, and every rank returns the same verdict; load reads a
 * checkpoint of any layout. */
int ms_pipe_rank_checkpoint(ms_pipeline *p, const char *dir, char *path_out, size_t len);
int ms_pipe_rank_load(ms_pipeline *p, const char *path);

#endif
