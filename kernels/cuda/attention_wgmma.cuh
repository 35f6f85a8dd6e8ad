/* attention_wgmma.cuh — the 16-bit attention on Hopper's warpgroup MMA
 * (wgmma, sm_90a), forward and backward, included by attention.cu inside
 * its namespace: it uses that file's helpers (cp_async16, pack2, fast_exp2,
 * add_dq_tile) and keeps the contracts of attn_fwd_tc and attn_bwd_tc (the
 * same inputs and outputs; backward takes D and the zeroed dQ accumulator
 * from attn_bwd_prep16, writes dK and dV into dqkv and leaves dQ in the
 * accumulator for attn_dq_store).
 *
 * Backward block: NWG warpgroups (128 threads each) of 64 keys; it walks
 * the query tiles of 64 from the diagonal down. Per query tile, five MMAs
 * of M = 64 a warpgroup:
 *   S^T = K Q^T, dP^T = V dO^T   (A = K, V and B = Q, dO from shared, K-major)
 *   P^T, dS^T in the accumulators' registers (exp2 against lse, causal mask)
 *   dV += P^T dO, dK += dS^T Q  (A = P^T, dS^T from registers, B N-major)
 *   dQ  = dS K                   (A = dS^T in shared read M-major, B N-major)
 * where dQ sums the block's keys (each warpgroup takes HD/NWG of its
 * columns) and goes to the fp32 accumulator by atomics, as in attn_bwd_tc.
 * Registers at hs=128: dK, dV (128) + S^T, dP^T (64) or 64 columns of dQ
 * (32). Forward block: NWG warpgroups of 64 queries sharing BC-key K/V
 * tiles (its comment below).
 * Shared tiles are R rows of 128-byte swizzled atoms (16-byte chunk c of
 * row r stored at chunk c ^ (r % 8)), HD/64 atoms side by side, so one
 * tile serves as a K-major operand (rows = M or N) and as an MN-major one
 * (rows = K). Q and dO (backward), K and V (forward) are double-buffered
 * by cp.async. */

