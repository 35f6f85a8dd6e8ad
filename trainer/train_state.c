/* train_state.c — checkpoints of a model being trained, wherever its layers
 * live: weights, AdamW state, batchnorm running statistics, the step, the
 * optimizer counters, the loss scale and the data position. A checkpoint
 * written by a single-device run can be loaded by a pipeline and back. */
#include "trainer/train_state.h"
#include "trainer/checkpoint.h"
#include "trainer/ckpt_parts.h"
#include "trainer/job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


/* Host copies of everything a checkpoint holds, as sections. */
typedef struct ckpt_buf {
    int n;
    ms_ckpt_section *sec;
    char (*names)[40];
    int64_t state[4];   /* opt.t, opt.skipped, step, reserved */
} ckpt_buf;

static int ckpt_sections(const ms_train_state *s, ckpt_buf *b)
{
    ms_model *m = s->model;
    int max = 3 * m->n_layers + 1;
    b->sec = calloc((size_t)max, sizeof *b->sec);
    b->names = calloc((size_t)max, sizeof *b->names);
    if (!b->sec || !b->names) return -1;
    b->n = 0;
    snprintf(b->names[b->n], 40, "state");
    b->sec[b->n++] = (ms_ckpt_section){ b->names[0], b->state, sizeof b->state };
    for (int i = 0; i < m->n_layers; i++) {
        ms_layer *L = &m->layers[i];
        size_t nb[3] = { L->n_params * 4, L->n_params * 8, L->bn_run ? ms_layer_bn_bytes(m, L) : 0 };
        const char *tag[3] = { "w", "mv", "bn" };
        for (int k = 0; k < 3; k++) {
            if (!nb[k]) continue;
            snprintf(b->names[b->n], 40, "layer%d.%s", i, tag[k]);
            void *h = malloc(nb[k]);
            if (!h) return -1;
            b->sec[b->n] = (ms_ckpt_section){ b->names[b->n], h, nb[k] };
            b->n++;
        }
    }
    return 0;
}

static void ckpt_free(ckpt_buf *b)
{
    for (int i = 1; i < b->n; i++) free(b->sec[i].data);
    free(b->sec);
    free(b->names);
}

void ms_train_state_meta(const ms_train_state *s, ms_ckpt_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    /* the job's config: a replica's accum is its share of the micro-batches,
     * so the global batch is that times the replicas, as one process has it */
    ms_config job = *s->cfg;
    if (s->replicas > 1) job.accum *= s->replicas;
    meta->model_hash = ms_config_model_hash(&job);
    meta->job = ms_job_fingerprint(&job, ms_data_hash(s->data));
    meta->step = *s->step;
    meta->data_cursor = ms_data_cursor(s->data);
    meta->loss_scale = s->opt->loss_scale;
    meta->good_steps = s->opt->good_steps;
    char *ini = ms_config_to_ini(&job);
    if (ini) { snprintf(meta->config_ini, sizeof meta->config_ini, "%s", ini); free(ini); }
}

int ms_train_state_save(const ms_train_state *s, const char *path, char *err, size_t errlen)
{
    ms_model *m = s->model;
    ckpt_buf b = { 0 };
    int rc = MS_EFAIL;
    if (ckpt_sections(s, &b)) { snprintf(err, errlen, "out of host memory"); goto out; }
    b.state[0] = s->opt->t;
    b.state[1] = s->opt->skipped;
    b.state[2] = *s->step;
    for (int i = 0, k = 1; i < m->n_layers; i++) {
        ms_layer *L = &m->layers[i];
        if (ms_opt_ensure_state(m, L)) { rc = MS_EOOM; goto out; }
        if (ms_dev_d2h(L->dev, b.sec[k++].data, L->w, L->n_params * 4)) goto out;
        if (ms_dev_d2h(L->dev, b.sec[k++].data, L->mv, L->n_params * 8)) goto out;
        if (L->bn_run && ms_dev_d2h(L->dev, b.sec[k].data, L->bn_run, b.sec[k].bytes)) goto out;
        if (L->bn_run) k++;
    }
    ms_ckpt_meta meta;
    ms_train_state_meta(s, &meta);
    if (ms_ckpt_save(path, &meta, b.sec, b.n, err, errlen)) goto out;
    rc = MS_OK;
out:
    ckpt_free(&b);
    return rc;
}

/* ms_train_state_load, with *foreign = 1 when the file is a sound
 * checkpoint of another model or job. */
