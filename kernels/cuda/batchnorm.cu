/* batchnorm.cu — BatchNorm over features (training mode): statistics of each
 * of the C features (columns) over the N rows, eps 1e-5.
 *
 * One block owns a tile of BN_COLS columns and all N rows: threadIdx.x is
 * the column (coalesced row segments), threadIdx.y a row phase. Pass 1
 * reduces the column statistics (shared-memory tree over the row phases),
 * pass 2 streams the tile again (mostly from L2) to write the output / dx.
 * Because each column has a single owner, everything is deterministic and
 * dw/db are updated without atomics. The price: only ceil(C/32) blocks, so
 * narrow C leaves most multiprocessors idle (rows are unrolled by 4 to keep
 * more loads in flight). Splitting rows over blocks would need a scratch
 * buffer for the column sums, which the op contract does not provide.
 *
 * The forward variance uses sums shifted by the column's first value
 * (sum(x-K), sum((x-K)^2) with K = x[0,c]): one pass, and no cancellation
 * unless |mean - K| is many standard deviations. */
#include "kernels/cuda/cuda_common.cuh"

#define BN_EPS 1e-5f
#define BN_COLS 32
#define BN_ROWS 32 /* row phases per block: 1024 threads */

/* Sums a[y][x] over y into a[0][x]; all threads of the block call it. */
__device__ __forceinline__ void bn_reduce_rows(float (*a)[BN_COLS])
{
    for (int h = BN_ROWS / 2; h > 0; h >>= 1) {
        __syncthreads();
        if ((int)threadIdx.y < h) a[threadIdx.y][threadIdx.x] += a[threadIdx.y + h][threadIdx.x];
    }
    __syncthreads();
}

template <typename T>
__global__ void __launch_bounds__(BN_COLS *BN_ROWS)
    batchnorm_fwd_k(T *out, float *mean, float *rstd, float *run_mean, float *run_var, float momentum,
                    const T *x, const float *w, const float *b, int N, int C)
{
    __shared__ float s1[BN_ROWS][BN_COLS], s2[BN_ROWS][BN_COLS];
    __shared__ float col_mu[BN_COLS], col_r[BN_COLS];
    int c = blockIdx.x * BN_COLS + threadIdx.x;
    bool live = c < C;
    float k0 = live ? ms_to_f(x[c]) : 0.0f;
    float a1 = 0.0f, a2 = 0.0f;
    if (live) {
        int r = threadIdx.y;
        for (; r + 3 * BN_ROWS < N; r += 4 * BN_ROWS) { /* 4 independent loads in flight */
            float d[4];
#pragma unroll
            for (int u = 0; u < 4; u++) d[u] = ms_to_f(x[(size_t)(r + u * BN_ROWS) * C + c]) - k0;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                a1 += d[u];
                a2 += d[u] * d[u];
            }
        }
        for (; r < N; r += BN_ROWS) {
            float d = ms_to_f(x[(size_t)r * C + c]) - k0;
            a1 += d;
            a2 += d * d;
        }
    }
    s1[threadIdx.y][threadIdx.x] = a1;
    s2[threadIdx.y][threadIdx.x] = a2;
    bn_reduce_rows(s1);
    bn_reduce_rows(s2);
    if (threadIdx.y == 0) {
        float mu = 0.0f, r = 0.0f;
        if (live) {
            float m1 = s1[0][threadIdx.x] / (float)N;
            float var = fmaxf(s2[0][threadIdx.x] / (float)N - m1 * m1, 0.0f);
            mu = k0 + m1;
            r = 1.0f / sqrtf(var + BN_EPS);
            mean[c] = mu;
            rstd[c] = r;
            run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * mu;
            run_var[c] = (1.0f - momentum) * run_var[c] + momentum * (var * (float)N / (float)(N - 1));
        }
        col_mu[threadIdx.x] = mu;
        col_r[threadIdx.x] = r;
    }
    __syncthreads();
    if (!live) return;
    float mu = col_mu[threadIdx.x], r = col_r[threadIdx.x], fw = w[c], fb = b[c];
    int row = threadIdx.y;
    for (; row + 3 * BN_ROWS < N; row += 4 * BN_ROWS) {
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) v[u] = ms_to_f(x[(size_t)(row + u * BN_ROWS) * C + c]);
#pragma unroll
        for (int u = 0; u < 4; u++) out[(size_t)(row + u * BN_ROWS) * C + c] = ms_from_f<T>((v[u] - mu) * r * fw + fb);
    }
    for (; row < N; row += BN_ROWS) {
        size_t i = (size_t)row * C + c;
        out[i] = ms_from_f<T>((ms_to_f(x[i]) - mu) * r * fw + fb);
    }
}