namespace wg {

constexpr int kRows = 64;                 /* keys of a warpgroup = queries per tile */
constexpr uint32_t kAtom = kRows * 128;   /* one 64-column atom of a tile: 8 KiB */

template <int HD> __host__ __device__ constexpr uint32_t tile_bytes() { return (HD / 64) * kAtom; }
/* K, V (NWG tiles each), Q[2], dO[2], dS^T (NWG atoms); lse and D [2][64]
 * each; 1 KiB to align the base */
template <int HD, int NWG> constexpr size_t smem_bytes()
{
    return (2 * NWG + 4) * (size_t)tile_bytes<HD>() + NWG * kAtom + 4 * kRows * 4 + 1024;
}

/* R rows (row0.., global stride rs elements) of HD elements into a
 * swizzled tile at shared address dst (HD/64 atoms of R*128 bytes), NT
 * threads; rows >= Tn zero-filled. */
template <typename T, int HD, int NT, int R = kRows>
__device__ __forceinline__ void load_tile(uint32_t dst, const T *g, size_t rs, int row0, int Tn, int tid)
{
    constexpr int CPR = HD / 8, ITER = R * CPR / NT;
    static_assert(ITER * NT == R * CPR, "tile must split evenly over the block");
#pragma unroll
    for (int i = 0; i < ITER; i++) {
        const int idx = tid + i * NT, r = idx / CPR, cc = idx % CPR;
        const bool ok = row0 + r < Tn;
        const uint32_t d = dst + (uint32_t)(cc >> 3) * (R * 128) + r * 128 + ((((cc & 7) ^ (r & 7))) << 4);
        cp_async16(d, ok ? g + (size_t)(row0 + r) * rs + cc * 8 : g, ok);
    }
}

/* K-major view (rows = M or N, K = the HD columns), k-step kk of 16
 * columns; atom = the tile's rows * 128 bytes */
__device__ __forceinline__ uint64_t desc_k(uint32_t tile, int kk, uint32_t atom = kAtom)
{
    return wg_desc(tile + (uint32_t)(kk >> 2) * atom + (uint32_t)(kk & 3) * 32, 16, 1024);
}
/* MN-major view (rows = K, the columns = M or N), k-step kk of 16 rows */
__device__ __forceinline__ uint64_t desc_mn(uint32_t tile, int kk, uint32_t atom = kAtom)
{
    return wg_desc(tile + (uint32_t)kk * 2048, atom, 1024);
}

/* NWG warpgroups, 64 keys each (a block covers 64*NWG keys, sharing the
 * query tiles it loads). dQ of a query tile sums over all the block's keys,
 * each warpgroup taking HD/NWG of its columns, so the atomics a tile pair
 * costs are shared by NWG key tiles. VAR (timing experiments of
 * bench/attn_tune.cu only; 0 everywhere else): 1 writes the dQ partials
 * with plain stores instead of atomics, 2 skips dQ. */
template <typename T, int HD, int NWG, int VAR = 0>
__global__ void __launch_bounds__(128 * NWG, 3 - NWG)
    attn_bwd_wg(T *__restrict__ dqkv, float *__restrict__ dqacc, const T *__restrict__ dout,
                const T *__restrict__ qkv, const float *__restrict__ lse, const float *__restrict__ Dg, int Tn,
                int C, int nh, float sl2, float scale)
{
#if MS_WGMMA
    constexpr int NT = 128 * NWG;
    constexpr uint32_t TB = tile_bytes<HD>();
    constexpr int KS = HD / 16;        /* k-steps over the head dimension */
    constexpr int QC = HD / NWG;       /* dQ columns of a warpgroup */
    constexpr int QN = QC < 64 ? QC : 64; /* ... in MMAs of QN columns */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t raw = smem_addr(smem_raw), base = (raw + 1023u) & ~1023u;
    const uint32_t sK = base, sV = sK + NWG * TB, sQ = sV + NWG * TB, sdO = sQ + 2 * TB, sdS = sdO + 2 * TB;
    float *sL = reinterpret_cast<float *>(smem_raw + (sdS + NWG * kAtom - raw)); /* [2][64]: lse*log2(e), +inf past T */
    float *sD = sL + 2 * kRows;                                                  /* [2][64] */

    const int h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const int wgi = warp >> 2, wl = warp & 3; /* warpgroup, warp in it */
    const size_t rs = 3 * (size_t)C;
    const T *gq = qkv + (size_t)b * Tn * rs + (size_t)h * HD;
    const T *gk = gq + C, *gv = gq + 2 * (size_t)C;
    const T *gdo = dout + (size_t)b * Tn * C + (size_t)h * HD;
    const float *glse = lse + ((size_t)b * nh + h) * Tn, *gD = Dg + ((size_t)b * nh + h) * Tn;
    const int k0 = blockIdx.x * kRows * NWG, nqt = (Tn + kRows - 1) / kRows, qt0 = k0 / kRows;
    const int kw0 = k0 + kRows * wgi; /* this warpgroup's first key */
    const uint32_t myK = sK + wgi * TB, myV = sV + wgi * TB, mydS = sdS + wgi * kAtom;

#pragma unroll
    for (int w = 0; w < NWG; w++) {
        load_tile<T, HD, NT>(sK + w * TB, gk, rs, k0 + kRows * w, Tn, tid);
        load_tile<T, HD, NT>(sV + w * TB, gv, rs, k0 + kRows * w, Tn, tid);
    }
    load_tile<T, HD, NT>(sQ, gq, rs, k0, Tn, tid);
    load_tile<T, HD, NT>(sdO, gdo, C, k0, Tn, tid);
    cp_async_commit();
    if (tid < kRows) {
        const int q = k0 + tid;
        sL[tid] = q < Tn ? glse[q] * kLog2e : INFINITY; /* rows past T: P = 0 */
        sD[tid] = q < Tn ? gD[q] : 0.f;
    }

    float dk[HD / 2], dv[HD / 2];
#pragma unroll
    for (int i = 0; i < HD / 2; i++) dk[i] = dv[i] = 0.f;

    for (int qt = qt0; qt < nqt; ++qt) {
        const int buf = (qt - qt0) & 1, q0 = qt * kRows;
        cp_async_wait<0>();
        fence_proxy_async();
        __syncthreads(); /* tile qt landed; everyone is past iteration qt-1 */
        const bool more = qt + 1 < nqt;
        float next_l = 0.f, next_d = 0.f;
        if (more) {
            load_tile<T, HD, NT>(sQ + (buf ^ 1) * TB, gq, rs, q0 + kRows, Tn, tid);
            load_tile<T, HD, NT>(sdO + (buf ^ 1) * TB, gdo, C, q0 + kRows, Tn, tid);
            cp_async_commit();
            if (tid < kRows) {
                const int q = q0 + kRows + tid;
                next_l = q < Tn ? glse[q] * kLog2e : INFINITY;
                next_d = q < Tn ? gD[q] : 0.f;
            }
        }
        const uint32_t qs = sQ + buf * TB, dos = sdO + buf * TB;
        const float *ls = sL + buf * kRows, *ds_ = sD + buf * kRows;
        /* a warpgroup whose keys all follow the tile's queries has P = 0:
         * it skips its MMAs, and dQ skips its keys */
        const bool live = kw0 <= q0 + kRows - 1;

        if (live) {
            /* S^T = K Q^T and dP^T = V dO^T: 64 keys x 64 queries each */
            float st[32], dp[32];
#pragma unroll
            for (int i = 0; i < 32; i++) st[i] = dp[i] = 0.f;
            wg_hold(st); /* defined before the fence (else ptxas injects its own) */
            wg_hold(dp);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < KS; kk++) Wg<T, 64>::template ss<0, 0>(st, desc_k(myK, kk), desc_k(qs, kk), kk);
#pragma unroll
            for (int kk = 0; kk < KS; kk++) Wg<T, 64>::template ss<0, 0>(dp, desc_k(myV, kk), desc_k(dos, kk), kk);
            wg_commit();
            wg_wait<0>();
            wg_hold(st);
            wg_hold(dp);

            /* P^T = exp(s*scale - lse) (0 where key > query), dS^T = P^T (dP^T - D);
             * row (key) kw0 + 16*wl + g + 8*(e/2), column (query) q0 + 8j + 2*tig + e%2 */
            const bool diag = kw0 + kRows - 1 > q0;
            uint32_t pa[4][4], sa[4][4];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float2 l2 = *reinterpret_cast<const float2 *>(ls + 8 * j + 2 * tig);
                const float2 d2 = *reinterpret_cast<const float2 *>(ds_ + 8 * j + 2 * tig);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int kr = kw0 + 16 * wl + g + 8 * (e >> 1), qc = q0 + 8 * j + 2 * tig + (e & 1);
                    float p = fast_exp2(st[4 * j + e] * sl2 - ((e & 1) ? l2.y : l2.x));
                    if (diag && kr > qc) p = 0.f;
                    st[4 * j + e] = p;
                    dp[4 * j + e] = p * (dp[4 * j + e] - ((e & 1) ? d2.y : d2.x));
                }
            }
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    pa[kk][r] = pack2<T>(st[8 * kk + 2 * r], st[8 * kk + 2 * r + 1]);
                    sa[kk][r] = pack2<T>(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
                }
            /* dS^T to shared (rows = keys): dQ reads it M-major */
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    const int r = 16 * wl + g + 8 * hh;
                    const uint32_t a = mydS + r * 128 + ((j ^ (r & 7)) << 4) + 4 * tig;
                    asm volatile("st.shared.b32 [%0], %1;" ::"r"(a), "r"(sa[j >> 1][2 * (j & 1) + hh]) : "memory");
                }
            fence_proxy_async();

            /* dV += P^T dO, dK += dS^T Q (B = dO, Q read N-major) */
            wg_hold_a(pa);
            wg_hold_a(sa);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++) Wg<T, HD>::template rs<1>(dv, pa[kk], desc_mn(dos, kk), 1);
