/* config_ini.c — ms_config from and to INI text, through inih.
 *
 * inih (Debian's build) cuts lines at 200 characters and does not say so;
 * a data path can be 511. So the file is fed to inih through our own line
 * reader, which hands over an overlong "key = value" line as "key=\x01" and
 * keeps the value aside for the handler. The reader also counts lines, which
 * gives handler errors their line number (Debian's inih passes none). */
#include "trainer/config.h"
#include "trainer/config_keys.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INI_FILE_MAX (1 << 20)
#define LONG_MARK "\x01"

typedef struct {
    ms_config cfg;               /* working copy; committed only on success */
    const char *text;            /* the whole file */
    size_t len, pos;
    int lineno;                  /* line most recently handed to inih */
    char long_value[MS_CONFIG_VALUE_MAX + 64];
    int long_pending;            /* long_value belongs to the current line */
    int long_error_line;         /* an overlong line that is not key = value */
    int err_line;                /* first line the handler refused */
    char err[512];
    int keys_seen;
    char shortened[96];          /* the short stand-in for an overlong line */
} ini_ctx;

/* inih's inline-comment rule: ';' preceded by whitespace starts a comment. */
static size_t strip_inline_comment(const char *s, size_t n) {
    int was_space = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ';' && was_space) return i;
        was_space = isspace((unsigned char)s[i]) != 0;
    }
    return n;
}

static void trim_span(const char **s, size_t *n) {
    while (*n && isspace((unsigned char)**s)) { (*s)++; (*n)--; }
    while (*n && isspace((unsigned char)(*s)[*n - 1])) (*n)--;
}

/* Handles a line too long for inih: returns the short line to hand over. */
static const char *shorten_long_line(ini_ctx *x, const char *line, size_t n) {
    const char *s = line;
    trim_span(&s, &n);
    if (n && (*s == ';' || *s == '#')) return ""; /* a long comment */
    const char *sep = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '=' || s[i] == ':') { sep = s + i; break; }
    const char *name = s;
    size_t name_len = sep ? (size_t)(sep - s) : 0;
    trim_span(&name, &name_len);
    const char *val = sep ? sep + 1 : NULL;
    size_t val_len = sep ? n - (size_t)(val - s) : 0;
    if (val) {
        val_len = strip_inline_comment(val, val_len);
        trim_span(&val, &val_len);
    }
    if (!sep || name_len == 0 || name_len > 64 || *s == '[' || val_len >= sizeof x->long_value) {
        x->long_error_line = x->lineno;
        return "\x02"; /* no '=': inih reports this line as an error */
    }
    memcpy(x->long_value, val, val_len);
    x->long_value[val_len] = 0;
    x->long_pending = 1;
    snprintf(x->shortened, sizeof x->shortened, "%.*s=" LONG_MARK, (int)name_len, name);
    return x->shortened;
}

/* fgets-like reader over the in-memory file for ini_parse_stream. */
static char *read_line(char *str, int num, void *stream) {
    ini_ctx *x = stream;
    if (x->pos >= x->len || num < 8) return NULL;
    const char *line = x->text + x->pos;
    const char *nl = memchr(line, '\n', x->len - x->pos);
    size_t n = nl ? (size_t)(nl - line) : x->len - x->pos;
    x->pos += n + (nl ? 1 : 0);
    x->lineno++;
    x->long_pending = 0;
    /* leading whitespace would make inih treat the line as a continuation of
     * the previous value; indentation is just indentation here */
    while (n && (*line == ' ' || *line == '\t')) { line++; n--; }
    const char *out = line;
    size_t out_len = n;
    if (n + 3 > (size_t)num) {
        out = shorten_long_line(x, line, n);
        out_len = strlen(out);
    }
    memcpy(str, out, out_len);
    str[out_len] = '\n';
    str[out_len + 1] = 0;
    return str;
}

static int fail_line(ini_ctx *x, const char *msg) {
    if (!x->err_line) {
        x->err_line = x->lineno;
        snprintf(x->err, sizeof x->err, "%s", msg);
    }
    return 0;
}

static int on_key(void *user, const char *section, const char *name, const char *value) {
    ini_ctx *x = user;
    char msg[512];
    if (value && !strcmp(value, LONG_MARK) && x->long_pending) {
        value = x->long_value;
        x->long_pending = 0;
    }
    const ms_config_key *k = ms_config_key_find(section, name, msg, sizeof msg);
    if (!k) return fail_line(x, msg);
    if (k->type == MS_KEY_PRESET && x->keys_seen) /* it resets every key set before it */
        return fail_line(x, "preset must be the first key of the file");
    if (ms_config_key_parse(k, &x->cfg, value, msg, sizeof msg)) return fail_line(x, msg);
    x->keys_seen++;
    return 1;
}

