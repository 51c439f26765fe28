/* test_protocol.c — discovery, subscription, heartbeat and resync between
 * real provider and consumer processes over the real bus, with the
 * protocol's intervals scaled down through the descs. */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>

#include "spyglass/bus.h"
#include "spyglass/consumer.h"
#include "spyglass/provider.h"
#include "testlib.h"
#include "testutil.h"

static char dir[256];

static void fresh_dir(void) {
  if (dir[0])
    tu_rm_rf(dir);
  tu_rundir(dir, sizeof dir);
}

/* Fast protocol timings for tests (ms). */
static spy_provider_desc pdesc(const char *name, spy_provider_kind kind) {
  spy_provider_desc d = {.name = name,
                         .kind = kind,
                         .dir = dir,
                         .flush_ms = 20,
                         .idle_ping_ms = 100,
                         .ack_grace_ms = 400,
                         .checkpoint_ms = 500,
                         .env_sample_ms = 20};
  return d;
}

static spy_consumer_desc cdesc(void) {
  spy_consumer_desc d = {.dir = dir,
                         .query_initial_ms = 30,
                         .query_max_ms = 120,
                         .query_attempts = 10,
                         .ack_ms = 60,
                         .liveness_ms = 300};
  return d;
}

/* A provider process: frames every 2 ms with counters, values and env,
 * until killed, or until a byte arrives on `ctl` (then exits cleanly).
 * With a second byte pattern 'F' it switches to a final, fixed state. */
static void provider_main(spy_provider_desc d, int ctl, int n_values) {
  spy_provider *p;
  if (spy_provider_create(&p, &d) < 0)
    _exit(3);
  spy_env_set_adapter(p, "test adapter");
  spy_env_set_resolution(p, 640, 480, 2.0);
  char names[128][16];
  for (int i = 0; i < n_values && i < 128; i++)
    snprintf(names[i], sizeof names[i], "v%03d", i);
  int final = 0;
  for (uint64_t f = 0;; f++) {
    char c;
    if (ctl >= 0 && read(ctl, &c, 1) == 1) {
      if (c == 'F')
        final = 1;
      else
        break;
    }
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, (uint32_t)(f % 5));
    spy_value_set_i64(p, "frame", final ? -1 : (int64_t)f);
    char text[128];
    for (int i = 0; i < n_values; i++) {
      snprintf(text, sizeof text, "%.15s value %llu padding padding padding",
               names[i], final ? 0ull : (unsigned long long)f);
      spy_value_set_str(p, names[i], text);
    }
    usleep(2000);
    spy_frame_end(p);
  }
  spy_provider_destroy(p);
  _exit(0);
}

static pid_t spawn_provider(spy_provider_desc d, int *ctl_w, int n_values) {
  int fds[2] = {-1, -1};
  if (ctl_w && pipe(fds) == 0) {
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    *ctl_w = fds[1];
  }
  pid_t pid = tu_fork();
  if (pid == 0) {
    if (fds[1] >= 0)
      close(fds[1]);
    provider_main(d, fds[0], n_values);
  }
  if (fds[0] >= 0)
    close(fds[0]);
  return pid;
}

TEST(consumer_finds_provider_in_another_process_and_accumulates_state) {
  fresh_dir();
  pid_t pid = spawn_provider(pdesc("alpha", SPY_PROVIDER_USER), NULL, 0);
  spy_consumer *c;
  spy_consumer_desc cd = cdesc();
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  CHECK(POLL_UNTIL(c, 10,
                   s->conn == SPY_CONN_CONNECTED && s->samples > 20 &&
                       spy_state_find(&s->registry, "frame") &&
                       spy_state_find(&s->env, "adapter")));
  CHECK_STR(s->provider_name, "alpha");
  /* FPS is measured, not asserted (a loaded machine runs the provider at
   * any rate): a positive number that changes as frames go on. */
  double fps0 = spy_state_last(s, SPY_FIELD_FPS);
  CHECK(isfinite(fps0) && fps0 > 0);
  CHECK(POLL_UNTIL(c, 10, spy_state_last(s, SPY_FIELD_FPS) != fps0));
  CHECK(spy_state_last(s, SPY_FIELD_FPS) > 0);
  CHECK(spy_state_last(s, SPY_FIELD_CPU_MS) >= 0);
  CHECK(isnan(spy_state_last(s, SPY_FIELD_GPU_MS))); /* no GPU timings */
  CHECK_STR(spy_state_find(&s->env, "adapter")->value.v.s.ptr, "test adapter");
  CHECK_EQ(spy_state_find(&s->env, "width")->value.v.u, 640);
  CHECK_EQ(spy_state_counter(s, "draws"), SPY_COUNTER_DRAWS);
  CHECK(s->snapshots >= 1);
  CHECK(spy_state_find(&s->env, "memory.rss_bytes"));
  int64_t f1 = spy_state_find(&s->registry, "frame")->value.v.i;
  /* The next flush comes within a flush period of a busy machine's
   * scheduling: wait for it with a deadline instead of one 100 ms poll. */
  CHECK(
      POLL_UNTIL(c, 10, spy_state_find(&s->registry, "frame")->value.v.i > f1));
  kill(pid, SIGKILL);
  tu_wait(pid, 5);
  spy_consumer_destroy(c);
}

