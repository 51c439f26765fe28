/* test_store_v4.c — stores the schema 4 build wrote (session 5), kept
 * under test/fixtures (trace_v4.sql: its SQLite store as SQL text;
 * trace_v4_jsonl/: its JSON-lines session; trace_v4_src/: the tree it
 * built; fixtures/README.md says how they were made). Both read back the
 * exact bytes that build loaded, every sources row of the SQLite one
 * decodes (raw, zstd, zstd deltas); a schema 5 writer appending to the
 * SQLite store migrates it in place (the tables are the same; only a
 * codec was added) and then both sessions read, the old one as before;
 * a schema 3 store is refused with a message naming what to do. The CLI
 * reader commands on these stores are test/trace_v4.sh's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "spyglass/trace.h"
#include "store/store.h"
#include "testutil.h"

static const char *const files[] = {"app/main.c", "lib/util.c", "lib/util.h"};
enum { NFILES = sizeof files / sizeof files[0] };

static char *slurp_fixture(const char *rel, size_t *n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", SPY_FIXTURES, rel);
  return spy__slurp(path, n);
}

/* A fresh directory holding trace.db made from the fixture's SQL text. */
static char *sqlite_store(char *dir, size_t cap, const char *sql_file) {
  if (!tu_rundir(dir, cap))
    return NULL;
  size_t n;
  char *sql = slurp_fixture(sql_file, &n);
  char path[1100];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  int ok = sql && sqlite3_open(path, &db) == SQLITE_OK;
  if (ok) {
    ok = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_close(db);
  }
  free(sql);
  return ok ? dir : NULL;
}

static int64_t db_int(const char *dir, const char *q) {
  char path[1100];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  sqlite3_stmt *st;
  int64_t v = -1;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    return -1;
  if (sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return v;
}

/* Every file the build loaded reads back as its exact bytes. */
static int files_read_back(const char *store, const char *session) {
  spy_trace_reader *r;
  int rc = spy_trace_reader_open(store, session, &r);
  for (int i = 0; rc == 0 && i < NFILES; i++) {
    char rel[128];
    snprintf(rel, sizeof rel, "trace_v4_src/%s.txt", files[i]);
    size_t n;
    char *want = slurp_fixture(rel, &n);
    uint64_t h[2];
    const char *p;
    size_t got;
    if (!want)
      return -1;
    spy_trace_hash(want, n, h);
    rc = spy_trace_reader_source(r, h, &p, &got);
    if (rc == 0 && (got != n || memcmp(p, want, n) != 0)) {
      fprintf(stderr, "  %s: %zu bytes back, not its %zu\n", files[i], got, n);
      rc = -1;
    } else if (rc < 0)
      fprintf(stderr, "  %s: %s\n", files[i], spy_trace_reader_error(r));
    free(want);
  }
  spy_trace_reader_close(r);
  return rc;
}

/* Every sources row of the session's store decodes to its size. */
static int every_source_decodes(const char *dir) {
  char path[1100];
  snprintf(path, sizeof path, "%s/trace.db", dir);
  sqlite3 *db;
  sqlite3_stmt *st;
  spy_trace_reader *r;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    return -1;
  int rc = spy_trace_reader_open(dir, NULL, &r);
  if (rc == 0 && sqlite3_prepare_v2(db, "SELECT source_id, size FROM sources",
                                    -1, &st, NULL) != SQLITE_OK)
    rc = -1;
  int rows = 0;
  while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
    const char *id = (const char *)sqlite3_column_text(st, 0);
    uint64_t h[2] = {0, 0};
    for (int k = 0; k < 32; k++)
      h[k / 16] = h[k / 16] << 4 |
                  (uint64_t)(id[k] <= '9' ? id[k] - '0' : id[k] - 'a' + 10);
    const char *p;
    size_t n;
    rc = spy_trace_reader_source(r, h, &p, &n);
    if (rc == 0 && n != (size_t)sqlite3_column_int64(st, 1))
      rc = -1;
    if (rc)
      fprintf(stderr, "  source %s: %s\n", id, spy_trace_reader_error(r));
    rows++;
  }
  if (rc == 0)
    sqlite3_finalize(st);
  spy_trace_reader_close(r);
  sqlite3_close(db);
  return rc ? rc : rows;
}

