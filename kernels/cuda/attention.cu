/* attention.cu — causal multi-head self-attention on the GPU, forward and
 * backward (contract: kernels/ops.h; declarations: attention_cuda.h).
 *
 * What is kept for backward, and why: only the inputs q, k, v (inside qkv),
 * the output `out` and one fp32 log-sum-exp per query row (lse [B,nh,T]).
 * The T x T probability matrix is never stored: backward recomputes it
 * blockwise as P = exp(scale * Q K^T - lse), trading one extra Q K^T
 * product for O(T) instead of O(T^2) memory per head (FlashAttention).
 *
 * Paths:
 *  - bf16/f16 (tensor cores, mma.sync m16n8k16 via inline PTX, fp32
 *    accumulation), FlashAttention-2 structure:
 *    forward: one block of 4 warps per (query tile, head, batch); K/V
 *    tiles of 64 keys are staged in shared memory with cp.async double
 *    buffering; the online softmax runs in fp32 registers (exp2 domain, the
 *    scale folded into one FMA); key tiles past the diagonal are never
 *    visited and only diagonal tiles are masked. The heaviest (last) query
 *    tiles are dispatched first. hs <= 64: 64-query tiles, each warp owns
 *    16 rows with its Q fragments in registers. hs = 128: 128-query tiles,
 *    each warp owns 32 rows (two m-tiles), so every K and V fragment read
 *    from shared memory feeds two products (Q fragments are re-read from
 *    shared memory instead: no registers are left for them).
 *    backward: a prep kernel computes D = rowsum(dO * O) (fp32) and zeroes
 *    an fp32 dQ accumulator; the main kernel runs one block per key tile
 *    (warps x 16 keys: 8 warps, 128 keys at hs=128; 4 warps, 64 keys
 *    below), keeps dK, dV in registers and walks the query tiles (32 rows
 *    at hs=128, 64 below) from the diagonal down (Q, dO double-buffered),
 *    recomputing S^T = K Q^T, P^T = exp(S^T - lse), dP^T = V dO^T and dS^T
 *    = P^T (dP^T - D); dV += P^T dO, dK += dS^T Q; at hs=64 the warp's K and
 *    V fragments stay in registers across the query tiles. dS goes through
 *    shared memory so that dQ_tile = dS K is formed once per (key tile,
 *    query tile) and added to the accumulator with float4 atomics (in L2).
 *    Atomics rather than a separate dQ pass over query tiles: that pass
 *    would recompute S and dP (7 instead of 5 tile products, ~40% more
 *    tensor work). A last kernel writes scale * dQ into dqkv. Scratch = D +
 *    the dQ accumulator.
 *    Tile configurations are template parameters (FwdConf, BwdConf; the
 *    defaults FwdCfg, BwdCfg); bench/attn_tune.cu times and checks them.
 *    Measured on an H200 (bench/attn_tune.cu: cudaEvent, median of 15, one
 *    layer, bf16, whole backward including prep and dQ store):
 *      seed17 shape (B=15 T=2048 C=2048 nh=16, hs=128): fwd 0.843 ms (305
 *      TFLOP/s causal) + bwd 3.45 ms (187 TFLOP/s), against 1.195 + 3.83 ms
 *      (216 + 168 TFLOP/s) for these kernels before issue 15's tuning;
 *      GPT-2 small (B=16 T=1024 C=768 nh=12, hs=64): fwd 0.116 ms + bwd
 *      0.432 ms, against 0.140 + 0.463 ms before. PyTorch 2.11 eager SDPA
 *      (cuDNN flash kernels, same qkv layout), measured earlier on an H200:
 *      GPT-2 small 0.22 + 0.43 ms; seed17 12.9 + 38.1 ms a 24-layer step
 *      by CUPTI kernel records in training (0.54 + 1.59 ms a layer), where
 *      the pre-tuning kernels read 33.9 + 110.5 ms (1.41 + 4.60 ms a layer,
 *      above this harness's 1.195 + 3.83): at hs=128 cuDNN stays well ahead
 *      (roughly 1.6x forward and 2.2x backward going by these figures).
 *  - bf16/f16 on a 9.0 device (H100, H200), hs 64 and 128: the same two
 *    passes on Hopper's warpgroup MMA (wgmma, sm_90a; attention_wgmma.cuh),
 *    operands in 128-byte-swizzled shared tiles that a producer
 *    warpgroup fills by TMA (tensor maps of qkv, dO and the dQ accumulator,
 *    made per call through the driver's cuTensorMapEncodeTiled, looked up
 *    at run time). Forward: warpgroups of 64 queries (two a block at
 *    hs=128, sharing 128-key K/V tiles; one at hs=64 with 64-key tiles, three
 *    blocks an SM), a tile's softmax overlapping the previous tile's P V.
 *    Backward: warpgroups of 64 keys (two a block at hs=128, one at hs=64),
 *    64-query tiles; dQ of a tile sums the block's keys (each warpgroup
 *    takes its share of the columns) and is added into the accumulator by
 *    TMA reductions from shared memory. A probe kernel says whether the
 *    sm_90a code is the one loaded (this file is built as sm_90a code plus
 *    compute_90 PTX); else, with MS_ATTN_WGMMA=0, or where no tensor map
 *    can be made, the mma.sync kernels above run. Measured (same harness):
 *    seed17 fwd 0.607 ms + bwd 1.73 ms (424 + 372 TFLOP/s), GPT-2 small
 *    0.100 + 0.289 ms.
 *  - fp32 (CUDA cores, true fp32 math, no TF32; attention_f32.cuh):
 *    register-tiled like a SIMT GEMM, 64 x 64 tiles over 128 threads (8 x 4
 *    scores a thread, float4 shared loads; the hs=128 backward 4 x 4 over
 *    256, see FwdF32Cfg/BwdF32Cfg). Forward: online softmax, P
 *    through shared memory into P V. Backward: one kernel a key tile, five
 *    products a tile pair, dQ added into dqkv by float4 atomics (the prep
 *    kernel computes D and zeroes dQ's slots), so like the 16-bit path it
 *    is not bit-deterministic. Scratch = D. Meets 1e-5 relative against
 *    the CPU twin. Measured (H200, `attn_tune f32`, GPT-2 small shape, one
 *    layer): fwd 0.80 ms + bwd 2.10 ms (32 + 31 TFLOP/s causal), where the
 *    warp-level kernels before them took about 7.7 ms a layer (92.7 ms a
 *    12-layer step by CUPTI records) and PyTorch's memory-efficient SDPA
 *    2.9 ms (35.3 ms a step).
 *  - MS_ATTN_SIMPLE=1 (read at every call): one thread per row, fp32 math,
 *    straight loops over global memory, any dtype; backward needs no
 *    scratch. Slow but plainly correct: the fallback if a fast kernel is
 *    ever suspect, tested against the CPU twin like the fast paths. Also
 *    used when a buffer is not 16-byte aligned (the fast kernels move
 *    16-byte chunks).
 * Head sizes: 32, 64, 128 (templates); anything else sets ctx->status. */
#include <cuda.h> /* CUtensorMap (the driver entry point is looked up at run time) */
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/wgmma_ops.cuh"

namespace {

constexpr int kMaxHS = 128;           /* largest head size of every path */
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/* ---------------------------------------------------------------- helpers */

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

/* Two floats rounded to T and packed into one 32-bit register, lo first. */
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi)
{
    __half2 v = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

/* D += A B for one m16n8k16 tile: A row-major 16x16 (4 regs), B "col" 16x8
 * (2 regs), D fp32 16x8 (4 regs). Fragment ownership (PTX ISA): with
 * g = lane/4, c = 2*(lane%4): a0 = A[g][c..c+1], a1 = A[g+8][c..], a2 =
 * A[g][c+8..], a3 = A[g+8][c+8..]; b0 = B[c..c+1][g], b1 = B[c+8..][g];
 * d0,d1 = D[g][c..c+1], d2,d3 = D[g+8][c..c+1]. */
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* Four 8x8 b16 matrices; lane l gives the address of row l%8 of matrix l/8;
 * register i receives matrix i, lane l holding its row l/4, columns
 * 2(l%4), 2(l%4)+1 (transposed with .trans: column l/4, rows 2(l%4)..). */
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p))
                 : "memory");
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p))
                 : "memory");
}

/* The same with a 32-bit shared-memory byte address (computed once per lane,
 * compile-time offsets added): fewer registers than generic pointers. */
__device__ __forceinline__ void ldsm_x4a(uint32_t (&r)[4], uint32_t a)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
}
__device__ __forceinline__ void ldsm_x4a_t(uint32_t (&r)[4], uint32_t a)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
}

/* 16-byte global -> shared copy (dst: shared byte address); when !valid the
 * 16 bytes are zero-filled and nothing is read (src must still be a valid
 * address). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* 2^x by the SFU (ex2.approx.ftz: ~2 ulp; subnormal results flush to 0,
 * which only ever drops probabilities below 1e-38). exp2f proper adds
 * range-fixing instructions the 16-bit paths have no use for. */
__device__ __forceinline__ float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Row stride (elements) of a shared tile with HD columns: +8 elements (16
 * bytes) of padding make the 8 rows an ldmatrix reads fall in 8 distinct
 * 16-byte bank groups, and keep every row 16-byte aligned for cp.async. */