TEST(killed_provider_is_seen_gone_and_a_new_one_is_picked_up) {
  fresh_dir();
  pid_t p1 = spawn_provider(pdesc("first", SPY_PROVIDER_USER), NULL, 0);
  spy_consumer *c;
  spy_consumer_desc cd = cdesc();
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  CHECK(POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED && s->samples > 5));
  kill(p1, SIGKILL);
  tu_wait(p1, 5);
  double t0 = tu_now_s();
  /* No gone message from a killed process: liveness must notice. */
  CHECK(POLL_UNTIL(
      c, 10, s->conn != SPY_CONN_CONNECTED && s->conn != SPY_CONN_SUBSCRIBING));
  double noticed = tu_now_s() - t0;
  CHECK(noticed >= 0.25); /* not before the liveness interval (300 ms) */
  CHECK(s->reconnects >= 1);
  pid_t p2 = spawn_provider(pdesc("second", SPY_PROVIDER_USER), NULL, 0);
  CHECK(POLL_UNTIL(c, 10,
                   s->conn == SPY_CONN_CONNECTED &&
                       strcmp(s->provider_name, "second") == 0));
  uint64_t before = s->samples;
  CHECK(POLL_UNTIL(c, 5, s->samples > before + 5));
  kill(p2, SIGKILL);
  tu_wait(p2, 5);
  spy_consumer_destroy(c);
}

TEST(provider_gone_message_on_clean_exit_disconnects_at_once) {
  fresh_dir();
  int ctl;
  spy_provider_desc d = pdesc("clean", SPY_PROVIDER_USER);
  pid_t pid = spawn_provider(d, &ctl, 0);
  spy_consumer *c;
  spy_consumer_desc cd = cdesc();
  cd.liveness_ms = 30000; /* so only `gone` can explain a quick notice */
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  CHECK(POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED));
  CHECK(write(ctl, "q", 1) == 1);
  CHECK_EQ(tu_wait(pid, 10), 0);
  double t0 = tu_now_s();
  /* well before liveness could have noticed, even on a loaded machine */
  CHECK(POLL_UNTIL(c, 15, s->conn == SPY_CONN_LOST));
  CHECK(tu_now_s() - t0 < 15.0);
  close(ctl);
  spy_consumer_destroy(c);
}

TEST(killed_consumer_is_dropped_after_ack_grace_and_collection_stops) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc("host", SPY_PROVIDER_USER);
  CHECK_OK(spy_provider_create(&p, &d));
  pid_t kid = tu_fork();
  if (kid == 0) {
    spy_consumer *c;
    spy_consumer_desc cd = cdesc();
    if (spy_consumer_create(&c, &cd) < 0)
      _exit(3);
    for (;;)
      spy_consumer_poll(c, 50);
  }
  spy_provider_stats st;
  double end = tu_now_s() + 10;
  do {
    spy_frame_begin(p);
    usleep(1000);
    spy_frame_end(p);
    spy_provider_get_stats(p, &st);
  } while (st.subscribers == 0 && tu_now_s() < end);
  CHECK_EQ(st.subscribers, 1);
  CHECK(st.features & SPY_FEAT_STATS);
  kill(kid, SIGKILL);
  tu_wait(kid, 5);
  double t0 = tu_now_s();
  end = t0 + 10;
  do {
    usleep(5000);
    spy_provider_get_stats(p, &st);
  } while (st.subscribers && tu_now_s() < end);
  double dropped_after = tu_now_s() - t0;
  CHECK_EQ(st.subscribers, 0);
  CHECK_EQ(st.features, 0);    /* nothing collected for nobody */
  CHECK(dropped_after >= 0.2); /* grace is 400 ms after the last ack */
  uint64_t samples = st.stats_samples;
  for (int i = 0; i < 50; i++) {
    spy_frame_begin(p);
    spy_frame_end(p);
  }
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.stats_samples, samples);
  spy_provider_destroy(p);
}

