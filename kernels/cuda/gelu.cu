/* gelu.cu — GELU (tanh approximation) forward and backward, elementwise,
 * 16-byte vectors when every pointer is 16-byte aligned. */
#include "kernels/cuda/cuda_common.cuh"

template <typename T, int V>
__global__ void gelu_fwd_k(T *out, const T *x, size_t n)
{
    size_t nvec = n / V, tid = ms_tid(), stride = ms_nthreads();
    for (size_t i = tid; i < nvec; i += stride) {
        float f[V];
        ms_ldv<V>(f, x + i * V);
#pragma unroll
        for (int k = 0; k < V; k++) f[k] = ms_gelu<T>(f[k]);
        ms_stv<V>(out + i * V, f);
    }
    for (size_t i = nvec * V + tid; i < n; i += stride) out[i] = ms_from_f<T>(ms_gelu<T>(ms_to_f(x[i])));
}

/* dx = dout * gelu'(x); each element of dout is read by the thread that then
 * writes the same element of dx, so dx may alias dout. */
template <typename T, int V>
__global__ void gelu_bwd_k(T *dx, const T *dout, const T *x, size_t n)
{
    size_t nvec = n / V, tid = ms_tid(), stride = ms_nthreads();
    for (size_t i = tid; i < nvec; i += stride) {
        float g[V], f[V];
        ms_ldv<V>(g, dout + i * V);
        ms_ldv<V>(f, x + i * V);
#pragma unroll
        for (int k = 0; k < V; k++) g[k] *= ms_gelu_grad<T>(f[k]);
        ms_stv<V>(dx + i * V, g);
    }
    for (size_t i = nvec * V + tid; i < n; i += stride)
        dx[i] = ms_from_f<T>(ms_to_f(dout[i]) * ms_gelu_grad<T>(ms_to_f(x[i])));
}

template <typename T>
static void gelu_fwd_t(ms_kctx *ctx, T *out, const T *x, size_t n)
{
    constexpr int V = 16 / sizeof(T);
    const int threads = 256;
    if (ms_al(out, 16) && ms_al(x, 16))
        gelu_fwd_k<T, V><<<ms_grid(n / V + 1, threads, 8), threads, 0, ms_stream(ctx)>>>(out, x, n);
    else
        gelu_fwd_k<T, 1><<<ms_grid(n, threads, 8), threads, 0, ms_stream(ctx)>>>(out, x, n);
}

template <typename T>
static void gelu_bwd_t(ms_kctx *ctx, T *dx, const T *dout, const T *x, size_t n)
{
    constexpr int V = 16 / sizeof(T);
    const int threads = 256;
    if (ms_al(dx, 16) && ms_al(dout, 16) && ms_al(x, 16))
        gelu_bwd_k<T, V><<<ms_grid(n / V + 1, threads, 8), threads, 0, ms_stream(ctx)>>>(dx, dout, x, n);
    else
        gelu_bwd_k<T, 1><<<ms_grid(n, threads, 8), threads, 0, ms_stream(ctx)>>>(dx, dout, x, n);
}

extern "C" void ms_cuda_gelu_fwd(ms_kctx *ctx, ms_dtype dt, void *out, const void *x, size_t n)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || (n && (!out || !x))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "gelu_fwd: bad arguments (n=%zu)", n);
        return;
    }
    if (n == 0) return;
    MS_DISPATCH(dt, T, gelu_fwd_t<T>(ctx, (T *)out, (const T *)x, n));
    ms_cuda_check(ctx, "gelu_fwd");
}

extern "C" void ms_cuda_gelu_bwd(ms_kctx *ctx, ms_dtype dt, void *dx, const void *dout, const void *x,
                                 size_t n)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || (n && (!dx || !dout || !x))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "gelu_bwd: bad arguments (n=%zu)", n);
        return;
    }
    if (n == 0) return;
    MS_DISPATCH(dt, T, gelu_bwd_t<T>(ctx, (T *)dx, (const T *)dout, (const T *)x, n));
    ms_cuda_check(ctx, "gelu_bwd");
}
