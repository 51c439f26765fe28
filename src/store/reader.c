/* reader.c — one reader over the three stores. The store's backend
 * (reader.h: reader_jsonl.c, reader_sqlite.c, reader_pg.c, one table of
 * function pointers each) streams the session's actions in seq order and
 * finds payloads by content id; everything else — builds, modules,
 * imports, hook calls, the summary — is derived here from the action
 * stream, the same way for all three, except the hook calls a backend's
 * `calls` op answers from a table of its own (SQLite's hook_calls: the
 * query's filter, order and limit in SQL; the replay here filters as it
 * goes and keeps at most `limit` calls in a heap). A store whose schema
 * version is newer than SPY_TRACE_SCHEMA_VERSION is refused.
 *
 * The SQL stores of schema version 4 keep each action in its kind's table
 * (and its lists' child tables): the backend steps every table of the
 * built-in kinds in seq order and the action is rebuilt here from its
 * rows, merged in seq order with the records the writer kept in
 * action_batches (application kinds, rows that could not hold the exact
 * bytes — those win over their rows). Older versions keep every action in
 * compressed action_batches rows (binary records; JSON lines in schema
 * version 1), replayed here one batch at a time. A payload stored as a delta
 * (schema version 3) names its base: the reader fetches the chain down to a
 * standalone blob, at most SPY__SRC_READ_DEPTH deep, then decodes it back up. A
 * missing base, a cycle or a longer chain is an error, never a guess. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "reader.h"

/* Schema 4+: one derived table's cursor. */
typedef struct spy__tcur {
  spy__cell *c; /* its current row */
  int state;    /* 0 not read, 1 c holds a row, 2 at the end */
} spy__tcur;

int spy__reader_err(spy_trace_reader *r, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err, sizeof r->err, fmt, ap);
  va_end(ap);
  return rc;
}

void spy__reader_warn(spy_trace_reader *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->warn, sizeof r->warn, fmt, ap);
  va_end(ap);
}

const char *spy_trace_reader_error(const spy_trace_reader *r) {
  return r && r->err[0] ? r->err : "no error";
}

const char *spy_trace_reader_warning(const spy_trace_reader *r) {
  return r && r->warn[0] ? r->warn : NULL;
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
    return spy__reader_err(r, SPY_ENOMEM, "out of memory");
  char path[4096];
  struct stat sb;
  if (strncmp(store, "postgres://", 11) == 0 ||
      strncmp(store, "postgresql://", 13) == 0 || strchr(store, '='))
    r->ops = &spy__reader_pg;
  else if (stat(store, &sb) != 0)
    return spy__reader_err(r, SPY_ENOENT, "%s: no such store", store);
  else if (S_ISREG(sb.st_mode))
    r->ops = &spy__reader_sqlite;
  else if (snprintf(path, sizeof path, "%s/trace.db", store) <
               (int)sizeof path &&
           stat(path, &sb) == 0) {
    r->ops = &spy__reader_sqlite;
    store = path;
  } else
    r->ops = &spy__reader_jsonl;
  return r->ops->open(r, store);
}

void spy_trace_reader_close(spy_trace_reader *r) {
  if (!r)
    return;
  if (r->ops)
    r->ops->close(r);
  spy_trace_arena_free(&r->arena);
  spy_trace_arena_free(&r->sarena);
  spy__buf_free(&r->buf);
  spy__buf_free(&r->buf2);
  spy__src_unpack_free(&r->dctx);
  for (int i = 0; i <= SPY__SRC_READ_DEPTH; i++)
    spy__buf_free(&r->chain[i].z);
  spy__buf_free(&r->btext);
  if (r->tc)
    for (int t = 0; t < r->schema.n; t++)
      free(r->tc[t].c);
  free(r->tc);
  spy__schema_free(&r->schema);
  spy_trace_arena_free(&r->parena);
  free(r->session_id);
  free(r);
}

