/* layers.c — the units of a module tree, and its fingerprint (layers.h). */
#include "bridge/layers.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/errf.h"

typedef struct mod {
    int parent;
    const char *path, *type, *sig;
    int is_list;
    unsigned long long param_bytes;
    int n_children, identical;     /* identical: every child has the first child's signature */
    const char *child_type, *child_sig;
} mod;

/* Splits the tree text (a private copy, fields cut in place) into modules.
 * Returns the count, or -1 with why. */
static int parse_tree(char *text, mod **out, char *why, size_t whylen)
{
    int cap = 64, n = 0;
    mod *m = malloc((size_t)cap * sizeof *m);
    if (!m) return ms_errf(why, whylen, "out of memory");
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (!*line) continue;
        char *f[7];
        int k = 0;
        for (char *p = line; k < 7; k++) {
            f[k] = p;
            char *tab = strchr(p, '\t');
            if (!tab) { k++; break; }
            *tab = '\0';
            p = tab + 1;
        }
        if (k != 7) {
            free(m);
            return ms_errf(why, whylen, "module tree line %d: expected 7 tab-separated fields", n + 1);
        }
        char *end;
        long idx = strtol(f[0], &end, 10), parent;
        if (*end || idx != n) {
            free(m);
            return ms_errf(why, whylen, "module tree line %d: index %s out of order", n + 1, f[0]);
        }
        parent = strtol(f[1], &end, 10);
        if (*end || parent < -1 || parent >= n || (n > 0 && parent < 0) || (n == 0 && parent != -1)) {
            free(m);
            return ms_errf(why, whylen, "module tree line %d: bad parent %s", n + 1, f[1]);
        }
        if (n == cap) {
            cap *= 2;
            mod *g = realloc(m, (size_t)cap * sizeof *g);
            if (!g) { free(m); return ms_errf(why, whylen, "out of memory"); }
            m = g;
        }
        m[n] = (mod){ .parent = (int)parent, .path = f[2], .type = f[3], .sig = f[6],
                      .is_list = strcmp(f[4], "1") == 0, .param_bytes = strtoull(f[5], NULL, 10),
                      .identical = 1 };
        if (parent >= 0) {
            mod *p = &m[parent];
            if (p->n_children++ == 0) {
                p->child_type = f[3];
                p->child_sig = f[6];
            } else if (strcmp(p->child_sig, f[6]) != 0) {
                p->identical = 0;
            }
        }
        n++;
    }
    if (n == 0) {
        free(m);
        return ms_errf(why, whylen, "the module tree is empty");
    }
    *out = m;
    return n;
}

int msb_fingerprint(const char *tree_tsv, char *out, size_t outlen)
{
    if (!out || outlen < 23) return -1;
    uint64_t h = 1469598103934665603ull;
    int field = 0;
    for (const char *p = tree_tsv ? tree_tsv : ""; *p; p++) {
        if (*p == '\n') field = 0;
        else if (*p == '\t') field++;
        /* fields 2 (path), 3 (type) and 6 (signature), with their separators */
        if (field == 2 || field == 3 || field == 6 || *p == '\n') {
            h ^= (unsigned char)*p;
            h *= 1099511628211ull;
        }
    }
    snprintf(out, outlen, "fnv64:%016llx", (unsigned long long)h);
    return 0;
}

/* ---- units (layers.h: msb_pick_units) ----------------------------------- */

typedef struct sib {
    int parent;
    const char *sig;
    int index;
} sib;

static int sib_cmp(const void *a, const void *b)
{
    const sib *x = a, *y = b;
    if (x->parent != y->parent) return x->parent < y->parent ? -1 : 1;
    int c = strcmp(x->sig, y->sig);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* run[k]: how many siblings of module k (itself included) share its signature. */
static int sibling_runs(const mod *m, int n, int *run)
{
    sib *s = malloc((size_t)n * sizeof *s);
    if (!s) return -1;
    for (int k = 0; k < n; k++) s[k] = (sib){ .parent = m[k].parent, .sig = m[k].sig, .index = k };
    qsort(s, (size_t)n, sizeof *s, sib_cmp);
    for (int a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && s[b].parent == s[a].parent && !strcmp(s[b].sig, s[a].sig); b++) {}
        for (int k = a; k < b; k++) run[s[k].index] = b - a;
    }
    free(s);
    return 0;
}

/* --layers: mark each named module (forced open, with its ancestors); its
 * children are kept whole unless named. 0, or -1 with why. */
static int mark_named(const mod *m, int n, const char *layers, char *force, char *why, size_t whylen)
{
    if (!layers || !*layers) return 0;
    char *list = strdup(layers), *save = NULL;
    if (!list) return ms_errf(why, whylen, "out of memory");
    int rc = 0;
    for (char *p = strtok_r(list, ",", &save); p && rc == 0; p = strtok_r(NULL, ",", &save)) {
        const char *want = strcmp(p, ".") ? p : "";
        int k = 0;
        while (k < n && strcmp(m[k].path, want)) k++;
        if (k == n) rc = ms_errf(why, whylen, "--layers %s: the model has no module at that path", p);
        else if (m[k].n_children < 1)
            rc = ms_errf(why, whylen, "--layers %s: that module (%s) has no children to be units", p, m[k].type);
        else
            for (int a = k; a >= 0; a = m[a].parent) force[a] = 'o';
    }
    free(list);
    if (rc) return rc;
    for (int k = 1; k < n; k++)   /* children of a named module stay whole, unless opened above */
        if (force[m[k].parent] == 'o' && force[k] != 'o') force[k] = 'k';
    return 0;
}

