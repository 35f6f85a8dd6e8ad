/* config_table.c — the key table of ms_config and per-key parse/format/check.
 * Everything that names a key (INI, --set, validation, to_ini) goes through
 * this table, so adding a field means adding one row here. */
#include "trainer/config_keys.h"
#include "vocab/limits.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Enum fields are stored through an int pointer: make sure that is their size. */
_Static_assert(sizeof(ms_norm) == sizeof(int), "enum size");
_Static_assert(sizeof(ms_precision) == sizeof(int), "enum size");
_Static_assert(sizeof(ms_data_format) == sizeof(int), "enum size");

static const char *const norm_names[] = {"layernorm", "batchnorm", NULL};
static const char *const precision_names[] = {"fp32", "bf16", "fp16", NULL};
static const char *const format_names[] = {"auto", "text", "u16", "builtin", NULL};

#define FIELD(f) offsetof(ms_config, f)
#define CAP(f) sizeof(((ms_config *)0)->f)
#define BIG 1e9

/* section, name, alias, type, offset, cap, min, max, flags, choices, help */
static const ms_config_key keys[] = {
    {"", "preset", NULL, MS_KEY_PRESET, FIELD(preset), CAP(preset), 0, 0, 0, NULL,
     "start from a preset (resets every key): tiny, gpt2-small, seed17, seed17-cpu"},
    {"model", "n_layer", NULL, MS_KEY_INT, FIELD(n_layer), 0, 1, MS_MAX_BLOCKS, 0, NULL, "transformer blocks"},
    {"model", "d_model", NULL, MS_KEY_INT, FIELD(d_model), 0, 2, 1 << 20, 0, NULL, "model width C"},
    {"model", "n_head", NULL, MS_KEY_INT, FIELD(n_head), 0, 1, 65536, 0, NULL, "attention heads"},
    {"model", "seq_len", NULL, MS_KEY_INT, FIELD(seq_len), 0, 1, 1 << 24, 0, NULL, "context length T"},
    {"model", "vocab", NULL, MS_KEY_INT, FIELD(vocab), 0, 2, 1 << 24, 0, NULL, "embedding/head rows V"},
    {"model", "mlp_ratio", NULL, MS_KEY_INT, FIELD(mlp_ratio), 0, 1, 64, 0, NULL, "MLP hidden = mlp_ratio * d_model"},
    {"model", "norm", NULL, MS_KEY_ENUM, FIELD(norm), 0, 0, 0, 0, norm_names, "layernorm | batchnorm"},
    {"model", "tied", NULL, MS_KEY_BOOL, FIELD(tied), 0, 0, 1, 0, NULL, "LM head shares the token embedding"},
    {"model", "bn_momentum", NULL, MS_KEY_FLOAT, FIELD(bn_momentum), 0, 0, 1, 0, NULL, "batchnorm running-stat momentum"},
    {"train", "batch", NULL, MS_KEY_INT, FIELD(batch), 0, 1, 1 << 20, 0, NULL, "micro-batch size (sequences)"},
    {"train", "accum", NULL, MS_KEY_INT, FIELD(accum), 0, 1, 1 << 20, 0, NULL, "micro-batches per optimizer step"},
    {"train", "steps", NULL, MS_KEY_INT, FIELD(steps), 0, 0, INT_MAX, 0, NULL, "optimizer steps"},
    {"train", "lr", NULL, MS_KEY_FLOAT, FIELD(lr), 0, 0, 10, MS_KEY_MIN_OPEN, NULL, "learning rate"},
    {"train", "beta1", NULL, MS_KEY_FLOAT, FIELD(beta1), 0, 0, 1, MS_KEY_MAX_OPEN, NULL, "AdamW beta1"},
    {"train", "beta2", NULL, MS_KEY_FLOAT, FIELD(beta2), 0, 0, 1, MS_KEY_MAX_OPEN, NULL, "AdamW beta2"},
    {"train", "eps", NULL, MS_KEY_FLOAT, FIELD(eps), 0, 0, 1, MS_KEY_MIN_OPEN, NULL, "AdamW epsilon"},
    {"train", "weight_decay", NULL, MS_KEY_FLOAT, FIELD(weight_decay), 0, 0, 10, 0, NULL, "AdamW decoupled weight decay"},
    {"train", "grad_clip", NULL, MS_KEY_FLOAT, FIELD(grad_clip), 0, 0, 1e9, 0, NULL, "global-norm clip, 0 = off"},
    {"train", "precision", NULL, MS_KEY_ENUM, FIELD(precision), 0, 0, 0, 0, precision_names, "fp32 | bf16 | fp16"},
    {"train", "loss_scale", NULL, MS_KEY_FLOAT, FIELD(loss_scale), 0, 1, 4294967296.0, 0, NULL, "fp16 initial loss scale"},
    {"train", "loss_scale_window", NULL, MS_KEY_INT, FIELD(loss_scale_window), 0, 1, BIG, 0, NULL, "fp16 good steps before the scale doubles"},
    {"train", "head_chunk", NULL, MS_KEY_INT, FIELD(head_chunk), 0, 0, INT_MAX, 0, NULL, "logit rows per fused-head chunk, 0 = auto"},
    {"train", "matmul_pick", NULL, MS_KEY_BOOL, FIELD(matmul_pick), 0, 0, 1, 0, NULL, "GPU train: time cuBLASLt's top algorithms per matmul shape in the first step, keep the fastest (0: the same bits every run)"},
    {"train", "cuda_graph", NULL, MS_KEY_BOOL, FIELD(cuda_graph), 0, 0, 1, 0, NULL, "GPU train on one device: replay each micro-batch as a CUDA graph, captured at the end of the first step"},
    {"train", "launch_ahead", NULL, MS_KEY_BOOL, FIELD(launch_ahead), 0, 0, 1, 0, NULL, "with train.cuda_graph: queue the next step's first micro-batch before reading a step's loss back, so the GPU does not wait for the host (not under fp16, nor before a checkpoint)"},
    {"train", "seed", NULL, MS_KEY_U64, FIELD(seed), 0, 0, 0, 0, NULL, "seed of init, data and dropout"},
    {"train", "log_every", NULL, MS_KEY_INT, FIELD(log_every), 0, 0, INT_MAX, 0, NULL, "progress line every N steps, 0 = auto"},
    {"data", "path", "data_path", MS_KEY_STR, FIELD(data_path), CAP(data_path), 0, 0, 0, NULL, "token file, \"\" = built-in corpus"},
    {"data", "format", "data_format", MS_KEY_ENUM, FIELD(data_format), 0, 0, 0, 0, format_names, "auto | text | u16 | builtin"},
    {"device", "device", NULL, MS_KEY_STR, FIELD(device), CAP(device), 0, 0, 0, NULL, "cpu or cuda:N"},
    {"device", "gpu_mem", NULL, MS_KEY_SIZE, FIELD(gpu_mem), 0, 0, 0, 0, NULL, "emulated capacity (e.g. 24GiB), 0 = whole device"},
    {"checkpoint", "dir", "checkpoint_dir", MS_KEY_STR, FIELD(checkpoint_dir), CAP(checkpoint_dir), 0, 0, 0, NULL, "checkpoint folder, \"\" = none"},
    {"checkpoint", "every", "checkpoint_every", MS_KEY_INT, FIELD(checkpoint_every), 0, 0, INT_MAX, 0, NULL, "steps between checkpoints, 0 = only at the end"},
    {"checkpoint", "resume", NULL, MS_KEY_BOOL, FIELD(resume), 0, 0, 1, 0, NULL, "resume from the newest sound checkpoint of this job"},
};
#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