int spy_trace_reader_rewind(spy_trace_reader *r) {
  r->btext.len = 0;
  r->boff = 0;
  r->warn[0] = 0;
  if (r->tables) {
    for (int t = 0; t < r->schema.n; t++)
      r->tc[t].state = 0;
    r->bstate = 0;
    r->ops->trewind(r);
  }
  return r->ops->rewind(r);
}

static int tables_next(spy_trace_reader *r, spy_trace_action *a);

int spy_trace_reader_next(spy_trace_reader *r, spy_trace_action *a) {
  spy_trace_arena_reset(&r->arena);
  if (r->tables)
    return tables_next(r, a);
  return r->ops->next(r, a);
}

/* ---- actions rebuilt from their tables (schema 4+) -----------------------
 */

int spy__reader_tables(spy_trace_reader *r) {
  int rc = spy__schema_init(&r->schema);
  if (rc < 0)
    return spy__reader_err(r, rc, "out of memory");
  r->tc = calloc((size_t)r->schema.n, sizeof *r->tc);
  if (!r->tc)
    return spy__reader_err(r, SPY_ENOMEM, "out of memory");
  for (int t = 0; t < r->schema.n; t++)
    if (!(r->tc[t].c = calloc(r->schema.t[t].ncols, sizeof(spy__cell))))
      return spy__reader_err(r, SPY_ENOMEM, "out of memory");
  r->tables = 1;
  return 0;
}

/* Table t's current row (reading it if needed): 1, 0 at its end, < 0. */
static int tpeek(spy_trace_reader *r, int t) {
  spy__tcur *c = &r->tc[t];
  if (c->state == 0) {
    int rc = r->ops->tnext(r, t, c->c);
    if (rc < 0)
      return rc;
    c->state = rc == 1 ? 1 : 2;
  }
  return c->state == 1;
}

static int corrupt(spy_trace_reader *r, int t, const char *what) {
  return spy__reader_err(r, SPY_EBADVALUE,
                         "the store's table %s is inconsistent: %s",
                         r->schema.t[t].name, what);
}

/* A copy of s[0..n) in the arena (NUL-terminated), or NULL. */
static const char *acopy(spy_trace_arena *a, const char *s, size_t n) {
  char *p = spy_trace_arena_alloc(a, n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = 0;
  }
  return p;
}

