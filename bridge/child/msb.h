/* msb.h — libmemsplit_bridge.so, the C half of the bridge inside a user's
 * program: the one writer of the event stream to the memsplit parent, the
 * ledger with its caps, the choice of the units and the GPU ballast. The Python
 * package (bridge/python/memsplit_bridge) calls these through ctypes; the
 * CUPTI injection library (bridge/inject) links against them.
 *
 * Contract:
 *  - msb_open() connects to $MEMSPLIT_BRIDGE_SOCK (once; later calls return
 *    the same state). 0 when connected; -1 when there is no parent (then
 *    every call below is a cheap no-op that reports success, so the program
 *    runs as if memsplit were not there).
 *  - Every event is written as one JSON line with one send() under one
 *    mutex, at once: nothing waits in a buffer, so a program that dies loses
 *    nothing it reported. The one exception is msb_batch_transitions(1) (a
 *    rerun, where the program's speed is the point): a transition's `w`
 *    line then waits, at most about 10 ms, until the next other line (which
 *    it precedes: the stream keeps its order), a full buffer, a thread's
 *    flush or the program's exit; a program killed outright (os._exit, a
 *    signal) can lose the last ~10 ms of unit boundaries, never an event
 *    of another kind. A write that fails (the parent is gone) makes the
 *    bridge inert; msb_active() then returns 0.
 *  - The program owns its descriptors: before each line the bridge checks
 *    that its descriptor is still the socket it connected (device and
 *    inode). If the program closed it (and perhaps got the number back for
 *    a file or socket of its own), the bridge goes inert without writing to
 *    that descriptor or closing it.
 *  - After fork() the child process is inert (its copy of the connection is
 *    closed): DataLoader workers never write.
 *  - Layers and phases are the vocabulary's (vocab.h); msb_where sets where
 *    the program is, for the events C writes itself (CUPTI segments).
 *  - msb_alloc returns 0 (recorded, event `a`), 1 (refused by the device's
 *    cap: event `x`; the caller raises the OOM), or -1 (bad argument).
 * See docs/bridge.md for the wire format. */
#ifndef MS_BRIDGE_MSB_H
#define MS_BRIDGE_MSB_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/mem_event.h"

#define MSB_PROTOCOL 1

int msb_open(void);
int msb_active(void);
double msb_now_us(void);                       /* since msb_open */
int msb_send(const char *json_object);         /* a whole object, no newline */
/* A `warn` event {what, text} (text escaped as a JSON string here). */
int msb_warn(const char *what, const char *text);

void msb_where(int layer, int phase);
/* msb_where, and the `w` event that says it (docs/bridge.md): the
 * allocator's counters at the moment (-1: none), the bytes entering the
 * layer and the layer that made them (-1: not a layer entry), the training
 * forwards so far. One call, formatted here: a program pays it at every
 * unit boundary. */
int msb_transition(int layer, int phase, int64_t alloc, int64_t peak, int64_t reserved, int64_t rpeak, int64_t xin,
                   int xl, int fp);
/* Transitions' lines wait and go together (on) or go at once (off, the
 * default; turning it off sends what waits): see the contract above. */
void msb_batch_transitions(int on);
int msb_current_layer(void);
int msb_current_phase(void);

int msb_set_capacity(int dev, uint64_t bytes);
int msb_alloc(int dev, uint64_t key, uint64_t bytes, int cat, int layer);
void msb_free(uint64_t key);
int msb_relabel(uint64_t key, int cat, int layer);
/* A run of n ledger events, in order, as msb_alloc (op 'a': key, bytes,
 * cat, layer, on device dev[i]), msb_free (op 'f': key) and msb_relabel
 * (op 'r': key, cat, layer) would make them, in phase `phase`, at times t
 * (msb_now_us's clock): the GPU allocator's trace turned into the ledger's
 * events (bridge/python/memsplit_bridge/_history.py), and a step's
 * relabelled gradients and optimizer state, on a plan's stages too. dev
 * NULL: device 0 throughout. An allocation a device's cap refuses is left
 * out and said (event `x`), as msb_alloc says it. The lines go out in a few
 * writes. 0, or -1 (bad arguments, a failed write). */
int msb_replay(int n, const char *op, const uint64_t *key, const uint64_t *bytes, const int *cat, const int *layer,
               const int *dev, int phase, const double *t);
uint64_t msb_live(int dev, int cat);           /* cat -1: every category */
uint64_t msb_peak(int dev);
/* Bytes of category cat live at dev's peak (the breakdown of msb_peak). */
uint64_t msb_peak_cat(int dev, int cat);
/* The peak starts again from what is live now (a plan was just applied). */
void msb_reset_peak(int dev);
/* 1 when key is a live storage labelled cat (e.g. a parameter), else 0;
 * *layer gets its layer (may be NULL). */
int msb_is(uint64_t key, int cat, int *layer);
/* The device (ledger index) of a live storage, -1 when not live. */
int msb_device_of(uint64_t key);
/* A live storage now counts on device dev (a plan placed it there; on
 * virtual devices of one GPU no copy is made): event `a` with the same key,
 * which replaces it. 0, 1 when dev's cap refuses it (it stays), -1 unknown. */
int msb_move(uint64_t key, int dev);

/* The units (layers.h: msb_pick_units), callable from Python. */
int msb_units(const char *tree_tsv, const char *layers, int *unit_of, int cap, char *why, size_t whylen);
int msb_fingerprint_of(const char *tree_tsv, char *out, size_t outlen);

/* Takes the ballast on CUDA device `ordinal` so that the whole device,
 * context included, has `capacity` bytes (event `ballast`). Returns the
 * bytes taken (0 when the device is not larger than capacity), or -1 with
 * err. Uses the driver API through dlopen: no CUDA link dependency. */
int64_t msb_ballast(int ordinal, uint64_t capacity, char *err, size_t errlen);
/* 1 on the thread that is taking the ballast (CUPTI must not count it). */
int msb_in_ballast(void);

/* A device allocation, free or failed allocation seen by CUPTI
 * (bridge/inject), as the tracer made it: event `seg` with its call, bytes,
 * address, whether it freed, and for a failure the call's result (2 when
 * CUPTI gave none), at the layer and phase msb_where set. */
void msb_segment(const ms_mem_event *e);

#endif