int ms_config_key_count(void) { return NKEYS; }

const ms_config_key *ms_config_key_at(int i) { return (i >= 0 && i < NKEYS) ? &keys[i] : NULL; }

static void *field(ms_config *c, const ms_config_key *k) { return (char *)c + k->offset; }
static const void *cfield(const ms_config *c, const ms_config_key *k) { return (const char *)c + k->offset; }

/* Full name for messages: "model.n_layer", or "preset" for the top-level key. */
static const char *full_name(const ms_config_key *k, char *buf, size_t len) {
    if (k->section[0]) snprintf(buf, len, "%s.%s", k->section, k->name);
    else snprintf(buf, len, "%s", k->name);
    return buf;
}

/* Name comparison where '-' and '_' are the same and case does not matter. */
static int name_eq(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = (char)tolower((unsigned char)(*a == '-' ? '_' : *a));
        char y = (char)tolower((unsigned char)(*b == '-' ? '_' : *b));
        if (x != y) return 0;
    }
    return *a == *b;
}

static int key_has_name(const ms_config_key *k, const char *name) {
    return name_eq(k->name, name) || (k->alias && name_eq(k->alias, name));
}

/* Edit distance, for "did you mean" suggestions; long inputs count as far. */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            int best = diag + cost;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static void unknown_key_message(const char *given, char *err, size_t errlen) {
    const ms_config_key *best = NULL;
    int best_d = 99;
    for (int i = 0; i < NKEYS; i++) {
        char full[64];
        full_name(&keys[i], full, sizeof full);
        int d = edit_distance(given, full);
        int d2 = edit_distance(given, keys[i].name);
        if (d2 < d) d = d2;
        if (keys[i].alias) {
            int d3 = edit_distance(given, keys[i].alias);
            if (d3 < d) d = d3;
        }
        if (d < best_d) { best_d = d; best = &keys[i]; }
    }
    size_t glen = strlen(given);
    int limit = glen >= 9 ? 3 : glen >= 4 ? 2 : 1;
    if (best && best_d <= limit) {
        char full[64];
        snprintf(err, errlen, "unknown key '%s' (did you mean '%s'?)", given,
                 full_name(best, full, sizeof full));
        return;
    }
    char list[1024];
    size_t used = 0;
    list[0] = 0;
    for (int i = 0; i < NKEYS && used < sizeof list; i++) {
        char full[64];
        int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                         full_name(&keys[i], full, sizeof full));
        if (n < 0) break;
        used += (size_t)n;
    }
    snprintf(err, errlen, "unknown key '%s' (known: %s)", given, list);
}

