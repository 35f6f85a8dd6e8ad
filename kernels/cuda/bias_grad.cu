/* bias_grad.cu — db[j] += sum_i dy[i,j] (column sums of dy [M,N]).
 *
 * A block covers BG_COLS_T * V columns: threadIdx.x picks V adjacent columns
 * (one V-element access, so a warp reads a contiguous row segment),
 * threadIdx.y a row phase; partial column sums are reduced over the row
 * phases in shared memory. When the columns alone give too few blocks to
 * fill the GPU, rows are split over gridDim.y blocks too, whose results
 * meet in db through float atomics (then not bit-reproducible run to run);
 * otherwise each column has one owner and db is updated deterministically.
 * Measured on an H200 (bench, CUPTI records): 7.02 ms a seed17 step and
 * 0.93 a GPT-2 small bf16 step with four rows in flight a thread, 8.65
 * and 1.20 with one (two waves of blocks, then). */
#include "kernels/cuda/cuda_common.cuh"

#define BG_COLS_T 32 /* threads across columns */
#define BG_ROWS 8    /* row phases per block: 256 threads */

template <typename T, int V>
__global__ void __launch_bounds__(BG_COLS_T *BG_ROWS) bias_grad_k(float *db, const T *dy, int M, int N)
{
    __shared__ float part[BG_ROWS][BG_COLS_T * V];
    int c0 = (blockIdx.x * BG_COLS_T + threadIdx.x) * V;
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; k++) acc[k] = 0.0f;
    if (c0 < N) {
        /* four rows' loads in flight a thread: with one, the GPU's ~100k
         * threads keep too few bytes in flight to cover memory latency */
        const int step = gridDim.y * BG_ROWS;
        int r = blockIdx.y * BG_ROWS + threadIdx.y;
        for (; r + 3 * step < M; r += 4 * step) {
            float f[4][V];
#pragma unroll
            for (int u = 0; u < 4; u++) ms_ldv<V>(f[u], dy + (size_t)(r + u * step) * N + c0);
#pragma unroll
            for (int u = 0; u < 4; u++)
#pragma unroll
                for (int k = 0; k < V; k++) acc[k] += f[u][k];
        }
        for (; r < M; r += step) {
            float f[V];
            ms_ldv<V>(f, dy + (size_t)r * N + c0);
#pragma unroll
            for (int k = 0; k < V; k++) acc[k] += f[k];
        }
    }
#pragma unroll
    for (int k = 0; k < V; k++) part[threadIdx.y][threadIdx.x * V + k] = acc[k];
    __syncthreads();
    /* threads (x, y) with y == 0..: each finishes columns of the tile */
    int t = threadIdx.y * BG_COLS_T + threadIdx.x;
    for (int col = t; col < BG_COLS_T * V; col += BG_COLS_T * BG_ROWS) {
        int j = blockIdx.x * BG_COLS_T * V + col;
        if (j >= N) continue;
        float s = 0.0f;
#pragma unroll
        for (int y = 0; y < BG_ROWS; y++) s += part[y][col];
        if (gridDim.y == 1)
            db[j] += s;
        else
            atomicAdd(db + j, s);
    }
}

template <typename T>
static void bias_grad_t(ms_kctx *ctx, float *db, const T *dy, int M, int N)
{
    constexpr int V = 16 / sizeof(T);
    bool vec = N % V == 0 && ms_al(dy, 16);
    int cols_per_block = BG_COLS_T * (vec ? V : 1);
    unsigned gx = (unsigned)((N + cols_per_block - 1) / cols_per_block);
    /* split rows until about four waves of blocks, keeping >= 64 rows each
     * (H200, GPT-2 small bf16, CUPTI records: with the qkv and fc bias
     * gradients alone 0.59 ms a step at four waves, 0.72 at two, 0.65 at
     * eight, in one call; all four a block, 0.84 against 0.91 at two) */
    unsigned want = (unsigned)ms_cuda_sm_count() * 4, gy = 1;
    while (gx * gy < want && (unsigned)M / (gy * 2) >= 64) gy *= 2;
    dim3 block(BG_COLS_T, BG_ROWS), grid(gx, gy);
    if (vec)
        bias_grad_k<T, V><<<grid, block, 0, ms_stream(ctx)>>>(db, dy, M, N);
    else
        bias_grad_k<T, 1><<<grid, block, 0, ms_stream(ctx)>>>(db, dy, M, N);
}

extern "C" void ms_cuda_bias_grad(ms_kctx *ctx, ms_dtype dt, float *db, const void *dy, int M, int N)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || M < 0 || N < 0 || (M && N && (!db || !dy))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "bias_grad: bad arguments (M=%d N=%d)", M, N);
        return;
    }
    if (M == 0 || N == 0) return;
    MS_DISPATCH(dt, X, bias_grad_t<X>(ctx, db, (const X *)dy, M, N));
    ms_cuda_check(ctx, "bias_grad");
}
