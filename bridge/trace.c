/* trace.c — parsing the bridge's event lines into a trace (trace.h). */
#include "bridge/trace.h"
#include "vocab/addr_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

void msb_trace_init(msb_trace *t)
{
    memset(t, 0, sizeof *t);
    t->model_conn = -1;
}

/* The units' names and signatures (a program may send its model again). */
static void free_blocks(msb_trace *t)
{
    for (int i = 0; i < t->n_blocks; i++) {
        free(t->blocks[i]);
        if (t->sigs) free(t->sigs[i]);
    }
    free(t->blocks);
    free(t->sigs);
    t->blocks = NULL;
    t->sigs = NULL;
    t->n_blocks = 0;
}

void msb_trace_free(msb_trace *t)
{
    if (!t) return;
    free(t->ev);
    free_blocks(t);
    for (int i = 0; i < t->n_steps; i++) {
        free(t->steps[i].iv);
        free(t->steps[i].stage_peak_cats);
    }
    free(t->steps);
    msb_trace_init(t);
}

static int64_t num(const json_t *o, const char *k, int64_t dflt)
{
    const json_t *v = json_object_get(o, k);
    if (json_is_integer(v)) return (int64_t)json_integer_value(v);
    if (json_is_real(v)) return (int64_t)json_real_value(v);
    return dflt;
}

