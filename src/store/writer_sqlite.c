/* writer_sqlite.c — the SQLite writer: one trace.db per session directory,
 * WAL journal, one transaction per batch, a prepared statement per table,
 * the batch's actions as one compressed action_batches row, indexes built
 * at close. Source payloads go to the sources table once, zstd-compressed,
 * most as deltas of the payload stored before them (src_codec.c); a row
 * that may not have reached the database (a failed insert or commit) is
 * never used as a base. A store of schema version 1 or 2 gets the
 * base_source_id column when a writer appends to it. A process
 * killed mid-build leaves a database that opens cleanly and holds every
 * batch committed before the kill. A database written by a newer schema is
 * refused (PRAGMA user_version). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "store.h"

typedef struct sqlw {
  sqlite3 *db;
  sqlite3_stmt *ins[SPY__T_COUNT];
  sqlite3_stmt *build_end, *session_meta, *finish;
  spy__rows *rows;
  spy__abatch batch;
  spy__src_packer *packer;
  spy__buf sql;
  char *session_id;
  int in_txn;
  uint64_t actions;
  _Atomic uint64_t lost;
  void (*report)(void *, int, const char *);
  void *report_ctx;
} sqlw;

static int fail(sqlw *w, const char *what) {
  char msg[512];
  snprintf(msg, sizeof msg, "sqlite: %.200s: %.250s", what,
           w->db ? sqlite3_errmsg(w->db) : "cannot open");
  if (w->report)
    w->report(w->report_ctx, SPY_EIO, msg);
  return SPY_EIO;
}

static int exec(sqlw *w, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(w->db, sql, NULL, NULL, &err) != SQLITE_OK) {
    sqlite3_free(err);
    return fail(w, sql);
  }
  return 0;
}

static int prepare(sqlw *w, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v3(w->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) !=
      SQLITE_OK)
    return fail(w, sql);
  return 0;
}

/* Reads the store's schema version; refuses a newer one. */
int spy__sqlite_check_version(sqlite3 *db);
int spy__sqlite_check_version(sqlite3 *db) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
    return SPY_EIO;
  int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  return v > SPY_TRACE_SCHEMA_VERSION ? SPY_EBADSCHEMA : v;
}

static int64_t sq_close(void *state);

