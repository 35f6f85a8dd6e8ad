/* test_attention_cpu.c — the CPU reference of causal self-attention:
 * forward against a direct formula (out and lse), backward against central
 * finite differences, causality in both directions, the bf16/f16 paths
 * against fp32, edge shapes and bad arguments. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/common/kern_util.h"

/* One attention problem: shapes and host buffers of dtype dt. */
typedef struct {
    ms_dtype dt;
    int B, T, C, nh;
    void *qkv, *out, *dout, *dqkv, *scratch;
    float *lse;
} prob;

static size_t n_qkv(const prob *p) { return (size_t)p->B * p->T * 3 * p->C; }
static size_t n_out(const prob *p) { return (size_t)p->B * p->T * p->C; }

static void prob_init(prob *p, ku_rng *r, ms_dtype dt, int B, int T, int C, int nh)
{
    memset(p, 0, sizeof *p);
    p->dt = dt; p->B = B; p->T = T; p->C = C; p->nh = nh;
    size_t es = ms_dtype_size(dt);
    p->qkv = ku_alloc_fill(r, dt, n_qkv(p), -1.5f, 1.5f);
    p->dout = ku_alloc_fill(r, dt, n_out(p), -1.0f, 1.0f);
    p->out = calloc(n_out(p), es);
    p->dqkv = calloc(n_qkv(p), es);
    p->lse = calloc((size_t)B * nh * T, sizeof(float));
    p->scratch = malloc(ms_cpu_attention_bwd_scratch(dt, B, T, C, nh));
    assert_non_null(p->qkv); assert_non_null(p->dout); assert_non_null(p->out);
    assert_non_null(p->dqkv); assert_non_null(p->lse); assert_non_null(p->scratch);
}

static void prob_free(prob *p)
{
    free(p->qkv); free(p->out); free(p->dout); free(p->dqkv); free(p->lse); free(p->scratch);
}

static void run_fwd(prob *p)
{
    ms_kctx ctx = {0};
    ms_cpu_attention_fwd(&ctx, p->dt, p->out, p->lse, p->qkv, p->B, p->T, p->C, p->nh);
    assert_int_equal(ctx.status, 0);
}

static void run_bwd(prob *p)
{
    ms_kctx ctx = {0};
    ms_cpu_attention_bwd(&ctx, p->dt, p->dqkv, p->dout, p->qkv, p->out, p->lse, p->scratch,
                         p->B, p->T, p->C, p->nh);
    assert_int_equal(ctx.status, 0);
}

/* Forward against the textbook formula, written independently here:
 * two passes per row in double, softmax normalised explicitly. */
static void check_fwd_direct(const prob *p)
{
    int hs = p->C / p->nh, T = p->T, C = p->C;
    double scale = 1.0 / sqrt(hs);
    double *w = malloc((size_t)T * sizeof *w);
    assert_non_null(w);
    int bad = 0;
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->nh; h++)
            for (int t = 0; t < T; t++) {
                const size_t rq = ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
                double z = 0;
                for (int j = 0; j <= t; j++) {
                    const size_t rk = ((size_t)b * T + j) * 3 * C + C + (size_t)h * hs;
                    double s = 0;
                    for (int d = 0; d < hs; d++)
                        s += (double)ms_ld(p->qkv, p->dt, rq + d) * ms_ld(p->qkv, p->dt, rk + d);
                    w[j] = exp(s * scale);
                    z += w[j];
                }
                double lse = log(z), got = p->lse[((size_t)b * p->nh + h) * T + t];
                if (fabs(got - lse) > 1e-5 * (1 + fabs(lse))) bad++;
                for (int d = 0; d < hs; d++) {
                    double o = 0;
                    for (int j = 0; j <= t; j++)
                        o += w[j] / z * ms_ld(p->qkv, p->dt, ((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * hs + d);
                    double g = ms_ld(p->out, p->dt, ((size_t)b * T + t) * C + (size_t)h * hs + d);
                    if (fabs(g - o) > 1e-5 * (1 + fabs(o))) bad++;
                }
            }
    free(w);
    assert_int_equal(bad, 0);
}

static void test_fwd_matches_formula(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 11);
    prob p;
    prob_init(&p, &r, MS_F32, 2, 5, 8, 2);
    run_fwd(&p);
    check_fwd_direct(&p);
    prob_free(&p);
    /* a second shape with a head size that is not a power of two */
    prob_init(&p, &r, MS_F32, 1, 9, 12, 2);
    run_fwd(&p);
    check_fwd_direct(&p);
    prob_free(&p);
}