#pragma unroll
            for (int kk = 0; kk < 4; kk++) Wg<T, HD>::template rs<1>(dk, sa[kk], desc_mn(qs, kk), 1);
            wg_commit();
        }
        __syncthreads(); /* dS^T complete */

        /* dQ tile [64 queries x HD] = dS K over the block's live keys: this
         * warpgroup's QC columns, QN at a time; A = dS^T read M-major, B =
         * K read N-major, starting QN columns in (inside the atom when QN < 64) */
        const int ksteps = min(4 * NWG, (q0 + kRows - k0) / 16);
        float *dst = dqacc + ((size_t)b * Tn + q0 + 16 * wl) * C + (size_t)h * HD;
#pragma unroll
        for (int part = 0; part < (VAR == 2 ? 0 : QC / QN); part++) {
            const int col = wgi * QC + part * QN;
            const uint32_t kcol = (uint32_t)(col >> 6) * kAtom + (uint32_t)(col & 63) * 2;
            float dq[QN / 2];
#pragma unroll
            for (int i = 0; i < QN / 2; i++) dq[i] = 0.f;
            wg_hold(dq);
            /* two straight runs (a branch between the MMAs of one run makes
             * ptxas add fences): the block's first query tile sees only the
             * first warpgroup's keys, every later one all of them */
            if (ksteps == 4 * NWG) {
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < 4 * NWG; kk++)
                    Wg<T, QN>::template ss<1, 1>(dq, desc_mn(sdS + (kk >> 2) * kAtom, kk & 3),
                                                 desc_mn(sK + (kk >> 2) * TB + kcol, kk & 3), kk);
            } else {
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
                    Wg<T, QN>::template ss<1, 1>(dq, desc_mn(sdS, kk), desc_mn(sK + kcol, kk), kk);
            }
            wg_commit();
            wg_wait<0>();
            wg_hold(dq);
