/* attention_wgmma.cuh — the 16-bit attention on Hopper's warpgroup MMA
 * (wgmma, sm_90a), forward and backward, included by attention.cu inside
 * its namespace: it uses that file's helpers (pack2, fast_exp2, add_dq_tile)
 * and keeps the contracts of attn_fwd_tc and attn_bwd_tc (the
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
 * columns) and goes to the fp32 accumulator by TMA reductions (attn_bwd_tc
 * adds it by atomics).
 * Registers at hs=128: dK, dV (128) + S^T, dP^T (64) or 64 columns of dQ
 * (32). Forward block: NWG warpgroups of 64 queries sharing BC-key K/V
 * tiles (its comment below).
 * Shared tiles are R rows of 128-byte swizzled atoms (16-byte chunk c of
 * row r stored at chunk c ^ (r % 8), the TMA's 128-byte swizzle), HD/64
 * atoms side by side, so one tile serves as a K-major operand (rows = M or
 * N) and as an MN-major one (rows = K). Both kernels are warp-specialised:
 * a producer warpgroup's first warp loads the tiles by TMA into two stages
 * guarded by mbarriers, and gives its registers to the consumers (setmaxnreg).
 * Rows past a sequence's end come from the next sequence (or are zero past
 * the tensor): the causal mask gives them P = 0, and no output row past
 * T is stored. */

namespace wg {

/* mbarriers and TMA (sm_90): both kernels' tiles arrive by
 * cp.async.bulk.tensor, which completes the transaction count of a
 * shared-memory barrier that the consumers wait on by phase parity */
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
#if MS_WGMMA
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
#else
    (void)bar, (void)count;
#endif
}
/* the barriers' initialisation made visible to the async proxy (TMA) */
__device__ __forceinline__ void fence_mbar_init()
{
#if MS_WGMMA
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
#if MS_WGMMA
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
#else
    (void)bar, (void)bytes;
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
#if MS_WGMMA
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#else
    (void)bar;
#endif
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
#if MS_WGMMA
    uint32_t done = 0;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
#else
    (void)bar, (void)parity;
#endif
}
/* dQ partials: a swizzled fp32 box of shared memory added into global by
 * the TMA (cp.reduce.async.bulk.tensor), tracked in bulk groups */
__device__ __forceinline__ void tma_reduce_add_2d(const CUtensorMap *map, uint32_t src, int x, int y)
{
#if MS_WGMMA
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(x), "r"(y), "r"(src)
                 : "memory");
#else
    (void)map, (void)src, (void)x, (void)y;
#endif
}
__device__ __forceinline__ void bulk_commit()
{
#if MS_WGMMA
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
/* READ: only until the sources have been read (the buffer may be rewritten) */
template <bool READ> __device__ __forceinline__ void bulk_wait_all()
{
#if MS_WGMMA
    if (READ) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    else asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}
/* a warpgroup's register budget (all its threads, the same N) */
template <int N> __device__ __forceinline__ void setmaxnreg_dec()
{
#if MS_WGMMA
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}
template <int N> __device__ __forceinline__ void setmaxnreg_inc()
{
#if MS_WGMMA
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}
/* Registers a consumer thread of a warp-specialised kernel (NWG consumer
 * warpgroups and one producer, MINB blocks an SM, as its launch bounds
 * say): ptxas gives every thread of a kernel that moves registers by
 * setmaxnreg the launch bound's share; the producer keeps `producer` of it
 * and the consumers share the rest (multiples of 8, at most 256). */
template <int NWG, int MINB> __host__ __device__ constexpr int launch_regs()
{
    return (65536 / MINB / (128 * (NWG + 1))) & ~7;
}
template <int NWG, int MINB> __host__ __device__ constexpr int consumer_regs(int producer)
{
    const int regs = (launch_regs<NWG, MINB>() + (launch_regs<NWG, MINB>() - producer) / NWG) & ~7;
    return regs < 256 ? regs : 256;
}
static_assert(consumer_regs<2, 1>(40) == 232 && consumer_regs<1, 2>(40) == 216 && consumer_regs<1, 3>(32) == 128,
              "register budgets");
/* one box of the tensor map (x = column, y = row) into shared dst */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int x, int y, uint32_t bar)
{
#if MS_WGMMA
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
        : "memory");
