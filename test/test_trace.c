/* test_trace.c — the store layer: every action kind round-trips through
 * each writer and the reader; payloads are stored once; sessions are
 * isolated; a disabled session never reaches its writer; a full queue makes
 * the emitter wait (counted) and loses nothing; two threads at full speed
 * store every action once, each thread's in its order; a failed batch is
 * counted lost and its payloads come back with their next use; a writer
 * failure is reported once with its count; a clean SQLite close leaves no
 * -wal/-shm, and beside another open connection a whole store and none of
 * its own; a newer schema is refused;
 * similar payloads are stored as bounded delta chains that read back
 * byte-identical, a broken chain is an error, a version 2 store still
 * reads but is not appended to; the SQL tables follow the catalog; the
 * record decoder rejects bad input; lent payloads reach the writer
 * intact and are released exactly once, copied where they must be.
 *
 * The PostgreSQL case needs SPY_TEST_PG (a conninfo): the trace_pg CTest
 * (test/trace_pg.sh) starts a real server, sets it and runs that case;
 * here, without it, the case says so and does nothing. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "spyglass/trace.h"
#include "testlib.h"

static char tmpdir[256];

static const char *mktmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/spy-trace-XXXXXX");
  return mkdtemp(tmpdir);
}

static void rmrf(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", dir);
}

/* ---- one action of every kind ------------------------------------------- */

static const char big[] =
    "int main(void) {\n  return 0; /* \"quoted\" \\ */\n}\n";

static void emit_all(spy_trace *t) {
  spy_rec_input_item in[] = {{"main", "src/main.c", 0}, {NULL, "b.c", 0}};
  spy_rec_plugin_item pl[] = {{"p0", 0, 0}, {"p1", 1, 0}};
  spy_emit_session_meta(t, &(spy_act_session_meta){.inputs = {in, 2},
                                                   .plugins = {pl, 2},
                                                   .cwd = "/w",
                                                   .platform = "node",
                                                   .format = "esm",
                                                   .dir = "dist",
                                                   .file = NULL});
  spy_trace_build_begin(t);
  spy_rec_module_import mi[] = {{"b.c", "import-statement", "./b", 0}};
  const char *importers[] = {"main.c"};
  spy_rec_module mods[] = {{"main.c", 0, {mi, 1}, {NULL, 0}, 0},
                           {"b.c", 1, {NULL, 0}, {importers, 1}, 0}};
  spy_emit_module_graph_ready(
      t, &(spy_act_module_graph_ready){.modules = {mods, 2}});
  const char *cm[] = {"main.c", "b.c"};
  spy_rec_chunk_import ci[] = {{1, "dynamic-import", 0}};
  spy_rec_chunk chunks[] = {
      {0,
       "main",
       SPY_TRACE_NULL_INT,
       1,
       0,
       "main.c",
       {cm, 2},
       "entry",
       {ci, 1},
       0},
      {1, NULL, 0, 0, 1, NULL, {cm + 1, 1}, "common", {NULL, 0}, 0}};
  spy_emit_chunk_graph_ready(
      t, &(spy_act_chunk_graph_ready){.chunks = {chunks, 2}});
  const char *pm[] = {"node_modules/x/i.js"};
  int64_t pc[] = {0, 1};
  spy_rec_package_info pk[] = {{"x@1",
                                "x",
                                NULL,
                                "node_modules/x/package.json",
                                "node_modules/x",
                                1,
                                "direct",
                                1234,
                                {pm, 1},
                                {pc, 2},
                                0}};
  spy_emit_package_graph_ready(
      t, &(spy_act_package_graph_ready){.packages = {pk, 1}});
  spy_emit_hook_resolve_id_call_start(t, &(spy_act_hook_resolve_id_call_start){
                                             .importer = NULL,
                                             .module_request = "./b",
                                             .import_kind = "import-statement",
                                             .plugin_name = "p0",
                                             .plugin_id = 0,
                                             .trigger = "automatic",
                                             .call_id = "r1"});
  spy_emit_hook_resolve_id_call_end(
      t, &(spy_act_hook_resolve_id_call_end){.resolved_id = "b.c",
                                             .is_external = -1,
                                             .plugin_name = "p0",
                                             .plugin_id = 0,
                                             .trigger = "manual",
                                             .call_id = "r1"});
  spy_emit_hook_load_call_start(
      t, &(spy_act_hook_load_call_start){"main.c", "p0", 0, "l1", 0});
  spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){
             "main.c", {big, sizeof big - 1}, "p0", 0, "l1", 0});
  spy_emit_hook_transform_call_start(
      t, &(spy_act_hook_transform_call_start){
             "main.c", {big, sizeof big - 1}, "p1", 1, "t1", 0});
  spy_emit_hook_transform_call_end(t,
                                   &(spy_act_hook_transform_call_end){
                                       "main.c", {NULL, 0}, "p1", 1, "t1", 0});
  spy_emit_hook_render_chunk_start(
      t, &(spy_act_hook_render_chunk_start){
             "p1", 1, "rc1", {"chunk\tsource\x01", 13}, 0});
  spy_emit_hook_render_chunk_end(
      t, &(spy_act_hook_render_chunk_end){"p1", 1, "rc1", {"out", 3}, 0});
  spy_rec_asset as[] = {{0, {big, sizeof big - 1}, 42, "main.js", 0},
                        {SPY_TRACE_NULL_INT, {NULL, 0}, 0, "x.css", 0}};
  spy_emit_assets_ready(t, &(spy_act_assets_ready){.assets = {as, 2}});
  spy_trace_build_end(t);
}

/* Resolves every SRCREF of a tree to SRC using the reader. */
static int resolve(spy_trace_reader *r, spy_trace_val *v, spy_trace_arena *a) {
  if (v->type == SPY_TV_SRCREF) {
    const char *p;
    size_t n;
    int rc = spy_trace_reader_source(r, v->hash, &p, &n);
    if (rc < 0)
      return rc;
    char *c = spy_trace_arena_alloc(a, n + 1);
    memcpy(c, p, n);
    v->type = SPY_TV_SRC;
    v->u.s = c;
    v->n = (uint32_t)n;
  } else if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC) {
    for (uint32_t i = 0; i < v->n; i++) {
      int rc = resolve(r, (spy_trace_val *)&v->u.items[i], a);
      if (rc < 0)
        return rc;
    }
  }
  return 0;
}

/* A writer that records the encoded form of each action it receives. */
typedef struct capture {
  uint8_t *rec[64];
  size_t len[64];
  int n, sources, opened, commits, closed;
} capture;

static int cap_open(void **st, const spy_trace_writer_cfg *c) {
  capture *k = c->arg;
  k->opened++;
  *st = k;
  return 0;
}
static int cap_source(void *st, const uint64_t h[2], const char *p, size_t n) {
  (void)h, (void)p, (void)n;
  ((capture *)st)->sources++;
  return 0;
}
/* SRC values arrive hashed; compare them as content (SRC) again. */
static void unhash(spy_trace_val *v) {
  if (v->type == SPY_TV_SRC)
    v->has_hash = 0;
  if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC)
    for (uint32_t i = 0; i < v->n; i++)
      unhash((spy_trace_val *)&v->u.items[i]);
}
static int cap_action(void *st, const spy_trace_record *r) {
  capture *k = st;
  if (k->n >= 64)
    return 0;
  spy_trace_action a = *r->action;
  unhash(&a.fields);
  a.ts_us = 0;
  int64_t n = spy_trace_encode_action(&a, NULL, 0);
  k->rec[k->n] = malloc((size_t)n);
  spy_trace_encode_action(&a, k->rec[k->n], (size_t)n);
  k->len[k->n++] = (size_t)n;
  return 0;
}
static int cap_commit(void *st) {
  ((capture *)st)->commits++;
  return 0;
}
static int64_t cap_close(void *st) {
  ((capture *)st)->closed++;
  return 0;
}
static const spy_trace_writer_ops capture_ops = {
    "capture", cap_open, cap_source, cap_action, cap_commit, cap_close, NULL};

static void capture_free(capture *k) {
  for (int i = 0; i < k->n; i++)
    free(k->rec[i]);
}

/* The reference: every kind emitted into a capturing writer. */
static int reference(capture *k) {
  memset(k, 0, sizeof *k);
  spy_trace *t;
  spy_trace_desc d = {
      .enabled = 1, .ops = &capture_ops, .ops_arg = k, .session_id = "ref"};
  int rc = spy_trace_create(&t, &d);
  if (rc < 0)
    return rc;
  emit_all(t);
  spy_trace_destroy(t);
  return k->n;
}

/* Reads the store back and compares every action with the reference. */
static int compare_store(const char *store) {
  capture ref;
  int n = reference(&ref);
  if (n != 15) {
    fprintf(stderr, "reference has %d actions\n", n);
    capture_free(&ref);
    return -1;
  }
  spy_trace_reader *r;
  int rc = spy_trace_reader_open(store, NULL, &r);
  if (rc < 0) {
    fprintf(stderr, "open %s: %s\n", store, spy_trace_reader_error(r));
    spy_trace_reader_close(r);
    capture_free(&ref);
    return rc;
  }
  spy_trace_action a;
  spy_trace_arena ar = {0};
  int i = 0, bad = 0;
  uint8_t *buf = malloc(1 << 16);
  while ((rc = spy_trace_reader_next(r, &a)) == 1) {
    if (i >= n) {
      bad = 1;
      break;
    }
    spy_trace_arena_reset(&ar);
    if (resolve(r, &a.fields, &ar) < 0) {
      fprintf(stderr, "action %d: a payload is missing\n", i);
      bad = 1;
      break;
    }
    a.ts_us = 0;
    int64_t len = spy_trace_encode_action(&a, buf, 1 << 16);
    if (len != (int64_t)ref.len[i] || memcmp(buf, ref.rec[i], (size_t)len)) {
      fprintf(stderr, "action %d (%.*s) differs after the round trip\n", i,
              (int)a.name_len, a.name);
      bad = 1;
    }
    i++;
  }
  if (rc < 0 || i != n) {
    fprintf(stderr, "read %d of %d actions (%s)\n", i, n,
            spy_trace_reader_error(r));
    bad = 1;
  }
  free(buf);
  spy_trace_arena_free(&ar);
  spy_trace_reader_close(r);
  capture_free(&ref);
  return bad ? -1 : 0;
}

/* $SPY_TEST_PG, or NULL: the PostgreSQL cases run from the trace_pg CTest
 * and from scripts/test.sh, which start a server and set it; without one
 * they SKIP (counted, never a pass). */
static const char *pg_conninfo(void) { return getenv("SPY_TEST_PG"); }
#define PG_SKIP "no SPY_TEST_PG (trace_pg and scripts/test.sh set one up)"

static int record(const char *writer, const char *dir, const char *conninfo,
                  char *sid_out) {
  spy_trace *t;
  spy_trace_desc d = {
      .enabled = 1, .writer = writer, .dir = dir, .conninfo = conninfo};
  int rc = spy_trace_create(&t, &d);
  if (rc < 0)
    return rc;
  if (sid_out)
    strcpy(sid_out, spy_trace_session_id(t));
  emit_all(t);
  return (int)spy_trace_destroy(t);
}

TEST(every_kind_round_trips_through_jsonl) {
  const char *dir = mktmp();
  CHECK(dir);
  CHECK_EQ(record("jsonl", dir, NULL, NULL), 0);
  CHECK_EQ(compare_store(dir), 0);
  rmrf(dir);
}

TEST(every_kind_round_trips_through_sqlite) {
  const char *dir = mktmp();
  CHECK(dir);
  CHECK_EQ(record("sqlite", dir, NULL, NULL), 0);
  CHECK_EQ(compare_store(dir), 0);
  rmrf(dir);
}

TEST(every_kind_round_trips_through_postgres) {
  const char *pg = pg_conninfo();
  if (!pg)
    SKIP(PG_SKIP);
  char sid[128];
  CHECK_EQ(record("postgres", NULL, pg, sid), 0);
  CHECK_EQ(compare_store(pg), 0); /* the latest session */
}

/* Text that COPY's text form and SQL literals treat specially — tabs,
 * line ends, backslashes, "\N", "\.", a byte that is not UTF-8 (the
 * store keeps the exact bytes in action_batches), an empty string — in
 * every text column of a hook Start and End. */
static void emit_escapes(spy_trace *t) {
  static const char *odd[] = {"a\tb", "c\nd\re",      "back\\slash\\", "\\N",
                              "\\.",  "caf\xe9\t\\N", "plain",         ""};
  enum { N = sizeof odd / sizeof *odd };
  spy_trace_build_begin(t);
  for (int i = 0; i < N; i++) {
    spy_emit_hook_resolve_id_call_start(t,
                                        &(spy_act_hook_resolve_id_call_start){
                                            .importer = i == 6 ? NULL : odd[i],
                                            .module_request = odd[(i + 1) % N],
                                            .import_kind = odd[(i + 2) % N],
                                            .plugin_name = odd[(i + 3) % N],
                                            .plugin_id = i,
                                            .trigger = "automatic",
                                            .call_id = odd[(i + 4) % N]});
    spy_emit_hook_resolve_id_call_end(
        t, &(spy_act_hook_resolve_id_call_end){.resolved_id = odd[i],
                                               .is_external = i & 1,
                                               .plugin_name = odd[(i + 3) % N],
                                               .plugin_id = i,
                                               .trigger = odd[(i + 5) % N],
                                               .call_id = odd[(i + 4) % N]});
  }
  spy_trace_build_end(t);
}

/* Every action of the store's latest session, encoded (ts_us 0). */
static int read_encoded(const char *store, capture *k) {
  memset(k, 0, sizeof *k);
  spy_trace_reader *r;
  int rc = spy_trace_reader_open(store, NULL, &r);
  if (rc < 0) {
    fprintf(stderr, "open %s: %s\n", store, spy_trace_reader_error(r));
    spy_trace_reader_close(r);
    return rc;
  }
  spy_trace_action a;
  while (k->n < 64 && (rc = spy_trace_reader_next(r, &a)) == 1) {
    a.ts_us = 0;
    int64_t n = spy_trace_encode_action(&a, NULL, 0);
    k->rec[k->n] = malloc((size_t)n);
    spy_trace_encode_action(&a, k->rec[k->n], (size_t)n);
    k->len[k->n++] = (size_t)n;
  }
  spy_trace_reader_close(r);
  return rc < 0 ? rc : k->n;
}

TEST(escaped_text_round_trips_through_postgres) {
  const char *pg = pg_conninfo();
  if (!pg)
    SKIP(PG_SKIP);
  const char *dir = mktmp();
  CHECK(dir);
  const char *stores[2] = {dir, pg}; /* SQLite keeps every byte */
  capture got[2];
  for (int s = 0; s < 2; s++) {
    spy_trace *t;
    spy_trace_desc d = {.enabled = 1,
                        .writer = s ? "postgres" : "sqlite",
                        .dir = s ? NULL : dir,
                        .conninfo = s ? pg : NULL};
    CHECK_EQ(spy_trace_create(&t, &d), 0);
    emit_escapes(t);
    CHECK_EQ(spy_trace_destroy(t), 0);
    CHECK_EQ(read_encoded(stores[s], &got[s]), 18);
  }
  for (int i = 0; i < got[0].n; i++)
    CHECK(got[0].len[i] == got[1].len[i] &&
          memcmp(got[0].rec[i], got[1].rec[i], got[0].len[i]) == 0);
  capture_free(&got[0]);
  capture_free(&got[1]);
  rmrf(dir);
}

/* Writes every kind as JSON-lines into $SPY_TEST_JSONL_DIR for the
 * trace_rolldown test, which checks it with @rolldown/debug. */
