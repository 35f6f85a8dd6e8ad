/* profile.c — profile lookup and cleanup. */
#include "vocab/profile.h"

#include <stdlib.h>
#include <string.h>

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
