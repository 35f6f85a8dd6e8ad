/* schema.h — memsplit's run-database schema as an ordered list of SQL
 * migration scripts.
 *
 * Contract: ms_db_migrations[i] takes a database from schema version i to
 * i + 1 (PRAGMA user_version). Scripts are only ever appended: a released
 * script is never edited, so a database at version k is upgraded by running
 * scripts k..n-1 in one transaction (reports/db.c). The scripts hold no
 * BEGIN/COMMIT and do not set user_version themselves. */
#ifndef MS_SCHEMA_H
#define MS_SCHEMA_H

extern const char *const ms_db_migrations[];
extern const int ms_db_n_migrations;          /* = the current schema version */

/* Stored in PRAGMA application_id so a foreign SQLite file is recognised. */
#define MS_DB_APPLICATION_ID 0x4d53504cu     /* "MSPL" */

#endif
