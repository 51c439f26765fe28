/* rows.c — the relational schema of the SQL stores and the mapping from an
 * action to its rows, shared by the SQLite and PostgreSQL writers.
 *
 * Tables follow the reference sketch (sessions, builds, modules,
 * module_imports, chunks, chunk_imports, sources, hook_calls, assets) plus
 * action_batches: every action's binary record (SRCREFs for payloads), in
 * seq order, one zstd-compressed blob per writer batch — the full-fidelity log
 * the readers iterate (application kinds land only there), at a fraction of the
 * bytes of one row per action. A hook call becomes one hook_calls row when its
 * End arrives; its Start waits here until then. Times are µs since the epoch.
 * Indexes serve the common questions: slowest hooks per plugin, the import
 * graph of a build, what a plugin did to a module. A sources row holds a
 * payload once, compressed alone or (codec SPY__CODEC_ZSTD_DELTA, schema
 * version 3) against the payload named by its base_source_id.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

const spy__table spy__tables[SPY__T_COUNT] = {
    [SPY__T_SESSIONS] = {"sessions",
                         "session_id,cwd,platform,format,dir,file,created_at,"
                         "schema_version,actions,actions_lost",
                         "TTTTTTIIII", "session_id"},
    [SPY__T_BUILDS] = {"builds", "session_id,build_id,started_at,ended_at",
                       "TIII", "session_id,build_id"},
    [SPY__T_MODULES] = {"modules", "session_id,build_id,module_id,is_external",
                        "TITI", NULL},
    [SPY__T_MODULE_IMPORTS] = {"module_imports",
                               "session_id,build_id,module_id,"
                               "imported_module_id,kind,module_request",
                               "TITTTT", NULL},
    [SPY__T_CHUNKS] = {"chunks",
                       "session_id,build_id,chunk_id,name,reason,"
                       "is_user_defined_entry,is_async_entry,entry_module",
                       "TIITTIIT", NULL},
    [SPY__T_CHUNK_IMPORTS] = {"chunk_imports",
                              "session_id,build_id,chunk_id,imported_chunk_id,"
                              "kind",
                              "TIIIT", NULL},
    [SPY__T_SOURCES] = {"sources",
                        "source_id,size,codec,base_source_id,content", "TIITB",
                        "source_id"},
    [SPY__T_HOOK_CALLS] = {"hook_calls",
                           "session_id,build_id,call_id,hook_type,plugin_name,"
                           "plugin_id,module_id,started_at,ended_at,"
                           "input_source_id,output_source_id",
                           "TITTTITIITT", NULL},
    [SPY__T_ASSETS] = {"assets",
                       "session_id,build_id,filename,chunk_id,size,"
                       "content_source_id",
                       "TITIIT", NULL},
    [SPY__T_BATCHES] = {"action_batches",
                        "session_id,first_seq,last_seq,count,codec,size,data",
                        "TIIIIIB", "session_id,first_seq"},
};

const char *const spy__indexes[] = {
    /* slowest hooks per plugin */
    "CREATE INDEX IF NOT EXISTS hook_calls_plugin ON hook_calls"
    "(session_id, plugin_name, hook_type)",
    /* what did transform X do to module Y */
    "CREATE INDEX IF NOT EXISTS hook_calls_module ON hook_calls"
    "(session_id, build_id, module_id, plugin_name)",
    /* import graph of build N */
    "CREATE INDEX IF NOT EXISTS module_imports_build ON module_imports"
    "(session_id, build_id, module_id)",
    "CREATE INDEX IF NOT EXISTS modules_build ON modules"
    "(session_id, build_id)",
    "CREATE INDEX IF NOT EXISTS chunks_build ON chunks(session_id, build_id)",
    "CREATE INDEX IF NOT EXISTS chunk_imports_build ON chunk_imports"
    "(session_id, build_id)",
    "CREATE INDEX IF NOT EXISTS assets_build ON assets(session_id, build_id)",
    NULL};

