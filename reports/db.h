/* db.h — memsplit's run database (SQLite): runs, profiles with their layer
 * rows and OOM, memory events, plans, training steps, per-device peaks and
 * OOM recoveries. Schema and migrations: reports/schema.c; docs/database.md.
 *
 * Contract:
 *  - ms_db_open() opens (or, with create, creates) a database in WAL mode
 *    (synchronous NORMAL, foreign keys on, a busy timeout of MS_DB_BUSY_MS)
 *    and upgrades its schema in one transaction. It refuses a missing file when create is 0,
 *    a file that is not a memsplit database, and a schema newer than this
 *    build knows. A process killed at any moment leaves a database that
 *    opens; its run keeps status "running" with no finish time, which
 *    ms_run_state() reports as "incomplete".
 *  - ms_db_open_readonly() opens an existing database for reading only: it
 *    never writes (no pragma, no migration), so a read-only file or folder
 *    reads; it refuses a schema other than this build's (an empty file
 *    reads as a database that holds no runs).
 *  - A write that finds the database locked by another process waits up to
 *    the busy timeout (ms_db_set_busy_timeout), then fails; the caller
 *    decides whether to retry.
 *  - Every write is one transaction, through prepared statements; nothing is
 *    half-written. Functions return 0 (or an id > 0) on success and -1 on
 *    failure; the reason is in ms_db_errmsg() (or err for the two functions
 *    that take one). Nothing aborts or prints.
 *  - Byte counts are stored as exact 64-bit integers and doubles as REAL,
 *    so a stored profile loads back bit for bit. */
#ifndef MS_DB_H
#define MS_DB_H

#include <stddef.h>
#include <stdint.h>

#include "vocab/mem_event.h"
#include "vocab/profile.h"

typedef struct ms_db ms_db;

/* Long enough for another process's transaction (a long batch of memory
 * events, a report's reads), short enough that a wedged database is
 * reported rather than waited on forever. */
#define MS_DB_BUSY_MS 30000

ms_db *ms_db_open(const char *path, int create, char *err, size_t errlen);
ms_db *ms_db_open_readonly(const char *path, char *err, size_t errlen);
/* How long a write waits for another process's lock, in milliseconds (0: not at all). */
void ms_db_set_busy_timeout(ms_db *db, int ms);
/* A database image in memory (a whole database file's bytes), copied and
 * then recognised and upgraded exactly as ms_db_open() does a file; any
 * change stays in the copy. For tests and the fuzzer (tests/fuzz/fuzz_db.c). */
ms_db *ms_db_open_image(const void *bytes, size_t n, char *err, size_t errlen);
void ms_db_close(ms_db *db);
const char *ms_db_errmsg(const ms_db *db);   /* last failure's message */
int ms_db_schema_version(ms_db *db);         /* PRAGMA user_version, -1 on error */

/* ---- runs ----------------------------------------------------------- */

/* kind: "profile" | "train" | "doctor" | "isolate" | "plan". Any string may
 * be NULL; devices_json, when given, must parse as JSON. parent: the run this
 * one belongs to (a doctor's trial, plan and training), 0 for none.
 * Returns the new run's id (status "running"), or -1. */
int64_t ms_db_run_begin(ms_db *db, const char *kind, const char *cmdline, const char *config_ini,
                        const char *devices_json, const char *model, int64_t parent);
/* status: "ok" | "oom" | "failed" | "killed" | "infeasible" | "interrupted". Only a running
 * run can be finished. */
int ms_db_run_finish(ms_db *db, int64_t run, const char *status);
/* Appends a line to the run's notes. */
int ms_db_run_note(ms_db *db, int64_t run, const char *line);

typedef struct ms_run_info {
    int64_t id;
    int64_t parent;             /* 0: none */
    char kind[16];
    char status[16];            /* as stored; see ms_run_state() */
    char started[32];           /* ISO8601 UTC, e.g. "2025-01-31T12:00:00.123Z" */
    char finished[32];          /* "" when never recorded */
    double started_unix, finished_unix;   /* finished_unix 0 when never recorded */
    char model[64];
    char host[64];
    int pid;
    int has_profile;            /* a profile is stored under this run */
    char cmdline[1024];         /* the long texts are cut to fit (never overrun) */
    char devices[1024];
    char notes[512];
} ms_run_info;

/* What the report calls the run: the stored status, except that a "running"
 * run whose process is gone (or on another host) is "incomplete". */
const char *ms_run_state(const ms_run_info *r);

/* Calls cb for every run in id order; cb returns non-zero to stop. */
int ms_db_list_runs(ms_db *db, int (*cb)(const ms_run_info *r, void *ctx), void *ctx);
int ms_db_get_run(ms_db *db, int64_t run, ms_run_info *out);  /* -1: absent or error */
/* Newest run with no parent, or 0 when the database holds none (-1 on error). */
int64_t ms_db_latest_top_run(ms_db *db);
/* The run's stored config (INI text), malloc'd; NULL when none or on error. */
char *ms_db_run_config(ms_db *db, int64_t run);

/* ---- profiles ------------------------------------------------------- */

/* Stores p under run (one profile per run): its header, every row and the
 * OOM (when p->oom.happened), in one transaction. Rows load back in the
 * same order. */