TEST(write_every_kind_for_rolldown) {
  const char *dir = getenv("SPY_TEST_JSONL_DIR");
  if (dir) {
    CHECK_EQ(record("jsonl", dir, NULL, NULL), 0);
    return;
  }
  /* no trace_rolldown around: the write itself must still succeed */
  const char *tmp = mktmp();
  CHECK(tmp);
  CHECK_EQ(record("jsonl", tmp, NULL, NULL), 0);
  rmrf(tmp);
}

typedef struct seen {
  int builds, ended, modules, external, imports, calls, transform_in;
  char last_import[64];
} seen;
static int on_build(void *arg, const spy_trace_build_info *b) {
  seen *s = arg;
  s->builds++;
  s->ended += b->ended_us >= b->started_us && b->build == 1;
  return 0;
}
static int on_module(void *arg, const char *m, int ext) {
  seen *s = arg;
  s->modules += m[0] != 0;
  s->external += ext;
  return 0;
}
static int on_import(void *arg, const char *from, const char *to,
                     const char *kind) {
  seen *s = arg;
  s->imports++;
  snprintf(s->last_import, sizeof s->last_import, "%s>%s:%s", from, to, kind);
  return 0;
}
static int on_call(void *arg, const spy_trace_hook_call *h) {
  seen *s = arg;
  s->calls++;
  if (strcmp(h->hook, "transform") == 0 && h->has_input && !h->has_output &&
      strcmp(h->plugin, "p1") == 0 && h->ended_us >= h->started_us)
    s->transform_in++;
  return 0;
}

TEST(reader_answers_builds_modules_imports_hook_calls_and_sources) {
  const char *kinds[] = {"jsonl", "sqlite"};
  for (int w = 0; w < 2; w++) {
    const char *dir = mktmp();
    CHECK(dir);
    CHECK_EQ(record(kinds[w], dir, NULL, NULL), 0);
    spy_trace_reader *r;
    CHECK_OK(spy_trace_reader_open(dir, NULL, &r));
    seen s;
    memset(&s, 0, sizeof s);
    CHECK_OK(spy_trace_reader_builds(r, on_build, &s));
    CHECK_OK(spy_trace_reader_modules(r, 1, on_module, &s));
    CHECK_OK(spy_trace_reader_imports(r, 1, on_import, &s));
    CHECK_OK(spy_trace_reader_hook_calls(r, on_call, &s));
    CHECK_EQ(s.builds, 1);
    CHECK_EQ(s.ended, 1);
    CHECK_EQ(s.modules, 2);
    CHECK_EQ(s.external, 1);
    CHECK_EQ(s.imports, 1);
    CHECK_STR(s.last_import, "main.c>b.c:import-statement");
    CHECK_EQ(s.calls, 4);
    CHECK_EQ(s.transform_in, 1);
    uint64_t h[2];
    spy_trace_hash(big, sizeof big - 1, h);
    const char *p;
    size_t n;
    CHECK_OK(spy_trace_reader_source(r, h, &p, &n));
    CHECK_EQ(n, sizeof big - 1);
    CHECK(memcmp(p, big, n) == 0);
    h[0] ^= 1;
    CHECK_EQ(spy_trace_reader_source(r, h, &p, &n), SPY_ENOENT);
    spy_trace_summary sum;
    CHECK_OK(spy_trace_reader_summary(r, &sum));
    CHECK_EQ(sum.actions, 15);
    CHECK_EQ(sum.modules, 2);
    CHECK_EQ(sum.chunks, 2);
    CHECK_EQ(sum.hook_calls, 4);
    CHECK_EQ(sum.sources, 3);
    CHECK_EQ(sum.saved_bytes, 2 * (sizeof big - 1));
    CHECK_EQ(sum.lost, 0);
    spy_trace_reader_close(r);
    rmrf(dir);
  }
}

TEST(catalog_matches_rolldown_kinds) {
  static const char *const names[] = {"SessionMeta",
                                      "BuildStart",
                                      "BuildEnd",
                                      "ModuleGraphReady",
                                      "ChunkGraphReady",
                                      "PackageGraphReady",
                                      "HookResolveIdCallStart",
                                      "HookResolveIdCallEnd",
                                      "HookLoadCallStart",
                                      "HookLoadCallEnd",
                                      "HookTransformCallStart",
                                      "HookTransformCallEnd",
                                      "HookRenderChunkStart",
                                      "HookRenderChunkEnd",
                                      "AssetsReady"};
  for (int i = 0; i < 15; i++) {
    CHECK(spy_trace_kind_find(names[i]));
    CHECK_EQ(spy_trace_kind_find(names[i])->id, i + 1);
  }
  CHECK(!spy_trace_kind_find("StringRef"));
  CHECK_STR(spy_kind_hook_transform_call_start.fields[1].name, "content");
  CHECK_EQ(spy_kind_hook_transform_call_start.fields[1].type, SPY_TF_SRC);
}

/* ---- dedup ------------------------------------------------------------------
 */

TEST(same_source_emitted_n_times_is_stored_once) {
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "sqlite", .dir = dir};
  CHECK_OK(spy_trace_create(&t, &d));
  char src[5000];
  memset(src, 'x', sizeof src);
  for (int i = 0; i < 100; i++) {
    char cid[16];
    snprintf(cid, sizeof cid, "t%d", i);
    spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               "m.c", {src, sizeof src}, "p", 0, cid, 0});
  }
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.sources, 1);
  CHECK_EQ(st.sources_dup, 99);
  CHECK_EQ(st.saved_bytes, 99 * sizeof src);
  CHECK_EQ(spy_trace_destroy(t), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  sqlite3_stmt *s;
  CHECK(sqlite3_prepare_v2(db,
                           "SELECT count(*), sum(size), sum(length(content))"
                           " FROM sources",
                           -1, &s, NULL) == SQLITE_OK);
  CHECK(sqlite3_step(s) == SQLITE_ROW);
  CHECK_EQ(sqlite3_column_int(s, 0), 1);
  CHECK_EQ(sqlite3_column_int(s, 1), sizeof src);
  CHECK(sqlite3_column_int(s, 2) < 200); /* zstd */
  sqlite3_finalize(s);
  sqlite3_close(db);
  /* and the JSON-lines store holds one StringRef line */
  spy_trace_desc dj = {.enabled = 1, .dir = dir, .writer = "jsonl"};
  CHECK_OK(spy_trace_create(&t, &dj));
  for (int i = 0; i < 10; i++)
    spy_emit_hook_render_chunk_start(t, &(spy_act_hook_render_chunk_start){
                                            "p", 0, "c", {src, sizeof src}, 0});
  CHECK_EQ(spy_trace_destroy(t), 0);
  snprintf(path, sizeof path, "grep -c StringRef %s/logs.json", dir);
  FILE *p = popen(path, "r");
  int refs = -1;
  CHECK(p && fscanf(p, "%d", &refs) == 1);
  pclose(p);
  CHECK_EQ(refs, 1);
  rmrf(dir);
}

/* ---- sessions
 * ---------------------------------------------------------------- */

TEST(two_sessions_in_one_process_are_isolated) {
  capture a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  spy_trace *ta, *tb;
  spy_trace_desc da = {.enabled = 1, .ops = &capture_ops, .ops_arg = &a};
  spy_trace_desc db = {.enabled = 1, .ops = &capture_ops, .ops_arg = &b};
  CHECK_OK(spy_trace_create(&ta, &da));
  CHECK_OK(spy_trace_create(&tb, &db));
  CHECK(strcmp(spy_trace_session_id(ta), spy_trace_session_id(tb)) != 0);
  CHECK_EQ(spy_trace_build_begin(ta), 1);
  CHECK_EQ(spy_trace_build_begin(ta), 2);
  CHECK_EQ(spy_trace_build_begin(tb), 1);
  for (int i = 0; i < 5; i++)
    spy_emit_hook_load_call_start(
        ta, &(spy_act_hook_load_call_start){"a.c", "p", 0, "x", 0});
  spy_emit_build_end(tb, &(spy_act_build_end){0});
  spy_trace_destroy(ta);
  spy_trace_destroy(tb);
  CHECK_EQ(a.n, 7);
  CHECK_EQ(b.n, 2);
  capture_free(&a);
  capture_free(&b);
}

TEST(default_location_is_under_the_desc_cwd) {
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .cwd = dir, .session_id = "s1"};
  CHECK_OK(spy_trace_create(&t, &d));
  char want[512];
  snprintf(want, sizeof want, "%s/.spyglass/s1", dir);
  CHECK_STR(spy_trace_dir(t), want);
  CHECK_STR(spy_trace_writer_name(t), "jsonl");
  spy_trace_destroy(t);
  struct stat sb;
  snprintf(want, sizeof want, "%s/.spyglass/s1/logs.json", dir);
  CHECK(stat(want, &sb) == 0);
  rmrf(dir);
}

TEST(disabled_session_never_calls_the_writer) {
  capture k;
  memset(&k, 0, sizeof k);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 0, .ops = &capture_ops, .ops_arg = &k};
  CHECK_OK(spy_trace_create(&t, &d));
  CHECK(!spy_trace_on(t));
  emit_all(t);
  CHECK_EQ(spy_trace_build_begin(t), 0);
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.emitted, 0);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(k.opened + k.n + k.commits + k.closed + k.sources, 0);
}

/* ---- the queue
 * ---------------------------------------------------------------- */

static int slow_action(void *st, const spy_trace_record *r) {
  (void)r;
  usleep(20);
  ((capture *)st)->n++;
  return 0;
}
static const spy_trace_writer_ops slow_ops = {
    "slow", cap_open, cap_source, slow_action, cap_commit, cap_close, NULL};

TEST(full_queue_makes_the_emitter_wait_and_loses_nothing) {
  capture k;
  memset(&k, 0, sizeof k);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1,
                      .ops = &slow_ops,
                      .ops_arg = &k,
                      .queue_bytes = 65536,
                      .batch_actions = 64,
                      .spill_bytes = 1, /* no spilling */
                      .spill_file_bytes = 1};
  CHECK_OK(spy_trace_create(&t, &d));
  static char src[3000];
  memset(src, 'y', sizeof src);
  for (int i = 0; i < 2000; i++)
    CHECK_OK(spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               "m", {src, sizeof src}, "p", 0, "c", 0}));
  /* a record larger than a quarter of the queue goes through the heap */
  static char huge[100000];
  memset(huge, 'z', sizeof huge);
  CHECK_OK(spy_emit_hook_transform_call_start(
      t, &(spy_act_hook_transform_call_start){
             "m", {huge, sizeof huge}, "p", 0, "c", 0}));
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK(st.waits > 0);
  CHECK_EQ(st.emitted, 2001);
  CHECK_EQ(st.written, 2001);
  spy_trace_destroy(t);
  CHECK_EQ(k.n, 2001);
}

/* A hook call's measured time leaves out the tracer's own work: its Start
 * is emitted into a full queue with spilling off (the slowest path: the
 * emit waits for the writer, tens of ms), then the "hook" spins. The
 * stored duration covers the spin (C - B, B: Start's emit returned, C:
 * End's emit called), not the wait (B - A); before the fix Start took its
 * time as the emit began and the duration held the whole wait. The slack
 * is half the measured wait, so a preemption inside the few instructions
 * around the timestamps cannot fail it. */
typedef struct probe {
  uint64_t start_us, end_us;
} probe;
static int probe_open(void **st, const spy_trace_writer_cfg *c) {
  *st = c->arg;
  return 0;
}
static int probe_action(void *st, const spy_trace_record *r) {
  probe *p = st;
  usleep(2000); /* a writer far slower than the build */
  const spy_trace_val *c = spy_trace_get(r->action, "call_id");
  if (c && c->n == 5 && memcmp(c->u.s, "probe", 5) == 0) {
    if (r->action->name_len == 22 &&
        memcmp(r->action->name, "HookTransformCallStart", 22) == 0)
      p->start_us = r->action->ts_us;
    else
      p->end_us = r->action->ts_us;
  }
  return 0;
}
static int64_t probe_close(void *st) {
  (void)st;
  return 0;
}
static const spy_trace_writer_ops probe_ops = {
    "probe", probe_open, NULL, probe_action, NULL, probe_close, NULL};
static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Action times come from the session's counter clock once it is
 * calibrated (at the writer's first round 20 ms in: with a trickle of
 * actions, when its batch is committed ~100 ms in) and from the system
 * clock before: across the switch, every time lies between system clock
 * readings taken around its emit, and the Start/End of one call stay in
 * order. (A rate 1 % off fails it.) */
TEST(action_times_follow_the_wall_clock_across_the_counter_calibration) {
  enum { CALLS = 150, SLACK_US = 100 };
  const char *dir = mktmp();
  CHECK(dir);
  uint64_t before[CALLS], after[CALLS];
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "jsonl", .dir = dir};
  CHECK_EQ(spy_trace_create(&t, &d), 0);
  for (int i = 0; i < CALLS; i++) {
    char cid[16];
    snprintf(cid, sizeof cid, "c%d", i);
    before[i] = now_us();
    spy_emit_hook_resolve_id_call_start(
        t, &(spy_act_hook_resolve_id_call_start){.importer = "a.c",
                                                 .module_request = "b.h",
                                                 .import_kind = "import",
                                                 .plugin_name = "p",
                                                 .plugin_id = 0,
                                                 .trigger = "automatic",
                                                 .call_id = cid});
    spy_emit_hook_resolve_id_call_end(
        t, &(spy_act_hook_resolve_id_call_end){.resolved_id = "b.h",
                                               .is_external = 0,
                                               .plugin_name = "p",
                                               .plugin_id = 0,
                                               .trigger = "automatic",
                                               .call_id = cid});
    after[i] = now_us();
    struct timespec ts = {0, 2000000}; /* the writer's rounds meanwhile */
    nanosleep(&ts, NULL);
  }
  CHECK_EQ(spy_trace_destroy(t), 0);
  spy_trace_reader *r;
  CHECK_OK(spy_trace_reader_open(dir, NULL, &r));
  spy_trace_action a;
  int n = 0, bad = 0;
  uint64_t start = 0;
  while (spy_trace_reader_next(r, &a) == 1) {
    const spy_trace_val *c = spy_trace_get(&a, "call_id");
    if (!c || c->type != SPY_TV_STR)
      continue;
    int i = atoi(c->u.s + 1);
    int is_start = a.kind == &spy_kind_hook_resolve_id_call_start;
    if (i < 0 || i >= CALLS || a.ts_us + SLACK_US < before[i] ||
        a.ts_us > after[i] + SLACK_US || (!is_start && a.ts_us < start)) {
      fprintf(stderr, "  call %d %s at %llu, outside [%llu, %llu]\n", i,
              is_start ? "start" : "end", (unsigned long long)a.ts_us,
              (unsigned long long)before[i], (unsigned long long)after[i]);
      bad++;
    }
    if (is_start)
      start = a.ts_us;
    n++;
  }
  spy_trace_reader_close(r);
  CHECK_EQ(n, 2 * CALLS);
  CHECK_EQ(bad, 0);
}

