/* cuda_common.cuh — shared pieces of the CUDA kernels (C++ only, internal):
 * dtype dispatch, float <-> storage conversion (round to nearest even, as
 * dtype.h), 16-byte vector loads/stores, warp/block reductions, the GELU
 * formulas, launch sizing and argument checks.
 *
 * Vector convention: a kernel templated on V moves V elements per access;
 * V = 16 / sizeof(T) when every pointer it touches is aligned for that and
 * the row length is a multiple of V (the host checks; see ms_al), else V = 1. */
#ifndef MS_CUDA_COMMON_CUH
#define MS_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/cuda/cuda_kernels.h"

typedef __nv_bfloat16 ms_bf16;
typedef __half ms_f16;

/* ---- host side ---------------------------------------------------------- */

static inline cudaStream_t ms_stream(const ms_kctx *ctx) { return (cudaStream_t)ctx->stream; }

/* 1 if p is aligned to a bytes (a power of two). */
static inline bool ms_al(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static inline bool ms_dt_ok(ms_dtype dt) { return dt == MS_F32 || dt == MS_BF16 || dt == MS_F16; }

/* Whether environment variable `name` is exactly "0": how a kernel's A/B
 * switch (MS_SX_SMEM, MS_LN_COLS) turns its fast path off; callers read it
 * once into a static. */
static inline bool ms_env_is_zero(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "0") == 0;
}

/* Multiprocessor count of the current device (cached). */
int ms_cuda_sm_count(void);

/* The most shared memory a block may have on the current device (cached);
 * and a kernel allowed as much dynamic shared memory as that leaves beside
 * its static arrays (once per kernel and device): returns those bytes, or
 * -1 with the CUDA error left for ms_cuda_check. */
int ms_cuda_smem_optin(void);
int ms_cuda_allow_smem(const void *kernel);

/* Releases the cached matmul plans (matmul.cu); ctx.cu calls it when the
 * last context is destroyed. */
void ms_cuda_matmul_cache_clear(void);

/* Blocks for a grid-stride loop over `items` with `threads` per block:
 * enough to cover the work, at most `per_sm` blocks per multiprocessor. */
static inline unsigned ms_grid(size_t items, int threads, int per_sm)
{
    size_t want = (items + (size_t)threads - 1) / (size_t)threads;
    size_t cap = (size_t)ms_cuda_sm_count() * (size_t)per_sm;
    if (want > cap) want = cap;
    return want ? (unsigned)want : 1u;
}

/* Calls F<T>(...) for the storage type of dt. */
#define MS_DISPATCH(dt, T, ...)                                  \
    do {                                                         \
        switch (dt) {                                            \
        case MS_F32: { typedef float T; __VA_ARGS__; } break;    \
        case MS_BF16: { typedef ms_bf16 T; __VA_ARGS__; } break; \
        case MS_F16: { typedef ms_f16 T; __VA_ARGS__; } break;   \
        }                                                        \
    } while (0)

/* ---- device side -------------------------------------------------------- */