#else
    (void)dst, (void)map, (void)x, (void)y, (void)bar;
#endif
}

constexpr int kRows = 64;                 /* keys of a warpgroup = queries per tile */
constexpr uint32_t kAtom = kRows * 128;   /* one 64-column atom of a tile: 8 KiB */

template <int HD> __host__ __device__ constexpr uint32_t tile_bytes() { return (HD / 64) * kAtom; }
/* dQ staging: a 64-row fp32 box of 32 columns (128 bytes, swizzled) is one
 * kAtom; HD columns a block (each warpgroup stages its HD/NWG) */
template <int HD> __host__ __device__ constexpr uint32_t dq_stage_bytes() { return (HD / 32) * kAtom; }
/* K, V (NWG tiles each), Q[2], dO[2], dS^T[2] (NWG atoms each), the dQ
 * staging; lse and D [2][64] each; 1 KiB to align the base; five mbarriers */
template <int HD, int NWG> constexpr size_t smem_bytes()
{
    return (2 * NWG + 4) * (size_t)tile_bytes<HD>() + 2 * NWG * kAtom + dq_stage_bytes<HD>() + 4 * kRows * 4 + 1024 +
           5 * 8;
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

/* NWG consumer warpgroups, 64 keys each (a block covers 64*NWG keys,
 * sharing the query tiles it loads), and a producer warpgroup whose first
 * warp brings the block's K and V once, then per query tile Q and dO by
 * TMA and lse, D by plain loads into two stages; a stage's "full" mbarrier
 * completes with the TMA bytes and the 32 lanes' arrivals, its "empty" one
 * with an arrival of each consumer warp once its products have read it.
 * dQ of a query tile sums over all the block's keys, each warpgroup taking
 * HD/NWG of its columns, so the additions a tile pair costs are shared by
 * NWG key tiles; each warpgroup stages its dQ columns in shared memory,
 * and one thread adds them into the fp32 accumulator by a TMA reduction
 * (cp.reduce.async.bulk.tensor on the map tdq), so the consumers issue no
 * atomics (rows past T add zeros: their P is 0). dS^T is double-buffered,
 * so the one barrier a tile (among the consumers: dS^T complete) also
 * keeps a buffer from being rewritten while the other warpgroup's dQ
 * reads it. VAR (timing experiments of
 * bench/attn_tune.cu only; 0 everywhere else): 1 writes the dQ partials
 * with plain stores, 2 skips dQ, 3 adds them by atomics from registers. */
constexpr int kBwdProducerRegs = 56; /* it also loads lse and D */
template <int NWG> __host__ __device__ constexpr int bwd_minb() { return NWG == 1 ? 2 : 1; }
template <int NWG> __host__ __device__ constexpr int bwd_consumer_regs()
{
    return consumer_regs<NWG, bwd_minb<NWG>()>(kBwdProducerRegs);
}
template <typename T, int HD, int NWG, int VAR = 0>
__global__ void __launch_bounds__(128 * (NWG + 1), bwd_minb<NWG>())
    attn_bwd_wg(T *__restrict__ dqkv, float *__restrict__ dqacc, const __grid_constant__ CUtensorMap tqkv,
                const __grid_constant__ CUtensorMap tdo, const __grid_constant__ CUtensorMap tdq,
                const float *__restrict__ lse, const float *__restrict__ Dg, int Tn, int C, int nh, float sl2,
                float scale)
{
#if MS_WGMMA
    constexpr int NC = 128 * NWG;      /* consumer threads */
    constexpr uint32_t TB = tile_bytes<HD>();
    constexpr int KS = HD / 16, NA = HD / 64;
    constexpr int QC = HD / NWG;       /* dQ columns of a warpgroup */
    constexpr int QN = QC < 64 ? QC : 64; /* ... in MMAs of QN columns */
    /* SPLIT: S^T and dP^T in commit groups of their own, dV issued as soon
     * as P^T is made and dK behind dQ's first product, so each elementwise
     * stretch runs beside a product; with NWG = 1 (two blocks an SM, which
     * overlap each other) the one-group order measured faster */
    constexpr bool SPLIT = NWG > 1;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t raw = smem_addr(smem_raw), base = (raw + 1023u) & ~1023u;
    const uint32_t sK = base, sV = sK + NWG * TB, sQ = sV + NWG * TB, sdO = sQ + 2 * TB, sdS = sdO + 2 * TB;
    const uint32_t sdQ = sdS + 2 * NWG * kAtom;        /* dQ staging, HD/32 boxes */
    const uint32_t sLD = sdQ + dq_stage_bytes<HD>(); /* [2 stages][lse*log2(e) 64, D 64] fp32 */
    const uint32_t bKV = sLD + 2 * 2 * kRows * 4, bF = bKV + 8, bE = bF + 16; /* mbarriers */
    float *sL = reinterpret_cast<float *>(smem_raw + (sLD - raw));

    const int h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const int wgi = warp >> 2, wl = warp & 3; /* warpgroup, warp in it */
    const int k0 = blockIdx.x * kRows * NWG, nqt = (Tn + kRows - 1) / kRows, qt0 = k0 / kRows;

    if (tid == 0) {
        mbar_init(bKV, 1);
#pragma unroll
        for (int s = 0; s < 2; s++) {
            mbar_init(bF + 8 * s, 1 + 32); /* the TMA's expect_tx and the lanes that wrote lse, D */
            mbar_init(bE + 8 * s, 4 * NWG);
        }
        fence_mbar_init();
    }
    __syncthreads(); /* the only block-wide barrier */

    if (wgi == NWG) { /* the producer warpgroup */
        setmaxnreg_dec<kBwdProducerRegs>();
        if (warp != 4 * NWG) return;
        const int r0 = b * Tn;
        const float *glse = lse + ((size_t)b * nh + h) * Tn, *gD = Dg + ((size_t)b * nh + h) * Tn;
        if (lane == 0) {
            mbar_expect_tx(bKV, 2 * NWG * TB);
#pragma unroll
            for (int w = 0; w < NWG; w++)
#pragma unroll
                for (int a = 0; a < NA; a++) {
                    tma_load_2d(sK + w * TB + a * kAtom, &tqkv, C + h * HD + 64 * a, r0 + k0 + kRows * w, bKV);
                    tma_load_2d(sV + w * TB + a * kAtom, &tqkv, 2 * C + h * HD + 64 * a, r0 + k0 + kRows * w, bKV);
                }
        }
        for (int qt = qt0; qt < nqt; ++qt) {
            const int it = qt - qt0, s = it & 1, q0 = qt * kRows;
            if (it >= 2) mbar_wait(bE + 8 * s, ((it >> 1) & 1) ^ 1); /* tile it-2 left the stage */
            if (lane == 0) {
                mbar_expect_tx(bF + 8 * s, 2 * TB);
#pragma unroll
                for (int a = 0; a < NA; a++) {
                    tma_load_2d(sQ + s * TB + a * kAtom, &tqkv, h * HD + 64 * a, r0 + q0, bF + 8 * s);
                    tma_load_2d(sdO + s * TB + a * kAtom, &tdo, h * HD + 64 * a, r0 + q0, bF + 8 * s);
                }
            }
            float *ls = sL + s * 2 * kRows;
#pragma unroll
            for (int i = lane; i < kRows; i += 32) {
                const int q = q0 + i;
                ls[i] = q < Tn ? glse[q] * kLog2e : INFINITY; /* rows past T: P = 0 */
                ls[kRows + i] = q < Tn ? gD[q] : 0.f;
            }
            mbar_arrive(bF + 8 * s);
        }
        return;
    }

    setmaxnreg_inc<bwd_consumer_regs<NWG>()>();
    const int kw0 = k0 + kRows * wgi; /* this warpgroup's first key */
    const bool issuer = (tid & 127) == 0; /* hands the warpgroup's dQ boxes to the TMA */
    const size_t rs = 3 * (size_t)C;
    const uint32_t myK = sK + wgi * TB, myV = sV + wgi * TB;
    float dk[HD / 2], dv[HD / 2];
#pragma unroll
    for (int i = 0; i < HD / 2; i++) dk[i] = dv[i] = 0.f;
    mbar_wait(bKV, 0);

    for (int qt = qt0; qt < nqt; ++qt) {
        const int it = qt - qt0, s = it & 1, q0 = qt * kRows;
        mbar_wait(bF + 8 * s, (it >> 1) & 1);
        const uint32_t qs = sQ + s * TB, dos = sdO + s * TB, dS = sdS + s * NWG * kAtom, mydS = dS + wgi * kAtom;
        const float *ls = sL + s * 2 * kRows, *ds_ = ls + kRows;
        /* a warpgroup whose keys all follow the tile's queries has P = 0:
         * it skips its MMAs, and dQ skips its keys */
        const bool live = kw0 <= q0 + kRows - 1;

        uint32_t pa[4][4], sa[4][4]; /* P^T, dS^T: A operands of dV's and dK's products */
        auto issue_dk = [&] { /* SPLIT: dK += dS^T Q (Q read N-major), a commit group of its own */
            wg_hold_a(sa);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++) Wg<T, HD>::template rs<1>(dk, sa[kk], desc_mn(qs, kk), 1);
            wg_commit();
        };
        if (live) {
            /* S^T = K Q^T and dP^T = V dO^T: 64 keys x 64 queries each (SPLIT:
             * one commit group each, so P^T is made while dP^T is on the
             * tensor cores, and dS^T while dV's product is) */
            float st[32], dp[32];
#pragma unroll
            for (int i = 0; i < 32; i++) st[i] = dp[i] = 0.f;
            wg_hold(st); /* defined before the fence (else ptxas injects its own) */
            wg_hold(dp);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < KS; kk++) Wg<T, 64>::template ss<0, 0>(st, desc_k(myK, kk), desc_k(qs, kk), kk);
            if constexpr (SPLIT) wg_commit();
#pragma unroll
            for (int kk = 0; kk < KS; kk++) Wg<T, 64>::template ss<0, 0>(dp, desc_k(myV, kk), desc_k(dos, kk), kk);
            wg_commit();
            if constexpr (SPLIT) wg_wait<1>(); /* S^T */
            else wg_wait<0>();
            wg_hold(st);

            /* P^T = exp(s*scale - lse) (0 where key > query); row (key)
             * kw0 + 16*wl + g + 8*(e/2), column (query) q0 + 8j + 2*tig + e%2 */
            const bool diag = kw0 + kRows - 1 > q0;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float2 l2 = *reinterpret_cast<const float2 *>(ls + 8 * j + 2 * tig);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int kr = kw0 + 16 * wl + g + 8 * (e >> 1), qc = q0 + 8 * j + 2 * tig + (e & 1);
                    float p = fast_exp2(st[4 * j + e] * sl2 - ((e & 1) ? l2.y : l2.x));
                    if (diag && kr > qc) p = 0.f;
                    st[4 * j + e] = p;
                }
            }
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
#pragma unroll
                for (int r = 0; r < 4; r++) pa[kk][r] = pack2<T>(st[8 * kk + 2 * r], st[8 * kk + 2 * r + 1]);
            if constexpr (SPLIT) { /* dV += P^T dO (B = dO read N-major) */
                wg_hold_a(pa);
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < 4; kk++) Wg<T, HD>::template rs<1>(dv, pa[kk], desc_mn(dos, kk), 1);
                wg_commit();
                wg_wait<1>(); /* dP^T (dV's product may still run) */
            }
            wg_hold(dp);

            /* dS^T = P^T (dP^T - D) */
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float2 d2 = *reinterpret_cast<const float2 *>(ds_ + 8 * j + 2 * tig);
#pragma unroll
                for (int e = 0; e < 4; e++) dp[4 * j + e] = st[4 * j + e] * (dp[4 * j + e] - ((e & 1) ? d2.y : d2.x));
            }
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
#pragma unroll
                for (int r = 0; r < 4; r++) sa[kk][r] = pack2<T>(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
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
            if constexpr (!SPLIT) { /* dV += P^T dO, dK += dS^T Q (B = dO, Q read N-major) */
                wg_hold_a(pa);
                wg_hold_a(sa);
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < 4; kk++) Wg<T, HD>::template rs<1>(dv, pa[kk], desc_mn(dos, kk), 1);
#pragma unroll
                for (int kk = 0; kk < 4; kk++) Wg<T, HD>::template rs<1>(dk, sa[kk], desc_mn(qs, kk), 1);
                wg_commit();
            }
        }
        asm volatile("bar.sync 1, %0;" ::"n"(NC) : "memory"); /* dS^T complete (the consumers only) */

        /* dQ tile [64 queries x HD] = dS K over the block's live keys: this
         * warpgroup's QC columns, QN at a time; A = dS^T read M-major, B =
         * K read N-major, starting QN columns in (inside the atom when QN < 64) */
        const int ksteps = min(4 * NWG, (q0 + kRows - k0) / 16);
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
                    Wg<T, QN>::template ss<1, 1>(dq, desc_mn(dS + (kk >> 2) * kAtom, kk & 3),
                                                 desc_mn(sK + (kk >> 2) * TB + kcol, kk & 3), kk);
            } else {
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
                    Wg<T, QN>::template ss<1, 1>(dq, desc_mn(dS, kk), desc_mn(sK + kcol, kk), kk);
            }
            wg_commit();
            if (SPLIT && part == 0 && live) {
                issue_dk(); /* behind dQ's first product, so it runs while dQ is staged */
                wg_wait<1>();
            } else wg_wait<0>();
            wg_hold(dq);
            if (VAR == 0) {
                /* into this warpgroup's staging boxes (the previous tile's
                 * reduction has read them), then one thread hands them to the TMA */
                if (part == 0) {
                    if (issuer) bulk_wait_all<true>();
                    asm volatile("bar.sync %0, 128;" ::"r"(2 + wgi) : "memory");
                }
                const uint32_t stg = sdQ + (uint32_t)(col / 32) * kAtom;
#pragma unroll
                for (int j = 0; j < QN / 8; j++)
#pragma unroll
                    for (int hh = 0; hh < 2; hh++) {
                        const int r = 16 * wl + g + 8 * hh, c = 2 * (j & 3) + (tig >> 1);
                        const uint32_t a = stg + (uint32_t)(j >> 2) * kAtom + r * 128 + ((c ^ (r & 7)) << 4) + 8 * (tig & 1);
                        asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(a), "f"(dq[4 * j + 2 * hh]),
                                     "f"(dq[4 * j + 2 * hh + 1])
                                     : "memory");
                    }
                fence_proxy_async();
                asm volatile("bar.sync %0, 128;" ::"r"(2 + wgi) : "memory");
                if (issuer) {
#pragma unroll
                    for (int bx = 0; bx < QN / 32; bx++)
                        tma_reduce_add_2d(&tdq, stg + bx * kAtom, h * HD + col + 32 * bx, b * Tn + q0);
                    bulk_commit();
                }
            } else {
                float *dst = dqacc + ((size_t)b * Tn + q0 + 16 * wl) * C + (size_t)h * HD;
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
        }
        if (SPLIT && VAR == 2 && live) issue_dk(); /* no dQ: dK on its own */
        wg_wait<0>(); /* dK (dV and dK when not SPLIT and dQ was skipped) */
        wg_hold(dk);
        wg_hold(dv);
        /* every lane's reads of the stage's lse and D before lane 0 frees it
         * (the producer's lanes rewrite them with plain stores) */
        __syncwarp();
        if (lane == 0) mbar_arrive(bE + 8 * s); /* this warp is done with the stage */
    }

    if (VAR == 0 && issuer) bulk_wait_all<false>(); /* the staging stays allocated until the reductions are done */
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
    (void)dqkv, (void)dqacc, (void)tqkv, (void)tdo, (void)tdq, (void)lse, (void)Dg, (void)Tn, (void)C, (void)nh, (void)sl2,
        (void)scale;