/* Text of line `want` (1-based), shortened, for syntax error messages. */
static void line_excerpt(const char *text, size_t len, int want, char *out, size_t outlen) {
    const char *p = text, *end = text + len;
    for (int l = 1; l < want && p < end; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    while (n && (p[n - 1] == '\r' || isspace((unsigned char)p[n - 1]))) n--;
    while (n && isspace((unsigned char)*p)) { p++; n--; }
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < outlen && i < 60; i++)
        out[k++] = isprint((unsigned char)p[i]) ? p[i] : '?';
    if (n > 60 && k + 4 < outlen) { memcpy(out + k, "...", 3); k += 3; }
    out[k] = 0;
}

static int read_file(const char *path, char **text, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open config '%s': %s", path, strerror(errno));
        return -1;
    }
    char *buf = malloc(INI_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        snprintf(err, errlen, "out of memory reading '%s'", path);
        return -1;
    }
    size_t n = fread(buf, 1, INI_FILE_MAX + 1, f);
    int bad = ferror(f);
    int saved = errno;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "cannot read config '%s': %s", path, strerror(saved));
        free(buf);
        return -1;
    }
    if (n > INI_FILE_MAX) {
        snprintf(err, errlen, "config '%s' is larger than %d bytes", path, INI_FILE_MAX);
        free(buf);
        return -1;
    }
    if (memchr(buf, 0, n)) {
        snprintf(err, errlen, "config '%s' is not a text file (contains NUL bytes)", path);
        free(buf);
        return -1;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return 0;
}

/* Parses INI text onto c; `name` labels messages ("path:line: ..."). */
static int load_text(ms_config *c, const char *name, const char *text, size_t len,
                     char *err, size_t errlen) {
    ini_ctx *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    x->cfg = *c;
    x->text = text;
    x->len = len;
    int rc = ini_parse_stream(read_line, x, on_key, x);
    if (rc == 0) {
        *c = x->cfg;
    } else if (rc > 0 && rc == x->err_line) {
        snprintf(err, errlen, "%s:%d: %s", name, rc, x->err);
    } else if (rc > 0 && rc == x->long_error_line) {
        snprintf(err, errlen, "%s:%d: line too long (not a key = value line)", name, rc);
    } else if (rc > 0) {
        char excerpt[80];
        line_excerpt(text, len, rc, excerpt, sizeof excerpt);
        snprintf(err, errlen, "%s:%d: syntax error in '%s' (expected [section], key = value or ; comment)",
                 name, rc, excerpt);
    } else {
        snprintf(err, errlen, "%s: INI parser failed (%d)", name, rc);
    }
    free(x);
    return rc == 0 ? 0 : -1;
}

int ms_config_load_ini_text(ms_config *c, const char *text, const char *name, char *err,
                            size_t errlen) {
    if (!text) text = "";
    return load_text(c, name ? name : "config", text, strlen(text), err, errlen);
}

int ms_config_load_ini(ms_config *c, const char *path, char *err, size_t errlen) {
    char *text;
    size_t len;
    if (!path) path = "";
    if (read_file(path, &text, &len, err, errlen)) return -1;
    int rc = load_text(c, path, text, len, err, errlen);
    free(text);
    return rc;
}

char *ms_config_to_ini(const ms_config *c) {
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    if (!f) return NULL;
    fprintf(f, "; memsplit configuration: every key. Strings are quoted; sizes in bytes or KiB/MiB/GiB/TiB.\n");
    const char *section = NULL;
    int ok = 1;
    for (int i = 0; i < ms_config_key_count(); i++) {
        const ms_config_key *k = ms_config_key_at(i);
        char value[MS_CONFIG_VALUE_MAX];
        if (ms_config_key_format(k, c, 1, value, sizeof value)) { ok = 0; break; }
        if (!section || strcmp(section, k->section)) {
            if (k->section[0]) fprintf(f, "\n[%s]\n", k->section);
            section = k->section;
        }
        fprintf(f, "%s = %s\n", k->name, value);
    }
    if (fclose(f) || !ok) {
        free(out);
        return NULL;
    }
    return out;
}
