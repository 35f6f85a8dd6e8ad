/* kern_util.h — test helpers for kernel tests (CPU and GPU twins).
 *
 *  - ku_rng: a seeded splitmix64 PRNG (deterministic per seed, never all zeros).
 *  - ku_fill: random values in [lo, hi) written in any ms_dtype (so each value
 *    is exactly representable in that dtype); ku_alloc_fill allocates too.
 *  - ku_weighted_sum: sum(out[i] * R[i]) in double — the scalar loss
 *    L = <out, R> whose gradient with respect to out is exactly R.
 *  - ku_check_grad: central finite differences of a scalar loss with respect
 *    to every element of an fp32 buffer, compared with an analytic gradient.
 *  - ku_compare: element-wise |a-b| <= atol + rtol*max(|a|,|b|) on float
 *    arrays, printing the first few mismatches; returns the mismatch count.
 * Every function returns a count or value; nothing aborts. */
#ifndef KERN_UTIL_H
#define KERN_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/dtype.h"

typedef struct { uint64_t s; } ku_rng;

void ku_seed(ku_rng *r, uint64_t seed);
uint64_t ku_next(ku_rng *r);
/* Uniform in [0, 1). */
double ku_uniform(ku_rng *r);
/* Uniform in [lo, hi). */
float ku_range(ku_rng *r, float lo, float hi);
/* Uniform integer in [0, n). */
int ku_int(ku_rng *r, int n);

/* buf[i] = uniform [lo,hi) rounded to dt, i < n. */
void ku_fill(ku_rng *r, ms_dtype dt, void *buf, size_t n, float lo, float hi);
/* malloc(n * size(dt)) filled as ku_fill; NULL on allocation failure. */
void *ku_alloc_fill(ku_rng *r, ms_dtype dt, size_t n, float lo, float hi);
/* Element-wise conversion of a dt buffer into a new float array (malloc). */
float *ku_to_f32(ms_dtype dt, const void *buf, size_t n);

/* sum_i ld(out, dt, i) * R[i], accumulated in double. */
double ku_weighted_sum(ms_dtype dt, const void *out, const float *R, size_t n);

/* Scalar loss of the current contents of the buffers the caller set up. */
typedef double (*ku_loss_fn)(void *user);

/* For each i < n: x[i] += eps, L+ = loss; x[i] -= 2 eps, L- = loss; restore;
 * fd = (L+ - L-) / (2 eps), compared with analytic[i] by
 * |fd - a| <= atol + rtol * max(|fd|, |a|). Prints the first few mismatches
 * with `what` and returns the number of mismatches. */
int ku_check_grad(const char *what, float *x, size_t n, const float *analytic,
                  ku_loss_fn loss, void *user, float eps, double rtol, double atol);

/* |a[i]-b[i]| <= atol + rtol*max(|a[i]|,|b[i]|); NaN equal to NaN, same-sign
 * Inf equal. Prints the first few mismatches; returns their count. */
int ku_compare(const char *what, const float *a, const float *b, size_t n,
               double rtol, double atol);

#endif
