/* reader_sqlite.c — the reader's SQLite backend: the session's
 * action_batches rows stepped one at a time in first_seq order (one batch
 * unpacked in memory at once); from schema 4 also the rows of every
 * built-in kind's table, each stepped in rowid order (the order the
 * writer inserted them: seq, then element order) with a statement of its
 * own, over the rowid range session_rows gives for the session; payload blobs
 * by id from the sources table (a store whose writer was killed before it
 * built the sources key, schema 7: by rowid, from a map of the ids loaded
 * in one scan at open), the summary's payload sizes in one query, and the
 * hook calls a query asks for (a build's, a plugin's, the N slowest) in
 * one statement over the hook_calls table. Opened read-only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "reader.h"

typedef struct sq {
  sqlite3 *db;
  sqlite3_stmt *iter, *src;
  sqlite3_stmt **rows; /* schema 4+: per derived table, NULL: none */
  int nrows;
  int schema;
  sqlite3_int64 key;    /* the session's key, -1: unknown session */
  sqlite3_stmt *ranges; /* its session_rows; NULL: the store has none */
  struct srcrow *map;   /* an unkeyed sources table's ids, by hash */
  size_t nmap;
} sq;

/* A sources row of a store whose sources have no key (schema 7, a writer
 * killed before its close built it): found by rowid from a map loaded in
 * one scan, not by scanning the table per payload. */
typedef struct srcrow {
  uint64_t hash[2];
  sqlite3_int64 rowid;
} srcrow;

static void sq_close(spy_trace_reader *r) {
  sq *s = r->st;
  if (!s)
    return;
  for (int t = 0; t < s->nrows; t++)
    sqlite3_finalize(s->rows[t]);
  free(s->rows);
  sqlite3_finalize(s->ranges);
  sqlite3_finalize(s->iter);
  sqlite3_finalize(s->src);
  free(s->map);
  if (s->db)
    sqlite3_close(s->db);
  free(s);
  r->st = NULL;
}

/* The rowids the session's rows of `table` lie between, from the
 * session_rows table writers since it was added keep: 1 found, 0 the
 * session has no row in it, -1 the store cannot say (an older writer's
 * session: every row is scanned). */
static int row_range(sq *s, const char *table, sqlite3_int64 *lo,
                     sqlite3_int64 *hi) {
  if (!s->ranges)
    return -1;
  sqlite3_bind_text(s->ranges, 2, table, -1, SQLITE_STATIC);
  int found = sqlite3_step(s->ranges) == SQLITE_ROW;
  if (found) {
    *lo = sqlite3_column_int64(s->ranges, 0);
    *hi = sqlite3_column_int64(s->ranges, 1);
  }
  sqlite3_reset(s->ranges);
  return found;
}

/* Whether the writer of the session kept session_rows (prepares the
 * statement that reads them when it did). */
static void open_ranges(sq *s) {
  if (sqlite3_prepare_v2(s->db,
                         "SELECT lo, hi FROM session_rows WHERE session=?1 AND "
                         "tbl=?2",
                         -1, &s->ranges, NULL) != SQLITE_OK) {
    s->ranges = NULL; /* a store written before session_rows */
    return;
  }
  sqlite3_stmt *any;
  int has = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM session_rows WHERE session=?1",
                         -1, &any, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(any, 1, s->key);
    has = sqlite3_step(any) == SQLITE_ROW;
    sqlite3_finalize(any);
  }
  if (!has) { /* an older writer's session in a newer store */
    sqlite3_finalize(s->ranges);
    s->ranges = NULL;
    return;
  }
  sqlite3_bind_int64(s->ranges, 1, s->key);
}

/* Schema 6: the rows of a hook Start's or End's table are those of its
 * kept table and the ones its calls' hook_calls rows hold
 * (spy__call_select_sql), merged in seq order; hook_calls is read over
 * the session's rowid range when session_rows has one. */
