/* fuzz_util.h — what the libFuzzer harnesses in tests/fuzz/ share: the
 * fuzzed bytes as a C string or as a file the loaders can open, checkpoint
 * layout helpers, and a loud failure for broken round trips.
 *
 * Contract: nothing here allocates per call except fz_cstr (caller frees);
 * fz_file keeps one in-memory file (memfd) for the whole process, so an
 * input costs no disk I/O. fz_fail prints and abort()s, which libFuzzer
 * reports as a crash with the input saved. */
#ifndef MS_FUZZ_UTIL_H
#define MS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* data[0..n) plus a NUL; NULL when out of memory. */
char *fz_cstr(const uint8_t *data, size_t n);

/* Replaces the process's in-memory file with data[0..n) and returns a path
 * that opens it ("/proc/self/fd/N"); aborts if it cannot. */
const char *fz_file(const uint8_t *data, size_t n);

/* A round trip or contract the parser promises did not hold. */
void fz_fail(const char *what, const char *detail) __attribute__((noreturn));

/* A config the INI loader or --set accepted: it must validate without a
 * crash (either answer) and read back from its INI text (ms_config_to_ini,
 * how runs are recorded and checkpoints compared) to the same text; input
 * names what was fuzzed in the failure message. */
struct ms_config;
void fz_config_round_trip(const struct ms_config *c, const char *input);

/* Checkpoints (trainer/checkpoint.h): loads data[0..n) the ways the trainer
 * does (peek, then load with the section table the file itself declares,
 * give or take one section, and with another model's hash so the file's
 * config text is parsed); every outcome but a crash or leak is fine. */
void fz_ckpt_exercise(const uint8_t *data, size_t n);

/* Rewrites, in place, the fields a random mutation breaks before the header
 * parser sees anything: the file length, the header CRC-32C and the
 * whole-file CRC-32C (each only where the buffer holds it). */
void fz_ckpt_fix_checksums(uint8_t *buf, size_t n);

#endif
