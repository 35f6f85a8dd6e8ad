/* matmul.cu — D = epilogue(alpha op(A) op(B) + beta Cin + bias) through
 * cuBLASLt, row-major (see ops.h).
 *
 * Row-major trick: a row-major [M,N] matrix is the column-major [N,M] matrix
 * of its transpose, so D^T = op(B)^T op(A)^T is computed in cuBLASLt's
 * column-major terms with cuBLASLt's "A" = our B and "B" = our A, m = N,
 * n = M, k = K. Then cuBLASLt's bias (one value per row of its D) is our
 * bias[N] per column, and the GELU aux matrix has D's layout (ld = N).
 *
 * Types: A/B 32F/16BF/16F, C/D of type cd (= ab or 32F), compute
 * CUBLAS_COMPUTE_32F (true fp32, never TF32), scale 32F.
 *
 * Epilogues: BIAS, GELU_AUX(_BIAS) and DGELU are fused when cuBLASLt has an
 * algorithm for them (GELU in cuBLASLt is the tanh approximation, like ours;
 * the aux leading dimension must be a multiple of 8, so N % 8 != 0 is never
 * fused; fp32 D never fuses GELU, see k_fuse_gelu_f32). Otherwise, or when
 * the fused call fails, the product is computed plain (DEFAULT; for GELU
 * with a bias, BIAS where cuBLASLt has it) and a small vectorized kernel
 * applies bias / GELU / GELU' after it. Measured on an H200 (bench, GPT-2
 * small fp32): those kernels took 2.95 ms a step, 4.62 before the bias
 * moved into the product and the kernel to 16-byte accesses.
 *
 * Plans (layouts + the heuristic's algorithm, or "not supported") are cached
 * per (device, types, transposes, shape, epilogue, pointer alignments,
 * workspace size, pick) in a process-wide table, so the heuristic runs once
 * per shape. A fresh matmul descriptor (cheap, host-only) is built per call,
 * so concurrent calls from several threads never share a mutable object.
 *
 * The timed pick (ctx->matmul_pick): the heuristic's first algorithm is not
 * always the fastest for a shape. With matmul_pick 1, a shape's first
 * MM_CAND * MM_REPS calls run the heuristic's top MM_CAND algorithms in turn,
 * each between two CUDA events; with 2 no more calls are timed. The first
 * call after the timed ones have finished (all of them, or with 2 those
 * handed out) keeps the fastest for good: its quickest run, where it beats
 * the heuristic's first by MM_MARGIN (single runs vary by a percent or two,
 * and a worse pick would cost every later call). Every timed call is a real
 * one (each algorithm computes the same product, in its own summation
 * order), so the pick takes no memory, repeats no work and never waits for
 * the GPU; its cost is the slower candidates' few calls. The trainer times
 * in the first step of a run (which also allocates everything) and keeps
 * from the second. The choice depends on timing, so results may differ in
 * the last bits from run to run: only train picks, never a trial. */
#include "kernels/cuda/cuda_common.cuh"

#include <cublasLt.h>
#include <mutex>
#include <new>
#include <string.h>

