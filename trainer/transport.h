/* transport.h — moving activations forward and their gradients back
 * between pipeline stages.
 *
 * Push model: the sender copies straight into the receiver's buffer (no
 * staging), waiting only until that buffer is free: an input slot is free
 * once the receiver's backward of the micro-batch that last used it has run,
 * the gradient buffer once the receiver has taken the previous gradient.
 * Sends never wait for the receiver to reach its receive, so no schedule
 * order can deadlock. Copies are plain memcpy on the CPU and device copies
 * on the sender's stream between virtual devices of one GPU (ordered with
 * CUDA events); each channel's host-side state is guarded by a mutex and
 * condition variable.
 *
 * Between distinct GPUs the channel uses NCCL send/recv (one process, one
 * communicator per GPU, ncclCommInitAll; NVLink multicast off). NCCL's
 * send/recv rendezvous on the GPU, so a stage must fuse a send with the
 * receive that follows it on the same boundary (1F1B: "send activation,
 * receive gradient" and "send gradient, receive activation") into one NCCL
 * group, as the pipeline does (ms_channel_group_begin/end): then both
 * neighbours' groups hold the same two messages and progress together.
 * NCCL also connects a pair of ranks lazily, at their first send/recv, in a
 * host-side handshake that waits for the peer's host thread: a stage whose
 * first receive on a boundary comes while its neighbour's thread waits on
 * the GPU (GPipe: stage 0 posts its first gradient receive while the last
 * stage reads its loss) would hang there. ms_transport_nccl_connect makes
 * every connection at open, from one thread.
 *
 * Between processes (MPI ranks, dist.h) only one end of a channel is here:
 * on the CPU backend it sends and receives through ms_dist (blocking, or
 * fused in a group like NCCL's); on GPUs it is an NCCL channel over the
 * replica's pipeline communicator. */
#ifndef MS_TRANSPORT_H
#define MS_TRANSPORT_H

#include <pthread.h>
#include <stddef.h>
#include "trainer/device.h"

#define MS_TX_MAX_SLOTS 256

typedef struct ms_channel {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ms_device *src, *dst;
    int n_slots;              /* receiver buffers: in-flight inputs, or 1 for gradients */
    void **slot;              /* the receiver's buffers */
    long sent;                /* messages delivered (the next one has index sent) */
    long freed;               /* messages whose buffer the receiver has released */
    void *ev_sent[MS_TX_MAX_SLOTS], *ev_freed[MS_TX_MAX_SLOTS]; /* cudaEvent_t, per slot */
    int aborted;
    /* NCCL (distinct GPUs) */
    void *nccl_src, *nccl_dst;  /* ncclComm_t of the sender's / receiver's GPU, NULL: copies */
    int rank_src, rank_dst;
    size_t bytes;               /* message size (NCCL needs it at the receive) */
    /* another process: the local end talks to stage `peer` through dist */
    const struct ms_dist *dist;
    int peer, tag;
} ms_channel;

typedef struct ms_transport {
    int n;                    /* stages - 1 boundaries */
    ms_channel *fwd;          /* fwd[b]: stage b -> b+1, activations */
    ms_channel *bwd;          /* bwd[b]: stage b+1 -> b, gradients */
} ms_transport;

int ms_channel_init(ms_channel *c, ms_device *src, ms_device *dst, int n_slots, void **slots);
void ms_channel_destroy(ms_channel *c);
/* Sender: copy bytes from src_buf into the receiver's buffer for message
 * number msg (0, 1, ... in order), waiting until it is free. */
int ms_channel_send(ms_channel *c, long msg, const void *src_buf, size_t bytes);
/* Receiver: wait for message msg; returns its buffer (the receiver's stream
 * is ordered after the copy). */
void *ms_channel_recv(ms_channel *c, long msg);
/* Receiver: the buffer of message msg may be reused (after the receiver's
 * queued work that reads it). */
int ms_channel_release(ms_channel *c, long msg);
/* Wake every waiter with an error (a stage failed). */
void ms_channel_abort(ms_channel *c);

/* Use NCCL for this channel: the communicators of both ends and their ranks. */
void ms_channel_use_nccl(ms_channel *c, void *comm_src, int rank_src, void *comm_dst, int rank_dst, size_t bytes);
/* The other end is stage `peer` of this replica in another process (dist.h),
 * messages of `bytes`, told apart from the other direction by tag. */
void ms_channel_use_dist(ms_channel *c, const struct ms_dist *dist, int peer, int tag, size_t bytes);
/* Fuse the following sends and receives (NCCL group); no-ops for copies. */
void ms_channel_group_begin(const ms_channel *c);
int ms_channel_group_end(const ms_channel *c);

/* Communicators for n distinct GPUs (ordinals), one per GPU, rank i = ordinals[i].
 * Sets NCCL_NVLS_ENABLE=0 unless the environment says otherwise. */
int ms_nccl_init(int n, const int *ordinals, void **comms, char *err, size_t errlen);
void ms_nccl_destroy(int n, void **comms);
/* Connects both directions of every NCCL boundary of tx now, from this one
 * thread (one group over all communicators), with one exchange of a whole
 * message into the channels' own buffers (their contents are dropped), and
 * waits for it. 0, or MS_EFAIL with err set. No-op without NCCL. */
int ms_transport_nccl_connect(ms_transport *tx, char *err, size_t errlen);

#endif
