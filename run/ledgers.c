/* ledgers.c — the ledgers' agreement in words and JSON (ledgers.h). */
#include "run/ledgers.h"

#include <string.h>

/* Every allocation and free of the allocator in both CUPTI ledgers, and none of CUPTI's own. */
static int agree(const ms_ledger_check *k)
{
    return k->matched_callback == k->allocs && k->matched_activity == k->allocs &&
           k->frees_matched_callback == k->frees && k->frees_matched_activity == k->frees && k->cupti_only == 0;
}

json_t *ms_ledgers_json(const ms_ledger_check *k)
{
    json_t *o = json_object();
    json_object_set_new(o, "cupti", json_boolean(k->done));
    if (k->done) {
        json_object_set_new(o, "allocator_allocs", json_integer(k->allocs));
        json_object_set_new(o, "allocator_bytes", json_integer((json_int_t)k->bytes_allocator));
        json_object_set_new(o, "callback_matched", json_integer(k->matched_callback));
        json_object_set_new(o, "activity_matched", json_integer(k->matched_activity));
        json_object_set_new(o, "frees", json_integer(k->frees));
        json_object_set_new(o, "frees_callback_matched", json_integer(k->frees_matched_callback));
        json_object_set_new(o, "frees_activity_matched", json_integer(k->frees_matched_activity));
        json_object_set_new(o, "cupti_only_allocs", json_integer(k->cupti_only));
        json_object_set_new(o, "failed_alloc_seen_by_cupti", json_integer(k->fail_seen_by_cupti));
        json_object_set_new(o, "agree", json_boolean(agree(k)));
    }
    if (k->detail[0]) json_object_set_new(o, "detail", json_string(k->detail));
    return o;
}

void ms_ledgers_print(FILE *f, const ms_ledger_check *k, const char *dev)
{
    if (!k->done) {
        fprintf(f, "ledgers: %s: the trainer's allocator ledger only%s%s\n", dev,
                strncmp(dev, "cuda", 4) ? " (CUPTI needs a GPU)" : "", k->detail[0] ? "; " : "");
        if (k->detail[0]) fprintf(f, "  %s\n", k->detail);
        return;
    }
    fprintf(f, "ledgers: %s — allocator %d allocations (%llu bytes), %d frees\n", agree(k) ? "AGREE" : "DIFFER",
            k->allocs, (unsigned long long)k->bytes_allocator, k->frees);
    fprintf(f, "  CUPTI callbacks: %d/%d allocations, %d/%d frees matched by address and bytes\n",
            k->matched_callback, k->allocs, k->frees_matched_callback, k->frees);
    fprintf(f, "  CUPTI MEMORY2:   %d/%d allocations, %d/%d frees matched\n", k->matched_activity, k->allocs,
            k->frees_matched_activity, k->frees);
    if (k->cupti_only) fprintf(f, "  %d allocations seen by CUPTI that the allocator did not make\n", k->cupti_only);
    if (k->fail_seen_by_cupti) fprintf(f, "  the failed allocation was seen by CUPTI with the same bytes\n");
    if (k->detail[0]) fprintf(f, "  %s\n", k->detail);
}
