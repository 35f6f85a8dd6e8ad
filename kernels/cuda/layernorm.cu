/* layernorm.cu — LayerNorm over C for each of N rows (eps 1e-5, biased
 * variance), one warp per row.
 *
 * Forward: the warp copies its row into shared memory while summing it (the
 * only read of x from global memory), takes the exact two-pass variance from
 * shared memory, then writes out. Rows too long for shared memory are read
 * from global memory again instead (L1/L2 hits). Rows of 32 V NV columns
 * (NV 1, 2, 3, 4, 6, 8: gpt2-small's 768, seed17's 2048) are held in
 * registers instead, every load issued first (layernorm_fwd_reg_k):
 * H200, `memsplit train --kernel-times`, bf16, ms a step: gpt2-small 0.57
 * against 0.73, seed17 5.57 against 6.39.
 * Backward: per row, pass 1 sums g = dout*w and g*xhat (warp reduction) and
 * adds dout*xhat, dout into the warp's own dw/db partials in shared memory;
 * pass 2 writes dx. Blocks loop over rows; at the end each block sums its
 * warps' partials and adds them into dw/db with float atomics (so dw/db may
 * differ in the last bits between runs). Wide rows (C > 1600) that split
 * into whole warps of V-wide vectors take layernorm_bwd_cols_k instead
 * (its comment).
 * 16-byte vectors when C is a multiple of the vector width and every row
 * pointer is aligned; scalar otherwise. */
#include "kernels/cuda/cuda_common.cuh"

#include <algorithm>

#define LN_EPS 1e-5f
#define LN_WARPS 8 /* rows (warps) per block */

/* rstd from a lane's sum of squared deviations; lane 0 writes the row's
 * statistics */
__device__ __forceinline__ float ln_row_stats(float *mean, float *rstd, int row, int lane, float mu, float ss, int C)
{
    const float r = 1.0f / sqrtf(ms_warp_sum(ss) / (float)C + LN_EPS);
    if (lane == 0) {
        mean[row] = mu;
        rstd[row] = r;
    }
    return r;
}

template <typename T, int V, bool CACHE>
__global__ void __launch_bounds__(LN_WARPS * 32)
    layernorm_fwd_k(T *out, float *mean, float *rstd, const T *x, const float *w, const float *b, int N, int C)
{
    extern __shared__ __align__(16) unsigned char ln_smem[];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int row = blockIdx.x * LN_WARPS + warp;
    if (row >= N) return; /* whole warp leaves; no block-wide barrier below */
    const T *xr = x + (size_t)row * C;
    T *cache = reinterpret_cast<T *>(ln_smem) + (size_t)warp * C;

    float s = 0.0f;
    for (int c = lane * V; c < C; c += 32 * V) {
        if constexpr (CACHE) {
            ms_pack<T, V> pk = *reinterpret_cast<const ms_pack<T, V> *>(xr + c);
            *reinterpret_cast<ms_pack<T, V> *>(cache + c) = pk;
#pragma unroll
            for (int k = 0; k < V; k++) s += ms_to_f(pk.v[k]);
        } else {
            float f[V];
            ms_ldv<V>(f, xr + c);
#pragma unroll
            for (int k = 0; k < V; k++) s += f[k];
        }
    }
    const T *src = CACHE ? cache : xr; /* each lane re-reads only what it wrote: no sync needed */
    float mu = ms_warp_sum(s) / (float)C;

    float ss = 0.0f;
    for (int c = lane * V; c < C; c += 32 * V) {
        float f[V];
        ms_ldv<V>(f, src + c);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float d = f[k] - mu;
            ss += d * d;
        }
    }
    float r = ln_row_stats(mean, rstd, row, lane, mu, ss, C);

    T *orow = out + (size_t)row * C;
    for (int c = lane * V; c < C; c += 32 * V) {
        float f[V], fw[V], fb[V];
        ms_ldv<V>(f, src + c);
        ms_ldf<V>(fw, w + c);
        ms_ldf<V>(fb, b + c);
#pragma unroll
        for (int k = 0; k < V; k++) f[k] = (f[k] - mu) * r * fw[k] + fb[k];
        ms_stv<V>(orow + c, f);
    }
}

