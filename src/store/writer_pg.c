/* writer_pg.c — the PostgreSQL writer (libpq): store schema 6 (its own
 * number, SPY__PG_SCHEMA in spyglass_meta), the tables derived from the
 * catalog, a hook call as one row as in SQLite's store (its Start and End
 * without rows of their own when the row gives them back; the odd ones in
 * <kind>_kept; each hook kind's name a view over both; see ocall): the
 * rows are in hook_call_rows, written with the call's End and never
 * updated, and hook_calls is a view over them and the kept Starts of calls
 * that never ended (closed or killed: no row is written for them at
 * close), an application kind's tables created with the first batch that
 * holds its rows. A schema 5 store (a table per hook Start and End kind)
 * is written in its own layout, not migrated; a schema 4 one becomes
 * schema 5 in place. One transaction per batch, its COMMIT not waiting for
 * the WAL flush (the batch is kept until the server's flush passes it, and
 * sent again if a crash lost it: see keep_unflushed; the final counts'
 * COMMIT at close waits, so the whole trace is durable then), rows sent with
 * COPY, at most COPY_ROWS a COPY, a batch's full COPYs of sources,
 * hook_call_rows and the built-in tables sent while the writer decodes the
 * rest of it (see stream; the server inserts them meanwhile), the rest at
 * its commit in one query (sources through a staging table so a payload
 * already stored is skipped), one action_batches row per batch (its seq
 * range and count — how a batch whose COMMIT answer was lost is found — and
 * the binary records of the actions the tables cannot give back exactly:
 * application kinds, text that is not UTF-8), indexes created at close
 * if missing, once the store holds a second session.
 *
 * A server that goes away: the failed batch and the ones after it are kept
 * in memory, up to retry_bytes; over that the oldest batch is dropped and
 * its actions counted as lost; the payloads it carried are remembered and
 * sent again with the next action that names them (the session stores a
 * payload only the first time it sees it), so no stored action names a
 * payload that is not stored. Reconnection is tried with backoff (100 ms
 * doubling to 1 s) at each batch, and on close for up to retry_ms; what is
 * still unsent then is lost. A batch whose COMMIT answer was lost is kept and
 * looked up on reconnection (stored, or sent again), so the count of lost
 * actions is exact whenever the server comes back. The count is returned by
 * close and written to sessions.actions_lost once the server is reachable.
 *
 * Source payloads are packed as deltas of the payload before them
 * (src_codec.c) on the pipe's thread (src_pipe.c) and drained into the
 * batch before it is queued; a base must reach the store with or before
 * its delta. A batch packed while nothing else is pending refers only to rows
 * already stored or in itself; whenever a batch stays pending (the server is
 * away) or one is dropped, the delta chain starts again, so every batch packed
 * after that is self-contained and dropping any batch strands no delta. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "core/json_escape.h"
#include "store.h"

/* Rows per COPY: see "---- COPY ----" below. */
#define COPY_ROWS 128
/* Actions between two looks at a batch's stream (4 times as many while
 * a query of it runs): see "---- stream". */
#define STREAM_EVERY 8

/* Where a buffer of binary rows is cut into COPYs: at[k] is the offset of
 * row (k + 1) * COPY_ROWS, noted as the rows are appended (walking the
 * rows' fields at send time to find the cuts cost the writer thread ~5 %
 * of its instructions). */
typedef struct cuts {
  size_t *at;
  size_t n, cap;
  uint64_t rows;
} cuts;

typedef struct batch {
  spy__buf copy[SPY__T_COUNT]; /* own tables */
  cuts cut[SPY__T_COUNT];      /* copy[t]'s */
  spy__buf *gcopy;             /* per derived table */
  cuts *gcut;                  /* gcopy[t]'s */
  int ngcopy;
  uint64_t actions;
  uint64_t *src;  /* content hashes of the payloads it carries, 2 each */
  size_t *srcoff; /* where each one's row starts in copy[SPY__T_SOURCES] */
  size_t nsrc, capsrc;
  int src_sorted;     /* copy[SPY__T_SOURCES] is in source_id order */
  uint64_t first_seq; /* its action_batches key, 0 if it has no actions */
  uint64_t serial;    /* which batch: an open call's Start names it */
  spy__buf hc;        /* schema 6: hook_call_rows rows */
  cuts hccut;
  /* COPYs of it sent while it was built (see stream): gcopy[t]'s first
   * gsent[t], hc's first hcsent; 0 once it is sent (a resend sends all) */
  size_t *gsent;
  size_t hcsent, srcsent; /* … and sources' first srcsent */
  int uncertain;          /* COMMIT sent, answer lost: stored or not unknown */
  int unflushed; /* committed; durable once the WAL is flushed to lsn */
  uint64_t lsn;  /* the server's WAL insert position after its COMMIT
                    (0: unknown; then known durable at close) */
  int lost_once; /* SPY_TRACE_PG_LOSE_ANSWERS: its first answer was */
  size_t bytes;
  struct batch *next;
} batch;

/* Schema 6: a hook call whose Start is stored and whose End has not come.
 * Its hook_call_rows row goes in with its End. A Start still open when
 * its batch is queued is written to <start>_kept then (from the call's
 * fields: the row gives it back as its table would), and the row says so
 * (kept bit 1): the transactions are COPYs, no row is ever updated. A call
 * that never ends gets no row (at close, the session's last batch keeps
 * its Start like any other): the hook_calls view gives it back unended
 * from its kept Start, as after a kill, and every batch that writes rows
 * holds actions, so has its action_batches key (resent after a lost
 * COMMIT answer, it is refused as stored). A session reopened to recover
 * its spilled actions finds its open calls again (reload_calls). A call
 * whose Start's batch was dropped is `gone`: its End is stored alone, as
 * the schema 5 view's join had it. */
typedef struct ocall {
  spy__ocall call;
  int hk;          /* its hook (w->hcols, w->tstart) */
  uint64_t serial; /* the batch its Start is in */
  int gone;        /* its Start's batch was dropped */
} ocall;

/* The current batch's full COPYs (COPY_ROWS rows each) of sources, the
 * derived tables and hook_call_rows, sent while the writer decodes the
 * rest of it, in a transaction its commit ends (send_batch): the server
 * inserts them meanwhile instead of after. A batch's rows are kept until it is
 * stored as before, so a stream that fails (an error, the link) is rolled
 * back and the whole batch sent again the usual way. Only while nothing
 * is pending (the server keeps up). */
typedef struct stream {
  struct batch *b; /* the batch whose transaction is open, or NULL */
  int busy;        /* a query of COPYs is running */
  int failed;
  uint64_t gen; /* the connection it runs on (pgw.conn_gen) */
  int n, at;    /* the running query's COPYs, those answered */
  int cap;
  int *tab;  /* each one's table: -2 sources, -1 hook_call_rows, else a
                derived one */
  size_t *k; /* … and which COPY of it */
  uint32_t tick;
} stream;

typedef struct pgw {
  PGconn *conn;
  uint64_t conn_gen; /* counts the connections made */
  stream st;
  char *conninfo, *session_id, *cwd;
  spy__schema schema;
  spy__buf rec;         /* one action's binary record */
  spy__buf sorted;      /* scratch for sort_sources */
  int src_stage;        /* sources go through the staging table */
  const char *pre;      /* statements the next COPY sends first */
  spy__abatch ab;       /* records the tables cannot hold exactly */
  spy__batch_mark mark; /* the whole batch: its action_batches row */
  int all_records;      /* SPY_TRACE_SQL_RECORDS=all: as schema 3 */
  spy__src_pipe *pipe;  /* packs sources on its own thread */
  uint8_t *stats_set;   /* per table: stats_sql ran and committed */
  int nstats_set;
  int dropped;              /* a batch was dropped since the last commit */
  spy__hset gone;           /* payloads of dropped batches */
  batch *cur, *head, *tail; /* pending list: head oldest */
  size_t pending_bytes, retry_bytes;
  batch *uf_head, *uf_tail; /* committed, not known flushed: oldest first */
  uint64_t uf_actions;      /* … their actions */
  uint64_t flushed;         /* the server's WAL flush position, last seen */
  uint32_t retry_ms;
  uint64_t stored;
  _Atomic uint64_t lost;
  uint64_t next_try_ms, backoff_ms;
  int was_down;
  int opened;   /* open succeeded: pg_prepare may set the store up */
  int ready;    /* pg_prepare did: close sends and records the counts */
  int lose;     /* SPY_TRACE_PG_LOSE_ANSWERS=1 (tests): see send_batch */
  int merge;    /* store schema 6: hook calls as hook_call_rows rows */
  char **tname; /* per derived table: the name rows go to (NULL: its own) */
  int ntname;
  spy__hookcols hcols[SPY__NHOOKS];
  int tstart[SPY__NHOOKS]; /* each hook's Start table */
  int hc_ncols;
  char hc_types[SPY__HC_MAX + 1];
  spy__buf hc_names;
  ocall *oc; /* open calls, oldest first */
  size_t noc, capoc;
  uint64_t serial; /* the last batch's */
  void (*report)(void *, int, const char *);
  void *report_ctx;
} pgw;

static uint64_t mono_ms(void) { return spy__mono_ns() / 1000000u; }

static void say(pgw *w, int err, const char *what) {
  char msg[600];
  const char *e = w->conn ? PQerrorMessage(w->conn) : "";
  snprintf(msg, sizeof msg, "postgres: %s%s%.400s", what, *e ? ": " : "", e);
  size_t n = strlen(msg);
  while (n && msg[n - 1] == '\n')
    msg[--n] = 0;
  if (w->report)
    w->report(w->report_ctx, err, msg);
}

/* A failed statement's code: SPY_EEXIST for a unique violation (the batch
 * is already stored), SPY_EAGAIN for a deadlock or serialisation failure
 * with another session (worth sending again), SPY_EIO otherwise. */
static int sqlstate_code(const char *state) {
  if (state && strcmp(state, "23505") == 0)
    return SPY_EEXIST;
  if (state && (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0))
    return SPY_EAGAIN;
  return SPY_EIO;
}

static int q(pgw *w, const char *sql, PGresult **keep) {
  PGresult *r = PQexec(w->conn, sql);
  ExecStatusType s = PQresultStatus(r);
  int ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  int rc = 0;
  if (!ok) {
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    rc = sqlstate_code(state);
  }
  if (keep && ok)
    *keep = r;
  else
    PQclear(r);
  return rc;
}

/* The server takes UTF-8 text only: the sequence at s[i] (a byte >= 0x80)
 * as it is when valid, else U+FFFD. Returns the bytes consumed. The
 * binary record in action_batches keeps the exact bytes. */
static size_t put_utf8(spy__buf *b, const char *s, size_t n, size_t i) {
  size_t l = spy__utf8_seq((const unsigned char *)s + i, n - i);
  if (!l) {
    spy__buf_put(b, "\xEF\xBF\xBD", 3);
    return 1;
  }
  spy__buf_put(b, s + i, l);
  return l;
}

/* SQL string literal (standard_conforming_strings). */
static void lit(spy__buf *b, const char *s, size_t n) {
  spy__buf_putc(b, '\'');
  for (size_t i = 0; i < n; i++) {
    if ((unsigned char)s[i] >= 0x80) {
      i += put_utf8(b, s, n, i) - 1;
      continue;
    }
    if (s[i] == '\'')
      spy__buf_putc(b, '\'');
    if (s[i])
      spy__buf_putc(b, s[i]);
  }
  spy__buf_putc(b, '\'');
}

