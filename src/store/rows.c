/* rows.c — the SQL stores' own tables and the reference's relational
 * schema, shared by the SQLite and PostgreSQL writers.
 *
 * Own tables: sessions (one row per session; `session` is the integer key
 * every action table carries), sources (each payload once, by content id,
 * compressed alone or, codec SPY__CODEC_ZSTD_DELTA, against the payload
 * named by its base_source_id) and action_batches (one row per writer
 * batch: its seq range and action count, and the binary records — payloads
 * by reference, compressed — of those of its actions that their tables
 * cannot give back exactly: application kinds and rows whose text the
 * store would change; schema versions before 4 held every action there).
 * The readers rebuild the action stream from the kinds' tables merged in
 * seq order with those records. The action tables themselves are derived from
 * the catalog (schema.c). The reference's tables — builds, modules,
 * module_imports, chunks, chunk_imports, assets, hook_calls — are views over
 * them, and the indexes below serve the common questions: slowest hooks per
 * plugin, the import graph of a build, what a plugin did to a module. Both are
 * derived from the catalog too: the kinds by their role (build start and
 * end, the module, chunk and asset graphs), the hooks by SPY_TRACE_HOOKS,
 * the columns by the records' fields. Times are µs since the epoch.
 *
 * Both writers also keep a hook call open from its Start to its End the
 * same way (spy__ocall, at the end of this file): where a hook's fields go
 * in its hook_calls row, whether a Start or End can live in that row
 * alone, and the row's cells; what differs (when the row is written,
 * how a failed batch is undone) stays in each writer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

const spy__table spy__tables[SPY__T_COUNT] = {
    [SPY__T_SOURCES] = {"sources",
                        "source_id,size,codec,base_source_id,content", "TIITB",
                        "source_id"},
    [SPY__T_BATCHES] = {"action_batches",
                        "session_id,first_seq,last_seq,count,codec,size,data",
                        "TIIIIIB", "session_id,first_seq"},
};

/* The session of every row joined in: views answer by session_id. */
#define X " JOIN sessions x ON x.session="

/* The built-in kind with role r, or NULL. */
static const spy_trace_kind *by_role(int r) {
  for (int i = 1; i <= SPY_TRACE_KIND_COUNT; i++)
    if (spy_trace_kinds[i]->role == r)
      return spy_trace_kinds[i];
  return NULL;
}

static int is_list(uint8_t t) { return t == SPY_TF_LIST || t == SPY_TF_OLIST; }

/* "<alias>.<column of f>" (a payload: its content id column). */
static void col(spy__buf *b, const char *alias, const spy_trace_field *f) {
  const char *suffix;
  char type;
  spy__field_col(f, &suffix, &type);
  spy__buf_puts(b, alias);
  spy__buf_putc(b, '.');
  spy__buf_puts(b, f->name);
  spy__buf_puts(b, suffix);
}

/* The first payload field of k as "<alias>.<col>", or NULL. */
static void src_col(spy__buf *b, const char *alias, const spy_trace_kind *k) {
  for (uint32_t i = 0; i < k->nfields; i++)
    if (k->fields[i].type == SPY_TF_SRC || k->fields[i].type == SPY_TF_OSRC) {
      col(b, alias, &k->fields[i]);
      return;
    }
  spy__buf_puts(b, "NULL");
}

/* The view name of a record's key field: `id` of record r is <r>_id. */
static void key_name(char *out, size_t cap, const spy_trace_kind *r) {
  const spy_trace_field *f = &r->fields[0];
  if (strcmp(f->name, "id") == 0)
    snprintf(out, cap, "%s_id", r->snake);
  else
    snprintf(out, cap, "%s", f->name);
}

static void view_head(spy__buf *b, int pg, const char *name, size_t n) {
  spy__buf_puts(b, pg ? "DO $$ BEGIN CREATE OR REPLACE VIEW "
                      : "CREATE VIEW IF NOT EXISTS ");
  spy__buf_put(b, name, n);
  spy__buf_puts(b, " AS SELECT x.session_id, ");
}

/* PostgreSQL: a view an older writer made with other columns (it can only
 * be replaced by one that adds columns at its end) is left as it is. */
static void view_end(spy__buf *b, int pg) {
  spy__buf_puts(b, pg ? "; EXCEPTION WHEN invalid_table_definition THEN NULL; "
                        "END $$;\n"
                      : ";\n");
}

/* builds: each BuildStart with its BuildEnd. */
static void builds_view(spy__buf *b, int pg) {
  const spy_trace_kind *s = by_role(SPY_ROLE_BUILD_START);
  const spy_trace_kind *e = by_role(SPY_ROLE_BUILD_END);
  if (!s || !e)
    return;
  view_head(b, pg, "builds", 6);
  spy__buf_puts(b, "s.build_id, s.ts_us AS started_at, e.ts_us AS ended_at "
                   "FROM ");
  spy__buf_puts(b, s->snake);
  spy__buf_puts(b, " s" X "s.session LEFT JOIN ");
  spy__buf_puts(b, e->snake);
  spy__buf_puts(b, " e ON e.session=s.session AND e.build_id=s.build_id");
  view_end(b, pg);
}

/* The graph kinds' lists: a view named after each list (modules, chunks,
 * assets) over its child table, and one per list nested in its records
 * (module_imports, chunk_imports) joined to the parent element. */
