/* ledgers.h — the trial's three ledgers (the trainer's allocator, CUPTI's
 * callbacks, CUPTI's MEMORY2 records: profiler/trial.h's ms_ledger_check)
 * as `memsplit profile` says them: a few lines for the terminal ("ledgers:
 * AGREE — ...", or that only the allocator's ran, and why), and the
 * "ledgers" object of its JSON, with "agree" true when every allocation and
 * free of the allocator was matched in both CUPTI ledgers and CUPTI saw none
 * of its own. */
#ifndef MS_RUN_LEDGERS_H
#define MS_RUN_LEDGERS_H

#include <jansson.h>
#include <stdio.h>

#include "profiler/trial.h"

void ms_ledgers_print(FILE *f, const ms_ledger_check *k, const char *dev);
json_t *ms_ledgers_json(const ms_ledger_check *k);

#endif