/* ---- binary COPY rows ------------------------------------------------------
 * Each row: int16 field count, then per field int32 length (-1: NULL) and
 * its bytes, all in network byte order; BIGINT as 8 bytes, TEXT and BYTEA
 * raw, JSONB as its version byte 1 then the text. No escaping and no number
 * formatting on either side. */
static void be16(char *p, uint16_t v) {
  p[0] = (char)(v >> 8);
  p[1] = (char)v;
}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LE 1
#else
#define LE 0
#endif
static void be32(char *p, uint32_t v) {
  if (LE)
    v = __builtin_bswap32(v);
  memcpy(p, &v, 4);
}
static void be64(char *p, uint64_t v) {
  if (LE)
    v = __builtin_bswap64(v);
  memcpy(p, &v, 8);
}

/* Text the server takes: valid UTF-8 as it is, an invalid sequence as
 * U+FFFD, NUL bytes left out. Writes at o (room for 3 * n bytes), returns
 * the bytes written. Plain ASCII is copied in one go. */
static size_t put_text(char *o, const char *s, size_t n) {
  size_t i = 0;
  for (uint64_t v; i + 8 <= n; i += 8) { /* 8 bytes, none 0 or >= 0x80 */
    memcpy(&v, s + i, 8);
    if (((v - 0x0101010101010101u) | v) & 0x8080808080808080u)
      break;
  }
  while (i < n && (unsigned char)(s[i] - 1) < 0x7f)
    i++;
  memcpy(o, s, i);
  size_t len = i;
  while (i < n) {
    unsigned char ch = (unsigned char)s[i];
    if (ch >= 0x80) {
      size_t l = spy__utf8_seq((const unsigned char *)s + i, n - i);
      if (!l) {
        memcpy(o + len, "\xEF\xBF\xBD", 3);
        len += 3;
        i++;
      } else {
        memcpy(o + len, s + i, l);
        len += l;
        i += l;
      }
    } else {
      if (ch)
        o[len++] = (char)ch;
      i++;
    }
  }
  return len;
}

/* The most bytes put_cell writes for c. */
static size_t cell_max(const spy__cell *c) {
  if (c->kind == SPY__COL_BLOB) /* raw, after jsonb's 1 at most */
    return 5 + c->n;
  if (c->kind == SPY__COL_TEXT) /* U+FFFD for a byte, or jsonb's 1 */
    return 5 + 3 * c->n;
  return 4 + 24; /* a number: 8 bytes, or as text */
}

/* Writes one cell at o as its column type wants it (type: SPY__COL_*);
 * room for cell_max(c) bytes. Returns the bytes written. */
static size_t put_cell(char *o, char type, const spy__cell *c) {
  int num = c->kind == SPY__COL_INT;
  if ((!num && c->kind != SPY__COL_TEXT && c->kind != SPY__COL_BLOB) ||
      (type == SPY__COL_INT && !num)) { /* NULL (BIGINT: numbers only) */
    be32(o, 0xffffffffu);
    return 4;
  }
  if (type == SPY__COL_INT) {
    be32(o, 8);
    be64(o + 4, (uint64_t)c->i);
    return 12;
  }
  char *d = o + 4;
  size_t len = 0;
  if (type == SPY__COL_JSON)
    d[len++] = 1; /* jsonb's binary form: version 1, then the text */
  if (num)        /* a number in a text column */
    len += (size_t)snprintf(d + len, 24, "%lld", (long long)c->i);
  else if (type == SPY__COL_BLOB || c->kind == SPY__COL_BLOB)
    memcpy(d + len, c->s, c->n), len += c->n;
  else
    len += put_text(d + len, c->s, c->n);
  be32(o, (uint32_t)len);
  return 4 + len;
}

static void quiet(void *arg, const char *msg) { (void)arg, (void)msg; }

static void requeue_unflushed(pgw *w);
static void stream_reset(pgw *w);

static int connect_now(pgw *w) {
  if (w->conn && PQstatus(w->conn) == CONNECTION_OK)
    return 0;
  /* the link broke: the server may have crashed and lost the batches it
   * had not flushed yet, and the transaction a stream had open is gone */
  requeue_unflushed(w);
  stream_reset(w);
  if (w->conn)
    PQfinish(w->conn);
  w->conn = PQconnectdb(w->conninfo);
  w->conn_gen++;
  if (PQstatus(w->conn) != CONNECTION_OK) {
    if (!w->was_down)
      say(w, SPY_ECONNREFUSED, "cannot connect");
    w->was_down = 1;
    return SPY_ECONNREFUSED;
  }
  PQsetNoticeProcessor(w->conn, quiet, NULL);
  if (w->was_down)
    say(w, 0, "reconnected");
  w->was_down = 0;
  return 0;
}

/* The schema version of the server's store, 0 if none. */
int spy__pg_check_version(PGconn *c);
int spy__pg_check_version(PGconn *c) {
  PGresult *r = PQexec(c, "SELECT value FROM spyglass_meta WHERE "
                          "key='schema_version'");
  int v = 0;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
    v = atoi(PQgetvalue(r, 0, 0));
  PQclear(r);
  return v > SPY__PG_SCHEMA ? SPY_EBADSCHEMA : v;
}

/* Serialises schema changes between writers sharing a database (a team
 * store): CREATE … IF NOT EXISTS run at the same moment by two sessions
 * can still collide. Held until the transaction ends. */
#define SCHEMA_LOCK "SELECT pg_advisory_xact_lock(5497617309364322355);"

/* Appends to names (as "a,b,…") the name after each `key` in ddl. */
static int names_after(const char *ddl, const char *key, spy__buf *names) {
  int n = 0;
  for (const char *p = ddl; (p = strstr(p, key)); n++) {
    p += strlen(key);
    size_t len = strcspn(p, " (");
    if (names->len)
      spy__buf_putc(names, ',');
    spy__buf_put(names, p, len);
  }
  return n;
}

/* Whether the store's tables and views were made by DDL of hash hx and
 * are all there still. */
static int ddl_done(pgw *w, const char *hx, const spy__buf *ddl) {
  PGresult *r = NULL;
  if (q(w, "SELECT value FROM spyglass_meta WHERE key='ddl_hash'", &r))
    return 0;
  int same = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), hx) == 0;
  PQclear(r);
  if (!same)
    return 0;
  spy__buf s = {0}, names = {0};
  int n = names_after(ddl->p, "CREATE TABLE IF NOT EXISTS ", &names);
  n += names_after(ddl->p, "CREATE OR REPLACE VIEW ", &names);
  spy__buf_puts(&s, "SELECT count(*) FROM pg_class WHERE relnamespace = "
                    "current_schema()::regnamespace AND relname = ANY('{");
  spy__buf_put(&s, names.p, names.len); /* SQL names: [a-z0-9_] */
  spy__buf_puts(&s, "}')");
  spy__buf_putc(&s, 0);
  same = !s.err && !names.err && q(w, s.p, &r) == 0;
  if (same) {
    same = PQntuples(r) == 1 && atoi(PQgetvalue(r, 0, 0)) == n;
    PQclear(r);
  }
  spy__buf_free(&s);
  spy__buf_free(&names);
  return same;
}

/* Appends ddl to out with every TEXT column declared COLLATE "C": ids,
 * hashes, paths and names compare byte by byte (as in SQLite and the
 * JSON-lines reader), and the server sorts and searches them with memcmp
 * and abbreviated keys instead of strcoll — the index builds at close
 * take ~1/3 less (a database's default collation is often a libc locale,
 * even C.UTF-8). In the DDL (schema.c) TEXT is only ever a column type. */
static void c_collate(spy__buf *out, const char *ddl, size_t n) {
  static const char key[] = " TEXT";
  const char *p = ddl, *end = ddl + n;
  for (const char *h; (h = memmem(p, (size_t)(end - p), key, 5));) {
    h += 5;
    spy__buf_put(out, p, (size_t)(h - p));
    if (h == end || *h == ',' || *h == ')' || *h == ' ')
      spy__buf_puts(out, " COLLATE \"C\"");
    p = h;
  }
  spy__buf_put(out, p, (size_t)(end - p));
}

/* Statistics the server keeps of each column: its ANALYZE (autovacuum's,
 * once or twice a build) samples 300 rows per unit of the largest target
 * of a table's columns, then sorts the sample once per column. The
 * default target (100: a 30,000-row sample, the hex ids and names
 * compared byte by byte) cost the server ~0.6 s of CPU per pass over the
 * 20,000-module build's tables; 10 is 1/4 of that, and plans over these
 * tables (a session's rows, a plugin, a join by call) need no finer
 * histograms. A payload (BLOB) gets none: nothing filters on its bytes,
 * and sampling them reads the out-of-line ones. Appends one ALTER TABLE
 * for table (cols: comma-separated, types: one SPY__COL_* each). */
#define STATS_TARGET "10"
static void stats_sql(spy__buf *b, const char *table, const char *cols,
                      const char *types) {
  spy__buf_puts(b, "ALTER TABLE ");
  spy__buf_puts(b, table);
  for (const char *c = cols; *c; types++) {
    size_t n = strcspn(c, ",");
    spy__buf_puts(b, c == cols ? " ALTER COLUMN " : ", ALTER COLUMN ");
    spy__buf_put(b, c, n);
    spy__buf_puts(b, *types == SPY__COL_BLOB ? " SET STATISTICS 0"
                                             : " SET STATISTICS " STATS_TARGET);
    c += n;
    if (*c == ',')
      c++;
  }
  spy__buf_puts(b, ";");
}

/* ---- schema 6: hook_calls ------------------------------------------------
 * The same rows as the SQLite writer's (writer_sqlite.c, store.h's "store
 * schema 6"), gathered the same way but never updated: see ocall. */

/* The name derived table t's rows go to. */
static const char *tname(const pgw *w, int t) {
  return t < w->ntname && w->tname[t] ? w->tname[t] : w->schema.t[t].name;
}

/* Sets w->merge: the hook kinds' tables become <kind>_kept, and where
 * each field of a call goes. */
static int hook_setup(pgw *w) {
  w->hc_ncols = spy__hook_calls_ncols(w->hc_types);
  w->hc_names.len = 0;
  spy__hook_calls_names(&w->hc_names);
  spy__buf_putc(&w->hc_names, 0);
  if (w->hc_names.err)
    return SPY_ENOMEM;
  for (int t = 0; t < w->ntname && w->tname; t++) /* a set-up again */
    free(w->tname[t]);
  free(w->tname);
  w->ntname = w->schema.n;
  if (!(w->tname = calloc((size_t)w->schema.n, sizeof *w->tname)))
    return SPY_ENOMEM;
  int i = 0;
  for (const spy__hook *h = spy__hooks; h->hook && i < SPY__NHOOKS; h++, i++) {
    spy__hookcols *c = &w->hcols[i];
    spy__hookcols_init(c, h, w->hc_ncols);
    w->tstart[i] = -1;
    for (int t = 0; t < w->schema.n; t++) {
      const spy__gtable *g = &w->schema.t[t];
      if (g->depth != 0 || (g->rec != h->start && g->rec != h->end))
        continue;
      if (g->rec == h->start)
        w->tstart[i] = t;
      char kept[160];
      spy__call_kept_name(kept, sizeof kept, h, g->rec == h->end);
      if (!(w->tname[t] = strdup(kept)))
        return SPY_ENOMEM;
    }
    if (w->tstart[i] < 0)
      c->merge[0] = c->merge[1] = 0;
  }
  w->merge = 1;
  return 0;
}

/* SPY_TRACE_PG_SCHEMA=5: a new store is made in schema 5's layout (the
 * tests' way to make one: a build of that schema is not at hand). */
