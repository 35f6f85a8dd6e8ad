/* attn_tune.cu — standalone timing harness for the bf16 tensor-core
 * attention kernels of kernels/cuda/attention.cu (issue 15).
 *
 * It includes attention.cu itself, so every candidate is the real kernel
 * instantiated with another compile-time configuration (FwdConf<NW, MW, BC>,
 * BwdConf<NW, BR, KVREG>); the defaults are FwdCfg / BwdCfg. The reference
 * is the pre-tuning attention.cu (bench/attn_ref.cu, entry points renamed).
 *
 * Shapes: seed17 (B=15 T=2048 C=2048 nh=16, hs=128) and GPT-2 small (B=16
 * T=1024 C=768 nh=12, hs=64), fresh random bf16 inputs (uniform, scaled so
 * the softmax is not flat). For each candidate: forward out/lse and
 * backward dq/dk/dv (from the reference's out, lse) against the reference:
 * normwise ||c - r||_2 / ||r||_2 <= 1e-2 and max|c - r| <= 1e-2 * max|r|
 * per tensor, lse |c - r| <= 1e-2 * max(1, |r|); outputs are poisoned with
 * NaN before each checked run. Times: cudaEvent around each launch (the
 * whole backward: prep, main kernel, dq store), 3 warm-ups (ATTN_TUNE_WARM=n:
 * n), median of 15.
 * TFLOP/s with causal FLOPs: fwd 2*B*nh*T^2*hs, bwd 2.5x fwd.
 *
 * Build: make attn-tune (build/attn_tune, static cudart; ATTN_REF=<commit>
 * picks the reference, default the commit before issue 15). Run on the GPU:
 * ./attn_tune [only=fwd|bwd|f32] (f32: the fp32 kernels instead, against
 * the simple kernels). */
#include "kernels/cuda/attention.cu"

#include <algorithm>
#include <string>
#include <vector>

extern "C" void attn_ref_fwd(ms_kctx *ctx, ms_dtype dt, void *out, float *lse, const void *qkv, int B, int T, int C,
                             int nh);
extern "C" size_t attn_ref_bwd_scratch(ms_dtype dt, int B, int T, int C, int nh);
extern "C" void attn_ref_bwd(ms_kctx *ctx, ms_dtype dt, void *dqkv, const void *dout, const void *qkv, const void *out,
                             const float *lse, void *scratch, int B, int T, int C, int nh);

namespace tune {

typedef __nv_bfloat16 bf;

#define CK(x)                                                                                        \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
            exit(2);                                                                                 \
        }                                                                                            \
    } while (0)

struct Shape { const char *name; int B, T, C, nh; };

struct Bufs {
    Shape sh;
    size_t nqkv, nout, nl;
    bf *qkv, *dout, *out_ref, *out, *dqkv_ref, *dqkv;
    float *lse_ref, *lse;
    void *scratch;
    ms_kctx ctx;
};

__global__ void fill_rand(bf *p, size_t n, uint32_t seed, float amp)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
        p[i] = __float2bfloat16_rn(amp * ((x >> 8) * (1.f / 8388608.f) - 1.f));
    }
}

double fwd_flops(const Shape &s) { return 2.0 * s.B * s.nh * (double)s.T * s.T * (s.C / s.nh); }

void check_ctx(ms_kctx &c, const char *what)
{
    CK(cudaGetLastError());
    if (c.status) {
        fprintf(stderr, "%s: status %d: %s\n", what, c.status, c.error);
        exit(2);
    }
}

/* normwise and maxwise relative errors of the strided slice [off, off+w) of
 * rows of stride ld; the reference's host copy is cached (one per buffer). */
