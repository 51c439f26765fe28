/* rec_read.c — reading a recording back (export, diff): one small ops
 * table, SQLite (a file, read-only) and PostgreSQL (libpq, single-row
 * mode so a query streams instead of arriving whole). Queries are written
 * once with ?1..?N parameters (all int64); the PostgreSQL backend sends
 * them as $1..$N. One query is open at a time per reader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "record/rec.h"

/* ---- SQLite ------------------------------------------------------------ */
typedef struct sqr {
  sqlite3 *db;
  sqlite3_stmt *st;
} sqr;

static void *sqr_open(const char *path) {
  FILE *f = fopen(path, "rb"); /* sqlite3 would report "out of memory" */
  if (!f) {
    fprintf(stderr, "spyglass: cannot open %s\n", path);
    return NULL;
  }
  fclose(f);
  sqr *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    fprintf(stderr, "spyglass: cannot open %s: %s\n", path,
            s->db ? sqlite3_errmsg(s->db) : "out of memory");
    sqlite3_close(s->db);
    free(s);
    return NULL;
  }
  return s;
}

static int sqr_query(void *st, const char *sql, int np, const int64_t *p) {
  sqr *s = st;
  sqlite3_finalize(s->st);
  s->st = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &s->st, NULL) != SQLITE_OK)
    return SPY_EIO;
  for (int i = 0; i < np; i++)
    sqlite3_bind_int64(s->st, i + 1, p[i]);
  return 0;
}

static int sqr_next(void *st) {
  sqr *s = st;
  int rc = s->st ? sqlite3_step(s->st) : SQLITE_MISUSE;
  return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : SPY_EIO;
}

static int sqr_null(void *st, int c) {
  return sqlite3_column_type(((sqr *)st)->st, c) == SQLITE_NULL;
}
static int64_t sqr_i64(void *st, int c) {
  return sqlite3_column_int64(((sqr *)st)->st, c);
}
static double sqr_dbl(void *st, int c) {
  return sqlite3_column_double(((sqr *)st)->st, c);
}
static const char *sqr_text(void *st, int c) {
  return (const char *)sqlite3_column_text(((sqr *)st)->st, c);
}
static const char *sqr_err(void *st) { return sqlite3_errmsg(((sqr *)st)->db); }
static const void *sqr_blob(void *st, int c, size_t *len) {
  sqr *s = st;
  const void *b = sqlite3_column_blob(s->st, c);
  *len = b ? (size_t)sqlite3_column_bytes(s->st, c) : 0;
  return b;
}
static void sqr_close(void *st) {
  sqr *s = st;
  if (!s)
    return;
  sqlite3_finalize(s->st);
  sqlite3_close(s->db);
  free(s);
}

static const rec_read_ops sqlite_read = {
    "sqlite", sqr_open, sqr_query, sqr_next,  sqr_null, sqr_i64,
    sqr_dbl,  sqr_text, sqr_err,   sqr_close, sqr_blob};

/* ---- PostgreSQL ---------------------------------------------------------- */
typedef struct pgr {
  PGconn *c;
  PGresult *row; /* the current row (single-row mode) */
  int active;    /* a query's results are still coming */
  char err[256];
} pgr;

static void pgr_drain(pgr *p) {
  PQclear(p->row);
  p->row = NULL;
  while (p->active) {
    PGresult *r = PQgetResult(p->c);
    if (!r)
      p->active = 0;
    PQclear(r);
  }
}

static void *pgr_open(const char *conninfo) {
  pgr *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->c = PQconnectdb(conninfo);
  if (PQstatus(p->c) != CONNECTION_OK) {
    /* the message, not the conninfo (it may hold a password) */
    fprintf(stderr, "spyglass: postgresql: %s", PQerrorMessage(p->c));
    PQfinish(p->c);
    free(p);
    return NULL;
  }
  return p;
}

static int pgr_query(void *st, const char *sql, int np, const int64_t *pv) {
  pgr *p = st;
  pgr_drain(p);
  size_t n = strlen(sql);
  char *q = malloc(n + 1);
  if (!q)
    return SPY_ENOMEM;
  for (size_t i = 0; i <= n; i++) /* ?N -> $N (a '?' in a literal stays) */
    q[i] =
        sql[i] == '?' && sql[i + 1] >= '1' && sql[i + 1] <= '9' ? '$' : sql[i];
  char num[8][24];
  const char *v[8];
  if (np > 8)
    np = 8;
  for (int i = 0; i < np; i++) {
    snprintf(num[i], sizeof num[i], "%lld", (long long)pv[i]);
    v[i] = num[i];
  }
  int ok = PQsendQueryParams(p->c, q, np, NULL, v, NULL, NULL, 0) &&
           PQsetSingleRowMode(p->c);
  free(q);
  if (!ok) {
    snprintf(p->err, sizeof p->err, "%s", PQerrorMessage(p->c));
    return SPY_EIO;
  }
  p->active = 1;
  return 0;
}