template <int HD> struct Pad { static constexpr int S = HD + 8; };

/* Stage R rows of HD elements (global rows row0.., stride rs elements) into
 * shared memory with row stride HD+8, NT threads cooperating; rows >= Tn
 * are zero-filled. */
template <typename T, int R, int HD, int NT>
__device__ __forceinline__ void load_rows(T *s, const T *g, size_t rs, int row0, int Tn, int tid)
{
    constexpr int CPR = HD / 8; /* 16-byte chunks per row */
    static_assert((R * CPR) % NT == 0 && NT % CPR == 0, "tile must split evenly over the block");
    /* a thread's chunks share a column and step NT/CPR rows: one pointer
     * walked by a fixed stride (few registers) */
    constexpr int RS = NT / CPR;
    const int r0 = tid / CPR, cc = tid % CPR;
    const T *p = g + (size_t)(row0 + r0) * rs + cc * 8;
    const size_t step = (size_t)RS * rs;
    uint32_t d = smem_addr(s + r0 * Pad<HD>::S + cc * 8);
#pragma unroll
    for (int i = 0; i < R / RS; i++) {
        const bool ok = row0 + r0 + i * RS < Tn;
        cp_async16(d, ok ? p : g, ok);
        p += step;
        d += 2u * RS * Pad<HD>::S;
    }
}

/* ------------------------------------------- tensor-core forward (16-bit) */

/* Forward configuration (compile-time): NW warps a block, each owning MW
 * m-tiles of 16 query rows (contiguous), so a block covers 16*NW*MW queries;
 * BC keys per K/V tile. With MW = 1 the warp's Q fragments stay in
 * registers; with MW = 2 each K/V fragment loaded from shared memory feeds
 * two m-tiles (half the ldmatrix traffic per product), and Q fragments are
 * re-read from shared memory instead (no room for them in registers). The
 * defaults per head size are FwdCfg below, the measured winners (H200,
 * seed17, hs=128: 4/2/64 0.843 ms, 8/2/64 0.881, 4/2/32 0.903, 4/1/64
 * 1.110, and 8/1/64 1.279 in a first run; GPT-2 small, hs=64: 4/1/64
 * 0.116 ms = 4/2/128 0.116, 4/2/64 0.124, 8/1/64 0.146). */
template <int NW_, int MW_, int BC_, int QKU_ = 0> struct FwdConf {
    static constexpr int NW = NW_, MW = MW_, BC = BC_, Br = 16 * NW_ * MW_;
    /* unroll of the S = Q K^T loop over head-dim steps: full with Q in
     * registers (their indices must be constants), else QKU_ (0: 4), which
     * keeps MW = 2 at hs=128 within 255 registers without spills */
    static constexpr int QKU = MW_ == 1 ? 64 : (QKU_ ? QKU_ : 4);
};
#ifndef MS_ATTN_FWD_CONF_128
#define MS_ATTN_FWD_CONF_128 FwdConf<4, 2, 64>
#endif
#ifndef MS_ATTN_FWD_CONF_64
#define MS_ATTN_FWD_CONF_64 FwdConf<4, 1, 64>
#endif
/* the defaults; a build may override them (-include a header defining
 * MS_ATTN_{FWD,BWD}_CONF_{64,128}), as the tuning's test builds did */
template <int HD> struct FwdCfg { using type = FwdConf<4, 1, 64>; };
template <> struct FwdCfg<64> { using type = MS_ATTN_FWD_CONF_64; };
template <> struct FwdCfg<128> { using type = MS_ATTN_FWD_CONF_128; };

template <int HD, class CF> constexpr size_t fwd_tc_smem()
{
    return (size_t)(CF::Br + 4 * CF::BC) * Pad<HD>::S * 2; /* Q + 2x(K, V) */
}

/* Grid: (nh, B, query tiles); blockIdx.z = 0 is the last (heaviest) query
 * tile, so the hardware's in-order dispatch starts the longest blocks first. */
