/* ledger.c — the bridge's memory ledger (ledger.h). */
#include "bridge/ledger.h"

#include <stdlib.h>
#include <string.h>

void msl_init(msl_ledger *L)
{
    memset(L, 0, sizeof *L);
    L->free_head = -1;
}

void msl_free_all(msl_ledger *L)
{
    if (!L) return;
    for (int d = 0; d < L->n_dev; d++) free(L->dev[d].live_layer);
    free(L->dev);
    ms_addr_map_clear(&L->index);
    free(L->recs);
    msl_init(L);
}

/* Device dev, made (zeroed) when first used; NULL when out of range or
 * out of memory. */
static msl_device *device(msl_ledger *L, int dev)
{
    if (dev < 0 || dev >= MSL_MAX_DEVICES) return NULL;
    if (dev >= L->n_dev) {
        int n = L->n_dev ? L->n_dev : 4;
        while (n <= dev) n *= 2;
        if (n > MSL_MAX_DEVICES) n = MSL_MAX_DEVICES;
        msl_device *g = realloc(L->dev, (size_t)n * sizeof *g);
        if (!g) return NULL;
        memset(g + L->n_dev, 0, (size_t)(n - L->n_dev) * sizeof *g);
        L->dev = g;
        L->n_dev = n;
    }
    return &L->dev[dev];
}

const msl_device *msl_dev(const msl_ledger *L, int dev)
{
    static const msl_device unused;
    if (!L || dev < 0 || dev >= MSL_MAX_DEVICES) return NULL;
    return dev < L->n_dev ? &L->dev[dev] : &unused;
}

void msl_reset_peak(msl_ledger *L, int dev)
{
    if (!L || dev < 0 || dev >= L->n_dev) return;   /* one never used has no peak */
    msl_device *D = &L->dev[dev];
    D->peak = D->live;
    memcpy(D->peak_cat, D->live_cat, sizeof D->peak_cat);
}

int msl_set_capacity(msl_ledger *L, int dev, uint64_t capacity)
{
    msl_device *D = L ? device(L, dev) : NULL;
    if (!D) return -1;
    D->capacity = capacity;
    return 0;
}

static int layer_slot(msl_device *D, int layer)
{
    if (layer < 0) return 0;
    if (layer >= MSL_MAX_LAYERS) return -1;
    if (layer >= D->n_layer_slots) {
        int n = D->n_layer_slots ? D->n_layer_slots : 64;
        while (n <= layer) n *= 2;
        uint64_t *g = realloc(D->live_layer, (size_t)n * sizeof *g);
        if (!g) return -1;
        memset(g + D->n_layer_slots, 0, (size_t)(n - D->n_layer_slots) * sizeof *g);
        D->live_layer = g;
        D->n_layer_slots = n;
    }
    return 0;
}

static int new_rec(msl_ledger *L)
{
    if (L->free_head >= 0) {
        int i = L->free_head;
        L->free_head = L->recs[i].next_free;
        return i;
    }
    if (L->n_recs == L->cap_recs) {
        int n = L->cap_recs ? 2 * L->cap_recs : 256;
        msl_rec *g = realloc(L->recs, (size_t)n * sizeof *g);
        if (!g) return -1;
        L->recs = g;
        L->cap_recs = n;
    }
    return L->n_recs++;
}

/* Adds (sign > 0) or removes a record's bytes from its device's sums. */
static void account(msl_ledger *L, const msl_rec *r, int sign)
{
    msl_device *D = &L->dev[r->dev];
    if (sign > 0) {
        D->live += r->bytes;
        D->live_cat[r->cat] += r->bytes;
        if (r->layer >= 0) D->live_layer[r->layer] += r->bytes;
        if (D->live > D->peak) {
            D->peak = D->live;
            memcpy(D->peak_cat, D->live_cat, sizeof D->peak_cat);
        }
    } else {
        D->live -= r->bytes;
        D->live_cat[r->cat] -= r->bytes;
        if (r->layer >= 0) D->live_layer[r->layer] -= r->bytes;
    }
}

uint64_t msl_free(msl_ledger *L, uint64_t key, int *dev_out)
{
    uint64_t idx;
    if (!L || !ms_addr_map_take(&L->index, key, &idx)) return 0;
    msl_rec *r = &L->recs[idx - 1];
    account(L, r, -1);
    L->dev[r->dev].frees++;
    if (dev_out) *dev_out = r->dev;
    uint64_t b = r->bytes;
    r->key = 0;
    r->next_free = L->free_head;
    L->free_head = (int)(idx - 1);
    return b;
}

int msl_alloc(msl_ledger *L, int dev, uint64_t key, uint64_t bytes, int cat, int layer, msl_refusal *why)
{
    if (!L || dev < 0 || dev >= MSL_MAX_DEVICES || cat < 0 || cat >= MS_CAT_N || layer < -1 ||
        layer >= MSL_MAX_LAYERS || key == 0)
        return -1;
    if (bytes == 0) return MSL_OK;
    msl_free(L, key, NULL);   /* a key still live was released unseen */
    msl_device *D = device(L, dev);
    if (!D) return -1;
    if (D->capacity && (D->live > D->capacity || bytes > D->capacity - D->live)) {
        D->refusals++;
        if (why) {
            why->dev = dev;
            why->requested = bytes;
            why->live = D->live;
            why->capacity = D->capacity;
        }
        return MSL_REFUSED;
    }
    if (layer_slot(D, layer) != 0) return -1;
    int i = new_rec(L);
    if (i < 0) return -1;
    msl_rec *r = &L->recs[i];
    *r = (msl_rec){ .key = key, .bytes = bytes, .dev = dev, .cat = cat, .layer = layer, .next_free = -1 };
    if (ms_addr_map_put(&L->index, key, (uint64_t)i + 1) != 0) {
        r->key = 0;
        r->next_free = L->free_head;
        L->free_head = i;
        return -1;
    }
    account(L, r, +1);
    D->allocs++;
    return MSL_OK;
}

const msl_rec *msl_find(const msl_ledger *L, uint64_t key)
{
    uint64_t idx;
    if (!L || !ms_addr_map_get(&L->index, key, &idx)) return NULL;
    return &L->recs[idx - 1];
}

int msl_relabel(msl_ledger *L, uint64_t key, int cat, int layer)
{
    if (!L || cat < 0 || cat >= MS_CAT_N || layer < -1 || layer >= MSL_MAX_LAYERS) return -1;
    uint64_t idx;
    if (!ms_addr_map_get(&L->index, key, &idx)) return 0;
    msl_rec *r = &L->recs[idx - 1];
    if (layer_slot(&L->dev[r->dev], layer) != 0) return -1;
    /* the total is unchanged, so the peak cannot move */
    account(L, r, -1);
    r->cat = cat;
    r->layer = layer;
    account(L, r, +1);
    return 0;
}

uint64_t msl_live_layer(const msl_ledger *L, int dev, int layer)
{
    const msl_device *D = msl_dev(L, dev);
    return D && layer >= 0 && layer < D->n_layer_slots ? D->live_layer[layer] : 0;
}