TEST(a_hook_calls_duration_leaves_out_the_tracers_wait) {
  static char src[3000];
  memset(src, 'w', sizeof src);
  int measured = 0;
  /* a preemption between filling the queue and the probe can let the
   * writer drain it first (no wait): then the attempt is repeated */
  for (int attempt = 0; attempt < 20 && !measured; attempt++) {
    probe pr = {0, 0};
    spy_trace *t;
    spy_trace_desc d = {.enabled = 1,
                        .ops = &probe_ops,
                        .ops_arg = &pr,
                        .queue_bytes = 65536,
                        .spill_bytes = 1, /* no spilling: the emit waits */
                        .spill_file_bytes = 1};
    CHECK_OK(spy_trace_create(&t, &d));
    for (int i = 0; i < 21; i++) /* ~64 KiB: the queue is full */
      CHECK_OK(spy_emit_hook_transform_call_start(
          t, &(spy_act_hook_transform_call_start){
                 "m", {src, sizeof src}, "p", 0, "c", 0}));
    spy_trace_stats s0, s1;
    spy_trace_get_stats(t, &s0);
    uint64_t a = now_us();
    CHECK_OK(spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               "m", {src, sizeof src}, "p", 0, "probe", 0}));
    uint64_t b = now_us();
    while (now_us() < b + 5000) /* the hook: 5 ms of wall time */
      ;
    uint64_t c = now_us();
    CHECK_OK(spy_emit_hook_transform_call_end(
        t, &(spy_act_hook_transform_call_end){
               .module_id = "m", .plugin_name = "p", .call_id = "probe"}));
    CHECK_OK(spy_trace_flush(t));
    spy_trace_get_stats(t, &s1);
    spy_trace_destroy(t);
    if (s1.waits == s0.waits || b - a < 4000)
      continue; /* the probe did not wait (long enough) */
    measured = 1;
    CHECK(pr.start_us && pr.end_us >= pr.start_us);
    uint64_t dur = pr.end_us - pr.start_us;
    CHECK(dur + 1 >= c - b);             /* it covers the hook */
    CHECK(dur <= (c - b) + (b - a) / 2); /* and not the tracer's wait */
  }
  CHECK(measured);
}

/* The writer thread runs at a lower priority than the build; a thread
 * that waits for the trace runs the writer's pending work itself (at its
 * own priority), then a fresh writer thread takes over again: here a
 * writer far behind (1 ms per action) at flush time does part of its work
 * on the flushing thread, and the actions emitted after the flush are
 * written by a writer thread again. */
typedef struct where {
  pid_t main;
  _Atomic int on_main, on_other, after;
} where;
static int where_open(void **st, const spy_trace_writer_cfg *c) {
  *st = c->arg;
  return 0;
}
static int where_action(void *st, const spy_trace_record *r) {
  where *w = st;
  usleep(1000);
  if (gettid() == w->main)
    atomic_fetch_add(&w->on_main, 1);
  else
    atomic_fetch_add(&w->on_other, 1);
  const spy_trace_val *c = spy_trace_get(r->action, "call_id");
  if (c && c->n == 5 && memcmp(c->u.s, "after", 5) == 0 && gettid() != w->main)
    atomic_fetch_add(&w->after, 1);
  return 0;
}
static int64_t where_close(void *st) {
  (void)st;
  return 0;
}
static const spy_trace_writer_ops where_ops = {
    "where", where_open, NULL, where_action, NULL, where_close, NULL};

TEST(a_flush_runs_the_lagging_writers_work_on_the_waiting_thread) {
  where w;
  memset(&w, 0, sizeof w);
  w.main = gettid();
  unsetenv("SPY_TRACE_NICE"); /* the default: a lower-priority writer */
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .ops = &where_ops, .ops_arg = &w};
  CHECK_OK(spy_trace_create(&t, &d));
  for (int i = 0; i < 1000; i++) /* a second of the writer's work */
    CHECK_OK(spy_emit_hook_load_call_start(
        t, &(spy_act_hook_load_call_start){
               .module_id = "m", .plugin_name = "p", .call_id = "c"}));
  CHECK_OK(spy_trace_flush(t));
  CHECK(atomic_load(&w.on_main) > 0); /* the flusher did the rest */
  CHECK_EQ(atomic_load(&w.on_main) + atomic_load(&w.on_other), 1000);
  for (int i = 0; i < 3; i++)
    CHECK_OK(spy_emit_hook_load_call_start(
        t, &(spy_act_hook_load_call_start){
               .module_id = "m", .plugin_name = "p", .call_id = "after"}));
  /* a writer thread is back: it writes these without anyone waiting */
  for (int i = 0; i < 3000 && atomic_load(&w.after) < 3; i++)
    usleep(10000);
  CHECK_EQ(atomic_load(&w.after), 3);
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.written, 1003);
  spy_trace_destroy(t);
}

/* Reads a store back: each load End's payload (by its hash) is handed to
 * ok() with the action's plugin_id; returns how many there were and
 * counts in *bad those that did not read or that ok() refused. */
static int read_back(const char *dir,
                     int (*ok)(const void *arg, int64_t id, const char *p,
                               size_t len),
                     const void *arg, int *bad) {
  spy_trace_reader *r;
  *bad = 0;
  if (spy_trace_reader_open(dir, NULL, &r) != 0)
    return -1;
  spy_trace_action a;
  int n = 0;
  while (spy_trace_reader_next(r, &a) == 1) {
    const spy_trace_val *c = spy_trace_get(&a, "content");
    const spy_trace_val *id = spy_trace_get(&a, "plugin_id");
    if (!c || !id)
      continue;
    const char *p;
    size_t len;
    if (spy_trace_reader_source(r, c->hash, &p, &len) != 0 ||
        !ok(arg, id->u.i, p, len))
      (*bad)++;
    n++;
  }
  spy_trace_reader_close(r);
  return n;
}

/* A flush that finds the SQL writer behind runs its work on the waiting
 * thread and, the build's core being free then, packs payloads on a
 * second thread meanwhile (spy_trace_writer_ops.hurry), even where the
 * packer otherwise runs inline; every payload still reads back whole. */
int spy__trace_cpus(void);
enum { HURRY_N = 400 };
/* Payload `id` is src[id] (599 bytes). */
static int same_as_src(const void *arg, int64_t id, const char *p, size_t len) {
  const char(*src)[600] = arg;
  return len == 599 && id >= 0 && id < HURRY_N && memcmp(p, src[id], 599) == 0;
}
TEST(a_waiting_flush_packs_payloads_on_a_second_thread) {
  if (spy__trace_cpus() < 2) {
    printf("  skipped: one usable CPU (nothing to hurry onto)\n");
    return;
  }
  const char *dir = mktmp();
  CHECK(dir);
  setenv("SPY_TRACE_PACK_INLINE", "1", 1);
  setenv("SPY_TRACE_WRITER_DELAY_US", "2000", 1); /* 0.8 s behind */
  unsetenv("SPY_TRACE_NICE");
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "sqlite", .dir = dir};
  CHECK_OK(spy_trace_create(&t, &d));
  unsetenv("SPY_TRACE_WRITER_DELAY_US");
  enum { N = HURRY_N };
  static char src[N][600];
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < 599; k++) /* each one different */
      src[i][k] = (char)('a' + (i * 31 + k * k + i / 26 * k) % 26);
    memcpy(src[i], &i, sizeof i);
    CHECK_OK(spy_emit_hook_load_call_end(
        t, &(spy_act_hook_load_call_end){"m", {src[i], 599}, "p", i, "c", 0}));
  }
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.packer_ns, 0); /* inline while the build runs */
  CHECK_OK(spy_trace_flush(t));
  spy_trace_get_stats(t, &st);
  CHECK(st.packer_ns > 0); /* the waiting flush packed on a thread */
  CHECK_EQ(spy_trace_destroy(t), 0);
  unsetenv("SPY_TRACE_PACK_INLINE");
  int bad;
  CHECK_EQ(read_back(dir, same_as_src, src, &bad), N);
  CHECK_EQ(bad, 0);
  rmrf(dir);
}

static void *emit_thread(void *arg) {
  spy_trace *t = arg;
  static const char src[] = "static int x;\n";
  for (int i = 0; i < 1000; i++)
    spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               "m", {src, sizeof src - 1}, "p", 0, "c", 0});
  return NULL;
}

TEST(threads_emit_into_one_session) {
  capture k;
  memset(&k, 0, sizeof k);
  spy_trace *t;
  spy_trace_desc d = {
      .enabled = 1, .ops = &slow_ops, .ops_arg = &k, .queue_bytes = 65536};
  CHECK_OK(spy_trace_create(&t, &d));
  pthread_t th[4];
  for (int i = 0; i < 4; i++)
    CHECK(pthread_create(&th[i], NULL, emit_thread, t) == 0);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.emitted, 4000);
  CHECK_EQ(st.written, 4000);
  CHECK_EQ(st.sources, 1);
  spy_trace_destroy(t);
  CHECK_EQ(k.n, 4000);
}

/* Two threads emit as fast as they can into one session, with payloads
 * of every size (some through the heap), into small queues that wrap and
 * fill: every action reaches the writer once, seq numbers are 1..2N with
 * no gap or repeat, and each thread's actions arrive in its emit order.
 * (Run under ThreadSanitizer by the tsan stage: label `concurrent`.) */
static const char *q1(sqlite3 *db, const char *sql);
#define ORDER_N 20000
typedef struct order_check {
  uint64_t last_seq, n;
  int64_t next[2];
  int bad;
} order_check;
static int oc_open(void **st, const spy_trace_writer_cfg *c) {
  *st = c->arg;
  return 0;
}
static int oc_action(void *st, const spy_trace_record *r) {
  order_check *o = st;
  const spy_trace_action *a = r->action;
  const spy_trace_val *pl = spy_trace_get(a, "plugin_name");
  const spy_trace_val *id = spy_trace_get(a, "plugin_id");
  const spy_trace_val *c = spy_trace_get(a, "content");
  if (a->seq != o->last_seq + 1 || !pl || pl->n != 2 || !id || !c ||
      c->type != SPY_TV_SRC || c->n != (uint32_t)(id->u.i % 97) * 211) {
    o->bad++;
  } else {
    int th = pl->u.s[1] == '1';
    if (id->u.i != o->next[th])
      o->bad++;
    o->next[th] = id->u.i + 1;
  }
  o->last_seq = a->seq;
  o->n++;
  return 0;
}
static int64_t oc_close(void *st) {
  (void)st;
  return 0;
}
static const spy_trace_writer_ops order_ops = {
    "order", oc_open, NULL, oc_action, NULL, oc_close, NULL};
static int oc_slow_action(void *st, const spy_trace_record *r) {
  usleep(50);
  return oc_action(st, r);
}
static const spy_trace_writer_ops slow_order_ops = {
    "slow-order", oc_open, NULL, oc_slow_action, NULL, oc_close, NULL};

/* The order tests' load-call End actions: payloads of 0 .. 20 KB (i % 97
 * times 211 bytes; the largest exceed a quarter of a 64 KiB queue), i
 * their call id, one plugin per emitting thread. */
static char order_payload[97 * 211];
static int emit_load_end(spy_trace *t, const char *plugin, int i) {
  return spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){
             "m", {order_payload, (size_t)(i % 97) * 211}, plugin, i, "c", 0});
}
/* n of them from thread "t0"; a flush after every flush_every (0: none).
 * Returns the first failure. */
static int emit_load_ends(spy_trace *t, int n, int flush_every) {
  for (int i = 0; i < n; i++) {
    int rc = emit_load_end(t, "t0", i);
    if (!rc && flush_every && i % flush_every == flush_every - 1)
      rc = spy_trace_flush(t);
    if (rc < 0)
      return rc;
  }
  return 0;
}
/* A session into the slow order-checking writer with a 64 KiB queue and
 * batches of 64: the spill tests' set-up (they add their bounds). */
static spy_trace_desc slow_order_desc(order_check *o, const char *dir) {
  memset(o, 0, sizeof *o);
  return (spy_trace_desc){.enabled = 1,
                          .ops = &slow_order_ops,
                          .ops_arg = o,
                          .dir = dir,
                          .queue_bytes = 65536,
                          .batch_actions = 64};
}
/* The writer saw the n actions of thread "t0", each once, in order. */
#define CHECK_IN_ORDER(o, count)                                               \
  do {                                                                         \
    CHECK_EQ((o).n, (count));                                                  \
    CHECK_EQ((o).bad, 0);                                                      \
    CHECK_EQ((o).next[0], (count));                                            \
  } while (0)

typedef struct racer {
  spy_trace *t;
  const char *name;
  _Atomic int *go;
  int fails;
} racer;
static void *race_thread(void *arg) {
  racer *r = arg;
  while (!atomic_load(r->go))
    ;
  for (int i = 0; i < ORDER_N; i++)
    if (emit_load_end(r->t, r->name, i) != 0)
      r->fails++;
  return NULL;
}

/* With spilling (the default) a full queue does not make the emitter
 * wait: the actions go to memory and reach the writer all the same, in
 * order. */
TEST(full_queue_spills_and_the_emitter_never_waits) {
  order_check o;
  spy_trace *t;
  spy_trace_desc d = slow_order_desc(&o, NULL);
  CHECK_OK(spy_trace_create(&t, &d));
  CHECK_OK(emit_load_ends(t, 3000, 0));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.waits, 0);
  CHECK(st.spilled > 0); /* the slow writer is far behind */
  CHECK_OK(spy_trace_flush(t));
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.emitted, 3000);
  CHECK_EQ(st.written, 3000);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(o.last_seq, 3000);
  CHECK_IN_ORDER(o, 3000);
}

/* The memory spill reuses its blocks: bursts that spill far more than
 * the memory bound (4 MiB: two 2 MiB blocks) in all, each burst less,
 * with the writer catching up between them, never allocate a third
 * block and never reach the spill file; everything arrives in order.
 * (Records allocated one by one, or blocks never handed back, would use
 * the bound up and go to the file.) */
TEST(the_memory_spill_reuses_its_blocks) {
  order_check o;
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = slow_order_desc(&o, dir);
  d.spill_bytes = 4 << 20;
  CHECK_OK(spy_trace_create(&t, &d));
  CHECK_OK(emit_load_ends(t, 3000, 150)); /* about 1.5 MB a burst */
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.waits, 0);
  CHECK_EQ(st.written, 3000);
  CHECK(st.spilled > 600); /* some 6 MB and more spilled through 4 MiB */
  CHECK_EQ(st.spilled_disk, 0);
  CHECK(st.spill_blocks >= 1 && st.spill_blocks <= 2);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(o.last_seq, 3000);
  CHECK_IN_ORDER(o, 3000);
  rmrf(dir);
}

/* Beyond the memory bound the actions go to the spill file (in the
 * session directory) and come back from it in order; the build never
 * waits, and the file is gone when the session ends. */
/* lend_bytes 1: nothing may be lent (as when the lent bound is reached),
 * so the queues hold the records in their own form, which the spill
 * file's public form is measured apart from */
static void spill_to_file_in_order(size_t lend_bytes) {
  order_check o;
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = slow_order_desc(&o, dir);
  d.spill_bytes = 256 << 10;
  d.lend_bytes = lend_bytes;
  CHECK_OK(spy_trace_create(&t, &d));
  CHECK_OK(emit_load_ends(t, 3000, 0));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.waits, 0);
  CHECK(st.spilled_disk > 0); /* memory (256 KiB) is far too small */
  CHECK(st.spilled > st.spilled_disk);
  char path[600];
  snprintf(path, sizeof path, "%s/spill-0.bin", dir);
  CHECK(access(path, F_OK) == 0);
  CHECK_OK(spy_trace_flush(t));
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.written, 3000);
  CHECK_EQ(st.spill_fails, 0);
  /* the writer's CPU is counted, and is within its busy (wall) spells
   * (the two clocks are read one after the other: a little slack) */
  CHECK(st.writer_cpu_ns > 0);
  CHECK(st.writer_cpu_ns <= st.writer_ns + 1000000);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK(access(path, F_OK) != 0); /* removed at the end */
  CHECK_EQ(o.last_seq, 3000);
  CHECK_IN_ORDER(o, 3000);
  rmrf(dir);
}

TEST(beyond_the_memory_bound_actions_spill_to_a_file_in_order) {
  spill_to_file_in_order(0);
}

TEST(with_lending_off_actions_spill_to_a_file_whole) {
  spill_to_file_in_order(1);
}

/* A spill file record that cannot be read back (here: damaged on disk
 * while the writer was held) is lost, counted and reported; the records
 * older than it, still in the ring, and every one after it are written
 * in order, and the final flush returns: the writer gives the lost
 * record's number up instead of waiting for it forever. The file is read
 * before the ring, so the damaged record is seen while the number the
 * writer wants next is in the ring. */
