/* profile.h — a measured profile: one row per (layer, precision, micro-batch
 * size), plus what the trial saw (capacity, peak, OOM). This is the only
 * thing the planner knows about a model, and what reports/ stores.
 *
 * Contract: plain data, no behaviour. Layer indices count the model's layer
 * list from 0 (the embedding); block i is layer i; the last layer is the head
 * (final norm + LM head + loss). All byte counts are exact bytes as the
 * trainer's tagged allocator accounted them; times are milliseconds per
 * micro-batch. JSON form: profile_json.h; SQLite form: reports/db.h. */
#ifndef MS_PROFILE_H
#define MS_PROFILE_H

#include <stddef.h>
#include <stdint.h>

/* Memory categories (DESIGN.md's vocabulary), in this order everywhere. */
typedef enum {
    MS_CAT_PARAM = 0,  /* weights as used in compute */
    MS_CAT_MASTER,     /* fp32 master weights under mixed precision */
    MS_CAT_GRAD,       /* weight gradients */
    MS_CAT_OPTIM,      /* AdamW m and v */
    MS_CAT_ACT,        /* saved for backward, per micro-batch */
    MS_CAT_TRANSIENT,  /* workspaces, scratch, activation gradients in flight */
    MS_CAT_COMM,       /* stage-to-stage buffers */
    MS_CAT_RESERVE,    /* context, library workspaces, profiler buffers */
    MS_CAT_N
} ms_cat;

typedef enum { MS_PH_INIT = 0, MS_PH_FORWARD, MS_PH_BACKWARD, MS_PH_OPTIMIZER, MS_PH_N } ms_phase;

typedef enum { MS_ROW_FULL = 0, MS_ROW_ISOLATED = 1 } ms_row_source;

const char *ms_cat_name(ms_cat c);        /* "param", "master", ... */
const char *ms_phase_name(ms_phase p);    /* "init", "forward", "backward", "optimizer" */
int ms_cat_parse(const char *s);          /* -1 if unknown */
int ms_phase_parse(const char *s);        /* -1 if unknown */

typedef struct ms_layer_row {
    int layer;              /* index in the layer list */
    char name[32];          /* "embed", "block 17", "head" */
    char kind[16];          /* "embed" | "block" | "head" */
    int precision;          /* ms_precision (trainer/config.h): 0 fp32, 1 bf16, 2 fp16 */
    int micro_batch;        /* sequences per micro-batch this row was measured at */
    int source;             /* ms_row_source */
    /* static bytes, independent of micro-batch size */
    uint64_t param, master, grad, optim;
    /* per micro-batch */
    uint64_t act;           /* saved in forward for backward */
    uint64_t act_input;     /* bytes of the layer's input kept when the layer is recomputed */
    uint64_t transient_fwd; /* peak transient bytes live while the layer runs forward */
    uint64_t transient_bwd; /* ... backward */
    uint64_t out_bytes;     /* the layer's output activation (crosses a stage boundary) */
    double fwd_ms, bwd_ms;  /* time per micro-batch */
    double opt_ms;          /* optimizer step time for this layer's parameters */
} ms_layer_row;

typedef struct ms_oom_info {
    int happened;
    int layer;              /* layer index, -1 outside any layer */
    char layer_name[32];
    int phase;              /* ms_phase */
    int category;           /* ms_cat of the failed request */
    uint64_t requested;     /* bytes asked for */
    uint64_t capacity;
    uint64_t live_by_cat[MS_CAT_N];
    /* live bytes per layer at that moment: live_by_layer[i] for layer i,
     * n_live_layers entries (owned by the profile) */
    int n_live_layers;
    uint64_t *live_by_layer;
    char what[48];          /* the tensor that was being allocated, e.g. "fc_pre" */
} ms_oom_info;

typedef struct ms_profile {
    char model[64];         /* preset or config name */
    int n_layers;           /* layers in the list (embedding + blocks + head) */
    int seq_len, d_model, n_head, vocab;
    int global_batch;       /* sequences per optimizer step in the trial */
    char device[32];        /* "cpu", "cuda:0" */
    uint64_t capacity;      /* bytes the trial's device had */
    uint64_t reserve;       /* bytes of the reserve category on that device */
    uint64_t peak;          /* measured peak bytes of the trial */
    int fits;               /* 1 if the trial finished without OOM */
    ms_oom_info oom;
    int n_rows;
    ms_layer_row *rows;     /* owned */
} ms_profile;

void ms_profile_free(ms_profile *p);
/* First row for (layer, precision, micro_batch), or NULL. */
const ms_layer_row *ms_profile_find(const ms_profile *p, int layer, int precision, int micro_batch);

#endif
