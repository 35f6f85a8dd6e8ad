/* step_graph.h — one micro-batch's forward and backward, replayed as a CUDA graph.
 *
 * In the steady state of `memsplit train` on one GPU every micro-batch
 * launches the same few hundred kernels on the same buffers. Captured once
 * into a graph, they start with one launch, and the GPU no longer waits on
 * the host between kernels. A graph stays valid while the device allocates
 * and frees nothing (its generation, n_allocs + n_frees, is the one at the
 * capture, so every pointer baked in is still the same buffer) and the loss
 * gradient's scale is the one captured. While capturing, the device refuses
 * to allocate or free (device.h: capturing): such a capture is thrown away
 * (nothing captured ever ran) and the micro-batch runs as usual.
 *
 * Token ids reach the graph through two slots of pinned host buffers, which
 * its copies read when it runs: launches take the slots in turn, so the
 * caller may queue a launch while the one before runs, but must wait for a
 * launch to finish (it reads the loss) before the next but one. Device
 * memory the instantiation takes (measured as the drop in the GPU's free
 * memory) is counted on the device as transient. CUDA only. */
#ifndef MS_STEP_GRAPH_H
#define MS_STEP_GRAPH_H

#include "trainer/device.h"

typedef struct ms_step_graph {
    void *exec;             /* cudaGraphExec_t, NULL when there is none */
    void *graph;            /* the cudaGraph_t it was made from: its copy nodes are re-pointed a launch */
    void *copy[2];          /* its nodes that copy ids and targets */
    int32_t *ids[2], *targets[2]; /* two slots of pinned host buffers of n ids; captures read slot 0 */
    int slot;               /* the slot the next launch fills */
    size_t n;
    size_t gen;             /* the device's n_allocs + n_frees at the capture */
    float dscale;           /* the loss gradient's scale it was captured with */
    int captures;           /* graphs made in this run */
    int thrown;             /* captures thrown away because the step allocated */
    size_t bytes;           /* device memory the graphs took (counted on the device) */
    double capture_ms;      /* host time of the last capture, instantiation and upload */
    char why_not[200];      /* why graphs were given up for this run ("" while not) */
    double t0;              /* during a capture: when it began, */
    size_t free0;           /* and the GPU's free bytes then */
} ms_step_graph;

/* 1 if g can replay a micro-batch on d now with this dscale. */
int ms_step_graph_ready(const ms_step_graph *g, const ms_device *d, float dscale);

/* Drops any old graph and starts capturing d's stream for a micro-batch of
 * n ids. Returns 0, or -1 with why_not set (graphs are then given up). */
int ms_step_graph_begin(ms_step_graph *g, ms_device *d, size_t n);
/* Ends the capture begun above. ok: the micro-batch enqueued without error.
 * Returns 1 with a graph ready, 0 when the capture was thrown away (the step
 * wanted to allocate or free, or ok was 0), or -1 with why_not set. */
int ms_step_graph_end(ms_step_graph *g, ms_device *d, int ok, float dscale);

/* Copies one micro-batch's ids and targets into the next slot, points the
 * graph's copies at it and enqueues the graph on d's stream. Returns MS_OK
 * or MS_EFAIL (d->k.error). */
int ms_step_graph_launch(ms_step_graph *g, ms_device *d, const int32_t *ids, const int32_t *targets);

void ms_step_graph_free(ms_step_graph *g);

#endif
