/* run_facts.h — what the terminal and the HTML report say about a run in
 * the same words, as plain text (the HTML report escapes it): a run's
 * devices with their capacities, a program's own description, and layers
 * named by their module paths. Shared by the report files only.
 *
 * Contract: every function writes a NUL-terminated string that fits len
 * (cut at a UTF-8 character boundary when it does not) and reads nothing
 * but its arguments (rf_run_devices: and the database, read only). */
#ifndef MS_RUN_FACTS_H
#define MS_RUN_FACTS_H

#include <stddef.h>

#include "reports/db.h"
#include "vocab/profile.h"

/* A run's devices JSON ([{"name": .., "capacity_bytes" or "capacity": ..}])
 * as "cpu (1.38 MiB), cuda:1 (40.00 GiB)"; a device without a capacity says
 * "(no capacity set)". Returns the number of devices; 0 when the text is
 * empty (out ""), -1 when it does not read as such a list (out then holds
 * the text as stored). */
int rf_devices_text(const char *json, char *out, size_t len);

/* The ids of the runs that name run as their parent, in id order, into
 * *ids (malloc'd; NULL when none). Returns their number, or -1. */
int rf_child_runs(ms_db *db, int64_t run, int64_t **ids);

/* The devices of run r as rf_devices_text() says them; a run that recorded
 * none (a doctor run) takes those of the last run it contains that did
 * (its training's, else its trial's), and the text says whose: "cpu
 * (1.38 MiB), cpu (1.38 MiB) (as run 3, train, recorded them)". Returns
 * the number of devices, 0 when none was recorded anywhere (out ""), -1
 * when the stored text does not read as devices (out holds it as stored)
 * or the database fails. */
int rf_run_devices(ms_db *db, const ms_run_info *r, char *out, size_t len);

/* 1 when the profile is a user's program's (the PyTorch bridge made it: it
 * carries the program's fingerprint), 0 for memsplit's own model. */
int rf_is_program(const ms_profile *p);

/* The name of each layer 0..n-1 from the profile's rows (the first row of
 * each layer; "" where none). names[] points into p. */
void rf_layer_names(const ms_profile *p, const char **names, int n);

/* Layers first..last by name, each run of numbered siblings said once:
 * "segment1, transformers.0-2" (names[i] of layer i; a missing or empty
 * name reads "layer i"). */
void rf_layer_span(const char *const *names, int n, int first, int last, char *out, size_t len);


/* What the program is, in its own terms: "8 layers in its own module paths
 * (segment1, transformers.0-5, segment2); bf16 under autocast (fp32 master
 * weights); batch 4; torch 1.13.0a0 (cpu)". For memsplit's own model, its
 * shape: "26 layers (sequence 1024, d_model 768, 12 heads, vocabulary
 * 50257); fp32; batch 8". */
void rf_model_text(const ms_profile *p, char *out, size_t len);

#endif
