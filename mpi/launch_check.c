/* launch_check.c — the plan against the launch (launch_check.h). */
#include "mpi/launch_check.h"
#include "vocab/plan_replicas.h"
#include "trainer/device.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLAIM_LEN 160

int ms_launch_check_size(const ms_plan *plan, char *err, size_t errlen)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int want = ms_plan_ranks(plan);
    if (size == want) return 0;
    snprintf(err, errlen,
             "the plan wants %d ranks (%d stage%s x %d replica%s), but the launch started %d: "
             "run it as mpirun -np %d (or srun -n %d)",
             want, plan->n_stages, plan->n_stages == 1 ? "" : "s", plan->replicas, plan->replicas == 1 ? "" : "s",
             size, want, want);
    return -1;
}

static int node_rank(void)
{
    MPI_Comm node;
    int r = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) return 0;
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
}

void ms_launch_device(const char *asked, char *out, size_t len)
{
    int local = node_rank(); /* collective: every rank takes part */
    if (asked && asked[0]) snprintf(out, len, "%s", asked);
    else if (ms_cuda_gpu_count() > 0) snprintf(out, len, "cuda:%d", local);
    else snprintf(out, len, "cpu");
}

/* "host/GPU-identity", or "" for the CPU */
static void claim_of(const char *device, char *out)
{
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    out[0] = 0;
    int ord;
    if (sscanf(device, "cuda:%d", &ord) != 1) return;
    char bus[32] = "";
    if (ord >= 0 && ord < ms_cuda_gpu_count() && cudaDeviceGetPCIBusId(bus, sizeof bus, ord) == cudaSuccess)
        snprintf(out, CLAIM_LEN, "%s (PCI %s) on host %.63s", device, bus, host);
    else
        snprintf(out, CLAIM_LEN, "%s on host %.63s", device, host);
}

int ms_launch_check_claims(const char *device, char *err, size_t errlen)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char mine[CLAIM_LEN];
    claim_of(device, mine);
    char *all = malloc((size_t)size * CLAIM_LEN);
    if (!all) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    MPI_Allgather(mine, CLAIM_LEN, MPI_CHAR, all, CLAIM_LEN, MPI_CHAR, MPI_COMM_WORLD);
    int rc = 0;
    for (int a = 0; a < size && !rc; a++)
        for (int b = a + 1; b < size && !rc; b++) {
            const char *ca = all + (size_t)a * CLAIM_LEN, *cb = all + (size_t)b * CLAIM_LEN;
            if (ca[0] && !strcmp(ca, cb)) {
                snprintf(err, errlen,
                         "ranks %d and %d both claim GPU %s; NCCL needs one GPU per rank: give each rank its own "
                         "(no --device, or CUDA_VISIBLE_DEVICES per rank)",
                         a, b, ca);
                rc = -1;
            }
        }
    free(all);
    return rc;
}
