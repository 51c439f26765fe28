/* reader.c — one reader over the three stores. Each store yields the
 * session's actions in seq order — JSON lines (logs.json and meta.json;
 * the action_batches of SQL stores of schema version 1) or binary records
 * (action_batches, schema versions 2 and 3) — and payloads by
 * content id (StringRef lines; the sources table); everything else —
 * builds, modules, imports, hook calls, the summary — is derived from the
 * action stream the same way for all three. A store whose schema version
 * is newer than SPY_TRACE_SCHEMA_VERSION is refused.
 *
 * A payload stored as a delta (schema version 3) names its base: the
 * reader fetches the chain down to a standalone blob, at most
 * SPY__SRC_READ_DEPTH deep, then decodes it back up. A missing base, a
 * cycle or a longer chain is an error, never a guess. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "store.h"

int spy__sqlite_check_version(sqlite3 *db);
int spy__pg_check_version(PGconn *c);

typedef struct line {
  const char *p;
  size_t n;
  uint64_t seq;
} line;

/* One stored blob of a payload's chain. */
typedef struct blob {
  spy__buf z;
  int codec;
  size_t size;
  char id[33], base[33]; /* base: "" when none */
} blob;

typedef struct srcref {
  uint64_t hash[2];
  const char *p; /* jsonl: the content's JSON string token */
  size_t n;
} srcref;

enum { ST_JSONL, ST_SQLITE, ST_PG };

struct spy_trace_reader {
  int type;
  char err[512];
  char *session_id;
  /* jsonl */
  char *text[2];
  line *lines;
  size_t nlines, cap_lines;
  srcref *refs;
  size_t nrefs, cap_refs;
  int64_t jsonl_lost;
  /* sqlite */
  sqlite3 *db;
  sqlite3_stmt *iter, *src;
  /* pg */
  PGconn *pg;
  PGresult *rows;
  /* iteration: SQL stores unpack one action batch at a time */
  size_t pos;
  spy__buf btext;
  size_t boff;
  int brecords; /* the current batch holds binary records (schema 2) */
  spy_trace_arena arena, sarena; /* actions; payload lookups */
  spy__buf buf, buf2;
  blob chain[SPY__SRC_READ_DEPTH + 1];
  int schema; /* SQL stores: the version; 3 and up have base_source_id */
};

static int seterr(spy_trace_reader *r, int rc, const char *fmt, const char *a) {
  snprintf(r->err, sizeof r->err, fmt, a ? a : "");
  return rc;
}

const char *spy_trace_reader_error(const spy_trace_reader *r) {
  return r && r->err[0] ? r->err : "no error";
}

static int cmp_line(const void *a, const void *b) {
  const line *x = a, *y = b;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_ref(const void *a, const void *b) {
  const srcref *x = a, *y = b;
  if (x->hash[0] != y->hash[0])
    return x->hash[0] < y->hash[0] ? -1 : 1;
  return x->hash[1] < y->hash[1] ? -1 : x->hash[1] > y->hash[1];
}

static int index_jsonl(spy_trace_reader *r, char *text, size_t n) {
  char *p = text, *end = text + n;
  while (p < end) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    char *e = nl ? nl : end;
    size_t len = (size_t)(e - p);
    if (len > 2) {
      if (len > 40 &&
          memcmp(p, "{\"action\":\"StringRef\",\"id\":\"", 28) == 0) {
        if (r->nrefs == r->cap_refs) {
          r->cap_refs = r->cap_refs ? 2 * r->cap_refs : 256;
          srcref *g = realloc(r->refs, r->cap_refs * sizeof *g);
          if (!g)
            return SPY_ENOMEM;
          r->refs = g;
        }
        srcref *s = &r->refs[r->nrefs];
        const char *c = p + 28 + 32 + 12; /* `","content":` */
        if (spy__hash_parse(p + 28, 32, s->hash) == 0 && c < e) {
          s->p = c;
          s->n = (size_t)(e - c) - 1; /* drop the closing brace */
          r->nrefs++;
        }
      } else {
        if (r->nlines == r->cap_lines) {
          r->cap_lines = r->cap_lines ? 2 * r->cap_lines : 1024;
          line *g = realloc(r->lines, r->cap_lines * sizeof *g);
          if (!g)
            return SPY_ENOMEM;
          r->lines = g;
        }
        line *l = &r->lines[r->nlines++];
        l->p = p;
        l->n = len;
        const char *s = memmem(p, len < 300 ? len : 300, ",\"seq\":", 7);
        l->seq = s ? strtoull(s + 7, NULL, 10) : 0;
      }
    }
    p = e + 1;
  }
  return 0;
}