template <typename T, int HD, class CF>
__global__ void __launch_bounds__(32 * CF::NW) attn_fwd_tc(T *__restrict__ out, float *__restrict__ lse,
                                                          const T *__restrict__ qkv, int Tn, int C, int nh,
                                                          float sl2 /* scale*log2(e) */)
{
    constexpr int NW = CF::NW, MW = CF::MW, NT = 32 * NW, WR = 16 * MW, Br = CF::Br, Bc = CF::BC;
    constexpr int S = Pad<HD>::S, NTS = Bc / 8, NTO = HD / 8, KS = HD / 16;
    constexpr bool QREG = MW == 1;
    static_assert(Bc % 16 == 0 && MW >= 1, "tiling");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *sQ = reinterpret_cast<T *>(smem_raw);
    T *sK = sQ + Br * S; /* [2][Bc][S] */
    T *sV = sK + 2 * Bc * S;

    const int qt = gridDim.z - 1 - blockIdx.z, h = blockIdx.x, b = blockIdx.y;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const size_t rs = 3 * (size_t)C;
    const T *gq = qkv + (size_t)b * Tn * rs + (size_t)h * HD;
    const T *gk = gq + C, *gv = gq + 2 * (size_t)C;
    const int q0 = qt * Br, row_lo = q0 + warp * WR; /* the warp's first row */
    const int nkt = (min(q0 + Br, Tn) + Bc - 1) / Bc; /* key tiles up to the diagonal */

    load_rows<T, Br, HD, NT>(sQ, gq, rs, q0, Tn, tid);
    cp_async_commit(); /* group: Q */
    load_rows<T, Bc, HD, NT>(sK, gk, rs, 0, Tn, tid);
    load_rows<T, Bc, HD, NT>(sV, gv, rs, 0, Tn, tid);
    cp_async_commit(); /* group: K/V tile 0 */

    float o[MW][NTO][4];
#pragma unroll
    for (int mi = 0; mi < MW; mi++)
#pragma unroll
        for (int i = 0; i < NTO; i++) o[mi][i][0] = o[mi][i][1] = o[mi][i][2] = o[mi][i][3] = 0.f;
    /* running max (exp2 domain, i.e. already times sl2) and per-lane partial sums */
    float m[MW][2], l[MW][2];
#pragma unroll
    for (int mi = 0; mi < MW; mi++) m[mi][0] = m[mi][1] = -INFINITY, l[mi][0] = l[mi][1] = 0.f;
    /* MW = 1: this warp's 16 Q rows as A fragments, kept in registers throughout */
    uint32_t qf[QREG ? KS : 1][4];
    cp_async_wait<1>();
    __syncthreads();
    /* per-lane ldmatrix byte addresses: Q (A, row-major), K (B, rows as-is),
     * V (B, transposed); tile offsets are compile-time constants */
    const uint32_t aQ = smem_addr(sQ) + 2u * ((warp * WR + (lane & 15)) * S + (lane >> 4) * 8);
    const uint32_t aK = smem_addr(sK) + 2u * (((lane & 7) + ((lane >> 4) << 3)) * S + (((lane >> 3) & 1) << 3));
    const uint32_t aV = smem_addr(sV) + 2u * (((lane & 7) + (((lane >> 3) & 1) << 3)) * S + ((lane >> 4) << 3));
    if constexpr (QREG) {
#pragma unroll
        for (int kk = 0; kk < KS; kk++) ldsm_x4a(qf[kk], aQ + 2u * (kk * 16));
    }

    for (int it = 0; it < nkt; ++it) {
        const int buf = it & 1;
        if (it + 1 < nkt) { /* prefetch the next K/V tile into the other buffer */
            load_rows<T, Bc, HD, NT>(sK + (buf ^ 1) * Bc * S, gk, rs, (it + 1) * Bc, Tn, tid);
            load_rows<T, Bc, HD, NT>(sV + (buf ^ 1) * Bc * S, gv, rs, (it + 1) * Bc, Tn, tid);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const int k0 = it * Bc;
        /* a warp whose rows all precede this tile has nothing to add */
        if (k0 <= row_lo + WR - 1) {
            const uint32_t ks = aK + 2u * (buf * Bc * S), vs = aV + 2u * (buf * Bc * S);

            /* S = Q K^T: B[k=d][n=key] = K[key][d], K rows read as-is; each K
             * fragment serves the warp's MW m-tiles */
            float s[MW][NTS][4];
#pragma unroll
            for (int mi = 0; mi < MW; mi++)
#pragma unroll
                for (int i = 0; i < NTS; i++) s[mi][i][0] = s[mi][i][1] = s[mi][i][2] = s[mi][i][3] = 0.f;
#pragma unroll CF::QKU
            for (int kk = 0; kk < KS; kk++) {
                uint32_t qa[MW][4];
                if constexpr (QREG) {
#pragma unroll
                    for (int e = 0; e < 4; e++) qa[0][e] = qf[kk][e];
                } else {
#pragma unroll
                    for (int mi = 0; mi < MW; mi++)
                        ldsm_x4a(qa[mi], aQ + 2u * (mi * 16 * S + kk * 16));
                }
#pragma unroll
                for (int nn = 0; nn < Bc / 16; nn++) {
                    uint32_t kb[4];
                    ldsm_x4a(kb, ks + 2u * (nn * 16 * S + kk * 16));
#pragma unroll
                    for (int mi = 0; mi < MW; mi++) {
                        mma16816<T>(s[mi][2 * nn], qa[mi], kb[0], kb[1]);
                        mma16816<T>(s[mi][2 * nn + 1], qa[mi], kb[2], kb[3]);
                    }
                }
            }

#pragma unroll
            for (int mi = 0; mi < MW; mi++) {
                const int rlo = row_lo + mi * 16;
                /* mask keys after the query (diagonal tiles), on the raw scores */
                if (k0 + Bc - 1 > rlo) {
#pragma unroll
                    for (int nt = 0; nt < NTS; nt++)
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            if (k0 + nt * 8 + 2 * tig + (e & 1) > rlo + g + 8 * (e >> 1)) s[mi][nt][e] = -INFINITY;
                }
                /* online softmax: rows g (r=0) and g+8 (r=1); the 4 lanes of a
                 * row hold its Bc scores; p = 2^(s*sl2 - m) with the scale
                 * folded into one FMA. l stays a per-lane partial sum. */
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    float mx = -INFINITY;
#pragma unroll
                    for (int nt = 0; nt < NTS; nt++) mx = fmaxf(mx, fmaxf(s[mi][nt][2 * r], s[mi][nt][2 * r + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    const float m_new = fmaxf(m[mi][r], mx * sl2);
                    const float base = m_new == -INFINITY ? 0.f : m_new; /* fully masked row: no NaN */
                    const float alpha = fast_exp2(m[mi][r] - base);
                    m[mi][r] = m_new;
                    float sum = 0.f;
#pragma unroll
                    for (int nt = 0; nt < NTS; nt++) {
                        s[mi][nt][2 * r] = fast_exp2(fmaf(s[mi][nt][2 * r], sl2, -base));
                        s[mi][nt][2 * r + 1] = fast_exp2(fmaf(s[mi][nt][2 * r + 1], sl2, -base));
                        sum += s[mi][nt][2 * r] + s[mi][nt][2 * r + 1];
                    }
                    l[mi][r] = l[mi][r] * alpha + sum;
#pragma unroll
                    for (int nt = 0; nt < NTO; nt++) {
                        o[mi][nt][2 * r] *= alpha;
                        o[mi][nt][2 * r + 1] *= alpha;
                    }
                }
            }

            /* O += P V: P from registers (accumulator layout = A layout), V
             * through ldmatrix.trans since B[k=key][n=d] must be key-contiguous */
#pragma unroll
            for (int kk = 0; kk < Bc / 16; kk++) {
                uint32_t pa[MW][4];
#pragma unroll
                for (int mi = 0; mi < MW; mi++) {
                    pa[mi][0] = pack2<T>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
                    pa[mi][1] = pack2<T>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
                    pa[mi][2] = pack2<T>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
                    pa[mi][3] = pack2<T>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
                }
#pragma unroll
                for (int dn = 0; dn < HD / 16; dn++) {
                    uint32_t vb[4];
                    ldsm_x4a_t(vb, vs + 2u * (kk * 16 * S + dn * 16));
#pragma unroll
                    for (int mi = 0; mi < MW; mi++) {
                        mma16816<T>(o[mi][2 * dn], pa[mi], vb[0], vb[1]);
                        mma16816<T>(o[mi][2 * dn + 1], pa[mi], vb[2], vb[3]);
                    }
                }
            }
        }
        __syncthreads(); /* every warp is done with buffer `buf` before it is refilled */
    }

    /* stage this warp's output rows in its own (now unused) rows of sQ, then
     * write them with 16-byte stores */
    T *so = sQ + warp * WR * S;
#pragma unroll
    for (int mi = 0; mi < MW; mi++) {
        float inv[2], lse_v[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float lt = l[mi][r];
            lt += __shfl_xor_sync(0xffffffffu, lt, 1);
            lt += __shfl_xor_sync(0xffffffffu, lt, 2);
            inv[r] = 1.f / lt;
            lse_v[r] = (m[mi][r] + log2f(lt)) * kLn2; /* back to natural log */
        }
#pragma unroll
        for (int nt = 0; nt < NTO; nt++)
#pragma unroll
            for (int r = 0; r < 2; r++)
                *reinterpret_cast<uint32_t *>(so + (mi * 16 + g + 8 * r) * S + nt * 8 + 2 * tig) =
                    pack2<T>(o[mi][nt][2 * r] * inv[r], o[mi][nt][2 * r + 1] * inv[r]);
        if (tig == 0)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = row_lo + mi * 16 + g + 8 * r;
                if (row < Tn) lse[((size_t)b * nh + h) * Tn + row] = lse_v[r];
            }
    }
    __syncwarp();
#pragma unroll
    for (int c = lane; c < WR * (HD / 8); c += 32) {
        const int r = c / (HD / 8), cc = c % (HD / 8), row = row_lo + r;
        if (row < Tn)
            *reinterpret_cast<uint4 *>(out + ((size_t)b * Tn + row) * C + (size_t)h * HD + cc * 8) =
                *reinterpret_cast<const uint4 *>(so + r * S + cc * 8);
    }
}

/* ------------------------------------------ tensor-core backward (16-bit) */

/* Backward configuration (compile-time): NW warps a block, each owning 16
 * keys (a block covers 16*NW keys), BR query rows per tile (at hs=128, 32
 * keeps dK+dV (128 fp32 registers) plus the score tiles under the register
 * limit); KVREG keeps the warp's K and V A-fragments in registers across
 * the query tiles instead of re-reading them from shared memory each tile
 * (64 registers at hs=128: only with small BR). Defaults per head size:
 * BwdCfg below, the measured winners (H200, seed17, hs=128: 8/32 3.45 ms,
 * 4/32 3.74, 4/16+KVREG 3.91, and 2/32 4.88 in a first run; GPT-2 small,
 * hs=64: 4/64+KVREG 0.432 ms, 8/64+KVREG 0.438, 4/64 0.448). A variant
 * where warp pairs split the dV and dK work (P^T through shared memory)
 * measured slower (3.85 ms) and was dropped (commit 43c18c6). */
template <int NW_, int BR_, bool KVREG_ = false> struct BwdConf {
    static constexpr int NW = NW_, BR = BR_, Bc = 16 * NW_;
    static constexpr bool KVREG = KVREG_;
};
#ifndef MS_ATTN_BWD_CONF_128
#define MS_ATTN_BWD_CONF_128 BwdConf<8, 32>
#endif
#ifndef MS_ATTN_BWD_CONF_64
#define MS_ATTN_BWD_CONF_64 BwdConf<4, 64, true>
#endif
template <int HD> struct BwdCfg { using type = BwdConf<4, 64>; };
template <> struct BwdCfg<64> { using type = MS_ATTN_BWD_CONF_64; };
template <> struct BwdCfg<128> { using type = MS_ATTN_BWD_CONF_128; };

template <int HD, class CB> constexpr size_t bwd_tc_smem()
{
    constexpr int Br = CB::BR, Bc = CB::Bc, S = Pad<HD>::S;
    return (size_t)(2 * Bc * S + 4 * Br * S + Bc * (Br + 8)) * 2 + 4 * (size_t)Br * sizeof(float);
}

/* dQ partial (16 rows x 8 columns of one n-tile, accumulator layout) added
 * to the fp32 accumulator with one float4 atomic per lane: lanes tig, tig^1
 * swap halves so the even lane owns row g, columns 2tig..2tig+3 and the odd
 * lane row g+8, columns 2(tig-1)..+3. row0 is the global row of the tile's
 * first row; dst points at (row 0 of the tile, the n-tile's first column). */
__device__ __forceinline__ void add_dq_tile(float *dst, size_t ld, const float (&d)[4], int row0, int Tn, int g, int tig)
{
    const bool odd = tig & 1;
    const float x = __shfl_xor_sync(0xffffffffu, odd ? d[0] : d[2], 1);
    const float y = __shfl_xor_sync(0xffffffffu, odd ? d[1] : d[3], 1);
    const int r = g + (odd ? 8 : 0), c = 2 * (tig & ~1);
    if (row0 + r < Tn)
        atomicAdd(reinterpret_cast<float4 *>(dst + (size_t)r * ld + c),
                  odd ? make_float4(x, y, d[2], d[3]) : make_float4(d[0], d[1], x, y));
}

/* Grid: (key tiles, nh, B): the key tiles of one head run side by side, so
 * the blocks in flight share that head's Q, dO and dQ accumulator in L2
 * (dispatching all heads' heaviest tiles first instead measured slower:
 * the dQ atomics then spill out of L2). Key tile 0 (most work) first. */
template <typename T, int HD, class CB>
__global__ void __launch_bounds__(32 * CB::NW)
    attn_bwd_tc(T *__restrict__ dqkv, float *__restrict__ dqacc, const T *__restrict__ dout,
                const T *__restrict__ qkv, const float *__restrict__ lse, const float *__restrict__ Dg,
                int Tn, int C, int nh, float sl2, float scale)
{
    constexpr int NW = CB::NW, NT = 32 * NW;
    constexpr int Br = CB::BR, Bc = CB::Bc, S = Pad<HD>::S, SP = Br + 8;
    constexpr bool KVREG = CB::KVREG;
    constexpr int KS = HD / 16, NQ = Br / 8, ND = HD / 8;
    constexpr int RG = Br / 16, CG = NW / RG, DW = HD / CG; /* dQ tile split over warps */
    static_assert(RG * CG == NW && DW % 16 == 0 && Bc % Br == 0 && NT >= Br, "tiling");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *sK = reinterpret_cast<T *>(smem_raw);
    T *sV = sK + Bc * S;
    T *sQ = sV + Bc * S;       /* [2][Br][S] */
    T *sdO = sQ + 2 * Br * S;  /* [2][Br][S] */
    T *sdS = sdO + 2 * Br * S; /* [Bc][SP]: dS^T, rows = keys */
    float *sL = reinterpret_cast<float *>(sdS + Bc * SP); /* [2][Br]: lse*log2(e), +inf past T */
    float *sD = sL + 2 * Br;                              /* [2][Br] */

    const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const size_t rs = 3 * (size_t)C;
    const T *gq = qkv + (size_t)b * Tn * rs + (size_t)h * HD;
    const T *gk = gq + C, *gv = gq + 2 * (size_t)C;
    const T *gdo = dout + (size_t)b * Tn * C + (size_t)h * HD;
    const float *glse = lse + ((size_t)b * nh + h) * Tn, *gD = Dg + ((size_t)b * nh + h) * Tn;
    const int k0 = kt * Bc, key_lo = k0 + warp * 16;
    const int qt0 = k0 / Br, nqt = (Tn + Br - 1) / Br;

    load_rows<T, Bc, HD, NT>(sK, gk, rs, k0, Tn, tid);
    load_rows<T, Bc, HD, NT>(sV, gv, rs, k0, Tn, tid);
    load_rows<T, Br, HD, NT>(sQ, gq, rs, qt0 * Br, Tn, tid);
    load_rows<T, Br, HD, NT>(sdO, gdo, C, qt0 * Br, Tn, tid);
    cp_async_commit();
    if (tid < Br) {
        const int q = qt0 * Br + tid;
        sL[tid] = q < Tn ? glse[q] * kLog2e : INFINITY; /* rows past T: P = 0 */
        sD[tid] = q < Tn ? gD[q] : 0.f;
    }

    /* kv[0] = dK, kv[1] = dV of the warp's 16 keys (one array: the layout
     * the H200 tests and timings ran with) */
    float kv[2][ND][4];
#pragma unroll
    for (int i = 0; i < ND; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) kv[0][i][e] = kv[1][i][e] = 0.f;
    /* KVREG: the warp's 16 keys of K and V as A fragments, loaded once */
    uint32_t kf[KVREG ? KS : 1][4], vf[KVREG ? KS : 1][4];

    for (int qt = qt0; qt < nqt; ++qt) {
        const int buf = (qt - qt0) & 1, q0 = qt * Br;
        cp_async_wait<0>();
        __syncthreads(); /* tile qt landed; everyone is past iteration qt-1 */
        if constexpr (KVREG) {
            if (qt == qt0) { /* K, V landed with the first query tile */
#pragma unroll
                for (int kk = 0; kk < KS; kk++) {
                    ldsm_x4(kf[kk], sK + (warp * 16 + (lane & 15)) * S + kk * 16 + (lane >> 4) * 8);
                    ldsm_x4(vf[kk], sV + (warp * 16 + (lane & 15)) * S + kk * 16 + (lane >> 4) * 8);
                }
            }
        }
        const bool more = qt + 1 < nqt;
        float next_l = 0.f, next_d = 0.f;
        if (more) { /* prefetch the next query tile into the other buffer */
            load_rows<T, Br, HD, NT>(sQ + (buf ^ 1) * Br * S, gq, rs, q0 + Br, Tn, tid);
            load_rows<T, Br, HD, NT>(sdO + (buf ^ 1) * Br * S, gdo, C, q0 + Br, Tn, tid);
            cp_async_commit();
            if (tid < Br) {
                const int q = q0 + Br + tid;
                next_l = q < Tn ? glse[q] * kLog2e : INFINITY;
                next_d = q < Tn ? gD[q] : 0.f;
            }
        }
        const T *qs = sQ + buf * Br * S, *dos = sdO + buf * Br * S;
        const float *ls = sL + buf * Br, *ds_ = sD + buf * Br;
        T *dsw = sdS + warp * 16 * SP;

        if (key_lo > q0 + Br - 1) {
            /* every key of this warp follows every query of the tile: P = 0,
             * dS = 0; only the zeros dQ will read are needed */
#pragma unroll
            for (int nt = 0; nt < NQ; nt++)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    *reinterpret_cast<uint32_t *>(dsw + (g + 8 * r) * SP + nt * 8 + 2 * tig) = 0u;
        } else {
            /* S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys x Br queries */
            float st[NQ][4], dpt[NQ][4];
#pragma unroll
            for (int i = 0; i < NQ; i++)
#pragma unroll
                for (int e = 0; e < 4; e++) st[i][e] = dpt[i][e] = 0.f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t ka[4], va[4];
                if constexpr (KVREG) {
#pragma unroll
                    for (int e = 0; e < 4; e++) ka[e] = kf[kk][e], va[e] = vf[kk][e];
                } else {
                    ldsm_x4(ka, sK + (warp * 16 + (lane & 15)) * S + kk * 16 + (lane >> 4) * 8);
                    ldsm_x4(va, sV + (warp * 16 + (lane & 15)) * S + kk * 16 + (lane >> 4) * 8);
                }
#pragma unroll
                for (int nn = 0; nn < Br / 16; nn++) {
                    const int off = (nn * 16 + (lane & 7) + ((lane >> 4) << 3)) * S + kk * 16 + (((lane >> 3) & 1) << 3);
                    uint32_t qb[4], ob[4];
                    ldsm_x4(qb, qs + off);
                    ldsm_x4(ob, dos + off);
                    mma16816<T>(st[2 * nn], ka, qb[0], qb[1]);
                    mma16816<T>(st[2 * nn + 1], ka, qb[2], qb[3]);
                    mma16816<T>(dpt[2 * nn], va, ob[0], ob[1]);
                    mma16816<T>(dpt[2 * nn + 1], va, ob[2], ob[3]);
                }
            }

            /* P^T = exp(s*scale - lse) (0 where key > query), dS^T = P^T (dP^T - D) */
            const bool masked = key_lo + 15 > q0;
#pragma unroll
            for (int nt = 0; nt < NQ; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qc = nt * 8 + 2 * tig + (e & 1);
                    float p = fast_exp2(st[nt][e] * sl2 - ls[qc]);
                    if (masked && key_lo + g + 8 * (e >> 1) > q0 + qc) p = 0.f;
                    st[nt][e] = p;
                    dpt[nt][e] = p * (dpt[nt][e] - ds_[qc]);
                }

            /* dV += P^T dO, dK += dS^T Q: B[k=query][n=d] via ldmatrix.trans */
#pragma unroll
            for (int kk = 0; kk < Br / 16; kk++) {
                const uint32_t pa[4] = {pack2<T>(st[2 * kk][0], st[2 * kk][1]), pack2<T>(st[2 * kk][2], st[2 * kk][3]),
                                        pack2<T>(st[2 * kk + 1][0], st[2 * kk + 1][1]),
                                        pack2<T>(st[2 * kk + 1][2], st[2 * kk + 1][3])};
                const uint32_t sa[4] = {pack2<T>(dpt[2 * kk][0], dpt[2 * kk][1]), pack2<T>(dpt[2 * kk][2], dpt[2 * kk][3]),
                                        pack2<T>(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]),
                                        pack2<T>(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
#pragma unroll
                for (int dn = 0; dn < HD / 16; dn++) {
                    const int off = (kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)) * S + dn * 16 + ((lane >> 4) << 3);
                    uint32_t ob[4], qb[4];
                    ldsm_x4_t(ob, dos + off);
                    ldsm_x4_t(qb, qs + off);
                    mma16816<T>(kv[1][2 * dn], pa, ob[0], ob[1]);
                    mma16816<T>(kv[1][2 * dn + 1], pa, ob[2], ob[3]);
                    mma16816<T>(kv[0][2 * dn], sa, qb[0], qb[1]);
                    mma16816<T>(kv[0][2 * dn + 1], sa, qb[2], qb[3]);
                }
            }

            /* dS^T to shared memory: dQ needs it split by queries, not keys */
#pragma unroll
            for (int nt = 0; nt < NQ; nt++)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    *reinterpret_cast<uint32_t *>(dsw + (g + 8 * r) * SP + nt * 8 + 2 * tig) =
                        pack2<T>(dpt[nt][2 * r], dpt[nt][2 * r + 1]);
        }
        __syncthreads();

        /* dQ_tile [Br x HD] = dS [Br x Bc] K [Bc x HD]; warp (wr, wc) owns
         * rows wr*16.. and columns wc*DW..; A = dS read transposed from dS^T,
         * B[k=key][n=d] = K via ldmatrix.trans. Keys past the diagonal carry
         * dS = 0, so only the key steps up to the tile's last query count. */
        const int wr = warp % RG, wc = warp / RG;
        const int ksteps = min(Bc, q0 + Br - k0) / 16;
        float dq[DW / 8][4];
#pragma unroll
        for (int i = 0; i < DW / 8; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < Bc / 16; kk++) {
            if (kk < ksteps) {
                uint32_t a[4];
                ldsm_x4_t(a, sdS + (kk * 16 + (lane & 7) + ((lane >> 4) << 3)) * SP + wr * 16 + (((lane >> 3) & 1) << 3));
#pragma unroll
                for (int dn = 0; dn < DW / 16; dn++) {
                    uint32_t kb[4];
                    ldsm_x4_t(kb, sK + (kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)) * S + wc * DW + dn * 16 +
                                      ((lane >> 4) << 3));
                    mma16816<T>(dq[2 * dn], a, kb[0], kb[1]);
                    mma16816<T>(dq[2 * dn + 1], a, kb[2], kb[3]);
                }
            }
        }
        {
            float *dst = dqacc + ((size_t)b * Tn + q0 + wr * 16) * C + (size_t)h * HD + wc * DW;
#pragma unroll
            for (int nt = 0; nt < DW / 8; nt++) add_dq_tile(dst + nt * 8, C, dq[nt], q0 + wr * 16, Tn, g, tig);
        }
        if (more && tid < Br) { /* buffer buf^1 was last read before this iteration's first barrier */
            sL[(buf ^ 1) * Br + tid] = next_l;
            sD[(buf ^ 1) * Br + tid] = next_d;
        }
    }

#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int key = key_lo + g + 8 * r;
        if (key >= Tn) continue;
        T *base = dqkv + ((size_t)b * Tn + key) * rs + (size_t)h * HD + 2 * tig;
#pragma unroll
        for (int nt = 0; nt < ND; nt++) {
            *reinterpret_cast<uint32_t *>(base + C + nt * 8) =
                pack2<T>(kv[0][nt][2 * r] * scale, kv[0][nt][2 * r + 1] * scale);
            *reinterpret_cast<uint32_t *>(base + 2 * C + nt * 8) = pack2<T>(kv[1][nt][2 * r], kv[1][nt][2 * r + 1]);
        }
    }
}