typedef struct gated {
  _Atomic int open, held;
  uint64_t n, last_seq, unordered;
} gated;
static int gated_action(void *st, const spy_trace_record *r) {
  gated *g = st;
  atomic_store(&g->held, 1);
  while (!atomic_load(&g->open))
    usleep(1000);
  if (r->action->seq <= g->last_seq)
    g->unordered++;
  g->last_seq = r->action->seq;
  g->n++;
  return 0;
}
static const spy_trace_writer_ops gated_ops = {
    "gated", oc_open, NULL, gated_action, NULL, oc_close, NULL};
typedef struct error_log {
  int damaged, gave_up;
} error_log;
static void log_errors(void *arg, int err, const char *msg) {
  error_log *e = arg;
  (void)err;
  e->damaged += strstr(msg, "spill file record is damaged") != NULL;
  e->gave_up += strstr(msg, "numbered but never queued") != NULL;
}
TEST(a_damaged_spill_record_is_counted_lost_and_the_rest_written_in_order) {
  gated g = {0};
  error_log e = {0};
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1,
                      .ops = &gated_ops,
                      .ops_arg = &g,
                      .dir = dir,
                      .queue_bytes = 65536,
                      .spill_bytes = 1,
                      .lend_bytes = 1,
                      .on_error = log_errors,
                      .on_error_arg = &e};
  CHECK_OK(spy_trace_create(&t, &d));
  static char payload[3000];
  memset(payload, 'p', sizeof payload);
  /* past the ring, into the spill file, and past the full buffers the
   * emitter leaves for the writer (8 of 2 MiB): it writes them itself */
  enum { N = 8000 };
  /* the writer holds the first action before anything spills, so it has
   * read none of the file when it is damaged */
  CHECK_OK(spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){
             "m", {payload, sizeof payload}, "p", 0, "c", 0}));
  while (!atomic_load(&g.held))
    usleep(1000);
  for (int i = 1; i < N; i++)
    CHECK_OK(spy_emit_hook_load_call_end(
        t, &(spy_act_hook_load_call_end){
               "m", {payload, sizeof payload}, "p", i, "c", 0}));
  char path[600];
  snprintf(path, sizeof path, "%s/spill-0.bin", dir);
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0);
  struct stat sb;
  CHECK(fstat(fd, &sb) == 0);
  CHECK(sb.st_size > (4096 + (2 << 20))); /* its first buffer is on disk */
  /* the first record's own length (after the file's 4 KiB header and the
   * record's 8-byte frame) no longer matches its frame's */
  uint32_t junk = 0xdeadbeef;
  CHECK(pwrite(fd, &junk, 4, 4096 + 8) == 4);
  close(fd);
  atomic_store(&g.open, 1);
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.lost, 1);
  CHECK_EQ(spy_trace_destroy(t), 1);
  CHECK_EQ(g.n, N - 1);
  CHECK_EQ(g.unordered, 0);
  CHECK_EQ(g.last_seq, N);
  CHECK_EQ(e.damaged, 1);
  CHECK_EQ(e.gave_up, 1);
  rmrf(dir);
}

/* Payloads larger than the writer's read-ahead (1 MiB) come back whole
 * from the spill file. */
typedef struct sum_check {
  uint64_t n, bytes;
  int bad;
} sum_check;
static int sum_action(void *st, const spy_trace_record *r) {
  sum_check *k = st;
  const spy_trace_val *c = spy_trace_get(r->action, "content");
  usleep(200);
  k->n++;
  if (!c || c->type != SPY_TV_SRC)
    k->bad++;
  else {
    k->bytes += c->n;
    for (uint32_t i = 0; i < c->n; i += 4093)
      if (c->u.s[i] != 'q')
        k->bad++;
  }
  return 0;
}
static const spy_trace_writer_ops sum_ops = {"sum", oc_open,  NULL, sum_action,
                                             NULL,  oc_close, NULL};
TEST(large_payloads_come_back_whole_from_the_spill_file) {
  sum_check k = {0};
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1,
                      .ops = &sum_ops,
                      .ops_arg = &k,
                      .dir = dir,
                      .queue_bytes = 65536,
                      .spill_bytes = 1};
  CHECK_OK(spy_trace_create(&t, &d));
  static char huge3[3 << 20];
  memset(huge3, 'q', sizeof huge3);
  uint64_t want = 0;
  for (int i = 0; i < 300; i++) {
    size_t n = i % 100 == 99 ? sizeof huge3 - (size_t)i : 3000;
    want += n;
    CHECK_OK(spy_emit_hook_load_call_end(
        t, &(spy_act_hook_load_call_end){"m", {huge3, n}, "p", i, "c", 0}));
  }
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK(st.spilled_disk > 0);
  CHECK_EQ(st.writer_errors, 0);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(k.n, 300);
  CHECK_EQ(k.bytes, want);
  CHECK_EQ(k.bad, 0);
  rmrf(dir);
}

/* Both bounds used up (a spill file of 64 KiB): the emitter waits for
 * queue space, counted, and nothing is lost. */
TEST(with_memory_and_file_used_up_the_emitter_waits_and_nothing_is_lost) {
  order_check o;
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = slow_order_desc(&o, dir);
  d.spill_bytes = 1;
  d.spill_file_bytes = 65536;
  CHECK_OK(spy_trace_create(&t, &d));
  CHECK_OK(emit_load_ends(t, 2000, 0));
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK(st.waits > 0);
  CHECK(st.spilled_disk > 0);
  CHECK_EQ(st.written, 2000);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_IN_ORDER(o, 2000);
  rmrf(dir);
}

/* The spill file stops taking writes (a file size limit: EFBIG, as a
 * full disk's ENOSPC) while records wait in the queue's buffer to be
 * written: the writer takes them from memory, the emitter then waits
 * for queue space, and nothing is lost or reordered. */
TEST(a_spill_file_that_fails_to_write_loses_nothing_gathered) {
  order_check o;
  const char *dir = mktmp();
  CHECK(dir);
  struct rlimit old, lim;
  CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = 4096 + 100000; /* the header block and a few writes */
  CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  spy_trace *t;
  spy_trace_desc d = slow_order_desc(&o, dir);
  d.spill_bytes = 1;
  CHECK_OK(spy_trace_create(&t, &d));
  CHECK_OK(emit_load_ends(t, 2000, 0));
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(spy_trace_destroy(t), 0);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, was);
  CHECK(st.spilled_disk > 0);
  CHECK(st.spill_fails > 0);
  CHECK_EQ(st.written, 2000);
  CHECK_IN_ORDER(o, 2000);
  rmrf(dir);
}

static void two_threads_in_order(size_t spill_bytes, uint64_t file_bytes) {
  order_check o;
  memset(&o, 0, sizeof o);
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1,
                      .ops = &order_ops,
                      .ops_arg = &o,
                      .dir = dir,
                      .queue_bytes = 65536,
                      .batch_actions = 256,
                      .spill_bytes = spill_bytes,
                      .spill_file_bytes = file_bytes};
  CHECK_OK(spy_trace_create(&t, &d));
  _Atomic int go = 0;
  racer rs[2] = {{t, "t0", &go, 0}, {t, "t1", &go, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&th[i], NULL, race_thread, &rs[i]) == 0);
  atomic_store(&go, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(rs[0].fails + rs[1].fails, 0);
  CHECK_EQ(st.emitted, 2 * ORDER_N);
  CHECK_EQ(st.written, 2 * ORDER_N);
  CHECK_EQ(o.n, 2 * ORDER_N);
  CHECK_EQ(o.last_seq, 2 * ORDER_N);
  CHECK_EQ(o.bad, 0);
  CHECK_EQ(o.next[0], ORDER_N);
  CHECK_EQ(o.next[1], ORDER_N);
  rmrf(dir);
}

TEST(two_threads_emit_at_full_speed_each_action_once_in_order) {
  two_threads_in_order(1, 1); /* no spilling: full queues wait */
}

/* The same with spilling, its budget small enough that emits also wait
 * for it: records from rings and spill lists merge in one order. */
TEST(two_threads_spilling_each_action_once_in_order) {
  two_threads_in_order(256 << 10, 1);
}

/* The same with memory spilling off and each thread's spill file: rings
 * and two files merge in one order. */
TEST(two_threads_spilling_to_files_each_action_once_in_order) {
  two_threads_in_order(1, 0);
}

/* The same race into a real SQLite store: each (thread, i) once, and in
 * seq order each thread's i counts up by one. */
TEST(two_threads_into_sqlite_store_each_action_once_in_order) {
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {
      .enabled = 1, .writer = "sqlite", .dir = dir, .queue_bytes = 65536};
  CHECK_OK(spy_trace_create(&t, &d));
  _Atomic int go = 0;
  racer rs[2] = {{t, "t0", &go, 0}, {t, "t1", &go, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&th[i], NULL, race_thread, &rs[i]) == 0);
  atomic_store(&go, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(rs[0].fails + rs[1].fails, 0);
  char path[512];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
  char want[32];
  snprintf(want, sizeof want, "%d", 2 * ORDER_N);
  CHECK_STR(q1(db, "SELECT count(*) FROM (SELECT DISTINCT plugin_name, "
                   "plugin_id FROM hook_load_call_end)"),
            want);
  CHECK_STR(q1(db, "SELECT count(*), min(seq), max(seq) FROM "
                   "hook_load_call_end"),
            want);
  CHECK_STR(q1(db, "SELECT sum(count) FROM action_batches"), want);
  CHECK_STR(q1(db, "SELECT count(*) FROM (SELECT plugin_id - lag(plugin_id) "
                   "OVER (PARTITION BY plugin_name ORDER BY seq) AS d FROM "
                   "hook_load_call_end) WHERE d <> 1"),
            "0");
  CHECK_STR(q1(db, "SELECT actions || ' ' || actions_lost FROM sessions"),
            strcat(want, " 0"));
  sqlite3_close(db);
  rmrf(dir);
}

/* A session knows SPY_TRACE_MAX_APP_KINDS application kinds; one more is
 * an error, not an action silently dropped by the writer. */
TEST(application_kinds_beyond_the_limit_are_refused) {
  capture k;
  memset(&k, 0, sizeof k);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .ops = &capture_ops, .ops_arg = &k};
  CHECK_OK(spy_trace_create(&t, &d));
  static spy_trace_kind kinds[SPY_TRACE_MAX_APP_KINDS + 1];
  static char names[SPY_TRACE_MAX_APP_KINDS + 1][16];
  for (int i = 0; i <= SPY_TRACE_MAX_APP_KINDS; i++) {
    snprintf(names[i], sizeof names[i], "app_kind_%d", i);
    kinds[i] =
        (spy_trace_kind){names[i], names[i], 0, SPY_ROLE_NONE, 0, 8, NULL};
  }
  for (int i = 0; i < SPY_TRACE_MAX_APP_KINDS; i++)
    CHECK_EQ(spy_trace_emit(t, &kinds[i], NULL), 0);
  CHECK_EQ(spy_trace_emit(t, &kinds[SPY_TRACE_MAX_APP_KINDS], NULL),
           SPY_ERANGE);
  CHECK_EQ(spy_trace_emit(t, &kinds[3], NULL), 0); /* known ones still go */
  CHECK_OK(spy_trace_flush(t));
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.emitted, SPY_TRACE_MAX_APP_KINDS + 1);
  spy_trace_destroy(t);
  CHECK_EQ(k.n, SPY_TRACE_MAX_APP_KINDS < 64 ? SPY_TRACE_MAX_APP_KINDS + 1
                                             : 64); /* capture keeps 64 */
  capture_free(&k);
}

/* A writer whose every commit fails: the session reports the failure
 * once as it happens and once more at the end with its count, not once
 * per batch. */
typedef struct fails {
  int calls, first, summary;
  char last[400];
} fails;
static int fc_commit(void *st) {
  (void)st;
  return SPY_ENOSPC;
}
static const spy_trace_writer_ops failing_ops = {
    "failing", oc_open, NULL, cap_action, fc_commit, oc_close, NULL};
static void count_errors(void *arg, int err, const char *msg) {
  fails *f = arg;
  f->calls++;
  if (err == SPY_ENOSPC && strstr(msg, "times in all"))
    f->summary++;
  else if (err == SPY_ENOSPC)
    f->first++;
  snprintf(f->last, sizeof f->last, "%s", msg);
}
TEST(repeated_writer_failure_is_reported_once_with_its_count) {
  capture k;
  memset(&k, 0, sizeof k);
  fails f = {0};
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1,
                      .ops = &failing_ops,
                      .ops_arg = &k,
                      .on_error = count_errors,
                      .on_error_arg = &f};
  CHECK_OK(spy_trace_create(&t, &d));
  for (int i = 0; i < 20; i++) {
    CHECK_OK(spy_emit_build_start(t, &(spy_act_build_start){0}));
    CHECK_OK(spy_trace_flush(t)); /* one commit each */
  }
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.writer_errors, 20);
  spy_trace_destroy(t);
  capture_free(&k);
  CHECK_EQ(f.first, 1);
  CHECK_EQ(f.summary, 1);
  CHECK_EQ(f.calls, 2);
  CHECK(strstr(f.last, "(20 times in all)") != NULL);
}

/* A writer with a slow set-up (ops->prepare): spy_trace_create does not
 * run it; the writer's thread does, before the first action, retrying a
 * failed one; once it is given up on, every action is counted lost. */
typedef struct prep_check {
  pthread_t creator;
  int fail_first, fail_rc; /* fail_rc 0: SPY_ECONNREFUSED */
  _Atomic int always_fail;
  int errs; /* failures the session reported */
  _Atomic int calls, on_creator, ready, actions, early, closed;
} prep_check;
static int pc_open(void **st, const spy_trace_writer_cfg *c) {
  prep_check *p = c->arg;
  p->creator = pthread_self();
  *st = p;
  return 0;
}
static int pc_prepare(void *st) {
  prep_check *p = st;
  int n = ++p->calls;
  if (pthread_equal(pthread_self(), p->creator))
    p->on_creator++;
  if (p->always_fail || n <= p->fail_first)
    return p->fail_rc ? p->fail_rc : SPY_ECONNREFUSED;
  p->ready = 1;
  return 0;
}
static int pc_action(void *st, const spy_trace_record *r) {
  prep_check *p = st;
  (void)r;
  p->actions++;
  if (!p->ready)
    p->early++;
  return 0;
}
static int64_t pc_close(void *st) {
  ((prep_check *)st)->closed++;
  return 0;
}
static const spy_trace_writer_ops prep_ops = {.name = "prep",
                                              .open = pc_open,
                                              .action = pc_action,
                                              .close = pc_close,
                                              .prepare = pc_prepare};
static void count_any_error(void *arg, int err, const char *msg) {
  (void)err, (void)msg;
  ((prep_check *)arg)->errs++;
}
/* A session on prep_ops (retry_ms 0: the default). */
static int prep_session(spy_trace **t, prep_check *p, uint32_t retry_ms) {
  spy_trace_desc d = {.enabled = 1,
                      .ops = &prep_ops,
                      .ops_arg = p,
                      .retry_ms = retry_ms,
                      .on_error = count_any_error,
                      .on_error_arg = p};
  return spy_trace_create(t, &d);
}

TEST(the_writers_set_up_runs_on_its_thread_not_in_create) {
  prep_check p = {0};
  spy_trace *t;
  CHECK_OK(prep_session(&t, &p, 0));
  for (int i = 0; i < 1000 && !p.ready; i++) { /* the writer's thread */
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL);
  }
  CHECK_EQ(p.ready, 1);
  CHECK_EQ(p.calls, 1);
  CHECK_EQ(p.on_creator, 0); /* not on the thread that made the session */
  for (int i = 0; i < 50; i++)
    CHECK_OK(spy_emit_build_start(t, &(spy_act_build_start){0}));
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(p.actions, 50);
  CHECK_EQ(p.closed, 1);
  CHECK_EQ(p.errs, 0);
}

