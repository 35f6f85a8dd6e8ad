/* config_doc.h — the reference of every configuration key, written from the
 * key table (config_table.c) and the presets, so that docs/config.md cannot
 * drift from the code: `memsplit config --keys-md` writes it, and
 * tests/cli/reliability.sh diffs the committed file against that output.
 *
 * Contract: ms_config_write_keys_md() writes Markdown (how a configuration
 * is put together, the file's syntax, one table row per key with its type,
 * allowed values and meaning, each preset's values, an example file) and
 * returns 0, or -1 when the stream fails. */
#ifndef MS_CONFIG_DOC_H
#define MS_CONFIG_DOC_H

#include <stdio.h>

int ms_config_write_keys_md(FILE *f);

#endif