/* layernorm_fwd_k for rows of C = 32 * V * NV: each lane's NV vectors are
 * loaded before any is used and stay in registers (raw, converted where
 * used), so a lane has NV * 16 bytes in flight where the loop above has
 * one vector; same arithmetic, in the same order. */
template <typename T, int V, int NV>
__global__ void __launch_bounds__(LN_WARPS * 32)
    layernorm_fwd_reg_k(T *out, float *mean, float *rstd, const T *x, const float *w, const float *b, int N, int C)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int row = blockIdx.x * LN_WARPS + warp;
    if (row >= N) return;
    const T *xr = x + (size_t)row * C;
    ms_pack<T, V> pk[NV];
#pragma unroll
    for (int i = 0; i < NV; i++) pk[i] = *reinterpret_cast<const ms_pack<T, V> *>(xr + (32 * i + lane) * V);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++)
#pragma unroll
        for (int k = 0; k < V; k++) s += ms_to_f(pk[i].v[k]);
    float mu = ms_warp_sum(s) / (float)C;
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++)
#pragma unroll
        for (int k = 0; k < V; k++) {
            float d = ms_to_f(pk[i].v[k]) - mu;
            ss += d * d;
        }
    float r = ln_row_stats(mean, rstd, row, lane, mu, ss, C);
    T *orow = out + (size_t)row * C;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int c = (32 * i + lane) * V;
        float f[V], fw[V], fb[V];
        ms_ldf<V>(fw, w + c);
        ms_ldf<V>(fb, b + c);
#pragma unroll
        for (int k = 0; k < V; k++) f[k] = (ms_to_f(pk[i].v[k]) - mu) * r * fw[k] + fb[k];
        ms_stv<V>(orow + c, f);
    }
}

/* Dynamic shared memory: per warp, dw[C] then db[C] partial sums. Lane l
 * always owns the same columns (l*V + j*32*V ...), so the warp's partials are
 * plain read-modify-writes: no atomics, no bank-conflicting scalar accesses
 * (V-wide vector accesses). The warps' partials are summed at the end. */
template <typename T, int V>
__global__ void layernorm_bwd_k(T *dx, const T *dresid, float *dw, float *db, const T *dout, const T *x,
                                const float *mean, const float *rstd, const float *w, int N, int C)
{
    extern __shared__ __align__(16) unsigned char ln_smem[];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    float *wdw = reinterpret_cast<float *>(ln_smem) + (size_t)warp * 2 * C, *wdb = wdw + C;
    for (int c = lane; c < 2 * C; c += 32) wdw[c] = 0.0f;
    __syncwarp();

    for (int row = blockIdx.x * nwarps + warp; row < N; row += gridDim.x * nwarps) {
        size_t base = (size_t)row * C;
        float mu = mean[row], r = rstd[row];
        float sg = 0.0f, sgx = 0.0f;
        for (int c = lane * V; c < C; c += 32 * V) {
            float go[V], fx[V], fw[V], pw[V], pb[V];
            ms_ldv<V>(go, dout + base + c);
            ms_ldv<V>(fx, x + base + c);
            ms_ldf<V>(fw, w + c);
            ms_ldf<V>(pw, wdw + c);
            ms_ldf<V>(pb, wdb + c);
#pragma unroll
            for (int k = 0; k < V; k++) {
                float xhat = (fx[k] - mu) * r;
                float g = go[k] * fw[k];
                sg += g;
                sgx += g * xhat;
                pw[k] += go[k] * xhat;
                pb[k] += go[k];
            }
            ms_stf<V>(wdw + c, pw);
            ms_stf<V>(wdb + c, pb);
        }
        float mg = ms_warp_sum(sg) / (float)C, mgx = ms_warp_sum(sgx) / (float)C;
        for (int c = lane * V; c < C; c += 32 * V) {
            float go[V], fx[V], fw[V], v[V];
            ms_ldv<V>(go, dout + base + c);
            ms_ldv<V>(fx, x + base + c);
            ms_ldf<V>(fw, w + c);
#pragma unroll
            for (int k = 0; k < V; k++) {
                float xhat = (fx[k] - mu) * r;
                v[k] = r * (go[k] * fw[k] - mg - xhat * mgx);
            }
            if (dresid) { /* read before the store: dresid may alias dx */
                float fr[V];
                ms_ldv<V>(fr, dresid + base + c);
#pragma unroll
                for (int k = 0; k < V; k++) v[k] += fr[k];
            }
            ms_stv<V>(dx + base + c, v);
        }
    }
    __syncthreads();
    const float *part = reinterpret_cast<const float *>(ln_smem);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float sw = 0.0f, sb = 0.0f;
        for (int wi = 0; wi < nwarps; wi++) {
            sw += part[(size_t)wi * 2 * C + c];
            sb += part[(size_t)wi * 2 * C + C + c];
        }
        atomicAdd(dw + c, sw);
        atomicAdd(db + c, sb);
    }
}

