/* model.c — layer list, parameter layout, initial weights, activation layout. */
#include "trainer/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN_ELEMS 64  /* tensor offsets: 256 B in fp32, 128 B in 16-bit — enough for cuBLASLt */

static ms_tensor *add_tensor(ms_layer *L, const char *name, size_t rows, size_t cols, int lowp, float std, float c)
{
    ms_tensor *t = &L->t[L->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows;
    t->cols = cols;
    t->lowp = lowp;
    t->init_std = std;
    t->init_const = c;
    t->grad_whole = 0;
    return t;
}

/* Offsets: low-precision tensors first (so the compute copy is one prefix). */
static void layout(ms_layer *L)
{
    size_t off = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (int i = 0; i < L->n_tensors; i++) {
            ms_tensor *t = &L->t[i];
            if (t->lowp != pass) continue;
            t->off = off;
            off += (t->rows * t->cols + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
            if (pass == 1) L->n_copy = off;
        }
    L->n_params = off;
}

int ms_model_init(ms_model *m, const ms_config *cfg, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (ms_config_validate(cfg, err, errlen) != 0) return -1;
    m->cfg = *cfg;
    m->dt = cfg->precision == MS_PREC_FP32 ? MS_F32 : cfg->precision == MS_PREC_BF16 ? MS_BF16 : MS_F16;
    m->B = cfg->batch;
    m->T = cfg->seq_len;
    m->C = cfg->d_model;
    m->V = cfg->vocab;
    m->NH = cfg->n_head;
    m->H = cfg->mlp_ratio * cfg->d_model;
    m->n_layers = cfg->n_layer + 2;
    if (m->n_layers > MS_MAX_LAYERS) { /* validated above (the key's range); the arrays rely on it */
        snprintf(err, errlen, "model.n_layer: %d is out of range [1, %d]", cfg->n_layer, MS_MAX_BLOCKS);
        return -1;
    }
    m->layers = calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) { snprintf(err, errlen, "out of host memory"); return -1; }
    size_t C = (size_t)m->C, H = (size_t)m->H, V = (size_t)m->V, T = (size_t)m->T;
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)cfg->n_layer);
    for (int i = 0; i < m->n_layers; i++) {
        ms_layer *L = &m->layers[i];
        L->index = i;
        if (i == 0) {
            L->kind = MS_LAYER_EMBED;
            snprintf(L->name, sizeof L->name, "embed");
            add_tensor(L, "wte", V, C, 1, std, 0);
            add_tensor(L, "wpe", T, C, 1, 0.01f, 0);
        } else if (i <= cfg->n_layer) {
            L->kind = MS_LAYER_BLOCK;
            snprintf(L->name, sizeof L->name, "block %d", i);
            add_tensor(L, "qkv_w", 3 * C, C, 1, std, 0)->grad_whole = 1;
            add_tensor(L, "qkv_b", 1, 3 * C, 1, 0, 0);
            add_tensor(L, "att_w", C, C, 1, proj_std, 0)->grad_whole = 1;
            add_tensor(L, "att_b", 1, C, 1, 0, 0);
            add_tensor(L, "fc_w", H, C, 1, std, 0)->grad_whole = 1;
            add_tensor(L, "fc_b", 1, H, 1, 0, 0);
            add_tensor(L, "proj_w", C, H, 1, proj_std, 0)->grad_whole = 1;
            add_tensor(L, "proj_b", 1, C, 1, 0, 0);
            add_tensor(L, "ln1_w", 1, C, 0, 0, 1);
            add_tensor(L, "ln1_b", 1, C, 0, 0, 0);
            add_tensor(L, "ln2_w", 1, C, 0, 0, 1);
            add_tensor(L, "ln2_b", 1, C, 0, 0, 0);
        } else {
            L->kind = MS_LAYER_HEAD;
            snprintf(L->name, sizeof L->name, "head");
            if (!cfg->tied) add_tensor(L, "lm_w", V, C, 1, std, 0);
            add_tensor(L, "lnf_w", 1, C, 0, 0, 1);
            add_tensor(L, "lnf_b", 1, C, 0, 0, 0);
        }
        layout(L);
    }
    return 0;
}

