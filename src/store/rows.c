/* rows.c — the SQL stores' own tables and the reference's relational
 * schema, shared by the SQLite and PostgreSQL writers.
 *
 * Own tables: sessions (one row per session; `session` is the integer key
 * every action table carries), sources (each payload once, by content id,
 * compressed alone or, codec SPY__CODEC_ZSTD_DELTA, against the payload
 * named by its base_source_id) and action_batches (every action's binary
 * record, payloads by reference, one compressed blob per writer batch: the log
 * the readers replay). The action tables themselves are derived from the
 * catalog (schema.c). The reference's tables — builds, modules, module_imports,
 * chunks, chunk_imports, assets, hook_calls — are views over them, and
 * the indexes below serve the common questions: slowest hooks per plugin,
 * the import graph of a build, what a plugin did to a module. Times are µs
 * since the epoch. */
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

static const char *const views[][2] = {
    {"builds",
     "SELECT x.session_id, s.build_id, s.ts_us AS started_at, e.ts_us AS "
     "ended_at FROM build_start s" X "s.session LEFT JOIN build_end e ON "
     "e.session=s.session AND e.build_id=s.build_id"},
    {"modules",
     "SELECT x.session_id, m.build_id, m.id AS module_id, m.is_external, "
     "m.importers FROM module_graph_ready__modules m" X "m.session"},
    {"module_imports",
     "SELECT x.session_id, i.build_id, m.id AS module_id, i.module_id AS "
     "imported_module_id, i.kind, i.module_request FROM "
     "module_graph_ready__modules__imports i JOIN "
     "module_graph_ready__modules "
     "m ON m.session=i.session AND m.build_id=i.build_id AND m.seq=i.seq "
     "AND "
     "m.i0=i.i0" X "i.session"},
    {"chunks",
     "SELECT x.session_id, c.build_id, c.chunk_id, c.name, c.reason, "
     "c.is_user_defined_entry, c.is_async_entry, c.entry_module, c.modules "
     "FROM chunk_graph_ready__chunks c" X "c.session"},
    {"chunk_imports",
     "SELECT x.session_id, i.build_id, c.chunk_id, i.chunk_id AS "
     "imported_chunk_id, i.kind FROM chunk_graph_ready__chunks__imports i "
     "JOIN chunk_graph_ready__chunks c ON c.session=i.session AND "
     "c.build_id=i.build_id AND c.seq=i.seq AND c.i0=i.i0" X "i.session"},
    {"assets",
     "SELECT x.session_id, a.build_id, a.filename, a.chunk_id, a.size, "
     "a.content_source_id FROM assets_ready__assets a" X "a.session"},
/* one hook: its Start table joined to its End table by call_id */
#define HOOK(type, start, end, module, input, output)                          \
  "SELECT x.session_id, s.build_id, s.call_id, '" type "' AS hook_type, "      \
  "s.plugin_name, s.plugin_id, " module " AS module_id, s.ts_us AS "           \
  "started_at, e.ts_us AS ended_at, " input " AS input_source_id, " output     \
  " AS output_source_id FROM " start " s" X "s.session LEFT JOIN " end         \
  " e ON e.session=s.session AND e.build_id=s.build_id AND "                   \
  "e.call_id=s.call_id"
    {"hook_calls",
     HOOK("transform", "hook_transform_call_start", "hook_transform_call_end", "s.module_id", "s.content_source_id", "e.content_source_id") " UNION ALL " HOOK(
         "load", "hook_load_call_start", "hook_load_call_end", "s.module_id",
         "NULL",
         "e.content_source_id") " UNION ALL " HOOK("resolve_id",
                                                   "hook_resolve_id_call_"
                                                   "start",
                                                   "hook_resolve_id_call_"
                                                   "end",
                                                   "s.module_request", "NULL",
                                                   "NULL") " UNION "
                                                           "ALL " HOOK("ren"
                                                                       "der"
                                                                       "_ch"
                                                                       "un"
                                                                       "k",
                                                                       "hoo"
                                                                       "k_"
                                                                       "ren"
                                                                       "der"
                                                                       "_ch"
                                                                       "unk"
                                                                       "_st"
                                                                       "ar"
                                                                       "t",
                                                                       "hoo"
                                                                       "k_"
                                                                       "ren"
                                                                       "der"
                                                                       "_ch"
                                                                       "unk"
                                                                       "_en"
                                                                       "d",
                                                                       "NUL"
                                                                       "L",
                                                                       "s."
                                                                       "con"
                                                                       "ten"
                                                                       "t_"
                                                                       "sou"
                                                                       "rce"
                                                                       "_i"
                                                                       "d",
                                                                       "e."
                                                                       "con"
                                                                       "ten"
                                                                       "t_"
                                                                       "sou"
                                                                       "rce"
                                                                       "_i"
                                                                       "d")},
#undef HOOK
};

static const char *const indexes[] = {
    /* hook_calls: each start finds its end */
    "hook_transform_call_end_call ON hook_transform_call_end"
    "(session, build_id, call_id)",
    "hook_load_call_end_call ON hook_load_call_end(session, build_id, call_id)",
    "hook_resolve_id_call_end_call ON hook_resolve_id_call_end"
    "(session, build_id, call_id)",
    "hook_render_chunk_end_call ON hook_render_chunk_end"
    "(session, build_id, call_id)",
    /* slowest hooks of one plugin */
    "hook_transform_call_start_plugin ON hook_transform_call_start"
    "(session, plugin_name)",
    "hook_load_call_start_plugin ON hook_load_call_start(session, plugin_name)",
    "hook_resolve_id_call_start_plugin ON hook_resolve_id_call_start"
    "(session, plugin_name)",
    "hook_render_chunk_start_plugin ON hook_render_chunk_start"
    "(session, plugin_name)",
    /* what did transform X do to module Y */
    "hook_transform_call_start_module ON hook_transform_call_start"
    "(session, build_id, module_id)",
    "hook_load_call_start_module ON hook_load_call_start"
    "(session, build_id, module_id)",
    "build_end_build ON build_end(session, build_id)", NULL};

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
    spy__create_table_sql(b, tb->name, tb->cols, tb->types, tb->key, pg);
  }
}

void spy__views_sql(spy__buf *b, int pg) {
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
    spy__buf_puts(b, pg ? "CREATE OR REPLACE VIEW "
                        : "CREATE VIEW IF NOT "
                          "EXISTS ");
    spy__buf_puts(b, views[i][0]);
    spy__buf_puts(b, " AS ");
    spy__buf_puts(b, views[i][1]);
    spy__buf_puts(b, ";\n");
  }
}

void spy__index_sql(const spy__schema *s, spy__buf *b) {
  for (int i = 0; indexes[i]; i++) {
    spy__buf_puts(b, "CREATE INDEX IF NOT EXISTS ");
    spy__buf_puts(b, indexes[i]);
    spy__buf_puts(b, ";\n");
  }
  for (int t = 0; t < s->n; t++)
    spy__schema_index_sql(s, t, b);
}
