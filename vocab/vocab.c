/* vocab.c — the names of the ground floor's enumerations. */
#include "vocab/vocab.h"

#include <string.h>
#include <strings.h>

static const char *const cat_names[MS_CAT_N] = {
    "param", "master", "grad", "optim", "act", "transient", "comm", "reserve",
};
static const char *const phase_names[MS_PH_N] = { "init", "forward", "backward", "optimizer", "validation" };
static const char *const source_names[MS_ROW_N] = { "full", "isolated", "copied", "uncapped" };

const char *ms_cat_name(ms_cat c) { return (unsigned)c < MS_CAT_N ? cat_names[c] : "?"; }
const char *ms_phase_name(ms_phase p) { return (unsigned)p < MS_PH_N ? phase_names[p] : "?"; }
const char *ms_row_source_name(int s) { return (unsigned)s < MS_ROW_N ? source_names[s] : "?"; }

int ms_cat_parse(const char *s)
{
    for (int i = 0; i < MS_CAT_N; i++)
        if (s && strcmp(s, cat_names[i]) == 0) return i;
    return -1;
}

int ms_phase_parse(const char *s)
{
    for (int i = 0; i < MS_PH_N; i++)
        if (s && strcmp(s, phase_names[i]) == 0) return i;
    return -1;
}

int ms_row_source_parse(const char *s)
{
    for (int i = 0; i < MS_ROW_N; i++)
        if (s && strcmp(s, source_names[i]) == 0) return i;
    return -1;
}

const char *ms_precision_name(ms_precision p) {
    switch (p) {
    case MS_PREC_FP32: return "fp32";
    case MS_PREC_BF16: return "bf16";
    case MS_PREC_FP16: return "fp16";
    }
    return "?";
}

int ms_precision_parse(const char *s, ms_precision *out) {
    static const ms_precision all[] = {MS_PREC_FP32, MS_PREC_BF16, MS_PREC_FP16};
    for (size_t i = 0; s && i < 3; i++)
        if (!strcasecmp(s, ms_precision_name(all[i]))) {
            *out = all[i];
            return 0;
        }
    return -1;
}