/* Queries on the discovery channel until n providers answered. */
static int wait_for_providers(int n) {
  spy_channel *d;
  spy_channel_desc dd = {.name = SPY_DISCOVERY_CHANNEL, .dir = dir};
  if (spy_channel_open(&d, &dd) < 0)
    return 0;
  uint64_t seen[8];
  int nseen = 0;
  double end = tu_now_s() + 10, next_query = 0;
  uint8_t buf[4096];
  while (nseen < n && tu_now_s() < end) {
    if (tu_now_s() >= next_query) {
      spy_frame_writer w;
      spy_frame_start(&w, buf, sizeof buf, SPY_MSG_PROVIDER_QUERY, 0, 0, 0);
      spy_put_peer(&w, 1, 0);
      int len = spy_frame_finish(&w);
      spy_channel_post(d, buf, (size_t)len);
      next_query = tu_now_s() + 0.2;
    }
    int len = spy_channel_recv(d, buf, sizeof buf, 50, NULL);
    spy_frame f;
    spy_section s;
    spy_provider_info info;
    if (len > 0 && spy_frame_decode(buf, (size_t)len, &f, NULL) == 0 &&
        f.type == SPY_MSG_PROVIDER_ANNOUNCE &&
        spy_frame_find_section(&f, SPY_SEC_PROVIDER, &s) &&
        spy_get_provider(&s, &info) == 0) {
      int dup = 0;
      for (int i = 0; i < nseen; i++)
        dup |= seen[i] == info.id;
      if (!dup && nseen < 8)
        seen[nseen++] = info.id;
    }
  }
  spy_channel_close(d);
  return nseen >= n;
}

TEST(user_provider_is_preferred_and_a_named_one_is_chosen) {
  fresh_dir();
  pid_t sys = spawn_provider(pdesc("sysprov", SPY_PROVIDER_SYSTEM), NULL, 0);
  pid_t usr = spawn_provider(pdesc("userprov", SPY_PROVIDER_USER), NULL, 0);
  CHECK(wait_for_providers(2)); /* both answer before the consumer asks */
  spy_consumer *c;
  spy_consumer_desc cd = cdesc();
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  /* The two announces may reach the consumer apart (each provider answers
   * at its own service tick): it may subscribe to the system one first and
   * switch when the user one answers. Where it ends up is what counts. */
  CHECK(POLL_UNTIL(c, 10,
                   s->conn == SPY_CONN_CONNECTED &&
                       s->provider.kind == SPY_PROVIDER_USER));
  CHECK_STR(s->provider_name, "userprov");
  CHECK_EQ(s->provider.kind, SPY_PROVIDER_USER);
  spy_consumer_destroy(c);
  cd.want = "sysprov";
  CHECK_OK(spy_consumer_create(&c, &cd));
  s = spy_consumer_state(c);
  CHECK(POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED));
  CHECK_STR(s->provider_name, "sysprov");
  char id[17];
  snprintf(id, sizeof id, "%016llx", (unsigned long long)s->provider.id);
  spy_consumer_destroy(c);
  cd.want = id; /* by id */
  CHECK_OK(spy_consumer_create(&c, &cd));
  s = spy_consumer_state(c);
  CHECK(POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED));
  CHECK_STR(s->provider_name, "sysprov");
  spy_consumer_destroy(c);
  kill(sys, SIGKILL);
  kill(usr, SIGKILL);
  tu_wait(sys, 5);
  tu_wait(usr, 5);
}

