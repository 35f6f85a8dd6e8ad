/* program_plan.c — `memsplit plan` for a program's profile (the PyTorch
 * bridge): the program's own precision, batch and checkpointing stand, the
 * schedule is sequential, and the placement is said in the program's own
 * module paths, with a snippet that places the modules by hand. */
#include "run/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab/errf.h"

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

/* "transformers.13" -> prefix "transformers." and 13; -1 when the name
 * does not end in a number after a dot. */
static long trailing_index(const char *s, size_t *prefix_len)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
    if (i == n || i == 0 || s[i - 1] != '.') return -1;
    *prefix_len = i;
    return strtol(s + i, NULL, 10);
}

/* One stage's modules, runs of numbered blocks shortened: "segment1, transformers.0-12". */
static void stage_text(const ms_plan *pl, const ms_plan_stage *st, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (int l = st->first; l <= st->last && n < len; l++) {
        const char *name = pl->layer_names ? pl->layer_names[l] : "";
        size_t pre_a = 0, pre_b = 0;
        long a = trailing_index(name, &pre_a), last = a;
        int e = l;
        while (a >= 0 && e + 1 <= st->last) {   /* extend a run transformers.a, a+1, ... */
            const char *nx = pl->layer_names[e + 1];
            long b = trailing_index(nx, &pre_b);
            if (b != last + 1 || pre_b != pre_a || strncmp(nx, name, pre_a)) break;
            last = b;
            e++;
        }
        char item[MS_NAME_MAX + 24];
        if (e > l) snprintf(item, sizeof item, "%.*s%ld-%ld", (int)pre_a, name, a, last);
        else snprintf(item, sizeof item, "%s", name);
        for (char *c = item; *c; c++)   /* a pre/post layer's modules are comma-joined */
            if (*c == ',') *c = ';';
        n += (size_t)snprintf(out + n, len - n, "%s%s", n ? ", " : "", item);
        l = e;
    }
    for (char *c = out; *c; c++)
        if (*c == ';') *c = ',';
}

void ms_program_placement(FILE *f, const ms_plan *pl)
{
    fprintf(f, "placement: ");
    for (int s = 0; s < pl->n_stages; s++) {
        char text[4096];
        stage_text(pl, &pl->stages[s], text, sizeof text);
        fprintf(f, "%s%s → %s", s ? "; " : "", text, pl->devices[pl->stages[s].device].name);
    }
    fputc('\n', f);
}

void ms_program_snippet(FILE *f, const ms_plan *pl)
{
    const char *root_dev = pl->devices[pl->stages[0].device].name;
    fprintf(f, "# Place the modules by hand (memsplit train --plan does this for you, with\n"
               "# keyword arguments, shared weights and the framework's own moves handled):\n"
               "import torch\n\n"
               "PLACEMENT = [\n");
    for (int s = 0; s < pl->n_stages; s++) {
        const ms_plan_stage *st = &pl->stages[s];
        for (int l = st->first; l <= st->last; l++) {
            const char *names = pl->layer_names ? pl->layer_names[l] : "";
            const char *p = names;
            while (*p) {    /* one entry per module of a comma-joined layer */
                size_t k = strcspn(p, ",");
                if (k) fprintf(f, "    (\"%.*s\", \"%s\"),\n", (int)k, p, pl->devices[st->device].name);
                p += k + (p[k] == ',');
            }
        }
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
               "def place(model, home=\"%s\"):\n"
               "    for name, dev in PLACEMENT:\n"
               "        module = model.get_submodule(name).to(dev)\n"
               "        # a list's elements are not called themselves: wrap what is\n"
               "        lists = (torch.nn.ModuleList, torch.nn.ModuleDict)\n"
               "        for m in (module.children() if isinstance(module, lists) else [module]):\n"
               "            _wrap(m, torch.device(dev), torch.device(home))\n"
               "    return model\n",
            root_dev);
}
