/* plan_json.c — plan <-> JSON with strict validation (plan_json.h). */
#include "vocab/plan_json.h"
#include "vocab/device_name.h"
#include "vocab/plan_replicas.h"
#include "vocab/errf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/profile_json.h"
#include "vocab/size.h"


static void put(json_t *o, const char *k, json_t *v, int *bad)
{
    if (!v || json_object_set_new(o, k, v)) *bad = 1;
}

static json_t *stage_to_json(const ms_plan_stage *s, int *bad)
{
    json_t *j = json_object();
    if (!j) return NULL;
    put(j, "device", json_integer(s->device), bad);
    put(j, "layers", json_pack("[ii]", s->first, s->last), bad);
    put(j, "recompute", json_boolean(s->recompute), bad);
    put(j, "predicted_peak_bytes", ms_json_u64(s->peak), bad);
    json_t *b = json_object();
    for (int c = 0; b && c < MS_CAT_N; c++) put(b, ms_cat_name((ms_cat)c), ms_json_u64(s->bytes[c]), bad);
    put(j, "bytes", b, bad);
    put(j, "fwd_ms", json_real(s->fwd_ms), bad);
    put(j, "bwd_ms", json_real(s->bwd_ms), bad);
    put(j, "comm_ms", json_real(s->comm_ms), bad);
    put(j, "opt_ms", json_real(s->opt_ms), bad);
    return j;
}

json_t *ms_plan_to_json(const ms_plan *p)
{
    if (!p) return NULL;
    int bad = 0;
    json_t *root = json_object();
    if (!root) return NULL;
    put(root, "version", json_integer(p->version), &bad);
    put(root, "model", json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "name", p->model, "n_layers", p->n_layers,
                                 "seq_len", p->seq_len, "d_model", p->d_model, "n_head", p->n_head, "vocab",
                                 p->vocab),
        &bad);
    json_t *devs = json_array();
    for (int i = 0; devs && i < p->n_devices; i++) {
        json_t *d = json_object();
        if (d) {
            put(d, "index", json_integer(i), &bad);
            put(d, "device", json_string(p->devices[i].name), &bad);
            put(d, "capacity_bytes", ms_json_u64(p->devices[i].capacity), &bad);
        }
        if (json_array_append_new(devs, d)) bad = 1;
    }
    put(root, "devices", devs, &bad);
    put(root, "precision", json_string(ms_precision_name((ms_precision)p->precision)), &bad);
    put(root, "schedule", json_string(ms_schedule_name(p->schedule)), &bad);
    put(root, "micro_batch", json_integer(p->micro_batch), &bad);
    put(root, "n_micro", json_integer(p->n_micro), &bad);
    put(root, "global_batch", json_integer(p->global_batch), &bad);
    put(root, "headroom", json_real(p->headroom), &bad);
    put(root, "link_gbps", json_real(p->link_gbps), &bad);
    json_t *st = json_array();
    for (int s = 0; st && s < p->n_stages; s++)
        if (json_array_append_new(st, stage_to_json(&p->stages[s], &bad))) bad = 1;
    put(root, "stages", st, &bad);
    put(root, "predicted_step_ms", json_real(p->step_ms), &bad);
    json_t *src = json_object();
    if (src && p->profile_run > 0) put(src, "run_id", json_integer(p->profile_run), &bad);
    if (src && p->profile_file[0]) put(src, "file", json_string(p->profile_file), &bad);
    put(root, "profile", src, &bad);
    put(root, "reasoning", p->reasoning ? json_string(p->reasoning) : json_null(), &bad);
    if (p->fingerprint[0]) {
        json_t *pr = json_object(), *names = json_array();
        for (int i = 0; names && p->layer_names && i < p->n_layers; i++)
            if (json_array_append_new(names, json_string(p->layer_names[i] ? p->layer_names[i] : ""))) bad = 1;
        if (pr) {
            put(pr, "name", json_string(p->program), &bad);
            put(pr, "fingerprint", json_string(p->fingerprint), &bad);
            put(pr, "layer_names", names, &bad);
            /* none: no key, so a plan that hands nothing on is written as before */
            if (p->n_handed_on > 0) put(pr, "handed_on", ms_handed_on_to_json(p->handed_on, p->n_handed_on), &bad);
            if (p->reserve_allocator) put(pr, "reserve_allocator_bytes", ms_json_u64(p->reserve_allocator), &bad);
        } else {
            json_decref(names);
        }
        put(root, "program", pr, &bad);
    }
    char rerr[128];
    if (!bad && ms_plan_replicas_to_json(p, root, rerr, sizeof rerr)) bad = 1;
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* ---- reader ---------------------------------------------------------- */

