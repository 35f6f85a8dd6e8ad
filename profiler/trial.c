/* trial.c — the single-device trial, the OOM diagnosis, the completed
 * profile, and the three-ledger cross-check (allocator, CUPTI callbacks,
 * CUPTI activity records). */
#include "profiler/trial.h"
#include "profiler/cupti_trace.h"
#include "trainer/session.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct trial_ctx {
    ms_trial_result *r;
    const ms_trial_opts *o;
    int n_layers;
    size_t (*by_cat)[MS_CAT_N];   /* bytes allocated per layer and category */
    int tracing;                  /* CUPTI started */
    uint64_t tracer_bytes;        /* device memory CUPTI took for itself at start */
    int first_traced_event;       /* index of the first allocator event while tracing */
} trial_ctx;

static int push_event(ms_trial_result *r, const ms_mem_event *e)
{
    if (r->n_events == r->cap_events) {
        int ncap = r->cap_events ? r->cap_events * 2 : 1024;
        ms_mem_event *n = realloc(r->events, (size_t)ncap * sizeof *n);
        if (!n) return -1;
        r->events = n;
        r->cap_events = ncap;
    }
    r->events[r->n_events++] = *e;
    return 0;
}

static void alloc_hook(void *u, const ms_mem_event *a)
{
    trial_ctx *c = u;
    push_event(c->r, a);
    if (a->kind == MS_EV_ALLOC && a->layer >= 0 && a->layer < c->n_layers) c->by_cat[a->layer][a->category] += a->bytes;
}

static int on_device(void *u, ms_device *d)
{
    trial_ctx *c = u;
    c->first_traced_event = c->r->n_events;
    if (d->backend != MS_BACKEND_CUDA || !c->o->use_cupti) return 0;
    char err[256];
    if (ms_trace_start(err, sizeof err) != 0) {
        snprintf(c->r->check.detail, sizeof c->r->check.detail, "CUPTI tracing unavailable: %s", err);
        if (c->o->progress) fprintf(c->o->progress, "profile: warning: %s\n", c->r->check.detail);
        return 0;
    }
    c->tracing = 1;
    /* CUPTI's own buffers really take that much of the trial's device: the
     * trial's ledger counts them (its OOM comes where the GPU's would), the
     * profile's reserve does not (a run without the tracer never pays them) */
    c->tracer_bytes = ms_trace_reserve_bytes();
    ms_dev_account_foreign(d, MS_CAT_RESERVE, (size_t)c->tracer_bytes);
    return 0;
}

static const char *kind_name(int k) { return k == 0 ? "embed" : k == 1 ? "block" : "head"; }

/* "block 17/forward" -> layer 17, phase forward (-1 when not a layer range). */
static void parse_range(const ms_profile *p, const ms_layer_row *rows, const char *range, int *layer, int *phase)
{
    *layer = -1;
    *phase = -1;
    const char *slash = strrchr(range, '/');
    if (!slash) {
        if (!strcmp(range, "optimizer")) *phase = MS_PH_OPTIMIZER;
        return;
    }
    *phase = ms_phase_parse(slash + 1);
    size_t n = (size_t)(slash - range);
    for (int i = 0; i < p->n_layers; i++)
        if (strlen(rows[i].name) == n && !strncmp(rows[i].name, range, n)) { *layer = i; return; }
}

/* Multiset match of allocator allocations/frees against one CUPTI source. */
static int match_count(const ms_mem_event *a, int na, int kind, const ms_mem_event *t, int nt, int source,
                       int *unmatched_cupti)
{
    char *used = calloc((size_t)nt + 1, 1);
    if (!used) return -1;
    int matched = 0;
    for (int i = 0; i < na; i++) {
        if (a[i].source != MS_EV_SRC_ALLOCATOR || a[i].kind != kind) continue;
        for (int j = 0; j < nt; j++) {
            if (used[j] || t[j].source != source) continue;
            if (t[j].kind != kind || t[j].bytes != a[i].bytes) continue;
            if (kind != MS_EV_FAIL && t[j].address != a[i].address) continue;
            used[j] = 1;
            matched++;
            break;
        }
    }
    if (unmatched_cupti) {
        *unmatched_cupti = 0;
        for (int j = 0; j < nt; j++)
            if (!used[j] && t[j].source == source && t[j].kind == MS_EV_ALLOC) (*unmatched_cupti)++;
    }
    free(used);
    return matched;
}

