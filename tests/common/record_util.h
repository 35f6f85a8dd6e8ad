/* record_util.h — random program records for the record replay's tests
 * (planner/record_replay.h).
 *
 *  - ru_random_record(): a valid record (ms_record_check passes) of n
 *    storages over n_layers layers and about `span` positions: allocations
 *    in order, many of them crossing copies of live storages between
 *    different layers, often of the copy made last (chains of copies), some
 *    live to the end, some before t_from, a few of 0 or 2^40 bytes. Caller
 *    frees with ms_prog_record_free(). (planner_util.h's pu_random_record
 *    makes records for the profile's formats; this one for the replay.) */
#ifndef RECORD_UTIL_H
#define RECORD_UTIL_H

#include "tests/common/planner_util.h"
#include "vocab/profile.h"

ms_prog_record *ru_random_record(pu_rng *g, int n_layers, int n, int span);

#endif