const ms_config_key *ms_config_key_find(const char *section, const char *name,
                                        char *err, size_t errlen) {
    char sec_buf[64];
    if (!name) name = "";
    if (!section || !section[0]) {
        /* "model.n_layer" given as one bare string: split at the first dot */
        const char *dot = strchr(name, '.');
        if (dot) {
            size_t sl = (size_t)(dot - name);
            if (sl >= sizeof sec_buf) sl = sizeof sec_buf - 1;
            memcpy(sec_buf, name, sl);
            sec_buf[sl] = 0;
            section = sec_buf;
            name = dot + 1;
        } else {
            section = "";
        }
    }
    char given[160];
    if (section[0]) snprintf(given, sizeof given, "%s.%s", section, name);
    else snprintf(given, sizeof given, "%s", name);

    const ms_config_key *by_name = NULL;
    for (int i = 0; i < NKEYS; i++) {
        if (!key_has_name(&keys[i], name)) continue;
        if (!section[0] || name_eq(keys[i].section, section)) return &keys[i];
        if (!by_name) by_name = &keys[i];
    }
    if (by_name) {
        if (by_name->section[0])
            snprintf(err, errlen, "key '%s' belongs in section [%s], not [%s]", name,
                     by_name->section, section);
        else
            snprintf(err, errlen, "key '%s' belongs at the top of the file, before any section", name);
        return NULL;
    }
    unknown_key_message(given, err, errlen);
    return NULL;
}

/* Trims leading and trailing whitespace into out (bounded). */
static void trim_copy(const char *s, char *out, size_t len) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) n--;
    if (n >= len) n = len - 1;
    memcpy(out, s, n);
    out[n] = 0;
}

void ms_config_key_range(const ms_config_key *k, char *buf, size_t len) {
    /* integers in full (2147483647, not 2.14748365e+09) */
    int digits = k->type == MS_KEY_INT ? 10 : 9;
    snprintf(buf, len, "%c%.*g, %.*g%c", (k->flags & MS_KEY_MIN_OPEN) ? '(' : '[', digits, k->min, digits, k->max,
             (k->flags & MS_KEY_MAX_OPEN) ? ')' : ']');
}

static int in_range(const ms_config_key *k, double v) {
    if (isnan(v)) return 0;
    if ((k->flags & MS_KEY_MIN_OPEN) ? !(v > k->min) : !(v >= k->min)) return 0;
    if ((k->flags & MS_KEY_MAX_OPEN) ? !(v < k->max) : !(v <= k->max)) return 0;
    return 1;
}