static int open_call(spy_trace_reader *r, int t, const spy__hook *h, int end,
                     spy__buf *q) {
  sq *s = r->st;
  sqlite3_int64 lo = 0, hi = 0;
  int ranged = row_range(s, "hook_calls", &lo, &hi);
  q->len = 0;
  spy__buf_puts(q, "SELECT * FROM (");
  spy__call_select_sql(q, h, end, "?1",
                       ranged > 0    ? "h.rowid BETWEEN ?2 AND ?3 AND "
                                       "h.session_id=?4"
                       : ranged == 0 ? "0"
                                     : "h.session_id=?4");
  spy__buf_puts(q, ") ORDER BY seq");
  spy__buf_putc(q, 0);
  if (q->err)
    return spy__reader_err(r, SPY_ENOMEM, "out of memory");
  if (sqlite3_prepare_v2(s->db, q->p, -1, &s->rows[t], NULL) != SQLITE_OK)
    return spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
  sqlite3_bind_int64(s->rows[t], 1, s->key);
  if (ranged > 0) {
    sqlite3_bind_int64(s->rows[t], 2, lo);
    sqlite3_bind_int64(s->rows[t], 3, hi);
  }
  sqlite3_bind_text(s->rows[t], 4, r->session_id, -1, SQLITE_STATIC);
  return 0;
}

/* Schema 4+: the session's key and one statement per derived table of the
 * built-in kinds, in the order the writer inserted its rows: by rowid,
 * within the range session_rows gives (a store holding many sessions is
 * not scanned whole for each), or over the whole table for a session
 * written before session_rows (NOT INDEXED: a child table's index would
 * give another order). A table the store lacks (a kind added to the
 * catalog later) reads as empty. */
static int open_tables(spy_trace_reader *r, const char *path) {
  sq *s = r->st;
  int rc = spy__reader_tables(r);
  if (rc < 0)
    return rc;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT session FROM sessions WHERE "
                         "session_id=?1",
                         -1, &st, NULL) != SQLITE_OK)
    return spy__reader_err(r, SPY_EIO, "%s", sqlite3_errmsg(s->db));
  sqlite3_bind_text(st, 1, r->session_id, -1, SQLITE_STATIC);
  /* an unknown session has no rows (as it has no action_batches) */
  sqlite3_int64 key =
      sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  s->key = key;
  open_ranges(s);
  s->rows = calloc((size_t)r->schema.n, sizeof *s->rows);
  if (!s->rows)
    return spy__reader_err(r, SPY_ENOMEM, "%s: out of memory", path);
  s->nrows = r->schema.n;
  spy__buf q = {0};
  for (int t = 0; t < r->schema.n && rc == 0; t++) {
    const spy__gtable *g = &r->schema.t[t];
    const spy__hook *call = NULL;
    int end = 0;
    for (const spy__hook *h = spy__hooks; s->schema >= 6 && h->hook; h++)
      if (g->depth == 0 && (h->start == g->rec || h->end == g->rec)) {
        call = h;
        end = h->end == g->rec;
      }
    if (call) {
      if ((rc = open_call(r, t, call, end, &q)) < 0)
        break;
      continue;
    }
    sqlite3_int64 lo = 0, hi = 0;
    int ranged = row_range(s, g->name, &lo, &hi);
    if (ranged == 0)
      continue; /* the session has no row there */
    q.len = 0;
    spy__buf_puts(&q, "SELECT ");
    spy__buf_puts(&q, g->cols);
    spy__buf_puts(&q, " FROM ");
    spy__buf_puts(&q, g->name);
    spy__buf_puts(&q, ranged > 0 ? " NOT INDEXED WHERE rowid BETWEEN ?2 AND "
                                   "?3 AND session=?1 ORDER BY rowid"
                                 : " NOT INDEXED WHERE session=?1 ORDER BY "
                                   "rowid");
    spy__buf_putc(&q, 0);
    if (q.err) {
      rc = spy__reader_err(r, SPY_ENOMEM, "%s: out of memory", path);
      break;
    }
    if (sqlite3_prepare_v2(s->db, q.p, -1, &s->rows[t], NULL) != SQLITE_OK) {
      sqlite3_stmt *has;
      int exists = 1;
      if (sqlite3_prepare_v2(s->db,
                             "SELECT 1 FROM sqlite_master WHERE "
                             "name=?1",
                             -1, &has, NULL) == SQLITE_OK) {
        sqlite3_bind_text(has, 1, g->name, -1, SQLITE_STATIC);
        exists = sqlite3_step(has) == SQLITE_ROW;
        sqlite3_finalize(has);
      }
      if (exists)
        rc = spy__reader_err(r, SPY_EIO, "%s: %s", path, sqlite3_errmsg(s->db));
      s->rows[t] = NULL;
      continue;
    }
    sqlite3_bind_int64(s->rows[t], 1, key);
    if (ranged > 0) {
      sqlite3_bind_int64(s->rows[t], 2, lo);
      sqlite3_bind_int64(s->rows[t], 3, hi);
    }
  }
  spy__buf_free(&q);
  return rc;
}

