/* addr_map.c — the open-addressing map of addr_map.h. */
#include "vocab/addr_map.h"

#include <stdlib.h>
#include <string.h>

/* Device addresses are at least 256-byte aligned: mix the bits so that
 * neighbouring allocations do not crowd one run of slots. */
static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static int map_grow(ms_addr_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    ms_addr_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        size_t j = slot_of(m->slots[i].key, ncap);
        while (ns[j].key) j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int ms_addr_map_put(ms_addr_map *m, uint64_t key, uint64_t val)
{
    if (!m || key == 0) return -1;
    /* keep the load factor under 1/2 so probe runs stay short */
    if ((m->n + 1) * 2 > m->cap && map_grow(m) != 0) return -1;
    size_t j = slot_of(key, m->cap);
    while (m->slots[j].key && m->slots[j].key != key) j = (j + 1) & (m->cap - 1);
    if (!m->slots[j].key) m->n++;
    m->slots[j].key = key;
    m->slots[j].val = val;
    return 0;
}

static long map_find(const ms_addr_map *m, uint64_t key)
{
    if (!m || !m->cap || key == 0) return -1;
    size_t j = slot_of(key, m->cap);
    while (m->slots[j].key) {
        if (m->slots[j].key == key) return (long)j;
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

int ms_addr_map_get(const ms_addr_map *m, uint64_t key, uint64_t *val)
{
    long j = map_find(m, key);
    if (j < 0) return 0;
    if (val) *val = m->slots[j].val;
    return 1;
}

int ms_addr_map_take(ms_addr_map *m, uint64_t key, uint64_t *val)
{
    long found = map_find(m, key);
    if (found < 0) return 0;
    size_t i = (size_t)found, mask = m->cap - 1;
    if (val) *val = m->slots[i].val;
    /* backward-shift deletion: pull later members of the probe run into the
     * hole unless their home slot lies cyclically after the hole */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].key) break;
        size_t home = slot_of(m->slots[j].key, m->cap);
        int stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        m->slots[i] = m->slots[j];
        i = j;
    }
    m->slots[i].key = 0;
    m->slots[i].val = 0;
    m->n--;
    return 1;
}

void ms_addr_map_clear(ms_addr_map *m)
{
    if (!m) return;
    free(m->slots);
    memset(m, 0, sizeof *m);
}
