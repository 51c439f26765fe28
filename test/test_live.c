/* test_live.c — the provider's live message profile and clock sync with
 * consumers, between real provider and consumer processes over the real
 * bus: per-type rows that grow, the profiler hook cleared (ops never
 * touched) when nobody wants the profile, an injected provider clock offset
 * recovered by a consumer in another process, a provider killed mid-sync
 * (a timeout; the consumer goes on), a consumer killed mid-sync, and no
 * segment file left behind in any of these; a consumer the provider
 * dropped while another kept the channel busy subscribes again. */
#include <fcntl.h>
#include <stdlib.h>

#include "sniffer.h"
#include "spyglass/clock.h"
#include "spyglass/consumer.h"
#include "spyglass/provider.h"
#include "testlib.h"
#include "testutil.h"

#define INJECTED_NS 1234567000ll /* +1234.567 ms */
/* A sync's offset error is at most half its RTT (see test_clock.c). */
#define SLACK_NS 1000ll

static char dir[256];
static sniffer sn;

static void fresh_dir(void) {
  if (dir[0])
    tu_rm_rf(dir);
  tu_rundir(dir, sizeof dir);
}

/* Clock segment files in the runtime directory. */
static int clock_files(void) {
  DIR *d = opendir(dir);
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    n += l > 6 && strstr(e->d_name, ".clock") != NULL;
  }
  closedir(d);
  return n;
}

/* Reads p's stats into st until cond holds or 5 s pass. */
#define WAIT_STATS(p, st, cond)                                                \
  do {                                                                         \
    double end_ = tu_now_s() + 5;                                              \
    do {                                                                       \
      usleep(1000);                                                            \
      spy_provider_get_stats((p), &(st));                                      \
    } while (!(cond) && tu_now_s() < end_);                                    \
  } while (0)

static spy_provider_desc pdesc(spy_transport_kind kind) {
  spy_provider_desc d = {.name = "live",
                         .dir = dir,
                         .transport = kind,
                         .flush_ms = 20,
                         .idle_ping_ms = 100,
                         .ack_grace_ms = 400,
                         .checkpoint_ms = 500};
  return d;
}

static spy_consumer_desc cdesc(uint32_t features, int no_clock) {
  spy_consumer_desc d = {.dir = dir,
                         .features = features,
                         .query_initial_ms = 30,
                         .query_max_ms = 120,
                         .ack_ms = 60,
                         .liveness_ms = 300,
                         .no_clock_sync = no_clock};
  return d;
}

/* A provider process: a frame every 2 ms until killed. Whenever its
 * profiler is attached or detached it writes to `report`: 'W' attached
 * (the transport timed, its ops table the one of create), 'U' detached
 * (not timed, the same ops table); lower case if not so. */
static void provider_main(spy_provider_desc d, int report) {
  spy_provider *p;
  if (spy_provider_create(&p, &d) < 0)
    _exit(3);
  spy_transport *t = spy_provider_transport(p);
  const spy_transport_ops *orig = t->ops;
  /* 'R': the test starts its consumer only now. */
  if (report >= 0 && write(report, "R", 1) != 1)
    _exit(5);
  uint32_t attached = 0;
  for (uint64_t f = 0;; f++) {
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, (uint32_t)f);
    usleep(2000);
    spy_frame_end(p);
    spy_provider_stats st;
    spy_provider_get_stats(p, &st);
    if (report >= 0 && st.msgprof_attached != attached) {
      int same = t->ops == orig;
      char c = st.msgprof_attached
                   ? (same && spy_transport_timed(t) ? 'W' : 'w')
                   : (same && !spy_transport_timed(t) ? 'U' : 'u');
      if (write(report, &c, 1) != 1)
        _exit(5);
      attached = st.msgprof_attached;
    }
  }
}

static pid_t spawn_provider(spy_provider_desc d, int *report_r) {
  int fds[2] = {-1, -1};
  if (report_r && pipe(fds) == 0) {
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    *report_r = fds[0];
  }
  pid_t pid = tu_fork();
  if (pid == 0) {
    if (fds[0] >= 0)
      close(fds[0]);
    provider_main(d, fds[1]);
  }
  if (fds[1] >= 0)
    close(fds[1]);
  return pid;
}

static char read_report(int fd, double seconds) {
  double end = tu_now_s() + seconds;
  char c;
  while (tu_now_s() < end) {
    if (read(fd, &c, 1) == 1)
      return c;
    usleep(5000);
  }
  return 0;
}

