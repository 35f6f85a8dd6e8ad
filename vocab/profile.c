/* profile.c — profile lookup and cleanup. */
#include "vocab/profile.h"
#include "vocab/visible.h"

#include <stdlib.h>
#include <string.h>

void ms_profile_free(ms_profile *p)
{
    if (!p) return;
    free(p->rows);
    free(p->oom.live_by_layer);
    ms_prog_record_free(p->record);
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

int ms_profile_visible_copy(const ms_profile *p, ms_profile *v)
{
    *v = *p;
    v->rows = NULL;
    v->oom.live_by_layer = NULL;
    v->record = NULL;          /* a terminal prints no record */
    v->oom.n_live_layers = 0;
    if (p->n_rows > 0 && !(v->rows = malloc((size_t)p->n_rows * sizeof *v->rows))) v->n_rows = 0;
    if (p->oom.n_live_layers > 0 && p->oom.live_by_layer &&
        (v->oom.live_by_layer = malloc((size_t)p->oom.n_live_layers * sizeof *v->oom.live_by_layer))) {
        memcpy(v->oom.live_by_layer, p->oom.live_by_layer, (size_t)p->oom.n_live_layers * sizeof *v->oom.live_by_layer);
        v->oom.n_live_layers = p->oom.n_live_layers;
    }
    if (v->rows) memcpy(v->rows, p->rows, (size_t)p->n_rows * sizeof *v->rows);
    ms_visible_field(v->model, sizeof v->model);
    ms_visible_field(v->device, sizeof v->device);
    ms_visible_field(v->fingerprint, sizeof v->fingerprint);
    ms_visible_field(v->layer_list, sizeof v->layer_list);
    ms_visible_field(v->framework, sizeof v->framework);
    ms_visible_field(v->accounting, sizeof v->accounting);
    ms_visible_field(v->oom.layer_name, sizeof v->oom.layer_name);
    ms_visible_field(v->oom.what, sizeof v->oom.what);
    for (int i = 0; i < v->n_rows; i++) {
        ms_visible_field(v->rows[i].name, sizeof v->rows[i].name);
        ms_visible_field(v->rows[i].kind, sizeof v->rows[i].kind);
    }
    return (p->n_rows > 0 && !v->rows) || v->oom.n_live_layers != p->oom.n_live_layers ? -1 : 0;
}

void ms_prog_record_free(ms_prog_record *r)
{
    if (!r) return;
    free(r->s);
    free(r->m);
    ms_str_list_free(r->handed_on, r->n_handed_on);
    free(r);
}

void ms_str_list_free(char **list, int n)
{
    if (!list) return;   /* a count without its list (a half-built record) frees nothing */
    for (int i = 0; i < n; i++) free(list[i]);
    free(list);
}

int ms_str_list_copy(char *const *src, int n, char ***dst)
{
    *dst = NULL;
    if (n <= 0 || !src) return 0;
    char **c = calloc((size_t)n, sizeof *c);
    if (!c) return -1;
    for (int i = 0; i < n; i++)
        if (src[i] && !(c[i] = strdup(src[i]))) {
            ms_str_list_free(c, i);
            return -1;
        }
    *dst = c;
    return 0;
}