static int schema5_wanted(void) {
  const char *e = getenv("SPY_TRACE_PG_SCHEMA");
  return e && strcmp(e, "5") == 0;
}

static int reload_calls(pgw *w);

/* Whether this writer may add to a store of schema version v (0: none
 * yet), saying why not; *keep5: it is written in schema 5's layout. */
static int store_usable(pgw *w, int v, int *keep5) {
  /* 5 only added a codec of sources rows (copy deltas) to 4: a schema 4
   * store's tables are this writer's, so it is migrated in place, as the
   * SQLite writer does — the DDL below runs (CREATE … IF NOT EXISTS) and
   * sets schema_version, all in this transaction under the schema lock;
   * schema 4 builds then refuse the store as newer, as they must once it
   * may hold rows they cannot decode. Older stores' tables differ. */
  int migrate = v == 4 && SPY_TRACE_SCHEMA_VERSION == 5;
  /* A schema 5 store (a table per hook Start and End kind) is written as
   * it is, by this writer with w->merge off: moving its rows into
   * hook_calls would rewrite every stored call under the schema lock
   * before the build's first action, and the readers read both layouts.
   * A new store, or a schema 6 one, gets hook_calls rows. */
  *keep5 = v == 5 || migrate || (v == 0 && schema5_wanted());
  int older = v > 0 && v != SPY__PG_SCHEMA && !*keep5;
  if (v < 0) {
    say(w, v, "the store has a newer schema");
    return v;
  }
  if (older) { /* its tables differ */
    char msg[200];
    snprintf(msg, sizeof msg,
             "the database holds a store of schema version %d, which this "
             "build (schema %d) reads but does not add to; write to a new "
             "database",
             v, SPY__PG_SCHEMA);
    say(w, SPY_EBADSCHEMA, msg);
    return SPY_EBADSCHEMA;
  }
  return 0;
}

/* The store's set-up, in one transaction under the schema lock: the
 * version checked again (another writer may have changed it since
 * open), the tables, views and statistics targets made when they are
 * not the ones this DDL made, the session's row and key. */
static int setup(pgw *w) {
  int rc = q(w,
             "BEGIN;" SCHEMA_LOCK
             "CREATE TABLE IF NOT EXISTS spyglass_meta(key TEXT PRIMARY "
             "KEY, value TEXT)",
             NULL);
  if (rc)
    return rc;
  int v = spy__pg_check_version(w->conn), keep5 = 0;
  if ((rc = store_usable(w, v, &keep5)) < 0) {
    q(w, "ROLLBACK", NULL);
    return rc;
  }
  int want = keep5 ? 5 : SPY__PG_SCHEMA;
  if (!keep5 && (rc = hook_setup(w)) < 0) {
    q(w, "ROLLBACK", NULL);
    return rc;
  }
  spy__buf sql = {0}, tables = {0};
  spy__own_tables_sql(&tables, 1);
  for (int t = 0; t < w->schema.n; t++)
    if (tname(w, t) != w->schema.t[t].name)
      spy__create_table_sql(&tables, tname(w, t), w->schema.t[t].cols,
                            w->schema.t[t].types, NULL, 1);
    else
      spy__schema_table_sql(&w->schema, t, &tables, 1);
  if (w->merge)
    spy__pg_hook_calls_table_sql(&tables);
  c_collate(&sql, tables.p ? tables.p : "", tables.len);
  if (tables.err)
    sql.err = tables.err;
  spy__buf_free(&tables);
  spy__pg_views_sql(&sql, w->merge);
  for (int t = 0; t < SPY__T_COUNT; t++)
    stats_sql(&sql, spy__tables[t].name, spy__tables[t].cols,
              spy__tables[t].types);
  for (int t = 0; t < w->schema.n; t++)
    stats_sql(&sql, tname(w, t), w->schema.t[t].cols, w->schema.t[t].types);
  if (w->merge)
    stats_sql(&sql, SPY__PG_CALL_ROWS, w->hc_names.p, w->hc_types);
  /* a payload is zstd or a delta already: past the TOAST threshold
   * (~2 KB) the server would try pglz on it for nothing, so large ones
   * go out of line as they are */
  spy__buf_puts(&sql, "ALTER TABLE sources ALTER COLUMN content SET STORAGE "
                      "EXTERNAL;");
  /* a store this same DDL made needs none of it again: run as IF NOT
   * EXISTS and CREATE OR REPLACE VIEW it still costs the server ~100 ms,
   * before the build's first action (a writer whose tables or views
   * differ has another hash and runs its DDL, and so does one that finds
   * one of them gone) */
  uint64_t h[2];
  spy_trace_hash(sql.p ? sql.p : "", sql.len, h);
  char ins[256], hx[33];
  snprintf(hx, sizeof hx, "%016llx%016llx", (unsigned long long)h[0],
           (unsigned long long)h[1]);
  spy__buf_putc(&sql, 0);
  sql.len--; /* a C string for ddl_done */
  if (!sql.err && v == want && ddl_done(w, hx, &sql))
    sql.len = 0;
  snprintf(ins, sizeof ins,
           "INSERT INTO spyglass_meta VALUES('schema_version','%d') ON "
           "CONFLICT(key) DO UPDATE SET value=excluded.value;INSERT INTO "
           "spyglass_meta "
           "VALUES('ddl_hash','%s') ON CONFLICT(key) DO UPDATE SET "
           "value=excluded.value;",
           want, hx);
  if (sql.len)
    spy__buf_puts(&sql, ins);
  spy__buf_puts(&sql, "INSERT INTO sessions(session_id,cwd,created_at,"
                      "schema_version) VALUES(");
  lit(&sql, w->session_id, strlen(w->session_id));
  spy__buf_putc(&sql, ',');
  lit(&sql, w->cwd, strlen(w->cwd));
  spy__buf_putc(&sql, ',');
  spy__buf_i64(&sql, (int64_t)spy__wall_us());
  spy__buf_puts(&sql, ",");
  spy__buf_i64(&sql, SPY_TRACE_SCHEMA_VERSION);
  spy__buf_puts(&sql, ") ON CONFLICT DO NOTHING;COMMIT;");
  spy__buf_putc(&sql, 0);
  rc = sql.err ? sql.err : q(w, sql.p, NULL);
  if (rc)
    say(w, rc, "creating the schema");
  /* the session's key, written in every row */
  sql.len = 0;
  spy__buf_puts(&sql, "SELECT session FROM sessions WHERE session_id=");
  lit(&sql, w->session_id, strlen(w->session_id));
  spy__buf_putc(&sql, 0);
  PGresult *r = NULL;
  if (rc == 0 && (rc = sql.err ? sql.err : q(w, sql.p, &r)) == 0) {
    if (PQntuples(r) == 1)
      w->schema.session = atoll(PQgetvalue(r, 0, 0));
    else
      rc = SPY_EIO;
    PQclear(r);
  }
  spy__buf_free(&sql);
  if (rc == 0 && w->merge)
    rc = reload_calls(w);
  return rc;
}

static batch *new_batch(void) { return calloc(1, sizeof(batch)); }

static void free_batch(batch *b) {
  if (!b)
    return;
  for (int t = 0; t < SPY__T_COUNT; t++) {
    spy__buf_free(&b->copy[t]);
    free(b->cut[t].at);
  }
  for (int t = 0; t < b->ngcopy; t++) {
    spy__buf_free(&b->gcopy[t]);
    free(b->gcut[t].at);
  }
  spy__buf_free(&b->hc);
  free(b->hccut.at);
  free(b->gsent);
  free(b->gcopy);
  free(b->gcut);
  free(b->src);
  free(b->srcoff);
  free(b);
}

static int64_t pg_close(void *state);
static int source_sink(void *arg, const uint64_t hash[2], const spy__cell c[5]);

/* A batch is dropped: its payloads must be sent again when named. */
static int forget_batch(pgw *w, const batch *b) {
  for (size_t i = 0; i < b->nsrc; i++) {
    int rc = spy__hset_add(&w->gone, &b->src[2 * i]);
    if (rc < 0)
      return rc;
  }
  return 0;
}

static int pg_open(void **state, const spy_trace_writer_cfg *cfg) {
  pgw *w = calloc(1, sizeof *w);
  if (!w)
    return SPY_ENOMEM;
  *state = w;
  w->report = cfg->report;
  w->report_ctx = cfg->report_ctx;
  w->conninfo = strdup(cfg->conninfo);
  w->session_id = strdup(cfg->session_id);
  w->cwd = strdup(cfg->cwd ? cfg->cwd : "");
  w->pipe = spy__src_pipe_new(source_sink, w);
  w->cur = new_batch();
  w->retry_bytes = cfg->retry_bytes;
  w->retry_ms = cfg->retry_ms;
  w->backoff_ms = 100;
  w->pre = "";
  if (!w->conninfo || !w->session_id || !w->cwd || !w->cur || !w->pipe)
    return SPY_ENOMEM;
  int rc = spy__schema_init(&w->schema);
  if (rc)
    return rc;
  w->schema.utf8_only = 1;
  w->all_records = spy__sql_all_records();
  const char *lose = getenv("SPY_TRACE_PG_LOSE_ANSWERS");
  w->lose = lose && strcmp(lose, "1") == 0;

  rc = connect_now(w);
  if (rc)
    return rc;
  /* what must be refused at once (a store it may not add to); the set-up
   * is pg_prepare's, on the writer's thread: the build does not wait for
   * the DDL (~50-130 ms of a new store's, with the server's fsyncs) */
  int keep5;
  rc = store_usable(w, spy__pg_check_version(w->conn), &keep5);
  w->opened = rc == 0;
  return rc;
}

/* The set-up (spy_trace_writer_ops.prepare), run again after a failure
 * (a lost connection, another session's DDL in the way); every entry
 * point runs it first if nothing did (a wrapper of this writer that does
 * not forward prepare). */
static int pg_prepare(void *state) {
  pgw *w = state;
  if (w->ready)
    return 0;
  if (!w->opened)
    return SPY_EINVAL;
  int rc = connect_now(w);
  if (rc == 0 && (rc = setup(w)) < 0) {
    if (PQstatus(w->conn) == CONNECTION_OK)
      PQclear(PQexec(w->conn, "ROLLBACK")); /* a transaction left open */
    else
      rc = SPY_ECONNREFUSED; /* the link broke: worth trying again */
  }
  w->ready = rc == 0;
  return rc;
}

/* Notes that a row starts at off in the buffer k cuts. */
static int cut_row(cuts *k, size_t off) {
  if (k->rows && k->rows % COPY_ROWS == 0) {
    if (k->n == k->cap) {
      size_t ncap = k->cap ? k->cap * 2 : 16;
      size_t *a = realloc(k->at, ncap * sizeof *a);
      if (!a)
        return SPY_ENOMEM;
      k->at = a;
      k->cap = ncap;
    }
    k->at[k->n++] = off;
  }
  k->rows++;
  return 0;
}

/* Appends one binary COPY row to o (cut by k); types: one SPY__COL_* per
 * column. */
static int put_row(batch *b, spy__buf *o, cuts *k, const char *types,
                   const spy__cell *c, int n) {
  size_t need = 2;
  for (int i = 0; i < n; i++) {
    size_t m = cell_max(&c[i]);
    if (m > (size_t)0x7fffffff / 2) /* past what one field may hold */
      return o->err = SPY_ENOMEM;
    need += m;
  }
  if (spy__buf_reserve(o, need) < 0)
    return o->err;
  if (cut_row(k, o->len) < 0)
    return o->err = SPY_ENOMEM;
  char *p = o->p + o->len;
  be16(p, (uint16_t)n);
  size_t len = 2;
  for (int i = 0; i < n; i++)
    len += put_cell(p + len, types[i], &c[i]);
  o->len += len;
  b->bytes += len;
  return 0;
}