static void msgprof_rows_grow_and_unsubscribe_detaches(spy_transport_kind k) {
  fresh_dir();
  int report = -1;
  pid_t pid = spawn_provider(pdesc(k), &report);
  CHECK(report >= 0);
  CHECK_EQ(read_report(report, 10), 'R');
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_STATS | SPY_FEAT_MSGPROF, 1);
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  const spy_state_msgprof_row *r = NULL;
  CHECK(POLL_UNTIL(
      c, 10, (r = spy_state_msgprof_type(s, SPY_MSG_DATA)) && r->count >= 10));
  CHECK_EQ(read_report(report, 5), 'W');
  uint64_t count1 = r->count, bytes1 = r->bytes;
  /* Plausible: each data frame holds a header, FRAME, a stats batch of a
   * few samples and the MSGPROF section itself. */
  CHECK(bytes1 >= count1 * 100 && bytes1 <= count1 * 64 * 1024);
  CHECK(r->encode.mean_ns > 0 && r->encode.p50_ns > 0); /* flush timed */
  CHECK(r->encode.max_ns >= r->encode.p99_ns &&
        r->encode.p99_ns >= r->encode.p50_ns);
  CHECK(r->post.mean_ns > 0 && r->post.max_ns >= r->post.p50_ns);
  CHECK(r->errors == 0);
  CHECK(s->msgprof.messages >= count1 && s->msgprof.elapsed_ns > 0);
  /* Rates over the provider's clock: one data frame per 20 ms flush. */
  CHECK(POLL_UNTIL(c, 5, s->msgprof.rate_rolled));
  r = spy_state_msgprof_type(s, SPY_MSG_DATA);
  CHECK(r && r->bytes > bytes1 && r->count > count1); /* they grow */
  fprintf(stderr,
          "  %s: %llu data frames, %.0f B/s, %.1f/s, encode p50 "
          "%llu ns, post p50 %llu ns\n",
          k == SPY_TRANSPORT_INLINE ? "inline" : "offload",
          (unsigned long long)r->count, r->bytes_per_s, r->msgs_per_s,
          (unsigned long long)r->encode.p50_ns,
          (unsigned long long)r->post.p50_ns);
  CHECK(r->msgs_per_s > 5 && r->msgs_per_s < 100);
  CHECK(r->bytes_per_s > r->msgs_per_s * 100);
  /* Nobody wants the profile any more: detached, ops as they always were. */
  spy_consumer_destroy(c);
  CHECK_EQ(read_report(report, 5), 'U');
  /* Profiling again starts a new session. */
  CHECK_OK(spy_consumer_create(&c, &cd));
  s = spy_consumer_state(c);
  CHECK(POLL_UNTIL(
      c, 10, (r = spy_state_msgprof_type(s, SPY_MSG_DATA)) && r->count >= 2));
  CHECK_EQ(read_report(report, 5), 'W');
  CHECK(r->count < count1 + 100);
  spy_consumer_destroy(c);
  CHECK_EQ(read_report(report, 5), 'U');
  kill(pid, SIGKILL);
  tu_wait(pid, 5);
  close(report);
}

TEST(msgprof_offload_rows_grow_and_unsubscribe_detaches_the_profiler) {
  msgprof_rows_grow_and_unsubscribe_detaches(SPY_TRANSPORT_OFFLOAD);
}

TEST(msgprof_inline_rows_grow_and_unsubscribe_detaches_the_profiler) {
  msgprof_rows_grow_and_unsubscribe_detaches(SPY_TRANSPORT_INLINE);
}