#include "kernels/cuda/attention_wgmma.cuh"

/* D[b,h,t] = sum_d dO * O (fp32) for 16-bit data, vectorized: a thread
 * takes one 16-byte chunk (8 elements) of dO and O and zeroes 8 floats of
 * the accumulator; the hs/8 lanes of one (b,t,h) row (an aligned group of
 * 4, 8 or 16 lanes) reduce with shuffles. Needs dout, out, dqacc 16-byte
 * aligned. (The fp32 path's prep is f32a::prep.) */
__device__ __forceinline__ float2 to_f2(uint32_t u, __nv_bfloat16)
{
    __nv_bfloat162 v;
    memcpy(&v, &u, 4);
    return __bfloat1622float2(v);
}
__device__ __forceinline__ float2 to_f2(uint32_t u, __half)
{
    __half2 v;
    memcpy(&v, &u, 4);
    return __half22float2(v);
}
template <typename T>
__global__ void attn_bwd_prep16(float *__restrict__ Dg, float *__restrict__ dqacc, const T *__restrict__ dout,
                                const T *__restrict__ out, int Tn, int C, int nh, long long chunks)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int cpr = C / nh / 8; /* chunks per head row: 4, 8 or 16 */
    float s = 0.f;
    if (i < chunks) {
        const size_t e = (size_t)i * 8;
        const uint4 a = *reinterpret_cast<const uint4 *>(dout + e), o = *reinterpret_cast<const uint4 *>(out + e);
        const uint32_t av[4] = {a.x, a.y, a.z, a.w}, ov[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 x = to_f2(av[k], T()), y = to_f2(ov[k], T());
            s += x.x * y.x + x.y * y.y;
        }
        const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
        *reinterpret_cast<float4 *>(dqacc + e) = z;
        *reinterpret_cast<float4 *>(dqacc + e + 4) = z;
    }
    for (int o = cpr / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (i < chunks && i % cpr == 0) {
        const long long row = i / cpr, bt = row / nh; /* row = (b*T + t)*nh + h */
        const int h = (int)(row % nh);
        Dg[((size_t)(bt / Tn) * nh + h) * Tn + (size_t)(bt % Tn)] = s;
    }
}

