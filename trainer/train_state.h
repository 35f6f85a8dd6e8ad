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
} ms_train_state;

/* A checkpoint's metadata for this run: model hash and config, step, data
 * position, fp16 loss scale (every writer of a checkpoint or part uses it). */
void ms_train_state_meta(const ms_train_state *s, ms_ckpt_meta *meta);
int ms_train_state_save(const ms_train_state *s, const char *path, char *err, size_t errlen);
int ms_train_state_load(const ms_train_state *s, const char *path, char *err, size_t errlen);
/* Save as <dir>/step-NNNNNNNN.ckpt (the directory is created); path_out gets the name. */
int ms_train_state_checkpoint(const ms_train_state *s, const char *dir, char *path_out, size_t len, char *err,
                              size_t errlen);

#endif
