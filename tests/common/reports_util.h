/* reports_util.h — test helpers for the run database and the reports:
 * a seeded PRNG (splitmix64) and synthetic profiles with every field set.
 *
 * rp_make_profile fills p with n_blocks + 2 layers (embed, blocks, head),
 * one row per layer for each of n_prec precisions (fp32, bf16, fp16 in that
 * order) and each of n_mb micro-batch sizes (4, 8), random byte counts and
 * times; rows of layers after `isolated_from` (if >= 0) are marked isolated.
 * With oom, the OOM is "block 17"-style: in the forward pass of layer
 * oom_layer, 'fc_pre' (act), requested `requested`, capacity `capacity`,
 * with live bytes (split randomly over categories and layers, the largest
 * share on oom_layer) summing exactly to capacity + missing - requested. */
#ifndef REPORTS_UTIL_H
#define REPORTS_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/profile.h"

typedef struct { uint64_t s; } rp_rng;

void rp_seed(rp_rng *r, uint64_t seed);
uint64_t rp_next(rp_rng *r);
uint64_t rp_below(rp_rng *r, uint64_t n);      /* uniform in [0, n), n > 0 */
double rp_unit(rp_rng *r);                     /* uniform in [0, 1) */
/* The seed for this test binary: $MS_TEST_SEED if set, else from the clock;
 * printed once so a failure can be replayed. */
uint64_t rp_test_seed(void);

typedef struct {
    int n_blocks;
    int n_prec, n_mb;
    int isolated_from;       /* -1: every row from the full run */
    int oom;
    int oom_layer;
    uint64_t capacity, requested, missing;
    uint64_t scale;          /* typical bytes of a layer's parameters */
} rp_profile_spec;

/* 0, or -1 when out of memory. Free with ms_profile_free(). */
int rp_make_profile(ms_profile *p, const rp_profile_spec *spec, rp_rng *rng);

/* A run database holding a doctor run of a user's program under bf16
 * autocast, made at dir/program.db by tests/browser/program_db.sh (run 1
 * the doctor, 2 its trial, which ran out of memory in a block's forward
 * pass, 3 the training with the plan over two devices). Needs $MEMSPLIT
 * (make test sets it) and the tests run from the repository's root.
 * Returns 0 with the path in path; 1 when $MEMSPLIT is unset (the caller
 * skips); -1 when the script failed (it said why on stderr). */
int rp_program_db(const char *dir, char *path, size_t len);

#endif
