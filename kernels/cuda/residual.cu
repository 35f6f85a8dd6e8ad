/* residual.cu — out = a + b elementwise (out may alias a or b: each element
 * is read and written by the same thread), 16-byte vectors when aligned. */
#include "kernels/cuda/cuda_common.cuh"

template <typename T, int V>
__global__ void residual_k(T *out, const T *a, const T *b, size_t n)
{
    size_t nvec = n / V, tid = ms_tid(), stride = ms_nthreads();
    for (size_t i = tid; i < nvec; i += stride) {
        float fa[V], fb[V];
        ms_ldv<V>(fa, a + i * V);
        ms_ldv<V>(fb, b + i * V);
#pragma unroll
        for (int k = 0; k < V; k++) fa[k] += fb[k];
        ms_stv<V>(out + i * V, fa);
    }
    for (size_t i = nvec * V + tid; i < n; i += stride)
        out[i] = ms_from_f<T>(ms_to_f(a[i]) + ms_to_f(b[i]));
}

template <typename T>
static void residual_t(ms_kctx *ctx, T *out, const T *a, const T *b, size_t n)
{
    constexpr int V = 16 / sizeof(T);
    const int threads = 256;
    if (ms_al(out, 16) && ms_al(a, 16) && ms_al(b, 16))
        residual_k<T, V><<<ms_grid(n / V + 1, threads, 8), threads, 0, ms_stream(ctx)>>>(out, a, b, n);
    else
        residual_k<T, 1><<<ms_grid(n, threads, 8), threads, 0, ms_stream(ctx)>>>(out, a, b, n);
}

extern "C" void ms_cuda_residual_fwd(ms_kctx *ctx, ms_dtype dt, void *out, const void *a, const void *b,
                                     size_t n)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || (n && (!out || !a || !b))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "residual_fwd: bad arguments (n=%zu)", n);
        return;
    }
    if (n == 0) return;
    MS_DISPATCH(dt, T, residual_t<T>(ctx, (T *)out, (const T *)a, (const T *)b, n));
    ms_cuda_check(ctx, "residual_fwd");
}
