/* memory_model.h — what one pipeline stage costs, from measured rows.
 *
 * Contract (docs/planner.md states the same in prose):
 *  - ms_layer_costs(): a layer's numbers at one (precision, micro-batch size
 *    u). A row measured at u is used as is. Otherwise, with rows at two or
 *    more sizes, every per-micro-batch field (act, act_input, transient,
 *    out_bytes, fwd_ms, bwd_ms) is the straight line through the two nearest
 *    measured sizes (bracketing u when possible), clamped at 0; with one
 *    size u0 it is scaled by u/u0. Static bytes (param, master, grad, optim)
 *    and opt_ms come from the measured size nearest to u. Bytes round up.
 *  - For stage s of p (0-based) with layers [a, b] and m micro-batches:
 *      inflight k = m (GPipe), min(m, p - s) (1F1B) or 1 (sequential)
 *      param/master/grad/optim = sums over the layers
 *      act       = k * sum(act)                      without recompute
 *                = k * sum(act_input) + max(act)     with recompute
 *      transient = max over layers of max(transient_fwd, transient_bwd), or
                  sum(transient_opt) - act when the optimizer step's
                  temporaries (after the activations are freed) are larger
 *      comm      = (k + 1) * in + 2 * out, in = out_bytes[a-1] (0 for s = 0),
 *                  out = out_bytes[b] (0 for s = p-1): k held inputs plus the
 *                  input-gradient send buffer; the output send buffer and the
 *                  output-gradient receive buffer
 *      reserve   = the profile's reserve bytes, once per device
 *      peak      = the sum (saturating at UINT64_MAX, which never fits)
 *    fwd = sum fwd_ms; bwd = sum bwd_ms (+ fwd with recompute);
 *    comm_ms = (out [s < p-1] + in [s > 0]) * 8 / (link_gbps * 1e9) seconds;
 *    opt = sum opt_ms.
 *  - Step time of a plan: (m + p - 1) * max_s(fwd + bwd + comm_ms) + max_s(opt);
    sequential: m * sum_s(fwd + bwd + comm_ms) + sum_s(opt) (planner/sequential.c).
 * Pure functions; no allocation except where stated. */
#ifndef MS_MEMORY_MODEL_H
#define MS_MEMORY_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/planner.h"
#include "vocab/profile.h"

typedef struct ms_layer_cost {
    uint64_t param, master, grad, optim;          /* static */
    uint64_t act, act_input, transient, out_bytes; /* per micro-batch; transient = max(fwd, bwd) */
    uint64_t transient_opt;                        /* the optimizer step's temporaries (static) */
    uint64_t transient_fwd, transient_bwd;         /* the two apart (the sequential model uses both) */
    double fwd_ms, bwd_ms, opt_ms;
} ms_layer_cost;

/* Aggregates of a stage's layers: all the formulas need. in/out are the
 * boundary activations, already 0 at the pipeline's ends. */
typedef struct ms_stage_sums {
    uint64_t param, master, grad, optim, act, act_input, max_act, max_transient;
    uint64_t opt_transient;           /* sum of the layers' optimizer temporaries */
    uint64_t in_bytes, out_bytes;
    double fwd_ms, bwd_ms, opt_ms;
} ms_stage_sums;

static inline uint64_t ms_sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static inline uint64_t ms_sat_mul(uint64_t a, uint64_t b)
{
    return (b && a > UINT64_MAX / b) ? UINT64_MAX : a * b;
}

/* Bit p set when the profile has rows for precision p. */
unsigned ms_profile_precisions(const ms_profile *p);
/* Measured micro-batch sizes for a precision, ascending, at most max; returns the count. */
int ms_profile_sizes(const ms_profile *p, int precision, int *sizes, int max);

/* L[0..n_layers-1] at (precision, micro_batch). -1 with err when the
 * profile has no rows for that precision. */
int ms_layer_costs(const ms_profile *p, int precision, int micro_batch, ms_layer_cost *L, char *err,
                   size_t errlen);

int ms_inflight(int schedule, int n_micro, int stage, int n_stages);
uint64_t ms_usable_bytes(uint64_t capacity, double headroom);
double ms_transfer_ms(uint64_t bytes, double link_gbps);

/* bytes[MS_CAT_N] of a stage from its sums; returns the peak. */
uint64_t ms_stage_bytes(const ms_stage_sums *s, int inflight, int recompute, uint64_t reserve,
                        uint64_t bytes[MS_CAT_N]);
/* Times of a stage from its sums into out (fwd/bwd/comm/opt). */
void ms_stage_times(const ms_stage_sums *s, int recompute, double link_gbps, ms_plan_stage *out);

/* The reference evaluation (plain loops): stage `stage` of n_stages holding
 * layers [first, last]. Fills everything in *out except device. */
void ms_stage_predict(const ms_layer_cost *L, int n_layers, int first, int last, int stage, int n_stages,
                      int schedule, int n_micro, int recompute, uint64_t reserve, double link_gbps,
                      ms_plan_stage *out);

/* fwd + bwd + comm: one micro-batch through the stage. */
double ms_stage_cycle_ms(const ms_plan_stage *s);
/* (m + p - 1) * max cycle + max opt. */
double ms_step_ms(const ms_plan_stage *stages, int n_stages, int n_micro);

#endif
