/* fuzz_util.c — helpers of the fuzz harnesses (see fuzz_util.h). */
#include "tests/fuzz/fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/config_keys.h"
#include "trainer/crc32c.h"

char *fz_cstr(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, data, n);
    s[n] = 0;
    return s;
}

void fz_fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz: %s\n%s\n", what, detail ? detail : "");
    abort();
}

const char *fz_file(const uint8_t *data, size_t n)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz-input", MFD_CLOEXEC);
        if (fd < 0) fz_fail("memfd_create failed", NULL);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) fz_fail("ftruncate failed", NULL);
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(fd, data + done, n - done, (off_t)done);
        if (w <= 0) fz_fail("pwrite failed", NULL);
        done += (size_t)w;
    }
    return path;
}

void fz_config_round_trip(const ms_config *c, const char *input)
{
    char err[1024];
    ms_config_validate(c, err, sizeof err);
    char *ini = ms_config_to_ini(c);
    if (!ini) fz_fail("ms_config_to_ini failed on an accepted config", input);
    ms_config back;
    memset(&back, 0, sizeof back);
    if (ms_config_load_ini_text(&back, ini, "fuzz", err, sizeof err)) fz_fail(err, ini);
    char *again = ms_config_to_ini(&back);
    if (!again || strcmp(ini, again)) fz_fail("the config's INI text does not read back", ini);
    free(again);
    free(ini);
}

/* ---- checkpoints: the layout of checkpoint.h, read only as far as the
 * harness needs it to build the caller's side of a load ---- */
#define CK_FIXED 80u   /* magic .. job fingerprint (format version 2) */
#define CK_MAX_SECTIONS 64

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void wr64(uint8_t *p, uint64_t v) { wr32(p, (uint32_t)v); wr32(p + 4, (uint32_t)(v >> 32)); }

void fz_ckpt_fix_checksums(uint8_t *buf, size_t n)
{
    if (n < CK_FIXED + 8) return;
    wr64(buf + 16, n);
    uint32_t hb = rd32(buf + 12);
    if (hb >= CK_FIXED + 4 && hb <= n - 4) wr32(buf + hb - 4, ms_crc32c(0, buf + 8, hb - 12));
    wr32(buf + n - 4, ms_crc32c(0, buf + 8, n - 12));
}

typedef struct {
    int n;
    ms_ckpt_section s[CK_MAX_SECTIONS + 1];
    char names[CK_MAX_SECTIONS + 1][MS_CKPT_NAME_MAX + 1];
} ck_table;

/* The section table the file declares, as far as it is well formed, with
 * buffers; the sizes together never exceed the input's. */
static void ck_declared(const uint8_t *d, size_t n, ck_table *t)
{
    t->n = 0;
    if (n < CK_FIXED) return;
    uint64_t hb = rd32(d + 12), o = CK_FIXED + (uint64_t)rd32(d + 68), total = 0;
    uint32_t ns = rd32(d + 64);
    if (hb > n || hb < 4) return;
    uint64_t end = hb - 4;
    for (uint32_t i = 0; i < ns && t->n < CK_MAX_SECTIONS; i++) {
        if (o + 2 > end) return;
        size_t nl = (size_t)d[o] | (size_t)d[o + 1] << 8;
        if (nl == 0 || nl > MS_CKPT_NAME_MAX || o + 2 + nl + 8 > end) return;
        uint64_t bytes = rd64(d + o + 2 + nl);
        if (bytes > n || total + bytes > n) return;
        memcpy(t->names[t->n], d + o + 2, nl);
        t->names[t->n][nl] = 0;
        t->s[t->n] = (ms_ckpt_section){ t->names[t->n], bytes ? malloc(bytes) : NULL, (size_t)bytes };
        total += bytes;
        t->n++;
        o += 2 + nl + 8;
    }
}

static void ck_free(ck_table *t)
{
    for (int i = 0; i < t->n; i++) free(t->s[i].data);
}

void fz_ckpt_exercise(const uint8_t *data, size_t n)
{
    static char run_ini[MS_CKPT_CONFIG_MAX];
    if (!run_ini[0]) {   /* this run's config, for the model-mismatch message */
        ms_config c;
        char err[256];
        if (ms_config_preset(&c, "tiny", err, sizeof err)) fz_fail("preset tiny", err);
        char *ini = ms_config_to_ini(&c);
        if (!ini) fz_fail("ms_config_to_ini", NULL);
        snprintf(run_ini, sizeof run_ini, "%s", ini);
        free(ini);
    }
    const char *path = fz_file(data, n);
    char err[1024];
    ms_ckpt_meta *m = calloc(1, sizeof *m);   /* 8 KiB of config text: not on the stack */
    if (!m) return;
    int ns = -1;
    int peeked = ms_ckpt_peek(path, m, &ns, err, sizeof err) == 0;
    uint64_t file_hash = m->model_hash, file_job = m->job;

    ck_table *t = calloc(1, sizeof *t);
    if (!t) { free(m); return; }
    ck_declared(data, n, t);
    /* Which table the caller brings: the file's own, one section short, or
     * one extra section (chosen by the input, so all three stay reachable). */
    int cut = t->n;
    if (n % 3 == 1 && t->n > 0) cut = t->n - 1;
    if (n % 3 == 2) {
        t->s[t->n] = (ms_ckpt_section){ "extra", malloc(8), 8 };
        cut = t->n + 1;
    }
    memset(m, 0, sizeof *m);
    ms_ckpt_load(path, m, t->s, cut, err, sizeof err);
    if (peeked) {   /* another model: the file's config text gets parsed */
        memset(m, 0, sizeof *m);
        uint64_t other = file_hash ^ 1;
        m->model_hash = other ? other : 2;
        snprintf(m->config_ini, sizeof m->config_ini, "%s", run_ini);
        if (ms_ckpt_load(path, m, t->s, t->n, err, sizeof err) == 0)
            fz_fail("a checkpoint of another model hash loaded", NULL);
        /* the same model, another job: the job's keys in the file's config text are compared */
        memset(m, 0, sizeof *m);
        m->model_hash = file_hash;
        uint64_t other_job = file_job ^ 1;
        m->job = other_job ? other_job : 2;
        snprintf(m->config_ini, sizeof m->config_ini, "%s", run_ini);
        if (ms_ckpt_load(path, m, t->s, t->n, err, sizeof err) == 0)
            fz_fail("a checkpoint of another job loaded", NULL);
    }
    if (n % 3 == 2) t->n++;
    ck_free(t);
    free(t);
    free(m);
}
