/* mpi_dist.c — ms_dist over MPI, with NCCL on GPUs (mpi_dist.h). */
#include "mpi/mpi_dist.h"

#include <cuda_runtime_api.h>
#include <limits.h>
#include <mpi.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PENDING 8 /* a group holds a send and a receive per boundary */

typedef struct mpi_ctx {
    ms_dist *d;
    MPI_Comm pipe, group;     /* this replica's stages (rank = stage); this stage's replicas (rank = replica) */
    MPI_Request req[MAX_PENDING];
    int n_req, in_group;
    int *counts, *displs;     /* chunk sizes and offsets of the current collective, [replicas] */
    int cuda;
    ncclComm_t nccl_group;    /* GPUs: the stage group's communicator (NULL with one replica) */
    int armed;                /* testing aid: die at the next transfer */
} mpi_ctx;

static int mpi_fail(mpi_ctx *c, int rc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, s, &n);
    snprintf(c->d->err, sizeof c->d->err, "%s: %.*s", what, n, s);
    return -1;
}

static void maybe_die(mpi_ctx *c)
{
    if (c->armed) raise(SIGKILL);
}

static int too_big(mpi_ctx *c, size_t n, const char *what)
{
    if (n <= INT_MAX) return 0;
    snprintf(c->d->err, sizeof c->d->err, "%s: %zu elements is more than one MPI call carries", what, n);
    return 1;
}

/* ---- the pipeline: send/recv, fused inside a group ------------------- */

static int p2p_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    mpi_ctx *c = ctx;
    maybe_die(c);
    if (too_big(c, bytes, "send")) return -1;
    int rc;
    if (c->in_group) {
        if (c->n_req == MAX_PENDING) return mpi_fail(c, MPI_ERR_OTHER, "send: too many in one group");
        rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->pipe, &c->req[c->n_req++]);
    } else {
        rc = MPI_Send(buf, (int)bytes, MPI_BYTE, peer, tag, c->pipe);
    }
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, rc, "MPI send to the next stage");
}

static int p2p_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    mpi_ctx *c = ctx;
    if (too_big(c, bytes, "recv")) return -1;
    int rc;
    if (c->in_group) {
        if (c->n_req == MAX_PENDING) return mpi_fail(c, MPI_ERR_OTHER, "recv: too many in one group");
        rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, c->pipe, &c->req[c->n_req++]);
    } else {
        rc = MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, tag, c->pipe, MPI_STATUS_IGNORE);
    }
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, rc, "MPI receive from a neighbouring stage");
}

static void p2p_group_begin(void *ctx)
{
    mpi_ctx *c = ctx;
    c->in_group = 1;
    c->n_req = 0;
}

static int p2p_group_end(void *ctx)
{
    mpi_ctx *c = ctx;
    int rc = MPI_Waitall(c->n_req, c->req, MPI_STATUSES_IGNORE);
    c->in_group = 0;
    c->n_req = 0;
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, rc, "MPI transfer between stages");
}

/* ---- the stage group: collectives in place -------------------------- */

static int set_chunks(mpi_ctx *c, size_t n)
{
    for (int r = 0; r < c->d->replicas; r++) {
        c->displs[r] = (int)ms_shard_lo(n, c->d->replicas, r);
        c->counts[r] = (int)(ms_shard_hi(n, c->d->replicas, r) - ms_shard_lo(n, c->d->replicas, r));
    }
    return 0;
}

static int nccl_fail(mpi_ctx *c, ncclResult_t r, const char *what)
{
    snprintf(c->d->err, sizeof c->d->err, "NCCL %s over the replicas: %s", what, ncclGetErrorString(r));
    return -1;
}

/* GPUs: chunk c is reduced onto, or broadcast from, replica c; one group. */
static int nccl_chunks(mpi_ctx *c, ms_device *dev, float *buf, size_t n, int reduce)
{
    cudaSetDevice(dev->cuda_ordinal);
    cudaStream_t sm = (cudaStream_t)dev->k.stream;
    ncclResult_t r = ncclGroupStart();
    for (int k = 0; r == ncclSuccess && k < c->d->replicas; k++) {
        size_t lo = ms_shard_lo(n, c->d->replicas, k), cnt = ms_shard_hi(n, c->d->replicas, k) - lo;
        r = reduce ? ncclReduce(buf + lo, buf + lo, cnt, ncclFloat, ncclSum, k, c->nccl_group, sm)
                   : ncclBroadcast(buf + lo, buf + lo, cnt, ncclFloat, k, c->nccl_group, sm);
    }
    ncclResult_t r2 = ncclGroupEnd();
    return r == ncclSuccess && r2 == ncclSuccess ? 0 : nccl_fail(c, r != ncclSuccess ? r : r2, reduce ? "reduce" : "broadcast");
}

static int dp_reduce_scatter(void *ctx, ms_device *dev, float *buf, size_t n)
{
    mpi_ctx *c = ctx;
    maybe_die(c);
    if (c->cuda) return nccl_chunks(c, dev, buf, n, 1);
    if (too_big(c, n, "reduce-scatter") || set_chunks(c, n)) return -1;
    /* in place, MPI leaves this replica's chunk at the start of buf */
    int rc = MPI_Reduce_scatter(MPI_IN_PLACE, buf, c->counts, MPI_FLOAT, MPI_SUM, c->group);
    if (rc != MPI_SUCCESS) return mpi_fail(c, rc, "MPI reduce-scatter over the replicas");
    int me = c->d->replica;
    memmove(buf + c->displs[me], buf, (size_t)c->counts[me] * sizeof *buf);
    return 0;
}