static int sq_open(void **state, const spy_trace_writer_cfg *cfg) {
  sqlw *w = calloc(1, sizeof *w);
  if (!w)
    return SPY_ENOMEM;
  *state = w;
  w->report = cfg->report;
  w->report_ctx = cfg->report_ctx;
  w->session_id = strdup(cfg->session_id);
  w->rows = spy__rows_new(cfg->session_id);
  w->packer = spy__src_packer_new();
  if (!w->session_id || !w->rows || !w->packer)
    return SPY_ENOMEM;
  char path[4096];
  snprintf(path, sizeof path, "%s/trace.db", cfg->dir);
  if (sqlite3_open_v2(path, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      NULL) != SQLITE_OK)
    return fail(w, path);
  sqlite3_busy_timeout(w->db, 5000);
  sqlite3_db_config(w->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
  int v = spy__sqlite_check_version(w->db);
  if (v < 0) {
    if (v == SPY_EBADSCHEMA && w->report)
      w->report(w->report_ctx, v, "sqlite: the store has a newer schema");
    return v;
  }
  int rc;
  /* WAL without fsync: a killed process loses nothing it committed (the
   * bytes are in the OS), an OS crash or power cut may lose the trace —
   * the price of never making the traced build wait for the disk. No
   * checkpoints while tracing; one at close. */
  if ((rc = exec(w, "PRAGMA page_size=16384; "
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; "
                    "PRAGMA cache_size=-32768; PRAGMA wal_autocheckpoint=0;")))
    return rc;
  spy__schema_sql(&w->sql, 0);
  if (v == 1 || v == 2) /* an older store: sources without the delta base */
    spy__buf_puts(&w->sql,
                  "ALTER TABLE sources ADD COLUMN base_source_id TEXT;");
  char ver[64];
  snprintf(ver, sizeof ver, "PRAGMA user_version=%d;",
           SPY_TRACE_SCHEMA_VERSION);
  spy__buf_puts(&w->sql, ver);
  spy__buf_putc(&w->sql, 0);
  if (w->sql.err)
    return w->sql.err;
  if ((rc = exec(w, "BEGIN")) || (rc = exec(w, w->sql.p)) ||
      (rc = exec(w, "COMMIT")))
    return rc;
  for (int t = 0; t < SPY__T_COUNT; t++) {
    const spy__table *tb = &spy__tables[t];
    w->sql.len = 0;
    spy__buf_puts(&w->sql, t == SPY__T_SOURCES ? "INSERT OR IGNORE INTO "
                                               : "INSERT OR REPLACE INTO ");
    spy__buf_puts(&w->sql, tb->name);
    spy__buf_putc(&w->sql, '(');
    spy__buf_puts(&w->sql, tb->cols);
    spy__buf_puts(&w->sql, ") VALUES(");
    for (size_t i = 0; tb->types[i]; i++)
      spy__buf_puts(&w->sql, i ? ",?" : "?");
    spy__buf_puts(&w->sql, ")");
    spy__buf_putc(&w->sql, 0);
    if (w->sql.err)
      return w->sql.err;
    if ((rc = prepare(w, w->sql.p, &w->ins[t])))
      return rc;
  }
  if ((rc = prepare(w,
                    "UPDATE builds SET ended_at=?4 WHERE session_id=?1 AND "
                    "build_id=?2",
                    &w->build_end)) ||
      (rc = prepare(w,
                    "UPDATE sessions SET cwd=?2, platform=?3, format=?4, "
                    "dir=?5, file=?6 WHERE session_id=?1",
                    &w->session_meta)) ||
      (rc = prepare(w,
                    "UPDATE sessions SET actions=?2, actions_lost=?3 WHERE "
                    "session_id=?1",
                    &w->finish)))
    return rc;
  /* the session row exists from the start */
  sqlite3_stmt *s = w->ins[SPY__T_SESSIONS];
  sqlite3_bind_text(s, 1, w->session_id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, cfg->cwd, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s, 7, (sqlite3_int64)spy__now_us());
  sqlite3_bind_int(s, 8, SPY_TRACE_SCHEMA_VERSION);
  /* actions / actions_lost stay NULL until a clean close sets them */
  int st = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return st == SQLITE_DONE ? 0 : fail(w, "insert session");
}

static int begin(sqlw *w) {
  if (w->in_txn)
    return 0;
  int rc = exec(w, "BEGIN");
  if (rc == 0)
    w->in_txn = 1;
  return rc;
}

static int run(sqlw *w, sqlite3_stmt *st, const spy__cell *c, int n) {
  for (int i = 0; i < n; i++) {
    switch (c[i].kind) {
    case SPY__COL_INT: sqlite3_bind_int64(st, i + 1, c[i].i); break;
    case SPY__COL_TEXT:
      sqlite3_bind_text(st, i + 1, c[i].s, (int)c[i].n, SQLITE_STATIC);
      break;
    case SPY__COL_BLOB:
      sqlite3_bind_blob(st, i + 1, c[i].s, (int)c[i].n, SQLITE_STATIC);
      break;
    default: sqlite3_bind_null(st, i + 1);
    }
  }
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_DONE ? 0 : fail(w, "insert");
}

static int sink(void *arg, int table, const spy__cell *c) {
  sqlw *w = arg;
  if (table == SPY__ROW_ACTION) {
    spy__abatch_add(&w->batch, (uint64_t)c[1].i, c[5].s, c[5].n);
    return w->batch.text.err;
  }
  int n = (int)strlen(spy__tables[table].types);
  if (table == SPY__T_SESSIONS)
    return run(w, w->session_meta, c, 6);
  if (table == SPY__T_BUILDS && c[2].kind == 0)
    return run(w, w->build_end, c, 4);
  return run(w, w->ins[table], c, n);
}

static int sq_source(void *state, const uint64_t hash[2], const char *p,
                     size_t n) {
  sqlw *w = state;
  int rc = begin(w);
  if (rc)
    return rc;
  char id[33];
  spy__cell c[5];
  if ((rc = spy__source_row(w->packer, hash, p, n, id, c)) == 0)
    rc = run(w, w->ins[SPY__T_SOURCES], c, 5);
  if (rc < 0) /* not stored: no later row may refer to it */
    spy__src_packer_reset(w->packer);
  return rc;
}

static int sq_action(void *state, const spy_trace_record *r) {
  sqlw *w = state;
  int rc = begin(w);
  if (rc == 0)
    rc = spy__rows_map(w->rows, r, sink, w);
  if (rc < 0)
    atomic_fetch_add(&w->lost, 1);
  else
    w->actions++;
  return rc;
}

static int sq_commit(void *state) {
  sqlw *w = state;
  if (w->batch.n) {
    spy__cell c[7];
    int rc = begin(w);
    if (rc == 0)
      rc = spy__abatch_row(&w->batch, w->session_id, c);
    if (rc == 0)
      rc = run(w, w->ins[SPY__T_BATCHES], c, 7);
    if (rc < 0) {
      atomic_fetch_add(&w->lost, w->batch.n);
      w->actions -= w->batch.n;
    }
    spy__abatch_clear(&w->batch);
    if (rc < 0) {
      spy__src_packer_reset(w->packer);
      return rc;
    }
  }
  if (!w->in_txn)
    return 0;
  w->in_txn = 0;
  int rc = exec(w, "COMMIT");
  if (rc < 0) /* the transaction's sources may be gone */
    spy__src_packer_reset(w->packer);
  return rc;
}

static uint64_t sq_lost(void *state) {
  return atomic_load(&((sqlw *)state)->lost);
}

static int64_t sq_close(void *state) {
  sqlw *w = state;
  if (!w)
    return 0;
  if (w->db && w->finish) {
    sq_commit(w);
    /* indexes are built once at the end, not updated per insert */
    w->sql.len = 0;
    spy__index_sql(&w->sql);
    spy__buf_putc(&w->sql, 0);
    if (!w->sql.err)
      exec(w, w->sql.p);
    exec(w, "PRAGMA wal_checkpoint(TRUNCATE)");
    spy__cell c[3] = {{SPY__COL_TEXT, 0, w->session_id, strlen(w->session_id)},
                      {SPY__COL_INT, (int64_t)w->actions, NULL, 0},
                      {SPY__COL_INT, (int64_t)atomic_load(&w->lost), NULL, 0}};
    run(w, w->finish, c, 3);
  }
  for (int t = 0; t < SPY__T_COUNT; t++)
    sqlite3_finalize(w->ins[t]);
  sqlite3_finalize(w->build_end);
  sqlite3_finalize(w->session_meta);
  sqlite3_finalize(w->finish);
  if (w->db)
    sqlite3_close(w->db);
  int64_t lost = (int64_t)atomic_load(&w->lost);
  spy__rows_free(w->rows);
  spy__abatch_free(&w->batch);
  spy__src_packer_free(w->packer);
  spy__buf_free(&w->sql);
  free(w->session_id);
  free(w);
  return lost;
}

const spy_trace_writer_ops spy__writer_sqlite = {
    "sqlite", sq_open, sq_source, sq_action, sq_commit, sq_close, sq_lost};
