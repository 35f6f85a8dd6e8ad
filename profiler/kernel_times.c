/* kernel_times.c — interval store, per-family summary and the event file.
 * Contract: kernel_times.h. */
#include "profiler/kernel_times.h"
#include "profiler/kernel_family.h"
#include "vocab/errf.h"

#include <stdlib.h>
#include <string.h>

void ms_ktimes_init(ms_ktimes *k) { memset(k, 0, sizeof *k); }

void ms_ktimes_free(ms_ktimes *k)
{
    for (int i = 0; i < k->n_names; i++) free(k->names[i]);
    free(k->names);
    free(k->ev);
    memset(k, 0, sizeof *k);
}

/* Index of name, interned on first sight; -1 when out of memory. */
static int intern(ms_ktimes *k, const char *name)
{
    if (k->last < k->n_names && !strcmp(k->names[k->last], name)) return k->last;
    for (int i = 0; i < k->n_names; i++)
        if (!strcmp(k->names[i], name)) return k->last = i;
    if (k->n_names == k->cap_names) {
        int cap = k->cap_names ? 2 * k->cap_names : 64;
        char **p = realloc(k->names, (size_t)cap * sizeof *p);
        if (!p) return -1;
        k->names = p;
        k->cap_names = cap;
    }
    char *copy = strdup(name);
    if (!copy) return -1;
    k->names[k->n_names] = copy;
    return k->last = k->n_names++;
}

int ms_ktimes_add(ms_ktimes *k, const char *name, uint64_t start_ns, uint64_t end_ns)
{
    if (end_ns <= start_ns) {
        k->skipped++;
        return 0;
    }
    int id = intern(k, name ? name : "");
    if (id < 0) return -1;
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 1024;
        ms_kevent *p = realloc(k->ev, (size_t)cap * sizeof *p);
        if (!p) return -1;
        k->ev = p;
        k->cap = cap;
    }
    k->ev[k->n++] = (ms_kevent){ id, start_ns, end_ns };
    return 0;
}

/* ------------------------------------------------------------ summary */

static int by_start(const void *a, const void *b)
{
    const ms_kevent *x = a, *y = b;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* Idle stretches between busy ones, by length: under 5 us (the device's
 * own launch latency), 5 to 50 us, and longer (the host or a wait). */
enum { IDLE_SHORT, IDLE_MID, IDLE_LONG, IDLE_N };
static const char *const idle_names[IDLE_N] = { "under_5us", "5_to_50us", "over_50us" };

/* Length of the union of n intervals (sorted here, in place); the idle
 * stretches inside it are added to idle_ns / idle_n by length. */
static uint64_t union_ns(ms_kevent *iv, int n, double idle_ns[IDLE_N], double idle_n[IDLE_N])
{
    qsort(iv, (size_t)n, sizeof *iv, by_start);
    uint64_t total = 0, cur_s = 0, cur_e = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || iv[i].start_ns > cur_e) {
            if (i) {
                uint64_t idle = iv[i].start_ns - cur_e;
                int b = idle < 5000 ? IDLE_SHORT : idle < 50000 ? IDLE_MID : IDLE_LONG;
                idle_ns[b] += (double)idle;
                idle_n[b] += 1;
            }
            total += cur_e - cur_s;
            cur_s = iv[i].start_ns;
            cur_e = iv[i].end_ns;
        } else if (iv[i].end_ns > cur_e) {
            cur_e = iv[i].end_ns;
        }
    }
    return total + (cur_e - cur_s);
}

typedef struct name_sum {
    int name;
    double ns;
    uint64_t calls;
} name_sum;

static int by_time_desc(const void *a, const void *b)
{
    const name_sum *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : x->name - y->name;
}

static double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

static json_t *entry(const char *label_key, const char *label, double ms, double step_ms, double calls)
{
    json_t *o = json_object();
    json_object_set_new(o, label_key, json_string(label));
    json_object_set_new(o, "ms", json_real(ms));
    json_object_set_new(o, "pct", json_real(pct(ms, step_ms)));
    json_object_set_new(o, "calls", json_real(calls));
    return o;
}

