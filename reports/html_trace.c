/* html_trace.c — replays a run's memory events into live bytes per device
 * and category over time, for the HTML report's charts (see
 * html_internal.h).
 *
 * Two passes over the events, streamed (a GPU trial can hold millions):
 * the first counts them per source and finds each device's time range, the
 * second replays one source. A free subtracts its bytes from its category;
 * a free whose category is unknown takes the category (and, when it gives
 * none, the size) its allocation had, found by address. Live bytes never go
 * below zero, whatever the events say. */
#include "reports/html_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- live allocations by (device, address) ---------------------------- */

typedef struct { uint64_t address; int device; int cat; uint64_t bytes; int used; } slot;
typedef struct { slot *s; size_t cap, n, tomb; int oom; } addr_map;

static size_t addr_hash(uint64_t a, int device, size_t cap)
{
    uint64_t h = (a ^ ((uint64_t)(unsigned)device << 56)) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

/* used: 0 empty, 1 live, 2 removed */
static int map_grow(addr_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    if (m->n * 4 < m->cap) ncap = m->cap;   /* mostly tombstones: rebuild in place */
    slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) { m->oom = 1; return -1; }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->s[i].used != 1) continue;
        size_t j = addr_hash(m->s[i].address, m->s[i].device, ncap);
        while (ns[j].used) j = (j + 1) & (ncap - 1);
        ns[j] = m->s[i];
    }
    free(m->s);
    m->s = ns;
    m->cap = ncap;
    m->tomb = 0;
    return 0;
}

static slot *map_find(addr_map *m, uint64_t a, int device)
{
    if (!m->cap) return NULL;
    for (size_t j = addr_hash(a, device, m->cap), k = 0; k < m->cap; j = (j + 1) & (m->cap - 1), k++) {
        if (m->s[j].used == 0) return NULL;
        if (m->s[j].used == 1 && m->s[j].address == a && m->s[j].device == device) return &m->s[j];
    }
    return NULL;
}

static void map_put(addr_map *m, uint64_t a, int device, int cat, uint64_t bytes)
{
    slot *old = map_find(m, a, device);
    if (old) { old->cat = cat; old->bytes = bytes; return; }
    if ((m->n + m->tomb + 1) * 2 > m->cap && map_grow(m) != 0) return;
    size_t j = addr_hash(a, device, m->cap);
    while (m->s[j].used == 1) j = (j + 1) & (m->cap - 1);
    if (m->s[j].used == 2) m->tomb--;
    m->s[j] = (slot){ a, device, cat, bytes, 1 };
    m->n++;
}

static void map_remove(addr_map *m, slot *s)
{
    s->used = 2;
    m->n--;
    m->tomb++;
}

/* ---- the passes ---------------------------------------------------------- */

typedef struct {
    h_trace *t;
    int n_layers;
    /* pass 1 */
    int64_t dev_n[H_MAX_DEV];
    /* pass 2 */
    uint64_t live[H_MAX_DEV][H_NCAT];
    int64_t seen[H_MAX_DEV];          /* events replayed so far, per device */
    addr_map map;
} trace_ctx;

static h_dev_trace *dev_slot(h_trace *t, int device, int create)
{
    for (int i = 0; i < t->n_dev; i++)
        if (t->dev[i].device == device) return &t->dev[i];
    if (!create || t->n_dev == H_MAX_DEV) return NULL;
    h_dev_trace *d = &t->dev[t->n_dev++];
    memset(d, 0, sizeof *d);
    d->device = device;
    d->peak_layer = d->fail_layer = -1;
    d->peak_phase = d->fail_phase = -1;
    return d;
}

static int count_one(int64_t seq, const ms_mem_event *ev, void *vctx)
{
    (void)seq;
    trace_ctx *c = vctx;
    if (ev->source >= 0 && ev->source < 3) c->t->n_by_source[ev->source]++;
    return 0;
}

static int range_one(int64_t seq, const ms_mem_event *ev, void *vctx)
{
    (void)seq;
    trace_ctx *c = vctx;
    if (ev->source != c->t->source) return 0;
    h_dev_trace *d = dev_slot(c->t, ev->device, 1);
    if (!d) { c->t->n_skipped++; return 0; }
    int i = (int)(d - c->t->dev);
    if (c->dev_n[i] == 0 || ev->t_us < d->t_min) d->t_min = ev->t_us;
    if (c->dev_n[i] == 0 || ev->t_us > d->t_max) d->t_max = ev->t_us;
    c->dev_n[i]++;
    return 0;
}

static uint64_t total_of(const uint64_t *by_cat)
{
    uint64_t s = 0;
    for (int k = 0; k < H_NCAT; k++) s += by_cat[k];
    return s;
}

static void note_point(trace_ctx *c, int i, h_dev_trace *d, int64_t t_us, const uint64_t *live)
{
    int idx;
    if (!d->downsampled) {
        idx = (int)c->seen[i];
    } else {
        /* The slice of time this event falls in; keep its fullest moment. */
        double span = (double)(d->t_max - d->t_min) + 1.0;
        idx = (int)((double)(t_us - d->t_min) / span * H_MAX_PTS);
        if (idx >= H_MAX_PTS) idx = H_MAX_PTS - 1;
        if (idx < 0) idx = 0;
    }
    if (idx >= H_MAX_PTS) return;
    h_state *p = &d->pts[idx];
    if (idx >= d->n_pts) {
        /* Slices that saw no event repeat the state before them. */
        for (int k = d->n_pts; k < idx; k++) d->pts[k] = k > 0 ? d->pts[k - 1] : (h_state){ .t_us = d->t_min };
        d->n_pts = idx + 1;
        p->t_us = t_us;
        memcpy(p->by_cat, live, sizeof p->by_cat);
        return;
    }
    if (!d->downsampled || total_of(live) >= total_of(p->by_cat)) {
        p->t_us = t_us;
        memcpy(p->by_cat, live, sizeof p->by_cat);
    }
}

