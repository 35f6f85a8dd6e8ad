/* softmax_xent.cu — softmax cross-entropy, gradient written in place over
 * the logits.
 *
 * Two kernels with one contract (kernels/ops.h):
 *
 * - Rows in shared memory (16-bit logits whose rows are 16-byte aligned,
 *   long enough to be worth a block each, and two of which fit in a block's
 *   shared memory; MS_SX_SMEM=0, read once, turns it off): one block of
 *   1024 threads an SM walks rows blockIdx.x, +gridDim.x, ... with two row
 *   buffers. While it works on one row, the next one streams in by cp.async,
 *   so each logit is read from DRAM once and written once, and the exps
 *   (two a logit: the row's sum, then the gradient) overlap the loads. A
 *   row is three passes over shared memory: its max, its sum of exps, then
 *   (softmax - onehot) * dscale stored to global memory (exact zeros in the
 *   padding columns).
 * - Otherwise one block of 512 threads a row. Pass 1 reads the first Vreal
 *   columns once, each thread keeping an online (max, sum of exp) pair per
 *   V-element vector; the pairs are merged across the block. Pass 2 reads
 *   the row again and writes the gradient. The second read hits L2 only
 *   while few rows are in flight: at the LM head's 50304 columns the rows of
 *   four blocks an SM fill the H200's L2, which is why the kernel above
 *   exists.
 *
 * Ignored rows (target < 0) and, as in the CPU twin, rows whose target is
 * >= Vreal get loss 0 and an all-zero gradient. */
#include "kernels/cuda/cuda_common.cuh"

#include <math.h>
#include <stdlib.h>

#define SX_THREADS 512

static constexpr float kSxLog2e = 1.4426950408889634f;

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

/* ---- rows in shared memory ---------------------------------------------- */

/* Measured on an H200 (bench/sx_time.c, 3277 x 50304 bf16 logits, one
 * gpt2-small head chunk; median of 25): 232 and 252 us on two machines,
 * against 271-273 for the kernel above; in training, gpt2-small bf16 made
 * 1.0-1.5% more tokens/s. Two forms measured slower and were dropped: each
 * block waiting for its whole next row behind a barrier before refilling
 * (255 us), and keeping exp(x - max) over the logit so that the gradient
 * pass needs no second exp (511 us). */
#define SXS_THREADS 1024

/* Each thread owns the 16-byte vectors i = threadIdx.x (mod SXS_THREADS) of
 * both row buffers: it alone copies them in, reads them and refills them.
 * So no barrier guards the buffers; the only barriers are the two
 * reductions a row. */
__device__ __forceinline__ void sxs_copy(uint4 *dst, const uint4 *src)
{
    uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(src) : "memory");
}
__device__ __forceinline__ void sxs_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
/* Waits until at most one committed group (the newest) is still in flight. */
__device__ __forceinline__ void sxs_wait_all_but_newest(void) { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

/* 2^x, the hardware's approximation (what __expf uses after its multiply). */
__device__ __forceinline__ float sxs_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* Max (op 0) or sum (op 1) over the block; every thread gets it. sh: 32 floats. */
template <int OP> __device__ __forceinline__ float sxs_block_reduce(float v, float *sh)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = OP == 0 ? fmaxf(v, w) : v + w;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* sh may still be read from the previous reduction */
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = sh[lane]; /* SXS_THREADS / 32 == 32 warps: every lane has one */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = OP == 0 ? fmaxf(v, w) : v + w;
    }
    return v;
}

/* The max of a vector's 8 16-bit values, two at a time (packed compares). */
template <typename T> __device__ __forceinline__ float sxs_vmax(uint4 v);
template <> __device__ __forceinline__ float sxs_vmax<ms_bf16>(uint4 v)
{
    __nv_bfloat162 a = *reinterpret_cast<__nv_bfloat162 *>(&v.x), b = *reinterpret_cast<__nv_bfloat162 *>(&v.y);
    __nv_bfloat162 c = *reinterpret_cast<__nv_bfloat162 *>(&v.z), d = *reinterpret_cast<__nv_bfloat162 *>(&v.w);
    __nv_bfloat162 m = __hmax2(__hmax2(a, b), __hmax2(c, d));
    return fmaxf(__low2float(m), __high2float(m));
}
template <> __device__ __forceinline__ float sxs_vmax<ms_f16>(uint4 v)
{
    __half2 a = *reinterpret_cast<__half2 *>(&v.x), b = *reinterpret_cast<__half2 *>(&v.y);
    __half2 c = *reinterpret_cast<__half2 *>(&v.z), d = *reinterpret_cast<__half2 *>(&v.w);
    __half2 m = __hmax2(__hmax2(a, b), __hmax2(c, d));
    return fmaxf(__low2float(m), __high2float(m));
}

template <typename T> __device__ __forceinline__ void sxs_unpack(float (&f)[8], uint4 v)
{
    const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
    for (int k = 0; k < 8; k++) f[k] = ms_to_f(e[k]);
}

