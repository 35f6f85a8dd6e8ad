/* test_ranks.c — the pipeline as MPI ranks on the CPU backend, run by
 * tests/mpi/run.sh under `mpirun -np N` for N = 2, 4 and 6. For each
 * layout p x d with p * d = N (2x1, 1x2, 2x2, 3x2), GPipe and 1F1B, ZeRO-1
 * on and off, recompute on and off:
 *  - every step's loss equals the single-device run with the same
 *    micro-batch and d * m micro-batches per step (1e-5 relative: the
 *    replicas' gradient sums are added in another order);
 *  - every rank's layers end with the single-device weights (per layer,
 *    relative norm of the difference <= 1e-5, as tests/unit/test_pipeline.c);
 *  - the d replicas of a stage hold bitwise the same weights;
 *  - ZeRO-1 on and off give bitwise the same weights (bf16 too, where the
 *    low-precision copy is recast from the gathered chunks);
 *  - batchnorm running statistics after a step are exactly the mean over
 *    the replicas of what each replica's own micro-batches give on one
 *    device (trainer/pipe_rank.h states this rule);
 *  - checkpoints across layouts (trainer/ckpt_parts.h): a run of layout A
 *    checkpoints after 2 steps, as parts; layout B (other p, d and ZeRO-1),
 *    one process, and A again resume it; and layout B resumes a one-process
 *    checkpoint; every resumed step's loss equals the uninterrupted single
 *    device run's, and the final weights too.
 * Every rank checks its own part; rank 0 prints one line per case and the
 * total, and the exit status is 0 only if every rank passed every check.
 * (cmocka is not used: its output from N processes would interleave.) */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_dist.h"
#include "trainer/checkpoint.h"
#include "trainer/ckpt_parts.h"
#include "trainer/pipeline.h"
#include "trainer/session.h"

#define STEPS 4
#define TOL 1e-5
#define MAX_LAYERS 16

static int g_rank, g_size, g_fail, g_cases;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            printf("rank %d: FAIL %s:%d: ", g_rank, __FILE__, __LINE__);        \
            printf(__VA_ARGS__);                                                \
            printf("\n");                                                       \
            g_fail++;                                                           \
        }                                                                       \
    } while (0)

static void config(ms_config *c, ms_norm norm, ms_precision prec, int micro)
{
    char err[256];
    if (ms_config_preset(c, "tiny", err, sizeof err)) abort();
    c->n_layer = 4;
    c->d_model = 32;
    c->n_head = 4;
    snprintf(c->device, sizeof c->device, "cpu");
    c->seq_len = 16;
    c->vocab = 128;
    c->batch = 2;
    c->accum = micro;
    c->norm = norm;
    c->precision = prec;
}

typedef struct ref_run {
    double loss[STEPS];
    float *w[MAX_LAYERS], *bn[MAX_LAYERS];
    int n_layers;
} ref_run;

/* One device, `steps` steps of c.accum micro-batches, starting at data
 * token `cursor`: losses, weights and batchnorm statistics. */
static void single(const ms_config *c, int steps, uint64_t cursor, ref_run *r)
{
    ms_session s;
    memset(r, 0, sizeof *r);
    if (ms_session_open(&s, c, NULL) || ms_data_seek(s.data, cursor)) abort();
    for (int i = 0; i < steps; i++) {
        if (ms_session_step(&s)) abort();
        r->loss[i] = s.last_loss;
    }
    r->n_layers = s.model.n_layers;
    for (int i = 0; i < s.model.n_layers; i++) {
        const ms_layer *L = &s.model.layers[i];
        r->w[i] = malloc(L->n_params * 4);
        memcpy(r->w[i], L->w, L->n_params * 4);
        if (L->bn_run) {
            size_t n = ms_layer_bn_bytes(&s.model, L);
            r->bn[i] = malloc(n);
            memcpy(r->bn[i], L->bn_run, n);
        }
    }
    ms_session_close(&s);
}

