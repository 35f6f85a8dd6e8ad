/* grow.h — room for one more element in a growable array (the lists the
 * report collects from database callbacks). Doubles the capacity, starting
 * at `first`; returns 0, or -1 when out of memory (the array is unchanged). */
#ifndef MS_REPORTS_GROW_H
#define MS_REPORTS_GROW_H

#include <stdlib.h>

static inline int ms_grow(void **arr, int *cap, int n, size_t elem, int first)
{
    if (n < *cap) return 0;
    int ncap = *cap ? 2 * *cap : first;
    void *g = realloc(*arr, (size_t)ncap * elem);
    if (!g) return -1;
    *arr = g;
    *cap = ncap;
    return 0;
}

#endif
