/* reader_pg.c — the reader's PostgreSQL backend. Everything is read in
 * one read-only REPEATABLE READ transaction (every rewind and payload
 * lookup sees the same snapshot) and the session's action_batches come
 * through a cursor, FETCH_ROWS rows at a time, so a session of any size
 * needs one batch in memory, and payloads can be fetched between two
 * batches on the same connection. From schema 4 each built-in kind's
 * table (and child table) is read through a cursor of its own too, in
 * seq and element order, TABLE_ROWS rows per FETCH; from schema 6 (the
 * PostgreSQL store's own number, SPY__PG_SCHEMA) a hook kind's name is a
 * view over hook_call_rows and <kind>_kept, read the same way, and a
 * hook call query is one statement over hook_call_rows. The summary's
 * payload sizes are one query over the ids it names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "reader.h"

/* action_batches rows per FETCH (each up to a writer batch of actions). */
#define FETCH_ROWS 2
#define STR_(x) #x
#define STR(x) STR_(x)

/* rows of one derived table per FETCH (schema 4+) */
#define TABLE_ROWS 1000

typedef struct pgt {
  PGresult *rows; /* its current FETCH */
  int row, declared, done, missing;
} pgt;

typedef struct pgr {
  PGconn *c;
  PGresult *rows; /* the current FETCH */
  int row, declared, done;
  int schema;
  pgt *t; /* schema 4+: per derived table */
  int nt;
  long long key; /* the session's key in the tables */
} pgr;

static uint64_t be64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v = v << 8 | (unsigned char)p[i];
  return v;
}

/* Runs a command; 0 or SPY_EIO with the server's message. */
static int cmd(spy_trace_reader *r, const char *sql) {
  pgr *p = r->st;
  PGresult *res = PQexec(p->c, sql);
  int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  PQclear(res);
  return ok ? 0
            : spy__reader_err(r, SPY_EIO, "postgres: %s", PQerrorMessage(p->c));
}

static void pg_close(spy_trace_reader *r) {
  pgr *p = r->st;
  if (!p)
    return;
  PQclear(p->rows);
  for (int t = 0; t < p->nt; t++)
    PQclear(p->t[t].rows);
  free(p->t);
  if (p->c)
    PQfinish(p->c);
  free(p);
  r->st = NULL;
}

/* Schema 4+: the session's key and which derived tables the store has (a
 * kind added to the catalog later reads as empty). */
static int open_tables(spy_trace_reader *r) {
  pgr *p = r->st;
  int rc = spy__reader_tables(r);
  if (rc < 0)
    return rc;
  if (!(p->t = calloc((size_t)r->schema.n, sizeof *p->t)))
    return spy__reader_err(r, SPY_ENOMEM, "out of memory");
  p->nt = r->schema.n;
  const char *params[1] = {r->session_id};
  PGresult *res = PQexecParams(p->c,
                               "SELECT session FROM sessions WHERE "
                               "session_id=$1",
                               1, NULL, params, NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    PQclear(res);
    return spy__reader_err(r, SPY_EIO, "postgres: %s", PQerrorMessage(p->c));
  }
  p->key = PQntuples(res) == 1 ? atoll(PQgetvalue(res, 0, 0)) : -1;
  PQclear(res);
  /* schema 6: a hook kind's name is a view (over hook_call_rows and its
   * _kept table), read as its table was */
  res = PQexec(p->c, "SELECT tablename FROM pg_tables WHERE schemaname = "
                     "current_schema() UNION ALL SELECT viewname FROM "
                     "pg_views WHERE schemaname = current_schema()");
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    PQclear(res);
    return spy__reader_err(r, SPY_EIO, "postgres: %s", PQerrorMessage(p->c));
  }
  for (int t = 0; t < p->nt; t++) {
    p->t[t].missing = 1;
    for (int i = 0; i < PQntuples(res) && p->t[t].missing; i++)
      p->t[t].missing = strcmp(PQgetvalue(res, i, 0), r->schema.t[t].name);
  }
  PQclear(res);
  return 0;
}