static void finish_trace(trial_ctx *c, ms_profile *p)
{
    ms_trial_result *r = c->r;
    ms_ledger_check *k = &r->check;
    ms_trace_flush();
    ms_trace_stop();
    ms_mem_event *t = NULL;
    int nt = 0;
    if (ms_trace_events_copy(&t, &nt) != 0) return;
    const ms_mem_event *a = r->events + c->first_traced_event;
    int na = r->n_events - c->first_traced_event;
    k->done = 1;
    for (int i = 0; i < na; i++) {
        if (a[i].kind == MS_EV_ALLOC) { k->allocs++; k->bytes_allocator += a[i].bytes; }
        if (a[i].kind == MS_EV_FREE) k->frees++;
    }
    k->matched_callback = match_count(a, na, MS_EV_ALLOC, t, nt, MS_EV_SRC_CUPTI_CALLBACK, &k->cupti_only);
    k->matched_activity = match_count(a, na, MS_EV_ALLOC, t, nt, MS_EV_SRC_CUPTI_ACTIVITY, NULL);
    k->frees_matched_callback = match_count(a, na, MS_EV_FREE, t, nt, MS_EV_SRC_CUPTI_CALLBACK, NULL);
    k->frees_matched_activity = match_count(a, na, MS_EV_FREE, t, nt, MS_EV_SRC_CUPTI_ACTIVITY, NULL);
    k->fail_seen_by_cupti = match_count(a, na, MS_EV_FAIL, t, nt, MS_EV_SRC_CUPTI_CALLBACK, NULL);
    for (int j = 0; j < nt; j++) {
        if (t[j].kind != MS_EV_ALLOC) continue;
        if (t[j].source == MS_EV_SRC_CUPTI_CALLBACK) k->bytes_callback += t[j].bytes;
        else k->bytes_activity += t[j].bytes;
    }
    ms_trace_xcheck xc;
    int differ = ms_trace_crosscheck(t, nt, &xc);
    size_t used = strlen(k->detail);
    if (differ == 1 && used < sizeof k->detail)
        snprintf(k->detail + used, sizeof k->detail - used,
                 "callback vs activity: %d allocations only in callbacks, %d only in activity records; ",
                 xc.allocs_callback_only, xc.allocs_activity_only);
    /* CUPTI's events go to the database too, on the trial's device, with
     * layer/phase from their NVTX range */
    for (int j = 0; j < nt; j++) {
        t[j].device = 0;
        parse_range(p, p->rows, t[j].range, &t[j].layer, &t[j].phase);
        push_event(r, &t[j]);
    }
    free(t);
}

/* Bytes a tensor of b bytes takes as its own allocation on a device of grain g. */
static uint64_t grained(uint64_t b, size_t g) { return (b + g - 1) / g * g; }

static void row_init(ms_layer_row *row, const ms_config *cfg, int layer, int n_layers, int prec, int batch, size_t grain)
{
    memset(row, 0, sizeof *row);
    row->layer = layer;
    int kind = layer == 0 ? 0 : layer == n_layers - 1 ? 2 : 1;
    if (kind == 1) snprintf(row->name, sizeof row->name, "block %d", layer);
    else snprintf(row->name, sizeof row->name, "%s", kind_name(kind));
    snprintf(row->kind, sizeof row->kind, "%s", kind_name(kind));
    row->precision = prec;
    row->micro_batch = batch;
    size_t N = (size_t)batch * cfg->seq_len, es = prec == MS_PREC_FP32 ? 4 : 2;
    /* out_bytes: the output as a buffer of its own (a stage's received input);
     * act_input: what the layer keeps per micro-batch when its stage
     * recomputes — a block its output, the embedding and head everything
     * (they are not recomputed); the embedding and head fill it in from act */
    row->out_bytes = kind == 2 ? 0 : grained(N * cfg->d_model * es, grain);
    row->act_input = kind == 1 ? grained(N * cfg->d_model * es, grain) : 0;
}