static double real(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static void str(const json_t *o, const char *k, char *dst, size_t cap)
{
    const json_t *v = json_object_get(o, k);
    snprintf(dst, cap, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static int push(msb_trace *t, const msb_ev *e)
{
    if (t->n_ev == t->cap_ev) {
        int n = t->cap_ev ? 2 * t->cap_ev : 1024;
        msb_ev *g = realloc(t->ev, (size_t)n * sizeof *g);
        if (!g) return -1;
        t->ev = g;
        t->cap_ev = n;
    }
    t->ev[t->n_ev++] = *e;
    return 0;
}

/* "a,b" += s, once */
static void join(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(dst), k = strlen(s);
    for (const char *p = dst; (p = strstr(p, s)) != NULL; p += k)
        if ((p == dst || p[-1] == ',') && (p[k] == ',' || p[k] == '\0')) return;
    if (n) snprintf(dst + n, cap - n, ",%s", s);
    else snprintf(dst, cap, "%s", s);
}

static int on_model(msb_trace *t, const json_t *o, int conn)
{
    t->model_conn = conn;
    str(o, "root", t->root, sizeof t->root);
    str(o, "list", t->list, sizeof t->list);
    str(o, "why", t->why, sizeof t->why);
    str(o, "fingerprint", t->fingerprint, sizeof t->fingerprint);
    str(o, "precision", t->precision, sizeof t->precision);
    str(o, "device", t->device, sizeof t->device);
    const json_t *b = json_object_get(o, "blocks"), *sg = json_object_get(o, "sigs");
    size_t n = json_is_array(b) ? json_array_size(b) : 0;
    free_blocks(t);
    t->blocks = n ? calloc(n, sizeof *t->blocks) : NULL;
    t->sigs = n && json_is_array(sg) && json_array_size(sg) == n ? calloc(n, sizeof *t->sigs) : NULL;
    if (n && !t->blocks) return -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(b, i), *g = t->sigs ? json_array_get(sg, i) : NULL;
        t->blocks[i] = strdup(json_is_string(s) ? json_string_value(s) : "?");
        if (!t->blocks[i]) return -1;
        t->n_blocks++;
        if (g && json_is_string(g) && !(t->sigs[i] = strdup(json_string_value(g)))) return -1;
    }
    return 0;
}

static int on_step(msb_trace *t, const json_t *o, int conn)
{
    msb_step *g = realloc(t->steps, (size_t)(t->n_steps + 1) * sizeof *g);
    if (!g) return -1;
    t->steps = g;
    msb_step *s = &t->steps[t->n_steps++];
    memset(s, 0, sizeof *s);
    s->n = (int)num(o, "n", t->n_steps);
    s->accum = (int)num(o, "accum", 1);
    s->micro_batch = (int)num(o, "micro_batch", 0);
    const json_t *mem = json_object_get(o, "mem");
    s->mem_free = s->mem_total = s->mem_reserved = -1;
    if (json_is_array(mem) && json_array_size(mem) == 3) {
        s->mem_free = (int64_t)json_integer_value(json_array_get(mem, 0));
        s->mem_total = (int64_t)json_integer_value(json_array_get(mem, 1));
        s->mem_reserved = (int64_t)json_integer_value(json_array_get(mem, 2));
    }
    const json_t *loss = json_object_get(o, "loss");
    if (json_is_number(loss)) {
        s->has_loss = 1;
        s->loss = json_number_value(loss);
    }
    const json_t *sp = json_object_get(o, "stage_peaks");
    for (size_t i = 0; json_is_array(sp) && i < json_array_size(sp) && i < 64; i++)
        s->stage_peaks[s->n_stage_peaks++] = (uint64_t)json_integer_value(json_array_get(sp, i));
    /* [[bytes per category] per stage]: kept only when whole and one per stage */
    const json_t *sc = json_object_get(o, "stage_peak_cats");
    if (json_is_array(sc) && s->n_stage_peaks > 0 && json_array_size(sc) == (size_t)s->n_stage_peaks) {
        /* a stage whose tensors were not counted sends null: its breakdown stays 0 */
        s->stage_peak_cats = calloc((size_t)s->n_stage_peaks, sizeof *s->stage_peak_cats);
        if (!s->stage_peak_cats) return -1;
        for (int i = 0; i < s->n_stage_peaks; i++) {
            const json_t *row = json_array_get(sc, (size_t)i);
            if (json_is_null(row)) continue;
            if (!json_is_array(row) || json_array_size(row) != MS_CAT_N) {
                free(s->stage_peak_cats);
                s->stage_peak_cats = NULL;
                break;
            }
            for (int c = 0; c < MS_CAT_N; c++) {
                json_int_t v = json_integer_value(json_array_get(row, (size_t)c));
                s->stage_peak_cats[i][c] = v > 0 ? (uint64_t)v : 0;
            }
        }
    }
    const json_t *dp = json_object_get(o, "device_peaks"), *dc = json_object_get(o, "device_context");
    const char *dk;
    json_t *dv;
    if (json_is_object(dp))
        json_object_foreach((json_t *)dp, dk, dv) {
            if (s->n_device_peaks == 8) break;
            snprintf(s->device_names[s->n_device_peaks], sizeof s->device_names[0], "%s", dk);
            const json_t *cv = json_is_object(dc) ? json_object_get(dc, dk) : NULL;
            s->device_context[s->n_device_peaks] = json_is_integer(cv) ? json_integer_value(cv) : -1;
            s->device_peaks[s->n_device_peaks++] = (uint64_t)json_integer_value(dv);
        }
    const json_t *iv = json_object_get(o, "intervals");
    size_t n = json_is_array(iv) ? json_array_size(iv) : 0;
    s->iv = n ? calloc(n, sizeof *s->iv) : NULL;
    if (n && !s->iv) return -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(iv, i);
        if (!json_is_array(x) || json_array_size(x) != 3) continue;
        s->iv[s->n_iv++] = (msb_interval_ms){ (int)json_integer_value(json_array_get(x, 0)),
                                               (int)json_integer_value(json_array_get(x, 1)),
                                               json_number_value(json_array_get(x, 2)) };
    }
    msb_ev e = { .kind = MSB_EV_STEP, .conn = conn, .n = s->n };
    return push(t, &e);
}

static int on_oom(msb_trace *t, const json_t *o, int conn)
{
    if (t->oom.happened) return 0;   /* the first is where it died; a retry's second says nothing new */
    t->oom.happened = 1;
    t->oom.layer = (int)num(o, "l", -1);
    t->oom.phase = (int)num(o, "p", MS_PH_FORWARD);
    t->oom.step = (int)num(o, "step", 0);
    t->oom.stage = (int)num(o, "stage", -1);
    t->oom.requested = (uint64_t)num(o, "requested", 0);
    t->oom.device_free = num(o, "free", -1);
    str(o, "module", t->oom.module, sizeof t->oom.module);
    str(o, "type", t->oom.type, sizeof t->oom.type);
    str(o, "source", t->oom.source, sizeof t->oom.source);
    str(o, "message", t->oom.message, sizeof t->oom.message);
    t->oom.ev_index = t->n_ev;
    msb_ev e = { .kind = MSB_EV_OOM, .conn = conn,
                 .m = { .layer = t->oom.layer, .phase = t->oom.phase, .bytes = t->oom.requested } };
    return push(t, &e);
}

static int on_ledger(msb_trace *t, const json_t *o, const char *ev, int conn)
{
    msb_ev e = { .conn = conn };
    ms_mem_event *m = &e.m;
    m->t_us = real(o, "t");
    m->device = (int)num(o, "d", 0);
    m->address = (uint64_t)num(o, "k", 0);
    m->bytes = (uint64_t)num(o, "b", 0);
    m->category = (int)num(o, "c", MS_CAT_TRANSIENT);
    m->layer = (int)num(o, "l", -1);
    m->phase = (int)num(o, "p", MS_PH_INIT);
    m->source = MS_EV_SRC_ALLOCATOR;
    e.alloc = e.peak = e.reserved = e.rpeak = e.xin = -1;
    switch (ev[0]) {
    case 'a': e.kind = MSB_EV_ALLOC; m->kind = MS_EV_ALLOC; break;
    case 'f': e.kind = MSB_EV_FREE; m->kind = MS_EV_FREE; break;
    case 'r': e.kind = MSB_EV_RELABEL; break;
    case 'x':
        e.kind = MSB_EV_REFUSED;
        m->kind = MS_EV_FAIL;
        e.alloc = num(o, "live", 0);
        e.peak = num(o, "cap", 0);
        break;
    case 'w':
        e.kind = MSB_EV_WHERE;
        e.n = (int)num(o, "fp", 0);
        e.alloc = num(o, "alloc", -1);
        e.peak = num(o, "peak", -1);
        e.reserved = num(o, "reserved", -1);
        e.rpeak = num(o, "rpeak", -1);
        e.xin = num(o, "xin", -1);
        e.xl = (int)num(o, "xl", -1);
        break;
    default:
        return 0;
    }
    if (m->category < 0 || m->category >= MS_CAT_N) m->category = MS_CAT_TRANSIENT;
    if (m->phase < 0 || m->phase >= MS_PH_N) m->phase = MS_PH_INIT;
    if (e.kind == MSB_EV_FREE) m->category = -1;     /* the storage's own is in its allocation */
    if (e.kind == MSB_EV_REFUSED) m->address = 0;    /* never allocated */
    return push(t, &e);
}

static int on_segment(msb_trace *t, const json_t *o, int conn)
{
    msb_ev e = { .kind = MSB_EV_SEGMENT, .conn = conn };
    ms_mem_event *m = &e.m;
    m->t_us = real(o, "t");
    m->bytes = (uint64_t)num(o, "b", 0);
    m->address = (uint64_t)num(o, "addr", 0);
    m->api_result = (int)num(o, "rc", 0);
    m->kind = m->api_result ? MS_EV_FAIL : num(o, "free", 0) ? MS_EV_FREE : MS_EV_ALLOC;
    m->category = -1;   /* a segment of the caching allocator holds tensors of any category */
    m->layer = (int)num(o, "l", -1);
    m->phase = (int)num(o, "p", MS_PH_INIT);
    m->source = MS_EV_SRC_CUPTI_CALLBACK;
    e.alloc = e.peak = e.reserved = e.rpeak = e.xin = -1;
    return push(t, &e);
}

int msb_final_labels(const msb_trace *t, int (*fin)[2])
{
    ms_addr_map live = { 0 };
    for (int i = 0; i < t->n_ev; i++) {
        const msb_ev *e = &t->ev[i];
        if (e->conn != t->model_conn) continue;
        uint64_t idx;
        if (e->kind == MSB_EV_ALLOC) {
            fin[i][0] = e->m.category;
            fin[i][1] = e->m.layer;
            if (e->m.address && ms_addr_map_put(&live, e->m.address, (uint64_t)i + 1) != 0) {
                ms_addr_map_clear(&live);
                return -1;
            }
        } else if (e->kind == MSB_EV_RELABEL && ms_addr_map_get(&live, e->m.address, &idx)) {
            fin[idx - 1][0] = e->m.category;
            fin[idx - 1][1] = e->m.layer;
        } else if (e->kind == MSB_EV_FREE) {
            ms_addr_map_take(&live, e->m.address, &idx);
        }
    }
    ms_addr_map_clear(&live);
    return 0;
}

int msb_trace_mem_events(const msb_trace *t, ms_mem_event **out)
{
    int n = 0;
    ms_mem_event *ev = calloc((size_t)t->n_ev + 1, sizeof *ev);
    int (*fin)[2] = calloc((size_t)t->n_ev + 1, sizeof *fin);
    if (!ev || !fin || msb_final_labels(t, fin) != 0) {
        free(ev);
        free(fin);
        return -1;
    }
    for (int i = 0; i < t->n_ev; i++) {
        const msb_ev *e = &t->ev[i];
        int memory = e->kind == MSB_EV_ALLOC || e->kind == MSB_EV_FREE || e->kind == MSB_EV_REFUSED ||
                     e->kind == MSB_EV_SEGMENT;
        if (e->conn != t->model_conn || !memory) continue;
        ev[n] = e->m;
        if (e->kind == MSB_EV_ALLOC) ev[n].category = fin[i][0];
        ev[n++].device = 0;   /* the trial's one device, as the run numbers it */
    }
    free(fin);
    *out = ev;
    return n;
}

int msb_trace_feed(msb_trace *t, const char *line, size_t len, int conn)
{
    json_error_t je;
    json_t *o = json_loadb(line, len, 0, &je);
    const json_t *evj = o ? json_object_get(o, "ev") : NULL;
    if (!json_is_object(o) || !json_is_string(evj)) {
        t->bad_lines++;
        json_decref(o);
        return 0;
    }
    const char *ev = json_string_value(evj);
    int rc = 0;
    if (!ev[1] && strchr("afrxw", ev[0])) rc = on_ledger(t, o, ev, conn);
    else if (!strcmp(ev, "seg")) rc = on_segment(t, o, conn);
    else if (!strcmp(ev, "hello")) t->n_hello++;
    else if (!strcmp(ev, "torch")) {
        t->torch_seen = 1;
        str(o, "version", t->torch_version, sizeof t->torch_version);
        t->cuda = json_is_true(json_object_get(o, "cuda"));
        str(o, "lightning", t->lightning, sizeof t->lightning);
    } else if (!strcmp(ev, "model")) rc = on_model(t, o, conn);
    else if (!strcmp(ev, "member")) {
        char m[MS_NAME_MAX];
        str(o, "module", m, sizeof m);
        if (num(o, "l", 0) == 0) join(t->pre, sizeof t->pre, m);
        else join(t->post, sizeof t->post, m);
    } else if (!strcmp(ev, "step")) rc = on_step(t, o, conn);
    else if (!strcmp(ev, "oom")) rc = on_oom(t, o, conn);
    else if (!strcmp(ev, "done")) {
        if (conn == t->model_conn || t->model_conn < 0) {
            t->done = 1;
            str(o, "reason", t->done_reason, sizeof t->done_reason);
            str(o, "exc", t->done_exc, sizeof t->done_exc);
        }
    } else if (!strcmp(ev, "refuse")) {
        t->refused = 1;
        str(o, "what", t->refuse_what, sizeof t->refuse_what);
        str(o, "text", t->refuse_text, sizeof t->refuse_text);
    } else if (!strcmp(ev, "ballast")) {
        t->ballast.taken = 1;
        t->ballast.device = (int)num(o, "device", 0);
        t->ballast.bytes = (uint64_t)num(o, "b", 0);
        t->ballast.total = (uint64_t)num(o, "total", 0);
        t->ballast.free = (uint64_t)num(o, "free", 0);
        t->ballast.capacity = (uint64_t)num(o, "capacity", 0);
    } else if (!strcmp(ev, "save")) {
        if (num(o, "skipped", 0)) {
            t->n_saves_skipped++;       /* a diagnostic pass writes no checkpoint */
        } else {
            t->n_saves++;
            str(o, "path", t->last_save, sizeof t->last_save);
            t->last_save_step = (int)num(o, "step", 0);
        }
    } else if (!strcmp(ev, "load")) {
        if (!t->n_loads++) str(o, "path", t->first_load, sizeof t->first_load);
    } else if (!strcmp(ev, "warn")) {
        char what[32], text[512], item[600];
        str(o, "what", what, sizeof what);
        str(o, "text", text, sizeof text);
        snprintf(item, sizeof item, "%s: %s", what, text);
        if (!strstr(t->warnings, item)) {
            size_t n = strlen(t->warnings);
            snprintf(t->warnings + n, sizeof t->warnings - n, "%s%s", n ? "; " : "", item);
        }
    }
    json_decref(o);
    return rc;
}