int ms_layer_set_slots(ms_layer *L, int n)
{
    L->slots = calloc((size_t)n, sizeof *L->slots);
    if (!L->slots) return -1;
    L->n_slots = n;
    L->cur_slot = 0;
    L->slots[0] = L->a;
    return 0;
}

void ms_layer_select(ms_layer *L, int k)
{
    if (!L->slots || k == L->cur_slot) return;
    L->slots[L->cur_slot] = L->a;
    L->a = L->slots[k];
    L->cur_slot = k;
}

void ms_layer_free_slots(ms_layer *L)
{
    free(L->slots);
    L->slots = NULL;
    L->n_slots = 0;
}

void ms_model_free(ms_model *m)
{
    for (int i = 0; m->layers && i < m->n_layers; i++) ms_layer_free_slots(&m->layers[i]);
    free(m->layers);
    m->layers = NULL;
}

const ms_tensor *ms_layer_tensor(const ms_layer *L, const char *name)
{
    for (int i = 0; i < L->n_tensors; i++)
        if (strcmp(L->t[i].name, name) == 0) return &L->t[i];
    return NULL;
}

/* splitmix64: tiny, good enough for initial weights, identical everywhere. */
static uint64_t sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unif(uint64_t *s) { return ((sm64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

void ms_layer_init_host(const ms_model *m, const ms_layer *L, float *w)
{
    memset(w, 0, L->n_params * sizeof *w);
    for (int i = 0; i < L->n_tensors; i++) {
        const ms_tensor *t = &L->t[i];
        size_t n = t->rows * t->cols;
        if (t->init_std == 0) {
            for (size_t j = 0; j < n; j++) w[t->off + j] = t->init_const;
            continue;
        }
        uint64_t s = m->cfg.seed * 0x100000001B3ull ^ ((uint64_t)L->index << 20) ^ (uint64_t)i;
        for (size_t j = 0; j < n; j += 2) { /* Box-Muller, two normals per draw */
            double u1 = unif(&s), u2 = unif(&s), r = sqrt(-2.0 * log(u1));
            w[t->off + j] = (float)(r * cos(6.283185307179586 * u2) * t->init_std);
            if (j + 1 < n) w[t->off + j + 1] = (float)(r * sin(6.283185307179586 * u2) * t->init_std);
        }
    }
}

int ms_model_alloc_params(ms_model *m, int first, int last)
{
    for (int i = first; i <= last; i++) {
        ms_layer *L = &m->layers[i];
        ms_device *d = L->dev;
        ms_dev_where(d, i, MS_PH_INIT);
        int mixed = m->dt != MS_F32;
        L->w = ms_dev_alloc(d, L->n_params * 4, mixed ? MS_CAT_MASTER : MS_CAT_PARAM, "weights", 0);
        if (!L->w) return MS_EOOM;
        if (mixed && L->n_copy) {
            L->wc = ms_dev_alloc(d, L->n_copy * ms_dtype_size(m->dt), MS_CAT_PARAM, "weights (compute copy)", 0);
            if (!L->wc) return MS_EOOM;
        } else {
            L->wc = L->w;
        }
        if (ms_layer_bn_bytes(m, L)) {
            size_t n = ms_layer_bn_bytes(m, L) / 4;
            L->bn_run = ms_dev_alloc(d, n * 4, MS_CAT_PARAM, "batchnorm running stats", 0);
            if (!L->bn_run) return MS_EOOM;
            float *h = malloc(n * 4);
            if (!h) return MS_EFAIL;
            for (size_t j = 0; j < n; j++) h[j] = (j / (size_t)m->C) % 2 ? 1.0f : 0.0f; /* mean 0, var 1 */
            ms_dev_h2d(d, L->bn_run, h, n * 4);
            ms_dev_sync(d);
            free(h);
        }
        float *h = malloc(L->n_params * 4);
        if (!h) return MS_EFAIL;
        ms_layer_init_host(m, L, h);
        ms_dev_h2d(d, L->w, h, L->n_params * 4);
        if (mixed && L->n_copy) d->ops->cast(&d->k, m->dt, L->wc, MS_F32, L->w, L->n_copy);
        int s = ms_dev_sync(d);
        free(h);
        if (s) return MS_EFAIL;
    }
    return MS_OK;
}

/* Saved activations: what forward keeps so that backward can run.
 *   embed: tokens [N] int32, out [N,C]
 *   block: ln1 [N,C], qkv [N,3C], att [N,C], res2 [N,C],
 *          fc_pre [N,H], fc_gelu [N,H], out [N,C]     (dt)
 *          (not ln2, norm2's output: backward recomputes it from res2)
 *          ln1/ln2 mean+rstd: [N] each (layernorm) or [C] each (batchnorm),
 *          lse [B,nh,T] fp32 (attention's log-sum-exp)
 *   head:  targets [N] int32, lnf [N,C] (dt), lnf mean+rstd, losses [N] fp32
 * With N = B*T, each view rounded up to 256 bytes. For a block in layernorm:
 *   (7C + 2H)*N*es + 4*N*4 + B*nh*T*4 bytes (+ alignment). */
#define ALIGN_B 256
static size_t align_up(size_t bytes) { return (bytes + ALIGN_B - 1) / ALIGN_B * ALIGN_B; }

size_t ms_acts_layout(const ms_model *m, const ms_layer *L, int B, ms_acts *a, char *base)
{
    ms_acts tmp;
    if (!a) a = &tmp;
    memset(a, 0, sizeof *a);
    size_t N = (size_t)B * m->T, C = m->C, H = m->H, es = ms_dtype_size(m->dt), tot = 0;
    size_t stat = m->cfg.norm == MS_NORM_BATCH ? C : N;
#define VIEW(field, type, bytes) do { a->field = base ? (type)(void *)(base + tot) : NULL; tot += align_up(bytes); } while (0)
    switch (L->kind) {
    case MS_LAYER_EMBED:
        VIEW(tokens, int32_t *, N * 4);
        VIEW(out, void *, N * C * es);
        break;
    case MS_LAYER_BLOCK:
        VIEW(ln1, void *, N * C * es);
        VIEW(ln1_mean, float *, stat * 4);
        VIEW(ln1_rstd, float *, stat * 4);
        VIEW(qkv, void *, N * 3 * C * es);
        VIEW(att, void *, N * C * es);
        VIEW(lse, float *, (size_t)B * m->NH * m->T * 4);
        VIEW(res2, void *, N * C * es);
        VIEW(ln2_mean, float *, stat * 4);
        VIEW(ln2_rstd, float *, stat * 4);
        VIEW(fc_pre, void *, N * H * es);
        VIEW(fc_gelu, void *, N * H * es);
        VIEW(out, void *, N * C * es);
        break;
    case MS_LAYER_HEAD:
        VIEW(targets, int32_t *, N * 4);
        VIEW(lnf, void *, N * C * es);
        VIEW(lnf_mean, float *, stat * 4);
        VIEW(lnf_rstd, float *, stat * 4);
        VIEW(losses, float *, N * 4);
        break;
    }
#undef VIEW
    a->bytes = tot;
    return tot;
}

size_t ms_layer_bn_bytes(const ms_model *m, const ms_layer *L)
{
    if (m->cfg.norm != MS_NORM_BATCH || L->kind == MS_LAYER_EMBED) return 0;
    return (L->kind == MS_LAYER_BLOCK ? 4u : 2u) * (size_t)m->C * 4;
}

size_t ms_layer_act_bytes(const ms_model *m, const ms_layer *L, int B)
{
    return ms_acts_layout(m, L, B, NULL, NULL);
}
