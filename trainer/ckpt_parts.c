/* ckpt_parts.c — checkpoints as parts and a manifest (ckpt_parts.h). */
#include "trainer/ckpt_parts.h"
#include "vocab/tmpfile.h"
#include "trainer/checkpoint.h"
#include "vocab/json_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST "manifest.json"
#define FORMAT "memsplit-checkpoint-parts"

int ms_ckpt_is_parts(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- a part's sections: the one-file layout for layers [first, last] ---- */

enum { W = 0, MV = 1, BN = 2 };

typedef struct part_buf {
    int first, last, n;
    ms_ckpt_section *sec;
    char (*names)[40];
    int *at;              /* [(last - first + 1) * 3]: section of (layer, W/MV/BN), -1 none */
    int64_t state[4];     /* opt.t, opt.skipped, step, reserved (train_state.c) */
} part_buf;

static void part_free(part_buf *b)
{
    for (int i = 1; i < b->n; i++) free(b->sec[i].data);
    free(b->sec);
    free(b->names);
    free(b->at);
    memset(b, 0, sizeof *b);
}

static int part_alloc(const ms_model *m, int first, int last, part_buf *b)
{
    memset(b, 0, sizeof *b);
    int nl = last - first + 1;
    b->first = first;
    b->last = last;
    b->sec = calloc((size_t)(3 * nl + 1), sizeof *b->sec);
    b->names = calloc((size_t)(3 * nl + 1), sizeof *b->names);
    b->at = malloc((size_t)(3 * nl) * sizeof *b->at);
    if (!b->sec || !b->names || !b->at) return -1;
    snprintf(b->names[0], 40, "state");
    b->sec[b->n++] = (ms_ckpt_section){ b->names[0], b->state, sizeof b->state };
    for (int i = first; i <= last; i++) {
        const ms_layer *L = &m->layers[i];
        size_t nb[3] = { L->n_params * 4, L->n_params * 8, ms_layer_bn_bytes(m, L) };
        const char *tag[3] = { "w", "mv", "bn" };
        for (int k = 0; k < 3; k++) {
            b->at[(i - first) * 3 + k] = -1;
            if (!nb[k]) continue;
            snprintf(b->names[b->n], 40, "layer%d.%s", i, tag[k]);
            void *h = malloc(nb[k]);
            if (!h) return -1;
            b->at[(i - first) * 3 + k] = b->n;
            b->sec[b->n] = (ms_ckpt_section){ b->names[b->n], h, nb[k] };
            b->n++;
        }
    }
    return 0;
}

static void *part_data(const part_buf *b, int layer, int k)
{
    int j = b->at[(layer - b->first) * 3 + k];
    return j < 0 ? NULL : b->sec[j].data;
}

/* This process's share of layer L's m and v: [lo, hi) of each. */
static void mv_share(const ms_dist *D, const ms_layer *L, size_t *lo, size_t *hi)
{
    int sharded = D && D->zero && D->replicas > 1;
    *lo = sharded ? ms_shard_lo(L->n_params, D->replicas, D->replica) : 0;
    *hi = sharded ? ms_shard_hi(L->n_params, D->replicas, D->replica) : L->n_params;
}

/* ---- saving --------------------------------------------------------- */

/* Host copy of L's m and v (m[n] then v[n]) into mv: this rank's share, and
 * under ZeRO-1 every replica's chunks gathered (collective over the stage group). */
static int gather_mv(const ms_dist *D, ms_layer *L, float *mv)
{
    size_t n = L->n_params, lo, hi;
    mv_share(D, L, &lo, &hi);
    if (hi == n && lo == 0) return ms_dev_d2h(L->dev, mv, L->mv, n * 8);
    if (ms_dev_d2h(L->dev, mv + lo, L->mv, (hi - lo) * 4) || ms_dev_d2h(L->dev, mv + n + lo, L->mv + (hi - lo), (hi - lo) * 4))
        return -1;
    return D->dp_allgather_host(D->ctx, mv, n) || D->dp_allgather_host(D->ctx, mv + n, n) ? -1 : 0;
}

/* This rank's part: replica 0 of its stage writes it; under ZeRO-1 the other
 * replicas take part in the gathers. 0, or -1 with err. */
static int save_part(const ms_train_state *s, const ms_dist *D, int first, int last, const char *path, char *err,
                     size_t errlen)
{
    ms_model *m = s->model;
    int writer = D->replica == 0, sharded = D->zero && D->replicas > 1;
    if (!writer && !sharded) return 0;
    part_buf b;
    int rc = writer ? part_alloc(m, first, last, &b) : 0;
    float *scratch = NULL;
    for (int i = first; i <= last && !rc; i++) {
        ms_layer *L = &m->layers[i];
        /* never stepped: zeros, as a one-file save (a ZeRO-1 chunk is the caller's to allocate) */
        if (!L->mv && (sharded || ms_opt_ensure_state(m, L))) rc = -1;
        float *mv = writer ? part_data(&b, i, MV) : (scratch = realloc(scratch, L->n_params * 8));
        if (rc || !mv || gather_mv(D, L, mv)) rc = -1;
        if (!rc && writer && ms_dev_d2h(L->dev, part_data(&b, i, W), L->w, L->n_params * 4)) rc = -1;
        if (!rc && writer && L->bn_run && ms_dev_d2h(L->dev, part_data(&b, i, BN), L->bn_run, ms_layer_bn_bytes(m, L)))
            rc = -1;
    }
    free(scratch);
    if (rc) snprintf(err, errlen, "stage %d: cannot read its state for a checkpoint", D->stage);
    if (!rc && writer) {
        b.state[0] = s->opt->t;
        b.state[1] = s->opt->skipped;
        b.state[2] = *s->step;
        ms_ckpt_meta meta;
        ms_train_state_meta(s, &meta);
        rc = ms_ckpt_save(path, &meta, b.sec, b.n, err, errlen);
    }
    if (writer) part_free(&b);
    return rc;
}

/* Removes a checkpoint (file, or folder of parts); 0 or -1. Never follows
 * a symlink: one found at the name (planted there) is removed itself, and
 * the folder's entries are removed through the folder opened without
 * following, so nothing outside it is touched. */
static int remove_ckpt(const char *path)
{
    struct stat st;
    if (lstat(path, &st)) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    return rmdir(path);
}

static char *manifest_text(const ms_train_state *s, const ms_dist *D, const ms_ckpt_layout *lay)
{
    char hash[24], job[24];
    ms_ckpt_meta meta;
    ms_train_state_meta(s, &meta);
    snprintf(hash, sizeof hash, "%016" PRIx64, meta.model_hash);
    snprintf(job, sizeof job, "%016" PRIx64, meta.job);
    json_t *parts = json_array();
    for (int k = 0; k < lay->stages; k++) {
        char f[32];
        snprintf(f, sizeof f, "part-%03d.ckpt", k);
        json_array_append_new(parts, json_pack("{s:s, s:[ii]}", "file", f, "layers", lay->first[k], lay->last[k]));
    }
    json_t *o = json_pack("{s:s, s:i, s:I, s:s, s:s, s:{s:i, s:i, s:b}, s:o}", "format", FORMAT, "version", 1, "step",
                          (json_int_t)*s->step, "model_hash", hash, "job", job, "layout", "stages", lay->stages,
                          "replicas", D->replicas, "zero", D->zero && D->replicas > 1, "parts", parts);
    char *txt = o ? json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return txt;
}

int ms_ckpt_all_ok(const ms_dist *D, int ok)
{
    int *all = calloc((size_t)D->size, sizeof *all);
    int res = all && D->allgather(D->ctx, &ok, sizeof ok, all) == 0;
    for (int r = 0; res && r < D->size; r++) res = all[r];
    free(all);
    return res;
}

#define TMP_SUFFIX 16 /* ".tmp.XXXXXX" and its NUL, with room */

/* Collective: rank 0's suffix to every rank; 0, or -1 (out of host memory). */
static int share_suffix(const ms_dist *D, char *suffix)
{
    char *all = calloc((size_t)D->size, TMP_SUFFIX);
    int rc = all && D->allgather(D->ctx, suffix, TMP_SUFFIX, all) == 0 ? 0 : -1;
    if (!rc) memcpy(suffix, all, TMP_SUFFIX); /* rank 0's */
    suffix[TMP_SUFFIX - 1] = 0;
    free(all);
    return rc;
}

int ms_ckpt_parts_save(const ms_train_state *s, const ms_dist *D, const ms_ckpt_layout *lay, const char *dir,
                       char *path_out, size_t len, char *err, size_t errlen)
{
    char final[4096], tmp[4096 + 16], part[4096 + 48];
    err[0] = 0;
    snprintf(final, sizeof final, "%.4000s/step-%08d.ckpt", dir, *s->step);
    snprintf(path_out, len, "%s", final);
    /* rank 0 makes a new, empty step-N.ckpt.tmp.XXXXXX/ (a name nobody could
     * plant ahead: vocab/tmpfile.h) before anyone writes into it, and tells
     * the others its name */
    int ok = 1;
    char suffix[TMP_SUFFIX] = "";
    if (D->rank == 0) {
        if (mkdir(dir, 0777) && errno != EEXIST) ok = 0;
        if (ok && ms_tmp_mkdir(final, tmp, sizeof tmp)) ok = 0;
        if (!ok) snprintf(err, errlen, "cannot create a checkpoint folder in %s: %s", dir, strerror(errno));
        else snprintf(suffix, sizeof suffix, "%s", tmp + strlen(final));
    }
    if (share_suffix(D, suffix) || !ms_ckpt_all_ok(D, ok)) {
        if (D->rank) snprintf(err, errlen, "rank 0 could not create a checkpoint folder in %s", dir);
        return MS_EFAIL;
    }
    snprintf(tmp, sizeof tmp, "%s%s", final, suffix);
    int first = lay->first[D->stage], last = lay->last[D->stage];
    snprintf(part, sizeof part, "%s/part-%03d.ckpt", tmp, D->stage);
    ok = save_part(s, D, first, last, part, err, errlen) == 0;
    if (!ms_ckpt_all_ok(D, ok)) {
        if (ok) snprintf(err, errlen, "another rank could not write its part of %s", final);
        return MS_EFAIL;
    }
    /* every part is there: the manifest, then the folder's final name */
    ok = 1;
    if (D->rank == 0) {
        char mpath[4096 + 32], *txt = manifest_text(s, D, lay);
        snprintf(mpath, sizeof mpath, "%s/" MANIFEST, tmp);
        ok = txt && ms_ckpt_write_atomic(mpath, txt, strlen(txt), err, errlen) == 0;
        free(txt);
        /* the same step saved again (after a resume): the new one replaces it */
        char old[4096 + 8];
        snprintf(old, sizeof old, "%s.old", final);
        if (ok && access(final, F_OK) == 0) ok = rename(final, old) == 0;
        if (ok) ok = rename(tmp, final) == 0 && ms_ckpt_sync_parent(final) == 0;
        if (!ok && !err[0]) snprintf(err, errlen, "cannot finish checkpoint %s: %s", final, strerror(errno));
        remove_ckpt(old);
    }
    if (!ms_ckpt_all_ok(D, ok)) {
        if (D->rank) snprintf(err, errlen, "rank 0 could not finish checkpoint %s", final);
        return MS_EFAIL;
    }
    return MS_OK;
}

/* ---- loading -------------------------------------------------------- */

typedef struct part_ref {
    char file[4096 + 64];
    int first, last;
} part_ref;

/* The parts of a checkpoint: its manifest's, or the one file. *foreign = 1
 * when the manifest is sound but of another model or job. */
static int read_parts(const ms_train_state *s, const char *path, part_ref **out, int *n_out, int *foreign, char *err,
                      size_t errlen)
{
    const int nl = s->model->n_layers;
    if (!ms_ckpt_is_parts(path)) {
        *out = calloc(1, sizeof **out);
        if (!*out) return -1;
        snprintf((*out)->file, sizeof (*out)->file, "%s", path);
        (*out)->last = nl - 1;
        *n_out = 1;
        return 0;
    }
    char mpath[4096 + 32], inner[256];
    snprintf(mpath, sizeof mpath, "%.4000s/" MANIFEST, path);
    json_t *j = ms_json_read_path(mpath, inner, sizeof inner);
    if (!j) {
        snprintf(err, errlen, "checkpoint %s: %s", path, inner);
        return -1;
    }
    int rc = -1;
    const char *fmt = json_string_value(json_object_get(j, "format"));
    const char *hash = json_string_value(json_object_get(j, "model_hash"));
    const json_t *jj = json_object_get(j, "job");
    const char *job = json_string_value(jj);   /* null: a manifest from before the job fingerprint */
    const json_t *parts = json_object_get(j, "parts");
    ms_ckpt_meta meta;
    ms_train_state_meta(s, &meta);
    char want[24], want_job[24];
    snprintf(want, sizeof want, "%016" PRIx64, meta.model_hash);
    snprintf(want_job, sizeof want_job, "%016" PRIx64, meta.job);
    if (!fmt || strcmp(fmt, FORMAT) || json_integer_value(json_object_get(j, "version")) != 1 || !json_is_array(parts) ||
        !json_array_size(parts) || !hash || !(json_is_null(jj) || job)) {
        snprintf(err, errlen, "checkpoint %s: %s is not a manifest of parts (version 1)", path, MANIFEST);
    } else if (strcmp(hash, want)) {
        *foreign = 1;
        snprintf(err, errlen, "checkpoint %s is for a different model: model hash %s, this run %s", path, hash, want);
    } else if (job && strcmp(job, want_job)) {
        *foreign = 1;
        snprintf(err, errlen, "checkpoint '%s' belongs to another job: its fingerprint is %s, this run's %s (another "
                 "model config, seed, data or global batch; the split and the micro-batching may differ)", path, job,
                 want_job);
    } else if (!(*out = calloc(json_array_size(parts), sizeof **out))) {
        snprintf(err, errlen, "out of host memory");
    } else {
        int next = 0;
        *n_out = (int)json_array_size(parts);
        rc = 0;
        for (int k = 0; k < *n_out && !rc; k++) {
            const json_t *p = json_array_get(parts, (size_t)k), *ly = json_object_get(p, "layers");
            const char *f = json_string_value(json_object_get(p, "file"));
            long long a = json_integer_value(json_array_get(ly, 0)), b = json_integer_value(json_array_get(ly, 1));
            if (!f || strchr(f, '/') || json_array_size(ly) != 2 || a != next || b < a || b >= nl) {
                snprintf(err, errlen, "checkpoint %s: part %d does not continue a split of layers 0-%d", path, k, nl - 1);
                rc = -1;
                break;
            }
            snprintf((*out)[k].file, sizeof (*out)[k].file, "%.4000s/%s", path, f);
            (*out)[k].first = (int)a;
            (*out)[k].last = (int)b;
            next = (int)b + 1;
        }
        if (!rc && next != nl) {
            snprintf(err, errlen, "checkpoint %s: its parts end at layer %d of 0-%d", path, next - 1, nl - 1);
            rc = -1;
        }
        if (rc) free(*out);
    }
    json_decref(j);
    return rc;
}

/* Layer L from a loaded part onto its device. */
static int put_layer(const ms_train_state *s, const ms_dist *D, const part_buf *b, ms_layer *L)
{
    ms_model *m = s->model;
    size_t n = L->n_params, lo, hi;
    mv_share(D, L, &lo, &hi);
    if (!L->mv && (hi - lo != n || ms_opt_ensure_state(m, L))) return MS_EOOM; /* a chunk: the caller's */
    const float *mv = part_data(b, L->index, MV);
    int rc = ms_dev_h2d(L->dev, L->w, part_data(b, L->index, W), n * 4) ||
             ms_dev_h2d(L->dev, L->mv, mv + lo, (hi - lo) * 4) ||
             ms_dev_h2d(L->dev, L->mv + (hi - lo), mv + n + lo, (hi - lo) * 4);
    if (!rc && L->bn_run) rc = ms_dev_h2d(L->dev, L->bn_run, part_data(b, L->index, BN), ms_layer_bn_bytes(m, L));
    if (!rc && L->wc != (void *)L->w) L->dev->ops->cast(&L->dev->k, m->dt, L->wc, MS_F32, L->w, L->n_copy);
    return rc || ms_dev_sync(L->dev) ? MS_EFAIL : MS_OK;
}

int ms_ckpt_parts_load(const ms_train_state *s, const ms_dist *D, const char *path, int *foreign, char *err,
                       size_t errlen)
{
    ms_model *m = s->model;
    part_ref *parts = NULL;
    int n_parts = 0, loaded = 0, rc = MS_OK, other = 0;
    if (foreign) *foreign = 0;
    if (read_parts(s, path, &parts, &n_parts, foreign ? foreign : &other, err, errlen)) return MS_EFAIL;
    ms_ckpt_meta meta, first_meta;
    int64_t first_state[4] = { 0 };
    for (int k = 0; k < n_parts && rc == MS_OK; k++) {
        int here = 0;
        for (int i = parts[k].first; i <= parts[k].last; i++) here |= m->layers[i].dev != NULL;
        if (!here) continue;
        part_buf b;
        if (part_alloc(m, parts[k].first, parts[k].last, &b)) {
            snprintf(err, errlen, "out of host memory");
            rc = MS_EFAIL;
        } else {
            ms_train_state_meta(s, &meta); /* the model and job the part must be of */
            int lrc = ms_ckpt_load(parts[k].file, &meta, b.sec, b.n, err, errlen);
            if (lrc && foreign) *foreign = lrc == MS_CKPT_FOREIGN;
            if (lrc) rc = MS_EFAIL;
            else if (loaded && (meta.step != first_meta.step || memcmp(b.state, first_state, sizeof b.state))) {
                snprintf(err, errlen, "checkpoint %s: its parts are of different steps", path);
                rc = MS_EFAIL;
            }
            for (int i = parts[k].first; i <= parts[k].last && rc == MS_OK; i++)
                if (m->layers[i].dev) rc = put_layer(s, D, &b, &m->layers[i]);
            if (rc == MS_EOOM) snprintf(err, errlen, "no memory for the optimizer state being resumed");
            if (rc == MS_EFAIL && !err[0]) snprintf(err, errlen, "cannot copy %s onto its device", parts[k].file);
            if (!loaded) {
                first_meta = meta;
                memcpy(first_state, b.state, sizeof first_state);
            }
            loaded = 1;
            part_free(&b);
        }
    }
    free(parts);
    if (rc == MS_OK && !loaded) {
        snprintf(err, errlen, "checkpoint %s holds none of this process's layers", path);
        rc = MS_EFAIL;
    }
    if (rc != MS_OK) return rc;
    s->opt->t = (int)first_state[0];
    s->opt->skipped = (int)first_state[1];
    *s->step = (int)first_state[2];
    s->opt->loss_scale = first_meta.loss_scale;
    s->opt->good_steps = first_meta.good_steps;
    if (ms_data_seek(s->data, first_meta.data_cursor)) {
        snprintf(err, errlen, "checkpoint's data position is past the data");
        return MS_EFAIL;
    }
    return MS_OK;
}

/* ---- keeping the newest --------------------------------------------- */

/* "step-N.ckpt.tmp.XXXXXX" (or the old "step-N.ckpt.tmp") and
 * "step-N.ckpt.old": what a save cut short leaves. */
static int leftover(const char *name)
{
    const char *dot = strstr(name, ".ckpt");
    if (strncmp(name, "step-", 5) || !dot) return 0;
    char base[300];
    snprintf(base, sizeof base, "%.*s", (int)(dot + 5 - name), name);
    return ms_tmp_is_ours(name, base) || !strcmp(dot, ".ckpt.old");
}

void ms_ckpt_sweep(const char *dir)
{
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return;
    struct dirent *e;
    char p[4096 + 300];
    while ((e = readdir(d)))
        if (leftover(e->d_name)) {
            snprintf(p, sizeof p, "%.4000s/%s", dir, e->d_name);
            remove_ckpt(p);
        }
    closedir(d);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void ms_ckpt_prune(const char *dir, int keep)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char *names[4096];
    int n = 0;
    struct dirent *e;
    char p[4096 + 300];
    while ((e = readdir(d))) {
        long step;
        char tail[16] = "";
        if (sscanf(e->d_name, "step-%ld.ckp%15s", &step, tail) != 2) continue;
        if (!strcmp(tail, "t") && n < 4096) names[n++] = strdup(e->d_name);
        else if (leftover(e->d_name)) { /* a save cut short */
            snprintf(p, sizeof p, "%.4000s/%s", dir, e->d_name);
            remove_ckpt(p);
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name); /* zero-padded steps: name order is step order */
    for (int i = 0; i < n; i++) {
        if (names[i] && i + keep < n) {
            snprintf(p, sizeof p, "%.4000s/%s", dir, names[i]);
            remove_ckpt(p);
        }
        free(names[i]);
    }
}
