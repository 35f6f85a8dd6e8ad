/* config_doc.c — docs/config.md from the key table (config_doc.h). */
#include "trainer/config_doc.h"
#include "trainer/config_keys.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char intro[] =
    "# Configuration\n"
    "\n"
    "<!-- Written by `memsplit config --keys-md` from the key table in\n"
    "trainer/config_table.c; a test compares the two. Change the table, then\n"
    "run `build/memsplit config --keys-md > docs/config.md`. -->\n"
    "\n"
    "A run's configuration is put together in this order, each step overriding\n"
    "the one before:\n"
    "\n"
    "1. a preset, `--preset NAME` (`tiny` when only `--config` is given);\n"
    "2. an INI file, `--config FILE`;\n"
    "3. each `--set section.key=value`, in the order given;\n"
    "4. the dedicated flags: `--device`, `--precision`, `--gpu-mem`, `--data`,\n"
    "   `--steps`, `--batch`.\n"
    "\n"
    "`memsplit config` with the same options prints the result as an INI file\n"
    "that `--config` reads back exactly (see the example at the end). The\n"
    "checkpoint and the run database keep that text too.\n"
    "\n"
    "## The file\n"
    "\n"
    "- Sections `[model]`, `[train]`, `[data]`, `[device]`, `[checkpoint]`;\n"
    "  `preset = NAME` before any section resets every key to that preset first.\n"
    "- `key = value`, one per line. A line starting with `;` or `#` is a\n"
    "  comment, and so is the rest of a line from a `;` that follows a space.\n"
    "- In names `-` and `_` are the same and case does not matter; `--set`\n"
    "  also takes a bare name (`n_layer`) or the field's name (`data_path`).\n"
    "- Text values may be quoted, `\"...\"`, with the escapes `\\\\ \\\" \\; \\n\n"
    "  \\t \\r \\xHH`; that is how a value keeps a `;` or leading spaces.\n"
    "- Sizes: bytes or a unit, `512MiB`, `24GiB`, `1.5GB` (K, M, G, T are\n"
    "  binary; kB, MB, GB, TB decimal). Booleans: `0/1`, `true/false`,\n"
    "  `yes/no`, `on/off`.\n"
    "- An unknown key (with a suggestion), a key in the wrong section, a value\n"
    "  of the wrong type or out of its range is an error naming the key and the\n"
    "  line: exit status 1, nothing runs.\n"
    "\n"
    "## Checkpoints\n"
    "\n"
    "`checkpoint.dir` and `checkpoint.every` (or `--checkpoint-dir`,\n"
    "`--checkpoint-every`) write `step-NNNNNNNN.ckpt` files. `memsplit train` on\n"
    "one device keeps every one it writes (a long run of a small model writes\n"
    "many: set `checkpoint.every` accordingly); `memsplit train --plan` and\n"
    "`memsplit doctor` keep the newest two of those they write, and delete no\n"
    "other file. `memsplit doctor` writes into `DB.ckpt/run-N/` beside its\n"
    "database (N its run id), so two runs on one database never share a\n"
    "folder. `checkpoint.resume` (`--resume`) continues from the newest\n"
    "checkpoint in the folder that verifies, skipping corrupt ones (it says\n"
    "which), and refuses a checkpoint of another job: another model, seed,\n"
    "data, optimizer setting or global batch (`train.batch` x `train.accum`).\n"
    "The split over devices and the micro-batching may change between runs.\n"
    "\n"
    "## Keys\n"
    "\n"
    "| key | type | allowed | meaning |\n"
    "|---|---|---|---|\n";

static const char *type_name(const ms_config_key *k)
{
    switch (k->type) {
    case MS_KEY_INT: return "integer";
    case MS_KEY_FLOAT: return "number";
    case MS_KEY_U64: return "integer";
    case MS_KEY_SIZE: return "size";
    case MS_KEY_BOOL: return "boolean";
    case MS_KEY_STR: return "text";
    case MS_KEY_ENUM: return "choice";
    case MS_KEY_PRESET: return "preset";
    }
    return "?";
}