/* Counts provider:query frames on the discovery channel, with times. */
TEST(queries_back_off_doubling_to_the_cap_then_stop) {
  fresh_dir();
  spy_channel *sniff;
  spy_channel_desc sd = {.name = SPY_DISCOVERY_CHANNEL, .dir = dir};
  CHECK_OK(spy_channel_open(&sniff, &sd));
  spy_consumer *c;
  spy_consumer_desc cd = cdesc();
  cd.query_initial_ms = 40;
  cd.query_max_ms = 160;
  cd.query_attempts = 6;
  CHECK_OK(spy_consumer_create(&c, &cd));
  double t[16];
  int n = 0;
  double end = tu_now_s() + 2.0;
  uint8_t buf[4096];
  while (tu_now_s() < end) {
    spy_consumer_poll(c, 5);
    int len;
    while ((len = spy_channel_recv(sniff, buf, sizeof buf, 0, NULL)) > 0) {
      spy_frame f;
      if (spy_frame_decode(buf, (size_t)len, &f, NULL) == 0 &&
          f.type == SPY_MSG_PROVIDER_QUERY && n < 16)
        t[n++] = (double)f.ts_ms / 1000.0; /* stamped when posted */
    }
  }
  CHECK_EQ(n, 6); /* then it stops asking */
  static const double gap[] = {0.040, 0.080, 0.160, 0.160, 0.160};
  for (int i = 0; i < 5; i++)
    CHECK(t[i + 1] - t[i] >= gap[i] - 0.002); /* ms stamps */
  spy_consumer_destroy(c);
  spy_channel_close(sniff);
}

TEST(late_provider_connects_through_its_own_announce) {
  fresh_dir();
  spy_consumer *c;
  spy_consumer_desc cd = cdesc();
  cd.query_initial_ms = 10;
  cd.query_attempts = 2;
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  double end = tu_now_s() + 0.3;
  while (tu_now_s() < end)
    spy_consumer_poll(c, 20); /* queries exhausted, nobody answered */
  CHECK_EQ(s->conn, SPY_CONN_SEARCHING);
  pid_t pid = spawn_provider(pdesc("late", SPY_PROVIDER_USER), NULL, 0);
  CHECK(POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED));
  CHECK_STR(s->provider_name, "late");
  kill(pid, SIGKILL);
  tu_wait(pid, 5);
  spy_consumer_destroy(c);
}

TEST(slow_consumer_overruns_resyncs_and_ends_with_the_right_state) {
  fresh_dir();
  int ctl;
  spy_provider_desc d = pdesc("busy", SPY_PROVIDER_USER);
  d.ring_bytes = 64u << 10; /* overruns quickly */
  d.flush_ms = 5;
  d.ack_grace_ms = 10000; /* keeps sending while we sleep */
  pid_t pid = spawn_provider(d, &ctl, 40);
  spy_consumer *c;
  spy_consumer_desc cd = cdesc();
  cd.liveness_ms = 3000;
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  CHECK(POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED && s->samples > 0));
  /* Fall far behind until the ring laps us: how long that takes depends
   * on how much a loaded machine runs the provider, so sleep and look
   * again, with a deadline. */
  double end = tu_now_s() + 30;
  do {
    usleep(600000);
    spy_consumer_poll(c, 50);
  } while (!(s->frames_lost > 0 && s->resyncs > 0) && tu_now_s() < end);
  CHECK(s->frames_lost > 0);
  CHECK(s->resyncs > 0);
  CHECK(write(ctl, "F", 1) == 1); /* provider: settle on the final state */
  CHECK(POLL_UNTIL(c, 10,
                   spy_state_find(&s->registry, "frame") &&
                       spy_state_find(&s->registry, "frame")->value.v.i == -1));
  spy_consumer_poll(c, 200);
  int good = 0;
  for (int i = 0; i < 40; i++) {
    char name[16], want[96];
    snprintf(name, sizeof name, "v%03d", i);
    snprintf(want, sizeof want, "%s value 0 padding padding padding", name);
    const spy_state_entry *e = spy_state_find(&s->registry, name);
    good += e && e->has_value && strcmp(e->value.v.s.ptr, want) == 0;
  }
  CHECK_EQ(good, 40);
  CHECK(write(ctl, "q", 1) == 1);
  CHECK_EQ(tu_wait(pid, 10), 0);
  close(ctl);
  spy_consumer_destroy(c);
}

