/* search_dp.c — the dynamic program of the exact search (search_dp.h).
 *
 * Stages are added from the back: a stage starting at layer i with r stages
 * after it holds min(m, r + 1) micro-batches under 1F1B, is the first stage
 * iff i == 0 and the last iff r == 0, so one pass over (i, devices used)
 * covers every stage count. Each state keeps the Pareto set of (slowest
 * cycle, slowest optimizer step) of its partial plans, with a link to the
 * rest of the plan for reconstruction. */
#include "planner/search_dp.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    double C, O;    /* slowest cycle and slowest optimizer step of the partial plan */
    int next;       /* pool index of the rest of the plan (the successor state's entry) */
    int j;          /* this stage ends before layer j */
    short cls;      /* capacity class of this stage's device, -1 for the base */
    char rc;        /* recompute */
} entry;

typedef struct {
    entry *e;
    int n, cap;
} vec;

static int vec_push(vec *v, entry x)
{
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 8;
        entry *ne = realloc(v->e, (size_t)nc * sizeof *ne);
        if (!ne) return -1;
        v->e = ne;
        v->cap = nc;
    }
    v->e[v->n++] = x;
    return 0;
}

/* Adds x to the Pareto set v unless something there is as good in both. */
static int pareto_insert(vec *v, entry x)
{
    int w = 0;
    for (int r = 0; r < v->n; r++) {
        const entry *y = &v->e[r];
        if (y->C <= x.C && y->O <= x.O) return 0;
    }
    for (int r = 0; r < v->n; r++) {
        const entry *y = &v->e[r];
        if (!(x.C <= y->C && x.O <= y->O)) v->e[w++] = *y;
    }
    v->n = w;
    return vec_push(v, x);
}

typedef struct ms_dp dp;

struct ms_dp {
    int n;                        /* layers */
    int R;                        /* most stages */
    const ms_dev_space *ds;
    int allow_nr, allow_rc;
    uint64_t reserve, comm_reserve;
    int replicas;
    double link_gbps;
    /* prefix sums over layers, [n + 1] */
    uint64_t *p_param, *p_master, *p_grad, *p_optim, *p_act, *p_actin, *p_topt;
    double *p_f, *p_b, *p_o;
    double *pmax_c;               /* [n + 1]: slowest single layer (fwd + bwd) among layers < i */
    /* DP storage */
    entry *pool;
    int pool_n, pool_cap;
    int *off, *cnt;               /* [(n + 1) * n_states] */
    vec *row;                     /* [n_states] */
};

static void dp_free(dp *x)
{
    free(x->p_param);
    free(x->p_f);
    free(x->pool);
    free(x->off);
    if (x->row)
        for (int s = 0; x->ds && s < x->ds->n_states; s++) free(x->row[s].e);
    free(x->row);
}

static int dp_alloc(dp *x, int n, const ms_dev_space *ds)
{
    size_t n1 = (size_t)n + 1, cells = n1 * (size_t)ds->n_states;
    x->p_param = calloc(n1 * 7, sizeof(uint64_t));
    x->p_f = calloc(n1 * 4, sizeof(double));
    x->off = malloc(cells * 2 * sizeof(int));
    x->row = calloc((size_t)ds->n_states, sizeof *x->row);
    if (!x->p_param || !x->p_f || !x->off || !x->row) return -1;
    x->p_master = x->p_param + n1;
    x->p_grad = x->p_master + n1;
    x->p_optim = x->p_grad + n1;
    x->p_act = x->p_optim + n1;
    x->p_actin = x->p_act + n1;
    x->p_topt = x->p_actin + n1;
    x->p_b = x->p_f + n1;
    x->p_o = x->p_b + n1;
    x->pmax_c = x->p_o + n1;
    x->cnt = x->off + cells;
    return 0;
}

static void dp_prefix(dp *x, const ms_layer_cost *L)
{
    for (int l = 0; l < x->n; l++) {
        x->p_param[l + 1] = x->p_param[l] + L[l].param;
        x->p_master[l + 1] = x->p_master[l] + L[l].master;
        x->p_grad[l + 1] = x->p_grad[l] + L[l].grad;
        x->p_optim[l + 1] = x->p_optim[l] + L[l].optim;
        x->p_act[l + 1] = x->p_act[l] + L[l].act;
        x->p_actin[l + 1] = x->p_actin[l] + L[l].act_input;
        x->p_topt[l + 1] = x->p_topt[l] + L[l].transient_opt;
        x->p_f[l + 1] = x->p_f[l] + L[l].fwd_ms;
        x->p_b[l + 1] = x->p_b[l] + L[l].bwd_ms;
        x->p_o[l + 1] = x->p_o[l] + L[l].opt_ms;
        double c = L[l].fwd_ms + L[l].bwd_ms;
        x->pmax_c[l + 1] = c > x->pmax_c[l] ? c : x->pmax_c[l];
    }
}

