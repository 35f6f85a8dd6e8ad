/* train_state.c — checkpoints of a model being trained, wherever its layers
 * live: weights, AdamW state, batchnorm running statistics, the step, the
 * optimizer counters, the loss scale and the data position. A checkpoint
 * written by a single-device run can be loaded by a pipeline and back. */
#include "trainer/train_state.h"
#include "trainer/checkpoint.h"
#include "trainer/ckpt_parts.h"

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
    meta->model_hash = ms_config_model_hash(s->cfg);
    meta->step = *s->step;
    meta->data_cursor = ms_data_cursor(s->data);
    meta->loss_scale = s->opt->loss_scale;
    meta->good_steps = s->opt->good_steps;
    char *ini = ms_config_to_ini(s->cfg);
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

int ms_train_state_load(const ms_train_state *s, const char *path, char *err, size_t errlen)
{
    ms_model *m = s->model;
    ckpt_buf b = { 0 };
    int rc = MS_EFAIL;
    /* a checkpoint written by ranks, as parts: any layout reads any other */
    if (ms_ckpt_is_parts(path)) return ms_ckpt_parts_load(s, NULL, path, err, errlen);
    if (ckpt_sections(s, &b)) { snprintf(err, errlen, "out of host memory"); goto out; }
    ms_ckpt_meta meta;
    ms_train_state_meta(s, &meta); /* what the file must match: the model (its hash and config) */
    if (ms_ckpt_load(path, &meta, b.sec, b.n, err, errlen)) goto out;
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
