/* test_writer_pg.c — the PostgreSQL writer's hook calls (store schema 6)
 * when calls never end, against the SQLite store of the same actions.
 *
 * Proves: a call whose Start is stored and whose End never came is one
 * hook_calls row with ended_at NULL, in a session that closes and in one
 * whose process is killed (SIGKILL after its batches committed), as in
 * SQLite's hook_calls; the reader's hook calls (ended ones) and summary
 * agree between the two stores; a writer reopening the killed session (as
 * spy_trace_recover does) ends those calls with the Ends it is given, each
 * call still one row. With the answer of each batch's first
 * COMMIT lost (SPY_TRACE_PG_LOSE_ANSWERS=1: the link breaks after the
 * server committed), every batch is found stored or sent again without
 * a row twice: hook_calls, the Start and End views and action_batches
 * hold what was emitted, once. A batch whose COPYs were streamed while
 * it was built, its link broken then, is sent whole again: each action
 * stored once.
 *
 * Needs SPY_TEST_PG (a conninfo; scripts/test.sh sets it); without it
 * every case ends as SKIP. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "spyglass/trace.h"
#include "testlib.h"

#define ENDED 12
#define OPEN 4

typedef struct store {
  const char *writer;
  char dir[256];
  const char *conninfo;
  char sid[128];
  char path[512]; /* the session's directory (sqlite) */
} store;

static int store_init(store *s, const char *writer, const char *pg) {
  memset(s, 0, sizeof *s);
  s->writer = writer;
  s->conninfo = strcmp(writer, "postgres") == 0 ? pg : NULL;
  snprintf(s->dir, sizeof s->dir, "/tmp/spy-writer-pg-XXXXXX");
  return mkdtemp(s->dir) ? 0 : -1;
}

static void store_free(store *s) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", s->dir);
}

/* A build of ENDED transform calls and OPEN calls that never end, in
 * batches of at most 5 actions (a flush every third call), all committed:
 * the session's id in s->sid. Returns the session, or NULL. */
static spy_trace *emit(store *s) {
  spy_trace *t = NULL;
  spy_trace_desc d = {.enabled = 1,
                      .writer = s->writer,
                      .dir = s->dir,
                      .conninfo = s->conninfo,
                      .batch_actions = 5};
  if (spy_trace_create(&t, &d) < 0)
    return NULL;
  snprintf(s->sid, sizeof s->sid, "%s", spy_trace_session_id(t));
  snprintf(s->path, sizeof s->path, "%s",
           spy_trace_dir(t) ? spy_trace_dir(t) : "");
  spy_trace_build_begin(t);
  char id[32], mod[32], src[64];
  for (int i = 0; i < ENDED + OPEN; i++) {
    snprintf(id, sizeof id, "t%d", i);
    snprintf(mod, sizeof mod, "m%d.c", i);
    snprintf(src, sizeof src, "int v%d;", i);
    spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               mod, {src, strlen(src)}, "q", 1, id, 0});
    /* the open calls' Starts last, in batches with ended ones */
    if (i < ENDED)
      spy_emit_hook_transform_call_end(
          t, &(spy_act_hook_transform_call_end){
                 mod, {src, strlen(src)}, "q", 1, id, 0});
    if (i % 3 == 2 && spy_trace_flush(t) < 0) /* a batch committed */
      break;
  }
  if (spy_trace_flush(t) < 0) {
    spy_trace_destroy(t);
    return NULL;
  }
  return t;
}