/* Isolated rows for the three layer shapes at (prec, batch); iso[k] for kind k. */
static int isolate_shapes(const ms_config *cfg, int prec, int batch, const int want[3], ms_layer_row iso[3],
                          const ms_trial_opts *o, char *err, size_t errlen)
{
    int nl = cfg->n_layer + 2;
    int idx[3] = { 0, 1, nl - 1 };
    ms_config c = *cfg;
    c.precision = prec;
    c.batch = batch;
    /* Without the emulated cap: bytes are what is measured, and a layer that
     * alone overflows the emulated device must still get its row. */
    c.gpu_mem = 0;
    for (int k = 0; k < 3; k++) {
        if (!want[k]) continue;
        if (o->progress)
            fprintf(o->progress, "profile: measuring %s in isolation (%s, micro-batch %d)\n", kind_name(k),
                    ms_precision_name(prec), batch);
        int rc = ms_isolate_layer(&c, idx[k], &iso[k], err, errlen);
        if (rc) return rc;
    }
    return MS_OK;
}

int ms_trial_run(const ms_config *cfg, const ms_trial_opts *o, ms_trial_result *r)
{
    memset(r, 0, sizeof *r);
    ms_config c = *cfg;
    c.precision = (ms_precision)o->precisions[0];
    c.batch = o->batches[0];
    int nl = c.n_layer + 2;
    trial_ctx ctx = { .r = r, .o = o, .n_layers = nl };
    ctx.by_cat = calloc((size_t)nl, sizeof *ctx.by_cat);
    ms_profile *p = &r->prof;
    p->rows = calloc((size_t)nl * o->n_prec * o->n_batch, sizeof *p->rows);
    if (!ctx.by_cat || !p->rows) { snprintf(r->err, sizeof r->err, "out of host memory"); free(ctx.by_cat); return MS_EFAIL; }
    snprintf(p->model, sizeof p->model, "%s", c.preset[0] ? c.preset : "custom");
    p->n_layers = nl;
    p->seq_len = c.seq_len;
    p->d_model = c.d_model;
    p->n_head = c.n_head;
    p->vocab = c.vocab;
    p->global_batch = c.batch * c.accum;

    /* 1. the trial */
    ms_session s;
    ms_session_hooks hooks = { alloc_hook, &ctx, on_device };
    int rc = ms_session_open(&s, &c, &hooks);
    if (rc == MS_EFAIL && !s.dev.ops) { /* device or config: nothing ran */
        snprintf(r->err, sizeof r->err, "%s", s.err);
        ms_session_close(&s);
        free(ctx.by_cat);
        return MS_EFAIL;
    }
    s.measure = 1;
    double t_sum = 0;
    int step_now = 0;       /* the step the trial is in (an OOM names it) */
    for (int i = 0; rc == MS_OK && i < o->steps; i++) {
        step_now = i + 1;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = ms_session_step(&s);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (i > 0 || o->steps == 1) t_sum += ms;
        if (rc == MS_OK) r->step_ms = t_sum / (o->steps > 1 ? i : 1);
        if (rc == MS_OK && o->progress)
            fprintf(o->progress, "profile: trial step %d/%d on %s: loss %.4f, peak %zu bytes\n", i + 1, o->steps,
                    s.dev.name, s.last_loss, s.dev.peak_total);
    }
    /* a single step's times include allocating every buffer: time again, warm */
    if (rc == MS_OK && o->steps == 1) {
        rc = ms_session_timing_pass(&s);
        if (rc == MS_OK && o->progress) fprintf(o->progress, "profile: timing pass on warm buffers\n");
    }
    int oom = rc == MS_EOOM;
    if (rc == MS_EFAIL) {
        snprintf(r->err, sizeof r->err, "%s", s.err);
        if (ctx.tracing) ms_trace_stop();
        ms_session_close(&s);
        free(ctx.by_cat);
        return MS_EFAIL;
    }
    snprintf(p->device, sizeof p->device, "%.31s", s.dev.name);
    p->capacity = s.dev.capacity == SIZE_MAX ? 0 : s.dev.capacity;
    p->peak = s.dev.peak_total - ctx.tracer_bytes;
    p->fits = !oom;
    /* how far the step got: forward of layers < fwd_done, backward of layers >= bwd_from */
    int fwd_done = nl, bwd_from = 0, opt_done = !oom;
    if (oom) {
        const ms_dev_oom *x = &s.dev.oom;
        snprintf(r->oom_msg, sizeof r->oom_msg, "%s", s.oom_msg);
        ms_oom_info *oi = &p->oom;
        oi->happened = 1;
        oi->layer = x->layer;
        snprintf(oi->layer_name, sizeof oi->layer_name, "%s", x->layer >= 0 && x->layer < nl ? s.model.layers[x->layer].name : "");
        oi->phase = x->phase;
        oi->step = step_now;
        oi->category = x->cat;
        oi->requested = x->requested;
        oi->capacity = x->capacity;
        for (int k = 0; k < MS_CAT_N; k++) oi->live_by_cat[k] = x->live[k];
        oi->n_live_layers = nl;
        oi->live_by_layer = calloc((size_t)nl, sizeof(uint64_t));
        if (oi->live_by_layer)
            for (int i = 0; i < nl; i++) oi->live_by_layer[i] = s.dev.live_layer[i];
        else
            oi->n_live_layers = 0;
        snprintf(oi->what, sizeof oi->what, "%s", x->what);
        if (x->phase == MS_PH_INIT) { fwd_done = 0; bwd_from = nl; }
        else if (x->phase == MS_PH_FORWARD) { fwd_done = x->layer; bwd_from = nl; }
        else if (x->phase == MS_PH_BACKWARD) { bwd_from = x->layer + 1; }
    }
    p->reserve = s.dev.live[MS_CAT_RESERVE] - ctx.tracer_bytes;
    if (ctx.tracer_bytes) {
        size_t used = strlen(r->check.detail);
        if (used < sizeof r->check.detail)
            snprintf(r->check.detail + used, sizeof r->check.detail - used,
                     "CUPTI's own buffers took %llu bytes: in the trial's reserve, not in the profile's; ",
                     (unsigned long long)ctx.tracer_bytes);
    }
    /* 2. rows of the trial's own precision and batch, from what it saw */
    ms_layer_row *rows = p->rows;
    size_t dres = s.scr.buf[MS_TR_DRES] ? ms_dev_size_of(&s.dev, s.scr.buf[MS_TR_DRES]) : 0;
    double total_params = 0;
    for (int i = 0; i < nl; i++) total_params += (double)s.model.layers[i].n_params;
    int want[3] = { 0, 0, 0 };
    int missing[MS_MAX_LAYERS] = { 0 };
    for (int i = 0; i < nl; i++) {
        ms_layer_row *row = &rows[i];
        row_init(row, &c, i, nl, c.precision, c.batch, s.dev.grain);
        row->param = ctx.by_cat[i][MS_CAT_PARAM];
        row->master = ctx.by_cat[i][MS_CAT_MASTER];
        row->grad = ctx.by_cat[i][MS_CAT_GRAD];
        row->optim = ctx.by_cat[i][MS_CAT_OPTIM];
        row->act = ctx.by_cat[i][MS_CAT_ACT];
        if (row->kind[0] != 'b') row->act_input = row->act;
        /* per micro-batch: the sums cover the micro-batches that finished
         * (the one an OOM interrupted counts for the layers it reached) */
        row->fwd_ms = s.fwd_ms[i] / (i < fwd_done && fwd_done < nl ? s.mb_fwd + 1 : (s.mb_fwd ? s.mb_fwd : 1));
        int bwd_cut = oom && s.dev.oom.phase == MS_PH_BACKWARD && i >= bwd_from;
        row->bwd_ms = s.bwd_ms[i] / (bwd_cut ? s.mb_bwd + 1 : (s.mb_bwd ? s.mb_bwd : 1));
        /* the arena is sized by the largest need so far: a layer's own need, rounded like the arena */
        size_t g = s.dev.grain;
        row->transient_fwd = s.need_fwd[i] ? (s.need_fwd[i] + g - 1) / g * g : 0;
        row->transient_bwd = i >= bwd_from ? dres + (s.need_bwd[i] ? (s.need_bwd[i] + g - 1) / g * g : 0) : 0;
        /* the optimizer's time is measured for the whole step and shared by parameter count */
        row->opt_ms = opt_done ? s.opt_ms * (double)s.model.layers[i].n_params / total_params : 0;
        int complete = i < fwd_done && i >= bwd_from && opt_done;
        if (!complete) {
            missing[i] = 1;
            want[i == 0 ? 0 : i == nl - 1 ? 2 : 1] = 1;
        }
    }
    if (ctx.tracing) finish_trace(&ctx, p);
    ms_session_close(&s);
    free(ctx.by_cat);

    /* 3. complete the rows the trial did not reach */
    ms_layer_row iso[3];
    rc = isolate_shapes(&c, c.precision, c.batch, want, iso, o, r->err, sizeof r->err);
    if (rc) return MS_EFAIL;
    for (int i = 0; i < nl; i++) {
        if (!missing[i]) continue;
        ms_layer_row *row = &rows[i];
        const ms_layer_row *src = &iso[i == 0 ? 0 : i == nl - 1 ? 2 : 1];
        row->source = MS_ROW_ISOLATED;
        if (i >= fwd_done) {
            row->act = src->act;
            row->act_input = src->act_input;
            row->transient_fwd = src->transient_fwd;
            row->fwd_ms = src->fwd_ms;
        }
        if (i < bwd_from) { row->grad = src->grad; row->transient_bwd = src->transient_bwd; row->bwd_ms = src->bwd_ms; }
        if (!opt_done) { row->optim = src->optim; row->opt_ms = src->opt_ms; }
        if (!row->param && !row->master) { row->param = src->param; row->master = src->master; }
    }
    p->n_rows = nl;
    /* 4. other precisions and micro-batch sizes, in isolation */
    for (int pi = 0; pi < o->n_prec; pi++)
        for (int bi = 0; bi < o->n_batch; bi++) {
            if (pi == 0 && bi == 0) continue;
            int all[3] = { 1, 1, 1 };
            rc = isolate_shapes(&c, o->precisions[pi], o->batches[bi], all, iso, o, r->err, sizeof r->err);
            if (rc) return MS_EFAIL;
            for (int i = 0; i < nl; i++) {
                ms_layer_row *row = &p->rows[p->n_rows++];
                *row = iso[i == 0 ? 0 : i == nl - 1 ? 2 : 1];
                row->layer = i;
                if (i > 0 && i < nl - 1) snprintf(row->name, sizeof row->name, "block %d", i);
            }
        }
    return oom ? MS_EOOM : MS_OK;
}