/* A JSON array of strings or integers (a STRS / INTS column) as a LIST. */
static int json_list(spy_trace_reader *r, int t, const spy__cell *c,
                     spy_trace_val *out) {
  json_error_t e;
  json_t *j = json_loadb(c->s, c->n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
  if (!j || !json_is_array(j)) {
    json_decref(j);
    return corrupt(r, t, "a list column is not a JSON array");
  }
  size_t n = json_array_size(j);
  spy_trace_val *it = NULL;
  int rc = 0;
  if (n > UINT32_MAX)
    rc = corrupt(r, t, "a list too long");
  else if (n && !(it = spy_trace_arena_alloc(&r->arena, n * sizeof *it)))
    rc = spy__reader_err(r, SPY_ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    json_t *v = json_array_get(j, i);
    memset(&it[i], 0, sizeof it[i]);
    if (json_is_string(v)) {
      it[i].type = SPY_TV_STR;
      it[i].n = (uint32_t)json_string_length(v);
      if (!(it[i].u.s = acopy(&r->arena, json_string_value(v), it[i].n)))
        rc = spy__reader_err(r, SPY_ENOMEM, "out of memory");
    } else if (json_is_integer(v)) {
      it[i].type = SPY_TV_INT;
      it[i].u.i = (int64_t)json_integer_value(v);
    } else if (!json_is_null(v))
      rc = corrupt(r, t, "a list item that is neither string nor integer");
  }
  json_decref(j);
  if (rc == 0) {
    out->type = SPY_TV_LIST;
    out->n = (uint32_t)n;
    out->u.items = it;
  }
  return rc;
}

/* The record of table t from its row c (fields from column `first` on)
 * and, for its lists, the next rows of its child tables, which must be
 * this action's (seq) elements in order under path[0..depth). */
static int rebuild(spy_trace_reader *r, int t, const spy__cell *c, int first,
                   uint64_t seq, uint32_t *path, int depth,
                   spy_trace_val *out) {
  const spy__gtable *g = &r->schema.t[t];
  const spy_trace_kind *k = g->rec;
  spy_trace_val *it = NULL;
  if (k->nfields &&
      !(it = spy_trace_arena_alloc(&r->arena, k->nfields * sizeof *it)))
    return spy__reader_err(r, SPY_ENOMEM, "out of memory");
  memset(out, 0, sizeof *out);
  out->type = SPY_TV_REC;
  out->n = k->nfields;
  out->u.items = it;
  for (uint32_t i = 0; i < k->nfields; i++) {
    const spy__cell *v = &c[first + (int)i];
    spy_trace_val *o = &it[i];
    memset(o, 0, sizeof *o);
    if (v->kind == 0)
      continue; /* null */
    int text = v->kind == SPY__COL_TEXT || v->kind == SPY__COL_BLOB;
    switch (k->fields[i].type) {
    case SPY_TF_STR:
    case SPY_TF_OSTR:
      if (!text)
        return corrupt(r, t, "a string column holds a number");
      o->type = SPY_TV_STR;
      o->n = (uint32_t)v->n;
      if (!(o->u.s = acopy(&r->arena, v->s, v->n)))
        return spy__reader_err(r, SPY_ENOMEM, "out of memory");
      break;
    case SPY_TF_INT:
    case SPY_TF_OINT:
    case SPY_TF_BOOL:
    case SPY_TF_OBOOL:
      if (v->kind != SPY__COL_INT)
        return corrupt(r, t, "an integer column holds text");
      if (k->fields[i].type == SPY_TF_INT || k->fields[i].type == SPY_TF_OINT) {
        o->type = SPY_TV_INT;
        o->u.i = v->i;
      } else
        o->type = v->i ? SPY_TV_TRUE : SPY_TV_FALSE;
      break;
    case SPY_TF_SRC:
    case SPY_TF_OSRC:
      if (!text || spy__hash_parse(v->s, v->n, o->hash) < 0)
        return corrupt(r, t, "a source id that is not 32 hex digits");
      o->type = SPY_TV_SRCREF;
      o->has_hash = 1;
      break;
    case SPY_TF_STRS:
    case SPY_TF_OSTRS:
    case SPY_TF_INTS: {
      if (!text)
        return corrupt(r, t, "a list column holds a number");
      int rc = json_list(r, t, v, o);
      if (rc < 0)
        return rc;
      break;
    }
    default: { /* a list of records: its count, its rows in the child */
      int ch = g->child[i];
      if (v->kind != SPY__COL_INT || v->i < 0 || v->i > UINT32_MAX || ch < 0)
        return corrupt(r, t, "a list count that is not a count");
      uint32_t n = (uint32_t)v->i;
      spy_trace_val *el = NULL;
      if (n && !(el = spy_trace_arena_alloc(&r->arena, n * sizeof *el)))
        return spy__reader_err(r, SPY_ENOMEM, "out of memory");
      for (uint32_t j = 0; j < n; j++) {
        int rc = tpeek(r, ch);
        if (rc < 0)
          return rc;
        const spy__cell *cc = r->tc[ch].c;
        /* session, seq, build_id, i0 … i<depth> */
        int ok =
            rc == 1 && cc[1].kind == SPY__COL_INT && (uint64_t)cc[1].i == seq;
        path[depth] = j;
        for (int d = 0; ok && d <= depth; d++)
          ok = cc[3 + d].kind == SPY__COL_INT && cc[3 + d].i == path[d];
        if (!ok)
          return corrupt(r, ch, "an element is missing or out of order");
        rc = rebuild(r, ch, cc, 3 + depth + 1, seq, path, depth + 1, &el[j]);
        if (rc < 0)
          return rc;
        r->tc[ch].state = 0; /* used */
      }
      o->type = SPY_TV_LIST;
      o->n = n;
      o->u.items = el;
    }
    }
  }
  return 0;
}

/* The action of root table t's current row, its rows then used. */
static int rebuild_action(spy_trace_reader *r, int t, spy_trace_action *a) {
  const spy__cell *c = r->tc[t].c;
  const spy_trace_kind *k = r->schema.t[t].rec;
  memset(a, 0, sizeof *a);
  if (c[1].kind != SPY__COL_INT || c[2].kind != SPY__COL_INT ||
      c[3].kind != SPY__COL_INT)
    return corrupt(r, t, "a row without seq, build_id or ts_us");
  a->kind = k;
  a->name = k->name;
  a->name_len = (uint32_t)strlen(k->name);
  a->seq = (uint64_t)c[1].i;
  a->build = (uint32_t)c[2].i;
  a->ts_us = (uint64_t)c[3].i;
  uint32_t path[4] = {0};
  int rc = rebuild(r, t, c, 4, a->seq, path, 0, &a->fields);
  r->tc[t].state = 0;
  return rc < 0 ? rc : 1;
}

static int tables_next(spy_trace_reader *r, spy_trace_action *a) {
  if (r->bstate == 0) { /* the next record kept in action_batches */
    spy_trace_arena_reset(&r->parena);
    int rc = r->ops->next(r, &r->bact);
    if (rc < 0)
      return rc;
    r->bstate = rc == 1 ? 1 : 2;
  }
  int best = -1;
  uint64_t bseq = 0;
  for (int t = 0; t < r->schema.nbuiltin; t++) {
    if (r->schema.t[t].depth)
      continue;
    int rc = tpeek(r, t);
    if (rc < 0)
      return rc;
    if (rc == 0)
      continue;
    const spy__cell *c = r->tc[t].c;
    if (c[1].kind != SPY__COL_INT)
      return corrupt(r, t, "a row without seq");
    if (best < 0 || (uint64_t)c[1].i < bseq) {
      best = t;
      bseq = (uint64_t)c[1].i;
    }
  }
  if (r->bstate == 1 && (best < 0 || r->bact.seq <= bseq)) {
    if (best >= 0 && r->bact.seq == bseq) { /* the record wins its rows */
      int rc = rebuild_action(r, best, a);
      if (rc < 0)
        return rc;
      spy_trace_arena_reset(&r->arena);
    }
    *a = r->bact;
    r->bstate = 0;
    return 1;
  }
  if (best < 0)
    return 0;
  return rebuild_action(r, best, a);
}

/* ---- stored action batches (SQL stores) ---------------------------------
 */

int spy__reader_batch(spy_trace_reader *r, int codec, const void *p, size_t n,
                      size_t size) {
  r->brecords = (codec & SPY__CODEC_RECORDS) != 0;
  r->boff = 0;
  int rc = spy__src_unpack(&r->btext, &r->dctx, codec & ~SPY__CODEC_RECORDS,
                           p ? p : "", n, size, NULL, 0);
  if (rc < 0) {
    r->btext.len = 0;
    return spy__reader_err(r, rc, "%s",
                           rc == SPY_ENOMEM ? "out of memory unpacking a batch"
                                            : "a corrupt action batch");
  }
  return 0;
}

int spy__reader_batch_next(spy_trace_reader *r, spy_trace_action *a) {
  while (r->boff < r->btext.len) {
    const char *s = r->btext.p + r->boff;
    size_t left = r->btext.len - r->boff;
    if (r->brecords) { /* the record's length leads it; decode checks it */
      int len =
          spy_trace_decode(s, left, r->tables ? &r->parena : &r->arena, a);
      if (len < 0) {
        r->boff = r->btext.len;
        return spy__reader_err(r, len, "malformed action in the store");
      }
      r->boff += (size_t)len;
      return 1;
    }
    /* schema version 1: JSON lines */
    const char *nl = memchr(s, '\n', left);
    size_t n = nl ? (size_t)(nl - s) : left;
    r->boff += n + (nl != NULL);
    if (n == 0)
      continue;
    spy__jline l;
    char why[160];
    int rc = spy__json_line(s, n, &r->arena, &l, NULL, why, sizeof why);
    if (rc == 1)
      continue; /* a StringRef */
    if (rc < 0)
      return spy__reader_err(r, rc, "malformed action in the store: %s",
                             rc == SPY_EBADVALUE ? why : spy_strerror(rc));
    *a = l.action;
    return 1;
  }
  return 0;
}

/* ---- payloads -----------------------------------------------------------
 */

int spy_trace_reader_source(spy_trace_reader *r, const uint64_t hash[2],
                            const char **p, size_t *n) {
  char id[33];
  spy_trace_hash_hex(hash, id);
  *p = "";
  *n = 0;
  if (r->ops->source) {
    r->buf.len = 0;
    int rc = r->ops->source(r, hash, &r->buf);
    if (rc < 0)
      return rc;
    *p = r->buf.p ? r->buf.p : "";
    *n = r->buf.len;
    return 0;
  }
  /* the chain: the payload's blob, its base's, … down to a standalone one */
  int depth = 0;
  for (const char *want = id;;) {
    if (depth > SPY__SRC_READ_DEPTH)
      return spy__reader_err(r, SPY_EBADVALUE,
                             "source %s: a delta chain longer than the bound",
                             id);
    for (int i = 0; i < depth; i++)
      if (strcmp(r->chain[i].id, want) == 0)
        return spy__reader_err(r, SPY_EBADVALUE,
                               "source %s: a cycle of delta bases", id);
    spy__blob *b = &r->chain[depth];
    int rc = r->ops->fetch(r, want, b);
    if (rc == SPY_ENOENT && depth > 0)
      return spy__reader_err(r, SPY_EBADVALUE,
                             "source %s: its delta base is missing (base "
                             "%.32s)",
                             id, want);
    if (rc < 0)
      return rc;
    depth++;
    if (b->codec != SPY__CODEC_ZSTD_DELTA && b->codec != SPY__CODEC_COPY)
      break;
    if (!b->base[0])
      return spy__reader_err(r, SPY_EBADVALUE,
                             "source %s: a delta without a base", id);
    want = b->base;
  }
  /* decode back up, each blob with the one below it as prefix */
  spy__buf *out = &r->buf, *base = &r->buf2;
  for (int i = depth - 1; i >= 0; i--) {
    spy__buf *t = out;
    out = base;
    base = t;
    spy__blob *b = &r->chain[i];
    int rc = spy__src_unpack(out, &r->dctx, b->codec, b->z.p ? b->z.p : "",
                             b->z.len, b->size, i == depth - 1 ? NULL : base->p,
                             i == depth - 1 ? 0 : base->len);
    if (rc < 0)
      return spy__reader_err(r, rc, "source %s: a corrupt blob", b->id);
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

int spy__reader_call_row(spy_trace_reader *r, const char *table,
                         const char *hook, const char *const id[2],
                         const size_t idn[2], spy_trace_hook_call *c) {
  const spy__hook *h = spy__hooks;
  while (h->hook && (!hook || strcmp(h->hook, hook) != 0))
    h++;
  if (!h->hook)
    return spy__reader_err(r, SPY_EBADVALUE,
                           "the store's table %s is inconsistent: an unknown "
                           "hook_type",
                           table);
  c->hook = h->hook;
  c->has_input = c->has_output = 0;
  for (int k = 0; k < 2; k++) {
    if (!id[k])
      continue;
    if (spy__hash_parse(id[k], idn[k], k ? c->output : c->input) < 0)
      return spy__reader_err(r, SPY_EBADVALUE,
                             "the store's table %s is inconsistent: a "
                             "source id is not 32 hex digits",
                             table);
    *(k ? &c->has_output : &c->has_input) = 1;
  }
  return 0;
}

/* ---- hook calls -----------------------------------------------------------
 *
 * A store whose backend has no `calls` op (or whose op says SPY_ENOTSUP)
 * is replayed: each Start opens a call (its strings copied only when it
 * passes the query's filter; the call id always, so that its End finds
 * it and no other), each End closes the most recent open call of its
 * call id. A call that passes is reported at once (end order), or held:
 * with a limit, in a heap of at most `limit` calls whose root is the one
 * that would be reported last, replaced when a better call ends; without
 * one, every passing call (start order needs them all before the first is
 * known). The held calls are sorted and reported at the end. */

typedef struct open_call {
  char *call_id, *plugin, *module; /* plugin, module: NULL when !want */
  const char *hook;
  uint32_t build;
  uint64_t started, sseq;
  int has_input, want;
  uint64_t input[2];
} open_call;

/* A call that passed the filter, its strings owned. */
typedef struct held_call {
  char *call_id, *plugin, *module;
  const char *hook;
  uint32_t build;
  uint64_t started, ended, sseq;
  int has_input, has_output;
  uint64_t input[2], output[2];
} held_call;

static void held_free(held_call *h) {
  free(h->call_id);
  free(h->plugin);
  free(h->module);
}

static uint64_t held_dur(const held_call *h) {
  return h->ended > h->started ? h->ended - h->started : 0;
}

/* Start order: started_us, then the Start's seq (unique). */
static int by_started(const void *x, const void *y) {
  const held_call *a = x, *b = y;
  if (a->started != b->started)
    return a->started < b->started ? -1 : 1;
  return a->sseq < b->sseq ? -1 : a->sseq > b->sseq;
}

/* Longest first, then start order. */
static int by_slowest(const void *x, const void *y) {
  uint64_t da = held_dur(x), db = held_dur(y);
  if (da != db)
    return da > db ? -1 : 1;
  return by_started(x, y);
}

typedef struct held_set {
  held_call *v;
  size_t n, cap;
  uint64_t limit; /* 0: keep every call */
  int (*cmp)(const void *, const void *);
} held_set;

static void heap_swap(held_call *a, held_call *b) {
  held_call t = *a;
  *a = *b;
  *b = t;
}

/* The heap's root is its worst call (the one reported last). */
static void heap_down(held_set *hs, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, w = i;
    if (l < hs->n && hs->cmp(&hs->v[l], &hs->v[w]) > 0)
      w = l;
    if (l + 1 < hs->n && hs->cmp(&hs->v[l + 1], &hs->v[w]) > 0)
      w = l + 1;
    if (w == i)
      return;
    heap_swap(&hs->v[i], &hs->v[w]);
    i = w;
  }
}

static void heap_up(held_set *hs, size_t i) {
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (hs->cmp(&hs->v[i], &hs->v[p]) <= 0)
      return;
    heap_swap(&hs->v[i], &hs->v[p]);
    i = p;
  }
}

/* Takes c (its strings) into the set, or frees it when the set is full of
 * better calls. Returns 0 or SPY_ENOMEM (c freed). */
static int held_add(held_set *hs, held_call *c) {
  if (hs->limit && hs->n == hs->limit) {
    if (hs->cmp(c, &hs->v[0]) >= 0) {
      held_free(c);
      return 0;
    }
    held_free(&hs->v[0]);
    hs->v[0] = *c;
    heap_down(hs, 0);
    return 0;
  }
  if (hs->n == hs->cap) {
    size_t cap = hs->cap ? 2 * hs->cap : 64;
    if (hs->limit && cap > hs->limit)
      cap = (size_t)hs->limit;
    held_call *g = realloc(hs->v, cap * sizeof *g);
    if (!g) {
      held_free(c);
      return SPY_ENOMEM;
    }
    hs->v = g;
    hs->cap = cap;
  }
  hs->v[hs->n++] = *c;
  if (hs->limit)
    heap_up(hs, hs->n - 1);
  return 0;
}

static spy_trace_hook_call as_call(const held_call *c) {
  return (spy_trace_hook_call){c->build,
                               c->hook,
                               c->plugin,
                               c->module,
                               c->call_id,
                               c->started,
                               c->ended,
                               c->has_input,
                               c->has_output,
                               {c->input[0], c->input[1]},
                               {c->output[0], c->output[1]}};
}

static char *dupv(const spy_trace_val *v) {
  return v && v->type == SPY_TV_STR ? strndup(v->u.s, v->n) : strdup("");
}

/* v's string equals s (a missing or non-string v reads as ""). */
static int val_is(const spy_trace_val *v, const char *s) {
  size_t n = v && v->type == SPY_TV_STR ? v->n : 0;
  return strlen(s) == n && (n == 0 || memcmp(v->u.s, s, n) == 0);
}

static int replay_calls(spy_trace_reader *r, const spy_trace_call_query *q,
                        int (*cb)(void *, const spy_trace_hook_call *),
                        void *arg) {
  open_call *open = NULL;
  size_t nopen = 0, cap = 0;
  held_set hs = {NULL, 0, 0, q->limit,
                 q->order == SPY_TRACE_CALLS_SLOWEST ? by_slowest : by_started};
  int hold = q->order != SPY_TRACE_CALLS_ENDED;
  uint64_t told = 0;
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
      const spy_trace_val *plugin = spy_trace_get(&a, "plugin_name");
      const spy_trace_val *mod = spy_trace_get(&a, "module_id");
      if (!mod)
        mod = spy_trace_get(&a, "module_request");
      int want = (!q->build || a.build == q->build) &&
                 (!q->plugin || val_is(plugin, q->plugin)) &&
                 (!q->module || val_is(mod, q->module));
      open_call *o = &open[nopen];
      *o = (open_call){dupv(cid),
                       want ? dupv(plugin) : NULL,
                       want ? dupv(mod) : NULL,
                       spy__hook_type(a.kind),
                       a.build,
                       a.ts_us,
                       a.seq,
                       0,
                       want,
                       {0, 0}};
      if (!o->call_id || (want && (!o->plugin || !o->module))) {
        free(o->call_id);
        free(o->plugin);
        free(o->module);
        rc = SPY_ENOMEM;
        break;
      }
      nopen++;
      if (src && src->has_hash) {
        o->has_input = 1;
        o->input[0] = src->hash[0];
        o->input[1] = src->hash[1];
      }
      continue;
    }
    for (size_t i = nopen; i-- > 0;) {
      open_call *o = &open[i];
      if (!val_is(cid, o->call_id))
        continue;
      held_call c = {o->call_id,
                     o->plugin,
                     o->module,
                     o->hook,
                     o->build,
                     o->started,
                     a.ts_us,
                     o->sseq,
                     o->has_input,
                     0,
                     {o->input[0], o->input[1]},
                     {0, 0}};
      int want = o->want;
      open[i] = open[--nopen]; /* c holds o's strings now */
      if (src && src->has_hash) {
        c.has_output = 1;
        c.output[0] = src->hash[0];
        c.output[1] = src->hash[1];
      }
      if (!want)
        held_free(&c);
      else if (!hold) {
        spy_trace_hook_call h = as_call(&c);
        stop = cb(arg, &h) || (q->limit && ++told == q->limit);
        held_free(&c);
      } else if (held_add(&hs, &c) < 0) {
        rc = SPY_ENOMEM;
        stop = 1;
      }
      break;
    }
  }
  for (size_t i = 0; i < nopen; i++) {
    free(open[i].call_id);
    free(open[i].plugin);
    free(open[i].module);
  }
  free(open);
  if (rc == SPY_ENOMEM)
    spy__reader_err(r, rc, "out of memory gathering hook calls");
  if (rc >= 0 && hs.n) {
    qsort(hs.v, hs.n, sizeof *hs.v, hs.cmp);
    for (size_t i = 0; i < hs.n; i++) {
      spy_trace_hook_call h = as_call(&hs.v[i]);
      if (cb(arg, &h))
        break;
    }
  }
  for (size_t i = 0; i < hs.n; i++)
    held_free(&hs.v[i]);
  free(hs.v);
  return rc < 0 ? rc : 0;
}