static int cmp_srcrow(const void *a, const void *b) {
  const srcrow *x = a, *y = b;
  if (x->hash[0] != y->hash[0])
    return x->hash[0] < y->hash[0] ? -1 : 1;
  return x->hash[1] < y->hash[1] ? -1 : x->hash[1] > y->hash[1];
}

/* 1 when the sources table has no unique key (then s->map holds its ids),
 * 0 when it has, or an SPY_E* code. */
static int load_map(spy_trace_reader *r, sq *s) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT count(*) FROM pragma_index_list('sources') "
                         "WHERE \"unique\"",
                         -1, &st, NULL) != SQLITE_OK)
    return spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
  int keyed = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
  sqlite3_finalize(st);
  if (keyed)
    return 0;
  if (sqlite3_prepare_v2(s->db, "SELECT rowid, source_id FROM sources", -1, &st,
                         NULL) != SQLITE_OK)
    return spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
  size_t cap = 0;
  int step, rc = 1;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *id = (const char *)sqlite3_column_text(st, 1);
    uint64_t h[2];
    if (!id || spy__hash_parse(id, (size_t)sqlite3_column_bytes(st, 1), h) < 0)
      continue; /* not an id a payload can name */
    if (s->nmap == cap) {
      cap = cap ? cap * 2 : 4096;
      srcrow *m = realloc(s->map, cap * sizeof *m);
      if (!m) {
        rc = spy__reader_err(r, SPY_ENOMEM, "out of memory");
        break;
      }
      s->map = m;
    }
    s->map[s->nmap++] = (srcrow){{h[0], h[1]}, sqlite3_column_int64(st, 0)};
  }
  if (rc == 1 && step != SQLITE_DONE)
    rc = spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
  sqlite3_finalize(st);
  if (rc == 1 && s->nmap)
    qsort(s->map, s->nmap, sizeof *s->map, cmp_srcrow);
  return rc;
}

static int sq_open(spy_trace_reader *r, const char *path) {
  sq *s = calloc(1, sizeof *s);
  if (!s)
    return spy__reader_err(r, SPY_ENOMEM, "%s: out of memory", path);
  r->st = s;
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return spy__reader_err(r, SPY_ENOENT, "cannot open %s", path);
  sqlite3_busy_timeout(s->db, 5000);
  int v = spy__sqlite_check_version(s->db);
  if (v == SPY_EBADSCHEMA)
    return spy__reader_err(
        r, v, "%s: written by a newer spyglass (schema version too new)", path);
  if (v <= 0)
    return spy__reader_err(r, SPY_EBADSCHEMA, "%s: not a spyglass trace", path);
  s->schema = v;
  if (!r->session_id) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT session_id FROM sessions ORDER BY "
                           "created_at DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
      return spy__reader_err(r, SPY_EIO, "%s", sqlite3_errmsg(s->db));
    int row = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0);
    if (row)
      r->session_id = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (row && !r->session_id)
      return spy__reader_err(r, SPY_ENOMEM, "%s: out of memory", path);
    if (!r->session_id)
      return spy__reader_err(r, SPY_ENOENT, "%s: no session", path);
  }
  int unkeyed = v >= 7 ? load_map(r, s) : 0;
  if (unkeyed < 0)
    return unkeyed;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT codec, size, data FROM action_batches WHERE "
                         "session_id=?1 ORDER BY first_seq",
                         -1, &s->iter, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(s->db,
                         unkeyed
                             ? "SELECT size, codec, content, base_source_id "
                               "FROM sources WHERE rowid=?1"
                         : v >= 3 ? "SELECT size, codec, content, "
                                    "base_source_id FROM sources WHERE "
                                    "source_id=?1"
                                  : "SELECT size, codec, content, NULL FROM "
                                    "sources WHERE source_id=?1",
                         -1, &s->src, NULL) != SQLITE_OK)
    return spy__reader_err(r, SPY_EIO, "%s", sqlite3_errmsg(s->db));
  sqlite3_bind_text(s->iter, 1, r->session_id, -1, SQLITE_STATIC);
  return v >= 4 ? open_tables(r, path) : 0;
}

