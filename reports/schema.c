/* schema.c — the migration scripts (see schema.h). Conventions: bytes are
 * INTEGER (exact), times of a run are ISO8601 UTC text plus unix seconds
 * (REAL), durations are REAL milliseconds, enums are lower-case text in the
 * vocabulary of vocab/vocab.h, JSON columns hold text that parses as JSON. */
#include "reports/schema.h"

/* Version 1: runs, profiles and what a profile trial records. */
static const char v1_runs_and_profiles[] =
    "CREATE TABLE runs (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  kind          TEXT NOT NULL CHECK (kind IN ('profile','train','doctor','isolate','plan')),\n"
    "  status        TEXT NOT NULL DEFAULT 'running'\n"
    "                CHECK (status IN ('running','ok','oom','failed','killed','infeasible')),\n"
    "  started       TEXT NOT NULL,\n"
    "  started_unix  REAL NOT NULL,\n"
    "  finished      TEXT,\n"          /* NULL until the run says it is done */
    "  finished_unix REAL,\n"
    "  cmdline       TEXT,\n"
    "  config_ini    TEXT,\n"
    "  devices_json  TEXT,\n"
    "  model         TEXT,\n"
    "  parent_run    INTEGER REFERENCES runs(id) ON DELETE SET NULL,\n"
    "  notes         TEXT,\n"
    "  host          TEXT,\n"          /* host and pid tell a live run from a dead one */
    "  pid           INTEGER\n"
    ");\n"
    "CREATE INDEX runs_parent ON runs(parent_run);\n"
    "\n"
    "CREATE TABLE oom_events (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  device        TEXT,\n"
    "  layer         INTEGER NOT NULL,\n"  /* -1 outside any layer */
    "  layer_name    TEXT,\n"
    "  phase         TEXT CHECK (phase IN ('init','forward','backward','optimizer')),\n"
    "  category      TEXT,\n"
    "  requested     INTEGER NOT NULL,\n"
    "  capacity      INTEGER NOT NULL,\n"
    "  live_by_cat   TEXT NOT NULL,\n"   /* {"param": bytes, ...} every category */
    "  live_by_layer TEXT NOT NULL,\n"   /* [bytes of layer 0, layer 1, ...] */
    "  what          TEXT,\n"
    "  t_us          INTEGER\n"
    ");\n"
    "CREATE INDEX oom_events_run ON oom_events(run_id);\n"
    "\n"
    "CREATE TABLE profiles (\n"
    "  run_id        INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  model         TEXT NOT NULL,\n"
    "  n_layers      INTEGER NOT NULL,\n"
    "  seq_len       INTEGER NOT NULL,\n"
    "  d_model       INTEGER NOT NULL,\n"
    "  n_head        INTEGER NOT NULL,\n"
    "  vocab         INTEGER NOT NULL,\n"
    "  global_batch  INTEGER NOT NULL,\n"
    "  device        TEXT NOT NULL,\n"
    "  capacity      INTEGER NOT NULL,\n"
    "  reserve       INTEGER NOT NULL,\n"
    "  peak          INTEGER NOT NULL,\n"
    "  fits          INTEGER NOT NULL CHECK (fits IN (0,1)),\n"
    "  oom_event     INTEGER REFERENCES oom_events(id) ON DELETE SET NULL,\n"
    "  created       TEXT NOT NULL,\n"
    "  created_unix  REAL NOT NULL\n"
    ");\n"
    "\n"
    "CREATE TABLE layer_rows (\n"
    "  run_id        INTEGER NOT NULL REFERENCES profiles(run_id) ON DELETE CASCADE,\n"
    "  ord           INTEGER NOT NULL,\n"  /* position in the profile's row array */
    "  layer         INTEGER NOT NULL,\n"
    "  name          TEXT NOT NULL,\n"
    "  kind          TEXT NOT NULL,\n"
    "  precision     TEXT NOT NULL CHECK (precision IN ('fp32','bf16','fp16')),\n"
    "  micro_batch   INTEGER NOT NULL,\n"
    "  source        TEXT NOT NULL CHECK (source IN ('full','isolated')),\n"
    "  param         INTEGER NOT NULL,\n"
    "  master        INTEGER NOT NULL,\n"
    "  grad          INTEGER NOT NULL,\n"
    "  optim         INTEGER NOT NULL,\n"
    "  act           INTEGER NOT NULL,\n"
    "  act_input     INTEGER NOT NULL,\n"
    "  transient_fwd INTEGER NOT NULL,\n"
    "  transient_bwd INTEGER NOT NULL,\n"
    "  out_bytes     INTEGER NOT NULL,\n"
    "  fwd_ms        REAL NOT NULL,\n"
    "  bwd_ms        REAL NOT NULL,\n"
    "  opt_ms        REAL NOT NULL,\n"
    "  PRIMARY KEY (run_id, ord)\n"
    ") WITHOUT ROWID;\n"
    "CREATE INDEX layer_rows_key ON layer_rows(run_id, layer, precision, micro_batch);\n"
    "\n"
    "CREATE TABLE mem_events (\n"
    "  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  seq           INTEGER NOT NULL,\n"  /* 0, 1, 2 ... in the order written */
    "  t_us          INTEGER NOT NULL,\n"
    "  device        INTEGER NOT NULL,\n"
    "  kind          TEXT NOT NULL CHECK (kind IN ('alloc','free','fail')),\n"
    "  layer         INTEGER,\n"           /* NULL outside any layer */
    "  phase         TEXT,\n"
    "  category      TEXT,\n"
    "  bytes         INTEGER NOT NULL,\n"
    "  address       INTEGER,\n"
    "  what          TEXT,\n"
    "  source        TEXT NOT NULL\n"
    "                CHECK (source IN ('allocator','cupti_callback','cupti_activity')),\n"
    "  PRIMARY KEY (run_id, seq)\n"
    ") WITHOUT ROWID;\n";

