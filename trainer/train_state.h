/* train_state.h — what a checkpoint saves and restores: references to the
 * pieces of a training run (single-device session or pipeline). Files are
 * written atomically (checkpoint.h) and refused cleanly when corrupt or of
 * another model. Loading also reads the parts a run of ranks writes
 * (ckpt_parts.h), so any layout resumes any other. Returns MS_OK, MS_EOOM (optimizer state could not be
 * allocated) or MS_EFAIL with err. */
#ifndef MS_TRAIN_STATE_H
#define MS_TRAIN_STATE_H

#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/optimizer.h"

typedef struct ms_train_state {
    const ms_config *cfg;
    ms_model *model;
    ms_opt_state *opt;
    int *step;
    ms_data *data;
    int replicas;       /* data-parallel copies the micro-batches are split over (0 or 1: one) */
} ms_train_state;

/* A checkpoint's metadata for this run: model hash, job fingerprint
 * (trainer/job.h, of the global batch: cfg's batch x accum x replicas) and
 * config, step, data position, fp16 loss scale (every writer of a
 * checkpoint or part uses it). */
void ms_train_state_meta(const ms_train_state *s, ms_ckpt_meta *meta);
int ms_train_state_save(const ms_train_state *s, const char *path, char *err, size_t errlen);
int ms_train_state_load(const ms_train_state *s, const char *path, char *err, size_t errlen);
/* Loads the newest checkpoint in dir that verifies into the run (path_out
 * gets its name). A corrupt or unreadable newest file does not block the
 * resume: it is skipped for the one before it, and note (may be NULL) says
 * which was skipped and why. A sound checkpoint of another model or job
 * (trainer/job.h) stops the search: MS_EFAIL, err names both fingerprints.
 * Once a checkpoint is loaded, what saves cut short left in dir is removed
 * (ms_ckpt_sweep, ckpt_parts.h). */
int ms_train_state_resume(const ms_train_state *s, const char *dir, char *path_out, size_t len, char *note,
                          size_t notelen, char *err, size_t errlen);
/* Save as <dir>/step-NNNNNNNN.ckpt (the directory is created); path_out gets the name. */
int ms_train_state_checkpoint(const ms_train_state *s, const char *dir, char *path_out, size_t len, char *err,
                              size_t errlen);

#endif
