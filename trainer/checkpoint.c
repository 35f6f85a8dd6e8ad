/* checkpoint.c — writing and verifying checkpoint files (layout: checkpoint.h).
 * Saving is atomic (tmp + fsync + rename + fsync dir); loading verifies the
 * header, the model, the section table and the whole-file CRC before it
 * touches the caller's memory. */
#include "trainer/checkpoint.h"
#include "vocab/tmpfile.h"
#include "trainer/config_keys.h"
#include "trainer/crc32c.h"
#include "trainer/job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char MAGIC[8] = {'M', 'S', 'C', 'K', 'P', 'T', 0, 0};
#define FIXED_BYTES 80u              /* magic .. job fingerprint */
#define HEADER_MAX (64u << 20)       /* header (config + section table) limit */
#define IO_CHUNK ((size_t)4 << 20)   /* verification read size */

/* The keys whose values fix parameter shapes and numerics. */
static const char *const model_keys[] = {"model.n_layer", "model.d_model", "model.n_head",
                                         "model.seq_len", "model.vocab", "model.mlp_ratio",
                                         "model.norm", "model.tied", "train.precision", NULL};

uint64_t ms_config_model_hash(const ms_config *c) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; model_keys[i]; i++) {
        char value[64], err[160], line[128];
        if (ms_config_get(c, model_keys[i], value, sizeof value, err, sizeof err)) snprintf(value, sizeof value, "?");
        int n = snprintf(line, sizeof line, "%s=%s\n", model_keys[i], value);
        for (int j = 0; j < n && j < (int)sizeof line; j++) {
            h ^= (unsigned char)line[j];
            h *= 0x100000001b3ull;
        }
    }
    return h ? h : 1; /* 0 means "any model" to ms_ckpt_load */
}

