/* test_oom.c — out-of-memory paths, SQLite style: every allocation the
 * library makes (malloc, calloc, realloc, strdup, strndup, aligned_alloc,
 * redirected here at link time with -Wl,--wrap) can be made to fail; each
 * operation is run with its 1st, 2nd, … Nth allocation failing until it
 * completes without reaching N. Every run must return 0 or SPY_ENOMEM (or
 * the operation's documented error), never crash, and leave nothing
 * allocated (the AddressSanitizer build checks leaks at exit).
 *
 * The wrap covers the library's own calls and this file's; allocations
 * inside shared libraries (SQLite, libc internals) are not failed. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spyglass/consumer.h"
#include "spyglass/provider.h"
#include "spyglass/trace.h"
#include "spyglass/zones.h"
#include "testlib.h"
#include "testutil.h"

/* ---- the failing allocator ----------------------------------------------- */

static _Atomic long calls;       /* allocations since arm() */
static _Atomic long fail_at;     /* 0: never fail */
static _Atomic int fired;        /* the failure was injected */
static _Atomic int sticky;       /* every allocation from the Nth on fails */
static _Atomic size_t fail_size; /* mallocs of this size fail (0: none) */

static int should_fail(void) {
  long at = atomic_load_explicit(&fail_at, memory_order_relaxed);
  if (!at)
    return 0;
  long n = atomic_fetch_add(&calls, 1) + 1;
  if (n != at && !(n > at && atomic_load(&sticky)))
    return 0;
  atomic_store(&fired, 1);
  return 1;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__real_aligned_alloc(size_t al, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void *__wrap_aligned_alloc(size_t al, size_t n);

#define FAIL_OR(call)                                                          \
  do {                                                                         \
    if (should_fail()) {                                                       \
      errno = ENOMEM;                                                          \
      return NULL;                                                             \
    }                                                                          \
    return call;                                                               \
  } while (0)
void *__wrap_malloc(size_t n) {
  if (n && n == atomic_load_explicit(&fail_size, memory_order_relaxed)) {
    atomic_store(&fired, 1);
    errno = ENOMEM;
    return NULL;
  }
  FAIL_OR(__real_malloc(n));
}
void *__wrap_calloc(size_t a, size_t b) { FAIL_OR(__real_calloc(a, b)); }
void *__wrap_realloc(void *p, size_t n) { FAIL_OR(__real_realloc(p, n)); }
char *__wrap_strdup(const char *s) { FAIL_OR(__real_strdup(s)); }
char *__wrap_strndup(const char *s, size_t n) { FAIL_OR(__real_strndup(s, n)); }
void *__wrap_aligned_alloc(size_t al, size_t n) {
  FAIL_OR(__real_aligned_alloc(al, n));
}

static void arm(long n) {
  atomic_store(&calls, 0);
  atomic_store(&fired, 0);
  atomic_store(&fail_at, n);
}
/* Disarms; returns whether the failure was injected. */
static int disarm(void) {
  atomic_store(&fail_at, 0);
  return atomic_load(&fired);
}

#define MAX_POINTS 5000 /* a runaway loop is a failure, not a hang */

/* Runs op(arg) with allocation N failing for N = 1, 2, … until a run
 * completes without reaching N: first only the Nth allocation fails (the
 * operation may recover), then every one from the Nth on (its error paths
 * must not need memory they cannot get). op returns 0 if its results were
 * acceptable (it prints why not otherwise). Returns the number of failure
 * points, or -1. */
static long every_failure_point_once(const char *what, int (*op)(void *, int),
                                     void *arg) {
  for (long n = 1; n <= MAX_POINTS; n++) {
    arm(n);
    int bad = op(arg, 1);
    int hit = disarm();
    if (bad) {
      fprintf(stderr, "  %s: allocation %ld failing: unacceptable result\n",
              what, n);
      return -1;
    }
    if (!hit) {
      fprintf(stderr, "  %s: %ld failure points\n", what, n - 1);
      return n - 1;
    }
  }
  fprintf(stderr, "  %s: more than %d allocations\n", what, MAX_POINTS);
  return -1;
}

static long every_failure_point(const char *what, int (*op)(void *, int),
                                void *arg) {
  atomic_store(&sticky, 0);
  long n = every_failure_point_once(what, op, arg);
  if (n < 0)
    return n;
  atomic_store(&sticky, 1);
  char sticky_what[200];
  snprintf(sticky_what, sizeof sticky_what, "%s (all from the Nth on)", what);
  long m = every_failure_point_once(sticky_what, op, arg);
  atomic_store(&sticky, 0);
  return m < 0 ? m : n;
}

/* rc is 0 or SPY_ENOMEM (or one of the extra codes allowed). */
static int ok_rc(const char *what, long long rc) {
  if (rc >= 0 || rc == SPY_ENOMEM)
    return 1;
  fprintf(stderr, "  %s returned %lld (%s)\n", what, rc, spy_err_name((int)rc));
  return 0;
}

static char dir[256];

/* ---- provider ------------------------------------------------------------ */

static int provider_life(void *arg, int armed) {
  (void)arg, (void)armed;
  spy_provider *p = NULL;
  spy_provider_desc d = {.name = "oom", .dir = dir, .flush_ms = 20};
  int rc = spy_provider_create(&p, &d);
  if (!ok_rc("spy_provider_create", rc))
    return 1;
  if (rc < 0)
    return 0;
  for (int f = 0; f < 3; f++) {
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, f);
    spy_value_set_f64(p, "oom.value", f);
    spy_env_set(p, "oom", "yes");
    spy_frame_end(p);
  }
  rc = spy_provider_flush(p);
  spy_provider_destroy(p);
  return !(rc >= 0 || rc == SPY_ENOMEM || rc == SPY_EPOOLEMPTY ||
           rc == SPY_EAGAIN);
}

TEST(provider_create_and_flush_survive_every_allocation_failure) {
  CHECK(tu_rundir(dir, sizeof dir));
  CHECK(every_failure_point("provider create/frames/flush/destroy",
                            provider_life, NULL) > 0);
  tu_rm_rf(dir);
}

/* A consumer created and subscribed to a live provider (whose service
 * thread allocates in the same window). */
static int consumer_subscribes(void *arg, int armed) {
  (void)arg, (void)armed;
  spy_consumer *c = NULL;
  spy_consumer_desc d = {
      .dir = dir, .want = "oom-target", .query_initial_ms = 20};
  int rc = spy_consumer_create(&c, &d);
  if (!ok_rc("spy_consumer_create", rc))
    return 1;
  if (rc < 0)
    return 0;
  const spy_state *s = spy_consumer_state(c);
  double end = tu_now_s() + 5;
  int bad = 0;
  while (!bad && tu_now_s() < end &&
         !(s->conn == SPY_CONN_CONNECTED && s->samples))
    bad = !ok_rc("spy_consumer_poll", spy_consumer_poll(c, 20));
  /* one failed allocation is a retry, not a consumer that never connects */
  if (!bad && !atomic_load(&sticky) &&
      !(s->conn == SPY_CONN_CONNECTED && s->samples)) {
    fprintf(stderr, "  consumer did not recover: conn %d, %llu samples\n",
            (int)s->conn, (unsigned long long)s->samples);
    bad = 1;
  }
  spy_consumer_destroy(c);
  return bad;
}

static _Atomic int target_stop;
static void *target_main(void *arg) {
  spy_provider *p = arg;
  while (!atomic_load(&target_stop)) {
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, 3);
    spy_value_set_f64(p, "x", 1.0);
    spy_frame_end(p);
    usleep(2000);
  }
  return NULL;
}