/* The session's action stream as JSON lines into out. */
static int stream(const char *store, const char *session, spy__buf *out) {
  spy_trace_reader *r;
  int rc = spy_trace_reader_open(store, session, &r);
  static char line[1 << 16];
  spy_trace_action a;
  out->len = 0;
  while (rc == 0 && (rc = spy_trace_reader_next(r, &a)) == 1) {
    int64_t len = spy_trace_json_format(&a, "S", line, sizeof line);
    if (len <= 0 || len >= (int64_t)sizeof line)
      rc = -1;
    else {
      spy__buf_put(out, line, (size_t)len);
      spy__buf_putc(out, '\n');
      rc = 0;
    }
  }
  spy_trace_reader_close(r);
  return rc;
}

#define SQL_SESSION "20261201-224046-a45a6b77"

TEST(v4_sqlite_store_reads_the_bytes_it_stored) {
  char dir[256];
  CHECK(sqlite_store(dir, sizeof dir, "trace_v4.sql"));
  CHECK_EQ(db_int(dir, "PRAGMA user_version"), 4);
  /* the fixture holds each codec schema 4 wrote */
  CHECK(db_int(dir, "SELECT count(*) FROM sources WHERE codec=0") > 0);
  CHECK(db_int(dir, "SELECT count(*) FROM sources WHERE codec=1") > 0);
  CHECK(db_int(dir, "SELECT count(*) FROM sources WHERE codec=2") > 0);
  CHECK_OK(files_read_back(dir, NULL));
  CHECK_EQ(every_source_decodes(dir), 11);
  spy__buf s = {0};
  CHECK_OK(stream(dir, NULL, &s));
  CHECK(s.len > 0);
  spy__buf_free(&s);
  tu_rm_rf(dir);
}

TEST(v4_jsonl_session_reads_the_bytes_it_stored) {
  CHECK_OK(files_read_back(SPY_FIXTURES "/trace_v4_jsonl", NULL));
  spy__buf s = {0};
  CHECK_OK(stream(SPY_FIXTURES "/trace_v4_jsonl", NULL, &s));
  CHECK(s.len > 0);
  spy__buf_free(&s);
}

/* Versions of one module, each a small edit of the one before: copy
 * deltas (codec 3) in a schema 5 store. */
#define NVER 6
static void versions(char v[NVER][4096], size_t len[NVER]) {
  for (int i = 0; i < NVER; i++) {
    size_t n = 0;
    for (int f = 0; f < 40; f++)
      n += (size_t)snprintf(v[i] + n, 4096 - n,
                            "static int f%d(int x) { return x * %d; }\n", f,
                            f == i * 5 ? 100 + i : f);
    len[i] = n;
  }
}

static void note(void *arg, int err, const char *msg) {
  (void)err;
  snprintf(arg, 512, "%s", msg);
}

/* The session's hook calls (the hooks command's answer) as text. */
static int call_text(void *arg, const spy_trace_hook_call *c) {
  char line[1024];
  int n = snprintf(
      line, sizeof line, "%u %s %s %s %s %llu %llu %d %d\n", c->build, c->hook,
      c->plugin, c->module, c->call_id, (unsigned long long)c->started_us,
      (unsigned long long)c->ended_us, c->has_input, c->has_output);
  spy__buf_put(arg, line, (size_t)n);
  return 0;
}

static int calls(const char *store, const char *session, spy__buf *out) {
  spy_trace_reader *r;
  int rc = spy_trace_reader_open(store, session, &r);
  out->len = 0;
  if (rc == 0)
    rc = spy_trace_reader_hook_calls(r, call_text, out);
  spy_trace_reader_close(r);
  return rc;
}

/* The current writer appending a session to an older store (the fixture
 * sql, whose session is `session`) migrates it in place: the old session
 * reads as it did (its stream and its hook calls), the new one is stored
 * the new way. */