namespace {

struct mm_key {
    int dev, ab, cd, ta, tb, M, N, K;
    int epi; /* cublasLtEpilogue_t */
    unsigned al_a, al_b, al_c, al_d, al_bias, al_aux;
    unsigned long long ws;
    int pick; /* ctx->matmul_pick: a picked plan is never shared with an unpicked one */
};

enum { MM_CAND = 8, MM_REPS = 2, MM_SLOTS_TIMED = MM_CAND * MM_REPS };
const float MM_MARGIN = 0.98f; /* another candidate's time must be under this x the first's */

/* A shape's timed pick (see the top); all fields under g_mu. Slot s runs
 * candidate s % n. */
struct mm_pick {
    int n;                             /* candidates (>= 2) */
    int issued;                        /* timed calls handed out */
    int chosen;                        /* the kept candidate; -1 while timing */
    cublasLtMatmulAlgo_t algo[MM_CAND]; /* the heuristic's order: [0] is its first */
    bool failed[MM_CAND];              /* cublasLtMatmul refused it: never timed again */
    enum { SLOT_OUT, SLOT_TIMED, SLOT_VOID } slot[MM_SLOTS_TIMED]; /* handed out, recorded, not timed */
    cudaEvent_t ev[MM_SLOTS_TIMED][2];
};

struct mm_plan {
    bool used, ok;
    mm_key key;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt A (= our B), B (= our A), C = D */
    cublasLtMatmulAlgo_t algo;
    mm_pick *pick; /* only in cached plans with the pick and >= 2 candidates */
};

enum { MM_SLOTS = 1024, MM_MAX_USED = 768 };
std::mutex g_mu;
mm_plan g_plans[MM_SLOTS];
int g_used;

/* fp32 results: cuBLASLt's fused GELU / DGELU were measured on an H200 to
 * differ from the tanhf formula by ~5e-5 relative (a fast tanh), beyond the
 * 1e-5 fp32 contract, so fp32 D takes the plain product + precise epilogue
 * kernel. 16-bit D fuses (that error is far below a bf16/f16 ulp). */
const bool k_fuse_gelu_f32 = false;

cudaDataType_t cuda_type(ms_dtype dt)
{
    return dt == MS_F32 ? CUDA_R_32F : dt == MS_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* Largest power of two (<= 256) dividing the address; 256 for NULL. */
unsigned align_class(const void *p)
{
    uintptr_t u = (uintptr_t)p, low = u & (~u + 1);
    return (low == 0 || low >= 256) ? 256u : (unsigned)low;
}

size_t key_hash(const mm_key &k)
{
    const unsigned char *b = reinterpret_cast<const unsigned char *>(&k);
    size_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof k; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

void destroy_events(mm_pick *pk)
{
    for (int i = 0; i < MM_SLOTS_TIMED; i++)
        for (int j = 0; j < 2; j++)
            if (pk->ev[i][j]) {
                cudaEventDestroy(pk->ev[i][j]);
                pk->ev[i][j] = NULL;
            }
}

void destroy_pick(mm_pick *pk)
{
    if (!pk) return;
    destroy_events(pk);
    delete pk;
}

void destroy_layouts(mm_plan &p)
{
    if (p.la) cublasLtMatrixLayoutDestroy(p.la);
    if (p.lb) cublasLtMatrixLayoutDestroy(p.lb);
    if (p.lc) cublasLtMatrixLayoutDestroy(p.lc);
    p.la = p.lb = p.lc = NULL;
}

cublasStatus_t make_desc(const mm_key &k, const void *bias, const void *aux, cublasLtMatmulDesc_t *out)
{
    cublasLtMatmulDesc_t d = NULL;
    cublasStatus_t st = cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    cublasOperation_t opa = k.tb ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt A = our B */
    cublasOperation_t opb = k.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)k.epi;
    int64_t ld_aux = k.N;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (st == CUBLAS_STATUS_SUCCESS && bias)
        st = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (st == CUBLAS_STATUS_SUCCESS && aux)
        st = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    if (st == CUBLAS_STATUS_SUCCESS && aux)
        st = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof ld_aux);
    if (st != CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulDescDestroy(d);
        return st;
    }
    *out = d;
    return CUBLAS_STATUS_SUCCESS;
}

/* Builds layouts and runs the heuristic: its first algorithm goes to p.algo,
 * and with k.pick its top MM_CAND (that state SUCCESS) to cand[*ncand].
 * Returns a cuBLASLt error only for failures other than "no algorithm"
 * (which leaves p.ok false). */
cublasStatus_t build_plan(ms_kctx *ctx, const mm_key &k, const void *bias, const void *aux, mm_plan &p,
                          cublasLtMatmulAlgo_t *cand, int *ncand)
{
    *ncand = 0;
    memset(&p, 0, sizeof p);
    p.key = k;
    cudaDataType_t tab = cuda_type((ms_dtype)k.ab), tcd = cuda_type((ms_dtype)k.cd);
    /* cuBLASLt A = our B: [K,N] row-major is N x K column-major (ld N); stored [N,K] it is K x N (ld K) */
    cublasStatus_t st = k.tb ? cublasLtMatrixLayoutCreate(&p.la, tab, k.K, k.N, k.K)
                             : cublasLtMatrixLayoutCreate(&p.la, tab, k.N, k.K, k.N);
    /* cuBLASLt B = our A: [M,K] row-major is K x M (ld K); stored [K,M] it is M x K (ld M) */
    if (st == CUBLAS_STATUS_SUCCESS)
        st = k.ta ? cublasLtMatrixLayoutCreate(&p.lb, tab, k.M, k.K, k.M)
                  : cublasLtMatrixLayoutCreate(&p.lb, tab, k.K, k.M, k.K);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&p.lc, tcd, k.N, k.M, k.N);
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    if (st == CUBLAS_STATUS_SUCCESS) st = make_desc(k, bias, aux, &desc);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = k.ws;
    uint32_t al_a = k.al_b, al_b = k.al_a, al_c = k.al_c, al_d = k.al_d; /* operands swapped */
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                                  sizeof al_a);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                                  sizeof al_b);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c,
                                                  sizeof al_c);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d,
                                                  sizeof al_d);
    if (st == CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulHeuristicResult_t res[MM_CAND];
        memset(res, 0, sizeof res);
        int n = 0;
        cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)ctx->lt, desc, p.la, p.lb, p.lc,
                                                           p.lc, pref, k.pick ? MM_CAND : 1, res, &n);
        /* NOT_SUPPORTED (or no result) means: no algorithm for this combination */
        if (hs == CUBLAS_STATUS_SUCCESS && n > 0 && res[0].state == CUBLAS_STATUS_SUCCESS) {
            p.algo = res[0].algo;
            p.ok = true;
            for (int i = 0; k.pick && i < n && i < MM_CAND; i++)
                if (res[i].state == CUBLAS_STATUS_SUCCESS) cand[(*ncand)++] = res[i].algo;
        } else if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED &&
                   hs != CUBLAS_STATUS_INVALID_VALUE) {
            st = hs;
        }
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (st != CUBLAS_STATUS_SUCCESS) destroy_layouts(p);
    return st;
}

