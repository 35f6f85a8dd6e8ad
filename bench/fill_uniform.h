/* fill_uniform.h — operands for the developer's matmul tools (gemm_pick,
 * gemm_alts): n values uniform in [-1, 1) from a splitmix64 stream, as fp32
 * or as bf16 (the fp32 value's top 16 bits), copied to device memory. Not
 * zeros: products of zeros draw less power and run faster. */
#ifndef MS_BENCH_FILL_UNIFORM_H
#define MS_BENCH_FILL_UNIFORM_H

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 0, or -1 when out of host memory or the copy fails. */
static int fill_uniform(void *dev, size_t n, int f32, uint64_t seed)
{
    size_t es = f32 ? 4 : 2;
    unsigned char *h = malloc(n * es);
    if (!h) return -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float f = (float)((double)(z >> 11) / 4503599627370496.0 - 1.0);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (f32) memcpy(h + i * 4, &f, 4);
        else { uint16_t b = (uint16_t)(bits >> 16); memcpy(h + i * 2, &b, 2); }
    }
    int rc = cudaMemcpy(dev, h, n * es, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
    free(h);
    return rc;
}

#endif
