/* test_trace_feed.c — live build progress on the bus (TRACE): the BUILD
 * section's codec and its bounds; a published trace session whose provider
 * nobody watches collects nothing; two threads emitting hook calls into
 * one published session while a consumer subscribes to TRACE: the
 * consumer's build state ends with every call, per plugin, and the build
 * marked ended (run under ThreadSanitizer: label concurrent). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spyglass/consumer.h"
#include "spyglass/provider.h"
#include "spyglass/trace.h"
#include "spyglass/trace_feed.h"
#include "spyglass/wire.h"
#include "testutil.h"

static char dir[256], tdir[300];

static void fresh_dir(void) {
  if (dir[0])
    tu_rm_rf(dir);
  tu_rundir(dir, sizeof dir);
  snprintf(tdir, sizeof tdir, "%s/trace", dir);
}

/* ---- the codec ----------------------------------------------------------- */

static spy_build_progress sample;

static void fill_sample(void) {
  memset(&sample, 0, sizeof sample);
  sample.build = 2;
  sample.started_us = 123;
  sample.modules_done = 5;
  sample.hook_calls = 12;
  sample.hook_us = 3400;
  sample.n_plugins = 2;
  strcpy(sample.plugins[0].name, "a");
  sample.plugins[0].calls[0] = 7;
  sample.plugins[0].total_us[0] = 3000;
  sample.plugins[0].p50_us = 400;
  strcpy(sample.plugins[1].name, "plugin-b");
  sample.plugins[1].calls[1] = 5;
  sample.n_slow = 1;
  sample.slow[0] = (spy_build_slow){.hook = 0, .plugin = 0, .dur_us = 900};
  strcpy(sample.slow[0].module, "src/x.c");
}

static int encode(uint8_t *buf, size_t cap, spy_section *s, spy_frame *f) {
  spy_frame_writer w;
  spy_frame_start(&w, buf, cap, SPY_MSG_DATA, 1, 0, 0);
  spy_put_build(&w, &sample);
  int n = spy_frame_finish(&w);
  if (n <= 0 || spy_frame_decode(buf, (size_t)n, f, NULL) < 0 ||
      !spy_frame_find_section(f, SPY_SEC_BUILD, s))
    return -1;
  return n;
}

TEST(build_section_round_trips) {
  static uint8_t buf[4096];
  static spy_build_progress got;
  spy_section s;
  spy_frame f;
  fill_sample();
  CHECK(encode(buf, sizeof buf, &s, &f) > 0);
  CHECK_EQ(spy_get_build(&s, &got), 0);
  CHECK_EQ(got.build, 2u);
  CHECK_EQ(got.hook_calls, 12u);
  CHECK_EQ(got.n_plugins, 2u);
  CHECK_STR(got.plugins[1].name, "plugin-b");
  CHECK_EQ(got.plugins[0].p50_us, 400u);
  CHECK_EQ(got.plugins[0].total_us[0], 3000u);
  CHECK_EQ(got.slow[0].dur_us, 900u);
  CHECK_STR(got.slow[0].module, "src/x.c");
  /* one byte short, one byte more: lengths; a bad index: a value */
  spy_section cut = s;
  cut.len--;
  CHECK_EQ(spy_get_build(&cut, &got), SPY_EBADSECTION);
  cut.len = 63;
  CHECK_EQ(spy_get_build(&cut, &got), SPY_EBADSECTION);
  static uint8_t big[4096];
  memcpy(big, s.data, s.len);
  spy_section more = {.id = s.id, .len = s.len + 1, .data = big};
  CHECK_EQ(spy_get_build(&more, &got), SPY_EBADSECTION);
  big[56] = 33; /* n_plugins beyond 32 */
  CHECK_EQ(spy_get_build(&more, &got), SPY_EBADVALUE);
  /* the encoder refuses what the decoder would */
  sample.slow[0].plugin = 5;
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 1, 0, 0);
  spy_put_build(&w, &sample);
  CHECK_EQ(spy_frame_finish(&w), SPY_EINVAL);
}

/* ---- a published session ------------------------------------------------ */

static spy_trace *session(void) {
  spy_trace_desc d = {
      .enabled = 1, .dir = tdir, .writer = "jsonl", .session_id = "feedtest"};
  spy_trace *t = NULL;
  int rc = spy_trace_create(&t, &d);
  if (rc < 0)
    fprintf(stderr, "spy_trace_create: %s\n", spy_strerror(rc));
  return rc < 0 ? NULL : t;
}

