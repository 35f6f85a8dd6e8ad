/* device_space.c — the devices as a multiset of capacity classes
 * (search_dp.h). */
#include "planner/search_dp.h"
#include "vocab/errf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void ms_dev_space_free(ms_dev_space *d)
{
    free(d->devs);
    free(d->size);
    free(d->add);
    free(d->by_size);
    free(d->size_off);
    memset(d, 0, sizeof *d);
}

int ms_dev_space_build(ms_dev_space *d, const ms_plan_device *devs, int n, int R, double headroom, char *err,
                       size_t errlen)
{
    return ms_dev_space_build_groups(d, devs, n, R, headroom, 1, err, errlen);
}

/* Groups of g > 1 devices: with n[c] stages whose smallest device is of
 * class c, the stages fit the devices iff for every k the stages of classes
 * 0..k need no more than the devices of those classes (g * sum n[..k] <=
 * sum count[..k]; Hall's condition, the sets of devices a stage may use
 * being nested). */
static int groups_fit(const ms_dev_space *d, const int *n, int g)
{
    long need = 0, have = 0;
    for (int c = 0; c < d->n_cls; c++) {
        need += (long)g * n[c];
        have += d->count[c];
        if (need > have) return 0;
    }
    return 1;
}

int ms_dev_space_build_groups(ms_dev_space *d, const ms_plan_device *devs, int n, int R, double headroom, int g,
                              char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->group = g;
    for (int i = 0; i < n; i++) {
        int c = 0;
        while (c < d->n_cls && d->cap[c] != devs[i].capacity) c++;
        if (c == d->n_cls) {
            if (d->n_cls == MS_MAX_CLASSES)
                return ms_errf(err, errlen, "more than %d distinct GPU capacities; group them", MS_MAX_CLASSES);
            d->cap[d->n_cls++] = devs[i].capacity;
        }
        d->count[c]++;
    }
    /* classes by descending capacity (insertion sort, few classes) */
    for (int a = 1; a < d->n_cls; a++)
        for (int b = a; b > 0 && d->cap[b] > d->cap[b - 1]; b--) {
            uint64_t tc = d->cap[b]; d->cap[b] = d->cap[b - 1]; d->cap[b - 1] = tc;
            int tn = d->count[b]; d->count[b] = d->count[b - 1]; d->count[b - 1] = tn;
        }
    d->devs = malloc((size_t)n * sizeof *d->devs);
    if (!d->devs) return ms_errf(err, errlen, "out of memory");
    for (int c = 0, at = 0; c < d->n_cls; c++) {
        d->avail[c] = ms_usable_bytes(d->cap[c], headroom);
        d->dev_off[c] = at;
        for (int i = 0; i < n; i++)
            if (devs[i].capacity == d->cap[c]) d->devs[at++] = i;
    }
    /* full mixed-radix space, then the states of size <= R (groups: that fit) */
    long full = 1;
    int stride[MS_MAX_CLASSES], bound[MS_MAX_CLASSES], prefix = 0;
    for (int c = 0; c < d->n_cls; c++) {
        prefix += d->count[c];
        bound[c] = g == 1 ? d->count[c] : prefix / g;
        stride[c] = (int)full;
        full *= bound[c] + 1;
        if (full > MS_MAX_FULL_STATES)
            return ms_errf(err, errlen, "too many distinct GPU capacities to search every placement (%d classes)",
                        d->n_cls);
    }
    int *compact = malloc((size_t)full * sizeof *compact);
    int *fsize = malloc((size_t)full * sizeof *fsize);
    if (!compact || !fsize) {
        free(compact);
        free(fsize);
        return ms_errf(err, errlen, "out of memory");
    }
    int ns = 0;
    for (long f = 0; f < full; f++) {
        int s = 0, nc[MS_MAX_CLASSES];
        for (int c = 0; c < d->n_cls; c++) s += nc[c] = (int)(f / stride[c]) % (bound[c] + 1);
        fsize[f] = s;
        compact[f] = s <= R && (g == 1 || groups_fit(d, nc, g)) ? ns++ : -1;
    }
    d->n_states = ns;
    d->size = malloc((size_t)ns * sizeof *d->size);
    d->add = malloc((size_t)ns * (size_t)d->n_cls * sizeof *d->add);
    d->by_size = malloc((size_t)ns * sizeof *d->by_size);
    d->size_off = calloc((size_t)R + 2, sizeof *d->size_off);
    if (!d->size || !d->add || !d->by_size || !d->size_off) {
        free(compact);
        free(fsize);
        return ms_errf(err, errlen, "out of memory");
    }
    for (long f = 0; f < full; f++) {
        int st = compact[f];
        if (st < 0) continue;
        d->size[st] = fsize[f];
        d->size_off[fsize[f] + 1]++;
        for (int c = 0; c < d->n_cls; c++) {
            int have = (int)(f / stride[c]) % (bound[c] + 1);
            d->add[st * d->n_cls + c] = have < bound[c] ? compact[f + stride[c]] : -1;
        }
    }
    for (int s = 0; s <= R; s++) d->size_off[s + 1] += d->size_off[s];
    int *fill = calloc((size_t)R + 1, sizeof *fill);
    if (!fill) {
        free(compact);
        free(fsize);
        return ms_errf(err, errlen, "out of memory");
    }
    for (int st = 0; st < ns; st++) d->by_size[d->size_off[d->size[st]] + fill[d->size[st]]++] = st;
    free(fill);
    free(compact);
    free(fsize);
    return 0;
}
