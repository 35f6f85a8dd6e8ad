/* session.h — a training session on one device: config → device → model →
 * data → steps, with checkpoints. The profiler and `memsplit train` drive it.
 *
 * Contract: ms_session_open builds everything and allocates the parameters
 * (phase init); each ms_session_step runs one optimizer step of cfg.accum
 * micro-batches. Every call returns MS_OK, MS_EOOM (s->oom_msg and
 * s->dev.oom say where) or MS_EFAIL (s->err says why); after a failure the
 * session can only be closed. Nothing prints. */
#ifndef MS_SESSION_H
#define MS_SESSION_H

#include "trainer/data.h"
#include "trainer/optimizer.h"
#include "trainer/step_graph.h"

typedef struct ms_session {
    ms_config cfg;
    ms_model model;
    ms_device dev;
    ms_scratch scr;
    ms_scratch **scr_of;       /* per layer (all &scr here) */
    ms_data *data;
    ms_opt_state opt;
    int step;                  /* optimizer steps completed */
    int steps_run;             /* of those, the steps this process ran (not resumed) */
    int32_t *inputs, *targets; /* host, one micro-batch */
    double last_loss;          /* mean loss of the last step */
    ms_opt_result last_opt;
    /* per-layer measurements (optional): filled when measure = 1 */
    int measure;
    double *fwd_ms, *bwd_ms;   /* summed over the micro-batches of the last step (or timing pass) */
    int mb_fwd, mb_bwd;        /* micro-batches those sums cover (a layer may have fewer after an OOM) */
    size_t *need_fwd, *need_bwd; /* arena bytes each layer asked for (max over micro-batches) */
    double opt_ms;             /* the last optimizer step's time (after a replayed graph it includes
                                * the wait for the graph: the optimizer is queued behind it) */
    char (*fwd_range)[48], (*bwd_range)[48]; /* NVTX range names: "block 17/forward" */
    /* use_graph (set by the caller; train sets it from train.cuda_graph): on
     * a GPU, micro-batches replay a CUDA graph (step_graph.h) once a step has
     * run, unless measure is set, an allocator hook is installed or the
     * matmul pick is still timing. The step that makes one (normally the
     * first) captures it at its end, so its time includes the capture. */
    int use_graph;
    ms_step_graph graph;
    /* launch_ahead (set by the caller before each step; train sets it from
     * train.launch_ahead where the next step follows at once, with no
     * checkpoint between): a step that replays graphs queues the next
     * step's first micro-batch behind its optimizer, before it waits for
     * its loss and gradient norm, so that the GPU does not idle while the
     * host reads them and launches again. Not under fp16 (the next scale
     * depends on what is read), nor past cfg.steps. The next call must then
     * be ms_session_step (ahead is set: the data has moved on by that
     * micro-batch); a checkpoint, a load or a timing pass refuses with
     * MS_EFAIL, and close waits for it. */
    int launch_ahead;
    int ahead;
    int launched_ahead;        /* micro-batches queued so in this session */
    void *rb_opt;              /* host copies of the optimizer's records */
    float *rb_loss;            /* and of the head's per-row losses */
    int rb_pinned;             /* 1: both are pinned (once launch_ahead was set on a GPU) */
    char err[512];
    char oom_msg[512];
} ms_session;

/* Optional hooks: the allocator hook is installed before anything is
 * allocated; on_device runs once the device is open (context and ballast
 * taken) and before the parameters are allocated (the profiler starts
 * tracing there); a non-zero return aborts the open with MS_EFAIL. */
typedef struct ms_session_hooks {
    ms_alloc_hook alloc_hook;
    void *user;
    int (*on_device)(void *user, ms_device *dev);
} ms_session_hooks;

int ms_session_open(ms_session *s, const ms_config *cfg, const ms_session_hooks *hooks);
int ms_session_step(ms_session *s);
/* One micro-batch forward and backward with per-layer timing, on warm
 * buffers; the gradients are discarded and the optimizer does not run (the
 * profiler's times after a one-step trial, whose step included allocation). */
int ms_session_timing_pass(ms_session *s);
void ms_session_close(ms_session *s);

/* Checkpoints: weights, optimizer state, batchnorm statistics, step, data
 * position and loss scale; a resumed run continues bit-for-bit on the CPU. */
int ms_session_save(ms_session *s, const char *path);
int ms_session_load(ms_session *s, const char *path);
/* The newest sound checkpoint of this job in dir (train_state.h). */
int ms_session_resume(ms_session *s, const char *dir, char *path_out, size_t len, char *note, size_t notelen);
/* Save as <dir>/step-NNNNNNNN.ckpt; path_out gets the file name. */
int ms_session_checkpoint(ms_session *s, const char *dir, char *path_out, size_t len);

#endif
