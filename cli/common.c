/* common.c — the options and output every front end shares (common.h). */
#include "cli/common.h"
#include "cli/args.h"
#include "vocab/errf.h"

#include <stdlib.h>
#include <string.h>

const char ms_cli_model_help[] =
    "Model options:\n"
    "  --preset NAME        start from a preset: tiny, gpt2-small, seed17, seed17-cpu\n"
    "  --config FILE        INI file overlaid on the preset (sections model, train,\n"
    "                       data, device, checkpoint; every key: docs/config.md)\n"
    "  --set KEY=VALUE      override one key, e.g. --set model.n_layer=4 (repeatable)\n"
    "  --data FILE          training data: a text file (bytes as tokens) or a uint16\n"
    "                       token file (.bin/.u16); default: a built-in corpus\n";

int ms_cli_model_opt(ms_model_args *a, const char *name, const char *arg, char *err, size_t errlen)
{
    if (!strcmp(name, "preset")) a->preset = arg;
    else if (!strcmp(name, "config")) a->config = arg;
    else if (!strcmp(name, "set")) {
        if (a->n_sets >= MS_MODEL_MAX_SETS) return ms_errf(err, errlen, "--set: more than %d of them", MS_MODEL_MAX_SETS);
        a->sets[a->n_sets++] = arg;
    } else if (!strcmp(name, "device")) a->device = arg;
    else if (!strcmp(name, "precision")) a->precision = arg;
    else if (!strcmp(name, "gpu-mem")) a->gpu_mem = arg;
    else if (!strcmp(name, "data")) a->data = arg;
    else if (!strcmp(name, "steps")) return ms_arg_key_int("--steps", "train.steps", arg, &a->steps, err, errlen) ? -1 : 1;
    else if (!strcmp(name, "batch")) return ms_arg_key_int("--batch", "train.batch", arg, &a->batch, err, errlen) ? -1 : 1;
    else return 0;
    return 1;
}

char *ms_cli_cmdline(int argc, char **argv)
{
    size_t n = 16;
    for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 1;
    char *s = malloc(n);
    if (!s) return NULL;
    strcpy(s, "memsplit");
    for (int i = 0; i < argc; i++) {
        strcat(s, " ");
        strcat(s, argv[i]);
    }
    return s;
}

int ms_cli_summary(int code, json_t *summary)
{
    if (summary) ms_print_json(summary);
    json_decref(summary);
    return code;
}
