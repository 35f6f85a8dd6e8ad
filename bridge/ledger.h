/* ledger.h — the bridge's memory ledger: live bytes of a program's tensors
 * by device, category and layer, with an optional capacity per device.
 *
 * One implementation for both sides of the bridge: the C library inside the
 * program uses it to enforce the accounting cap (the CPU's --gpu-mem, and
 * each stage's cap when several virtual devices share one GPU), and the
 * memsplit parent replays the same operations from the event stream to
 * build the rows, so the two can never disagree.
 *
 * Contract:
 *  - A storage is identified by a non-zero 64-bit key (its data pointer)
 *    and is live between msl_alloc and msl_free. Zero-byte storages are not
 *    tracked (msl_alloc returns MSL_OK and records nothing).
 *  - msl_alloc refuses (MSL_REFUSED, nothing recorded, *why filled) when the
 *    device has a capacity and live + bytes would exceed it; a key already
 *    live is first freed (its storage was released unseen: the address came
 *    back). Devices are 0..MSL_MAX_DEVICES-1, each made when first used
 *    (a record pass makes one per layer: docs/program-record.md); layers
 *    are -1 (none) or 0..MSL_MAX_LAYERS-1.
 *  - msl_relabel changes a live storage's category and layer (a parameter
 *    known at registration, a gradient after backward, optimizer state after
 *    the first step); unknown keys are ignored (returns 0).
 *  - Peaks are kept per device (total and the category breakdown at that
 *    moment). Nothing prints; errors are -1 (out of memory, bad argument). */
#ifndef MS_BRIDGE_LEDGER_H
#define MS_BRIDGE_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/addr_map.h"
#include "vocab/vocab.h"

#define MSL_MAX_LAYERS 4096
#define MSL_MAX_DEVICES MSL_MAX_LAYERS

enum { MSL_OK = 0, MSL_REFUSED = 1 };

typedef struct msl_rec {
    uint64_t key, bytes;
    int dev, cat, layer;
    int next_free;            /* free-list link while unused */
} msl_rec;

typedef struct msl_device {
    uint64_t capacity;        /* 0 = no cap */
    uint64_t live, peak;
    uint64_t live_cat[MS_CAT_N], peak_cat[MS_CAT_N]; /* peak_cat: breakdown at the total's peak */
    uint64_t *live_layer;     /* live bytes per layer, n_layer_slots entries */
    int n_layer_slots;
    uint64_t allocs, frees, refusals;
} msl_device;

typedef struct msl_ledger {
    msl_device *dev;          /* n_dev devices (owned): 0..n_dev-1 have been used */
    int n_dev;
    ms_addr_map index;        /* key -> record index + 1 */
    msl_rec *recs;
    int n_recs, cap_recs, free_head;
} msl_ledger;

typedef struct msl_refusal {
    int dev;
    uint64_t requested, live, capacity;
} msl_refusal;

void msl_init(msl_ledger *L);
void msl_free_all(msl_ledger *L);
int msl_set_capacity(msl_ledger *L, int dev, uint64_t capacity);

int msl_alloc(msl_ledger *L, int dev, uint64_t key, uint64_t bytes, int cat, int layer, msl_refusal *why);
/* Returns the bytes freed (0 when the key was not live); *dev_out gets the
 * device (may be NULL). */
uint64_t msl_free(msl_ledger *L, uint64_t key, int *dev_out);
int msl_relabel(msl_ledger *L, uint64_t key, int cat, int layer);
/* The live record of key, or NULL. */
const msl_rec *msl_find(const msl_ledger *L, uint64_t key);
/* Device dev's sums (a device never used reads as all zero; NULL only
 * for dev out of range). */
const msl_device *msl_dev(const msl_ledger *L, int dev);
/* Device dev's peak starts again from what is live now. */
void msl_reset_peak(msl_ledger *L, int dev);
/* Live bytes of layer on dev (0 when none). */
uint64_t msl_live_layer(const msl_ledger *L, int dev, int layer);

#endif