TEST(msgprof_section_in_data_frames_only_while_wanted) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(SPY_TRANSPORT_OFFLOAD);
  d.flush_ms = 100000;
  d.ack_grace_ms = 100000;
  d.idle_ping_ms = 100000;
  CHECK_OK(spy_provider_create(&p, &d));
  spy_transport *t = spy_provider_transport(p);
  const spy_transport_ops *orig = t->ops;
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p),
                      SPY_FEAT_STATS | SPY_FEAT_MSGPROF));
  spy_provider_stats st;
  WAIT_STATS(p, st, st.msgprof_attached);
  CHECK(st.msgprof_attached);
  CHECK(t->ops == orig && spy_transport_timed(t));
  spy_section sec;
  spy_msgprof_summary sum;
  /* Flush until a summary (made by the service a few times per flush
   * period, or every 50 ms at most) shows the data frames already sent. */
  int data = -1, flushes = 0;
  double end = tu_now_s() + 10;
  do {
    spy_frame_begin(p);
    spy_frame_end(p);
    CHECK_OK(spy_provider_flush(p));
    flushes++;
    CHECK(sniff_data(&sn, 5));
    CHECK(spy_frame_find_section(&sn.f, SPY_SEC_MSGPROF, &sec));
    CHECK_OK(spy_get_msgprof(&sec, &sum));
    data = -1;
    for (uint32_t i = 0; i < sum.n_types; i++)
      if (sum.types[i].type == SPY_MSG_DATA)
        data = (int)i;
    usleep(5000);
  } while ((data < 0 || sum.types[data].count < 2) && tu_now_s() < end);
  CHECK(data >= 0);
  CHECK(sum.types[data].count >= 2);
  CHECK(sum.types[data].count < (uint64_t)flushes); /* not this one */
  CHECK(sum.types[data].encode.max_ns > 0);
  /* Still subscribed, but without MSGPROF: detached, no section. */
  sn.features = SPY_FEAT_STATS;
  sniff_post(&sn, SPY_MSG_SUBSCRIBE, NULL, 0, 0);
  WAIT_STATS(p, st, !st.msgprof_attached);
  CHECK(!st.msgprof_attached);
  CHECK(t->ops == orig && !spy_transport_timed(t));
  spy_frame_begin(p);
  spy_frame_end(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  CHECK(!spy_frame_find_section(&sn.f, SPY_SEC_MSGPROF, &sec));
  sniff_close(&sn);
  spy_provider_destroy(p);
}

TEST(clock_sync_with_a_provider_process_recovers_its_injected_offset) {
  fresh_dir();
  spy_provider_desc d = pdesc(SPY_TRANSPORT_OFFLOAD);
  d.clock_test_offset_ns = INJECTED_NS;
  pid_t pid = spawn_provider(d, NULL);
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_STATS, 0);
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  /* Automatic on connect. */
  CHECK(POLL_UNTIL(c, 10, s->clock_synced));
  CHECK_EQ(s->clock_syncs, 1);
  CHECK_EQ(s->clock_rounds, SPY_CLOCK_DEFAULT_ROUNDS);
  CHECK(s->clock_rtt_ns > 0);
  enum { SYNCS = 9 };
  int64_t worst = 0, worst_rtt = 0;
  int bad = 0;
  for (int i = 0; i < SYNCS; i++) {
    CHECK_OK(spy_consumer_clock_sync(c));
    /* provider − ours; the bound is this sync's own round trip. */
    int64_t err = s->clock_offset_ns - INJECTED_NS, rtt = s->clock_rtt_ns;
    bad += llabs(err) > rtt / 2 + SLACK_NS;
    if (llabs(err) >= worst)
      worst = llabs(err), worst_rtt = rtt;
  }
  CHECK_EQ(s->clock_syncs, 1 + SYNCS);
  CHECK_EQ(s->clock_failures, 0);
  fprintf(stderr, "  worst offset error %lld ns with rtt %lld ns (%d syncs)\n",
          (long long)worst, (long long)worst_rtt, SYNCS);
  CHECK_EQ(bad, 0);
  CHECK(s->conn == SPY_CONN_CONNECTED);
  CHECK_EQ(clock_files(), 0);
  spy_consumer_destroy(c);
  kill(pid, SIGKILL);
  tu_wait(pid, 5);
  CHECK_EQ(clock_files(), 0);
}

/* The provider's clock kills its process on the third reading: mid-sync. */
static int64_t dying_clock(void *ctx) {
  int *n = ctx;
  if (++*n == 3)
    raise(SIGKILL);
  return spy_clock_now_ns();
}

