/* trace.c — parsing the bridge's event lines into a trace (trace.h). */
#include "bridge/trace.h"
#include "vocab/addr_map.h"
#include "vocab/limits.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

void msb_trace_init(msb_trace *t)
{
    memset(t, 0, sizeof *t);
    t->model_conn = -1;
    t->oom.category = -1;
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
    for (int i = 0; i < t->n_hops; i++) free(t->hops[i].path);
    free(t->hops);
    free(t->order);
    msb_trace_init(t);
}

/* A number field, dflt when absent or not a number; a real out of range
 * is held at the range's end (the program may send anything). */
static int64_t numv(const json_t *v, int64_t dflt)
{
    if (json_is_integer(v)) return (int64_t)json_integer_value(v);
    if (!json_is_real(v)) return dflt;
    double d = json_real_value(v);
    if (d != d) return dflt;
    if (d >= 9.2e18) return INT64_MAX;
    if (d <= -9.2e18) return INT64_MIN;
    return (int64_t)d;
}

static int64_t num(const json_t *o, const char *k, int64_t dflt) { return numv(json_object_get(o, k), dflt); }

static int clamp_int(int64_t v) { return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v; }

/* An int field (a layer, a phase, a count), held to int's range. */
static int inum(const json_t *o, const char *k, int dflt) { return clamp_int(num(o, k, dflt)); }

/* A byte count (-1: none), held to [-1, MSB_MAX_BYTES]: sums of them in the
 * rows never overflow. */
static int64_t bnum(const json_t *o, const char *k, int64_t dflt)
{
    int64_t v = num(o, k, dflt);
    return v < -1 ? -1 : v > (int64_t)MSB_MAX_BYTES ? (int64_t)MSB_MAX_BYTES : v;
}

static uint64_t ubnum(const json_t *o, const char *k)
{
    int64_t v = bnum(o, k, 0);
    return v > 0 ? (uint64_t)v : 0;
}

static int64_t bval(json_int_t v, int64_t lo)
{
    return v < lo ? lo : v > (json_int_t)MSB_MAX_BYTES ? (int64_t)MSB_MAX_BYTES : (int64_t)v;
}

/* A measured value (a time, a loss) held to where sums of it stay finite. */
static double finite_or_0(double d) { return d == d && d < 1e12 && d > -1e12 ? d : 0.0; }

/* A time in microseconds, held to about 30 years either way. */
static double real(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    double d = json_is_number(v) ? json_number_value(v) : 0.0;
    return d != d ? 0.0 : d > 1e15 ? 1e15 : d < -1e15 ? -1e15 : d;
}

/* The length of the valid UTF-8 character at s (at most n bytes there),
 * or 0 when s starts no valid character (a stray byte, an overlong form, a
 * surrogate, past U+10FFFF, or cut short). */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    if (!n) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t k = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!k || n < k) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;     /* overlong */
    if (c == 0xED && s[1] > 0x9F) return 0;     /* a surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0;     /* overlong */
    if (c == 0xF4 && s[1] > 0x8F) return 0;     /* past U+10FFFF */
    return k;
}

size_t msb_utf8_copy(char *dst, size_t cap, const char *src, size_t max)
{
    if (!cap) return 0;
    size_t n = 0, room = cap - 1 < max ? cap - 1 : max, len = src ? strlen(src) : 0;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_char((const unsigned char *)src + i, len - i);
        const char *piece = k ? src + i : "\xEF\xBF\xBD";    /* U+FFFD for a byte that is no character */
        size_t w = k ? k : 3;
        if (n + w > room) break;
        memcpy(dst + n, piece, w);
        n += w;
        i += k ? k : 1;
    }
    dst[n] = '\0';
    return n;
}

char *msb_utf8_dup(const char *src)
{
    size_t n = src ? strlen(src) : 0;
    char *out = malloc(3 * n + 1);        /* every byte may become U+FFFD */
    if (out) msb_utf8_copy(out, 3 * n + 1, src, (size_t)-1);
    return out;
}

/* A string field, cut at a character boundary to fit; a NUL inside it
 * (JSON's \u0000) shows as U+FFFD, so nothing after it is lost unseen. */