static void graph_views(spy__buf *b, int pg, const spy_trace_kind *k) {
  for (uint32_t i = 0; i < k->nfields; i++) {
    const spy_trace_field *f = &k->fields[i];
    if (!is_list(f->type) || !f->rec || !f->rec->nfields)
      continue;
    const spy_trace_kind *r = f->rec;
    char table[256];
    snprintf(table, sizeof table, "%s__%s", k->snake, f->name);
    view_head(b, pg, f->name, strlen(f->name));
    spy__buf_puts(b, "m.build_id");
    for (uint32_t j = 0; j < r->nfields; j++) {
      if (is_list(r->fields[j].type))
        continue;
      spy__buf_puts(b, ", ");
      col(b, "m", &r->fields[j]);
      if (j == 0 && strcmp(r->fields[j].name, "id") == 0) {
        spy__buf_puts(b, " AS ");
        char key[160];
        key_name(key, sizeof key, r);
        spy__buf_puts(b, key);
      }
    }
    spy__buf_puts(b, " FROM ");
    spy__buf_puts(b, table);
    spy__buf_puts(b, " m" X "m.session");
    view_end(b, pg);
    for (uint32_t j = 0; j < r->nfields; j++) {
      const spy_trace_field *g = &r->fields[j];
      if (!is_list(g->type) || !g->rec || !g->rec->nfields)
        continue;
      char name[256];
      snprintf(name, sizeof name, "%s_%s", r->snake, g->name);
      char key[160];
      key_name(key, sizeof key, r);
      view_head(b, pg, name, strlen(name));
      spy__buf_puts(b, "i.build_id, ");
      col(b, "m", &r->fields[0]);
      spy__buf_puts(b, " AS ");
      spy__buf_puts(b, key);
      for (uint32_t c = 0; c < g->rec->nfields; c++) {
        const spy_trace_field *cf = &g->rec->fields[c];
        if (is_list(cf->type))
          continue;
        spy__buf_puts(b, ", ");
        col(b, "i", cf);
        if (strcmp(cf->name, key) == 0) {
          spy__buf_puts(b, " AS imported_");
          spy__buf_puts(b, cf->name);
        }
      }
      spy__buf_puts(b, " FROM ");
      spy__buf_puts(b, table);
      spy__buf_puts(b, "__");
      spy__buf_puts(b, g->name);
      spy__buf_puts(b, " i JOIN ");
      spy__buf_puts(b, table);
      spy__buf_puts(b, " m ON m.session=i.session AND m.build_id=i.build_id "
                       "AND m.seq=i.seq AND m.i0=i.i0" X "i.session");
      view_end(b, pg);
    }
  }
}

/* The columns of hook_calls (the view's, in its order). */
#define HOOK_CALLS_COLS                                                        \
  "session_id TEXT,build_id INTEGER,call_id TEXT,hook_type TEXT,"              \
  "plugin_name TEXT,plugin_id INTEGER,module_id TEXT,started_at INTEGER,"      \
  "ended_at INTEGER,input_source_id TEXT,output_source_id TEXT"

/* hook_calls: every hook's Start joined to its End by call_id. */
static void hook_calls_view(spy__buf *b, int pg, const char *name) {
  view_head(b, pg, name, strlen(name));
  for (const spy__hook *h = spy__hooks; h->hook; h++) {
    if (h != spy__hooks)
      spy__buf_puts(b, " UNION ALL SELECT x.session_id, ");
    spy__buf_puts(b, "s.build_id, s.call_id, '");
    spy__buf_puts(b, h->hook);
    spy__buf_puts(b, "' AS hook_type, s.plugin_name, s.plugin_id, ");
    if (strcmp(h->subject, "_") == 0)
      spy__buf_puts(b, "NULL");
    else {
      spy__buf_puts(b, "s.");
      spy__buf_puts(b, h->subject);
    }
    spy__buf_puts(b, " AS module_id, s.ts_us AS started_at, e.ts_us AS "
                     "ended_at, ");
    src_col(b, "s", h->start);
    spy__buf_puts(b, " AS input_source_id, ");
    src_col(b, "e", h->end);
    spy__buf_puts(b, " AS output_source_id FROM ");
    spy__buf_puts(b, h->start->snake);
    spy__buf_puts(b, " s" X "s.session LEFT JOIN ");
    spy__buf_puts(b, h->end->snake);
    spy__buf_puts(b, " e ON e.session=s.session AND e.build_id=s.build_id AND "
                     "e.call_id=s.call_id");
  }
  view_end(b, pg);
}

void spy__own_tables_sql(spy__buf *b, int pg) {
  spy__buf_puts(b, pg ? "CREATE TABLE IF NOT EXISTS sessions(session BIGSERIAL "
                        "PRIMARY KEY,session_id TEXT UNIQUE NOT NULL,cwd "
                        "TEXT,created_at BIGINT,schema_version BIGINT,actions "
                        "BIGINT,actions_lost BIGINT);\n"
                      : "CREATE TABLE IF NOT EXISTS sessions(session INTEGER "
                        "PRIMARY KEY,session_id TEXT UNIQUE NOT NULL,cwd "
                        "TEXT,created_at INTEGER,schema_version "
                        "INTEGER,actions INTEGER,actions_lost INTEGER);\n");
  for (int t = 0; t < SPY__T_COUNT; t++) {
    const spy__table *tb = &spy__tables[t];
    /* SQLite (schema 7): sources' key is the unique index sources_id,
     * which the writer builds at close of a store it created, not row
     * by row (writer_sqlite.c) */
    spy__create_table_sql(b, tb->name, tb->cols, tb->types,
                          pg || t != SPY__T_SOURCES ? tb->key : NULL, pg);
  }
}