static int gslot(pgw *w, int table);
static int sink(void *arg, int table, const spy__cell *c, int n) {
  pgw *w = arg;
  batch *b = w->cur;
  if (gslot(w, table) < 0)
    return SPY_ENOMEM;
  return put_row(b, &b->gcopy[table], &b->gcut[table], w->schema.t[table].types,
                 c, n);
}

/* A packed sources row, on the writer thread: into the current batch. */
static int source_sink(void *arg, const uint64_t hash[2],
                       const spy__cell c[5]) {
  pgw *w = arg;
  batch *b = w->cur;
  if (b->nsrc == b->capsrc) {
    size_t ncap = b->capsrc ? b->capsrc * 2 : 64;
    uint64_t *n2 = realloc(b->src, ncap * 2 * sizeof *n2);
    if (n2)
      b->src = n2;
    size_t *o2 = n2 ? realloc(b->srcoff, ncap * sizeof *o2) : NULL;
    if (!o2)
      return SPY_ENOMEM;
    b->srcoff = o2;
    b->capsrc = ncap;
  }
  size_t at = b->copy[SPY__T_SOURCES].len;
  int rc = put_row(b, &b->copy[SPY__T_SOURCES], &b->cut[SPY__T_SOURCES],
                   spy__tables[SPY__T_SOURCES].types, c, 5);
  if (rc == 0) {
    b->src[2 * b->nsrc] = hash[0];
    b->src[2 * b->nsrc + 1] = hash[1];
    b->srcoff[b->nsrc] = at;
    b->nsrc++;
  }
  return rc;
}

/* The table slot t of the current batch (grown to the schema's tables). */
static int gslot(pgw *w, int table) {
  batch *b = w->cur;
  if (table < b->ngcopy)
    return 0;
  int nn = w->schema.n;
  spy__buf *g = realloc(b->gcopy, (size_t)nn * sizeof *g);
  if (g)
    b->gcopy = g;
  cuts *k = g ? realloc(b->gcut, (size_t)nn * sizeof *k) : NULL;
  if (k)
    b->gcut = k;
  size_t *sent = k ? realloc(b->gsent, (size_t)nn * sizeof *sent) : NULL;
  if (!sent)
    return SPY_ENOMEM;
  b->gsent = sent;
  memset(g + b->ngcopy, 0, (size_t)(nn - b->ngcopy) * sizeof *g);
  memset(k + b->ngcopy, 0, (size_t)(nn - b->ngcopy) * sizeof *k);
  memset(sent + b->ngcopy, 0, (size_t)(nn - b->ngcopy) * sizeof *sent);
  b->ngcopy = nn;
  return 0;
}

/* ---- schema 6: a hook call's row ------------------------------------------
 * The open call and its row's cells are rows.c's (spy__ocall), shared
 * with the SQLite writer; what is this writer's: the batch of the Start,
 * a Start kept by the commit of its batch, a call whose batch is gone. */

/* Room for one more open call in w->oc. 0 or SPY_ENOMEM. */
static int ocall_room(pgw *w) {
  if (w->noc < w->capoc)
    return 0;
  size_t cap = w->capoc ? 2 * w->capoc : 64;
  ocall *n = realloc(w->oc, cap * sizeof *n);
  if (!n)
    return SPY_ENOMEM;
  w->oc = n;
  w->capoc = cap;
  return 0;
}

/* A Start: remembered until its End. Returns 1 when its call's row will
 * hold it (it has no row of its own). */
static int call_start(pgw *w, const spy__hook *h, int hk,
                      const spy_trace_action *a) {
  const spy__hookcols *c = &w->hcols[hk];
  const spy_trace_val *id = spy__act_field(a, c->call);
  if (!id || id->type != SPY_TV_STR)
    return 0;
  if (ocall_room(w) < 0)
    return SPY_ENOMEM;
  ocall *o = &w->oc[w->noc];
  *o = (ocall){.hk = hk, .serial = w->cur->serial};
  int fits = spy__ocall_start(&o->call, h, c, a, 1);
  if (fits < 0)
    return fits;
  w->noc++;
  return fits;
}

/* The hook_calls row of o into the current batch (end NULL: not ended). */
static int call_row(pgw *w, const ocall *o, const spy_trace_action *end,
                    const char *output, int merged) {
  spy__cell c[SPY__HC_MAX];
  char hex[SPY__CALL_FIELDS][33];
  spy__call_cells(&o->call, end, output, &w->hcols[o->hk], merged,
                  w->session_id, strlen(w->session_id), w->hc_ncols, c, hex);
  batch *b = w->cur;
  return put_row(b, &b->hc, &b->hccut, w->hc_types, c, w->hc_ncols);
}

/* The row o's Start would have in its own table, from what o holds (a
 * Start that fits), into <start>_kept of the current batch. */
static int start_row(pgw *w, const ocall *o) {
  const spy__hookcols *hc = &w->hcols[o->hk];
  const spy__ocall *oc = &o->call;
  const spy_trace_kind *k = oc->hook->start;
  int t = w->tstart[o->hk], rc = gslot(w, t);
  if (rc < 0)
    return rc;
  spy__cell c[4 + SPY__CALL_FIELDS];
  c[0] = (spy__cell){SPY__COL_INT, w->schema.session, NULL, 0};
  c[1] = (spy__cell){SPY__COL_INT, (int64_t)oc->start_seq, NULL, 0};
  c[2] = (spy__cell){SPY__COL_INT, oc->build, NULL, 0};
  c[3] = (spy__cell){SPY__COL_INT, oc->started, NULL, 0};
  int x = 0;
  for (uint32_t j = 0; j < k->nfields; j++) {
    spy__cell *d = &c[4 + j];
    *d = (spy__cell){0};
    switch (hc->role[0][j]) {
    case SPY__CALL_ID:
      *d = (spy__cell){SPY__COL_TEXT, 0, oc->call_id, strlen(oc->call_id)};
      break;
    case SPY__CALL_PLUGIN:
      if (oc->plugin)
        *d = (spy__cell){SPY__COL_TEXT, 0, oc->plugin, strlen(oc->plugin)};
      break;
    case SPY__CALL_PLUGIN_ID:
      *d = (spy__cell){SPY__COL_INT, oc->plugin_id, NULL, 0};
      break;
    case SPY__CALL_SUBJECT:
      if (oc->module)
        *d = (spy__cell){SPY__COL_TEXT, 0, oc->module, strlen(oc->module)};
      break;
    case SPY__CALL_SRC:
      if (oc->input[0])
        *d = (spy__cell){SPY__COL_TEXT, 0, oc->input, 32};
      break;
    default:
      if (x < oc->nsx)
        *d = oc->sx[x++];
    }
  }
  if (w->schema.t[t].ncols != 4 + (int)k->nfields)
    return SPY_EINVAL;
  batch *b = w->cur;
  return put_row(b, &b->gcopy[t], &b->gcut[t], w->schema.t[t].types, c,
                 w->schema.t[t].ncols);
}

static void ocall_drop(pgw *w, size_t i) {
  spy__ocall_free(&w->oc[i].call);
  memmove(&w->oc[i], &w->oc[i + 1], (w->noc - i - 1) * sizeof *w->oc);
  w->noc--;
}

/* An End: the row of its open Start (the schema 5 view's join: an End
 * without a stored Start has none). Returns 1 when that row holds it. */
static int call_end(pgw *w, const spy__hook *h, int hk,
                    const spy_trace_action *a) {
  const spy__hookcols *c = &w->hcols[hk];
  const spy_trace_val *id = spy__act_field(a, c->end_call);
  if (!id || id->type != SPY_TV_STR)
    return 0;
  for (size_t i = 0; i < w->noc; i++) {
    const spy__ocall *o = &w->oc[i].call;
    if (o->hook != h || o->build != a->build || strlen(o->call_id) != id->n ||
        memcmp(o->call_id, id->u.s, id->n))
      continue;
    int rc = 0;
    if (!w->oc[i].gone) {
      char out[33];
      spy__call_output(c, a, out);
      rc = spy__call_mergeable(c, o, a);
      int r2 = call_row(w, &w->oc[i], a, out, rc);
      if (r2 < 0)
        rc = r2;
    }
    ocall_drop(w, i);
    return rc;
  }
  return 0;
}

/* 1 when hook action a has no rows of its own (its call's row holds it),
 * 0 when it has, or a negative error. */
static int hook_action(pgw *w, const spy_trace_action *a) {
  if (a->kind->role != SPY_ROLE_HOOK_START &&
      a->kind->role != SPY_ROLE_HOOK_END)
    return 0;
  int hk, end;
  const spy__hook *h = spy__call_hook(a->kind, &hk, &end);
  if (!h)
    return 0;
  return end ? call_end(w, h, hk, a) : call_start(w, h, hk, a);
}

/* Before the current batch is queued: the Starts of it still open get
 * their own rows (their Ends come in a later batch). */
static int calls_queued(pgw *w) {
  for (size_t i = 0; i < w->noc; i++) {
    ocall *o = &w->oc[i];
    if (o->serial != w->cur->serial || o->call.kept || o->gone)
      continue;
    int rc = start_row(w, o);
    if (rc < 0)
      return rc;
    o->call.kept = 1;
  }
  return 0;
}

/* Batch `serial` is dropped: its open calls' Starts are not stored. */
static void calls_gone(pgw *w, uint64_t serial) {
  for (size_t i = 0; i < w->noc; i++)
    if (w->oc[i].serial == serial)
      w->oc[i].gone = 1;
}

/* A session reopened (spy_trace_recover after a kill): the calls whose
 * Starts are stored and which have no row (the hook_calls view's unended
 * rows, open when the process died) are open again, so the Ends recovered
 * after them give those calls their rows. A new session has no
 * action_batches row: the query stops at that probe of their key. */
static int reload_calls(pgw *w) {
  spy__buf s = {0};
  spy__buf_puts(&s, "SELECT hook_type, build_id, call_id, plugin_name, "
                    "plugin_id, module_id, started_at, input_source_id, "
                    "start_seq FROM hook_calls WHERE session_id=");
  lit(&s, w->session_id, strlen(w->session_id));
  spy__buf_puts(&s, " AND end_seq IS NULL AND EXISTS (SELECT 1 FROM "
                    "action_batches WHERE session_id=");
  lit(&s, w->session_id, strlen(w->session_id));
  spy__buf_puts(&s, ") ORDER BY start_seq");
  spy__buf_putc(&s, 0);
  PGresult *r = NULL;
  int rc = s.err ? s.err : q(w, s.p, &r);
  spy__buf_free(&s);
  for (int i = 0; !rc && i < PQntuples(r); i++) {
    const char *hook = PQgetvalue(r, i, 0);
    int hk = 0;
    const spy__hook *h = spy__hooks;
    while (h->hook && hk < SPY__NHOOKS && strcmp(h->hook, hook) != 0)
      h++, hk++;
    if (!h->hook || hk == SPY__NHOOKS || PQgetisnull(r, i, 2))
      continue;
    if ((rc = ocall_room(w)) < 0)
      break;
    ocall *o = &w->oc[w->noc];
    /* kept: its Start has its row; serial: in no batch of this writer */
    *o = (ocall){.call = {.hook = h,
                          .build = (uint32_t)atoll(PQgetvalue(r, i, 1)),
                          .kept = 1,
                          .plugin_id = atoll(PQgetvalue(r, i, 4)),
                          .started = atoll(PQgetvalue(r, i, 6)),
                          .start_seq = strtoull(PQgetvalue(r, i, 8), NULL, 10)},
                 .hk = hk,
                 .serial = UINT64_MAX};
    const char *pl = PQgetisnull(r, i, 3) ? NULL : PQgetvalue(r, i, 3);
    const char *mod = PQgetisnull(r, i, 5) ? NULL : PQgetvalue(r, i, 5);
    const char *in = PQgetisnull(r, i, 7) ? NULL : PQgetvalue(r, i, 7);
    if ((rc = spy__ocall_load(&o->call, PQgetvalue(r, i, 2), pl, mod, in)) < 0)
      break;
    w->noc++;
  }
  PQclear(r);
  return rc;
}

