/* trace.h — what memsplit collects from a program through the bridge: the
 * event stream of docs/bridge.md, parsed, in arrival order.
 *
 * Contract:
 *  - msb_trace_feed() takes one line as the program wrote it (a JSON
 *    object, no newline) from connection `conn` (one per process) and
 *    appends it: ledger and transition events to ev[], the rest into the
 *    summary fields. Unknown event names are ignored (newer bridges);
 *    a line that is not a JSON object with a string "ev" (or NULL: a line
 *    too long to keep) is counted in bad_lines and otherwise ignored.
 *    Returns 0, or -1 when out of memory. Any line, in any order, from any
 *    connection, is safe: the program is untrusted input
 *    (tests/fuzz/fuzz_bridge_events.c).
 *  - The process that trains is the first that sends `model` (model_conn);
 *    another process's model is left out with a warning, and its steps,
 *    members, OOM, end and refusal with it; rows.h uses only model_conn's
 *    events. Strings are valid UTF-8, cut at a character boundary to their
 *    fields' sizes (a NUL inside shows as U+FFFD).
 *  - Module names travel whole or not at all: a block or member name the
 *    records cannot hold (empty, a NUL, MS_NAME_MAX bytes or more; for a
 *    member, whose names are comma-joined into the layer's, a comma or a
 *    leading '(' or a joined name too long), or more than MS_MAX_BLOCKS
 *    blocks, refuses the trial (refused, refuse_what "names", the name
 *    shown escaped). The bridge refuses them first, in the program
 *    (docs/bridge.md, "Module names").
 *  - msb_trace_free() releases everything; a zeroed trace is valid. */
#ifndef MS_BRIDGE_TRACE_H
#define MS_BRIDGE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/mem_event.h"
#include "vocab/profile.h"

/* Byte counts the program sends are held to MSB_MAX_BYTES (no device holds
 * more); an allocation event past it, or past MSB_MAX_ALLOCATED allocated in
 * all, is forged and counted as a bad line, so sums of bytes never overflow. */
#define MSB_MAX_BYTES (1ull << 48)
#define MSB_MAX_ALLOCATED (1ull << 62)

typedef enum {
    MSB_EV_ALLOC = 'a', MSB_EV_FREE = 'f', MSB_EV_RELABEL = 'r', MSB_EV_REFUSED = 'x',
    MSB_EV_WHERE = 'w', MSB_EV_SEGMENT = 's', MSB_EV_STEP = 'S', MSB_EV_OOM = 'O',
    MSB_EV_CROSS = 'c', MSB_EV_PLACED = 'P'
} msb_ev_kind;

typedef struct msb_ev {
    char kind;            /* msb_ev_kind */
    int conn;
    /* ALLOC, FREE, REFUSED, SEGMENT: the memory event itself, as the
     * database keeps it (vocab/mem_event.h): a storage's key is its address
     * (a refusal has none), its ledger device the device; a free or a
     * segment has no category; a segment is CUPTI's (source
     * MS_EV_SRC_CUPTI_CALLBACK, api_result the call's). RELABEL: the storage
     * (address) and its new category and layer. WHERE, OOM: layer and phase;
     * OOM: bytes the bytes asked. */
    ms_mem_event m;
    int n;                /* WHERE: the forward pass (micro-batch) it belongs to; STEP: the step number */
    /* WHERE: the caching allocator's counters (-1: none, the CPU); xin:
     * bytes entering the layer (-1: not a layer entry); xl: the layer whose
     * interval made the tensors of xin (-1 unknown). REFUSED: live bytes in
     * alloc, the capacity in peak. */
    int64_t alloc, peak, reserved, rpeak, xin;
    int xl;
    /* CROSS (the record pass): the applier's copy of a tensor to another
     * stage, m.address the copy's storage, orig the storage it copied.
     * PLACED: the plan's placement was made (the record's peaks count from
     * there). hop: for a copy of a module's outputs back to its caller's
     * stage, and for the gradient copy that answers it in backward, the
     * module's index in hops[] + 1 (0: no such copy). */
    uint64_t orig;
    int hop;
} msb_ev;

typedef struct msb_interval_ms {
    int layer, phase;
    double ms;
} msb_interval_ms;

typedef struct msb_step {
    int n, accum, micro_batch;
    int n_iv;
    msb_interval_ms *iv;       /* the step's intervals in order (owned) */
    int64_t mem_free, mem_total, mem_reserved;   /* -1: not a GPU */
    int has_loss;
    double loss;               /* what the program passed to backward() (unscaled), summed over the step */
    int late;                  /* its intervals and loss are still to come (event stepdata: on a GPU
                                  the bridge reads them a step later, never waiting for the GPU) */
    int n_stage_peaks;         /* a plan's run: the ledger's peak of each stage so far */
    uint64_t stage_peaks[64];
    uint64_t (*stage_peak_cats)[MS_CAT_N]; /* n_stage_peaks breakdowns of stage_peaks (owned), NULL: not sent */
    int n_device_peaks;        /* a plan's run on GPUs: max_memory_allocated of each device so far */
    char device_names[8][32];
    uint64_t device_peaks[8];
    int64_t device_context[8]; /* what each of them holds beyond the allocator (context,
                                  libraries), less the ballast; -1 not sent */
} msb_step;