struct Err { double l2, mx; bool nan; };
std::vector<bf> host_c, host_r;
const bf *host_r_src = nullptr;
void fetch(const bf *c_d, const bf *r_d, size_t n)
{
    host_c.resize(n);
    CK(cudaMemcpy(host_c.data(), c_d, n * sizeof(bf), cudaMemcpyDeviceToHost));
    if (host_r_src != r_d || host_r.size() != n) {
        host_r.resize(n);
        CK(cudaMemcpy(host_r.data(), r_d, n * sizeof(bf), cudaMemcpyDeviceToHost));
        host_r_src = r_d;
    }
}
double to_d(bf x) { return __bfloat162float(x); }
double to_d(float x) { return x; }
/* errors of the strided slice [off, off+w) of rows of stride ld, host copies */
template <class E> Err compare_slices(const E *c, const E *r, size_t rows, size_t ld, size_t off, size_t w)
{
    double se = 0, sr = 0, me = 0, mr = 0;
    bool nan = false;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = off; j < off + w; j++) {
            const double a = to_d(c[i * ld + j]), b = to_d(r[i * ld + j]);
            if (!(a == a)) nan = true;
            se += (a - b) * (a - b);
            sr += b * b;
            me = std::max(me, fabs(a - b));
            mr = std::max(mr, fabs(b));
        }
    return {sqrt(se / (sr > 0 ? sr : 1)), me / (mr > 0 ? mr : 1), nan};
}
Err compare_host(size_t rows, size_t ld, size_t off, size_t w)
{
    return compare_slices(host_c.data(), host_r.data(), rows, ld, off, w);
}
double compare_lse(const float *c_d, const float *r_d, size_t n)
{
    std::vector<float> c(n), r(n);
    CK(cudaMemcpy(c.data(), c_d, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r.data(), r_d, n * 4, cudaMemcpyDeviceToHost));
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)c[i] - r[i]) / std::max(1.0, fabs((double)r[i]));
        w = std::max(w, e == e ? e : 1e30);
    }
    return w;
}

/* ATTN_TUNE_WARM=n: n warm-up runs instead of 3 (thousands keep the GPU
 * busy for seconds, so the timed runs see the clocks of a power-bound
 * training step rather than those of a short burst) */
int warm_runs()
{
    const char *e = getenv("ATTN_TUNE_WARM");
    const int n = e ? atoi(e) : 3;
    return n > 0 ? n : 3;
}
template <class F> float time_median(F f, int warm = warm_runs(), int reps = 15)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < warm; i++) f();
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a));
        f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

void setup(Bufs &u, Shape s, uint32_t seed)
{
    memset(&u, 0, sizeof u);
    u.sh = s;
    u.nqkv = (size_t)s.B * s.T * 3 * s.C;
    u.nout = (size_t)s.B * s.T * s.C;
    u.nl = (size_t)s.B * s.nh * s.T;
    CK(cudaMalloc(&u.qkv, u.nqkv * 2));
    CK(cudaMalloc(&u.dqkv, u.nqkv * 2));
    CK(cudaMalloc(&u.dqkv_ref, u.nqkv * 2));
    CK(cudaMalloc(&u.dout, u.nout * 2));
    CK(cudaMalloc(&u.out, u.nout * 2));
    CK(cudaMalloc(&u.out_ref, u.nout * 2));
    CK(cudaMalloc(&u.lse, u.nl * 4));
    CK(cudaMalloc(&u.lse_ref, u.nl * 4));
    const size_t sb = std::max(attn_ref_bwd_scratch(MS_BF16, s.B, s.T, s.C, s.nh),
                               ms_cuda_attention_bwd_scratch(MS_BF16, s.B, s.T, s.C, s.nh));
    CK(cudaMalloc(&u.scratch, sb));
    fill_rand<<<1024, 256>>>(u.qkv, u.nqkv, seed, 2.0f);
    fill_rand<<<1024, 256>>>(u.dout, u.nout, seed * 7 + 1, 1.0f);
    CK(cudaGetLastError());
    CK(cudaMemset(u.out_ref, 0xff, u.nout * 2));
    CK(cudaMemset(u.dqkv_ref, 0xff, u.nqkv * 2));
    attn_ref_fwd(&u.ctx, MS_BF16, u.out_ref, u.lse_ref, u.qkv, s.B, s.T, s.C, s.nh);
    attn_ref_bwd(&u.ctx, MS_BF16, u.dqkv_ref, u.dout, u.qkv, u.out_ref, u.lse_ref, u.scratch, s.B, s.T, s.C, s.nh);
    CK(cudaDeviceSynchronize());
    check_ctx(u.ctx, "reference");
}
void teardown(Bufs &u)
{
    host_r_src = nullptr;
    cudaFree(u.qkv); cudaFree(u.dqkv); cudaFree(u.dqkv_ref); cudaFree(u.dout); cudaFree(u.out);
    cudaFree(u.out_ref); cudaFree(u.lse); cudaFree(u.lse_ref); cudaFree(u.scratch);
}