static int open_jsonl(spy_trace_reader *r, const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/spyglass.json", dir);
  size_t n;
  char *meta = spy__slurp(path, &n);
  if (!meta && errno == ENOMEM)
    return seterr(r, SPY_ENOMEM, "%s: out of memory", dir);
  r->jsonl_lost = -1;
  if (meta) {
    const char *v = strstr(meta, "\"schema_version\":");
    int ver = v ? atoi(v + 17) : 0;
    const char *l = strstr(meta, "\"lost\":");
    if (l)
      r->jsonl_lost = atoll(l + 7);
    free(meta);
    if (ver > SPY_TRACE_SCHEMA_VERSION)
      return seterr(r, SPY_EBADSCHEMA,
                    "%s: written by a newer spyglass (schema version too new)",
                    dir);
  }
  const char *names[2] = {"meta.json", "logs.json"};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    r->text[i] = spy__slurp(path, &n);
    if (!r->text[i] && errno == ENOMEM)
      return seterr(r, SPY_ENOMEM, "%s: out of memory", dir);
    if (!r->text[i]) {
      if (i == 0)
        continue;
      return seterr(r, SPY_ENOENT, "%s: no logs.json", dir);
    }
    int rc = index_jsonl(r, r->text[i], n);
    if (rc < 0)
      return rc;
  }
  qsort(r->lines, r->nlines, sizeof *r->lines, cmp_line);
  qsort(r->refs, r->nrefs, sizeof *r->refs, cmp_ref);
  return 0;
}

