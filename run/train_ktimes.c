/* train_ktimes.c — the --kernel-times window of `memsplit train`.
 * Contract: train_ktimes.h. */
#include "run/train_ktimes.h"
#include "profiler/kernel_trace.h"
#include "vocab/errf.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* the longest kernels named in FILE, beside the family sums */
#define KT_TOP 15

void ms_train_kt_init(ms_train_kt *kt)
{
    memset(kt, 0, sizeof *kt);
    kt->steps = 3;
}

int ms_train_kt_check(ms_train_kt *kt, const ms_config *cfg, int done_steps, char *err, size_t errlen)
{
    if (!kt->path) return 0;
    if (strncmp(cfg->device, "cuda", 4) != 0)
        return ms_errf(err, errlen, "--kernel-times traces CUDA kernels: it needs a cuda device, not '%s'",
                       cfg->device);
    if (kt->steps < 1) return ms_errf(err, errlen, "--kernel-steps must be at least 1");
    if (cfg->steps - done_steps < kt->steps + 1)
        return ms_errf(err, errlen,
                       "--kernel-steps %d needs at least %d steps to run (the first allocates and is not "
                       "traced); %d left",
                       kt->steps, kt->steps + 1, cfg->steps - done_steps);
    kt->from = cfg->steps - kt->steps;
    return 0;
}

int ms_train_kt_traced(const ms_train_kt *kt, int step)
{
    return kt->path && step >= kt->from;
}

void ms_train_kt_before_step(ms_train_kt *kt, int step)
{
    if (!kt->path || kt->on || kt->done || kt->error[0] || step != kt->from) return;
    if (ms_ktrace_start(kt->error, sizeof kt->error) != 0) {
        fprintf(stderr, "memsplit train: no kernel times: %s\n", kt->error);
        return;
    }
    kt->on = 1;
    kt->t0 = ms_ktrace_now();
}

void ms_train_kt_after_step(ms_train_kt *kt, double dt_s)
{
    if (!kt->on) return;
    kt->t1 = ms_ktrace_now();
    kt->wall_s += dt_s;
    kt->completed++;
}

int ms_train_kt_finish(ms_train_kt *kt, const ms_config *cfg, const char *dev_name, size_t tokens_per_step,
                       char *err, size_t errlen)
{
    if (!kt->path) return 0;
    ms_ktimes k;
    ms_ktimes_init(&k);
    uint64_t dropped = 0;
    if (kt->on) {
        kt->on = 0;
        kt->done = 1;
        char why[512];
        if (ms_ktrace_stop(&k, &dropped, why, sizeof why) != 0 && !kt->error[0])
            snprintf(kt->error, sizeof kt->error, "%s", why);
    }
    if (!kt->completed && !kt->error[0])
        snprintf(kt->error, sizeof kt->error, "training ended before a traced step completed");
    json_t *o = NULL;
    if (kt->completed) o = ms_ktimes_summary(&k, kt->completed, kt->t0, kt->t1, (uint64_t)(kt->wall_s * 1e9), KT_TOP);
    if (!o) o = json_object();
    json_object_set_new(o, "impl", json_string("memsplit"));
    json_object_set_new(o, "preset", json_string(cfg->preset));
    json_object_set_new(o, "precision", json_string(ms_precision_name(cfg->precision)));
    json_object_set_new(o, "device", json_string(dev_name ? dev_name : ""));
    json_object_set_new(o, "first_traced_step", json_integer(kt->from + 1));
    json_object_set_new(o, "traced_steps", json_integer(kt->completed));
    double step_ms = json_number_value(json_object_get(o, "step_ms"));
    json_object_set_new(o, "traced_tokens_per_s", json_real(step_ms > 0 ? tokens_per_step / (step_ms / 1e3) : 0.0));
    json_object_set_new(o, "records", json_integer(k.n));
    json_object_set_new(o, "dropped_records", json_integer((json_int_t)dropped));
    json_object_set_new(o, "error", kt->error[0] ? json_string(kt->error) : json_null());
    /* The intervals themselves, in kernel_times.h's event form (names, events), so a
     * step's kernels can be read in order beside another implementation's. */
    json_t *ev = kt->completed ? ms_ktimes_events_json(&k, kt->completed, (uint64_t)(kt->wall_s * 1e9)) : NULL;
    if (ev) {
        json_object_set(o, "names", json_object_get(ev, "names"));
        json_object_set(o, "events", json_object_get(ev, "events"));
        json_decref(ev);
    }
    ms_ktimes_free(&k);
    int rc = json_dump_file(o, kt->path, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (rc != 0) return ms_errf(err, errlen, "cannot write the kernel times to %s", kt->path);
    return 0;
}
