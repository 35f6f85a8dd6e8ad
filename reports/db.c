/* db.c — opening a run database: pragmas, recognising a foreign file, and
 * upgrading the schema through reports/schema.c's migrations. */
#include "reports/db_internal.h"
#include "reports/schema.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *ms_db_errmsg(const ms_db *db) { return db ? db->err : "no database handle"; }

static int pragma_int(ms_db *db, const char *sql, int *out)
{
    sqlite3_stmt *st = dbi_prepare(db, sql);
    if (!st) return -1;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *out = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) return dbi_sqlfail(db, "cannot read it as a memsplit database");
    return 0;
}

int ms_db_schema_version(ms_db *db)
{
    int v = -1;
    if (!db || pragma_int(db, "PRAGMA user_version", &v) != 0) return -1;
    return v;
}

static int set_pragmas(ms_db *db, int in_memory)
{
    /* journal_mode answers with the mode in effect; WAL can be refused
     * (e.g. a filesystem without shared memory), which we report rather
     * than silently run without crash safety. */
    sqlite3_stmt *st = dbi_prepare(db, "PRAGMA journal_mode=WAL");
    if (!st) return -1;
    int rc = sqlite3_step(st);
    char mode[16] = "";
    if (rc == SQLITE_ROW) dbi_col_text(st, 0, mode, sizeof mode);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) return dbi_sqlfail(db, "cannot set WAL mode");
    if (!in_memory && strcmp(mode, "wal") != 0)
        return dbi_fail(db, "the database refused WAL mode (journal mode is '%s')", mode);
    char *msg = NULL;
    if (sqlite3_exec(db->h, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", NULL, NULL, &msg) != SQLITE_OK) {
        dbi_fail(db, "cannot set pragmas: %s", msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

/* Refuses a foreign file or a newer schema; 0 when the file is (or may
 * become) a memsplit database of a version we know. */
static int check_identity(ms_db *db, int version, int app_id, int n_objects)
{
    int known = ms_db_n_migrations;
    if (app_id != (int)MS_DB_APPLICATION_ID && !(app_id == 0 && version == 0))
        return dbi_fail(db, "not a memsplit database (application id %d, schema version %d)", app_id, version);
    if (version == 0 && n_objects > 0)
        return dbi_fail(db, "not a memsplit database: it holds %d tables or indexes but no memsplit schema",
                        n_objects);
    /* user_version is a signed 32-bit field: a negative one would index the
     * migrations before their start */
    if (version < 0)
        return dbi_fail(db, "not a memsplit database: schema version %d", version);
    if (version > known)
        return dbi_fail(db, "database schema version %d is newer than this memsplit knows (%d); "
                        "open it with a newer memsplit", version, known);
    return 0;
}

static int read_identity(ms_db *db, int *version, int *app_id, int *n_objects)
{
    if (pragma_int(db, "PRAGMA user_version", version) != 0) return -1;
    if (pragma_int(db, "PRAGMA application_id", app_id) != 0) return -1;
    return pragma_int(db, "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'", n_objects);
}

static int migrate_locked(ms_db *db);

static int migrate(ms_db *db)
{
    int version, app_id, n_objects;
    if (read_identity(db, &version, &app_id, &n_objects) != 0) return -1;
    if (check_identity(db, version, app_id, n_objects) != 0) return -1;
    if (version == ms_db_n_migrations) return 0;

    /* Foreign keys off while tables are rebuilt (a DROP of a parent table
     * would otherwise cascade); the pragma is a no-op inside a transaction,
     * so it is set before, and the keys are checked before the commit. */
    if (sqlite3_exec(db->h, "PRAGMA foreign_keys=OFF", NULL, NULL, NULL) != SQLITE_OK)
        return dbi_sqlfail(db, "cannot prepare the schema upgrade");
    int rc = migrate_locked(db);
    if (sqlite3_exec(db->h, "PRAGMA foreign_keys=ON", NULL, NULL, NULL) != SQLITE_OK && rc == 0)
        rc = dbi_sqlfail(db, "cannot turn foreign keys back on");
    return rc;
}

static int fk_violations(ms_db *db)
{
    sqlite3_stmt *st = dbi_prepare(db, "PRAGMA foreign_key_check");
    if (!st) return -1;
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW) return dbi_fail(db, "schema upgrade: the database has broken references");
    return rc == SQLITE_DONE ? 0 : dbi_sqlfail(db, "schema upgrade: cannot check references");
}

static int migrate_locked(ms_db *db)
{
    int version, app_id, n_objects;
    if (dbi_begin(db) != 0) return -1;
    /* Read again under the write lock: another process may have migrated
     * between our first look and the lock. */
    if (read_identity(db, &version, &app_id, &n_objects) != 0 ||
        check_identity(db, version, app_id, n_objects) != 0) {
        dbi_rollback(db);
        return -1;
    }
    if (version == ms_db_n_migrations) return dbi_commit(db);
    for (int v = version; v < ms_db_n_migrations; v++) {
        char *msg = NULL;
        if (sqlite3_exec(db->h, ms_db_migrations[v], NULL, NULL, &msg) != SQLITE_OK) {
            dbi_fail(db, "schema migration %d -> %d failed: %s", v, v + 1, msg ? msg : "?");
            sqlite3_free(msg);
            dbi_rollback(db);
            return -1;
        }
    }
    char sql[96];
    snprintf(sql, sizeof sql, "PRAGMA user_version=%d; PRAGMA application_id=%d;", ms_db_n_migrations,
             (int)MS_DB_APPLICATION_ID);
    if (sqlite3_exec(db->h, sql, NULL, NULL, NULL) != SQLITE_OK) {
        dbi_sqlfail(db, "cannot record the schema version");
        dbi_rollback(db);
        return -1;
    }
    if (fk_violations(db) != 0) {
        dbi_rollback(db);
        return -1;
    }
    return dbi_commit(db);
}

/* What every open does once SQLite has the file: recognise it, set the
 * pragmas, upgrade the schema. Looks before touching: switching a foreign
 * file to WAL would already change it. */
static int make_ready(ms_db *db, int in_memory)
{
    sqlite3_busy_timeout(db->h, MS_DB_BUSY_MS);
    int version, app_id, n_objects;
    if (read_identity(db, &version, &app_id, &n_objects) != 0 ||
        check_identity(db, version, app_id, n_objects) != 0 || set_pragmas(db, in_memory) != 0)
        return -1;
    return migrate(db);
}

/* The path checks both openers make; the new handle, or NULL with err. */
static ms_db *new_handle(const char *path, int create, int in_memory, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!path || !*path) {
        if (err) snprintf(err, errlen, "no database path given");
        return NULL;
    }
    struct stat sb;
    if (!in_memory && !create && stat(path, &sb) != 0) {
        if (err) snprintf(err, errlen, "no database at '%s': %s", path, strerror(errno));
        return NULL;
    }
    if (!in_memory && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (err) snprintf(err, errlen, "'%s' is a directory, not a database file", path);
        return NULL;
    }
    ms_db *db = calloc(1, sizeof *db);
    if (!db && err) snprintf(err, errlen, "out of memory");
    return db;
}

void ms_db_set_busy_timeout(ms_db *db, int ms)
{
    if (db && db->h) sqlite3_busy_timeout(db->h, ms > 0 ? ms : 0);
}

ms_db *ms_db_open(const char *path, int create, char *err, size_t errlen)
{
    int in_memory = path && strcmp(path, ":memory:") == 0;
    ms_db *db = new_handle(path, create, in_memory, err, errlen);
    if (!db) return NULL;
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
        dbi_sqlfail(db, "cannot open the database");
    } else if (make_ready(db, in_memory) == 0) {
        return db;
    }
    if (err) snprintf(err, errlen, "%s: %s", path, db->err);
    ms_db_close(db);
    return NULL;
}