TEST(idle_provider_pings_so_the_consumer_stays_connected) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc("idle", SPY_PROVIDER_USER);
  CHECK_OK(spy_provider_create(&p, &d)); /* no frames at all */
  spy_consumer *c;
  spy_consumer_desc cd = cdesc();
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  CHECK(POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED));
  /* At least four liveness intervals, and until five pings came. The
   * consumer re-subscribes when it heard nothing for a liveness interval:
   * while pings come that must not happen, but a loaded machine that runs
   * neither the provider's service nor this thread for that long makes a
   * real silence. So a re-subscribe counts against the pings only when
   * the silence before it, as measured here on the consumer's clock, was
   * shorter than the liveness interval, and the provider had not told it
   * that it dropped it (its acks late). Pings are the frames received in
   * polls that began and ended connected with no subscribe sent. */
  uint64_t pings = 0, unexplained = 0, lapses = 0;
  double start = tu_now_s(), end = start + 20;
  while (tu_now_s() < end &&
         (tu_now_s() - start < 4 * cd.liveness_ms / 1000.0 || pings < 5)) {
    uint64_t subs = s->subscribes, frames = s->frames_received;
    uint64_t last = s->last_msg_ms, dropped = s->sub_dropped;
    int was = s->conn;
    spy_consumer_poll(c, 50);
    uint64_t now = (uint64_t)(tu_now_s() * 1000.0); /* CLOCK_MONOTONIC */
    if (s->subscribes != subs) {
      /* Dropped by the provider (our acks came later than its grace on
       * a loaded machine), and told so: a lapse too. */
      if (was == SPY_CONN_CONNECTED && now - last < cd.liveness_ms &&
          s->sub_dropped == dropped)
        unexplained++;
      else
        lapses++;
    } else if (was == SPY_CONN_CONNECTED && s->conn == SPY_CONN_CONNECTED) {
      pings += s->frames_received - frames;
    }
  }
  if (lapses)
    fprintf(stderr, "  %llu re-subscribes after a real silence\n",
            (unsigned long long)lapses);
  CHECK_EQ(unexplained, 0); /* never re-subscribed while pings came */
  CHECK(pings >= 5);
  CHECK(POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED));
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
}

/* A consumer that polls late finds the provider's pings waiting in its
 * ring: it must read them before it judges the silence, not re-subscribe
 * first. The provider is an idle process (pings every 100 ms, a long ack
 * grace so the unpolled consumer is kept); the consumer sleeps three
 * liveness intervals, then polls once without waiting. A round counts
 * only when frames were waiting (a loaded machine may not have run the
 * provider at all meanwhile: then a re-subscribe is right). */
TEST(late_poll_reads_waiting_pings_before_judging_silence) {
  fresh_dir();
  pid_t pid = tu_fork();
  if (pid == 0) {
    spy_provider_desc d = pdesc("idle-proc", SPY_PROVIDER_USER);
    d.ack_grace_ms = 60000;
    spy_provider *p;
    if (spy_provider_create(&p, &d) < 0)
      _exit(3);
    for (;;)
      pause();
  }
  spy_consumer *c;
  spy_consumer_desc cd = cdesc();
  cd.no_clock_sync = 1;
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  int rounds = 0, resubscribed = 0;
  double end = tu_now_s() + 60;
  while (rounds < 3 && tu_now_s() < end) {
    if (!POLL_UNTIL(c, 10, s->conn == SPY_CONN_CONNECTED))
      continue;
    /* a ping heard, so the provider runs */
    uint64_t f0 = s->frames_received;
    if (!POLL_UNTIL(c, 10, s->frames_received > f0))
      continue;
    usleep(3 * cd.liveness_ms * 1000);
    uint64_t subs = s->subscribes, frames = s->frames_received;
    spy_consumer_poll(c, 0);
    if (s->frames_received == frames)
      continue; /* nothing was waiting: a real silence */
    rounds++;
    resubscribed += s->subscribes != subs;
  }
  fprintf(stderr, "  %d late polls with pings waiting, %d re-subscribed\n",
          rounds, resubscribed);
  CHECK_EQ(rounds, 3);
  CHECK_EQ(resubscribed, 0);
  spy_consumer_destroy(c);
  kill(pid, SIGKILL);
  tu_wait(pid, 5);
}

TEST(union_of_subscriptions_shrinks_when_one_unsubscribes) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc("union", SPY_PROVIDER_USER);
  CHECK_OK(spy_provider_create(&p, &d));
  spy_consumer *a, *b;
  spy_consumer_desc cd = cdesc();
  cd.features = SPY_FEAT_STATS;
  CHECK_OK(spy_consumer_create(&a, &cd));
  cd.features = SPY_FEAT_REGISTRY;
  CHECK_OK(spy_consumer_create(&b, &cd));
  CHECK(POLL_UNTIL(a, 10, spy_consumer_state(a)->conn == SPY_CONN_CONNECTED));
  CHECK(POLL_UNTIL(b, 10, spy_consumer_state(b)->conn == SPY_CONN_CONNECTED));
  spy_provider_stats st;
  double end = tu_now_s() + 5;
  do {
    spy_consumer_poll(a, 10);
    spy_consumer_poll(b, 10);
    spy_provider_get_stats(p, &st);
  } while (st.subscribers < 2 && tu_now_s() < end);
  CHECK_EQ(st.features, SPY_FEAT_STATS | SPY_FEAT_REGISTRY);
  spy_consumer_destroy(b); /* unsubscribes */
  end = tu_now_s() + 5;
  do {
    spy_consumer_poll(a, 10);
    spy_provider_get_stats(p, &st);
  } while (st.subscribers > 1 && tu_now_s() < end);
  CHECK_EQ(st.features, SPY_FEAT_STATS);
  spy_consumer_destroy(a);
  spy_provider_destroy(p);
}