static int replay_one(int64_t seq, const ms_mem_event *ev, void *vctx)
{
    (void)seq;
    trace_ctx *c = vctx;
    if (ev->source != c->t->source) return 0;
    h_dev_trace *d = dev_slot(c->t, ev->device, 0);
    if (!d) return 0;
    int i = (int)(d - c->t->dev);
    uint64_t *live = c->live[i];
    int cat = ev->category >= 0 && ev->category < MS_CAT_N ? ev->category : H_CAT_UNKNOWN;

    if (ev->kind == MS_EV_ALLOC) {
        d->n_alloc++;
        live[cat] += ev->bytes;
        map_put(&c->map, ev->address, ev->device, cat, ev->bytes);
    } else if (ev->kind == MS_EV_FREE) {
        d->n_free++;
        uint64_t bytes = ev->bytes;
        slot *s = map_find(&c->map, ev->address, ev->device);
        if (s) {
            if (ev->category < 0 || ev->category >= MS_CAT_N) cat = s->cat;
            if (bytes == 0) bytes = s->bytes;
            map_remove(&c->map, s);
        }
        live[cat] = live[cat] > bytes ? live[cat] - bytes : 0;
    } else if (ev->kind == MS_EV_FAIL) {
        d->n_fail++;
        if (!d->has_fail) {   /* the first failure is the OOM; later ones are its echoes */
            d->has_fail = 1;
            d->fail.t_us = ev->t_us;
            memcpy(d->fail.by_cat, live, sizeof d->fail.by_cat);
            d->fail_layer = ev->layer;
            d->fail_phase = ev->phase;
            d->fail_cat = cat;
            d->fail_bytes = ev->bytes;
            memcpy(d->fail_what, ev->what, sizeof d->fail_what);
            d->fail_what[sizeof d->fail_what - 1] = '\0';
        }
    }

    uint64_t total = total_of(live);
    for (int k = 0; k < H_NCAT; k++)
        if (live[k] > d->cat_max[k]) d->cat_max[k] = live[k];
    if (total > total_of(d->peak.by_cat) || (d->n_alloc + d->n_free + d->n_fail == 1)) {
        d->peak.t_us = ev->t_us;
        memcpy(d->peak.by_cat, live, sizeof d->peak.by_cat);
        d->peak_layer = ev->layer;
        d->peak_phase = ev->phase;
    }
    /* A layer's bar: the fullest moment while the trial ran it forward or
     * backward; at the failure, the moment of the failure. */
    if (ev->layer >= 0 && ev->layer < d->n_layers &&
        (ev->phase == MS_PH_FORWARD || ev->phase == MS_PH_BACKWARD || ev->kind == MS_EV_FAIL)) {
        h_layer_state *ls = &d->layers[ev->layer];
        if (!ls->reached || total >= total_of(ls->at.by_cat) || ev->kind == MS_EV_FAIL) {
            ls->reached = 1;
            ls->phase = ev->phase;
            ls->at.t_us = ev->t_us;
            memcpy(ls->at.by_cat, live, sizeof ls->at.by_cat);
        }
    }
    if (d->n_phases == 0 || (d->phase_of[d->n_phases - 1] != ev->phase && d->n_phases < H_MAX_PHASES)) {
        d->phase_of[d->n_phases] = ev->phase;
        d->phase_t[d->n_phases] = ev->t_us;
        d->n_phases++;
    }
    note_point(c, i, d, ev->t_us, live);
    c->seen[i]++;
    return 0;
}

void h_trace_free(h_trace *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_dev; i++) {
        free(t->dev[i].pts);
        free(t->dev[i].layers);
    }
    memset(t, 0, sizeof *t);
    t->source = -1;
}

int h_trace_load(ms_db *db, int64_t run, int n_layers, h_trace *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->source = -1;
    trace_ctx *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "out of memory"); return -1; }
    c->t = t;
    c->n_layers = n_layers > 0 ? n_layers : 0;
    int ret = -1;
    if (ms_db_list_mem_events(db, run, count_one, c) != 0) goto db_fail;
    static const int preference[] = { MS_EV_SRC_ALLOCATOR, MS_EV_SRC_CUPTI_ACTIVITY, MS_EV_SRC_CUPTI_CALLBACK };
    for (int k = 0; k < 3 && t->source < 0; k++)
        if (t->n_by_source[preference[k]] > 0) t->source = preference[k];
    if (t->source < 0) { ret = 0; goto done; }

    if (ms_db_list_mem_events(db, run, range_one, c) != 0) goto db_fail;
    for (int i = 0; i < t->n_dev; i++) {
        h_dev_trace *d = &t->dev[i];
        d->downsampled = c->dev_n[i] > H_MAX_PTS;
        d->pts = calloc(H_MAX_PTS, sizeof *d->pts);
        d->n_layers = c->n_layers;
        d->layers = c->n_layers ? calloc((size_t)c->n_layers, sizeof *d->layers) : NULL;
        if (!d->pts || (c->n_layers && !d->layers)) { snprintf(err, errlen, "out of memory"); goto done; }
    }
    if (ms_db_list_mem_events(db, run, replay_one, c) != 0) goto db_fail;
    if (c->map.oom) { snprintf(err, errlen, "out of memory replaying the memory events"); goto done; }
    ret = 0;
    goto done;
db_fail:
    snprintf(err, errlen, "%s", ms_db_errmsg(db));
done:
    free(c->map.s);
    free(c);
    if (ret != 0) h_trace_free(t);
    return ret;
}