int spy_trace_reader_hook_calls_query(
    spy_trace_reader *r, const spy_trace_call_query *q,
    int (*cb)(void *, const spy_trace_hook_call *), void *arg) {
  static const spy_trace_call_query every;
  if (!r || !cb)
    return SPY_EINVAL;
  if (!q)
    q = &every;
  if ((unsigned)q->order > SPY_TRACE_CALLS_SLOWEST)
    return spy__reader_err(r, SPY_EINVAL, "unknown hook call order %d",
                           (int)q->order);
  if (r->ops->calls) { /* the store answers: no replay of every action */
    int qrc = r->ops->calls(r, q, cb, arg);
    if (qrc != SPY_ENOTSUP)
      return qrc;
  }
  return replay_calls(r, q, cb, arg);
}

int spy_trace_reader_hook_calls(spy_trace_reader *r,
                                int (*cb)(void *, const spy_trace_hook_call *),
                                void *arg) {
  return spy_trace_reader_hook_calls_query(r, NULL, cb, arg);
}

/* ---- summary
 * ------------------------------------------------------------------ */

typedef struct refs {
  spy__refcount *v;
  size_t n, cap;
  int err;
} refs;

static void count_refs(const spy_trace_val *v, refs *rs) {
  if ((v->type == SPY_TV_SRCREF || v->type == SPY_TV_SRC) && v->has_hash) {
    if (rs->n == rs->cap) {
      size_t cap = rs->cap ? 2 * rs->cap : 1024;
      spy__refcount *g = realloc(rs->v, cap * sizeof *g);
      if (!g) {
        rs->err = SPY_ENOMEM;
        return;
      }
      rs->v = g;
      rs->cap = cap;
    }
    rs->v[rs->n++] = (spy__refcount){{v->hash[0], v->hash[1]}, 1, 0, 0, 0};
  } else if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC)
    for (uint32_t i = 0; i < v->n; i++)
      count_refs(&v->u.items[i], rs);
}