static int no_sink(void *arg, int table, const spy__cell *c, int n) {
  (void)arg, (void)table, (void)c, (void)n;
  return 0;
}

static int pg_source(void *state, const uint64_t hash[2], const char *p,
                     size_t n) {
  int rc = pg_prepare(state);
  return rc ? rc : spy__src_pipe_submit(((pgw *)state)->pipe, hash, p, n);
}

/* Sends again every payload of v that a dropped batch carried. */
static int resend(pgw *w, const spy_trace_val *v) {
  if (v->type == SPY_TV_SRC && v->has_hash && spy__hset_take(&w->gone, v->hash))
    return pg_source(w, v->hash, v->u.s, v->n);
  if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC)
    for (uint32_t i = 0; i < v->n; i++) {
      int rc = resend(w, &v->u.items[i]);
      if (rc)
        return rc;
    }
  return 0;
}

static void stream_pump(pgw *w);

static int pg_action(void *state, const spy_trace_record *r) {
  pgw *w = state;
  const spy_trace_action *a = r->action;
  int prc = pg_prepare(w);
  if (prc)
    return prc;
  /* a query running is looked at less often: each look is a read from
   * the socket, most of them finding nothing yet */
  if (++w->st.tick % STREAM_EVERY == 0 &&
      (!w->st.busy || w->st.tick % (4 * STREAM_EVERY) == 0))
    stream_pump(w);
  if (w->gone.n) {
    int rc = resend(w, &a->fields);
    if (rc)
      return rc;
  }
  w->cur->actions++;
  int rc = 0, root = -1;
  w->schema.inexact = 0;
  if (a->kind) {
    int fresh;
    root = spy__schema_root(&w->schema, a->kind, &fresh);
    if (root < -1)
      return root;
    if (fresh && root < 0)
      say(w, SPY_EINVAL,
          "an action kind whose names cannot be SQL tables is kept in "
          "action_batches only");
    spy__gsink to = sink;
    if (w->merge && root >= 0) {
      int held = hook_action(w, a);
      if (held < 0)
        return held;
      if (held)
        to = no_sink; /* its call's hook_calls row holds it */
    }
    rc = spy__schema_rows(&w->schema, root, a, to, w);
  }
  /* the binary record only when the tables cannot give the action back
   * (an application kind, text the server would change) */
  if (rc == 0) {
    spy__batch_mark_add(&w->mark, a->seq);
    if (w->all_records || spy__batch_keeps(&w->schema, root, a)) {
      w->rec.len = 0;
      if ((rc = spy__trace_record_put(&w->rec, a)) == 0) {
        spy__abatch_add(&w->ab, a->seq, w->rec.p, w->rec.len);
        rc = w->ab.text.err;
      }
    }
  }
  return rc;
}

/* ---- COPY ------------------------------------------------------------------
 * A table's rows of a batch go in COPYs of at most COPY_ROWS rows. The
 * server buffers a COPY's rows up to 1,000 at a time (a binary row's
 * bytes are not counted toward its other limit), each in a slot that
 * holds a reference to the table's descriptor, and PostgreSQL 15 keeps
 * those references in a hash where equal values pile up in one run, so
 * each slot made or dropped searches the run: a COPY's cost grew with the
 * square of its rows up to 1,000. A batch's 1,140 rows of
 * hook_transform_call_start cost the server 29 % of its instructions that
 * way; at 128 rows per COPY the search is short, and the COPY's own
 * start (a statement, the table opened) is paid ~9 times instead of once.
 * All the COPYs of a batch, and the statements before them, go as one
 * query: each COPY after the first costs the round trip of its rows only
 * (the server's answer to one COPY and its request for the next data come
 * together). */
typedef struct copy_part {
  const char *table, *cols;
  const spy__buf *data; /* binary rows, without the header and trailer */
  const cuts *cut;      /* data's */
  const char *ddl;      /* statements run before its first COPY, or NULL */
  size_t k0;            /* its COPYs before this one were sent (stream) */
} copy_part;

/* The offsets where COPY number k (from 0) of data (cut by c) starts and
 * ends. */
static size_t copy_start(const cuts *c, size_t k) {
  return k ? c->at[k - 1] : 0;
}
static size_t copy_stop(const spy__buf *data, const cuts *c, size_t k) {
  return k < c->n ? c->at[k] : data->len;
}

/* One COPY's data: the header, n bytes of rows, the trailer, its end. */
static int send_rows(pgw *w, const char *rows, size_t n) {
  /* signature, flags, header extension length; the rows; the trailer */
  static const char head[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
  if (PQputCopyData(w->conn, head, sizeof head) != 1)
    return SPY_EIO;
  for (size_t off = 0; off < n;) {
    size_t k = n - off > (1u << 20) ? (1u << 20) : n - off;
    if (PQputCopyData(w->conn, rows + off, (int)k) != 1)
      return SPY_EIO;
    off += k;
  }
  if (PQputCopyData(w->conn, "\377\377", 2) != 1 ||
      PQputCopyEnd(w->conn, NULL) != 1)
    return SPY_EIO;
  return 0;
}

/* The statements in w->pre (then forgotten), then the parts' rows, each
 * part after its ddl, in COPYs of COPY_ROWS rows: one query. Returns 0 or
 * the first failure's code; the server runs nothing after a failure. */
static int copy_parts(pgw *w, const copy_part *part, int n) {
  spy__buf sql = {0};
  spy__buf_puts(&sql, w->pre);
  w->pre = "";
  int ncopy = 0;
  for (int i = 0; i < n; i++) {
    if (part[i].ddl)
      spy__buf_puts(&sql, part[i].ddl);
    for (size_t k = part[i].k0;
         k <= part[i].cut->n && copy_start(part[i].cut, k) < part[i].data->len;
         k++) {
      spy__buf_puts(&sql, "COPY ");
      spy__buf_puts(&sql, part[i].table);
      spy__buf_putc(&sql, '(');
      spy__buf_puts(&sql, part[i].cols);
      spy__buf_puts(&sql, ") FROM STDIN (FORMAT binary);");
      ncopy++;
    }
  }
  spy__buf_putc(&sql, 0);
  if (sql.err) {
    spy__buf_free(&sql);
    return SPY_ENOMEM;
  }
  int sent = sql.len > 1 ? PQsendQuery(w->conn, sql.p) : -1;
  spy__buf_free(&sql);
  if (sent <= 0)
    return sent ? 0 : SPY_EIO; /* nothing to send, or it was not sent */
  int rc = 0, i = 0, asked = 0;
  size_t k = n ? part[0].k0 : 0;                   /* part i's COPY k is next */
  size_t off = n ? copy_start(part[0].cut, k) : 0; /* … from off */
  PGresult *r;
  while ((r = PQgetResult(w->conn))) {
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_COPY_IN) { /* the next COPY's rows */
      PQclear(r);
      while (i < n && off >= part[i].data->len)
        if (++i < n)
          k = part[i].k0, off = copy_start(part[i].cut, k);
      if (i == n || ++asked > ncopy) { /* cannot be: end it, failed */
        PQputCopyEnd(w->conn, "spyglass: no rows for this COPY");
        continue;
      }
      size_t end = copy_stop(part[i].data, part[i].cut, k++);
      int src = send_rows(w, part[i].data->p + off, end - off);
      if (src && !rc)
        rc = src;
      off = end;
      continue;
    }
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK && !rc)
      rc = sqlstate_code(PQresultErrorField(r, PG_DIAG_SQLSTATE));
    PQclear(r);
  }
  return rc;
}

/* COPY of data into table from its COPY k0 on, after the statements in
 * w->pre. */
static int copy_in(pgw *w, const char *table, const char *cols,
                   const spy__buf *data, const cuts *cut, size_t k0) {
  copy_part p = {table, cols, data, cut, NULL, k0};
  return copy_parts(w, &p, 1);
}

/* ---- stream: a batch's COPYs sent while it is built ---------------------
 * Every STREAM_EVERY actions the writer looks (without waiting) at the
 * query it has running: it answers each COPY the server asks for with its
 * rows, and once the query is over it sends the next one, holding every
 * full COPY of the batch's sources, hook_call_rows and built-in derived
 * tables not sent yet (the first one opens the transaction). The rest,
 * action_batches and application kinds' tables (their DDL) wait for the
 * commit. Sources are streamed while they go straight into the table
 * (send_sources), in the order they come: only the rows left for the
 * commit are sorted (a payload another session stores at once can make
 * the stream fail, or deadlock and be sent again; the batch is then sent
 * whole, sorted, as before). On the 20,000-module build the server's
 * work then mostly overlaps the writer's decoding, and the wait at each
 * commit is for the last rows only: bench trace's durable_x went from
 * 2.34-2.50 to 2.14-2.22 (three alternated pairs, --rounds 5), for more
 * CPU (the trace's ~+0.3 us an action, the server's up to ~+15 %: more
 * and smaller queries, sources inserted out of key order). */
/* The rows and cuts of stream table t of b (-2: sources, -1:
 * hook_call_rows). */
static const spy__buf *stream_buf(batch *b, int t, cuts **c, size_t **sent) {
  if (t == -2) {
    *c = &b->cut[SPY__T_SOURCES];
    *sent = &b->srcsent;
    return &b->copy[SPY__T_SOURCES];
  }
  if (t < 0) {
    *c = &b->hccut;
    *sent = &b->hcsent;
    return &b->hc;
  }
  *c = &b->gcut[t];
  *sent = &b->gsent[t];
  return &b->gcopy[t];
}

/* b counts nothing sent: sent again, it is sent whole (its sources in
 * source_id order again: those streamed were not). */
static void unsent(batch *b) {
  b->hcsent = 0;
  if (b->srcsent)
    b->src_sorted = 0;
  b->srcsent = 0;
  if (b->gsent)
    memset(b->gsent, 0, (size_t)b->ngcopy * sizeof *b->gsent);
}

/* Forgets the stream (its transaction rolled back or gone): its batch
 * counts nothing sent. */
static void stream_reset(pgw *w) {
  if (w->st.b)
    unsent(w->st.b);
  w->st.b = NULL;
  w->st.busy = w->st.failed = 0;
  w->st.n = w->st.at = 0;
}

/* One result of the stream's query. */
static void stream_result(pgw *w, PGresult *r) {
  ExecStatusType s = PQresultStatus(r);
  if (s == PGRES_COPY_IN) {
    if (w->st.failed || w->st.at >= w->st.n) { /* cannot be: end it */
      PQputCopyEnd(w->conn, "spyglass: no rows for this COPY");
      w->st.failed = 1;
      return;
    }
    cuts *c;
    size_t *sent;
    size_t k = w->st.k[w->st.at];
    const spy__buf *d = stream_buf(w->st.b, w->st.tab[w->st.at], &c, &sent);
    w->st.at++;
    size_t from = copy_start(c, k);
    if (send_rows(w, d->p + from, copy_stop(d, c, k) - from))
      w->st.failed = 1;
  } else if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
    w->st.failed = 1;
}