static int out_of_range(const ms_config_key *k, const char *shown, char *err, size_t errlen) {
    char full[64], r[96];
    ms_config_key_range(k, r, sizeof r);
    snprintf(err, errlen, "%s: %s is out of range %s", full_name(k, full, sizeof full), shown, r);
    return -1;
}

static int parse_bool(const char *s, int *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) { *out = 1; return 0; }
        if (!strcasecmp(s, no[i])) { *out = 0; return 0; }
    }
    return -1;
}

/* Writes s as "..." with escapes so that inih neither trims nor cuts it
 * (';' is escaped: inih treats " ;" as the start of a comment). */
static int quote_string(const char *s, char *buf, size_t len) {
    size_t o = 0;
    if (len < 3) return -1;
    buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '\\' || *p == '"' || *p == ';') snprintf(esc, sizeof esc, "\\%c", *p);
        else if (*p == '\n') snprintf(esc, sizeof esc, "\\n");
        else if (*p == '\t') snprintf(esc, sizeof esc, "\\t");
        else if (*p == '\r') snprintf(esc, sizeof esc, "\\r");
        else if (*p < 0x20 || *p == 0x7f) snprintf(esc, sizeof esc, "\\x%02x", *p);
        else { esc[0] = (char)*p; esc[1] = 0; }
        size_t el = strlen(esc);
        if (o + el + 2 > len) return -1;
        memcpy(buf + o, esc, el);
        o += el;
    }
    buf[o++] = '"';
    buf[o] = 0;
    return 0;
}

static int hex_digit(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    ch = (char)tolower((unsigned char)ch);
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* Inverse of quote_string for a value that starts with '"'; plain values
 * are copied. Returns 0, or -1 with a reason in why. */
static int unquote_string(const char *v, char *out, size_t len, const char **why) {
    if (v[0] != '"') {
        if (strlen(v) >= len) { *why = "value is too long"; return -1; }
        memcpy(out, v, strlen(v) + 1);
        return 0;
    }
    size_t o = 0;
    const char *p = v + 1;
    for (; *p && *p != '"'; p++) {
        char ch = *p;
        if (ch == '\\') {
            p++;
            switch (*p) {
            case '\\': case '"': case ';': ch = *p; break;
            case 'n': ch = '\n'; break;
            case 't': ch = '\t'; break;
            case 'r': ch = '\r'; break;
            case 'x': {
                int hi = p[1] ? hex_digit(p[1]) : -1, lo = (hi >= 0 && p[2]) ? hex_digit(p[2]) : -1;
                if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) { *why = "bad \\x escape in quoted value"; return -1; }
                ch = (char)(hi * 16 + lo);
                p += 2;
                break;
            }
            default: *why = "unknown escape in quoted value (use \\\\ \\\" \\; \\n \\t \\r \\xHH)"; return -1;
            }
        }
        if (o + 1 >= len) { *why = "value is too long"; return -1; }
        out[o++] = ch;
    }
    if (*p != '"' || p[1]) { *why = "quoted value must end with a single closing '\"'"; return -1; }
    out[o] = 0;
    return 0;
}

