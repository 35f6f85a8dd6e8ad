/* model_args.c — the model options into a config (model_args.h). */
#include "run/model_args.h"

#include <stdio.h>
#include <string.h>

void ms_model_args_init(ms_model_args *a)
{
    memset(a, 0, sizeof *a);
    a->steps = -1;
    a->batch = -1;
}

static int set_kv(ms_config *c, const char *k, const char *v, char *err, size_t errlen)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s=%s", k, v);
    return ms_config_set(c, buf, err, errlen);
}

int ms_model_args_config(const ms_model_args *a, ms_config *c, char *err, size_t errlen)
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
