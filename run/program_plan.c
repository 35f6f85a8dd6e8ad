/* program_plan.c — `memsplit plan` for a program's profile (the PyTorch
 * bridge): the program's own precision, batch and checkpointing stand, the
 * schedule is sequential, and the placement is said in the program's own
 * module paths, with a snippet that places the modules by hand. */
#include "run/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/errf.h"
#include "vocab/visible.h"

int ms_program_plan_opts(const ms_profile *p, ms_plan_opts *o, char *err, size_t errlen)
{
    if (!p->fingerprint[0] || p->n_rows < 1) return 0;
    const ms_layer_row *r = &p->rows[0];
    if (o->precision >= 0 && o->precision != r->precision)
        return ms_errf(err, errlen, "the program trains in %s: its precision is its own (change it in the program and "
                       "profile again)", ms_precision_name((ms_precision)r->precision));
    if (o->micro_batch && o->micro_batch != r->micro_batch)
        return ms_errf(err, errlen, "the program's micro-batch is %d: its batch is its own (change it in the "
                       "program and profile again)", r->micro_batch);
    if (o->global_batch && o->global_batch != p->global_batch)
        return ms_errf(err, errlen, "the program's global batch is %d: its batch is its own", p->global_batch);
    if (o->schedule >= 0 && o->schedule != MS_SCHED_SEQUENTIAL)
        return ms_errf(err, errlen, "a program runs in one process: its schedule is sequential, not %s",
                       ms_schedule_name(o->schedule));
    if (o->recompute == MS_RECOMPUTE_ALWAYS)
        return ms_errf(err, errlen, "the program's activation checkpointing is its own: --recompute always does not "
                       "apply (checkpoint in the program and profile again)");
    o->precision = r->precision;
    o->micro_batch = r->micro_batch;
    o->global_batch = p->global_batch;
    o->schedule = MS_SCHED_SEQUENTIAL;
    o->recompute = MS_RECOMPUTE_NEVER;
    return 0;
}

/* A name as the placement line writes it: bare (is_bare) as it is, else
 * a Python literal, so no control character, quote or separator reaches
 * the line raw and the line parses back (docs/bridge.md). 0, or -1 when it
 * does not fit. */
static int is_bare(const char *name, int device);
static int item_text(const char *name, int device, char *out, size_t len)
{
    if (!is_bare(name, device)) return ms_py_literal(name, out, len);
    return snprintf(out, len, "%s", name) < (int)len ? 0 : -1;
}

/* Whether name is bare: [A-Za-z0-9_.] only (a device's also ':', '/', '-'). */
static int is_bare(const char *name, int device)
{
    int bare = name[0] != 0;
    for (const char *c = name; *c && bare; c++)
        bare = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
               *c == '.' || (device && (*c == ':' || *c == '/' || *c == '-'));
    return bare;
}

/* "transformers.13" -> prefix "transformers." and 13; -1 when the name is
 * not bare or does not end in a number after a dot (only bare names are
 * shortened into runs, so "a.0-12" cannot be a name: '-' is never bare). */
static long trailing_index(const char *s, size_t *prefix_len)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
    if (i == n || i == 0 || s[i - 1] != '.' || n - i > 9 || !is_bare(s, 0)) return -1;
    *prefix_len = i;
    return strtol(s + i, NULL, 10);
}

/* The modules of layer l: a block is one module; the layers before and
 * after the blocks (0 and the last) hold a comma-joined list of them, or a
 * placeholder when the trial saw none: "(before the units)" (bridge/rows.c;
 * "(before the blocks)" in plans of earlier versions). */
