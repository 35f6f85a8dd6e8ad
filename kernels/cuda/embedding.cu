/* embedding.cu — token + position embedding.
 *
 * Forward: one thread per V-element chunk of an output row (16-byte vectors
 * when C and the pointers allow).
 * Backward: one thread per (position t, chunk of C); it walks the B rows at
 * position t, so dwpe[t] is summed in registers and written once by its sole
 * owner (deterministic), while dwte rows are shared between equal tokens and
 * take float atomics (vector float4 atomics on sm_90). A negative token is
 * skipped (the CPU twin reports it; device data cannot be reported here). */
#include "kernels/cuda/cuda_common.cuh"

template <typename T, int V>
__global__ void embedding_fwd_k(T *out, const int32_t *tok, const T *wte, const T *wpe, size_t rows, int T_,
                                int C)
{
    size_t cv = (size_t)(C / V), total = rows * cv, tid = ms_tid(), stride = ms_nthreads();
    for (size_t i = tid; i < total; i += stride) {
        size_t n = i / cv, c = (i - n * cv) * V;
        int t = tok[n];
        if (t < 0) continue;
        float a[V], b[V];
        ms_ldv<V>(a, wte + (size_t)t * C + c);
        ms_ldv<V>(b, wpe + (n % (size_t)T_) * C + c);
#pragma unroll
        for (int k = 0; k < V; k++) a[k] += b[k];
        ms_stv<V>(out + n * C + c, a);
    }
}

template <int V>
__device__ __forceinline__ void atomic_add_v(float *dst, const float (&g)[V])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr bool vec4 = V % 4 == 0; /* sm_90 has 16-byte float4 atomics on global memory */
#else
    constexpr bool vec4 = false;
#endif
    if constexpr (vec4) {
#pragma unroll
        for (int k = 0; k < V; k += 4)
            atomicAdd(reinterpret_cast<float4 *>(dst + k), make_float4(g[k], g[k + 1], g[k + 2], g[k + 3]));
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) atomicAdd(dst + k, g[k]);
    }
}

template <typename T, int V>
__global__ void embedding_bwd_k(float *dwte, float *dwpe, const T *dout, const int32_t *tok, int B, int T_,
                                int C)
{
    size_t cv = (size_t)(C / V), total = (size_t)T_ * cv, tid = ms_tid(), stride = ms_nthreads();
    for (size_t i = tid; i < total; i += stride) {
        size_t t = i / cv, c = (i - t * cv) * V;
        float acc[V];
#pragma unroll
        for (int k = 0; k < V; k++) acc[k] = 0.0f;
        for (int b = 0; b < B; b++) {
            size_t n = (size_t)b * T_ + t;
            int id = tok[n];
            if (id < 0) continue;
            float g[V];
            ms_ldv<V>(g, dout + n * C + c);
#pragma unroll
            for (int k = 0; k < V; k++) acc[k] += g[k];
            atomic_add_v<V>(dwte + (size_t)id * C + c, g);
        }
        float *gp = dwpe + t * C + c;
        float cur[V];
        ms_ldf<V>(cur, gp);
#pragma unroll
        for (int k = 0; k < V; k++) cur[k] += acc[k];
        ms_stf<V>(gp, cur);
    }
}

template <typename T>
static void embedding_fwd_t(ms_kctx *ctx, T *out, const int32_t *tok, const T *wte, const T *wpe, int B,
                            int T_, int C)
{
    constexpr int V = 16 / sizeof(T);
    const int threads = 256;
    size_t rows = (size_t)B * T_;
    if (C % V == 0 && ms_al(out, 16) && ms_al(wte, 16) && ms_al(wpe, 16))
        embedding_fwd_k<T, V><<<ms_grid(rows * (C / V), threads, 8), threads, 0, ms_stream(ctx)>>>(
            out, tok, wte, wpe, rows, T_, C);
    else
        embedding_fwd_k<T, 1><<<ms_grid(rows * C, threads, 8), threads, 0, ms_stream(ctx)>>>(out, tok, wte, wpe,
                                                                                            rows, T_, C);
}

template <typename T>
static void embedding_bwd_t(ms_kctx *ctx, float *dwte, float *dwpe, const T *dout, const int32_t *tok, int B,
                            int T_, int C)
{
    /* 4 elements per thread for every type: float4 grads, float4 atomics */
    const int threads = 256;
    if (C % 4 == 0 && ms_al(dwte, 16) && ms_al(dwpe, 16) && ms_al(dout, 4 * sizeof(T)))
        embedding_bwd_k<T, 4><<<ms_grid((size_t)T_ * (C / 4), threads, 8), threads, 0, ms_stream(ctx)>>>(
            dwte, dwpe, dout, tok, B, T_, C);
    else
        embedding_bwd_k<T, 1><<<ms_grid((size_t)T_ * C, threads, 8), threads, 0, ms_stream(ctx)>>>(
            dwte, dwpe, dout, tok, B, T_, C);
}

extern "C" void ms_cuda_embedding_fwd(ms_kctx *ctx, ms_dtype dt, void *out, const int32_t *tok,
                                      const void *wte, const void *wpe, int B, int T, int C)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || B < 0 || T < 0 || C < 0 || (B && T && C && (!out || !tok || !wte || !wpe))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "embedding_fwd: bad arguments (B=%d T=%d C=%d)", B, T, C);
        return;
    }
    if (!B || !T || !C) return;
    MS_DISPATCH(dt, X, embedding_fwd_t<X>(ctx, (X *)out, tok, (const X *)wte, (const X *)wpe, B, T, C));
    ms_cuda_check(ctx, "embedding_fwd");
}

extern "C" void ms_cuda_embedding_bwd(ms_kctx *ctx, ms_dtype dt, float *dwte, float *dwpe, const void *dout,
                                      const int32_t *tok, int B, int T, int C)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || B < 0 || T < 0 || C < 0 || (B && T && C && (!dwte || !dwpe || !dout || !tok))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "embedding_bwd: bad arguments (B=%d T=%d C=%d)", B, T, C);
        return;
    }
    if (!B || !T || !C) return;
    MS_DISPATCH(dt, X, embedding_bwd_t<X>(ctx, dwte, dwpe, (const X *)dout, tok, B, T, C));
    ms_cuda_check(ctx, "embedding_bwd");
}