/* dq slot of dqkv = scale * accumulator, two elements a thread. */
template <typename T>
__global__ void attn_dq_store(T *__restrict__ dqkv, const float *__restrict__ dqacc, size_t pairs, int C, float scale)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pairs; i += (size_t)gridDim.x * blockDim.x) {
        const size_t e = 2 * i, bt = e / C, c = e % C;
        const float2 v = *reinterpret_cast<const float2 *>(dqacc + e);
        *reinterpret_cast<uint32_t *>(dqkv + bt * 3 * C + c) = pack2<T>(v.x * scale, v.y * scale);
    }
}

/* --------------------------------------------- CUDA-core fp32 flash path */

#include "kernels/cuda/attention_f32.cuh"

/* ------------------------------------ simple reference (MS_ATTN_SIMPLE=1) */

/* Thread per (b, h, t): online softmax over keys 0..t straight from global. */
template <typename T>
__global__ void attn_fwd_simple(T *out, float *lse, const T *qkv, int B, int Tn, int C, int nh, float scale)
{
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * nh * Tn) return;
    const int t = (int)(idx % Tn), h = (int)((idx / Tn) % nh), b = (int)(idx / ((long long)Tn * nh));
    const int hs = C / nh;
    const size_t rs = 3 * (size_t)C;
    const T *base = qkv + (size_t)b * Tn * rs + (size_t)h * hs;
    float q[kMaxHS], o[kMaxHS];
    for (int d = 0; d < hs; d++) {
        q[d] = to_f(base[(size_t)t * rs + d]);
        o[d] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    for (int j = 0; j <= t; j++) {
        const T *k = base + (size_t)j * rs + C, *v = k + C;
        float s = 0.f;
        for (int d = 0; d < hs; d++) s += q[d] * to_f(k[d]);
        s *= scale;
        const float m_new = fmaxf(m, s), a = expf(m - m_new), p = expf(s - m_new);
        l = l * a + p;
        for (int d = 0; d < hs; d++) o[d] = o[d] * a + p * to_f(v[d]);
        m = m_new;
    }
    for (int d = 0; d < hs; d++) out[((size_t)b * Tn + t) * C + (size_t)h * hs + d] = from_f<T>(o[d] / l);
    lse[((size_t)b * nh + h) * Tn + t] = m + logf(l);
}

/* Thread per query (b, h, t): D_t, then dq = scale * sum_j ds_tj k_j. */
template <typename T>
__global__ void attn_bwd_dq_simple(T *dqkv, const T *dout, const T *qkv, const T *out, const float *lse,
                                   int B, int Tn, int C, int nh, float scale)
{
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * nh * Tn) return;
    const int t = (int)(idx % Tn), h = (int)((idx / Tn) % nh), b = (int)(idx / ((long long)Tn * nh));
    const int hs = C / nh;
    const size_t rs = 3 * (size_t)C;
    const T *base = qkv + (size_t)b * Tn * rs + (size_t)h * hs;
    const size_t oo = ((size_t)b * Tn + t) * C + (size_t)h * hs;
    float q[kMaxHS], go[kMaxHS], dq[kMaxHS];
    float D = 0.f;
    for (int d = 0; d < hs; d++) {
        q[d] = to_f(base[(size_t)t * rs + d]);
        go[d] = to_f(dout[oo + d]);
        dq[d] = 0.f;
        D += go[d] * to_f(out[oo + d]);
    }
    const float lt = lse[((size_t)b * nh + h) * Tn + t];
    for (int j = 0; j <= t; j++) {
        const T *k = base + (size_t)j * rs + C, *v = k + C;
        float s = 0.f, dp = 0.f;
        for (int d = 0; d < hs; d++) {
            s += q[d] * to_f(k[d]);
            dp += go[d] * to_f(v[d]);
        }
        const float ds = expf(s * scale - lt) * (dp - D);
        for (int d = 0; d < hs; d++) dq[d] += ds * to_f(k[d]);
    }
    for (int d = 0; d < hs; d++) dqkv[((size_t)b * Tn + t) * rs + (size_t)h * hs + d] = from_f<T>(dq[d] * scale);
}

/* Thread per key (b, h, j): loops over queries t >= j, recomputing each D_t. */
template <typename T>
__global__ void attn_bwd_dkv_simple(T *dqkv, const T *dout, const T *qkv, const T *out, const float *lse,
                                    int B, int Tn, int C, int nh, float scale)
{
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * nh * Tn) return;
    const int j = (int)(idx % Tn), h = (int)((idx / Tn) % nh), b = (int)(idx / ((long long)Tn * nh));
    const int hs = C / nh;
    const size_t rs = 3 * (size_t)C;
    const T *base = qkv + (size_t)b * Tn * rs + (size_t)h * hs;
    float k[kMaxHS], v[kMaxHS], dk[kMaxHS], dv[kMaxHS];
    for (int d = 0; d < hs; d++) {
        k[d] = to_f(base[(size_t)j * rs + C + d]);
        v[d] = to_f(base[(size_t)j * rs + 2 * C + d]);
        dk[d] = dv[d] = 0.f;
    }
    for (int t = j; t < Tn; t++) {
        const T *q = base + (size_t)t * rs;
        const size_t oo = ((size_t)b * Tn + t) * C + (size_t)h * hs;
        float s = 0.f, dp = 0.f, D = 0.f;
        for (int d = 0; d < hs; d++) {
            const float go = to_f(dout[oo + d]);
            s += to_f(q[d]) * k[d];
            dp += go * v[d];
            D += go * to_f(out[oo + d]);
        }
        const float p = expf(s * scale - lse[((size_t)b * nh + h) * Tn + t]), ds = p * (dp - D);
        for (int d = 0; d < hs; d++) {
            dk[d] += ds * to_f(q[d]);
            dv[d] += p * to_f(dout[oo + d]);
        }
    }
    T *row = dqkv + ((size_t)b * Tn + j) * rs + (size_t)h * hs;
    for (int d = 0; d < hs; d++) {
        row[C + d] = from_f<T>(dk[d] * scale);
        row[2 * C + d] = from_f<T>(dv[d]);
    }
}

