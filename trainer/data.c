/* data.c — opening token sources (text, uint16, builtin) and reading
 * training windows from them in a fixed, resumable order (see data.h).
 * Files are mapped read-only, so a multi-GiB token file costs no copy. */
#include "trainer/data.h"
#include "trainer/crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct ms_data {
    ms_data_format format;   /* resolved */
    const uint8_t *bytes;    /* token bytes: width bytes per token */
    int width;               /* 1 (text, builtin) or 2 (u16 little-endian) */
    uint64_t n_tokens;
    void *map;               /* mmap'd file or NULL */
    size_t map_len;
    uint8_t *owned;          /* builtin corpus or NULL */
    uint64_t cursor;         /* first token of the next window */
    int max_token;
    uint64_t hash;           /* ms_data_hash */
    char describe[MS_PATH_MAX + 96];
};

static int32_t token_at(const ms_data *d, uint64_t i) {
    if (d->width == 1) return d->bytes[i];
    return (int32_t)(d->bytes[2 * i] | (d->bytes[2 * i + 1] << 8));
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static ms_data_format resolve_format(const ms_config *c) {
    if (c->data_format != MS_DATA_AUTO) return c->data_format;
    if (!c->data_path[0]) return MS_DATA_BUILTIN;
    if (ends_with(c->data_path, ".bin") || ends_with(c->data_path, ".u16")) return MS_DATA_U16;
    return MS_DATA_TEXT;
}

static int map_file(ms_data *d, const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open data file '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        snprintf(err, errlen, "cannot stat data file '%s': %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "data file '%s' is not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_size == 0) {
        snprintf(err, errlen, "data file '%s' is empty", path);
        close(fd);
        return -1;
    }
    d->map_len = (size_t)st.st_size;
    d->map = mmap(NULL, d->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);
    if (d->map == MAP_FAILED) {
        d->map = NULL;
        snprintf(err, errlen, "cannot map data file '%s': %s", path, strerror(saved));
        return -1;
    }
    madvise(d->map, d->map_len, MADV_SEQUENTIAL);
    d->bytes = d->map;
    return 0;
}

/* Finds the largest token; for u16 also refuses any token >= vocab. */
static int scan_tokens(ms_data *d, const ms_config *c, char *err, size_t errlen) {
    int max = 0;
    for (uint64_t i = 0; i < d->n_tokens; i++) {
        int32_t t = token_at(d, i);
        if (t > max) max = t;
        if (d->format == MS_DATA_U16 && t >= c->vocab) {
            snprintf(err, errlen,
                     "data file '%s': token %d at token offset %" PRIu64 " (byte %" PRIu64
                     ") is not below model.vocab = %d",
                     c->data_path, (int)t, i, 2 * i, c->vocab);
            return -1;
        }
    }
    d->max_token = max;
    return 0;
}

