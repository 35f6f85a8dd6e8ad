/* record.c — a program's record from its record pass (record.h). */
#include "bridge/record.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/addr_map.h"
#include "vocab/errf.h"
#include "vocab/profile_json.h"

/* A moment begins at pos: the one before ends there. 0, or -1 out of memory. */
static int moment(ms_prog_record *r, int *cap, int layer, int phase, uint32_t pos)
{
    if (r->n_moments) r->m[r->n_moments - 1].t_end = pos;
    if (r->n_moments == *cap) {
        int n = *cap ? 2 * *cap : 64;
        ms_rec_moment *g = realloc(r->m, (size_t)n * sizeof *g);
        if (!g) return -1;
        r->m = g;
        *cap = n;
    }
    r->m[r->n_moments++] = (ms_rec_moment){ .layer = layer, .phase = phase, .t_begin = pos, .t_end = pos };
    return 0;
}

/* The modules whose outputs the rerun hands on: each the bridge said (`ho`)
 * whose copies back to the caller's stage only one crossing ever read (no
 * `nh`), and whose every such copy the record links to what it copied. Their
 * copies, in forward and the gradients' in backward, are left out of the
 * record: what they copied lives as long as the longer of the two did (the
 * caller holds it now), and a copy of one of them is a copy of what it copied
 * (the next module's crossing takes the output where it was made). hop[i]:
 * storage i's module + 1, 0 none; bad[h]: module h had a copy it could not
 * link. 0, or -1 out of memory. */
static int hand_on(ms_prog_record *r, const msb_trace *t, const int *hop, const char *bad)
{
    char *on = calloc((size_t)t->n_hops + 1, 1);
    int32_t *src = malloc(((size_t)r->n + 1) * sizeof *src), *to = malloc(((size_t)r->n + 1) * sizeof *to);
    int rc = on && src && to ? 0 : -1;
    for (int i = 0; rc == 0 && i < r->n; i++)
        if (hop[i] && !t->hops[hop[i] - 1].read && !bad[hop[i] - 1]) on[hop[i] - 1] = 1;
    int n_on = 0;
    for (int h = 0; rc == 0 && h < t->n_hops; h++) n_on += on[h];
    if (rc == 0 && n_on && !(r->handed_on = calloc((size_t)n_on, sizeof *r->handed_on))) rc = -1;
    for (int h = 0; rc == 0 && h < t->n_hops; h++)
        if (on[h] && !(r->handed_on[r->n_handed_on++] = strdup(t->hops[h].path))) rc = -1;
    /* index order: what a copy copied has its source already */
    int n = 0;
    for (int i = 0; rc == 0 && i < r->n; i++) {
        ms_rec_storage *x = &r->s[i];
        if (x->copy_of >= 0) x->copy_of = src[x->copy_of];
        if (hop[i] && on[hop[i] - 1]) {
            ms_rec_storage *o = &r->s[x->copy_of];
            if (x->t_free > o->t_free) o->t_free = x->t_free;
            src[i] = x->copy_of;
            to[i] = -1;
            continue;
        }
        src[i] = i;
        to[i] = n++;
    }
    for (int i = 0; rc == 0 && n_on && i < r->n; i++)
        if (to[i] >= 0) {
            ms_rec_storage x = r->s[i];
            if (x.copy_of >= 0) x.copy_of = to[x.copy_of];
            r->s[to[i]] = x;
        }
    if (rc == 0) r->n = n;
    free(on);
    free(src);
    free(to);
    return rc;
}