/* One number a query over session sid answers, or -1. */
static long long pg_num(const char *conninfo, const char *sql,
                        const char *sid) {
  PGconn *c = PQconnectdb(conninfo);
  const char *p[1] = {sid};
  PGresult *r = PQexecParams(c, sql, 1, NULL, p, NULL, NULL, 0);
  long long n = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                        !PQgetisnull(r, 0, 0)
                    ? atoll(PQgetvalue(r, 0, 0))
                    : -1;
  if (n < 0)
    fprintf(stderr, "  postgres: %s: %s\n", sql, PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
  return n;
}

static long long sqlite_num(const store *s, const char *sql) {
  char path[600];
  snprintf(path, sizeof path, "%s/trace.db", s->path);
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  long long n = -1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_bind_text(st, 1, s->sid, -1, SQLITE_STATIC) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int64(st, 0);
  else
    fprintf(stderr, "  sqlite %s: %s\n", path, sqlite3_errmsg(db));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

/* The store's hook_calls rows of the session: all, ended, distinct ids. */
static void calls_of(const store *s, long long n[3]) {
  static const char *const q[3] = {
      "SELECT count(*) FROM hook_calls WHERE session_id=$1",
      "SELECT count(ended_at) FROM hook_calls WHERE session_id=$1",
      "SELECT count(DISTINCT call_id) FROM hook_calls WHERE session_id=$1"};
  for (int i = 0; i < 3; i++)
    if (s->conninfo)
      n[i] = pg_num(s->conninfo, q[i], s->sid);
    else {
      char sql[200];
      snprintf(sql, sizeof sql, "%s", q[i]);
      sql[strlen(sql) - 2] = '?'; /* $1 -> ?1 */
      n[i] = sqlite_num(s, sql);
    }
}

static int on_call(void *arg, const spy_trace_hook_call *c) {
  (void)c;
  ++*(long long *)arg;
  return 0;
}

/* What the reader gives: actions, hook calls (summary), ended calls. */
static void read_back(const store *s, long long n[3]) {
  spy_trace_reader *r = NULL;
  n[0] = n[1] = n[2] = -1;
  int rc = spy_trace_reader_open(s->conninfo ? s->conninfo : s->dir,
                                 s->conninfo ? s->sid : NULL, &r);
  spy_trace_summary sum;
  if (rc == 0 && spy_trace_reader_summary(r, &sum) == 0) {
    n[0] = (long long)sum.actions;
    n[1] = (long long)sum.hook_calls;
  }
  long long calls = 0;
  if (rc == 0 && spy_trace_reader_hook_calls(r, on_call, &calls) == 0)
    n[2] = calls;
  if (rc < 0)
    fprintf(stderr, "  reader: %s\n", spy_trace_reader_error(r));
  spy_trace_reader_close(r);
}

/* The same actions into SQLite: what its store answers. */
static void sqlite_answers(long long calls[3], long long read[3]) {
  store q;
  CHECK_EQ(store_init(&q, "sqlite", NULL), 0);
  spy_trace *t = emit(&q);
  CHECK(t);
  CHECK_EQ(spy_trace_destroy(t), 0);
  calls_of(&q, calls);
  read_back(&q, read);
  store_free(&q);
  CHECK_EQ(calls[0], ENDED + OPEN);
  CHECK_EQ(calls[1], ENDED);
  CHECK_EQ(read[2], ENDED);
}

/* A closed or killed session's store against SQLite's of the same build. */
static void same_as_sqlite(const store *s) {
  long long want[3] = {-1, -1, -1}, wread[3] = {-1, -1, -1};
  long long got[3] = {-1, -1, -1}, read[3] = {-1, -1, -1};
  sqlite_answers(want, wread);
  calls_of(s, got);
  read_back(s, read);
  fprintf(stderr,
          "  hook_calls: %lld rows, %lld ended, %lld ids (sqlite %lld, %lld)\n",
          got[0], got[1], got[2], want[0], want[1]);
  CHECK_EQ(got[0], want[0]); /* a row per call, the open ones too */
  CHECK_EQ(got[1], want[1]);
  CHECK_EQ(got[2], got[0]); /* none twice */
  for (int i = 0; i < 3; i++)
    CHECK_EQ(read[i], wread[i]);
  /* each Start and End once through the views */
  CHECK_EQ(pg_num(s->conninfo,
                  "SELECT count(*) FROM hook_transform_call_start s JOIN "
                  "sessions x USING (session) WHERE x.session_id=$1",
                  s->sid),
           ENDED + OPEN);
  CHECK_EQ(pg_num(s->conninfo,
                  "SELECT count(*) FROM hook_transform_call_end s JOIN "
                  "sessions x USING (session) WHERE x.session_id=$1",
                  s->sid),
           ENDED);
  CHECK_EQ(pg_num(s->conninfo,
                  "SELECT sum(count) FROM action_batches WHERE session_id=$1",
                  s->sid),
           read[0]);
}

TEST(never_ended_calls_are_rows_once_with_answers_lost) {
  const char *pg = getenv("SPY_TEST_PG");
  if (!pg) {
    SKIP("no SPY_TEST_PG");
    return;
  }
  store s;
  CHECK_EQ(store_init(&s, "postgres", pg), 0);
  setenv("SPY_TRACE_PG_LOSE_ANSWERS", "1", 1);
  spy_trace *t = emit(&s);
  CHECK(t);
  /* close: nothing emitted since the flush, the open calls never end */
  int64_t lost = spy_trace_destroy(t);
  unsetenv("SPY_TRACE_PG_LOSE_ANSWERS");
  CHECK_EQ(lost, 0);
  same_as_sqlite(&s);
  store_free(&s);
}

TEST(a_killed_sessions_open_calls_are_rows) {
  const char *pg = getenv("SPY_TEST_PG");
  if (!pg) {
    SKIP("no SPY_TEST_PG");
    return;
  }
  store s;
  CHECK_EQ(store_init(&s, "postgres", pg), 0);
  int fd[2];
  CHECK_EQ(pipe(fd), 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) { /* its batches committed, then killed: no close */
    close(fd[0]);
    spy_trace *t = emit(&s);
    if (t && write(fd[1], s.sid, strlen(s.sid) + 1) > 0)
      kill(getpid(), SIGKILL);
    _exit(1);
  }
  close(fd[1]);
  ssize_t n = read(fd[0], s.sid, sizeof s.sid - 1);
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(n > 1);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  s.sid[n > 0 ? n : 0] = 0;
  /* the writer never closed: the session's counts were not written */
  CHECK_EQ(pg_num(pg,
                  "SELECT count(*) FROM sessions WHERE session_id=$1 AND "
                  "actions IS NULL",
                  s.sid),
           1);
  same_as_sqlite(&s);
  store_free(&s);
}

/* A session killed as above, then its missing Ends written by a writer
 * that reopens it (as spy_trace_recover does with a spill file's actions,
 * their seqs after the stored ones): the open calls are found again and
 * end, each still one row. */
TEST(a_reopened_session_ends_its_open_calls) {
  const char *pg = getenv("SPY_TEST_PG");
  if (!pg) {
    SKIP("no SPY_TEST_PG");
    return;
  }
  store s;
  CHECK_EQ(store_init(&s, "postgres", pg), 0);
  int fd[2];
  CHECK_EQ(pipe(fd), 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    spy_trace *t = emit(&s);
    if (t && write(fd[1], s.sid, strlen(s.sid) + 1) > 0)
      kill(getpid(), SIGKILL);
    _exit(1);
  }
  close(fd[1]);
  ssize_t n = read(fd[0], s.sid, sizeof s.sid - 1);
  close(fd[0]);
  waitpid(pid, NULL, 0);
  CHECK(n > 1);
  s.sid[n] = 0;
  long long stored =
      pg_num(pg, "SELECT max(last_seq) FROM action_batches WHERE session_id=$1",
             s.sid);
  CHECK(stored > 0);
  const spy_trace_writer_ops *ops = spy_trace_writer_find("postgres");
  CHECK(ops);
  void *w = NULL;
  spy_trace_writer_cfg cfg = {.dir = s.dir,
                              .conninfo = pg,
                              .session_id = s.sid,
                              .cwd = s.dir,
                              .retry_bytes = 1 << 20,
                              .retry_ms = 5000};
  CHECK_EQ(ops->open(&w, &cfg), 0);
  spy_trace_arena arena = {0};
  for (int i = ENDED; i < ENDED + OPEN; i++) {
    char id[32], mod[32], buf[512];
    snprintf(id, sizeof id, "t%d", i);
    snprintf(mod, sizeof mod, "m%d.c", i);
    int64_t len = spy_trace_encode(
        &spy_kind_hook_transform_call_end,
        &(spy_act_hook_transform_call_end){mod, {"x", 1}, "q", 1, id, 0},
        (uint64_t)stored + 1 + (uint64_t)(i - ENDED), 1700000000000000u, 1, buf,
        sizeof buf);
    CHECK(len > 0 && len <= (int64_t)sizeof buf);
    spy_trace_action a;
    CHECK(spy_trace_decode(buf, (size_t)len, &arena, &a) > 0);
    spy_trace_record r = {.action = &a};
    CHECK_EQ(ops->action(w, &r), 0);
  }
  CHECK_EQ(ops->commit(w), 0);
  CHECK_EQ(ops->close(w), 0);
  spy_trace_arena_free(&arena);
  long long got[3];
  calls_of(&s, got);
  fprintf(stderr, "  hook_calls: %lld rows, %lld ended, %lld ids\n", got[0],
          got[1], got[2]);
  CHECK_EQ(got[0], ENDED + OPEN);
  CHECK_EQ(got[1], ENDED + OPEN); /* the open ones ended */
  CHECK_EQ(got[2], got[0]);
  CHECK_EQ(pg_num(pg,
                  "SELECT count(*) FROM hook_transform_call_end s JOIN "
                  "sessions x USING (session) WHERE x.session_id=$1",
                  s.sid),
           ENDED + OPEN);
  store_free(&s);
}

/* The writer sends a batch's full COPYs of sources and hook_call_rows
 * while it is built (its stream). The writer's backend is ended while such a
 * stream's transaction is open (found by the connection's application_name, in
 * a transaction with a hook_call_rows COPY): the stream is rolled back and the
 * batch sent whole on a new connection (by the commit or, after the
 * reconnection backoff, by close), each call one row, each action once. */
#define STREAMED 600
TEST(a_streamed_batch_whose_link_breaks_is_sent_whole) {
  const char *pg = getenv("SPY_TEST_PG");
  if (!pg) {
    SKIP("no SPY_TEST_PG");
    return;
  }
  char app[64], conninfo[1024], sid[64];
  snprintf(app, sizeof app, "spy_stream_test_%d", (int)getpid());
  snprintf(conninfo, sizeof conninfo, "%s application_name=%s", pg, app);
  snprintf(sid, sizeof sid, "stream-%d", (int)getpid());
  const spy_trace_writer_ops *ops = spy_trace_writer_find("postgres");
  CHECK(ops);
  void *w = NULL;
  spy_trace_writer_cfg cfg = {.conninfo = conninfo,
                              .session_id = sid,
                              .cwd = "/",
                              .retry_bytes = 64 << 20,
                              .retry_ms = 5000};
  CHECK_EQ(ops->open(&w, &cfg), 0);
  spy_trace_arena arena = {0};
  uint64_t seq = 0;
  /* Starts and Ends of STREAMED calls, each of a payload of its own (its
   * sources row first); after the first half a pause, so the server has
   * asked for a COPY's rows when the next actions come */
  for (int i = 0; i < STREAMED; i++) {
    char id[32], mod[32], src[64], buf[512];
    snprintf(id, sizeof id, "s%d", i);
    snprintf(mod, sizeof mod, "m%d.c", i);
    snprintf(src, sizeof src, "int s%d = %d; /* %d */", i, i * 7, getpid());
    uint64_t h[2];
    spy_trace_hash(src, strlen(src), h);
    CHECK_EQ(ops->source(w, h, src, strlen(src)), 0);
    for (int end = 0; end < 2; end++) {
      int64_t len =
          end ? spy_trace_encode(&spy_kind_hook_transform_call_end,
                                 &(spy_act_hook_transform_call_end){
                                     mod, {src, strlen(src)}, "q", 1, id, 0},
                                 ++seq, 1700000000000000u, 1, buf, sizeof buf)
              : spy_trace_encode(&spy_kind_hook_transform_call_start,
                                 &(spy_act_hook_transform_call_start){
                                     mod, {src, strlen(src)}, "q", 1, id, 0},
                                 ++seq, 1700000000000000u, 1, buf, sizeof buf);
      CHECK(len > 0 && len <= (int64_t)sizeof buf);
      spy_trace_action a;
      CHECK(spy_trace_decode(buf, (size_t)len, &arena, &a) > 0);
      /* the payload's id, as the session's writer thread gives it */
      for (uint32_t k = 0; k < a.fields.n; k++) {
        spy_trace_val *v = (spy_trace_val *)&a.fields.u.items[k];
        if (v->type == SPY_TV_SRC) {
          v->hash[0] = h[0], v->hash[1] = h[1];
          v->has_hash = 1;
        }
      }
      spy_trace_record r = {.action = &a};
      CHECK_EQ(ops->action(w, &r), 0);
    }
    if (i == STREAMED / 2)
      usleep(300 * 1000);
  }
  usleep(300 * 1000);
  /* (the old way, a batch's transaction is only open inside its commit) */
  const char *sql = "SELECT count(pg_terminate_backend(pid)) FROM "
                    "pg_stat_activity WHERE application_name=$1 AND state "
                    "<> 'idle' AND xact_start IS NOT NULL AND query LIKE "
                    "'%COPY hook_call_rows%'";
  CHECK_EQ(pg_num(pg, sql, app), 1); /* the stream's transaction was open */
  /* the commit finds the link broken (the batch waits for the backoff)
   * or already made again; close sends what waits */
  int rc = ops->commit(w);
  CHECK(rc == 0 || rc == SPY_EIO);
  CHECK_EQ(ops->close(w), 0);
  spy_trace_arena_free(&arena);
  CHECK_EQ(pg_num(pg,
                  "SELECT sum(count) FROM action_batches WHERE session_id=$1",
                  sid),
           2 * STREAMED);
  CHECK_EQ(pg_num(pg,
                  "SELECT count(*) FROM hook_calls WHERE session_id=$1 AND "
                  "ended_at IS NOT NULL",
                  sid),
           STREAMED);
  CHECK_EQ(pg_num(pg,
                  "SELECT count(DISTINCT call_id) FROM hook_calls WHERE "
                  "session_id=$1",
                  sid),
           STREAMED);
  /* every payload stored, once (sources is keyed by its id) */
  CHECK_EQ(pg_num(pg,
                  "SELECT count(*) FROM sources WHERE source_id IN (SELECT "
                  "input_source_id FROM hook_calls WHERE session_id=$1)",
                  sid),
           STREAMED);
}

TEST_MAIN(TEST_CASE(never_ended_calls_are_rows_once_with_answers_lost),
          TEST_CASE(a_killed_sessions_open_calls_are_rows),
          TEST_CASE(a_reopened_session_ends_its_open_calls),
          TEST_CASE(a_streamed_batch_whose_link_breaks_is_sent_whole))
