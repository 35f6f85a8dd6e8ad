/* program_record.c — a program's record pass (program.h;
 * docs/program-record.md): the program run once more, uncapped, with each
 * of its profile's layers a stage of its own on the trial's device, so
 * that every crossing a split could make is made and measured, and the
 * planner replays it under any placement. */
#include "run/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/ledger.h"
#include "bridge/record.h"
#include "planner/record_replay.h"
#include "trainer/device.h"
#include "vocab/errf.h"

/* The bridge's plan of the pass: layer i on stage i, all on one device, no
 * cap, every crossing said (record). It is no sequential plan, so it hands
 * nothing on (ms_plan_attach_program): whatever record the profile held
 * before, the pass measures afresh. NULL when out of memory. */
static json_t *all_apart(const ms_profile *prof, const char *device)
{
    const int n = prof->n_layers;
    ms_plan pl = { .n_layers = n, .n_devices = 1, .n_stages = n, .devices = calloc(1, sizeof *pl.devices),
                   .stages = calloc((size_t)n, sizeof *pl.stages) };
    json_t *cfg = NULL;
    if (pl.devices && pl.stages && ms_plan_attach_program(&pl, prof) == 0) {
        snprintf(pl.devices[0].name, sizeof pl.devices[0].name, "%s", device);
        for (int l = 0; l < n; l++) pl.stages[l] = (ms_plan_stage){ .device = 0, .first = l, .last = l };
        cfg = ms_program_plan_config(&pl);
        if (cfg && json_object_set_new(cfg, "record", json_true()) != 0) {
            json_decref(cfg);
            cfg = NULL;
        }
    }
    ms_plan_free(&pl);
    return cfg;
}

int ms_program_record_pass(const ms_program_record_args *a, ms_profile *prof, char *why, size_t whylen)
{
    why[0] = '\0';
    if (prof->n_layers < 2)
        return ms_errf(why, whylen, "the program is one layer: there is no split to measure");
    /* each layer a ledger device of its own (a plan's rerun has at most MS_MAX_STAGES stages;
       the record pass is no plan the planner made, and holds as many as the program has) */
    if (prof->n_layers > MSL_MAX_DEVICES)
        return ms_errf(why, whylen, "%d layers, and a record pass runs each as a stage of its own (at most %d)",
                       prof->n_layers, MSL_MAX_DEVICES);
    char bdir[4096], err[1024] = "", label[64];
    if (ms_program_bridge_dir(bdir, sizeof bdir, err, sizeof err)) return ms_errf(why, whylen, "%s", err);
    int gpu = strncmp(prof->device, "cuda", 4) == 0;
    /* the trial's own device: its model's (cuda:N, or the CPU) */
    json_t *cfg = json_pack("{s:I, s:s, s:s, s:o}", "steps", (json_int_t)a->steps, "pass", "record", "trace", "tensors",
                            "plan", all_apart(prof, gpu ? prof->device : "cpu"));
    if (!cfg) return ms_errf(why, whylen, "out of memory");
    if (!a->quiet)   /* what it is for: docs/program-record.md */
        fprintf(stderr, "%s: record pass: the %d layers each a stage of its own, uncapped\n", a->who,
                prof->n_layers);
    snprintf(label, sizeof label, "%s: record pass", a->who);
    msb_trace t;
    msb_trace_init(&t);
    msb_exit ex;
    int rc = -1;
    int inject = gpu && !a->no_cupti && ms_cuda_gpu_count() > 0;
    if (ms_program_pass(a->prog, bdir, cfg, "train", inject, label, a->quiet || a->brief, a->json, a->events, &t, &ex,
                        err, sizeof err) != 0) {
        ms_errf(why, whylen, "%s", err);
    } else if (ex.interrupted) {
        ms_errf(why, whylen, "the record pass was interrupted");
    } else if (ms_program_failure(&t, &ex, err, sizeof err)) {
        ms_errf(why, whylen, "%s", err);
    } else if (t.oom.happened || t.n_steps < 1 || (!t.done && !ex.signaled)) {
        char exc[401];
        msb_utf8_copy(exc, sizeof exc, t.done_exc, 400);   /* cut at a character: the why goes to JSON */
        ms_errf(why, whylen, "the record pass %s%s%s", t.oom.happened ? "ran out of memory" :
                "ended before a whole step", exc[0] ? ": " : "", exc);
    } else {
        ms_prog_record *r = NULL;
        /* one the planner would refuse (more storages than a record holds) is none */
        if (msb_build_record(&t, prof->n_layers, &r, err, sizeof err) == 0 && ms_record_check(r, err, sizeof err)) {
            ms_prog_record_free(r);
            r = NULL;
            ms_errf(why, whylen, "the record pass's record cannot be used: %s", err);
        } else if (r) {
            ms_prog_record_free(prof->record);
            prof->record = r;
            rc = 0;
            /* the libraries' buffers, which the trial's allocator record counts as some
               layer's storages and the record pass (operators' outputs) does not: every
               GPU stage holds them, so the reserve does */
            uint64_t libs;
            if (gpu && msb_record_untracked(&t, &libs) == 0) {
                uint64_t had = a->libs < prof->reserve ? a->libs : prof->reserve;
                prof->reserve = prof->reserve - had + libs;
                prof->reserve_allocator = libs;      /* held by the allocator: a rerun's peak tells it apart */
                if (!a->quiet && !a->brief)
                    fprintf(stderr, "%s: record pass: %.1f MiB the allocator holds beyond the tensors (library "
                            "buffers) in each GPU stage's reserve\n", a->who, (double)libs / (1 << 20));
            }
        } else {
            ms_errf(why, whylen, "%s", err);
        }
    }
    msb_trace_free(&t);
    json_decref(cfg);
    return rc;
}