/* ------------------------------------------------------------------ host */

void fail(ms_kctx *ctx, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fail(ms_kctx *ctx, int code, const char *fmt, ...)
{
    if (!ctx || ctx->status != 0) return; /* first error wins */
    ctx->status = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
}

/* Records the launch error, if any, of the kernels just queued. */
bool launched(ms_kctx *ctx, const char *what)
{
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return true;
    fail(ctx, (int)e, "%s: %s", what, cudaGetErrorString(e));
    return false;
}

/* Lets a kernel use `bytes` of dynamic shared memory (beyond 48 KiB needs
 * an opt-in, which is per device, so it is set at every launch: cheap). */
template <typename K> bool allow_smem(ms_kctx *ctx, K kernel, size_t bytes, const char *what)
{
    if (bytes <= 48 * 1024) return true;
    const cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e == cudaSuccess) return true;
    (void)cudaGetLastError();
    fail(ctx, (int)e, "%s: %zu bytes of shared memory refused: %s", what, bytes, cudaGetErrorString(e));
    return false;
}

bool simple_requested()
{
    const char *e = getenv("MS_ATTN_SIMPLE");
    return e && e[0] && strcmp(e, "0") != 0;
}

bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/* Shape/dtype check shared by forward and backward; *hs receives C/nh. */
bool shape_ok(ms_kctx *ctx, const char *op, ms_dtype dt, int B, int T, int C, int nh, int *hs)
{
    if ((dt != MS_F32 && dt != MS_BF16 && dt != MS_F16) || B < 0 || T < 0 || C <= 0 || nh <= 0 ||
        C % nh != 0 || B > 65535 || nh > 65535) {
        fail(ctx, -1, "%s: bad arguments (dt=%d B=%d T=%d C=%d nh=%d)", op, (int)dt, B, T, C, nh);
        return false;
    }
    *hs = C / nh;
    if (*hs > kMaxHS) {
        fail(ctx, -1, "%s: head size %d is not supported on the GPU (at most %d)", op, *hs, kMaxHS);
        return false;
    }
    return true;
}

/* The fast kernels are built for head sizes 32, 64 and 128; any other head
 * size (small test models) takes the simple, exact path. */
bool fast_hs(int hs) { return hs == 32 || hs == 64 || hs == 128; }

unsigned blocks_for(long long threads, int per_block) { return (unsigned)((threads + per_block - 1) / per_block); }

/* Whether the wgmma kernels run on the current device: the runtime loads
 * this module's sm_90a code only on a 9.0 device, so a probe kernel asks
 * once per device. MS_ATTN_WGMMA=0 keeps the mma.sync kernels (A/B runs). */
__device__ int wg_probe_flag;
bool wgmma_ready()
{
    static int state[64]; /* 0 not asked, 1 yes, 2 no */
    const char *env = getenv("MS_ATTN_WGMMA");
    if (env && !strcmp(env, "0")) return false;
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    const int known = __atomic_load_n(&state[dev], __ATOMIC_ACQUIRE);
    if (known) return known == 1;
    /* an error some earlier call left pending is its owner's to see: the
     * probe neither consumes it nor caches an answer while it stands */
    if (cudaPeekAtLastError() != cudaSuccess) return false;
    int *flag = nullptr, got = 0;
    bool ok = cudaGetSymbolAddress(reinterpret_cast<void **>(&flag), wg_probe_flag) == cudaSuccess;
    if (ok) {
        wg::probe<<<1, 1>>>(flag);
        ok = cudaGetLastError() == cudaSuccess &&
             cudaMemcpyFromSymbol(&got, wg_probe_flag, sizeof got) == cudaSuccess;
    }
    (void)cudaGetLastError(); /* the probe's own failure means "no", not an error for the next kernel */
    __atomic_store_n(&state[dev], ok && got == 1 ? 1 : 2, __ATOMIC_RELEASE);
    return ok && got == 1;
}

template <typename E>
void fwd_simple(ms_kctx *ctx, cudaStream_t st, void *out, float *lse, const void *qkv, int B, int T, int C, int nh)
{
    const float scale = 1.f / sqrtf((float)(C / nh));
    attn_fwd_simple<E><<<blocks_for((long long)B * nh * T, 128), 128, 0, st>>>(
        static_cast<E *>(out), lse, static_cast<const E *>(qkv), B, T, C, nh, scale);
    launched(ctx, "attention_fwd (simple)");
}

template <typename E, int HD, class CF = typename FwdCfg<HD>::type>
void fwd_tc(ms_kctx *ctx, cudaStream_t st, void *out, float *lse, const void *qkv, int B, int T, int C, int nh)
{
    constexpr size_t smem = fwd_tc_smem<HD, CF>();
    if (!allow_smem(ctx, attn_fwd_tc<E, HD, CF>, smem, "attention_fwd")) return;
    const dim3 grid(nh, B, (T + CF::Br - 1) / CF::Br);
    const float sl2 = kLog2e / sqrtf((float)HD);
    attn_fwd_tc<E, HD, CF><<<grid, 32 * CF::NW, smem, st>>>(static_cast<E *>(out), lse, static_cast<const E *>(qkv), T,
                                                           C, nh, sl2);
    launched(ctx, "attention_fwd");
}

/* The forward on the warpgroup MMA kernel (attention_wgmma.cuh): hs 64,
 * 128; NWG warpgroups of 64 queries a block, BC keys a tile, MINB blocks
 * an SM. The defaults are the measured winners (H200, bench/attn_tune.cu,
 * bench/README.md): seed17 (hs 128) 2 x 128 keys 0.604-0.615 ms, 2 x 64
 * 0.661-0.669, 1 x 128 1.07 (attn_fwd_tc 0.84); GPT-2 small (hs 64) 1 x 64
 * at 3 blocks an SM 0.100 ms, at 2 0.121, 2 x 64 at 2 0.102, 1 x 128 0.113
 * (attn_fwd_tc 0.115). */
[[maybe_unused]] constexpr int wg_fwd_nwg(int hd) { return hd == 64 ? 1 : 2; }
[[maybe_unused]] constexpr int wg_fwd_bc(int hd) { return hd == 64 ? 64 : 128; }
[[maybe_unused]] constexpr int wg_fwd_minb(int hd, int nwg) { return nwg == 1 ? (hd == 64 ? 3 : 2) : 1; }
/* TMA maps of qkv ([B*T rows, 3C columns] of E) and dO in boxes of 64
 * columns (128 bytes, the swizzle's span) by `rows` rows. false where the driver
 * has no cuTensorMapEncodeTiled or refuses the shape: the caller then runs
 * the kernels that load by cp.async. */
template <typename E> CUtensorMapDataType tmap_dtype();
template <> CUtensorMapDataType tmap_dtype<__nv_bfloat16>() { return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; }
template <> CUtensorMapDataType tmap_dtype<__half>() { return CU_TENSOR_MAP_DATA_TYPE_FLOAT16; }
template <> CUtensorMapDataType tmap_dtype<float>() { return CU_TENSOR_MAP_DATA_TYPE_FLOAT32; }
PFN_cuTensorMapEncodeTiled_v12000 tmap_encoder()
{
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            p = nullptr;
        (void)cudaGetLastError(); /* a missing entry point means "no", not an error for the next kernel */
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }();
    return fn;
}
/* a [n rows x cols] matrix of E (rows cols apart) in boxes of 128 bytes
 * (64 16-bit or 32 fp32 columns) x rows */