int ms_config_key_parse(const ms_config_key *k, ms_config *c, const char *value,
                        char *err, size_t errlen) {
    char full[64], v[MS_CONFIG_VALUE_MAX];
    full_name(k, full, sizeof full);
    if (!value) value = "";
    if (strlen(value) >= sizeof v) {
        snprintf(err, errlen, "%s: value is too long (%zu characters)", full, strlen(value));
        return -1;
    }
    trim_copy(value, v, sizeof v);
    char *end = NULL;
    switch (k->type) {
    case MS_KEY_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (!v[0] || *end || end == v) {
            snprintf(err, errlen, "%s: '%s' is not an integer", full, v);
            return -1;
        }
        if (errno == ERANGE || x < INT_MIN || x > INT_MAX || !in_range(k, (double)x))
            return out_of_range(k, v, err, errlen);
        *(int *)field(c, k) = (int)x;
        return 0;
    }
    case MS_KEY_FLOAT: {
        errno = 0;
        double x = strtod(v, &end);
        if (!v[0] || *end || end == v || !isfinite(x)) {
            snprintf(err, errlen, "%s: '%s' is not a finite number", full, v);
            return -1;
        }
        if (!in_range(k, x)) return out_of_range(k, v, err, errlen);
        float f = (float)x;
        /* a positive value that rounds to 0 as float must not slip past "> 0" */
        if (!in_range(k, (double)f)) return out_of_range(k, v, err, errlen);
        *(float *)field(c, k) = f;
        return 0;
    }
    case MS_KEY_U64: {
        const char *p = v;
        if (*p == '+') p++;
        if (!isdigit((unsigned char)*p)) {
            snprintf(err, errlen, "%s: '%s' is not a non-negative integer", full, v);
            return -1;
        }
        errno = 0;
        unsigned long long x = strtoull(p, &end, 10);
        if (*end) {
            snprintf(err, errlen, "%s: '%s' is not a non-negative integer", full, v);
            return -1;
        }
        if (errno == ERANGE) {
            snprintf(err, errlen, "%s: '%s' does not fit in 64 bits", full, v);
            return -1;
        }
        *(uint64_t *)field(c, k) = (uint64_t)x;
        return 0;
    }
    case MS_KEY_SIZE: {
        size_t x;
        char why[160];
        if (ms_parse_size(v, &x, why, sizeof why)) {
            snprintf(err, errlen, "%s: %s", full, why);
            return -1;
        }
        *(size_t *)field(c, k) = x;
        return 0;
    }
    case MS_KEY_BOOL: {
        int b;
        if (parse_bool(v, &b)) {
            snprintf(err, errlen, "%s: '%s' is not a boolean (0/1, true/false, yes/no)", full, v);
            return -1;
        }
        *(int *)field(c, k) = b;
        return 0;
    }
    case MS_KEY_STR: {
        char s[MS_CONFIG_VALUE_MAX];
        const char *why = NULL;
        if (unquote_string(v, s, sizeof s, &why)) {
            snprintf(err, errlen, "%s: %s", full, why);
            return -1;
        }
        if (strlen(s) >= k->cap) {
            snprintf(err, errlen, "%s: value is too long (%zu characters, at most %zu)", full,
                     strlen(s), k->cap - 1);
            return -1;
        }
        if (k->offset == offsetof(ms_config, device) && !ms_device_name_valid(s)) {
            snprintf(err, errlen, "%s: '%s' is not a device (cpu or cuda:N)", full, s);
            return -1;
        }
        memcpy(field(c, k), s, strlen(s) + 1);
        return 0;
    }
    case MS_KEY_ENUM: {
        for (int i = 0; k->choices[i]; i++)
            if (!strcasecmp(v, k->choices[i])) {
                *(int *)field(c, k) = i;
                return 0;
            }
        char opts[128] = "";
        for (int i = 0; k->choices[i]; i++) {
            if (i) strncat(opts, "|", sizeof opts - strlen(opts) - 1);
            strncat(opts, k->choices[i], sizeof opts - strlen(opts) - 1);
        }
        snprintf(err, errlen, "%s: '%s' is not one of %s", full, v, opts);
        return -1;
    }
    case MS_KEY_PRESET: {
        char name[64];
        const char *why_q = NULL;
        if (unquote_string(v, name, sizeof name, &why_q)) {
            snprintf(err, errlen, "%s: %s", full, why_q);
            return -1;
        }
        if (!name[0]) { /* an empty preset only clears the label */
            ((char *)field(c, k))[0] = 0;
            return 0;
        }
        ms_config fresh;
        char why[256];
        if (ms_config_preset(&fresh, name, why, sizeof why)) {
            snprintf(err, errlen, "%s: %s", full, why);
            return -1;
        }
        *c = fresh;
        return 0;
    }
    }
    snprintf(err, errlen, "%s: internal error (unknown key type)", full);
    return -1;
}

