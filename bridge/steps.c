/* steps.c — whether a program's training steps ran the same units (steps.h). */
#include "bridge/steps.h"

#include <stdlib.h>
#include <string.h>

#include "vocab/addr_map.h"

/* Appends name (", " before all but the first) to out, or "..." once the
 * next name no longer fits; *cut keeps it from being said twice. */
static void add_name(char *out, size_t outlen, const char *name, int *cut)
{
    size_t n = strlen(out), need = strlen(name) + (n ? 2 : 0);
    if (*cut || outlen == 0) return;
    if (n + need + 4 > outlen) {       /* room for ", ..." or "..." after it */
        const char *more = n ? ", ..." : "...";
        if (n + strlen(more) < outlen) memcpy(out + n, more, strlen(more) + 1);
        *cut = 1;
        return;
    }
    if (n) {
        memcpy(out + n, ", ", 2);
        n += 2;
    }
    memcpy(out + n, name, strlen(name) + 1);
}

int msb_units_not_every_step(const msb_trace *t, char *out, size_t outlen)
{
    if (outlen) out[0] = '\0';
    int n = t->n_blocks;
    if (n < 1 || !t->blocks) return 0;
    /* per unit: ran in this step; in some step; in every step so far */
    unsigned char *now = calloc((size_t)n + 1, 3);
    if (!now) return -1;
    unsigned char *some = now + n + 1, *every = some + n + 1;
    int steps = 0, any = 0;
    for (int i = 0; i < t->n_ev; i++) {
        const msb_ev *e = &t->ev[i];
        if (e->conn != t->model_conn) continue;
        if (e->kind == MSB_EV_WHERE && e->m.phase == MS_PH_FORWARD && e->m.layer >= 1 && e->m.layer <= n) {
            now[e->m.layer] = 1;
            any = 1;
        } else if (e->kind == MSB_EV_STEP) {
            if (any) {
                for (int l = 1; l <= n; l++) {
                    some[l] |= now[l];
                    every[l] = steps ? (every[l] & now[l]) : now[l];
                }
                steps++;
            }
            memset(now, 0, (size_t)n + 1);
            any = 0;
        }
    }
    int differ = 0, cut = 0;
    for (int l = 1; steps >= 2 && l <= n; l++) {
        if (some[l] && !every[l]) {
            differ++;
            add_name(out, outlen, t->blocks[l - 1], &cut);
        }
    }
    free(now);
    return differ;
}

int msb_unit_inputs_differ(const msb_trace *t, char *name, size_t namelen, uint64_t *lo, uint64_t *hi)
{
    if (namelen) name[0] = '\0';
    *lo = *hi = 0;
    int n = t->n_blocks;
    if (n < 1 || !t->blocks) return 0;
    /* per unit: its largest input this step (-1: not called), and over the steps so far */
    int64_t *cur = malloc(((size_t)n + 1) * 3 * sizeof *cur);
    if (!cur) return -1;
    int64_t *mn = cur + n + 1, *mx = mn + n + 1;
    for (int l = 0; l <= n; l++) cur[l] = mn[l] = mx[l] = -1;
    int any = 0;
    for (int i = 0; i < t->n_ev; i++) {
        const msb_ev *e = &t->ev[i];
        if (e->conn != t->model_conn) continue;
        if (e->kind == MSB_EV_WHERE && e->m.phase == MS_PH_FORWARD && e->m.layer >= 1 && e->m.layer <= n &&
            e->xin >= 0) {
            if (e->xin > cur[e->m.layer]) cur[e->m.layer] = e->xin;
            any = 1;
        } else if (e->kind == MSB_EV_STEP) {
            for (int l = 1; any && l <= n; l++) {
                if (cur[l] < 0) continue;
                if (mn[l] < 0 || cur[l] < mn[l]) mn[l] = cur[l];
                if (cur[l] > mx[l]) mx[l] = cur[l];
            }
            for (int l = 0; l <= n; l++) cur[l] = -1;
            any = 0;
        }
    }
    int differ = 0, most = 0;
    for (int l = 1; l <= n; l++) {
        if (mx[l] == mn[l]) continue;
        differ++;
        if (!most || mx[l] - mn[l] > mx[most] - mn[most]) most = l;
    }
    if (most) {
        *lo = (uint64_t)mn[most];
        *hi = (uint64_t)mx[most];
        if (namelen) msb_utf8_copy(name, namelen, t->blocks[most - 1], (size_t)-1);
    }
    free(cur);
    return differ;
}

int msb_live_grew(const msb_trace *t, uint64_t *before, uint64_t *after)
{
    *before = *after = 0;
    ms_addr_map live = { 0 };
    uint64_t now = 0, prev = 0, last = 0, old;
    int ends = 0;
    for (int i = 0; i < t->n_ev; i++) {
        const msb_ev *e = &t->ev[i];
        if (e->conn != t->model_conn) continue;
        if (e->kind == MSB_EV_ALLOC && e->m.address) {
            if (ms_addr_map_take(&live, e->m.address, &old)) now -= old;      /* its free unseen */
            if (ms_addr_map_put(&live, e->m.address, e->m.bytes) != 0) {
                ms_addr_map_clear(&live);
                return -1;
            }
            now += e->m.bytes;
        } else if (e->kind == MSB_EV_FREE && ms_addr_map_take(&live, e->m.address, &old)) {
            now -= old;
        } else if (e->kind == MSB_EV_STEP) {
            prev = last;
            last = now;
            ends++;
        }
    }
    ms_addr_map_clear(&live);
    if (ends < 2) return 0;
    *before = prev;
    *after = last;
    return last > prev && last - prev > prev / 100;
}
