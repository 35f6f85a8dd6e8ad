/* profile_json.c — profile <-> JSON, strict validation, and the profile
 * file helpers (the generic JSON helpers are in json_io.c). */
#include "vocab/profile_json.h"
#include "vocab/errf.h"
#include "vocab/visible.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>



/* ---- names of the enumerations in the file format ------------------- */

static const char *prec_name(int p) { return ms_precision_name((ms_precision)p); }

static int prec_parse(const char *s)
{
    ms_precision p;
    /* the file format is lower case only, as written */
    if (strcmp(s, "fp32") && strcmp(s, "bf16") && strcmp(s, "fp16")) return -1;
    return ms_precision_parse(s, &p) == 0 ? (int)p : -1;
}

/* ---- validation ------------------------------------------------------ */

static int row_order(const void *a, const void *b)
{
    const ms_layer_row *x = *(const ms_layer_row *const *)a, *y = *(const ms_layer_row *const *)b;
    if (x->precision != y->precision) return x->precision < y->precision ? -1 : 1;
    if (x->micro_batch != y->micro_batch) return x->micro_batch < y->micro_batch ? -1 : 1;
    return (x->layer > y->layer) - (x->layer < y->layer);
}

static int check_bytes(const char *ctx, const char *what, uint64_t v, char *err, size_t errlen)
{
    if (v > MS_PROFILE_MAX_ROW_BYTES)
        return ms_errf(err, errlen, "%s.%s: %" PRIu64 " bytes is beyond the limit %llu", ctx, what, v,
                    MS_PROFILE_MAX_ROW_BYTES);
    return 0;
}

static int check_ms(const char *ctx, const char *what, double v, char *err, size_t errlen)
{
    if (!isfinite(v) || v < 0 || v > 1e12) return ms_errf(err, errlen, "%s.%s: %g ms is not a valid time", ctx, what, v);
    return 0;
}

static int validate_row(const ms_profile *p, int i, char *err, size_t errlen)
{
    const ms_layer_row *r = &p->rows[i];
    char ctx[32];
    snprintf(ctx, sizeof ctx, "layers[%d]", i);
    if (r->layer < 0 || r->layer >= p->n_layers)
        return ms_errf(err, errlen, "%s.index: %d is outside 0..%d", ctx, r->layer, p->n_layers - 1);
    if (r->precision < 0 || r->precision > 2)
        return ms_errf(err, errlen, "%s.precision: unknown precision %d", ctx, r->precision);
    if (r->source < 0 || r->source >= MS_ROW_N)
        return ms_errf(err, errlen, "%s.source: unknown source %d", ctx, r->source);
    if (r->micro_batch < 1 || r->micro_batch > MS_PROFILE_MAX_BATCH)
        return ms_errf(err, errlen, "%s.micro_batch: %d is outside 1..%d", ctx, r->micro_batch, MS_PROFILE_MAX_BATCH);
    if (!memchr(r->name, 0, sizeof r->name) || !memchr(r->kind, 0, sizeof r->kind))
        return ms_errf(err, errlen, "%s: name or kind is not terminated", ctx);
    const uint64_t b[] = {r->param, r->master, r->grad, r->optim, r->act, r->act_input,
                          r->transient_fwd, r->transient_bwd, r->transient_opt, r->out_bytes};
    const char *bn[] = {"param", "master", "grad", "optim", "act", "act_input",
                        "transient_fwd", "transient_bwd", "transient_opt", "out_bytes"};
    for (int k = 0; k < 10; k++)
        if (check_bytes(ctx, bn[k], b[k], err, errlen)) return -1;
    if (check_ms(ctx, "fwd_ms", r->fwd_ms, err, errlen) || check_ms(ctx, "bwd_ms", r->bwd_ms, err, errlen) ||
        check_ms(ctx, "opt_ms", r->opt_ms, err, errlen))
        return -1;
    return 0;
}

/* Every (precision, micro-batch) group holds layers 0..n-1 exactly once. */
static int validate_coverage(const ms_profile *p, char *err, size_t errlen)
{
    const ms_layer_row **idx = malloc((size_t)p->n_rows * sizeof *idx);
    if (!idx) return ms_errf(err, errlen, "out of memory");
    for (int i = 0; i < p->n_rows; i++) idx[i] = &p->rows[i];
    qsort(idx, (size_t)p->n_rows, sizeof *idx, row_order);
    int rc = 0;
    for (int i = 0; i < p->n_rows && !rc;) {
        int prec = idx[i]->precision, mb = idx[i]->micro_batch, expect = 0;
        for (; i < p->n_rows && idx[i]->precision == prec && idx[i]->micro_batch == mb; i++, expect++) {
            if (idx[i]->layer != expect) {
                rc = ms_errf(err, errlen,
                          idx[i]->layer < expect
                              ? "layers: layer %d appears twice for precision %s, micro-batch %d"
                              : "layers: layer %d is missing for precision %s, micro-batch %d",
                          idx[i]->layer < expect ? idx[i]->layer : expect, prec_name(prec), mb);
                break;
            }
        }
        if (!rc && expect != p->n_layers)
            rc = ms_errf(err, errlen, "layers: layer %d is missing for precision %s, micro-batch %d", expect,
                      prec_name(prec), mb);
    }
    free(idx);
    return rc;
}

/* The record's moments (profile_json.h, ms_prog_record_validate): what
 * the record pass's transitions make. Layer n_layers is the program's own
 * code after the model (its loss), which the bridge names so. */