struct Row { std::string shape, dir, cfg; float ms; double tf; double err; bool pass; };
std::vector<Row> rows;

void report(const Shape &sh, const char *dir, const char *cfg, float ms, double flops, double err, bool pass)
{
    const double tf = flops / (ms * 1e-3) / 1e12;
    printf("%-7s %-3s %-28s %8.3f ms %7.1f TFLOP/s  err %.2e  %s\n", sh.name, dir, cfg, ms, tf, err,
           pass ? "PASS" : "FAIL");
    fflush(stdout);
    rows.push_back({sh.name, dir, cfg, ms, tf, err, pass});
}

const double kTol = 1e-2;

void check_fwd_and_report(Bufs &u, const char *cfg, float ms)
{
    const Shape &s = u.sh;
    fetch(u.out, u.out_ref, u.nout);
    const Err e = compare_host((size_t)s.B * s.T, s.C, 0, s.C);
    const double le = compare_lse(u.lse, u.lse_ref, u.nl);
    const bool pass = !e.nan && e.l2 <= kTol && e.mx <= kTol && le <= kTol;
    report(u.sh, "fwd", cfg, ms, fwd_flops(s), std::max(std::max(e.l2, e.mx), le), pass);
}
void check_bwd_and_report(Bufs &u, const char *cfg, float ms)
{
    const Shape &s = u.sh;
    double w = 0;
    bool pass = true;
    fetch(u.dqkv, u.dqkv_ref, u.nqkv);
    for (int part = 0; part < 3; part++) {
        const Err e = compare_host((size_t)s.B * s.T, 3 * (size_t)s.C, (size_t)part * s.C, s.C);
        w = std::max(w, std::max(e.l2, e.mx));
        if (e.nan || e.l2 > kTol || e.mx > kTol) pass = false;
    }
    report(u.sh, "bwd", cfg, ms, 2.5 * fwd_flops(s), w, pass);
}