static int sq_rewind(spy_trace_reader *r) {
  sqlite3_reset(((sq *)r->st)->iter);
  return 0;
}

static void sq_trewind(spy_trace_reader *r) {
  sq *s = r->st;
  for (int t = 0; t < s->nrows; t++)
    if (s->rows[t])
      sqlite3_reset(s->rows[t]);
}

static int sq_tnext(spy_trace_reader *r, int t, spy__cell *c) {
  sq *s = r->st;
  sqlite3_stmt *st = s->rows[t];
  if (!st)
    return 0;
  int step = sqlite3_step(st);
  if (step == SQLITE_DONE)
    return 0;
  if (step != SQLITE_ROW)
    return spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
  int n = sqlite3_column_count(st);
  for (int i = 0; i < n; i++) {
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER:
    case SQLITE_FLOAT:
      c[i] = (spy__cell){SPY__COL_INT, sqlite3_column_int64(st, i), NULL, 0};
      break;
    case SQLITE_TEXT:
    case SQLITE_BLOB: {
      const char *p = (const char *)sqlite3_column_text(st, i);
      size_t len = (size_t)sqlite3_column_bytes(st, i);
      if (!p)
        return spy__reader_err(r, SPY_ENOMEM, "sqlite: out of memory");
      c[i] = (spy__cell){SPY__COL_TEXT, 0, p, len};
      break;
    }
    default: c[i] = (spy__cell){0};
    }
  }
  return 1;
}

static int sq_next(spy_trace_reader *r, spy_trace_action *a) {
  sq *s = r->st;
  for (;;) {
    int rc = spy__reader_batch_next(r, a);
    if (rc != 0)
      return rc;
    int step = sqlite3_step(s->iter); /* the next batch */
    if (step == SQLITE_DONE)
      return 0;
    if (step != SQLITE_ROW)
      return spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
    rc = spy__reader_batch(r, sqlite3_column_int(s->iter, 0),
                           sqlite3_column_blob(s->iter, 2),
                           (size_t)sqlite3_column_bytes(s->iter, 2),
                           (size_t)sqlite3_column_int64(s->iter, 1));
    if (rc < 0)
      return rc;
  }
}

static int sq_fetch(spy_trace_reader *r, const char *id, spy__blob *b) {
  sq *s = r->st;
  memcpy(b->id, id, 32);
  b->id[32] = 0;
  b->base[0] = 0;
  b->z.len = 0;
  if (s->map) {
    srcrow key = {{0, 0}, 0}, *m = NULL;
    if (spy__hash_parse(b->id, 32, key.hash) == 0)
      m = bsearch(&key, s->map, s->nmap, sizeof *m, cmp_srcrow);
    if (!m)
      return SPY_ENOENT;
    sqlite3_bind_int64(s->src, 1, m->rowid);
  } else
    sqlite3_bind_text(s->src, 1, b->id, 32, SQLITE_STATIC);
  int step = sqlite3_step(s->src), rc = 0;
  if (step == SQLITE_ROW) {
    b->size = (size_t)sqlite3_column_int64(s->src, 0);
    b->codec = sqlite3_column_int(s->src, 1);
    spy__buf_put(&b->z, sqlite3_column_blob(s->src, 2),
                 (size_t)sqlite3_column_bytes(s->src, 2));
    const unsigned char *base = sqlite3_column_text(s->src, 3);
    if (base && sqlite3_column_bytes(s->src, 3) == 32)
      memcpy(b->base, base, 33);
    rc = b->z.err;
  } else
    rc = step == SQLITE_DONE
             ? SPY_ENOENT
             : spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
  sqlite3_reset(s->src);
  return rc;
}

