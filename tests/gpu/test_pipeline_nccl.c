/* test_pipeline_nccl.c — the split run equals the single-device run with
 * one stage per real GPU and NCCL send/recv between them (issue: rerun on
 * two real GPUs). The CPU test (tests/unit/test_pipeline.c) with stage s on
 * cuda:s, for as many stages as there are GPUs (2..4); same tolerances as
 * the virtual-device GPU test. With fewer than two GPUs it says so and
 * skips (it cannot run on one GPU: NCCL refuses two ranks on one device). */
#include <cuda_runtime_api.h>
static int gpus(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n < 4 ? n : 4;
}
#define PIPE_DEVICE "cuda:0"
#define PIPE_DISTINCT 1
#define PIPE_MAX_P() gpus()
#define PIPE_TOL 1e-4
#define PIPE_WTOL_BATCHNORM 1e-3
#define PIPE_D_MODEL 64
#define PIPE_HEADS 2
#define main pipeline_main
#include "tests/unit/test_pipeline.c"
#undef main
int main(void)
{
    if (gpus() < 2) {
        printf("pipeline over NCCL: SKIPPED: needs 2 GPUs, this machine has %d\n", gpus());
        return 0;
    }
    return pipeline_main();
}