static void str(const json_t *o, const char *k, char *dst, size_t cap)
{
    const json_t *v = json_object_get(o, k);
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    size_t len = json_is_string(v) ? json_string_length(v) : 0, n = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < len && n + 1 < cap;) {
        if (!s[i]) {
            if (n + 4 > cap) break;
            memcpy(dst + n, "\xEF\xBF\xBD", 3);
            n += 3;
            i++;
            continue;
        }
        size_t piece = strnlen(s + i, len - i);
        char *end = dst + n;
        n += msb_utf8_copy(end, cap - n, s + i, piece);
        if (n - (size_t)(end - dst) < piece) break;   /* did not fit */
        i += piece;
    }
    dst[n] = '\0';
}

/* name as a message shows it: printable, control characters and quotes
 * escaped, at most about 60 characters, its length when cut */
static void shown_name(char *dst, size_t cap, const char *name, size_t len)
{
    size_t n = 0, i = 0, chars = 0;
    if (cap < 16) { if (cap) dst[0] = '\0'; return; }
    dst[n++] = '\'';
    for (; i < len && chars < 60 && n + 8 < cap; chars++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c == 0x7F || c == '\'' || c == '\\') {
            n += (size_t)snprintf(dst + n, cap - n, c == '\'' || c == '\\' ? "\\%c" : "\\x%02x", c);
            i++;
        } else {
            size_t k = utf8_char((const unsigned char *)name + i, len - i);
            if (!k) k = 1;            /* cannot happen: jansson checked it */
            memcpy(dst + n, name + i, k);
            n += k;
            i += k;
        }
    }
    dst[n++] = '\'';
    dst[n] = '\0';
    if (i < len) snprintf(dst + n, cap - n, "... (%zu bytes)", len);
}

/* The program sent a module name the records cannot hold: the trial is
 * refused with what and why (the first such name only). */
static void refuse_name(msb_trace *t, const char *name, size_t len, const char *why)
{
    if (t->refused) return;
    char shown[320];
    shown_name(shown, sizeof shown, name, len);
    t->refused = 1;
    snprintf(t->refuse_what, sizeof t->refuse_what, "names");
    snprintf(t->refuse_text, sizeof t->refuse_text, "memsplit cannot carry the module name %s: %s", shown, why);
}

/* Why a module name cannot travel through the records (rows, the run
 * database, plans: MS_NAME_MAX - 1 bytes of UTF-8, no NUL), or NULL. A
 * member of the layer before or after the blocks is also joined with
 * commas into its layer's name: no comma, no leading '('. */
