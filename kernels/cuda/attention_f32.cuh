/* attention_f32.cuh — the fp32 attention on CUDA cores (true fp32 math, no
 * TF32), forward and backward, included by attention.cu inside its
 * namespace (it uses cp_async16, smem_addr, fast_exp2, kLog2e, kLn2). Same
 * contracts as the 16-bit paths: forward writes out and lse (natural log);
 * backward takes D = rowsum(dO * O) from prep_f32, which also zeroes dQ's
 * slots of dqkv, writes dK and dV and adds dQ by float4 atomics.
 *
 * Register-tiled like a SIMT GEMM. A block works on 64 x 64 tiles (the
 * forward's query tile may be BQ = 128 rows, the backward's query tile BQ
 * columns); a thread takes RT rows and CT columns of a score tile (rows
 * RT*ty.., columns tx + TX j with TX = columns/CT), so 4 RT CT FMAs per
 * RT + CT floats read from shared memory, and rows RT*ty.. by HD/TX
 * columns (float4 groups TX*4 apart) of a 64 x HD product tile. The
 * defaults (FwdF32Cfg, BwdF32Cfg in attention.cu) are 64-row tiles, RT = 8
 * (4 for the hs=128 backward) and CT = 4: bench/attn_tune.cu `f32` times
 * the others. Shared rows are padded to HD+4 floats: row r starts in
 * 16-byte bank group r*(HD/4+1) mod 8, so the 8 consecutive rows a
 * quarter-warp reads at one column hit 8 distinct groups.
 *
 * Forward block: BQ queries, K/V tiles of 64 keys by cp.async (the next K
 * loads during P V, the next V during the next scores), online softmax in
 * the exp2 domain; P goes through shared memory into the P V product.
 * Backward block: 64 keys (dK, dV in registers), walking the query tiles
 * from the diagonal down: S^T = K Q^T, then dP^T = V dO^T (one score tile
 * of registers at a time), P^T and dS^T (scaled) to shared memory, dV +=
 * P^T dO, dK += dS^T Q, and dQ_tile = dS K added to dqkv while the next
 * Q, dO load. Five products per tile pair where separate dQ and dK/dV
 * kernels need seven. */

