/* config.c — presets, "key=value" overrides and validation of ms_config.
 * Per-key parsing and ranges live in the key table (config_table.c); this
 * file adds the presets and the rules that involve several fields. */
#include "trainer/config.h"
#include "trainer/config_keys.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Emulated capacities of the seed17 presets.
 *  seed17 (bf16, micro-batch 15, the shape issue 15's benchmark names):
 *    parameters (fp32 master + bf16 copy) take 8.02 GiB, the embedding's
 *    saved activations 0.12 GiB, each block's 1.76 GiB (2 MiB-rounded).
 *    Blocks 1..17 end at 38.06 GiB + the reserve (CUDA context, cuBLASLt
 *    workspace, CUPTI: ~0.6 GiB on an H200), block 18 would end at 39.8 GiB
 *    + reserve: a 40 GiB GPU (an A100-40GB, say) overflows in the forward
 *    pass of block 18 for any reserve from 0.3 to 1.5 GiB. (Block 17 until
 *    blocks stopped saving norm2's output, at 1.88 GiB a block.)
 *  seed17-cpu: the CPU twin runs out in the forward pass of block 17:
 *    blocks 1..16 end at 19.21 MiB, block 17 at 20.15 MiB; the capacity is
 *    20 MiB (21 MiB before blocks stopped saving norm2's output).
 * tests/unit/test_trainer.c checks both (the GPU one by simulating the
 * allocation sequence with the 2 MiB granularity). */
#define MS_SEED17_GPU_MEM ((size_t)40 << 30)
#define MS_SEED17_CPU_MEM ((size_t)20 << 20)

const char *const ms_preset_names[] = {"tiny", "gpt2-small", "seed17", "seed17-cpu", NULL};

/* The values every preset shares; each preset then sets its shape. */
static void preset_defaults(ms_config *c) {
    memset(c, 0, sizeof *c);
    c->mlp_ratio = 4;
    c->norm = MS_NORM_LAYER;
    c->tied = 0;
    c->bn_momentum = 0.1f;
    c->accum = 1;
    c->steps = 20;
    c->lr = 3e-4f;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->weight_decay = 0.1f;
    c->grad_clip = 1.0f;
    c->precision = MS_PREC_FP32;
    c->loss_scale = 65536.0f;
    c->loss_scale_window = 1000;
    c->head_chunk = 0;
    c->matmul_pick = 1;
    c->cuda_graph = 1;
    c->launch_ahead = 1;
    c->seed = 1337;
    c->log_every = 0;
    c->data_format = MS_DATA_AUTO;
    snprintf(c->device, sizeof c->device, "cpu");
    c->gpu_mem = 0;
    c->checkpoint_every = 0;
    c->resume = 0;
}

static void shape(ms_config *c, int n_layer, int d_model, int n_head, int seq_len, int vocab, int batch) {
    c->n_layer = n_layer;
    c->d_model = d_model;
    c->n_head = n_head;
    c->seq_len = seq_len;
    c->vocab = vocab;
    c->batch = batch;
}

int ms_config_preset(ms_config *c, const char *name, char *err, size_t errlen) {
    ms_config p;
    preset_defaults(&p);
    if (!name) name = "";
    if (!strcmp(name, "tiny")) {
        shape(&p, 2, 32, 4, 32, 256, 4);
        p.steps = 300;
        p.lr = 1e-3f;
    } else if (!strcmp(name, "gpt2-small")) {
        shape(&p, 12, 768, 12, 1024, 50304, 16);
        p.precision = MS_PREC_BF16;
        snprintf(p.device, sizeof p.device, "cuda:0");
    } else if (!strcmp(name, "seed17")) {
        shape(&p, 24, 2048, 16, 2048, 50304, 15);
        p.precision = MS_PREC_BF16;
        snprintf(p.device, sizeof p.device, "cuda:0");
        p.gpu_mem = MS_SEED17_GPU_MEM;
    } else if (!strcmp(name, "seed17-cpu")) {
        shape(&p, 20, 64, 4, 64, 256, 4);
        p.gpu_mem = MS_SEED17_CPU_MEM;
    } else {
        char list[128] = "";
        for (int i = 0; ms_preset_names[i]; i++) {
            if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
            strncat(list, ms_preset_names[i], sizeof list - strlen(list) - 1);
        }
        snprintf(err, errlen, "unknown preset '%s' (known: %s)", name, list);
        return -1;
    }
    snprintf(p.preset, sizeof p.preset, "%s", name);
    *c = p;
    return 0;
}

int ms_config_set(ms_config *c, const char *key_eq_value, char *err, size_t errlen) {
    if (!key_eq_value) key_eq_value = "";
    const char *eq = strchr(key_eq_value, '=');
    if (!eq) {
        snprintf(err, errlen, "'%s' is not key=value (e.g. model.n_layer=12)", key_eq_value);
        return -1;
    }
    char key[96];
    const char *a = key_eq_value, *b = eq;
    while (a < b && isspace((unsigned char)*a)) a++;
    while (b > a && isspace((unsigned char)b[-1])) b--;
    if (a == b) {
        snprintf(err, errlen, "'%s' has no key before '='", key_eq_value);
        return -1;
    }
    if ((size_t)(b - a) >= sizeof key) {
        snprintf(err, errlen, "key '%.40s...' is too long", a);
        return -1;
    }
    memcpy(key, a, (size_t)(b - a));
    key[b - a] = 0;
    const ms_config_key *k = ms_config_key_find(NULL, key, err, errlen);
    if (!k) return -1;
    return ms_config_key_parse(k, c, eq + 1, err, errlen);
}

int ms_config_validate(const ms_config *c, char *err, size_t errlen) {
    for (int i = 0; i < ms_config_key_count(); i++)
        if (ms_config_key_check(ms_config_key_at(i), c, err, errlen)) return -1;
    if (c->d_model % c->n_head) {
        snprintf(err, errlen, "model.d_model (%d) must be divisible by model.n_head (%d)", c->d_model,
                 c->n_head);
        return -1;
    }
    int head = c->d_model / c->n_head;
    if (head % 2) {
        snprintf(err, errlen, "head size d_model/n_head = %d/%d = %d must be even", c->d_model,
                 c->n_head, head);
        return -1;
    }
    /* kernels index B*T rows and B*T*V logits with 64-bit math, but B*T must fit an int */
    if ((long long)c->batch * c->seq_len > 0x7fffffffLL) {
        snprintf(err, errlen, "train.batch * model.seq_len = %lld is too large",
                 (long long)c->batch * c->seq_len);
        return -1;
    }
    if ((long long)c->mlp_ratio * c->d_model > 0x7fffffffLL) {
        snprintf(err, errlen, "model.mlp_ratio * model.d_model is too large");
        return -1;
    }
    if ((c->data_format == MS_DATA_TEXT || c->data_format == MS_DATA_U16) && !c->data_path[0]) {
        snprintf(err, errlen, "data.format = %s needs data.path", c->data_format == MS_DATA_TEXT ? "text" : "u16");
        return -1;
    }
    if (c->data_format == MS_DATA_BUILTIN && c->data_path[0]) {
        snprintf(err, errlen, "data.format = builtin but data.path is set ('%s'): clear one of them",
                 c->data_path);
        return -1;
    }
    if (c->data_format == MS_DATA_TEXT && c->vocab < 256) {
        snprintf(err, errlen, "data.format = text needs model.vocab >= 256 (one token per byte), not %d",
                 c->vocab);
        return -1;
    }
    if (c->resume && !c->checkpoint_dir[0]) {
        snprintf(err, errlen, "checkpoint.resume = 1 needs checkpoint.dir");
        return -1;
    }
    if (c->checkpoint_every > 0 && !c->checkpoint_dir[0]) {
        snprintf(err, errlen, "checkpoint.every = %d needs checkpoint.dir", c->checkpoint_every);
        return -1;
    }
    return 0;
}