static const char *name_problem(const char *s, size_t len, int member)
{
    if (len == 0) return "it is empty";
    if (strlen(s) != len) return "it holds a NUL character";
    if (len >= MS_NAME_MAX) return "longer than the 255 bytes memsplit keeps of a module path";
    if (member && strchr(s, ',')) return "it holds a comma, which joins the module paths of the layer before or after "
                                         "the blocks";
    if (member && s[0] == '(') return "it begins with '(', which marks a layer with no module of its own";
    return NULL;
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

/* "a,b" += s, once: 0, or -1 when the joined names would not fit */
static int join(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(dst), k = strlen(s);
    if (!k) return 0;
    for (const char *p = dst; (p = strstr(p, s)) != NULL; p++)
        if ((p == dst || p[-1] == ',') && (p[k] == ',' || p[k] == '\0')) return 0;
    if (n + (n ? 1 : 0) + k >= cap) return -1;
    snprintf(dst + n, cap - n, "%s%s", n ? "," : "", s);
    return 0;
}

/* A module that runs before (l 0) or after the blocks: one more member of
 * that layer's name. Only the training process's, and only names the
 * records can carry (refused otherwise). */
static void on_member(msb_trace *t, const json_t *o, int conn)
{
    if (conn != t->model_conn) return;
    const json_t *v = json_object_get(o, "module");
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    size_t len = json_is_string(v) ? json_string_length(v) : 0;
    const char *why = name_problem(s, len, 1);
    int pre = num(o, "l", 0) == 0;
    if (!why && join(pre ? t->pre : t->post, MS_NAME_MAX, s) != 0)
        why = pre ? "with the other modules that run before the blocks it makes that layer's name longer than the "
                    "255 bytes memsplit keeps"
                  : "with the other modules that run after the blocks it makes that layer's name longer than the "
                    "255 bytes memsplit keeps";
    if (why) refuse_name(t, s, len, why);
}

/* Event `ho` (id, module): the record pass copied module's outputs back to
 * its caller's stage, and calls it id in `c` and `nh`; `nh` (id): something
 * other than one crossing read such a copy. Ids are dense from 0; one said
 * twice, out of range, or a path that is no module path is a bad line. */
static int on_hop(msb_trace *t, const json_t *o, int conn, int read)
{
    if (conn != t->model_conn) return 0;
    int64_t id = num(o, "id", -1);
    if (id < 0 || id >= MS_REC_MAX_HANDED_ON || (read && id >= t->n_hops)) {
        t->bad_lines++;
        return 0;
    }
    if (read) {
        t->hops[id].read = 1;
        return 0;
    }
    const json_t *v = json_object_get(o, "module");
    if (!json_is_string(v) || name_problem(json_string_value(v), json_string_length(v), 0) || id != t->n_hops) {
        t->bad_lines++;
        return 0;
    }
    char *path = msb_utf8_dup(json_string_value(v));   /* as the records keep names: valid UTF-8 */
    if (!path) return -1;
    int bad = strlen(path) >= MS_NAME_MAX;
    for (int i = 0; !bad && i < t->n_hops; i++) bad = !strcmp(t->hops[i].path, path);   /* one module, one id */
    struct msb_hop *g = bad ? NULL : realloc(t->hops, ((size_t)t->n_hops + 1) * sizeof *g);
    if (!g) {
        free(path);
        if (!bad) return -1;
        t->bad_lines++;
        return 0;
    }
    t->hops = g;
    g[t->n_hops++] = (struct msb_hop){ .path = path, .read = 0 };
    return 0;
}

/* Event `order` (units): the trial's units in the order the program first
 * called them, kept once; a list that is no permutation of the units is a
 * bad line. */
static int on_order(msb_trace *t, const json_t *o, int conn)
{
    const json_t *u = json_object_get(o, "units");
    if (conn != t->model_conn || t->order) return 0;
    size_t n = json_is_array(u) ? json_array_size(u) : 0;
    if (n == 0 || n != (size_t)t->n_blocks) {
        t->bad_lines++;
        return 0;
    }
    int *order = malloc(n * sizeof *order);
    char *seen = calloc(n + 1, 1);
    int ok = order && seen;
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *v = json_array_get(u, i);
        json_int_t l = json_is_integer(v) ? json_integer_value(v) : 0;
        ok = l >= 1 && l <= (json_int_t)n && !seen[l];
        if (ok) {
            seen[l] = 1;
            order[i] = (int)l;
        }
    }
    free(seen);
    if (!ok) {
        if (!order) return -1;
        free(order);
        t->bad_lines++;
        return 0;
    }
    t->order = order;
    t->n_order = (int)n;
    return 0;
}

int msb_trace_in_call_order(msb_trace *t, const int *order, int n)
{
    if (n != t->n_blocks || n < 1) return -1;
    int *to = calloc((size_t)n + 2, sizeof *to);      /* old layer -> new */
    char **names = malloc((size_t)n * sizeof *names), **sigs = t->sigs ? malloc((size_t)n * sizeof *sigs) : NULL;
    int ok = to && names && (sigs || !t->sigs);
    for (int k = 0; ok && k < n; k++) {
        ok = order[k] >= 1 && order[k] <= n && !to[order[k]];
        if (ok) to[order[k]] = k + 1;
    }
    if (!ok) {
        free(to);
        free(names);
        free(sigs);
        return -1;
    }
#define NEW(l) ((l) >= 1 && (l) <= n ? to[l] : (l))
    for (int i = 0; i < t->n_ev; i++) {
        if (t->ev[i].conn != t->model_conn) continue;    /* another process's units are not these */
        t->ev[i].m.layer = NEW(t->ev[i].m.layer);
        if (t->ev[i].kind == MSB_EV_WHERE) t->ev[i].xl = NEW(t->ev[i].xl);
    }
    for (int s = 0; s < t->n_steps; s++)
        for (int k = 0; k < t->steps[s].n_iv; k++) t->steps[s].iv[k].layer = NEW(t->steps[s].iv[k].layer);
    t->oom.layer = NEW(t->oom.layer);
#undef NEW
    for (int k = 0; k < n; k++) {
        names[k] = t->blocks[order[k] - 1];
        if (sigs) sigs[k] = t->sigs[order[k] - 1];
    }
    free(t->blocks);
    free(t->sigs);
    t->blocks = names;
    t->sigs = sigs;
    free(to);
    return 0;
}