TEST(a_failed_set_up_is_retried_and_no_action_comes_before_it) {
  prep_check p = {.fail_first = 3};
  spy_trace *t;
  CHECK_OK(prep_session(&t, &p, 0));
  for (int i = 0; i < 300; i++)
    CHECK_OK(spy_emit_build_start(t, &(spy_act_build_start){0}));
  CHECK_OK(spy_trace_flush(t)); /* waits through the retries */
  CHECK_EQ(p.calls, 4);
  CHECK_EQ(p.actions, 300);
  CHECK_EQ(p.early, 0);
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.lost, 0);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK(p.errs >= 1); /* the failure was reported */
}

TEST(a_store_never_set_up_counts_every_action_lost) {
  prep_check p = {.always_fail = 1};
  spy_trace *t;
  CHECK_OK(prep_session(&t, &p, 300));
  for (int i = 0; i < 40; i++)
    CHECK_OK(spy_emit_build_start(t, &(spy_act_build_start){0}));
  CHECK_EQ(spy_trace_destroy(t), 40);
  CHECK_EQ(p.actions, 0);
  CHECK(p.calls >= 2); /* retried until given up on */
  CHECK_EQ(p.closed, 1);
  CHECK(p.errs >= 2); /* the failure, then the loss */
}

/* The store is away when the first actions are flushed: after retry_ms
 * they are counted lost, and the set-up is tried again for the later
 * ones, which are stored once it comes back. */
TEST(actions_after_a_set_up_that_came_late_are_stored) {
  prep_check p = {.always_fail = 1};
  spy_trace *t;
  CHECK_OK(prep_session(&t, &p, 200));
  for (int i = 0; i < 5; i++)
    CHECK_OK(spy_emit_build_start(t, &(spy_act_build_start){0}));
  CHECK_OK(spy_trace_flush(t)); /* waits retry_ms, then they are lost */
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.lost, 5);
  p.always_fail = 0;                           /* the store is back */
  for (int i = 0; i < 1000 && !p.ready; i++) { /* tried again on its own */
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL);
  }
  CHECK_EQ(p.ready, 1);
  for (int i = 0; i < 7; i++)
    CHECK_OK(spy_emit_build_start(t, &(spy_act_build_start){0}));
  CHECK_EQ(spy_trace_destroy(t), 5);
  CHECK_EQ(p.actions, 7);
  CHECK_EQ(p.early, 0);
}

/* A failure that will not pass (not the server away or busy) is not
 * tried again: the wait for it ends at once. */
TEST(a_set_up_that_cannot_succeed_is_not_retried) {
  prep_check p = {.always_fail = 1, .fail_rc = SPY_EIO};
  spy_trace *t;
  CHECK_OK(prep_session(&t, &p, 60000));
  for (int i = 0; i < 10; i++)
    CHECK_OK(spy_emit_build_start(t, &(spy_act_build_start){0}));
  CHECK_OK(spy_trace_flush(t));
  CHECK_EQ(p.calls, 1);
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  CHECK_EQ(st.lost, 10);
  CHECK_EQ(spy_trace_destroy(t), 10);
  CHECK_EQ(p.actions, 0);
  CHECK_EQ(p.errs, 1);
}

/* A clean close leaves trace.db alone: the WAL is checkpointed and the
 * -wal and -shm files are removed. */
TEST(sqlite_clean_close_leaves_no_wal_or_shm) {
  const char *dir = mktmp();
  CHECK(dir);
  CHECK_EQ(record("sqlite", dir, NULL, NULL), 0);
  char path[512];
  struct stat sb;
  snprintf(path, sizeof path, "%s/trace.db", dir);
  CHECK(stat(path, &sb) == 0 && sb.st_size > 0);
  snprintf(path, sizeof path, "%s/trace.db-wal", dir);
  CHECK(stat(path, &sb) != 0);
  snprintf(path, sizeof path, "%s/trace.db-shm", dir);
  CHECK(stat(path, &sb) != 0);
  CHECK_EQ(compare_store(dir), 0); /* and everything is in the file */
  rmrf(dir);
}

/* A batch that cannot be written (the file size limit stands in for a
 * full disk) is counted as lost, and the payload it carried is stored
 * again with the next action that names it: the store reads back whole. */
static void quiet(void *arg, int err, const char *msg) {
  (void)arg, (void)err, (void)msg;
}
/* The largest file that grows as the trace is written (not the SQLite
 * writer's fixed-size reserve, which can be larger than its WAL). */
static off_t largest_file(const char *dir) {
  static const char *const names[] = {"logs.json",     "meta.json",
                                      "spyglass.json", "trace.db",
                                      "trace.db-wal",  "trace.db-shm"};
  off_t max = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (stat(path, &sb) == 0 && sb.st_size > max)
      max = sb.st_size;
  }
  return max;
}
static int failed_batch_payload_comes_back(const char *writer) {
  const char *dir = mktmp();
  if (!dir)
    return -1;
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1,
                      .writer = writer,
                      .dir = dir,
                      .on_error = quiet,
                      .batch_actions = 1000};
  if (spy_trace_create(&t, &d) < 0)
    return -1;
  static char payload[20000];
  for (size_t i = 0; i < sizeof payload; i++)
    payload[i] = (char)('a' + i % 23);
  spy_trace_build_begin(t);
  spy_trace_flush(t);
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = (rlim_t)largest_file(dir) + 1;
  signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &lim);
  spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){
             "m.c", {payload, sizeof payload}, "p", 0, "c1", 0});
  spy_trace_flush(t); /* this batch fails */
  setrlimit(RLIMIT_FSIZE, &old);
  spy_emit_hook_transform_call_start(
      t, &(spy_act_hook_transform_call_start){
             "m.c", {payload, sizeof payload}, "p", 0, "c2", 0});
  int64_t lost = spy_trace_destroy(t);
  int bad = lost != 1;
  if (bad)
    fprintf(stderr, "%s: %lld lost, want 1\n", writer, (long long)lost);
  spy_trace_reader *r;
  if (spy_trace_reader_open(dir, NULL, &r) < 0)
    return -1;
  spy_trace_action a;
  int n = 0, refs = 0, rc;
  while ((rc = spy_trace_reader_next(r, &a)) == 1) {
    n++;
    const spy_trace_val *c = spy_trace_get(&a, "content");
    if (c && c->type == SPY_TV_SRCREF) {
      const char *p;
      size_t len;
      refs++;
      if (spy_trace_reader_source(r, c->hash, &p, &len) != 0 ||
          len != sizeof payload || memcmp(p, payload, len) != 0) {
        fprintf(stderr, "%s: the payload is not in the store\n", writer);
        bad = 1;
      }
    }
  }
  spy_trace_reader_close(r);
  if (rc < 0 || n != 2 || refs != 1) {
    fprintf(stderr, "%s: read %d actions (%d refs), rc %d\n", writer, n, refs,
            rc);
    bad = 1;
  }
  rmrf(dir);
  return bad ? -1 : 0;
}
TEST(payload_of_a_failed_batch_is_stored_again_sqlite) {
  CHECK_EQ(failed_batch_payload_comes_back("sqlite"), 0);
}
TEST(payload_of_a_failed_batch_is_stored_again_jsonl) {
  CHECK_EQ(failed_batch_payload_comes_back("jsonl"), 0);
}

TEST(emit_rejects_a_missing_required_field) {
  capture k;
  memset(&k, 0, sizeof k);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .ops = &capture_ops, .ops_arg = &k};
  CHECK_OK(spy_trace_create(&t, &d));
  CHECK_EQ(spy_emit_hook_load_call_start(
               t, &(spy_act_hook_load_call_start){NULL, "p", 0, "c", 0}),
           SPY_EINVAL);
  spy_trace_destroy(t);
  CHECK_EQ(k.n, 0);
}

/* ---- lent payloads ----------------------------------------------------------
 * Each payload lives in a block of its own, lent with a reference count;
 * the last release poisons the block (kept until the test ends), so a
 * writer that read lent bytes after their release would see the poison. */
#define LEND_N 3000
typedef struct lent_block {
  _Atomic int refs, releases;
  size_t n;
  char fill;
  char bytes[4096 * 3];
} lent_block;
static lent_block *lent_blocks;

static void lent_release(void *owner) {
  lent_block *b = owner;
  atomic_fetch_add(&b->releases, 1);
  if (atomic_fetch_sub(&b->refs, 1) == 1)
    memset(b->bytes, 'X', b->n);
}
static spy_trace_text lent_text(lent_block *b) {
  atomic_fetch_add(&b->refs, 1);
  return (spy_trace_text){b->bytes, b->n, lent_release, b};
}
/* Block i: 1..12 KiB of one letter. */
static void lent_make(void) {
  lent_blocks = calloc(LEND_N, sizeof *lent_blocks);
  for (int i = 0; i < LEND_N; i++) {
    lent_blocks[i].n = 1 + (size_t)(i * 7919) % sizeof lent_blocks[i].bytes;
    lent_blocks[i].fill = (char)('a' + i % 26);
    memset(lent_blocks[i].bytes, lent_blocks[i].fill, lent_blocks[i].n);
  }
}

/* The writer checks each payload against its block (plugin_id = block),
 * slowly when asked to, so the queue fills. */
typedef struct lent_check {
  uint64_t n, bad;
  int slow_us;
} lent_check;
static int lc_action(void *st, const spy_trace_record *r) {
  lent_check *k = st;
  const spy_trace_val *c = spy_trace_get(r->action, "content");
  const spy_trace_val *id = spy_trace_get(r->action, "plugin_id");
  if (k->slow_us)
    usleep((useconds_t)k->slow_us);
  k->n++;
  if (!c || !id || c->type != SPY_TV_SRC || id->u.i < 0 || id->u.i >= LEND_N) {
    k->bad++;
    return 0;
  }
  const lent_block *b = &lent_blocks[id->u.i];
  if (c->n != b->n)
    k->bad++;
  else
    for (uint32_t i = 0; i < c->n; i++)
      if (c->u.s[i] != b->fill) {
        k->bad++;
        break;
      }
  return 0;
}
static const spy_trace_writer_ops lent_ops = {"lent", oc_open,  NULL, lc_action,
                                              NULL,   oc_close, NULL};

/* Emits each block twice (a hook's input, then the next one's), drops
 * the test's own reference and checks that every lent payload reached
 * the writer intact and was released exactly once. */
static void lend_all(spy_trace_desc *d, lent_check *k, spy_trace_stats *st) {
  lent_make();
  spy_trace *t;
  d->ops = &lent_ops;
  d->ops_arg = k;
  CHECK_OK(spy_trace_create(&t, d));
  for (int i = 0; i < LEND_N; i++) {
    lent_block *b = &lent_blocks[i];
    atomic_store(&b->refs, 1); /* the test's own */
    for (int twice = 0; twice < 2; twice++)
      CHECK_OK(spy_emit_hook_load_call_end(
          t, &(spy_act_hook_load_call_end){"m", lent_text(b), "p", i, "c", 0}));
    lent_release(b); /* the bytes are the session's to release now */
    atomic_fetch_sub(&b->releases, 1); /* (the test's drop is not counted) */
  }
  CHECK_OK(spy_trace_flush(t));
  spy_trace_get_stats(t, st);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(k->n, 2 * LEND_N);
  CHECK_EQ(k->bad, 0);
  for (int i = 0; i < LEND_N; i++) {
    CHECK_EQ(atomic_load(&lent_blocks[i].releases), 2);
    CHECK_EQ(atomic_load(&lent_blocks[i].refs), 0);
  }
  free(lent_blocks);
}

TEST(lent_payloads_are_read_before_their_release_and_released_once) {
  lent_check k = {0, 0, 0};
  spy_trace_stats st;
  spy_trace_desc d = {.enabled = 1};
  lend_all(&d, &k, &st);
  uint64_t bytes = 0;
  for (int i = 0; i < LEND_N; i++)
    bytes += 2 * (1 + (size_t)(i * 7919) % (4096 * 3));
  CHECK_EQ(st.lent_bytes, bytes);
  CHECK_EQ(st.lent_copied, 0);
  /* the queue held references, not the payloads */
  CHECK(st.queued_bytes < bytes / 20);
}

TEST(lent_payloads_spilled_to_memory_stay_lent) {
  lent_check k = {0, 0, 100};
  spy_trace_stats st;
  spy_trace_desc d = {.enabled = 1, .queue_bytes = 65536};
  lend_all(&d, &k, &st);
  CHECK(st.spilled > 0);
  CHECK_EQ(st.spilled_disk, 0);
  CHECK_EQ(st.lent_copied, 0);
}

TEST(lent_payloads_going_to_the_spill_file_are_copied_and_released) {
  const char *dir = mktmp();
  CHECK(dir);
  lent_check k = {0, 0, 100};
  spy_trace_stats st;
  spy_trace_desc d = {
      .enabled = 1, .dir = dir, .queue_bytes = 65536, .spill_bytes = 1};
  lend_all(&d, &k, &st);
  CHECK(st.spilled_disk > 0);
  CHECK(st.lent_copied >= st.spilled_disk);
  rmrf(dir);
}

TEST(beyond_lend_bytes_a_lent_payload_is_copied_and_released_at_once) {
  lent_check k = {0, 0, 50};
  spy_trace_stats st;
  spy_trace_desc d = {.enabled = 1, .lend_bytes = 64 << 10};
  lend_all(&d, &k, &st);
  CHECK(st.lent_copied > 0);
  CHECK(st.lent_bytes > 0);
}

TEST(a_failed_emit_releases_what_it_was_lent_a_disabled_one_nothing) {
  lent_make();
  lent_block *b = &lent_blocks[0];
  spy_trace *t;
  spy_trace_desc off = {0};
  CHECK_OK(spy_trace_create(&t, &off));
  spy_trace_text tx = {b->bytes, b->n, lent_release, b};
  CHECK_OK(spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){"m", tx, "p", 0, "c", 0}));
  CHECK_EQ(atomic_load(&b->releases), 0);
  spy_trace_destroy(t);
  lent_check k = {0, 0, 0};
  spy_trace_desc on = {.enabled = 1, .ops = &lent_ops, .ops_arg = &k};
  CHECK_OK(spy_trace_create(&t, &on));
  atomic_store(&b->refs, 1);
  CHECK_EQ(spy_emit_hook_load_call_end(
               t, &(spy_act_hook_load_call_end){NULL, tx, "p", 0, "c", 0}),
           SPY_EINVAL); /* module_id is required */
  CHECK_EQ(atomic_load(&b->releases), 1);
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(k.n, 0);
  free(lent_blocks);
}

/* The writer keeps the last lent payloads referenced a little while and
 * reuses the hash of one lent again meanwhile; once released (here: by
 * the flush's commit), a buffer the application refills and lends again
 * is hashed afresh: the store holds each version's own bytes. */
/* Round `id`'s payload: the block's length in letter 'a' + id. */
static int round_letters(const void *arg, int64_t id, const char *p,
                         size_t len) {
  const lent_block *b = arg;
  if (len != b->n)
    return 0;
  for (size_t k = 0; k < len; k++)
    if (p[k] != 'a' + id)
      return 0;
  return 1;
}
TEST(a_lent_buffer_refilled_after_its_release_is_stored_with_its_bytes) {
  lent_make();
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "sqlite", .dir = dir};
  CHECK_OK(spy_trace_create(&t, &d));
  lent_block *b = &lent_blocks[5];
  for (int round = 0; round < 3; round++) {
    memset(b->bytes, 'a' + round, b->n);
    atomic_store(&b->refs, 1);
    atomic_store(&b->releases, 0);
    for (int twice = 0; twice < 2; twice++) /* the second one: held */
      CHECK_OK(spy_emit_hook_load_call_end(
          t, &(spy_act_hook_load_call_end){"m", lent_text(b), "p", round, "c",
                                           0}));
    atomic_fetch_sub(&b->refs, 1); /* the test's own, without the poison */
    CHECK_OK(spy_trace_flush(t));
    CHECK_EQ(atomic_load(&b->releases), 2); /* both released by now */
    CHECK_EQ(atomic_load(&b->refs), 0);
  }
  CHECK_EQ(spy_trace_destroy(t), 0);
  int bad;
  CHECK_EQ(read_back(dir, round_letters, b, &bad), 6);
  CHECK_EQ(bad, 0);
  free(lent_blocks);
  rmrf(dir);
}