__device__ __forceinline__ float ms_to_f(float x) { return x; }
__device__ __forceinline__ float ms_to_f(ms_bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ms_to_f(ms_f16 x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T ms_from_f(float x);
template <> __device__ __forceinline__ float ms_from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ ms_bf16 ms_from_f<ms_bf16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ ms_f16 ms_from_f<ms_f16>(float x) { return __float2half_rn(x); }

/* V elements of T moved as one aligned access. */
template <typename T, int V> struct alignas(sizeof(T) * V) ms_pack { T v[V]; };

template <int V, typename T>
__device__ __forceinline__ void ms_ldv(float (&f)[V], const T *p)
{
    ms_pack<T, V> pk = *reinterpret_cast<const ms_pack<T, V> *>(p);
#pragma unroll
    for (int k = 0; k < V; k++) f[k] = ms_to_f(pk.v[k]);
}

template <int V, typename T>
__device__ __forceinline__ void ms_stv(T *p, const float (&f)[V])
{
    ms_pack<T, V> pk;
#pragma unroll
    for (int k = 0; k < V; k++) pk.v[k] = ms_from_f<T>(f[k]);
    *reinterpret_cast<ms_pack<T, V> *>(p) = pk;
}

/* V fp32 values; p must be aligned to 16 bytes when V is a multiple of 4
 * (loaded as float4s), else any float alignment. */
template <int V>
__device__ __forceinline__ void ms_ldf(float (&f)[V], const float *p)
{
    if constexpr (V % 4 == 0) {
#pragma unroll
        for (int k = 0; k < V; k += 4) {
            float4 q = *reinterpret_cast<const float4 *>(p + k);
            f[k] = q.x; f[k + 1] = q.y; f[k + 2] = q.z; f[k + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) f[k] = p[k];
    }
}

template <int V>
__device__ __forceinline__ void ms_stf(float *p, const float (&f)[V])
{
    if constexpr (V % 4 == 0) {
#pragma unroll
        for (int k = 0; k < V; k += 4)
            *reinterpret_cast<float4 *>(p + k) = make_float4(f[k], f[k + 1], f[k + 2], f[k + 3]);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) p[k] = f[k];
    }
}

__device__ __forceinline__ float ms_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. `sh` holds 32 floats; reusable after return. */
__device__ __forceinline__ float ms_block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ms_warp_sum(v);
    __syncthreads(); /* sh may still be read from a previous call */
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0f;
    return ms_warp_sum(v);
}

/* GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715 x^3).
 * The precise form is the CPU twin's formula (tanhf), used for fp32 data.
 * The fast form uses 0.5 (1 + tanh(u)) = sigmoid(2u), which has no
 * cancellation for negative x; its error (~1e-6 relative) is far below
 * 16-bit rounding, so 16-bit data uses it. */
#define MS_GELU_K 0.7978845608028654f
#define MS_GELU_C 0.044715f

__device__ __forceinline__ float ms_gelu_precise(float x)
{
    float u = MS_GELU_K * (x + MS_GELU_C * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
__device__ __forceinline__ float ms_gelu_grad_precise(float x)
{
    float u = MS_GELU_K * (x + MS_GELU_C * x * x * x);
    float t = tanhf(u);
    float du = MS_GELU_K * (1.0f + 3.0f * MS_GELU_C * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}
/* e = exp(-2u) clamped so that it stays finite (gelu and its slope are ~0
 * there anyway); s = sigmoid(2u) = 1/(1+e); 1-s = e*s. */
__device__ __forceinline__ float ms_gelu_fast(float x)
{
    float u = MS_GELU_K * (x + MS_GELU_C * x * x * x);
    float e = __expf(fminf(-2.0f * u, 80.0f));
    return __fdividef(x, 1.0f + e);
}
__device__ __forceinline__ float ms_gelu_grad_fast(float x)
{
    float u = MS_GELU_K * (x + MS_GELU_C * x * x * x);
    float e = __expf(fminf(-2.0f * u, 80.0f));
    float s = __fdividef(1.0f, 1.0f + e);
    float du = MS_GELU_K * (1.0f + 3.0f * MS_GELU_C * x * x);
    return s * (1.0f + 2.0f * x * du * e * s);
}
template <typename T> __device__ __forceinline__ float ms_gelu(float x) { return ms_gelu_fast(x); }
template <> __device__ __forceinline__ float ms_gelu<float>(float x) { return ms_gelu_precise(x); }
template <typename T> __device__ __forceinline__ float ms_gelu_grad(float x) { return ms_gelu_grad_fast(x); }
template <> __device__ __forceinline__ float ms_gelu_grad<float>(float x) { return ms_gelu_grad_precise(x); }

/* Grid-stride index helpers (64-bit: buffers may exceed 2^31 elements). */
__device__ __forceinline__ size_t ms_tid(void) { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t ms_nthreads(void) { return (size_t)gridDim.x * blockDim.x; }

#endif