/* Adds COPY k of table t to the next query (sql: its statements). */
static int stream_list(pgw *w, spy__buf *sql, int t, size_t k,
                       const char *table, const char *cols) {
  if (w->st.n == w->st.cap) {
    int ncap = w->st.cap ? w->st.cap * 2 : 64;
    int *t2 = realloc(w->st.tab, (size_t)ncap * sizeof *t2);
    if (t2)
      w->st.tab = t2;
    size_t *k2 = t2 ? realloc(w->st.k, (size_t)ncap * sizeof *k2) : NULL;
    if (!k2)
      return SPY_ENOMEM;
    w->st.k = k2;
    w->st.cap = ncap;
  }
  w->st.tab[w->st.n] = t;
  w->st.k[w->st.n++] = k;
  spy__buf_puts(sql, "COPY ");
  spy__buf_puts(sql, table);
  spy__buf_putc(sql, '(');
  spy__buf_puts(sql, cols);
  spy__buf_puts(sql, ") FROM STDIN (FORMAT binary);");
  return 0;
}

/* Looks at the running query without waiting; when it is over, sends the
 * full COPYs of the current batch not sent yet. */
static void stream_pump(pgw *w) {
  batch *b = w->cur;
  if (w->st.b && (w->st.b != b || w->st.failed || w->st.gen != w->conn_gen))
    return; /* its commit (send_batch) or a reconnection resolves it */
  if (w->st.busy) {
    if (!PQconsumeInput(w->conn)) {
      w->st.failed = 1;
      return;
    }
    while (w->st.busy && !w->st.failed && !PQisBusy(w->conn)) {
      PGresult *r = PQgetResult(w->conn);
      if (!r)
        w->st.busy = 0;
      else
        stream_result(w, r);
      PQclear(r);
    }
    if (w->st.busy || w->st.failed)
      return;
  }
  /* only while the server keeps up: nothing pending, the link up */
  if (w->head || w->next_try_ms || !w->conn ||
      PQstatus(w->conn) != CONNECTION_OK)
    return;
  spy__buf sql = {0};
  if (!w->st.b)
    spy__buf_puts(&sql, "BEGIN;SET LOCAL synchronous_commit=off;");
  w->st.n = w->st.at = 0;
  int rc = 0;
  for (int t = w->src_stage ? -1 : -2;
       t < b->ngcopy && t < w->schema.nbuiltin && !rc; t++) {
    cuts *c;
    size_t *sent;
    stream_buf(b, t, &c, &sent);
    const char *table = t == -2 ? "sources"
                        : t < 0 ? SPY__PG_CALL_ROWS
                                : tname(w, t);
    const char *cols = t == -2 ? spy__tables[SPY__T_SOURCES].cols
                       : t < 0 ? w->hc_names.p
                               : w->schema.t[t].cols;
    for (; *sent < c->n && !rc; ++*sent)
      rc = stream_list(w, &sql, t, *sent, table, cols);
  }
  spy__buf_putc(&sql, 0);
  if (w->st.n || rc) {
    w->st.b = b;
    w->st.gen = w->conn_gen;
    w->st.busy = !rc && !sql.err && PQsendQuery(w->conn, sql.p);
    /* not sent (out of memory, the link): its commit rolls the stream
     * back and sends the batch whole */
    w->st.failed = !w->st.busy;
  }
  spy__buf_free(&sql);
}

/* Ends the stream of b, if it has one, at its commit: waits for its
 * query's answers. 1 when its transaction is open and holds every COPY
 * it sent; else 0, rolled back (the batch is sent whole). */
static int stream_end(pgw *w, batch *b) {
  if (!w->st.b || w->st.b != b)
    return 0;
  int ok =
      w->st.gen == w->conn_gen && w->conn && PQstatus(w->conn) == CONNECTION_OK;
  for (PGresult *r; ok && w->st.busy;) {
    if (!(r = PQgetResult(w->conn)))
      w->st.busy = 0;
    else
      stream_result(w, r);
    PQclear(r);
  }
  ok = ok && !w->st.failed && PQstatus(w->conn) == CONNECTION_OK;
  if (!ok) {
    if (w->st.gen == w->conn_gen && w->conn &&
        PQstatus(w->conn) == CONNECTION_OK)
      q(w, "ROLLBACK", NULL);
    stream_reset(w);
    return 0;
  }
  w->st.b = NULL; /* b's counts stay: send_batch sends the rest */
  w->st.n = w->st.at = 0;
  return 1;
}

/* A batch dropped or freed while its stream runs: rolled back. */
static void stream_drop(pgw *w, batch *b) {
  if (w->st.b != b || !stream_end(w, b))
    return;
  q(w, "ROLLBACK", NULL);
  w->st.b = b;
  stream_reset(w);
}

/* A sources row: its bytes in copy[SPY__T_SOURCES]; the source_id text
 * starts after the field count (2 bytes) and its length (4). */
typedef struct srow {
  const char *p;
  size_t n;
} srow;

static int srow_cmp(const void *x, const void *y) {
  return memcmp(((const srow *)x)->p + 6, ((const srow *)y)->p + 6, 32);
}

/* Puts the batch's sources rows in source_id order (once): sessions
 * storing the same payloads at once then wait for each other instead of
 * deadlocking. The rows its stream sent stay where they are (the rest is
 * sorted); another session's payload among them made the stream fail, and
 * the batch is sent again whole and sorted. */
static int sort_sources(pgw *w, batch *b) {
  spy__buf *in = &b->copy[SPY__T_SOURCES];
  size_t from = b->srcsent * COPY_ROWS; /* rows streamed */
  if (b->src_sorted || b->nsrc < from + 2) {
    b->src_sorted = 1;
    return 0;
  }
  srow *r = malloc((b->nsrc - from) * sizeof *r);
  w->sorted.len = 0;
  if (!r || spy__buf_reserve(&w->sorted, in->len) < 0) {
    free(r);
    return SPY_ENOMEM;
  }
  for (size_t i = from; i < b->nsrc; i++) {
    size_t end = i + 1 < b->nsrc ? b->srcoff[i + 1] : in->len;
    r[i - from] = (srow){in->p + b->srcoff[i], end - b->srcoff[i]};
  }
  qsort(r, b->nsrc - from, sizeof *r, srow_cmp);
  cuts *k = &b->cut[SPY__T_SOURCES];
  /* the same count of rows: the same count of cuts; those before row
   * `from` stay, and the one at it is noted again */
  k->n = b->srcsent ? b->srcsent - 1 : 0;
  k->rows = from;
  w->sorted.len = from ? b->srcoff[from] : 0;
  memcpy(w->sorted.p, in->p, w->sorted.len);
  for (size_t i = from; i < b->nsrc; i++) {
    cut_row(k, w->sorted.len);    /* cannot fail: room for them all */
    b->srcoff[i] = w->sorted.len; /* (b->src keeps its order: a set) */
    memcpy(w->sorted.p + w->sorted.len, r[i - from].p, r[i - from].n);
    w->sorted.len += r[i - from].n;
  }
  free(r);
  spy__buf t = *in; /* the sorted rows become the batch's, and its
                       old buffer the next scratch */
  *in = w->sorted;
  w->sorted = t;
  b->src_sorted = 1;
  return 0;
}

/* Sources through a temporary table: a payload another session stored
 * already is skipped. */
static int stage_sources(pgw *w, const batch *b) {
  /* emptied at each commit without a new file (TRUNCATE would give it
   * one, a catalog row rewritten per batch) */
  char pre[256];
  snprintf(pre, sizeof pre,
           "%sCREATE TEMP TABLE IF NOT EXISTS src_stage (LIKE sources) ON "
           "COMMIT DELETE ROWS;",
           w->pre);
  w->pre = pre;
  int rc = copy_in(w, "src_stage", spy__tables[SPY__T_SOURCES].cols,
                   &b->copy[SPY__T_SOURCES], &b->cut[SPY__T_SOURCES], 0);
  if (!rc)
    rc = q(w,
           "INSERT INTO sources SELECT * FROM src_stage ORDER BY source_id "
           "ON CONFLICT DO NOTHING",
           NULL);
  return rc;
}

/* The batch's payloads, last in its transaction: straight into sources
 * while no other session has stored one of them; on the first that one
 * has, back to the savepoint and through the staging table, and so for
 * the rest of the session. */
static int send_sources(pgw *w, batch *b) {
  int rc = sort_sources(w, b);
  if (rc || w->src_stage)
    return rc ? rc : stage_sources(w, b);
  char pre[64];
  snprintf(pre, sizeof pre, "%sSAVEPOINT src;", w->pre);
  w->pre = pre;
  rc = copy_in(w, "sources", spy__tables[SPY__T_SOURCES].cols,
               &b->copy[SPY__T_SOURCES], &b->cut[SPY__T_SOURCES], b->srcsent);
  if (rc != SPY_EEXIST)
    return rc;
  w->src_stage = 1;
  rc = q(w, "ROLLBACK TO SAVEPOINT src", NULL);
  return rc ? rc : stage_sources(w, b);
}

/* After a commit: the application kinds' tables the batch created have
 * their statistics targets set (stats_sql) and need no ALTER again. */
static void stats_committed(pgw *w, const batch *b) {
  if (b->ngcopy > w->nstats_set) {
    uint8_t *n = realloc(w->stats_set, (size_t)b->ngcopy);
    if (!n)
      return; /* set again with the next batch: harmless */
    memset(n + w->nstats_set, 0, (size_t)(b->ngcopy - w->nstats_set));
    w->stats_set = n;
    w->nstats_set = b->ngcopy;
  }
  for (int t = w->schema.nbuiltin; t < b->ngcopy; t++)
    if (b->gcopy[t].len)
      w->stats_set[t] = 1;
}

/* "16/B374D848": a WAL position; 0 if it is not one. */
static uint64_t lsn_parse(const char *s) {
  char *e;
  unsigned long long hi = strtoull(s, &e, 16), lo;
  if (*e != '/')
    return 0;
  lo = strtoull(e + 1, &e, 16);
  return *e ? 0 : (uint64_t)hi << 32 | (lo & 0xffffffffu);
}

/* COMMIT of a batch begun with synchronous_commit off: the server
 * answers without waiting for its WAL flush (~5 ms of the writer's wait
 * per batch on this VM, the build still running). The same query asks
 * for the WAL insert position (b->lsn: the batch is durable once the
 * flush position passes it) and the flush position now (w->flushed).
 * Returns the COMMIT's code. */
static int commit_batch(pgw *w, batch *b) {
  b->lsn = 0;
  if (!PQsendQuery(w->conn, "COMMIT;SELECT pg_current_wal_insert_lsn()::text,"
                            "pg_current_wal_flush_lsn()::text"))
    return SPY_EIO;
  int rc = SPY_EIO, n = 0;
  for (PGresult *r; (r = PQgetResult(w->conn)); PQclear(r), n++) {
    ExecStatusType s = PQresultStatus(r);
    if (n == 0)
      rc = s == PGRES_COMMAND_OK
               ? 0
               : sqlstate_code(PQresultErrorField(r, PG_DIAG_SQLSTATE));
    else if (n == 1 && s == PGRES_TUPLES_OK && PQntuples(r) == 1) {
      b->lsn = lsn_parse(PQgetvalue(r, 0, 0));
      uint64_t f = lsn_parse(PQgetvalue(r, 0, 1));
      if (f > w->flushed)
        w->flushed = f;
    }
  }
  return rc;
}