/* A lent payload's reference is a pointer: the public decoder (records
 * from a wire or a file) never takes it. */
TEST(decode_refuses_a_lent_payload_reference) {
  char text[64];
  memset(text, 'Z', sizeof text);
  uint8_t rec[512];
  int64_t n = spy_trace_encode(
      &spy_kind_hook_load_call_end,
      &(spy_act_hook_load_call_end){"m", {text, sizeof text}, "p", 0, "c", 0},
      1, 1, 0, rec, sizeof rec);
  CHECK(n > 0 && (size_t)n <= sizeof rec);
  uint8_t *z = memmem(rec, (size_t)n, text, sizeof text);
  CHECK(z && z - rec >= 5);
  spy_trace_arena a = {0};
  spy_trace_action act;
  CHECK_EQ(spy_trace_decode(rec, (size_t)n, &a, &act), (int)n);
  z[-5] = 0x40; /* the tag of a lent reference */
  CHECK_EQ(spy_trace_decode(rec, (size_t)n, &a, &act), SPY_EBADVALUE);
  spy_trace_arena_free(&a);
}

TEST(create_rejects_bad_descs) {
  spy_trace *t = (spy_trace *)1;
  spy_trace_desc d = {.enabled = 1, .writer = "nosuch"};
  CHECK_EQ(spy_trace_create(&t, &d), SPY_EINVAL);
  CHECK(t == NULL);
  spy_trace_desc p = {.enabled = 1, .writer = "postgres"};
  CHECK_EQ(spy_trace_create(&t, &p), SPY_EINVAL);
  spy_trace_desc e = {.enabled = 1, .dir = "/proc/nope/x"};
  CHECK(spy_trace_create(&t, &e) < 0);
  CHECK_EQ(spy_trace_destroy(NULL), 0);
}

/* ---- the derived SQL schema ------------------------------------------------
 */

/* The first column of the first row of `sql` in db, as text ("" when
 * NULL, "<none>" when no row, "<error: …>" when it fails). */
static const char *q1(sqlite3 *db, const char *sql) {
  static char out[4096];
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    snprintf(out, sizeof out, "<error: %s>", sqlite3_errmsg(db));
    return out;
  }
  if (sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char *t = sqlite3_column_text(st, 0);
    snprintf(out, sizeof out, "%s", t ? (const char *)t : "");
  } else {
    snprintf(out, sizeof out, "<none>");
  }
  sqlite3_finalize(st);
  return out;
}

/* Every row of `sql`, columns joined by '|', rows by ';'. */
static const char *qall(sqlite3 *db, const char *sql) {
  static char out[8192];
  size_t n = 0;
  out[0] = 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    snprintf(out, sizeof out, "<error: %s>", sqlite3_errmsg(db));
    return out;
  }
  while (sqlite3_step(st) == SQLITE_ROW && n < sizeof out - 512) {
    if (n)
      out[n++] = ';';
    for (int i = 0; i < sqlite3_column_count(st); i++) {
      const unsigned char *t = sqlite3_column_text(st, i);
      n += (size_t)snprintf(out + n, sizeof out - n, "%s%s", i ? "|" : "",
                            t ? (const char *)t : "NULL");
    }
  }
  sqlite3_finalize(st);
  return out;
}

/* The column list a table must have for a catalog record, written out
 * from the descriptor independently of the writer. */
static void expected_cols(const spy_trace_kind *k, int depth, char *out,
                          size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "session,seq,build_id%s",
                              depth ? "" : ",ts_us");
  for (int d = 0; d < depth; d++)
    n += (size_t)snprintf(out + n, cap - n, ",i%d", d);
  for (uint32_t i = 0; i < k->nfields; i++) {
    const spy_trace_field *f = &k->fields[i];
    const char *suffix =
        f->type == SPY_TF_SRC || f->type == SPY_TF_OSRC     ? "_source_id"
        : f->type == SPY_TF_LIST || f->type == SPY_TF_OLIST ? "_count"
                                                            : "";
    n += (size_t)snprintf(out + n, cap - n, ",%s%s", f->name, suffix);
  }
}

static const char *table_cols(sqlite3 *db, const char *table) {
  char sql[512];
  int n = snprintf(sql, sizeof sql,
                   "SELECT group_concat(name, ',') FROM (SELECT name FROM "
                   "pragma_table_info('%s') ORDER BY cid)",
                   table);
  if (n < 0 || (size_t)n >= sizeof sql)
    return "(table name too long)";
  return q1(db, sql);
}

/* Checks a record's table and, recursively, its child tables. */
static int check_tables(sqlite3 *db, const spy_trace_kind *k, const char *table,
                        int depth) {
  char want[2048];
  expected_cols(k, depth, want, sizeof want);
  const char *got = table_cols(db, table);
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "  table %s: columns %s, want %s\n", table, got, want);
    return -1;
  }
  for (uint32_t i = 0; i < k->nfields; i++)
    if (k->fields[i].type == SPY_TF_LIST || k->fields[i].type == SPY_TF_OLIST) {
      char child[256];
      int n = snprintf(child, sizeof child, "%s__%s", table, k->fields[i].name);
      if (n < 0 || (size_t)n >= sizeof child)
        return -1;
      if (check_tables(db, k->fields[i].rec, child, depth + 1) < 0)
        return -1;
    }
  return 0;
}

/* The writer binds a multi-row INSERT's parameter again only when its
 * value changed (a NULL, the same integer, the session id, a hook or
 * plugin name kept): rows of different hooks and plugins at the same
 * positions of successive statements, and calls left open across commits
 * (their rows inserted by the one-row INSERT, then updated), must each
 * keep their own values. */
TEST(sqlite_rows_keep_their_own_values_across_reused_statements) {
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "sqlite", .dir = dir};
  CHECK_EQ(spy_trace_create(&t, &d), 0);
  spy_trace_build_begin(t);
  enum { N = 301 };
  char id[32], plugin[8], mod[32], open_id[32] = "";
  for (int i = 0; i < N; i++) {
    snprintf(id, sizeof id, "c%d", i);
    snprintf(plugin, sizeof plugin, "p%d", i % 3);
    snprintf(mod, sizeof mod, "m%d.c", i);
    if (i % 4) { /* a resolve_id call, its importer NULL every other one */
      spy_emit_hook_resolve_id_call_start(t,
                                          &(spy_act_hook_resolve_id_call_start){
                                              .importer = i % 2 ? mod : NULL,
                                              .module_request = mod,
                                              .import_kind = "import-statement",
                                              .plugin_name = plugin,
                                              .plugin_id = i % 3,
                                              .trigger = "automatic",
                                              .call_id = id});
      spy_emit_hook_resolve_id_call_end(
          t, &(spy_act_hook_resolve_id_call_end){.resolved_id = mod,
                                                 .is_external = i % 5 == 0,
                                                 .plugin_name = plugin,
                                                 .plugin_id = i % 3,
                                                 .trigger = "automatic",
                                                 .call_id = id});
    } else { /* a load call; every 40th left open across a commit */
      spy_emit_hook_load_call_start(
          t, &(spy_act_hook_load_call_start){mod, plugin, i % 3, id, 0});
      if (i % 40 == 0) {
        if (open_id[0])
          spy_emit_hook_load_call_end(
              t, &(spy_act_hook_load_call_end){
                     "x.c", {"out", 3}, "p0", 0, open_id, 0});
        snprintf(open_id, sizeof open_id, "%s", id);
        CHECK_EQ(spy_trace_flush(t), 0);
        continue;
      }
      spy_emit_hook_load_call_end(t, &(spy_act_hook_load_call_end){
                                         mod, {NULL, 0}, plugin, i % 3, id, 0});
    }
  }
  spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){"x.c", {"out", 3}, "p0", 0, open_id, 0});
  spy_trace_build_end(t);
  CHECK_EQ(spy_trace_destroy(t), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  CHECK_STR(q1(db, "SELECT count(*) FROM hook_calls"), "301");
  /* every row's values are its own call's */
  CHECK_STR(q1(db, "SELECT count(*) FROM (SELECT *, CAST(substr(call_id, 2) "
                   "AS INTEGER) AS i FROM hook_calls) WHERE plugin_name = "
                   "'p' || (i % 3) AND plugin_id = i % 3 AND module_id = 'm' "
                   "|| i || '.c' AND hook_type = CASE WHEN i % 4 THEN "
                   "'resolve_id' ELSE 'load' END AND session_id = (SELECT "
                   "session_id FROM sessions) AND build_id = 1"),
            "301");
  CHECK_STR(q1(db, "SELECT count(*) FROM (SELECT *, CAST(substr(call_id, 2) "
                   "AS INTEGER) AS i FROM hook_calls WHERE hook_type = "
                   "'resolve_id') WHERE start_importer IS (CASE WHEN i % 2 "
                   "THEN module_id END) AND end_resolved_id = module_id AND "
                   "end_is_external = (i % 5 = 0) AND output_source_id IS "
                   "NULL"),
            "225");
  CHECK_STR(q1(db, "SELECT count(*) FROM (SELECT *, CAST(substr(call_id, 2) "
                   "AS INTEGER) AS i FROM hook_calls WHERE hook_type = "
                   "'load') WHERE start_importer IS NULL AND end_resolved_id "
                   "IS NULL AND (output_source_id IS NOT NULL) = (i % 40 = "
                   "0) AND ended_at >= started_at"),
            "76");
  sqlite3_close(db);
  rmrf(dir);
}

TEST(sql_tables_are_derived_from_the_catalog) {
  const char *dir = mktmp();
  CHECK(dir);
  CHECK_EQ(record("sqlite", dir, NULL, NULL), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  /* one table per kind, one column per field in catalog order, one row
   * per action */
  for (int i = 1; i <= SPY_TRACE_KIND_COUNT; i++) {
    const spy_trace_kind *k = spy_trace_kinds[i];
    CHECK_EQ(check_tables(db, k, k->snake, 0), 0);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", k->snake);
    CHECK_STR(q1(db, sql), "1");
  }
  /* values, field by field */
  uint64_t h[2];
  char hex[33];
  spy_trace_hash(big, sizeof big - 1, h);
  spy_trace_hash_hex(h, hex);
  char want[256];
  snprintf(want, sizeof want, "main.c|%s|p1|1|t1", hex);
  CHECK_STR(qall(db, "SELECT module_id, content_source_id, plugin_name, "
                     "plugin_id, call_id FROM hook_transform_call_start"),
            want);
  CHECK_STR(qall(db, "SELECT resolved_id, is_external IS NULL, trigger FROM "
                     "hook_resolve_id_call_end"),
            "b.c|1|manual");
  CHECK_STR(qall(db, "SELECT cwd, platform, format, dir, file IS NULL, "
                     "inputs_count, plugins_count FROM session_meta"),
            "/w|node|esm|dist|1|2|2");
  CHECK_STR(qall(db, "SELECT i0, name, filename FROM session_meta__inputs "
                     "ORDER BY i0"),
            "0|main|src/main.c;1|NULL|b.c");
  /* nested lists: a child of a child, and string / integer lists as JSON */
  CHECK_STR(qall(db, "SELECT i0, id, is_external, imports_count, importers "
                     "FROM module_graph_ready__modules ORDER BY i0"),
            "0|main.c|0|1|NULL;1|b.c|1|NULL|[\"main.c\"]");
  CHECK_STR(qall(db, "SELECT i0, i1, module_id, kind, module_request FROM "
                     "module_graph_ready__modules__imports"),
            "0|0|b.c|import-statement|./b");
  CHECK_STR(qall(db, "SELECT modules, chunk_ids FROM "
                     "package_graph_ready__packages"),
            "[\"node_modules/x/i.js\"]|[0,1]");
  /* the reference's tables, as views */
  CHECK_STR(qall(db, "SELECT module_id, imported_module_id, kind FROM "
                     "module_imports"),
            "main.c|b.c|import-statement");
  CHECK_STR(qall(db, "SELECT chunk_id, imported_chunk_id FROM chunk_imports"),
            "0|1");
  CHECK_STR(qall(db, "SELECT build_id, ended_at >= started_at FROM builds"),
            "1|1");
  CHECK_STR(qall(db, "SELECT filename, chunk_id, size FROM assets ORDER BY "
                     "filename"),
            "main.js|0|42;x.css|NULL|0");
  snprintf(want, sizeof want,
           "load|main.c|p0|1|NULL|%s;render_chunk|NULL|p1|1|", hex);
  const char *calls =
      qall(db, "SELECT hook_type, module_id, plugin_name, ended_at >= "
               "started_at, input_source_id, output_source_id FROM "
               "hook_calls WHERE hook_type IN ('load','render_chunk') ORDER "
               "BY hook_type");
  CHECK(strncmp(calls, want, strlen(want)) == 0);
  CHECK_STR(q1(db, "SELECT count(*) FROM hook_calls"), "4");
  /* the common questions use the indexes: hook_calls (a table the
   * writer fills) its own, the live view an automatic one */
  CHECK_STR(q1(db, "SELECT type FROM sqlite_master WHERE name='hook_calls'"),
            "table");
  CHECK_STR(q1(db, "SELECT count(*) FROM hook_calls_live"), "4");
  const char *plan =
      qall(db, "EXPLAIN QUERY PLAN SELECT * FROM hook_calls_live WHERE "
               "session_id='x' AND build_id=1 AND module_id='main.c' AND "
               "plugin_name='p1'");
  /* no End index is built for it: SQLite makes one for the join */
  CHECK(strstr(plan, "AUTOMATIC") != NULL);
  /* no index by module (its sort at close cost as much as the plugin
   * one's): a question about one module scans hook_calls */
  plan = qall(db, "EXPLAIN QUERY PLAN SELECT * FROM hook_calls WHERE "
                  "build_id=1 AND module_id='main.c'");
  CHECK(strstr(plan, "SCAN hook_calls") != NULL);
  plan = qall(db, "EXPLAIN QUERY PLAN SELECT plugin_name, hook_type, "
                  "count(*), sum(ended_at - started_at) FROM hook_calls GROUP "
                  "BY 1, 2");
  CHECK(strstr(plan, "COVERING INDEX hook_calls_plugin") != NULL);
  plan = qall(db, "EXPLAIN QUERY PLAN SELECT * FROM module_imports WHERE "
                  "session_id='x' AND build_id=1");
  CHECK(strstr(plan, "module_graph_ready__modules_parent") != NULL);
  sqlite3_close(db);
  rmrf(dir);
}

/* ---- application kinds ------------------------------------------------------
 */

#define MY_FRAME_STATS(F, X)                                                   \
  F(X, INT, frame, _)                                                          \
  F(X, STR, scene, _) F(X, OSRC, shader, _) F(X, LIST, plugins, plugin_item)
SPY_TRACE_DECLARE_KIND(FrameStats, frame_stats, MY_FRAME_STATS)
SPY_TRACE_DEFINE_KIND(FrameStats, frame_stats, MY_FRAME_STATS)

TEST(application_kind_goes_through_the_same_path) {
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "sqlite", .dir = dir};
  CHECK_OK(spy_trace_create(&t, &d));
  spy_rec_plugin_item pi = {"shader-cache", 3, 0};
  CHECK_OK(spy_emit_frame_stats(
      t,
      &(spy_act_frame_stats){7, "forest", {"void main(){}", 13}, {&pi, 1}, 0}));
  CHECK_EQ(spy_trace_destroy(t), 0);
  spy_trace_reader *r;
  CHECK_OK(spy_trace_reader_open(dir, NULL, &r));
  spy_trace_action a;
  CHECK_EQ(spy_trace_reader_next(r, &a), 1);
  CHECK(a.kind == NULL);
  CHECK_EQ(a.name_len, 10);
  CHECK(memcmp(a.name, "FrameStats", 10) == 0);
  CHECK_EQ(a.fields.n, 4);
  CHECK_EQ(a.fields.u.items[0].u.i, 7);
  /* the SQL stores keep the binary record: the payload stays a typed
   * reference, fetched by its hash (JSON-lines gives an untyped "$ref:…") */
  CHECK_EQ(a.fields.u.items[2].type, SPY_TV_SRCREF);
  const char *sp;
  size_t sn;
  CHECK_OK(spy_trace_reader_source(r, a.fields.u.items[2].hash, &sp, &sn));
  CHECK_EQ(sn, 13);
  CHECK(memcmp(sp, "void main(){}", 13) == 0);
  char path[512], hex[33];
  spy_trace_hash_hex(a.fields.u.items[2].hash, hex);
  spy_trace_reader_close(r);
  /* and it has its own tables, derived like the built-in kinds' */
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  CHECK_STR(table_cols(db, "frame_stats"),
            "session,seq,build_id,ts_us,frame,scene,shader_source_id,"
            "plugins_count");
  char want[128];
  snprintf(want, sizeof want, "7|forest|%s|1", hex);
  CHECK_STR(qall(db, "SELECT frame, scene, shader_source_id, plugins_count "
                     "FROM frame_stats"),
            want);
  CHECK_STR(qall(db, "SELECT i0, name, plugin_id FROM frame_stats__plugins"),
            "0|shader-cache|3");
  sqlite3_close(db);
  rmrf(dir);
}

