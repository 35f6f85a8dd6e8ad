/* sx_time.c — the fused softmax cross-entropy (kernels/cuda/softmax_xent.cu)
 * on the LM head's chunk shape, timed alone. A developer's tool of issue 15,
 * like gemm_pick: not part of `make bench`.
 *
 *   sx_time [ROWS V VREAL]     (default 3277 50304 50257: a gpt2-small chunk)
 *   MS_SX_SMEM=0 sx_time ...   the one-block-a-row kernel instead
 *
 * bf16 logits uniform in [-4, 4) and random targets (every 97th row
 * ignored). Each call first gets a fresh copy of the logits (the kernel
 * writes the gradient over them); only the kernel is timed, by CUDA events,
 * median of CALLS. Prints the median, the DRAM rate it implies (the logits
 * read once and written once), and checksums (the loss sum and the sum of
 * |dlogits| of the last call) for comparing the two kernels' results across
 * runs. Exit 0, or 1 on bad arguments or a CUDA error. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/fill_uniform.h"
#include "kernels/cuda/cuda_kernels.h"

#define CALLS 25
#define WARMUP 3

static int parse(const char *s, int *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > (1L << 24)) return -1;
    *out = (int)v;
    return 0;
}

/* Says what failed and returns the exit status 1. */
static int fail(const char *what)
{
    fprintf(stderr, "sx_time: %s failed\n", what);
    return 1;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float bf16_to_f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int main(int argc, char **argv)
{
    int N = 3277, V = 50304, Vreal = 50257;
    if (argc != 1 && argc != 4) {
        fprintf(stderr, "usage: sx_time [ROWS V VREAL]\n");
        return 1;
    }
    if (argc == 4 && (parse(argv[1], &N) || parse(argv[2], &V) || parse(argv[3], &Vreal) || Vreal > V)) {
        fprintf(stderr, "sx_time: ROWS, V, VREAL must be positive integers with VREAL <= V\n");
        return 1;
    }
    size_t n = (size_t)N * V, bytes = n * 2;
    void *ws = NULL, *pristine = NULL, *logits = NULL;
    float *losses = NULL;
    int32_t *targets = NULL;
    if (cudaMalloc(&ws, MS_CUDA_WORKSPACE_BYTES) || cudaMalloc(&pristine, bytes) || cudaMalloc(&logits, bytes) ||
        cudaMalloc((void **)&losses, (size_t)N * 4) || cudaMalloc((void **)&targets, (size_t)N * 4)) {
        fprintf(stderr, "sx_time: cudaMalloc failed (%zu bytes of logits, twice)\n", bytes);
        return 1;
    }
    if (fill_uniform(pristine, n, 0, 0x5eed)) {
        fprintf(stderr, "sx_time: cannot fill the logits\n");
        return 1;
    }
    /* [-1, 1) -> [-4, 4): the bf16 values scaled by 4 (exact) on the host side */
    uint16_t *h = malloc(bytes);
    int32_t *ht = malloc((size_t)N * 4);
    float *hl = malloc((size_t)N * 4);
    if (!h || !ht || !hl) return fail("host allocation");
    if (cudaMemcpy(h, pristine, bytes, cudaMemcpyDeviceToHost)) return fail("copying the logits back");
    for (size_t i = 0; i < n; i++) {
        float f = bf16_to_f(h[i]) * 4.0f;
        uint32_t u;
        memcpy(&u, &f, 4);
        h[i] = (uint16_t)(u >> 16);
    }
    uint64_t z = 12345;
    for (int i = 0; i < N; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        ht[i] = i % 97 == 5 ? -1 : (int32_t)((z >> 33) % (uint64_t)Vreal);
    }
    if (cudaMemcpy(pristine, h, bytes, cudaMemcpyHostToDevice) ||
        cudaMemcpy(targets, ht, (size_t)N * 4, cudaMemcpyHostToDevice))
        return fail("copying the logits and targets to the GPU");

    ms_kctx k;
    if (ms_cuda_ctx_init(&k, ws, MS_CUDA_WORKSPACE_BYTES)) {
        fprintf(stderr, "ms_cuda_ctx_init: %s\n", k.error);
        return 1;
    }
    cudaStream_t st = (cudaStream_t)k.stream;
    cudaEvent_t e0, e1;
    if (cudaEventCreate(&e0) || cudaEventCreate(&e1)) return fail("cudaEventCreate");
    float ms[CALLS];
    for (int c = 0; c < WARMUP + CALLS; c++) {
        cudaMemcpyAsync(logits, pristine, bytes, cudaMemcpyDeviceToDevice, st);
        cudaEventRecord(e0, st);
        ms_ops_cuda.softmax_xent(&k, MS_BF16, losses, logits, targets, N, V, Vreal, 1.0f / N);
        cudaEventRecord(e1, st);
        if (ms_cuda_sync(&k)) {
            fprintf(stderr, "sx_time: %s\n", k.error);
            return 1;
        }
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        if (c >= WARMUP) ms[c - WARMUP] = t;
    }
    qsort(ms, CALLS, sizeof ms[0], cmp_float);
    double med = ms[CALLS / 2];
    if (cudaMemcpy(h, logits, bytes, cudaMemcpyDeviceToHost) ||
        cudaMemcpy(hl, losses, (size_t)N * 4, cudaMemcpyDeviceToHost))
        return fail("copying the results back");
    double lsum = 0, gsum = 0;
    for (int i = 0; i < N; i++) lsum += hl[i];
    for (size_t i = 0; i < n; i++) gsum += fabs((double)bf16_to_f(h[i]));
    const char *env = getenv("MS_SX_SMEM");
    printf("sx_time: %d x %d (%d real) bf16, %s: median %.1f us (min %.1f, max %.1f) of %d; %.2f TB/s "
           "(read + write once); loss sum %.6f, sum |dlogits| %.6f\n",
           N, V, Vreal, env && !strcmp(env, "0") ? "a block a row (MS_SX_SMEM=0)" : "default", med * 1e3,
           ms[0] * 1e3, ms[CALLS - 1] * 1e3, CALLS, 2.0 * (double)bytes / (med * 1e-3) / 1e12, lsum, gsum);
    ms_cuda_ctx_destroy(&k);
    return 0;
}