#define GET_INT(obj, ctx, key, lo, hi, dst)                                        \
    do {                                                                           \
        long long v_;                                                              \
        if (ms_json_get_int(obj, ctx, key, lo, hi, &v_, err, errlen)) return -1;   \
        (dst) = (int)v_;                                                           \
    } while (0)

static int stage_from_json(const json_t *j, const char *ctx, const ms_plan *p, ms_plan_stage *s, char *err,
                           size_t errlen)
{
    if (!json_is_object(j)) return ms_errf(err, errlen, "%s: expected an object", ctx);
    GET_INT(j, ctx, "device", 0, p->n_devices - 1, s->device);
    const json_t *ly = json_object_get(j, "layers");
    if (!ly) return ms_errf(err, errlen, "%s.layers: missing", ctx);
    if (!json_is_array(ly) || json_array_size(ly) != 2 || !json_is_integer(json_array_get(ly, 0)) ||
        !json_is_integer(json_array_get(ly, 1)))
        return ms_errf(err, errlen, "%s.layers: expected [first, last]", ctx);
    long long a = json_integer_value(json_array_get(ly, 0)), b = json_integer_value(json_array_get(ly, 1));
    if (a < 0 || b < a || b >= p->n_layers)
        return ms_errf(err, errlen, "%s.layers: [%lld, %lld] is not a range within 0..%d", ctx, a, b, p->n_layers - 1);
    s->first = (int)a;
    s->last = (int)b;
    if (ms_json_get_bool(j, ctx, "recompute", &s->recompute, err, errlen)) return -1;
    if (ms_json_get_u64(j, ctx, "predicted_peak_bytes", INT64_MAX, &s->peak, err, errlen)) return -1;
    const json_t *by = json_object_get(j, "bytes");
    if (!json_is_object(by)) return ms_errf(err, errlen, by ? "%s.bytes: expected an object" : "%s.bytes: missing", ctx);
    char bctx[48];
    snprintf(bctx, sizeof bctx, "%s.bytes", ctx);
    uint64_t sum = 0;
    for (int c = 0; c < MS_CAT_N; c++) {
        if (ms_json_get_u64(by, bctx, ms_cat_name((ms_cat)c), INT64_MAX, &s->bytes[c], err, errlen)) return -1;
        sum = sum > UINT64_MAX - s->bytes[c] ? UINT64_MAX : sum + s->bytes[c];
    }
    if (sum != s->peak)
        return ms_errf(err, errlen, "%s.predicted_peak_bytes: %llu is not the sum of its bytes (%llu)", ctx,
                    (unsigned long long)s->peak, (unsigned long long)sum);
    if (ms_json_get_num(j, ctx, "fwd_ms", 0, 1e15, &s->fwd_ms, err, errlen) ||
        ms_json_get_num(j, ctx, "bwd_ms", 0, 1e15, &s->bwd_ms, err, errlen) ||
        ms_json_get_num(j, ctx, "comm_ms", 0, 1e15, &s->comm_ms, err, errlen) ||
        ms_json_get_num(j, ctx, "opt_ms", 0, 1e15, &s->opt_ms, err, errlen))
        return -1;
    return 0;
}