static int open_sqlite(spy_trace_reader *r, const char *path,
                       const char *session) {
  if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return seterr(r, SPY_ENOENT, "cannot open %s", path);
  sqlite3_busy_timeout(r->db, 5000);
  int v = spy__sqlite_check_version(r->db);
  if (v == SPY_EBADSCHEMA)
    return seterr(
        r, v, "%s: written by a newer spyglass (schema version too new)", path);
  if (v <= 0)
    return seterr(r, SPY_EBADSCHEMA, "%s: not a spyglass trace", path);
  r->schema = v;
  if (!session) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(r->db,
                           "SELECT session_id FROM sessions ORDER BY "
                           "created_at DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
      return seterr(r, SPY_EIO, "%s", sqlite3_errmsg(r->db));
    int row = sqlite3_step(st) == SQLITE_ROW;
    if (row)
      r->session_id = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (row && !r->session_id)
      return seterr(r, SPY_ENOMEM, "%s: out of memory", path);
    if (!r->session_id)
      return seterr(r, SPY_ENOENT, "%s: no session", path);
  }
  if (sqlite3_prepare_v2(r->db,
                         "SELECT codec, size, data FROM action_batches WHERE "
                         "session_id=?1 ORDER BY first_seq",
                         -1, &r->iter, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(r->db,
                         v >= 3 ? "SELECT size, codec, content, base_source_id "
                                  "FROM sources WHERE source_id=?1"
                                : "SELECT size, codec, content, NULL FROM "
                                  "sources WHERE source_id=?1",
                         -1, &r->src, NULL) != SQLITE_OK)
    return seterr(r, SPY_EIO, "%s", sqlite3_errmsg(r->db));
  sqlite3_bind_text(r->iter, 1, r->session_id, -1, SQLITE_STATIC);
  return 0;
}

static int open_pg(spy_trace_reader *r, const char *conninfo) {
  r->pg = PQconnectdb(conninfo);
  if (PQstatus(r->pg) != CONNECTION_OK)
    return seterr(r, SPY_ECONNREFUSED, "postgres: %s", PQerrorMessage(r->pg));
  PGresult *res = PQexec(r->pg, "SELECT 1 FROM spyglass_meta LIMIT 1");
  int has = PQresultStatus(res) == PGRES_TUPLES_OK;
  PQclear(res);
  if (!has)
    return seterr(r, SPY_ENOENT, "postgres: no spyglass trace here%s", NULL);
  r->schema = spy__pg_check_version(r->pg);
  if (r->schema == SPY_EBADSCHEMA)
    return seterr(r, SPY_EBADSCHEMA,
                  "postgres: written by a newer spyglass (schema version too "
                  "new)%s",
                  NULL);
  if (!r->session_id) {
    res = PQexec(r->pg, "SELECT session_id FROM sessions ORDER BY created_at "
                        "DESC LIMIT 1");
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
      r->session_id = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (!r->session_id)
      return seterr(r, SPY_ENOENT, "postgres: no session%s", NULL);
  }
  const char *params[1] = {r->session_id};
  r->rows = PQexecParams(r->pg,
                         "SELECT codec, size, data FROM action_batches WHERE "
                         "session_id=$1 ORDER BY first_seq",
                         1, NULL, params, NULL, NULL, 1);
  if (PQresultStatus(r->rows) != PGRES_TUPLES_OK)
    return seterr(r, SPY_EIO, "postgres: %s", PQerrorMessage(r->pg));
  return 0;
}

int spy_trace_reader_open(const char *store, const char *session_id,
                          spy_trace_reader **out) {
  *out = NULL;
  if (!store)
    return SPY_EINVAL;
  spy_trace_reader *r = calloc(1, sizeof *r);
  if (!r)
    return SPY_ENOMEM;
  *out = r;
  if (session_id && !(r->session_id = strdup(session_id)))
    return SPY_ENOMEM;
  if (strncmp(store, "postgres://", 11) == 0 ||
      strncmp(store, "postgresql://", 13) == 0 || strchr(store, '=')) {
    r->type = ST_PG;
    return open_pg(r, store);
  }
  struct stat sb;
  if (stat(store, &sb) != 0)
    return seterr(r, SPY_ENOENT, "%s: no such store", store);
  char path[4096];
  if (S_ISREG(sb.st_mode)) {
    r->type = ST_SQLITE;
    return open_sqlite(r, store, r->session_id);
  }
  snprintf(path, sizeof path, "%s/trace.db", store);
  if (stat(path, &sb) == 0) {
    r->type = ST_SQLITE;
    return open_sqlite(r, path, r->session_id);
  }
  r->type = ST_JSONL;
  return open_jsonl(r, store);
}

void spy_trace_reader_close(spy_trace_reader *r) {
  if (!r)
    return;
  free(r->text[0]);
  free(r->text[1]);
  free(r->lines);
  free(r->refs);
  sqlite3_finalize(r->iter);
  sqlite3_finalize(r->src);
  if (r->db)
    sqlite3_close(r->db);
  PQclear(r->rows);
  if (r->pg)
    PQfinish(r->pg);
  spy_trace_arena_free(&r->arena);
  spy_trace_arena_free(&r->sarena);
  spy__buf_free(&r->buf);
  spy__buf_free(&r->buf2);
  for (int i = 0; i <= SPY__SRC_READ_DEPTH; i++)
    spy__buf_free(&r->chain[i].z);
  spy__buf_free(&r->btext);
  free(r->session_id);
  free(r);
}

int spy_trace_reader_rewind(spy_trace_reader *r) {
  r->pos = 0;
  r->btext.len = 0;
  r->boff = 0;
  if (r->iter)
    sqlite3_reset(r->iter);
  return 0;
}

static uint64_t be64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v = v << 8 | (unsigned char)p[i];
  return v;
}

