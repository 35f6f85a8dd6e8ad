/* data.h — the token stream a run trains on.
 *
 * Contract: ms_data_open resolves c->data_format (auto: builtin when
 * data_path is "", u16 when it ends in .bin or .u16, else text) and checks
 * the data against the config: text = one token per byte (needs vocab >=
 * 256); u16 = little-endian uint16 tokens, every one < c->vocab (checked at
 * open); builtin = a deterministic, learnable English-like corpus (bytes <
 * 128, at least 1 MiB) generated from c->seed. Every source needs at least
 * seq_len + 1 tokens. ms_data_next reads the stream sequentially: each
 * sequence is a window of T+1 tokens (inputs = first T, targets = last T),
 * the next window starts T tokens later, and a window that would run past
 * the end restarts at token 0. The cursor is the start of the next window;
 * ms_data_seek(cursor) makes a resumed run continue exactly. */
#ifndef MS_DATA_H
#define MS_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/config.h"

typedef struct ms_data ms_data;

/* NULL with a message in err on error (missing/empty/short file, odd-length
 * u16 file, token >= vocab with its value and offset, vocab too small). */
ms_data *ms_data_open(const ms_config *c, char *err, size_t errlen);
void ms_data_close(ms_data *d);

/* Fills inputs[B*T] and targets[B*T] (row-major, sequence b at b*T).
 * Returns 0, or -1 (nothing read) if an argument is NULL, B or T < 1, or
 * the stream is shorter than T+1 tokens. */
int ms_data_next(ms_data *d, int32_t *inputs, int32_t *targets, int B, int T);

uint64_t ms_data_cursor(const ms_data *d);
/* Returns 0, or -1 if cursor is not below ms_data_tokens(d). */
int ms_data_seek(ms_data *d, uint64_t cursor);

/* Largest token in the stream + 1 (the smallest vocab that covers it). */
int ms_data_vocab_needed(const ms_data *d);
uint64_t ms_data_tokens(const ms_data *d);
/* The stream's identity for a job fingerprint (trainer/job.h): a hash of
 * its tokens, computed at open; the same tokens give the same hash whatever
 * file they came from. */
uint64_t ms_data_hash(const ms_data *d);
ms_data_format ms_data_format_of(const ms_data *d); /* resolved: never MS_DATA_AUTO */
/* One line for logs, e.g. "builtin corpus, 1048593 tokens (seed 1337)". */
const char *ms_data_describe(const ms_data *d);

/* The builtin corpus on its own: malloc'd bytes (caller frees) and length.
 * Same seed, same bytes. Returns NULL only when out of memory. */
uint8_t *ms_data_builtin_corpus(uint64_t seed, size_t *len);

#endif