/* ---- candidates */
/* WG > 0: the warpgroup-MMA kernel with WG warpgroups and BC keys a tile */
/* PP: the warpgroups' ping-pong (attn_fwd_wg), where it applies */
template <int HD, class CF, int WG = 0, int BC = 64, int MINB = 1, bool PP = wg::fwd_pingpong<WG, BC>()>
void fwd_cand(Bufs &u, const char *cfg)
{
    const Shape &s = u.sh;
    cudaStream_t st = 0;
    auto f = [&] {
        if constexpr (WG > 0) fwd_wg<bf, HD, WG, BC, MINB, PP>(&u.ctx, st, u.out, u.lse, u.qkv, s.B, s.T, s.C, s.nh);
        else fwd_tc<bf, HD, CF>(&u.ctx, st, u.out, u.lse, u.qkv, s.B, s.T, s.C, s.nh);
    };
    CK(cudaMemset(u.out, 0xff, u.nout * 2));
    CK(cudaMemset(u.lse, 0xff, u.nl * 4));
    f();
    CK(cudaDeviceSynchronize());
    check_ctx(u.ctx, cfg);
    const float ms = time_median(f);
    check_ctx(u.ctx, cfg);
    CK(cudaMemset(u.out, 0xff, u.nout * 2));
    f(); /* the checked run comes after the timed ones, on poisoned output */
    CK(cudaDeviceSynchronize());
    check_fwd_and_report(u, cfg, ms);
}
/* WG: the warpgroup-MMA kernel (attention_wgmma.cuh) instead of attn_bwd_tc<CB> */
template <int HD, class CB, int WG = 0, int VAR = 0> void bwd_cand(Bufs &u, const char *cfg)
{
    const Shape &s = u.sh;
    cudaStream_t st = 0;
    float *D = static_cast<float *>(u.scratch);
    float *dqacc = reinterpret_cast<float *>(static_cast<char *>(u.scratch) + d_bytes(s.B, s.T, s.nh));
    const long long chunks = (long long)s.B * s.T * s.C / 8;
    auto f = [&] {
        attn_bwd_prep16<bf><<<blocks_for(chunks, 256), 256, 0, st>>>(D, dqacc, u.dout, u.out_ref, s.T, s.C, s.nh, chunks);
        if constexpr (WG > 0) bwd_wg<bf, HD, WG, VAR>(&u.ctx, st, u.dqkv, u.dout, u.qkv, u.lse_ref, D, dqacc, s.B, s.T, s.C, s.nh);
        else bwd_tc<bf, HD, CB>(&u.ctx, st, u.dqkv, u.dout, u.qkv, u.lse_ref, D, dqacc, s.B, s.T, s.C, s.nh);
    };
    CK(cudaMemset(u.dqkv, 0xff, u.nqkv * 2));
    f();
    CK(cudaDeviceSynchronize());
    check_ctx(u.ctx, cfg);
    const float ms = time_median(f);
    CK(cudaMemset(u.dqkv, 0xff, u.nqkv * 2));
    f();
    CK(cudaDeviceSynchronize());
    check_ctx(u.ctx, cfg);
    check_bwd_and_report(u, cfg, ms);
}
void ref_cands(Bufs &u)
{
    const Shape &s = u.sh;
    auto f = [&] { attn_ref_fwd(&u.ctx, MS_BF16, u.out, u.lse, u.qkv, s.B, s.T, s.C, s.nh); };
    const float ms = time_median(f);
    CK(cudaMemset(u.out, 0xff, u.nout * 2));
    f();
    CK(cudaDeviceSynchronize());
    check_fwd_and_report(u, "reference (pre-issue-15)", ms);
    auto g = [&] {
        attn_ref_bwd(&u.ctx, MS_BF16, u.dqkv, u.dout, u.qkv, u.out_ref, u.lse_ref, u.scratch, s.B, s.T, s.C, s.nh);
    };
    const float mb = time_median(g);
    CK(cudaMemset(u.dqkv, 0xff, u.nqkv * 2));
    g();
    CK(cudaDeviceSynchronize());
    check_bwd_and_report(u, "reference (pre-issue-15)", mb);
    /* the public entry points (the defaults) */
    auto h = [&] { ms_cuda_attention_fwd(&u.ctx, MS_BF16, u.out, u.lse, u.qkv, s.B, s.T, s.C, s.nh); };
    const float mh = time_median(h);
    CK(cudaMemset(u.out, 0xff, u.nout * 2));
    h();
    CK(cudaDeviceSynchronize());
    check_ctx(u.ctx, "default fwd");
    check_fwd_and_report(u, "default (ms_cuda_attention)", mh);
    auto k = [&] {
        ms_cuda_attention_bwd(&u.ctx, MS_BF16, u.dqkv, u.dout, u.qkv, u.out_ref, u.lse_ref, u.scratch, s.B, s.T, s.C,
                              s.nh);
    };
    const float mk = time_median(k);
    CK(cudaMemset(u.dqkv, 0xff, u.nqkv * 2));
    k();
    CK(cudaDeviceSynchronize());
    check_ctx(u.ctx, "default bwd");
    check_bwd_and_report(u, "default (ms_cuda_attention)", mk);
}

#define FWD(HD, NW, MW, BC, U) fwd_cand<HD, FwdConf<NW, MW, BC, U>>(u, "fwd NW=" #NW " MW=" #MW " BC=" #BC " QKU=" #U)
#define BWD(HD, NW, BR, KV) bwd_cand<HD, BwdConf<NW, BR, KV>>(u, "bwd NW=" #NW " BR=" #BR " KVREG=" #KV)