static void allowed(FILE *f, const ms_config_key *k)
{
    switch (k->type) {
    case MS_KEY_INT:
    case MS_KEY_FLOAT: {
        char r[96];
        ms_config_key_range(k, r, sizeof r);
        fputs(r, f);
        break;
    }
    case MS_KEY_U64: fprintf(f, "0 .. 2^64-1"); break;
    case MS_KEY_SIZE: fprintf(f, "0 .. 2^64-1 bytes"); break;
    case MS_KEY_BOOL: fprintf(f, "0, 1"); break;
    case MS_KEY_STR:
        if (k->offset == offsetof(ms_config, device)) fprintf(f, "`cpu`, `cuda:N`");
        else fprintf(f, "at most %zu characters", k->cap - 1);
        break;
    case MS_KEY_ENUM:
        for (int i = 0; k->choices[i]; i++) fprintf(f, "%s`%s`", i ? ", " : "", k->choices[i]);
        break;
    case MS_KEY_PRESET:
        for (int i = 0; ms_preset_names[i]; i++) fprintf(f, "%s`%s`", i ? ", " : "", ms_preset_names[i]);
        break;
    }
}

static void full_name(const ms_config_key *k, char *buf, size_t len)
{
    if (k->section[0]) snprintf(buf, len, "%s.%s", k->section, k->name);
    else snprintf(buf, len, "%s", k->name);
}

int ms_config_write_keys_md(FILE *f)
{
    fputs(intro, f);
    for (int i = 0; i < ms_config_key_count(); i++) {
        const ms_config_key *k = ms_config_key_at(i);
        char name[96];
        full_name(k, name, sizeof name);
        fprintf(f, "| `%s`%s%s%s | %s | ", name, k->alias ? " (`" : "", k->alias ? k->alias : "", k->alias ? "`)" : "",
                type_name(k));
        allowed(f, k);
        fputs(" | ", f);
        for (const char *h = k->help; *h; h++) { /* a '|' would end the cell */
            if (*h == '|') fputc('\\', f);
            fputc(*h, f);
        }
        fputs(" |\n", f);
    }

    int np = 0;
    while (ms_preset_names[np]) np++;
    ms_config *pre = calloc((size_t)np, sizeof *pre);
    if (!pre) return -1;
    char err[256];
    for (int p = 0; p < np; p++)
        if (ms_config_preset(&pre[p], ms_preset_names[p], err, sizeof err)) {
            free(pre);
            return -1;
        }
    fputs("\n## Presets\n\nWhat each preset sets (every key; the file or `--set` changes any of them):\n\n| key |", f);
    for (int p = 0; p < np; p++) fprintf(f, " %s |", ms_preset_names[p]);
    fputs("\n|---|", f);
    for (int p = 0; p < np; p++) fputs("---|", f);
    fputc('\n', f);
    for (int i = 0; i < ms_config_key_count(); i++) {
        const ms_config_key *k = ms_config_key_at(i);
        char name[96], value[MS_CONFIG_VALUE_MAX];
        if (k->type == MS_KEY_PRESET) continue;
        full_name(k, name, sizeof name);
        fprintf(f, "| `%s` |", name);
        for (int p = 0; p < np; p++) {
            if (ms_config_key_format(k, &pre[p], 0, value, sizeof value)) snprintf(value, sizeof value, "?");
            fprintf(f, " %s |", value[0] ? value : "\"\"");
        }
        fputc('\n', f);
    }
    char *ini = ms_config_to_ini(&pre[0]);
    free(pre);
    if (!ini) return -1;
    fprintf(f, "\n## Example\n\nThe `%s` preset as a file (`memsplit config --preset %s`):\n\n```ini\n%s```\n",
            ms_preset_names[0], ms_preset_names[0], ini);
    free(ini);
    return ferror(f) ? -1 : 0;
}
