/* train_summary.c — `memsplit train --json` on one device (train_summary.h). */
#include "run/train_summary.h"
#include "run/records.h"

#include <math.h>
#include <stdint.h>

static json_t *device_json(const ms_device *d)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(d->name));
    json_object_set_new(o, "capacity_bytes", d->capacity == SIZE_MAX ? json_null() : json_integer((json_int_t)d->capacity));
    json_object_set_new(o, "peak_bytes", json_integer((json_int_t)d->peak_total));
    json_object_set_new(o, "peak_by_category", ms_run_cat_json(d->peak));
    json_object_set_new(o, "at_peak_by_category", ms_run_cat_json(d->at_peak));
    return o;
}

/* The model's shape, for FLOPs per token (bench/README.md) and for readers
 * that compare runs of the same shape. */
static json_t *shape_json(const ms_config *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "n_layer", json_integer(c->n_layer));
    json_object_set_new(o, "d_model", json_integer(c->d_model));
    json_object_set_new(o, "n_head", json_integer(c->n_head));
    json_object_set_new(o, "seq_len", json_integer(c->seq_len));
    json_object_set_new(o, "vocab", json_integer(c->vocab));
    json_object_set_new(o, "batch", json_integer(c->batch));
    json_object_set_new(o, "accum", json_integer(c->accum));
    json_object_set_new(o, "mlp_ratio", json_integer(c->mlp_ratio));
    json_object_set_new(o, "tied", json_boolean(c->tied));
    return o;
}

static json_t *graph_json(const ms_session *s)
{
    json_t *gj = json_object();
    json_object_set_new(gj, "enabled", json_boolean(s->use_graph));
    json_object_set_new(gj, "captures", json_integer(s->graph.captures));
    json_object_set_new(gj, "thrown_away", json_integer(s->graph.thrown));
    json_object_set_new(gj, "bytes", json_integer((json_int_t)s->graph.bytes));
    json_object_set_new(gj, "capture_ms", json_real(s->graph.capture_ms));
    json_object_set_new(gj, "launched_ahead", json_integer(s->launched_ahead));
    const char *no_graph = s->graph.why_not[0] ? s->graph.why_not
                           : s->use_graph && s->dev.backend != MS_BACKEND_CUDA ? "CUDA graphs need a GPU" : NULL;
    json_object_set_new(gj, "not_used", no_graph ? json_string(no_graph) : json_null());
    return gj;
}

static json_t *oom_json(const ms_session *s)
{
    const ms_dev_oom *x = &s->dev.oom;
    json_t *oj = json_object();
    json_object_set_new(oj, "layer", json_integer(x->layer));
    json_object_set_new(oj, "layer_name",
                        json_string(x->layer >= 0 && x->layer < s->model.n_layers ? s->model.layers[x->layer].name : ""));
    json_object_set_new(oj, "phase", json_string(ms_phase_name(x->phase)));
    json_object_set_new(oj, "category", json_string(ms_cat_name(x->cat)));
    json_object_set_new(oj, "requested_bytes", json_integer((json_int_t)x->requested));
    json_object_set_new(oj, "capacity_bytes", json_integer((json_int_t)x->capacity));
    json_object_set_new(oj, "live_bytes", ms_run_cat_json(x->live));
    return oj;
}

json_t *ms_train_summary(const ms_session *s, const ms_config *cfg, const ms_train_kt *kt, int rc,
                         const ms_train_stats *st)
{
    double tps = st->t_steady > 0 ? st->tokens_steady / st->t_steady : 0;
    json_t *o = json_object();
    json_object_set_new(o, "ok", json_boolean(rc == MS_OK));
    json_object_set_new(o, "preset", json_string(cfg->preset));
    json_object_set_new(o, "precision", json_string(ms_precision_name(cfg->precision)));
    json_object_set_new(o, "steps", json_integer(s->step));
    json_object_set_new(o, "steps_run", json_integer(st->steps_run));
    json_object_set_new(o, "loss_first", isnan(st->loss_first) ? json_null() : json_real(st->loss_first));
    json_object_set_new(o, "loss_last", isnan(st->loss_last) ? json_null() : json_real(st->loss_last));
    json_object_set(o, "losses", st->losses);
    json_object_set_new(o, "tokens_per_s", json_real(tps));
    json_object_set_new(o, "timed_steps", json_integer(st->timed_steps));
    json_object_set_new(o, "step_ms", json_real(st->timed_steps ? st->t_steady / st->timed_steps * 1e3 : 0.0));
    json_object_set_new(o, "tokens_per_step", json_integer((json_int_t)st->tokens_per_step));
    json_object_set_new(o, "shape", shape_json(cfg));
    json_object_set_new(o, "kernel_times", kt->path ? json_string(kt->path) : json_null());
    json_object_set_new(o, "kernel_times_error", kt->error[0] ? json_string(kt->error) : json_null());
    json_object_set_new(o, "skipped_steps", json_integer(s->opt.skipped));
    json_object_set_new(o, "loss_scale", json_real(s->opt.loss_scale));
    json_object_set_new(o, "cuda_graph", graph_json(s));
    json_t *pk = json_object(), *devs = json_array();
    if (s->dev.ops) {
        json_object_set_new(pk, s->dev.name, json_integer((json_int_t)s->dev.peak_total));
        json_array_append_new(devs, device_json(&s->dev));
        json_object_set_new(o, "peak_by_category", ms_run_cat_json(s->dev.peak));
    }
    json_object_set_new(o, "peak_bytes", pk);
    json_object_set_new(o, "devices", devs);
    json_object_set_new(o, "oom", rc == MS_EOOM ? oom_json(s) : json_null());
    if (rc != MS_OK) json_object_set_new(o, "error", json_string(s->err));
    return o;
}
