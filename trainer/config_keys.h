/* config_keys.h — the single table of configuration keys behind config.h.
 *
 * Contract: every key of ms_config is listed once (config_table.c) with its
 * INI section, name, optional alias (the struct field name where it differs,
 * e.g. data.path = data_path), type, field offset and allowed range. INI
 * loading, ms_config_set, validation messages, ms_config_to_ini and
 * ms_config_get all walk this one table. Keys are written "section.name" or
 * bare ("n_layer", "data_path"); '-' and '_' are interchangeable in names.
 * Functions return 0 on success or -1 with a one-line message in err. */
#ifndef MS_CONFIG_KEYS_H
#define MS_CONFIG_KEYS_H

#include <stddef.h>
#include "trainer/config.h"
#include "vocab/device_name.h"   /* ms_device_name_valid: device.device's form */

typedef enum {
    MS_KEY_INT,     /* int field, range [min, max] */
    MS_KEY_FLOAT,   /* float field, range with optional open ends */
    MS_KEY_U64,     /* uint64_t field, any value */
    MS_KEY_SIZE,    /* size_t field, parsed with ms_parse_size */
    MS_KEY_BOOL,    /* int field 0/1; accepts 0/1/true/false/yes/no/on/off */
    MS_KEY_STR,     /* char[] field of capacity cap */
    MS_KEY_ENUM,    /* int-sized enum field, value index into choices */
    MS_KEY_PRESET   /* "preset": setting it applies the named preset */
} ms_key_type;

#define MS_KEY_MIN_OPEN 1u   /* range excludes min, e.g. lr > 0 */
#define MS_KEY_MAX_OPEN 2u   /* range excludes max, e.g. beta1 < 1 */

typedef struct ms_config_key {
    const char *section;            /* "model", ...; "" for the top-level preset key */
    const char *name;               /* key inside its section */
    const char *alias;              /* struct field name if different, else NULL */
    ms_key_type type;
    size_t offset;                  /* offsetof(ms_config, field) */
    size_t cap;                     /* MS_KEY_STR: capacity including the NUL */
    double min, max;                /* MS_KEY_INT / MS_KEY_FLOAT */
    unsigned flags;                 /* MS_KEY_MIN_OPEN | MS_KEY_MAX_OPEN */
    const char *const *choices;     /* MS_KEY_ENUM: NULL-terminated names */
    const char *help;               /* one line for --help style listings */
} ms_config_key;

int ms_config_key_count(void);
const ms_config_key *ms_config_key_at(int i);

/* Finds a key. section may be NULL or "" for a bare name, which may also be
 * "section.name". On failure err says "unknown key 'x' (did you mean 'y'?)",
 * lists the known keys, or says which section the key belongs in. */
const ms_config_key *ms_config_key_find(const char *section, const char *name,
                                        char *err, size_t errlen);

/* Parses value text into the key's field of c (range and choices checked);
 * c is unchanged on error. Messages start with "section.name: ". */
int ms_config_key_parse(const ms_config_key *k, ms_config *c, const char *value,
                        char *err, size_t errlen);
/* The key's current value as text that ms_config_key_parse reads back
 * exactly (floats %.9g, sizes exact). quote = 1 writes strings in double
 * quotes with C-style escapes (\\ \" \; \n \t \r \xHH), as the INI writer
 * needs; string values that start with '"' are unquoted when parsed.
 * Returns 0, or -1 if buf is too small (MS_CONFIG_VALUE_MAX always fits). */
#define MS_CONFIG_VALUE_MAX (4 * MS_PATH_MAX + 16)
int ms_config_key_format(const ms_config_key *k, const ms_config *c, int quote, char *buf, size_t len);
/* The key's range as messages write it: "[1, 4094]", "(0, 10]". */
void ms_config_key_range(const ms_config_key *k, char *buf, size_t len);
/* Checks the key's current value (range, choices, device syntax). */
int ms_config_key_check(const ms_config_key *k, const ms_config *c, char *err, size_t errlen);

/* Reads one key ("model.n_layer" or "n_layer") as text. */
int ms_config_get(const ms_config *c, const char *key, char *buf, size_t len,
                  char *err, size_t errlen);

/* ms_config_load_ini for INI text in memory (e.g. a checkpoint's config);
 * name labels the messages ("name:line: ..."). */
int ms_config_load_ini_text(ms_config *c, const char *text, const char *name, char *err,
                            size_t errlen);


#endif
