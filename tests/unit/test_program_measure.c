/* test_program_measure.c — run/program.h ms_program_measure and the rerun's
 * device rows: a stage alone on its GPU is measured by the device's own
 * counters, and its peak is given in its two parts, the caching allocator's
 * peak and what the GPU held beyond it, each beside its prediction (the
 * figures of an H100 run over cuda:0 and the CPU, where the two parts were
 * off by opposite signs: docs/bridge.md); the ledger's breakdown, which
 * follows only the parameters' tensors there, is not given as the peak's.
 * Stages sharing a device keep the ledger's breakdown, and no parts. The
 * parts are kept in the run database and shown by memsplit report (the
 * terminal, its JSON, the HTML table). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reports/html_report.h"
#include "reports/report_json.h"
#include "reports/term_report.h"
#include "run/program.h"

static ms_plan_device devs_real[2] = { { "cuda:0", 1208450560 }, { "cpu", 1208450560 } };
static ms_plan_device devs_virtual[2] = { { "cuda:0", 1208450560 }, { "cuda:0", 1208450560 } };

/* the realdev packed plan: embed, rnn1 on device 0; rnn2, head on device 1 */
static void make_plan(ms_plan *pl, ms_plan_stage *st, ms_plan_device *devs)
{
    memset(pl, 0, sizeof *pl);
    memset(st, 0, 2 * sizeof *st);
    pl->n_devices = 2;
    pl->devices = devs;
    pl->n_stages = 2;
    pl->stages = st;
    const uint64_t b0[MS_CAT_N] = { [MS_CAT_PARAM] = 6569984, [MS_CAT_OPTIM] = 13139968, [MS_CAT_ACT] = 129628160,
                                    [MS_CAT_TRANSIENT] = 94510592, [MS_CAT_RESERVE] = 872218624 };
    const uint64_t b1[MS_CAT_N] = { [MS_CAT_PARAM] = 8930304, [MS_CAT_GRAD] = 525312, [MS_CAT_OPTIM] = 17860608,
                                    [MS_CAT_ACT] = 170928640, [MS_CAT_TRANSIENT] = 47185920,
                                    [MS_CAT_RESERVE] = 872218624 };
    for (int s = 0; s < 2; s++) {
        st[s].device = s;
        st[s].first = 2 * s;
        st[s].last = 2 * s + 1;
        memcpy(st[s].bytes, s ? b1 : b0, sizeof b0);
        for (int c = 0; c < MS_CAT_N; c++) st[s].peak += st[s].bytes[c];
    }
}

/* one step, the ledger's stage peaks (statics on stage 0), and cuda:0's counters: with_device 1,
 * those of cuda:0 alone under stage 0; 2, those of a device both stages share (small figures the
 * measure must not use) */
static void make_trace(msb_trace *t, int with_device)
{
    msb_trace_init(t);
    t->n_steps = 1;
    t->steps = calloc(1, sizeof *t->steps);
    assert_non_null(t->steps);
    msb_step *s = &t->steps[0];
    s->n_stage_peaks = 2;
    s->stage_peaks[0] = 26279936;
    s->stage_peaks[1] = with_device == 1 ? 0 : 300000000;
    s->stage_peak_cats = calloc(2, sizeof *s->stage_peak_cats);
    assert_non_null(s->stage_peak_cats);
    s->stage_peak_cats[0][MS_CAT_PARAM] = 6569984;
    s->stage_peak_cats[0][MS_CAT_GRAD] = 6569984;
    s->stage_peak_cats[0][MS_CAT_OPTIM] = 13139968;
    s->stage_peak_cats[1][MS_CAT_ACT] = with_device == 1 ? 0 : 300000000;
    if (with_device) {
        s->n_device_peaks = 1;
        snprintf(s->device_names[0], sizeof s->device_names[0], "cuda:0");
        s->device_peaks[0] = with_device == 1 ? 287729664 : 999;
        s->device_context[0] = with_device == 1 ? 671383040 : 1;
    }
}