static int validate_moments(const ms_prog_record *r, int n_layers, char *err, size_t errlen)
{
    if (r->n_moments < 0 || r->n_moments > MS_PROFILE_MAX_REC_MOMENTS || (r->n_moments > 0 && !r->m))
        return ms_errf(err, errlen, "record.moments: %d moments (0..%d)%s", r->n_moments, MS_PROFILE_MAX_REC_MOMENTS,
                       r->n_moments > 0 && !r->m ? " and no list of them" : "");
    uint32_t prev_end = 0;
    for (int i = 0; i < r->n_moments; i++) {
        const ms_rec_moment *m = &r->m[i];
        if (m->layer < -1 || m->layer > n_layers)
            return ms_errf(err, errlen, "record.moments[%d].layer: %d is outside -1..%d", i, m->layer, n_layers);
        if (m->phase < 0 || m->phase >= MS_PH_N)
            return ms_errf(err, errlen, "record.moments[%d].phase: %d is not a phase", i, m->phase);
        if (m->t_end > r->t_end)
            return ms_errf(err, errlen, "record.moments[%d].t_end: %" PRIu32 " is beyond the record's t_end %" PRIu32,
                           i, m->t_end, r->t_end);
        if (m->t_begin > m->t_end)
            return ms_errf(err, errlen, "record.moments[%d].t_begin: %" PRIu32 " is after its t_end %" PRIu32, i,
                           m->t_begin, m->t_end);
        if (m->t_begin < prev_end)
            return ms_errf(err, errlen,
                           "record.moments[%d].t_begin: %" PRIu32 " is before the previous moment's end %" PRIu32
                           " (moments are in order and do not overlap)", i, m->t_begin, prev_end);
        prev_end = m->t_end;
    }
    return 0;
}

/* Whether s (len bytes) is UTF-8 throughout, as visible.h decodes it. */
static int utf8_valid(const char *s, size_t len)
{
    uint32_t c;
    for (size_t i = 0, k; i < len; i += k)
        if (!(k = ms_utf8_next(s + i, len - i, &c))) return 0;
    return 1;
}