/* Backward with column-owned partials: a row takes C/V threads (TPR, a
 * multiple of 32), each owning the same V columns of every row, so its dw,
 * db partials stay in registers and dout, x are read once; a block holds
 * RPB such row groups (TPR * RPB <= 512, RPB <= 15), each walking its rows
 * with a named barrier of its own (id 1 + group) for the row's two sums,
 * staged by warp in shared memory, two slots alternating so that a row's
 * reads come before the slot is written again. At the end the groups'
 * partials meet in shared memory and the first group adds them into dw,
 * db by float atomics. The per-warp partial arrays of layernorm_bwd_k (8C
 * bytes a warp) held seed17's C = 2048 to 12 warps an SM; this kernel runs
 * 32 (64 registers a thread) at any C it takes. It is used only where
 * layernorm_bwd_k gets fewer than 8 warps a block: at gpt2-small's 768
 * columns (one vector a thread) it was the slower one. */
constexpr int kLnColsThreads = 512;
/* PF: the group's next row of dout, x and dresid is copied into shared
 * memory (cp.async, the thread's own vectors; two stages a group after the
 * sums, ln_cols_smem) while this row is worked on, so a group has two rows
 * in flight and the row's loads leave its chain of waits. H200, seed17
 * bf16, `memsplit train --kernel-times`: 7.71 ms a step against 8.99
 * without (MS_LN_PF=0); loading dresid early alone had not helped. */
