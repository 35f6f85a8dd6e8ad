/* run_facts.c — a run's devices, a program's description and layer spans
 * in plain text, for both reports (see run_facts.h). */
#include "reports/run_facts.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/grow.h"
#include "reports/term_report.h"
#include "vocab/limits.h"

/* Appends to out[*used..len), keeping the string whole: a piece that does
 * not fit is cut at a UTF-8 character boundary. */
static void put(char *out, size_t len, size_t *used, const char *fmt, ...)
{
    if (*used + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < len - *used) {
        *used += (size_t)n;
        return;
    }
    size_t end = len - 1;
    while (end > *used && ((unsigned char)out[end] & 0xC0) == 0x80) end--;
    out[end] = '\0';
    *used = end;
}

int rf_devices_text(const char *json, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    if (!json || !*json) return 0;
    json_t *j = json_loads(json, 0, NULL);
    size_t n = json_is_array(j) ? json_array_size(j) : 0;
    int readable = n > 0;
    for (size_t i = 0; i < n && readable; i++)
        readable = json_is_string(json_object_get(json_array_get(j, i), "name"));
    if (!readable) {
        json_decref(j);
        put(out, len, &used, "%s", json);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(j, i), *cap = json_object_get(d, "capacity_bytes");
        if (!cap) cap = json_object_get(d, "capacity");
        char b[32];
        if (json_is_integer(cap) && json_integer_value(cap) > 0)
            ms_term_bytes((uint64_t)json_integer_value(cap), b, sizeof b);
        else
            snprintf(b, sizeof b, "no capacity set");
        put(out, len, &used, "%s%s (%s)", i ? ", " : "", json_string_value(json_object_get(d, "name")), b);
    }
    json_decref(j);
    return (int)n;
}

typedef struct { char *out; size_t len, used; int n; } peak_text;

static int say_peak(const ms_device_peak *d, void *ctx)
{
    peak_text *t = ctx;
    char b[32];
    if (d->capacity) ms_term_bytes(d->capacity, b, sizeof b);
    else snprintf(b, sizeof b, "no capacity set");
    put(t->out, t->len, &t->used, "%s%.*s (%s)", t->n++ ? ", " : "", (int)sizeof d->name, d->name, b);
    return 0;
}

/* A run's own devices: as it recorded them when it began, else as it
 * recorded their peaks (memsplit's own training). */
static int own_devices(ms_db *db, const ms_run_info *r, char *out, size_t len)
{
    if (r->devices[0]) return rf_devices_text(r->devices, out, len);
    peak_text t = { out, len, 0, 0 };
    out[0] = '\0';
    return ms_db_list_device_peaks(db, r->id, say_peak, &t) != 0 ? -1 : t.n;
}

typedef struct { int64_t parent; int64_t *ids; int n, cap, oom; } child_ids;

static int add_child(const ms_run_info *r, void *ctx)
{
    child_ids *c = ctx;
    if (r->parent != c->parent || r->id == c->parent) return 0;
    if (ms_grow((void **)&c->ids, &c->cap, c->n, sizeof *c->ids, 8)) { c->oom = 1; return 1; }
    c->ids[c->n++] = r->id;
    return 0;
}

int rf_child_runs(ms_db *db, int64_t run, int64_t **ids)
{
    child_ids c = { .parent = run };
    *ids = NULL;
    if (ms_db_list_runs(db, add_child, &c) != 0 || c.oom) {
        free(c.ids);
        return -1;
    }
    *ids = c.ids;
    return c.n;
}

int rf_run_devices(ms_db *db, const ms_run_info *r, char *out, size_t len)
{
    int n = own_devices(db, r, out, len);
    if (n != 0) return n;
    int64_t *ids = NULL;
    int nk = rf_child_runs(db, r->id, &ids);
    ms_run_info *k = malloc(sizeof *k);
    if (!k || nk < 0) n = -1;
    for (int i = nk - 1; n == 0 && i >= 0; i--) {   /* the last run it contains first */
        if (ms_db_get_run(db, ids[i], k) != 0) { n = -1; break; }
        n = own_devices(db, k, out, len);
        if (n > 0) {
            size_t used = strlen(out);
            put(out, len, &used, " (as run %lld, %s, recorded them)", (long long)k->id, k->kind);
        }
    }
    free(k);
    free(ids);
    return n;
}

