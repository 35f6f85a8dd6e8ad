/* layers.c — picking the block list from a module tree (layers.h). */
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

static const char *shown(const char *path) { return *path ? path : "(the root module)"; }

/* Is a better than b as the block list? */
static int better(const mod *a, const mod *b)
{
    if (a->n_children != b->n_children) return a->n_children > b->n_children;
    return a->param_bytes > b->param_bytes;   /* equal: the first registered stays */
}

int msb_pick_layers(const char *tree_tsv, const char *override, char *why, size_t whylen)
{
    if (!tree_tsv) return ms_errf(why, whylen, "no module tree");
    char *text = strdup(tree_tsv);
    if (!text) return ms_errf(why, whylen, "out of memory");
    mod *m = NULL;
    int n = parse_tree(text, &m, why, whylen);
    int pick = -1;
    if (n > 0 && override && *override) {
        const char *want = strcmp(override, ".") ? override : "";   /* "." is the root module */
        for (int i = 0; i < n && pick < 0; i++)
            if (strcmp(m[i].path, want) == 0) pick = i;
        if (pick < 0) ms_errf(why, whylen, "--layers %s: the model has no module at that path", override);
        else if (m[pick].n_children < 1) {
            ms_errf(why, whylen, "--layers %s: that module (%s) has no children to be layers", override, m[pick].type);
            pick = -1;
        } else {
            snprintf(why, whylen, "%s: %s of %d %s%s (given by --layers)", override, m[pick].type, m[pick].n_children,
                     m[pick].identical ? "identical " : "", m[pick].identical ? m[pick].child_type : "children");
        }
    } else if (n > 0) {
        for (int i = 0; i < n; i++) {
            if (!m[i].is_list || m[i].n_children < 2 || !m[i].identical) continue;
            if (pick < 0 || better(&m[i], &m[pick])) pick = i;
        }
        if (pick >= 0) {
            snprintf(why, whylen, "%s: %s of %d identical %s (the longest such list)", shown(m[pick].path),
                     m[pick].type, m[pick].n_children, m[pick].child_type);
        } else {
            /* name the longest lists there are, identical or not, so the user can choose */
            int best[2] = {-1, -1};
            for (int i = 0; i < n; i++) {
                if (m[i].n_children < 2) continue;
                if (best[0] < 0 || better(&m[i], &m[best[0]])) { best[1] = best[0]; best[0] = i; }
                else if (best[1] < 0 || better(&m[i], &m[best[1]])) best[1] = i;
            }
            char cand[512] = "";
            for (int k = 0; k < 2 && best[k] >= 0; k++) {
                size_t len = strlen(cand);
                snprintf(cand + len, sizeof cand - len, "%s%s (%s, %d children)", k ? "; " : "",
                         shown(m[best[k]].path), m[best[k]].type, m[best[k]].n_children);
            }
            ms_errf(why, whylen,
                    "the model has no nn.ModuleList or nn.Sequential of identical blocks; name the list of "
                    "layers with --layers PATH%s%s",
                    cand[0] ? " (largest module lists: " : "", cand[0] ? cand : "");
            if (cand[0] && strlen(why) + 2 < whylen) strcat(why, ")");
        }
    }
    free(m);
    free(text);
    return pick;
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
