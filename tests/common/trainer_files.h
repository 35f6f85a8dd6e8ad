/* trainer_files.h — temporary folders and files for the trainer unit tests
 * (config, data, checkpoint). Every function aborts the test (cmocka fail)
 * on an I/O error, so tests need not check. */
#ifndef TESTS_TRAINER_FILES_H
#define TESTS_TRAINER_FILES_H

#include <stddef.h>
#include <stdint.h>

/* mkdtemp under $TMPDIR (or /tmp); returns its malloc'd path. */
char *tf_mkdtemp(void);
/* Removes a folder made by tf_mkdtemp and every file directly inside it. */
void tf_rmtree(const char *dir);
/* dir/name into a malloc'd string. */
char *tf_join(const char *dir, const char *name);
void tf_write(const char *path, const void *data, size_t n);
/* Whole file into a malloc'd buffer (NUL-terminated); *n gets its length. */
void *tf_read(const char *path, size_t *n);
/* splitmix64: the tests' seeded PRNG. */
uint64_t tf_rand(uint64_t *state);

#endif