#endif
}

/* Forward: NWG consumer warpgroups of 64 queries a block and a producer
 * warpgroup. The producer's first thread brings the block's Q tiles, then K and
 * V tiles of BC keys, by TMA (cp.async.bulk.tensor on the tensor maps tq,
 * tkv of qkv, 128-byte swizzle) into two stages each; a tile's arrival
 * completes its stage's "full" mbarrier, and each consumer warp arrives on
 * the stage's "empty" one when its products have read it; only the
 * ping-pong (below) holds two warpgroups in step. Per key tile j a
 * warpgroup issues, back to back,
 *   S_j = Q K_j^T            (A = Q, B = K from shared, K-major; N = BC)
 *   O  += P_{j-1} V_{j-1}    (A = P from registers, B = V read N-major)
 * and runs the online softmax of S_j while the second product is still on
 * the tensor cores (O takes the previous tile's alpha just before its
 * product); the loop runs nkw + 1 times, the last only finishing O.
 * Output: O / l staged in the warpgroup's Q tile, then 16-byte stores; lse
 * in natural log, as attn_fwd_tc writes it. Grid (nh, B, query blocks),
 * blockIdx.z = 0 the last (heaviest) block. */
constexpr int kProducerRegs = 32;
template <int HD, int NWG, int BC> constexpr size_t fwd_smem_bytes()
{
    return NWG * (size_t)tile_bytes<HD>() + 4 * (size_t)(HD / 64) * BC * 128 + 1024 + 9 * 8;
}
template <int NWG, int BC> __host__ __device__ constexpr bool fwd_pingpong() { return NWG == 2 && BC == 2 * kRows; }
template <typename T, int HD, int NWG, int BC, int MINB, bool PP = fwd_pingpong<NWG, BC>()>
__global__ void __launch_bounds__(128 * (NWG + 1), MINB)
    attn_fwd_wg(T *__restrict__ out, float *__restrict__ lse, const __grid_constant__ CUtensorMap tq,
                const __grid_constant__ CUtensorMap tkv, int Tn, int C, int nh, float sl2 /* scale*log2(e) */)
{
#if MS_WGMMA
    static_assert(!PP || fwd_pingpong<NWG, BC>(), "ping-pong needs two warpgroups with the same key tiles");
    constexpr int KS = HD / 16, NA = HD / 64;
    constexpr uint32_t TQ = tile_bytes<HD>(), AK = BC * 128, TK = NA * AK;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t raw = smem_addr(smem_raw), base = (raw + 1023u) & ~1023u;
    const uint32_t sQ = base, sK = sQ + NWG * TQ, sV = sK + 2 * TK;
    /* mbarriers: Q; K full, K empty, V full, V empty (two stages each) */
    const uint32_t bQ = sV + 2 * TK, bKf = bQ + 8, bKe = bKf + 16, bVf = bKe + 16, bVe = bVf + 16;

    const int h = blockIdx.x, b = blockIdx.y;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const int wgi = warp >> 2, wl = warp & 3;
    const int q0 = (gridDim.z - 1 - blockIdx.z) * kRows * NWG, qw0 = q0 + kRows * wgi;
    const int nkt = (min(q0 + kRows * NWG, Tn) + BC - 1) / BC;

    if (tid == 0) {
        mbar_init(bQ, 1);
#pragma unroll
        for (int s = 0; s < 2; s++) {
            mbar_init(bKf + 8 * s, 1);
            mbar_init(bVf + 8 * s, 1);
            mbar_init(bKe + 8 * s, 4 * NWG);
            mbar_init(bVe + 8 * s, 4 * NWG);
        }
        fence_mbar_init();
    }
    __syncthreads(); /* the only block-wide barrier */

    if (wgi == NWG) { /* the producer warpgroup: its first thread issues every load */
        setmaxnreg_dec<kProducerRegs>(); /* its registers go to the consumers */
        if (tid == 128 * NWG) {
            const int r0 = b * Tn; /* the sequence's first row of qkv */
            mbar_expect_tx(bQ, NWG * TQ);
#pragma unroll
            for (int w = 0; w < NWG; w++)
#pragma unroll
                for (int a = 0; a < NA; a++)
                    tma_load_2d(sQ + w * TQ + a * kAtom, &tq, h * HD + 64 * a, r0 + q0 + kRows * w, bQ);
            for (int j = 0; j < nkt; j++) {
                const int s = j & 1;
                const uint32_t freed = ((j >> 1) & 1) ^ 1; /* the phase in which tile j-2 left the stage */
                if (j >= 2) mbar_wait(bKe + 8 * s, freed);
                mbar_expect_tx(bKf + 8 * s, TK);
#pragma unroll
                for (int a = 0; a < NA; a++)
                    tma_load_2d(sK + s * TK + a * AK, &tkv, C + h * HD + 64 * a, r0 + j * BC, bKf + 8 * s);
                if (j >= 2) mbar_wait(bVe + 8 * s, freed);
                mbar_expect_tx(bVf + 8 * s, TK);
#pragma unroll
                for (int a = 0; a < NA; a++)
                    tma_load_2d(sV + s * TK + a * AK, &tkv, 2 * C + h * HD + 64 * a, r0 + j * BC, bVf + 8 * s);
            }
        }
        return;
    }

    setmaxnreg_inc<consumer_regs<NWG, MINB>(kProducerRegs)>();
    const int row_lo = qw0 + 16 * wl; /* the warp's first row */
    const int nkw = min(nkt, (qw0 + kRows - 1) / BC + 1); /* this warpgroup's tiles: a key <= its last query */
    const uint32_t myQ = sQ + wgi * TQ;
    auto k_full = [&](int j) { mbar_wait(bKf + 8 * (j & 1), (j >> 1) & 1); };
    auto v_full = [&](int j) { mbar_wait(bVf + 8 * (j & 1), (j >> 1) & 1); };
    auto k_free = [&](int j) { if (lane == 0) mbar_arrive(bKe + 8 * (j & 1)); };
    auto v_free = [&](int j) { if (lane == 0) mbar_arrive(bVe + 8 * (j & 1)); };

    float o[HD / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
#pragma unroll
    for (int i = 0; i < HD / 2; i++) o[i] = 0.f;
    uint32_t pa[BC / 16][4]; /* P_{j-1}, the A operand of O's product */
    float s[BC / 2];

    auto issue_s = [&](int j) {
        const uint32_t ks = sK + (j & 1) * TK;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) Wg<T, BC>::template ss<0, 0>(s, desc_k(myQ, kk), desc_k(ks, kk, AK), kk);
        wg_commit();
    };
    auto issue_pv = [&](int j) { /* O += P_{j-1} V_{j-1} */
        const uint32_t vs = sV + ((j - 1) & 1) * TK;
#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++) Wg<T, HD>::template rs<1>(o, pa[kk], desc_mn(vs, kk, AK), 1);
        wg_commit();
    };
    /* S_j (landed) -> exp in place; m, l updated, alpha = the factor O
     * takes before P_j V_j is added */
    auto softmax = [&](int j) {
        const int k0 = j * BC;
        if (k0 + BC - 1 > row_lo) /* the diagonal: keys after the query */
#pragma unroll
            for (int jj = 0; jj < BC / 8; jj++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (k0 + 8 * jj + 2 * tig + (e & 1) > row_lo + g + 8 * (e >> 1)) s[4 * jj + e] = -INFINITY;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = -INFINITY;
#pragma unroll
            for (int jj = 0; jj < BC / 8; jj++) mx = fmaxf(mx, fmaxf(s[4 * jj + 2 * r], s[4 * jj + 2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m[r], mx * sl2);
            const float mb = m_new == -INFINITY ? 0.f : m_new; /* fully masked row: no NaN */
            alpha[r] = fast_exp2(m[r] - mb);
            m[r] = m_new;
            float sum = 0.f;
#pragma unroll
            for (int jj = 0; jj < BC / 8; jj++) {
                s[4 * jj + 2 * r] = fast_exp2(fmaf(s[4 * jj + 2 * r], sl2, -mb));
                s[4 * jj + 2 * r + 1] = fast_exp2(fmaf(s[4 * jj + 2 * r + 1], sl2, -mb));
                sum += s[4 * jj + 2 * r] + s[4 * jj + 2 * r + 1];
            }
            l[r] = l[r] * alpha[r] + sum;
        }
    };
    auto pack_p = [&] {
#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++)
#pragma unroll
            for (int r = 0; r < 4; r++) pa[kk][r] = pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    };
    auto rescale = [&] {
#pragma unroll
        for (int jj = 0; jj < HD / 8; jj++)
#pragma unroll
            for (int e = 0; e < 4; e++) o[4 * jj + e] *= alpha[e >> 1];
    };

    /* Ping-pong (PP): the two warpgroups take turns to issue their
     * products, so one's softmax runs while the other's products hold the
     * tensor cores, where both would otherwise reach their products and
     * their softmax together. Named barriers 3 + w: warpgroup w waits on its
     * own before issuing and arrives on the other's after; warpgroup 1
     * opens warpgroup 0's first turn. Both warpgroups see the same key tiles
     * (BC = 128 keys, 64 queries each), so their turns pair up to the end,
     * where warpgroup 0 takes the last arrival. */
    auto my_turn = [&] {
        if (PP) asm volatile("bar.sync %0, 256;" ::"r"(3 + wgi) : "memory");
    };
    auto your_turn = [&] {
        if (PP) asm volatile("bar.arrive %0, 256;" ::"r"(4 - wgi) : "memory");
    };
    if (PP && wgi == 1) asm volatile("bar.arrive 3, 256;" ::: "memory");
    mbar_wait(bQ, 0);
    /* three straight runs (a branch between the MMAs of one run makes ptxas
     * add waits): the first tile, the steady state, the last O */
    for (int j = 0; j <= nkw; ++j) {
        if (j >= 1 && j < nkw) {
            k_full(j);
            v_full(j - 1);
            my_turn();
            wg_fence();
            issue_s(j);
            rescale();
            wg_hold(o);
            wg_hold_a(pa);
            wg_fence();
            issue_pv(j);
            your_turn();
            wg_wait<1>();
            wg_hold(s);
            k_free(j);
            softmax(j);
            wg_wait<0>();
            wg_hold(o);
            v_free(j - 1);
            pack_p();
        } else if (j == 0) {
            k_full(0);
            my_turn();
            wg_fence();
            issue_s(0);
            your_turn();
            wg_wait<0>();
            wg_hold(s);
            k_free(0);
            softmax(0);
            pack_p(); /* O is still zero: the first alpha is not needed */
        } else {
            v_full(j - 1);
            my_turn();
            rescale();
            wg_hold(o);
            wg_hold_a(pa);
            wg_fence();
            issue_pv(j);
            your_turn();
            wg_wait<0>();
            wg_hold(o);
            v_free(j - 1);
        }
    }
    if (PP && wgi == 0) my_turn(); /* warpgroup 1's last arrival */
    /* tiles past this warpgroup's last query: released unread, in order
     * (an arrival before the stage's previous phase completes would count
     * toward that phase) */
    for (int j = nkw; j < nkt; ++j) {
        k_full(j);
        k_free(j);
        v_full(j);
        v_free(j);
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
    (void)out, (void)lse, (void)tq, (void)tkv, (void)Tn, (void)C, (void)nh, (void)sl2;
#endif
}

/* 1 where this module's machine code has the wgmma instructions (the
 * sm_90a build running on a 9.0 device), 0 where the runtime picked the
 * plain sm_90 code or the PTX. */
__global__ void probe(int *out) { *out = MS_WGMMA; }

} // namespace wg