/* the warpgroup-MMA kernels' candidates, the same at every head size */
template <int HD> void wg_fwd_cands(Bufs &u)
{
    if (!wgmma_ready()) return;
    using CF = typename FwdCfg<HD>::type; /* unused by these candidates */
    fwd_cand<HD, CF, 1, 64, 2>(u, "fwd wgmma NWG=1 BC=64 MINB=2");
    if constexpr (HD == 64) fwd_cand<HD, CF, 1, 64, 3>(u, "fwd wgmma NWG=1 BC=64 MINB=3");
    fwd_cand<HD, CF, 2, 64, 1>(u, "fwd wgmma NWG=2 BC=64 MINB=1");
    fwd_cand<HD, CF, 2, 128, 1>(u, "fwd wgmma NWG=2 BC=128 MINB=1");
    fwd_cand<HD, CF, 2, 128, 1, false>(u, "fwd wgmma NWG=2 BC=128 no ping-pong");
    fwd_cand<HD, CF, 1, 128, 2>(u, "fwd wgmma NWG=1 BC=128 MINB=2");
    if constexpr (HD == 64) fwd_cand<HD, CF, 2, 64, 2>(u, "fwd wgmma NWG=2 BC=64 MINB=2");
}
template <int HD> void wg_bwd_cands(Bufs &u)
{
    if (!wgmma_ready()) return;
    using CB = typename BwdCfg<HD>::type; /* unused by these candidates */
    bwd_cand<HD, CB, 1>(u, "bwd wgmma NWG=1");
    bwd_cand<HD, CB, 2>(u, "bwd wgmma NWG=2");
    bwd_cand<HD, CB, 2, 1>(u, "bwd wgmma NWG=2 dQ stored (timing only)");
    bwd_cand<HD, CB, 2, 2>(u, "bwd wgmma NWG=2 no dQ (timing only)");
    bwd_cand<HD, CB, 2, 3>(u, "bwd wgmma NWG=2 dQ by atomics");
}

void run_hd128(Bufs &u, bool fwd, bool bwd)
{
    if (fwd) {
        FWD(128, 4, 2, 64, 4); /* the default */
        wg_fwd_cands<128>(u);
        FWD(128, 4, 1, 64, 0);
        FWD(128, 4, 2, 64, 1);
        FWD(128, 8, 2, 64, 4);
        FWD(128, 4, 2, 32, 4);
        FWD(128, 4, 2, 64, 4); /* again */
    }
    if (bwd) {
        BWD(128, 8, 32, false); /* the mma.sync default */
        wg_bwd_cands<128>(u);
        BWD(128, 4, 32, false);
        BWD(128, 2, 32, false);
        BWD(128, 4, 16, true);
        BWD(128, 8, 32, false); /* again */
    }
}
void run_hd64(Bufs &u, bool fwd, bool bwd)
{
    if (fwd) {
        FWD(64, 4, 1, 64, 0); /* the default */
        wg_fwd_cands<64>(u);
        FWD(64, 4, 2, 64, 4);
        FWD(64, 4, 2, 128, 4);
        FWD(64, 8, 1, 64, 0);
        FWD(64, 4, 1, 64, 0); /* again */
    }
    if (bwd) {
        BWD(64, 4, 64, true); /* the mma.sync default */
        wg_bwd_cands<64>(u);
        BWD(64, 4, 64, false);
        BWD(64, 8, 64, true);
        BWD(64, 4, 32, true);
        BWD(64, 4, 64, true); /* again */
    }
}


/* ---- fp32 (CUDA cores): `attn_tune f32`. Reference: the simple kernels
 * (one thread a row, fp32 math); tolerance normwise 1e-5, maxwise 1e-4 of
 * the largest reference value. FLOPs counted as for 16-bit. */
namespace f32t {

__global__ void fill_rand_f(float *p, size_t n, uint32_t seed, float amp)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
        p[i] = amp * ((x >> 8) * (1.f / 8388608.f) - 1.f);
    }
}

struct B32 {
    Shape sh;
    size_t nqkv, nout, nl;
    float *qkv, *dout, *out_ref, *out, *dqkv_ref, *dqkv, *lse_ref, *lse, *D;
    ms_kctx ctx;
};

/* host copies of n floats of a candidate's output and of the reference's */
void fetch32(std::vector<float> &c, std::vector<float> &r, const float *c_d, const float *r_d, size_t n)
{
    c.resize(n);
    r.resize(n);
    CK(cudaMemcpy(c.data(), c_d, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r.data(), r_d, n * 4, cudaMemcpyDeviceToHost));
}

