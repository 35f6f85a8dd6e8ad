/* launch_env.h — memsplit started by an MPI launcher. A train under mpirun
 * or srun runs one rank per device, which is memsplit-rank's work (the only
 * binary that links libmpi, so that memsplit itself starts without it):
 * memsplit hands such a launch over to memsplit-rank beside it, with the
 * same arguments and environment.
 *
 * Contract: ms_launch_env_size() is the number of ranks the launcher said
 * (OpenMPI's OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK with its size, PMI's
 * PMI_SIZE: mpirun, srun --mpi=pmix or pmi2), 0 when not launched by one.
 * ms_launch_exec_rank() returns only when the exec failed (a message is
 * printed; the value is the exit status). */
#ifndef MS_RUN_LAUNCH_ENV_H
#define MS_RUN_LAUNCH_ENV_H

#include <stddef.h>

int ms_launch_env_size(void);
/* Whether `memsplit train` with these arguments goes to memsplit-rank: under
 * a launcher, with --plan or more than one rank. */
int ms_launch_wants_rank(int argc, char **argv);
int ms_launch_exec_rank(int argc, char **argv);
/* memsplit-rank's path: beside this binary. 0, or -1 (printed). */
int ms_launch_rank_path(char *out, size_t len);

#endif
