/* record_replay.c — a stage's peak from a program's record (record_replay.h). */
#include "planner/record_replay.h"

#include <stdlib.h>
#include <string.h>

#include "vocab/errf.h"
#include "vocab/limits.h"
#include "vocab/profile_json.h"

int ms_record_check(const ms_prog_record *r, char *err, size_t errlen)
{
    if (!r) return ms_errf(err, errlen, "no record");
    if (r->n_layers < 1 || r->n_layers > MS_MAX_LAYERS)
        return ms_errf(err, errlen, "the record has %d layers (1..%d)", r->n_layers, MS_MAX_LAYERS);
    /* the structure, as a profile's reader checks it (types, ranges, order) */
    if (ms_prog_record_validate(r, r->n_layers, err, errlen)) return -1;
    /* the range table's work grows with layers x storages: a file cannot ask for hours */
    if ((uint64_t)r->n_layers * (uint64_t)r->n > MS_REC_MAX_WORK)
        return ms_errf(err, errlen, "the record has %d layers and %d storages: more than the %llu layer-storage "
                       "pairs a plan replays", r->n_layers, r->n, (unsigned long long)MS_REC_MAX_WORK);
    /* and what the replay needs beyond it */
    uint64_t total = 0;
    for (int i = 0; i < r->n; i++) {
        const ms_rec_storage *s = &r->s[i];
        if (s->copy_of >= 0 && r->s[s->copy_of].t_free <= s->t_alloc)
            return ms_errf(err, errlen, "record storage %d: a copy of %d, which was freed before it was made", i,
                           s->copy_of);
        if (s->bytes > MS_REC_MAX_TOTAL_BYTES - total)
            return ms_errf(err, errlen, "record storage %d: the storages hold more than 2^60 bytes together", i);
        total += s->bytes;
    }
    return 0;
}

static uint32_t end_of(const ms_prog_record *r, const ms_rec_storage *s)
{
    return s->t_free == MS_REC_NEVER ? r->t_end : s->t_free;
}

/* ---- the plain replay --------------------------------------------------- */

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* The replay of range [a, b] with its peak taken over positions from..to-1. */
static uint64_t stage_between(const ms_prog_record *r, int a, int b, uint32_t from, uint32_t to,
                              uint64_t bytes[MS_CAT_N])
{
    memset(bytes, 0, MS_CAT_N * sizeof *bytes);
    if (!r || a < 0 || b < a || b >= r->n_layers || from >= to || to > r->t_end || r->n < 1) return 0;
    const int n = r->n;
    const ms_rec_storage *s = r->s;
    uint32_t *ext = malloc((size_t)n * sizeof *ext);
    int32_t *rep = malloc((size_t)n * sizeof *rep);
    uint64_t *frees = malloc((size_t)n * sizeof *frees);
    if (!ext || !rep || !frees) {
        free(ext);
        free(rep);
        free(frees);
        return UINT64_MAX;
    }
#define IN(i) (s[i].layer >= a && s[i].layer <= b)
    /* index order: a copy's original has its representative already */
    for (int i = 0; i < n; i++) {
        ext[i] = end_of(r, &s[i]);
        rep[i] = i;
        if (IN(i) && s[i].copy_of >= 0 && IN(s[i].copy_of)) {
            rep[i] = rep[s[i].copy_of];
            if (ext[i] > ext[rep[i]]) ext[rep[i]] = ext[i];
        }
    }
#define COUNTS(i) (IN(i) && rep[i] == (i) && ext[i] > from)
    int nf = 0;
    for (int i = 0; i < n; i++)
        if (COUNTS(i) && ext[i] < to) frees[nf++] = (uint64_t)ext[i] << 32 | (uint32_t)i;
    qsort(frees, (size_t)nf, sizeof *frees, cmp_u64);
    /* a sweep over the positions where something is allocated or freed; the
     * allocations are in index order (t_alloc order), those before from
     * counting from there */
    uint64_t cur[MS_CAT_N] = { 0 }, sum = 0, best = 0;
    int ia = 0, jf = 0;
    for (;;) {
        while (ia < n && !COUNTS(ia)) ia++;
        uint64_t pa = ia < n ? (s[ia].t_alloc > from ? s[ia].t_alloc : from) : UINT64_MAX;
        uint64_t pf = jf < nf ? frees[jf] >> 32 : UINT64_MAX;
        uint64_t p = pa < pf ? pa : pf;
        if (p >= to) break;
        while (jf < nf && frees[jf] >> 32 == p) {   /* half-open: freed at p is not live at p */
            const ms_rec_storage *x = &s[(uint32_t)frees[jf++]];
            sum -= x->bytes;
            cur[x->cat] -= x->bytes;
        }
        while (ia < n && (s[ia].t_alloc > from ? s[ia].t_alloc : from) == p) {
            if (COUNTS(ia)) {
                sum += s[ia].bytes;
                cur[s[ia].cat] += s[ia].bytes;
            }
            ia++;
        }
        if (sum > best) {
            best = sum;
            memcpy(bytes, cur, sizeof cur);
        }
    }
#undef COUNTS
#undef IN
    free(ext);
    free(rep);
    free(frees);
    return best;
}