typedef struct msb_trace {
    msb_ev *ev;
    int n_ev, cap_ev;
    int n_hello;               /* processes that said hello */
    int n_stepdata;            /* stepdata events taken: a step's late intervals and loss */
    int torch_seen;
    char torch_version[64];
    int cuda;
    char lightning[32];
    int model_conn;            /* -1 until a process sends `model` */
    char root[128], list[MS_NAME_MAX], why[MS_NAME_MAX], fingerprint[MS_FINGERPRINT_MAX];
    char precision[8], device[32];
    int n_blocks;
    char **blocks;             /* n_blocks names (owned): the units' module paths */
    char **sigs;               /* n_blocks signatures (owned; NULL when the program sent none):
                                  units with equal signatures are the same structure */
    char pre[MS_NAME_MAX], post[MS_NAME_MAX];   /* members, comma-joined */
    int n_steps;
    msb_step *steps;           /* owned */
    struct {
        int happened, layer, phase;   /* the last OOM of the model's process, unless the step it
                                         happened in ended (survived): where it died */
        int step;              /* the optimizer step it happened in (1 = the first), 0 unknown */
        int stage;             /* under a plan: the stage that ran out, -1 unknown */
        char module[MS_NAME_MAX], type[64], source[8], message[512];
        uint64_t requested;
        int category;          /* what the program said the request was (an optimizer's state), -1 unsaid */
        int64_t device_free;   /* the device's free bytes at a CUDA OOM, -1 unknown */
        int ev_index;          /* position in ev[] (an OOM marker) */
        int conn;              /* the process it came from */
        int survived;          /* OOMs of that process it caught and went on after */
    } oom;
    int done, done_conn;
    char done_reason[16], done_exc[512];
    int refused, refuse_conn;
    char refuse_what[16], refuse_text[1024];
    struct { int taken; int device; uint64_t bytes, total, free, capacity; } ballast;
    char warnings[1024];       /* "what: text; ..." */
    /* The record pass: modules whose outputs were copied back to their
     * caller's stage (event `ho`: index, module path), and whether anything
     * but one crossing to another module read such a copy (event `nh`): a
     * module never said `nh` of may hand its outputs on (record.h) */
    int n_hops;
    struct msb_hop { char *path; int read; } *hops;   /* owned, indexed as the bridge sent them */
    /* The units in the order the program first called them in its first
     * iteration (event `order`, a trial's: old layer numbers 1..n_blocks in
     * their new order; owned, NULL until said): msb_trace_in_call_order */
    int *order;
    int n_order;
    int n_recomputed;          /* units whose forward the program ran again in backward
                                  (activation checkpointing) */
    int n_saves, n_loads;      /* torch.save / torch.load with a path (checkpoints) */
    int n_saves_skipped;       /* saves a diagnostic pass (trial, uncapped) did not write */
    int last_save_step;        /* steps this process had finished at its last save */
    char last_save[512], first_load[512];
    int bad_lines;
    uint64_t alloc_bytes;      /* allocated in all (ALLOC events), for MSB_MAX_ALLOCATED */
} msb_trace;

void msb_trace_init(msb_trace *t);
void msb_trace_free(msb_trace *t);
int msb_trace_feed(msb_trace *t, const char *line, size_t len, int conn);
/* Appends "; item" to t->warnings (once; cut at a character boundary). */
void msb_trace_warn(msb_trace *t, const char *item);
/* Copies src into dst (cap bytes) as valid UTF-8, at most max bytes, cut
 * at a character boundary and NUL-terminated; a byte of src that starts no
 * valid character shows as U+FFFD. Returns the bytes written. */
size_t msb_utf8_copy(char *dst, size_t cap, const char *src, size_t max);
/* The same, whole, in a malloc'd copy (free it); NULL when out of memory.
 * What memsplit records of the program's command line is valid UTF-8. */
char *msb_utf8_dup(const char *src);
/* The memory events of the process that trained (ALLOC, FREE, REFUSED and
 * SEGMENT lines, in order), as the database keeps a trial's: on its one
 * device, 0, each allocation with its storage's final category
 * (msb_final_labels: the report replays these, and a master weight stored
 * as the transient it was first seen as would be drawn as a workspace). A
 * malloc'd array in *out (free it) and the count, or -1 when out of
 * memory. */
int msb_trace_mem_events(const msb_trace *t, ms_mem_event **out);
/* The final (category, layer) of every allocation event of the model's
 * process: later relabels of the storage apply from its allocation on (an
 * fp32 weight the program made before autocast is a master weight, a
 * gradient a gradient). fin[i] for t->ev[i], ALLOC events only; fin holds
 * t->n_ev entries. The rows and the run database's memory events both use
 * it, so the report's replay of the events has the rows' categories.
 * Returns 0, or -1 when out of memory. */
int msb_final_labels(const msb_trace *t, int (*fin)[2]);
/* Renumbers the trace's units (layers 1..n_blocks; layer 0 and n_blocks + 1
 * stay) in order: order[k] is the layer that becomes layer k + 1. Every
 * layer field follows (the memory events', the transitions' and their xl,
 * the refusals', the OOM's, the steps' intervals), and the units' names and
 * signatures. 0 (also for the identity), or -1 with the trace unchanged:
 * order is no permutation of 1..n_blocks, or out of memory. The order a
 * trial said applies to its uncapped pass too (the same program). */
int msb_trace_in_call_order(msb_trace *t, const int *order, int n);

#endif