void spy__views_sql(spy__buf *b, int pg) {
  builds_view(b, pg);
  for (int i = 1; i <= SPY_TRACE_KIND_COUNT; i++) {
    int r = spy_trace_kinds[i]->role;
    if (r == SPY_ROLE_MODULES || r == SPY_ROLE_CHUNKS || r == SPY_ROLE_ASSETS)
      graph_views(b, pg, spy_trace_kinds[i]);
  }
  /* SQLite: hook_calls is a table the writer fills (its view's join
   * costs too much for interactive questions); the view stays as
   * hook_calls_live */
  hook_calls_view(b, pg, pg ? "hook_calls" : "hook_calls_live");
}

/* ---- SQLite: a hook call's Start and End kept in its hook_calls row ---- */

int spy__call_role(const spy__hook *h, int end, uint32_t i) {
  const spy_trace_kind *k = end ? h->end : h->start;
  const spy_trace_field *f = &k->fields[i];
  int str = f->type == SPY_TF_STR, src = -1;
  for (uint32_t j = 0; j < k->nfields && src < 0; j++)
    if (k->fields[j].type == SPY_TF_SRC || k->fields[j].type == SPY_TF_OSRC)
      src = (int)j;
  if (str && strcmp(f->name, "call_id") == 0)
    return SPY__CALL_ID;
  if (str && strcmp(f->name, "plugin_name") == 0)
    return SPY__CALL_PLUGIN;
  if (f->type == SPY_TF_INT && strcmp(f->name, "plugin_id") == 0)
    return SPY__CALL_PLUGIN_ID;
  if (str && strcmp(h->subject, "_") != 0 && strcmp(f->name, h->subject) == 0)
    return SPY__CALL_SUBJECT;
  if ((int)i == src)
    return SPY__CALL_SRC;
  return SPY__CALL_EXTRA;
}

/* The k-th extra field of the Starts (end 0) or Ends, one per name (the
 * first hook's type), or NULL. */
static const spy_trace_field *nth_extra(int end, int k) {
  int n = 0;
  for (const spy__hook *h = spy__hooks; h->hook; h++) {
    const spy_trace_kind *kd = end ? h->end : h->start;
    for (uint32_t i = 0; i < kd->nfields; i++) {
      if (spy__call_role(h, end, i) != SPY__CALL_EXTRA)
        continue;
      const spy_trace_field *f = &kd->fields[i];
      int seen = 0; /* an earlier field of that name */
      for (const spy__hook *g = spy__hooks; g <= h && !seen; g++) {
        const spy_trace_kind *gk = end ? g->end : g->start;
        for (uint32_t j = 0; j < gk->nfields && !seen; j++) {
          if (g == h && j >= i)
            break;
          seen = spy__call_role(g, end, j) == SPY__CALL_EXTRA &&
                 strcmp(gk->fields[j].name, f->name) == 0;
        }
      }
      if (!seen && n++ == k)
        return f;
    }
  }
  return NULL;
}

int spy__hook_calls_extra(int k, char *name, size_t cap, char *type) {
  static const char *const own[] = {"start_seq", "end_seq", "kept"};
  if (k < 3) {
    snprintf(name, cap, "%s", own[k]);
    *type = SPY__COL_INT;
    return 1;
  }
  k -= 3;
  for (int end = 0; end < 2; end++) {
    int n = 0;
    while (nth_extra(end, n))
      n++;
    if (k < n) {
      const spy_trace_field *f = nth_extra(end, k);
      const char *suffix;
      spy__field_col(f, &suffix, type);
      snprintf(name, cap, "%s_%s%s", end ? "end" : "start", f->name, suffix);
      return 1;
    }
    k -= n;
  }
  return 0;
}

void spy__hook_calls_table_sql(spy__buf *b) {
  spy__buf_puts(b, "CREATE TABLE IF NOT EXISTS hook_calls(" HOOK_CALLS_COLS);
  char name[128], type;
  for (int k = 0; spy__hook_calls_extra(k, name, sizeof name, &type); k++) {
    spy__buf_putc(b, ',');
    spy__buf_puts(b, name);
    spy__buf_puts(b, type == SPY__COL_INT ? " INTEGER" : " TEXT");
  }
  spy__buf_puts(b, ");\n");
}

void spy__hook_calls_names(spy__buf *b) {
  spy__buf_puts(b, "session_id,build_id,call_id,hook_type,plugin_name,"
                   "plugin_id,module_id,started_at,ended_at,input_source_id,"
                   "output_source_id");
  char name[128], type;
  for (int k = 0; spy__hook_calls_extra(k, name, sizeof name, &type); k++) {
    spy__buf_putc(b, ',');
    spy__buf_puts(b, name);
  }
}

/* The hook_calls column that gives back field i of h's Start or End. */
static void call_col(spy__buf *b, const spy__hook *h, int end, uint32_t i) {
  const spy_trace_field *f = &(end ? h->end : h->start)->fields[i];
  switch (spy__call_role(h, end, i)) {
  case SPY__CALL_ID: spy__buf_puts(b, "h.call_id"); return;
  case SPY__CALL_PLUGIN: spy__buf_puts(b, "h.plugin_name"); return;
  case SPY__CALL_PLUGIN_ID: spy__buf_puts(b, "h.plugin_id"); return;
  case SPY__CALL_SUBJECT: spy__buf_puts(b, "h.module_id"); return;
  case SPY__CALL_SRC:
    spy__buf_puts(b, end ? "h.output_source_id" : "h.input_source_id");
    return;
  }
  const char *suffix;
  char type;
  spy__field_col(f, &suffix, &type);
  spy__buf_puts(b, end ? "h.end_" : "h.start_");
  spy__buf_puts(b, f->name);
  spy__buf_puts(b, suffix);
}

