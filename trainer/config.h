/* config.h — a run's whole configuration: model shape, training, data,
 * device and checkpoint settings.
 *
 * Contract: ms_config_preset() fills a config from a named preset;
 * ms_config_load_ini() overlays an INI file; ms_config_set() overlays one
 * "key=value" (keys as "section.key" or the bare key, e.g. "model.n_layer"
 * or "n_layer"); ms_config_validate() checks ranges and cross-field rules.
 * Every function returns 0 on success or -1 with a one-line human message in
 * err (never aborts, never prints). Sizes accept "512MiB", "24GiB", "1.5GB"
 * or plain bytes (ms_parse_size). */
#ifndef MS_CONFIG_H
#define MS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/size.h"
#include "vocab/vocab.h"

typedef enum { MS_NORM_LAYER = 0, MS_NORM_BATCH = 1 } ms_norm;
typedef enum { MS_DATA_AUTO = 0, MS_DATA_TEXT = 1, MS_DATA_U16 = 2, MS_DATA_BUILTIN = 3 } ms_data_format;

#define MS_PATH_MAX 512

typedef struct ms_config {
    char preset[32];          /* preset the config started from ("" if none) */
    /* [model] */
    int n_layer;              /* transformer blocks */
    int d_model;              /* C */
    int n_head;               /* heads; d_model % n_head == 0 */
    int seq_len;              /* T: context length */
    int vocab;                /* V: embedding / head rows (may be padded above the data's vocabulary) */
    int mlp_ratio;            /* MLP hidden = mlp_ratio * d_model */
    ms_norm norm;             /* layernorm | batchnorm */
    int tied;                 /* 1: LM head shares the token embedding */
    float bn_momentum;        /* batchnorm running-statistics momentum */
    /* [train] */
    int batch;                /* micro-batch size (sequences) */
    int accum;                /* micro-batches accumulated per optimizer step */
    int steps;                /* optimizer steps */
    float lr, beta1, beta2, eps, weight_decay;
    float grad_clip;          /* global-norm clip, 0 = off */
    ms_precision precision;   /* fp32 | bf16 | fp16 */
    float loss_scale;         /* fp16: initial dynamic loss scale */
    int loss_scale_window;    /* fp16: good steps before the scale doubles */
    int head_chunk;           /* rows of logits computed at once in the fused head (0 = auto) */
    int matmul_pick;          /* 1: train times cuBLASLt's top algorithms per matmul shape in its first
                                 step and keeps the fastest (kernels/cuda/matmul.cu); 0: the heuristic's first */
    int cuda_graph;           /* 1: train replays each micro-batch as a CUDA graph from the second step on
                                 (trainer/step_graph.h); 0: launches every kernel from the host */
    int launch_ahead;         /* 1: with graphs, train queues the next step's first micro-batch before it
                                 reads a step's loss back (trainer/session.h) */
    uint64_t seed;
    int log_every;            /* progress line every N steps (0 = auto) */
    /* [data] */
    char data_path[MS_PATH_MAX];   /* "" = built-in deterministic corpus */
    ms_data_format data_format;    /* auto | text | u16 | builtin */
    /* [device] */
    char device[32];          /* "cpu" or "cuda:N" */
    size_t gpu_mem;           /* emulated capacity in bytes, 0 = the whole device */
    /* [checkpoint] */
    char checkpoint_dir[MS_PATH_MAX]; /* "" = no checkpoints */
    int checkpoint_every;     /* steps between checkpoints (0 = only at the end) */
    int resume;               /* 1: resume from the latest checkpoint in checkpoint_dir */
} ms_config;

/* Names of the presets, NULL-terminated. */
extern const char *const ms_preset_names[];

int ms_config_preset(ms_config *c, const char *name, char *err, size_t errlen);
int ms_config_load_ini(ms_config *c, const char *path, char *err, size_t errlen);
int ms_config_set(ms_config *c, const char *key_eq_value, char *err, size_t errlen);
int ms_config_validate(const ms_config *c, char *err, size_t errlen);

/* Writes the config as INI text (every key) to f-style buffer via callback-free
 * API: returns a malloc'd string the caller frees. Used for records and checkpoints. */
char *ms_config_to_ini(const ms_config *c);

#endif