ms_data *ms_data_open(const ms_config *c, char *err, size_t errlen) {
    if (!c) {
        snprintf(err, errlen, "data: no config");
        return NULL;
    }
    ms_data *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "data: out of memory");
        return NULL;
    }
    d->format = resolve_format(c);
    if ((d->format == MS_DATA_TEXT || d->format == MS_DATA_U16) && !c->data_path[0]) {
        snprintf(err, errlen, "data.format = %s needs data.path", d->format == MS_DATA_TEXT ? "text" : "u16");
        goto fail;
    }
    if (d->format == MS_DATA_BUILTIN && c->data_path[0]) {
        snprintf(err, errlen, "data.format = builtin but data.path is set ('%s')", c->data_path);
        goto fail;
    }
    if (d->format == MS_DATA_BUILTIN) {
        size_t len;
        d->owned = ms_data_builtin_corpus(c->seed, &len);
        if (!d->owned) {
            snprintf(err, errlen, "data: out of memory for the builtin corpus");
            goto fail;
        }
        d->bytes = d->owned;
        d->width = 1;
        d->n_tokens = len;
        snprintf(d->describe, sizeof d->describe, "builtin corpus, %" PRIu64 " tokens (seed %" PRIu64 ")",
                 d->n_tokens, c->seed);
    } else {
        if (map_file(d, c->data_path, err, errlen)) goto fail;
        d->width = d->format == MS_DATA_U16 ? 2 : 1;
        if (d->width == 2 && d->map_len % 2) {
            snprintf(err, errlen, "data file '%s' has an odd number of bytes (%zu): not a uint16 token file",
                     c->data_path, d->map_len);
            goto fail;
        }
        d->n_tokens = d->map_len / (size_t)d->width;
        snprintf(d->describe, sizeof d->describe, "%s file '%s', %" PRIu64 " tokens",
                 d->width == 2 ? "uint16 token" : "text", c->data_path, d->n_tokens);
    }
    if (d->n_tokens < (uint64_t)c->seq_len + 1) {
        snprintf(err, errlen, "%s: %" PRIu64 " tokens, fewer than model.seq_len + 1 = %lld",
                 d->format == MS_DATA_BUILTIN ? "builtin corpus" : c->data_path, d->n_tokens,
                 (long long)c->seq_len + 1);
        goto fail;
    }
    if (d->format == MS_DATA_TEXT && c->vocab < 256) {
        snprintf(err, errlen, "text data '%s' needs model.vocab >= 256 (one token per byte), not %d",
                 c->data_path, c->vocab);
        goto fail;
    }
    if (scan_tokens(d, c, err, errlen)) goto fail;
    /* FNV-1a 64 over the token count and the CRC-32C of the token bytes */
    uint64_t facts[2] = { d->n_tokens, ms_crc32c(0, d->bytes, (size_t)d->n_tokens * (size_t)d->width) };
    d->hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof facts; i++) {
        d->hash ^= ((const unsigned char *)facts)[i];
        d->hash *= 0x100000001b3ull;
    }
    if (d->max_token >= c->vocab) {
        snprintf(err, errlen, "%s has token %d, not below model.vocab = %d", d->describe, d->max_token, c->vocab);
        goto fail;
    }
    return d;
fail:
    ms_data_close(d);
    return NULL;
}

void ms_data_close(ms_data *d) {
    if (!d) return;
    if (d->map) munmap(d->map, d->map_len);
    free(d->owned);
    free(d);
}

int ms_data_next(ms_data *d, int32_t *inputs, int32_t *targets, int B, int T) {
    if (!d || !inputs || !targets || B < 1 || T < 1 || (uint64_t)T + 1 > d->n_tokens) return -1;
    for (int b = 0; b < B; b++) {
        if (d->cursor + (uint64_t)T + 1 > d->n_tokens) d->cursor = 0; /* wrap: the tail is skipped */
        int32_t *in = inputs + (size_t)b * (size_t)T, *tg = targets + (size_t)b * (size_t)T;
        if (d->width == 1) {
            const uint8_t *p = d->bytes + d->cursor;
            for (int t = 0; t < T; t++) {
                in[t] = p[t];
                tg[t] = p[t + 1];
            }
        } else {
            for (int t = 0; t < T; t++) {
                in[t] = token_at(d, d->cursor + (uint64_t)t);
                tg[t] = token_at(d, d->cursor + (uint64_t)t + 1);
            }
        }
        d->cursor += (uint64_t)T;
    }
    return 0;
}

uint64_t ms_data_cursor(const ms_data *d) { return d ? d->cursor : 0; }

int ms_data_seek(ms_data *d, uint64_t cursor) {
    if (!d || cursor >= d->n_tokens) return -1;
    d->cursor = cursor;
    return 0;
}

int ms_data_vocab_needed(const ms_data *d) { return d ? d->max_token + 1 : 0; }
uint64_t ms_data_tokens(const ms_data *d) { return d ? d->n_tokens : 0; }
uint64_t ms_data_hash(const ms_data *d) { return d ? d->hash : 0; }
ms_data_format ms_data_format_of(const ms_data *d) { return d ? d->format : MS_DATA_AUTO; }
const char *ms_data_describe(const ms_data *d) { return d ? d->describe : ""; }
