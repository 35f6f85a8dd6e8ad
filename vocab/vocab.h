/* vocab.h — the ground floor's words: memory categories, phases, precision
 * policies and where a profile row came from, with their names as written
 * in every format (JSON, SQLite, terminal). Every part of memsplit uses
 * these; this header includes nothing of theirs.
 *
 * Contract: the enums' order is the order used everywhere (arrays indexed
 * by category or phase); names are lower case; the parsers return -1 for a
 * name they do not know (case-sensitive, as the formats write them, except
 * ms_precision_parse, which also takes upper case for command lines). */
#ifndef MS_VOCAB_H
#define MS_VOCAB_H

/* Memory categories, in this order everywhere; every format writes these
 * names with these meanings (docs/database.md, docs/plan-format.md). */
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

/* Where a program is. Validation (a program's evaluation loop) happens only
 * in programs the bridge profiles; the built-in trainer has none. */
typedef enum {
    MS_PH_INIT = 0, MS_PH_FORWARD, MS_PH_BACKWARD, MS_PH_OPTIMIZER, MS_PH_VALIDATION, MS_PH_N
} ms_phase;

/* Where a profile row's numbers came from: the trial itself, a layer measured
 * alone, a copy of an identical layer the trial reached (a program's blocks
 * past its OOM), or a second pass without the emulated cap. */
typedef enum {
    MS_ROW_FULL = 0, MS_ROW_ISOLATED = 1, MS_ROW_COPIED = 2, MS_ROW_UNCAPPED = 3, MS_ROW_N
} ms_row_source;

/* Precision policies: fp32; bf16 or fp16 compute with fp32 master
 * weights, optimizer state, norms and loss. */
typedef enum { MS_PREC_FP32 = 0, MS_PREC_BF16 = 1, MS_PREC_FP16 = 2 } ms_precision;
#define MS_PREC_N 3

const char *ms_cat_name(ms_cat c);          /* "param", "master", ... ; "?" out of range */
const char *ms_phase_name(ms_phase p);      /* "init", "forward", "backward", "optimizer", "validation" */
const char *ms_row_source_name(int s);      /* "full", "isolated", "copied", "uncapped" */
const char *ms_precision_name(ms_precision p); /* "fp32", "bf16", "fp16" */
int ms_cat_parse(const char *s);
int ms_phase_parse(const char *s);
int ms_row_source_parse(const char *s);
/* 0 and *out, or -1; case-insensitive ("BF16" too). */
int ms_precision_parse(const char *s, ms_precision *out);

#endif