/* Writes one FrameStats into $SPY_TEST_PG: trace_pg.sh then checks its
 * tables with psql. */
TEST(application_kind_into_postgres) {
  const char *pg = pg_conninfo();
  if (!pg)
    SKIP(PG_SKIP);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "postgres", .conninfo = pg};
  CHECK_OK(spy_trace_create(&t, &d));
  spy_rec_plugin_item pi[] = {{"shader-cache", 3, 0}, {"lod", 4, 0}};
  CHECK_OK(spy_emit_frame_stats(
      t, &(spy_act_frame_stats){9, "desert", {NULL, 0}, {pi, 2}, 0}));
  CHECK_EQ(spy_trace_destroy(t), 0);
}

static void quiet_errors(void *arg, int err, const char *msg) {
  (void)arg, (void)err, (void)msg; /* expected: the server is away */
}

/* The PostgreSQL server goes away while a batch carrying a payload is
 * pending and that batch is dropped (retry budget of one byte); the same
 * payload named again after the server is back must be sent again, or the
 * stored action would name a payload the store does not have. Needs
 * SPY_TEST_PG and the commands SPY_TEST_PG_DOWN / SPY_TEST_PG_UP
 * (trace_pg.sh sets them). */
TEST(payload_of_a_dropped_batch_is_sent_again) {
  const char *pg = pg_conninfo();
  const char *down = getenv("SPY_TEST_PG_DOWN"), *up = getenv("SPY_TEST_PG_UP");
  if (!pg || !down || !up)
    SKIP("needs SPY_TEST_PG, SPY_TEST_PG_DOWN and SPY_TEST_PG_UP");
  static char payload[3000];
  for (size_t i = 0; i < sizeof payload; i++)
    payload[i] = (char)('a' + (i * 7 + (size_t)getpid()) % 26);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1,
                      .writer = "postgres",
                      .conninfo = pg,
                      .retry_bytes = 1,
                      .retry_ms = 3000,
                      .on_error = quiet_errors};
  CHECK_OK(spy_trace_create(&t, &d));
  char sid[64];
  snprintf(sid, sizeof sid, "%s", spy_trace_session_id(t));
  CHECK_EQ(system(down), 0);
  spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){
             "m.c", {payload, sizeof payload}, "p", 0, "l1", 0});
  CHECK_OK(spy_trace_flush(t)); /* not sent, over budget: dropped */
  CHECK_EQ(system(up), 0);
  usleep(1200 * 1000); /* past the writer's reconnection backoff */
  spy_emit_hook_transform_call_start(
      t, &(spy_act_hook_transform_call_start){
             "m.c", {payload, sizeof payload}, "p", 0, "t1", 0});
  CHECK_EQ(spy_trace_destroy(t), 1); /* the LoadEnd */
  spy_trace_reader *r;
  CHECK_OK(spy_trace_reader_open(pg, sid, &r));
  spy_trace_action a;
  CHECK_EQ(spy_trace_reader_next(r, &a), 1);
  CHECK(a.kind == &spy_kind_hook_transform_call_start);
  uint64_t h[2];
  spy_trace_hash(payload, sizeof payload, h);
  const char *p;
  size_t n;
  CHECK_EQ(spy_trace_reader_source(r, h, &p, &n), 0);
  CHECK_EQ(n, sizeof payload);
  CHECK(memcmp(p, payload, n) == 0);
  CHECK_EQ(spy_trace_reader_next(r, &a), 0);
  spy_trace_reader_close(r);
}

/* ---- schema
 * ------------------------------------------------------------------ */

TEST(newer_sqlite_schema_is_refused) {
  const char *dir = mktmp();
  CHECK(dir);
  CHECK_EQ(record("sqlite", dir, NULL, NULL), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL, NULL) ==
        SQLITE_OK);
  sqlite3_close(db);
  spy_trace_reader *r;
  CHECK_EQ(spy_trace_reader_open(dir, NULL, &r), SPY_EBADSCHEMA);
  CHECK(strstr(spy_trace_reader_error(r), "newer"));
  spy_trace_reader_close(r);
  /* a writer refuses to append to it too */
  spy_trace *t;
  spy_trace_desc d = {
      .enabled = 1, .writer = "sqlite", .dir = dir, .on_error = NULL};
  CHECK_EQ(spy_trace_create(&t, &d), SPY_EBADSCHEMA);
  rmrf(dir);
}

TEST(newer_jsonl_schema_is_refused) {
  const char *dir = mktmp();
  CHECK(dir);
  CHECK_EQ(record("jsonl", dir, NULL, NULL), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/spyglass.json", dir);
  FILE *f = fopen(path, "w");
  CHECK(f);
  fprintf(f, "{\"schema_version\":%d,\"actions\":1,\"lost\":0}\n",
          SPY_TRACE_SCHEMA_VERSION + 1);
  fclose(f);
  spy_trace_reader *r;
  CHECK_EQ(spy_trace_reader_open(dir, NULL, &r), SPY_EBADSCHEMA);
  spy_trace_reader_close(r);
  rmrf(dir);
}

/* ---- delta-compressed sources
 * ---------------------------------------------------- */

#define NVER 12

/* Version 0 is varied C-like text (a pseudo-random generator picks names
 * and numbers, so zstd alone cannot squeeze it much); each next version
 * edits a few lines of the one before, as a transform would. */
static char *make_versions(size_t len[NVER]) {
  static const size_t cap = 12000;
  char *v = malloc(NVER * cap);
  uint32_t x = 12345;
  size_t n = 0;
  while (n < 8000) {
    x = x * 1103515245u + 12345u;
    n += (size_t)snprintf(
        v + n, cap - n, "static int f%u(int a) { return a * %u + %u; }\n",
        (x >> 8) % 100000u, (x >> 3) % 977u, (x >> 13) % 4099u);
  }
  len[0] = n;
  for (int i = 1; i < NVER; i++) {
    char *p = v + (size_t)i * cap, *q = v + (size_t)(i - 1) * cap;
    memcpy(p, q, len[i - 1]);
    len[i] = len[i - 1];
    for (int e = 0; e < 4; e++) { /* a few edits, same length */
      x = x * 1103515245u + 12345u;
      size_t at = (x >> 4) % (len[i] - 8);
      p[at] = (char)('a' + i);
    }
    if (i % 3 == 0) /* a shorter version now and then */
      len[i] -= 200;
  }
  return v;
}

/* Emits the versions into a writer as a transform chain. */
static int record_versions(const char *writer, const char *dir,
                           const char *conninfo, const char *v,
                           const size_t len[NVER]) {
  spy_trace *t;
  spy_trace_desc d = {
      .enabled = 1, .writer = writer, .dir = dir, .conninfo = conninfo};
  int rc = spy_trace_create(&t, &d);
  if (rc < 0)
    return rc;
  for (int i = 0; i < NVER; i++) {
    char cid[16];
    snprintf(cid, sizeof cid, "t%d", i);
    spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               "m.c", {v + (size_t)i * 12000, len[i]}, "p", 0, cid, 0});
  }
  return (int)spy_trace_destroy(t);
}

/* Reads every version back through the reader: byte-identical. */
static int read_versions(const char *store, const char *v,
                         const size_t len[NVER]) {
  spy_trace_reader *r;
  int rc = spy_trace_reader_open(store, NULL, &r);
  for (int i = 0; rc == 0 && i < NVER; i++) {
    uint64_t h[2];
    spy_trace_hash(v + (size_t)i * 12000, len[i], h);
    const char *p;
    size_t n;
    rc = spy_trace_reader_source(r, h, &p, &n);
    if (rc == 0 && (n != len[i] || memcmp(p, v + (size_t)i * 12000, n))) {
      fprintf(stderr, "version %d differs after the round trip\n", i);
      rc = -1;
    } else if (rc < 0)
      fprintf(stderr, "version %d: %s\n", i, spy_trace_reader_error(r));
  }
  spy_trace_reader_close(r);
  return rc;
}

/* One integer from a query on the session's trace.db (-1: no row, or the
 * query failed). */
static long long db_int(const char *dir, const char *sql) {
  char path[512];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  long long v = -1;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    return -1;
  const char *t = q1(db, sql);
  if (t[0] != '<')
    v = atoll(t);
  sqlite3_close(db);
  return v;
}

static int db_exec(const char *dir, const char *sql) {
  char path[512];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    return -1;
  int rc = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
  sqlite3_close(db);
  return rc;
}

TEST(delta_chain_round_trips_through_sqlite) {
  size_t len[NVER];
  char *v = make_versions(len);
  const char *dir = mktmp();
  CHECK(dir);
  CHECK_EQ(record_versions("sqlite", dir, NULL, v, len), 0);
  CHECK_EQ(read_versions(dir, v, len), 0);
  /* most versions are deltas (zstd or copy), chains are at most 12
   * deltas deep (SPY__SRC_MAX_DEPTH), and the deltas are far smaller than
   * the keyframes */
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM sources"), NVER);
  long long deltas = db_int(dir, "SELECT count(*) FROM sources WHERE "
                                 "codec IN (2, 3) AND base_source_id IS NOT "
                                 "NULL");
  CHECK(deltas >= NVER / 2);
  CHECK(db_int(dir, "SELECT count(*) FROM sources WHERE codec=1") >= 1);
  long long depth =
      db_int(dir, "WITH RECURSIVE d(id, depth) AS (SELECT source_id, 0 "
                  "FROM sources WHERE codec NOT IN (2, 3) UNION ALL SELECT "
                  "s.source_id, d.depth+1 FROM sources s JOIN d ON "
                  "s.base_source_id=d.id) SELECT max(depth) FROM d");
  CHECK(depth >= 1 && depth <= 12);
  CHECK(db_int(dir, "SELECT max(length(content)) FROM sources WHERE codec=2") *
            4 <
        db_int(dir, "SELECT min(length(content)) FROM sources WHERE codec=1"));
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM sources s WHERE codec=2 AND NOT "
                       "EXISTS (SELECT 1 FROM sources b WHERE "
                       "b.source_id=s.base_source_id)"),
           0);
  CHECK(db_int(dir, "PRAGMA user_version") >= SPY_TRACE_SCHEMA_VERSION);
  rmrf(dir);
  free(v);
}

/* The close checkpoints most of the WAL on a second connection while it
 * builds the indexes. With another connection open on the store all the
 * while (a reader of the live store), the file it then sees is whole and
 * keyed, and when that last connection closes it checkpoints the rest and
 * SQLite removes the WAL: the close left no connection of its own open. */
TEST(sqlite_close_beside_an_open_connection_leaves_a_whole_store) {
  size_t len[NVER];
  char *v = make_versions(len);
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "sqlite", .dir = dir};
  CHECK_EQ(spy_trace_create(&t, &d), 0);
  /* the store is set up on the writer's thread: once an action is in */
  CHECK_OK(spy_emit_build_start(t, &(spy_act_build_start){0}));
  CHECK_OK(spy_trace_flush(t));
  char path[512];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
  CHECK_EQ(strcmp(q1(db, "SELECT count(*) FROM sessions"), "1"), 0);
  for (int i = 0; i < NVER; i++) {
    char cid[16];
    snprintf(cid, sizeof cid, "t%d", i);
    spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               "m.c", {v + (size_t)i * 12000, len[i]}, "p", 0, cid, 0});
    spy_emit_hook_transform_call_end(
        t, &(spy_act_hook_transform_call_end){
               "m.c", {v + (size_t)i * 12000, len[i]}, "p", 0, cid, 0});
  }
  CHECK_EQ(spy_trace_destroy(t), 0);
  struct stat sb;
  snprintf(path, sizeof path, "%s/trace.db-wal", dir);
  CHECK(stat(path, &sb) == 0); /* this connection still has it open */
  CHECK_EQ(strcmp(q1(db, "PRAGMA integrity_check"), "ok"), 0);
  CHECK_EQ(strcmp(q1(db, "SELECT count(*) FROM sqlite_schema WHERE name IN "
                         "('sources_id', 'hook_calls_plugin')"),
                  "2"),
           0);
  CHECK_EQ(strcmp(q1(db, "SELECT count(*) FROM hook_calls WHERE ended_at "
                         "IS NOT NULL"),
                  "12"),
           0);
  CHECK_EQ(strcmp(q1(db, "SELECT actions >= 24 AND actions_lost = 0 FROM "
                         "sessions"),
                  "1"),
           0);
  CHECK_EQ(sqlite3_close(db), SQLITE_OK);
  CHECK(stat(path, &sb) != 0);
  snprintf(path, sizeof path, "%s/trace.db-shm", dir);
  CHECK(stat(path, &sb) != 0);
  CHECK_EQ(read_versions(dir, v, len), 0);
  rmrf(dir);
  free(v);
}

#define SOURCES_KEYS                                                           \
  "SELECT count(*) FROM pragma_index_list('sources') WHERE \"unique\""

/* A store the session creates gets its sources key at close, not row by
 * row; a store killed before then still reads (the reader maps ids to
 * rows in one scan), and a later writer keys it before adding to it, so
 * the same payloads are not stored twice. */
