/* profile.c — names of categories and phases; profile lookup and cleanup. */
#include "profiler/profile.h"

#include <stdlib.h>
#include <string.h>

static const char *const cat_names[MS_CAT_N] = {
    "param", "master", "grad", "optim", "act", "transient", "comm", "reserve",
};
static const char *const phase_names[MS_PH_N] = { "init", "forward", "backward", "optimizer" };

const char *ms_cat_name(ms_cat c) { return (unsigned)c < MS_CAT_N ? cat_names[c] : "?"; }
const char *ms_phase_name(ms_phase p) { return (unsigned)p < MS_PH_N ? phase_names[p] : "?"; }

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

void ms_profile_free(ms_profile *p)
{
    if (!p) return;
    free(p->rows);
    free(p->oom.live_by_layer);
    memset(p, 0, sizeof *p);
}

const ms_layer_row *ms_profile_find(const ms_profile *p, int layer, int precision, int micro_batch)
{
    for (int i = 0; i < p->n_rows; i++) {
        const ms_layer_row *r = &p->rows[i];
        if (r->layer == layer && r->precision == precision && r->micro_batch == micro_batch) return r;
    }
    return NULL;
}
