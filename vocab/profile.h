/* profile.h — a measured profile: one row per (layer, precision, micro-batch
 * size), plus what the trial saw (capacity, peak, OOM). This is the only
 * thing the planner knows about a model, and what reports/ stores. A row is
 * a row: the planner and the reports never ask which source made it.
 *
 * Contract: plain data, no behaviour. Layer indices count the model's layer
 * list from 0. For the built-in GPT, layer 0 is the embedding, block i is
 * layer i and the last layer is the head (final norm + LM head + loss). For
 * a program (the PyTorch bridge), layer 0 holds the modules that run before
 * its repeated block list, layer i the list's element i-1, and the last
 * layer the modules that run after it; names are the program's own module
 * paths. Byte counts are exact bytes as the accounting saw them (the
 * trainer's tagged allocator; the caching allocator's block sizes; the CPU
 * dispatcher's tensor bytes: see `accounting`); times are milliseconds per
 * micro-batch. Fields a source cannot know are 0 or "" (a program has no
 * vocab or seq_len). JSON form: profile_json.h; SQLite form: reports/db.h. */
#ifndef MS_PROFILE_H
#define MS_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/vocab.h"

/* Module paths and layer names: "block 17", "transformers.15",
 * "segment1,pos_emb" (a program's first layer names every module in it). */
#define MS_NAME_MAX 256
/* A program fingerprint: "fnv64:" + 16 hex digits, "" when none. */
#define MS_FINGERPRINT_MAX 40

typedef struct ms_layer_row {
    int layer;              /* index in the layer list */
    char name[MS_NAME_MAX]; /* "embed", "block 17", "head"; a program's module path(s) */
    char kind[16];          /* "embed" | "block" | "head" (built-in); "pre" | "block" | "post" (program) */
    int precision;          /* ms_precision (vocab.h): 0 fp32, 1 bf16, 2 fp16 */
    int micro_batch;        /* sequences per micro-batch this row was measured at */
    int source;             /* ms_row_source */
    /* static bytes, independent of micro-batch size */
    uint64_t param, master, grad, optim;
    /* per micro-batch */
    uint64_t act;           /* saved in forward for backward */
    uint64_t act_input;     /* bytes of the layer's input kept when the layer is recomputed */
    uint64_t transient_fwd; /* peak transient bytes live while the layer runs forward */
    uint64_t transient_bwd; /* ... backward (a program's: above everything live at the start of
                               the layer's backward, its own new gradients included) */
    uint64_t transient_opt; /* peak transient bytes of the optimizer step over this layer's
                               parameters (foreach AdamW's temporaries); 0 when none */
    uint64_t out_bytes;     /* the layer's output activation (crosses a stage boundary) */
    double fwd_ms, bwd_ms;  /* time per micro-batch */
    double opt_ms;          /* optimizer step time for this layer's parameters */
} ms_layer_row;

typedef struct ms_oom_info {
    int happened;
    int layer;              /* layer index, -1 outside any layer */
    char layer_name[MS_NAME_MAX];
    int phase;              /* ms_phase */
    int step;               /* the training step it happened in (1: the first); 0 unknown. A
                               later step's OOM has gradients and optimizer state live that the
                               first step's does not */
    int category;           /* ms_cat of the failed request */
    uint64_t requested;     /* bytes asked for */
    uint64_t capacity;
    uint64_t live_by_cat[MS_CAT_N];
    /* live bytes per layer at that moment: live_by_layer[i] for layer i,
     * n_live_layers entries (owned by the profile) */
    int n_live_layers;
    uint64_t *live_by_layer;
    char what[MS_NAME_MAX]; /* the tensor that was being allocated, e.g. "fc_pre"; for a
                               program, the innermost module running and its type,
                               e.g. "transformers.15.0.qkv (Linear)" */
} ms_oom_info;

/* A program's loss: what its own code computes from the model's outputs
 * after the forward, on the root device (bridge/rows.c measures it; the
 * sequential model, planner/sequential.c, places it). Per micro-batch. */
typedef struct ms_loss_row {
    int present;            /* 1: measured (a program); 0: none (the built-in model) */
    int made_in;            /* the layer whose modules made the model's outputs (the last
                               layer; 0 when a tied lm_head runs where its weight is) */
    uint64_t outputs;       /* the model's outputs: on the root device once the forward ends */
    uint64_t held;          /* what the loss holds when backward begins: the outputs still
                               referenced and what the loss saved for its backward */
    uint64_t transient_fwd; /* the loss's peak above what it holds */
    uint64_t transient_bwd; /* its backward's peak above everything live at its start */
    uint64_t carry;         /* bytes the program holds from one step into the next (the last
                               step's outputs and loss, its data), on the root device */
    uint64_t carry_loss;    /* of those, what is still live in the loss interval */
} ms_loss_row;

/* A program's record (docs/program-record.md): every storage of the record
 * pass, a run of the program in which each layer was a stage of its own on
 * one device, with the crossings the applier made between them (inputs
 * copied to a layer's stage, outputs back to its caller's, gradients back
 * the same way). A placement's stage peaks are this record replayed
 * (planner/record_replay.h). Positions are the order of the pass's memory
 * events. */