namespace f32a {

constexpr int kB = 64;  /* rows (queries or keys) of a tile */
constexpr int kLP = kB + 4; /* padded row of a 64-column score tile */

/* A thread's share of a product tile with HD columns over TX column
 * threads: NC columns in groups of VEC contiguous ones, TX*VEC apart. */
template <int HD, int TX> struct Cols {
    static constexpr int NC = HD / TX;
    static constexpr int VEC = NC < 4 ? NC : 4;
};
template <int HD> __host__ __device__ constexpr int ld_of() { return HD + 4; } /* padded shared row, floats */

/* forward: Q (BQ rows), K, V (64), P (BQ x 64) */
template <int HD, int BQ> constexpr size_t fwd_smem() { return ((size_t)(BQ + 2 * kB) * ld_of<HD>() + (size_t)BQ * kLP) * 4; }

/* column of the thread's j-th product column */
template <int HD, int TX> __device__ __forceinline__ int col(int tx, int j)
{
    constexpr int V = Cols<HD, TX>::VEC;
    return (j / V) * (TX * V) + tx * V + j % V;
}

/* R rows (row0.., global stride rs floats) of HD floats into a padded
 * shared tile by cp.async, NT threads; rows >= Tn zero-filled. Not
 * committed. */
template <int HD, int NT, int R = kB>
__device__ __forceinline__ void load_tile(float *s, const float *g, size_t rs, int row0, int Tn, int tid)
{
    constexpr int CPR = HD / 4, LD = ld_of<HD>();
    static_assert(R * CPR % NT == 0, "tile must split evenly over the block");
#pragma unroll
    for (int it = 0; it < R * CPR / NT; it++) {
        const int i = tid + it * NT, r = i / CPR, c = (i % CPR) * 4;
        const bool ok = row0 + r < Tn;
        cp_async16(smem_addr(s + r * LD + c), ok ? g + (size_t)(row0 + r) * rs + c : g, ok);
    }
}

__device__ __forceinline__ float4 ld4(const float *p) { return *reinterpret_cast<const float4 *>(p); }
__device__ __forceinline__ float at(const float4 &v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }

/* acc[i][j] += A[RT*ty+i] . B[tx+TX*j] over HD columns (both padded tiles) */
template <int HD, int RT, int CT, int TX>
__device__ __forceinline__ void dot_tile(float (&acc)[RT][CT], const float *A, const float *Bm, int ty, int tx)
{
    constexpr int LD = ld_of<HD>();
    const float *a0 = A + RT * ty * LD, *b0 = Bm + tx * LD;
#pragma unroll(RT * CT >= 64 ? 1 : 16 / RT)
    for (int d = 0; d < HD; d += 4) {
        float4 b[CT];
#pragma unroll
        for (int j = 0; j < CT; j++) b[j] = ld4(b0 + TX * j * LD + d);
#pragma unroll
        for (int i = 0; i < RT; i++) {
            const float4 a = ld4(a0 + i * LD + d);
#pragma unroll
            for (int j = 0; j < CT; j++) {
                acc[i][j] = fmaf(a.x, b[j].x, acc[i][j]);
                acc[i][j] = fmaf(a.y, b[j].y, acc[i][j]);
                acc[i][j] = fmaf(a.z, b[j].z, acc[i][j]);
                acc[i][j] = fmaf(a.w, b[j].w, acc[i][j]);
            }
        }
    }
}

/* acc = A[RT*ty+i] . B[tx+TX*j] (a fresh score tile) */
template <int HD, int RT, int CT, int TX>
__device__ __forceinline__ void score_tile(float (&acc)[RT][CT], const float *A, const float *Bm, int ty, int tx)
{
#pragma unroll
    for (int i = 0; i < RT; i++)
#pragma unroll
        for (int j = 0; j < CT; j++) acc[i][j] = 0.f;
    dot_tile<HD, RT, CT, TX>(acc, A, Bm, ty, tx);
}

/* f(i, j, r, c) for each of a thread's score-tile entries (row r = RT*ty+i,
 * column c = tx+TX*j, within the tile) */
template <int RT, int CT, int TX, class Fn>
__device__ __forceinline__ void each_score(int ty, int tx, Fn f)
{
#pragma unroll
    for (int i = 0; i < RT; i++)
#pragma unroll
        for (int j = 0; j < CT; j++) f(i, j, RT * ty + i, tx + TX * j);
}

/* acc[i][j] += sum_k W(RT*ty+i, k) X[k][col(tx, j)] over the KR rows k of
 * X (padded, HD columns); W is a score tile of row stride WLD read as
 * W[r][k] (TRANS false) or as W[k][r] (TRANS true). */
template <int HD, int RT, int TX, bool TRANS, int WLD = kLP, int KR = kB>
__device__ __forceinline__ void mul_tile(float (&acc)[RT][Cols<HD, TX>::NC], const float *W, const float *X, int ty,
                                         int tx)
{
    constexpr int LD = ld_of<HD>(), NC = Cols<HD, TX>::NC, V = Cols<HD, TX>::VEC;
#pragma unroll(RT * NC >= 64 ? 1 : 8 / RT)
    for (int k = 0; k < KR; k += 4) {
        float w[RT][4]; /* w[i][kk] = W(RT*ty+i, k+kk) */
        if constexpr (TRANS) {
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int r = 0; r < RT; r += 4) {
                    const float4 v = ld4(W + (k + q) * WLD + RT * ty + r);
#pragma unroll
                    for (int e = 0; e < 4; e++) w[r + e][q] = at(v, e);
                }
        } else {
#pragma unroll
            for (int i = 0; i < RT; i++) {
                const float4 v = ld4(W + (RT * ty + i) * WLD + k);
#pragma unroll
                for (int e = 0; e < 4; e++) w[i][e] = at(v, e);
            }
        }
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            float x[NC];
            const float *xr = X + (k + kk) * LD;
#pragma unroll
            for (int g = 0; g < NC / V; g++) {
                if constexpr (V == 4) {
                    const float4 v = ld4(xr + col<HD, TX>(tx, 4 * g));
                    x[4 * g] = v.x, x[4 * g + 1] = v.y, x[4 * g + 2] = v.z, x[4 * g + 3] = v.w;
                } else {
                    const float2 v = *reinterpret_cast<const float2 *>(xr + col<HD, TX>(tx, V * g));
                    x[V * g] = v.x, x[V * g + 1] = v.y;
                }
            }
#pragma unroll
            for (int i = 0; i < RT; i++)
#pragma unroll
                for (int j = 0; j < NC; j++) acc[i][j] = fmaf(w[i][kk], x[j], acc[i][j]);
        }
    }
}

