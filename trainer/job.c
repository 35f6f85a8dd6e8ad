/* job.c — the job fingerprint (job.h). */
#include "trainer/job.h"
#include "trainer/config_keys.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The config keys of a job; the global batch is added as one number, since
 * its split into train.batch x train.accum is layout. */
static const char *const job_keys[] = {
    "model.n_layer",    "model.d_model",          "model.n_head",      "model.seq_len",
    "model.vocab",      "model.mlp_ratio",        "model.norm",        "model.tied",
    "model.bn_momentum", "train.lr",              "train.beta1",       "train.beta2",
    "train.eps",        "train.weight_decay",     "train.grad_clip",   "train.precision",
    "train.loss_scale", "train.loss_scale_window", "train.seed",       NULL,
};

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t ms_job_fingerprint(const ms_config *c, uint64_t data_hash)
{
    uint64_t h = 0xcbf29ce484222325ull;
    char line[MS_CONFIG_VALUE_MAX + 64], value[MS_CONFIG_VALUE_MAX], err[160];
    for (int i = 0; job_keys[i]; i++) {
        if (ms_config_get(c, job_keys[i], value, sizeof value, err, sizeof err)) snprintf(value, sizeof value, "?");
        int n = snprintf(line, sizeof line, "%s=%s\n", job_keys[i], value);
        h = fnv(h, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    }
    int n = snprintf(line, sizeof line, "global_batch=%lld\ndata=%016" PRIx64 "\n", (long long)c->batch * c->accum,
                     data_hash);
    h = fnv(h, line, (size_t)n);
    return h ? h : 1;
}

void ms_job_mismatch(const char *a_ini, const ms_config *b, char *out, size_t len)
{
    ms_config a;
    char why[256];
    out[0] = 0;
    memset(&a, 0, sizeof a);
    if (!a_ini || ms_config_load_ini_text(&a, a_ini, "checkpoint", why, sizeof why)) return;
    for (int i = 0; job_keys[i]; i++) {
        char va[MS_CONFIG_VALUE_MAX], vb[MS_CONFIG_VALUE_MAX];
        if (ms_config_get(&a, job_keys[i], va, sizeof va, why, sizeof why) ||
            ms_config_get(b, job_keys[i], vb, sizeof vb, why, sizeof why))
            return;
        if (strcmp(va, vb)) {
            snprintf(out, len, "%s is %s there, %s here", job_keys[i], va, vb);
            return;
        }
    }
    long long ga = (long long)a.batch * a.accum, gb = (long long)b->batch * b->accum;
    if (ga != gb) snprintf(out, len, "the global batch (train.batch x train.accum) is %lld there, %lld here", ga, gb);
}