uint64_t ms_record_stage(const ms_prog_record *r, int a, int b, uint64_t bytes[MS_CAT_N])
{
    return stage_between(r, a, b, r ? r->t_from : 0, r ? r->t_end : 0, bytes);
}

int ms_record_live_at(const ms_prog_record *r, int a, int b, int layer, int phase, uint64_t *live)
{
    if (!r || a < 0 || b < a || b >= r->n_layers) return -1;
    int found = 0;
    uint64_t most = 0, by[MS_CAT_N];
    for (int i = 0; r && i < r->n_moments; i++) {
        const ms_rec_moment *m = &r->m[i];
        if (m->layer != layer || m->phase != phase || m->t_end <= r->t_from || m->t_begin >= m->t_end) continue;
        uint32_t from = m->t_begin > r->t_from ? m->t_begin : r->t_from, to = m->t_end < r->t_end ? m->t_end : r->t_end;
        if (from >= to) continue;
        uint64_t v = stage_between(r, a, b, from, to, by);
        if (v == UINT64_MAX) return -1;
        if (!found || v > most) most = v;
        found = 1;
    }
    if (!found) return -1;
    *live = most;
    return 0;
}

/* ---- every range at once -------------------------------------------------
 *
 * For each first layer a, the layers b = a, a+1, ... join one by one and the
 * live bytes over time are kept in a segment tree (range add, global max).
 * Positions are compressed to t_from and the allocation positions after it:
 * between two of them live bytes only fall, so the max is at one of them.
 * Storage i covers the leaves [lo[i], ext[i]); storages live at every
 * position add to a scalar instead (parameters, optimizer state).
 *
 * Elision as layers join: the elided copies form trees (a copy points at an
 * earlier storage), each counted once, by its root (the storage not
 * elided), over [lo[root], latest end in the tree). The result does not
 * depend on the order the edges are merged in, so the edges are merged as
 * they become elided:
 *  - layer b's own storages, in index order: a copy whose original's layer
 *    is in [a, b] joins its original's tree (extending the root); anything
 *    else is a new root. No copy of it has been merged yet (a copy of it in
 *    layer b comes later in index order; one in [a, b-1] waited for b);
 *  - copies in [a, b-1] of a storage of layer b: each was a root, counted
 *    over its own tree's span; that span comes off and the original's root
 *    is extended to it.
 * Every operation is one or two range adds: O(log positions). */

typedef struct seg_node {
    int64_t mx;          /* the max over the node's leaves of the adds on the path from it down */
    int64_t ad;          /* the add on all of the node's leaves */
} seg_node;

typedef struct seg {
    int N, P;            /* leaves (a power of two), of which the first P are positions */
    seg_node *v;         /* v[1] the root, v[N + i] leaf i; a node's children side by side */
    int64_t base;        /* adds over every position (long-lived storages) */
} seg;