/* Forward configuration: BQ queries a block, RT rows and CT keys (of a
 * 64-key tile) a thread; TX = 64/CT threads share a row, NT threads. */
template <int HD_, int BQ_, int RT_, int CT_, int MINB_> struct FwdF32 {
    static constexpr int HD = HD_, BQ = BQ_, RT = RT_, CT = CT_, MINB = MINB_;
    static constexpr int TX = kB / CT, NT = BQ / RT * TX;
};

/* Grid (query tiles, nh, B), the last (heaviest) query tile first. */
template <class F>
__global__ void __launch_bounds__(F::NT, F::MINB) attn_fwd(float *__restrict__ out, float *__restrict__ lse,
                                                        const float *__restrict__ qkv, int Tn, int C, int nh, float sl2)
{
    constexpr int HD = F::HD, BQ = F::BQ, RT = F::RT, CT = F::CT, TX = F::TX, NT = F::NT;
    constexpr int LD = ld_of<HD>(), NC = Cols<HD, TX>::NC;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *sQ = reinterpret_cast<float *>(smem_raw), *sK = sQ + BQ * LD, *sV = sK + kB * LD, *sP = sV + kB * LD;
    const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, ty = tid / TX, tx = tid % TX;
    const size_t rs = 3 * (size_t)C;
    const float *gq = qkv + (size_t)b * Tn * rs + (size_t)h * HD;
    const int q0 = qt * BQ, kend = min(q0 + BQ, Tn); /* keys 0 .. kend-1 */
    const int nkt = (kend + kB - 1) / kB, kdiag = q0 / kB; /* tiles from kdiag on need the mask */
    load_tile<HD, NT, BQ>(sQ, gq, rs, q0, Tn, tid);

    float o[RT][NC], m[RT], l[RT];
#pragma unroll
    for (int i = 0; i < RT; i++) {
        m[i] = -INFINITY;
        l[i] = 0.f;
#pragma unroll
        for (int j = 0; j < NC; j++) o[i][j] = 0.f;
    }
    /* cp.async groups: Q with K(0), then V(0); inside the loop K(kt+1) is
     * loaded during P V and V(kt+1) during the next tile's scores */
    load_tile<HD, NT>(sK, gq + C, rs, 0, Tn, tid);
    cp_async_commit();
    load_tile<HD, NT>(sV, gq + 2 * (size_t)C, rs, 0, Tn, tid);
    cp_async_commit();
    for (int kt = 0; kt < nkt; kt++) {
        cp_async_wait<1>(); /* K(kt) (and Q) landed; V(kt) may be in flight */
        __syncthreads();
        float s[RT][CT];
        score_tile<HD, RT, CT, TX>(s, sQ, sK, ty, tx);
        const bool mask = kt >= kdiag;
#pragma unroll
        for (int i = 0; i < RT; i++) {
            const int row = RT * ty + i, rel = q0 + row - kt * kB; /* keys past rel are masked */
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < CT; j++) {
                s[i][j] = mask && tx + TX * j > rel ? -INFINITY : s[i][j] * sl2;
                mx = fmaxf(mx, s[i][j]);
            }
#pragma unroll
            for (int off = TX / 2; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            /* a row can see no key of this tile (BQ > 64), but tile 0 gave
             * it key 0: m[i] is finite from there on, so mn is */
            const float mn = fmaxf(m[i], mx), alpha = fast_exp2(m[i] - mn);
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < CT; j++) {
                const float p = fast_exp2(s[i][j] - mn);
                sum += p;
                sP[row * kLP + tx + TX * j] = p;
            }
#pragma unroll
            for (int off = TX / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            m[i] = mn;
            l[i] = l[i] * alpha + sum;
#pragma unroll
            for (int j = 0; j < NC; j++) o[i][j] *= alpha;
        }
        cp_async_wait<0>(); /* V(kt) */
        __syncthreads();    /* P written, K(kt) no longer read */
        const bool more = kt + 1 < nkt;
        if (more) load_tile<HD, NT>(sK, gq + C, rs, (kt + 1) * kB, Tn, tid);
        cp_async_commit();
        mul_tile<HD, RT, TX, false>(o, sP, sV, ty, tx);
        __syncthreads(); /* V(kt) and P read */
        if (more) load_tile<HD, NT>(sV, gq + 2 * (size_t)C, rs, (kt + 1) * kB, Tn, tid);
        cp_async_commit();
    }
#pragma unroll
    for (int i = 0; i < RT; i++) {
        const int t = q0 + RT * ty + i;
        if (t >= Tn) continue;
        const float inv = 1.f / l[i];
        float *orow = out + ((size_t)b * Tn + t) * C + (size_t)h * HD;
#pragma unroll
        for (int j = 0; j < NC; j++) orow[col<HD, TX>(tx, j)] = o[i][j] * inv;
        if (tx == 0) lse[((size_t)b * nh + h) * Tn + t] = m[i] * kLn2 + logf(l[i]);
    }
}