#pragma unroll
            for (int j = 0; j < QN / 8; j++) {
                const float t4[4] = {dq[4 * j], dq[4 * j + 1], dq[4 * j + 2], dq[4 * j + 3]};
                if (VAR == 1) {
                    if (q0 + 16 * wl + g < Tn)
                        *reinterpret_cast<float2 *>(dst + (size_t)g * C + col + 8 * j + 2 * tig) =
                            make_float2(t4[0], t4[1]);
                } else add_dq_tile(dst + col + 8 * j, C, t4, q0 + 16 * wl, Tn, g, tig);
            }
        }
        wg_wait<0>(); /* dV, dK (when dQ was skipped) */
        wg_hold(dk);
        wg_hold(dv);
        if (more && tid < kRows) { /* buffer buf^1 was last read before this iteration's first barrier */
            sL[(buf ^ 1) * kRows + tid] = next_l;
            sD[(buf ^ 1) * kRows + tid] = next_d;
        }
    }

#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int key = kw0 + 16 * wl + g + 8 * hh;
        if (key >= Tn) continue;
        T *row = dqkv + ((size_t)b * Tn + key) * rs + (size_t)h * HD + 2 * tig;
#pragma unroll
        for (int j = 0; j < HD / 8; j++) {
            *reinterpret_cast<uint32_t *>(row + C + 8 * j) =
                pack2<T>(dk[4 * j + 2 * hh] * scale, dk[4 * j + 2 * hh + 1] * scale);
            *reinterpret_cast<uint32_t *>(row + 2 * C + 8 * j) = pack2<T>(dv[4 * j + 2 * hh], dv[4 * j + 2 * hh + 1]);
        }
    }