static int from_json(const json_t *root, ms_plan *p, char *err, size_t errlen)
{
    const char *ctx = "plan";
    if (!json_is_object(root)) return ms_errf(err, errlen, "plan: expected a JSON object");
    GET_INT(root, ctx, "version", 1, MS_PLAN_VERSION, p->version);
    const json_t *m = json_object_get(root, "model");
    if (!json_is_object(m)) return ms_errf(err, errlen, m ? "model: expected an object" : "model: missing");
    if (ms_json_get_str(m, "model", "name", p->model, sizeof p->model, err, errlen)) return -1;
    GET_INT(m, "model", "n_layers", 1, MS_MAX_LAYERS, p->n_layers);
    /* a program's plan (version 2) has no GPT shape: 0 */
    const int lo = p->version >= 2 ? 0 : 1;
    GET_INT(m, "model", "seq_len", lo, INT32_MAX, p->seq_len);
    GET_INT(m, "model", "d_model", lo, INT32_MAX, p->d_model);
    GET_INT(m, "model", "n_head", lo, INT32_MAX, p->n_head);
    GET_INT(m, "model", "vocab", lo, INT32_MAX, p->vocab);

    const json_t *devs = json_object_get(root, "devices");
    if (!devs) return ms_errf(err, errlen, "devices: missing");
    if (!json_is_array(devs) || json_array_size(devs) == 0 || json_array_size(devs) > MS_MAX_DEVICES)
        return ms_errf(err, errlen, "devices: expected an array of 1..%d devices", MS_MAX_DEVICES);
    p->n_devices = (int)json_array_size(devs);
    p->devices = calloc((size_t)p->n_devices, sizeof *p->devices);
    if (!p->devices) return ms_errf(err, errlen, "out of memory");
    for (int i = 0; i < p->n_devices; i++) {
        char dctx[32];
        snprintf(dctx, sizeof dctx, "devices[%d]", i);
        const json_t *d = json_array_get(devs, (size_t)i);
        int idx;
        GET_INT(d, dctx, "index", i, i, idx);
        (void)idx;
        if (ms_json_get_str(d, dctx, "device", p->devices[i].name, sizeof p->devices[i].name, err, errlen) ||
            ms_json_get_u64(d, dctx, "capacity_bytes", INT64_MAX, &p->devices[i].capacity, err, errlen))
            return -1;
        if (!ms_device_label_valid(p->devices[i].name))
            return ms_errf(err, errlen, "%s.device: \"%s\" is not a device (cpu or cuda:N, or cpu/vK, cuda:N/vK for a "
                           "virtual one)", dctx, p->devices[i].name);
    }

    char s[32];
    ms_precision prec;
    if (ms_json_get_str(root, ctx, "precision", s, sizeof s, err, errlen)) return -1;
    if ((strcmp(s, "fp32") && strcmp(s, "bf16") && strcmp(s, "fp16")) || ms_precision_parse(s, &prec))
        return ms_errf(err, errlen, "plan.precision: \"%s\" is not one of fp32|bf16|fp16", s);
    p->precision = (int)prec;
    if (ms_json_get_str(root, ctx, "schedule", s, sizeof s, err, errlen)) return -1;
    if ((p->schedule = ms_schedule_parse(s)) < 0)
        return ms_errf(err, errlen, "plan.schedule: \"%s\" is not one of gpipe|1f1b|sequential", s);
    GET_INT(root, ctx, "micro_batch", 1, MS_PROFILE_MAX_BATCH, p->micro_batch);
    GET_INT(root, ctx, "n_micro", 1, MS_PROFILE_MAX_BATCH, p->n_micro);
    GET_INT(root, ctx, "global_batch", 1, MS_PROFILE_MAX_BATCH, p->global_batch);
    if ((long long)p->micro_batch * p->n_micro != p->global_batch)
        return ms_errf(err, errlen, "plan: micro_batch %d x n_micro %d is not global_batch %d", p->micro_batch,
                    p->n_micro, p->global_batch);
    if (ms_json_get_num(root, ctx, "headroom", 0, 0.999999999, &p->headroom, err, errlen) ||
        ms_json_get_num(root, ctx, "link_gbps", 1e-9, 1e12, &p->link_gbps, err, errlen) ||
        ms_json_get_num(root, ctx, "predicted_step_ms", 0, 1e18, &p->step_ms, err, errlen))
        return -1;

    const json_t *st = json_object_get(root, "stages");
    if (!st) return ms_errf(err, errlen, "stages: missing");
    int max_stages = p->n_devices < MS_MAX_STAGES ? p->n_devices : MS_MAX_STAGES;
    if (!json_is_array(st) || json_array_size(st) == 0 || json_array_size(st) > (size_t)max_stages)
        return ms_errf(err, errlen, "stages: expected an array of 1..%d stages (one per device at most, %d at most)",
                       max_stages, MS_MAX_STAGES);
    p->n_stages = (int)json_array_size(st);
    p->stages = calloc((size_t)p->n_stages, sizeof *p->stages);
    unsigned char *taken = calloc((size_t)p->n_devices, 1);
    if (!p->stages || !taken) {
        free(taken);
        return ms_errf(err, errlen, "out of memory");
    }
    int next = 0, rc = 0;
    for (int i = 0; i < p->n_stages && !rc; i++) {
        char sctx[32];
        snprintf(sctx, sizeof sctx, "stages[%d]", i);
        ms_plan_stage *sg = &p->stages[i];
        rc = stage_from_json(json_array_get(st, (size_t)i), sctx, p, sg, err, errlen);
        if (rc) break;
        if (sg->first != next)
            rc = ms_errf(err, errlen, "%s.layers: starts at %d, expected %d (stages must cover every layer in order)",
                      sctx, sg->first, next);
        else if (taken[sg->device])
            rc = ms_errf(err, errlen, "%s.device: device %d already holds a stage", sctx, sg->device);
        taken[sg->device] = 1;
        next = sg->last + 1;
    }
    free(taken);
    if (rc) return -1;
    if (next != p->n_layers)
        return ms_errf(err, errlen, "stages: end at layer %d, the model has %d layers", next - 1, p->n_layers);
    if (ms_plan_replicas_from_json(root, p, err, errlen)) return -1;

    const json_t *src = json_object_get(root, "profile");
    if (!json_is_object(src)) return ms_errf(err, errlen, src ? "profile: expected an object" : "profile: missing");
    if (json_object_get(src, "run_id")) {
        long long id;
        if (ms_json_get_int(src, "profile", "run_id", 1, INT64_MAX, &id, err, errlen)) return -1;
        p->profile_run = id;
    }
    if (json_object_get(src, "file") &&
        ms_json_get_str(src, "profile", "file", p->profile_file, sizeof p->profile_file, err, errlen))
        return -1;
    const json_t *pr = json_object_get(root, "program");
    if (pr && !json_is_null(pr)) {
        if (!json_is_object(pr)) return ms_errf(err, errlen, "program: expected an object");
        if (ms_json_get_str(pr, "program", "name", p->program, sizeof p->program, err, errlen) ||
            ms_json_get_str(pr, "program", "fingerprint", p->fingerprint, sizeof p->fingerprint, err, errlen))
            return -1;
        if (!p->fingerprint[0]) return ms_errf(err, errlen, "program.fingerprint: empty");
        const json_t *names = json_object_get(pr, "layer_names");
        if (!json_is_array(names) || json_array_size(names) != (size_t)p->n_layers)
            return ms_errf(err, errlen, "program.layer_names: expected %d module names", p->n_layers);
        p->layer_names = calloc((size_t)p->n_layers, sizeof *p->layer_names);
        if (!p->layer_names) return ms_errf(err, errlen, "out of memory");
        for (int i = 0; i < p->n_layers; i++) {
            const json_t *v = json_array_get(names, (size_t)i);
            if (!json_is_string(v) || strlen(json_string_value(v)) >= MS_NAME_MAX)
                return ms_errf(err, errlen, "program.layer_names[%d]: expected a module path of under %d bytes", i,
                               MS_NAME_MAX);
            if (!(p->layer_names[i] = strdup(json_string_value(v)))) return ms_errf(err, errlen, "out of memory");
        }
        const json_t *h = json_object_get(pr, "handed_on");   /* absent: none */
        if (h && ms_handed_on_from_json(h, "program.handed_on", &p->handed_on, &p->n_handed_on, err, errlen))
            return -1;
        if (json_object_get(pr, "reserve_allocator_bytes") &&     /* absent: 0 */
            ms_json_get_u64(pr, "program", "reserve_allocator_bytes", INT64_MAX, &p->reserve_allocator, err, errlen))
            return -1;
    }
    const json_t *why = json_object_get(root, "reasoning");
    if (!why) return ms_errf(err, errlen, "plan.reasoning: missing (null when none)");
    if (json_is_string(why)) {
        p->reasoning = strdup(json_string_value(why));
        if (!p->reasoning) return ms_errf(err, errlen, "out of memory");
    } else if (!json_is_null(why)) {
        return ms_errf(err, errlen, "plan.reasoning: expected a string or null");
    }
    return 0;
}