static int send_batch(pgw *w, batch *b) {
  /* BEGIN goes with the first statement: one round trip less (each one
   * is two wake-ups on a machine the build keeps busy); its COMMIT does
   * not wait for the WAL flush (commit_batch). A batch streamed while it
   * was built has its transaction open and some COPYs sent (stream). */
  int streamed = stream_end(w, b);
  w->pre = streamed ? "" : "BEGIN;SET LOCAL synchronous_commit=off;";
  int rc = 0, np = 0;
  copy_part *parts =
      malloc((size_t)(SPY__T_COUNT + b->ngcopy + 1) * sizeof *parts);
  spy__buf *ddls = calloc((size_t)b->ngcopy + 1, sizeof *ddls);
  if (!parts || !ddls)
    rc = SPY_ENOMEM;
  for (int t = 0; t < SPY__T_COUNT && !rc; t++)
    if (t != SPY__T_SOURCES && b->copy[t].len)
      parts[np++] = (copy_part){spy__tables[t].name, spy__tables[t].cols,
                                &b->copy[t], &b->cut[t], NULL};
  for (int t = 0; t < b->ngcopy && !rc; t++) {
    if (!b->gcopy[t].len)
      continue;
    const char *ddl = NULL;
    if (t >= w->schema.nbuiltin) { /* an application kind's table */
      spy__buf raw = {0};
      spy__schema_table_sql(&w->schema, t, &raw, 1);
      c_collate(&ddls[t], raw.p ? raw.p : "", raw.len);
      if (raw.err)
        ddls[t].err = raw.err;
      spy__buf_free(&raw);
      if (t >= w->nstats_set || !w->stats_set[t])
        stats_sql(&ddls[t], w->schema.t[t].name, w->schema.t[t].cols,
                  w->schema.t[t].types);
      spy__buf_putc(&ddls[t], 0);
      if (ddls[t].err)
        rc = ddls[t].err;
      ddl = ddls[t].p;
    }
    parts[np++] =
        (copy_part){tname(w, t), w->schema.t[t].cols, &b->gcopy[t], &b->gcut[t],
                    ddl,         b->gsent[t]};
  }
  if (!rc && b->hc.len)
    parts[np++] = (copy_part){SPY__PG_CALL_ROWS, w->hc_names.p, &b->hc,
                              &b->hccut,         NULL,          b->hcsent};
  if (!rc)
    rc = copy_parts(w, parts, np); /* BEGIN alone when nothing is copied */
  for (int t = 0; ddls && t < b->ngcopy; t++)
    spy__buf_free(&ddls[t]);
  free(ddls);
  free(parts);
  if (!rc && b->copy[SPY__T_SOURCES].len)
    rc = send_sources(w, b);
  unsent(b); /* sent again after a failure, it is sent whole */
  w->pre = "";
  b->uncertain = 0;
  if (!rc) {
    b->uncertain = 1; /* until the server answers */
    rc = commit_batch(w, b);
    if (!rc || PQstatus(w->conn) == CONNECTION_OK)
      b->uncertain = 0;
    b->unflushed = !rc; /* kept until the WAL flush passes it */
    /* SPY_TRACE_PG_LOSE_ANSWERS=1 (the tests' lost answer): the link
     * breaks after the server committed each batch the first time it is
     * sent, so each is found stored or sent again (drain) */
    if (!rc && w->lose && !b->lost_once) {
      b->lost_once = b->uncertain = 1;
      b->unflushed = 0;
      PQfinish(w->conn);
      w->conn = NULL;
      return SPY_EIO;
    }
  }
  if (rc) {
    if (PQstatus(w->conn) == CONNECTION_OK)
      q(w, "ROLLBACK", NULL);
    if (rc == SPY_EEXIST) /* the batch was committed before the link broke */
      return 0;
    return rc;
  }
  stats_committed(w, b);
  return 0;
}

/* Appends b to the list from *head to *tail. */
static void list_add(batch **head, batch **tail, batch *b) {
  if (*tail)
    (*tail)->next = b;
  else
    *head = b;
  *tail = b;
}

/* Takes the oldest pending batch off the list. */
static batch *take_head(pgw *w) {
  batch *b = w->head;
  w->head = b->next;
  if (!w->head)
    w->tail = NULL;
  w->pending_bytes -= b->bytes;
  b->next = NULL;
  return b;
}

/* Frees the oldest pending batch (sent, or found stored). */
static void pop_head(pgw *w) { free_batch(take_head(w)); }

/* ---- committed, not yet flushed ------------------------------------------
 * A batch committed without waiting for the WAL flush is kept (uf_head,
 * outside the pending list and its retry budget) until the server's flush
 * position passes its lsn, then counted stored. If the link breaks before
 * that, the server may have crashed and lost it: it goes back to the front
 * of the pending list as uncertain, so the reconnection finds it stored or
 * sends it again, and the count of lost actions stays exact. A sync
 * COMMIT flushes all the WAL before it: the session's final counts, at
 * close, make every batch before them durable. */
static void keep_unflushed(pgw *w) {
  batch *b = take_head(w);
  list_add(&w->uf_head, &w->uf_tail, b);
  w->uf_actions += b->actions;
}

/* Counts as stored the kept batches the WAL flush has passed (all: every
 * one, after a sync COMMIT). */
static void release_flushed(pgw *w, int all) {
  while (w->uf_head &&
         (all || (w->uf_head->lsn && w->uf_head->lsn <= w->flushed))) {
    batch *b = w->uf_head;
    w->uf_head = b->next;
    if (!w->uf_head)
      w->uf_tail = NULL;
    w->stored += b->actions;
    w->uf_actions -= b->actions;
    free_batch(b);
  }
}

static void requeue_unflushed(pgw *w) {
  if (!w->uf_head)
    return;
  for (batch *b = w->uf_head; b; b = b->next) {
    b->unflushed = 0;
    b->uncertain = 1;
    w->pending_bytes += b->bytes;
  }
  w->uf_tail->next = w->head;
  if (!w->head)
    w->tail = w->uf_tail;
  w->head = w->uf_head;
  w->uf_head = w->uf_tail = NULL;
  w->uf_actions = 0;
}

/* After a lost COMMIT answer: is the batch in the store? 1 yes, 0 no,
 * negative when the server cannot say. */
static int batch_stored(pgw *w, const batch *b) {
  spy__buf s = {0};
  spy__buf_puts(&s, "SELECT 1 FROM action_batches WHERE session_id=");
  lit(&s, w->session_id, strlen(w->session_id));
  spy__buf_puts(&s, " AND first_seq=");
  spy__buf_u64(&s, b->first_seq);
  spy__buf_putc(&s, 0);
  PGresult *r = NULL;
  int rc = s.err ? s.err : q(w, s.p, &r);
  spy__buf_free(&s);
  if (rc)
    return rc;
  rc = PQntuples(r) > 0;
  PQclear(r);
  return rc;
}

/* Sends pending batches, oldest first, while the server takes them. */
static int drain(pgw *w, int force) {
  uint64_t now = mono_ms();
  if (!force && w->next_try_ms && now < w->next_try_ms)
    return SPY_EAGAIN;
  while (w->head) {
    int rc = connect_now(w);
    if (!rc && w->head->uncertain && w->head->first_seq) {
      int there = batch_stored(w, w->head);
      if (there < 0)
        rc = there;
      else
        w->head->uncertain = 0;
      if (there == 1) { /* committed before the link broke: done */
        w->stored += w->head->actions;
        pop_head(w);
        continue;
      }
    }
    if (!rc) {
      rc = send_batch(w, w->head);
      /* another session's transaction got in the way: send it again */
      for (int again = 0; rc == SPY_EAGAIN && again < 8; again++)
        rc = send_batch(w, w->head);
      if (rc && PQstatus(w->conn) == CONNECTION_OK) {
        /* the server refused the batch itself: drop it, do not loop */
        say(w, rc, "a batch was refused");
        atomic_fetch_add(&w->lost, w->head->actions);
        forget_batch(w, w->head);
        calls_gone(w, w->head->serial);
        w->dropped = 1;
        rc = 0;
      } else if (!rc && w->head->unflushed) {
        keep_unflushed(w);
        release_flushed(w, 0);
        continue;
      } else if (!rc) {
        w->stored += w->head->actions;
      }
      if (!rc) {
        pop_head(w);
        continue;
      }
    }
    if (!w->was_down)
      say(w, rc, "lost the connection, buffering");
    w->was_down = 1;
    w->next_try_ms = now + w->backoff_ms;
    w->backoff_ms = w->backoff_ms * 2 > 1000 ? 1000 : w->backoff_ms * 2;
    return rc;
  }
  w->backoff_ms = 100;
  w->next_try_ms = 0;
  return 0;
}

static int pg_commit(void *state) {
  pgw *w = state;
  if (!w->ready) /* nothing was written: a store without its set-up */
    return pg_prepare(w);
  /* every payload the batch's actions name goes in with them */
  int src_rc = spy__src_pipe_drain(w->pipe);
  batch *b = w->cur;
  if (w->merge) {
    int rc = calls_queued(w);
    if (rc < 0) {
      spy__src_pipe_reset(w->pipe);
      return rc;
    }
  }
  if (w->mark.n) {
    spy__cell c[7];
    b->first_seq = w->mark.first;
    int rc = spy__abatch_row(&w->ab, w->session_id, c);
    spy__batch_mark_cells(&w->mark, c);
    if (rc == 0)
      rc = put_row(b, &b->copy[SPY__T_BATCHES], &b->cut[SPY__T_BATCHES],
                   spy__tables[SPY__T_BATCHES].types, c, 7);
    spy__abatch_clear(&w->ab);
    w->mark = (spy__batch_mark){0};
    if (rc < 0) {
      spy__src_pipe_reset(w->pipe);
      return rc;
    }
  }
  if (b->actions || b->copy[SPY__T_SOURCES].len || b->hc.len) {
    if (b->hc.err) {
      spy__src_pipe_reset(w->pipe);
      return SPY_ENOMEM;
    }
    for (int t = 0; t < SPY__T_COUNT; t++)
      if (b->copy[t].err) {
        spy__src_pipe_reset(w->pipe);
        return SPY_ENOMEM;
      }
    for (int t = 0; t < b->ngcopy; t++)
      if (b->gcopy[t].err) {
        spy__src_pipe_reset(w->pipe);
        return SPY_ENOMEM;
      }
    list_add(&w->head, &w->tail, b);
    w->pending_bytes += b->bytes;
    if (!(w->cur = new_batch()))
      return SPY_ENOMEM;
    w->cur->serial = ++w->serial;
  }
  int rc = drain(w, 0);
  /* bounded buffering: drop the oldest batches beyond the budget, but
   * never one whose COMMIT answer was lost (it may be stored: it is
   * checked on reconnection, so that the lost count stays exact) */
  batch **pp = &w->head;
  while (*pp && w->pending_bytes > w->retry_bytes) {
    batch *o = *pp;
    if (o->uncertain) {
      pp = &o->next;
      continue;
    }
    stream_drop(w, o);
    *pp = o->next;
    if (w->tail == o) {
      w->tail = NULL;
      for (batch *t = w->head; t; t = t->next)
        w->tail = t;
    }
    w->pending_bytes -= o->bytes;
    atomic_fetch_add(&w->lost, o->actions);
    forget_batch(w, o);
    calls_gone(w, o->serial);
    free_batch(o);
    w->dropped = 1;
    say(w, SPY_ENOBUFS, "retry buffer full: dropped the oldest batch");
  }
  /* the next batch refers to nothing that may not reach the store */
  if (w->head || w->uf_head || w->dropped)
    spy__src_pipe_reset(w->pipe);
  w->dropped = 0;
  return rc == SPY_EAGAIN ? src_rc : rc;
}