static void pg_trewind(spy_trace_reader *r) {
  pgr *p = r->st;
  for (int t = 0; t < p->nt; t++) {
    pgt *c = &p->t[t];
    PQclear(c->rows);
    c->rows = NULL;
    c->row = 0;
    c->done = 0;
    if (c->declared) {
      char sql[64];
      snprintf(sql, sizeof sql, "CLOSE spy_t%d", t);
      PQclear(PQexec(p->c, sql));
      c->declared = 0;
    }
  }
}

static int pg_tnext(spy_trace_reader *r, int t, spy__cell *cells) {
  pgr *p = r->st;
  pgt *c = &p->t[t];
  const spy__gtable *g = &r->schema.t[t];
  if (c->done || c->missing)
    return 0;
  if (!c->rows || c->row >= PQntuples(c->rows)) {
    char sql[64];
    if (!c->declared) {
      spy__buf q = {0};
      snprintf(sql, sizeof sql, "DECLARE spy_t%d NO SCROLL CURSOR FOR ", t);
      spy__buf_puts(&q, sql);
      spy__buf_puts(&q, "SELECT ");
      spy__buf_puts(&q, g->cols);
      spy__buf_puts(&q, " FROM ");
      spy__buf_puts(&q, g->name);
      spy__buf_puts(&q, " WHERE session=");
      spy__buf_i64(&q, p->key);
      spy__buf_puts(&q, " ORDER BY seq");
      for (int d = 0; d < g->depth; d++) {
        snprintf(sql, sizeof sql, ",i%d", d);
        spy__buf_puts(&q, sql);
      }
      spy__buf_putc(&q, 0);
      int rc =
          q.err ? spy__reader_err(r, SPY_ENOMEM, "out of memory") : cmd(r, q.p);
      spy__buf_free(&q);
      if (rc < 0)
        return rc;
      c->declared = 1;
    }
    PQclear(c->rows);
    c->row = 0;
    snprintf(sql, sizeof sql, "FETCH " STR(TABLE_ROWS) " FROM spy_t%d", t);
    c->rows = PQexec(p->c, sql);
    if (PQresultStatus(c->rows) != PGRES_TUPLES_OK)
      return spy__reader_err(r, SPY_EIO, "postgres: %s", PQerrorMessage(p->c));
    if (PQntuples(c->rows) == 0) {
      c->done = 1;
      return 0;
    }
  }
  int row = c->row++;
  if (PQnfields(c->rows) != g->ncols)
    return spy__reader_err(r, SPY_EBADVALUE, "postgres: table %s: columns",
                           g->name);
  for (int i = 0; i < g->ncols; i++) {
    if (PQgetisnull(c->rows, row, i))
      cells[i] = (spy__cell){0};
    else if (g->types[i] == SPY__COL_INT)
      cells[i] =
          (spy__cell){SPY__COL_INT,
                      strtoll(PQgetvalue(c->rows, row, i), NULL, 10), NULL, 0};
    else
      cells[i] = (spy__cell){SPY__COL_TEXT, 0, PQgetvalue(c->rows, row, i),
                             (size_t)PQgetlength(c->rows, row, i)};
  }
  return 1;
}