TEST(consumer_create_and_subscribe_survive_every_allocation_failure) {
  CHECK(tu_rundir(dir, sizeof dir));
  spy_provider *p;
  spy_provider_desc d = {.name = "oom-target", .dir = dir, .flush_ms = 20};
  CHECK_OK(spy_provider_create(&p, &d));
  pthread_t t;
  atomic_store(&target_stop, 0);
  CHECK_EQ(pthread_create(&t, NULL, target_main, p), 0);
  long n = every_failure_point("consumer create/subscribe/poll/destroy",
                               consumer_subscribes, NULL);
  atomic_store(&target_stop, 1);
  pthread_join(t, NULL);
  spy_provider_destroy(p);
  CHECK(n > 0);
  tu_rm_rf(dir);
}

/* ---- trace sessions and readers ------------------------------------------ */

static const char src[] = "int main(void) { return 0; }\n";

static int emit_some(spy_trace *t) {
  int bad = 0;
  bad |= !ok_rc("build_begin", spy_trace_build_begin(t));
  spy_rec_module mods[] = {{"main.c", 0, {NULL, 0}, {NULL, 0}, 0}};
  bad |= !ok_rc("emit module_graph_ready",
                spy_emit_module_graph_ready(
                    t, &(spy_act_module_graph_ready){.modules = {mods, 1}}));
  for (int i = 0; i < 3; i++) {
    bad |=
        !ok_rc("emit load_call_end",
               spy_emit_hook_load_call_end(
                   t, &(spy_act_hook_load_call_end){
                          "main.c", {src, sizeof src - 1}, "p0", 0, "l1", 0}));
    bad |= !ok_rc("emit transform_call_end",
                  spy_emit_hook_transform_call_end(
                      t, &(spy_act_hook_transform_call_end){
                             "main.c", {NULL, 0}, "p1", 1, "t1", 0}));
  }
  /* payloads that differ a little: the store keeps them as deltas */
  static char body[2048];
  for (int v = 0; v < 12; v++) {
    for (size_t i = 0; i < sizeof body - 1; i++)
      body[i] = (char)('a' + (i * 7 + (i % 97 == 0 ? (size_t)v : 0)) % 26);
    bad |=
        !ok_rc("emit transform_call_start",
               spy_emit_hook_transform_call_start(
                   t, &(spy_act_hook_transform_call_start){
                          "big.c", {body, sizeof body - 1}, "p1", 1, "t2", 0}));
  }
  bad |= !ok_rc("build_end", spy_trace_build_end(t));
  return bad;
}