/* T = 1: the only key is the query's own, so out = v and lse = q.k*scale. */
static void test_single_token(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 12);
    prob p;
    prob_init(&p, &r, MS_F32, 3, 1, 8, 2);
    run_fwd(&p);
    const float *q = p.qkv;
    for (int b = 0; b < 3; b++)
        for (int h = 0; h < 2; h++) {
            double s = 0;
            for (int d = 0; d < 4; d++) s += (double)q[b * 24 + h * 4 + d] * q[b * 24 + 8 + h * 4 + d];
            assert_float_equal(p.lse[b * 2 + h], s * 0.5, 1e-6);
            for (int d = 0; d < 4; d++)
                assert_float_equal(((float *)p.out)[b * 8 + h * 4 + d], q[b * 24 + 16 + h * 4 + d], 1e-6);
        }
    prob_free(&p);
}

/* Loss L = <out, R> with R = dout, so dL/dqkv is exactly what bwd returns. */
static double loss_of(void *user)
{
    prob *p = user;
    run_fwd(p);
    return ku_weighted_sum(p->dt, p->out, p->dout, n_out(p));
}

static void test_bwd_finite_differences(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 13);
    static const int shapes[][4] = {{2, 5, 8, 2}, {1, 7, 12, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        prob p;
        prob_init(&p, &r, MS_F32, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
        run_fwd(&p);
        memset(p.dqkv, 0xff, n_qkv(&p) * sizeof(float)); /* NaN: bwd must overwrite all */
        run_bwd(&p);
        float *g = malloc(n_qkv(&p) * sizeof *g);
        assert_non_null(g);
        memcpy(g, p.dqkv, n_qkv(&p) * sizeof *g);
        int bad = ku_check_grad("dqkv", p.qkv, n_qkv(&p), g, loss_of, &p, 3e-3f, 2e-3, 3e-4);
        assert_int_equal(bad, 0);
        free(g);
        prob_free(&p);
    }
}

/* Causality: changing token t0's k and v (every head) leaves rows t < t0 of
 * out and lse bit-identical and changes row t0; in backward, a dout that is
 * zero from t0 on gives exactly zero dq, dk, dv from t0 on. */
static void test_causality(void **state)
{
    (void)state;
    ku_rng r;
    ku_seed(&r, 14);
    const int B = 2, T = 6, C = 8, nh = 2, t0 = 3;
    prob p;
    prob_init(&p, &r, MS_F32, B, T, C, nh);
    run_fwd(&p);
    float *out0 = ku_to_f32(MS_F32, p.out, n_out(&p));
    float *lse0 = ku_to_f32(MS_F32, p.lse, (size_t)B * nh * T);
    assert_non_null(out0); assert_non_null(lse0);
    float *qkv = p.qkv;
    for (int b = 0; b < B; b++)
        for (int c = C; c < 3 * C; c++) qkv[((size_t)b * T + t0) * 3 * C + c] += 0.75f;
    run_fwd(&p);
    const float *out = p.out;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < t0; t++)
            assert_memory_equal(out + ((size_t)b * T + t) * C, out0 + ((size_t)b * T + t) * C, C * sizeof(float));
        int changed = 0;
        for (int c = 0; c < C; c++) changed += out[((size_t)b * T + t0) * C + c] != out0[((size_t)b * T + t0) * C + c];
        assert_true(changed > 0);
        for (int h = 0; h < nh; h++)
            assert_memory_equal(p.lse + ((size_t)b * nh + h) * T, lse0 + ((size_t)b * nh + h) * T, t0 * sizeof(float));
    }
    float *dout = p.dout;
    for (int b = 0; b < B; b++)
        for (int t = t0; t < T; t++)
            for (int c = 0; c < C; c++) dout[((size_t)b * T + t) * C + c] = 0;
    run_bwd(&p);
    const float *dqkv = p.dqkv;
    for (int b = 0; b < B; b++) {
        for (int t = t0; t < T; t++)
            for (int c = 0; c < 3 * C; c++) assert_true(dqkv[((size_t)b * T + t) * 3 * C + c] == 0.0f);
        double nz = 0;
        for (int c = 0; c < 3 * C; c++) nz += fabs(dqkv[(size_t)b * T * 3 * C + c]);
        assert_true(nz > 0);
    }
    free(out0); free(lse0);
    prob_free(&p);
}