/* Copies the plan for k into *out (from the cache, building it on a miss).
 * *owned says the caller must destroy its layouts (cache full). */
cublasStatus_t get_plan(ms_kctx *ctx, const mm_key &k, const void *bias, const void *aux, mm_plan *out,
                        bool *owned)
{
    std::lock_guard<std::mutex> lock(g_mu);
    size_t slot = key_hash(k) % MM_SLOTS;
    for (int probe = 0; probe < MM_SLOTS; probe++, slot = (slot + 1) % MM_SLOTS) {
        mm_plan &p = g_plans[slot];
        if (!p.used) break;
        if (memcmp(&p.key, &k, sizeof k) == 0) {
            *out = p;
            *owned = false;
            return CUBLAS_STATUS_SUCCESS;
        }
    }
    mm_plan fresh;
    cublasLtMatmulAlgo_t cand[MM_CAND];
    int ncand = 0;
    cublasStatus_t st = build_plan(ctx, k, bias, aux, fresh, cand, &ncand);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    *owned = true;
    if (g_used < MM_MAX_USED && !g_plans[slot].used) { /* slot: the empty one the probe stopped at */
        fresh.used = true;
        if (ncand >= 2) { /* without a second candidate there is nothing to pick */
            fresh.pick = new (std::nothrow) mm_pick();
            if (fresh.pick) { /* value-initialised: no events, every slot SLOT_OUT */
                fresh.pick->n = ncand;
                fresh.pick->chosen = -1;
                memcpy(fresh.pick->algo, cand, sizeof cand[0] * (size_t)ncand);
            }
        }
        g_plans[slot] = fresh;
        g_used++;
        *owned = false;
    }
    *out = fresh;
    return CUBLAS_STATUS_SUCCESS;
}

void mark_unsupported(const mm_key &k)
{
    std::lock_guard<std::mutex> lock(g_mu);
    size_t slot = key_hash(k) % MM_SLOTS;
    for (int probe = 0; probe < MM_SLOTS; probe++, slot = (slot + 1) % MM_SLOTS) {
        mm_plan &p = g_plans[slot];
        if (!p.used) return;
        if (memcmp(&p.key, &k, sizeof k) == 0) {
            p.ok = false;
            return;
        }
    }
}