int ms_plan_from_json(const json_t *root, ms_plan *out, char *err, size_t errlen)
{
    if (!out) return ms_errf(err, errlen, "no output plan");
    memset(out, 0, sizeof *out);
    if (from_json(root, out, err, errlen)) {
        ms_plan_free(out);
        return -1;
    }
    return 0;
}

/* ---- files ----------------------------------------------------------- */

int ms_plan_write_json(FILE *f, const ms_plan *p, char *err, size_t errlen)
{
    return ms_json_write_stream(f, ms_plan_to_json(p), "plan", err, errlen);
}

int ms_plan_save_json(const char *path, const ms_plan *p, char *err, size_t errlen)
{
    return ms_json_write_path(path, ms_plan_to_json(p), "plan", err, errlen);
}

int ms_plan_load_json(const char *path, ms_plan *out, char *err, size_t errlen)
{
    if (out) memset(out, 0, sizeof *out);
    json_t *j = ms_json_read_path(path, err, errlen);
    if (!j) return -1;
    char inner[256];
    int rc = ms_plan_from_json(j, out, inner, sizeof inner);
    json_decref(j);
    if (rc) return ms_errf(err, errlen, "%s: %s", path ? path : "-", inner);
    return 0;
}

char *ms_plan_to_string(const ms_plan *p)
{
    json_t *j = ms_plan_to_json(p);
    if (!j) return NULL;
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    return s;
}