/* D[b,h,t] = sum_d dO * O, and zero dqkv's dQ slots of the row: one warp a
 * (b, t, h) row. */
__global__ void prep(float *__restrict__ Dg, float *__restrict__ dqkv, const float *__restrict__ dout,
                     const float *__restrict__ out, int Tn, int C, int nh, long long rows)
{
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (w >= rows) return;
    const int hs = C / nh, h = (int)(w % nh);
    const long long bt = w / nh;
    const size_t off = (size_t)bt * C + (size_t)h * hs;
    float *dq = dqkv + (size_t)bt * 3 * C + (size_t)h * hs;
    float s = 0.f;
    for (int d = lane; d < hs; d += 32) {
        s += dout[off + d] * out[off + d];
        dq[d] = 0.f;
    }
    s = warp_sum(s);
    if (lane == 0) Dg[((size_t)(bt / Tn) * nh + h) * Tn + (size_t)(bt % Tn)] = s;
}

/* Backward configuration: 64 keys a block, query tiles of BQ; a thread
 * takes RT keys and CT queries of a score tile (TX = BQ/CT threads share a
 * key row, NT threads), and rows RQ = 64 TX / NT of each 64-query half of
 * the dQ tile. */
template <int HD_, int BQ_, int RT_, int CT_, int MINB_> struct BwdF32 {
    static constexpr int HD = HD_, BQ = BQ_, RT = RT_, CT = CT_, MINB = MINB_;
    static constexpr int TX = BQ / CT, NT = kB / RT * TX, RQ = kB * TX / NT, WLD = BQ + 4;
};
/* K, V, Q, dO (BQ rows each of the last two), P^T, dS^T (64 x BQ), lse, D */
template <class F> constexpr size_t bwd_smem()
{
    return ((size_t)(2 * kB + 2 * F::BQ) * ld_of<F::HD>() + 2 * (size_t)kB * F::WLD + 2 * F::BQ) * 4;
}

/* Grid (key tiles, nh, B): key tile 0 (most query tiles) first, and the
 * key tiles of one head side by side (their dQ atomics meet in L2). */
