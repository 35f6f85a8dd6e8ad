/* gemm_alts.c — what other cuBLASLt choices would give on the trainer's bf16
 * products, shape by shape: a developer's tool of issue 15, like gemm_pick.
 * Where gemm_pick times the trainer's own calls (kernels/cuda/matmul.cu)
 * with its pick, this one calls cuBLASLt directly, in the same row-major
 * terms (D^T = op(B)^T op(A)^T), and for each product times:
 *   - every algorithm of the heuristic's top CAND (not only matmul.cu's 8),
 *     printing the heuristic's first and the fastest (with its rank);
 *   - variants of the call: the epilogue left out (plain product, bias only),
 *     a weight gradient written as bf16 (beta 0) instead of accumulated into
 *     fp32 (beta 1), DGELU with the bias gradient fused (DGELU_BGRAD), a
 *     weight gradient with its bias gradient fused (BGRADB; BGRADA, the
 *     other operand, as a check that the heuristic tells them apart).
 * Each algorithm: 3 warm-up calls, then ms a call over CALLS back-to-back
 * calls between CUDA events. Operands hold uniform random values in [-1, 1).
 *
 * With --graph, each algorithm's CALLS calls are captured into a CUDA graph,
 * as the trainer's step is, and the graph is timed (the best of 3 replays):
 * cuBLASLt adds a memset node before the kernel of some algorithms (they
 * zero counters in the workspace), and in a graph each costs about 3.7 us
 * of launch gaps beside its own time. Every product is then also tried
 * with no workspace (the heuristic's algorithms that need none), and the
 * "ms" column says how many memset nodes the fastest's call adds.
 *
 *   gemm_alts [--graph] TOKENS D_MODEL VOCAB HEAD_ROWS   e.g. 16384 768 50304 4096
 *
 * Exit 0, or 1 on bad arguments or a CUDA error. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/fill_uniform.h"

#define CAND 32
#define CALLS 10
#define WS_BYTES (32u << 20)

static cublasLtHandle_t g_lt;
static void *g_ws;
static cudaStream_t g_st;
static int g_graph;        /* --graph: time captured graphs of the calls */
static size_t g_ws_bytes = WS_BYTES; /* the workspace the heuristic and the calls get */

typedef struct call {
    int ta, tb, M, N, K;
    int f32_out; /* 1: fp32 D; 2: bf16 D with an fp32 bias gradient (DGELU_BGRAD) */
    float beta;
    cublasLtEpilogue_t epi;
    const void *a, *b, *c;
    void *d, *bias, *aux;
} call;

typedef struct result {
    int n;              /* algorithms that ran */
    double first, best; /* ms a call: the heuristic's first, the fastest */
    int best_rank;
    int tile, stages, cluster; /* the fastest's config attributes */
    int memsets;               /* memset nodes one call of the fastest adds (--graph) */
} result;

/* One call of the algorithm, into g_st (captured or not). */
static int call_once(const call *c, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                     cublasLtMatrixLayout_t lc, const cublasLtMatmulAlgo_t *algo)
{
    float alpha = 1.0f;
    return cublasLtMatmul(g_lt, desc, &alpha, c->b, la, c->a, lb, &c->beta, c->c ? c->c : c->d, lc, c->d, lc, algo,
                          g_ws_bytes ? g_ws : NULL, g_ws_bytes, g_st) == CUBLAS_STATUS_SUCCESS
               ? 0
               : -1;
}

/* --graph: CALLS calls captured into one graph, replayed; ms a call (best of
 * 3 replays after one warm-up), and the memset nodes a call adds. */
static double time_graph(const call *c, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                         cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, const cublasLtMatmulAlgo_t *algo,
                         int *memsets)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    double best = -1;
    *memsets = 0;
    if (cudaStreamBeginCapture(g_st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return -1;
    int bad = 0;
    for (int i = 0; i < CALLS && !bad; i++) bad = call_once(c, desc, la, lb, lc, algo);
    if (cudaStreamEndCapture(g_st, &g) != cudaSuccess || bad) goto out;
    size_t n = 0;
    if (cudaGraphGetNodes(g, NULL, &n) != cudaSuccess) goto out;
    cudaGraphNode_t *nodes = malloc(n * sizeof *nodes);
    if (!nodes || cudaGraphGetNodes(g, nodes, &n) != cudaSuccess) {
        free(nodes);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        enum cudaGraphNodeType t;
        if (cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess && t == cudaGraphNodeTypeMemset) (*memsets)++;
    }
    free(nodes);
    *memsets /= CALLS;
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) goto out;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int r = 0; r < 4; r++) {
        cudaEventRecord(e0, g_st);
        cudaGraphLaunch(ge, g_st);
        cudaEventRecord(e1, g_st);
        float t;
        if (cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&t, e0, e1) != cudaSuccess) break;
        if (r > 0 && (best < 0 || t / CALLS < best)) best = t / CALLS;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
out:
    cudaGetLastError(); /* a refused call or capture is this candidate's, not the next one's */
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    return best;
}