void spy__schema_sql(spy__buf *b, int pg) {
  for (int t = 0; t < SPY__T_COUNT; t++) {
    const spy__table *tb = &spy__tables[t];
    spy__buf_puts(b, "CREATE TABLE IF NOT EXISTS ");
    spy__buf_puts(b, tb->name);
    spy__buf_putc(b, '(');
    const char *c = tb->cols;
    for (int i = 0; tb->types[i]; i++) {
      const char *e = strchr(c, ',');
      size_t n = e ? (size_t)(e - c) : strlen(c);
      if (i)
        spy__buf_putc(b, ',');
      spy__buf_put(b, c, n);
      switch (tb->types[i]) {
      case SPY__COL_INT: spy__buf_puts(b, pg ? " BIGINT" : " INTEGER"); break;
      case SPY__COL_TEXT: spy__buf_puts(b, " TEXT"); break;
      case SPY__COL_BLOB: spy__buf_puts(b, pg ? " BYTEA" : " BLOB"); break;
      case SPY__COL_JSON: spy__buf_puts(b, pg ? " JSONB" : " TEXT"); break;
      }
      c = e ? e + 1 : c + n;
    }
    if (tb->key) {
      spy__buf_puts(b, ",PRIMARY KEY(");
      spy__buf_puts(b, tb->key);
      spy__buf_putc(b, ')');
    }
    spy__buf_puts(b, ");\n");
  }
}

void spy__index_sql(spy__buf *b) {
  for (int i = 0; spy__indexes[i]; i++) {
    spy__buf_puts(b, spy__indexes[i]);
    spy__buf_puts(b, ";\n");
  }
}

/* ---- mapping --------------------------------------------------------------
 */

typedef struct pending {
  char *call_id;
  uint32_t build;
  uint64_t started;
  char *module;
  int has_input;
  char input[33];
  struct pending *next;
} pending;

#define NBUCKET 1024
struct spy__rows {
  char *session_id;
  spy__buf rec; /* the action's binary record */
  pending *bucket[NBUCKET];
};

spy__rows *spy__rows_new(const char *session_id) {
  spy__rows *m = calloc(1, sizeof *m);
  if (m && !(m->session_id = strdup(session_id))) {
    free(m);
    m = NULL;
  }
  return m;
}

void spy__rows_free(spy__rows *m) {
  if (!m)
    return;
  for (int i = 0; i < NBUCKET; i++)
    for (pending *p = m->bucket[i], *n; p; p = n) {
      n = p->next;
      free(p->call_id);
      free(p->module);
      free(p);
    }
  spy__buf_free(&m->rec);
  free(m->session_id);
  free(m);
}

static size_t bucket_of(const char *s, size_t n) {
  uint64_t h[2];
  spy_trace_hash(s, n, h);
  return h[1] % NBUCKET;
}