static int str_order(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* No two entries of list (n > 1, each a string) equal: sorted, neighbours
 * differ (a rerun's list may hold thousands of modules). The message names
 * the later of the two. */
static int no_two_equal(char *const *list, int n, const char *ctx, char *err, size_t errlen)
{
    char **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) return ms_errf(err, errlen, "out of memory");
    memcpy(sorted, list, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, str_order);
    const char *twice = NULL;
    for (int i = 1; i < n && !twice; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) twice = sorted[i];
    free(sorted);
    if (!twice) return 0;
    int at = -1;
    for (int i = 0, seen = 0; i < n && at < 0; i++)
        if (!strcmp(list[i], twice) && seen++) at = i;
    char vis[80];   /* a module path from the program: shown safely */
    return ms_errf(err, errlen, "%s[%d]: \"%s\" is in the list already (each module once)", ctx, at,
                   ms_visible(twice, vis, sizeof vis));
}

int ms_handed_on_validate(char *const *list, int n, const char *ctx, char *err, size_t errlen)
{
    if (n < 0 || n > MS_REC_MAX_HANDED_ON || (n > 0 && !list))
        return ms_errf(err, errlen, "%s: %d modules (0..%d)%s", ctx, n, MS_REC_MAX_HANDED_ON,
                       n > 0 && !list ? " and no list of them" : "");
    for (int i = 0; i < n; i++) {
        const char *s = list[i];
        size_t len = s ? strnlen(s, MS_NAME_MAX) : 0;
        if (!s || !len)
            return ms_errf(err, errlen, "%s[%d]: %s", ctx, i, s ? "empty (expected a module path)" : "missing");
        if (len >= MS_NAME_MAX)
            return ms_errf(err, errlen, "%s[%d]: longer than a module path may be (under %d bytes)", ctx, i,
                           MS_NAME_MAX);
        if (!utf8_valid(s, len)) return ms_errf(err, errlen, "%s[%d]: not valid UTF-8", ctx, i);
    }
    return n > 1 ? no_two_equal(list, n, ctx, err, errlen) : 0;
}

int ms_prog_record_validate(const ms_prog_record *r, int n_layers, char *err, size_t errlen)
{
    if (!r) return ms_errf(err, errlen, "record: none");
    if (r->n_layers != n_layers)
        return ms_errf(err, errlen, "record.n_layers: %d, but the profile has %d layers", r->n_layers, n_layers);
    if (r->t_end >= MS_REC_NEVER)
        return ms_errf(err, errlen, "record.t_end: %" PRIu32 " is beyond the last position %" PRIu32, r->t_end,
                       MS_REC_NEVER - 1);
    if (r->t_from > r->t_end)
        return ms_errf(err, errlen, "record.t_from: %" PRIu32 " is after t_end %" PRIu32, r->t_from, r->t_end);
    if (r->n < 0 || r->n > MS_PROFILE_MAX_REC_STORAGES || (r->n > 0 && !r->s))
        return ms_errf(err, errlen, "record.storages: %d storages (0..%d)%s", r->n, MS_PROFILE_MAX_REC_STORAGES,
                       r->n > 0 && !r->s ? " and no list of them" : "");
    for (int i = 0; i < r->n; i++) {
        const ms_rec_storage *s = &r->s[i];
        if (s->layer < 0 || s->layer >= n_layers)
            return ms_errf(err, errlen, "record.storages[%d].layer: %d is outside 0..%d", i, s->layer, n_layers - 1);
        if (s->cat < 0 || s->cat >= MS_CAT_N)
            return ms_errf(err, errlen, "record.storages[%d].category: %d is not a memory category", i, s->cat);
        if (s->bytes > MS_PROFILE_MAX_ROW_BYTES)
            return ms_errf(err, errlen, "record.storages[%d].bytes: %" PRIu64 " is beyond the limit %llu", i,
                           s->bytes, MS_PROFILE_MAX_ROW_BYTES);
        if (s->t_alloc >= r->t_end)
            return ms_errf(err, errlen, "record.storages[%d].t_alloc: %" PRIu32 " is not before t_end %" PRIu32, i,
                           s->t_alloc, r->t_end);
        if (i > 0 && s->t_alloc < r->s[i - 1].t_alloc)
            return ms_errf(err, errlen,
                           "record.storages[%d].t_alloc: %" PRIu32 " is before the previous storage's %" PRIu32
                           " (storages are in allocation order)", i, s->t_alloc, r->s[i - 1].t_alloc);
        if (s->t_free != MS_REC_NEVER && (s->t_free <= s->t_alloc || s->t_free > r->t_end))
            return ms_errf(err, errlen,
                           "record.storages[%d].t_free: %" PRIu32 " is outside %" PRIu32 "..%" PRIu32
                           " (-1: never freed)", i, s->t_free, s->t_alloc + 1, r->t_end);   /* < t_end: no wrap */
        if (s->copy_of != -1 && (s->copy_of < 0 || s->copy_of >= i))
            return ms_errf(err, errlen, "record.storages[%d].copy_of: %" PRId32 " is not -1 or an earlier storage",
                           i, s->copy_of);
    }
    if (validate_moments(r, n_layers, err, errlen)) return -1;
    return ms_handed_on_validate(r->handed_on, r->n_handed_on, "record.handed_on", err, errlen);
}

int ms_profile_validate(const ms_profile *p, char *err, size_t errlen)
{
    if (!p) return ms_errf(err, errlen, "no profile");
    if (p->n_layers < 1 || p->n_layers > MS_MAX_LAYERS)
        return ms_errf(err, errlen, "model.n_layers: %d is outside 1..%d", p->n_layers, MS_MAX_LAYERS);
    if (p->global_batch < 1 || p->global_batch > MS_PROFILE_MAX_BATCH)
        return ms_errf(err, errlen, "model.global_batch: %d is outside 1..%d", p->global_batch, MS_PROFILE_MAX_BATCH);
    if (!memchr(p->fingerprint, 0, sizeof p->fingerprint) || !memchr(p->layer_list, 0, sizeof p->layer_list) ||
        !memchr(p->framework, 0, sizeof p->framework) || !memchr(p->accounting, 0, sizeof p->accounting))
        return ms_errf(err, errlen, "program: a text field is not terminated");
    if (p->reserve > MS_PROFILE_MAX_ROW_BYTES)
        return ms_errf(err, errlen, "reserve_bytes: %" PRIu64 " is beyond the limit", p->reserve);
    if (p->n_rows < 1 || !p->rows) return ms_errf(err, errlen, "layers: no rows");
    if (p->oom.n_live_layers < 0 || p->oom.n_live_layers > p->n_layers ||
        (p->oom.n_live_layers > 0 && !p->oom.live_by_layer))
        return ms_errf(err, errlen, "oom.live_by_layer: %d entries for %d layers", p->oom.n_live_layers, p->n_layers);
    for (int i = 0; i < p->n_rows; i++)
        if (validate_row(p, i, err, errlen)) return -1;
    if (validate_coverage(p, err, errlen)) return -1;
    return p->record ? ms_prog_record_validate(p->record, p->n_layers, err, errlen) : 0;
}

/* ---- writer ---------------------------------------------------------- */

/* json_object_set_new that remembers a failure (a NULL value) */
static void put(json_t *o, const char *k, json_t *v, int *bad)
{
    if (!v) *bad = 1;
    else if (json_object_set_new(o, k, v)) *bad = 1;
}

static json_t *oom_to_json(const ms_profile *p, int *bad)
{
    const ms_oom_info *o = &p->oom;
    if (!o->happened) return json_null();
    json_t *j = json_object();
    if (!j) return NULL;
    put(j, "layer", json_integer(o->layer), bad);
    put(j, "layer_name", json_string(o->layer_name), bad);
    put(j, "phase", json_string(ms_phase_name((ms_phase)o->phase)), bad);
    put(j, "step", o->step > 0 ? json_integer(o->step) : json_null(), bad);
    put(j, "category", json_string(ms_cat_name((ms_cat)o->category)), bad);
    put(j, "requested_bytes", ms_json_u64(o->requested), bad);
    put(j, "capacity_bytes", ms_json_u64(o->capacity), bad);
    json_t *live = json_object();
    for (int c = 0; c < MS_CAT_N && live; c++) put(live, ms_cat_name((ms_cat)c), ms_json_u64(o->live_by_cat[c]), bad);
    put(j, "live_bytes", live, bad);
    json_t *by = json_array();
    for (int i = 0; i < o->n_live_layers && by; i++)
        if (json_array_append_new(by, ms_json_u64(o->live_by_layer[i]))) *bad = 1;
    put(j, "live_by_layer", by, bad);
    put(j, "what", json_string(o->what), bad);
    return j;
}

static json_t *row_to_json(const ms_layer_row *r, int *bad)
{
    json_t *j = json_object();
    if (!j) return NULL;
    put(j, "index", json_integer(r->layer), bad);
    put(j, "name", json_string(r->name), bad);
    put(j, "kind", json_string(r->kind), bad);
    put(j, "source", json_string(ms_row_source_name(r->source)), bad);
    put(j, "precision", json_string(prec_name(r->precision)), bad);
    put(j, "micro_batch", json_integer(r->micro_batch), bad);
    put(j, "param", ms_json_u64(r->param), bad);
    put(j, "master", ms_json_u64(r->master), bad);
    put(j, "grad", ms_json_u64(r->grad), bad);
    put(j, "optim", ms_json_u64(r->optim), bad);
    put(j, "act", ms_json_u64(r->act), bad);
    put(j, "act_input", ms_json_u64(r->act_input), bad);
    put(j, "transient_fwd", ms_json_u64(r->transient_fwd), bad);
    put(j, "transient_bwd", ms_json_u64(r->transient_bwd), bad);
    put(j, "transient_opt", ms_json_u64(r->transient_opt), bad);
    put(j, "out_bytes", ms_json_u64(r->out_bytes), bad);
    put(j, "fwd_ms", json_real(r->fwd_ms), bad);
    put(j, "bwd_ms", json_real(r->bwd_ms), bad);
    put(j, "opt_ms", json_real(r->opt_ms), bad);
    return j;
}

/* The loss row's byte fields, in the order JSON names them. */
#define LOSS_BYTES(X) X(outputs) X(held) X(transient_fwd) X(transient_bwd) X(carry) X(carry_loss)

static json_t *loss_to_json(const ms_loss_row *l, int *bad)
{
    json_t *j = json_object();
    if (!j) return NULL;
    put(j, "made_in", json_integer(l->made_in), bad);
#define PUT_LOSS(f) put(j, #f, ms_json_u64(l->f), bad);
    LOSS_BYTES(PUT_LOSS)
#undef PUT_LOSS
    return j;
}

static int loss_from_json(const json_t *j, ms_loss_row *l, int n_layers, char *err, size_t errlen)
{
    if (!json_is_object(j)) return ms_errf(err, errlen, "loss: expected an object");
    const json_t *mi = json_object_get(j, "made_in");
    if (!json_is_integer(mi) || json_integer_value(mi) < 0 || json_integer_value(mi) >= n_layers)
        return ms_errf(err, errlen, "loss.made_in: expected a layer from 0 to %d", n_layers - 1);
    l->made_in = (int)json_integer_value(mi);
#define GET_LOSS(f) if (ms_json_get_u64(j, "loss", #f, MS_PROFILE_MAX_ROW_BYTES, &l->f, err, errlen)) return -1;
    LOSS_BYTES(GET_LOSS)
#undef GET_LOSS
    l->present = 1;
    return 0;
}

/* The record, compact: one array a storage (tens of thousands of them). */
static json_t *record_to_json(const ms_prog_record *r, int *bad)
{
    json_t *j = json_object();
    if (!j) return NULL;
    put(j, "n_layers", json_integer(r->n_layers), bad);
    put(j, "t_from", json_integer(r->t_from), bad);
    put(j, "t_end", json_integer(r->t_end), bad);
    json_t *a = json_array();
    for (int i = 0; a && i < r->n && !*bad; i++) {
        const ms_rec_storage *s = &r->s[i];
        json_t *e = json_pack("[i, s, o, I, I, i]", s->layer, ms_cat_name((ms_cat)s->cat), ms_json_u64(s->bytes),
                              (json_int_t)s->t_alloc,
                              s->t_free == MS_REC_NEVER ? (json_int_t)-1 : (json_int_t)s->t_free, (int)s->copy_of);
        if (!e || json_array_append_new(a, e)) *bad = 1;
    }
    put(j, "storages", a, bad);
    if (r->n_moments > 0) {   /* none: no key (absent reads as none) */
        json_t *m = json_array();
        for (int i = 0; m && i < r->n_moments && !*bad; i++) {
            const ms_rec_moment *x = &r->m[i];
            json_t *e = json_pack("[i, s, I, I]", x->layer, ms_phase_name((ms_phase)x->phase),
                                  (json_int_t)x->t_begin, (json_int_t)x->t_end);
            if (!e || json_array_append_new(m, e)) *bad = 1;
        }
        put(j, "moments", m, bad);
    }
    /* none: no key, so a record that hands nothing on is written as before */
    if (r->n_handed_on > 0) put(j, "handed_on", ms_handed_on_to_json(r->handed_on, r->n_handed_on), bad);
    return j;
}

json_t *ms_handed_on_to_json(char *const *list, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (!list[i] || json_array_append_new(a, json_string(list[i]))) {   /* not UTF-8: NULL, refused */
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *ms_profile_to_json(const ms_profile *p)
{
    if (!p) return NULL;
    int bad = 0;
    json_t *root = json_object();
    if (!root) return NULL;
    put(root, "version", json_integer(MS_PROFILE_JSON_VERSION), &bad);
    put(root, "fits", json_boolean(p->fits), &bad);
    put(root, "capacity_bytes", ms_json_u64(p->capacity), &bad);
    put(root, "peak_bytes", ms_json_u64(p->peak), &bad);
    put(root, "reserve_bytes", ms_json_u64(p->reserve), &bad);
    if (p->reserve_allocator) put(root, "reserve_allocator_bytes", ms_json_u64(p->reserve_allocator), &bad);
    put(root, "reserved_peak_bytes", ms_json_u64(p->reserved_peak), &bad);
    put(root, "accounting", json_string(p->accounting[0] ? p->accounting : "allocator"), &bad);
    put(root, "grads_freed_each_step", json_boolean(p->grads_freed != MS_GRADS_KEPT), &bad);
    if (p->grads_freed != MS_GRADS_KEPT)
        put(root, "grads_freed_before",
            json_string(p->grads_freed == MS_GRADS_FREED_BEFORE_BACKWARD ? "backward" : "forward"), &bad);
    json_t *m = json_object();
    if (m) {
        put(m, "name", json_string(p->model), &bad);
        put(m, "n_layers", json_integer(p->n_layers), &bad);
        put(m, "seq_len", json_integer(p->seq_len), &bad);
        put(m, "d_model", json_integer(p->d_model), &bad);
        put(m, "n_head", json_integer(p->n_head), &bad);
        put(m, "vocab", json_integer(p->vocab), &bad);
        put(m, "global_batch", json_integer(p->global_batch), &bad);
    }
    put(root, "model", m, &bad);
    if (p->loss.present) put(root, "loss", loss_to_json(&p->loss, &bad), &bad);
    if (p->fingerprint[0] || p->layer_list[0] || p->framework[0]) {
        json_t *pr = json_object();
        if (pr) {
            put(pr, "fingerprint", json_string(p->fingerprint), &bad);
            put(pr, "layer_list", json_string(p->layer_list), &bad);
            put(pr, "framework", json_string(p->framework), &bad);
        }
        put(root, "program", pr, &bad);
    }
    put(root, "device", json_string(p->device), &bad);
    put(root, "oom", oom_to_json(p, &bad), &bad);
    json_t *rows = json_array();
    for (int i = 0; rows && i < p->n_rows; i++)
        if (json_array_append_new(rows, row_to_json(&p->rows[i], &bad))) bad = 1;
    put(root, "layers", rows, &bad);
    if (p->record) put(root, "record", record_to_json(p->record, &bad), &bad);
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

static int enum_field(const json_t *obj, const char *ctx, const char *key, int (*parse)(const char *),
                      const char *choices, int *dst, char *err, size_t errlen)
{
    char s[32];
    if (ms_json_get_str(obj, ctx, key, s, sizeof s, err, errlen)) return -1;
    int v = parse(s);
    if (v < 0) return ms_errf(err, errlen, "%s.%s: \"%s\" is not one of %s", ctx, key, s, choices);
    *dst = v;
    return 0;
}

static int source_parse(const char *s) { return ms_row_source_parse(s); }

static int row_from_json(const json_t *j, const char *ctx, int n_layers, ms_layer_row *r, char *err, size_t errlen)
{
    if (!json_is_object(j)) return ms_errf(err, errlen, "%s: expected an object", ctx);
    GET_INT(j, ctx, "index", 0, n_layers - 1, r->layer);
    if (ms_json_get_str(j, ctx, "name", r->name, sizeof r->name, err, errlen)) return -1;
    if (ms_json_get_str(j, ctx, "kind", r->kind, sizeof r->kind, err, errlen)) return -1;
    if (enum_field(j, ctx, "source", source_parse, "full|isolated|copied|uncapped", &r->source, err, errlen))
        return -1;
    if (enum_field(j, ctx, "precision", prec_parse, "fp32|bf16|fp16", &r->precision, err, errlen)) return -1;
    GET_INT(j, ctx, "micro_batch", 1, MS_PROFILE_MAX_BATCH, r->micro_batch);
    struct { const char *k; uint64_t *v; } b[] = {
        {"param", &r->param}, {"master", &r->master}, {"grad", &r->grad}, {"optim", &r->optim},
        {"act", &r->act}, {"act_input", &r->act_input}, {"transient_fwd", &r->transient_fwd},
        {"transient_bwd", &r->transient_bwd}, {"out_bytes", &r->out_bytes},
    };
    for (size_t k = 0; k < sizeof b / sizeof b[0]; k++)
        if (ms_json_get_u64(j, ctx, b[k].k, MS_PROFILE_MAX_ROW_BYTES, b[k].v, err, errlen)) return -1;
    /* version 2: optional, 0 when absent */
    if (json_object_get(j, "transient_opt") &&
        ms_json_get_u64(j, ctx, "transient_opt", MS_PROFILE_MAX_ROW_BYTES, &r->transient_opt, err, errlen))
        return -1;
    if (ms_json_get_num(j, ctx, "fwd_ms", 0, 1e12, &r->fwd_ms, err, errlen) ||
        ms_json_get_num(j, ctx, "bwd_ms", 0, 1e12, &r->bwd_ms, err, errlen) ||
        ms_json_get_num(j, ctx, "opt_ms", 0, 1e12, &r->opt_ms, err, errlen))
        return -1;
    return 0;
}

static int oom_from_json(const json_t *j, ms_profile *p, char *err, size_t errlen)
{
    ms_oom_info *o = &p->oom;
    const char *ctx = "oom";
    if (json_is_null(j)) return 0;
    if (!json_is_object(j)) return ms_errf(err, errlen, "oom: expected null or an object");
    o->happened = 1;
    GET_INT(j, ctx, "layer", -1, p->n_layers - 1, o->layer);
    if (ms_json_get_str(j, ctx, "layer_name", o->layer_name, sizeof o->layer_name, err, errlen)) return -1;
    if (enum_field(j, ctx, "phase", ms_phase_parse, "init|forward|backward|optimizer|validation", &o->phase, err,
                   errlen))
        return -1;
    if (enum_field(j, ctx, "category", ms_cat_parse, "param|master|grad|optim|act|transient|comm|reserve",
                   &o->category, err, errlen))
        return -1;
    if (json_is_integer(json_object_get(j, "step")))   /* optional: null or absent, unknown */
        GET_INT(j, ctx, "step", 1, INT32_MAX, o->step);
    if (ms_json_get_u64(j, ctx, "requested_bytes", INT64_MAX, &o->requested, err, errlen)) return -1;
    o->capacity = p->capacity; /* optional: the trial's capacity unless stated */
    if (json_object_get(j, "capacity_bytes") &&
        ms_json_get_u64(j, ctx, "capacity_bytes", INT64_MAX, &o->capacity, err, errlen))
        return -1;
    const json_t *live = json_object_get(j, "live_bytes");
    if (!live) return ms_errf(err, errlen, "oom.live_bytes: missing");
    if (!json_is_object(live)) return ms_errf(err, errlen, "oom.live_bytes: expected an object {category: bytes}");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)live, key, val) {
        int c = ms_cat_parse(key);
        if (c < 0) return ms_errf(err, errlen, "oom.live_bytes: \"%s\" is not a memory category", key);
        if (ms_json_get_u64(live, "oom.live_bytes", key, INT64_MAX, &o->live_by_cat[c], err, errlen)) return -1;
    }
    const json_t *by = json_object_get(j, "live_by_layer");
    if (!by) return ms_errf(err, errlen, "oom.live_by_layer: missing");
    if (!json_is_array(by)) return ms_errf(err, errlen, "oom.live_by_layer: expected an array of bytes");
    size_t n = json_array_size(by);
    if (n > (size_t)p->n_layers)
        return ms_errf(err, errlen, "oom.live_by_layer: %zu entries for %d layers", n, p->n_layers);
    if (n) {
        o->live_by_layer = calloc(n, sizeof *o->live_by_layer);
        if (!o->live_by_layer) return ms_errf(err, errlen, "out of memory");
        o->n_live_layers = (int)n;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(by, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return ms_errf(err, errlen, "oom.live_by_layer[%zu]: expected non-negative integer bytes", i);
        o->live_by_layer[i] = (uint64_t)json_integer_value(v);
    }
    return ms_json_get_str(j, ctx, "what", o->what, sizeof o->what, err, errlen);
}

/* record.<list>[i][k] (field[k] names it), an integer in lo..hi */
static int elem_int(const json_t *e, const char *list, const char *const *field, int i, int k, long long lo,
                    long long hi, long long *out, char *err, size_t errlen)
{
    const json_t *v = json_array_get(e, (size_t)k);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return ms_errf(err, errlen, "record.%s[%d].%s: expected an integer in %lld..%lld", list, i, field[k], lo, hi);
    *out = json_integer_value(v);
    return 0;
}

static int storage_int(const json_t *e, int i, int k, long long lo, long long hi, long long *out, char *err,
                       size_t errlen)
{
    static const char *const field[] = {"layer", "category", "bytes", "t_alloc", "t_free", "copy_of"};
    return elem_int(e, "storages", field, i, k, lo, hi, out, err, errlen);
}

/* The record's moments, when the key is there (absent: none, as records
 * written before they were kept). Types and ranges; ms_prog_record_validate
 * checks the layers against the profile's and the order. */
static int moments_from_json(const json_t *j, ms_prog_record *r, char *err, size_t errlen)
{
    static const char *const field[] = {"layer", "phase", "t_begin", "t_end"};
    const long long last = MS_REC_NEVER - 1;
    const json_t *a = json_object_get(j, "moments");
    if (!a) return 0;
    if (!json_is_array(a)) return ms_errf(err, errlen, "record.moments: expected an array");
    size_t n = json_array_size(a);
    if (n > MS_PROFILE_MAX_REC_MOMENTS)
        return ms_errf(err, errlen, "record.moments: %zu moments is too many (at most %d)", n,
                       MS_PROFILE_MAX_REC_MOMENTS);
    if (n && !(r->m = calloc(n, sizeof *r->m))) return ms_errf(err, errlen, "out of memory");
    for (size_t i = 0; i < n; i++, r->n_moments++) {
        const json_t *e = json_array_get(a, i);
        if (!json_is_array(e) || json_array_size(e) != 4)
            return ms_errf(err, errlen, "record.moments[%zu]: expected [layer, phase, t_begin, t_end]", i);
        long long v[4];
        int ph = ms_phase_parse(json_string_value(json_array_get(e, 1)));
        if (elem_int(e, "moments", field, (int)i, 0, -1, MS_MAX_LAYERS, &v[0], err, errlen)) return -1;
        if (ph < 0)
            return ms_errf(err, errlen, "record.moments[%zu].phase: expected one of "
                           "init|forward|backward|optimizer|validation", i);
        if (elem_int(e, "moments", field, (int)i, 2, 0, last, &v[2], err, errlen) ||
            elem_int(e, "moments", field, (int)i, 3, 0, last, &v[3], err, errlen))
            return -1;
        r->m[i] = (ms_rec_moment){ .layer = (int)v[0], .phase = ph, .t_begin = (uint32_t)v[2],
                                   .t_end = (uint32_t)v[3] };
    }
    return 0;
}

int ms_handed_on_from_json(const json_t *a, const char *ctx, char ***list, int *n, char *err, size_t errlen)
{
    if (!json_is_array(a)) return ms_errf(err, errlen, "%s: expected an array of module paths", ctx);
    size_t k = json_array_size(a);
    if (k > MS_REC_MAX_HANDED_ON)
        return ms_errf(err, errlen, "%s: %zu modules is too many (at most %d)", ctx, k, MS_REC_MAX_HANDED_ON);
    if (k && !(*list = calloc(k, sizeof **list))) return ms_errf(err, errlen, "out of memory");
    for (size_t i = 0; i < k; i++, (*n)++) {
        const json_t *v = json_array_get(a, i);
        /* a string holding a NUL byte (JSON escapes it) would be cut short as a C string */
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
            return ms_errf(err, errlen, "%s[%zu]: expected a module path (a string, no NUL byte)", ctx, i);
        if (!((*list)[i] = strdup(json_string_value(v)))) return ms_errf(err, errlen, "out of memory");
    }
    return ms_handed_on_validate(*list, *n, ctx, err, errlen);
}

/* The record's types and ranges; ms_prog_record_validate (through
 * ms_profile_validate) checks how its values relate. */
static int record_from_json(const json_t *j, ms_profile *p, char *err, size_t errlen)
{
    if (!json_is_object(j)) return ms_errf(err, errlen, "record: expected an object");
    const long long last = MS_REC_NEVER - 1;   /* the last position: MS_REC_NEVER means never */
    long long nl, from, end;
    if (ms_json_get_int(j, "record", "n_layers", 1, MS_MAX_LAYERS, &nl, err, errlen) ||
        ms_json_get_int(j, "record", "t_from", 0, last, &from, err, errlen) ||
        ms_json_get_int(j, "record", "t_end", 0, last, &end, err, errlen))
        return -1;
    const json_t *a = json_object_get(j, "storages");
    if (!json_is_array(a))
        return ms_errf(err, errlen, a ? "record.storages: expected an array" : "record.storages: missing");
    size_t n = json_array_size(a);
    if (n > MS_PROFILE_MAX_REC_STORAGES)
        return ms_errf(err, errlen, "record.storages: %zu storages is too many (at most %d)", n,
                       MS_PROFILE_MAX_REC_STORAGES);
    ms_prog_record *r = calloc(1, sizeof *r);
    if (!r || (n && !(r->s = calloc(n, sizeof *r->s)))) {
        free(r);
        return ms_errf(err, errlen, "out of memory");
    }
    p->record = r;   /* owned by p from here: freed with it on failure */
    r->n_layers = (int)nl;
    r->t_from = (uint32_t)from;
    r->t_end = (uint32_t)end;
    for (size_t i = 0; i < n; i++, r->n++) {
        const json_t *e = json_array_get(a, i);
        ms_rec_storage *s = &r->s[i];
        if (!json_is_array(e) || json_array_size(e) != 6)
            return ms_errf(err, errlen, "record.storages[%zu]: expected [layer, category, bytes, t_alloc, t_free, "
                           "copy_of]", i);
        long long v[6];
        const char *cat = json_string_value(json_array_get(e, 1));
        if (storage_int(e, (int)i, 0, 0, MS_MAX_LAYERS - 1, &v[0], err, errlen)) return -1;
        if (!cat || ms_cat_parse(cat) < 0)
            return ms_errf(err, errlen, "record.storages[%zu].category: expected one of "
                           "param|master|grad|optim|act|transient|comm|reserve", i);
        if (storage_int(e, (int)i, 2, 0, (long long)MS_PROFILE_MAX_ROW_BYTES, &v[2], err, errlen) ||
            storage_int(e, (int)i, 3, 0, last, &v[3], err, errlen) ||
            storage_int(e, (int)i, 4, -1, last, &v[4], err, errlen) ||
            storage_int(e, (int)i, 5, -1, INT32_MAX, &v[5], err, errlen))
            return -1;
        s->layer = (int)v[0];
        s->cat = ms_cat_parse(cat);
        s->bytes = (uint64_t)v[2];
        s->t_alloc = (uint32_t)v[3];
        s->t_free = v[4] < 0 ? MS_REC_NEVER : (uint32_t)v[4];
        s->copy_of = (int32_t)v[5];
    }
    if (moments_from_json(j, r, err, errlen)) return -1;
    const json_t *h = json_object_get(j, "handed_on");   /* absent: none (records written before) */
    return h ? ms_handed_on_from_json(h, "record.handed_on", &r->handed_on, &r->n_handed_on, err, errlen) : 0;
}

static int from_json(const json_t *root, ms_profile *p, char *err, size_t errlen)
{
    const char *ctx = "profile";
    if (!json_is_object(root)) return ms_errf(err, errlen, "profile: expected a JSON object");
    long long version = 1;
    if (json_object_get(root, "version") &&
        ms_json_get_int(root, ctx, "version", 1, MS_PROFILE_JSON_VERSION, &version, err, errlen))
        return -1;
    if (ms_json_get_bool(root, ctx, "fits", &p->fits, err, errlen)) return -1;
    if (ms_json_get_u64(root, ctx, "capacity_bytes", INT64_MAX, &p->capacity, err, errlen) ||
        ms_json_get_u64(root, ctx, "peak_bytes", INT64_MAX, &p->peak, err, errlen) ||
        ms_json_get_u64(root, ctx, "reserve_bytes", MS_PROFILE_MAX_ROW_BYTES, &p->reserve, err, errlen))
        return -1;
    const json_t *m = json_object_get(root, "model");
    if (!json_is_object(m)) return ms_errf(err, errlen, m ? "model: expected an object" : "model: missing");
    if (ms_json_get_str(m, "model", "name", p->model, sizeof p->model, err, errlen)) return -1;
    GET_INT(m, "model", "n_layers", 1, MS_MAX_LAYERS, p->n_layers);
    /* version 1 (the built-in GPT) requires its shape; version 2 allows 0 or
     * absent for what a program does not have */
    static const char *const shape_keys[] = {"seq_len", "d_model", "n_head", "vocab"};
    int *shape[] = {&p->seq_len, &p->d_model, &p->n_head, &p->vocab};
    for (int k = 0; k < 4; k++)
        if (version >= 2 && !json_object_get(m, shape_keys[k])) *shape[k] = 0;
        else GET_INT(m, "model", shape_keys[k], version >= 2 ? 0 : 1, INT32_MAX, *shape[k]);
    GET_INT(m, "model", "global_batch", 1, MS_PROFILE_MAX_BATCH, p->global_batch);
    if (ms_json_get_str(root, ctx, "device", p->device, sizeof p->device, err, errlen)) return -1;
    if (json_object_get(root, "reserved_peak_bytes") &&
        ms_json_get_u64(root, ctx, "reserved_peak_bytes", INT64_MAX, &p->reserved_peak, err, errlen))
        return -1;
    if (json_object_get(root, "reserve_allocator_bytes") &&      /* absent: 0 (none known) */
        ms_json_get_u64(root, ctx, "reserve_allocator_bytes", p->reserve, &p->reserve_allocator, err, errlen))
        return -1;
    if (json_object_get(root, "grads_freed_each_step") &&
        ms_json_get_bool(root, ctx, "grads_freed_each_step", &p->grads_freed, err, errlen))
        return -1;
    if (json_object_get(root, "grads_freed_before")) {   /* absent: before the forward (version 2's meaning) */
        char when[16];
        if (ms_json_get_str(root, ctx, "grads_freed_before", when, sizeof when, err, errlen)) return -1;
        if (strcmp(when, "forward") && strcmp(when, "backward"))
            return ms_errf(err, errlen, "%s: grads_freed_before: \"%s\" is neither \"forward\" nor \"backward\"",
                           ctx, when);
        if (!p->grads_freed)
            return ms_errf(err, errlen, "%s: grads_freed_before without grads_freed_each_step", ctx);
        if (!strcmp(when, "backward")) p->grads_freed = MS_GRADS_FREED_BEFORE_BACKWARD;
    }
    if (json_object_get(root, "accounting") &&
        ms_json_get_str(root, ctx, "accounting", p->accounting, sizeof p->accounting, err, errlen))
        return -1;
    const json_t *lo = json_object_get(root, "loss");
    if (lo && loss_from_json(lo, &p->loss, p->n_layers, err, errlen)) return -1;
    const json_t *pr = json_object_get(root, "program");
    if (pr && !json_is_null(pr)) {
        if (!json_is_object(pr)) return ms_errf(err, errlen, "program: expected an object");
        if (ms_json_get_str(pr, "program", "fingerprint", p->fingerprint, sizeof p->fingerprint, err, errlen) ||
            ms_json_get_str(pr, "program", "layer_list", p->layer_list, sizeof p->layer_list, err, errlen) ||
            ms_json_get_str(pr, "program", "framework", p->framework, sizeof p->framework, err, errlen))
            return -1;
    }
    const json_t *oom = json_object_get(root, "oom");
    if (!oom) return ms_errf(err, errlen, "oom: missing (null when the trial fit)");
    if (oom_from_json(oom, p, err, errlen)) return -1;
    if (p->fits && p->oom.happened) return ms_errf(err, errlen, "oom: an OOM is given but fits is true");
    const json_t *rows = json_object_get(root, "layers");
    if (!json_is_array(rows)) return ms_errf(err, errlen, rows ? "layers: expected an array" : "layers: missing");
    size_t n = json_array_size(rows);
    if (n == 0) return ms_errf(err, errlen, "layers: no rows");
    if (n > (size_t)MS_MAX_LAYERS * 64) return ms_errf(err, errlen, "layers: %zu rows is too many", n);
    p->rows = calloc(n, sizeof *p->rows);
    if (!p->rows) return ms_errf(err, errlen, "out of memory");
    p->n_rows = (int)n;
    for (size_t i = 0; i < n; i++) {
        char rctx[32];
        snprintf(rctx, sizeof rctx, "layers[%zu]", i);
        if (row_from_json(json_array_get(rows, i), rctx, p->n_layers, &p->rows[i], err, errlen)) return -1;
    }
    const json_t *rec = json_object_get(root, "record");
    if (rec && !json_is_null(rec) && record_from_json(rec, p, err, errlen)) return -1;   /* null: none */
    return ms_profile_validate(p, err, errlen);
}

int ms_profile_from_json(const json_t *root, ms_profile *out, char *err, size_t errlen)
{
    if (!out) return ms_errf(err, errlen, "no output profile");
    memset(out, 0, sizeof *out);
    if (from_json(root, out, err, errlen)) {
        ms_profile_free(out);
        return -1;
    }
    return 0;
}

/* ---- files ----------------------------------------------------------- */

int ms_profile_write_json(FILE *f, const ms_profile *p, char *err, size_t errlen)
{
    return ms_json_write_stream(f, ms_profile_to_json(p), "profile", err, errlen);
}

int ms_profile_save_json(const char *path, const ms_profile *p, char *err, size_t errlen)
{
    return ms_json_write_path(path, ms_profile_to_json(p), "profile", err, errlen);
}

int ms_profile_load_json(const char *path, ms_profile *out, char *err, size_t errlen)
{
    if (out) memset(out, 0, sizeof *out);
    json_t *j = ms_json_read_path(path, err, errlen);
    if (!j) return -1;
    char inner[256];
    int rc = ms_profile_from_json(j, out, inner, sizeof inner);
    json_decref(j);
    if (rc) return ms_errf(err, errlen, "%s: %s", path ? path : "-", inner);
    return 0;
}
