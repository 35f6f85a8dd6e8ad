/* undo_files.c — what a diagnostic pass left undone (undo_files.h). */
#define _POSIX_C_SOURCE 200809L
#include "run/undo_files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vocab/errf.h"

/* a journal longer than this is no journal of the bridge's (a record is two paths) */
#define UNDO_MAX_BYTES (64u << 20)

static const char *base_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int same_folder(const char *a, const char *b)
{
    size_t la = (size_t)(base_of(a) - a), lb = (size_t)(base_of(b) - b);
    return la == lb && memcmp(a, b, la) == 0;
}

/* s at a run of digits, then what follows it; NULL where none */
static const char *digits(const char *s)
{
    const char *p = s;
    while (*p >= '0' && *p <= '9') p++;
    return p > s ? p : NULL;
}

/* hidden is /DIR/.NAME.memsplit-PID-N (then ".before" where before): NAME's
 * length in *name_len; 0 when it is not such a name */
static int hidden_name(const char *hidden, int before, size_t *name_len)
{
    if (hidden[0] != '/') return 0;
    const char *b = base_of(hidden);
    if (b[0] != '.') return 0;
    const char *mark = NULL;
    for (const char *p = strstr(b + 1, ".memsplit-"); p; p = strstr(p + 1, ".memsplit-")) mark = p;
    if (!mark || mark == b + 1) return 0;
    const char *p = digits(mark + strlen(".memsplit-"));
    if (!p || *p != '-' || !(p = digits(p + 1))) return 0;
    if (before ? strcmp(p, ".before") != 0 : (*p && strcmp(p, ".before") != 0)) return 0;
    *name_len = (size_t)(mark - (b + 1));
    return 1;
}

/* a kept file's record: KEPT is .NAME.memsplit-PID-N.before in PATH's folder, NAME PATH's own */
static int kept_for(const char *kept, const char *path)
{
    size_t n = 0;
    if (path[0] != '/' || !hidden_name(kept, 1, &n) || !same_folder(kept, path)) return 0;
    const char *name = base_of(path);
    return strlen(name) == n && memcmp(name, base_of(kept) + 1, n) == 0;
}

/* an added file's record: an absolute path to a name, without "." or ".." in it (what
 * os.path.abspath gives) and no hidden name of the bridge's (those are D's) */
static int added_name(const char *path)
{
    size_t n = 0;
    if (path[0] != '/' || path[strlen(path) - 1] == '/' || hidden_name(path, 0, &n)) return 0;
    for (const char *p = path; (p = strchr(p, '/')) != NULL; p++) {
        const char *c = p + 1;
        size_t len = strcspn(c, "/");
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) return 0;
    }
    return 1;
}

/* the field at *at within [buf, end): NUL-terminated, non-empty; NULL where not */
static const char *field(const char *buf, size_t len, size_t *at)
{
    if (*at >= len) return NULL;
    const char *f = buf + *at;
    const char *nul = memchr(f, '\0', len - *at);
    if (!nul || nul == f) return NULL;
    *at = (size_t)(nul - buf) + 1;
    return f;
}

static int walk(const char *buf, size_t len, ms_undo_record_fn on_record, void *ctx)
{
    size_t at = 0;
    while (at < len) {
        const char *kind = field(buf, len, &at);
        if (!kind || kind[1] || (kind[0] != 'R' && kind[0] != 'D' && kind[0] != 'N')) return -1;
        const char *hidden = field(buf, len, &at);
        if (!hidden) return -1;
        const char *path = NULL;
        size_t n = 0;
        if (kind[0] == 'N') {
            if (!added_name(hidden)) return -1;
            path = hidden;
            hidden = NULL;
        } else if (kind[0] == 'R') {
            if (!(path = field(buf, len, &at)) || !kept_for(hidden, path)) return -1;
        } else if (!hidden_name(hidden, 0, &n)) {
            return -1;
        }
        if (on_record && on_record(kind[0], hidden, path, ctx) != 0) return -1;
    }
    return 0;
}

int ms_undo_parse(const char *buf, size_t len, ms_undo_record_fn on_record, void *ctx)
{
    if (walk(buf, len, NULL, NULL) != 0) return -1;    /* all checked before any is given */
    return walk(buf, len, on_record, ctx);
}