TEST(provider_killed_mid_sync_times_out_and_the_consumer_goes_on) {
  fresh_dir();
  static int readings;
  spy_provider_desc d = pdesc(SPY_TRANSPORT_OFFLOAD);
  d.clock_now = dying_clock;
  d.clock_now_ctx = &readings;
  pid_t pid = spawn_provider(d, NULL);
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_STATS, 1);
  cd.clock_timeout_ms = 300;
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  CHECK(POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED && s->samples > 5));
  CHECK(!s->clock_synced); /* no_clock_sync: nothing on connect */
  double t0 = tu_now_s();
  CHECK_EQ(spy_consumer_clock_sync(c), SPY_ETIMEDOUT);
  CHECK(tu_now_s() - t0 < 3);
  CHECK_EQ(tu_wait(pid, 5), 128 + SIGKILL); /* it did die mid-sync */
  CHECK(!s->clock_synced);
  CHECK_EQ(s->clock_failures, 1);
  CHECK_EQ(s->clock_error, SPY_ETIMEDOUT);
  CHECK_EQ(clock_files(), 0);
  /* Still usable: a new provider is found, and syncs. */
  pid_t p2 = spawn_provider(pdesc(SPY_TRANSPORT_OFFLOAD), NULL);
  CHECK(POLL_UNTIL(c, 10,
                   s->conn == SPY_CONN_CONNECTED && s->samples > 5 &&
                       s->reconnects >= 1));
  CHECK_OK(spy_consumer_clock_sync(c));
  CHECK(s->clock_synced);
  /* Same host, same clock: 0, give or take half the sync's RTT. */
  CHECK(llabs(s->clock_offset_ns) <= s->clock_rtt_ns / 2 + SLACK_NS);
  /* A provider that does not answer at all (gone): a timeout too. */
  kill(p2, SIGKILL);
  tu_wait(p2, 5);
  int rc = spy_consumer_clock_sync(c);
  CHECK(rc == SPY_ETIMEDOUT || rc == SPY_EGONE);
  CHECK_EQ(clock_files(), 0);
  spy_consumer_destroy(c);
}

/* A hand-driven consumer's clock request: creates its segment (into
 * *seg) and posts the request on its data channel. */
static int request_sync(uint64_t provider, spy_clock_seg **seg) {
  char name[SPY_CLOCK_NAME_MAX + 1];
  spy_clock_segment_name(provider, sn.id, name, sizeof name);
  int rc = spy_clock_create(seg, name, dir);
  if (rc < 0)
    return rc;
  uint8_t b[256];
  spy_frame_writer w;
  spy_frame_start(&w, b, sizeof b, SPY_MSG_CLOCK, 0, 0, 0);
  spy_clock_msg m = {.op = SPY_CLOCK_OP_REQUEST,
                     .rounds = 5,
                     .provider = provider,
                     .consumer = sn.id};
  spy_put_clock(&w, &m);
  int n = spy_frame_finish(&w);
  return n < 0 ? n : spy_channel_post(sn.ch, b, (size_t)n);
}

TEST(consumer_killed_mid_sync_leaves_no_segment_file) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(SPY_TRANSPORT_OFFLOAD);
  d.flush_ms = 100000;
  d.ack_grace_ms = 300;
  CHECK_OK(spy_provider_create(&p, &d));
  uint64_t id = spy_provider_id(p);
  pid_t pid = tu_fork();
  if (pid == 0) {
    /* A consumer by hand: subscribes, creates its segment, asks, and dies
     * once the provider serves, without removing anything. */
    if (sniff_open(&sn, dir, id, SPY_FEAT_STATS) < 0)
      _exit(3);
    spy_clock_seg *seg;
    if (request_sync(id, &seg) < 0)
      _exit(4);
    double end = tu_now_s() + 5;
    while (tu_now_s() < end) {
      int got = spy_channel_recv(sn.ch, sn.buf, sizeof sn.buf, 20, NULL);
      spy_section s;
      spy_clock_msg r;
      if (got > 0 && spy_frame_decode(sn.buf, (size_t)got, &sn.f, NULL) == 0 &&
          sn.f.type == SPY_MSG_CLOCK &&
          spy_frame_find_section(&sn.f, SPY_SEC_CLOCK, &s) &&
          spy_get_clock(&s, &r) == 0 && r.op == SPY_CLOCK_OP_READY)
        raise(SIGKILL); /* the segment file stays behind */
    }
    _exit(6);
  }
  CHECK_EQ(tu_wait(pid, 10), 128 + SIGKILL);
  CHECK_EQ(clock_files(), 1); /* left by the dead consumer ... */
  double end = tu_now_s() + 5;
  while (clock_files() > 0 && tu_now_s() < end)
    usleep(10000);
  CHECK_EQ(clock_files(), 0); /* ... removed once it is dropped */
  spy_provider_stats st;
  WAIT_STATS(p, st, st.clock_failures);
  CHECK_EQ(st.clock_failures, 1); /* the served sync timed out */
  CHECK_EQ(st.clock_syncs, 0);
  CHECK_EQ(st.subscribers, 0);
  spy_provider_destroy(p);
}