template <typename E> bool tmap_2d(CUtensorMap *m, const void *p, size_t n, size_t cols, int rows)
{
    const PFN_cuTensorMapEncodeTiled_v12000 enc = tmap_encoder();
    if (!enc || n > INT_MAX || cols > INT_MAX) return false; /* the kernels' box coordinates are int */
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)n};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * sizeof(E)};
    const cuuint32_t box[2] = {128 / sizeof(E), (cuuint32_t)rows}, estr[2] = {1, 1};
    return enc(m, tmap_dtype<E>(), 2, const_cast<void *>(p), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* false: no tensor map (nothing launched, nothing recorded) */
template <typename E, int HD, int NWG = wg_fwd_nwg(HD), int BC = wg_fwd_bc(HD), int MINB = wg_fwd_minb(HD, NWG),
          bool PP = wg::fwd_pingpong<NWG, BC>()>
bool fwd_wg(ms_kctx *ctx, cudaStream_t st, void *out, float *lse, const void *qkv, int B, int T, int C, int nh)
{
    CUtensorMap tq, tkv;
    const size_t n = (size_t)B * T, w = 3 * (size_t)C;
    if (!tmap_2d<E>(&tq, qkv, n, w, wg::kRows)) return false;
    if (BC == wg::kRows) tkv = tq; /* the same boxes */
    else if (!tmap_2d<E>(&tkv, qkv, n, w, BC)) return false;
    constexpr size_t smem = wg::fwd_smem_bytes<HD, NWG, BC>();
    if (!allow_smem(ctx, wg::attn_fwd_wg<E, HD, NWG, BC, MINB, PP>, smem, "attention_fwd")) return true;
    const int rows = wg::kRows * NWG;
    const dim3 grid(nh, B, (T + rows - 1) / rows);
    wg::attn_fwd_wg<E, HD, NWG, BC, MINB, PP><<<grid, 128 * (NWG + 1), smem, st>>>(static_cast<E *>(out), lse, tq, tkv,
                                                                                  T, C, nh, kLog2e / sqrtf((float)HD));
    launched(ctx, "attention_fwd (wgmma)");
    return true;
}

/* fp32 tile configurations: rows a thread (RT: 4 -> 256 threads, 8 -> 128)
 * and the blocks an SM asked of ptxas (MINB). Measured on an H200
 * (`attn_tune f32`, GPT-2 small shape, one layer): forward RT=8 MINB=3
 * 0.801 ms against 0.848 (MINB=2) and 0.900 (RT=4, 256 threads); backward
 * RT=8 2.10 ms against 2.22 (RT=4). At hs=128 RT=8 would spill in the
 * backward (dK, dV alone take 128 registers): RT=4 there. */
template <int HD> struct FwdF32Cfg { using type = f32a::FwdF32<HD, 64, 8, 4, HD <= 64 ? 3 : 2>; };
template <int HD> struct BwdF32Cfg { using type = f32a::BwdF32<HD, 64, HD <= 64 ? 8 : 4, 4, HD <= 64 ? 2 : 1>; };

template <int HD, class F = typename FwdF32Cfg<HD>::type>
void fwd_f32(ms_kctx *ctx, cudaStream_t st, void *out, float *lse, const void *qkv, int B, int T, int C, int nh)
{
    static_assert(F::HD == HD, "configuration for another head size");
    constexpr size_t smem = f32a::fwd_smem<HD, F::BQ>();
    if (!allow_smem(ctx, f32a::attn_fwd<F>, smem, "attention_fwd")) return;
    const dim3 grid((T + F::BQ - 1) / F::BQ, nh, B);
    f32a::attn_fwd<F><<<grid, F::NT, smem, st>>>(static_cast<float *>(out), lse, static_cast<const float *>(qkv), T, C,
                                                 nh, kLog2e / sqrtf((float)HD));
    launched(ctx, "attention_fwd (fp32)");
}

template <typename E>
void fwd_tc_any(ms_kctx *ctx, cudaStream_t st, void *out, float *lse, const void *qkv, int B, int T, int C, int nh, int hs)
{
    if (hs != 32 && wgmma_ready() &&
        (hs == 64 ? fwd_wg<E, 64>(ctx, st, out, lse, qkv, B, T, C, nh)
                  : fwd_wg<E, 128>(ctx, st, out, lse, qkv, B, T, C, nh)))
        return;
    if (hs == 32) fwd_tc<E, 32>(ctx, st, out, lse, qkv, B, T, C, nh);
    else if (hs == 64) fwd_tc<E, 64>(ctx, st, out, lse, qkv, B, T, C, nh);
    else fwd_tc<E, 128>(ctx, st, out, lse, qkv, B, T, C, nh);
}

/* Scratch layout of the 16-bit fast backward: D [B*nh*T] fp32, then (at a
 * 256-byte boundary) the dQ accumulator [B*T*C] fp32. fp32: D only. */
size_t d_bytes(int B, int T, int nh) { return ((size_t)B * nh * T * sizeof(float) + 255) & ~(size_t)255; }

template <typename E>
void bwd_simple(ms_kctx *ctx, cudaStream_t st, void *dqkv, const void *dout, const void *qkv, const void *out,
                const float *lse, int B, int T, int C, int nh)
{
    const float scale = 1.f / sqrtf((float)(C / nh));
    const unsigned blocks = blocks_for((long long)B * nh * T, 128);
    attn_bwd_dq_simple<E><<<blocks, 128, 0, st>>>(static_cast<E *>(dqkv), static_cast<const E *>(dout),
                                                  static_cast<const E *>(qkv), static_cast<const E *>(out), lse, B, T,
                                                  C, nh, scale);
    attn_bwd_dkv_simple<E><<<blocks, 128, 0, st>>>(static_cast<E *>(dqkv), static_cast<const E *>(dout),
                                                   static_cast<const E *>(qkv), static_cast<const E *>(out), lse, B, T,
                                                   C, nh, scale);
    launched(ctx, "attention_bwd (simple)");
}

/* The same, eight elements a thread (C a multiple of 8): two 16-byte loads
 * and a 16-byte store in flight a thread where the loop above has one
 * 8-byte load; one chunk a thread, no loop. H200, bf16, CUPTI records, ms
 * a step: seed17 2.17 against 2.80, gpt2-small 0.240 against 0.305. */
template <typename T>
__global__ void attn_dq_store8(T *__restrict__ dqkv, const float *__restrict__ dqacc, size_t chunks, int C,
                               float scale)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= chunks) return;
    const size_t e = 8 * i, bt = e / C, c = e % C;
    const float4 a = *reinterpret_cast<const float4 *>(dqacc + e), b = *reinterpret_cast<const float4 *>(dqacc + e + 4);
    const uint4 v = make_uint4(pack2<T>(a.x * scale, a.y * scale), pack2<T>(a.z * scale, a.w * scale),
                               pack2<T>(b.x * scale, b.y * scale), pack2<T>(b.z * scale, b.w * scale));
    *reinterpret_cast<uint4 *>(dqkv + bt * 3 * C + c) = v;
}

/* dQ = scale * accumulator into dqkv's q slots (after the main kernel). */
template <typename E>
void dq_store(ms_kctx *ctx, cudaStream_t st, void *dqkv, const float *dqacc, int B, int T, int C, float scale)
{
    if (C % 8 == 0 && aligned16(dqkv) && aligned16(dqacc)) {
        const size_t chunks = (size_t)B * T * C / 8;
        attn_dq_store8<E><<<(unsigned)((chunks + 255) / 256), 256, 0, st>>>(static_cast<E *>(dqkv), dqacc, chunks, C,
                                                                           scale);
        launched(ctx, "attention_bwd (dq store)");
        return;
    }
    const size_t pairs = (size_t)B * T * C / 2;
    const size_t want = (pairs + 255) / 256, cap = (size_t)132 * 16; /* grid-stride beyond ~16 blocks an SM */
    const unsigned blocks = (unsigned)(want < cap ? want : cap);
    attn_dq_store<E><<<blocks, 256, 0, st>>>(static_cast<E *>(dqkv), dqacc, pairs, C, scale);
    launched(ctx, "attention_bwd (dq store)");
}

template <typename E, int HD, class CB = typename BwdCfg<HD>::type>
void bwd_tc(ms_kctx *ctx, cudaStream_t st, void *dqkv, const void *dout, const void *qkv, const float *lse,
            float *D, float *dqacc, int B, int T, int C, int nh)
{
    constexpr size_t smem = bwd_tc_smem<HD, CB>();
    if (!allow_smem(ctx, attn_bwd_tc<E, HD, CB>, smem, "attention_bwd")) return;
    const float scale = 1.f / sqrtf((float)HD);
    const dim3 grid((T + CB::Bc - 1) / CB::Bc, nh, B);
    attn_bwd_tc<E, HD, CB><<<grid, 32 * CB::NW, smem, st>>>(static_cast<E *>(dqkv), dqacc, static_cast<const E *>(dout),
                                                     static_cast<const E *>(qkv), lse, D, T, C, nh, scale * kLog2e,
                                                     scale);
    if (!launched(ctx, "attention_bwd")) return;
    dq_store<E>(ctx, st, dqkv, dqacc, B, T, C, scale);
}

/* The same on the warpgroup MMA kernel (attention_wgmma.cuh): hs 64, 128,
 * NWG warpgroups of 64 keys a block. Measured (H200, the same harness,
 * prep and dQ store included): seed17 NWG = 2 1.73 ms against 3.58 with
 * one warpgroup (attn_bwd_tc 3.48), and 1.98 with dQ added by atomics
 * from registers instead of TMA reductions; GPT-2 small NWG = 1 0.289
 * against 0.309 with two (0.323 with atomics; attn_bwd_tc 0.434). */