int rf_is_program(const ms_profile *p) { return p && p->fingerprint[0] != '\0'; }

void rf_layer_names(const ms_profile *p, const char **names, int n)
{
    for (int l = 0; l < n; l++) names[l] = "";
    for (int i = p->n_rows - 1; i >= 0; i--) {   /* backwards: the first row of a layer wins */
        const ms_layer_row *r = &p->rows[i];
        if (r->layer >= 0 && r->layer < n && r->name[0]) names[r->layer] = r->name;
    }
}

/* The number a name ends in after a dot ("transformers.13": 13, with the
 * prefix "transformers." of *stem bytes); -1 when it ends otherwise. */
static long index_after_dot(const char *s, size_t *stem)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
    if (i == n || i < 2 || s[i - 1] != '.' || n - i > 9) return -1;
    *stem = i;
    return strtol(s + i, NULL, 10);
}

void rf_layer_span(const char *const *names, int n, int first, int last, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int l = first; l <= last; l++) {
        const char *a = l >= 0 && l < n && names[l] && names[l][0] ? names[l] : NULL;
        if (!a) {
            put(out, len, &used, "%slayer %d", used ? ", " : "", l);
            continue;
        }
        size_t stem = 0, stem_b = 0;
        long ia = index_after_dot(a, &stem), ib = ia;
        int end = l;
        /* how far the run a = P.k, P.k+1, ... goes */
        while (ia >= 0 && end + 1 <= last && end + 1 < n && names[end + 1]) {
            const char *b = names[end + 1];
            if (index_after_dot(b, &stem_b) != ib + 1 || stem_b != stem || strncmp(a, b, stem) != 0) break;
            ib++;
            end++;
        }
        if (end > l) put(out, len, &used, "%s%.*s%ld-%ld", used ? ", " : "", (int)stem, a, ia, ib);
        else put(out, len, &used, "%s%s", used ? ", " : "", a);
        l = end;
    }
}

void rf_model_text(const ms_profile *p, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    const ms_layer_row *own = p->n_rows ? &p->rows[0] : NULL;   /* the trial's own setting comes first */
    if (!rf_is_program(p)) {
        put(out, len, &used, "%d layers (sequence %d, d_model %d, %d heads, vocabulary %d); global batch %d", p->n_layers,
            p->seq_len, p->d_model, p->n_head, p->vocab, p->global_batch);
        if (own) put(out, len, &used, "; the trial at %s, micro-batch %d", ms_precision_name((ms_precision)own->precision), own->micro_batch);
        return;
    }
    int n = p->n_layers > 0 ? p->n_layers : 0;
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].layer >= n) n = p->rows[i].layer + 1;
    if (n > MS_MAX_LAYERS) n = MS_MAX_LAYERS;
    const char **names = n ? calloc((size_t)n, sizeof *names) : NULL;
    char span[1024] = "";
    if (names) {
        rf_layer_names(p, names, n);
        rf_layer_span(names, n, 0, n - 1, span, sizeof span);
    }
    free(names);
    put(out, len, &used, "%d layers in its own module paths", p->n_layers);
    if (span[0]) put(out, len, &used, " (%s)", span);
    if (own) {
        int master = 0;
        for (int i = 0; i < p->n_rows; i++) master |= p->rows[i].master != 0;
        if (own->precision != MS_PREC_FP32 && master)
            put(out, len, &used, "; %s under autocast (fp32 master weights)", ms_precision_name((ms_precision)own->precision));
        else
            put(out, len, &used, "; %s", ms_precision_name((ms_precision)own->precision));
        if (own->micro_batch > 0 && p->global_batch > own->micro_batch)
            put(out, len, &used, "; global batch %d in micro-batches of %d", p->global_batch, own->micro_batch);
        else
            put(out, len, &used, "; batch %d", p->global_batch);
    } else {
        put(out, len, &used, "; batch %d", p->global_batch);
    }
    if (p->framework[0]) put(out, len, &used, "; %s", p->framework);
}
