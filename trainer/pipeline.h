/* pipeline.h — training one model split into contiguous stages over several
 * devices, with the GPipe or 1F1B schedule over m micro-batches.
 *
 * Each stage's layers (parameters, gradients, optimizer state, saved
 * activations) live only on its device; one host thread drives each stage
 * through its schedule. Between stages, activations go forward and their
 * gradients come back through a transport (transport.h). A stage allocates
 * exactly what the planner's memory model accounts: its layers' static
 * bytes; k in-flight sets of saved activations (GPipe k = m, 1F1B k =
 * min(m, p - s)); transients (the residual gradient and one layer-scratch
 * arena); comm = k received inputs + one received output gradient; the
 * device's reserve. With the same seed, data and global batch, the losses
 * and weights equal the single-device run's up to float summation order.
 *
 * Ranks (spec.dist set, dist.h): this process holds one stage of one
 * replica; the other stages are other processes, reached through the
 * channels' other ends; each step reads the replica's share (its n_micro
 * micro-batches of the replicas * n_micro in the global batch) and ends
 * with the data-parallel part (pipe_rank.h). The losses and weights equal
 * one device's with replicas * n_micro micro-batches, to summation order.
 *
 * Every call returns MS_OK, MS_EOOM (pipe->oom_stage says which stage, its
 * device's oom says where) or MS_EFAIL (pipe->err says why). */
#ifndef MS_PIPELINE_H
#define MS_PIPELINE_H

#include "trainer/data.h"
#include "trainer/optimizer.h"
#include "trainer/transport.h"
#include "vocab/limits.h"

typedef enum { MS_PIPE_GPIPE = 0, MS_PIPE_1F1B = 1 } ms_pipe_schedule;

/* What to run: derived from a plan by the caller (the trainer does not read plans). */
typedef struct ms_pipe_spec {
    int n_devices;
    char device[MS_MAX_STAGES][40];   /* "cpu", "cuda:0" */
    size_t capacity[MS_MAX_STAGES];   /* bytes, 0 = whole device */
    int virtual_share;                     /* 1: several devices share one CPU/GPU */
    int n_stages;
    int stage_device[MS_MAX_STAGES];  /* index into device[] */
    int first[MS_MAX_STAGES], last[MS_MAX_STAGES];
    int recompute[MS_MAX_STAGES];
    ms_pipe_schedule schedule;
    int micro_batch, n_micro;              /* override cfg.batch and cfg.accum */
    int preallocate;                       /* allocate every buffer at open and load every kernel
                                            * with a warm-up pass (always with NCCL) */
    const struct ms_dist *dist;            /* NULL: every stage here; else only stage dist->stage,
                                            * on device 0 of this spec */
} ms_pipe_spec;

typedef struct ms_stage {
    int index, first, last;
    ms_device *dev;
    ms_scratch scr;
    int k;                       /* in-flight micro-batches (activation sets) */
    void **recv_act;             /* [k] received inputs (comm), stage > 0 */
    void *recv_grad;             /* received gradient of the output (comm), stage < p-1 */
    double loss_sum;             /* head: summed loss of the step */
    double busy_ms;              /* time in compute this step */
    int rc;
    char err[256];
} ms_stage;

typedef struct ms_pipeline {
    ms_config cfg;               /* batch = micro_batch, accum = n_micro */
    ms_pipe_spec spec;
    ms_model model;
    int n_dev;
    ms_device *devs;
    int n_stages;
    ms_stage *st;
    ms_scratch **scr_of;         /* per layer: its stage's scratch */
    ms_transport tx;
    void *nccl[MS_MAX_STAGES]; /* one communicator per device when the stages are on distinct GPUs */
    int n_nccl;
    ms_data *data;
    int32_t *inputs, *targets;   /* host, [n_micro][N] */
    ms_opt_state opt;
    ms_opt_result last_opt;
    int step;
    int step_base;               /* p->step when the channels started counting (open or load) */
    double last_loss;
    int steps_run;               /* ms_pipe_step calls: the matmul pick times in the first only */
    int oom_stage;
    char err[512];
} ms_pipeline;

int ms_pipe_open(ms_pipeline *p, const ms_config *cfg, const ms_pipe_spec *spec);
int ms_pipe_step(ms_pipeline *p);
void ms_pipe_close(ms_pipeline *p);
/* Human message for an OOM of stage p->oom_stage. */
const char *ms_pipe_oom_message(const ms_pipeline *p, char *buf, size_t len);
/* Checkpoints in the same format as ms_session's (a single-device run can
 * resume a pipeline's checkpoint and back). A rank (spec.dist) writes its
 * part of a checkpoint of parts with ms_pipe_checkpoint, collectively, and
 * loads from a checkpoint of any layout (ckpt_parts.h). */
int ms_pipe_save(ms_pipeline *p, const char *path);
int ms_pipe_load(ms_pipeline *p, const char *path);
/* The newest sound checkpoint of this job in dir (train_state.h). */
int ms_pipe_resume(ms_pipeline *p, const char *dir, char *path_out, size_t len, char *note, size_t notelen);
/* Save as <dir>/step-NNNNNNNN.ckpt; path_out gets the file name. */
int ms_pipe_checkpoint(ms_pipeline *p, const char *dir, char *path_out, size_t len);

/* The op list of stage s of p for m micro-batches (exposed for tests):
 * ops[i] = +(mb+1) for a forward, -(mb+1) for a backward. Returns count (2m). */
int ms_pipe_schedule_ops(ms_pipe_schedule sch, int s, int p, int m, int *ops);

#endif