template <class F>
__global__ void __launch_bounds__(F::NT, F::MINB)
    attn_bwd(float *__restrict__ dqkv, const float *__restrict__ dout, const float *__restrict__ qkv,
             const float *__restrict__ lse, const float *__restrict__ Dg, int Tn, int C, int nh, float sl2,
             float scale)
{
    constexpr int HD = F::HD, BQ = F::BQ, RT = F::RT, CT = F::CT, TX = F::TX, NT = F::NT, RQ = F::RQ;
    constexpr int WLD = F::WLD, LD = ld_of<HD>(), NC = Cols<HD, TX>::NC, V = Cols<HD, TX>::VEC;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *sK = reinterpret_cast<float *>(smem_raw), *sV = sK + kB * LD, *sQ = sV + kB * LD, *sO = sQ + BQ * LD;
    float *sP = sO + BQ * LD, *sS = sP + kB * WLD, *sL = sS + kB * WLD, *sD = sL + BQ;
    const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, ty = tid / TX, tx = tid % TX;
    const size_t rs = 3 * (size_t)C;
    const float *gq = qkv + (size_t)b * Tn * rs + (size_t)h * HD;
    const float *gdo = dout + (size_t)b * Tn * C + (size_t)h * HD;
    const float *hl = lse + ((size_t)b * nh + h) * Tn, *hD = Dg + ((size_t)b * nh + h) * Tn;
    float *gdq = dqkv + (size_t)b * Tn * rs + (size_t)h * HD;
    const int k0 = kt * kB, nqt = (Tn + BQ - 1) / BQ, qt0 = k0 / BQ;
    load_tile<HD, NT>(sK, gq + C, rs, k0, Tn, tid);
    load_tile<HD, NT>(sV, gq + 2 * (size_t)C, rs, k0, Tn, tid);

    float dk[RT][NC], dv[RT][NC];
#pragma unroll
    for (int i = 0; i < RT; i++)
#pragma unroll
        for (int j = 0; j < NC; j++) dk[i][j] = dv[i][j] = 0.f;
    /* Q(qt), dO(qt) and the tile's lse, D are loaded while the previous
     * tile forms dQ (after its last read of Q and dO) */
    auto load_q = [&](int qt) {
        const int q0 = qt * BQ;
        load_tile<HD, NT, BQ>(sQ, gq, rs, q0, Tn, tid);
        load_tile<HD, NT, BQ>(sO, gdo, C, q0, Tn, tid);
        cp_async_commit();
        for (int r = tid; r < BQ; r += NT) {
            const int t = q0 + r;
            sL[r] = t < Tn ? hl[t] * kLog2e : INFINITY; /* rows past T: P = 0 */
            sD[r] = t < Tn ? hD[t] : 0.f;
        }
    };
    load_q(qt0);
    for (int qt = qt0; qt < nqt; qt++) {
        const int q0 = qt * BQ;
        cp_async_wait<0>();
        __syncthreads(); /* Q(qt), dO(qt), lse, D landed; dS of qt-1 read */
        /* P^T first (kept in shared memory), then dP^T: one score tile of
         * registers at a time */
        const bool mask = q0 < k0 + kB; /* the tile reaches keys' diagonal */
        {
            float sc[RT][CT];
            score_tile<HD, RT, CT, TX>(sc, sK, sQ, ty, tx);
            each_score<RT, CT, TX>(ty, tx, [&](int i, int j, int key, int q) { /* within their tiles */
                sP[key * WLD + q] = mask && k0 + key > q0 + q ? 0.f : fast_exp2(sc[i][j] * sl2 - sL[q]);
            });
        }
        {
            float dp[RT][CT];
            score_tile<HD, RT, CT, TX>(dp, sV, sO, ty, tx);
            each_score<RT, CT, TX>(ty, tx, [&](int i, int j, int key, int q) { /* this thread wrote sP there */
                sS[key * WLD + q] = sP[key * WLD + q] * (dp[i][j] - sD[q]) * scale;
            });
        }
        __syncthreads(); /* P^T, dS^T written */
        mul_tile<HD, RT, TX, false, WLD, BQ>(dv, sP, sO, ty, tx);
        mul_tile<HD, RT, TX, false, WLD, BQ>(dk, sS, sQ, ty, tx);
        __syncthreads(); /* Q, dO, lse, D of qt read */
        if (qt + 1 < nqt) load_q(qt + 1);
#pragma unroll
        for (int half = 0; half < BQ / kB; half++) {
            float dq[RQ][NC];
#pragma unroll
            for (int i = 0; i < RQ; i++)
#pragma unroll
                for (int j = 0; j < NC; j++) dq[i][j] = 0.f;
            mul_tile<HD, RQ, TX, true, WLD, kB>(dq, sS + half * kB, sK, ty, tx);
#pragma unroll
            for (int i = 0; i < RQ; i++) {
                const int t = q0 + half * kB + RQ * ty + i;
                if (t >= Tn) continue;
                float *row = gdq + (size_t)t * rs;
#pragma unroll
                for (int g = 0; g < NC / V; g++) {
                    const int c = col<HD, TX>(tx, V * g);
                    if constexpr (V == 4)
                        atomicAdd(reinterpret_cast<float4 *>(row + c),
                                  make_float4(dq[i][4 * g], dq[i][4 * g + 1], dq[i][4 * g + 2], dq[i][4 * g + 3]));
                    else
                        atomicAdd(reinterpret_cast<float2 *>(row + c), make_float2(dq[i][V * g], dq[i][V * g + 1]));
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < RT; i++) {
        const int key = k0 + RT * ty + i;
        if (key >= Tn) continue;
        float *row = gdq + (size_t)key * rs;
#pragma unroll
        for (int j = 0; j < NC; j++) {
            row[C + col<HD, TX>(tx, j)] = dk[i][j];
            row[2 * (size_t)C + col<HD, TX>(tx, j)] = dv[i][j];
        }
    }
}

} // namespace f32a