#define MS_REC_NEVER UINT32_MAX
typedef struct ms_rec_storage {
    int layer;              /* the layer whose stage held it (0: the root's, where the program's
                               own code between modules runs) */
    int cat;                /* ms_cat: its final category */
    uint64_t bytes;
    uint32_t t_alloc;       /* position of its allocation */
    uint32_t t_free;        /* position of its free; MS_REC_NEVER: live at the end */
    int32_t copy_of;        /* a crossing's copy: the storage it copied (an earlier index), which
                               is live when the copy is made; -1: not a copy */
} ms_rec_storage;

/* A moment of the record pass: positions t_begin..t_end-1 ran layer's
 * phase (ms_phase; layer -1: outside any layer; layer n_layers: the
 * program's own code after the model's forward, its loss), from one
 * transition to the next. Moments are in order and do not overlap; one may
 * hold no position (t_begin == t_end: two transitions with nothing
 * allocated or freed between them). */
typedef struct ms_rec_moment {
    int layer, phase;
    uint32_t t_begin, t_end;
} ms_rec_moment;

typedef struct ms_prog_record {
    int n_layers;           /* the profile's layers; every storage's layer is below it */
    uint32_t t_from;        /* the peaks count from here on (the plan's placement) */
    uint32_t t_end;         /* positions are below it */
    int n;
    ms_rec_storage *s;      /* in t_alloc order (owned) */
    int n_moments;          /* what ran when (owned), for what a rerun's OOM teaches; kept with
                               the storages (the profile's JSON, the database); 0: none known */
    ms_rec_moment *m;
    /* the modules whose outputs a rerun hands on where they were made, with no copy back to
       the stage of the code that called them (docs/program-record.md, "Handed on"): the
       record's copies are those of a rerun that does. Module paths, each a valid UTF-8
       string shorter than MS_NAME_MAX, no two equal; at most MS_REC_MAX_HANDED_ON (owned) */
    int n_handed_on;
    char **handed_on;
} ms_prog_record;

#define MS_REC_MAX_HANDED_ON 4096

/* When the gradients are freed each step (zero_grad(set_to_none=True)). */
enum {
    MS_GRADS_KEPT = 0,                  /* never: they stay (the built-in trainer) */
    MS_GRADS_FREED_BEFORE_FORWARD = 1,  /* before each step's forward (a plain loop) */
    MS_GRADS_FREED_BEFORE_BACKWARD = 2, /* after the forward, before backward (Lightning's
                                           closure): last step's live through the forward */
};

typedef struct ms_profile {
    char model[128];        /* preset or config name; a program's script name */
    int n_layers;           /* layers in the list (embedding + blocks + head) */
    int seq_len, d_model, n_head, vocab;   /* 0 when not known (programs) */
    int global_batch;       /* sequences per optimizer step in the trial */
    char device[32];        /* "cpu", "cuda:0" */
    uint64_t capacity;      /* bytes the trial's device had */
    uint64_t reserve;       /* bytes of the reserve category on that device */
    /* of reserve, what the caching allocator holds (a program's library buffers, cuBLAS's
       workspaces: the record pass measures them); the rest is beyond the allocator (the
       context, the libraries' own memory). 0: none, or not known */
    uint64_t reserve_allocator;
    uint64_t peak;          /* measured peak bytes of the trial */
    int fits;               /* 1 if the trial finished without OOM */
    /* what made the rows (programs; "" for the built-in model) */
    char fingerprint[MS_FINGERPRINT_MAX]; /* the program's module list and parameter shapes */
    char layer_list[MS_NAME_MAX];         /* which module list made the blocks, and why */
    char framework[64];     /* "torch 2.11.0+cu130" */
    char accounting[32];    /* "allocator" (built-in), "cuda-caching-allocator", "cpu-dispatcher" */
    uint64_t reserved_peak; /* the caching allocator's reserved peak (fragmentation), 0 unknown */
    int grads_freed;        /* when a program frees its gradients each step (MS_GRADS_*) */
    ms_loss_row loss;
    ms_oom_info oom;
    ms_prog_record *record; /* a program's record pass (owned); NULL: none, the stage rules serve */
    int n_rows;
    ms_layer_row *rows;     /* owned */
} ms_profile;

void ms_profile_free(ms_profile *p);
/* Frees a record made with malloc (its storages too); NULL is fine. */
void ms_prog_record_free(ms_prog_record *r);
/* A list of n strings, the list and each string malloc'd (a record's or a
 * plan's handed_on). ms_str_list_copy: a deep copy into *dst (NULL when
 * n is 0), so that no two owners share a string; 0, or -1 when memory ran
 * out (*dst NULL then). ms_str_list_free: NULL is fine. */
int ms_str_list_copy(char *const *src, int n, char ***dst);
void ms_str_list_free(char **list, int n);
/* A copy of p for a terminal: every string it holds (the model, module and
 * class names, the OOM's layer and tensor) in its visible form
 * (vocab/visible.h: no control character reaches the terminal raw), cut to
 * its field. The copy owns its arrays (ms_profile_free). -1 when memory ran
 * out (the copy then lacks what could not be copied, and is still safe to
 * print and to free). */
int ms_profile_visible_copy(const ms_profile *p, ms_profile *v);
/* First row for (layer, precision, micro_batch), or NULL. */
const ms_layer_row *ms_profile_find(const ms_profile *p, int layer, int precision, int micro_batch);

#endif
