/* cast.cu — dst[i] = src[i] converted through float (round to nearest even);
 * same-type casts are device copies. Vectors of V = 16 / max(type sizes)
 * elements when both pointers are aligned for them. */
#include "kernels/cuda/cuda_common.cuh"

template <typename TD, typename TS, int V>
__global__ void cast_k(TD *dst, const TS *src, size_t n)
{
    size_t nvec = n / V, tid = ms_tid(), stride = ms_nthreads();
    for (size_t i = tid; i < nvec; i += stride) {
        float f[V];
        ms_ldv<V>(f, src + i * V);
        ms_stv<V>(dst + i * V, f);
    }
    for (size_t i = nvec * V + tid; i < n; i += stride) dst[i] = ms_from_f<TD>(ms_to_f(src[i]));
}

template <typename TD, typename TS>
static void cast_t(ms_kctx *ctx, TD *dst, const TS *src, size_t n)
{
    constexpr int V = 16 / (sizeof(TD) > sizeof(TS) ? sizeof(TD) : sizeof(TS));
    const int threads = 256;
    if (ms_al(dst, V * sizeof(TD)) && ms_al(src, V * sizeof(TS)))
        cast_k<TD, TS, V><<<ms_grid(n / V + 1, threads, 8), threads, 0, ms_stream(ctx)>>>(dst, src, n);
    else
        cast_k<TD, TS, 1><<<ms_grid(n, threads, 8), threads, 0, ms_stream(ctx)>>>(dst, src, n);
}

extern "C" void ms_cuda_cast(ms_kctx *ctx, ms_dtype dst_dt, void *dst, ms_dtype src_dt, const void *src,
                             size_t n)
{
    if (!ctx) return;
    if (!ms_dt_ok(dst_dt) || !ms_dt_ok(src_dt) || (n && (!dst || !src))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "cast: bad arguments (n=%zu)", n);
        return;
    }
    if (n == 0) return;
    if (dst_dt == src_dt) {
        if (dst == src) return;
        cudaError_t e = cudaMemcpyAsync(dst, src, n * ms_dtype_size(src_dt), cudaMemcpyDeviceToDevice,
                                        ms_stream(ctx));
        if (e != cudaSuccess) ms_cuda_fail(ctx, (int)e, "cast: copy: %s", cudaGetErrorString(e));
        return;
    }
    MS_DISPATCH(dst_dt, TD, MS_DISPATCH(src_dt, TS, cast_t<TD, TS>(ctx, (TD *)dst, (const TS *)src, n)));
    ms_cuda_check(ctx, "cast");
}