void spy__call_kept_name(char *out, size_t cap, const spy__hook *h, int end) {
  snprintf(out, cap, "%s_kept", (end ? h->end : h->start)->snake);
}

/* spy__call_select_sql over the hook_calls rows in table `rows`. */
static void call_select(spy__buf *b, const spy__hook *h, int end,
                        const char *session, const char *where,
                        const char *rows) {
  const spy_trace_kind *k = end ? h->end : h->start;
  char kept[160];
  spy__call_kept_name(kept, sizeof kept, h, end);
  spy__buf_puts(b, "SELECT session,seq,build_id,ts_us");
  for (uint32_t i = 0; i < k->nfields; i++) {
    const char *suffix;
    char type;
    spy__field_col(&k->fields[i], &suffix, &type);
    spy__buf_putc(b, ',');
    spy__buf_puts(b, k->fields[i].name);
    spy__buf_puts(b, suffix);
  }
  spy__buf_puts(b, " FROM ");
  spy__buf_puts(b, kept);
  spy__buf_puts(b, where ? " NOT INDEXED WHERE session=?1" : "");
  spy__buf_puts(b, " UNION ALL SELECT ");
  spy__buf_puts(b, session);
  spy__buf_puts(b, end ? ",h.end_seq,h.build_id,h.ended_at"
                       : ",h.start_seq,h.build_id,h.started_at");
  for (uint32_t i = 0; i < k->nfields; i++) {
    spy__buf_putc(b, ',');
    call_col(b, h, end, i);
  }
  spy__buf_puts(b, " FROM ");
  spy__buf_puts(b, rows);
  spy__buf_puts(b, where ? " h NOT INDEXED"
                         : " h JOIN sessions x ON x.session_id=h.session_id");
  spy__buf_puts(b, " WHERE ");
  if (where) {
    spy__buf_puts(b, where);
    spy__buf_puts(b, " AND ");
  }
  spy__buf_puts(b, "h.hook_type='");
  spy__buf_puts(b, h->hook);
  spy__buf_puts(b, end ? "' AND h.end_seq IS NOT NULL AND h.kept&2=0"
                       : "' AND h.start_seq IS NOT NULL AND h.kept&1=0");
}

void spy__call_select_sql(spy__buf *b, const spy__hook *h, int end,
                          const char *session, const char *where) {
  call_select(b, h, end, session, where, "hook_calls");
}

void spy__call_views_sql(spy__buf *b) {
  for (const spy__hook *h = spy__hooks; h->hook; h++)
    for (int end = 0; end < 2; end++) {
      spy__buf_puts(b, "CREATE VIEW IF NOT EXISTS ");
      spy__buf_puts(b, (end ? h->end : h->start)->snake);
      spy__buf_puts(b, " AS ");
      spy__call_select_sql(b, h, end, "x.session", NULL);
      spy__buf_puts(b, ";\n");
    }
}

/* ---- PostgreSQL, store schema 6: the same hook_calls rows ---- */

void spy__pg_hook_calls_table_sql(spy__buf *b) {
  spy__buf t = {0};
  spy__hook_calls_table_sql(&t);
  spy__buf_putc(&t, 0);
  /* the table is hook_call_rows (hook_calls is the view over it and the
   * kept Starts), BIGINT where SQLite says INTEGER: the writer's binary
   * COPY sends 8 bytes per number */
  static const char name[] = "hook_calls(";
  const char *p = t.err ? "" : t.p, *n = strstr(p, name);
  if (n) {
    spy__buf_put(b, p, (size_t)(n - p));
    spy__buf_puts(b, SPY__PG_CALL_ROWS "(");
    p = n + sizeof name - 1;
  }
  for (const char *h; *p; p = h + 8) {
    if (!(h = strstr(p, " INTEGER"))) {
      spy__buf_puts(b, p);
      break;
    }
    spy__buf_put(b, p, (size_t)(h - p));
    spy__buf_puts(b, " BIGINT");
  }
  /* the rows of calls whose Starts have rows of their own: the view's
   * question for each kept Start, "has its call a row?", is a probe of
   * this small index (a few rows per batch) instead of a scan of every
   * call; kept up row by row, it costs the COPYs a test per row */
  spy__buf_puts(b, "CREATE INDEX IF NOT EXISTS " SPY__PG_CALL_ROWS
                   "_kept ON " SPY__PG_CALL_ROWS
                   "(session_id, start_seq) WHERE kept&1=1;\n");
  if (t.err)
    b->err = t.err;
  spy__buf_free(&t);
}

/* The hook_calls view: the rows the writer wrote, and a row for each
 * kept Start that has none (its call had not ended when the session
 * closed or was killed): ended_at NULL, as SQLite's hook_calls row of a
 * call that never ended, and as schema 5's view (each Start LEFT JOIN its
 * End) gives it. */