/* Version 2: what a training run (single device or a plan's rerun) records. */
static const char v2_training[] =
    "CREATE TABLE plans (\n"
    "  id                INTEGER PRIMARY KEY,\n"
    "  run_id            INTEGER REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  created           TEXT NOT NULL,\n"
    "  created_unix      REAL NOT NULL,\n"
    "  plan_json         TEXT NOT NULL,\n"
    "  predicted_step_ms REAL,\n"
    "  feasible          INTEGER NOT NULL CHECK (feasible IN (0,1))\n"
    ");\n"
    "CREATE INDEX plans_run ON plans(run_id);\n"
    "\n"
    "CREATE TABLE steps (\n"
    "  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step          INTEGER NOT NULL,\n"
    "  loss          REAL,\n"
    "  ms            REAL,\n"
    "  tokens_per_s  REAL,\n"
    "  lr            REAL,\n"
    "  loss_scale    REAL,\n"
    "  skipped       INTEGER NOT NULL DEFAULT 0,\n"
    "  peaks_json    TEXT,\n"             /* per-device peak bytes this step */
    "  t_unix        REAL NOT NULL,\n"
    "  PRIMARY KEY (run_id, step)\n"      /* a step redone after recovery replaces the lost one */
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE TABLE device_peaks (\n"
    "  run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  device          INTEGER NOT NULL,\n"
    "  name            TEXT NOT NULL,\n"
    "  capacity        INTEGER NOT NULL,\n"
    "  predicted_peak  INTEGER,\n"
    "  measured_peak   INTEGER NOT NULL,\n"
    "  measured_by_cat TEXT NOT NULL,\n"
    "  predicted_by_cat TEXT,\n"
    "  PRIMARY KEY (run_id, device)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE TABLE recovery_events (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step          INTEGER NOT NULL,\n"  /* the step the OOM hit */
    "  resumed_step  INTEGER,\n"           /* the checkpoint's step training resumed after */
    "  reason        TEXT NOT NULL,\n"
    "  oom_event     INTEGER REFERENCES oom_events(id) ON DELETE SET NULL,\n"
    "  old_plan_id   INTEGER REFERENCES plans(id) ON DELETE SET NULL,\n"
    "  new_plan_id   INTEGER REFERENCES plans(id) ON DELETE SET NULL,\n"
    "  checkpoint    TEXT,\n"
    "  t             TEXT NOT NULL,\n"
    "  t_unix        REAL NOT NULL\n"
    ");\n"
    "CREATE INDEX recovery_events_run ON recovery_events(run_id);\n";

/* Version 3: what the PyTorch bridge records. Runs may end "interrupted"
 * (Ctrl-C reached the program); OOMs may happen in validation; rows may be
 * copies of an identical reached block or come from an uncapped pass, and
 * carry the optimizer step's transient; a profile names the program's
 * fingerprint, its block list, framework and accounting. SQLite cannot
 * change a CHECK in place, so three tables are rebuilt (reports/db.c runs
 * migrations with foreign keys off and checks them before committing). */
static const char v3_programs[] =
    "CREATE TABLE runs_v3 (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  kind          TEXT NOT NULL CHECK (kind IN ('profile','train','doctor','isolate','plan')),\n"
    "  status        TEXT NOT NULL DEFAULT 'running'\n"
    "                CHECK (status IN ('running','ok','oom','failed','killed','infeasible','interrupted')),\n"
    "  started       TEXT NOT NULL,\n"
    "  started_unix  REAL NOT NULL,\n"
    "  finished      TEXT,\n"
    "  finished_unix REAL,\n"
    "  cmdline       TEXT,\n"
    "  config_ini    TEXT,\n"
    "  devices_json  TEXT,\n"
    "  model         TEXT,\n"
    "  parent_run    INTEGER REFERENCES runs(id) ON DELETE SET NULL,\n"
    "  notes         TEXT,\n"
    "  host          TEXT,\n"
    "  pid           INTEGER\n"
    ");\n"
    "INSERT INTO runs_v3 SELECT id, kind, status, started, started_unix, finished, finished_unix, cmdline,\n"
    "  config_ini, devices_json, model, parent_run, notes, host, pid FROM runs;\n"
    "DROP TABLE runs;\n"
    "ALTER TABLE runs_v3 RENAME TO runs;\n"
    "CREATE INDEX runs_parent ON runs(parent_run);\n"
    "\n"
    "CREATE TABLE oom_events_v3 (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  device        TEXT,\n"
    "  layer         INTEGER NOT NULL,\n"
    "  layer_name    TEXT,\n"
    "  phase         TEXT CHECK (phase IN ('init','forward','backward','optimizer','validation')),\n"
    "  category      TEXT,\n"
    "  requested     INTEGER NOT NULL,\n"
    "  capacity      INTEGER NOT NULL,\n"
    "  live_by_cat   TEXT NOT NULL,\n"
    "  live_by_layer TEXT NOT NULL,\n"
    "  what          TEXT,\n"
    "  t_us          INTEGER\n"
    ");\n"
    "INSERT INTO oom_events_v3 SELECT id, run_id, device, layer, layer_name, phase, category, requested,\n"
    "  capacity, live_by_cat, live_by_layer, what, t_us FROM oom_events;\n"
    "DROP TABLE oom_events;\n"
    "ALTER TABLE oom_events_v3 RENAME TO oom_events;\n"
    "CREATE INDEX oom_events_run ON oom_events(run_id);\n"
    "\n"
    "CREATE TABLE layer_rows_v3 (\n"
    "  run_id        INTEGER NOT NULL REFERENCES profiles(run_id) ON DELETE CASCADE,\n"
    "  ord           INTEGER NOT NULL,\n"
    "  layer         INTEGER NOT NULL,\n"
    "  name          TEXT NOT NULL,\n"
    "  kind          TEXT NOT NULL,\n"
    "  precision     TEXT NOT NULL CHECK (precision IN ('fp32','bf16','fp16')),\n"
    "  micro_batch   INTEGER NOT NULL,\n"
    "  source        TEXT NOT NULL CHECK (source IN ('full','isolated','copied','uncapped')),\n"
    "  param         INTEGER NOT NULL,\n"
    "  master        INTEGER NOT NULL,\n"
    "  grad          INTEGER NOT NULL,\n"
    "  optim         INTEGER NOT NULL,\n"
    "  act           INTEGER NOT NULL,\n"
    "  act_input     INTEGER NOT NULL,\n"
    "  transient_fwd INTEGER NOT NULL,\n"
    "  transient_bwd INTEGER NOT NULL,\n"
    "  transient_opt INTEGER NOT NULL DEFAULT 0,\n"
    "  out_bytes     INTEGER NOT NULL,\n"
    "  fwd_ms        REAL NOT NULL,\n"
    "  bwd_ms        REAL NOT NULL,\n"
    "  opt_ms        REAL NOT NULL,\n"
    "  PRIMARY KEY (run_id, ord)\n"
    ") WITHOUT ROWID;\n"
    "INSERT INTO layer_rows_v3 (run_id, ord, layer, name, kind, precision, micro_batch, source, param,\n"
    "  master, grad, optim, act, act_input, transient_fwd, transient_bwd, out_bytes, fwd_ms, bwd_ms, opt_ms)\n"
    "  SELECT run_id, ord, layer, name, kind, precision, micro_batch, source, param, master, grad, optim,\n"
    "  act, act_input, transient_fwd, transient_bwd, out_bytes, fwd_ms, bwd_ms, opt_ms FROM layer_rows;\n"
    "DROP TABLE layer_rows;\n"
    "ALTER TABLE layer_rows_v3 RENAME TO layer_rows;\n"
    "CREATE INDEX layer_rows_key ON layer_rows(run_id, layer, precision, micro_batch);\n"
    "\n"
    "ALTER TABLE profiles ADD COLUMN fingerprint TEXT;\n"
    "ALTER TABLE profiles ADD COLUMN layer_list TEXT;\n"
    "ALTER TABLE profiles ADD COLUMN framework TEXT;\n"
    "ALTER TABLE profiles ADD COLUMN accounting TEXT;\n"
    "ALTER TABLE profiles ADD COLUMN reserved_peak INTEGER;\n"
    "ALTER TABLE profiles ADD COLUMN grads_freed INTEGER NOT NULL DEFAULT 0;\n";

/* v4: a program's loss interval (vocab/profile.h: ms_loss_row) */
static const char v4_program_loss[] =
    "ALTER TABLE profiles ADD COLUMN loss_present INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE profiles ADD COLUMN loss_made_in INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE profiles ADD COLUMN loss_outputs INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE profiles ADD COLUMN loss_held INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE profiles ADD COLUMN loss_transient_fwd INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE profiles ADD COLUMN loss_transient_bwd INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE profiles ADD COLUMN loss_carry INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE profiles ADD COLUMN loss_carry_loss INTEGER NOT NULL DEFAULT 0;\n";

/* v5: the step an OOM happened in (NULL: unknown, as in runs recorded before) */
static const char v5_oom_step[] = "ALTER TABLE oom_events ADD COLUMN step INTEGER;\n";

/* v6: a program's record (vocab/profile.h: ms_prog_record). Its header is a
 * table of its own rather than columns of profiles: a row says the profile
 * has a record (an empty one included), the storages reference it, and its
 * count lets a reader tell a whole list from a cut one. t_free NULL: live at
 * the end (MS_REC_NEVER); copy_of NULL: not a copy. */
static const char v6_program_record[] =
    "CREATE TABLE prog_records (\n"
    "  run_id        INTEGER PRIMARY KEY REFERENCES profiles(run_id) ON DELETE CASCADE,\n"
    "  n_layers      INTEGER NOT NULL,\n"
    "  t_from        INTEGER NOT NULL,\n"
    "  t_end         INTEGER NOT NULL,\n"
    "  n_storages    INTEGER NOT NULL\n"
    ");\n"
    "\n"
    "CREATE TABLE rec_storages (\n"
    "  run_id        INTEGER NOT NULL REFERENCES prog_records(run_id) ON DELETE CASCADE,\n"
    "  idx           INTEGER NOT NULL,\n"  /* position in the record, t_alloc order */
    "  layer         INTEGER NOT NULL,\n"
    "  cat           TEXT NOT NULL,\n"
    "  bytes         INTEGER NOT NULL,\n"
    "  t_alloc       INTEGER NOT NULL,\n"
    "  t_free        INTEGER,\n"
    "  copy_of       INTEGER,\n"
    "  PRIMARY KEY (run_id, idx)\n"
    ") WITHOUT ROWID;\n";

/* v7: the record's moments (ms_rec_moment: what layer and phase ran at
 * which positions of the record pass), kept with its storages. The header
 * counts them as it counts the storages; a record stored before has none
 * (n_moments 0). layer -1: outside any layer; phase as text. */
static const char v7_record_moments[] =
    "ALTER TABLE prog_records ADD COLUMN n_moments INTEGER NOT NULL DEFAULT 0;\n"
    "\n"
    "CREATE TABLE rec_moments (\n"
    "  run_id        INTEGER NOT NULL REFERENCES prog_records(run_id) ON DELETE CASCADE,\n"
    "  idx           INTEGER NOT NULL,\n"  /* position in the record's list, in order */
    "  layer         INTEGER NOT NULL,\n"
    "  phase         TEXT NOT NULL,\n"
    "  t_begin       INTEGER NOT NULL,\n"
    "  t_end         INTEGER NOT NULL,\n"
    "  PRIMARY KEY (run_id, idx)\n"
    ") WITHOUT ROWID;\n";

/* v8: the modules whose outputs a rerun hands on where they were made
 * (ms_prog_record.handed_on), kept with the record as its other lists are:
 * counted in the header (0 for a record stored before: none), one row a
 * module path, in the record's order. */
static const char v8_record_handed_on[] =
    "ALTER TABLE prog_records ADD COLUMN n_handed_on INTEGER NOT NULL DEFAULT 0;\n"
    "\n"
    "CREATE TABLE rec_handed_on (\n"
    "  run_id        INTEGER NOT NULL REFERENCES prog_records(run_id) ON DELETE CASCADE,\n"
    "  idx           INTEGER NOT NULL,\n"  /* position in the record's list */
    "  path          TEXT NOT NULL,\n"     /* the module path, as the record holds it */
    "  PRIMARY KEY (run_id, idx)\n"
    ") WITHOUT ROWID;\n";

/* v9: a program's stage alone on its GPU, its peak in two parts
 * (ms_device_peak.has_parts), measured and predicted: the caching
 * allocator's peak and what the GPU held beyond it (the context, the
 * libraries). NULL for every other device, and for every row stored
 * before. And of a profile's reserve, what the caching allocator holds
 * (ms_profile.reserve_allocator; 0 for a profile stored before). */
static const char v9_device_parts[] =
    "ALTER TABLE device_peaks ADD COLUMN allocator_peak INTEGER;\n"
    "ALTER TABLE device_peaks ADD COLUMN beyond_allocator INTEGER;\n"
    "ALTER TABLE device_peaks ADD COLUMN predicted_allocator_peak INTEGER;\n"
    "ALTER TABLE device_peaks ADD COLUMN predicted_beyond_allocator INTEGER;\n"
    "ALTER TABLE profiles ADD COLUMN reserve_allocator INTEGER NOT NULL DEFAULT 0;\n";

const char *const ms_db_migrations[] = { v1_runs_and_profiles, v2_training, v3_programs, v4_program_loss,
                                         v5_oom_step, v6_program_record, v7_record_moments,
                                         v8_record_handed_on, v9_device_parts };
const int ms_db_n_migrations = (int)(sizeof ms_db_migrations / sizeof ms_db_migrations[0]);
