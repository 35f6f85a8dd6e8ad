/* grad_stats.cu — sum of squares and NaN/Inf count of fp32 buffers (block
 * reduction, one atomicAdd per block into the device accumulators), AdamW's
 * multiplier from those records (clip_scale: one thread, the CPU twin's
 * double arithmetic in the same order, so the same bits), and the in-place
 * scale. float4 accesses when x is 16-byte aligned. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/clip_scale.h"

template <int V>
__global__ void grad_stats_k(const float *x, size_t n, float *sumsq, int *nonfinite)
{
    __shared__ float sh[32];
    size_t nvec = n / V, tid = ms_tid(), stride = ms_nthreads();
    float s = 0.0f;
    int bad = 0;
    for (size_t i = tid; i < nvec; i += stride) {
        float f[V];
        ms_ldf<V>(f, x + i * V);
#pragma unroll
        for (int k = 0; k < V; k++) {
            s += f[k] * f[k];
            bad += !isfinite(f[k]);
        }
    }
    for (size_t i = nvec * V + tid; i < n; i += stride) {
        s += x[i] * x[i];
        bad += !isfinite(x[i]);
    }
    s = ms_block_sum(s, sh);
    bad = __syncthreads_count(bad) ? (int)ms_block_sum((float)bad, sh) : 0;
    if (threadIdx.x == 0) {
        atomicAdd(sumsq, s);
        if (bad) atomicAdd(nonfinite, bad);
    }
}

template <int V>
__global__ void scale_k(float *x, size_t n, float s)
{
    size_t nvec = n / V, tid = ms_tid(), stride = ms_nthreads();
    for (size_t i = tid; i < nvec; i += stride) {
        float f[V];
        ms_ldf<V>(f, x + i * V);
#pragma unroll
        for (int k = 0; k < V; k++) f[k] *= s;
        ms_stf<V>(x + i * V, f);
    }
    for (size_t i = nvec * V + tid; i < n; i += stride) x[i] *= s;
}

__global__ void clip_scale_k(float *out, const ms_grad_stat *stats, int n, float loss_scale, float grad_clip)
{
    ms_clip_scale_of(out, stats, n, loss_scale, grad_clip);
}

extern "C" void ms_cuda_clip_scale(ms_kctx *ctx, float *out, const ms_grad_stat *stats, int n, float loss_scale,
                                   float grad_clip)
{
    if (!ctx) return;
    if (!out || n < 0 || (n && !stats) || !(loss_scale > 0)) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "clip_scale: bad arguments (n=%d)", n);
        return;
    }
    clip_scale_k<<<1, 1, 0, ms_stream(ctx)>>>(out, stats, n, loss_scale, grad_clip);
    ms_cuda_check(ctx, "clip_scale");
}

extern "C" void ms_cuda_grad_stats(ms_kctx *ctx, const float *x, size_t n, float *sumsq, int *nonfinite)
{
    if (!ctx) return;
    if (!sumsq || !nonfinite || (n && !x)) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "grad_stats: bad arguments (n=%zu)", n);
        return;
    }
    if (n == 0) return;
    const int threads = 512;
    if (ms_al(x, 16))
        grad_stats_k<4><<<ms_grid(n / 4 + 1, threads, 4), threads, 0, ms_stream(ctx)>>>(x, n, sumsq, nonfinite);
    else
        grad_stats_k<1><<<ms_grid(n, threads, 4), threads, 0, ms_stream(ctx)>>>(x, n, sumsq, nonfinite);
    ms_cuda_check(ctx, "grad_stats");
}

extern "C" void ms_cuda_scale(ms_kctx *ctx, float *x, size_t n, float s)
{
    if (!ctx) return;
    if (n && !x) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "scale: x is NULL (n=%zu)", n);
        return;
    }
    if (n == 0) return;
    const int threads = 256;
    if (ms_al(x, 16))
        scale_k<4><<<ms_grid(n / 4 + 1, threads, 8), threads, 0, ms_stream(ctx)>>>(x, n, s);
    else
        scale_k<1><<<ms_grid(n, threads, 8), threads, 0, ms_stream(ctx)>>>(x, n, s);
    ms_cuda_check(ctx, "scale");
}