void check_fwd(B32 &u, const char *cfg, float ms)
{
    const Shape &s = u.sh;
    std::vector<float> c, r;
    fetch32(c, r, u.out, u.out_ref, u.nout);
    const Err e = compare_slices(c.data(), r.data(), (size_t)s.B * s.T, s.C, 0, s.C);
    const double le = compare_lse(u.lse, u.lse_ref, u.nl);
    const double w = std::max(e.l2, e.mx * 0.1);
    const bool pass = !e.nan && e.l2 <= 1e-5 && e.mx <= 1e-4 && le <= 1e-5;
    report(u.sh, "fwd", cfg, ms, fwd_flops(s), std::max(w, le), pass);
}
void check_bwd(B32 &u, const char *cfg, float ms)
{
    const Shape &s = u.sh;
    std::vector<float> c, r;
    fetch32(c, r, u.dqkv, u.dqkv_ref, u.nqkv); /* once for dq, dk and dv */
    double w = 0;
    bool pass = true;
    for (int part = 0; part < 3; part++) {
        const Err e = compare_slices(c.data(), r.data(), (size_t)s.B * s.T, 3 * (size_t)s.C, (size_t)part * s.C, s.C);
        w = std::max(w, std::max(e.l2, e.mx * 0.1));
        if (e.nan || e.l2 > 1e-5 || e.mx > 1e-4) pass = false;
    }
    report(u.sh, "bwd", cfg, ms, 2.5 * fwd_flops(s), w, pass);
}

/* time f, then run it once more on poisoned outputs and check */
template <class F> void cand(B32 &u, bool fwd, const char *cfg, F f)
{
    f();
    CK(cudaDeviceSynchronize());
    check_ctx(u.ctx, cfg);
    const float ms = time_median(f);
    if (fwd) {
        CK(cudaMemset(u.out, 0xff, u.nout * 4));
        CK(cudaMemset(u.lse, 0xff, u.nl * 4));
    } else CK(cudaMemset(u.dqkv, 0xff, u.nqkv * 4));
    f();
    CK(cudaDeviceSynchronize());
    check_ctx(u.ctx, cfg);
    if (fwd) check_fwd(u, cfg, ms);
    else check_bwd(u, cfg, ms);
}
template <int HD, int BQ, int RT, int CT, int MB> void fwd_c(B32 &u, const char *cfg)
{
    const Shape &s = u.sh;
    cand(u, true, cfg, [&] {
        fwd_f32<HD, f32a::FwdF32<HD, BQ, RT, CT, MB>>(&u.ctx, 0, u.out, u.lse, u.qkv, s.B, s.T, s.C, s.nh);
    });
}
template <int HD, int BQ, int RT, int CT, int MB> void bwd_c(B32 &u, const char *cfg)
{
    const Shape &s = u.sh;
    cand(u, false, cfg, [&] {
        prep_f32(&u.ctx, 0, u.D, u.dqkv, u.dout, u.out_ref, s.B, s.T, s.C, s.nh);
        bwd_f32<HD, f32a::BwdF32<HD, BQ, RT, CT, MB>>(&u.ctx, 0, u.dqkv, u.dout, u.qkv, u.lse_ref, u.D, s.B, s.T, s.C,
                                                      s.nh);
    });
}
#define F32F(HD, BQ, RT, CT, MB) fwd_c<HD, BQ, RT, CT, MB>(u, "fp32 fwd BQ=" #BQ " RT=" #RT " CT=" #CT " MINB=" #MB)
#define F32B(HD, BQ, RT, CT, MB) bwd_c<HD, BQ, RT, CT, MB>(u, "fp32 bwd BQ=" #BQ " RT=" #RT " CT=" #CT " MINB=" #MB)