/* a rerun of the plan over devs measured from such a trace, the plan's reserve holding
 * reserve_allocator bytes of library buffers (the caller frees it: done()) */
static ms_program_run *measured(ms_plan *pl, ms_plan_stage *st, ms_plan_device *devs, int with_device,
                                uint64_t reserve_allocator)
{
    make_plan(pl, st, devs);
    pl->reserve_allocator = reserve_allocator;
    ms_program_run *r = calloc(1, sizeof *r);
    assert_non_null(r);
    make_trace(&r->trace, with_device);
    ms_program_measure(pl, &r->trace, r);
    return r;
}

static void done(ms_program_run *r)
{
    msb_trace_free(&r->trace);
    free(r);
}

static json_t *device_json(const ms_program_run *r, int s)
{
    json_t *o = ms_program_run_json(r);
    assert_non_null(o);
    json_t *d = json_incref(json_array_get(json_object_get(o, "devices"), (size_t)s));
    json_decref(o);
    assert_non_null(d);
    return d;
}

/* the devices' table as the terminal gets it (the caller frees it) */
static char *printed(const ms_program_run *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    ms_program_print_devices(f, r);
    assert_int_equal(fclose(f), 0);
    return text;
}

static void a_stage_alone_on_its_gpu_gives_its_peaks_two_parts(void **state)
{
    (void)state;
    ms_plan pl;
    ms_plan_stage st[2];
    ms_program_run *r = measured(&pl, st, devs_real, 1, 0);
    const ms_program_device *d = &r->dev[0];
    assert_true(d->own_gpu);
    assert_int_equal(d->allocator_peak, 287729664);
    assert_int_equal(d->beyond, 671383040);
    assert_int_equal(d->measured, 287729664 + 671383040);
    assert_int_equal(d->predicted, 1116067328);
    assert_true(d->gap < -0.140 && d->gap > -0.141);      /* -14.06%, the H100's */
    assert_false(d->has_cats);          /* the ledger saw the parameters' tensors only there */
    assert_false(r->dev[1].own_gpu);    /* the CPU stage: not measured */
    assert_int_equal(r->dev[1].measured, 0);

    json_t *j = device_json(r, 0);
    assert_int_equal(json_integer_value(json_object_get(j, "measured_allocator_peak_bytes")), 287729664);
    assert_int_equal(json_integer_value(json_object_get(j, "measured_beyond_allocator_bytes")), 671383040);
    assert_true(json_is_null(json_object_get(j, "measured_by_category")));
    /* no library buffers in this plan's reserve: the allocator's part is the tensors, beyond is the reserve */
    assert_int_equal(json_integer_value(json_object_get(j, "predicted_allocator_peak_bytes")), 1116067328 - 872218624);
    assert_int_equal(json_integer_value(json_object_get(j, "predicted_beyond_allocator_bytes")), 872218624);
    json_decref(j);
    j = device_json(r, 1);
    assert_true(json_is_null(json_object_get(j, "measured_allocator_peak_bytes")));
    assert_true(json_is_null(json_object_get(j, "measured_peak_bytes")));
    json_decref(j);

    char *text = printed(r);
    assert_non_null(strstr(text, "  cuda:0: the allocator's peak 274.40 MiB (predicted 232.55 MiB), beyond it "
                                 "640.28 MiB (context and libraries; predicted 831.81 MiB)\n"));
    assert_null(strstr(text, "  cpu:"));
    free(text);
    done(r);
}

static void stages_sharing_a_device_keep_the_ledgers_breakdown(void **state)
{
    (void)state;
    ms_plan pl;
    ms_plan_stage st[2];
    ms_program_run *r = measured(&pl, st, devs_virtual, 2, 0);     /* the device's counters: both stages' */
    for (int s = 0; s < 2; s++) {
        assert_false(r->dev[s].own_gpu);
        assert_true(r->dev[s].has_cats);
        assert_int_equal(r->dev[s].measured, r->trace.steps[0].stage_peaks[s] + st[s].bytes[MS_CAT_RESERVE]);
        json_t *j = device_json(r, s);
        assert_true(json_is_null(json_object_get(j, "measured_beyond_allocator_bytes")));
        assert_true(json_is_object(json_object_get(j, "measured_by_category")));
        json_decref(j);
    }
    char *text = printed(r);
    assert_null(strstr(text, "allocator's peak"));
    free(text);
    done(r);
}