static void ref_free(ref_run *r)
{
    for (int i = 0; i < r->n_layers; i++) {
        free(r->w[i]);
        free(r->bn[i]);
    }
}

typedef struct layout {
    int p, d, zero, recompute, m;
    ms_pipe_schedule sch;
    ms_norm norm;
    ms_precision prec;
} layout;

static void describe(const layout *l, char *buf, size_t len)
{
    snprintf(buf, len, "%dx%d %s zero=%d recompute=%d m=%d %s %s", l->p, l->d, l->sch ? "1f1b" : "gpipe", l->zero,
             l->recompute, l->m, l->norm == MS_NORM_BATCH ? "batchnorm" : "layernorm", ms_precision_name(l->prec));
}

/* With batchnorm, the biases that add a constant to the residual stream
 * (att_b, proj_b, and the value bias, which attention's weights, summing to
 * 1, pass on whole) have a gradient of exactly 0 in exact arithmetic: every
 * later batchnorm and the head's subtract the per-feature mean. So has the
 * key bias (a shift of every key moves all of a query's scores alike). In float the
 * gradient is rounding noise above AdamW's eps, so such a weight moves by
 * about lr with the sign of the noise, and the noise depends on the
 * summation order, which data parallel changes. Comparing those elements
 * would test rounding noise; they are left out of the weight check (the
 * losses still cover them). With layernorm the noise stays far below eps. */
static int noise_only(const ms_model *m, const ms_layer *L, size_t j)
{
    if (m->cfg.norm != MS_NORM_BATCH || L->kind != MS_LAYER_BLOCK) return 0;
    const ms_tensor *a = ms_layer_tensor(L, "att_b"), *p = ms_layer_tensor(L, "proj_b"), *q = ms_layer_tensor(L, "qkv_b");
    if (j >= a->off && j < a->off + a->rows * a->cols) return 1;
    if (j >= p->off && j < p->off + p->rows * p->cols) return 1;
    return j >= q->off + (size_t)m->C && j < q->off + 3 * (size_t)m->C; /* key and value biases */
}

