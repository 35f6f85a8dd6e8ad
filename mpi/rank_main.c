/* rank_main.c — memsplit-rank, the one binary that links libmpi: what
 * mpirun (or srun) starts once per rank, directly or through memsplit,
 * which hands a `train` under a launcher over to it (cli/launch_env.h). */
#include "cli/common.h"
#include "mpi/rank_train.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: mpirun -np N memsplit-rank train --plan FILE (--preset NAME | --config FILE) [options]\n"
    "       (mpirun -np N memsplit train --plan FILE ... runs this binary)\n"
    "One rank of a plan's p stages x d replicas; see memsplit-rank train --help.\n";

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "train")) {
        fputs(usage, stderr);
        return MS_EXIT_USAGE;
    }
    MPI_Init(&argc, &argv);
    int rc = ms_rank_train(argc - 1, argv + 1);
    MPI_Finalize();
    return rc;
}