static void seg_add(seg *t, int l, int r, int64_t x)
{
    if (l >= r || !x) return;
    if (l == 0 && r == t->P) {
        t->base += x;
        return;
    }
    seg_node *v = t->v;
    int lv = l + t->N, rv = r - 1 + t->N;
    for (l += t->N, r += t->N; l < r; l >>= 1, r >>= 1) {
        if (l & 1) {
            v[l].mx += x;
            v[l++].ad += x;
        }
        if (r & 1) {
            v[--r].mx += x;
            v[r].ad += x;
        }
    }
    /* the changed nodes' ancestors are those of the range's two ends */
    for (lv >>= 1, rv >>= 1; lv >= 1; lv >>= 1, rv >>= 1) {
        v[lv].mx = (v[2 * lv].mx > v[2 * lv + 1].mx ? v[2 * lv].mx : v[2 * lv + 1].mx) + v[lv].ad;
        if (rv != lv) v[rv].mx = (v[2 * rv].mx > v[2 * rv + 1].mx ? v[2 * rv].mx : v[2 * rv + 1].mx) + v[rv].ad;
    }
}

static int32_t find_root(int32_t *par, int32_t i)
{
    while (par[i] != i) {
        par[i] = par[par[i]];
        i = par[i];
    }
    return i;
}

/* Lists of storage indices by a layer, ascending: off[l]..off[l+1] in idx. */
static void bucket(const ms_prog_record *r, int by_source, int *off, int32_t *idx)
{
    const int L = r->n_layers;
    memset(off, 0, (size_t)(L + 1) * sizeof *off);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < r->n; i++) {
            const ms_rec_storage *s = &r->s[i];
            int l = s->layer;
            if (by_source) {
                /* a copy within one layer is elided with the layer (phase 1) */
                if (s->copy_of < 0 || r->s[s->copy_of].layer == s->layer) continue;
                l = r->s[s->copy_of].layer;
            }
            if (pass == 0) off[l + 1]++;
            else idx[off[l]++] = i;
        }
        if (pass == 0)
            for (int l = 0; l < L; l++) off[l + 1] += off[l];
        else
            for (int l = L; l > 0; l--) off[l] = off[l - 1];
        if (pass) off[0] = 0;
    }
}

/* The first of the P sorted positions not below x. */
static int lower_bound(const uint32_t *pos, int P, uint32_t x)
{
    int lo = 0, hi = P;
    while (lo < hi) {
        int m = lo + (hi - lo) / 2;
        if (pos[m] < x) lo = m + 1;
        else hi = m;
    }
    return lo;
}