static void pg_hook_calls_view(spy__buf *b) {
  spy__buf names = {0};
  spy__hook_calls_names(&names);
  spy__buf_putc(&names, 0);
  spy__buf_puts(b, "CREATE OR REPLACE VIEW hook_calls AS SELECT ");
  spy__buf_puts(b, names.err ? "" : names.p);
  spy__buf_puts(b, " FROM " SPY__PG_CALL_ROWS);
  if (names.err)
    b->err = names.err;
  spy__buf_free(&names);
  int nextra = 0;
  char name[128], type;
  while (spy__hook_calls_extra(nextra, name, sizeof name, &type))
    nextra++;
  for (const spy__hook *h = spy__hooks; h->hook; h++) {
    const spy_trace_kind *k = h->start;
    const spy_trace_field *role[SPY__CALL_EXTRA] = {0};
    for (uint32_t i = 0; i < k->nfields; i++) {
      int r = spy__call_role(h, 0, i);
      if (r < SPY__CALL_EXTRA && !role[r])
        role[r] = &k->fields[i];
    }
    spy__buf_puts(b, " UNION ALL SELECT x.session_id,s.build_id,");
    static const int std[] = {SPY__CALL_ID, -1, SPY__CALL_PLUGIN,
                              SPY__CALL_PLUGIN_ID, SPY__CALL_SUBJECT};
    for (size_t c = 0; c < sizeof std / sizeof *std; c++) {
      if (std[c] < 0) {
        spy__buf_putc(b, '\'');
        spy__buf_puts(b, h->hook);
        spy__buf_puts(b, "',");
      } else if (role[std[c]]) {
        col(b, "s", role[std[c]]);
        spy__buf_putc(b, ',');
      } else
        spy__buf_puts(b, "NULL,");
    }
    spy__buf_puts(b, "s.ts_us,NULL,");
    if (role[SPY__CALL_SRC])
      col(b, "s", role[SPY__CALL_SRC]);
    else
      spy__buf_puts(b, "NULL");
    /* output_source_id; then the extras: start_seq, end_seq, kept (the
     * Start has its own row), the Start's and End's fields (NULL: the
     * kept row holds the Start's, as in the rows of kept Starts) */
    spy__buf_puts(b, ",NULL,s.seq,NULL,1");
    for (int x = 3; x < nextra; x++)
      spy__buf_puts(b, ",NULL");
    char kept[160];
    spy__call_kept_name(kept, sizeof kept, h, 0);
    spy__buf_puts(b, " FROM ");
    spy__buf_puts(b, kept);
    spy__buf_puts(
        b, " s" X "s.session WHERE NOT EXISTS (SELECT 1 FROM " SPY__PG_CALL_ROWS
           " h WHERE h.session_id=x.session_id AND "
           "h.start_seq=s.seq AND h.kept&1=1)");
  }
  spy__buf_puts(b, ";\n");
}

void spy__pg_call_views_sql(spy__buf *b) {
  for (const spy__hook *h = spy__hooks; h->hook; h++)
    for (int end = 0; end < 2; end++) {
      spy__buf_puts(b, "CREATE OR REPLACE VIEW ");
      spy__buf_puts(b, (end ? h->end : h->start)->snake);
      spy__buf_puts(b, " AS ");
      call_select(b, h, end, "x.session", NULL, SPY__PG_CALL_ROWS);
      spy__buf_puts(b, ";\n");
    }
  pg_hook_calls_view(b);
}

void spy__pg_views_sql(spy__buf *b, int merged) {
  if (!merged) {
    spy__views_sql(b, 1);
    return;
  }
  builds_view(b, 1);
  for (int i = 1; i <= SPY_TRACE_KIND_COUNT; i++) {
    int r = spy_trace_kinds[i]->role;
    if (r == SPY_ROLE_MODULES || r == SPY_ROLE_CHUNKS || r == SPY_ROLE_ASSETS)
      graph_views(b, 1, spy_trace_kinds[i]);
  }
  spy__pg_call_views_sql(b);
}

/* Only the per-plugin one: sorting every call by module at close cost
 * as much as this one (89 M instructions of 2,000 modules' close, 0.15 s
 * on 20,000), and a question about one module scans the table instead
 * (16 ms on the 20,000-module store).
 * The readers do not use it (they read hook_calls by rowid); it is for
 * the per-plugin questions asked in plain sqlite3 (README): on the
 * 20,000-module store the GROUP BY plugin_name, hook_type query takes
 * 0.03 s CPU with it, 0.13 s scanning the table without it, and 0.10-0.14
 * s with a covering index led by the times (cheaper to sort at close: 63
 * against 104 M instructions of sqlite3 on 2,000 modules' calls, but it
 * needs a sort per query). A narrower index is not covering. */
void spy__hook_calls_index_sql(spy__buf *b) {
  spy__buf_puts(b, "CREATE INDEX IF NOT EXISTS hook_calls_plugin ON "
                   "hook_calls(plugin_name, hook_type, started_at, "
                   "ended_at);\n");
}

static void add_index(spy__buf *b, const char *table, const char *what,
                      const char *cols) {
  spy__buf_puts(b, "CREATE INDEX IF NOT EXISTS ");
  spy__buf_puts(b, table);
  spy__buf_puts(b, what);
  spy__buf_puts(b, " ON ");
  spy__buf_puts(b, table);
  spy__buf_puts(b, cols);
  spy__buf_puts(b, ";\n");
}