__device__ __forceinline__ void ln_cp_async16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src)
                 : "memory");
}
template <typename T, int V, bool PF>
__global__ void __launch_bounds__(kLnColsThreads, 2048 / kLnColsThreads / 2) /* 64 registers: 32 warps an SM */
    layernorm_bwd_cols_k(T *dx, const T *dresid, float *dw, float *db, const T *dout, const T *x, const float *mean,
                         const float *rstd, const float *w, int N, int C)
{
    extern __shared__ __align__(16) unsigned char ln_smem[];
    const int tpr = C / V, rpb = blockDim.x / tpr, wpr = tpr / 32; /* threads, groups, warps a row */
    const int grp = threadIdx.x / tpr, t = threadIdx.x % tpr, lane = t & 31, wr = t >> 5;
    float *red = reinterpret_cast<float *>(ln_smem); /* [group][2 slots][warp][2 sums] */
    float *mine = red + (size_t)grp * 4 * wpr;
    const int c0 = t * V;
    float pw[V], pb[V];
#pragma unroll
    for (int k = 0; k < V; k++) pw[k] = pb[k] = 0.f;
    /* PF: stage s of this group holds [dout, x, dresid][C] */
    T *stg = reinterpret_cast<T *>(ln_smem + ((size_t)rpb * 4 * wpr * sizeof(float) + 15) / 16 * 16) +
             (size_t)grp * 6 * C + c0;
    const int stride = gridDim.x * rpb;
    float nmu = 0.f, nr = 0.f; /* PF: the next row's statistics */
    auto issue = [&](int row, int s) {
        if (row < N) {
            const size_t base = (size_t)row * C + c0;
            ln_cp_async16(stg + (size_t)s * 3 * C, dout + base);
            ln_cp_async16(stg + (size_t)s * 3 * C + C, x + base);
            if (dresid) ln_cp_async16(stg + (size_t)s * 3 * C + 2 * C, dresid + base);
            nmu = mean[row];
            nr = rstd[row];
        }
        /* one group a call, empty past the last row, so "all but the newest
         * group" below is always this row's */
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    if (PF) issue(blockIdx.x * rpb + grp, 0);

    int it = 0;
    for (int row = blockIdx.x * rpb + grp; row < N; row += stride, it ^= 1) {
        const size_t base = (size_t)row * C + c0;
        float mu, r, go[V], xh[V], fw[V], sg = 0.f, sgx = 0.f;
        ms_ldf<V>(fw, w + c0); /* per row, from L1: held across rows it would spill */
        if constexpr (PF) {
            mu = nmu;
            r = nr;
            issue(row + stride, it ^ 1);
            asm volatile("cp.async.wait_group 1;" ::: "memory"); /* this row's copies (the thread's own) landed */
            ms_ldv<V>(go, stg + (size_t)it * 3 * C);
            ms_ldv<V>(xh, stg + (size_t)it * 3 * C + C);
        } else {
            mu = mean[row];
            r = rstd[row];
            ms_ldv<V>(go, dout + base);
            ms_ldv<V>(xh, x + base);
        }
#pragma unroll
        for (int k = 0; k < V; k++) {
            xh[k] = (xh[k] - mu) * r;
            const float g = go[k] * fw[k];
            sg += g;
            sgx += g * xh[k];
            pw[k] += go[k] * xh[k];
            pb[k] += go[k];
        }
        sg = ms_warp_sum(sg);
        sgx = ms_warp_sum(sgx);
        float *slot = mine + it * 2 * wpr;
        if (lane == 0) {
            slot[2 * wr] = sg;
            slot[2 * wr + 1] = sgx;
        }
        asm volatile("bar.sync %0, %1;" ::"r"(1 + grp), "r"(tpr) : "memory");
        float mg = 0.f, mgx = 0.f;
        for (int i = 0; i < wpr; i++) {
            mg += slot[2 * i];
            mgx += slot[2 * i + 1];
        }
        mg /= (float)C;
        mgx /= (float)C;
        float v[V];
#pragma unroll
        for (int k = 0; k < V; k++) v[k] = r * (go[k] * fw[k] - mg - xh[k] * mgx);
        if (dresid) { /* read before the store: dresid may alias dx */
            float fr[V];
            ms_ldv<V>(fr, PF ? stg + (size_t)it * 3 * C + 2 * C : dresid + base);
#pragma unroll
            for (int k = 0; k < V; k++) v[k] += fr[k];
        }
        ms_stv<V>(dx + base, v);
    }
    if (PF) asm volatile("cp.async.wait_all;" ::: "memory"); /* (the last groups are empty) */
    __syncthreads(); /* every group is past its last row: the sums' slots are free */
    float *part = red; /* [group][2C]: dw then db */
    ms_stf<V>(part + (size_t)grp * 2 * C + c0, pw);
    ms_stf<V>(part + (size_t)grp * 2 * C + C + c0, pb);
    __syncthreads();
    if (grp == 0) {
        for (int g2 = 1; g2 < rpb; g2++) {
            float qw[V], qb[V];
            ms_ldf<V>(qw, part + (size_t)g2 * 2 * C + c0);
            ms_ldf<V>(qb, part + (size_t)g2 * 2 * C + C + c0);
#pragma unroll
            for (int k = 0; k < V; k++) {
                pw[k] += qw[k];
                pb[k] += qb[k];
            }
        }
#pragma unroll
        for (int k = 0; k < V; k++) {
            atomicAdd(dw + c0 + k, pw[k]);
            atomicAdd(db + c0 + k, pb[k]);
        }
    }
}

/* 1 if layernorm_bwd_cols_k takes C (V-wide vectors, whole warps a row);
 * MS_LN_COLS=0, read once, turns it off (an A/B switch for measurements) */
static bool ln_cols_wants(int C, int V)
{
    static const bool off = ms_env_is_zero("MS_LN_COLS");
    return !off && C % (32 * V) == 0 && C / V <= kLnColsThreads;
}
/* layernorm_bwd_cols_k's dynamic shared memory for rpb groups of C columns:
 * the partials at the end, or (PF) the sums then two stages of three rows a
 * group */
template <typename T> static size_t ln_cols_smem(int rpb, int C, bool pf)
{
    const size_t part = (size_t)rpb * 2 * C * sizeof(float), sums = (size_t)rpb * 4 * (C / (16 / sizeof(T)) / 32);
    const size_t staged = (sums * sizeof(float) + 15) / 16 * 16 + (size_t)rpb * 6 * C * sizeof(T);
    return pf && staged > part ? staged : part;
}

/* NV = C / (32 V), the vectors a lane of layernorm_fwd_reg_k holds, where
 * it is instantiated for it (0 otherwise); MS_LN_REG=0, read once, turns it
 * off (an A/B switch for measurements) */
static int ln_reg_nv(int C, int V)
{
    static const bool off = ms_env_is_zero("MS_LN_REG");
    const int nv = C % (32 * V) == 0 ? C / (32 * V) : 0;
    return !off && (nv == 1 || nv == 2 || nv == 3 || nv == 4 || nv == 6 || nv == 8) ? nv : 0;
}

/* layernorm_fwd_reg_k's instance for nv (one of ln_reg_nv's) */
template <typename T> static auto ln_fwd_reg(int nv)
{
    constexpr int V = 16 / sizeof(T);
    switch (nv) {
    case 1: return layernorm_fwd_reg_k<T, V, 1>;
    case 2: return layernorm_fwd_reg_k<T, V, 2>;
    case 3: return layernorm_fwd_reg_k<T, V, 3>;
    case 4: return layernorm_fwd_reg_k<T, V, 4>;
    case 6: return layernorm_fwd_reg_k<T, V, 6>;
    default: return layernorm_fwd_reg_k<T, V, 8>;
    }
}

template <typename T>
static void layernorm_fwd_t(ms_kctx *ctx, T *out, float *mean, float *rstd, const T *x, const float *w,
                            const float *b, int N, int C)
{
    constexpr int V = 16 / sizeof(T);
    unsigned grid = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
    const int threads = LN_WARPS * 32;
    size_t cache = (size_t)LN_WARPS * C * sizeof(T);
    bool vec = C % V == 0 && ms_al(out, 16) && ms_al(x, 16) && ms_al(w, 16) && ms_al(b, 16);
    bool use_cache = cache <= 48 * 1024; /* the default dynamic shared memory limit */
    cudaStream_t st = ms_stream(ctx);
    const int nv = vec ? ln_reg_nv(C, V) : 0;
    if (nv) {
        ln_fwd_reg<T>(nv)<<<grid, threads, 0, st>>>(out, mean, rstd, x, w, b, N, C);
    } else if (vec && use_cache)
        layernorm_fwd_k<T, V, true><<<grid, threads, cache, st>>>(out, mean, rstd, x, w, b, N, C);
    else if (vec)
        layernorm_fwd_k<T, V, false><<<grid, threads, 0, st>>>(out, mean, rstd, x, w, b, N, C);
    else if (use_cache)
        layernorm_fwd_k<T, 1, true><<<grid, threads, cache, st>>>(out, mean, rstd, x, w, b, N, C);
    else
        layernorm_fwd_k<T, 1, false><<<grid, threads, 0, st>>>(out, mean, rstd, x, w, b, N, C);
}

template <typename T>
static int layernorm_bwd_t(ms_kctx *ctx, T *dx, const T *dresid, float *dw, float *db, const T *dout,
                           const T *x, const float *mean, const float *rstd, const float *w, int N, int C)
{
    constexpr int V = 16 / sizeof(T);
    bool vec = C % V == 0 && ms_al(dx, 16) && ms_al(dout, 16) && ms_al(x, 16) && ms_al(w, 16) &&
               (!dresid || ms_al(dresid, 16));
    /* layernorm_bwd_k's warps per block: up to 8, fewer when their partials
     * (8 C bytes each) would pass ~100 KiB; one warp may use up to 227 KiB
     * (C <= 29056) */
    size_t per_warp = 8 * (size_t)C;
    int warps = LN_WARPS;
    while (warps > 1 && warps * per_warp > 100 * 1024) warps /= 2;
    /* the column-owned kernel only where the per-warp partials cost the old
     * one its warps (C > 1600): at gpt2-small's 768 the old one measured
     * 1.64 ms a step against 1.98, at seed17's 2048 18.3 against 15.2 */
    if (vec && warps < LN_WARPS && ln_cols_wants(C, V)) {
        static const bool pf = !ms_env_is_zero("MS_LN_PF"); /* an A/B switch, read once */
        const int tpr = C / V, rpb = std::min(kLnColsThreads / tpr, 15), threads = tpr * rpb; /* barriers 1..15 */
        const size_t csmem = ln_cols_smem<T>(rpb, C, pf);
        const int per_sm = 1024 / threads; /* the launch bound's 64 registers a thread */
        const long long blocks = (N + rpb - 1) / rpb, cap = (long long)ms_cuda_sm_count() * per_sm;
        auto kern = pf ? layernorm_bwd_cols_k<T, V, true> : layernorm_bwd_cols_k<T, V, false>;
        if (csmem > 48 * 1024 &&
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)csmem) != cudaSuccess) {
            ms_cuda_check(ctx, "layernorm_bwd: shared memory opt-in");
            return -1;
        }
        kern<<<(unsigned)(blocks < cap ? blocks : cap), threads, csmem, ms_stream(ctx)>>>(dx, dresid, dw, db, dout, x,
                                                                                        mean, rstd, w, N, C);
        return 0;
    }
    size_t smem = warps * per_warp;
    if (smem > 227 * 1024) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "layernorm_bwd: C=%d is too wide for shared memory", C);
        return -1;
    }
    void (*kern)(T *, const T *, float *, float *, const T *, const T *, const float *, const float *,
                 const float *, int, int) = vec ? layernorm_bwd_k<T, V> : layernorm_bwd_k<T, 1>;
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) {
        ms_cuda_check(ctx, "layernorm_bwd: shared memory opt-in");
        return -1;
    }
    /* enough blocks to fill every multiprocessor's shared memory and threads */
    int per_sm = (int)((200 * 1024) / smem);
    int by_threads = 2048 / (warps * 32);
    if (per_sm > by_threads) per_sm = by_threads;
    if (per_sm < 1) per_sm = 1;
    long long rows_blocks = (N + warps - 1) / warps, cap = (long long)ms_cuda_sm_count() * per_sm;
    unsigned grid = (unsigned)(rows_blocks < cap ? rows_blocks : cap);
    kern<<<grid, warps * 32, smem, ms_stream(ctx)>>>(dx, dresid, dw, db, dout, x, mean, rstd, w, N, C);
    return 0;
}