/* The error state must be clean before the pick queries events, so that an
 * error it then sees is its own and can be cleared, never a launch's. */
bool last_error_clean() { return cudaPeekAtLastError() == cudaSuccess; }
void clear_own_error()
{
    if (cudaPeekAtLastError() != cudaSuccess) cudaGetLastError();
}

/* Keeps the fastest candidate once every timed call handed out has
 * finished; returns without waiting otherwise. Under g_mu. */
void pick_settle(mm_pick *pk)
{
    if (!last_error_clean()) return;
    for (int s = 0; s < pk->issued; s++) {
        if (pk->slot[s] == mm_pick::SLOT_OUT) return; /* handed out, not yet recorded */
        if (pk->slot[s] != mm_pick::SLOT_TIMED) continue;
        cudaError_t q = cudaEventQuery(pk->ev[s][1]);
        if (q == cudaErrorNotReady) {
            clear_own_error();
            return;
        }
        if (q != cudaSuccess) {
            clear_own_error();
            pk->slot[s] = mm_pick::SLOT_VOID;
        }
    }
    float best[MM_CAND];
    for (int c = 0; c < MM_CAND; c++) best[c] = -1.0f;
    for (int s = 0; s < pk->issued; s++) {
        float ms = 0.0f;
        if (pk->slot[s] != mm_pick::SLOT_TIMED) continue;
        if (cudaEventElapsedTime(&ms, pk->ev[s][0], pk->ev[s][1]) != cudaSuccess) {
            clear_own_error();
            continue;
        }
        int c = s % pk->n;
        if (!pk->failed[c] && (best[c] < 0.0f || ms < best[c])) best[c] = ms;
    }
    int chosen = 0; /* nothing timed: the heuristic's first */
    for (int c = 1; c < pk->n; c++)
        if (best[c] >= 0.0f && (best[chosen] < 0.0f || best[c] < (chosen ? 1.0f : MM_MARGIN) * best[chosen]))
            chosen = c;
    pk->chosen = chosen;
    destroy_events(pk);
}

/* The algorithm for this call of a picked shape (mode: ctx->matmul_pick).
 * Returns the timed slot the caller records events for, or -1 for an
 * untimed call. */
int pick_next(mm_pick *pk, int mode, cublasLtMatmulAlgo_t *algo)
{
    std::lock_guard<std::mutex> lock(g_mu);
    *algo = pk->algo[0];
    const bool timing = mode == 1 && pk->issued < MM_SLOTS_TIMED;
    if (pk->chosen < 0 && !timing) pick_settle(pk);
    if (pk->chosen >= 0) {
        *algo = pk->algo[pk->chosen];
        return -1;
    }
    if (!timing) return -1; /* still running: the first, untimed */
    int s = pk->issued++, c = s % pk->n;
    bool ok = !pk->failed[c] && last_error_clean();
    for (int j = 0; ok && j < 2; j++)
        if (cudaEventCreate(&pk->ev[s][j]) != cudaSuccess) {
            clear_own_error();
            pk->ev[s][j] = NULL;
            ok = false;
        }
    if (!ok) {
        pk->slot[s] = mm_pick::SLOT_VOID;
        return -1;
    }
    *algo = pk->algo[c];
    return s;
}

/* After the timed call of slot s: recorded (both events), or void, with the
 * candidate marked failed when cublasLtMatmul refused it. */
void pick_done(mm_pick *pk, int s, bool recorded, bool refused)
{
    std::lock_guard<std::mutex> lock(g_mu);
    pk->slot[s] = recorded ? mm_pick::SLOT_TIMED : mm_pick::SLOT_VOID;
    if (refused) pk->failed[s % pk->n] = true;
}

struct mm_call {
    ms_dtype ab, cd;
    int ta, tb, M, N, K;
    float alpha, beta;
    const void *A, *B, *C;
    void *D;
};

/* One cublasLtMatmul with the given epilogue. Returns 0 on success, 1 when
 * cuBLASLt cannot do it (no algorithm, or the call failed: nothing recorded),
 * -1 on an error that was recorded in ctx. */