#else
    (void)dqkv, (void)dqacc, (void)dout, (void)qkv, (void)lse, (void)Dg, (void)Tn, (void)C, (void)nh, (void)sl2,
        (void)scale;
#endif
}

/* Forward: NWG warpgroups of 64 queries a block (sharing the K/V tiles it
 * loads), BC keys a tile (double-buffered by cp.async). Per key tile:
 *   S = Q K^T              (A = Q, B = K from shared, K-major; N = BC)
 *   online softmax in the accumulators' registers (rows g, g+8 of a warp)
 *   O += P V               (A = P from registers, B = V read N-major)
 * Output: O / l staged in the warpgroup's Q tile, then 16-byte stores; lse
 * in natural log, as attn_fwd_tc writes it. Grid (nh, B, query blocks),
 * blockIdx.z = 0 the last (heaviest) block. */
template <int HD, int NWG, int BC> constexpr size_t fwd_smem_bytes()
{
    return NWG * (size_t)tile_bytes<HD>() + 4 * (size_t)(HD / 64) * BC * 128 + 1024;
}
template <typename T, int HD, int NWG, int BC>
__global__ void __launch_bounds__(128 * NWG, NWG == 1 ? 2 : 1)
    attn_fwd_wg(T *__restrict__ out, float *__restrict__ lse, const T *__restrict__ qkv, int Tn, int C, int nh,
                float sl2 /* scale*log2(e) */)
{
#if MS_WGMMA
    constexpr int NT = 128 * NWG, KS = HD / 16;
    constexpr uint32_t TQ = tile_bytes<HD>(), AK = BC * 128, TK = (HD / 64) * AK;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t raw = smem_addr(smem_raw), base = (raw + 1023u) & ~1023u;
    const uint32_t sQ = base, sK = sQ + NWG * TQ, sV = sK + 2 * TK;

    const int h = blockIdx.x, b = blockIdx.y;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const int wgi = warp >> 2, wl = warp & 3;
    const size_t rs = 3 * (size_t)C;
    const T *gq = qkv + (size_t)b * Tn * rs + (size_t)h * HD;
    const T *gk = gq + C, *gv = gq + 2 * (size_t)C;
    const int q0 = (gridDim.z - 1 - blockIdx.z) * kRows * NWG, qw0 = q0 + kRows * wgi;
    const int row_lo = qw0 + 16 * wl; /* the warp's first row */
    const int nkt = (min(q0 + kRows * NWG, Tn) + BC - 1) / BC;
    const uint32_t myQ = sQ + wgi * TQ;

#pragma unroll
    for (int w = 0; w < NWG; w++) load_tile<T, HD, NT>(sQ + w * TQ, gq, rs, q0 + kRows * w, Tn, tid);
    load_tile<T, HD, NT, BC>(sK, gk, rs, 0, Tn, tid);
    load_tile<T, HD, NT, BC>(sV, gv, rs, 0, Tn, tid);
    cp_async_commit();

    float o[HD / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < HD / 2; i++) o[i] = 0.f;

    for (int it = 0; it < nkt; ++it) {
        const int buf = it & 1, k0 = it * BC;
        if (it + 1 < nkt) {
            load_tile<T, HD, NT, BC>(sK + (buf ^ 1) * TK, gk, rs, k0 + BC, Tn, tid);
            load_tile<T, HD, NT, BC>(sV + (buf ^ 1) * TK, gv, rs, k0 + BC, Tn, tid);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        fence_proxy_async();
        __syncthreads();
        if (k0 <= qw0 + kRows - 1) { /* a warpgroup whose rows all precede the tile skips it */
            const uint32_t ks = sK + buf * TK, vs = sV + buf * TK;
            float s[BC / 2];
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < KS; kk++) Wg<T, BC>::template ss<0, 0>(s, desc_k(myQ, kk), desc_k(ks, kk, AK), kk);
            wg_commit();
            wg_wait<0>();
            wg_hold(s);
            if (k0 + BC - 1 > row_lo) /* the diagonal: keys after the query */
#pragma unroll
                for (int j = 0; j < BC / 8; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (k0 + 8 * j + 2 * tig + (e & 1) > row_lo + g + 8 * (e >> 1)) s[4 * j + e] = -INFINITY;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = -INFINITY;
#pragma unroll
                for (int j = 0; j < BC / 8; j++) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_new = fmaxf(m[r], mx * sl2);
                const float mb = m_new == -INFINITY ? 0.f : m_new; /* fully masked row: no NaN */
                const float alpha = fast_exp2(m[r] - mb);
                m[r] = m_new;
                float sum = 0.f;
#pragma unroll
                for (int j = 0; j < BC / 8; j++) {
                    s[4 * j + 2 * r] = fast_exp2(fmaf(s[4 * j + 2 * r], sl2, -mb));
                    s[4 * j + 2 * r + 1] = fast_exp2(fmaf(s[4 * j + 2 * r + 1], sl2, -mb));
                    sum += s[4 * j + 2 * r] + s[4 * j + 2 * r + 1];
                }
                l[r] = l[r] * alpha + sum;
#pragma unroll
                for (int j = 0; j < HD / 8; j++) {
                    o[4 * j + 2 * r] *= alpha;
                    o[4 * j + 2 * r + 1] *= alpha;
                }
            }
            uint32_t pa[BC / 16][4];
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++)
#pragma unroll
                for (int r = 0; r < 4; r++) pa[kk][r] = pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
            wg_hold_a(pa);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++) Wg<T, HD>::template rs<1>(o, pa[kk], desc_mn(vs, kk, AK), 1);
            wg_commit();
            wg_wait<0>();
            wg_hold(o);
        }
        __syncthreads(); /* every warpgroup is done with buffer `buf` before it is refilled */
    }

    /* O / l into this warpgroup's Q tile (same swizzle), then 16-byte rows out */
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float lt = l[r];
        lt += __shfl_xor_sync(0xffffffffu, lt, 1);
        lt += __shfl_xor_sync(0xffffffffu, lt, 2);
        inv[r] = 1.f / lt;
        const int row = row_lo + g + 8 * r;
        if (tig == 0 && row < Tn) lse[((size_t)b * nh + h) * Tn + row] = (m[r] + log2f(lt)) * kLn2;
    }
