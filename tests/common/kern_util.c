/* kern_util.c — see kern_util.h. */
#include "tests/common/kern_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void ku_seed(ku_rng *r, uint64_t seed) { r->s = seed ^ 0x9e3779b97f4a7c15ull; }

uint64_t ku_next(ku_rng *r)
{
    /* splitmix64: full period, good enough statistics for test data. */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double ku_uniform(ku_rng *r) { return (double)(ku_next(r) >> 11) * (1.0 / 9007199254740992.0); }

float ku_range(ku_rng *r, float lo, float hi) { return (float)(lo + (hi - lo) * ku_uniform(r)); }

int ku_int(ku_rng *r, int n) { return n <= 0 ? 0 : (int)(ku_next(r) % (uint64_t)n); }

void ku_fill(ku_rng *r, ms_dtype dt, void *buf, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) ms_st(buf, dt, i, ku_range(r, lo, hi));
}

void *ku_alloc_fill(ku_rng *r, ms_dtype dt, size_t n, float lo, float hi)
{
    void *p = malloc((n ? n : 1) * ms_dtype_size(dt));
    if (p) ku_fill(r, dt, p, n, lo, hi);
    return p;
}

float *ku_to_f32(ms_dtype dt, const void *buf, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f) return NULL;
    for (size_t i = 0; i < n; i++) f[i] = ms_ld(buf, dt, i);
    return f;
}

double ku_weighted_sum(ms_dtype dt, const void *out, const float *R, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)ms_ld(out, dt, i) * R[i];
    return s;
}

static int close_enough(double a, double b, double rtol, double atol)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) <= atol + rtol * m;
}

int ku_check_grad(const char *what, float *x, size_t n, const float *analytic,
                  ku_loss_fn loss, void *user, float eps, double rtol, double atol)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float keep = x[i];
        x[i] = keep + eps;
        double lp = loss(user);
        x[i] = keep - eps;
        double lm = loss(user);
        x[i] = keep;
        /* divide by the step actually taken (x +- eps is rounded in float) */
        double step = (double)(keep + eps) - (double)(keep - eps);
        double fd = (lp - lm) / step;
        if (!close_enough(fd, analytic[i], rtol, atol)) {
            if (bad < 5)
                fprintf(stderr, "%s[%zu]: analytic %.6g, finite difference %.6g\n",
                        what, i, (double)analytic[i], fd);
            bad++;
        }
    }
    if (bad) fprintf(stderr, "%s: %d of %zu gradient entries off\n", what, bad, n);
    return bad;
}

int ku_compare(const char *what, const float *a, const float *b, size_t n,
               double rtol, double atol)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!close_enough(a[i], b[i], rtol, atol)) {
            if (bad < 5)
                fprintf(stderr, "%s[%zu]: %.8g vs %.8g\n", what, i, (double)a[i], (double)b[i]);
            bad++;
        }
    }
    if (bad) fprintf(stderr, "%s: %d of %zu entries differ\n", what, bad, n);
    return bad;
}