void ms_trial_free(ms_trial_result *r)
{
    ms_profile_free(&r->prof);
    free(r->events);
    memset(r, 0, sizeof *r);
}

int ms_profile_measure(ms_profile *p, const ms_config *cfg, int precision, int batch, FILE *progress, char *err,
                       size_t errlen)
{
    if (ms_profile_find(p, 0, precision, batch)) return MS_OK;
    int nl = cfg->n_layer + 2, all[3] = { 1, 1, 1 };
    ms_layer_row iso[3];
    ms_trial_opts o;
    memset(&o, 0, sizeof o);
    o.progress = progress;
    if (isolate_shapes(cfg, precision, batch, all, iso, &o, err, errlen)) return MS_EFAIL;
    ms_layer_row *rows = realloc(p->rows, (size_t)(p->n_rows + nl) * sizeof *rows);
    if (!rows) { snprintf(err, errlen, "out of host memory"); return MS_EFAIL; }
    p->rows = rows;
    for (int i = 0; i < nl; i++) {
        ms_layer_row *row = &p->rows[p->n_rows++];
        *row = iso[i == 0 ? 0 : i == nl - 1 ? 2 : 1];
        row->layer = i;
        if (i > 0 && i < nl - 1) snprintf(row->name, sizeof row->name, "block %d", i);
    }
    return MS_OK;
}