void run(Shape s, uint32_t seed)
{
    B32 u;
    memset(&u, 0, sizeof u);
    u.sh = s;
    u.nqkv = (size_t)s.B * s.T * 3 * s.C;
    u.nout = (size_t)s.B * s.T * s.C;
    u.nl = (size_t)s.B * s.nh * s.T;
    float **bufs[] = {&u.qkv, &u.dqkv, &u.dqkv_ref};
    for (float **b : bufs) CK(cudaMalloc(b, u.nqkv * 4));
    float **outs[] = {&u.dout, &u.out, &u.out_ref};
    for (float **b : outs) CK(cudaMalloc(b, u.nout * 4));
    CK(cudaMalloc(&u.lse, u.nl * 4));
    CK(cudaMalloc(&u.lse_ref, u.nl * 4));
    CK(cudaMalloc(&u.D, u.nl * 4));
    fill_rand_f<<<1024, 256>>>(u.qkv, u.nqkv, seed, 2.0f);
    fill_rand_f<<<1024, 256>>>(u.dout, u.nout, seed * 7 + 1, 1.0f);
    CK(cudaGetLastError());
    fwd_simple<float>(&u.ctx, 0, u.out_ref, u.lse_ref, u.qkv, s.B, s.T, s.C, s.nh);
    bwd_simple<float>(&u.ctx, 0, u.dqkv_ref, u.dout, u.qkv, u.out_ref, u.lse_ref, s.B, s.T, s.C, s.nh);
    CK(cudaDeviceSynchronize());
    check_ctx(u.ctx, "fp32 reference");
    cand(u, true, "fp32 default (ms_cuda_attention)",
         [&] { ms_cuda_attention_fwd(&u.ctx, MS_F32, u.out, u.lse, u.qkv, s.B, s.T, s.C, s.nh); });
    cand(u, false, "fp32 default (ms_cuda_attention)", [&] {
        ms_cuda_attention_bwd(&u.ctx, MS_F32, u.dqkv, u.dout, u.qkv, u.out_ref, u.lse_ref, u.D, s.B, s.T, s.C, s.nh);
    });
    if (s.C / s.nh == 64) {
        F32F(64, 64, 8, 4, 3);
        F32F(64, 128, 8, 8, 2);
        F32F(64, 128, 8, 8, 1);
        F32F(64, 128, 8, 4, 1);
        F32F(64, 64, 8, 8, 4);
        F32F(64, 64, 4, 4, 2);
        F32B(64, 64, 8, 4, 2);
        F32B(64, 128, 8, 8, 1);
        F32B(64, 128, 4, 8, 1);
        F32B(64, 64, 4, 4, 2);
    } else {
        F32F(128, 64, 8, 4, 2);
        F32F(128, 128, 8, 4, 1);
        F32F(128, 64, 4, 4, 2);
        F32B(128, 64, 4, 4, 1); /* BQ=128 needs 265 KiB of shared memory */
    }
    float *all[] = {u.qkv, u.dqkv, u.dqkv_ref, u.dout, u.out, u.out_ref, u.lse, u.lse_ref, u.D};
    for (float *b : all) cudaFree(b);
}

} // namespace f32t

} // namespace tune

int main(int argc, char **argv)
{
    using namespace tune;
    bool fwd = true, bwd = true, f32 = false;
    if (argc > 1 && !strcmp(argv[1], "f32")) f32 = true;
    if (argc > 1 && !strcmp(argv[1], "only=fwd")) bwd = false;
    if (argc > 1 && !strcmp(argv[1], "only=bwd")) fwd = false;
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, %d SMs, cc %d.%d, wgmma backward: %s\n", p.name, p.multiProcessorCount, p.major, p.minor,
           wgmma_ready() ? "yes" : "no");
    const Shape shapes[] = {{"seed17", 15, 2048, 2048, 16}, {"gpt2s", 16, 1024, 768, 12}};
    uint32_t seed = 12345;
    if (f32) {
        f32t::run({"gpt2s", 16, 1024, 768, 12}, seed);
        f32t::run({"hs128", 8, 1024, 1024, 8}, seed + 1);
    }
    for (const Shape &s : shapes) {
        if (f32) break;
        Bufs u;
        setup(u, s, seed += 7919);
        ref_cands(u);
        if (s.C / s.nh == 128) run_hd128(u, fwd, bwd);
        else run_hd64(u, fwd, bwd);
        teardown(u);
    }
    printf("\n== summary ==\n");
    int fails = 0;
    for (const Row &r : rows) {
        printf("%-7s %-3s %-28s %8.3f ms %7.1f TFLOP/s %s\n", r.shape.c_str(), r.dir.c_str(), r.cfg.c_str(), r.ms, r.tf,
               r.pass ? "PASS" : "FAIL");
        fails += !r.pass;
    }
    printf("%d FAIL\n", fails);
    return fails ? 1 : 0;
}