extern "C" void ms_cuda_layernorm_fwd(ms_kctx *ctx, ms_dtype dt, void *out, float *mean, float *rstd,
                                      const void *x, const float *w, const float *b, int N, int C)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || N < 0 || C <= 0 || (N && (!out || !mean || !rstd || !x || !w || !b))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "layernorm_fwd: bad arguments (N=%d C=%d)", N, C);
        return;
    }
    if (N == 0) return;
    MS_DISPATCH(dt, X, layernorm_fwd_t<X>(ctx, (X *)out, mean, rstd, (const X *)x, w, b, N, C));
    ms_cuda_check(ctx, "layernorm_fwd");
}

extern "C" void ms_cuda_layernorm_bwd(ms_kctx *ctx, ms_dtype dt, void *dx, const void *dresid, float *dw,
                                      float *db, const void *dout, const void *x, const float *mean,
                                      const float *rstd, const float *w, int N, int C)
{
    if (!ctx) return;
    if (!ms_dt_ok(dt) || N < 0 || C <= 0 || (N && (!dx || !dw || !db || !dout || !x || !mean || !rstd || !w))) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "layernorm_bwd: bad arguments (N=%d C=%d)", N, C);
        return;
    }
    if (N == 0) return;
    int rc = 0;
    MS_DISPATCH(dt, X,
                rc = layernorm_bwd_t<X>(ctx, (X *)dx, (const X *)dresid, dw, db, (const X *)dout, (const X *)x,
                                        mean, rstd, w, N, C));
    if (rc == 0) ms_cuda_check(ctx, "layernorm_bwd");
}
