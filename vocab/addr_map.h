/* addr_map.h — a map from non-zero 64-bit keys (device addresses, storage
 * pointers, correlation ids) to 64-bit values, for the ledgers that give a
 * free its size: the CUPTI tracer's (profiler/cupti_trace.c) and the
 * bridge's (bridge/ledger.h, bridge/rows.c).
 *
 * Contract: open addressing with a power-of-two capacity (or 0); key 0 is
 * never stored. put returns 0, or -1 when out of memory or key == 0, and
 * replaces an existing key; get returns 1 and *val (val may be NULL) when
 * found, else 0; take is get that also removes the key; clear frees the
 * storage and leaves an empty map. A zeroed map is empty. Nothing locks. */
#ifndef MS_ADDR_MAP_H
#define MS_ADDR_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct ms_addr_slot { uint64_t key, val; } ms_addr_slot;
typedef struct ms_addr_map {
    ms_addr_slot *slots;  /* capacity is a power of two (or 0) */
    size_t cap, n;
} ms_addr_map;

int ms_addr_map_put(ms_addr_map *m, uint64_t key, uint64_t val);
int ms_addr_map_get(const ms_addr_map *m, uint64_t key, uint64_t *val);
int ms_addr_map_take(ms_addr_map *m, uint64_t key, uint64_t *val);
void ms_addr_map_clear(ms_addr_map *m);

#endif