typedef struct {
    int done;
    char *err;
    size_t errlen;
    int failed;
    const struct timespec *since;
    const char **back;          /* the paths the 'R' records put back */
    size_t n_back, cap_back;
    int no_memory;
} apply_ctx;

static int note_back(char kind, const char *hidden, const char *path, void *p)
{
    (void)hidden;
    apply_ctx *c = p;
    if (kind != 'R') return 0;
    if (c->n_back == c->cap_back) {
        size_t cap = c->cap_back ? 2 * c->cap_back : 16;
        const char **b = realloc(c->back, cap * sizeof *b);
        if (!b) {
            c->no_memory = 1;
            return -1;
        }
        c->back = b;
        c->cap_back = cap;
    }
    c->back[c->n_back++] = path;
    return 0;
}

/* an 'N' record's file is one to remove: not put back by an 'R', a regular file, changed since the pass
 * began (a file from before that the pass did not touch keeps its older ctime) */
static int added_by_pass(const apply_ctx *c, const char *path)
{
    for (size_t i = 0; i < c->n_back; i++)
        if (!strcmp(c->back[i], path)) return 0;
    struct stat st;
    if (!c->since || lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    return st.st_ctim.tv_sec > c->since->tv_sec ||
           (st.st_ctim.tv_sec == c->since->tv_sec && st.st_ctim.tv_nsec >= c->since->tv_nsec);
}

static int apply_one(char kind, const char *hidden, const char *path, void *p)
{
    apply_ctx *c = p;
    if (kind == 'N' && !added_by_pass(c, path)) return 0;
    int rc = kind == 'R' ? rename(hidden, path) : unlink(kind == 'N' ? path : hidden);
    struct stat st;
    if (rc == 0 && kind == 'R' && lstat(hidden, &st) == 0)
        unlink(hidden);         /* two names of one file: rename does nothing, the program's file is in place */
    if (rc == 0) {
        c->done++;
    } else if (errno != ENOENT && !c->failed) {       /* gone already: the bridge's end got there */
        c->failed = 1;
        ms_errf(c->err, c->errlen, "could not %s %s%s%s: %s", kind == 'R' ? "put back" : "remove",
                kind == 'N' ? path : hidden,
                kind == 'R' ? " as " : "", kind == 'R' ? path : "", strerror(errno));
    }
    return 0;                   /* on: what can be put back is */
}

int ms_undo_apply(const char *dir, const struct timespec *since, int *done, char *err, size_t errlen)
{
    *done = 0;
    char name[4200];
    if (snprintf(name, sizeof name, "%s/%s", dir, MS_UNDO_FILE) >= (int)sizeof name)
        return ms_errf(err, errlen, "the pass's folder name is too long: %s", dir);
    FILE *f = fopen(name, "rb");
    if (!f) return errno == ENOENT ? 0 : ms_errf(err, errlen, "cannot read %s: %s", name, strerror(errno));
    struct stat st;
    const char *why = NULL;
    if (fstat(fileno(f), &st) != 0) why = strerror(errno);
    else if ((unsigned long long)st.st_size > UNDO_MAX_BYTES) why = "longer than a pass writes";
    size_t size = why ? 0 : (size_t)st.st_size;
    char *buf = why ? NULL : malloc(size ? size : 1);     /* the file's own size: it is written whole, by a rename */
    if (!why && !buf) why = "out of memory";
    size_t len = buf ? fread(buf, 1, size, f) : 0;
    if (!why && (ferror(f) || len != size)) why = "cut short while read";
    fclose(f);
    if (why) {
        free(buf);
        return ms_errf(err, errlen, "cannot read %s: %s", name, why);
    }
    apply_ctx c = { .err = err, .errlen = errlen, .since = since };
    int rc = ms_undo_parse(buf, len, note_back, &c);
    if (rc == 0) rc = ms_undo_parse(buf, len, apply_one, &c);
    free(c.back);
    free(buf);
    *done = c.done;
    if (c.no_memory) return ms_errf(err, errlen, "cannot apply %s: out of memory", name);
    if (rc != 0) return ms_errf(err, errlen, "%s is not what the bridge writes: nothing in it applied", name);
    return c.failed ? -1 : 0;
}