int run_lt(ms_kctx *ctx, const mm_call &c, cublasLtEpilogue_t epi, const void *bias, const void *aux)
{
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        ms_cuda_check(ctx, "matmul: cudaGetDevice");
        return -1;
    }
    mm_key k;
    memset(&k, 0, sizeof k); /* padding takes part in hashing and comparison */
    k.dev = dev;
    k.ab = c.ab;
    k.cd = c.cd;
    k.ta = c.ta;
    k.tb = c.tb;
    k.M = c.M;
    k.N = c.N;
    k.K = c.K;
    k.epi = (int)epi;
    k.al_a = align_class(c.A);
    k.al_b = align_class(c.B);
    k.al_c = align_class(c.C);
    k.al_d = align_class(c.D);
    k.al_bias = bias ? align_class(bias) : 0;
    k.al_aux = aux ? align_class(aux) : 0;
    k.ws = ctx->workspace ? ctx->workspace_bytes : 0;
    k.pick = ctx->matmul_pick ? 1 : 0;

    mm_plan p;
    bool owned = false;
    cublasStatus_t st = get_plan(ctx, k, bias, aux, &p, &owned);
    if (st != CUBLAS_STATUS_SUCCESS) {
        ms_cuda_fail(ctx, MS_CUDA_EBLAS, "matmul: cuBLASLt setup: %s", cublasLtGetStatusString(st));
        return -1;
    }
    int rc = 1;
    if (p.ok) {
        cublasLtMatmulDesc_t desc = NULL;
        st = make_desc(k, bias, aux, &desc);
        if (st == CUBLAS_STATUS_SUCCESS) {
            cublasLtMatmulAlgo_t algo = p.algo;
            int slot = p.pick ? pick_next(p.pick, ctx->matmul_pick, &algo) : -1;
            cudaStream_t stream = ms_stream(ctx);
            bool rec = slot >= 0 && cudaEventRecord(p.pick->ev[slot][0], stream) == cudaSuccess;
            st = cublasLtMatmul((cublasLtHandle_t)ctx->lt, desc, &c.alpha, c.B, p.la, c.A, p.lb, &c.beta, c.C,
                                p.lc, c.D, p.lc, &algo, k.ws ? ctx->workspace : NULL, (size_t)k.ws, stream);
            if (slot >= 0) {
                bool refused = st != CUBLAS_STATUS_SUCCESS;
                rec = rec && !refused && cudaEventRecord(p.pick->ev[slot][1], stream) == cudaSuccess;
                pick_done(p.pick, slot, rec, refused);
                if (refused && memcmp(&algo, &p.algo, sizeof algo) != 0) /* the heuristic's first, then */
                    st = cublasLtMatmul((cublasLtHandle_t)ctx->lt, desc, &c.alpha, c.B, p.la, c.A, p.lb, &c.beta,
                                        c.C, p.lc, c.D, p.lc, &p.algo, k.ws ? ctx->workspace : NULL,
                                        (size_t)k.ws, stream);
            }
            cublasLtMatmulDescDestroy(desc);
            if (st == CUBLAS_STATUS_SUCCESS) rc = 0;
        }
        if (rc != 0) {
            if (owned) p.ok = false;
            else mark_unsupported(k);
        }
    }
    if (owned) destroy_layouts(p);
    return rc;
}

/* Epilogue applied after a plain product (or, with from_zero, for K == 0,
 * where the product is 0). v = product element (src) or beta*Cin;
 * NONE: D = v + bias; GELU: aux = v + bias, D = gelu(v + bias);
 * DGELU: D = v * gelu'(aux). src may be D (NONE, DGELU) or aux (GELU; aux
 * is then rewritten only when a bias changes it). V elements a thread (one
 * 16-byte access each when the host saw N % V == 0 and aligned buffers). */