int msb_build_record(const msb_trace *t, int n_layers, ms_prog_record **out, char *err, size_t errlen)
{
    *out = NULL;
    if (t->model_conn < 0) return ms_errf(err, errlen, "the record pass never reached a training forward");
    if ((uint64_t)t->n_ev >= MS_REC_NEVER) return ms_errf(err, errlen, "the record pass made too many events");
    ms_prog_record *r = calloc(1, sizeof *r);
    int (*fin)[2] = calloc((size_t)t->n_ev + 1, sizeof *fin);
    ms_addr_map live = { 0 };     /* storage key -> its index + 1 */
    int *hop = calloc((size_t)t->n_ev + 1, sizeof *hop);   /* per storage: hand_on()'s */
    char *bad = calloc((size_t)t->n_hops + 1, 1);
    int rc = 0, placed = 0, cap_m = 0;
    if (!r || !fin || !hop || !bad || !(r->s = malloc(((size_t)t->n_ev + 1) * sizeof *r->s)) ||
        msb_final_labels(t, fin) != 0)
        rc = ms_errf(err, errlen, "out of memory");
    /* the record ends with the pass's last step, where a rerun's last
     * measure of its stages' peaks is taken */
    int last = -1;
    for (int i = 0; i < t->n_ev; i++)
        if (t->ev[i].conn == t->model_conn && t->ev[i].kind == MSB_EV_STEP) last = i;
    if (last < 0 && rc == 0) rc = ms_errf(err, errlen, "the record pass finished no step");
    uint32_t pos = 0;
    for (int i = 0; rc == 0 && i < last; i++) {
        const msb_ev *e = &t->ev[i];
        if (e->conn != t->model_conn) continue;
        uint64_t idx = 0;
        switch (e->kind) {
        case MSB_EV_ALLOC:
            if (!e->m.address) break;     /* no storage to follow (the program sends none) */
            if (e->m.device < 0 || e->m.device >= n_layers) {
                rc = ms_errf(err, errlen, "the record pass counted a tensor on stage %d of %d", e->m.device, n_layers);
                break;
            }
            if (ms_addr_map_take(&live, e->m.address, &idx)) r->s[idx - 1].t_free = pos;   /* moved, or reused unseen */
            r->s[r->n] = (ms_rec_storage){ .layer = e->m.device, .cat = fin[i][0], .bytes = e->m.bytes, .t_alloc = pos,
                                           .t_free = MS_REC_NEVER, .copy_of = -1 };
            if (ms_addr_map_put(&live, e->m.address, (uint64_t)r->n + 1) != 0) rc = ms_errf(err, errlen, "out of memory");
            r->n++;
            pos++;
            break;
        case MSB_EV_FREE:
            if (ms_addr_map_take(&live, e->m.address, &idx)) {
                r->s[idx - 1].t_free = pos;
                pos++;
            }
            break;
        case MSB_EV_CROSS: {
            uint64_t from = 0;
            /* both live, the copy made after what it copied: anything else is no copy this replay can leave out */
            int linked = ms_addr_map_get(&live, e->m.address, &idx) && ms_addr_map_get(&live, e->orig, &from) &&
                         from < idx && r->s[idx - 1].copy_of < 0;
            if (linked) r->s[idx - 1].copy_of = (int32_t)(from - 1);
            if (e->hop > 0 && e->hop <= t->n_hops) {
                if (linked) hop[idx - 1] = e->hop;
                else bad[e->hop - 1] = 1;     /* a copy this record cannot leave out: its module copies back */
            }
            break;
        }
        case MSB_EV_WHERE:   /* a transition: the moment before it ends here */
            /* layers -1 (none) to n_layers (the program's code after the model's forward) */
            if (e->m.layer < -1 || e->m.layer > n_layers || e->m.phase < 0 || e->m.phase >= MS_PH_N)
                rc = ms_errf(err, errlen, "the record pass moved to layer %d, phase %d, of %d layers", e->m.layer,
                             e->m.phase, n_layers);
            else if (moment(r, &cap_m, e->m.layer, e->m.phase, pos) != 0)
                rc = ms_errf(err, errlen, "out of memory");
            break;
        case MSB_EV_PLACED:
            if (!placed) r->t_from = pos;
            placed = 1;
            break;
        default:
            break;
        }
    }
    if (rc == 0 && !placed) rc = ms_errf(err, errlen, "the record pass never placed the model on its stages");
    if (rc == 0 && hand_on(r, t, hop, bad) != 0) rc = ms_errf(err, errlen, "out of memory");
    ms_addr_map_clear(&live);
    free(fin);
    free(hop);
    free(bad);
    if (rc != 0) {
        ms_prog_record_free(r);
        return -1;
    }
    r->n_layers = n_layers;
    r->t_end = pos;
    if (r->n_moments) r->m[r->n_moments - 1].t_end = pos;
    *out = r;
    return 0;
}

int msb_record_hold(ms_prog_record *r, int layer, int cat, uint64_t bytes)
{
    if (!r || r->t_end == 0 || layer < 0 || layer >= r->n_layers || r->n >= MS_PROFILE_MAX_REC_STORAGES) return -1;
    ms_rec_storage *s = malloc(((size_t)r->n + 1) * sizeof *s);
    if (!s) return -1;
    s[0] = (ms_rec_storage){ .layer = layer, .cat = cat, .bytes = bytes, .t_alloc = 0, .t_free = MS_REC_NEVER,
                             .copy_of = -1 };
    for (int i = 0; i < r->n; i++) {
        s[i + 1] = r->s[i];
        if (s[i + 1].copy_of >= 0) s[i + 1].copy_of++;
    }
    free(r->s);
    r->s = s;
    r->n++;
    return 0;
}

int msb_record_untracked(const msb_trace *t, uint64_t *bytes)
{
    *bytes = 0;
    if (t->model_conn < 0) return -1;
    ms_addr_map live = { 0 };     /* storage key -> its bytes + 1 */
    int64_t held = 0, untracked = 0, at_step = 0;
    int counted = 0, stepped = 0;   /* the last transition said the allocator's count; a step ended on one */
    for (int i = 0; i < t->n_ev; i++) {
        const msb_ev *e = &t->ev[i];
        if (e->conn != t->model_conn) continue;
        uint64_t b = 0;
        switch (e->kind) {
        case MSB_EV_ALLOC:
            if (!e->m.address) break;
            if (ms_addr_map_take(&live, e->m.address, &b)) held -= (int64_t)(b - 1);   /* moved */
            if (ms_addr_map_put(&live, e->m.address, e->m.bytes + 1) != 0) {
                ms_addr_map_clear(&live);
                return -1;
            }
            held += (int64_t)e->m.bytes;
            break;
        case MSB_EV_FREE:
            if (ms_addr_map_take(&live, e->m.address, &b)) held -= (int64_t)(b - 1);
            break;
        case MSB_EV_WHERE:
            counted = e->alloc >= 0;
            untracked = e->alloc - held;
            break;
        case MSB_EV_STEP:
            if (counted) at_step = untracked;
            stepped = counted;
            break;
        default:
            break;
        }
    }
    ms_addr_map_clear(&live);
    if (!stepped) return -1;
    *bytes = at_step > 0 ? (uint64_t)at_step : 0;   /* a free it never saw is no library's buffer */
    return 0;
}
