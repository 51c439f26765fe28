/* test_drawlist.c — the batch list and the render-pass tree: the wire
 * sections round-trip and refuse malformed input, a provider's lists reach
 * a consumer, are sent only when they changed, and cost nothing without a
 * subscriber for them. */
#include <unistd.h>

#include "spyglass/consumer.h"
#include "spyglass/drawlist.h"
#include "spyglass/provider.h"
#include "testlib.h"
#include "testutil.h"

static char dir[256];

TEST(batches_and_passes_round_trip) {
  uint8_t buf[1024];
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 0, 0, 0);
  spy_batch_info b[2] = {
      {.kind = "mesh", .key = "rock", .instances = 5, .draws = 2},
      {.kind = "sprite", .key = "ui", .instances = 9, .draws = 1}};
  spy_put_batches(&w, 7, b, 2);
  spy_pass_info ps[3] = {
      {.label = "frame", .parent = SPY_PASS_ROOT, .draws = 3},
      {.label = "shadow", .parent = 0, .draws = 1, .triangles = 100},
      {.label = "main", .parent = 0, .draws = 2, .cpu_us = 1500}};
  spy_put_passes(&w, 3, ps, 3);
  int n = spy_frame_finish(&w);
  CHECK(n > 0);
  spy_frame f;
  CHECK_EQ(spy_frame_decode(buf, (size_t)n, &f, NULL), 0);
  spy_section s;
  spy_list_iter it;
  CHECK(spy_frame_find_section(&f, SPY_SEC_BATCHES, &s));
  CHECK_EQ(spy_get_batches(&s, &it), 2);
  CHECK_EQ(it.version, 7);
  spy_batch_info x;
  CHECK(spy_batches_next(&it, &x));
  CHECK(spy_batches_next(&it, &x));
  CHECK_EQ(x.kind_len, 6);
  CHECK(memcmp(x.key, "ui", 2) == 0);
  CHECK_EQ(x.instances, 9);
  CHECK(!spy_batches_next(&it, &x));
  CHECK(spy_frame_find_section(&f, SPY_SEC_PASSES, &s));
  CHECK_EQ(spy_get_passes(&s, &it), 3);
  spy_pass_info y;
  CHECK(spy_passes_next(&it, &y));
  CHECK_EQ(y.parent, SPY_PASS_ROOT);
  CHECK(spy_passes_next(&it, &y));
  CHECK(spy_passes_next(&it, &y));
  CHECK_EQ(y.parent, 0);
  CHECK_EQ(y.cpu_us, 1500);
  /* consumer state */
  spy_state st;
  CHECK_EQ(spy_state_init(&st, 8), 0);
  CHECK_EQ(spy_state_apply(&st, &f, 0), 0);
  CHECK_EQ(st.n_batches, 2);
  CHECK_STR(st.batches[0].kind, "mesh");
  CHECK_EQ(st.n_passes, 3);
  CHECK_STR(st.passes[2].label, "main");
  spy_state_free(&st);
}

TEST(passes_decoder_refuses_a_child_before_its_parent) {
  uint8_t sec[8 + 16 + 4] = {0};
  spy_wr32(sec + 4, 1);  /* one pass */
  spy_wr16(sec + 8, 0);  /* parent 0: itself */
  spy_wr16(sec + 10, 1); /* label of 1 byte */
  sec[24] = 'x';
  spy_section s = {.id = SPY_SEC_PASSES, .len = sizeof sec, .data = sec};
  spy_list_iter it;
  CHECK_EQ(spy_get_passes(&s, &it), SPY_EBADVALUE);
  spy_wr16(sec + 8, SPY_PASS_ROOT);
  CHECK_EQ(spy_get_passes(&s, &it), 1);
  s.len = sizeof sec - 4; /* truncated label */
  CHECK_EQ(spy_get_passes(&s, &it), SPY_EBADSECTION);
  spy_wr32(sec + 4, 100000);
  s.len = sizeof sec;
  CHECK_EQ(spy_get_passes(&s, &it), SPY_EBADVALUE);
  uint8_t bsec[8 + 12] = {0};
  spy_wr32(bsec + 4, 1);
  spy_wr16(bsec + 8, 300); /* kind over 255 bytes */
  spy_section bs = {.id = SPY_SEC_BATCHES, .len = sizeof bsec, .data = bsec};
  CHECK_EQ(spy_get_batches(&bs, &it), SPY_EBADVALUE);
}

