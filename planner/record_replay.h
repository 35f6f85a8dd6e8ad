/* record_replay.h — a stage's peak predicted by replaying a program's record
 * (vocab/profile.h: ms_prog_record; docs/program-record.md, "Predicting a
 * stage from the record"). The planner replays a record with it; the run
 * floor checks a record it made (ms_record_check) before keeping it.
 *
 * Contract: a stage holds the contiguous layers [a, b]. Replaying the record
 * for it, every storage of a layer in [a, b] counts over [t_alloc, t_free);
 * a crossing copy whose own layer and whose original's layer are both in
 * [a, b] is not made: it counts nothing and the storage it copied (through
 * a chain of such copies, the first one) lives until the latest free among
 * them. The stage's peak is the most bytes live at any position t with
 * t_from <= t < t_end (what was allocated earlier and is still live counts);
 * its breakdown is what was live, by category, at the first such moment.
 * No reserve is added here. A record given to the functions below must have
 * passed ms_record_check(). */
#ifndef MS_RECORD_REPLAY_H
#define MS_RECORD_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/profile.h"

/* Most bytes a record's storages may hold together, so that every sum the
 * replay makes is exact. */
#define MS_REC_MAX_TOTAL_BYTES (1ull << 60)
/* Most layers x storages a record may hold: the range table's work (a
 * record pass makes at most 64 layers; 64 x 4M storages fit). */
#define MS_REC_MAX_WORK (1ull << 28)

/* Checks an untrusted record: its structure as vocab/profile_json.h's
 * ms_prog_record_validate() checks a profile's (1 <= n_layers <=
 * MS_MAX_LAYERS, layers, categories, positions in order, copies of earlier
 * storages, at most MS_PROFILE_MAX_REC_STORAGES), and what the replay needs
 * beyond it: a copy's original still live when the copy is made, the bytes
 * summing to at most MS_REC_MAX_TOTAL_BYTES, layers x storages at most
 * MS_REC_MAX_WORK. 0, or -1 with a one-line
 * message in err. */
int ms_record_check(const ms_prog_record *r, char *err, size_t errlen);

/* Every range's peak: peaks[a * n + b] for 0 <= a <= b < n (n = n_layers);
 * entries with a > b are 0. peaks holds n * n entries. 0, or -1 when
 * memory ran out. O(n_layers * storages * log storages). */
int ms_record_range_peaks(const ms_prog_record *r, uint64_t *peaks);

/* One range's peak, with bytes[] the categories live at its first moment
 * (all 0 when nothing is live). The plain replay: the reference for
 * ms_record_range_peaks, O(storages * log storages). An invalid range gives
 * 0; UINT64_MAX (bytes all 0) when memory ran out. */
uint64_t ms_record_stage(const ms_prog_record *r, int a, int b, uint64_t bytes[MS_CAT_N]);

/* The most range [a, b] holds while the program ran (layer, phase) in the
 * record pass (its moments), over every such moment from t_from on: what a
 * stage is predicted to hold at the moment a rerun ran out there. 0 with
 * *live, or -1 (no such moment, no moments kept, out of memory). */
int ms_record_live_at(const ms_prog_record *r, int a, int b, int layer, int phase, uint64_t *live);

#endif