static int cmp_hash(const void *key, const void *el) {
  const uint64_t *h = key;
  const spy__refcount *c = el;
  if (h[0] != c->hash[0])
    return h[0] < c->hash[0] ? -1 : 1;
  return h[1] < c->hash[1] ? -1 : h[1] > c->hash[1];
}

/* The ids as one JSON array, read back by json_each: one query. */
static int sq_sizes(spy_trace_reader *r, spy__refcount *rs, size_t n) {
  sq *s = r->st;
  spy__buf ids = {0};
  spy__buf_putc(&ids, '[');
  for (size_t i = 0; i < n; i++) {
    char id[33];
    spy_trace_hash_hex(rs[i].hash, id);
    spy__buf_puts(&ids, i ? ",\"" : "\"");
    spy__buf_put(&ids, id, 32);
    spy__buf_putc(&ids, '"');
  }
  spy__buf_putc(&ids, ']');
  if (ids.err) {
    spy__buf_free(&ids);
    return spy__reader_err(r, SPY_ENOMEM, "out of memory");
  }
  sqlite3_stmt *st;
  int rc = 0;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT source_id, size, length(content) FROM "
                         "sources WHERE source_id IN (SELECT value FROM "
                         "json_each(?1))",
                         -1, &st, NULL) != SQLITE_OK) {
    spy__buf_free(&ids);
    return spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
  }
  sqlite3_bind_text(st, 1, ids.p, (int)ids.len, SQLITE_STATIC);
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    uint64_t h[2];
    const char *id = (const char *)sqlite3_column_text(st, 0);
    if (!id || spy__hash_parse(id, strlen(id), h) < 0)
      continue;
    spy__refcount *c = bsearch(h, rs, n, sizeof *rs, cmp_hash);
    if (!c)
      continue;
    c->found = 1;
    c->size = (uint64_t)sqlite3_column_int64(st, 1);
    c->stored = (uint64_t)sqlite3_column_int64(st, 2);
  }
  if (step != SQLITE_DONE)
    rc = spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
  sqlite3_finalize(st);
  spy__buf_free(&ids);
  return rc;
}

static int64_t sq_lost(spy_trace_reader *r) {
  sq *s = r->st;
  sqlite3_stmt *st;
  int64_t lost = -1;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT actions_lost FROM sessions WHERE "
                         "session_id=?1",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, r->session_id, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_type(st, 0) != SQLITE_NULL)
      lost = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  return lost;
}

static uint64_t sq_replaced(spy_trace_reader *r) {
  (void)r;
  return 0; /* the store keeps the bytes as they were */
}

/* The hook_calls table (schema 4+; its rows are written as calls end, so
 * rowid order is End order, the order a replay finds them in): one query,
 * not every action of the session rebuilt from its tables. The query's
 * filter, order and limit are the statement's WHERE, ORDER BY and LIMIT,
 * so `--slowest 5` reads the session's rows once and SQLite keeps the 5
 * best in its sorter (no index gives the order by duration; the
 * writer's hook_calls_plugin serves a plugin's rows). A call that never
 * ended has a row with a NULL ended_at, which a replay does not report
 * either. Start order and the slowest need start_seq (schema 6) for their
 * ties: an older store says SPY_ENOTSUP and is replayed. */
/* End order: schema 6 rows by end_seq (a row a commit inserted before
 * its End is updated in place), older rows (no end_seq) by rowid, before
 * them. */
#define CALL_ORDER "end_seq IS NOT NULL, end_seq, rowid"
#define CALL_ORDER_5 "rowid"

