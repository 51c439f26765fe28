/* rec_sqlite.c — the recorder's SQLite backend: one file per recording,
 * WAL journal (a killed recorder leaves a file that opens, with every
 * committed batch), one prepared statement per row kind, parameters bound
 * by name ($1 is the recording id). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "record/rec.h"

typedef struct sq {
  sqlite3 *db;
  sqlite3_stmt *st[S_COUNT];
  int idx[S_COUNT][REC_CELLS + 1]; /* parameter index of $1.. */
  int ncells[S_COUNT];             /* the most cells a row of it had */
  int64_t rec_id;
  int reported;
} sq;

static int report(sq *s, const char *what) {
  if (!s->reported) /* one message; the writer counts the rest */
    fprintf(stderr, "spyglass record: sqlite: %s: %s\n", what,
            sqlite3_errmsg(s->db));
  s->reported = 1;
  return SPY_EIO;
}

static int exec(sq *s, const char *q) {
  char *err = NULL;
  if (sqlite3_exec(s->db, q, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "spyglass record: sqlite: %s\n", err ? err : "error");
    sqlite3_free(err);
    return SPY_EIO;
  }
  return 0;
}

static int sq_close(void *st, int64_t end_ns);

static void *sq_open(const char *path, const char *args, int64_t start_ns,
                     int packed, int64_t *rec_id) {
  if (access(path, F_OK) == 0) {
    fprintf(stderr, "spyglass record: %s exists (a recording is a new file)\n",
            path);
    return NULL;
  }
  sq *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      NULL) != SQLITE_OK) {
    fprintf(stderr, "spyglass record: cannot open %s: %s\n", path,
            s->db ? sqlite3_errmsg(s->db) : "out of memory");
    sqlite3_close(s->db);
    free(s);
    return NULL;
  }
  if (exec(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;") ||
      exec(s, "CREATE TABLE IF NOT EXISTS recording(id INTEGER PRIMARY KEY,"
              " started_ns BIGINT, ended_ns BIGINT, wall_start_ms BIGINT,"
              " host TEXT, args TEXT, version TEXT);") ||
      exec(s, spy__rec_ddl(0)) || exec(s, spy__rec_slice_ddl(0, packed)))
    goto fail;
  sqlite3_stmt *ins;
  if (sqlite3_prepare_v2(s->db,
                         "INSERT INTO recording(started_ns, wall_start_ms, "
                         "host, args, version) VALUES(?,?,?,?,?)",
                         -1, &ins, NULL) != SQLITE_OK) {
    report(s, "recording");
    goto fail;
  }
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  sqlite3_bind_int64(ins, 1, start_ns);
  sqlite3_bind_int64(ins, 2, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
  sqlite3_bind_text(ins, 3, host, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(ins, 4, args ? args : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(ins, 5, SPY_RECORD_VERSION, -1, SQLITE_STATIC);
  int rc = sqlite3_step(ins);
  sqlite3_finalize(ins);
  if (rc != SQLITE_DONE) {
    report(s, "recording");
    goto fail;
  }
  s->rec_id = sqlite3_last_insert_rowid(s->db);
  *rec_id = s->rec_id;
  for (int i = 0; i < S_COUNT; i++) {
    if (sqlite3_prepare_v3(s->db, spy__rec_sql(i), -1,
                           SQLITE_PREPARE_PERSISTENT, &s->st[i],
                           NULL) != SQLITE_OK) {
      report(s, spy__rec_sql(i));
      goto fail;
    }
    for (int p = 1; p <= REC_CELLS + 1; p++) {
      char name[8];
      snprintf(name, sizeof name, "$%d", p);
      s->idx[i][p - 1] = sqlite3_bind_parameter_index(s->st[i], name);
    }
    /* $1 is the same for every row: bound once (a reset keeps it) */
    if (s->idx[i][0])
      sqlite3_bind_int64(s->st[i], s->idx[i][0], s->rec_id);
  }
  return s;
fail:
  sq_close(s, 0);
  return NULL;
}

static int sq_begin(void *st) { return exec(st, "BEGIN"); }

static int sq_row(void *st, const rec_row *r) {
  sq *s = st;
  sqlite3_stmt *q = s->st[r->stmt];
  const int *idx = s->idx[r->stmt];
  /* every cell is bound each row (NULLs too), so a reset suffices: no
   * clear_bindings; cells a shorter row lacks are bound NULL */
  for (int i = r->n; i < s->ncells[r->stmt]; i++)
    if (idx[i + 1])
      sqlite3_bind_null(q, idx[i + 1]);
  if (r->n > s->ncells[r->stmt])
    s->ncells[r->stmt] = r->n;
  for (int i = 0; i < r->n; i++) {
    int p = idx[i + 1];
    if (!p)
      continue;
    const rec_cell *c = &r->c[i];
    switch (c->t) {
    case C_INT: sqlite3_bind_int64(q, p, c->v.i); break;
    case C_REAL: sqlite3_bind_double(q, p, c->v.r); break;
    case C_CONST:
    case C_TEXT: sqlite3_bind_text(q, p, c->v.s, -1, SQLITE_STATIC); break;
    case C_BLOB:
      sqlite3_bind_blob(q, p, c->v.s, (int)c->len, SQLITE_STATIC);
      break;
    default: sqlite3_bind_null(q, p);
    }
  }
  int rc = sqlite3_step(q);
  sqlite3_reset(q);
  return rc == SQLITE_DONE ? 0 : report(s, "insert");
}

static int sq_commit(void *st) { return exec(st, "COMMIT"); }

static int sq_close(void *st, int64_t end_ns) {
  sq *s = st;
  if (!s)
    return 0;
  int rc = 0;
  for (int i = 0; i < S_COUNT; i++)
    sqlite3_finalize(s->st[i]);
  if (end_ns && s->db) {
    char q[128];
    snprintf(q, sizeof q,
             "UPDATE recording SET ended_ns = %lld WHERE id = %lld",
             (long long)end_ns, (long long)s->rec_id);
    rc = exec(s, q);
    if (!rc)
      rc = exec(s, spy__rec_index_ddl());
    if (!rc) /* fold the WAL back so the file stands alone */
      exec(s, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;");
  }
  if (s->db && sqlite3_close(s->db) != SQLITE_OK)
    rc = SPY_EIO;
  free(s);
  return rc;
}

const rec_backend_ops spy__rec_sqlite = {"sqlite", sq_open,   sq_begin,
                                         sq_row,   sq_commit, sq_close};