/* The next action of the session: 1 and p/n — a JSON line, or a binary
 * record when *bin — 0 at the end. */
static int next_line(spy_trace_reader *r, const char **p, size_t *n, int *bin) {
  *bin = 0;
  if (r->type == ST_JSONL) {
    if (r->pos >= r->nlines)
      return 0;
    *p = r->lines[r->pos].p;
    *n = r->lines[r->pos].n;
    r->pos++;
    return 1;
  }
  while (r->boff >= r->btext.len) { /* unpack the next batch */
    int rc;
    if (r->type == ST_SQLITE) {
      int s = sqlite3_step(r->iter);
      if (s == SQLITE_DONE)
        return 0;
      if (s != SQLITE_ROW)
        return seterr(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(r->db));
      int codec = sqlite3_column_int(r->iter, 0);
      r->brecords = (codec & SPY__CODEC_RECORDS) != 0;
      rc = spy__src_unpack(&r->btext, codec & ~SPY__CODEC_RECORDS,
                           sqlite3_column_blob(r->iter, 2),
                           (size_t)sqlite3_column_bytes(r->iter, 2),
                           (size_t)sqlite3_column_int64(r->iter, 1), NULL, 0);
    } else {
      if (!r->rows || r->pos >= (size_t)PQntuples(r->rows))
        return 0;
      int row = (int)r->pos++;
      int codec = (int)be64(PQgetvalue(r->rows, row, 0));
      r->brecords = (codec & SPY__CODEC_RECORDS) != 0;
      rc = spy__src_unpack(&r->btext, codec & ~SPY__CODEC_RECORDS,
                           PQgetvalue(r->rows, row, 2),
                           (size_t)PQgetlength(r->rows, row, 2),
                           (size_t)be64(PQgetvalue(r->rows, row, 1)), NULL, 0);
    }
    if (rc < 0)
      return seterr(r, rc, "a corrupt action batch%s", NULL);
    r->boff = 0;
  }
  const char *s = r->btext.p + r->boff;
  if (r->brecords) { /* the record's length leads it; decode checks it */
    *bin = 1;
    *p = s;
    *n = r->btext.len - r->boff;
    return 1;
  }
  const char *e = memchr(s, '\n', r->btext.len - r->boff);
  size_t len = e ? (size_t)(e - s) : r->btext.len - r->boff;
  r->boff += len + 1;
  *p = s;
  *n = len;
  return 1;
}

int spy_trace_reader_next(spy_trace_reader *r, spy_trace_action *a) {
  for (;;) {
    const char *p = NULL;
    size_t n = 0;
    int bin;
    int got = next_line(r, &p, &n, &bin);
    if (got <= 0)
      return got;
    if (n == 0)
      continue;
    spy_trace_arena_reset(&r->arena);
    if (bin) {
      int len = spy_trace_decode(p, n, &r->arena, a);
      if (len < 0)
        return seterr(r, len, "malformed action in the store%s", NULL);
      r->boff += (size_t)len;
      return 1;
    }
    spy__jv o;
    int rc = spy__json_parse(p, n, &r->arena, &o);
    if (rc == 0)
      rc = spy__json_to_action(&o, &r->arena, a);
    if (rc == 1)
      continue; /* a StringRef */
    if (rc < 0)
      return seterr(r, rc, "malformed action in the store%s", NULL);
    return 1;
  }
}

/* Fetches the sources row of the 32-hex id into b. Returns 0, SPY_ENOENT
 * or SPY_EIO. */