#pragma unroll
    for (int j = 0; j < HD / 8; j++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int rr = 16 * wl + g + 8 * r, c = j & 7;
            const uint32_t a = myQ + (uint32_t)(j >> 3) * kAtom + rr * 128 + ((c ^ (rr & 7)) << 4) + 4 * tig;
            asm volatile("st.shared.b32 [%0], %1;" ::"r"(a),
                         "r"(pack2<T>(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]))
                         : "memory");
        }
    asm volatile("bar.sync %0, 128;" ::"r"(1 + wgi) : "memory"); /* this warpgroup's rows are staged */
    constexpr int CPR = HD / 8;
    const int t = tid & 127;
#pragma unroll
    for (int i = 0; i < kRows * CPR / 128; i++) {
        const int idx = t + 128 * i, r = idx / CPR, cc = idx % CPR, row = qw0 + r;
        if (row < Tn) {
            uint4 v;
            const uint32_t a = myQ + (uint32_t)(cc >> 3) * kAtom + r * 128 + (((cc & 7) ^ (r & 7)) << 4);
            asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                         : "r"(a));
            *reinterpret_cast<uint4 *>(out + ((size_t)b * Tn + row) * C + (size_t)h * HD + cc * 8) = v;
        }
    }
#else
    (void)out, (void)lse, (void)qkv, (void)Tn, (void)C, (void)nh, (void)sl2;
#endif
}

/* 1 where this module's machine code has the wgmma instructions (the
 * sm_90a build running on a 9.0 device), 0 where the runtime picked the
 * plain sm_90 code or the PTX. */
__global__ void probe(int *out) { *out = MS_WGMMA; }

} // namespace wg
