/* ckpt_parts.h — checkpoints that any layout resumes: one process, p
 * stages, or p x d ranks (with or without ZeRO-1).
 *
 * The checkpoint of step N is <dir>/step-NNNNNNNN.ckpt, either
 *  - a file (written by one process, every layer; train_state.h), or
 *  - a folder written by ranks: one part per stage, part-SSS.ckpt, in the
 *    same file format (checkpoint.h) with the same sections as a one-file
 *    checkpoint ("state", then layerI.w, layerI.mv, layerI.bn) for that
 *    stage's layers only, each written atomically by the stage's replica 0
 *    (under ZeRO-1 after gathering the replicas' m and v chunks); and
 *    manifest.json, which ties them together:
 *      {"format": "memsplit-checkpoint-parts", "version": 1, "step": N,
 *       "model_hash": "<16 hex>", "job": "<16 hex>",
 *       "layout": {"stages": p, "replicas": d, "zero": bool},
 *       "parts": [{"file": "part-000.ckpt", "layers": [first, last]}, ...]}
 *    "job" is the job fingerprint (trainer/job.h; every part carries it too)
 *    of the global batch, so every layout of one job writes the same; a
 *    reader refuses another job's as foreign. A manifest written before
 *    the fingerprint has null there; then the parts' own fingerprints decide.
 *    The parts go into a new step-N.ckpt.tmp.XXXXXX/ (a random name rank 0
 *    creates and hands out: vocab/tmpfile.h); when every rank has written
 *    its own, rank 0 writes the manifest and renames the folder to
 *    step-N.ckpt, so a crash leaves the older checkpoints and a *.tmp.*
 *    that readers ignore (ms_ckpt_latest finds both kinds by name) and a
 *    resume removes (ms_ckpt_sweep).
 * Reading takes, for each part that holds some of this process's layers,
 * the whole part (verified by its CRCs, as one file is), and copies those
 * layers onto their devices: under ZeRO-1 only the rank's chunk of m and v.
 * A one-file checkpoint reads as one part of every layer.
 *
 * Functions return MS_OK, MS_EOOM or MS_EFAIL with err. Saving is
 * collective over the run's ranks. */
#ifndef MS_CKPT_PARTS_H
#define MS_CKPT_PARTS_H

#include <stddef.h>

#include "trainer/dist.h"
#include "trainer/train_state.h"

/* How the stages of a run of ranks split the layers. */
typedef struct ms_ckpt_layout {
    int stages;
    const int *first, *last;    /* [stages] */
} ms_ckpt_layout;

/* Whether path is a checkpoint of parts (a folder). */
int ms_ckpt_is_parts(const char *path);

/* Collective: every rank's flag; whether all of them are set (the same
 * answer on every rank). */
int ms_ckpt_all_ok(const ms_dist *D, int ok);

/* Collective: every rank of D's run saves step *s->step into dir; the
 * layers here are those with a device (this rank's stage). Every rank
 * returns the same verdict (a rank that failed says why, the others that
 * another rank did). */
int ms_ckpt_parts_save(const ms_train_state *s, const ms_dist *D, const ms_ckpt_layout *lay, const char *dir,
                       char *path_out, size_t len, char *err, size_t errlen);

/* Loads the layers that have a device here from a checkpoint of either
 * kind. D: this rank's place (its ZeRO-1 chunk; the caller has allocated
 * the chunk's m/v), or NULL for a process that holds whole layers.
 * foreign (may be NULL) gets 1 when the checkpoint is sound but of another
 * model or job (checkpoint.h's MS_CKPT_FOREIGN), else 0. */
int ms_ckpt_parts_load(const ms_train_state *s, const ms_dist *D, const char *path, int *foreign, char *err,
                       size_t errlen);

/* Keeps the newest `keep` checkpoints in dir (files or folders) and removes
 * the older ones and any leftover of a save cut short (ms_ckpt_sweep). */
void ms_ckpt_prune(const char *dir, int keep);
/* Removes what saves cut short left in dir: step-N.ckpt.tmp.XXXXXX (and the
 * old fixed step-N.ckpt.tmp) files and folders, and step-N.ckpt.old. A
 * resume calls it: the run that resumes owns the folder from then on. A
 * symlink at such a name is removed itself, never followed. */
void ms_ckpt_sweep(const char *dir);

#endif