/* what a report prints of run (the caller frees it): 0 the terminal's, 1 the HTML page */
static char *reported(ms_db *db, int64_t run, int html)
{
    char *text = NULL, err[256];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    if (html) assert_int_equal(ms_html_report_run(f, db, run, err, sizeof err), 0);
    else assert_int_equal(ms_term_report_run(f, db, run, 100), 0);
    assert_int_equal(fclose(f), 0);
    return text;
}

static void the_parts_are_kept_and_reported(void **state)
{
    (void)state;
    ms_plan pl;
    ms_plan_stage st[2];
    ms_program_run *r = measured(&pl, st, devs_real, 1, 64u << 20);   /* 64 MiB of library buffers */
    assert_int_equal(r->dev[0].predicted_allocator_peak, 1116067328 - 872218624 + (64u << 20));
    assert_int_equal(r->dev[0].predicted_beyond, 872218624 - (64u << 20));
    char path[] = "/tmp/ms_measure_XXXXXX", err[256];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    ms_db *db = ms_db_open(path, 1, err, sizeof err);
    assert_non_null(db);
    int64_t run = ms_db_run_begin(db, "train", NULL, NULL, NULL, "shapes.py", 0);
    assert_true(run > 0);
    for (int s = 0; s < 2; s++) {
        ms_device_peak dp;
        ms_program_device_peak(&pl, r, s, &dp);
        assert_int_equal(dp.has_parts, s == 0);
        assert_int_equal(ms_db_add_device_peak(db, run, &dp), 0);
    }
    assert_int_equal(ms_db_run_finish(db, run, "ok"), 0);

    char *text = reported(db, run, 0);
    assert_non_null(strstr(text, "\n  the allocator's peak 274.40 MiB (predicted 296.55 MiB), beyond it "
                                 "640.28 MiB (context and libraries; predicted 767.81 MiB)\n"));
    assert_null(strstr(strstr(text, "allocator's peak") + 1, "allocator's peak"));    /* cuda:0's alone */
    free(text);

    json_t *j = ms_report_run_json(db, run);
    assert_non_null(j);
    json_t *d0 = json_array_get(json_object_get(j, "device_peaks"), 0), *d1 = json_array_get(json_object_get(j, "device_peaks"), 1);
    assert_int_equal(json_integer_value(json_object_get(d0, "measured_allocator_peak_bytes")), 287729664);
    assert_int_equal(json_integer_value(json_object_get(d0, "measured_beyond_allocator_bytes")), 671383040);
    assert_int_equal(json_integer_value(json_object_get(d0, "predicted_allocator_peak_bytes")),
                     1116067328 - 872218624 + (64u << 20));
    assert_int_equal(json_integer_value(json_object_get(d0, "predicted_beyond_allocator_bytes")),
                     872218624 - (64u << 20));
    assert_true(json_is_null(json_object_get(d1, "measured_allocator_peak_bytes")));
    json_decref(j);

    text = reported(db, run, 1);
    assert_non_null(strstr(text, "<tr data-device=\"0\" data-cat=\"allocator\">"));
    assert_non_null(strstr(text, "<tr data-device=\"0\" data-cat=\"beyond\">"));
    assert_null(strstr(text, "<tr data-device=\"1\" data-cat=\"allocator\">"));
    free(text);
    ms_db_close(db);
    unlink(path);
    done(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_parts_are_kept_and_reported),
        cmocka_unit_test(a_stage_alone_on_its_gpu_gives_its_peaks_two_parts),
        cmocka_unit_test(stages_sharing_a_device_keep_the_ledgers_breakdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
