/* cupti_ledger.c — event log, per-source ledgers and the
 * callback-vs-activity cross-check. Pure C, no CUPTI (see cupti_ledger.h). */
#include "profiler/cupti_ledger.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- log */

int ms_event_log_push(ms_event_log *l, const ms_mem_event *e)
{
    if (!l || !e) return -1;
    if (l->n == l->cap) {
        int ncap = l->cap ? l->cap * 2 : 256;
        ms_mem_event *nev = realloc(l->ev, (size_t)ncap * sizeof *nev);
        if (!nev) return -1;
        l->ev = nev;
        l->cap = ncap;
    }
    l->ev[l->n] = *e;
    return l->n++;
}

void ms_event_log_clear(ms_event_log *l)
{
    if (!l) return;
    free(l->ev);
    memset(l, 0, sizeof *l);
}

int ms_trace_event_is_handle(const ms_mem_event *e)
{
    return e->source == MS_EV_SRC_CUPTI_CALLBACK &&
           (strcmp(e->api, "cuMemCreate") == 0 || strcmp(e->api, "cuMemRelease") == 0);
}

/* ---------------------------------------------------------------- ledger */

typedef struct { double t; int idx; } t_idx;

static int cmp_t_idx(const void *a, const void *b)
{
    const t_idx *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Indices of one source's events in replay order: callbacks as they came
 * (each one ran inside its API call, so arrival order is call order);
 * activity records by timestamp, since buffers from different threads may
 * be delivered out of order. Returns the count, or -1. */
static int replay_order(const ms_mem_event *ev, int n, int source, int **order)
{
    t_idx *tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    int *ord = malloc(((size_t)n + 1) * sizeof *ord);
    if (!tmp || !ord) { free(tmp); free(ord); return -1; }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ev[i].source == source) tmp[k++] = (t_idx){ ev[i].t_us, i };
    if (source == MS_EV_SRC_CUPTI_ACTIVITY) qsort(tmp, (size_t)k, sizeof *tmp, cmp_t_idx);
    for (int i = 0; i < k; i++) ord[i] = tmp[i].idx;
    free(tmp);
    *order = ord;
    return k;
}

int ms_trace_ledger_compute(const ms_mem_event *ev, int n, int source, ms_trace_ledger *out)
{
    if (!out || n < 0 || (n > 0 && !ev)) return -1;
    memset(out, 0, sizeof *out);
    int *ord = NULL;
    int k = replay_order(ev, n, source, &ord);
    if (k < 0) return -1;
    ms_addr_map live[2] = { { 0 }, { 0 } }; /* [0] addresses, [1] VMM handles */
    int rc = 0;
    for (int i = 0; i < k && rc == 0; i++) {
        const ms_mem_event *e = &ev[ord[i]];
        ms_addr_map *m = &live[ms_trace_event_is_handle(e)];
        uint64_t bytes = 0;
        switch (e->kind) {
        case MS_EV_ALLOC:
            out->allocs++;
            out->alloc_bytes += e->bytes;
            /* an address handed out twice without a free in between would be
             * a lost free: count the old one as gone */
            if (ms_addr_map_take(m, e->address, &bytes)) out->live_bytes -= bytes;
            if (ms_addr_map_put(m, e->address, e->bytes) != 0) { rc = -1; break; }
            out->live_bytes += e->bytes;
            if (out->live_bytes > out->peak_bytes) out->peak_bytes = out->live_bytes;
            break;
        case MS_EV_FREE:
            if (ms_addr_map_take(m, e->address, &bytes)) {
                out->frees++;
                out->free_bytes += bytes;
                out->live_bytes -= bytes;
            } else {
                out->untraced_frees++;
            }
            break;
        case MS_EV_FAIL:
            out->fails++;
            break;
        default:
            break;
        }
    }
    ms_addr_map_clear(&live[0]);
    ms_addr_map_clear(&live[1]);
    free(ord);
    return rc;
}

/* ---------------------------------------------------------------- cross-check */

typedef struct { uint64_t address, bytes; } addr_bytes;

static int cmp_addr_bytes(const void *a, const void *b)
{
    const addr_bytes *x = a, *y = b;
    if (x->address != y->address) return x->address < y->address ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

static int has_address(const addr_bytes *sorted, int n, uint64_t address)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sorted[mid].address < address) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && sorted[lo].address == address;
}