TEST(registry_filter_omitted_empty_and_named) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc("filters", SPY_PROVIDER_USER);
  CHECK_OK(spy_provider_create(&p, &d));
  const char *only_a[] = {"a"};
  spy_consumer *all, *none, *named;
  spy_consumer_desc cd = cdesc();
  cd.features = SPY_FEAT_REGISTRY;
  CHECK_OK(spy_consumer_create(&all, &cd));
  cd.registry_filter = 1;
  CHECK_OK(spy_consumer_create(&none, &cd));
  cd.registry = only_a;
  cd.n_registry = 1;
  CHECK_OK(spy_consumer_create(&named, &cd));
  const spy_state *sa = spy_consumer_state(all), *sn = spy_consumer_state(none),
                  *sx = spy_consumer_state(named);
  double end = tu_now_s() + 10;
  int ok = 0;
  while (!ok && tu_now_s() < end) {
    spy_frame_begin(p);
    spy_value_set_f64(p, "a", 1.5);
    spy_value_set_f64(p, "b", 2.5);
    spy_frame_end(p);
    spy_consumer_poll(all, 5);
    spy_consumer_poll(none, 5);
    spy_consumer_poll(named, 5);
    const spy_state_entry *ab = spy_state_find(&sa->registry, "b"),
                          *nb = spy_state_find(&sn->registry, "b"),
                          *xa = spy_state_find(&sx->registry, "a"),
                          *xb = spy_state_find(&sx->registry, "b");
    ok = ab && ab->has_value && nb && xa && xa->has_value && xb;
  }
  CHECK(ok);
  /* Omitted: every value. Empty: names and kinds only. Named: those. */
  CHECK(spy_state_find(&sa->registry, "a")->has_value);
  CHECK_EQ(spy_state_find(&sa->registry, "b")->value.v.f[0], 2.5);
  CHECK(!spy_state_find(&sn->registry, "a")->has_value);
  CHECK(!spy_state_find(&sn->registry, "b")->has_value);
  CHECK_EQ(spy_state_find(&sn->registry, "b")->value.kind, SPY_VAL_FLOAT);
  CHECK_EQ(spy_state_find(&sx->registry, "a")->value.v.f[0], 1.5);
  CHECK(!spy_state_find(&sx->registry, "b")->has_value);
  spy_consumer_destroy(all);
  spy_consumer_destroy(none);
  spy_consumer_destroy(named);
  spy_provider_destroy(p);
}

int main(int argc, char **argv) {
  static const struct spy_test_case cases[] = {
      TEST_CASE(
          consumer_finds_provider_in_another_process_and_accumulates_state),
      TEST_CASE(killed_provider_is_seen_gone_and_a_new_one_is_picked_up),
      TEST_CASE(provider_gone_message_on_clean_exit_disconnects_at_once),
      TEST_CASE(
          killed_consumer_is_dropped_after_ack_grace_and_collection_stops),
      TEST_CASE(user_provider_is_preferred_and_a_named_one_is_chosen),
      TEST_CASE(queries_back_off_doubling_to_the_cap_then_stop),
      TEST_CASE(late_provider_connects_through_its_own_announce),
      TEST_CASE(slow_consumer_overruns_resyncs_and_ends_with_the_right_state),
      TEST_CASE(idle_provider_pings_so_the_consumer_stays_connected),
      TEST_CASE(late_poll_reads_waiting_pings_before_judging_silence),
      TEST_CASE(union_of_subscriptions_shrinks_when_one_unsubscribes),
      TEST_CASE(registry_filter_omitted_empty_and_named)};
  int rc = spy_test_run(argc, argv, cases, sizeof cases / sizeof cases[0]);
  if (dir[0])
    tu_rm_rf(dir);
  return rc;
}