static int is_edge(const ms_plan *pl, int l) { return l == 0 || l == pl->n_layers - 1; }
static int placeholder(const char *m, size_t k)
{
    static const char *const names[] = { "(before the units)", "(after the units)", "(before the blocks)",
                                         "(after the blocks)" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (k == strlen(names[i]) && !strncmp(m, names[i], k)) return 1;
    return 0;
}

/* Calls each(name, ctx) for every module of layer l, in order. */
static void modules_of(const ms_plan *pl, int l, void (*each)(const char *name, void *ctx), void *ctx)
{
    const char *names = pl->layer_names ? pl->layer_names[l] : "";
    if (!is_edge(pl, l)) {
        if (names[0]) each(names, ctx);
        return;
    }
    char m[MS_NAME_MAX];
    for (const char *p = names; *p;) {
        size_t k = strcspn(p, ",");
        if (k && k < sizeof m) {
            memcpy(m, p, k);
            m[k] = 0;
            each(m, ctx);
        }
        p += k + (p[k] == ',');
    }
}

/* The placement line's text of one stage, into a growing buffer. */
typedef struct line_buf {
    char *s;
    size_t n, cap;
    int items;
    const char *run_name; /* a run being extended: its first bare name ... */
    size_t run_pre;
    long run_first, run_last;
} line_buf;

static void put(line_buf *b, const char *text)
{
    size_t k = strlen(text);
    if (b->n + k + 1 > b->cap) {
        size_t cap = (b->n + k + 1) * 2;
        char *g = realloc(b->s, cap);
        if (!g) return;
        b->s = g;
        b->cap = cap;
    }
    memcpy(b->s + b->n, text, k + 1);
    b->n += k;
}

static void flush_run(line_buf *b)
{
    if (!b->run_name) return;
    char item[MS_NAME_MAX + 48];
    if (b->run_last > b->run_first)
        snprintf(item, sizeof item, "%.*s%ld-%ld", (int)b->run_pre, b->run_name, b->run_first, b->run_last);
    else
        snprintf(item, sizeof item, "%s", b->run_name);
    put(b, b->items++ ? ", " : "");
    put(b, item);
    free((char *)b->run_name);
    b->run_name = NULL;
}

/* One module into the stage's text: runs of numbered bare names shortened
 * ("transformers.0-12"); other names as item_text writes them. */
static void add_module(const char *name, void *ctx)
{
    line_buf *b = ctx;
    if (placeholder(name, strlen(name))) return;     /* no module: the program's own code */
    size_t pre = 0;
    long i = trailing_index(name, &pre);
    if (b->run_name && i >= 0 && i == b->run_last + 1 && pre == b->run_pre && !strncmp(name, b->run_name, pre)) {
        b->run_last = i;
        return;
    }
    flush_run(b);
    if (i >= 0) {
        b->run_name = strdup(name);
        b->run_pre = pre;
        b->run_first = b->run_last = i;
        if (b->run_name) return;
    }
    char item[4 * MS_NAME_MAX + 8];
    if (item_text(name, 0, item, sizeof item)) snprintf(item, sizeof item, "'...'");
    put(b, b->items++ ? ", " : "");
    put(b, item);
}

void ms_program_placement(FILE *f, const ms_plan *pl)
{
    fprintf(f, "placement: ");
    for (int s = 0; s < pl->n_stages; s++) {
        const ms_plan_stage *st = &pl->stages[s];
        line_buf b;
        memset(&b, 0, sizeof b);
        for (int l = st->first; l <= st->last; l++) modules_of(pl, l, add_module, &b);
        flush_run(&b);
        char dev[4 * 32 + 8];
        if (item_text(pl->devices[st->device].name, 1, dev, sizeof dev)) snprintf(dev, sizeof dev, "'?'");
        fprintf(f, "%s%s → %s", s ? "; " : "", b.s ? b.s : "(the program's own code)", dev);
        free(b.s);
    }
    fputc('\n', f);
}

typedef struct snippet_ctx {
    FILE *f;
    const char *dev;      /* the stage's device, as a Python literal */
} snippet_ctx;

static void snippet_entry(const char *name, void *ctx)
{
    snippet_ctx *x = ctx;
    char lit[4 * MS_NAME_MAX + 8];
    if (placeholder(name, strlen(name)) || ms_py_literal(name, lit, sizeof lit)) return;
    fprintf(x->f, "    (%s, %s),\n", lit, x->dev);
}

void ms_program_snippet(FILE *f, const ms_plan *pl)
{
    char root[4 * 32 + 8], dev[4 * 32 + 8];
    if (ms_py_literal(pl->devices[pl->stages[0].device].name, root, sizeof root)) snprintf(root, sizeof root, "'cpu'");
    fprintf(f, "# Place the modules by hand (memsplit train --plan does this for you, with\n"
               "# keyword arguments, shared weights and the framework's own moves handled):\n"
               "import torch\n\n"
               "PLACEMENT = [\n");
    for (int s = 0; s < pl->n_stages; s++) {
        const ms_plan_stage *st = &pl->stages[s];
        if (ms_py_literal(pl->devices[st->device].name, dev, sizeof dev)) continue;
        snippet_ctx x = { f, dev };
        for (int l = st->first; l <= st->last; l++) modules_of(pl, l, snippet_entry, &x);
    }
    fprintf(f, "]\n\n"
               "def _to(obj, dev):\n"
               "    if torch.is_tensor(obj):\n"
               "        return obj.to(dev)\n"
               "    if isinstance(obj, (list, tuple)):\n"
               "        return type(obj)(_to(x, dev) for x in obj)\n"
               "    if isinstance(obj, dict):\n"
               "        return {k: _to(v, dev) for k, v in obj.items()}\n"
               "    return obj\n\n"
               "def _wrap(module, dev, home):\n"
               "    # inputs follow the module to its device; its outputs go back to\n"
               "    # where the model's own code (residual adds, the loss) computes\n"
               "    fwd = module.forward\n"
               "    def forward(*args, **kwargs):\n"
               "        return _to(fwd(*_to(args, dev), **_to(kwargs, dev)), home)\n"
               "    module.forward = forward\n\n"
               "def place(model, home=%s):\n"
               "    for name, dev in PLACEMENT:\n"
               "        module = model.get_submodule(name).to(dev)\n"
               "        # a list's elements are not called themselves: wrap what is\n"
               "        lists = (torch.nn.ModuleList, torch.nn.ModuleDict)\n"
               "        for m in (module.children() if isinstance(module, lists) else [module]):\n"
               "            _wrap(m, torch.device(dev), torch.device(home))\n"
               "    return model\n",
            root);
}