template <typename T, int V>
__global__ void mm_epilogue_k(T *D, const T *src, const T *cin, float beta, const T *bias, T *aux, int epi,
                              int from_zero, int M, int N)
{
    const size_t total = (size_t)M * N / V, stride = ms_nthreads();
    const bool write_aux = epi == MS_EPI_GELU && (bias || src != aux);
    for (size_t i = ms_tid(); i < total; i += stride) {
        const size_t e = i * V;
        float v[V];
        if (from_zero) {
            if (beta != 0.0f) ms_ldv<V>(v, cin + e);
#pragma unroll
            for (int k = 0; k < V; k++) v[k] = beta != 0.0f ? beta * v[k] : 0.0f;
        } else {
            ms_ldv<V>(v, src + e);
        }
        if (epi == MS_EPI_DGELU) {
            float a[V];
            ms_ldv<V>(a, aux + e);
#pragma unroll
            for (int k = 0; k < V; k++) v[k] *= ms_gelu_grad<T>(a[k]);
            ms_stv<V>(D + e, v);
            continue;
        }
        if (bias) {
            float b[V];
            ms_ldv<V>(b, bias + e % N);
#pragma unroll
            for (int k = 0; k < V; k++) v[k] += b[k];
        }
        if (epi == MS_EPI_GELU) {
            if (write_aux) ms_stv<V>(aux + e, v);
#pragma unroll
            for (int k = 0; k < V; k++) v[k] = ms_gelu<T>(v[k]);
        }
        ms_stv<V>(D + e, v);
    }
}

template <typename T>
void epilogue_t(ms_kctx *ctx, T *D, const T *src, const T *cin, float beta, const T *bias, T *aux, int epi,
                int from_zero, int M, int N)
{
    constexpr int V = 16 / sizeof(T);
    const bool vec = N % V == 0 && ms_al(D, 16) && (!src || ms_al(src, 16)) && (!cin || ms_al(cin, 16)) &&
                     (!bias || ms_al(bias, 16)) && (!aux || ms_al(aux, 16));
    const int threads = 256;
    const unsigned grid = ms_grid((size_t)M * N / (vec ? V : 1), threads, 8);
    if (vec)
        mm_epilogue_k<T, V><<<grid, threads, 0, ms_stream(ctx)>>>(D, src, cin, beta, bias, aux, epi, from_zero, M, N);
    else
        mm_epilogue_k<T, 1><<<grid, threads, 0, ms_stream(ctx)>>>(D, src, cin, beta, bias, aux, epi, from_zero, M, N);
}

void launch_epilogue(ms_kctx *ctx, ms_dtype cd, void *D, const void *src, const void *cin, float beta,
                     const void *bias, void *aux, ms_epilogue epi, int from_zero, int M, int N)
{
    MS_DISPATCH(cd, T,
                epilogue_t<T>(ctx, (T *)D, (const T *)src, (const T *)cin, beta, (const T *)bias, (T *)aux, (int)epi,
                              from_zero, M, N));
    ms_cuda_check(ctx, "matmul epilogue");
}

const char *check_args(ms_dtype ab, ms_dtype cd, int M, int N, int K, const void *A, const void *B, float beta,
                       const void *Cin, void *D, const void *bias, ms_epilogue epi, void *aux)
{
    if (!ms_dt_ok(ab) || !ms_dt_ok(cd) || (cd != ab && cd != MS_F32)) return "dtype pair (cd must be ab or f32)";
    if (M < 0 || N < 0 || K < 0) return "negative size";
    if (epi != MS_EPI_NONE && epi != MS_EPI_GELU && epi != MS_EPI_DGELU) return "unknown epilogue";
    if (M && N && !D) return "D is NULL";
    if (M && N && K && (!A || !B)) return "A or B is NULL";
    if (beta != 0.0f && !Cin && M && N) return "beta != 0 with Cin NULL";
    if (epi != MS_EPI_NONE && beta != 0.0f) return "GELU epilogues need beta = 0";
    if (epi == MS_EPI_DGELU && bias) return "DGELU epilogue takes no bias";
    if (epi != MS_EPI_NONE && !aux && M && N) return "GELU epilogues need aux";
    if (epi == MS_EPI_GELU && aux == D && M && N) return "GELU aux must not be D";
    return NULL;
}

} // namespace