static int dp_allgather_host(void *ctx, float *buf, size_t n)
{
    mpi_ctx *c = ctx;
    if (too_big(c, n, "all-gather") || set_chunks(c, n)) return -1;
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, c->counts, c->displs, MPI_FLOAT, c->group);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, rc, "MPI all-gather over the replicas");
}

static int dp_allgather(void *ctx, ms_device *dev, float *buf, size_t n)
{
    mpi_ctx *c = ctx;
    maybe_die(c);
    if (c->cuda) return nccl_chunks(c, dev, buf, n, 0);
    return dp_allgather_host(ctx, buf, n);
}

static int dp_allreduce(void *ctx, ms_device *dev, float *buf, size_t n)
{
    mpi_ctx *c = ctx;
    if (c->cuda) {
        /* NCCL's ring and tree both reduce each element once and broadcast it */
        maybe_die(c);
        cudaSetDevice(dev->cuda_ordinal);
        ncclResult_t r = ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, c->nccl_group, (cudaStream_t)dev->k.stream);
        return r == ncclSuccess ? 0 : nccl_fail(c, r, "all-reduce");
    }
    return dp_reduce_scatter(ctx, dev, buf, n) || dp_allgather(ctx, dev, buf, n) ? -1 : 0;
}

static int world_allgather(void *ctx, const void *mine, size_t bytes, void *all)
{
    mpi_ctx *c = ctx;
    if (too_big(c, bytes, "all-gather")) return -1;
    int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, rc, "MPI all-gather over the ranks");
}

/* ---- NCCL over MPI --------------------------------------------------- */

/* An NCCL communicator over the ranks of comm: rank 0 makes the unique id,
 * MPI broadcasts it, every rank joins. */
static int nccl_twin(MPI_Comm comm, ncclComm_t *out, char *err, size_t errlen)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    /* every rank takes part in the broadcast, even after a failure at rank 0,
     * so that none waits forever; the failure shows as an all-zero id */
    int ok = r == ncclSuccess, all_ok = 0;
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, comm);
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        snprintf(err, errlen, "NCCL: cannot make a unique id: %s", ncclGetErrorString(r));
        return -1;
    }
    r = ncclCommInitRank(out, size, id, rank);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "NCCL: cannot join a communicator of %d ranks: %s", size, ncclGetErrorString(r));
        return -1;
    }
    return 0;
}

int ms_mpi_dist_open(ms_dist *d, int stages, int replicas, int zero, int cuda_ordinal, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    if (stages < 1 || replicas < 1 || stages * replicas != d->size) {
        snprintf(err, errlen, "%d stages x %d replicas need %d ranks; the run has %d", stages, replicas,
                 stages * replicas, d->size);
        return -1;
    }
    d->stages = stages;
    d->replicas = replicas;
    d->stage = d->rank % stages;
    d->replica = d->rank / stages;
    d->zero = zero && replicas > 1;
    mpi_ctx *c = calloc(1, sizeof *c);
    if (!c || !(c->counts = calloc((size_t)replicas, sizeof *c->counts)) ||
        !(c->displs = calloc((size_t)replicas, sizeof *c->displs))) {
        if (c) free(c->counts);
        free(c);
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    c->d = d;
    d->ctx = c;
    MPI_Comm_split(MPI_COMM_WORLD, d->replica, d->stage, &c->pipe);
    MPI_Comm_split(MPI_COMM_WORLD, d->stage, d->replica, &c->group);
    MPI_Comm_set_errhandler(c->pipe, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->group, MPI_ERRORS_RETURN);
    d->send = p2p_send;
    d->recv = p2p_recv;
    d->group_begin = p2p_group_begin;
    d->group_end = p2p_group_end;
    d->dp_allreduce = dp_allreduce;
    d->dp_reduce_scatter = dp_reduce_scatter;
    d->dp_allgather = dp_allgather;
    d->dp_allgather_host = dp_allgather_host;
    d->allgather = world_allgather;
    if (cuda_ordinal < 0) return 0;
    c->cuda = 1;
    setenv("NCCL_NVLS_ENABLE", "0", 0); /* NVLink multicast can take the host's GPUs down: never */
    if (cudaSetDevice(cuda_ordinal) != cudaSuccess) {
        snprintf(err, errlen, "cannot use cuda:%d", cuda_ordinal);
        return -1;
    }
    ncclComm_t pc = NULL;
    if (stages > 1 && nccl_twin(c->pipe, &pc, err, errlen)) return -1;
    d->nccl_pipe = pc;
    if (replicas > 1 && nccl_twin(c->group, &c->nccl_group, err, errlen)) return -1;
    return 0;
}

void ms_mpi_dist_close(ms_dist *d)
{
    mpi_ctx *c = d->ctx;
    if (!c) return;
    if (d->nccl_pipe) ncclCommDestroy((ncclComm_t)d->nccl_pipe);
    if (c->nccl_group) ncclCommDestroy(c->nccl_group);
    MPI_Comm_free(&c->pipe);
    MPI_Comm_free(&c->group);
    free(c->counts);
    free(c->displs);
    free(c);
    memset(d, 0, sizeof *d);
}

void ms_mpi_dist_arm_kill(ms_dist *d)
{
    if (d->ctx) ((mpi_ctx *)d->ctx)->armed = 1;
}