static int fetch_blob(spy_trace_reader *r, const char *id, blob *b) {
  memcpy(b->id, id, 32);
  b->id[32] = 0;
  b->base[0] = 0;
  b->z.len = 0;
  if (r->type == ST_SQLITE) {
    sqlite3_bind_text(r->src, 1, b->id, 32, SQLITE_STATIC);
    int s = sqlite3_step(r->src), rc = 0;
    if (s == SQLITE_ROW) {
      b->size = (size_t)sqlite3_column_int64(r->src, 0);
      b->codec = sqlite3_column_int(r->src, 1);
      spy__buf_put(&b->z, sqlite3_column_blob(r->src, 2),
                   (size_t)sqlite3_column_bytes(r->src, 2));
      const unsigned char *base = sqlite3_column_text(r->src, 3);
      if (base && sqlite3_column_bytes(r->src, 3) == 32)
        memcpy(b->base, base, 33);
      rc = b->z.err;
    } else
      rc = s == SQLITE_DONE
               ? SPY_ENOENT
               : seterr(r, SPY_EIO, "sqlite: %s", sqlite3_errmsg(r->db));
    sqlite3_reset(r->src);
    return rc;
  }
  const char *params[1] = {b->id};
  PGresult *res =
      PQexecParams(r->pg,
                   r->schema >= 3 ? "SELECT size, codec, content, "
                                    "base_source_id FROM sources WHERE "
                                    "source_id=$1"
                                  : "SELECT size, codec, content, NULL::text "
                                    "FROM sources WHERE source_id=$1",
                   1, NULL, params, NULL, NULL, 1);
  int rc = SPY_ENOENT;
  if (PQresultStatus(res) != PGRES_TUPLES_OK)
    rc = seterr(r, SPY_EIO, "postgres: %s", PQerrorMessage(r->pg));
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

int spy_trace_reader_source(spy_trace_reader *r, const uint64_t hash[2],
                            const char **p, size_t *n) {
  char id[33];
  spy_trace_hash_hex(hash, id);
  *p = "";
  *n = 0;
  if (r->type == ST_JSONL) {
    srcref key = {{hash[0], hash[1]}, NULL, 0};
    srcref *s = bsearch(&key, r->refs, r->nrefs, sizeof *r->refs, cmp_ref);
    if (!s)
      return SPY_ENOENT;
    spy_trace_arena_reset(&r->sarena);
    spy__jv v;
    if (spy__json_parse(s->p, s->n, &r->sarena, &v) < 0 || v.type != 's')
      return SPY_EBADVALUE;
    r->buf.len = 0;
    spy__buf_put(&r->buf, v.s, v.n);
    *p = r->buf.p ? r->buf.p : "";
    *n = r->buf.len;
    return r->buf.err;
  }
  /* the chain: the payload's blob, its base's, … down to a standalone one */
  int depth = 0;
  for (const char *want = id;;) {
    if (depth > SPY__SRC_READ_DEPTH)
      return seterr(r, SPY_EBADVALUE,
                    "source %s: a delta chain longer than the bound", id);
    for (int i = 0; i < depth; i++)
      if (strcmp(r->chain[i].id, want) == 0)
        return seterr(r, SPY_EBADVALUE, "source %s: a cycle of delta bases",
                      id);
    blob *b = &r->chain[depth];
    int rc = fetch_blob(r, want, b);
    if (rc == SPY_ENOENT && depth > 0) {
      char msg[80];
      snprintf(msg, sizeof msg, "%s (base %.32s)", id, want);
      return seterr(r, SPY_EBADVALUE, "source %s: its delta base is missing",
                    msg);
    }
    if (rc < 0)
      return rc;
    depth++;
    if (b->codec != SPY__CODEC_ZSTD_DELTA)
      break;
    if (!b->base[0])
      return seterr(r, SPY_EBADVALUE, "source %s: a delta without a base", id);
    want = b->base;
  }
  /* decode back up, each blob with the one below it as prefix */
  spy__buf *out = &r->buf, *base = &r->buf2;
  for (int i = depth - 1; i >= 0; i--) {
    spy__buf *t = out;
    out = base;
    base = t;
    blob *b = &r->chain[i];
    int rc = spy__src_unpack(out, b->codec, b->z.p ? b->z.p : "", b->z.len,
                             b->size, i == depth - 1 ? NULL : base->p,
                             i == depth - 1 ? 0 : base->len);
    if (rc < 0)
      return seterr(r, rc, "source %s: a corrupt blob", b->id);
  }
  if (out != &r->buf) { /* the result lives in r->buf */
    spy__buf t = r->buf;
    r->buf = r->buf2;
    r->buf2 = t;
  }
  *p = r->buf.p ? r->buf.p : "";
  *n = r->buf.len;
  return 0;
}

/* ---- derived views ----------------------------------------------------------
 */

static int kind_is(const spy_trace_action *a, const spy_trace_kind *k) {
  return a->kind == k;
}

int spy_trace_reader_builds(spy_trace_reader *r,
                            int (*cb)(void *, const spy_trace_build_info *),
                            void *arg) {
  spy_trace_build_info *bs = NULL;
  size_t nb = 0;
  spy_trace_action a;
  int rc;
  spy_trace_reader_rewind(r);
  while ((rc = spy_trace_reader_next(r, &a)) == 1) {
    if (kind_is(&a, &spy_kind_build_start)) {
      spy_trace_build_info *g = realloc(bs, (nb + 1) * sizeof *g);
      if (!g) {
        rc = SPY_ENOMEM;
        break;
      }
      bs = g;
      bs[nb++] = (spy_trace_build_info){a.build, a.ts_us, 0};
    } else if (kind_is(&a, &spy_kind_build_end)) {
      for (size_t i = 0; i < nb; i++)
        if (bs[i].build == a.build)
          bs[i].ended_us = a.ts_us;
    }
  }
  for (size_t i = 0; rc == 0 && i < nb; i++)
    if (cb(arg, &bs[i]))
      break;
  free(bs);
  return rc < 0 ? rc : 0;
}

/* Walks the ModuleGraphReady of `build`, calling one of the callbacks. */
static int walk_modules(
    spy_trace_reader *r, uint32_t build, int (*mcb)(void *, const char *, int),
    int (*icb)(void *, const char *, const char *, const char *), void *arg) {
  spy_trace_action a;
  int rc;
  char s1[4096], s2[4096], s3[64];
  spy_trace_reader_rewind(r);
  while ((rc = spy_trace_reader_next(r, &a)) == 1) {
    if (!kind_is(&a, &spy_kind_module_graph_ready) || a.build != build)
      continue;
    const spy_trace_val *mods = spy_trace_get(&a, "modules");
    const spy_trace_kind *mk = &spy_rec_kind_module;
    for (uint32_t i = 0; mods && i < mods->n; i++) {
      const spy_trace_val *m = &mods->u.items[i];
      const spy_trace_val *id = spy__field(mk, m, "id");
      snprintf(s1, sizeof s1, "%.*s", (int)id->n, id->u.s);
      if (mcb) {
        if (mcb(arg, s1, spy__field(mk, m, "is_external")->type == SPY_TV_TRUE))
          return 0;
        continue;
      }
      const spy_trace_val *imps = spy__field(mk, m, "imports");
      const spy_trace_kind *ik = &spy_rec_kind_module_import;
      for (uint32_t j = 0; imps && imps->type == SPY_TV_LIST && j < imps->n;
           j++) {
        const spy_trace_val *to =
            spy__field(ik, &imps->u.items[j], "module_id");
        const spy_trace_val *kd = spy__field(ik, &imps->u.items[j], "kind");
        snprintf(s2, sizeof s2, "%.*s", (int)to->n, to->u.s);
        snprintf(s3, sizeof s3, "%.*s", (int)kd->n, kd->u.s);
        if (icb(arg, s1, s2, s3))
          return 0;
      }
    }
  }
  return rc < 0 ? rc : 0;
}

int spy_trace_reader_modules(spy_trace_reader *r, uint32_t build,
                             int (*cb)(void *, const char *, int), void *arg) {
  return walk_modules(r, build, cb, NULL, arg);
}

int spy_trace_reader_imports(spy_trace_reader *r, uint32_t build,
                             int (*cb)(void *, const char *, const char *,
                                       const char *),
                             void *arg) {
  return walk_modules(r, build, NULL, cb, arg);
}

typedef struct open_call {
  char *call_id, *plugin, *module;
  const char *hook;
  uint32_t build;
  uint64_t started;
  int has_input;
  uint64_t input[2];
} open_call;

static char *dupv(const spy_trace_val *v) {
  return v && v->type == SPY_TV_STR ? strndup(v->u.s, v->n) : strdup("");
}

int spy_trace_reader_hook_calls(spy_trace_reader *r,
                                int (*cb)(void *, const spy_trace_hook_call *),
                                void *arg) {
  open_call *open = NULL;
  size_t nopen = 0, cap = 0;
  spy_trace_action a;
  int rc, stop = 0;
  spy_trace_reader_rewind(r);
  while (!stop && (rc = spy_trace_reader_next(r, &a)) == 1) {
    if (!a.kind || (a.kind->role != SPY_ROLE_HOOK_START &&
                    a.kind->role != SPY_ROLE_HOOK_END))
      continue;
    const spy_trace_val *cid = spy_trace_get(&a, "call_id");
    const spy_trace_val *src = spy_trace_get(&a, "content");
    if (a.kind->role == SPY_ROLE_HOOK_START) {
      if (nopen == cap) {
        cap = cap ? 2 * cap : 64;
        open_call *g = realloc(open, cap * sizeof *g);
        if (!g) {
          rc = SPY_ENOMEM;
          break;
        }
        open = g;
      }
      open_call *o = &open[nopen++];
      const spy_trace_val *mod = spy_trace_get(&a, "module_id");
      if (!mod)
        mod = spy_trace_get(&a, "module_request");
      *o = (open_call){dupv(cid), dupv(spy_trace_get(&a, "plugin_name")),
                       dupv(mod), spy__hook_type(a.kind),
                       a.build,   a.ts_us,
                       0,         {0, 0}};
      if (src && src->has_hash) {
        o->has_input = 1;
        o->input[0] = src->hash[0];
        o->input[1] = src->hash[1];
      }
      continue;
    }
    for (size_t i = nopen; i-- > 0;) {
      open_call *o = &open[i];
      if (strlen(o->call_id) != cid->n || memcmp(o->call_id, cid->u.s, cid->n))
        continue;
      spy_trace_hook_call h = {o->build,   o->hook,
                               o->plugin,  o->module,
                               o->call_id, o->started,
                               a.ts_us,    o->has_input,
                               0,          {o->input[0], o->input[1]},
                               {0, 0}};
      if (src && src->has_hash) {
        h.has_output = 1;
        h.output[0] = src->hash[0];
        h.output[1] = src->hash[1];
      }
      stop = cb(arg, &h);
      free(o->call_id);
      free(o->plugin);
      free(o->module);
      open[i] = open[--nopen];
      break;
    }
  }
  for (size_t i = 0; i < nopen; i++) {
    free(open[i].call_id);
    free(open[i].plugin);
    free(open[i].module);
  }
  free(open);
  return rc < 0 ? rc : 0;
}

/* ---- summary
 * ------------------------------------------------------------------ */

typedef struct refcount {
  uint64_t hash[2];
  uint64_t uses;
} refcount;

/* Returns 0 or SPY_ENOMEM. */
static int count_refs(const spy_trace_val *v, refcount **rs, size_t *n,
                      size_t *cap) {
  if ((v->type == SPY_TV_SRCREF || v->type == SPY_TV_SRC) && v->has_hash) {
    if (*n == *cap) {
      size_t c = *cap ? 2 * *cap : 1024;
      refcount *g = realloc(*rs, c * sizeof *g);
      if (!g)
        return SPY_ENOMEM;
      *rs = g;
      *cap = c;
    }
    (*rs)[(*n)++] = (refcount){{v->hash[0], v->hash[1]}, 1};
  } else if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC)
    for (uint32_t i = 0; i < v->n; i++)
      if (count_refs(&v->u.items[i], rs, n, cap) < 0)
        return SPY_ENOMEM;
  return 0;
}

