/* profile_json.h — the profile (profile.h) as JSON: what `memsplit profile
 * --json` prints and what `memsplit plan --profile F` reads. The format is
 * documented in docs/plan-format.md ("The profile JSON").
 *
 * Contract:
 *  - ms_profile_to_json() builds the JSON object (caller json_decref()s it);
 *    NULL only when a value cannot be represented (bytes above 2^63).
 *  - ms_profile_from_json() fills *out from such an object after checking it
 *    strictly: every field present with its type, no negative or absurd
 *    bytes, names that fit, and the rows of every (precision, micro-batch)
 *    group covering layers 0..n_layers-1 exactly once. Returns 0, or -1 with
 *    a one-line message naming the field (e.g. "layers[3].act: ..."); on
 *    failure *out is left empty (safe to ms_profile_free()).
 *  - ms_profile_validate() applies the same structural checks to a profile
 *    built in memory (e.g. loaded from the database).
 *  - A program's record (p->record, vocab/profile.h) travels as the optional
 *    key "record" (absent: record NULL): {"n_layers", "t_from", "t_end",
 *    "storages": [[layer, category, bytes, t_alloc, t_free, copy_of], ...]},
 *    the category by name, t_free -1 for MS_REC_NEVER, copy_of -1 for none,
 *    and, when it has any, "moments": [[layer, phase, t_begin, t_end], ...]
 *    (absent: none; the phase by name), and, when it has any,
 *    "handed_on": ["module.path", ...] (absent: none; ms_handed_on_*
 *    below). ms_prog_record_validate() is its
 *    structural check (types and ranges, the profile's layer count, t_alloc
 *    non-decreasing, t_alloc < t_free <= t_end, copies of earlier storages;
 *    moments in order, not overlapping, within t_end, see below); the
 *    planner's ms_record_check() adds what needs the replay's view (a
 *    copy's original still live, the total bytes), which vocab/ cannot call
 *    (no include runs upward).
 *  - File helpers read/write a path ("-" is stdin/stdout).
 * Unknown keys are ignored (forward compatibility); nothing prints or aborts. */
#ifndef MS_PROFILE_JSON_H
#define MS_PROFILE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "vocab/json_io.h"
#include "vocab/limits.h"
#include "vocab/profile.h"

/* 2: long names, transient_opt, program fields, GPT shape optional; 1 still reads */
#define MS_PROFILE_JSON_VERSION 2
/* Limits the validation enforces; with them every sum the planner forms over
 * a stage fits in 64 bits (MS_MAX_LAYERS = 4096 layers x 4 static fields x 2^48 < 2^64). */
#define MS_PROFILE_MAX_ROW_BYTES (1ull << 48)   /* 256 TiB per row field */
#define MS_PROFILE_MAX_BATCH (1 << 20)
/* Most storages a record may hold. */
#define MS_PROFILE_MAX_REC_STORAGES (1 << 24)
/* Most moments a record may hold. The record pass makes one at each
 * transition, and several transitions may fall at one position (a moment
 * of no position: nothing was allocated or freed while it ran), so their
 * count is bounded by this, not by the positions. */
#define MS_PROFILE_MAX_REC_MOMENTS (1 << 24)

json_t *ms_profile_to_json(const ms_profile *p);
int ms_profile_from_json(const json_t *root, ms_profile *out, char *err, size_t errlen);
int ms_profile_validate(const ms_profile *p, char *err, size_t errlen);
/* A record for a profile of n_layers layers: 0, or -1 with a message naming
 * the field ("record.storages[12].copy_of: ..."). Positions are below
 * MS_REC_NEVER (t_end at most MS_REC_NEVER - 1), bytes at most
 * MS_PROFILE_MAX_ROW_BYTES a storage. Moments (at most
 * MS_PROFILE_MAX_REC_MOMENTS): a layer from -1 (outside any layer) to
 * n_layers (the program's own code after the model's forward, its loss:
 * the bridge's "outside" layer, which the record pass's transitions name),
 * an ms_phase, t_begin <= t_end <= the record's t_end, each beginning at or
 * after the previous one's end (the record pass's begin where the one
 * before ends; a moment may hold no position). Its handed_on as
 * ms_handed_on_validate() says. */
int ms_prog_record_validate(const ms_prog_record *r, int n_layers, char *err, size_t errlen);

/* The modules whose outputs a rerun hands on (a record's handed_on, and a
 * program plan's, which the bridge is given), ctx naming the list in
 * messages ("record.handed_on"):
 *  - ms_handed_on_validate(): at most MS_REC_MAX_HANDED_ON, each a
 *    non-empty string of valid UTF-8 (vocab/visible.h's strict decoding)
 *    shorter than MS_NAME_MAX, no two equal. 0, or -1 with a message naming
 *    the entry ("record.handed_on[3]: ...").
 *  - ms_handed_on_to_json(): the list as a JSON array of its strings, in
 *    order (NULL when memory ran out).
 *  - ms_handed_on_from_json(): a (untrusted) read into *list and *n, which
 *    the caller's structure owns from the first entry on (what was read,
 *    counted in *n, is freed with it on failure), then validated. Not an
 *    array, an entry not a string or holding a NUL byte: -1 with the
 *    entry named. */
int ms_handed_on_validate(char *const *list, int n, const char *ctx, char *err, size_t errlen);
json_t *ms_handed_on_to_json(char *const *list, int n);
int ms_handed_on_from_json(const json_t *a, const char *ctx, char ***list, int *n, char *err, size_t errlen);

int ms_profile_write_json(FILE *f, const ms_profile *p, char *err, size_t errlen);
int ms_profile_save_json(const char *path, const ms_profile *p, char *err, size_t errlen);
int ms_profile_load_json(const char *path, ms_profile *out, char *err, size_t errlen);

#endif