static double time_algo(const call *c, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                        cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, const cublasLtMatmulAlgo_t *algo)
{
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double ms = -1;
    for (int i = 0; i < 3 + CALLS; i++) {
        if (i == 3) cudaEventRecord(e0, g_st);
        if (call_once(c, desc, la, lb, lc, algo)) goto out;
    }
    cudaEventRecord(e1, g_st);
    float t;
    if (cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&t, e0, e1) == cudaSuccess) ms = t / CALLS;
out:
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms;
}

static result run(const call *c)
{
    result r = { 0, -1, -1, -1, 0, 0, 0, 0 };
    cudaDataType_t tcd = c->f32_out == 1 ? CUDA_R_32F : CUDA_R_16BF; /* 2: bf16 D, fp32 bias gradient */
    cublasLtMatrixLayout_t la, lb, lc;
    if (c->tb) cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, c->K, c->N, c->K);
    else cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, c->N, c->K, c->N);
    if (c->ta) cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, c->M, c->K, c->M);
    else cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, c->K, c->M, c->K);
    cublasLtMatrixLayoutCreate(&lc, tcd, c->N, c->M, c->N);
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t opa = c->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = c->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c->epi, sizeof c->epi);
    if (c->bias) cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c->bias, sizeof c->bias);
    if ((c->epi == CUBLASLT_EPILOGUE_DGELU_BGRAD && c->f32_out == 2) || c->epi == CUBLASLT_EPILOGUE_BGRADA ||
        c->epi == CUBLASLT_EPILOGUE_BGRADB) {
        cudaDataType_t bt = CUDA_R_32F; /* the bias gradient in fp32, as the trainer keeps it */
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    }
    if (c->aux) {
        int64_t ld = c->N;
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c->aux, sizeof c->aux);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
    }
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = g_ws_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res[CAND];
    int n = 0;
    if (cublasLtMatmulAlgoGetHeuristic(g_lt, desc, la, lb, lc, lc, pref, CAND, res, &n) == CUBLAS_STATUS_SUCCESS) {
        for (int i = 0; i < n; i++) {
            if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
            int memsets = 0;
            double t = g_graph ? time_graph(c, desc, la, lb, lc, &res[i].algo, &memsets)
                               : time_algo(c, desc, la, lb, lc, &res[i].algo);
            if (t < 0) continue;
            r.n++;
            if (i == 0) r.first = t;
            if (r.best < 0 || t < r.best) {
                r.best = t;
                r.best_rank = i;
                r.memsets = memsets;
                size_t got;
                cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &r.tile,
                                                     sizeof r.tile, &got);
                cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &r.stages,
                                                     sizeof r.stages, &got);
                cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                                     &r.cluster, sizeof r.cluster, &got);
            }
        }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    return r;
}

static void show_one(const char *name, const char *variant, const call *c)
{
    result r = run(c);
    double tf = r.best > 0 ? 2.0 * c->M * c->N * c->K / (r.best * 1e9) : 0;
    printf("%-16s %-26s %6d %6d %6d %3d %8.4f %8.4f %4d %5.0f %2d  tile %d stages %d cluster %d\n", name, variant,
           c->M, c->N, c->K, r.n, r.first, r.best, r.best_rank, tf, r.memsets, r.tile, r.stages, r.cluster);
    fflush(stdout);
}

/* Each variant as the trainer's workspace allows, and with --graph also
 * with none. */
static void show(const char *name, const char *variant, const call *c)
{
    g_ws_bytes = WS_BYTES;
    show_one(name, variant, c);
    if (!g_graph) return;
    char v[64];
    snprintf(v, sizeof v, "%s, no ws", variant);
    g_ws_bytes = 0;
    show_one(name, v, c);
    g_ws_bytes = WS_BYTES;
}

