/* checkpoint.h — a generic, verified checkpoint file: run metadata plus
 * named byte sections (parameters, optimizer state, ...).
 *
 * Contract:
 *  - ms_ckpt_save writes a new path.tmp.XXXXXX (created exclusively, never
 *    through a planted symlink: vocab/tmpfile.h), fsyncs it, renames it to
 *    path and fsyncs the folder: a crash leaves the old file or the new
 *    one, never half of one (and a *.tmp.* that a resume removes).
 *  - ms_ckpt_load refuses, with a one-line message, a file that is not a
 *    checkpoint, has another format version, is truncated, fails its CRC-32C,
 *    is for a different model (m->model_hash on entry, 0 = do not check) or
 *    another job (m->job on entry, 0 = do not check; trainer/job.h), or
 *    whose sections (names, sizes, order) differ from the caller's. It writes
 *    nothing to *m or the sections' buffers unless the whole file verified
 *    (it reads the file twice: verify, then copy, checking the CRC again).
 *  - All functions return 0 on success, -1 with a message in err; a load
 *    refused because the file is sound but belongs to another model or job
 *    or has other sections returns MS_CKPT_FOREIGN (a caller looking for a
 *    checkpoint to resume skips a corrupt file, never a foreign one).
 *
 * File layout (little-endian): "MSCKPT\0\0", u32 version, u32 header bytes,
 * u64 file bytes, the meta fields up to rng_state, u32 n sections, u32
 * config length, u64 job fingerprint, the config INI text, per section
 * {u16 name length, name, u64 bytes}, u32 CRC-32C of the header after the
 * magic; then the section data in order; then u32
 * CRC-32C of everything after the magic. */
#ifndef MS_CHECKPOINT_H
#define MS_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/config.h"

#define MS_CKPT_VERSION 2  /* 2: the job fingerprint */
#define MS_CKPT_FOREIGN (-2)
#define MS_CKPT_NAME_MAX 255     /* bytes in a section name */
#define MS_CKPT_CONFIG_MAX 8192  /* config_ini capacity, NUL included */

typedef struct {
    const char *name;
    void *data;      /* save: read from; load: filled */
    size_t bytes;
} ms_ckpt_section;

typedef struct {
    uint64_t model_hash;      /* ms_config_model_hash of the run */
    uint64_t job;             /* ms_job_fingerprint of the run (trainer/job.h) */
    int64_t step;             /* optimizer steps done */
    uint64_t data_cursor;     /* ms_data_cursor after those steps */
    float loss_scale;         /* fp16 dynamic loss scale */
    int32_t good_steps;       /* fp16 steps since the scale last changed */
    uint64_t rng_state;       /* trainer's RNG state */
    char config_ini[MS_CKPT_CONFIG_MAX]; /* ms_config_to_ini of the run */
} ms_ckpt_meta;

int ms_ckpt_save(const char *path, const ms_ckpt_meta *m, const ms_ckpt_section *s, int n,
                 char *err, size_t errlen);

/* On entry m->model_hash and m->job are the expected values (0: any) and
 * m->config_ini may hold this run's config, used only to name the differing
 * key. On success *m is the file's meta. */
int ms_ckpt_load(const char *path, ms_ckpt_meta *m, const ms_ckpt_section *s, int n,
                 char *err, size_t errlen);

/* Reads and verifies only the header (not the data) and fills *m and
 * *n_sections (may be NULL): to look at a checkpoint before allocating. */
int ms_ckpt_peek(const char *path, ms_ckpt_meta *m, int *n_sections, char *err, size_t errlen);

/* "dir/step-00000042.ckpt" for step 42. Returns 0, or -1 if out is too small. */
int ms_ckpt_path(const char *dir, int64_t step, char *out, size_t len);

/* Newest "step-N.ckpt" in dir (highest N; *.tmp files ignored) into path_out.
 * Returns 1 found, 0 none (also when dir does not exist), -1 error. */
int ms_ckpt_latest(const char *dir, char *path_out, size_t len);
/* The same among the files with N < before. */
int ms_ckpt_latest_before(const char *dir, int64_t before, char *path_out, size_t len);

/* n bytes to path the way checkpoints are written (path.tmp.XXXXXX, fsync, rename,
 * fsync of the folder); 0 or -1 with err. ms_ckpt_sync_parent() fsyncs the
 * folder holding path (after renaming something into it); 0 or -1. */
int ms_ckpt_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen);
int ms_ckpt_sync_parent(const char *path);

/* Hash (FNV-1a 64, never 0) of the keys that fix parameter shapes and
 * numerics: model.n_layer, d_model, n_head, seq_len, vocab, mlp_ratio, norm,
 * tied and train.precision. */
uint64_t ms_config_model_hash(const ms_config *c);

#endif