static int cmp_refcount(const void *x, const void *y) {
  const spy__refcount *a = x, *b = y;
  if (a->hash[0] != b->hash[0])
    return a->hash[0] < b->hash[0] ? -1 : 1;
  if (a->hash[1] != b->hash[1])
    return a->hash[1] < b->hash[1] ? -1 : 1;
  return 0;
}

int spy_trace_reader_summary(spy_trace_reader *r, spy_trace_summary *out) {
  memset(out, 0, sizeof *out);
  refs rs = {0};
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
    count_refs(&a.fields, &rs);
  }
  if (rc == 0 && rs.err)
    rc = spy__reader_err(r, rs.err, "out of memory counting payloads");
  /* distinct payloads with their use counts, then their sizes in one pass */
  if (rs.n)
    qsort(rs.v, rs.n, sizeof *rs.v, cmp_refcount);
  size_t nd = 0;
  for (size_t i = 0; i < rs.n; i++) {
    if (nd && cmp_refcount(&rs.v[nd - 1], &rs.v[i]) == 0)
      rs.v[nd - 1].uses++;
    else
      rs.v[nd++] = rs.v[i];
  }
  if (rc == 0 && nd)
    rc = r->ops->sizes(r, rs.v, nd);
  if (rc < 0) {
    free(rs.v);
    return rc;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < nd; i++) {
    if (!rs.v[i].found)
      continue;
    out->sources++;
    out->source_bytes += rs.v[i].size;
    out->stored_bytes += rs.v[i].stored;
    total += rs.v[i].size * rs.v[i].uses;
  }
  out->saved_bytes = total - out->source_bytes;
  free(rs.v);
  out->lost = r->ops->lost(r);
  out->replaced = r->ops->replaced(r);
  return 0;
}