static void quiet(void *arg, int err, const char *msg) {
  (void)arg, (void)err, (void)msg; /* the writer's failures are expected */
}

static int trace_session(void *arg, int armed) {
  (void)armed;
  const char *writer = arg;
  char sdir[512];
  snprintf(sdir, sizeof sdir, "%s/s", dir);
  spy_trace *t = NULL;
  spy_trace_desc d = {
      .enabled = 1, .writer = writer, .dir = sdir, .on_error = quiet};
  int rc = spy_trace_create(&t, &d);
  if (!ok_rc("spy_trace_create", rc))
    return 1;
  if (rc < 0) {
    tu_rm_rf(sdir);
    return 0;
  }
  int bad = emit_some(t);
  bad |= !ok_rc("spy_trace_flush", spy_trace_flush(t));
  bad |= !ok_rc("spy_trace_destroy", spy_trace_destroy(t));
  tu_rm_rf(sdir);
  return bad;
}

TEST(trace_session_survives_every_allocation_failure_jsonl) {
  CHECK(tu_rundir(dir, sizeof dir));
  CHECK(every_failure_point("trace jsonl create/emit/close", trace_session,
                            "jsonl") > 0);
  tu_rm_rf(dir);
}

TEST(trace_session_survives_every_allocation_failure_sqlite) {
  CHECK(tu_rundir(dir, sizeof dir));
  CHECK(every_failure_point("trace sqlite create/emit/close", trace_session,
                            "sqlite") > 0);
  tu_rm_rf(dir);
}

static int read_store(void *arg, int armed) {
  (void)armed;
  const char *store = arg;
  spy_trace_reader *r = NULL;
  int rc = spy_trace_reader_open(store, NULL, &r);
  if (!ok_rc("spy_trace_reader_open", rc)) {
    fprintf(stderr, "  (%s)\n", r ? spy_trace_reader_error(r) : "");
    spy_trace_reader_close(r);
    return 1;
  }
  int bad = 0;
  if (rc == 0) {
    spy_trace_action a;
    int n = 0;
    while ((rc = spy_trace_reader_next(r, &a)) > 0)
      n++;
    bad |= !ok_rc("spy_trace_reader_next", rc);
    spy_trace_summary s;
    bad |= !ok_rc("spy_trace_reader_summary", spy_trace_reader_summary(r, &s));
    if (bad)
      fprintf(stderr, "  (%s)\n", spy_trace_reader_error(r));
  }
  spy_trace_reader_close(r);
  return bad;
}

static int make_store(const char *writer, char *store, size_t cap) {
  snprintf(store, cap, "%s/%s", dir, writer);
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = writer, .dir = store};
  int rc = spy_trace_create(&t, &d);
  if (rc < 0)
    return rc;
  int bad = emit_some(t);
  return spy_trace_destroy(t) == 0 && !bad ? 0 : -1;
}

TEST(trace_reader_survives_every_allocation_failure) {
  CHECK(tu_rundir(dir, sizeof dir));
  char jsonl[400], sqlite[400];
  CHECK_OK(make_store("jsonl", jsonl, sizeof jsonl));
  CHECK_OK(make_store("sqlite", sqlite, sizeof sqlite));
  CHECK(every_failure_point("reader jsonl", read_store, jsonl) > 0);
  CHECK(every_failure_point("reader sqlite", read_store, sqlite) > 0);
  tu_rm_rf(dir);
}

/* ---- a consumer moving to another provider ------------------------------- */

/* A provider named `tag` with that env "from", a thread of that name and
 * a zone a frame, until stop. */