extern "C" void ms_cuda_matmul(ms_kctx *ctx, ms_dtype ab, ms_dtype cd, int transA, int transB, int M, int N,
                               int K, float alpha, const void *A, const void *B, float beta, const void *Cin,
                               void *D, const void *bias, ms_epilogue epi, void *aux)
{
    if (!ctx) return;
    const char *why = check_args(ab, cd, M, N, K, A, B, beta, Cin, D, bias, epi, aux);
    if (why) {
        ms_cuda_fail(ctx, MS_CUDA_EARG, "matmul: %s (M=%d N=%d K=%d)", why, M, N, K);
        return;
    }
    if (M == 0 || N == 0) return;
    if (K == 0) { /* empty product: only beta*Cin, bias and the epilogue remain */
        launch_epilogue(ctx, cd, D, NULL, Cin, beta, bias, aux, epi, 1, M, N);
        return;
    }
    mm_call c;
    c.ab = ab;
    c.cd = cd;
    c.ta = transA ? 1 : 0;
    c.tb = transB ? 1 : 0;
    c.M = M;
    c.N = N;
    c.K = K;
    c.alpha = alpha;
    c.beta = beta;
    c.A = A;
    c.B = B;
    c.C = beta != 0.0f ? Cin : D; /* with beta = 0 C is not read */
    c.D = D;

    /* 1. the fused epilogue */
    cublasLtEpilogue_t fused = CUBLASLT_EPILOGUE_DEFAULT;
    bool try_fused = true;
    if (epi == MS_EPI_NONE) {
        fused = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    } else {
        fused = epi == MS_EPI_GELU ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                                   : CUBLASLT_EPILOGUE_DGELU;
        try_fused = N % 8 == 0 && (cd != MS_F32 || k_fuse_gelu_f32); /* aux ld must be a multiple of 8 */
    }
    int rc = 1;
    if (try_fused) {
        rc = run_lt(ctx, c, fused, bias, epi == MS_EPI_NONE ? NULL : aux);
        if (rc <= 0) return; /* done, or an error was recorded */
        if (fused == CUBLASLT_EPILOGUE_DEFAULT) {
            ms_cuda_fail(ctx, MS_CUDA_EBLAS, "matmul: cuBLASLt has no algorithm (%s x %s -> %s, M=%d N=%d K=%d)",
                         ms_dtype_name(ab), ms_dtype_name(ab), ms_dtype_name(cd), M, N, K);
            return;
        }
    }

    /* 2. fallback: plain product, then the epilogue kernel. GELU's
     * pre-activation goes to aux (beta = 0), with the bias added by
     * cuBLASLt where it can (fp32 D: the kernel then only reads aux and
     * writes D, a third less traffic) */
    mm_call plain = c;
    if (epi == MS_EPI_GELU) plain.D = aux, plain.C = aux;
    rc = 1;
    if (epi == MS_EPI_GELU && bias) {
        rc = run_lt(ctx, plain, CUBLASLT_EPILOGUE_BIAS, bias, NULL);
        if (rc < 0) return;
        if (rc == 0) bias = NULL; /* added */
    }
    if (rc > 0) rc = run_lt(ctx, plain, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL);
    if (rc < 0) return;
    if (rc > 0) {
        ms_cuda_fail(ctx, MS_CUDA_EBLAS, "matmul: cuBLASLt has no algorithm (%s x %s -> %s, M=%d N=%d K=%d)",
                     ms_dtype_name(ab), ms_dtype_name(ab), ms_dtype_name(cd), M, N, K);
        return;
    }
    launch_epilogue(ctx, cd, D, plain.D, NULL, 0.0f, bias, aux, epi, 0, M, N);
}

extern "C" void ms_cuda_matmul_settle(void)
{
    std::lock_guard<std::mutex> lock(g_mu);
    for (int i = 0; i < MM_SLOTS; i++)
        if (g_plans[i].used && g_plans[i].pick && g_plans[i].pick->chosen < 0) pick_settle(g_plans[i].pick);
}

void ms_cuda_matmul_cache_clear(void)
{
    std::lock_guard<std::mutex> lock(g_mu);
    for (int i = 0; i < MM_SLOTS; i++)
        if (g_plans[i].used) {
            destroy_layouts(g_plans[i]);
            destroy_pick(g_plans[i].pick);
        }
    memset(g_plans, 0, sizeof g_plans);
    g_used = 0;
}