static int pg_open(spy_trace_reader *r, const char *conninfo) {
  pgr *p = calloc(1, sizeof *p);
  if (!p)
    return SPY_ENOMEM;
  r->st = p;
  p->c = PQconnectdb(conninfo);
  if (PQstatus(p->c) != CONNECTION_OK)
    return spy__reader_err(r, SPY_ECONNREFUSED, "postgres: %s",
                           PQerrorMessage(p->c));
  PGresult *res = PQexec(p->c, "SELECT 1 FROM spyglass_meta LIMIT 1");
  int has = PQresultStatus(res) == PGRES_TUPLES_OK;
  PQclear(res);
  if (!has)
    return spy__reader_err(r, SPY_ENOENT, "postgres: no spyglass trace here");
  p->schema = spy__pg_check_version(p->c);
  if (p->schema == SPY_EBADSCHEMA)
    return spy__reader_err(r, SPY_EBADSCHEMA,
                           "postgres: written by a newer spyglass (schema "
                           "version too new)");
  int rc = cmd(r, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  if (rc < 0)
    return rc;
  if (!r->session_id) {
    res = PQexec(p->c, "SELECT session_id FROM sessions ORDER BY created_at "
                       "DESC LIMIT 1");
    int row = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
    if (row)
      r->session_id = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (row && !r->session_id)
      return spy__reader_err(r, SPY_ENOMEM, "postgres: out of memory");
    if (!r->session_id)
      return spy__reader_err(r, SPY_ENOENT, "postgres: no session");
  }
  return p->schema >= 4 ? open_tables(r) : 0;
}

static int pg_rewind(spy_trace_reader *r) {
  pgr *p = r->st;
  PQclear(p->rows);
  p->rows = NULL;
  p->row = 0;
  p->done = 0;
  if (p->declared) {
    p->declared = 0;
    return cmd(r, "CLOSE spy_batches");
  }
  return 0;
}

/* Declares the cursor over the session's batches (binary rows). */
static int declare(spy_trace_reader *r) {
  pgr *p = r->st;
  char *lit = PQescapeLiteral(p->c, r->session_id, strlen(r->session_id));
  if (!lit)
    return spy__reader_err(r, SPY_ENOMEM, "postgres: %s", PQerrorMessage(p->c));
  spy__buf q = {0};
  spy__buf_puts(&q, "DECLARE spy_batches BINARY NO SCROLL CURSOR FOR "
                    "SELECT codec, size, data FROM action_batches WHERE "
                    "session_id=");
  spy__buf_puts(&q, lit);
  spy__buf_puts(&q, " ORDER BY first_seq");
  spy__buf_putc(&q, 0);
  PQfreemem(lit);
  int rc = q.err ? SPY_ENOMEM : cmd(r, q.p);
  spy__buf_free(&q);
  if (rc == 0)
    p->declared = 1;
  return rc;
}

static int pg_next(spy_trace_reader *r, spy_trace_action *a) {
  pgr *p = r->st;
  for (;;) {
    int rc = spy__reader_batch_next(r, a);
    if (rc != 0)
      return rc;
    if (p->done)
      return 0;
    if (!p->rows || p->row >= PQntuples(p->rows)) { /* the next rows */
      if (!p->declared && (rc = declare(r)) < 0)
        return rc;
      PQclear(p->rows);
      p->row = 0;
      p->rows = PQexecParams(p->c, "FETCH " STR(FETCH_ROWS) " FROM spy_batches",
                             0, NULL, NULL, NULL, NULL, 1);
      if (PQresultStatus(p->rows) != PGRES_TUPLES_OK)
        return spy__reader_err(r, SPY_EIO, "postgres: %s",
                               PQerrorMessage(p->c));
      if (PQntuples(p->rows) == 0) {
        p->done = 1;
        return 0;
      }
    }
    int row = p->row++;
    if (PQgetlength(p->rows, row, 0) != 8 || PQgetlength(p->rows, row, 1) != 8)
      return spy__reader_err(r, SPY_EBADVALUE, "a corrupt action batch row");
    rc = spy__reader_batch(r, (int)be64(PQgetvalue(p->rows, row, 0)),
                           PQgetvalue(p->rows, row, 2),
                           (size_t)PQgetlength(p->rows, row, 2),
                           (size_t)be64(PQgetvalue(p->rows, row, 1)));
    if (rc < 0)
      return rc;
  }
}

static int pg_fetch(spy_trace_reader *r, const char *id, spy__blob *b) {
  pgr *p = r->st;
  memcpy(b->id, id, 32);
  b->id[32] = 0;
  b->base[0] = 0;
  b->z.len = 0;
  const char *params[1] = {b->id};
  PGresult *res =
      PQexecParams(p->c,
                   p->schema >= 3 ? "SELECT size, codec, content, "
                                    "base_source_id FROM sources WHERE "
                                    "source_id=$1"
                                  : "SELECT size, codec, content, NULL::text "
                                    "FROM sources WHERE source_id=$1",
                   1, NULL, params, NULL, NULL, 1);
  int rc = SPY_ENOENT;
  if (PQresultStatus(res) != PGRES_TUPLES_OK)
    rc = spy__reader_err(r, SPY_EIO, "postgres: %s", PQerrorMessage(p->c));
  else if (PQntuples(res) == 1 && PQgetlength(res, 0, 0) == 8 &&
           PQgetlength(res, 0, 1) == 8) {
    b->size = (size_t)be64(PQgetvalue(res, 0, 0));
    b->codec = (int)be64(PQgetvalue(res, 0, 1));
    spy__buf_put(&b->z, PQgetvalue(res, 0, 2), (size_t)PQgetlength(res, 0, 2));
    if (!PQgetisnull(res, 0, 3) && PQgetlength(res, 0, 3) == 32) {
      memcpy(b->base, PQgetvalue(res, 0, 3), 32);
      b->base[32] = 0;
    }
    rc = b->z.err;
  }
  PQclear(res);
  return rc;
}

static int cmp_hash(const void *key, const void *el) {
  const uint64_t *h = key;
  const spy__refcount *c = el;
  if (h[0] != c->hash[0])
    return h[0] < c->hash[0] ? -1 : 1;
  return h[1] < c->hash[1] ? -1 : h[1] > c->hash[1];
}

/* The ids as one text[] parameter: one query. */
static int pg_sizes(spy_trace_reader *r, spy__refcount *rs, size_t n) {
  pgr *p = r->st;
  spy__buf ids = {0};
  spy__buf_putc(&ids, '{');
  for (size_t i = 0; i < n; i++) {
    char id[33];
    spy_trace_hash_hex(rs[i].hash, id);
    if (i)
      spy__buf_putc(&ids, ',');
    spy__buf_put(&ids, id, 32);
  }
  spy__buf_putc(&ids, '}');
  spy__buf_putc(&ids, 0);
  if (ids.err) {
    spy__buf_free(&ids);
    return spy__reader_err(r, SPY_ENOMEM, "out of memory");
  }
  const char *params[1] = {ids.p};
  PGresult *res = PQexecParams(p->c,
                               "SELECT source_id, size, length(content) FROM "
                               "sources WHERE source_id = ANY($1::text[])",
                               1, NULL, params, NULL, NULL, 0);
  spy__buf_free(&ids);
  int rc = 0;
  if (PQresultStatus(res) != PGRES_TUPLES_OK)
    rc = spy__reader_err(r, SPY_EIO, "postgres: %s", PQerrorMessage(p->c));
  for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
    uint64_t h[2];
    if (spy__hash_parse(PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0),
                        h) < 0)
      continue;
    spy__refcount *c = bsearch(h, rs, n, sizeof *rs, cmp_hash);
    if (!c)
      continue;
    c->found = 1;
    c->size = strtoull(PQgetvalue(res, i, 1), NULL, 10);
    c->stored = strtoull(PQgetvalue(res, i, 2), NULL, 10);
  }
  PQclear(res);
  return rc;
}