/* Opens this rank's part of layout l. */
static void open_rank(const layout *l, ms_dist *D, ms_pipeline *pl, int n_layers)
{
    char err[256];
    ms_config c;
    config(&c, l->norm, l->prec, l->m);
    if (ms_mpi_dist_open(D, l->p, l->d, l->zero, -1, err, sizeof err)) {
        printf("rank %d: dist: %s\n", g_rank, err);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ms_pipe_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.n_devices = 1;
    snprintf(sp.device[0], sizeof sp.device[0], "cpu");
    sp.virtual_share = 1;
    sp.n_stages = l->p;
    sp.schedule = l->sch;
    sp.micro_batch = c.batch;
    sp.n_micro = l->m;
    sp.dist = D;
    for (int s = 0; s < l->p; s++) {
        sp.first[s] = s * n_layers / l->p;
        sp.last[s] = (s + 1) * n_layers / l->p - 1;
        sp.recompute[s] = l->recompute;
    }
    sp.stage_device[D->stage] = 0;
    if (ms_pipe_open(pl, &c, &sp)) {
        printf("rank %d: open: %s\n", g_rank, pl->err);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The replicas of each stage hold the same bits: every rank's hash of its
 * weights, gathered, compared with replica 0 of its stage. Returns the hash. */
static uint64_t check_replicas_equal(const ms_pipeline *pl, const ms_dist *D, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull, all[64];
    for (int i = pl->spec.first[D->stage]; i <= pl->spec.last[D->stage]; i++)
        h = fnv(pl->model.layers[i].w, pl->model.layers[i].n_params * 4, h);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    CHECK(all[D->stage] == h, "%s: replica %d of stage %d differs from replica 0", name, D->replica, D->stage);
    return h;
}

/* Runs layout l and checks it against the single-device run; returns this
 * rank's weight hash (for comparing ZeRO-1 on and off). */
/* Prints "ok" on rank 0 when no rank failed a check since `before`. */
static void report_ok(int before, const char *fmt, const char *name, int n)
{
    int mine = g_fail - before, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0 && !all) {
        printf("ok   %s: ", name);
        printf(fmt, n);
        printf("\n");
    }
}

static uint64_t check_layout(const layout *l)
{
    int before = g_fail;
    char name[128];
    describe(l, name, sizeof name);
    ms_config c;
    config(&c, l->norm, l->prec, l->d * l->m);
    ref_run ref;
    single(&c, STEPS, 0, &ref);
    ms_dist D;
    ms_pipeline pl;
    open_rank(l, &D, &pl, ref.n_layers);
    double tol = l->prec == MS_PREC_FP32 ? TOL : 1e-2;
    for (int i = 0; i < STEPS; i++) {
        int rc = ms_pipe_step(&pl);
        if (rc) {
            printf("rank %d: %s: step %d: %s\n", g_rank, name, i + 1, pl.err);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        double rel = fabs(pl.last_loss - ref.loss[i]) / fabs(ref.loss[i]);
        CHECK(rel <= tol, "%s step %d: loss %.9g, one device %.9g", name, i + 1, pl.last_loss, ref.loss[i]);
    }
    for (int i = pl.spec.first[D.stage]; i <= pl.spec.last[D.stage]; i++) {
        const ms_layer *L = &pl.model.layers[i];
        double dd = 0, nn = 0;
        for (size_t j = 0; j < L->n_params; j++) {
            double a = L->w[j], b = ref.w[i][j];
            nn += b * b;
            if (!noise_only(&pl.model, L, j)) dd += (a - b) * (a - b);
        }
        CHECK(sqrt(dd) <= tol * sqrt(nn), "%s layer %d: |ranks - one device| = %.3g, |one device| = %.3g", name, i,
              sqrt(dd), sqrt(nn));
    }
    uint64_t h = check_replicas_equal(&pl, &D, name);
    ms_pipe_close(&pl);
    ms_mpi_dist_close(&D);
    ref_free(&ref);
    g_cases++;
    report_ok(before, "4 steps equal one device with %d micro-batches", name, l->d * l->m);
    return h;
}

/* ZeRO-1 shards the optimizer, nothing else: the same bits as without it. */
static void check_zero_same(layout l)
{
    l.zero = 0;
    uint64_t off = check_layout(&l);
    l.zero = 1;
    uint64_t on = check_layout(&l);
    char name[128];
    describe(&l, name, sizeof name);
    CHECK(on == off, "%s: weights with ZeRO-1 differ from without it", name);
}

/* One step with batchnorm: the running statistics are the mean over the
 * replicas of each replica's own update on one device. */
static void check_batchnorm(layout l)
{
    int before = g_fail;
    char name[128];
    describe(&l, name, sizeof name);
    ms_config c;
    config(&c, MS_NORM_BATCH, l.prec, l.m);
    ref_run own[8];
    for (int j = 0; j < l.d; j++) /* replica j's share starts j * m micro-batches in */
        single(&c, 1, (uint64_t)j * l.m * c.batch * c.seq_len, &own[j]);
    ms_dist D;
    ms_pipeline pl;
    open_rank(&l, &D, &pl, own[0].n_layers);
    if (ms_pipe_step(&pl)) MPI_Abort(MPI_COMM_WORLD, 2);
    int n_bn = 0;
    for (int i = pl.spec.first[D.stage]; i <= pl.spec.last[D.stage]; i++) {
        const ms_layer *L = &pl.model.layers[i];
        if (!L->bn_run) continue;
        size_t n = ms_layer_bn_bytes(&pl.model, L) / 4;
        float *want = calloc(n, 4);
        for (size_t k = 0; k < n; k++) {
            float sum = 0;
            for (int j = 0; j < l.d; j++) sum += own[j].bn[i][k];
            want[k] = sum * (1.0f / (float)l.d);
        }
        CHECK(memcmp(want, L->bn_run, n * 4) == 0, "%s layer %d: running statistics are not the replicas' mean", name, i);
        /* and they moved: the mean is not replica 0's own */
        CHECK(memcmp(own[0].bn[i], L->bn_run, n * 4) != 0, "%s layer %d: running statistics equal replica 0's", name, i);
        n_bn++;
        free(want);
    }
    CHECK(n_bn > 0, "%s: no batchnorm layer on stage %d", name, D.stage);
    ms_pipe_close(&pl);
    ms_mpi_dist_close(&D);
    for (int j = 0; j < l.d; j++) ref_free(&own[j]);
    g_cases++;
    report_ok(before, "running statistics = the mean of the %d replicas' own", name, l.d);
}

/* This rank's layers against the reference's weights (tolerance as above). */
static void check_weights(const ms_pipeline *pl, const ms_dist *D, const ref_run *ref, double tol, const char *name)
{
    for (int i = pl->spec.first[D->stage]; i <= pl->spec.last[D->stage]; i++) {
        const ms_layer *L = &pl->model.layers[i];
        double dd = 0, nn = 0;
        for (size_t j = 0; j < L->n_params; j++) {
            double a = L->w[j], b = ref->w[i][j];
            nn += b * b;
            if (!noise_only(&pl->model, L, j)) dd += (a - b) * (a - b);
        }
        CHECK(sqrt(dd) <= tol * sqrt(nn), "%s layer %d: |ranks - one device| = %.3g, |one device| = %.3g", name, i,
              sqrt(dd), sqrt(nn));
    }
}

/* Steps from+1 .. to on an open layout, losses against the reference's. */
static void continue_run(ms_pipeline *pl, const ref_run *ref, int from, int to, const char *name)
{
    for (int i = from; i < to; i++) {
        if (ms_pipe_step(pl)) {
            printf("rank %d: %s: step %d: %s\n", g_rank, name, i + 1, pl->err);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        double rel = fabs(pl->last_loss - ref->loss[i]) / fabs(ref->loss[i]);
        CHECK(rel <= TOL, "%s step %d: loss %.9g, one device %.9g", name, i + 1, pl->last_loss, ref->loss[i]);
    }
}

/* A checkpoint of 2 steps written one way, resumed by layout b, which must
 * then reach the uninterrupted run. a == NULL: one process (rank 0) writes it. */
static void check_resume(const layout *a, const layout *b)
{
    int before = g_fail;
    char name[300], na[128] = "one process", nb[128];
    if (a) describe(a, na, sizeof na);
    describe(b, nb, sizeof nb);
    snprintf(name, sizeof name, "checkpoint of %s resumed by %s", na, nb);
    ms_config c;
    config(&c, b->norm, b->prec, b->d * b->m);
    ref_run ref;
    single(&c, STEPS, 0, &ref);
    char dir[256] = "/tmp/ms_ranks_XXXXXX", path[1024];
    if (g_rank == 0 && !mkdtemp(dir)) MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (a) {
        ms_dist D;
        ms_pipeline pl;
        open_rank(a, &D, &pl, ref.n_layers);
        continue_run(&pl, &ref, 0, 2, name); /* steps 1-2 */
        if (ms_pipe_checkpoint(&pl, dir, path, sizeof path)) {
            printf("rank %d: %s: checkpoint: %s\n", g_rank, name, pl.err);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        CHECK(ms_ckpt_is_parts(path), "%s: %s is not a checkpoint of parts", name, path);
        ms_pipe_close(&pl);
        ms_mpi_dist_close(&D);
    } else if (g_rank == 0) {
        ms_session s;
        if (ms_session_open(&s, &c, NULL)) abort();
        for (int i = 0; i < 2; i++) ms_session_step(&s);
        if (ms_session_checkpoint(&s, dir, path, sizeof path)) abort();
        ms_session_close(&s);
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(ms_ckpt_latest(dir, path, sizeof path) == 1, "%s: no checkpoint found in %s", name, dir);
    ms_dist D;
    ms_pipeline pl;
    open_rank(b, &D, &pl, ref.n_layers);
    if (ms_pipe_load(&pl, path)) {
        printf("rank %d: %s: load: %s\n", g_rank, name, pl.err);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    CHECK(pl.step == 2, "%s: resumed at step %d, not 2", name, pl.step);
    /* the reference's steps 3 and 4 */
    continue_run(&pl, &ref, 2, STEPS, name);
    check_weights(&pl, &D, &ref, TOL, name);
    check_replicas_equal(&pl, &D, name);
    ms_pipe_close(&pl);
    ms_mpi_dist_close(&D);
    /* and the same checkpoint in one process, every layer (rank 0) */
    if (g_rank == 0) {
        ms_session s;
        if (ms_session_open(&s, &c, NULL) || ms_session_load(&s, path)) {
            printf("rank 0: %s: one process cannot load it: %s\n", name, s.err);
            g_fail++;
        } else {
            for (int i = 2; i < STEPS; i++) {
                ms_session_step(&s);
                CHECK(fabs(s.last_loss - ref.loss[i]) <= TOL * fabs(ref.loss[i]), "%s, then one process, step %d", name, i + 1);
            }
        }
        ms_session_close(&s);
        /* another job (another seed): the checkpoint is refused, by load and
         * by resume, which stops at it rather than looking for an older one */
        ms_config other = c;
        other.seed++;
        char found[1024], note[256];
        if (ms_session_open(&s, &other, NULL)) abort();
        CHECK(ms_session_load(&s, path) != 0 && strstr(s.err, "another job"),
              "%s: a run of another seed loaded it (%s)", name, s.err);
        CHECK(ms_session_resume(&s, dir, found, sizeof found, note, sizeof note) != 0 && strstr(s.err, "another job"),
              "%s: a run of another seed resumed it (%s)", name, s.err);
        ms_session_close(&s);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) g_fail++;
    }
    ref_free(&ref);
    g_cases++;
    report_ok(before, "steps 3-%d equal one device's, and one process resumes it too", name, STEPS);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const ms_pipe_schedule G = MS_PIPE_GPIPE, F = MS_PIPE_1F1B;
    const ms_norm LN = MS_NORM_LAYER, BN = MS_NORM_BATCH;
    const ms_precision F32 = MS_PREC_FP32;
    /* {p, d, zero, recompute, m, schedule, norm, precision} */
    if (g_size == 2) {
        check_layout(&(layout){2, 1, 0, 0, 4, G, LN, F32});
        check_layout(&(layout){2, 1, 0, 1, 3, F, LN, F32});
        check_zero_same((layout){1, 2, 0, 0, 3, F, LN, F32});
        check_zero_same((layout){1, 2, 0, 0, 2, G, LN, MS_PREC_BF16});
        check_batchnorm((layout){1, 2, 0, 0, 2, F, BN, F32});
        check_resume(&(layout){1, 2, 1, 0, 2, F, LN, F32}, &(layout){2, 1, 0, 1, 4, G, LN, F32});
        check_resume(NULL, &(layout){1, 2, 1, 0, 2, G, LN, F32});
    } else if (g_size == 4) {
        check_zero_same((layout){2, 2, 0, 0, 3, F, LN, F32});
        check_layout(&(layout){2, 2, 1, 1, 2, G, LN, F32});
        check_batchnorm((layout){2, 2, 1, 0, 2, G, BN, F32});
        check_resume(&(layout){2, 2, 1, 0, 2, F, LN, F32}, &(layout){4, 1, 0, 0, 4, F, LN, F32});
    } else if (g_size == 6) {
        check_layout(&(layout){3, 2, 1, 0, 3, F, LN, F32});
        check_layout(&(layout){3, 2, 0, 1, 2, G, BN, F32});
        check_resume(&(layout){3, 2, 0, 0, 3, F, LN, F32}, &(layout){2, 3, 1, 0, 2, G, LN, F32});
    } else {
        if (g_rank == 0) printf("test_ranks: run with 2, 4 or 6 ranks\n");
        MPI_Finalize();
        return 1;
    }
    int total = 0;
    MPI_Allreduce(&g_fail, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("ranks (%d): %d cases, %d failed checks\n", g_size, g_cases, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