/* ---- little-endian fields ---- */
static void put_u16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint16_t get_u16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- I/O that retries short transfers ---- */
static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        size_t want = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(fd, p, want);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Returns bytes read (< n only at end of file) or -1. */
static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > ((size_t)1 << 30) ? ((size_t)1 << 30) : n - got;
        ssize_t r = pread(fd, p + got, want, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int fsync_parent_dir(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* ---- save ---- */
int ms_ckpt_save(const char *path, const ms_ckpt_meta *m, const ms_ckpt_section *s, int n,
                 char *err, size_t errlen) {
    if (!path || !path[0] || !m || n < 0 || (n > 0 && !s)) {
        snprintf(err, errlen, "checkpoint save: bad arguments");
        return -1;
    }
    size_t config_len = strnlen(m->config_ini, MS_CKPT_CONFIG_MAX);
    if (config_len == MS_CKPT_CONFIG_MAX) {
        snprintf(err, errlen, "checkpoint save: config_ini is not NUL-terminated");
        return -1;
    }
    uint64_t header_bytes = FIXED_BYTES + config_len + 4, data_bytes = 0;
    for (int i = 0; i < n; i++) {
        size_t nl = s[i].name ? strlen(s[i].name) : 0;
        if (nl == 0 || nl > MS_CKPT_NAME_MAX) {
            snprintf(err, errlen, "checkpoint save: section %d needs a name of 1..%d bytes", i, MS_CKPT_NAME_MAX);
            return -1;
        }
        if (s[i].bytes && !s[i].data) {
            snprintf(err, errlen, "checkpoint save: section '%s' has no data", s[i].name);
            return -1;
        }
        header_bytes += 2 + nl + 8;
        data_bytes += s[i].bytes;
    }
    if (header_bytes > HEADER_MAX) {
        snprintf(err, errlen, "checkpoint save: too many sections (header %" PRIu64 " bytes)", header_bytes);
        return -1;
    }
    unsigned char *hdr = malloc(header_bytes);
    if (!hdr) {
        snprintf(err, errlen, "checkpoint save: out of memory");
        return -1;
    }
    uint32_t loss_bits;
    memcpy(&loss_bits, &m->loss_scale, 4);
    memcpy(hdr, MAGIC, 8);
    put_u32(hdr + 8, MS_CKPT_VERSION);
    put_u32(hdr + 12, (uint32_t)header_bytes);
    put_u64(hdr + 16, header_bytes + data_bytes + 4);
    put_u64(hdr + 24, m->model_hash);
    put_u64(hdr + 32, (uint64_t)m->step);
    put_u64(hdr + 40, m->data_cursor);
    put_u32(hdr + 48, loss_bits);
    put_u32(hdr + 52, (uint32_t)m->good_steps);
    put_u64(hdr + 56, m->rng_state);
    put_u32(hdr + 64, (uint32_t)n);
    put_u32(hdr + 68, (uint32_t)config_len);
    put_u64(hdr + 72, m->job);
    size_t o = FIXED_BYTES;
    memcpy(hdr + o, m->config_ini, config_len);
    o += config_len;
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(s[i].name);
        put_u16(hdr + o, (uint16_t)nl);
        memcpy(hdr + o + 2, s[i].name, nl);
        put_u64(hdr + o + 2 + nl, s[i].bytes);
        o += 2 + nl + 8;
    }
    put_u32(hdr + o, ms_crc32c(0, hdr + 8, o - 8));
    uint32_t crc = ms_crc32c(0, hdr + 8, header_bytes - 8);

    char tmp[4096 + 16];
    int fd = ms_tmp_create(path, tmp, sizeof tmp); /* never a name planted ahead (tmpfile.h) */
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a file beside '%s': %s", path, strerror(errno));
        free(hdr);
        return -1;
    }
    int bad = write_all(fd, hdr, header_bytes);
    free(hdr);
    for (int i = 0; i < n && !bad; i++) {
        bad = write_all(fd, s[i].data, s[i].bytes);
        if (s[i].bytes) crc = ms_crc32c(crc, s[i].data, s[i].bytes);
    }
    unsigned char tail[4];
    put_u32(tail, crc);
    if (!bad) bad = write_all(fd, tail, 4);
    if (!bad) bad = fsync(fd);
    int saved = errno;
    if (close(fd) && !bad) {
        bad = -1;
        saved = errno;
    }
    if (bad) {
        snprintf(err, errlen, "cannot write '%s': %s", tmp, strerror(saved));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path)) {
        snprintf(err, errlen, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (fsync_parent_dir(path)) {
        snprintf(err, errlen, "checkpoint '%s' written but its folder could not be synced: %s", path,
                 strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- reading the header ---- */
typedef struct {
    char name[MS_CKPT_NAME_MAX + 1];
    uint64_t bytes;
} sec_entry;

typedef struct {
    uint32_t header_bytes;
    uint64_t file_bytes;
    ms_ckpt_meta meta;
    uint32_t n_sections;
    sec_entry *secs;
    unsigned char *hdr;
} ckpt_header;

static void header_free(ckpt_header *h) {
    free(h->secs);
    free(h->hdr);
    h->secs = NULL;
    h->hdr = NULL;
}

static int read_header(int fd, const char *path, ckpt_header *h, char *err, size_t errlen) {
    struct stat st;
    memset(h, 0, sizeof *h);
    if (fstat(fd, &st)) {
        snprintf(err, errlen, "cannot stat '%s': %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%s' is not a regular file", path);
        return -1;
    }
    uint64_t size = (uint64_t)st.st_size;
    unsigned char fixed[FIXED_BYTES];
    ssize_t got = pread_full(fd, fixed, FIXED_BYTES, 0);
    if (got < 0) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        return -1;
    }
    if (got < 8 && !memcmp(fixed, MAGIC, (size_t)got)) { /* a prefix of the magic, or empty */
        snprintf(err, errlen, "'%s' is truncated (%" PRIu64 " bytes)", path, size);
        return -1;
    }
    if (got < 8 || memcmp(fixed, MAGIC, 8)) {
        snprintf(err, errlen, "'%s' is not a memsplit checkpoint (wrong magic)", path);
        return -1;
    }
    if (got < 12) {
        snprintf(err, errlen, "'%s' is truncated (%" PRIu64 " bytes)", path, size);
        return -1;
    }
    uint32_t version = get_u32(fixed + 8);
    if (version != MS_CKPT_VERSION) {
        snprintf(err, errlen, "'%s' has checkpoint format version %u; this build reads version %d", path,
                 version, MS_CKPT_VERSION);
        return -1;
    }
    if (got < (ssize_t)FIXED_BYTES) {
        snprintf(err, errlen, "'%s' is truncated (%" PRIu64 " bytes)", path, size);
        return -1;
    }
    h->header_bytes = get_u32(fixed + 12);
    h->file_bytes = get_u64(fixed + 16);
    if (size < h->file_bytes) {
        snprintf(err, errlen, "'%s' is truncated: %" PRIu64 " bytes, the header says %" PRIu64, path, size,
                 h->file_bytes);
        return -1;
    }
    if (size > h->file_bytes) {
        snprintf(err, errlen, "'%s' is corrupt: %" PRIu64 " bytes, the header says %" PRIu64, path, size,
                 h->file_bytes);
        return -1;
    }
    if (h->header_bytes < FIXED_BYTES + 4 || h->header_bytes > HEADER_MAX ||
        (uint64_t)h->header_bytes + 4 > h->file_bytes) {
        snprintf(err, errlen, "'%s' is corrupt: impossible header size %u", path, h->header_bytes);
        return -1;
    }
    h->hdr = malloc(h->header_bytes);
    if (!h->hdr) {
        snprintf(err, errlen, "out of memory reading '%s'", path);
        return -1;
    }
    if (pread_full(fd, h->hdr, h->header_bytes, 0) != (ssize_t)h->header_bytes) {
        snprintf(err, errlen, "cannot read the header of '%s'", path);
        header_free(h);
        return -1;
    }
    uint32_t hcrc = get_u32(h->hdr + h->header_bytes - 4);
    if (ms_crc32c(0, h->hdr + 8, h->header_bytes - 12) != hcrc) {
        snprintf(err, errlen, "'%s' is corrupt: checksum mismatch (header)", path);
        header_free(h);
        return -1;
    }
    /* The header CRC matched, so anything inconsistent below is a writer bug
     * or a deliberate forgery; still never index out of bounds. */
    const unsigned char *p = h->hdr;
    ms_ckpt_meta *m = &h->meta;
    memset(m, 0, sizeof *m);
    m->model_hash = get_u64(p + 24);
    m->step = (int64_t)get_u64(p + 32);
    m->data_cursor = get_u64(p + 40);
    uint32_t loss_bits = get_u32(p + 48);
    memcpy(&m->loss_scale, &loss_bits, 4);
    m->good_steps = (int32_t)get_u32(p + 52);
    m->rng_state = get_u64(p + 56);
    h->n_sections = get_u32(p + 64);
    uint32_t config_len = get_u32(p + 68);
    m->job = get_u64(p + 72);
    size_t end = h->header_bytes - 4, o = FIXED_BYTES;
    if (config_len >= MS_CKPT_CONFIG_MAX || config_len > end - o) goto inconsistent;
    memcpy(m->config_ini, p + o, config_len);
    m->config_ini[config_len] = 0;
    o += config_len;
    if (h->n_sections > (end - o) / 11) goto inconsistent; /* each entry takes >= 11 bytes */
    h->secs = calloc(h->n_sections ? h->n_sections : 1, sizeof *h->secs);
    if (!h->secs) {
        snprintf(err, errlen, "out of memory reading '%s'", path);
        header_free(h);
        return -1;
    }
    uint64_t data_bytes = 0;
    for (uint32_t i = 0; i < h->n_sections; i++) {
        if (end - o < 2) goto inconsistent;
        uint16_t nl = get_u16(p + o);
        if (nl == 0 || nl > MS_CKPT_NAME_MAX || end - o < (size_t)2 + nl + 8) goto inconsistent;
        memcpy(h->secs[i].name, p + o + 2, nl);
        h->secs[i].name[nl] = 0;
        h->secs[i].bytes = get_u64(p + o + 2 + nl);
        o += 2 + (size_t)nl + 8;
        if (h->secs[i].bytes > h->file_bytes || data_bytes + h->secs[i].bytes > h->file_bytes) goto inconsistent;
        data_bytes += h->secs[i].bytes;
    }
    if (o != end || (uint64_t)h->header_bytes + data_bytes + 4 != h->file_bytes) goto inconsistent;
    return 0;
inconsistent:
    snprintf(err, errlen, "'%s' is corrupt: inconsistent header", path);
    header_free(h);
    return -1;
}

/* Names the first model key that differs between the two configs, if the
 * caller gave its config; else falls back to the hashes. */
static void model_mismatch(const char *path, const char *file_ini, const char *run_ini, uint64_t file_hash,
                           uint64_t run_hash, char *err, size_t errlen) {
    ms_config a, b;
    char why[256];
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (run_ini && run_ini[0] && !ms_config_load_ini_text(&a, file_ini, "checkpoint", why, sizeof why) &&
        !ms_config_load_ini_text(&b, run_ini, "run", why, sizeof why)) {
        for (int i = 0; model_keys[i]; i++) {
            char va[64], vb[64];
            if (ms_config_get(&a, model_keys[i], va, sizeof va, why, sizeof why) ||
                ms_config_get(&b, model_keys[i], vb, sizeof vb, why, sizeof why))
                break;
            if (strcmp(va, vb)) {
                snprintf(err, errlen, "checkpoint is for a different model: %s = %s in '%s', %s in this run",
                         model_keys[i], va, path, vb);
                return;
            }
        }
    }
    snprintf(err, errlen,
             "checkpoint is for a different model: '%s' has model hash %016" PRIx64 ", this run %016" PRIx64,
             path, file_hash, run_hash);
}

static void job_mismatch(const char *path, const char *file_ini, const char *run_ini, uint64_t file_job,
                         uint64_t run_job, char *err, size_t errlen) {
    ms_config run;
    char why[256] = "", tmp[256];
    memset(&run, 0, sizeof run);
    if (run_ini && run_ini[0] && !ms_config_load_ini_text(&run, run_ini, "run", tmp, sizeof tmp))
        ms_job_mismatch(file_ini, &run, why, sizeof why);
    snprintf(err, errlen, "checkpoint '%s' belongs to another job: its fingerprint is %016" PRIx64 ", this run's %016" PRIx64 " (%s)",
             path, file_job, run_job, why[0] ? why : "the data differs");
}

static int sections_match(const char *path, const ckpt_header *h, const ms_ckpt_section *s, int n,
                          char *err, size_t errlen) {
    uint32_t common = h->n_sections < (uint32_t)n ? h->n_sections : (uint32_t)n;
    for (uint32_t i = 0; i < common; i++) {
        const char *want = s[i].name ? s[i].name : "";
        if (strcmp(h->secs[i].name, want) || h->secs[i].bytes != s[i].bytes) {
            snprintf(err, errlen,
                     "section %u of '%s' is '%s' (%" PRIu64 " bytes); this run expects '%s' (%zu bytes)", i,
                     path, h->secs[i].name, h->secs[i].bytes, want, s[i].bytes);
            return -1;
        }
        if (s[i].bytes && !s[i].data) {
            snprintf(err, errlen, "checkpoint load: section '%s' has no buffer", want);
            return -1;
        }
    }
    if (h->n_sections != (uint32_t)n) {
        if (h->n_sections > (uint32_t)n)
            snprintf(err, errlen, "'%s' has %u sections, this run expects %d (first extra: '%s')", path,
                     h->n_sections, n, h->secs[n].name);
        else
            snprintf(err, errlen, "'%s' has %u sections, this run expects %d (first missing: '%s')", path,
                     h->n_sections, n, s[h->n_sections].name ? s[h->n_sections].name : "");
        return -1;
    }
    return 0;
}

/* CRC of everything after the magic, reading the data into the caller's
 * buffers (dest != NULL) or into scratch (dest == NULL). */
static int data_crc(int fd, const ckpt_header *h, const ms_ckpt_section *dest, uint32_t *crc_out) {
    uint32_t crc = ms_crc32c(0, h->hdr + 8, h->header_bytes - 8);
    uint64_t off = h->header_bytes;
    if (dest) {
        for (uint32_t i = 0; i < h->n_sections; i++) {
            if (pread_full(fd, dest[i].data, h->secs[i].bytes, off) != (ssize_t)h->secs[i].bytes) return -1;
            if (h->secs[i].bytes) crc = ms_crc32c(crc, dest[i].data, h->secs[i].bytes);
            off += h->secs[i].bytes;
        }
    } else {
        unsigned char *buf = malloc(IO_CHUNK);
        if (!buf) return -1;
        uint64_t left = h->file_bytes - 4 - h->header_bytes;
        while (left) {
            size_t want = left > IO_CHUNK ? IO_CHUNK : (size_t)left;
            if (pread_full(fd, buf, want, off) != (ssize_t)want) {
                free(buf);
                return -1;
            }
            crc = ms_crc32c(crc, buf, want);
            off += want;
            left -= want;
        }
        free(buf);
    }
    *crc_out = crc;
    return 0;
}

int ms_ckpt_load(const char *path, ms_ckpt_meta *m, const ms_ckpt_section *s, int n,
                 char *err, size_t errlen) {
    if (!path || !m || n < 0 || (n > 0 && !s)) {
        snprintf(err, errlen, "checkpoint load: bad arguments");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open checkpoint '%s': %s", path, strerror(errno));
        return -1;
    }
    ckpt_header h;
    if (read_header(fd, path, &h, err, errlen)) {
        close(fd);
        return -1;
    }
    int rc = -1;
    unsigned char tail[4];
    uint32_t crc;
    const char *run_ini = memchr(m->config_ini, 0, sizeof m->config_ini) ? m->config_ini : NULL;
    if (m->model_hash && m->model_hash != h.meta.model_hash) {
        model_mismatch(path, h.meta.config_ini, run_ini, h.meta.model_hash, m->model_hash, err, errlen);
        rc = MS_CKPT_FOREIGN;
        goto out;
    }
    if (m->job && m->job != h.meta.job) {
        job_mismatch(path, h.meta.config_ini, run_ini, h.meta.job, m->job, err, errlen);
        rc = MS_CKPT_FOREIGN;
        goto out;
    }
    if (sections_match(path, &h, s, n, err, errlen)) {
        rc = MS_CKPT_FOREIGN;
        goto out;
    }
    errno = 0;
    if (pread_full(fd, tail, 4, h.file_bytes - 4) != 4 || data_crc(fd, &h, NULL, &crc)) {
        snprintf(err, errlen, "cannot read '%s': %s", path, errno ? strerror(errno) : "short read");
        goto out;
    }
    if (crc != get_u32(tail)) {
        snprintf(err, errlen, "'%s' is corrupt: checksum mismatch", path);
        goto out;
    }
    /* verified: now copy into the caller's buffers, checking again in case
     * the file was rewritten in place between the two reads */
    if (data_crc(fd, &h, s, &crc) || crc != get_u32(tail)) {
        snprintf(err, errlen, "'%s' changed while it was being loaded; the buffers hold partial data", path);
        goto out;
    }
    *m = h.meta;
    rc = 0;
out:
    header_free(&h);
    close(fd);
    return rc;
}

int ms_ckpt_peek(const char *path, ms_ckpt_meta *m, int *n_sections, char *err, size_t errlen) {
    if (!path || !m) {
        snprintf(err, errlen, "checkpoint peek: bad arguments");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open checkpoint '%s': %s", path, strerror(errno));
        return -1;
    }
    ckpt_header h;
    int rc = read_header(fd, path, &h, err, errlen);
    close(fd);
    if (rc) return -1;
    *m = h.meta;
    if (n_sections) *n_sections = (int)h.n_sections;
    header_free(&h);
    return 0;
}

int ms_ckpt_path(const char *dir, int64_t step, char *out, size_t len) {
    if (!dir || !out || step < 0) return -1;
    int n = snprintf(out, len, "%s/step-%08" PRId64 ".ckpt", dir, step);
    return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

/* Step number of "step-<digits>.ckpt", or -1 for any other name. */
static int64_t step_of_name(const char *name) {
    if (strncmp(name, "step-", 5)) return -1;
    const char *d = name + 5;
    int64_t v = 0;
    int nd = 0;
    for (; *d >= '0' && *d <= '9'; d++, nd++) {
        if (nd >= 18) return -1;
        v = v * 10 + (*d - '0');
    }
    if (nd == 0 || strcmp(d, ".ckpt")) return -1;
    return v;
}

int ms_ckpt_latest(const char *dir, char *path_out, size_t len) {
    return ms_ckpt_latest_before(dir, INT64_MAX, path_out, len);
}

int ms_ckpt_latest_before(const char *dir, int64_t before, char *path_out, size_t len) {
    if (!dir || !path_out || !len) return -1;
    DIR *dp = opendir(dir);
    if (!dp) return errno == ENOENT ? 0 : -1;
    int64_t best = -1;
    char best_name[256] = "";
    struct dirent *e;
    while ((e = readdir(dp))) {
        int64_t st = step_of_name(e->d_name);
        if (st < 0 || st >= before) continue;
        if (st > best || (st == best && strcmp(e->d_name, best_name) > 0)) {
            best = st;
            snprintf(best_name, sizeof best_name, "%s", e->d_name);
        }
    }
    closedir(dp);
    if (best < 0) return 0;
    int n = snprintf(path_out, len, "%s/%s", dir, best_name);
    return (n < 0 || (size_t)n >= len) ? -1 : 1;
}

/* ---- small files, written the same way (the parts' manifest) ---- */
int ms_ckpt_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen) {
    char tmp[4096 + 16];
    int fd = ms_tmp_create(path, tmp, sizeof tmp);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a file beside '%s': %s", path, strerror(errno));
        return -1;
    }
    int bad = write_all(fd, data, n) || fsync(fd);
    if (close(fd)) bad = 1;
    if (bad || rename(tmp, path) || fsync_parent_dir(path)) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ms_ckpt_sync_parent(const char *path) { return fsync_parent_dir(path); }
