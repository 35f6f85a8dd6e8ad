/* record_util.c — random program records (record_util.h). */
#include "tests/common/record_util.h"

#include <stdlib.h>

ms_prog_record *ru_random_record(pu_rng *g, int L, int n, int span)
{
    ms_prog_record *r = calloc(1, sizeof *r);
    if (!r || !(r->s = calloc((size_t)(n ? n : 1), sizeof *r->s))) {
        free(r);
        return NULL;
    }
    r->n_layers = L;
    r->n = n;
    r->t_end = (uint32_t)(span + 1 + pu_int(g, 4));
    uint32_t t = 0;
    int last_copy = -1;
    for (int i = 0; i < n; i++) {
        ms_rec_storage *s = &r->s[i];
        t += (uint32_t)pu_int(g, 3) * (uint32_t)pu_int(g, 2);
        if (t >= r->t_end) t = r->t_end - 1;
        s->t_alloc = t;
        s->layer = pu_int(g, L);
        s->cat = pu_int(g, MS_CAT_N);
        int k = pu_int(g, 50);
        s->bytes = k == 0 ? 0 : k == 1 ? (1ull << 40) + pu_next(g) % 1000 : 1 + pu_next(g) % 1000;
        s->t_free = pu_int(g, 10) == 0 ? MS_REC_NEVER : t + 1 + (uint32_t)pu_int(g, 1 + span / 3);
        if (s->t_free != MS_REC_NEVER && s->t_free > r->t_end) s->t_free = r->t_end;
        s->copy_of = -1;
        if (i > 0 && pu_int(g, 5) < 2) {
            int c = -1;
            if (last_copy >= 0 && pu_int(g, 2) && r->s[last_copy].t_free > t) c = last_copy;
            for (int tries = 0; c < 0 && tries < 8; tries++) {
                int x = i - 1 - pu_int(g, i < 12 ? i : 12);
                if (r->s[x].t_free > t) c = x;
            }
            if (c >= 0) {
                s->copy_of = c;
                last_copy = i;
                /* most crossings go between different layers */
                if (pu_int(g, 6) && s->layer == r->s[c].layer) s->layer = (s->layer + 1 + pu_int(g, L - 1)) % L;
            }
        }
    }
    r->t_from = (uint32_t)pu_int(g, (int)r->t_end + 1);
    if (pu_int(g, 3) == 0) r->t_from = 0;
    return r;
}
