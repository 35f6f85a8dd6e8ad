/* mpi_world.h — the run's ranks over MPI for a front end that does not
 * include mpi.h (cli/rank_main.c): MPI's start and end, and the ms_world
 * (trainer/dist.h) whose dist is mpi_dist.h's.
 *
 * Contract: ms_mpi_init() before anything else of MPI (it takes main's
 * argc/argv), ms_mpi_finalize() last; ms_mpi_world() fills w with this
 * rank, the run's size and the collectives over MPI_COMM_WORLD (MPI must be
 * initialised). */
#ifndef MS_MPI_WORLD_H
#define MS_MPI_WORLD_H

#include "trainer/dist.h"

void ms_mpi_init(int *argc, char ***argv);
void ms_mpi_finalize(void);
void ms_mpi_world(ms_world *w);

#endif