/* "file:PATH?QUERY" with the characters that mean something in a URI escaped. */
static int file_uri(const char *path, const char *query, char *out, size_t len)
{
    size_t o = 0;
    int n = snprintf(out, len, "file:");
    if (n < 0 || (size_t)n >= len) return -1;
    o = (size_t)n;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (o + 4 >= len) return -1;
        if (*p == '%' || *p == '?' || *p == '#' || *p < 0x20) o += (size_t)snprintf(out + o, len - o, "%%%02X", *p);
        else out[o++] = (char)*p;
    }
    n = snprintf(out + o, len - o, "?%s", query);
    return n < 0 || (size_t)n >= len - o ? -1 : 0;
}

static int wal_has_data(const char *path)
{
    char wal[4200];
    struct stat sb;
    snprintf(wal, sizeof wal, "%s-wal", path);
    return stat(wal, &sb) == 0 && sb.st_size > 0;
}

ms_db *ms_db_open_readonly(const char *path, char *err, size_t errlen)
{
    ms_db *db = new_handle(path, 0, 0, err, errlen);
    if (!db) return NULL;
    int version = 0, app_id = 0, n_objects = 0, ok = 0;
    for (int immutable = 0; immutable < 2 && !ok; immutable++) {
        char uri[4200];
        if (file_uri(path, immutable ? "immutable=1" : "mode=ro", uri, sizeof uri)) {
            dbi_fail(db, "the path is too long");
            break;
        }
        if (sqlite3_open_v2(uri, &db->h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK)
            dbi_sqlfail(db, "cannot open the database");
        else if (read_identity(db, &version, &app_id, &n_objects) == 0)
            ok = 1;
        if (ok) break;
        int code = db->h ? sqlite3_errcode(db->h) : SQLITE_NOMEM;
        sqlite3_close_v2(db->h);
        db->h = NULL;
        /* A WAL database in a read-only file or folder has no shared-memory
         * file for readers to meet in, so SQLite refuses it as a live
         * database. With nothing in a write-ahead log the main file is the
         * whole database and reads as immutable; a log with data in it
         * belongs to a writer, whose last commits would be missed. */
        if (code != SQLITE_READONLY && code != SQLITE_CANTOPEN) break;
        if (wal_has_data(path)) {
            dbi_fail(db, "read-only, and its write-ahead log (%s-wal) holds commits a reader cannot see without "
                     "write access", path);
            break;
        }
    }
    if (ok && check_identity(db, version, app_id, n_objects) == 0) {
        if (version == ms_db_n_migrations) return db;
        if (version == 0) {
            /* an empty file (a process killed before it made the schema):
             * it holds no runs, as a new database does */
            ms_db_close(db);
            return ms_db_open(":memory:", 1, err, errlen);
        }
        dbi_fail(db, "schema version %d is older than this memsplit's %d; any writing command (e.g. memsplit "
                 "plan --db) upgrades it", version, ms_db_n_migrations);
    }
    if (err) snprintf(err, errlen, "%s: %s", path, db->err);
    ms_db_close(db);
    return NULL;
}

ms_db *ms_db_open_image(const void *bytes, size_t n, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    ms_db *db = calloc(1, sizeof *db);
    /* SQLite owns (and may grow) the copy: a migration writes to it. */
    unsigned char *copy = sqlite3_malloc64(n ? n : 1);
    if (!db || !copy) {
        free(db);
        sqlite3_free(copy);
        if (err) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (n) memcpy(copy, bytes, n);
    /* Header bytes 18 and 19 say WAL (2) in every file memsplit wrote; the
     * in-memory VFS has no shared memory for a WAL, so read the image as a
     * rollback-journal database (1), which is the same file otherwise. */
    if (n >= 20 && copy[18] == 2 && copy[19] == 2) copy[18] = copy[19] = 1;
    if (sqlite3_open_v2(":memory:", &db->h, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_free(copy);
        dbi_sqlfail(db, "cannot open an in-memory database");
    } else if (sqlite3_deserialize(db->h, "main", copy, (sqlite3_int64)n, (sqlite3_int64)n,
                                   SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE) !=
               SQLITE_OK) {
        dbi_sqlfail(db, "cannot load the database image");   /* SQLite freed the copy */
    } else if (make_ready(db, 1) == 0) {
        return db;
    }
    if (err) snprintf(err, errlen, "database image: %s", db->err);
    ms_db_close(db);
    return NULL;
}

void ms_db_close(ms_db *db)
{
    if (!db) return;
    if (db->h) sqlite3_close_v2(db->h);
    free(db);
}