static int pool_push(dp *x, entry e)
{
    if (x->pool_n == x->pool_cap) {
        int nc = x->pool_cap ? x->pool_cap * 2 : 1024;
        entry *np = realloc(x->pool, (size_t)nc * sizeof *np);
        if (!np) return -1;
        x->pool = np;
        x->pool_cap = nc;
    }
    x->pool[x->pool_n++] = e;
    return 0;
}

/* One configuration. Finds the best plan with step time < *best (strictly);
 * on success updates *best and picks[] / *n_picks and returns 1; 0 when
 * nothing better fits; -1 out of memory. */
int ms_dp_run(dp *x, const ms_layer_cost *L, int sched, int m, double *best, ms_stage_pick *picks,
                  int *n_picks)
{
    const ms_dev_space *ds = x->ds;
    const int n = x->n, S = ds->n_states, K = ds->n_cls;
    const double bound = *best;
    dp_prefix(x, L);
    x->pool_n = 0;
    for (size_t c = 0; c < (size_t)(n + 1) * (size_t)S; c++) x->cnt[c] = 0;
    if (pool_push(x, (entry){0, 0, -1, n, -1, 0})) return -1;
    x->off[(size_t)n * S] = 0;
    x->cnt[(size_t)n * S] = 1;

    for (int i = n - 1; i >= 0; i--) {
        for (int s = 0; s < S; s++) x->row[s].n = 0;
        for (int r = 0; r < x->R && r <= n - 1 - i; r++) {
            const int k = ms_inflight(sched, m, 0, r + 1); /* stage with r stages after it */
            const double klb = (double)(m + r + (i > 0));  /* m + p - 1 for the fewest p possible */
            /* Layers 0..i-1 still need stages: at most `left` of them. Their
             * compute, spread perfectly, bounds the slowest cycle from below
             * (never below their slowest layer); their optimizer time
             * likewise bounds the slowest optimizer step. */
            const int left = x->R - (r + 1);
            if (i > 0 && left <= 0) break;
            double c_lb = 0, o_lb = 0;
            if (i > 0) {
                c_lb = (x->p_f[i] + x->p_b[i]) / left;
                if (x->pmax_c[i] > c_lb) c_lb = x->pmax_c[i];
                o_lb = x->p_o[i] / left;
            }
            if (klb * c_lb + o_lb >= bound) break; /* more stages after: only worse */
            const int s_lo = ds->size_off[r], s_hi = ds->size_off[r + 1];
            const uint64_t in_b = i > 0 ? L[i - 1].out_bytes : 0;
            /* one stage and one replica (i == 0, r == 0) is the only run of one device */
            const uint64_t res = x->replicas > 1 || i > 0 || r > 0 ? ms_sat_add(x->reserve, x->comm_reserve) : x->reserve;
            const int jmax = r == 0 ? n : n - r;
            uint64_t max_act = 0, max_tr = 0;
            for (int j = i + 1; j <= jmax; j++) {
                const ms_layer_cost *lc = &L[j - 1];
                if (lc->act > max_act) max_act = lc->act;
                if (lc->transient > max_tr) max_tr = lc->transient;
                ms_stage_sums ss = {
                    .param = x->p_param[j] - x->p_param[i], .master = x->p_master[j] - x->p_master[i],
                    .grad = x->p_grad[j] - x->p_grad[i], .optim = x->p_optim[j] - x->p_optim[i],
                    .act = x->p_act[j] - x->p_act[i], .act_input = x->p_actin[j] - x->p_actin[i],
                    .max_act = max_act, .max_transient = max_tr, .opt_transient = x->p_topt[j] - x->p_topt[i],
                    .in_bytes = 0, .out_bytes = 0,
                    .fwd_ms = x->p_f[j] - x->p_f[i], .bwd_ms = x->p_b[j] - x->p_b[i],
                    .opt_ms = x->p_o[j] - x->p_o[i],
                };
                uint64_t by[MS_CAT_N];
                /* Without the comm buffers every term only grows with j: once
                 * even the largest device (class 0) is too small, stop. */
                const uint64_t big = ds->avail[0];
                int nr_ok = x->allow_nr && ms_stage_bytes(&ss, k, 0, res, by) <= big;
                int rc_ok = x->allow_rc && ms_stage_bytes(&ss, k, 1, res, by) <= big;
                if (!nr_ok && !rc_ok) break;
                if (klb * (ss.fwd_ms + ss.bwd_ms) + o_lb >= bound) break;
                if (r == 0 && j != n) continue;
                ss.in_bytes = in_b;
                ss.out_bytes = r > 0 ? lc->out_bytes : 0;
                const uint64_t peak_nr = ms_stage_bytes(&ss, k, 0, res, by);
                const uint64_t peak_rc = ms_stage_bytes(&ss, k, 1, res, by);
                ms_plan_stage t_nr, t_rc;
                ms_stage_times(&ss, 0, x->link_gbps, &t_nr);
                ms_stage_times(&ss, 1, x->link_gbps, &t_rc);
                const double o = t_nr.opt_ms;
                for (int c = 0; c < K; c++) {
                    /* per device: the faster choice that fits */
                    int rc;
                    if (x->allow_nr && peak_nr <= ds->avail[c]) rc = 0;
                    else if (x->allow_rc && peak_rc <= ds->avail[c]) rc = 1;
                    else continue;
                    const double cyc = ms_stage_cycle_ms(rc ? &t_rc : &t_nr);
                    for (int q = s_lo; q < s_hi; q++) {
                        const int st = ds->by_size[q], nst = ds->add[st * K + c];
                        if (nst < 0) continue;
                        const size_t cell = (size_t)j * S + st;
                        for (int e = 0; e < x->cnt[cell]; e++) {
                            const int ei = x->off[cell] + e;
                            const entry *pe = &x->pool[ei];
                            entry ne = {pe->C > cyc ? pe->C : cyc, pe->O > o ? pe->O : o, ei, j, (short)c,
                                        (char)rc};
                            if (klb * (ne.C > c_lb ? ne.C : c_lb) + (ne.O > o_lb ? ne.O : o_lb) >= bound) continue;
                            if (pareto_insert(&x->row[nst], ne)) return -1;
                        }
                    }
                }
            }
        }
        for (int s = 0; s < S; s++) {
            const size_t cell = (size_t)i * S + s;
            x->off[cell] = x->pool_n;
            x->cnt[cell] = x->row[s].n;
            for (int e = 0; e < x->row[s].n; e++)
                if (pool_push(x, x->row[s].e[e])) return -1;
        }
    }

    int best_e = -1;
    double best_t = bound;
    for (int st = 1; st < S; st++) {
        const int p = ds->size[st];
        for (int e = 0; e < x->cnt[st]; e++) {
            const entry *pe = &x->pool[x->off[st] + e];
            double t = (double)(m + p - 1) * pe->C + pe->O;
            if (t < best_t) {
                best_t = t;
                best_e = x->off[st] + e;
            }
        }
    }
    if (best_e < 0) return 0;
    *best = best_t;
    int np = 0, first = 0;
    for (int e = best_e; x->pool[e].cls >= 0; e = x->pool[e].next) {
        picks[np++] = (ms_stage_pick){first, x->pool[e].j - 1, x->pool[e].cls, x->pool[e].rc};
        first = x->pool[e].j;
    }
    *n_picks = np;
    return 1;
}

ms_dp *ms_dp_new(int n, int R, const ms_dev_space *ds, uint64_t reserve, double link_gbps, int allow_nr,
                 int allow_rc, uint64_t comm_reserve, int replicas)
{
    dp *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    *x = (dp){.n = n, .R = R, .ds = ds, .reserve = reserve, .link_gbps = link_gbps, .allow_nr = allow_nr,
              .allow_rc = allow_rc, .comm_reserve = comm_reserve, .replicas = replicas};
    if (dp_alloc(x, n, ds)) {
        ms_dp_free(x);
        return NULL;
    }
    return x;
}

void ms_dp_free(ms_dp *x)
{
    if (!x) return;
    dp_free(x);
    free(x);
}