/* Exact text for a size: a binary unit when it divides evenly, else bytes. */
static void format_size(size_t x, char *buf, size_t len) {
    static const char *const units[] = {"TiB", "GiB", "MiB", "KiB"};
    static const int shifts[] = {40, 30, 20, 10};
    for (int i = 0; i < 4; i++) {
        size_t u = (size_t)1 << shifts[i];
        if (x && x % u == 0) {
            snprintf(buf, len, "%zu%s", x / u, units[i]);
            return;
        }
    }
    snprintf(buf, len, "%zu", x);
}

int ms_config_key_format(const ms_config_key *k, const ms_config *c, int quote, char *buf, size_t len) {
    const void *p = cfield(c, k);
    int n = -1;
    switch (k->type) {
    case MS_KEY_INT:
    case MS_KEY_BOOL: n = snprintf(buf, len, "%d", *(const int *)p); break;
    case MS_KEY_FLOAT: {
        /* the shortest of %.6g..%.9g that reads back to the same float
         * ("0.1", not "0.100000001"); %.9g is always exact */
        float f = *(const float *)p;
        char tmp[48];
        for (int digits = 6; digits <= 9; digits++) {
            snprintf(tmp, sizeof tmp, "%.*g", digits, (double)f);
            if ((float)strtod(tmp, NULL) == f) break;
        }
        n = snprintf(buf, len, "%s", tmp);
        break;
    }
    case MS_KEY_U64: n = snprintf(buf, len, "%" PRIu64, *(const uint64_t *)p); break;
    case MS_KEY_SIZE: {
        char s[48];
        format_size(*(const size_t *)p, s, sizeof s);
        n = snprintf(buf, len, "%s", s);
        break;
    }
    case MS_KEY_STR:
    case MS_KEY_PRESET:
        if (!memchr(p, 0, k->cap)) return -1;
        if (quote) return quote_string((const char *)p, buf, len);
        n = snprintf(buf, len, "%s", (const char *)p);
        break;
    case MS_KEY_ENUM: {
        int e = *(const int *)p, count = 0;
        while (k->choices[count]) count++;
        n = snprintf(buf, len, "%s", (e >= 0 && e < count) ? k->choices[e] : "?");
        break;
    }
    }
    return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

int ms_config_key_check(const ms_config_key *k, const ms_config *c, char *err, size_t errlen) {
    char full[64], shown[64];
    full_name(k, full, sizeof full);
    const void *p = cfield(c, k);
    switch (k->type) {
    case MS_KEY_INT:
        if (!in_range(k, *(const int *)p)) {
            snprintf(shown, sizeof shown, "%d", *(const int *)p);
            return out_of_range(k, shown, err, errlen);
        }
        return 0;
    case MS_KEY_FLOAT:
        if (!in_range(k, *(const float *)p)) {
            snprintf(shown, sizeof shown, "%.9g", (double)*(const float *)p);
            return out_of_range(k, shown, err, errlen);
        }
        return 0;
    case MS_KEY_BOOL:
        if (*(const int *)p != 0 && *(const int *)p != 1) {
            snprintf(err, errlen, "%s: %d is not 0 or 1", full, *(const int *)p);
            return -1;
        }
        return 0;
    case MS_KEY_ENUM: {
        int e = *(const int *)p, count = 0;
        while (k->choices[count]) count++;
        if (e < 0 || e >= count) {
            snprintf(err, errlen, "%s: %d is not a valid choice", full, e);
            return -1;
        }
        return 0;
    }
    case MS_KEY_STR:
    case MS_KEY_PRESET:
        if (!memchr(p, 0, k->cap)) {
            snprintf(err, errlen, "%s: not NUL-terminated", full);
            return -1;
        }
        if (k->offset == offsetof(ms_config, device) && !ms_device_name_valid((const char *)p)) {
            snprintf(err, errlen, "%s: '%s' is not a device (cpu or cuda:N)", full, (const char *)p);
            return -1;
        }
        return 0;
    case MS_KEY_U64:
    case MS_KEY_SIZE: return 0;
    }
    return 0;
}

int ms_config_get(const ms_config *c, const char *key, char *buf, size_t len,
                  char *err, size_t errlen) {
    const ms_config_key *k = ms_config_key_find(NULL, key, err, errlen);
    if (!k) return -1;
    if (ms_config_key_format(k, c, 0, buf, len)) {
        snprintf(err, errlen, "%s: value does not fit the buffer", key);
        return -1;
    }
    return 0;
}
