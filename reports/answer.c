/* answer.c — a program's doctor run, read back as its answer (see
 * answer.h). The plan's JSON is read leniently: only the stages, their
 * devices and the program's layer names, each where it is well formed. */
#include "reports/answer.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "reports/grow.h"
#include "reports/run_facts.h"
#include "vocab/limits.h"
#include "vocab/plan_json.h"

typedef struct { int64_t id; int feasible; char *json; int oom; } newest_plan;

static int keep_newest(const ms_plan_info *pl, void *ctx)
{
    newest_plan *np = ctx;
    if (pl->id <= np->id) return 0;
    char *copy = pl->plan_json ? strdup(pl->plan_json) : NULL;
    if (pl->plan_json && !copy) { np->oom = 1; return 1; }
    free(np->json);
    np->id = pl->id;
    np->feasible = pl->feasible;
    np->json = copy;
    return 0;
}

typedef struct { ms_device_peak *d; int n, cap, oom; } peaks;

static int add_peak(const ms_device_peak *d, void *ctx)
{
    peaks *p = ctx;
    if (ms_grow((void **)&p->d, &p->cap, p->n, sizeof *p->d, 8)) { p->oom = 1; return 1; }
    p->d[p->n++] = *d;
    return 0;
}

typedef struct { int n, first_step, last_step; double first_loss, last_loss, sum_ms; } steps;

static int add_step(const ms_step_rec *s, void *ctx)
{
    steps *a = ctx;
    if (a->n++ == 0) { a->first_step = s->step; a->first_loss = s->loss; }
    a->last_step = s->step;
    a->last_loss = s->loss;
    a->sum_ms += s->ms;
    return 0;
}

static int count_recovery(const ms_recovery_rec *r, void *ctx)
{
    (void)r;
    (*(int *)ctx)++;
    return 0;
}

/* The plan's stages in module paths: names from the plan's own
 * program.layer_names, else from the trial's rows. */
static int read_stages(ms_answer *a, const char *text)
{
    ms_plan pl;
    if (ms_plan_read_loose(text, &pl) != 0) return 0;   /* unreadable: no stages to show */
    int nn = pl.layer_names ? pl.n_layers : 0;
    const char **names = NULL;
    if (nn) {
        names = calloc((size_t)nn, sizeof *names);
        for (int i = 0; names && i < nn; i++) names[i] = pl.layer_names[i];
    } else if (a->has_trial && a->trial.n_layers > 0 && a->trial.n_layers <= MS_MAX_LAYERS) {
        nn = a->trial.n_layers;
        names = calloc((size_t)nn, sizeof *names);
        if (names) rf_layer_names(&a->trial, names, nn);
    }
    int n = pl.n_stages > 0 ? pl.n_stages : 0;
    a->stages = calloc(n ? (size_t)n : 1, sizeof *a->stages);
    if (!a->stages) {
        free(names);
        ms_plan_free(&pl);
        return -1;
    }
    if (!names) nn = 0;
    for (int i = 0; i < n; i++) {
        const ms_plan_stage *st = &pl.stages[i];
        if (st->device < 0) continue;
        ms_answer_stage *s = &a->stages[a->n_stages];
        s->device = st->device;
        s->first = st->first;
        s->last = st->last;
        snprintf(s->device_name, sizeof s->device_name, "device %d", s->device);
        if (s->device < pl.n_devices && pl.devices[s->device].name[0]) {
            snprintf(s->device_name, sizeof s->device_name, "%s", pl.devices[s->device].name);
            s->capacity = pl.devices[s->device].capacity;
        }
        rf_layer_span(names, nn, s->first, s->last, s->modules, sizeof s->modules);
        a->n_stages++;
    }
    free(names);
    ms_plan_free(&pl);
    return 0;
}

void ms_answer_free(ms_answer *a)
{
    if (!a) return;
    if (a->has_trial) ms_profile_free(&a->trial);
    free(a->stages);
    free(a->dev);
    memset(a, 0, sizeof *a);
}

int ms_answer_load(ms_db *db, int64_t run, ms_answer *a)
{
    memset(a, 0, sizeof *a);
    ms_run_info *r = malloc(sizeof *r);
    if (!r || ms_db_get_run(db, run, r) != 0) { free(r); return -1; }
    int doctor = strcmp(r->kind, "doctor") == 0;
    snprintf(a->state, sizeof a->state, "%s", ms_run_state(r));
    int64_t *kid = NULL;
    int n_kids = doctor ? rf_child_runs(db, run, &kid) : 0;
    newest_plan np = { 0 };
    peaks pk = { 0 };
    int ret = n_kids < 0 ? -1 : 0;
    if (ret == 0 && doctor) ret = ms_db_list_plans(db, run, keep_newest, &np);
    if (ret == 0 && doctor) ret = ms_db_list_recoveries(db, run, count_recovery, &a->n_recoveries);
    for (int i = 0; ret == 0 && i < n_kids; i++) {
        if (ms_db_get_run(db, kid[i], r) != 0) { ret = -1; break; }
        if (r->has_profile && !a->has_trial) {
            char err[256];
            if (ms_db_load_profile(db, r->id, &a->trial, err, sizeof err) != 0) { ret = -1; break; }
            a->has_trial = 1;
            a->trial_run = r->id;
        }
        if (ms_db_list_plans(db, r->id, keep_newest, &np) != 0 ||
            ms_db_list_recoveries(db, r->id, count_recovery, &a->n_recoveries) != 0) { ret = -1; break; }
        peaks here = { 0 };
        steps st = { 0 };
        if (ms_db_list_device_peaks(db, r->id, add_peak, &here) != 0 || here.oom ||
            ms_db_list_steps(db, r->id, add_step, &st) != 0) {
            free(here.d);
            ret = -1;
            break;
        }
        if (here.n) {   /* the last training that measured its devices */
            free(pk.d);
            pk = here;
            a->train_run = r->id;
        } else {
            free(here.d);
        }
        if (st.n) {
            a->n_steps = st.n;
            a->first_step = st.first_step;
            a->last_step = st.last_step;
            a->first_loss = st.first_loss;
            a->last_loss = st.last_loss;
            a->mean_ms = st.sum_ms / st.n;
            if (!a->train_run) a->train_run = r->id;
        }
    }
    if (np.oom) ret = -1;
    /* a program: its trial says so, or (no trial recorded) its plan does */
    int program = a->has_trial ? rf_is_program(&a->trial) : 0;
    if (ret == 0 && !a->has_trial && np.json) {
        json_t *j = json_loads(np.json, 0, NULL);
        program = json_is_object(json_object_get(j, "program"));
        json_decref(j);
    }
    if (ret == 0 && doctor && program) {
        a->run = run;
        a->plan_id = np.id;
        a->plan_feasible = np.feasible;
        a->dev = pk.d;
        a->n_dev = pk.n;
        pk.d = NULL;
        if (np.id && read_stages(a, np.json) != 0) ret = -1;
    }
    free(pk.d);
    free(np.json);
    free(kid);
    free(r);
    if (ret != 0 || !doctor || !program) {
        ms_answer_free(a);
        return ret != 0 ? -1 : 0;
    }
    return 1;
}
