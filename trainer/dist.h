/* dist.h — what one stage of one replica needs from the other processes of
 * a run launched as MPI ranks (mpi/ implements it; the trainer never
 * includes mpi.h, so build/memsplit does not need libmpi).
 *
 * Layout: p stages x d replicas, one rank each; rank r runs stage r % p of
 * replica r / p. The replica's pipeline neighbours exchange activations and
 * gradients (send/recv, or NCCL on GPUs through nccl_pipe); the d ranks of a
 * stage form its data-parallel group, whose collectives work in place on the
 * stage's device memory (MPI on the CPU backend, NCCL on GPUs).
 *
 * Contract of the operations (each returns 0, or -1 with err set):
 *  - send/recv: blocking, except between group_begin and group_end, where
 *    they are only posted and group_end waits for all of them (the same
 *    fusing as NCCL groups, transport.h), so the schedules cannot deadlock.
 *  - dp_allreduce: the sum over the group, bitwise the same on every replica.
 *  - dp_reduce_scatter: replica c ends with the sum of chunk c (ms_shard_lo/hi)
 *    of buf; the rest of buf is left undefined.
 *  - dp_allgather: every replica gets chunk c of buf from replica c;
 *    dp_allgather_host: the same in host memory, whatever the backend
 *    (checkpoints gather ZeRO-1's m/v chunks through it).
 *  - allgather: host bytes from every rank of the run, in rank order.
 * With d = 1 the dp_ operations are never called. */
#ifndef MS_DIST_H
#define MS_DIST_H

#include <stddef.h>
#include "trainer/device.h"

typedef struct ms_dist {
    int rank, size;             /* in the run; size = stages * replicas */
    int stages, replicas;
    int stage, replica;         /* this rank's */
    int zero;                   /* 1: ZeRO-1, AdamW state sharded over the replicas */
    void *nccl_pipe;            /* GPUs: ncclComm_t of this replica's pipeline (rank = stage); NULL: send/recv */
    void *ctx;                  /* the implementation's */
    int (*send)(void *ctx, int peer_stage, int tag, const void *buf, size_t bytes);
    int (*recv)(void *ctx, int peer_stage, int tag, void *buf, size_t bytes);
    void (*group_begin)(void *ctx);
    int (*group_end)(void *ctx);
    int (*dp_allreduce)(void *ctx, ms_device *dev, float *buf, size_t n);
    int (*dp_reduce_scatter)(void *ctx, ms_device *dev, float *buf, size_t n);
    int (*dp_allgather)(void *ctx, ms_device *dev, float *buf, size_t n);
    int (*dp_allgather_host)(void *ctx, float *buf, size_t n);
    int (*allgather)(void *ctx, const void *mine, size_t bytes, void *all);
    char err[256];
} ms_dist;

/* The run's ranks as a whole, for what a rank's driver does around its
 * stage (run/rank_train.h): mpi/ implements it (mpi/mpi_world.h), so that
 * the driver never includes mpi.h either.
 *  - allgather: `bytes` host bytes from every rank into all, in rank order;
 *  - bcast: rank 0's `bytes` at buf to every rank;
 *  - barrier; abort: ends every rank of the run with exit status code (it
 *    does not return);
 *  - open_dist/close_dist: this rank's ms_dist for p stages x d replicas
 *    (cuda_ordinal >= 0: NCCL on that GPU, else MPI), 0 or -1 with err;
 *  - arm_kill: a testing aid, the rank kills itself (SIGKILL) at its next
 *    transfer to another rank.
 * Every call is collective except abort and arm_kill. */
typedef struct ms_world {
    int rank, size;
    void (*allgather)(const void *mine, size_t bytes, void *all);
    void (*bcast)(void *buf, size_t bytes);
    void (*barrier)(void);
    void (*abort)(int code);
    int (*open_dist)(ms_dist *d, int stages, int replicas, int zero, int cuda_ordinal, char *err, size_t errlen);
    void (*close_dist)(ms_dist *d);
    void (*arm_kill)(ms_dist *d);
} ms_world;

/* Chunk c of n elements shared by d: [ms_shard_lo, ms_shard_hi). */
static inline size_t ms_shard_lo(size_t n, int d, int c) { return n / (size_t)d * (size_t)c + (n % (size_t)d < (size_t)c ? n % (size_t)d : (size_t)c); }
static inline size_t ms_shard_hi(size_t n, int d, int c) { return ms_shard_lo(n, d, c + 1); }

#endif
