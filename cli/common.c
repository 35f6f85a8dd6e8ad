/* common.c — shared option handling for the subcommands. */
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

void ms_cli_model_args_init(ms_cli_model_args *a)
{
    memset(a, 0, sizeof *a);
    a->steps = -1;
    a->batch = -1;
}

int ms_cli_model_opt(ms_cli_model_args *a, const char *name, const char *arg, char *err, size_t errlen)
{
    if (!strcmp(name, "preset")) a->preset = arg;
    else if (!strcmp(name, "config")) a->config = arg;
    else if (!strcmp(name, "set")) {
        if (a->n_sets >= MS_CLI_MAX_SETS) return ms_errf(err, errlen, "--set: more than %d of them", MS_CLI_MAX_SETS);
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

static int set_kv(ms_config *c, const char *k, const char *v, char *err, size_t errlen)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s=%s", k, v);
    return ms_config_set(c, buf, err, errlen);
}

int ms_cli_build_config(const ms_cli_model_args *a, ms_config *c, char *err, size_t errlen)
{
    if (!a->preset && !a->config) {
        snprintf(err, errlen, "give --preset NAME or --config FILE");
        return -1;
    }
    if (ms_config_preset(c, a->preset ? a->preset : "tiny", err, errlen)) return -1;
    if (!a->preset) c->preset[0] = 0;
    if (a->config && ms_config_load_ini(c, a->config, err, errlen)) return -1;
    for (int i = 0; i < a->n_sets; i++)
        if (ms_config_set(c, a->sets[i], err, errlen)) return -1;
    if (a->device && set_kv(c, "device.device", a->device, err, errlen)) return -1;
    if (a->precision && set_kv(c, "train.precision", a->precision, err, errlen)) return -1;
    if (a->gpu_mem && set_kv(c, "device.gpu_mem", a->gpu_mem, err, errlen)) return -1;
    if (a->data && set_kv(c, "data.path", a->data, err, errlen)) return -1;
    if (a->steps >= 0) c->steps = a->steps;
    if (a->batch > 0) c->batch = a->batch;
    return ms_config_validate(c, err, errlen);
}

void ms_cli_print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    }
    fflush(stdout);
}

json_t *ms_cli_cat_json(const size_t *bytes)
{
    json_t *o = json_object();
    for (int c = 0; c < MS_CAT_N; c++) json_object_set_new(o, ms_cat_name((ms_cat)c), json_integer((json_int_t)bytes[c]));
    return o;
}

json_t *ms_cli_device_row(const char *name, size_t capacity, size_t predicted, size_t measured,
                          const size_t *pred_cat, const size_t *meas_cat, double *gap)
{
    double g = predicted && measured ? ((double)measured - (double)predicted) / (double)predicted : 0;
    if (gap) *gap = g;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "capacity_bytes", capacity == SIZE_MAX ? json_null() : json_integer((json_int_t)capacity));
    json_object_set_new(o, "predicted_peak_bytes", json_integer((json_int_t)predicted));
    json_object_set_new(o, "measured_peak_bytes", measured ? json_integer((json_int_t)measured) : json_null());
    json_object_set_new(o, "gap", measured && predicted ? json_real(g) : json_null());
    json_object_set_new(o, "predicted_by_category", ms_cli_cat_json(pred_cat));
    json_object_set_new(o, "measured_by_category", meas_cat ? ms_cli_cat_json(meas_cat) : json_null());
    return o;
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

char *ms_cli_peaks_json(const ms_device *devs, int n)
{
    json_t *o = json_object();
    for (int d = 0; o && d < n; d++) json_object_set_new(o, devs[d].name, json_integer((json_int_t)devs[d].peak_total));
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

long long ms_cli_recorded(long long rc, ms_db *db, const char *cmd, const char *what, int *failed)
{
    if (rc < 0) {
        fprintf(stderr, "memsplit %s: recording %s in the database: %s\n", cmd, what, ms_db_errmsg(db));
        (*failed)++;
    }
    return rc;
}

void ms_cli_print_wrapped(FILE *f, const char *s, int width)
{
    int col = 0;
    while (*s) {
        size_t w = strcspn(s, " ");
        if (col && col + 1 + (int)w > width) {
            fputc('\n', f);
            col = 0;
        } else if (col) {
            fputc(' ', f);
            col++;
        }
        fwrite(s, 1, w, f);
        col += (int)w;
        s += w;
        while (*s == ' ') s++;
    }
    fputc('\n', f);
}
