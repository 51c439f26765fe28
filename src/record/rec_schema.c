/* rec_schema.c — the tables of a recording and the one statement per row
 * kind, shared by the SQLite and PostgreSQL backends. Tables follow
 * Perfetto's trace processor where they fit (process, thread, track,
 * slice, counter, args), plus frame, value, zone_loc, msgprof, loss, and
 * chunk for buffers (encoded chunks or raw frames: a blob or a path beside
 * the database). Every table carries recording_id so that many recordings
 * share one PostgreSQL database. The same DDL serves both: SQLite takes
 * BIGINT / DOUBLE PRECISION / BYTEA as INTEGER / REAL / BLOB affinities. */
#include "record/rec.h"
#include "record/rec_buffers.h"
#include "record/rec_trace.h"

static const char *const sql[S_COUNT] = {
    [S_PROCESS] = "INSERT INTO process(recording_id, upid, pid, provider_id, "
                  "name, start_ts, clock_offset_ns, arg_set_id) "
                  "VALUES($1,$2,$3,$4,$5,$6,$7,$8)",
    [S_PROCESS_END] = "UPDATE process SET end_ts = $2 "
                      "WHERE recording_id = $1 AND upid = $3",
    [S_THREAD] = "INSERT INTO thread(recording_id, utid, upid, tid, "
                 "thread_no, name) VALUES($1,$2,$3,$4,$5,$6) "
                 "ON CONFLICT(recording_id, utid) DO UPDATE SET "
                 "name = excluded.name",
    [S_THREAD_END] = "UPDATE thread SET end_ts = $2 "
                     "WHERE recording_id = $1 AND utid = $3",
    [S_TRACK] = "INSERT INTO track(recording_id, id, name, type, upid, utid, "
                "unit) VALUES($1,$2,$3,$4,$5,$6,$7)",
    [S_SLICE] = "INSERT INTO slice_data(recording_id, id, ts, dur, track_id, "
                "name_id, depth, parent_id, flags) "
                "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9)",
    [S_COUNTER] = "INSERT INTO counter(recording_id, ts, track_id, value) "
                  "VALUES($1,$2,$3,$4)",
    [S_ARG] = "INSERT INTO args(recording_id, arg_set_id, key, int_value, "
              "real_value, string_value) VALUES($1,$2,$3,$4,$5,$6)",
    [S_FRAME] = "INSERT INTO frame(recording_id, upid, frame, ts, cpu_ms, "
                "gpu_ms, fps) VALUES($1,$2,$3,$4,$5,$6,$7)",
    [S_VALUE] = "INSERT INTO value(recording_id, upid, ts, source, name, "
                "kind, state, int_value, real_value, string_value) "
                "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
    [S_ZONE_LOC] = "INSERT INTO zone_loc(recording_id, id, upid, loc_id, "
                   "name, function, file, line, color) "
                   "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9)",
    [S_MSGPROF] = "INSERT INTO msgprof(recording_id, upid, ts, type, count, "
                  "errors, bytes, msgs_per_s, bytes_per_s, encode_p50_ns, "
                  "encode_p99_ns, post_p50_ns, post_p99_ns) "
                  "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)",
    [S_LOSS] = "INSERT INTO loss(recording_id, upid, ts, what, count) "
               "VALUES($1,$2,$3,$4,$5)",
    [S_PROCESS_CLOCK] = "UPDATE process SET clock_offset_ns = $2 "
                        "WHERE recording_id = $1 AND upid = $3",
    [S_BUILD] = SPY_REC_SQL_BUILD,
    [S_BUILD_HOOK] = SPY_REC_SQL_BUILD_HOOK,
    [S_HOOK_CALL] = SPY_REC_SQL_HOOK_CALL,
    [S_CHUNK] = SPY_REC_SQL_CHUNK,
};

const char *spy__rec_sql(int s) {
  return s >= 0 && s < S_COUNT ? sql[s] : NULL;
}

/* recording is created by each backend (its id column differs). */
#define SLICE_VIEW                                                             \
  "SELECT s.recording_id AS recording_id, s.id AS id, s.ts AS ts,"             \
  " s.dur AS dur, s.track_id AS track_id, COALESCE(l.name, '?') AS name,"      \
  " s.depth AS depth, s.parent_id AS parent_id, l.loc_id AS loc_id,"           \
  " s.flags AS flags, s.name_id AS name_id FROM slice_data s LEFT JOIN"        \
  " zone_loc l ON l.recording_id = s.recording_id AND l.id = s.name_id"