static int sq_calls(spy_trace_reader *r, const spy_trace_call_query *q,
                    int (*cb)(void *, const spy_trace_hook_call *), void *arg) {
  sq *s = r->st;
  sqlite3_stmt *st;
  if (s->schema < 4 || (q->order != SPY_TRACE_CALLS_ENDED && s->schema < 6))
    return SPY_ENOTSUP;
  sqlite3_int64 lo = 0, hi = 0;
  int ranged = row_range(s, "hook_calls", &lo, &hi);
  if (ranged == 0)
    return 0; /* the session made no call */
  const char *order =
      q->order == SPY_TRACE_CALLS_SLOWEST   ? SPY__CALLS_SLOW_ORDER
      : q->order == SPY_TRACE_CALLS_STARTED ? SPY__CALLS_START_ORDER
      : s->schema >= 6                      ? CALL_ORDER
                                            : CALL_ORDER_5;
  /* the session's rows by their rowid range, or a plugin's by the
   * writer's index (its entries carry the rowid the range tests) */
  const char *from = ranged < 0  ? " WHERE"
                     : q->plugin ? " WHERE rowid BETWEEN ?2 AND ?3 AND"
                                 : " NOT INDEXED WHERE rowid BETWEEN ?2 AND "
                                   "?3 AND";
  char sql[1024];
  snprintf(sql, sizeof sql,
           "SELECT build_id, hook_type, plugin_name, module_id, call_id, "
           "started_at, ended_at, input_source_id, output_source_id FROM "
           "hook_calls%s session_id=?1 AND ended_at IS NOT NULL%s%s%s "
           "ORDER BY %s LIMIT ?7",
           from, q->build ? " AND build_id=?4" : "",
           !q->plugin     ? ""
           : q->plugin[0] ? " AND plugin_name=?5"
                          : " AND coalesce(plugin_name, '')=?5",
           q->module ? " AND coalesce(module_id, '')=?6" : "", order);
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
    return SPY_ENOTSUP;
  if (q->build)
    sqlite3_bind_int64(st, 4, q->build);
  if (q->plugin)
    sqlite3_bind_text(st, 5, q->plugin, -1, SQLITE_STATIC);
  if (q->module)
    sqlite3_bind_text(st, 6, q->module, -1, SQLITE_STATIC);
  sqlite3_bind_int64(
      st, 7, q->limit && q->limit <= INT64_MAX ? (sqlite3_int64)q->limit : -1);
  sqlite3_bind_text(st, 1, r->session_id, -1, SQLITE_STATIC);
  if (ranged > 0) {
    sqlite3_bind_int64(st, 2, lo);
    sqlite3_bind_int64(st, 3, hi);
  }
  int step, rc = 0;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *plugin = (const char *)sqlite3_column_text(st, 2);
    const char *module = (const char *)sqlite3_column_text(st, 3);
    const char *call = (const char *)sqlite3_column_text(st, 4);
    spy_trace_hook_call c = {(uint32_t)sqlite3_column_int64(st, 0),
                             NULL,
                             plugin ? plugin : "",
                             module ? module : "",
                             call ? call : "",
                             (uint64_t)sqlite3_column_int64(st, 5),
                             (uint64_t)sqlite3_column_int64(st, 6),
                             0,
                             0,
                             {0, 0},
                             {0, 0}};
    const char *id[2] = {(const char *)sqlite3_column_text(st, 7),
                         (const char *)sqlite3_column_text(st, 8)};
    const size_t idn[2] = {(size_t)sqlite3_column_bytes(st, 7),
                           (size_t)sqlite3_column_bytes(st, 8)};
    rc = spy__reader_call_row(
        r, "hook_calls", (const char *)sqlite3_column_text(st, 1), id, idn, &c);
    if (rc < 0 || cb(arg, &c))
      break;
  }
  if (rc == 0 && step != SQLITE_ROW && step != SQLITE_DONE)
    rc = spy__reader_err(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(s->db));
  sqlite3_finalize(st);
  return rc;
}

const spy__reader_ops spy__reader_sqlite = {
    "sqlite", sq_open,     sq_next,  sq_rewind, sq_fetch,   NULL,    sq_sizes,
    sq_lost,  sq_replaced, sq_close, sq_tnext,  sq_trewind, sq_calls};