/* A unit with no parameters and no children (bare) joins its neighbour
 * under the same parent: the unit just before it, else the unit just after
 * it; a run of bare ones between opened modules is one unit. group[k]: the
 * unit module k's unit joins (a sibling's index), or -1 (its own, or none). */
static void group_bare(const mod *m, int n, const char *open, const int *unit_of, int *group)
{
    for (int k = 0; k < n; k++) group[k] = -1;
    for (int p = 0; p < n; p++) {
        if (!open[p]) continue;
        int prev = -1;          /* the sibling just before: a unit's group, or -1 (opened, none) */
        int run_start = -1;     /* bare units not yet placed */
        for (int k = p + 1; k <= n; k++) {
            if (k < n && m[k].parent != p) continue;
            int is_unit = k < n && unit_of[k] >= 0;
            int bare = is_unit && m[k].param_bytes == 0 && m[k].n_children == 0;
            if (bare) {
                if (prev >= 0) group[k] = prev;
                else if (run_start < 0) run_start = k;
                continue;
            }
            /* a sibling that is not bare (or the end): the bare run before it joins it if it is a unit */
            for (int j = run_start; run_start >= 0 && j < k; j++)
                if (m[j].parent == p && unit_of[j] >= 0) group[j] = is_unit ? k : run_start;
            run_start = -1;
            if (k == n) break;
            group[k] = is_unit ? k : -1;
            prev = is_unit ? k : -1;
        }
    }
}

/* Closes the deepest opened module (not the root, not one --layers opened)
 * whose children are all one unit: it becomes that unit's top. 1 when one
 * was closed, 0 when none is left. */
static int close_single(const mod *m, int n, const char *force, char *open, int *unit_of, const int *group)
{
    for (int p = n - 1; p >= 1; p--) {
        if (!open[p] || force[p] == 'o') continue;
        int g = -1, whole = 1;
        for (int k = p + 1; k < n && whole; k++) {
            if (m[k].parent != p) continue;
            int gk = unit_of[k] < 0 ? -2 : group[k] >= 0 ? group[k] : k;
            whole = gk >= 0 && (g < 0 || gk == g);
            g = gk;
        }
        if (!whole || g < 0) continue;
        open[p] = 0;
        unit_of[p] = p;
        for (int k = p + 1; k < n; k++)
            if (m[k].parent == p) unit_of[k] = -1;     /* inside p's unit now */
        return 1;
    }
    return 0;
}

int msb_pick_units(const char *tree_tsv, const char *layers, int *unit_of, int cap, char *why, size_t whylen)
{
    if (!tree_tsv) return ms_errf(why, whylen, "no module tree");
    char *text = strdup(tree_tsv);
    if (!text) return ms_errf(why, whylen, "out of memory");
    mod *m = NULL;
    int n = parse_tree(text, &m, why, whylen), units = -1;
    if (n < 0) {
        free(text);
        return -1;
    }
    if (n > cap) {
        ms_errf(why, whylen, "the model has %d modules, more than %d", n, cap);
        goto out;
    }
    int *run = malloc((size_t)n * sizeof *run), *group = malloc((size_t)n * sizeof *group);
    char *force = calloc((size_t)n, 1), *open = calloc((size_t)n, 1);
    if (!run || !group || !force || !open || sibling_runs(m, n, run) != 0) {
        ms_errf(why, whylen, "out of memory");
    } else if (mark_named(m, n, layers, force, why, whylen) == 0) {
        const unsigned long long total = m[0].param_bytes;
        /* open from the root down: a parent comes before its children */
        open[0] = m[0].n_children > 0;
        for (int k = 0; k < n; k++) unit_of[k] = group[k] = -1;
        for (int k = 1; k < n; k++) {
            if (!open[m[k].parent]) continue;               /* inside a unit */
            unsigned long long share = run[k] >= 4 ? 4 : 8;  /* a run of blocks stays whole longer */
            int big = m[k].param_bytes * share > total;
            open[k] = m[k].n_children > 0 && force[k] != 'k' && (force[k] == 'o' || big);
            if (!open[k]) unit_of[k] = k;                    /* a unit's top module, for now its own */
        }
        /* a module opened into one unit (a block whose only child with parameters holds nearly
         * all of them, with its activation) is that unit, named as itself and with its own
         * code inside: closed again, the deepest first, and its parent's units grouped anew */
        do group_bare(m, n, open, unit_of, group);
        while (close_single(m, n, force, open, unit_of, group));
        /* number the groups in registration order */
        int *id = malloc((size_t)n * sizeof *id);
        if (!id) {
            ms_errf(why, whylen, "out of memory");
        } else {
            for (int k = 0; k < n; k++) id[k] = -1;
            units = 0;
            for (int k = 0; k < n; k++) {
                if (unit_of[k] < 0) continue;
                int g = group[k] >= 0 ? group[k] : k;
                if (id[g] < 0) id[g] = units++;
                unit_of[k] = id[g];
            }
            free(id);
            if (units < 2) {
                units = 0;
                ms_errf(why, whylen, "the model (%s) has nothing to split: %s", m[0].type,
                        m[0].n_children ? "all it holds is one part" : "it has no child modules");
            } else {
                snprintf(why, whylen, "%d units from the module tree (a module is opened while it holds more than "
                         "an eighth of the parameters, a quarter in a run of identical blocks)%s", units,
                         layers && *layers ? "; --layers opened what it names" : "");
            }
        }
    }
    free(run);
    free(group);
    free(force);
    free(open);
out:
    free(m);
    free(text);
    return units;
}