/* The process that trains is the first that sends `model`; another
 * process that trains a model later (a subprocess, another worker) is left
 * out of the profile, with a warning. What that process said before its
 * model (a refusal, its end, an OOM) is forgotten when it is not this one. */
static int on_model(msb_trace *t, const json_t *o, int conn)
{
    if (t->model_conn >= 0) {
        if (conn != t->model_conn) {
            char root[128], item[300];
            str(o, "root", root, sizeof root);
            snprintf(item, sizeof item, "model: another process also trained a model (%s); only the first process "
                     "that trained is profiled", root);
            msb_trace_warn(t, item);
        }
        return 0;
    }
    t->model_conn = conn;
    if (t->done && t->done_conn != conn) {
        t->done = 0;
        t->done_reason[0] = t->done_exc[0] = '\0';
    }
    if (t->refused && t->refuse_conn != conn) {
        t->refused = 0;
        t->refuse_what[0] = t->refuse_text[0] = '\0';
    }
    if (t->oom.happened && t->oom.conn != conn) {
        memset(&t->oom, 0, sizeof t->oom);
        t->oom.category = -1;
    }
    str(o, "root", t->root, sizeof t->root);
    str(o, "list", t->list, sizeof t->list);
    str(o, "why", t->why, sizeof t->why);
    str(o, "fingerprint", t->fingerprint, sizeof t->fingerprint);
    str(o, "precision", t->precision, sizeof t->precision);
    str(o, "device", t->device, sizeof t->device);
    const json_t *b = json_object_get(o, "blocks"), *sg = json_object_get(o, "sigs");
    size_t n = json_is_array(b) ? json_array_size(b) : 0;
    free_blocks(t);
    if (n > MS_MAX_BLOCKS) {
        if (!t->refused) {
            t->refused = 1;
            snprintf(t->refuse_what, sizeof t->refuse_what, "names");
            snprintf(t->refuse_text, sizeof t->refuse_text, "the program's block list has %zu blocks; memsplit "
                     "handles up to %d", n, MS_MAX_BLOCKS);
        }
        n = 0;
    }
    t->blocks = n ? calloc(n, sizeof *t->blocks) : NULL;
    t->sigs = n && json_is_array(sg) && json_array_size(sg) == n ? calloc(n, sizeof *t->sigs) : NULL;
    if (n && !t->blocks) return -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(b, i), *g = t->sigs ? json_array_get(sg, i) : NULL;
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        size_t len = json_is_string(v) ? json_string_length(v) : 0;
        const char *why = name_problem(s, len, 0);
        if (why) refuse_name(t, s, len, why);
        t->blocks[i] = strdup(why ? "?" : s);
        if (!t->blocks[i]) return -1;
        t->n_blocks++;
        if (g && json_is_string(g) && !(t->sigs[i] = strdup(json_string_value(g)))) return -1;
    }
    return 0;
}

static int read_step_data(msb_step *s, const json_t *o);

/* The OOM said was one the program caught and went on after: cuDNN does,
 * where a convolution's workspace is refused (it takes an algorithm that
 * needs less), and so does a loop that skips a batch that did not fit. It
 * is not where the program died; the first such is a warning. */
static void survived(msb_trace *t)
{
    if (!t->oom.survived++) {
        char item[MS_NAME_MAX + 160], module[121];
        /* no module path: the root's own code (its type), or no module's */
        msb_utf8_copy(module, sizeof module, t->oom.module[0] ? t->oom.module : t->oom.type[0] ? t->oom.type :
                      "the program's own code", 120);
        snprintf(item, sizeof item, "oom: the program caught an out-of-memory (%llu bytes asked in %s) and went on",
                 (unsigned long long)t->oom.requested, module);
        msb_trace_warn(t, item);
    }
    t->oom.happened = 0;
}