void spy__index_sql(const spy__schema *s, spy__buf *b, int pg) {
  for (const spy__hook *h = spy__hooks; h->hook; h++) {
    /* SQLite: the hook_calls table's own indexes answer the questions;
     * its hook_calls_live view's join gets an automatic index when it
     * is asked (not one per End table built at every close) */
    if (!pg)
      continue;
    /* hook_calls: each start finds its end */
    add_index(b, h->end->snake, "_call", "(session, build_id, call_id)");
    /* slowest hooks of one plugin */
    add_index(b, h->start->snake, "_plugin", "(session, plugin_name)");
    /* what did plugin X do to module Y */
    if (strcmp(h->subject, "_") != 0) {
      char cols[128];
      snprintf(cols, sizeof cols, "(session, build_id, %s)", h->subject);
      add_index(b, h->start->snake, "_module", cols);
    }
  }
  const spy_trace_kind *e = by_role(SPY_ROLE_BUILD_END);
  if (e)
    add_index(b, e->snake, "_build", "(session, build_id)");
  for (int t = 0; t < s->n; t++) {
    /* SQLite: a child table nothing is nested in (module_imports' rows,
     * chunk_imports', the inputs…) is only ever joined from, never to:
     * the views look its parent up, not it (its sort at close cost 17 M
     * instructions of the 2,000-module tree); a query that starts from a
     * parent gets an automatic index */
    int nests = 0;
    for (uint32_t f = 0; f < s->t[t].rec->nfields; f++)
      nests |= s->t[t].child[f] >= 0;
    if (pg || nests)
      spy__schema_index_sql(s, t, b);
  }
}

void spy__pg_index_sql(const spy__schema *s, spy__buf *b, int merged) {
  if (!merged) {
    spy__index_sql(s, b, 1);
    return;
  }
  /* the hook kinds' names are views over hook_call_rows (and their small
   * _kept tables): the per-plugin question's index is hook_call_rows' */
  spy__buf_puts(
      b, "CREATE INDEX IF NOT EXISTS hook_calls_plugin ON " SPY__PG_CALL_ROWS
         "(plugin_name, hook_type, started_at, ended_at);\n");
  const spy_trace_kind *e = by_role(SPY_ROLE_BUILD_END);
  if (e)
    add_index(b, e->snake, "_build", "(session, build_id)");
  for (int t = 0; t < s->n; t++)
    spy__schema_index_sql(s, t, b);
}

void spy__batch_mark_add(spy__batch_mark *m, uint64_t seq) {
  if (!m->n)
    m->first = seq;
  m->last = seq;
  m->n++;
}

void spy__batch_mark_cells(const spy__batch_mark *m, spy__cell c[7]) {
  c[1] = (spy__cell){SPY__COL_INT, (int64_t)m->first, NULL, 0};
  c[2] = (spy__cell){SPY__COL_INT, (int64_t)m->last, NULL, 0};
  c[3] = (spy__cell){SPY__COL_INT, m->n, NULL, 0};
}

int spy__batch_keeps(const spy__schema *s, int root,
                     const spy_trace_action *a) {
  /* the readers rebuild only the built-in kinds from their tables */
  return root < 0 || root >= s->nbuiltin || !a->kind || a->kind->id == 0 ||
         s->inexact;
}

int spy__sql_all_records(void) {
  const char *e = getenv("SPY_TRACE_SQL_RECORDS");
  return e && strcmp(e, "all") == 0;
}

/* ---- filling a call's row (both SQL writers) ----------------------------
 */

int spy__kind_field_ix(const spy_trace_kind *k, const char *name) {
  for (uint32_t i = 0; k && name && i < k->nfields; i++)
    if (strcmp(k->fields[i].name, name) == 0)
      return (int)i;
  return -1;
}

int spy__kind_src_ix(const spy_trace_kind *k) {
  for (uint32_t i = 0; i < k->nfields; i++)
    if (k->fields[i].type == SPY_TF_SRC || k->fields[i].type == SPY_TF_OSRC)
      return (int)i;
  return -1;
}

int spy__hook_calls_extra_col(int end, const spy_trace_field *f) {
  char col[128], want[128], type;
  const char *suffix;
  spy__field_col(f, &suffix, &type);
  snprintf(want, sizeof want, "%s_%s%s", end ? "end" : "start", f->name,
           suffix);
  for (int k = 0; spy__hook_calls_extra(k, col, sizeof col, &type); k++)
    if (strcmp(col, want) == 0)
      return SPY__HC_STD + k;
  return -1;
}

const spy_trace_val *spy__act_field(const spy_trace_action *a, int i) {
  return i >= 0 && a->fields.type == SPY_TV_REC && (uint32_t)i < a->fields.n
             ? &a->fields.u.items[i]
             : NULL;
}

const char *spy__val_str(const spy_trace_val *v, size_t *n) {
  *n = v && v->type == SPY_TV_STR ? v->n : 0;
  return v && v->type == SPY_TV_STR ? v->u.s : NULL;
}

spy__cell spy__scalar_cell(uint8_t t, const spy_trace_val *v, char *hex) {
  if (!v)
    return (spy__cell){0};
  switch (t) {
  case SPY_TF_STR:
  case SPY_TF_OSTR:
    if (v->type == SPY_TV_STR)
      return (spy__cell){SPY__COL_TEXT, 0, v->u.s, v->n};
    break;
  case SPY_TF_INT:
  case SPY_TF_OINT:
    if (v->type == SPY_TV_INT)
      return (spy__cell){SPY__COL_INT, v->u.i, NULL, 0};
    break;
  case SPY_TF_BOOL:
  case SPY_TF_OBOOL:
    if (v->type == SPY_TV_TRUE || v->type == SPY_TV_FALSE)
      return (spy__cell){SPY__COL_INT, v->type == SPY_TV_TRUE, NULL, 0};
    break;
  default: /* SRC, OSRC */
    if (v->has_hash) {
      spy_trace_hash_hex(v->hash, hex);
      return (spy__cell){SPY__COL_TEXT, 0, hex, 32};
    }
  }
  return (spy__cell){0};
}

int spy__val_is_str(const spy_trace_val *v, const char *s) {
  return v && v->type == SPY_TV_STR && s && strlen(s) == v->n &&
         memcmp(s, v->u.s, v->n) == 0;
}