int ms_record_range_peaks(const ms_prog_record *r, uint64_t *peaks)
{
    const int L = r->n_layers, n = r->n;
    memset(peaks, 0, (size_t)L * (size_t)L * sizeof *peaks);
    if (r->t_from >= r->t_end || n < 1) return 0;
    const ms_rec_storage *s = r->s;
    uint32_t *pos = malloc((size_t)(n + 1) * sizeof *pos), *fr = malloc((size_t)n * sizeof *fr);
    int32_t *lo = malloc((size_t)n * sizeof *lo), *hi = malloc((size_t)n * sizeof *hi);
    int32_t *ext = malloc((size_t)n * sizeof *ext), *par = malloc((size_t)n * sizeof *par);
    int32_t *own = malloc((size_t)n * sizeof *own), *src = malloc((size_t)n * sizeof *src);
    int *own_off = malloc((size_t)(L + 1) * sizeof *own_off), *src_off = malloc((size_t)(L + 1) * sizeof *src_off);
    seg t = { 0 };
    seg_node *v0 = NULL;
    int rc = -1;
    if (!pos || !fr || !lo || !hi || !ext || !par || !own || !src || !own_off || !src_off) goto out;

    /* The positions: t_from and the allocations after it, less those with
     * no free between them and the next (which holds at least as much, in
     * every range: an elided copy's original lives to a recorded free). */
    int P = 0, nf = 0;
    pos[P++] = r->t_from;
    for (int i = 0; i < n; i++) {
        if (s[i].t_alloc > r->t_from && s[i].t_alloc != pos[P - 1]) pos[P++] = s[i].t_alloc;
        uint32_t f = end_of(r, &s[i]);
        if (f > r->t_from && f < r->t_end) fr[nf++] = f;
    }
    qsort(fr, (size_t)nf, sizeof *fr, cmp_u32);
    int kept = 0;
    for (int k = 0, j = 0; k < P; k++) {
        while (j < nf && fr[j] <= pos[k]) j++;
        if (k == P - 1 || (j < nf && fr[j] <= pos[k + 1])) pos[kept++] = pos[k];
    }
    P = kept;
    for (int i = 0; i < n; i++) {
        uint32_t a0 = s[i].t_alloc > r->t_from ? s[i].t_alloc : r->t_from;
        lo[i] = lower_bound(pos, P, a0);
        hi[i] = lower_bound(pos, P, end_of(r, &s[i]));   /* == lo[i]: live at no kept position */
    }
    bucket(r, 0, own_off, own);
    bucket(r, 1, src_off, src);

    t.P = P;
    for (t.N = 1; t.N < P; t.N <<= 1) {}
    t.v = malloc(2 * (size_t)t.N * sizeof *t.v);
    v0 = malloc(2 * (size_t)t.N * sizeof *v0);
    if (!t.v || !v0) goto out;
    /* leaves past the positions never win: a position's adds stay within
     * +-2^60 (ms_record_check bounds the bytes), these sit at -2^62 */
    const int64_t never = -(INT64_C(1) << 62);
    for (int k = 0; k < t.N; k++) v0[t.N + k] = (seg_node){ k < P ? 0 : never, 0 };
    for (int k = t.N - 1; k >= 1; k--)
        v0[k] = (seg_node){ v0[2 * k].mx > v0[2 * k + 1].mx ? v0[2 * k].mx : v0[2 * k + 1].mx, 0 };

    for (int a = 0; a < L; a++) {
        memcpy(t.v, v0, 2 * (size_t)t.N * sizeof *t.v);
        t.base = 0;
        for (int i = 0; i < n; i++) {
            par[i] = i;
            ext[i] = hi[i];
        }
        for (int b = a; b < L; b++) {
            for (int k = own_off[b]; k < own_off[b + 1]; k++) {
                int32_t i = own[k], c = s[i].copy_of;
                if (c >= 0 && s[c].layer >= a && s[c].layer <= b) {
                    int32_t root = find_root(par, c);
                    par[i] = root;
                    if (ext[i] > ext[root]) {
                        seg_add(&t, ext[root], ext[i], (int64_t)s[root].bytes);
                        ext[root] = ext[i];
                    }
                } else {
                    seg_add(&t, lo[i], ext[i], (int64_t)s[i].bytes);
                }
            }
            for (int k = src_off[b]; k < src_off[b + 1]; k++) {
                int32_t c = src[k];
                if (s[c].layer < a || s[c].layer >= b) continue;
                seg_add(&t, lo[c], ext[c], -(int64_t)s[c].bytes);
                int32_t root = find_root(par, s[c].copy_of);
                par[c] = root;
                if (ext[c] > ext[root]) {
                    seg_add(&t, ext[root], ext[c], (int64_t)s[root].bytes);
                    ext[root] = ext[c];
                }
            }
            int64_t top = t.base + t.v[1].mx;
            peaks[(size_t)a * L + b] = top > 0 ? (uint64_t)top : 0;
        }
    }
    rc = 0;
out:
    free(pos);
    free(fr);
    free(lo);
    free(hi);
    free(ext);
    free(par);
    free(own);
    free(src);
    free(own_off);
    free(src_off);
    free(t.v);
    free(v0);
    return rc;
}