static int on_step(msb_trace *t, const json_t *o, int conn)
{
    if (conn != t->model_conn) return 0;      /* the training process's steps only */
    msb_step *g = realloc(t->steps, (size_t)(t->n_steps + 1) * sizeof *g);
    if (!g) return -1;
    t->steps = g;
    msb_step *s = &t->steps[t->n_steps++];
    memset(s, 0, sizeof *s);
    s->n = inum(o, "n", t->n_steps);
    s->accum = inum(o, "accum", 1);
    s->micro_batch = inum(o, "micro_batch", 0);
    const json_t *mem = json_object_get(o, "mem");
    s->mem_free = s->mem_total = s->mem_reserved = -1;
    if (json_is_array(mem) && json_array_size(mem) == 3) {
        s->mem_free = bval(json_integer_value(json_array_get(mem, 0)), -1);
        s->mem_total = bval(json_integer_value(json_array_get(mem, 1)), -1);
        s->mem_reserved = bval(json_integer_value(json_array_get(mem, 2)), -1);
    }
    s->late = json_is_true(json_object_get(o, "late"));
    /* the step an OOM happened in ended: the program survived it */
    if (t->oom.happened && t->oom.conn == conn && t->oom.step > 0 && s->n >= t->oom.step) survived(t);
    if (read_step_data(s, o) != 0) return -1;
    const json_t *sp = json_object_get(o, "stage_peaks");
    for (size_t i = 0; json_is_array(sp) && i < json_array_size(sp) && i < 64; i++)
        s->stage_peaks[s->n_stage_peaks++] = (uint64_t)bval(json_integer_value(json_array_get(sp, i)), 0);
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
                s->stage_peak_cats[i][c] = (uint64_t)bval(json_integer_value(json_array_get(row, (size_t)c)), 0);
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
            s->device_context[s->n_device_peaks] = json_is_integer(cv) ? bval(json_integer_value(cv), -1) : -1;
            s->device_peaks[s->n_device_peaks++] = (uint64_t)bval(json_integer_value(dv), 0);
        }
    msb_ev e = { .kind = MSB_EV_STEP, .conn = conn, .n = s->n };
    return push(t, &e);
}

/* A step's intervals and loss (of event step, or stepdata after it); a
 * step keeps the first it gets. 0, or -1 when out of memory. */
static int read_step_data(msb_step *s, const json_t *o)
{
    const json_t *loss = json_object_get(o, "loss");
    if (json_is_number(loss) && !s->has_loss) {
        s->has_loss = 1;
        s->loss = finite_or_0(json_number_value(loss));
    }
    const json_t *iv = json_object_get(o, "intervals");
    size_t n = json_is_array(iv) ? json_array_size(iv) : 0;
    if (!n || s->iv) return 0;
    s->iv = calloc(n, sizeof *s->iv);
    if (!s->iv) return -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(iv, i);
        if (!json_is_array(x) || json_array_size(x) != 3) continue;
        s->iv[s->n_iv++] = (msb_interval_ms){ clamp_int(json_integer_value(json_array_get(x, 0))),
                                               clamp_int(json_integer_value(json_array_get(x, 1))),
                                               finite_or_0(json_number_value(json_array_get(x, 2))) };
    }
    return 0;
}

/* stepdata {n, intervals, loss}: what a step's event said would come
 * later, for the training process's latest step numbered n. */
static int on_stepdata(msb_trace *t, const json_t *o, int conn)
{
    if (conn != t->model_conn) return 0;
    int n = inum(o, "n", -1);
    for (int i = t->n_steps - 1; i >= 0; i--) {
        msb_step *s = &t->steps[i];
        if (s->n != n) continue;
        if (!s->late) return 0;
        s->late = 0;
        t->n_stepdata++;
        return read_step_data(s, o);
    }
    return 0;
}