static void appending_migrates(const char *sql, const char *session) {
  char dir[256];
  CHECK(sqlite_store(dir, sizeof dir, sql));
  spy__buf before = {0}, after = {0}, cbefore = {0}, cafter = {0};
  CHECK_OK(stream(dir, session, &before));
  CHECK_OK(calls(dir, session, &cbefore));
  CHECK(cbefore.len > 0);
  long long nsrc = db_int(dir, "SELECT count(*) FROM sources");
  static char v[NVER][4096];
  size_t len[NVER];
  versions(v, len);
  char msg[512] = "";
  /* the old store's Ends (the writer migrates it on its own thread) */
  long long ends = db_int(dir, "SELECT count(*) FROM hook_transform_call_end");
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1,
                      .writer = "sqlite",
                      .dir = dir,
                      .on_error = note,
                      .on_error_arg = msg};
  CHECK_OK(spy_trace_create(&t, &d));
  char sid[64];
  snprintf(sid, sizeof sid, "%s", spy_trace_session_id(t));
  for (int i = 0; i < NVER; i++) {
    char cid[16];
    snprintf(cid, sizeof cid, "t%d", i);
    spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               "m.c", {v[i], len[i]}, "p", 0, cid, 0});
  }
  for (int i = 0; i < 3; i++) { /* Ends kept in their calls' rows */
    char cid[16];
    snprintf(cid, sizeof cid, "t%d", i);
    spy_emit_hook_transform_call_end(
        t, &(spy_act_hook_transform_call_end){
               "m.c", {v[i + 1], len[i + 1]}, "p", 0, cid, 0});
  }
  CHECK_EQ(spy_trace_destroy(t), 0);
  CHECK_STR(msg, "");
  CHECK_EQ(db_int(dir, "PRAGMA user_version"), SPY__SQLITE_SCHEMA);
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM sessions"), 2);
  /* schema 6: the old Ends in the renamed table, the new in hook_calls,
   * the End's name a view over both */
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM hook_transform_call_end_kept"),
           ends);
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM hook_calls WHERE end_seq IS NOT "
                       "NULL"),
           3);
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM hook_transform_call_end"),
           ends + 3);
  CHECK_EQ(db_int(dir, "SELECT type='view' FROM sqlite_master WHERE "
                       "name='hook_transform_call_end'"),
           1);
  /* the old session reads as it did; the new one's versions are copy
   * deltas beside the old zstd deltas, and all of them decode */
  CHECK_OK(stream(dir, session, &after));
  CHECK_EQ(after.len, before.len);
  CHECK(memcmp(after.p, before.p, before.len) == 0);
  CHECK_OK(calls(dir, session, &cafter));
  CHECK_EQ(cafter.len, cbefore.len);
  CHECK(memcmp(cafter.p, cbefore.p, cbefore.len) == 0);
  CHECK_OK(files_read_back(dir, session));
  CHECK(db_int(dir, "SELECT count(*) FROM sources WHERE codec=3") > 0);
  CHECK_EQ(every_source_decodes(dir), nsrc + NVER);
  spy_trace_reader *r;
  CHECK_OK(spy_trace_reader_open(dir, sid, &r));
  for (int i = 0; i < NVER; i++) {
    uint64_t h[2];
    const char *p;
    size_t n;
    spy_trace_hash(v[i], len[i], h);
    CHECK_OK(spy_trace_reader_source(r, h, &p, &n));
    CHECK(n == len[i] && memcmp(p, v[i], n) == 0);
  }
  spy_trace_reader_close(r);
  spy__buf_free(&before);
  spy__buf_free(&after);
  spy__buf_free(&cbefore);
  spy__buf_free(&cafter);
  tu_rm_rf(dir);
}

TEST(writer_appending_to_a_v4_sqlite_store_migrates_it) {
  appending_migrates("trace_v4.sql", SQL_SESSION);
}

TEST(writer_appending_to_a_v5_sqlite_store_migrates_it) {
  appending_migrates("trace_v5.sql", "20261202-020345-a55ef94c");
}

TEST(v5_writer_refuses_a_v3_sqlite_store_naming_what_to_do) {
  char dir[256];
  CHECK(sqlite_store(dir, sizeof dir, "trace_v3.sql"));
  CHECK_EQ(db_int(dir, "PRAGMA user_version"), 3);
  char msg[512] = "";
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1,
                      .writer = "sqlite",
                      .dir = dir,
                      .on_error = note,
                      .on_error_arg = msg};
  CHECK_EQ(spy_trace_create(&t, &d), SPY_EBADSCHEMA);
  CHECK(strstr(msg, "schema version 3"));
  CHECK(strstr(msg, "new directory"));
  CHECK_EQ(db_int(dir, "PRAGMA user_version"), 3);
  CHECK_EQ(db_int(dir, "SELECT count(*) FROM sessions"), 1);
  tu_rm_rf(dir);
}

TEST_MAIN(TEST_CASE(v4_sqlite_store_reads_the_bytes_it_stored),
          TEST_CASE(v4_jsonl_session_reads_the_bytes_it_stored),
          TEST_CASE(writer_appending_to_a_v4_sqlite_store_migrates_it),
          TEST_CASE(writer_appending_to_a_v5_sqlite_store_migrates_it),
          TEST_CASE(v5_writer_refuses_a_v3_sqlite_store_naming_what_to_do))