typedef struct {
    addr_bytes *allocs, *frees;
    int n_allocs, n_frees;
} source_sets;

/* Sorted allocation and traced-free multisets of one source. */
static int collect(const ms_mem_event *ev, int n, int source, source_sets *s, int *untraced)
{
    memset(s, 0, sizeof *s);
    s->allocs = malloc(((size_t)n + 1) * sizeof *s->allocs);
    s->frees = malloc(((size_t)n + 1) * sizeof *s->frees);
    if (!s->allocs || !s->frees) return -1;
    for (int i = 0; i < n; i++) {
        const ms_mem_event *e = &ev[i];
        if (e->source != source || e->kind != MS_EV_ALLOC || ms_trace_event_is_handle(e)) continue;
        s->allocs[s->n_allocs++] = (addr_bytes){ e->address, e->bytes };
    }
    qsort(s->allocs, (size_t)s->n_allocs, sizeof *s->allocs, cmp_addr_bytes);
    for (int i = 0; i < n; i++) {
        const ms_mem_event *e = &ev[i];
        if (e->source != source || e->kind != MS_EV_FREE || ms_trace_event_is_handle(e)) continue;
        if (!has_address(s->allocs, s->n_allocs, e->address)) { (*untraced)++; continue; }
        s->frees[s->n_frees++] = (addr_bytes){ e->address, e->bytes };
    }
    qsort(s->frees, (size_t)s->n_frees, sizeof *s->frees, cmp_addr_bytes);
    return 0;
}

static void note_diff(ms_trace_xcheck *x, int kind, int only_in, addr_bytes ab)
{
    if (x->n_diffs < MS_TRACE_MAX_DIFFS)
        x->diffs[x->n_diffs++] = (ms_trace_diff){ kind, only_in, ab.address, ab.bytes };
}

/* Merge two sorted multisets; count matches and one-sided members. */
static void merge(ms_trace_xcheck *x, int kind, const addr_bytes *cb, int ncb,
                  const addr_bytes *ac, int nac)
{
    int i = 0, j = 0;
    int *matched = kind == MS_EV_ALLOC ? &x->allocs_matched : &x->frees_matched;
    int *cb_only = kind == MS_EV_ALLOC ? &x->allocs_callback_only : &x->frees_callback_only;
    int *ac_only = kind == MS_EV_ALLOC ? &x->allocs_activity_only : &x->frees_activity_only;
    while (i < ncb || j < nac) {
        int c = i < ncb && j < nac ? cmp_addr_bytes(&cb[i], &ac[j]) : (i < ncb ? -1 : 1);
        if (c == 0) {
            (*matched)++;
            if (kind == MS_EV_ALLOC) x->bytes_matched += cb[i].bytes;
            i++, j++;
        } else if (c < 0) {
            (*cb_only)++;
            note_diff(x, kind, MS_EV_SRC_CUPTI_CALLBACK, cb[i++]);
        } else {
            (*ac_only)++;
            note_diff(x, kind, MS_EV_SRC_CUPTI_ACTIVITY, ac[j++]);
        }
    }
}

int ms_trace_crosscheck(const ms_mem_event *ev, int n, ms_trace_xcheck *out)
{
    if (!out || n < 0 || (n > 0 && !ev)) return -1;
    memset(out, 0, sizeof *out);
    source_sets cb = { 0 }, ac = { 0 };
    int rc = -1;
    if (collect(ev, n, MS_EV_SRC_CUPTI_CALLBACK, &cb, &out->frees_untraced) == 0 &&
        collect(ev, n, MS_EV_SRC_CUPTI_ACTIVITY, &ac, &out->frees_untraced) == 0) {
        merge(out, MS_EV_ALLOC, cb.allocs, cb.n_allocs, ac.allocs, ac.n_allocs);
        merge(out, MS_EV_FREE, cb.frees, cb.n_frees, ac.frees, ac.n_frees);
        rc = (out->allocs_callback_only || out->allocs_activity_only ||
              out->frees_callback_only || out->frees_activity_only) ? 1 : 0;
    }
    free(cb.allocs); free(cb.frees);
    free(ac.allocs); free(ac.frees);
    return rc;
}