static int on_oom(msb_trace *t, const json_t *o, int conn)
{
    if (t->model_conn >= 0 && conn != t->model_conn) return 0;   /* another process's */
    if (t->oom.happened && t->oom.conn == conn)
        survived(t);   /* the program went on after the earlier one: the last is where it died */
    else if (t->oom.happened)
        return 0;      /* another connection's after the first: where it died is said */
    t->oom.happened = 1;
    t->oom.conn = conn;
    t->oom.layer = inum(o, "l", -1);
    t->oom.phase = inum(o, "p", MS_PH_FORWARD);
    t->oom.step = inum(o, "step", 0);
    t->oom.stage = inum(o, "stage", -1);
    t->oom.requested = ubnum(o, "requested");
    t->oom.category = inum(o, "c", -1);
    if (t->oom.category < 0 || t->oom.category >= MS_CAT_N) t->oom.category = -1;
    t->oom.device_free = bnum(o, "free", -1);
    str(o, "module", t->oom.module, sizeof t->oom.module);
    str(o, "type", t->oom.type, sizeof t->oom.type);
    str(o, "source", t->oom.source, sizeof t->oom.source);
    str(o, "message", t->oom.message, sizeof t->oom.message);
    t->oom.ev_index = t->n_ev;
    msb_ev e = { .kind = MSB_EV_OOM, .conn = conn,
                 .m = { .layer = t->oom.layer, .phase = t->oom.phase, .bytes = t->oom.requested } };
    return push(t, &e);
}

/* A ledger event e, its fields read (b: the bytes as sent), checked and
 * kept: the same for a line of its own and an event of a batch. */
static int keep_ledger(msb_trace *t, msb_ev *e, int64_t b)
{
    ms_mem_event *m = &e->m;
    if (b < 0 || (uint64_t)b > MSB_MAX_BYTES) {
        t->bad_lines++;        /* no device holds that: forged */
        return 0;
    }
    m->bytes = (uint64_t)b;
    m->source = MS_EV_SRC_ALLOCATOR;
    if (e->kind == MSB_EV_ALLOC) {
        if (t->alloc_bytes > MSB_MAX_ALLOCATED - m->bytes) {
            t->bad_lines++;    /* more than any program allocates: forged (and sums would overflow) */
            return 0;
        }
        t->alloc_bytes += m->bytes;
        m->kind = MS_EV_ALLOC;
    }
    if (e->kind == MSB_EV_FREE) m->kind = MS_EV_FREE;
    if (m->category < 0 || m->category >= MS_CAT_N) m->category = MS_CAT_TRANSIENT;
    if (m->phase < 0 || m->phase >= MS_PH_N) m->phase = MS_PH_INIT;
    if (e->kind == MSB_EV_FREE) m->category = -1;     /* the storage's own is in its allocation */
    if (e->kind == MSB_EV_REFUSED) m->address = 0;    /* never allocated */
    return push(t, e);
}

static int on_ledger(msb_trace *t, const json_t *o, const char *ev, int conn)
{
    msb_ev e = { .conn = conn };
    ms_mem_event *m = &e.m;
    m->t_us = real(o, "t");
    m->device = inum(o, "d", 0);
    m->address = (uint64_t)num(o, "k", 0);
    int64_t b = num(o, "b", 0);
    m->category = inum(o, "c", MS_CAT_TRANSIENT);
    m->layer = inum(o, "l", -1);
    m->phase = inum(o, "p", MS_PH_INIT);
    e.alloc = e.peak = e.reserved = e.rpeak = e.xin = -1;
    switch (ev[0]) {
    case 'a': e.kind = MSB_EV_ALLOC; break;
    case 'f': e.kind = MSB_EV_FREE; break;
    case 'r': e.kind = MSB_EV_RELABEL; break;
    case 'x':
        e.kind = MSB_EV_REFUSED;
        m->kind = MS_EV_FAIL;
        e.alloc = bnum(o, "live", 0);
        e.peak = bnum(o, "cap", 0);
        break;
    case 'c':
        e.kind = MSB_EV_CROSS;
        e.orig = (uint64_t)num(o, "o", 0);
        if (!m->address || !e.orig) {
            t->bad_lines++;    /* a copy of nothing, or into nothing */
            return 0;
        }
        if (json_object_get(o, "h")) {
            int64_t h = num(o, "h", -1);
            if (h < 0 || h >= MS_REC_MAX_HANDED_ON) {
                t->bad_lines++;    /* no module the bridge could have said */
                return 0;
            }
            e.hop = (int)h + 1;
        }
        break;
    case 'w':
        e.kind = MSB_EV_WHERE;
        e.n = inum(o, "fp", 0);
        e.alloc = bnum(o, "alloc", -1);
        e.peak = bnum(o, "peak", -1);
        e.reserved = bnum(o, "reserved", -1);
        e.rpeak = bnum(o, "rpeak", -1);
        e.xin = bnum(o, "xin", -1);
        e.xl = inum(o, "xl", -1);
        break;
    default:
        return 0;
    }
    return keep_ledger(t, &e, b);
}

