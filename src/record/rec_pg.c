/* rec_pg.c — the recorder's PostgreSQL backend: many recorders share one
 * database, each with its own row in `recording` (a BIGSERIAL id every
 * other table carries). Only parameterised statements (prepared once per
 * connection); rows are sent in libpq's pipeline mode, so a batch costs
 * one round trip per REC_PG_SYNC rows rather than one per row. The schema
 * and its indexes are created under an advisory lock so recorders
 * starting together do not race on CREATE TABLE / INDEX (in a shared
 * database the indexes are kept up as rows arrive). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "record/rec.h"
#include "record/rec_buffers.h"

#define REC_PG_SYNC 1024 /* rows between pipeline syncs */
#define LOCK_KEY "7321001"

typedef struct pg {
  PGconn *c;
  int64_t rec_id;
  int pending, in_pipe, failed, reported;
} pg;

static int report(pg *p, const char *what, const PGresult *r) {
  if (!p->reported)
    fprintf(stderr, "spyglass record: postgres: %s: %s\n", what,
            r ? PQresultErrorMessage(r) : PQerrorMessage(p->c));
  p->reported = 1;
  return SPY_EIO;
}

static int cmd(pg *p, const char *q) {
  PGresult *r = PQexec(p->c, q);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
           PQresultStatus(r) == PGRES_TUPLES_OK;
  int rc = ok ? 0 : report(p, q, r);
  PQclear(r);
  return rc;
}

static int pg_close(void *st, int64_t end_ns);

static void *pg_open(const char *conninfo, const char *args, int64_t start_ns,
                     int64_t *rec_id) {
  pg *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->c = PQconnectdb(conninfo);
  if (PQstatus(p->c) != CONNECTION_OK) {
    fprintf(stderr, "spyglass record: cannot connect to postgres: %s",
            PQerrorMessage(p->c));
    goto fail;
  }
  if (cmd(p, "SET client_min_messages = warning") ||
      cmd(p, "SELECT pg_advisory_lock(" LOCK_KEY ")") ||
      cmd(p, "CREATE TABLE IF NOT EXISTS recording(id BIGSERIAL PRIMARY KEY,"
             " started_ns BIGINT, ended_ns BIGINT, wall_start_ms BIGINT,"
             " host TEXT, args TEXT, version TEXT)") ||
      cmd(p, spy__rec_ddl(1)) || cmd(p, SPY_REC_PG_UPGRADE) ||
      cmd(p, spy__rec_slice_ddl(1)) || cmd(p, spy__rec_index_ddl()) ||
      cmd(p, "SELECT pg_advisory_unlock(" LOCK_KEY ")"))
    goto fail;
  char host[256] = "", start[32], wall[32];
  gethostname(host, sizeof host - 1);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(start, sizeof start, "%lld", (long long)start_ns);
  snprintf(wall, sizeof wall, "%lld",
           (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
  const char *v[5] = {start, wall, host, args ? args : "", SPY_RECORD_VERSION};
  PGresult *r = PQexecParams(
      p->c,
      "INSERT INTO recording(started_ns, wall_start_ms, host, args, version)"
      " VALUES($1,$2,$3,$4,$5) RETURNING id",
      5, NULL, v, NULL, NULL, 0);
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
    report(p, "recording", r);
    PQclear(r);
    goto fail;
  }
  p->rec_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  *rec_id = p->rec_id;
  for (int i = 0; i < S_COUNT; i++) {
    char name[16];
    snprintf(name, sizeof name, "rec%d", i);
    r = PQprepare(p->c, name, spy__rec_sql(i), 0, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      report(p, spy__rec_sql(i), r);
      PQclear(r);
      goto fail;
    }
    PQclear(r);
  }
  return p;
fail:
  pg_close(p, 0);
  return NULL;
}

/* Reads results up to the pipeline's sync point. */
static int drain(pg *p) {
  for (;;) {
    PGresult *r = PQgetResult(p->c);
    if (!r) {
      if (PQstatus(p->c) != CONNECTION_OK)
        return report(p, "connection", NULL);
      continue; /* end of one query's results */
    }
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_PIPELINE_SYNC) {
      PQclear(r);
      break;
    }
    if (s == PGRES_FATAL_ERROR) {
      report(p, "batch", r);
      p->failed = 1;
    }
    PQclear(r);
  }
  p->pending = 0;
  return p->failed ? SPY_EIO : 0;
}

static int send(pg *p, const char *q) {
  if (!PQsendQueryParams(p->c, q, 0, NULL, NULL, NULL, NULL, 0))
    return report(p, q, NULL);
  return 0;
}

static int pg_begin(void *st) {
  pg *p = st;
  p->failed = 0;
  if (!PQenterPipelineMode(p->c))
    return report(p, "pipeline", NULL);
  p->in_pipe = 1;
  return send(p, "BEGIN");
}

static int pg_row(void *st, const rec_row *r) {
  pg *p = st;
  char num[REC_CELLS + 1][32], name[16];
  const char *v[REC_CELLS + 1];
  snprintf(num[0], sizeof num[0], "%lld", (long long)p->rec_id);
  v[0] = num[0];
  for (int i = 0; i < r->n; i++) {
    const rec_cell *c = &r->c[i];
    if (c->t == C_INT) {
      snprintf(num[i + 1], sizeof num[i + 1], "%lld", (long long)c->v.i);
      v[i + 1] = num[i + 1];
    } else if (c->t == C_REAL) {
      snprintf(num[i + 1], sizeof num[i + 1], "%.17g", c->v.r);
      v[i + 1] = num[i + 1];
    } else if (c->t == C_TEXT || c->t == C_CONST) {
      v[i + 1] = c->v.s;
    } else {
      v[i + 1] = NULL;
    }
  }
  snprintf(name, sizeof name, "rec%d", r->stmt);
  if (!PQsendQueryPrepared(p->c, name, r->n + 1, v, NULL, NULL, 0))
    return report(p, "send", NULL);
  if (++p->pending >= REC_PG_SYNC) {
    if (!PQpipelineSync(p->c))
      return report(p, "sync", NULL);
    return drain(p);
  }
  return 0;
}

static int pg_commit(void *st) {
  pg *p = st;
  int rc = send(p, p->failed ? "ROLLBACK" : "COMMIT");
  if (!rc && !PQpipelineSync(p->c))
    rc = report(p, "sync", NULL);
  if (!rc)
    rc = drain(p);
  PQexitPipelineMode(p->c);
  p->in_pipe = 0;
  return rc;
}

static int pg_close(void *st, int64_t end_ns) {
  pg *p = st;
  if (!p)
    return 0;
  int rc = 0;
  if (end_ns && p->c && PQstatus(p->c) == CONNECTION_OK) {
    char e[32], id[32];
    snprintf(e, sizeof e, "%lld", (long long)end_ns);
    snprintf(id, sizeof id, "%lld", (long long)p->rec_id);
    const char *v[2] = {e, id};
    PGresult *r =
        PQexecParams(p->c, "UPDATE recording SET ended_ns = $1 WHERE id = $2",
                     2, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
      rc = report(p, "recording end", r);
    PQclear(r);
  }
  PQfinish(p->c);
  free(p);
  return rc;
}

const rec_backend_ops spy__rec_pg = {"postgres", pg_open,   pg_begin,
                                     pg_row,     pg_commit, pg_close};