/* ---- open hook calls (both SQL writers) ---------------------------------
 */

int spy__hook_calls_ncols(char *types) {
  char col[128], type;
  int n = SPY__HC_STD;
  if (types) {
    /* session_id, build_id, call_id, hook_type, plugin_name, plugin_id,
     * module_id, started_at, ended_at, input_source_id, output_source_id */
    static const char std[] = "TITTTITIITT";
    for (int i = 0; i < SPY__HC_STD; i++)
      types[i] = std[i] == 'I' ? SPY__COL_INT : SPY__COL_TEXT;
  }
  while (n < SPY__HC_MAX &&
         spy__hook_calls_extra(n - SPY__HC_STD, col, sizeof col, &type)) {
    if (types)
      types[n] = type == SPY__COL_INT ? SPY__COL_INT : SPY__COL_TEXT;
    n++;
  }
  if (types)
    types[n] = 0;
  return n;
}

void spy__hookcols_init(spy__hookcols *c, const spy__hook *h, int ncols) {
  *c = (spy__hookcols){
      spy__kind_field_ix(h->start, "call_id"),
      spy__kind_field_ix(h->start, "plugin_name"),
      spy__kind_field_ix(h->start, "plugin_id"),
      strcmp(h->subject, "_") ? spy__kind_field_ix(h->start, h->subject) : -1,
      spy__kind_src_ix(h->start),
      spy__kind_field_ix(h->end, "call_id"),
      spy__kind_src_ix(h->end),
      {h->start->nfields <= SPY__CALL_FIELDS,
       h->end->nfields <= SPY__CALL_FIELDS},
      {{0}},
      {{0}}};
  for (int end = 0; end < 2; end++) {
    const spy_trace_kind *k = end ? h->end : h->start;
    int nx = 0;
    for (uint32_t j = 0; c->merge[end] && j < k->nfields; j++) {
      const spy_trace_field *f = &k->fields[j];
      c->role[end][j] = (int8_t)spy__call_role(h, end, j);
      c->col[end][j] = -1;
      if (c->role[end][j] != SPY__CALL_EXTRA)
        continue;
      switch (f->type) { /* the cells the tables would give them */
      case SPY_TF_STR:
      case SPY_TF_OSTR:
      case SPY_TF_INT:
      case SPY_TF_OINT:
      case SPY_TF_BOOL:
      case SPY_TF_OBOOL:
      case SPY_TF_SRC:
      case SPY_TF_OSRC:
        c->col[end][j] = (int8_t)spy__hook_calls_extra_col(end, f);
        break;
      default: break;
      }
      /* a list, or more extras than an ocall holds: own rows */
      if (c->col[end][j] < 0 || c->col[end][j] >= ncols ||
          (!end && ++nx > SPY__START_X))
        c->merge[end] = 0;
    }
  }
}

const spy__hook *spy__call_hook(const spy_trace_kind *k, int *ix, int *end) {
  int i = 0;
  for (const spy__hook *h = spy__hooks; h->hook && i < SPY__NHOOKS; h++, i++)
    if (h->start == k || h->end == k) {
      *ix = i;
      *end = h->end == k;
      return h;
    }
  return NULL;
}

/* Whether Start a can live in its call's row alone: every field the row
 * gives back as the Start's table would. */
static int start_fits(const spy__hookcols *hc, const spy_trace_action *a,
                      int text_only) {
  if (!hc->merge[0] || a->fields.type != SPY_TV_REC ||
      a->fields.n != a->kind->nfields)
    return 0;
  for (uint32_t j = 0; j < a->kind->nfields; j++) {
    const spy_trace_val *v = &a->fields.u.items[j];
    int r = hc->role[0][j];
    /* the row's plugin_id is 0 for a missing one; the table's NULL */
    if (r == SPY__CALL_PLUGIN_ID && v->type != SPY_TV_INT)
      return 0;
    if (text_only &&
        (r == SPY__CALL_ID || r == SPY__CALL_PLUGIN ||
         r == SPY__CALL_SUBJECT) &&
        v->type != SPY_TV_STR && v->type != SPY_TV_NULL)
      return 0;
  }
  return 1;
}

int spy__ocall_start(spy__ocall *o, const spy__hook *h, const spy__hookcols *c,
                     const spy_trace_action *a, int text_only) {
  const spy_trace_val *id = spy__act_field(a, c->call),
                      *pid = spy__act_field(a, c->plugin_id),
                      *src = spy__act_field(a, c->src);
  int fits = start_fits(c, a, text_only);
  *o = (spy__ocall){.hook = h,
                    .build = a->build,
                    .kept = !fits,
                    .plugin_id = pid && pid->type == SPY_TV_INT ? pid->u.i : 0,
                    .started = (int64_t)a->ts_us,
                    .start_seq = a->seq};
  char hex[SPY__START_X][33];
  for (uint32_t j = 0; fits && j < a->kind->nfields; j++)
    if (c->role[0][j] == SPY__CALL_EXTRA) {
      o->sx[o->nsx] = spy__scalar_cell(a->kind->fields[j].type,
                                       &a->fields.u.items[j], hex[o->nsx]);
      o->sxcol[o->nsx++] = c->col[0][j];
    }
  size_t npl, nmod;
  const char *pl = spy__val_str(spy__act_field(a, c->plugin), &npl);
  const char *mod = spy__val_str(spy__act_field(a, c->subject), &nmod);
  if (spy__ocall_strs(o, id->u.s, id->n, pl, npl, mod, nmod) < 0)
    return SPY_ENOMEM;
  if (src && src->has_hash)
    spy_trace_hash_hex(src->hash, o->input);
  return fits;
}