template <typename T>
__global__ void __launch_bounds__(BN_COLS *BN_ROWS)
    batchnorm_bwd_k(T *dx, const T *dresid, float *dw, float *db, const T *dout, const T *x, const float *mean,
                    const float *rstd, const float *w, int N, int C)
{
    __shared__ float s1[BN_ROWS][BN_COLS], s2[BN_ROWS][BN_COLS];
    int c = blockIdx.x * BN_COLS + threadIdx.x;
    bool live = c < C;
    float mu = live ? mean[c] : 0.0f, r = live ? rstd[c] : 0.0f;
    float a1 = 0.0f, a2 = 0.0f; /* sum dout, sum dout*xhat */
    if (live) {
        int row = threadIdx.y;
        for (; row + 3 * BN_ROWS < N; row += 4 * BN_ROWS) {
            float go[4], xv[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                size_t i = (size_t)(row + u * BN_ROWS) * C + c;
                go[u] = ms_to_f(dout[i]);
                xv[u] = ms_to_f(x[i]);
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                a1 += go[u];
                a2 += go[u] * ((xv[u] - mu) * r);
            }
        }
        for (; row < N; row += BN_ROWS) {
            size_t i = (size_t)row * C + c;
            float go = ms_to_f(dout[i]);
            float xhat = (ms_to_f(x[i]) - mu) * r;
            a1 += go;
            a2 += go * xhat;
        }
    }
    s1[threadIdx.y][threadIdx.x] = a1;
    s2[threadIdx.y][threadIdx.x] = a2;
    bn_reduce_rows(s1);
    bn_reduce_rows(s2);
    if (!live) return;
    float sdo = s1[0][threadIdx.x], sdox = s2[0][threadIdx.x];
    if (threadIdx.y == 0) {
        dw[c] += sdox;
        db[c] += sdo;
    }
    float mg = sdo / (float)N, mgx = sdox / (float)N, rw = r * w[c];
    /* groups of 4 rows: every input of the group is read before any of its
     * outputs is stored (dresid may alias dx, element by element) */
    int row = threadIdx.y;
    for (; row + 3 * BN_ROWS < N; row += 4 * BN_ROWS) {
        float go[4], xv[4], rv[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            size_t i = (size_t)(row + u * BN_ROWS) * C + c;
            go[u] = ms_to_f(dout[i]);
            xv[u] = ms_to_f(x[i]);
            rv[u] = dresid ? ms_to_f(dresid[i]) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            float xhat = (xv[u] - mu) * r;
            dx[(size_t)(row + u * BN_ROWS) * C + c] = ms_from_f<T>(rw * (go[u] - mg - xhat * mgx) + rv[u]);
        }
    }
    for (; row < N; row += BN_ROWS) {
        size_t i = (size_t)row * C + c;
        float xhat = (ms_to_f(x[i]) - mu) * r;
        float v = rw * (ms_to_f(dout[i]) - mg - xhat * mgx);
        if (dresid) v += ms_to_f(dresid[i]); /* read before the store: may alias dx */
        dx[i] = ms_from_f<T>(v);
    }
}

extern "C" void ms_cuda_batchnorm_fwd(ms_kctx *ctx, ms_dtype dt, void *out, float *mean, float *rstd,
                                      float *run_mean, float *run_var, float momentum, const void *x,
                                      const float *w, const float *b, int N, int C)
{
    if (!ctx) return;
    /* N >= 2: the unbiased running variance divides by N-1 (as the CPU twin) */
    if (!ms_dt_ok(dt) || N < 2 || C < 0 ||
        (C && (!out || !mean || !rstd || !run_mean || !run_var || !x || !w || !b))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "batchnorm_fwd: bad arguments (N=%d C=%d)", N, C);
        return;
    }
    if (C == 0) return;
    dim3 block(BN_COLS, BN_ROWS), grid((unsigned)((C + BN_COLS - 1) / BN_COLS));
    MS_DISPATCH(dt, X,
                batchnorm_fwd_k<X><<<grid, block, 0, ms_stream(ctx)>>>((X *)out, mean, rstd, run_mean, run_var,
                                                                       momentum, (const X *)x, w, b, N, C));
    ms_cuda_check(ctx, "batchnorm_fwd");
}

extern "C" void ms_cuda_batchnorm_bwd(ms_kctx *ctx, ms_dtype dt, void *dx, const void *dresid, float *dw,
                                      float *db, const void *dout, const void *x, const float *mean,
                                      const float *rstd, const float *w, int N, int C)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || N < 1 || C < 0 || (C && (!dx || !dw || !db || !dout || !x || !mean || !rstd || !w))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "batchnorm_bwd: bad arguments (N=%d C=%d)", N, C);
        return;
    }
    if (C == 0) return;
    dim3 block(BN_COLS, BN_ROWS), grid((unsigned)((C + BN_COLS - 1) / BN_COLS));
    MS_DISPATCH(dt, X,
                batchnorm_bwd_k<X><<<grid, block, 0, ms_stream(ctx)>>>((X *)dx, (const X *)dresid, dw, db,
                                                                       (const X *)dout, (const X *)x, mean, rstd,
                                                                       w, N, C));
    ms_cuda_check(ctx, "batchnorm_bwd");
}