typedef struct zone_target {
  spy_provider *p;
  const char *tag;
  _Atomic int stop;
  pthread_t th;
} zone_target;

static void *zone_target_main(void *arg) {
  zone_target *t = arg;
  static spy_zone_loc loc = {"oom-zone", "zone_target_main", "test_oom.c", 1, 0,
                             0};
  spy_thread_name(t->p, t->tag);
  while (!atomic_load(&t->stop)) {
    spy_frame_begin(t->p);
    spy_zone_begin(t->p, &loc);
    spy_counter_set(t->p, SPY_COUNTER_DRAWS, 3);
    spy_zone_end(t->p);
    spy_frame_end(t->p);
    usleep(2000);
  }
  return NULL;
}

static int zone_target_start(zone_target *t, const char *tag) {
  memset(t, 0, sizeof *t);
  t->tag = tag;
  spy_provider_desc d = {.name = tag, .dir = dir, .flush_ms = 20};
  if (spy_provider_create(&t->p, &d) < 0)
    return -1;
  spy_env_set(t->p, "from", tag);
  if (pthread_create(&t->th, NULL, zone_target_main, t) != 0) {
    spy_provider_destroy(t->p);
    return -1;
  }
  return 0;
}

static void zone_target_stop(zone_target *t) {
  atomic_store(&t->stop, 1);
  pthread_join(t->th, NULL);
  spy_provider_destroy(t->p);
}

/* The state shows `tag`'s env, zone thread and samples. */
static int shows(const spy_state *s, const char *tag) {
  const spy_state_entry *e = spy_state_find(&s->env, "from");
  int thread = 0;
  for (uint32_t i = 0; i < s->zones.n_threads; i++)
    thread |= strcmp(s->zones.threads[i].name, tag) == 0;
  return s->conn == SPY_CONN_CONNECTED && strcmp(s->provider_name, tag) == 0 &&
         e && e->text && strcmp(e->text, tag) == 0 && thread && s->len > 0;
}

static int poll_until_shows(spy_consumer *c, const char *tag) {
  double end = tu_now_s() + 20;
  while (tu_now_s() < end && !shows(spy_consumer_state(c), tag))
    if (spy_consumer_poll(c, 20) < 0)
      return 0;
  return shows(spy_consumer_state(c), tag);
}

TEST(consumer_moving_to_another_provider_survives_no_memory_for_its_state) {
  /* The fresh state of the second provider cannot be allocated (its stats
   * rings: a size nothing else asks for): the consumer must go on with an
   * empty state, not with the first provider's freed tables and zones. */
  CHECK(tu_rundir(dir, sizeof dir));
  const uint32_t history = 997;
  zone_target a, b;
  CHECK_OK(zone_target_start(&a, "oom-first"));
  spy_consumer *c;
  spy_consumer_desc d = {.dir = dir,
                         .history = history,
                         .features =
                             SPY_FEAT_STATS | SPY_FEAT_ENV | SPY_FEAT_ZONES,
                         .query_initial_ms = 20,
                         .liveness_ms = 500};
  CHECK_OK(spy_consumer_create(&c, &d));
  CHECK(poll_until_shows(c, "oom-first"));
  atomic_store(&fail_size,
               (size_t)(3 + SPY_STATS_MAX_COUNTERS) * history * sizeof(float));
  atomic_store(&fired, 0);
  zone_target_stop(&a);
  CHECK_OK(zone_target_start(&b, "oom-second"));
  int moved = poll_until_shows(c, "oom-second");
  atomic_store(&fail_size, 0);
  CHECK(atomic_load(&fired)); /* the reset did run out of memory */
  CHECK(moved);
  const spy_state *s = spy_consumer_state(c);
  for (uint32_t i = 0; i < s->zones.n_threads; i++)
    CHECK(strcmp(s->zones.threads[i].name, "oom-first") != 0);
  CHECK(s->history == history);
  CHECK(!isnan(spy_state_sample(s, SPY_FIELD_FPS, 0)));
  spy_consumer_destroy(c);
  zone_target_stop(&b);
  tu_rm_rf(dir);
}

TEST_MAIN(
    TEST_CASE(provider_create_and_flush_survive_every_allocation_failure),
    TEST_CASE(consumer_create_and_subscribe_survive_every_allocation_failure),
    TEST_CASE(trace_session_survives_every_allocation_failure_jsonl),
    TEST_CASE(trace_session_survives_every_allocation_failure_sqlite),
    TEST_CASE(trace_reader_survives_every_allocation_failure),
    TEST_CASE(
        consumer_moving_to_another_provider_survives_no_memory_for_its_state))