static int64_t pg_lost(spy_trace_reader *r) {
  pgr *p = r->st;
  const char *params[1] = {r->session_id};
  PGresult *res = PQexecParams(p->c,
                               "SELECT actions_lost FROM sessions WHERE "
                               "session_id=$1",
                               1, NULL, params, NULL, NULL, 0);
  int64_t lost = -1;
  if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
      !PQgetisnull(res, 0, 0))
    lost = atoll(PQgetvalue(res, 0, 0));
  PQclear(res);
  return lost;
}

static uint64_t pg_replaced(spy_trace_reader *r) {
  (void)r;
  return 0; /* the store keeps the bytes as they were */
}

/* Hook call queries, store schema 6: a call is a hook_call_rows row, so
 * the query is one statement — the filter its WHERE, the order its ORDER
 * BY (ties as reader.c's replay breaks them), the limit its LIMIT — read
 * through a cursor CALL_ROWS rows at a time. Calls that never ended have
 * no row there (the hook_calls view adds them) and are not reported,
 * as by the replay; an End without a Start has no row either. Older
 * stores say SPY_ENOTSUP and are replayed. */
#define CALL_ROWS 1000
static int pg_calls(spy_trace_reader *r, const spy_trace_call_query *q,
                    int (*cb)(void *, const spy_trace_hook_call *), void *arg) {
  pgr *p = r->st;
  if (p->schema < SPY__PG_SCHEMA)
    return SPY_ENOTSUP;
  const char *order =
      q->order == SPY_TRACE_CALLS_SLOWEST   ? SPY__CALLS_SLOW_ORDER
      : q->order == SPY_TRACE_CALLS_STARTED ? SPY__CALLS_START_ORDER
                                            : "end_seq";
  const char *vals[4];
  char build[16], where[512] = "", limit[40] = "";
  int n = 0;
  size_t w = 0;
  vals[n++] = r->session_id;
  if (q->build) {
    snprintf(build, sizeof build, "%u", q->build);
    vals[n++] = build;
    w += (size_t)snprintf(where + w, sizeof where - w, " AND build_id=$%d", n);
  }
  if (q->plugin) {
    vals[n++] = q->plugin;
    w += (size_t)snprintf(where + w, sizeof where - w,
                          q->plugin[0] ? " AND plugin_name=$%d"
                                       : " AND coalesce(plugin_name, '')=$%d",
                          n);
  }
  if (q->module) {
    vals[n++] = q->module;
    snprintf(where + w, sizeof where - w, " AND coalesce(module_id, '')=$%d",
             n);
  }
  if (q->limit)
    snprintf(limit, sizeof limit, " LIMIT %llu", (unsigned long long)q->limit);
  char sql[1400];
  snprintf(sql, sizeof sql,
           "DECLARE spy_calls NO SCROLL CURSOR FOR SELECT build_id, "
           "hook_type, plugin_name, module_id, call_id, started_at, ended_at, "
           "input_source_id, output_source_id FROM " SPY__PG_CALL_ROWS
           " WHERE session_id=$1 AND ended_at IS NOT NULL%s ORDER BY %s%s",
           where, order, limit);
  PGresult *res = PQexecParams(p->c, sql, n, NULL, vals, NULL, NULL, 0);
  int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  PQclear(res);
  if (!ok)
    return spy__reader_err(r, SPY_EIO, "postgres: %s", PQerrorMessage(p->c));
  int rc = 0, stop = 0;
  while (rc == 0 && !stop) {
    res = PQexec(p->c, "FETCH " STR(CALL_ROWS) " FROM spy_calls");
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
      rc = spy__reader_err(r, SPY_EIO, "postgres: %s", PQerrorMessage(p->c));
      PQclear(res);
      break;
    }
    int rows = PQntuples(res);
    for (int i = 0; i < rows && rc == 0 && !stop; i++) {
      spy_trace_hook_call c = {
          (uint32_t)strtoul(PQgetvalue(res, i, 0), NULL, 10),
          NULL,
          PQgetvalue(res, i, 2), /* "" for NULL */
          PQgetvalue(res, i, 3),
          PQgetvalue(res, i, 4),
          strtoull(PQgetvalue(res, i, 5), NULL, 10),
          strtoull(PQgetvalue(res, i, 6), NULL, 10),
          0,
          0,
          {0, 0},
          {0, 0}};
      const char *id[2];
      size_t idn[2];
      for (int k = 0; k < 2; k++) {
        id[k] = PQgetisnull(res, i, 7 + k) ? NULL : PQgetvalue(res, i, 7 + k);
        idn[k] = (size_t)PQgetlength(res, i, 7 + k);
      }
      rc = spy__reader_call_row(r, SPY__PG_CALL_ROWS, PQgetvalue(res, i, 1), id,
                                idn, &c);
      if (rc == 0 && cb(arg, &c))
        stop = 1;
    }
    PQclear(res);
    if (rows < CALL_ROWS)
      break;
  }
  int crc = cmd(r, "CLOSE spy_calls");
  return rc < 0 ? rc : crc;
}

const spy__reader_ops spy__reader_pg = {
    "postgres", pg_open,     pg_next,  pg_rewind, pg_fetch,   NULL,    pg_sizes,
    pg_lost,    pg_replaced, pg_close, pg_tnext,  pg_trewind, pg_calls};