json_t *ms_ktimes_summary(const ms_ktimes *k, int steps, uint64_t begin_ns, uint64_t end_ns, uint64_t wall_ns,
                          int top)
{
    if (steps < 1) return NULL;
    int clip = begin_ns < end_ns;
    ms_kevent *iv = malloc((size_t)(k->n ? k->n : 1) * sizeof *iv);
    name_sum *per = calloc((size_t)(k->n_names ? k->n_names : 1), sizeof *per);
    if (!iv || !per) {
        free(iv);
        free(per);
        return NULL;
    }
    double fam_ns[MS_KF_N] = { 0 }, fam_calls[MS_KF_N] = { 0 }, kernel_ns = 0;
    uint64_t first = UINT64_MAX, last = 0, calls = 0;
    int m = 0;
    for (int i = 0; i < k->n; i++) {
        uint64_t s = k->ev[i].start_ns, e = k->ev[i].end_ns;
        if (clip) {
            s = s > begin_ns ? s : begin_ns;
            e = e < end_ns ? e : end_ns;
        }
        if (e <= s) continue;
        iv[m++] = (ms_kevent){ k->ev[i].name, s, e };
        per[k->ev[i].name].ns += (double)(e - s);
        per[k->ev[i].name].calls++;
        calls++;
        kernel_ns += (double)(e - s);
        if (s < first) first = s;
        if (e > last) last = e;
    }
    double idle_ns[IDLE_N] = { 0 }, idle_n[IDLE_N] = { 0 };
    uint64_t busy = m ? union_ns(iv, m, idle_ns, idle_n) : 0;
    free(iv);
    double wall = wall_ns ? (double)wall_ns : clip ? (double)(end_ns - begin_ns) : m ? (double)(last - first) : 0;
    double step_ms = wall / steps / 1e6, busy_ms = (double)busy / steps / 1e6;
    double gap_ms = step_ms > busy_ms ? step_ms - busy_ms : 0.0;

    for (int i = 0; i < k->n_names; i++) {
        per[i].name = i;
        ms_kernel_family f = ms_kernel_classify(k->names[i]);
        fam_ns[f] += per[i].ns;
        fam_calls[f] += (double)per[i].calls;
    }
    json_t *o = json_object();
    json_object_set_new(o, "steps", json_integer(steps));
    json_object_set_new(o, "step_ms", json_real(step_ms));
    json_object_set_new(o, "busy_ms", json_real(busy_ms));
    json_object_set_new(o, "gap_ms", json_real(gap_ms));
    json_object_set_new(o, "busy_pct", json_real(pct(busy_ms, step_ms)));
    json_object_set_new(o, "gap_pct", json_real(pct(gap_ms, step_ms)));
    json_object_set_new(o, "kernel_ms", json_real(kernel_ns / steps / 1e6));
    json_object_set_new(o, "calls_per_step", json_real((double)calls / steps));
    json_t *fams = json_object();
    for (int f = 0; f < MS_KF_N; f++)
        json_object_set_new(fams, ms_kernel_family_name(f),
                            entry("label", ms_kernel_family_label(f), fam_ns[f] / steps / 1e6, step_ms,
                                  fam_calls[f] / steps));
    json_object_set_new(o, "families", fams);
    json_t *idle = json_object();
    double inner_ms = 0;
    for (int b = 0; b < IDLE_N; b++) {
        json_t *e = json_object();
        json_object_set_new(e, "ms", json_real(idle_ns[b] / steps / 1e6));
        json_object_set_new(e, "count", json_real(idle_n[b] / steps));
        json_object_set_new(idle, idle_names[b], e);
        inner_ms += idle_ns[b] / steps / 1e6;
    }
    json_object_set_new(idle, "edges_ms", json_real(gap_ms > inner_ms ? gap_ms - inner_ms : 0.0));
    json_object_set_new(o, "idle", idle);
    json_t *tops = json_array();
    qsort(per, (size_t)k->n_names, sizeof *per, by_time_desc);
    for (int i = 0; i < k->n_names && i < top && per[i].calls; i++) {
        const char *name = k->names[per[i].name];
        json_t *t = entry("name", name, per[i].ns / steps / 1e6, step_ms, (double)per[i].calls / steps);
        json_object_set_new(t, "family", json_string(ms_kernel_family_name(ms_kernel_classify(name))));
        json_array_append_new(tops, t);
    }
    json_object_set_new(o, "top", tops);
    json_object_set_new(o, "skipped", json_integer((json_int_t)k->skipped));
    free(per);
    return o;
}

/* ------------------------------------------------------------ event file */

/* A non-negative integer (a JSON integer, or a real with no fraction:
 * Python may write large ns values either way). */
static int get_u64(const json_t *v, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 1.8e19) {
        *out = (uint64_t)json_real_value(v);
        return 0;
    }
    return -1;
}

int ms_ktimes_read_json(ms_ktimes *k, const json_t *file, int *steps, uint64_t *wall_ns, char *err, size_t errlen)
{
    const json_t *names = json_object_get(file, "names"), *events = json_object_get(file, "events");
    if (!json_is_object(file) || !json_is_array(names) || !json_is_array(events))
        return ms_errf(err, errlen, "not an event file: wants an object with arrays \"names\" and \"events\"");
    const json_t *st = json_object_get(file, "steps"), *w = json_object_get(file, "wall_ns");
    *steps = json_is_integer(st) ? (int)json_integer_value(st) : 0;
    *wall_ns = 0;
    if (w && get_u64(w, wall_ns)) return ms_errf(err, errlen, "\"wall_ns\" is not a non-negative number");
    size_t n_names = json_array_size(names);
    for (size_t i = 0; i < n_names; i++)
        if (!json_is_string(json_array_get(names, i))) return ms_errf(err, errlen, "names[%zu] is not a string", i);
    for (size_t i = 0; i < json_array_size(events); i++) {
        const json_t *e = json_array_get(events, i);
        uint64_t id = 0, s = 0, t = 0;
        if (!json_is_array(e) || json_array_size(e) != 3 || get_u64(json_array_get(e, 0), &id) ||
            get_u64(json_array_get(e, 1), &s) || get_u64(json_array_get(e, 2), &t) || id >= n_names)
            return ms_errf(err, errlen, "events[%zu] is not [name_index, start_ns, end_ns] with a known name", i);
        if (ms_ktimes_add(k, json_string_value(json_array_get(names, id)), s, t))
            return ms_errf(err, errlen, "out of memory at events[%zu]", i);
    }
    return 0;
}

json_t *ms_ktimes_events_json(const ms_ktimes *k, int steps, uint64_t wall_ns)
{
    json_t *o = json_object(), *names = json_array(), *events = json_array();
    for (int i = 0; i < k->n_names; i++) json_array_append_new(names, json_string(k->names[i]));
    for (int i = 0; i < k->n; i++) {
        json_t *e = json_array();
        json_array_append_new(e, json_integer(k->ev[i].name));
        json_array_append_new(e, json_integer((json_int_t)k->ev[i].start_ns));
        json_array_append_new(e, json_integer((json_int_t)k->ev[i].end_ns));
        json_array_append_new(events, e);
    }
    json_object_set_new(o, "steps", json_integer(steps));
    json_object_set_new(o, "wall_ns", json_integer((json_int_t)wall_ns));
    json_object_set_new(o, "names", names);
    json_object_set_new(o, "events", events);
    return o;
}