static int load(const ms_train_state *s, const char *path, int *foreign, char *err, size_t errlen)
{
    ms_model *m = s->model;
    ckpt_buf b = { 0 };
    int rc = MS_EFAIL;
    *foreign = 0;
    /* a checkpoint written by ranks, as parts: any layout reads any other */
    if (ms_ckpt_is_parts(path)) return ms_ckpt_parts_load(s, NULL, path, foreign, err, errlen);
    if (ckpt_sections(s, &b)) { snprintf(err, errlen, "out of host memory"); goto out; }
    ms_ckpt_meta meta;
    ms_train_state_meta(s, &meta); /* what the file must match: the model and the job */
    int lrc = ms_ckpt_load(path, &meta, b.sec, b.n, err, errlen);
    if (lrc) {
        *foreign = lrc == MS_CKPT_FOREIGN;
        goto out;
    }
    for (int i = 0, k = 1; i < m->n_layers; i++) {
        ms_layer *L = &m->layers[i];
        if (ms_opt_ensure_state(m, L)) { rc = MS_EOOM; goto out; }
        if (ms_dev_h2d(L->dev, L->w, b.sec[k++].data, L->n_params * 4)) goto out;
        if (ms_dev_h2d(L->dev, L->mv, b.sec[k++].data, L->n_params * 8)) goto out;
        if (L->bn_run && ms_dev_h2d(L->dev, L->bn_run, b.sec[k].data, b.sec[k].bytes)) goto out;
        if (L->bn_run) k++;
        if (L->wc != (void *)L->w) L->dev->ops->cast(&L->dev->k, m->dt, L->wc, MS_F32, L->w, L->n_copy);
        if (ms_dev_sync(L->dev)) goto out;
    }
    s->opt->t = (int)b.state[0];
    s->opt->skipped = (int)b.state[1];
    *s->step = (int)b.state[2];
    s->opt->loss_scale = meta.loss_scale;
    s->opt->good_steps = meta.good_steps;
    if (ms_data_seek(s->data, meta.data_cursor)) { snprintf(err, errlen, "checkpoint's data position is past the data"); goto out; }
    rc = MS_OK;
out:
    ckpt_free(&b);
    return rc;
}

int ms_train_state_load(const ms_train_state *s, const char *path, char *err, size_t errlen)
{
    int foreign;
    return load(s, path, &foreign, err, errlen);
}

int ms_train_state_resume(const ms_train_state *s, const char *dir, char *path_out, size_t len, char *note,
                          size_t notelen, char *err, size_t errlen)
{
    if (note && notelen) note[0] = 0;
    int64_t before = INT64_MAX;
    int skipped = 0;
    for (;;) {
        int found = ms_ckpt_latest_before(dir, before, path_out, len);
        if (found < 0) {
            snprintf(err, errlen, "cannot read checkpoint directory %s", dir);
            return MS_EFAIL;
        }
        if (found == 0) {
            if (skipped) snprintf(err, errlen, "no sound checkpoint in %s (%d corrupt: %s)", dir, skipped, note);
            else snprintf(err, errlen, "no checkpoint in %s", dir);
            return MS_EFAIL;
        }
        int foreign;
        char why[1024];
        int rc = load(s, path_out, &foreign, why, sizeof why);
        if (rc == MS_OK) ms_ckpt_sweep(dir); /* this run owns the folder now: what saves cut short left goes */
        if (rc == MS_OK || rc == MS_EOOM || foreign) {
            if (rc != MS_OK) snprintf(err, errlen, "%s", why);
            return rc;
        }
        /* corrupt or unreadable (a write cut short, a bad disk): an older
         * checkpoint of the same run is the next best place to resume */
        if (note && !skipped) snprintf(note, notelen, "skipped %s (%s)", path_out, why);
        skipped++;
        const char *base = strrchr(path_out, '/');
        long long step = -1;
        if (!base || sscanf(base, "/step-%lld.ckpt", &step) != 1 || step < 0 || step >= before) {
            snprintf(err, errlen, "%s", why);
            return MS_EFAIL;
        }
        before = step;
    }
}

int ms_train_state_checkpoint(const ms_train_state *s, const char *dir, char *path_out, size_t len, char *err,
                              size_t errlen)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
        return MS_EFAIL;
    }
    snprintf(path_out, len, "%s/step-%08d.ckpt", dir, *s->step);
    return ms_train_state_save(s, path_out, err, errlen);
}
