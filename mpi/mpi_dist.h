/* mpi_dist.h — ms_dist (trainer/dist.h) over MPI: the rank's place in the
 * run (stage = rank % p, replica = rank / p), the pipeline's and the stage
 * group's communicators, and on GPUs their NCCL twins, each bootstrapped by
 * broadcasting an ncclUniqueId over the MPI communicator it mirrors.
 *
 * Contract:
 *  - ms_mpi_dist_open() needs MPI initialised and size == stages * replicas;
 *    cuda_ordinal >= 0 puts the pipeline's transfers and the stage group's
 *    collectives on NCCL (the GPU must be current), -1 keeps everything on
 *    MPI (CPU backend). NCCL_NVLS_ENABLE=0 is set unless the environment
 *    already says otherwise. It is collective: every rank calls it.
 *  - CPU collectives are reduce-scatter + all-gather, so every replica holds
 *    the same bits (each element is summed once, by its chunk's owner).
 *  - ms_mpi_dist_arm_kill(): a testing aid; the rank kills itself with
 *    SIGKILL at its next pipeline send or stage-group collective (mid-step).
 *  - 0, or -1 with err; ms_mpi_dist_close() frees what open made. */
#ifndef MS_MPI_DIST_H
#define MS_MPI_DIST_H

#include <stddef.h>

#include "trainer/dist.h"

int ms_mpi_dist_open(ms_dist *d, int stages, int replicas, int zero, int cuda_ordinal, char *err, size_t errlen);
void ms_mpi_dist_close(ms_dist *d);
void ms_mpi_dist_arm_kill(ms_dist *d);

#endif