int ms_db_add_rows(ms_db *db, int64_t run, const ms_profile *p);
/* Loads the profile stored under run_id (<= 0: the newest stored profile)
 * into out, which the caller frees with ms_profile_free(). On failure out
 * is left empty (safe to free). */
int ms_db_load_profile(ms_db *db, int64_t run_id, ms_profile *out, char *err, size_t errlen);
int64_t ms_db_latest_profile_run(ms_db *db);  /* 0 when none, -1 on error */

/* ---- memory events (vocab/mem_event.h) ------------------------------- */

/* Appends n events to the run, in order, in one transaction. Events get
 * sequence numbers continuing the run's previous ones. */
int ms_db_add_mem_events(ms_db *db, int64_t run, const ms_mem_event *ev, int n);
/* Calls cb for the run's events in sequence order; cb returns non-zero to stop. */
int ms_db_list_mem_events(ms_db *db, int64_t run,
                          int (*cb)(int64_t seq, const ms_mem_event *ev, void *ctx), void *ctx);
int64_t ms_db_count_mem_events(ms_db *db, int64_t run);    /* -1 on error */

/* An OOM seen outside a profile (e.g. during a plan's rerun); device names
 * the device ("cuda:1"). Returns the event id or -1. */
int64_t ms_db_add_oom_event(ms_db *db, int64_t run, const char *device, const ms_oom_info *oom,
                            int64_t t_us);

/* ---- plans, training ------------------------------------------------ */

/* plan_json must parse as JSON. Returns the plan id or -1. run may be 0. */
int64_t ms_db_add_plan(ms_db *db, int64_t run, const char *plan_json, double predicted_step_ms,
                       int feasible);
/* Reads a plan: *plan_json is malloc'd (caller frees). Any output may be NULL.
 * plan_id <= 0: the newest plan. */
int ms_db_get_plan(ms_db *db, int64_t plan_id, char **plan_json, double *predicted_step_ms,
                   int *feasible, int64_t *run);
int64_t ms_db_latest_plan_id(ms_db *db, int64_t run);  /* run <= 0: any; 0 none; -1 error */

typedef struct ms_plan_info {
    int64_t id, run;            /* run 0: none */
    char created[32];
    double predicted_step_ms;
    int feasible;
    const char *plan_json;      /* valid during the callback only */
} ms_plan_info;

/* Calls cb for the run's plans in id order (run <= 0: every plan). */
int ms_db_list_plans(ms_db *db, int64_t run, int (*cb)(const ms_plan_info *pl, void *ctx), void *ctx);

typedef struct ms_step_rec {
    int step;
    double loss, ms, tokens_per_s, lr;
    double loss_scale;          /* fp16 dynamic scale; 0 when not used */
    int skipped;                /* 1: the update was skipped (fp16 overflow) */
    const char *peaks_json;     /* per-device peak bytes, e.g. {"cuda:0": 123}; may be NULL */
} ms_step_rec;

/* Records a step; a step recorded again (redone after a recovery) replaces
 * the earlier record. */
int ms_db_add_step(ms_db *db, int64_t run, const ms_step_rec *s);
/* Calls cb in step order; s->peaks_json is valid during the call only. */
int ms_db_list_steps(ms_db *db, int64_t run, int (*cb)(const ms_step_rec *s, void *ctx), void *ctx);

typedef struct ms_device_peak {
    int device;                 /* index among the run's devices */
    char name[32];              /* "cuda:0", "cpu" */
    uint64_t capacity;
    uint64_t predicted_peak;    /* 0: no prediction */
    uint64_t measured_peak;
    uint64_t measured_by_cat[MS_CAT_N];
    uint64_t predicted_by_cat[MS_CAT_N];   /* all zero: no prediction */
    /* a program's stage alone on its GPU: measured_peak in its two parts,
     * the caching allocator's peak and what the GPU held beyond it (the
     * context, the libraries); has_parts 0 for every other device */
    int has_parts;
    uint64_t allocator_peak, beyond_allocator;
    /* the prediction in the same two parts: the tensors with the reserve's part the allocator
     * holds (library buffers), and the rest of the reserve */
    uint64_t predicted_allocator_peak, predicted_beyond_allocator;
} ms_device_peak;

/* Records (or replaces) a device's peak for the run. */
int ms_db_add_device_peak(ms_db *db, int64_t run, const ms_device_peak *d);
int ms_db_list_device_peaks(ms_db *db, int64_t run,
                            int (*cb)(const ms_device_peak *d, void *ctx), void *ctx);

typedef struct ms_recovery_rec {
    int64_t id;
    int step;                   /* the step the failure hit */
    int resumed_step;           /* the checkpoint's step; -1 unknown */
    char reason[1024];
    int64_t oom_event;          /* 0: none */
    int64_t old_plan_id, new_plan_id;   /* 0: none */
    char checkpoint[1024];
    char t[32];
} ms_recovery_rec;

/* Records an OOM recovery (reason e.g. "oom on cuda:1"); r->id and r->t are
 * ignored. Returns the event id or -1. */
int64_t ms_db_add_recovery(ms_db *db, int64_t run, const ms_recovery_rec *r);
int ms_db_list_recoveries(ms_db *db, int64_t run,
                          int (*cb)(const ms_recovery_rec *r, void *ctx), void *ctx);

#endif
