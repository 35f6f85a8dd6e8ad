/* softmax_xent.cu — softmax cross-entropy, one block per row, gradient
 * written in place over the logits.
 *
 * Pass 1 reads the first Vreal columns once, each thread keeping an online
 * (max, sum of exp) pair per V-element vector; the pairs are merged across
 * the block. Pass 2 reads the row again and writes (softmax - onehot) *
 * dscale, and exact zeros in the padding columns. The second read mostly
 * hits L2 (keeping the row in shared memory instead was measured slower on
 * an H200: 861 vs 730 us at 8192 x 50304 bf16, from the lower occupancy).
 * Ignored rows (target < 0) and, as in the CPU twin, rows whose target is
 * >= Vreal get loss 0 and an all-zero gradient without reading the row. */
#include "kernels/cuda/cuda_common.cuh"

#include <math.h>

#define SX_THREADS 512

/* exp of x <= 0 (plus the online rescale factors): expf for fp32 logits;
 * for 16-bit logits the hardware ex2 (__expf, ~2 + 1.16|x| ulp), whose error
 * stays far below a bf16/f16 ulp of the gradient and ~1e-6 in the loss,
 * and halves the instructions per element of this otherwise compute-heavy
 * kernel. */
template <typename T> __device__ __forceinline__ float sx_exp(float x) { return __expf(x); }
template <> __device__ __forceinline__ float sx_exp<float>(float x) { return expf(x); }

/* (m, s) <- merge of (m, s) and (m2, s2): s = s*e^(m-M) + s2*e^(m2-M). */
template <typename T>
__device__ __forceinline__ void sx_merge(float &m, float &s, float m2, float s2)
{
    float M = fmaxf(m, m2);
    if (M == -INFINITY) return; /* both empty */
    s = (m == -INFINITY ? 0.0f : s * sx_exp<T>(m - M)) + (m2 == -INFINITY ? 0.0f : s2 * sx_exp<T>(m2 - M));
    m = M;
}

template <typename T, int V>
__global__ void __launch_bounds__(SX_THREADS)
    softmax_xent_k(float *losses, T *logits, const int32_t *targets, int V_, int Vreal, float dscale)
{
    __shared__ float sh_m[32], sh_s[32];
    __shared__ float sh_xt;
    int row = blockIdx.x;
    T *lr = logits + (size_t)row * V_;
    int tgt = targets[row];
    bool ignored = tgt < 0 || tgt >= Vreal;

    if (ignored) {
        float z[V];
#pragma unroll
        for (int k = 0; k < V; k++) z[k] = 0.0f;
        for (int c = threadIdx.x * V; c < V_; c += SX_THREADS * V) ms_stv<V>(lr + c, z);
        if (threadIdx.x == 0) losses[row] = 0.0f;
        return;
    }

    if (threadIdx.x == 0) sh_xt = ms_to_f(lr[tgt]); /* read before any thread overwrites the row */

    float m = -INFINITY, s = 0.0f;
    for (int c = threadIdx.x * V; c < Vreal; c += SX_THREADS * V) {
        float f[V];
        ms_ldv<V>(f, lr + c);
        float vm = -INFINITY;
#pragma unroll
        for (int k = 0; k < V; k++)
            if (c + k < Vreal) vm = fmaxf(vm, f[k]);
        if (vm > m) {
            s = m == -INFINITY ? 0.0f : s * sx_exp<T>(m - vm);
            m = vm;
        }
        if (m == -INFINITY) continue; /* all -inf so far: nothing to add */
#pragma unroll
        for (int k = 0; k < V; k++)
            if (c + k < Vreal) s += sx_exp<T>(f[k] - m);
    }
    /* merge within the warp, then across warps */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        sx_merge<T>(m, s, m2, s2);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sh_m[warp] = m;
        sh_s[warp] = s;
    }
    __syncthreads(); /* also publishes sh_xt: every read of the row is done */
    m = lane < SX_THREADS / 32 ? sh_m[lane] : -INFINITY;
    s = lane < SX_THREADS / 32 ? sh_s[lane] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        sx_merge<T>(m, s, m2, s2);
    }
    float lse = m + logf(s);
    if (threadIdx.x == 0) losses[row] = lse - sh_xt;

    for (int c = threadIdx.x * V; c < V_; c += SX_THREADS * V) {
        float f[V];
        if (c < Vreal) {
            ms_ldv<V>(f, lr + c);
        } else {
#pragma unroll
            for (int k = 0; k < V; k++) f[k] = 0.0f; /* padding only */
        }
#pragma unroll
        for (int k = 0; k < V; k++) {
            int j = c + k;
            f[k] = j < Vreal ? (sx_exp<T>(f[k] - lse) - (j == tgt ? 1.0f : 0.0f)) * dscale : 0.0f;
        }
        ms_stv<V>(lr + c, f);
    }
}

template <typename T>
static void softmax_xent_t(ms_kctx *ctx, float *losses, T *logits, const int32_t *targets, int N, int V_,
                           int Vreal, float dscale)
{
    constexpr int V = 16 / sizeof(T);
    if (V_ % V == 0 && ms_al(logits, 16))
        softmax_xent_k<T, V><<<N, SX_THREADS, 0, ms_stream(ctx)>>>(losses, logits, targets, V_, Vreal, dscale);
    else
        softmax_xent_k<T, 1><<<N, SX_THREADS, 0, ms_stream(ctx)>>>(losses, logits, targets, V_, Vreal, dscale);
}

extern "C" void ms_cuda_softmax_xent(ms_kctx *ctx, ms_dtype dt, float *losses, void *logits,
                                     const int32_t *targets, int N, int V, int Vreal, float dscale)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || N < 0 || Vreal < 1 || V < Vreal || (N && (!losses || !logits || !targets))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "softmax_xent: bad arguments (N=%d V=%d Vreal=%d)", N, V, Vreal);
        return;
    }
    if (N == 0) return;
    MS_DISPATCH(dt, X, softmax_xent_t<X>(ctx, losses, (X *)logits, targets, N, V, Vreal, dscale));
    ms_cuda_check(ctx, "softmax_xent");
}
