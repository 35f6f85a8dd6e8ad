/* rank_agree.c — one job fingerprint over the ranks of a launch (rank_agree.h). */
#include "run/rank_agree.h"
#include "run/exit.h"
#include "trainer/config_keys.h"
#include "trainer/data.h"
#include "vocab/plan_json.h"
#include "vocab/visible.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG 480        /* one rank's verdict, as the others read it */
#define SHOWN 8        /* ranks named in the message, at most */

typedef struct text {
    char *s;
    size_t n, cap;
    int failed;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0 || t->failed) return;
    if (t->n + (size_t)k + 1 > t->cap) {
        size_t cap = (t->n + (size_t)k + 1) * 2;
        char *g = realloc(t->s, cap);
        if (!g) {
            t->failed = 1;
            return;
        }
        t->s = g;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
    va_end(ap);
    t->n += (size_t)k;
}

/* Every value of j as "path=value" lines (compact JSON scalars). */
static void flatten(text *t, const char *path, const json_t *j)
{
    char sub[512];
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            if (!strcmp(path, "plan") && !strcmp(k, "reasoning")) continue; /* words, not the job */
            snprintf(sub, sizeof sub, "%s.%s", path, k);
            flatten(t, sub, v);
        }
    } else if (json_is_array(j)) {
        add(t, "%s.length=%zu\n", path, json_array_size(j));
        for (size_t i = 0; i < json_array_size(j); i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            flatten(t, sub, json_array_get(j, i));
        }
    } else {
        char *v = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        add(t, "%s=%s\n", path, v ? v : "?");
        free(v);
    }
}

/* This rank's job as text (rank_agree.h), or NULL with err. */
static char *job_text(const ms_config *c, const ms_plan *plan, const ms_rank_opts *o, char *err, size_t errlen)
{
    text t = { 0 };
    char v[MS_CONFIG_VALUE_MAX];
    for (int i = 0; i < ms_config_key_count(); i++) {
        const ms_config_key *k = ms_config_key_at(i);
        if (!strcmp(k->section, "device") || (!strcmp(k->section, "data") && !strcmp(k->name, "path"))) continue;
        if (ms_config_key_format(k, c, 1, v, sizeof v)) snprintf(v, sizeof v, "?");
        add(&t, "%s%s%s=%s\n", k->section, k->section[0] ? "." : "", k->name, v);
    }
    ms_data *d = ms_data_open(c, err, errlen);
    if (!d) {
        free(t.s);
        return NULL;
    }
    add(&t, "data.tokens=%016" PRIx64 "\n", ms_data_hash(d));
    ms_data_close(d);
    json_t *pj = ms_plan_to_json(plan);
    flatten(&t, "plan", pj);
    json_decref(pj);
    add(&t, "rank.checkpoint_dir=%s\nrank.checkpoint_every=%ld\nrank.resume=%d\n", o->ckdir ? o->ckdir : "",
        o->ckevery, o->resume);
    if (t.failed || !pj) {
        free(t.s);
        snprintf(err, errlen, "out of host memory");
        return NULL;
    }
    return t.s;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h ? h : 1;
}

/* The value of key in text (a line "key=value"), into out; 0 absent. */
static int value_of(const char *text, const char *key, size_t klen, char *out, size_t len)
{
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        if (n > klen && p[klen] == '=' && !strncmp(p, key, klen)) {
            size_t vn = n - klen - 1;
            snprintf(out, len, "%.*s", (int)(vn < len ? vn : len - 1), p + klen + 1);
            return 1;
        }
        p = eol ? eol + 1 : NULL;
    }
    return 0;
}

/* The first key whose value differs between rank 0's text and mine, with
 * both values (visible, cut), into out. */
static void first_difference(const char *t0, const char *mine, int rank, char *out, size_t len)
{
    const char *pair[2] = { t0, mine };
    for (int side = 0; side < 2; side++)
        for (const char *p = pair[side]; p && *p;) {
            const char *eol = strchr(p, '\n'), *eq = strchr(p, '=');
            size_t n = eol ? (size_t)(eol - p) : strlen(p);
            if (eq && eq < p + n) {
                size_t klen = (size_t)(eq - p);
                char a[256] = "", b[256] = "", va[96], vb[96], key[160];
                int has0 = value_of(t0, p, klen, a, sizeof a), has1 = value_of(mine, p, klen, b, sizeof b);
                if (has0 != has1 || strcmp(a, b)) {
                    snprintf(key, sizeof key, "%.*s", (int)(klen < sizeof key ? klen : sizeof key - 1), p);
                    snprintf(out, len, "%s is %s on rank 0, %s on rank %d", key,
                             has0 ? ms_visible(a, va, sizeof va) : "not set", has1 ? ms_visible(b, vb, sizeof vb) : "not set",
                             rank);
                    return;
                }
            }
            p = eol ? eol + 1 : NULL;
        }
    snprintf(out, len, "their jobs differ");
}

/* The ranks' lines as one message: ranks that failed alike are named
 * together ("ranks 0 and 1: ..."), at most SHOWN sentences. */
