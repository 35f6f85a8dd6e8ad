/* reports_util.c — see reports_util.h. */
#include "tests/common/reports_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void rp_seed(rp_rng *r, uint64_t seed) { r->s = seed; }

uint64_t rp_next(rp_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t rp_below(rp_rng *r, uint64_t n) { return n ? rp_next(r) % n : 0; }

double rp_unit(rp_rng *r) { return (double)(rp_next(r) >> 11) / 9007199254740992.0; }

uint64_t rp_test_seed(void)
{
    static uint64_t seed;
    static int done;
    if (!done) {
        const char *env = getenv("MS_TEST_SEED");
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = env ? strtoull(env, NULL, 0) : (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
        fprintf(stderr, "reports tests: seed %llu (set MS_TEST_SEED to replay)\n", (unsigned long long)seed);
        done = 1;
    }
    return seed;
}

/* A random count around scale (never zero). */
static uint64_t around(rp_rng *r, uint64_t scale) { return scale / 2 + rp_below(r, scale) + 1; }

static void fill_row(ms_layer_row *row, int layer, int n_layers, int prec, int mb, int isolated, uint64_t scale,
                     rp_rng *r)
{
    memset(row, 0, sizeof *row);
    row->layer = layer;
    if (layer == 0) { snprintf(row->name, sizeof row->name, "embed"); snprintf(row->kind, sizeof row->kind, "embed"); }
    else if (layer == n_layers - 1) { snprintf(row->name, sizeof row->name, "head"); snprintf(row->kind, sizeof row->kind, "head"); }
    else { snprintf(row->name, sizeof row->name, "block %d", layer); snprintf(row->kind, sizeof row->kind, "block"); }
    row->precision = prec;
    row->micro_batch = mb;
    row->source = isolated ? MS_ROW_ISOLATED : MS_ROW_FULL;
    uint64_t p = around(r, scale);
    int half = prec != 0;
    row->param = half ? p / 2 : p;
    row->master = half ? p : 0;
    row->grad = row->param;
    row->optim = 2 * p;
    row->act = around(r, scale) * (uint64_t)mb / 4;
    row->act_input = row->act / 8 + 1;
    row->transient_fwd = around(r, scale / 4);
    row->transient_bwd = around(r, scale / 3);
    row->out_bytes = around(r, scale / 16);
    row->fwd_ms = 0.01 + rp_unit(r) * 40.0;
    row->bwd_ms = 0.02 + rp_unit(r) * 80.0;
    row->opt_ms = rp_unit(r) * 3.0;
}

int rp_make_profile(ms_profile *p, const rp_profile_spec *s, rp_rng *r)
{
    memset(p, 0, sizeof *p);
    int n_layers = s->n_blocks + 2;
    int n_prec = s->n_prec > 0 ? s->n_prec : 1, n_mb = s->n_mb > 0 ? s->n_mb : 1;
    p->n_rows = n_layers * n_prec * n_mb;
    p->rows = calloc((size_t)p->n_rows, sizeof *p->rows);
    if (!p->rows) return -1;
    snprintf(p->model, sizeof p->model, "synthetic-%d", s->n_blocks);
    p->n_layers = n_layers;
    p->seq_len = 64 << rp_below(r, 5);
    p->d_model = 64 * (int)(1 + rp_below(r, 16));
    p->n_head = 1 + (int)rp_below(r, 16);
    p->vocab = 256 + (int)rp_below(r, 50000);
    p->global_batch = 1 + (int)rp_below(r, 64);
    snprintf(p->device, sizeof p->device, "cuda:%d", (int)rp_below(r, 8));
    p->capacity = s->capacity ? s->capacity : around(r, 40ull << 30);
    p->reserve = around(r, 512ull << 20);
    int k = 0;
    for (int prec = 0; prec < n_prec; prec++)
        for (int m = 0; m < n_mb; m++)
            for (int l = 0; l < n_layers; l++)
                fill_row(&p->rows[k++], l, n_layers, prec, 4 << m,
                         s->isolated_from >= 0 && l > s->isolated_from, s->scale ? s->scale : (64ull << 20), r);
    if (!s->oom) {
        p->fits = 1;
        p->peak = p->capacity / 2 + rp_below(r, p->capacity / 2);
        return 0;
    }
    p->fits = 0;
    ms_oom_info *o = &p->oom;
    o->happened = 1;
    o->layer = s->oom_layer;
    snprintf(o->layer_name, sizeof o->layer_name, "block %d", s->oom_layer);
    o->phase = MS_PH_FORWARD;
    o->category = MS_CAT_ACT;
    o->requested = s->requested;
    o->capacity = p->capacity;
    snprintf(o->what, sizeof o->what, "fc_pre");
    uint64_t live = p->capacity + s->missing - s->requested;
    /* Categories: random shares, the remainder on act so the sum is exact. */
    uint64_t left = live;
    for (int c = 0; c < MS_CAT_N; c++) {
        if (c == MS_CAT_ACT) continue;
        uint64_t share = rp_below(r, left / 6 + 1);
        o->live_by_cat[c] = share;
        left -= share;
    }
    o->live_by_cat[MS_CAT_ACT] = left;
    /* Layers up to the OOM layer hold it; the OOM layer the largest part. */
    o->n_live_layers = n_layers;
    o->live_by_layer = calloc((size_t)n_layers, sizeof(uint64_t));
    if (!o->live_by_layer) return -1;
    left = live;
    uint64_t biggest = live / 3;
    o->live_by_layer[s->oom_layer] = biggest;
    left -= biggest;
    for (int l = 0; l < s->oom_layer; l++) {
        uint64_t share = l == s->oom_layer - 1 ? left : rp_below(r, left / (uint64_t)(s->oom_layer + 1) + 1);
        if (share >= biggest) share = biggest - 1;
        o->live_by_layer[l] = share;
        left -= share;
    }
    o->live_by_layer[s->oom_layer] += left;   /* whatever is left: keep the sum exact */
    p->peak = live;
    return 0;
}

int rp_program_db(const char *dir, char *path, size_t len)
{
    const char *m = getenv("MEMSPLIT");
    if (!m || !*m) {
        fprintf(stderr, "reports tests: MEMSPLIT is not set: the program run's checks are skipped (make test sets it)\n");
        return 1;
    }
    char cmd[1024];
    snprintf(path, len, "%s/program.db", dir);
    snprintf(cmd, sizeof cmd, "tests/browser/program_db.sh '%s'", path);
    return system(cmd) == 0 ? 0 : -1;
}