template <typename T>
__global__ void __launch_bounds__(SXS_THREADS, 1)
    softmax_xent_smem_k(float *losses, T *logits, const int32_t *targets, int N, int V_, int Vreal, float dscale)
{
    static_assert(sizeof(T) == 2, "16-bit logits: 8 a vector");
    extern __shared__ uint4 sxs_rows[]; /* two rows of V_ elements */
    __shared__ float sh[32];
    const int tid = threadIdx.x, nv = V_ / 8, nfull = Vreal / 8, part = Vreal - nfull * 8, G = gridDim.x;
    const uint4 *src = reinterpret_cast<const uint4 *>(logits);

    /* two rows in flight before the first is used; one group committed per
     * row, empty past N, so that wait_group 1 always means "this row" */
    int row = blockIdx.x;
    for (int r = 0; r < 2; r++) {
        if (row + r * G < N)
            for (int i = tid; i < nv; i += SXS_THREADS)
                sxs_copy(sxs_rows + r * nv + i, src + (size_t)(row + r * G) * nv + i);
        sxs_commit();
    }

    for (int it = 0; row < N; it++, row += G) {
        uint4 *b = sxs_rows + (it & 1) * nv; /* this row's buffer */
        uint4 *out = reinterpret_cast<uint4 *>(logits + (size_t)row * V_);
        const uint4 *next = row + 2 * G < N ? src + (size_t)(row + 2 * G) * nv : nullptr; /* refills b */
        int tgt = targets[row];
        sxs_wait_all_but_newest(); /* this thread's vectors of this row have landed */

        if (tgt < 0 || tgt >= Vreal) { /* ignored: loss 0, zero gradient (the whole block takes this branch) */
            for (int i = tid; i < nv; i += SXS_THREADS) {
                out[i] = make_uint4(0, 0, 0, 0);
                if (next) sxs_copy(b + i, next + i);
            }
            if (tid == 0) losses[row] = 0.0f;
            sxs_commit();
            continue;
        }
        /* the row's max over its real columns; the owner of the vector that
         * Vreal cuts takes its real elements one by one */
        float m = -INFINITY;
        for (int i = tid; i < nfull; i += SXS_THREADS) m = fmaxf(m, sxs_vmax<T>(b[i]));
        if (part && tid == nfull % SXS_THREADS) {
            const T *e = reinterpret_cast<const T *>(b + nfull);
            for (int k = 0; k < part; k++) m = fmaxf(m, ms_to_f(e[k]));
        }
        m = sxs_block_reduce<0>(m, sh);
        /* the sum of exps (all -inf: the sum is 0 and lse -inf, as the CPU
         * twin's); x - m is exact for 16-bit values, then scaled for exp2 */
        const float mm = m == -INFINITY ? 0.0f : m;
        float s = 0.0f;
        for (int i = tid; i < nfull; i += SXS_THREADS) {
            float f[8];
            sxs_unpack<T>(f, b[i]);
#pragma unroll
            for (int k = 0; k < 8; k++) s += sxs_exp2((f[k] - mm) * kSxLog2e);
        }
        if (part && tid == nfull % SXS_THREADS) {
            float f[8];
            sxs_unpack<T>(f, b[nfull]);
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (k < part) s += sxs_exp2((f[k] - mm) * kSxLog2e);
        }
        s = sxs_block_reduce<1>(s, sh);
        const float lse = m + logf(s);
        const int tv = tgt / 8; /* the target's vector */
        /* the gradient, straight to global memory; each vector, once read,
         * is refilled with the row after next */
        for (int i = tid; i < nv; i += SXS_THREADS) {
            float f[8];
            sxs_unpack<T>(f, b[i]);
            const int tk = i == tv ? tgt - tv * 8 : -1; /* the target's place in this vector, if here */
#pragma unroll
            for (int k = 0; k < 8; k++) {
                if (k == tk) losses[row] = lse - f[k];
                f[k] = sxs_exp2((f[k] - lse) * kSxLog2e) * dscale;
                if (k == tk) f[k] -= dscale;
            }
            if (i >= nfull) /* the partial vector and the padding: exact zeros past Vreal */
#pragma unroll
                for (int k = 0; k < 8; k++)
                    if (i * 8 + k >= Vreal) f[k] = 0.0f;
            ms_stv<8>(reinterpret_cast<T *>(out + i), f);
            if (next) sxs_copy(b + i, next + i); /* after the store, which needed b[i]'s value */
        }
        sxs_commit();
    }
}

/* 1 if the kernel above may take these rows: 16-bit, 16-byte-aligned rows
 * of at least 16 KiB (shorter rows leave a whole SM to too little work);
 * the caller then checks that two rows fit in its shared memory. */
static bool sxs_wants(size_t es, const void *logits, int V)
{
    static const bool off = ms_env_is_zero("MS_SX_SMEM"); /* never (an A/B switch for measurements) */
    return !off && es == 2 && V % 8 == 0 && ms_al(logits, 16) && (size_t)V * es >= (16u << 10);
}

/* Launches the shared-memory kernel if it takes these rows; 1 if it did (or
 * failed to be allowed its shared memory: ctx says so), 0 if not. */
template <typename T>
static int sxs_launch(ms_kctx *ctx, float *losses, T *logits, const int32_t *targets, int N, int V_, int Vreal,
                      float dscale)
{
    if constexpr (sizeof(T) != 2) {
        return 0;
    } else {
        if (!sxs_wants(sizeof(T), logits, V_)) return 0;
        auto kern = softmax_xent_smem_k<T>;
        int allow = ms_cuda_allow_smem((const void *)kern);
        if (allow < 0) {
            ms_cuda_check(ctx, "softmax_xent (shared memory size)");
            return 1;
        }
        size_t smem = (size_t)V_ * sizeof(T) * 2;
        if (smem > (size_t)allow) return 0;
        int grid = ms_cuda_sm_count() < N ? ms_cuda_sm_count() : N;
        kern<<<grid, SXS_THREADS, smem, ms_stream(ctx)>>>(losses, logits, targets, N, V_, Vreal, dscale);
        return 1;
    }
}

template <typename T>
static void softmax_xent_t(ms_kctx *ctx, float *losses, T *logits, const int32_t *targets, int N, int V_,
                           int Vreal, float dscale)
{
    constexpr int V = 16 / sizeof(T);
    if (sxs_launch<T>(ctx, losses, logits, targets, N, V_, Vreal, dscale)) return;
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