/* max |a-b| <= tol * max |b|, the normwise criterion for the 16-bit paths. */
static void assert_close_norm(const char *what, const float *a, const float *b, size_t n, double tol)
{
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
    assert_int_equal(ku_compare(what, a, b, n, 0, tol * mx), 0);
}

/* The 16-bit paths against fp32 on the same (16-bit-representable) inputs:
 * the only differences are roundings of loads/stores, well inside 1e-2. */
static void check_low_precision(ms_dtype dt)
{
    ku_rng r;
    ku_seed(&r, 15 + dt);
    const int B = 2, T = 9, C = 16, nh = 2;
    prob lo, hi;
    prob_init(&lo, &r, dt, B, T, C, nh);
    prob_init(&hi, &r, MS_F32, B, T, C, nh);
    for (size_t i = 0; i < n_qkv(&lo); i++) ((float *)hi.qkv)[i] = ms_ld(lo.qkv, dt, i);
    for (size_t i = 0; i < n_out(&lo); i++) ((float *)hi.dout)[i] = ms_ld(lo.dout, dt, i);
    run_fwd(&lo);
    run_fwd(&hi);
    run_bwd(&lo);
    run_bwd(&hi);
    float *o = ku_to_f32(dt, lo.out, n_out(&lo)), *g = ku_to_f32(dt, lo.dqkv, n_qkv(&lo));
    assert_non_null(o); assert_non_null(g);
    assert_close_norm("out", o, hi.out, n_out(&lo), 1e-2);
    assert_int_equal(ku_compare("lse", lo.lse, hi.lse, (size_t)B * nh * T, 1e-2, 1e-2), 0);
    assert_close_norm("dqkv", g, hi.dqkv, n_qkv(&lo), 1e-2);
    free(o); free(g);
    prob_free(&lo);
    prob_free(&hi);
}

static void test_bf16_vs_fp32(void **state) { (void)state; check_low_precision(MS_BF16); }
static void test_f16_vs_fp32(void **state) { (void)state; check_low_precision(MS_F16); }

static void test_bad_arguments(void **state)
{
    (void)state;
    float buf[64] = {0}, lse[8] = {0};
    ms_kctx ctx = {0};
    ms_cpu_attention_fwd(&ctx, MS_F32, buf, lse, buf, 1, 2, 6, 4); /* 4 does not divide 6 */
    assert_int_not_equal(ctx.status, 0);
    assert_true(strlen(ctx.error) > 0);
    memset(&ctx, 0, sizeof ctx);
    ms_cpu_attention_bwd(&ctx, MS_F32, buf, buf, buf, buf, lse, NULL, 1, 2, 4, 2); /* no scratch */
    assert_int_not_equal(ctx.status, 0);
    memset(&ctx, 0, sizeof ctx);
    ms_cpu_attention_fwd(&ctx, (ms_dtype)7, buf, lse, buf, 1, 2, 4, 2);
    assert_int_not_equal(ctx.status, 0);
    assert_int_equal(ms_cpu_attention_bwd_scratch(MS_F32, 1, 2, 6, 4), 0);
    /* empty shapes are no-ops */
    memset(&ctx, 0, sizeof ctx);
    ms_cpu_attention_fwd(&ctx, MS_F32, NULL, NULL, NULL, 0, 4, 8, 2);
    assert_int_equal(ctx.status, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fwd_matches_formula),
        cmocka_unit_test(test_single_token),
        cmocka_unit_test(test_bwd_finite_differences),
        cmocka_unit_test(test_causality),
        cmocka_unit_test(test_bf16_vs_fp32),
        cmocka_unit_test(test_f16_vs_fp32),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