TEST(destroy_does_not_wait_for_a_sync_nobody_finishes) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(SPY_TRANSPORT_OFFLOAD);
  d.flush_ms = 100000;
  CHECK_OK(spy_provider_create(&p, &d));
  uint64_t id = spy_provider_id(p);
  CHECK_OK(sniff_open(&sn, dir, id, SPY_FEAT_STATS));
  spy_clock_seg *seg = NULL;
  CHECK_OK(request_sync(id, &seg));
  usleep(100000); /* the clock thread now waits for our rounds */
  double t0 = tu_now_s();
  spy_provider_destroy(p); /* cancels the serve instead of waiting 1 s */
  CHECK(tu_now_s() - t0 < 0.5);
  sniff_close(&sn);
  spy_clock_close(seg);
  CHECK_EQ(clock_files(), 0);
}

/* Polls a and b in turn until cond holds or `seconds` pass. */
#define POLL2_UNTIL(a, b, seconds, cond)                                       \
  ({                                                                           \
    double end_ = tu_now_s() + (seconds);                                      \
    int ok_ = 0;                                                               \
    while (!(ok_ = (cond)) && tu_now_s() < end_) {                             \
      if (a)                                                                   \
        spy_consumer_poll((a), 10);                                            \
      spy_consumer_poll((b), 10);                                              \
    }                                                                          \
    ok_;                                                                       \
  })

/* A consumer that stops acking past the provider's grace is dropped; the
 * other subscriber keeps the channel busy, so the dropped one never hears
 * silence. Its next ack is answered with a ping naming it, and it
 * subscribes again (the provider counts two subscribers again). */
TEST(consumer_dropped_while_others_keep_data_flowing_subscribes_again) {
  fresh_dir();
  pid_t pid = spawn_provider(pdesc(SPY_TRANSPORT_OFFLOAD), NULL);
  spy_consumer *a, *b;
  spy_consumer_desc da = cdesc(SPY_FEAT_STATS | SPY_FEAT_ENV, 1);
  spy_consumer_desc db = cdesc(SPY_FEAT_STATS | SPY_FEAT_HEALTH, 1);
  /* Silence is not what this is about: a long liveness, so a loaded
   * machine's stall does not make a re-subscribe of its own. */
  da.liveness_ms = db.liveness_ms = 5000;
  CHECK_OK(spy_consumer_create(&a, &da));
  CHECK_OK(spy_consumer_create(&b, &db));
  const spy_state *sa = spy_consumer_state(a), *sb = spy_consumer_state(b);
  CHECK(POLL2_UNTIL(a, b, 10,
                    sa->conn == SPY_CONN_CONNECTED &&
                        sb->conn == SPY_CONN_CONNECTED &&
                        sb->health[SPY_HEALTH_SUBSCRIBERS] == 2));
  /* a goes quiet (no poll, no ack) until the provider drops it */
  spy_consumer *none = NULL;
  CHECK(POLL2_UNTIL(none, b, 10, sb->health[SPY_HEALTH_SUBSCRIBERS] == 1));
  CHECK(sa->conn == SPY_CONN_CONNECTED); /* it has not noticed yet */
  uint64_t subs_before = sa->subscribes;
  CHECK(POLL2_UNTIL(a, b, 10,
                    sa->sub_dropped >= 1 && sa->conn == SPY_CONN_CONNECTED &&
                        sb->health[SPY_HEALTH_SUBSCRIBERS] == 2));
  CHECK(sa->subscribes > subs_before);
  CHECK_EQ(sa->reconnects, 0); /* subscribed again, not searched again */
  spy_consumer_destroy(a);
  spy_consumer_destroy(b);
  kill(pid, SIGKILL);
  tu_wait(pid, 5);
}

int main(int argc, char **argv) {
  static const struct spy_test_case cases[] = {
      TEST_CASE(
          msgprof_offload_rows_grow_and_unsubscribe_detaches_the_profiler),
      TEST_CASE(msgprof_inline_rows_grow_and_unsubscribe_detaches_the_profiler),
      TEST_CASE(msgprof_section_in_data_frames_only_while_wanted),
      TEST_CASE(
          clock_sync_with_a_provider_process_recovers_its_injected_offset),
      TEST_CASE(provider_killed_mid_sync_times_out_and_the_consumer_goes_on),
      TEST_CASE(consumer_killed_mid_sync_leaves_no_segment_file),
      TEST_CASE(destroy_does_not_wait_for_a_sync_nobody_finishes),
      TEST_CASE(
          consumer_dropped_while_others_keep_data_flowing_subscribes_again)};
  int rc = spy_test_run(argc, argv, cases, sizeof cases / sizeof cases[0]);
  if (dir[0])
    tu_rm_rf(dir);
  return rc;
}
