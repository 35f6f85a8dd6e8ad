/* mpi_world.c — the run's ranks as a whole over MPI (mpi_world.h). */
#include "mpi/mpi_world.h"
#include "mpi/mpi_dist.h"

#include <mpi.h>

void ms_mpi_init(int *argc, char ***argv) { MPI_Init(argc, argv); }
void ms_mpi_finalize(void) { MPI_Finalize(); }

static void allgather(const void *mine, size_t bytes, void *all)
{
    MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
}

static void bcast(void *buf, size_t bytes) { MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD); }
static void barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }
static void abort_all(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void ms_mpi_world(ms_world *w)
{
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    w->allgather = allgather;
    w->bcast = bcast;
    w->barrier = barrier;
    w->abort = abort_all;
    w->open_dist = ms_mpi_dist_open;
    w->close_dist = ms_mpi_dist_close;
    w->arm_kill = ms_mpi_dist_arm_kill;
}