static spy__cell I(int64_t v) { return (spy__cell){SPY__COL_INT, v, NULL, 0}; }
static spy__cell T(const char *s, size_t n) {
  return s ? (spy__cell){SPY__COL_TEXT, 0, s, n} : (spy__cell){0};
}
static spy__cell TV(const spy_trace_val *v) {
  return v && (v->type == SPY_TV_STR) ? T(v->u.s, v->n) : (spy__cell){0};
}
static spy__cell IV(const spy_trace_val *v) {
  return v && v->type == SPY_TV_INT ? I(v->u.i)
         : v && (v->type == SPY_TV_TRUE || v->type == SPY_TV_FALSE)
             ? I(v->type == SPY_TV_TRUE)
             : (spy__cell){0};
}
int spy__rows_map(spy__rows *m, const spy_trace_record *r, spy__row_sink sink,
                  void *arg) {
  const spy_trace_action *a = r->action;
  const char *sid = m->session_id;
  size_t sl = strlen(sid);
  spy__cell c[SPY__MAX_COLS];
  int rc;
  c[0] = T(sid, sl);
  c[1] = I((int64_t)a->seq);
  c[2] = I(a->build);
  c[3] = I((int64_t)a->ts_us);
  c[4] = T(a->name, a->name_len);
  m->rec.len = 0;
  if ((rc = spy__trace_record_put(&m->rec, a)) < 0)
    return rc;
  c[5] = (spy__cell){SPY__COL_BLOB, 0, m->rec.p, m->rec.len};
  if ((rc = sink(arg, SPY__ROW_ACTION, c)) < 0)
    return rc;
  const spy_trace_kind *k = a->kind;
  if (!k)
    return 0;
  const spy_trace_val *f = &a->fields;
  c[1] = I(a->build);
  switch (k->role) {
  case SPY_ROLE_SESSION:
    c[1] = TV(spy__field(k, f, "cwd"));
    c[2] = TV(spy__field(k, f, "platform"));
    c[3] = TV(spy__field(k, f, "format"));
    c[4] = TV(spy__field(k, f, "dir"));
    c[5] = TV(spy__field(k, f, "file"));
    c[6] = I((int64_t)a->ts_us);
    c[7] = I(SPY_TRACE_SCHEMA_VERSION);
    c[8] = (spy__cell){0};
    c[9] = (spy__cell){0};
    return sink(arg, SPY__T_SESSIONS, c);
  case SPY_ROLE_BUILD_START:
    c[2] = I((int64_t)a->ts_us);
    c[3] = (spy__cell){0};
    return sink(arg, SPY__T_BUILDS, c);
  case SPY_ROLE_BUILD_END:
    c[2] = (spy__cell){0};
    c[3] = I((int64_t)a->ts_us); /* the writer turns this into an update */
    return sink(arg, SPY__T_BUILDS, c);
  case SPY_ROLE_MODULES: {
    const spy_trace_val *mods = spy__field(k, f, "modules");
    const spy_trace_kind *mk = &spy_rec_kind_module;
    for (uint32_t i = 0; mods && i < mods->n; i++) {
      const spy_trace_val *mo = &mods->u.items[i];
      c[2] = TV(spy__field(mk, mo, "id"));
      c[3] = IV(spy__field(mk, mo, "is_external"));
      if ((rc = sink(arg, SPY__T_MODULES, c)) < 0)
        return rc;
      const spy_trace_val *imps = spy__field(mk, mo, "imports");
      const spy_trace_kind *ik = &spy_rec_kind_module_import;
      for (uint32_t j = 0; imps && imps->type == SPY_TV_LIST && j < imps->n;
           j++) {
        const spy_trace_val *im = &imps->u.items[j];
        spy__cell d[6] = {c[0],
                          c[1],
                          TV(spy__field(mk, mo, "id")),
                          TV(spy__field(ik, im, "module_id")),
                          TV(spy__field(ik, im, "kind")),
                          TV(spy__field(ik, im, "module_request"))};
        if ((rc = sink(arg, SPY__T_MODULE_IMPORTS, d)) < 0)
          return rc;
      }
    }
    return 0;
  }
  case SPY_ROLE_CHUNKS: {
    const spy_trace_val *chs = spy__field(k, f, "chunks");
    const spy_trace_kind *ck = &spy_rec_kind_chunk;
    for (uint32_t i = 0; chs && i < chs->n; i++) {
      const spy_trace_val *ch = &chs->u.items[i];
      c[2] = IV(spy__field(ck, ch, "chunk_id"));
      c[3] = TV(spy__field(ck, ch, "name"));
      c[4] = TV(spy__field(ck, ch, "reason"));
      c[5] = IV(spy__field(ck, ch, "is_user_defined_entry"));
      c[6] = IV(spy__field(ck, ch, "is_async_entry"));
      c[7] = TV(spy__field(ck, ch, "entry_module"));
      if ((rc = sink(arg, SPY__T_CHUNKS, c)) < 0)
        return rc;
      const spy_trace_val *imps = spy__field(ck, ch, "imports");
      const spy_trace_kind *ik = &spy_rec_kind_chunk_import;
      for (uint32_t j = 0; imps && j < imps->n; j++) {
        const spy_trace_val *im = &imps->u.items[j];
        spy__cell d[5] = {c[0], c[1], c[2], IV(spy__field(ik, im, "chunk_id")),
                          TV(spy__field(ik, im, "kind"))};
        if ((rc = sink(arg, SPY__T_CHUNK_IMPORTS, d)) < 0)
          return rc;
      }
    }
    return 0;
  }
  case SPY_ROLE_ASSETS: {
    const spy_trace_val *as = spy__field(k, f, "assets");
    const spy_trace_kind *ak = &spy_rec_kind_asset;
    for (uint32_t i = 0; as && i < as->n; i++) {
      const spy_trace_val *it = &as->u.items[i];
      const spy_trace_val *ct = spy__field(ak, it, "content");
      char id[33];
      c[2] = TV(spy__field(ak, it, "filename"));
      c[3] = IV(spy__field(ak, it, "chunk_id"));
      c[4] = IV(spy__field(ak, it, "size"));
      c[5] = (spy__cell){0};
      if (ct && ct->has_hash) {
        spy_trace_hash_hex(ct->hash, id);
        c[5] = T(id, 32);
      }
      if ((rc = sink(arg, SPY__T_ASSETS, c)) < 0)
        return rc;
    }
    return 0;
  }
  case SPY_ROLE_HOOK_START:
  case SPY_ROLE_HOOK_END: {
    const spy_trace_val *cid = spy__field(k, f, "call_id");
    if (!cid || cid->type != SPY_TV_STR)
      return 0;
    const spy_trace_val *src = spy__field(k, f, "content");
    size_t bk = bucket_of(cid->u.s, cid->n);
    pending **pp = &m->bucket[bk];
    while (*pp && (strlen((*pp)->call_id) != cid->n ||
                   memcmp((*pp)->call_id, cid->u.s, cid->n) != 0))
      pp = &(*pp)->next;
    if (k->role == SPY_ROLE_HOOK_START) {
      pending *p = calloc(1, sizeof *p);
      if (!p || !(p->call_id = strndup(cid->u.s, cid->n))) {
        free(p);
        return SPY_ENOMEM;
      }
      const spy_trace_val *mod = spy__field(k, f, "module_id");
      if (!mod)
        mod = spy__field(k, f, "module_request");
      p->module = mod && mod->type == SPY_TV_STR ? strndup(mod->u.s, mod->n)
                                                 : strdup("");
      p->build = a->build;
      p->started = a->ts_us;
      if (src && src->has_hash) {
        p->has_input = 1;
        spy_trace_hash_hex(src->hash, p->input);
      }
      p->next = m->bucket[bk];
      m->bucket[bk] = p;
      return p->module ? 0 : SPY_ENOMEM;
    }
    pending *p = *pp;
    char out[33];
    c[1] = I(p ? p->build : a->build);
    c[2] = T(cid->u.s, cid->n);
    c[3] = T(spy__hook_type(k), strlen(spy__hook_type(k)));
    c[4] = TV(spy__field(k, f, "plugin_name"));
    c[5] = IV(spy__field(k, f, "plugin_id"));
    c[6] = p ? T(p->module, strlen(p->module)) : (spy__cell){0};
    c[7] = p ? I((int64_t)p->started) : (spy__cell){0};
    c[8] = I((int64_t)a->ts_us);
    c[9] = p && p->has_input ? T(p->input, 32) : (spy__cell){0};
    c[10] = (spy__cell){0};
    if (src && src->has_hash) {
      spy_trace_hash_hex(src->hash, out);
      c[10] = T(out, 32);
    }
    rc = sink(arg, SPY__T_HOOK_CALLS, c);
    if (p) {
      *pp = p->next;
      free(p->call_id);
      free(p->module);
      free(p);
    }
    return rc;
  }
  default: return 0;
  }
}