/* A batch of ledger events (event `m`: msb_replay's, docs/bridge.md): ops
 * "a", "f", "r" in o, their fields in arrays t, k, b, c, l of the same
 * length, and d (each event's device) where the batch is not all device 0,
 * all in phase p. Each event is what its own line would have been; a
 * batch whose arrays do not match its ops is one bad line, an op that is no
 * ledger event one more. */
static int on_batch(msb_trace *t, const json_t *o, int conn)
{
    static const char *const keys[] = { "t", "k", "b", "c", "l", "d" };
    const json_t *ops = json_object_get(o, "o"), *f[6];
    size_t n = json_is_string(ops) ? json_string_length(ops) : 0;
    for (int i = 0; i < 6; i++) {
        f[i] = json_object_get(o, keys[i]);
        if (i == 5 && !f[i]) break;      /* no devices: device 0 */
        if (!json_is_array(f[i]) || json_array_size(f[i]) != n) n = 0;
    }
    if (!n) {
        t->bad_lines++;
        return 0;
    }
    const char *op = json_string_value(ops);
    int phase = inum(o, "p", MS_PH_INIT);
    for (size_t i = 0; i < n; i++) {
        msb_ev e = { .conn = conn };
        ms_mem_event *m = &e.m;
        switch (op[i]) {
        case 'a': e.kind = MSB_EV_ALLOC; break;
        case 'f': e.kind = MSB_EV_FREE; break;
        case 'r': e.kind = MSB_EV_RELABEL; break;
        default:
            t->bad_lines++;
            continue;
        }
        m->t_us = (double)numv(json_array_get(f[0], i), 0);
        m->address = (uint64_t)numv(json_array_get(f[1], i), 0);
        m->category = clamp_int(numv(json_array_get(f[3], i), MS_CAT_TRANSIENT));
        m->layer = clamp_int(numv(json_array_get(f[4], i), -1));
        m->device = f[5] ? clamp_int(numv(json_array_get(f[5], i), 0)) : 0;
        m->phase = phase;
        e.alloc = e.peak = e.reserved = e.rpeak = e.xin = -1;
        if (keep_ledger(t, &e, numv(json_array_get(f[2], i), 0)) != 0) return -1;
    }
    return 0;
}