static int cmp_refcount(const void *a, const void *b) { return cmp_ref(a, b); }

int spy_trace_reader_summary(spy_trace_reader *r, spy_trace_summary *out) {
  memset(out, 0, sizeof *out);
  refcount *rs = NULL;
  size_t nrs = 0, cap = 0;
  spy_trace_action a;
  int rc;
  spy_trace_reader_rewind(r);
  while ((rc = spy_trace_reader_next(r, &a)) == 1) {
    out->actions++;
    if (kind_is(&a, &spy_kind_build_start))
      out->builds++;
    if (kind_is(&a, &spy_kind_module_graph_ready))
      out->modules = spy_trace_get(&a, "modules")->n;
    if (kind_is(&a, &spy_kind_chunk_graph_ready))
      out->chunks = spy_trace_get(&a, "chunks")->n;
    if (a.kind && a.kind->role == SPY_ROLE_HOOK_END)
      out->hook_calls++;
    if ((rc = count_refs(&a.fields, &rs, &nrs, &cap)) < 0)
      break;
  }
  if (rc < 0) {
    free(rs);
    return rc;
  }
  qsort(rs, nrs, sizeof *rs, cmp_refcount);
  uint64_t total = 0;
  for (size_t i = 0; i < nrs;) {
    size_t j = i;
    while (j < nrs && rs[j].hash[0] == rs[i].hash[0] &&
           rs[j].hash[1] == rs[i].hash[1])
      j++;
    const char *p;
    size_t n = 0;
    uint64_t stored = 0;
    if (spy_trace_reader_source(r, rs[i].hash, &p, &n) == 0) {
      out->sources++;
      out->source_bytes += n;
      total += n * (j - i);
      if (r->type == ST_SQLITE) {
        char id[33];
        spy_trace_hash_hex(rs[i].hash, id);
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(r->db,
                               "SELECT length(content) FROM sources WHERE "
                               "source_id=?1",
                               -1, &st, NULL) == SQLITE_OK) {
          sqlite3_bind_text(st, 1, id, 32, SQLITE_STATIC);
          if (sqlite3_step(st) == SQLITE_ROW)
            stored = (uint64_t)sqlite3_column_int64(st, 0);
          sqlite3_finalize(st);
        }
      } else if (r->type == ST_PG) {
        char id[33];
        spy_trace_hash_hex(rs[i].hash, id);
        const char *params[1] = {id};
        PGresult *res = PQexecParams(r->pg,
                                     "SELECT length(content) FROM sources "
                                     "WHERE source_id=$1",
                                     1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
          stored = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
      } else
        stored = n;
      out->stored_bytes += stored;
    }
    i = j;
  }
  out->saved_bytes = total - out->source_bytes;
  free(rs);
  out->lost = -1;
  if (r->type == ST_JSONL)
    out->lost = r->jsonl_lost;
  else if (r->type == ST_SQLITE) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(r->db,
                           "SELECT actions_lost FROM sessions WHERE "
                           "session_id=?1",
                           -1, &st, NULL) == SQLITE_OK) {
      sqlite3_bind_text(st, 1, r->session_id, -1, SQLITE_STATIC);
      if (sqlite3_step(st) == SQLITE_ROW &&
          sqlite3_column_type(st, 0) != SQLITE_NULL)
        out->lost = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
    }
  } else {
    const char *params[1] = {r->session_id};
    PGresult *res = PQexecParams(r->pg,
                                 "SELECT actions_lost FROM sessions WHERE "
                                 "session_id=$1",
                                 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
        !PQgetisnull(res, 0, 0))
      out->lost = atoll(PQgetvalue(res, 0, 0));
    PQclear(res);
  }
  return 0;
}