static const char ddl[] =
    "CREATE TABLE IF NOT EXISTS process(recording_id BIGINT NOT NULL,"
    " upid BIGINT NOT NULL, pid BIGINT, provider_id TEXT, name TEXT,"
    " start_ts BIGINT, end_ts BIGINT, clock_offset_ns BIGINT,"
    " arg_set_id BIGINT, PRIMARY KEY(recording_id, upid));\n"
    "CREATE TABLE IF NOT EXISTS thread(recording_id BIGINT NOT NULL,"
    " utid BIGINT NOT NULL, upid BIGINT, tid BIGINT, thread_no BIGINT,"
    " name TEXT, end_ts BIGINT, PRIMARY KEY(recording_id, utid));\n"
    "CREATE TABLE IF NOT EXISTS track(recording_id BIGINT NOT NULL,"
    " id BIGINT NOT NULL, name TEXT, type TEXT, upid BIGINT, utid BIGINT,"
    " unit TEXT, PRIMARY KEY(recording_id, id));\n"
    "CREATE TABLE IF NOT EXISTS counter(recording_id BIGINT NOT NULL,"
    " ts BIGINT, track_id BIGINT, value DOUBLE PRECISION);\n"
    "CREATE TABLE IF NOT EXISTS args(recording_id BIGINT NOT NULL,"
    " arg_set_id BIGINT, key TEXT, int_value BIGINT,"
    " real_value DOUBLE PRECISION, string_value TEXT);\n"
    "CREATE TABLE IF NOT EXISTS frame(recording_id BIGINT NOT NULL,"
    " upid BIGINT, frame BIGINT, ts BIGINT, cpu_ms DOUBLE PRECISION,"
    " gpu_ms DOUBLE PRECISION, fps DOUBLE PRECISION);\n"
    "CREATE TABLE IF NOT EXISTS value(recording_id BIGINT NOT NULL,"
    " upid BIGINT, ts BIGINT, source TEXT, name TEXT, kind TEXT, state TEXT,"
    " int_value BIGINT, real_value DOUBLE PRECISION, string_value TEXT);\n"
    "CREATE TABLE IF NOT EXISTS zone_loc(recording_id BIGINT NOT NULL,"
    " id BIGINT NOT NULL, upid BIGINT, loc_id BIGINT, name TEXT,"
    " function TEXT, file TEXT, line BIGINT, color BIGINT);\n"
    "CREATE UNIQUE INDEX IF NOT EXISTS zone_loc_id ON zone_loc(recording_id,"
    " id);\n"
    "CREATE TABLE IF NOT EXISTS msgprof(recording_id BIGINT NOT NULL,"
    " upid BIGINT, ts BIGINT, type BIGINT, count BIGINT, errors BIGINT,"
    " bytes BIGINT, msgs_per_s DOUBLE PRECISION,"
    " bytes_per_s DOUBLE PRECISION, encode_p50_ns BIGINT,"
    " encode_p99_ns BIGINT, post_p50_ns BIGINT, post_p99_ns BIGINT);\n"
    "CREATE TABLE IF NOT EXISTS loss(recording_id BIGINT NOT NULL,"
    " upid BIGINT, ts BIGINT, what TEXT, count BIGINT);\n"
    /* Buffers: rec_buffers.h */
    SPY_REC_BUFFERS_DDL
        /* Build traces (issue 16): rec_trace.h */
        SPY_REC_TRACE_DDL;

/* Zones: the rows hold no text. name_id is zone_loc.id (one row per
 * provider location, names interned there); `slice` is a view that joins
 * the name back, so plain-SQL users query slice.name as before. In
 * SQLite the id is the rowid (INTEGER PRIMARY KEY: stored once, no
 * separate key); PostgreSQL keeps it a plain column. */
static const char slice_sqlite[] =
    "CREATE TABLE IF NOT EXISTS slice_data(id INTEGER PRIMARY KEY,"
    " recording_id BIGINT NOT NULL, ts BIGINT, dur BIGINT, track_id BIGINT,"
    " name_id BIGINT, depth BIGINT, parent_id BIGINT, flags BIGINT);\n"
    "CREATE VIEW IF NOT EXISTS slice AS " SLICE_VIEW ";\n";
static const char slice_pg[] =
    "CREATE TABLE IF NOT EXISTS slice_data(recording_id BIGINT NOT NULL,"
    " id BIGINT NOT NULL, ts BIGINT, dur BIGINT, track_id BIGINT,"
    " name_id BIGINT, depth BIGINT, parent_id BIGINT, flags BIGINT);\n"
    "CREATE OR REPLACE VIEW slice AS " SLICE_VIEW ";\n";

const char *spy__rec_ddl(int pg) {
  (void)pg;
  return ddl;
}

const char *spy__rec_slice_ddl(int pg) { return pg ? slice_pg : slice_sqlite; }

static const char index_ddl[] =
    "CREATE INDEX IF NOT EXISTS slice_track_ts ON slice_data(recording_id,"
    " track_id, ts);\n"
    "CREATE INDEX IF NOT EXISTS counter_track_ts ON counter(recording_id,"
    " track_id, ts);\n"
    "CREATE INDEX IF NOT EXISTS frame_upid ON frame(recording_id, upid,"
    " frame);\n";

const char *spy__rec_index_ddl(void) { return index_ddl; }