static int on_segment(msb_trace *t, const json_t *o, int conn)
{
    msb_ev e = { .kind = MSB_EV_SEGMENT, .conn = conn };
    ms_mem_event *m = &e.m;
    m->t_us = real(o, "t");
    m->bytes = ubnum(o, "b");
    m->address = (uint64_t)num(o, "addr", 0);
    m->api_result = inum(o, "rc", 0);
    m->kind = m->api_result ? MS_EV_FAIL : num(o, "free", 0) ? MS_EV_FREE : MS_EV_ALLOC;
    m->category = -1;   /* a segment of the caching allocator holds tensors of any category */
    m->layer = inum(o, "l", -1);
    m->phase = inum(o, "p", MS_PH_INIT);
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

void msb_trace_warn(msb_trace *t, const char *item)
{
    if (!item[0] || strstr(t->warnings, item)) return;
    size_t n = strlen(t->warnings);
    if (n + 3 >= sizeof t->warnings) return;
    if (n) {
        memcpy(t->warnings + n, "; ", 3);
        n += 2;
    }
    msb_utf8_copy(t->warnings + n, sizeof t->warnings - n, item, (size_t)-1);
}

/* Events a process says of itself: only the training process's count once
 * one trains; before that, the last to say them (on_model forgets another
 * process's). */
static int own(const msb_trace *t, int conn) { return t->model_conn < 0 || conn == t->model_conn; }

int msb_trace_feed(msb_trace *t, const char *line, size_t len, int conn)
{
    if (!line) {               /* a line too long to keep (reader.h) */
        t->bad_lines++;
        return 0;
    }
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_ALLOW_NUL, &je);
    const json_t *evj = o ? json_object_get(o, "ev") : NULL;
    if (!json_is_object(o) || !json_is_string(evj)) {
        t->bad_lines++;
        json_decref(o);
        return 0;
    }
    const char *ev = json_string_value(evj);
    int rc = 0;
    if (ev[0] && !ev[1] && strchr("afrxwc", ev[0])) rc = on_ledger(t, o, ev, conn);
    else if (!strcmp(ev, "placed")) rc = push(t, &(msb_ev){ .kind = MSB_EV_PLACED, .conn = conn });
    else if (!strcmp(ev, "m")) rc = on_batch(t, o, conn);
    else if (!strcmp(ev, "seg")) rc = on_segment(t, o, conn);
    else if (!strcmp(ev, "hello")) t->n_hello++;
    else if (!strcmp(ev, "torch")) {
        if (own(t, conn)) {
            t->torch_seen = 1;
            str(o, "version", t->torch_version, sizeof t->torch_version);
            t->cuda = json_is_true(json_object_get(o, "cuda"));
            str(o, "lightning", t->lightning, sizeof t->lightning);
        }
    } else if (!strcmp(ev, "model")) rc = on_model(t, o, conn);
    else if (!strcmp(ev, "member")) on_member(t, o, conn);
    else if (!strcmp(ev, "ho")) rc = on_hop(t, o, conn, 0);
    else if (!strcmp(ev, "order")) rc = on_order(t, o, conn);
    else if (!strcmp(ev, "nh")) rc = on_hop(t, o, conn, 1);
    else if (!strcmp(ev, "recompute")) t->n_recomputed += own(t, conn);   /* the bridge says each unit once */
    else if (!strcmp(ev, "step")) rc = on_step(t, o, conn);
    else if (!strcmp(ev, "stepdata")) rc = on_stepdata(t, o, conn);
    else if (!strcmp(ev, "oom")) rc = on_oom(t, o, conn);
    else if (!strcmp(ev, "done")) {
        if (own(t, conn)) {
            t->done = 1;
            t->done_conn = conn;
            str(o, "reason", t->done_reason, sizeof t->done_reason);
            str(o, "exc", t->done_exc, sizeof t->done_exc);
        }
    } else if (!strcmp(ev, "refuse")) {
        if (own(t, conn) && !(t->refused && !strcmp(t->refuse_what, "names"))) {
            t->refused = 1;
            t->refuse_conn = conn;
            str(o, "what", t->refuse_what, sizeof t->refuse_what);
            str(o, "text", t->refuse_text, sizeof t->refuse_text);
        }
    } else if (!strcmp(ev, "ballast")) {
        if (own(t, conn)) {
            t->ballast.taken = 1;
            t->ballast.device = inum(o, "device", 0);
            t->ballast.bytes = ubnum(o, "b");
            t->ballast.total = ubnum(o, "total");
            t->ballast.free = ubnum(o, "free");
            t->ballast.capacity = ubnum(o, "capacity");
        }
    } else if (!strcmp(ev, "save")) {
        if (!own(t, conn)) {
        } else if (num(o, "skipped", 0)) {
            t->n_saves_skipped++;       /* a diagnostic pass writes no checkpoint */
        } else {
            t->n_saves++;
            str(o, "path", t->last_save, sizeof t->last_save);
            t->last_save_step = inum(o, "step", 0);
        }
    } else if (!strcmp(ev, "load")) {
        if (own(t, conn) && !t->n_loads++) str(o, "path", t->first_load, sizeof t->first_load);
    } else if (!strcmp(ev, "warn")) {
        char what[32], text[512], item[600];
        str(o, "what", what, sizeof what);
        str(o, "text", text, sizeof text);
        snprintf(item, sizeof item, "%s: %s", what, text);
        msb_trace_warn(t, item);
    }
    json_decref(o);
    return rc;
}