static uint64_t pg_busy(void *state) {
  return spy__src_pipe_busy_ns(((pgw *)state)->pipe);
}

static uint64_t pg_lost(void *state) {
  return atomic_load(&((pgw *)state)->lost);
}

/* Writes the session's final counts (the batches committed but not
 * known flushed are stored once it commits: it waits for the flush); 0
 * or a negative code. */
static int final_update(pgw *w, uint64_t lost) {
  spy__buf s = {0};
  spy__buf_puts(&s, "UPDATE sessions SET actions=");
  spy__buf_i64(&s, (int64_t)(w->stored + w->uf_actions));
  spy__buf_puts(&s, ", actions_lost=");
  spy__buf_i64(&s, (int64_t)lost);
  spy__buf_puts(&s, " WHERE session_id=");
  lit(&s, w->session_id, strlen(w->session_id));
  spy__buf_putc(&s, 0);
  int rc = s.err ? s.err : q(w, s.p, NULL);
  spy__buf_free(&s);
  return rc;
}

/* The indexes still to make, shared by the connections making them. */
typedef struct idx_jobs {
  char **sql; /* one transaction each */
  int n;
  _Atomic int next;
  const char *conninfo;
} idx_jobs;

/* Runs index transactions on c until none is left; 0 or SPY_EIO. */
static int run_index_jobs(PGconn *c, idx_jobs *j) {
  int rc = 0;
  for (int i; !rc && (i = atomic_fetch_add(&j->next, 1)) < j->n;) {
    PGresult *r = PQexec(c, j->sql[i]);
    if (PQresultStatus(r) != PGRES_COMMAND_OK &&
        PQresultStatus(r) != PGRES_TUPLES_OK)
      rc = sqlstate_code(PQresultErrorField(r, PG_DIAG_SQLSTATE));
    PQclear(r);
    if (rc && PQstatus(c) == CONNECTION_OK)
      PQclear(PQexec(c, "ROLLBACK"));
  }
  return rc;
}

/* The second connection's thread: at close the build is over and the
 * server's other core would idle while one backend sorts. What it cannot
 * do (no connection, an error) the first connection does. */
static void *index_helper(void *arg) {
  idx_jobs *j = arg;
  PGconn *c = PQconnectdb(j->conninfo);
  if (PQstatus(c) == CONNECTION_OK) {
    PQsetNoticeProcessor(c, quiet, NULL);
    run_index_jobs(c, j);
  }
  PQfinish(c);
  return NULL;
}

/* Whether the index named name (nlen bytes) is one this writer does not
 * make: a hook Start table's by module (session, build_id, <subject>). A
 * question about one module scans the Start tables instead (as in the
 * SQLite store, schema 6), and the readers read a session's rows through
 * the Start tables' by-plugin index, which starts with the session too:
 * its sort of 100,000 text keys per hook cost the server as much as the
 * by-plugin one's at close. A store that has one keeps it. */
static int index_skipped(const char *name, size_t nlen) {
  static const char sfx[] = "_module";
  size_t k = sizeof sfx - 1;
  if (nlen <= k || memcmp(name + nlen - k, sfx, k) != 0)
    return 0;
  for (const spy__hook *h = spy__hooks; h->hook; h++)
    if (strcmp(h->subject, "_") != 0 && strlen(h->start->snake) == nlen - k &&
        memcmp(h->start->snake, name, nlen - k) == 0)
      return 1;
  return 0;
}

/* Whether the store holds no session but this writer's; -1 when the
 * server cannot say. Such a store gets no index at close: every row has
 * its session, so an index (all of them lead with it) narrows a question
 * by its later columns alone, and on the 20,000-module build the server
 * answers those questions as fast by scanning (psql on the views: the
 * slowest calls of a plugin 48-56 -> 61-63 ms, one module's calls 22 ->
 * 49 ms, one call 26 -> 34 ms, the per-plugin totals 407 -> 183 ms, a
 * module's imports 8-10 -> 10-12 ms; the readers read a session's tables
 * whole), while the sorts at close were ~1/4 of the server's CPU for the
 * trace, all of it after the build. The next session's close builds them
 * over both sessions' rows; later sessions keep them up row by row. */
static int store_alone(pgw *w) {
  PGresult *r = NULL;
  if (q(w, "SELECT count(*) FROM sessions", &r))
    return -1;
  int alone = PQntuples(r) == 1 && atoll(PQgetvalue(r, 0, 0)) <= 1;
  PQclear(r);
  return alone;
}

/* Creates the indexes the database does not have yet (an existing one is
 * not touched: CREATE INDEX would lock its table against other sessions'
 * writes even when it only finds the name taken), each in a transaction
 * of its own: holding one table's lock at a time, it can make another
 * session's batch wait but never deadlock with it. Two connections share
 * the work. Each transaction holds the schema lock shared (a writer
 * changing the schema waits for it, and it for that writer) and a lock of
 * the index's name (two sessions closing at once make each index once). */
static int create_missing_indexes(pgw *w) {
  if (store_alone(w) == 1)
    return 0;
  PGresult *have = NULL;
  int rc = q(w,
             "SELECT indexname FROM pg_indexes WHERE schemaname = "
             "current_schema()",
             &have);
  if (rc)
    return rc;
  spy__buf all = {0}, one = {0};
  spy__pg_index_sql(&w->schema, &all, w->merge);
  spy__buf_putc(&all, 0);
  idx_jobs j = {.conninfo = w->conninfo};
  int cap = 0;
  /* one "CREATE INDEX IF NOT EXISTS <name> ON …;" per line */
  for (char *line = all.err ? NULL : all.p, *end; line && *line && !rc;
       line = end ? end + 1 : NULL) {
    end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char *name = line + strlen("CREATE INDEX IF NOT EXISTS ");
    size_t nlen = strcspn(name, " ");
    int found = 0;
    for (int i = 0; i < PQntuples(have) && !found; i++)
      found = strlen(PQgetvalue(have, i, 0)) == nlen &&
              memcmp(PQgetvalue(have, i, 0), name, nlen) == 0;
    if (found || index_skipped(name, nlen))
      continue;
    one.len = 0;
    /* the trace is durable already; an index a crash loses is made
     * again by the next writer's close, so its commit does not wait for
     * the WAL flush */
    /* no parallel workers either: on a machine of two cores the server
     * would fork them to share cores this writer's two connections use
     * already, and pay their start and the merge on top */
    spy__buf_puts(&one, "BEGIN;SET LOCAL synchronous_commit=off;"
                        "SET LOCAL max_parallel_maintenance_workers=0;"
                        "SELECT pg_advisory_xact_lock_shared("
                        "5497617309364322355);"
                        "SELECT pg_advisory_xact_lock(1936746849,hashtext('");
    spy__buf_put(&one, name, nlen); /* an SQL name: [a-z0-9_] */
    spy__buf_puts(&one, "'));");
    /* every key starts with the session, so later sessions only add
     * at the right: the pages of the rows there now can be full */
    size_t stmt = len && line[len - 1] == ';' ? len - 1 : len;
    spy__buf_put(&one, line, stmt);
    spy__buf_puts(&one, " WITH (fillfactor=100);COMMIT;");
    spy__buf_putc(&one, 0);
    if (j.n == cap) {
      int ncap = cap ? cap * 2 : 32;
      char **n2 = realloc(j.sql, (size_t)ncap * sizeof *n2);
      if (!n2) {
        rc = SPY_ENOMEM;
        break;
      }
      j.sql = n2;
      cap = ncap;
    }
    if (one.err || !(j.sql[j.n] = strdup(one.p))) {
      rc = SPY_ENOMEM;
      break;
    }
    j.n++;
  }
  PQclear(have);
  if (all.err)
    rc = SPY_ENOMEM;
  pthread_t helper;
  int helped =
      !rc && j.n > 1 && pthread_create(&helper, NULL, index_helper, &j) == 0;
  if (!rc)
    rc = run_index_jobs(w->conn, &j);
  if (helped)
    pthread_join(helper, NULL);
  for (int i = 0; i < j.n; i++)
    free(j.sql[i]);
  free(j.sql);
  spy__buf_free(&all);
  spy__buf_free(&one);
  return rc;
}

static int64_t pg_close(void *state) {
  pgw *w = state;
  if (!w)
    return 0;
  if (w->opened && pg_prepare(w) == 0) {
    /* send what is pending and the final counts, retrying while the
     * server is away, for up to retry_ms */
    /* a call that never ends has no row: its Start is kept (by the
     * commit of its batch, calls_queued, this one's too) and the
     * hook_calls view gives it back unended, as after a kill */
    pg_commit(w);
    uint64_t deadline = mono_ms() + w->retry_ms;
    for (;;) {
      if (w->head)
        drain(w, 1);
      /* (a new connection puts the unflushed batches back: look again) */
      if (!w->head && connect_now(w) == 0 && !w->head &&
          final_update(w, atomic_load(&w->lost)) == 0) {
        release_flushed(w, 1);
        break;
      }
      if (mono_ms() >= deadline) {
        release_flushed(w, 1); /* committed: stored, as they were */
        for (batch *b = w->head, *n; b; b = n) {
          n = b->next;
          stream_drop(w, b);
          atomic_fetch_add(&w->lost, b->actions);
          free_batch(b);
        }
        w->head = w->tail = NULL;
        if (connect_now(w) == 0) /* record the loss if it can be */
          final_update(w, atomic_load(&w->lost));
        break;
      }
      struct timespec ts = {0, 50 * 1000000};
      nanosleep(&ts, NULL);
    }
  }
  /* indexes: none in a store of one session (store_alone), built in one
   * pass over the first two sessions' rows by the second's close (smaller
   * and cheaper than growing them row by row), kept up by later sessions */
  if (w->ready && w->conn && PQstatus(w->conn) == CONNECTION_OK &&
      create_missing_indexes(w) != 0)
    say(w, SPY_EIO, "creating the indexes");
  uint64_t lost = atomic_load(&w->lost);
  stream_drop(w, w->st.b);
  if (w->conn)
    PQfinish(w->conn);
  free_batch(w->cur);
  for (batch *b = w->uf_head, *n; b; b = n) {
    n = b->next;
    free_batch(b);
  }
  spy__schema_free(&w->schema);
  spy__buf_free(&w->rec);
  spy__buf_free(&w->sorted);
  spy__abatch_free(&w->ab);
  spy__src_pipe_free(w->pipe);
  spy__hset_free(&w->gone);
  free(w->st.tab);
  free(w->st.k);
  free(w->stats_set);
  for (int t = 0; t < w->ntname; t++)
    free(w->tname[t]);
  free(w->tname);
  while (w->noc)
    ocall_drop(w, w->noc - 1);
  free(w->oc);
  spy__buf_free(&w->hc_names);
  free(w->conninfo);
  free(w->session_id);
  free(w->cwd);
  free(w);
  return (int64_t)lost;
}

/* A thread waits for the trace: pack on a second core meanwhile. */
static void pg_hurry(void *state, int on) {
  spy__src_pipe_hurry(((pgw *)state)->pipe, on);
}

const spy_trace_writer_ops spy__writer_pg = {.name = "postgres",
                                             .open = pg_open,
                                             .source = pg_source,
                                             .action = pg_action,
                                             .commit = pg_commit,
                                             .close = pg_close,
                                             .lost = pg_lost,
                                             .busy_ns = pg_busy,
                                             .flags = SPY_TRACE_WRITER_RECORDS |
                                                      SPY_TRACE_WRITER_CONNINFO,
                                             .hurry = pg_hurry,
                                             .prepare = pg_prepare};
