/* nccl_bw.c — NCCL send/recv bandwidth between GPU 0 and GPU 1 (what a
 * pipeline boundary moves): one process, two communicators, 256 MiB
 * messages, 20 timed rounds after 3 warm-ups, timed with CUDA events.
 * Prints GB/s one way (0 -> 1) and both ways at once. Then what the
 * planner's replica model needs (planner/replica_model.h): the all-reduce
 * bus bandwidth over the two GPUs (fp32 sum of 256 MiB, same rounds; bus
 * bandwidth = bytes / time x 2 (n - 1) / n, as nccl-tests reports it), and
 * the device memory NCCL itself took on each GPU (free memory after the
 * contexts, against after the communicators, their first transfers and
 * all-reduce, less this program's buffers), printed as the flags
 * `memsplit plan --bus-gbps G --comm-reserve B` take. */
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
    size_t free0[2], total;
    for (int i = 0; i < 2; i++) { /* the contexts first: they are not NCCL's */
        CK(cudaSetDevice(i));
        CK(cudaFree(0));
        CK(cudaMemGetInfo(&free0[i], &total));
    }
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
    /* all-reduce: sum of 256 MiB of floats in place over both GPUs */
    size_t nf = bytes / sizeof(float);
    float ms_ar = 0;
    for (int pass = 0; pass < 2; pass++) {
        int reps = pass ? 20 : 3;
        cudaEvent_t a, b;
        cudaSetDevice(0);
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        cudaEventRecord(a, st[0]);
        for (int r = 0; r < reps; r++) {
            CK(ncclGroupStart());
            for (int i = 0; i < 2; i++) CK(ncclAllReduce(buf[i], buf[i], nf, ncclFloat, ncclSum, c[i], st[i]));
            CK(ncclGroupEnd());
        }
        cudaSetDevice(0);
        cudaEventRecord(b, st[0]);
        cudaEventSynchronize(b);
        for (int i = 0; i < 2; i++) { cudaSetDevice(i); cudaStreamSynchronize(st[i]); }
        if (pass) cudaEventElapsedTime(&ms_ar, a, b);
    }
    double algbw = 20.0 * bytes / (ms_ar * 1e-3), busbw = algbw * 2 * (2 - 1) / 2;
    printf("nccl_bw: all-reduce over 2 GPUs: %.1f GB/s bus bandwidth (256 MiB x 20 in %.2f ms)\n", busbw / 1e9, ms_ar);
    size_t nccl_max = 0;
    for (int i = 0; i < 2; i++) {
        size_t fr;
        cudaSetDevice(i);
        CK(cudaMemGetInfo(&fr, &total));
        size_t used = free0[i] - fr, mine = 2 * bytes;
        size_t nccl = used > mine ? used - mine : 0;
        printf("nccl_bw: NCCL's own device memory on GPU %d: %zu bytes (%.1f MiB)\n", i, nccl, nccl / 1048576.0);
        if (nccl > nccl_max) nccl_max = nccl;
    }
    printf("nccl_bw: for the planner: memsplit plan --bus-gbps %.0f --comm-reserve %zu\n", busbw * 8 / 1e9, nccl_max);
    for (int i = 0; i < 2; i++) ncclCommDestroy(c[i]);
    return 0;
}