static int parse(const char *s, int *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > (1L << 30)) return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    int N, C, V, R;
    if (argc > 1 && strcmp(argv[1], "--graph") == 0) {
        g_graph = 1;
        argc--;
        argv++;
    }
    if (argc != 5 || parse(argv[1], &N) || parse(argv[2], &C) || parse(argv[3], &V) || parse(argv[4], &R)) {
        fprintf(stderr, "usage: gemm_alts [--graph] TOKENS D_MODEL VOCAB HEAD_ROWS (positive integers)\n");
        return 1;
    }
    int H = 4 * C;
    size_t big = (size_t)N * H;
    if ((size_t)R * V > big) big = (size_t)R * V;
    if ((size_t)V * C > big) big = (size_t)V * C;
    void *a, *b, *c, *d, *aux, *bias;
    if (cudaMalloc(&a, big * 2) || cudaMalloc(&b, big * 2) || cudaMalloc(&c, big * 2) || cudaMalloc(&d, big * 4) ||
        cudaMalloc(&aux, big * 2) || cudaMalloc(&bias, (size_t)4 * (V + H)) || cudaMalloc(&g_ws, WS_BYTES) ||
        cudaStreamCreate(&g_st) || cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "gemm_alts: no GPU, too little memory, or no cuBLASLt\n");
        return 1;
    }
    if (fill_uniform(a, big, 0, 1) || fill_uniform(b, big, 0, 2) || fill_uniform(c, big, 0, 3) ||
        fill_uniform(aux, big, 0, 4) || fill_uniform(bias, (size_t)2 * (V + H), 0, 5) || fill_uniform(d, big, 1, 6)) {
        fprintf(stderr, "gemm_alts: filling the operands failed\n");
        return 1;
    }
    printf("%-16s %-26s %6s %6s %6s %3s %8s %8s %4s %5s %2s\n", "product", "variant", "M", "N", "K", "alg",
           "first", "best", "rank", "TF/s", "ms");
    const cublasLtEpilogue_t E0 = CUBLASLT_EPILOGUE_DEFAULT, EB = CUBLASLT_EPILOGUE_BIAS;
    /* forward: D = A W^T (+ bias) (+ residual) */
    struct { const char *name; int n, k, resid; } fw[] = {
        { "qkv fwd", 3 * C, C, 0 }, { "attproj fwd", C, C, 1 }, { "fc fwd", H, C, 0 }, { "proj fwd", C, H, 1 } };
    for (int i = 0; i < 4; i++) {
        call x = { 0, 1, N, fw[i].n, fw[i].k, 0, fw[i].resid ? 1.0f : 0.0f, EB, a, b, fw[i].resid ? c : NULL, d,
                   bias, NULL };
        show(fw[i].name, fw[i].resid ? "bias+resid (trainer)" : "bias (trainer)", &x);
        x.epi = E0;
        x.bias = NULL;
        show(fw[i].name, fw[i].resid ? "plain+resid" : "plain", &x);
        if (fw[i].resid) {
            x.beta = 0;
            x.c = NULL;
            show(fw[i].name, "plain, no resid", &x);
        }
        if (i == 2) {
            x.epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
            x.bias = bias;
            x.aux = aux;
            show(fw[i].name, "gelu_aux_bias (trainer)", &x);
            x.epi = CUBLASLT_EPILOGUE_GELU_BIAS;
            x.aux = NULL;
            show(fw[i].name, "gelu_bias, no aux", &x);
        }
    }
    /* input gradients: dX = dY W */
    struct { const char *name; int n, k; } dg[] = {
        { "proj dgrad", H, C }, { "fc dgrad", C, H }, { "attproj dgrad", C, C }, { "qkv dgrad", C, 3 * C },
        { "head dgrad", C, V } };
    for (int i = 0; i < 5; i++) {
        int m = i == 4 ? R : N;
        call x = { 0, 0, m, dg[i].n, dg[i].k, 0, 0.0f, E0, a, b, NULL, d, NULL, NULL };
        show(dg[i].name, "plain", &x);
        if (i == 0) {
            x.epi = CUBLASLT_EPILOGUE_DGELU;
            x.aux = aux;
            show(dg[i].name, "dgelu (trainer)", &x);
            x.epi = CUBLASLT_EPILOGUE_DGELU_BGRAD;
            x.bias = bias;
            show(dg[i].name, "dgelu_bgrad (bf16 bias)", &x);
            x.f32_out = 2;
            show(dg[i].name, "dgelu_bgrad (f32 bias)", &x);
        }
    }
    /* weight gradients: dW[n,k] += dY^T X, dY [N, n], X [N, k] */
    struct { const char *name; int n, k; } wg[] = {
        { "proj wgrad", C, H }, { "fc wgrad", H, C }, { "attproj wgrad", C, C }, { "qkv wgrad", 3 * C, C },
        { "head wgrad", V, C } };
    for (int i = 0; i < 5; i++) {
        int k = i == 4 ? R : N;
        call x = { 1, 0, wg[i].n, wg[i].k, k, 1, 1.0f, E0, a, b, NULL, d, NULL, NULL };
        show(wg[i].name, "f32 += (trainer)", &x);
        x.f32_out = 0;
        x.beta = 0;
        show(wg[i].name, "bf16 out", &x);
        x.f32_out = 1;
        show(wg[i].name, "f32 out, beta 0", &x);
        /* the bias gradient (a sum over the tokens: the GEMM's k) fused:
         * in these operand terms dY is cuBLASLt's B */
        x.beta = 1.0f;
        x.bias = bias;
        x.epi = CUBLASLT_EPILOGUE_BGRADB;
        show(wg[i].name, "f32 +=, bgradb (f32 bias)", &x);
        x.epi = CUBLASLT_EPILOGUE_BGRADA;
        show(wg[i].name, "f32 +=, bgrada (f32 bias)", &x);
    }
    call h = { 0, 1, R, V, C, 0, 0.0f, E0, a, b, NULL, d, NULL, NULL };
    show("head logits", "plain (trainer)", &h);
    h.M = N;
    show("head logits", "all rows", &h);
    return 0;
}