static void frame(spy_provider *p, spy_consumer *c, uint32_t objects) {
  spy_frame_begin(p);
  spy_pass_begin(p, "frame");
  spy_pass_begin(p, "shadow");
  spy_batch_add(p, "mesh", "rock.mat", objects, 2);
  spy_pass_end(p, 2, 300);
  spy_pass_begin(p, "main");
  spy_batch_add(p, "sprite", "ui", 4, 1);
  spy_pass_end(p, 1, 8);
  spy_pass_end(p, 3, 308);
  spy_frame_end(p);
  spy_consumer_poll(c, 2);
}

TEST(lists_reach_the_consumer_and_are_sent_only_when_changed) {
  tu_rundir(dir, sizeof dir);
  spy_provider *p;
  spy_provider_desc d = {.name = "draws", .dir = dir, .flush_ms = 10};
  CHECK_EQ(spy_provider_create(&p, &d), 0);
  spy_consumer *c;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .features = SPY_FEAT_STATS | SPY_FEAT_BATCHES};
  CHECK_EQ(spy_consumer_create(&c, &cd), 0);
  const spy_state *s = spy_consumer_state(c);
  double end = tu_now_s() + 20;
  while (tu_now_s() < end && !s->n_batches)
    frame(p, c, 10);
  CHECK_EQ(s->n_batches, 2);
  CHECK_STR(s->batches[0].key, "rock.mat");
  CHECK_EQ(s->batches[0].instances, 10);
  CHECK_EQ(s->n_passes, 0); /* not subscribed */
  uint32_t v = s->batches_version;
  uint64_t lists = s->batch_lists, frames = s->frames_received;
  /* the same list for many flushes: not sent again */
  end = tu_now_s() + 20;
  while (tu_now_s() < end && s->frames_received < frames + 10)
    frame(p, c, 10);
  CHECK(s->frames_received >= frames + 10); /* flushes did arrive */
  CHECK_EQ(s->batch_lists, lists);
  CHECK_EQ(s->batches_version, v);
  /* changed: sent, with a new version */
  end = tu_now_s() + 20;
  while (tu_now_s() < end && s->batches[0].instances != 11)
    frame(p, c, 11);
  CHECK_EQ(s->batches[0].instances, 11);
  CHECK(s->batches_version > v);
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
  tu_rm_rf(dir);
}

TEST(the_pass_tree_keeps_its_nesting) {
  tu_rundir(dir, sizeof dir);
  spy_provider *p;
  spy_provider_desc d = {.name = "passes", .dir = dir, .flush_ms = 10};
  CHECK_EQ(spy_provider_create(&p, &d), 0);
  spy_consumer *c;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .features = SPY_FEAT_PASSES};
  CHECK_EQ(spy_consumer_create(&c, &cd), 0);
  const spy_state *s = spy_consumer_state(c);
  double end = tu_now_s() + 20;
  while (tu_now_s() < end && s->n_passes < 3)
    frame(p, c, 10);
  CHECK_EQ(s->n_passes, 3);
  CHECK_STR(s->passes[0].label, "frame");
  CHECK_EQ(s->passes[0].parent, SPY_PASS_ROOT);
  CHECK_STR(s->passes[1].label, "shadow");
  CHECK_EQ(s->passes[1].parent, 0);
  CHECK_EQ(s->passes[1].triangles, 300);
  CHECK_EQ(s->passes[2].parent, 0);
  CHECK_EQ(s->passes[0].draws, 3);
  CHECK(s->passes[0].cpu_ms >= s->passes[1].cpu_ms);
  CHECK_EQ(s->n_batches, 0); /* not subscribed */
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
  tu_rm_rf(dir);
}

TEST_MAIN(TEST_CASE(batches_and_passes_round_trip),
          TEST_CASE(passes_decoder_refuses_a_child_before_its_parent),
          TEST_CASE(lists_reach_the_consumer_and_are_sent_only_when_changed),
          TEST_CASE(the_pass_tree_keeps_its_nesting))