static void compose(const char *msgs, int n, char *err, size_t errlen)
{
    size_t used = 0;
    int shown = 0, more = 0;
    err[0] = 0;
    for (int r = 0; r < n; r++) {
        const char *m = msgs + (size_t)r * MSG;
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = m[0] == 'F' && !strcmp(m, msgs + (size_t)q * MSG);
        if (!m[0] || seen) continue;
        if (shown == SHOWN) {
            more++;
            continue;
        }
        char who[96] = "";
        int k;
        if (m[0] == 'F') {
            int alike = 0;
            for (int q = r; q < n; q++) alike += !strcmp(m, msgs + (size_t)q * MSG);
            k = snprintf(who, sizeof who, "rank%s %d", alike > 1 ? "s" : "", r);
            for (int q = r + 1, i = 1; q < n && k > 0 && (size_t)k + 24 < sizeof who; q++)
                if (!strcmp(m, msgs + (size_t)q * MSG))
                    k += snprintf(who + k, sizeof who - (size_t)k, "%s%d", ++i == alike ? " and " : ", ", q);
            k = snprintf(err + used, errlen - used, "%s%s: %s", shown ? "; " : "", who, m + 1);
        } else {
            k = snprintf(err + used, errlen - used, "%s%s", shown ? "; " : "", m + 1);
        }
        used = k > 0 && used + (size_t)k < errlen ? used + (size_t)k : errlen - 1;
        shown++;
    }
    if (more && used + 1 < errlen) snprintf(err + used, errlen - used, "; and %d more", more);
    if (!err[0]) snprintf(err, errlen, "the ranks do not agree on the job");
}

typedef struct verdict {
    int code;          /* 0 ok, -1 stops on purpose, else its exit status */
    uint64_t fp;
} verdict;

int ms_rank_agree(const ms_world *w, int code, const char *why, const ms_config *cfg, const ms_plan *plan,
                  const ms_rank_opts *o, char *err, size_t errlen)
{
    char mine_why[MSG];
    snprintf(mine_why, sizeof mine_why, "%s", why ? why : "");
    err[0] = 0;
    char *mine = NULL;
    if (!code) {
        mine = job_text(cfg, plan, o, mine_why, sizeof mine_why);
        if (!mine) code = MS_EXIT_RUNTIME;
    }
    verdict me;
    memset(&me, 0, sizeof me); /* its padding too: it travels */
    me.code = code;
    me.fp = mine ? fnv(mine) : 0;
    verdict *all = calloc((size_t)w->size, sizeof *all);
    char *msgs = calloc((size_t)w->size, MSG);
    if (!all || !msgs) { /* cannot even compare: every rank stops (the collectives below still run) */
        free(all);
        free(msgs);
        free(mine);
        snprintf(err, errlen, "out of host memory");
        w->abort(MS_EXIT_RUNTIME);
        return MS_EXIT_RUNTIME;
    }
    w->allgather(&me, sizeof me, all);
    int stop = 0, on_purpose = 0, differ = 0, worst = 0;
    for (int r = 0; r < w->size; r++) {
        stop += all[r].code != 0;
        on_purpose += all[r].code < 0;
        differ += !all[r].code && !all[0].code && all[r].fp != all[0].fp;
        if (all[r].code > worst) worst = all[r].code;
    }
    int result = 0;
    if (on_purpose == w->size) {
        result = -1;
    } else if (stop || differ) {
        /* the verdicts, each rank's in its own words: rank 0's job goes to
         * every rank, which says how its own differs */
        unsigned long long len0 = all[0].code ? 0 : (unsigned long long)strlen(mine ? mine : "") + 1;
        if (w->rank != 0) len0 = 0;
        w->bcast(&len0, sizeof len0);
        char *t0 = len0 ? malloc((size_t)len0) : NULL;
        if (len0 && !t0) w->abort(MS_EXIT_RUNTIME);
        if (w->rank == 0 && t0) memcpy(t0, mine, (size_t)len0);
        if (len0) w->bcast(t0, (size_t)len0);
        /* a line per rank: 'F' and its own failure, or 'D' and how its job differs */
        char line[MSG];
        line[0] = 0;
        if (code < 0) {
            snprintf(line, sizeof line, "Fstopped: %.400s", mine_why[0] ? mine_why : "asked for --help");
        } else if (code) {
            snprintf(line, sizeof line, "F%.470s", mine_why);
        } else if (t0 && me.fp != all[0].fp) {
            char diff[MSG - 100];
            first_difference(t0, mine, w->rank, diff, sizeof diff);
            snprintf(line, sizeof line,
                     "Drank %d runs another job than rank 0 (fingerprint %016" PRIx64 " on rank 0, %016" PRIx64
                     " on rank %d): %.300s", w->rank, all[0].fp, me.fp, w->rank, diff);
        }
        free(t0);
        w->allgather(line, MSG, msgs);
        compose(msgs, w->size, err, errlen);
        if (differ) {
            size_t k = strlen(err);
            if (k + 1 < errlen)
                snprintf(err + k, errlen - k, " -- every rank must run the same plan, config, steps, seed and data");
        }
        result = worst > 0 ? worst : MS_EXIT_USAGE;
    }
    free(all);
    free(msgs);
    free(mine);
    return result;
}
