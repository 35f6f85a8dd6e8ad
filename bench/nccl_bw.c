/* nccl_bw.c — NCCL send/recv bandwidth between GPU 0 and GPU 1 (what a
 * pipeline boundary moves): one process, two communicators, 256 MiB
 * messages, 20 timed rounds after 3 warm-ups, timed with CUDA events.
 * Prints GB/s one way (0 -> 1) and both ways at once. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { if ((x) != 0) { fprintf(stderr, "nccl_bw: %s failed\n", #x); return 1; } } while (0)

static int rounds(ncclComm_t *c, void **buf, void **rbuf, cudaStream_t *st, size_t bytes, int n, int both)
{
    for (int r = 0; r < n; r++) {
        CK(ncclGroupStart());
        CK(ncclSend(buf[0], bytes, ncclUint8, 1, c[0], st[0]));
        CK(ncclRecv(rbuf[1], bytes, ncclUint8, 0, c[1], st[1]));
        if (both) {
            CK(ncclSend(buf[1], bytes, ncclUint8, 0, c[1], st[1]));
            CK(ncclRecv(rbuf[0], bytes, ncclUint8, 1, c[0], st[0]));
        }
        CK(ncclGroupEnd());
    }
    return 0;
}

int main(void)
{
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
        printf("nccl_bw: needs 2 GPUs (found %d)\n", n);
        return 0;
    }
    int devs[2] = { 0, 1 };
    ncclComm_t c[2];
    CK(ncclCommInitAll(c, 2, devs));
    size_t bytes = (size_t)256 << 20;
    void *buf[2], *rbuf[2];
    cudaStream_t st[2];
    for (int i = 0; i < 2; i++) {
        CK(cudaSetDevice(i));
        CK(cudaMalloc(&buf[i], bytes));
        CK(cudaMalloc(&rbuf[i], bytes));
        CK(cudaMemset(buf[i], i + 1, bytes));
        CK(cudaStreamCreate(&st[i]));
    }
    for (int both = 0; both < 2; both++) {
        if (rounds(c, buf, rbuf, st, bytes, 3, both)) return 1;
        for (int i = 0; i < 2; i++) { cudaSetDevice(i); cudaStreamSynchronize(st[i]); }
        cudaEvent_t a, b;
        cudaSetDevice(1);
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        cudaEventRecord(a, st[1]);
        if (rounds(c, buf, rbuf, st, bytes, 20, both)) return 1;
        cudaSetDevice(1);
        cudaEventRecord(b, st[1]);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        printf("nccl_bw: %s: %.1f GB/s per direction (256 MiB x 20 in %.2f ms)\n", both ? "both ways" : "one way 0->1",
               20.0 * bytes / (ms * 1e-3) / 1e9, ms);
    }
    for (int i = 0; i < 2; i++) ncclCommDestroy(c[i]);
    return 0;
}