TEST(sqlite_sources_key_is_built_at_close_and_an_unkeyed_store_reads) {
  size_t len[NVER];
  char *v = make_versions(len);
  const char *dir = mktmp();
  CHECK(dir);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "sqlite", .dir = dir};
  CHECK_OK(spy_trace_create(&t, &d));
  for (int i = 0; i < 4; i++)
    spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               "m.c", {v + (size_t)i * 12000, len[i]}, "p", 0, "c", 0});
  CHECK_OK(spy_trace_flush(t));
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM sources"), 4);
  CHECK_EQ(db_int(dir, SOURCES_KEYS), 0); /* committed, not keyed yet */
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_EQ(db_int(dir, SOURCES_KEYS), 1);
  rmrf(dir);

  dir = mktmp();
  CHECK(dir);
  CHECK_EQ(record_versions("sqlite", dir, NULL, v, len), 0);
  CHECK_EQ(db_int(dir, SOURCES_KEYS), 1);
  CHECK_EQ(db_int(dir, "PRAGMA user_version"), 7);
  /* as a writer killed before its close leaves it */
  CHECK_EQ(db_exec(dir, "DROP INDEX sources_id"), 0);
  CHECK_EQ(db_int(dir, SOURCES_KEYS), 0);
  CHECK_EQ(read_versions(dir, v, len), 0);
  /* a payload the store does not hold is not found */
  spy_trace_reader *r;
  CHECK_OK(spy_trace_reader_open(dir, NULL, &r));
  uint64_t h[2] = {1, 2};
  const char *p;
  size_t n;
  CHECK(spy_trace_reader_source(r, h, &p, &n) < 0);
  spy_trace_reader_close(r);
  /* a second session of the same payloads: the key first, no copies */
  CHECK_EQ(record_versions("sqlite", dir, NULL, v, len), 0);
  CHECK_EQ(db_int(dir, SOURCES_KEYS), 1);
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM sources"), NVER);
  CHECK_EQ(read_versions(dir, v, len), 0);
  /* copies left by two sessions that filled an unkeyed store at once go
   * when the key is built */
  CHECK_EQ(db_exec(dir, "DROP INDEX sources_id; INSERT INTO sources SELECT "
                        "* FROM sources WHERE rowid <= 3"),
           0);
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM sources"), NVER + 3);
  CHECK_EQ(record_versions("sqlite", dir, NULL, v, len), 0);
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM sources"), NVER);
  CHECK_EQ(db_int(dir, SOURCES_KEYS), 1);
  CHECK_EQ(read_versions(dir, v, len), 0);
  rmrf(dir);
  free(v);
}

TEST(delta_chain_round_trips_through_postgres) {
  const char *pg = pg_conninfo();
  if (!pg)
    SKIP(PG_SKIP);
  size_t len[NVER];
  char *v = make_versions(len);
  CHECK_EQ(record_versions("postgres", NULL, pg, v, len), 0);
  CHECK_EQ(read_versions(pg, v, len), 0);
  free(v);
}

/* Thousands of hook calls, each with payloads of its own: a batch holds
 * far more than one COPY's rows (128) of each hook table and of sources
 * (whose rows are sorted by id before they are sent), so rows are cut
 * into many COPYs; every action and payload reads back, in order. */
TEST(many_copies_a_batch_round_trip_through_postgres) {
  const char *pg = pg_conninfo();
  if (!pg)
    SKIP(PG_SKIP);
  enum { CALLS = 3000 };
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "postgres", .conninfo = pg};
  CHECK_OK(spy_trace_create(&t, &d));
  char sid[128];
  snprintf(sid, sizeof sid, "%s", spy_trace_session_id(t));
  for (int i = 0; i < CALLS; i++) {
    char cid[16], in[64], out[64];
    snprintf(cid, sizeof cid, "k%d", i);
    int nin =
        snprintf(in, sizeof in, "int f%d(void) { return %d; }\n", i, i * 7);
    int nout = snprintf(out, sizeof out, "int f%d(void){return %d;}", i, i * 7);
    CHECK_OK(spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               "m.c", {in, (size_t)nin}, "p", 0, cid, 0}));
    CHECK_OK(spy_emit_hook_transform_call_end(
        t, &(spy_act_hook_transform_call_end){
               "m.c", {out, (size_t)nout}, "p", 0, cid, 0}));
  }
  CHECK_EQ(spy_trace_destroy(t), 0);
  spy_trace_reader *r;
  CHECK_OK(spy_trace_reader_open(pg, sid, &r));
  spy_trace_action a;
  spy_trace_arena ar = {0};
  int n = 0, bad = 0, rc;
  while (!bad && (rc = spy_trace_reader_next(r, &a)) == 1) {
    int i = n / 2, end = n % 2;
    char cid[16], want[64];
    snprintf(cid, sizeof cid, "k%d", i);
    int nwant =
        end ? snprintf(want, sizeof want, "int f%d(void){return %d;}", i, i * 7)
            : snprintf(want, sizeof want, "int f%d(void) { return %d; }\n", i,
                       i * 7);
    const char *kind = end ? "HookTransformCallEnd" : "HookTransformCallStart";
    const spy_trace_val *c = spy_trace_get(&a, "call_id");
    spy_trace_val v = {0};
    const spy_trace_val *src = spy_trace_get(&a, "content");
    if (src)
      v = *src;
    spy_trace_arena_reset(&ar);
    if (a.name_len != strlen(kind) || memcmp(a.name, kind, a.name_len) || !c ||
        c->n != strlen(cid) || memcmp(c->u.s, cid, c->n) || !src ||
        resolve(r, &v, &ar) < 0 || v.n != (uint32_t)nwant ||
        memcmp(v.u.s, want, v.n)) {
      fprintf(stderr, "action %d (%.*s) differs after the round trip\n", n,
              (int)a.name_len, a.name);
      bad = 1;
    }
    n++;
  }
  spy_trace_arena_free(&ar);
  spy_trace_reader_close(r);
  CHECK_EQ(bad, 0);
  CHECK_EQ(n, 2 * CALLS);
}

TEST(missing_or_cyclic_delta_base_is_an_error) {
  size_t len[NVER];
  char *v = make_versions(len);
  const char *dir = mktmp();
  CHECK(dir);
  CHECK_EQ(record_versions("sqlite", dir, NULL, v, len), 0);
  char ids[NVER][33];
  for (int i = 0; i < NVER; i++) {
    uint64_t h[2];
    spy_trace_hash(v + (size_t)i * 12000, len[i], h);
    spy_trace_hash_hex(h, ids[i]);
  }
  /* version 1 is a delta of version 0; delete version 0 by hand */
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM sources WHERE source_id='%s' AND codec IN "
           "(2, 3) AND base_source_id='%s'",
           ids[1], ids[0]);
  CHECK_EQ(db_int(dir, sql), 1);
  snprintf(sql, sizeof sql, "DELETE FROM sources WHERE source_id='%s'", ids[0]);
  CHECK_OK(db_exec(dir, sql));
  spy_trace_reader *r;
  CHECK_OK(spy_trace_reader_open(dir, NULL, &r));
  uint64_t h[2];
  const char *p;
  size_t n;
  spy_trace_hash(v, len[0], h);
  CHECK_EQ(spy_trace_reader_source(r, h, &p, &n), SPY_ENOENT);
  spy_trace_hash(v + 12000, len[1], h);
  CHECK_EQ(spy_trace_reader_source(r, h, &p, &n), SPY_EBADVALUE);
  CHECK(strstr(spy_trace_reader_error(r), "base is missing"));
  CHECK(strstr(spy_trace_reader_error(r), ids[0]));
  /* the store still reads: a summary skips the broken payloads */
  spy_trace_summary sum;
  CHECK_OK(spy_trace_reader_summary(r, &sum));
  CHECK_EQ(sum.actions, NVER);
  CHECK(sum.sources < NVER);
  spy_trace_reader_close(r);
  /* a cycle: version 1 made the base of version 2's base (version 1) */
  snprintf(sql, sizeof sql,
           "UPDATE sources SET base_source_id='%s' WHERE source_id='%s'",
           ids[2], ids[1]);
  CHECK_OK(db_exec(dir, sql));
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM sources WHERE source_id='%s' AND "
           "base_source_id='%s'",
           ids[2], ids[1]);
  CHECK_EQ(db_int(dir, sql), 1);
  CHECK_OK(spy_trace_reader_open(dir, NULL, &r));
  spy_trace_hash(v + 2 * 12000, len[2], h);
  CHECK_EQ(spy_trace_reader_source(r, h, &p, &n), SPY_EBADVALUE);
  CHECK(strstr(spy_trace_reader_error(r), "cycle"));
  spy_trace_reader_close(r);
  rmrf(dir);
  free(v);
}

TEST(schema_2_sqlite_store_still_reads_and_is_not_appended_to) {
  const char *dir = mktmp();
  CHECK(dir);
  /* a version 2 store: no base_source_id column, every action's record
   * in action_batches */
  setenv("SPY_TRACE_SQL_RECORDS", "all", 1);
  CHECK_EQ(record("sqlite", dir, NULL, NULL), 0);
  unsetenv("SPY_TRACE_SQL_RECORDS");
  CHECK_OK(db_exec(dir, "ALTER TABLE sources DROP COLUMN base_source_id; "
                        "PRAGMA user_version=2"));
  CHECK_EQ(db_int(dir, "PRAGMA user_version"), 2);
  CHECK_EQ(compare_store(dir), 0);
  /* its tables are not the derived ones: a writer refuses to append */
  size_t len[NVER];
  char *v = make_versions(len);
  CHECK_EQ(record_versions("sqlite", dir, NULL, v, len), SPY_EBADSCHEMA);
  CHECK_EQ(db_int(dir, "PRAGMA user_version"), 2);
  CHECK_EQ(compare_store(dir), 0);
  free(v);
  rmrf(dir);
}

/* ---- the record codec
 * ---------------------------------------------------------- */

TEST(decode_rejects_truncated_and_corrupt_records) {
  uint8_t buf[512];
  int64_t n =
      spy_trace_encode(&spy_kind_hook_load_call_start,
                       &(spy_act_hook_load_call_start){"m.c", "p", 3, "c1", 0},
                       9, 1000, 2, buf, sizeof buf);
  CHECK(n > 32);
  spy_trace_arena ar = {0};
  spy_trace_action a;
  CHECK_EQ(spy_trace_decode(buf, (size_t)n, &ar, &a), n);
  CHECK(a.kind == &spy_kind_hook_load_call_start);
  CHECK_EQ(a.seq, 9);
  CHECK_EQ(a.build, 2);
  CHECK_EQ(spy_trace_get(&a, "plugin_id")->u.i, 3);
  for (int64_t cut = 0; cut < n; cut++)
    CHECK(spy_trace_decode(buf, (size_t)cut, &ar, &a) < 0);
  uint8_t bad[512];
  memcpy(bad, buf, (size_t)n);
  bad[4] = 99; /* unknown built-in kind */
  CHECK_EQ(spy_trace_decode(bad, (size_t)n, &ar, &a), SPY_EBADVALUE);
  memcpy(bad, buf, (size_t)n);
  bad[4] = 2; /* the name no longer matches the kind */
  CHECK_EQ(spy_trace_decode(bad, (size_t)n, &ar, &a), SPY_EBADVALUE);
  memcpy(bad, buf, (size_t)n);
  bad[32 + 17] = 0x55; /* a bad value tag inside the record */
  CHECK(spy_trace_decode(bad, (size_t)n, &ar, &a) < 0);
  spy_trace_arena_free(&ar);
  /* too small a buffer: the size is returned, nothing overruns */
  CHECK_EQ(spy_trace_encode(&spy_kind_build_start, NULL, 1, 1, 1, buf, 8),
           spy_trace_encode(&spy_kind_build_start, NULL, 1, 1, 1, NULL, 0));
}

TEST_MAIN(
    TEST_CASE(catalog_matches_rolldown_kinds),
    TEST_CASE(every_kind_round_trips_through_jsonl),
    TEST_CASE(every_kind_round_trips_through_sqlite),
    TEST_CASE(every_kind_round_trips_through_postgres),
    TEST_CASE(escaped_text_round_trips_through_postgres),
    TEST_CASE(
        action_times_follow_the_wall_clock_across_the_counter_calibration),
    TEST_CASE(write_every_kind_for_rolldown),
    TEST_CASE(reader_answers_builds_modules_imports_hook_calls_and_sources),
    TEST_CASE(sqlite_rows_keep_their_own_values_across_reused_statements),
    TEST_CASE(sql_tables_are_derived_from_the_catalog),
    TEST_CASE(same_source_emitted_n_times_is_stored_once),
    TEST_CASE(two_sessions_in_one_process_are_isolated),
    TEST_CASE(default_location_is_under_the_desc_cwd),
    TEST_CASE(disabled_session_never_calls_the_writer),
    TEST_CASE(full_queue_makes_the_emitter_wait_and_loses_nothing),
    TEST_CASE(a_hook_calls_duration_leaves_out_the_tracers_wait),
    TEST_CASE(a_flush_runs_the_lagging_writers_work_on_the_waiting_thread),
    TEST_CASE(a_waiting_flush_packs_payloads_on_a_second_thread),
    TEST_CASE(full_queue_spills_and_the_emitter_never_waits),
    TEST_CASE(the_memory_spill_reuses_its_blocks),
    TEST_CASE(beyond_the_memory_bound_actions_spill_to_a_file_in_order),
    TEST_CASE(with_lending_off_actions_spill_to_a_file_whole),
    TEST_CASE(
        a_damaged_spill_record_is_counted_lost_and_the_rest_written_in_order),
    TEST_CASE(
        with_memory_and_file_used_up_the_emitter_waits_and_nothing_is_lost),
    TEST_CASE(large_payloads_come_back_whole_from_the_spill_file),
    TEST_CASE(a_spill_file_that_fails_to_write_loses_nothing_gathered),
    TEST_CASE(threads_emit_into_one_session),
    TEST_CASE(two_threads_emit_at_full_speed_each_action_once_in_order),
    TEST_CASE(two_threads_spilling_each_action_once_in_order),
    TEST_CASE(two_threads_spilling_to_files_each_action_once_in_order),
    TEST_CASE(two_threads_into_sqlite_store_each_action_once_in_order),
    TEST_CASE(application_kinds_beyond_the_limit_are_refused),
    TEST_CASE(repeated_writer_failure_is_reported_once_with_its_count),
    TEST_CASE(the_writers_set_up_runs_on_its_thread_not_in_create),
    TEST_CASE(a_failed_set_up_is_retried_and_no_action_comes_before_it),
    TEST_CASE(a_store_never_set_up_counts_every_action_lost),
    TEST_CASE(a_set_up_that_cannot_succeed_is_not_retried),
    TEST_CASE(actions_after_a_set_up_that_came_late_are_stored),
    TEST_CASE(sqlite_clean_close_leaves_no_wal_or_shm),
    TEST_CASE(payload_of_a_failed_batch_is_stored_again_sqlite),
    TEST_CASE(payload_of_a_failed_batch_is_stored_again_jsonl),
    TEST_CASE(emit_rejects_a_missing_required_field),
    TEST_CASE(lent_payloads_are_read_before_their_release_and_released_once),
    TEST_CASE(lent_payloads_spilled_to_memory_stay_lent),
    TEST_CASE(lent_payloads_going_to_the_spill_file_are_copied_and_released),
    TEST_CASE(beyond_lend_bytes_a_lent_payload_is_copied_and_released_at_once),
    TEST_CASE(a_failed_emit_releases_what_it_was_lent_a_disabled_one_nothing),
    TEST_CASE(
        a_lent_buffer_refilled_after_its_release_is_stored_with_its_bytes),
    TEST_CASE(decode_refuses_a_lent_payload_reference),
    TEST_CASE(create_rejects_bad_descs),
    TEST_CASE(application_kind_goes_through_the_same_path),
    TEST_CASE(application_kind_into_postgres),
    TEST_CASE(payload_of_a_dropped_batch_is_sent_again),
    TEST_CASE(newer_sqlite_schema_is_refused),
    TEST_CASE(newer_jsonl_schema_is_refused),
    TEST_CASE(delta_chain_round_trips_through_sqlite),
    TEST_CASE(sqlite_sources_key_is_built_at_close_and_an_unkeyed_store_reads),
    TEST_CASE(sqlite_close_beside_an_open_connection_leaves_a_whole_store),
    TEST_CASE(delta_chain_round_trips_through_postgres),
    TEST_CASE(many_copies_a_batch_round_trip_through_postgres),
    TEST_CASE(missing_or_cyclic_delta_base_is_an_error),
    TEST_CASE(schema_2_sqlite_store_still_reads_and_is_not_appended_to),
    TEST_CASE(decode_rejects_truncated_and_corrupt_records))