[[maybe_unused]] constexpr int wg_bwd_nwg(int hd) { return hd == 64 ? 1 : 2; }
template <typename E, int HD, int NWG = wg_bwd_nwg(HD), int VAR = 0>
bool bwd_wg(ms_kctx *ctx, cudaStream_t st, void *dqkv, const void *dout, const void *qkv, const float *lse,
            float *D, float *dqacc, int B, int T, int C, int nh)
{
    CUtensorMap tqkv, tdo, tdq;
    const size_t n = (size_t)B * T;
    if (!tmap_2d<E>(&tqkv, qkv, n, 3 * (size_t)C, wg::kRows) || !tmap_2d<E>(&tdo, dout, n, C, wg::kRows) ||
        !tmap_2d<float>(&tdq, dqacc, n, C, wg::kRows))
        return false;
    constexpr size_t smem = wg::smem_bytes<HD, NWG>();
    if (!allow_smem(ctx, wg::attn_bwd_wg<E, HD, NWG, VAR>, smem, "attention_bwd")) return true;
    const float scale = 1.f / sqrtf((float)HD);
    const int keys = wg::kRows * NWG;
    const dim3 grid((T + keys - 1) / keys, nh, B);
    wg::attn_bwd_wg<E, HD, NWG, VAR><<<grid, 128 * (NWG + 1), smem, st>>>(static_cast<E *>(dqkv), dqacc, tqkv, tdo, tdq,
                                                                          lse, D, T, C, nh, scale * kLog2e, scale);
    if (launched(ctx, "attention_bwd (wgmma)")) dq_store<E>(ctx, st, dqkv, dqacc, B, T, C, scale);
    return true;
}


template <int HD, class F = typename BwdF32Cfg<HD>::type>
void bwd_f32(ms_kctx *ctx, cudaStream_t st, void *dqkv, const void *dout, const void *qkv, const float *lse,
             const float *D, int B, int T, int C, int nh)
{
    static_assert(F::HD == HD, "configuration for another head size");
    constexpr size_t smem = f32a::bwd_smem<F>();
    if (!allow_smem(ctx, f32a::attn_bwd<F>, smem, "attention_bwd")) return;
    const float scale = 1.f / sqrtf((float)HD);
    const dim3 grid((T + f32a::kB - 1) / f32a::kB, nh, B);
    f32a::attn_bwd<F><<<grid, F::NT, smem, st>>>(static_cast<float *>(dqkv), static_cast<const float *>(dout),
                                                 static_cast<const float *>(qkv), lse, D, T, C, nh, scale * kLog2e,
                                                 scale);
    launched(ctx, "attention_bwd (fp32)");
}

/* D = rowsum(dO * O) into D, dQ's slots of dqkv zeroed (before bwd_f32). */
bool prep_f32(ms_kctx *ctx, cudaStream_t st, float *D, void *dqkv, const void *dout, const void *out, int B, int T,
              int C, int nh)
{
    const long long rows = (long long)B * T * nh;
    f32a::prep<<<blocks_for(rows * 32, 256), 256, 0, st>>>(D, static_cast<float *>(dqkv),
                                                          static_cast<const float *>(dout),
                                                          static_cast<const float *>(out), T, C, nh, rows);
    return launched(ctx, "attention_bwd (prep)");
}

void bwd_fast_f32(ms_kctx *ctx, cudaStream_t st, void *dqkv, const void *dout, const void *qkv, const void *out,
                  const float *lse, void *scratch, int B, int T, int C, int nh, int hs)
{
    float *D = static_cast<float *>(scratch);
    if (!prep_f32(ctx, st, D, dqkv, dout, out, B, T, C, nh)) return;
    if (hs == 32) bwd_f32<32>(ctx, st, dqkv, dout, qkv, lse, D, B, T, C, nh);
    else if (hs == 64) bwd_f32<64>(ctx, st, dqkv, dout, qkv, lse, D, B, T, C, nh);
    else bwd_f32<128>(ctx, st, dqkv, dout, qkv, lse, D, B, T, C, nh);
}

template <typename E>
void bwd_fast_tc(ms_kctx *ctx, cudaStream_t st, void *dqkv, const void *dout, const void *qkv, const void *out,
                 const float *lse, void *scratch, int B, int T, int C, int nh, int hs)
{
    float *D = static_cast<float *>(scratch);
    float *dqacc = reinterpret_cast<float *>(static_cast<char *>(scratch) + d_bytes(B, T, nh));
    const long long chunks = (long long)B * T * C / 8;
    attn_bwd_prep16<E><<<blocks_for(chunks, 256), 256, 0, st>>>(D, dqacc, static_cast<const E *>(dout),
                                                               static_cast<const E *>(out), T, C, nh, chunks);
    if (!launched(ctx, "attention_bwd (prep)")) return;
    if (hs != 32 && wgmma_ready() &&
        (hs == 64 ? bwd_wg<E, 64>(ctx, st, dqkv, dout, qkv, lse, D, dqacc, B, T, C, nh)
                  : bwd_wg<E, 128>(ctx, st, dqkv, dout, qkv, lse, D, dqacc, B, T, C, nh)))
        return;
    if (hs == 32) bwd_tc<E, 32>(ctx, st, dqkv, dout, qkv, lse, D, dqacc, B, T, C, nh);
    else if (hs == 64) bwd_tc<E, 64>(ctx, st, dqkv, dout, qkv, lse, D, dqacc, B, T, C, nh);
    else bwd_tc<E, 128>(ctx, st, dqkv, dout, qkv, lse, D, dqacc, B, T, C, nh);
}

} // namespace

extern "C" void ms_cuda_attention_fwd(ms_kctx *ctx, ms_dtype dt, void *out, float *lse, const void *qkv,
                                      int B, int T, int C, int nh)
{
    int hs = 0;
    if (!shape_ok(ctx, "attention_fwd", dt, B, T, C, nh, &hs)) return;
    if (B == 0 || T == 0) return;
    if (!out || !lse || !qkv) {
        fail(ctx, -1, "attention_fwd: NULL buffer");
        return;
    }
    cudaStream_t st = static_cast<cudaStream_t>(ctx->stream);
    const bool simple = simple_requested() || !fast_hs(hs) || !(aligned16(qkv) && aligned16(out));
    if (dt == MS_F32) {
        if (simple) fwd_simple<float>(ctx, st, out, lse, qkv, B, T, C, nh);
        else if (hs == 32) fwd_f32<32>(ctx, st, out, lse, qkv, B, T, C, nh);
        else if (hs == 64) fwd_f32<64>(ctx, st, out, lse, qkv, B, T, C, nh);
        else fwd_f32<128>(ctx, st, out, lse, qkv, B, T, C, nh);
    } else if (dt == MS_BF16) {
        if (simple) fwd_simple<__nv_bfloat16>(ctx, st, out, lse, qkv, B, T, C, nh);
        else fwd_tc_any<__nv_bfloat16>(ctx, st, out, lse, qkv, B, T, C, nh, hs);
    } else {
        if (simple) fwd_simple<__half>(ctx, st, out, lse, qkv, B, T, C, nh);
        else fwd_tc_any<__half>(ctx, st, out, lse, qkv, B, T, C, nh, hs);
    }
}

extern "C" int ms_cuda_attention_wgmma(void) { return wgmma_ready() ? 1 : 0; }

extern "C" size_t ms_cuda_attention_bwd_scratch(ms_dtype dt, int B, int T, int C, int nh)
{
    if (B <= 0 || T <= 0 || C <= 0 || nh <= 0) return 0;
    const size_t d = d_bytes(B, T, nh);
    return dt == MS_F32 ? d : d + (size_t)B * T * C * sizeof(float);
}

extern "C" void ms_cuda_attention_bwd(ms_kctx *ctx, ms_dtype dt, void *dqkv, const void *dout, const void *qkv,
                                      const void *out, const float *lse, void *scratch,
                                      int B, int T, int C, int nh)
{
    int hs = 0;
    if (!shape_ok(ctx, "attention_bwd", dt, B, T, C, nh, &hs)) return;
    if (B == 0 || T == 0) return;
    if (!dqkv || !dout || !qkv || !out || !lse) {
        fail(ctx, -1, "attention_bwd: NULL buffer");
        return;
    }
    cudaStream_t st = static_cast<cudaStream_t>(ctx->stream);
    const bool simple = simple_requested() || !fast_hs(hs) ||
                        !(aligned16(dqkv) && aligned16(dout) && aligned16(qkv) && aligned16(out) && aligned16(scratch));
    if (!simple && !scratch) {
        fail(ctx, -1, "attention_bwd: NULL scratch (%zu bytes needed)", ms_cuda_attention_bwd_scratch(dt, B, T, C, nh));
        return;
    }
    if (dt == MS_F32) {
        if (simple) bwd_simple<float>(ctx, st, dqkv, dout, qkv, out, lse, B, T, C, nh);
        else bwd_fast_f32(ctx, st, dqkv, dout, qkv, out, lse, scratch, B, T, C, nh, hs);
    } else if (dt == MS_BF16) {
        if (simple) bwd_simple<__nv_bfloat16>(ctx, st, dqkv, dout, qkv, out, lse, B, T, C, nh);
        else bwd_fast_tc<__nv_bfloat16>(ctx, st, dqkv, dout, qkv, out, lse, scratch, B, T, C, nh, hs);
    } else {
        if (simple) bwd_simple<__half>(ctx, st, dqkv, dout, qkv, out, lse, B, T, C, nh);
        else bwd_fast_tc<__half>(ctx, st, dqkv, dout, qkv, out, lse, scratch, B, T, C, nh, hs);
    }
}