static spy_provider *provider(void) {
  spy_provider_desc d = {
      .name = "feed", .dir = dir, .idle_ping_ms = 100, .ack_grace_ms = 2000};
  spy_provider *p = NULL;
  int rc = spy_provider_create(&p, &d);
  if (rc < 0)
    fprintf(stderr, "spy_provider_create: %s\n", spy_strerror(rc));
  return rc < 0 ? NULL : p;
}

typedef struct worker {
  spy_trace *t;
  int id, n;
} worker;

static void *emit_calls(void *arg) {
  worker *w = arg;
  char plugin[16], cid[32];
  snprintf(plugin, sizeof plugin, "p%d", w->id);
  for (int i = 0; i < w->n; i++) {
    snprintf(cid, sizeof cid, "t%d-%d", w->id, i);
    spy_emit_hook_transform_call_start(
        w->t, &(spy_act_hook_transform_call_start){.module_id = "m.c",
                                                   .content = {"x", 1},
                                                   .plugin_name = plugin,
                                                   .plugin_id = w->id,
                                                   .call_id = cid});
    spy_emit_hook_transform_call_end(
        w->t, &(spy_act_hook_transform_call_end){.module_id = "m.c",
                                                 .plugin_name = plugin,
                                                 .plugin_id = w->id,
                                                 .call_id = cid});
  }
  return NULL;
}

static void run_build(spy_trace *t, int per_thread) {
  CHECK(spy_trace_build_begin(t) > 0);
  pthread_t th[2];
  worker w[2] = {{t, 0, per_thread}, {t, 1, per_thread}};
  for (int i = 0; i < 2; i++)
    CHECK_EQ(pthread_create(&th[i], NULL, emit_calls, &w[i]), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  CHECK_OK(spy_trace_build_end(t));
}

TEST(unwatched_build_collects_nothing) {
  fresh_dir();
  spy_provider *p = provider();
  spy_trace *t = session();
  CHECK(p && t);
  CHECK_OK(spy_trace_publish(t, p));
  run_build(t, 200);
  spy_trace_feed_stats fs;
  spy_trace_feed_get_stats(p, &fs);
  CHECK_EQ(fs.taken, 0u);
  CHECK_EQ(fs.sent, 0u);
  CHECK_OK(spy_trace_publish(t, NULL));
  CHECK(spy_trace_destroy(t) == 0);
  spy_provider_destroy(p);
}

TEST(two_threads_feed_a_subscriber) {
  fresh_dir();
  spy_provider *p = provider();
  spy_trace *t = session();
  CHECK(p && t);
  CHECK_OK(spy_trace_publish(t, p));
  spy_consumer_desc cd = {.dir = dir,
                          .features = SPY_FEAT_TRACE,
                          .query_initial_ms = 30,
                          .query_max_ms = 120,
                          .ack_ms = 100,
                          .liveness_ms = 3000,
                          .no_clock_sync = 1};
  spy_consumer *c = NULL;
  CHECK_OK(spy_consumer_create(&c, &cd));
  double end = tu_now_s() + 20;
  while (!spy_trace_feed_wanted(p) && tu_now_s() < end)
    spy_consumer_poll(c, 20);
  CHECK(spy_trace_feed_wanted(p));
  run_build(t, 2000);
  const spy_state *st = spy_consumer_state(c);
  end = tu_now_s() + 20;
  while (!(st->builds.cur.flags & SPY_BUILD_ENDED) && tu_now_s() < end)
    spy_consumer_poll(c, 20);
  const spy_build_progress *b = &st->builds.cur;
  CHECK(b->flags & SPY_BUILD_ENDED);
  CHECK_EQ(b->build, 1u);
  CHECK_EQ(b->hook_calls, 4000u);
  CHECK_EQ(b->n_plugins, 2u);
  for (uint32_t i = 0; i < b->n_plugins; i++)
    CHECK_EQ(b->plugins[i].calls[SPY_HOOK_TRANSFORM], 2000u);
  CHECK(b->n_slow > 0);
  CHECK_EQ(st->builds.n_done, 1u);
  spy_trace_feed_stats fs;
  spy_trace_feed_get_stats(p, &fs);
  CHECK_EQ(fs.taken, 8002u); /* start, 2 × 2000 × 2, end */
  CHECK_EQ(fs.unmatched, 0u);
  spy_consumer_destroy(c);
  CHECK_OK(spy_trace_publish(t, NULL));
  CHECK(spy_trace_destroy(t) == 0);
  spy_provider_destroy(p);
  tu_rm_rf(dir);
}

TEST_MAIN(TEST_CASE(build_section_round_trips),
          TEST_CASE(unwatched_build_collects_nothing),
          TEST_CASE(two_threads_feed_a_subscriber))