static int pgr_next(void *st) {
  pgr *p = st;
  PQclear(p->row);
  p->row = NULL;
  if (!p->active)
    return 0;
  PGresult *r = PQgetResult(p->c);
  if (!r) {
    p->active = 0;
    return 0;
  }
  ExecStatusType s = PQresultStatus(r);
  if (s == PGRES_SINGLE_TUPLE) {
    p->row = r;
    return 1;
  }
  int rc = 0;
  if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
    snprintf(p->err, sizeof p->err, "%s", PQresultErrorMessage(r));
    rc = SPY_EIO;
  }
  PQclear(r);
  pgr_drain(p); /* the NULL that ends the query */
  return rc;
}

static int pgr_null(void *st, int c) {
  pgr *p = st;
  return !p->row || c >= PQnfields(p->row) || PQgetisnull(p->row, 0, c);
}
static const char *pgr_text(void *st, int c) {
  pgr *p = st;
  return pgr_null(st, c) ? NULL : PQgetvalue(p->row, 0, c);
}
static int64_t pgr_i64(void *st, int c) {
  const char *t = pgr_text(st, c);
  if (!t)
    return 0;
  if (strchr(t, '.') || strchr(t, 'e')) /* numeric / float text */
    return (int64_t)strtod(t, NULL);
  return strtoll(t, NULL, 10);
}
static double pgr_dbl(void *st, int c) {
  const char *t = pgr_text(st, c);
  return t ? strtod(t, NULL) : 0;
}
static const char *pgr_err(void *st) {
  pgr *p = st;
  return p->err[0] ? p->err : PQerrorMessage(p->c);
}
static void pgr_close(void *st) {
  pgr *p = st;
  if (!p)
    return;
  pgr_drain(p);
  PQfinish(p->c);
  free(p);
}

static const rec_read_ops pg_read = {
    "postgresql", pgr_open, pgr_query, pgr_next,  pgr_null, pgr_i64,
    pgr_dbl,      pgr_text, pgr_err,   pgr_close, NULL};

/* ---- choosing ------------------------------------------------------------ */
int spy__rec_is_pg(const char *db) {
  return strncmp(db, "postgres://", 11) == 0 ||
         strncmp(db, "postgresql://", 13) == 0;
}

int spy__rec_read_open(rec_rd *r, const char *db, int64_t recording,
                       int64_t *started_ns) {
  memset(r, 0, sizeof *r);
  r->ops = spy__rec_is_pg(db) ? &pg_read : &sqlite_read;
  r->st = r->ops->open(db);
  if (!r->st)
    return SPY_EIO;
  /* the recording: the one asked for, else the first (a SQLite file
   * holds one) or, in a shared PostgreSQL database, the newest */
  const char *q = recording > 0
                      ? "SELECT id, started_ns FROM recording WHERE id = ?1"
                  : r->ops == &pg_read
                      ? "SELECT id, started_ns FROM recording ORDER BY id DESC "
                        "LIMIT 1"
                      : "SELECT id, started_ns FROM recording ORDER BY id "
                        "LIMIT 1";
  int rc = r->ops->query(r->st, q, recording > 0 ? 1 : 0, &recording);
  if (rc == 0)
    rc = r->ops->next(r->st);
  if (rc != 1) {
    fprintf(stderr, "spyglass: %s: %s\n", r->ops->name,
            rc < 0 ? "not a recording" : "no such recording");
    r->ops->close(r->st);
    r->st = NULL;
    return rc < 0 ? rc : SPY_ENOENT;
  }
  r->rec_id = r->ops->i64(r->st, 0);
  if (started_ns)
    *started_ns = r->ops->i64(r->st, 1);
  r->ops->next(r->st); /* end of that query */
  return 0;
}

void spy__rec_read_close(rec_rd *r) {
  if (r->st)
    r->ops->close(r->st);
  r->st = NULL;
}

/* ---- rec_q ----------------------------------------------------------------
 */
void spy__rq_prep(rec_q *q, rec_rd *rd, const char *sql) {
  memset(q, 0, sizeof *q);
  q->rd = rd;
  q->sql = sql;
}

void spy__rq_bind(rec_q *q, int i, int64_t v) {
  if (i < 1 || i > 8)
    return;
  q->p[i - 1] = v;
  if (i > q->np)
    q->np = i;
}

int spy__rq_step(rec_q *q) {
  const rec_read_ops *o = q->rd->ops;
  if (q->failed)
    return 0;
  if (!q->started) {
    q->started = 1;
    if (o->query(q->rd->st, q->sql, q->np, q->p) < 0) {
      q->failed = 1;
      return 0;
    }
  }
  int rc = o->next(q->rd->st);
  if (rc < 0)
    q->failed = 1;
  return rc == 1;
}

int spy__rq_null(rec_q *q, int c) { return q->rd->ops->is_null(q->rd->st, c); }
int64_t spy__rq_i64(rec_q *q, int c) { return q->rd->ops->i64(q->rd->st, c); }
double spy__rq_dbl(rec_q *q, int c) { return q->rd->ops->dbl(q->rd->st, c); }
const char *spy__rq_text(rec_q *q, int c) {
  return q->rd->ops->text(q->rd->st, c);
}