int spy__ocall_strs(spy__ocall *o, const char *id, size_t nid, const char *pl,
                    size_t npl, const char *mod, size_t nmod) {
  size_t extra = 0;
  for (int i = 0; i < o->nsx; i++)
    if (o->sx[i].kind == SPY__COL_TEXT)
      extra += o->sx[i].n;
  char *b = malloc(nid + 1 + (pl ? npl + 1 : 0) + (mod ? nmod + 1 : 0) + extra);
  o->call_id = b;
  o->plugin = o->module = NULL;
  if (!b)
    return SPY_ENOMEM;
  memcpy(b, id, nid);
  b[nid] = 0;
  b += nid + 1;
  if (pl) {
    memcpy(b, pl, npl);
    b[npl] = 0;
    o->plugin = b;
    b += npl + 1;
  }
  if (mod) {
    memcpy(b, mod, nmod);
    b[nmod] = 0;
    o->module = b;
    b += nmod + 1;
  }
  for (int i = 0; i < o->nsx; i++)
    if (o->sx[i].kind == SPY__COL_TEXT) {
      if (o->sx[i].n)
        memcpy(b, o->sx[i].s, o->sx[i].n);
      o->sx[i].s = b;
      b += o->sx[i].n;
    }
  return 0;
}

int spy__ocall_load(spy__ocall *o, const char *id, const char *pl,
                    const char *mod, const char *in) {
  if (in && strlen(in) == 32)
    memcpy(o->input, in, 33);
  return spy__ocall_strs(o, id, strlen(id), pl, pl ? strlen(pl) : 0, mod,
                         mod ? strlen(mod) : 0);
}

void spy__ocall_free(spy__ocall *o) { free(o->call_id); }

int spy__call_mergeable(const spy__hookcols *hc, const spy__ocall *o,
                        const spy_trace_action *a) {
  if (!hc->merge[1] || a->fields.type != SPY_TV_REC ||
      a->fields.n != a->kind->nfields)
    return 0;
  for (uint32_t j = 0; j < a->kind->nfields; j++) {
    const spy_trace_val *v = &a->fields.u.items[j];
    switch (hc->role[1][j]) {
    case SPY__CALL_PLUGIN:
      if (!spy__val_is_str(v, o->plugin))
        return 0;
      break;
    case SPY__CALL_PLUGIN_ID:
      if (v->type != SPY_TV_INT || v->u.i != o->plugin_id)
        return 0;
      break;
    case SPY__CALL_SUBJECT:
      if (!spy__val_is_str(v, o->module))
        return 0;
      break;
    default: break; /* call_id matched; the output and extras are copied */
    }
  }
  return 1;
}

void spy__call_output(const spy__hookcols *hc, const spy_trace_action *a,
                      char out[33]) {
  const spy_trace_val *src = spy__act_field(a, hc->end_src);
  out[0] = 0;
  if (src && src->has_hash)
    spy_trace_hash_hex(src->hash, out);
}

void spy__call_cells(const spy__ocall *o, const spy_trace_action *end,
                     const char *output, const spy__hookcols *hc, int merged,
                     const char *session_id, size_t session_n, int ncols,
                     spy__cell *c, char (*hex)[33]) {
  for (int i = 0; i < ncols; i++)
    c[i] = (spy__cell){0};
  c[0] = (spy__cell){SPY__COL_TEXT, 0, session_id, session_n};
  c[1] = (spy__cell){SPY__COL_INT, o->build, NULL, 0};
  c[2] = (spy__cell){SPY__COL_TEXT, 0, o->call_id, strlen(o->call_id)};
  c[3] = (spy__cell){SPY__COL_TEXT, 0, o->hook->hook, strlen(o->hook->hook)};
  if (o->plugin)
    c[4] = (spy__cell){SPY__COL_TEXT, 0, o->plugin, strlen(o->plugin)};
  c[5] = (spy__cell){SPY__COL_INT, o->plugin_id, NULL, 0};
  if (o->module)
    c[6] = (spy__cell){SPY__COL_TEXT, 0, o->module, strlen(o->module)};
  c[7] = (spy__cell){SPY__COL_INT, o->started, NULL, 0};
  if (end)
    c[8] = (spy__cell){SPY__COL_INT, (int64_t)end->ts_us, NULL, 0};
  if (o->input[0])
    c[9] = (spy__cell){SPY__COL_TEXT, 0, o->input, 32};
  if (output && output[0])
    c[10] = (spy__cell){SPY__COL_TEXT, 0, output, 32};
  c[SPY__HC_START] = (spy__cell){SPY__COL_INT, (int64_t)o->start_seq, NULL, 0};
  if (end)
    c[SPY__HC_END] = (spy__cell){SPY__COL_INT, (int64_t)end->seq, NULL, 0};
  c[SPY__HC_KEPT] =
      (spy__cell){SPY__COL_INT, o->kept | (end && !merged ? 2 : 0), NULL, 0};
  if (!o->kept)
    for (int i = 0; i < o->nsx; i++)
      c[o->sxcol[i]] = o->sx[i];
  for (uint32_t j = 0; merged && j < end->kind->nfields; j++)
    if (hc->role[1][j] == SPY__CALL_EXTRA)
      c[hc->col[1][j]] = spy__scalar_cell(end->kind->fields[j].type,
                                          spy__act_field(end, (int)j), hex[j]);
}
