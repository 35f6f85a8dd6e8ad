/* plan_loose.c — the plan JSON read as a report reads it (plan_json.h:
 * ms_plan_read_loose): whatever is there, nothing refused. */
#include "vocab/limits.h"
#include "vocab/plan_json.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str_of(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static double num_of(const json_t *o, const char *k, double dflt)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* bytes are positive integers; anything else reads as 0 */
static uint64_t bytes_of(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* Device k is the entry whose "index" (its position when it has none) is k. */
static void read_devices(const json_t *root, ms_plan *p)
{
    const json_t *devs = json_object_get(root, "devices");
    size_t n = json_is_array(devs) ? json_array_size(devs) : 0;
    p->devices = calloc(n ? n : 1, sizeof *p->devices);
    if (!p->devices) return;
    p->n_devices = (int)n;
    for (size_t k = 0; k < n; k++) {
        const json_t *d;
        size_t i;
        json_array_foreach(devs, i, d) {
            const json_t *ix = json_object_get(d, "index");
            if ((json_is_integer(ix) ? (size_t)json_integer_value(ix) : i) != k) continue;
            const char *name = str_of(d, "device");
            snprintf(p->devices[k].name, sizeof p->devices[k].name, "%s", name ? name : "");
            p->devices[k].capacity = bytes_of(d, "capacity_bytes");
            break;
        }
    }
}

static void read_stage(const json_t *st, ms_plan_stage *s)
{
    const json_t *dv = json_object_get(st, "device"), *ly = json_object_get(st, "layers");
    json_int_t d = json_integer_value(dv);
    s->device = json_is_integer(dv) && d >= 0 && d <= INT_MAX ? (int)d : -1;
    s->first = (int)json_integer_value(json_array_get(ly, 0));
    s->last = (int)json_integer_value(json_array_get(ly, 1));
    s->recompute = json_is_true(json_object_get(st, "recompute"));
    s->peak = bytes_of(st, "predicted_peak_bytes");
    const json_t *by = json_object_get(st, "bytes");
    for (int c = 0; c < MS_CAT_N; c++) s->bytes[c] = bytes_of(by, ms_cat_name((ms_cat)c));
    s->fwd_ms = num_of(st, "fwd_ms", 0);
    s->bwd_ms = num_of(st, "bwd_ms", 0);
    s->comm_ms = num_of(st, "comm_ms", 0);
    s->opt_ms = num_of(st, "opt_ms", 0);
}

/* A program's plan names its layers by module path (program.layer_names):
 * kept whole when every entry is a string, else left out. 0, or -1 when
 * memory ran out. */
static int read_layer_names(const json_t *root, ms_plan *p)
{
    const json_t *ln = json_object_get(json_object_get(root, "program"), "layer_names");
    size_t n = json_is_array(ln) ? json_array_size(ln) : 0;
    if (n == 0 || n > MS_MAX_LAYERS) return 0;
    for (size_t i = 0; i < n; i++)
        if (!json_is_string(json_array_get(ln, i))) return 0;
    p->layer_names = calloc(n, sizeof *p->layer_names);
    if (!p->layer_names) return -1;
    p->n_layers = (int)n;
    for (size_t i = 0; i < n; i++)
        if (!(p->layer_names[i] = strdup(json_string_value(json_array_get(ln, i))))) return -1;
    return 0;
}

int ms_plan_read_loose(const char *text, ms_plan *out)
{
    memset(out, 0, sizeof *out);
    json_t *root = text ? json_loads(text, 0, NULL) : NULL;
    if (!root) return -1;
    ms_precision prec;
    const char *s = str_of(root, "precision");
    out->precision = s && ms_precision_parse(s, &prec) == 0 ? (int)prec : -1;
    out->schedule = ms_schedule_parse(str_of(root, "schedule"));
    double mb = num_of(root, "micro_batch", 0), nm = num_of(root, "n_micro", 0);
    out->micro_batch = mb > 0 && mb <= INT_MAX ? (int)mb : 0;
    out->n_micro = nm > 0 && nm <= INT_MAX ? (int)nm : 0;
    out->headroom = num_of(root, "headroom", -1);
    s = str_of(root, "reasoning");
    out->reasoning = s ? strdup(s) : NULL;
    int oom = s && !out->reasoning;
    read_devices(root, out);
    oom |= !out->devices;
    oom |= read_layer_names(root, out) != 0;
    const json_t *stages = json_object_get(root, "stages");
    out->n_stages = -1;
    if (json_is_array(stages)) {
        size_t n = json_array_size(stages);
        out->stages = calloc(n ? n : 1, sizeof *out->stages);
        oom |= !out->stages;
        if (out->stages) out->n_stages = (int)n;
        const json_t *st;
        size_t i;
        json_array_foreach(stages, i, st) if (out->stages) read_stage(st, &out->stages[i]);
    }
    json_decref(root);   /* nothing above points into it any more */
    if (oom) ms_plan_free(out);
    return oom ? -1 : 0;
}
