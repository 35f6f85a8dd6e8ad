/* rank_train.h — `memsplit train --plan FILE` as one MPI rank (run by
 * mpirun or srun, directly as memsplit-rank or through memsplit, which
 * hands a launch over to it): the rank finds its stage and replica from the
 * plan and its rank, refuses a launch that does not match the plan
 * (launch_check.h), trains its part (trainer/pipe_rank.h over mpi_dist.h),
 * and rank 0 alone prints progress, writes the run database and the JSON
 * summary, from records the other ranks send it over MPI each step.
 *
 * A rank that fails (a device error, an out-of-memory the run cannot
 * recover in place) says which rank, stage, replica and device on stderr
 * and ends the whole run with MPI_Abort and the exit status of the failure
 * (2 runtime, 3 out of memory): OpenMPI ends every rank when one dies, which
 * is why memsplit doctor runs mpirun as its child and recovers from outside.
 * Before rank 0 aborts, it writes the step rows still waiting for a busy
 * database and records the run's end (failed, or oom). A failure all ranks
 * agree on (a checkpoint) waits at a barrier for that; one on another rank
 * alone can still end rank 0 first, and the run row then stays "running".
 *
 * Returns the exit status (MS_EXIT_*), the same on every rank when the run
 * ends normally. MPI must be initialised. */
#ifndef MS_RANK_TRAIN_H
#define MS_RANK_TRAIN_H

int ms_rank_train(int argc, char **argv);

#endif
