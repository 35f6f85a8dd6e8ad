/* rank_train.h — `memsplit train --plan FILE` as one MPI rank (run by
 * mpirun or srun, directly as memsplit-rank or through memsplit, which
 * hands a launch over to it; its front end, cli/rank_main.c, has refused a
 * launch that does not match the plan): the rank finds its stage and
 * replica from the plan and its rank, trains its part (trainer/pipe_rank.h
 * over the world's dist: trainer/dist.h, mpi/ implements it), and rank 0
 * alone prints progress, writes the run database and the summary (lines
 * on stderr, or with json one object on stdout), from records the other
 * ranks send it each step.
 *
 * A rank that fails (a device error, an out-of-memory the run cannot
 * recover in place) says which rank, stage, replica and device on stderr
 * and ends the whole run (the world's abort) with the exit status of the failure
 * (2 runtime, 3 out of memory): OpenMPI ends every rank when one dies, which
 * is why memsplit doctor runs mpirun as its child and recovers from outside.
 * Before rank 0 aborts, it writes the step rows still waiting for a busy
 * database and records the run's end (failed, or oom). A failure all ranks
 * agree on (a checkpoint) waits at a barrier for that; one on another rank
 * alone can still end rank 0 first, and the run row then stays "running".
 *
 * A signal armed by run/interrupt.h on any rank (mpirun passes SIGTERM on;
 * a rank whose launcher dies gets it too) stops every rank after the same
 * step: each rank's signal travels with the step's records, the step is
 * checkpointed where there is a folder, and rank 0 records its own run
 * "interrupted".
 *
 * Returns the exit status (MS_EXIT_*, or 128 + the signal), the same on
 * every rank when the run ends normally or is interrupted. */
#ifndef MS_RUN_RANK_TRAIN_H
#define MS_RUN_RANK_TRAIN_H

#include "trainer/config.h"
#include "trainer/dist.h"
#include "vocab/plan.h"

typedef struct ms_rank_opts {
    const char *device;        /* this rank's device (mpi/launch_check.h: ms_launch_device) */
    const char *db, *ckdir;    /* rank 0's database, the checkpoints' folder (NULL: none) */
    long db_run, ckevery;      /* record into this run (0: a new one); steps between checkpoints */
    int json, quiet, resume, kill_step, kill_rank, fail_step, fail_rank, db_timeout_ms;
} ms_rank_opts;

int ms_run_rank_train(const ms_world *w, const ms_config *cfg, const ms_plan *plan, const ms_rank_opts *o);

#endif
