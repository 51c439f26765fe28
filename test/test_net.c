/* test_net.c — links and the bridge, with real processes and real sockets
 * on loopback: the link record codec; `spyglass top --connect` through
 * `spyglass serve` against `spyglass demo --headless`; two remote and one
 * local consumer of one provider; a killed provider replaced; a stalled
 * client that alone loses frames and then resyncs to the exact state; the
 * allow-list; the security refusals (no token off loopback, wrong token,
 * bad Origin, bad Host, busy port); clock sync over the link; TLS. Every
 * server binds port 0, so parallel runs do not collide. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "spyglass/bus.h"
#include "spyglass/consumer.h"
#include "spyglass/net.h"
#include "spyglass/provider.h"
#include "spyglass/wire.h"
#include "testlib.h"
#include "testutil.h"

static char dir[256];
static char out[1 << 16];

static void fresh_dir(void) {
  if (dir[0])
    tu_rm_rf(dir);
  tu_rundir(dir, sizeof dir);
}

/* ---- helpers ------------------------------------------------------------ */

static const char *quiet_file(void) {
  static char p[300];
  snprintf(p, sizeof p, "%s/quiet", dir);
  return p;
}

/* A provider process: `name`, a frame every 2 ms, values; with big = 1
 * forty 4 KB strings that change every frame until the quiet file
 * exists. */
static void provider_main(const char *name, int big) {
  spy_provider_desc d = {.name = name,
                         .dir = dir,
                         .flush_ms = 50,
                         .ack_grace_ms = 60000,
                         .string_max = big ? 4096 : 0};
  spy_provider *p;
  if (spy_provider_create(&p, &d) < 0)
    _exit(3);
  static char blob[4000];
  for (uint64_t f = 1;; f++) {
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, 3);
    int quiet = access(quiet_file(), F_OK) == 0;
    if (!quiet)
      spy_value_set_i64(p, "frame", (int64_t)f);
    if (big && !quiet)
      for (int i = 0; i < 40; i++) {
        memset(blob, 'a' + (int)((f + (uint64_t)i) % 26), sizeof blob - 1);
        char key[16];
        snprintf(key, sizeof key, "big.%d", i);
        spy_value_set_str(p, key, blob);
      }
    spy_frame_end(p);
    usleep(2000);
  }
}

static pid_t spawn_provider(const char *name, int big) {
  pid_t pid = tu_fork();
  if (pid == 0)
    provider_main(name, big);
  return pid;
}

static void quiet_log(void *arg, const char *line) {
  (void)arg;
  (void)line;
}

static spy_server *start_server(spy_server_desc *d) {
  d->dir = dir;
  if (!d->listen)
    d->listen = "127.0.0.1:0";
  if (!d->log)
    d->log = quiet_log;
  spy_server *s = NULL;
  if (spy_server_thread_start(&s, d) < 0)
    return NULL;
  return s;
}

static int remote_consumer(spy_consumer **c, int port, const char *token,
                           uint32_t features) {
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  spy_consumer_desc d = {.dir = dir,
                         .connect = addr,
                         .token = token,
                         .remote = spy_net_channel_ops(),
                         .features = features,
                         .recv_bytes = 4u << 20};
  return spy_consumer_create(c, &d);
}

static int connected(spy_consumer *c) {
  const spy_state *s = spy_consumer_state(c);
  return s->conn == SPY_CONN_CONNECTED && s->samples > 0;
}

/* Polls all of cs[0..n) for `seconds` (or until cond). */
#define POLL_ALL(cs, n, seconds, cond)                                         \
  ({                                                                           \
    double end_ = tu_now_s() + (seconds);                                      \
    int ok_ = 0;                                                               \
    while (!(ok_ = (cond)) && tu_now_s() < end_)                               \
      for (int k_ = 0; k_ < (n); k_++)                                         \
        spy_consumer_poll((cs)[k_], 10);                                       \
    ok_;                                                                       \
  })

/* A raw TCP connection to 127.0.0.1:port (blocking, 5 s timeouts). */
static int tcp_to(const char *ip, int port) {
  int fd = socket(strchr(ip, ':') ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  struct timeval tv = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc;
  if (strchr(ip, ':')) {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                             .sin6_port = htons((uint16_t)port)};
    inet_pton(AF_INET6, ip, &a.sin6_addr);
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  } else {
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  }
  if (rc < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Sends an HTTP request, returns the whole answer in out. */
static const char *http_get(int port, const char *req) {
  out[0] = 0;
  int fd = tcp_to("127.0.0.1", port);
  if (fd < 0)
    return out;
  if (write(fd, req, strlen(req)) < 0) {
    close(fd);
    return out;
  }
  size_t n = 0;
  ssize_t r;
  while (n + 1 < sizeof out && (r = read(fd, out + n, sizeof out - 1 - n)) > 0)
    n += (size_t)r;
  out[n] = 0;
  close(fd);
  return out;
}

static const char *healthz(int port) {
  return http_get(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
}

/* The value of "key":N after the first occurrence of `after` in s. */
static long long json_num(const char *s, const char *after, const char *key) {
  const char *p = after ? strstr(s, after) : s;
  if (!p)
    return -1;
  char k[64];
  snprintf(k, sizeof k, "\"%s\":", key);
  p = strstr(p, k);
  return p ? atoll(p + strlen(k)) : -1;
}

/* Raw link client: HELLO and the answer's first record. */
static int link_send(int fd, uint8_t op, uint16_t chan, const void *p,
                     size_t n) {
  uint8_t b[70000];
  int len = spy_link_encode(b, sizeof b, op, chan, p, n, NULL, 0);
  return len > 0 && write(fd, b, (size_t)len) == len ? 0 : -1;
}

static int link_hello(int fd, const char *token) {
  uint8_t h[12 + 160];
  size_t tl = token ? strlen(token) : 0;
  spy_wr32(h, SPY_LINK_MAGIC);
  spy_wr32(h + 4, SPY_LINK_VERSION);
  spy_wr16(h + 8, (uint16_t)tl);
  spy_wr16(h + 10, 0);
  if (tl)
    memcpy(h + 12, token, tl);
  return link_send(fd, SPY_LINK_HELLO, 0, h, 12 + tl);
}

/* Reads one record into buf; returns its op, or -1. */
static int link_read(int fd, uint8_t *buf, size_t cap, spy_link_rec *r) {
  size_t n = 0;
  for (;;) {
    int c = spy_link_parse(buf, n, cap, r);
    if (c > 0)
      return r->op;
    if (c < 0 || n == cap)
      return -1;
    ssize_t got = read(fd, buf + n, c == 0 && n < 8 ? 8 - n : 1);
    if (got <= 0)
      return -1;
    n += (size_t)got;
    if (n >= 8) {
      size_t want = 8 + spy_rd32(buf);
      while (n < want && want <= cap) {
        got = read(fd, buf + n, want - n);
        if (got <= 0)
          return -1;
        n += (size_t)got;
      }
    }
  }
}

/* ---- the codec ----------------------------------------------------------- */

TEST(link_records_round_trip_and_bad_ones_are_refused) {
  uint8_t b[256], frame[64];
  spy_frame_writer w;
  spy_frame_start(&w, frame, sizeof frame, SPY_MSG_ACK, 1, 7, 0);
  spy_put_peer(&w, 42, 0);
  int fl = spy_frame_finish(&w);
  CHECK(fl > 0);
  uint8_t pre[8] = {3, 0, 0, 0, 0, 0, 0, 0};
  int n = spy_link_encode(b, sizeof b, SPY_LINK_FRAME, 5, pre, 8, frame,
                          (size_t)fl);
  CHECK_EQ(n, 8 + 8 + fl);
  spy_link_rec r;
  CHECK_EQ(spy_link_parse(b, (size_t)n, 65536, &r), n);
  CHECK_EQ(r.op, SPY_LINK_FRAME);
  CHECK_EQ(r.chan, 5);
  CHECK_EQ(r.lost, 3);
  CHECK_EQ(r.frame_len, fl);
  CHECK(memcmp(r.frame, frame, (size_t)fl) == 0); /* byte for byte */
  /* Every prefix is "need more", never an error. */
  for (int k = 0; k < n; k++)
    CHECK_EQ(spy_link_parse(b, (size_t)k, 65536, &r), 0);
  /* The bound is decided from the header. */
  CHECK_EQ(spy_link_parse(b, 8, 16, &r), SPY_ETOOBIG);
  uint8_t bad[16];
  memcpy(bad, b, 8);
  bad[4] = 99;
  CHECK_EQ(spy_link_parse(bad, 8, 65536, &r), SPY_EBADHEADER);
  memcpy(bad, b, 8);
  bad[5] = 1; /* flags */
  CHECK_EQ(spy_link_parse(bad, 8, 65536, &r), SPY_EBADHEADER);
  /* Channel 0 / out of range, a frame whose used_bytes is not its length. */
  n = spy_link_encode(b, sizeof b, SPY_LINK_FRAME, 0, pre, 8, frame,
                      (size_t)fl);
  CHECK_EQ(spy_link_parse(b, (size_t)n, 65536, &r), SPY_EBADVALUE);
  n = spy_link_encode(b, sizeof b, SPY_LINK_FRAME, SPY_LINK_CHANNELS_MAX, pre,
                      8, frame, (size_t)fl);
  CHECK_EQ(spy_link_parse(b, (size_t)n, 65536, &r), SPY_EBADVALUE);
  n = spy_link_encode(b, sizeof b, SPY_LINK_FRAME, 1, pre, 8, frame,
                      (size_t)fl - 4);
  CHECK_EQ(spy_link_parse(b, (size_t)n, 65536, &r), SPY_EBADVALUE);
  /* OPEN with a name the bus would refuse. */
  n = spy_link_encode(b, sizeof b, SPY_LINK_OPEN, 1, "a/b", 3, NULL, 0);
  CHECK_EQ(spy_link_parse(b, (size_t)n, 65536, &r), SPY_EBADVALUE);
  n = spy_link_encode(b, sizeof b, SPY_LINK_OPEN, 1, "spyglass", 8, NULL, 0);
  CHECK_EQ(spy_link_parse(b, (size_t)n, 65536, &r), n);
  CHECK_EQ(r.text_len, 8);
  /* HELLO: magic, token bound. */
  uint8_t h[12] = {0};
  n = spy_link_encode(b, sizeof b, SPY_LINK_HELLO, 0, h, 12, NULL, 0);
  CHECK_EQ(spy_link_parse(b, (size_t)n, 65536, &r), SPY_EBADVALUE);
  spy_wr32(h, SPY_LINK_MAGIC);
  spy_wr32(h + 4, 1);
  n = spy_link_encode(b, sizeof b, SPY_LINK_HELLO, 0, h, 12, NULL, 0);
  CHECK_EQ(spy_link_parse(b, (size_t)n, 65536, &r), n);
  spy_wr16(h + 8, 200);
  n = spy_link_encode(b, sizeof b, SPY_LINK_HELLO, 0, h, 12, NULL, 0);
  CHECK_EQ(spy_link_parse(b, (size_t)n, 65536, &r), SPY_EBADVALUE);
}

/* ---- through the bridge ----------------------------------------------------
 */

TEST(two_remote_and_one_local_consumer_all_get_everything) {
  fresh_dir();
  spawn_provider("net-app", 0);
  spy_server_desc sd = {0};
  spy_server *s = start_server(&sd);
  CHECK(s);
  int port = spy_server_port(s);
  spy_consumer *c[3] = {0};
  spy_consumer_desc ld = {.dir = dir};
  CHECK_OK(remote_consumer(&c[0], port, NULL, 0));
  CHECK_OK(remote_consumer(&c[1], port, NULL, 0));
  CHECK_OK(spy_consumer_create(&c[2], &ld));
  int ok =
      POLL_ALL(c, 3, 20, connected(c[0]) && connected(c[1]) && connected(c[2]));
  /* Then a while of data: every consumer sees every frame key. */
  uint64_t start[3];
  for (int i = 0; ok && i < 3; i++)
    start[i] = spy_consumer_state(c[i])->last_frame;
  double end = tu_now_s() + 2;
  while (ok && tu_now_s() < end)
    for (int i = 0; i < 3; i++)
      spy_consumer_poll(c[i], 10);
  for (int i = 0; ok && i < 3; i++) {
    const spy_state *st = spy_consumer_state(c[i]);
    fprintf(stderr,
            "  consumer %d: frames %llu lost %llu samples_lost %llu "
            "last_frame %llu\n",
            i, (unsigned long long)st->frames_received,
            (unsigned long long)st->frames_lost,
            (unsigned long long)st->samples_lost,
            (unsigned long long)st->last_frame);
    ok &= st->last_frame > start[i] && st->samples_lost == 0 &&
          st->frames_lost == 0;
    const spy_state_entry *e = spy_state_find(&st->registry, "frame");
    ok &= e && e->has_value;
  }
  for (int i = 0; i < 3; i++)
    spy_consumer_destroy(c[i]);
  spy_server_thread_stop(s);
  CHECK(ok);
}

/* The other openers of the discovery channel a local handle sees. */
static uint32_t disc_peers(void) {
  spy_channel *ch;
  spy_channel_desc cd = {.name = SPY_DISCOVERY_CHANNEL, .dir = dir};
  if (spy_channel_open(&ch, &cd) < 0)
    return 0;
  uint8_t buf[4096];
  spy_channel_recv(ch, buf, sizeof buf, 100, NULL); /* maps the peers */
  spy_channel_stats st;
  spy_channel_get_stats(ch, &st);
  spy_channel_close(ch);
  return st.peers;
}

/* Four remote consumers of one provider: the bridge holds one bus handle
 * per channel name (not one per client), and all four get the data. */
TEST(clients_of_one_channel_share_one_bus_handle) {
  fresh_dir();
  spawn_provider("net-app", 0);
  spy_server_desc sd = {0};
  spy_server *s = start_server(&sd);
  CHECK(s);
  int port = spy_server_port(s);
  spy_consumer *c[4] = {0};
  for (int i = 0; i < 4; i++)
    CHECK_OK(remote_consumer(&c[i], port, NULL, 0));
  int ok = POLL_ALL(c, 4, 20,
                    connected(c[0]) && connected(c[1]) && connected(c[2]) &&
                        connected(c[3]));
  uint64_t start[4];
  for (int i = 0; i < 4; i++)
    start[i] = spy_consumer_state(c[i])->last_frame;
  /* the provider and one bridge handle (it was 1 + 4 before sharing) */
  uint32_t peers = disc_peers();
  fprintf(stderr, "  discovery channel peers: %u\n", peers);
  ok &= peers == 2;
  int fresh = POLL_ALL(c, 4, 20,
                       spy_consumer_state(c[0])->last_frame > start[0] &&
                           spy_consumer_state(c[1])->last_frame > start[1] &&
                           spy_consumer_state(c[2])->last_frame > start[2] &&
                           spy_consumer_state(c[3])->last_frame > start[3]);
  ok &= fresh;
  /* One leaves: the others keep the shared handle and their data. */
  spy_consumer_destroy(c[0]);
  c[0] = NULL;
  for (int i = 1; i < 4; i++)
    start[i] = spy_consumer_state(c[i])->last_frame;
  fresh = POLL_ALL(c + 1, 3, 20,
                   spy_consumer_state(c[1])->last_frame > start[1] &&
                       spy_consumer_state(c[2])->last_frame > start[2] &&
                       spy_consumer_state(c[3])->last_frame > start[3]);
  ok &= fresh;
  for (int i = 1; i < 4; i++)
    spy_consumer_destroy(c[i]);
  /* All gone: the bridge closed the handle (the provider alone is left). */
  double end = tu_now_s() + 10;
  while ((peers = disc_peers()) != 1 && tu_now_s() < end)
    ;
  fprintf(stderr, "  after all left: %u\n", peers);
  ok &= peers == 1;
  spy_server_thread_stop(s);
  CHECK(ok);
}

TEST(remote_consumer_of_a_killed_provider_picks_up_a_new_one) {
  fresh_dir();
  pid_t p1 = spawn_provider("net-app", 0);
  /* The second provider is forked now, while this process has one thread
   * (ThreadSanitizer refuses a fork after threads), and starts on cue. */
  char go[300];
  snprintf(go, sizeof go, "%s/go", dir);
  if (tu_fork() == 0) {
    while (access(go, F_OK) != 0)
      usleep(10000);
    provider_main("net-app", 0);
  }
  spy_server_desc sd = {0};
  spy_server *s = start_server(&sd);
  CHECK(s);
  spy_consumer *c;
  CHECK_OK(remote_consumer(&c, spy_server_port(s), NULL, 0));
  int ok = POLL_UNTIL(c, 20, connected(c));
  uint64_t first = spy_consumer_state(c)->provider.id;
  kill(p1, SIGKILL);
  tu_wait(p1, 5);
  /* No gone message from a killed provider: the liveness timeout. */
  ok &= POLL_UNTIL(c, 30,
                   spy_consumer_state(c)->conn != SPY_CONN_CONNECTED &&
                       spy_consumer_state(c)->conn != SPY_CONN_SUBSCRIBING);
  FILE *f = fopen(go, "w");
  if (f)
    fclose(f);
  ok &= POLL_UNTIL(c, 30,
                   connected(c) && spy_consumer_state(c)->provider.id != first);
  spy_consumer_destroy(c);
  spy_server_thread_stop(s);
  CHECK(ok);
}

/* Same registry in two states (names, kinds, values). */
static int same_registry(const spy_state *a, const spy_state *b) {
  if (a->registry.n != b->registry.n)
    return 0;
  for (uint32_t i = 0; i < a->registry.n; i++) {
    const spy_state_entry *x = &a->registry.e[i];
    const spy_state_entry *y = spy_state_find(&b->registry, x->name);
    if (!y || x->has_value != y->has_value || x->value.kind != y->value.kind)
      return 0;
    if (x->value.kind == SPY_VAL_STRING) {
      if (x->value.v.s.len != y->value.v.s.len ||
          memcmp(x->value.v.s.ptr, y->value.v.s.ptr, x->value.v.s.len))
        return 0;
    } else {
      int size = spy_value_kind_size(x->value.kind);
      if (size > 0 && memcmp(&x->value.v, &y->value.v, (size_t)size))
        return 0;
    }
  }
  return 1;
}

TEST(stalled_client_drops_alone_and_resyncs_to_the_exact_state) {
  fresh_dir();
  unlink(quiet_file());
  spawn_provider("net-big", 1);
  spy_server_desc sd = {.queue_bytes = 1u << 20};
  spy_server *s = start_server(&sd);
  CHECK(s);
  int port = spy_server_port(s);
  uint32_t feat = SPY_FEAT_STATS | SPY_FEAT_REGISTRY;
  spy_consumer *c[3] = {0}; /* 0 stalls; 1 remote, 2 local keep reading */
  spy_consumer_desc ld = {.dir = dir, .features = feat, .recv_bytes = 4u << 20};
  CHECK_OK(remote_consumer(&c[0], port, NULL, feat));
  CHECK_OK(remote_consumer(&c[1], port, NULL, feat));
  CHECK_OK(spy_consumer_create(&c[2], &ld));
  int ok =
      POLL_ALL(c, 3, 20, connected(c[0]) && connected(c[1]) && connected(c[2]));
  CHECK(ok);
  /* c[0] stops reading: its socket and then its queue fill; the bridge
   * drops for it. Wait for /healthz to show it. */
  spy_consumer *others[2] = {c[1], c[2]};
  long long dropped = 0, queued = 0;
  double end = tu_now_s() + 60;
  while (tu_now_s() < end) {
    POLL_ALL(others, 2, 0.3, 0);
    const char *h = healthz(port);
    /* The stalled one is the client with drops; find the largest. */
    dropped = 0;
    for (const char *p = strstr(h, "\"clients\":[");
         p && (p = strstr(p, "{\"id\"")); p++) {
      long long d = json_num(p, NULL, "dropped");
      long long q = json_num(p, NULL, "queued_bytes");
      if (d > dropped) {
        dropped = d;
        queued = q;
      }
    }
    if (dropped > 20)
      break;
  }
  fprintf(stderr, "  stalled client: dropped %lld, queued %lld bytes\n",
          dropped, queued);
  ok &= dropped > 20 && queued <= (long long)sd.queue_bytes;
  /* The others lost nothing meanwhile. */
  for (int i = 1; i < 3; i++)
    ok &= spy_consumer_state(c[i])->frames_lost == 0 &&
          spy_consumer_state(c[i])->samples_lost == 0;
  CHECK(ok);
  /* It reads again: sees the gap, asks for a resync. */
  ok = POLL_ALL(c, 3, 30,
                spy_consumer_state(c[0])->resyncs > 0 &&
                    spy_consumer_state(c[0])->frames_lost > 0);
  CHECK(ok);
  /* Values stop changing; the snapshot after the resync rebuilds the
   * exact state, the same as the consumers that lost nothing. */
  FILE *f = fopen(quiet_file(), "w");
  CHECK(f);
  fclose(f);
  POLL_ALL(c, 3, 2, 0);
  uint64_t snaps = spy_consumer_state(c[0])->snapshots;
  spy_consumer_resync(c[0]); /* and one more, once quiet */
  ok = POLL_ALL(
      c, 3, 20,
      spy_consumer_state(c[0])->snapshots > snaps &&
          same_registry(spy_consumer_state(c[0]), spy_consumer_state(c[2])) &&
          same_registry(spy_consumer_state(c[1]), spy_consumer_state(c[2])));
  fprintf(stderr, "  after: lost %llu resyncs %llu; others lost %llu %llu\n",
          (unsigned long long)spy_consumer_state(c[0])->frames_lost,
          (unsigned long long)spy_consumer_state(c[0])->resyncs,
          (unsigned long long)spy_consumer_state(c[1])->frames_lost,
          (unsigned long long)spy_consumer_state(c[2])->frames_lost);
  ok &= spy_consumer_state(c[1])->frames_lost == 0 &&
        spy_consumer_state(c[2])->frames_lost == 0;
  for (int i = 0; i < 3; i++)
    spy_consumer_destroy(c[i]);
  spy_server_thread_stop(s);
  CHECK(ok);
}

TEST(remote_client_cannot_announce_or_inject_data) {
  fresh_dir();
  spy_server_desc sd = {0};
  spy_server *s = start_server(&sd);
  CHECK(s);
  int port = spy_server_port(s);
  /* A local listener on the discovery channel: it must see only the
   * query, never the announce. */
  spy_channel *disc;
  spy_channel_desc cd = {.name = SPY_DISCOVERY_CHANNEL, .dir = dir};
  CHECK_OK(spy_channel_open(&disc, &cd));
  int fd = tcp_to("127.0.0.1", port);
  CHECK(fd >= 0);
  static uint8_t buf[1 << 16];
  spy_link_rec r;
  CHECK_OK(link_hello(fd, NULL));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_WELCOME);
  CHECK_OK(link_send(fd, SPY_LINK_OPEN, 1, "spyglass", 8));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_OPENED);
  /* A channel the bridge does not serve. */
  CHECK_OK(link_send(fd, SPY_LINK_OPEN, 2, "secret-channel", 14));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_CLOSE);
  CHECK_EQ(r.code, SPY_EACCES);
  uint8_t fr[256], rec[300];
  spy_frame_writer w;
  spy_provider_info fake = {
      .id = 0x1234, .pid = 1, .name = "fake", .name_len = 4};
  uint32_t types[] = {SPY_MSG_PROVIDER_ANNOUNCE, SPY_MSG_DATA,
                      SPY_MSG_PROVIDER_GONE};
  for (int i = 0; i < 3; i++) {
    spy_frame_start(&w, fr, sizeof fr, types[i], 1, 1, 0);
    if (types[i] != SPY_MSG_DATA)
      spy_put_provider(&w, &fake);
    int n = spy_frame_finish(&w);
    uint8_t pre[8] = {0};
    int m = spy_link_encode(rec, sizeof rec, SPY_LINK_FRAME, 1, pre, 8, fr,
                            (size_t)n);
    CHECK(write(fd, rec, (size_t)m) == m);
  }
  /* And an allowed query, which must arrive. */
  spy_frame_start(&w, fr, sizeof fr, SPY_MSG_PROVIDER_QUERY, 1, 1, 0);
  spy_put_peer(&w, 99, 0);
  int n = spy_frame_finish(&w);
  uint8_t pre[8] = {0};
  int m = spy_link_encode(rec, sizeof rec, SPY_LINK_FRAME, 1, pre, 8, fr,
                          (size_t)n);
  CHECK(write(fd, rec, (size_t)m) == m);
  int saw_query = 0, saw_other = 0;
  double end = tu_now_s() + 5;
  while (!saw_query && tu_now_s() < end) {
    uint8_t got[4096];
    int k = spy_channel_recv(disc, got, sizeof got, 100, NULL);
    if (k > 0) {
      uint32_t t = spy_rd32(got + 4);
      saw_query |= t == SPY_MSG_PROVIDER_QUERY;
      saw_other |= t != SPY_MSG_PROVIDER_QUERY;
    }
  }
  const char *h = healthz(port);
  long long disallowed = json_num(h, NULL, "disallowed");
  close(fd);
  spy_channel_close(disc);
  spy_server_thread_stop(s);
  fprintf(stderr, "  disallowed %lld\n", disallowed);
  CHECK(saw_query);
  CHECK(!saw_other);
  CHECK_EQ(disallowed, 4); /* three frames and the channel */
}

/* Posts a consumer message naming consumer `id` on link channel `chan`
 * of a raw link client. */
static int post_as(int fd, uint16_t chan, uint32_t type, uint64_t id,
                   uint32_t features) {
  uint8_t fr[256], rec[300];
  spy_frame_writer w;
  spy_frame_start(&w, fr, sizeof fr, type, 1, 1, 0);
  if (type == SPY_MSG_SUBSCRIBE) {
    spy_subscription sub = {.consumer = id, .features = features};
    spy_put_subscription(&w, &sub);
  } else {
    spy_put_peer(&w, id, features);
  }
  int n = spy_frame_finish(&w);
  uint8_t pre[8] = {0};
  int m = spy_link_encode(rec, sizeof rec, SPY_LINK_FRAME, chan, pre, 8, fr,
                          (size_t)n);
  return n > 0 && m > 0 && write(fd, rec, (size_t)m) == m ? 0 : -1;
}

static int64_t reg_frame(spy_consumer *c) {
  const spy_state_entry *e =
      spy_state_find(&spy_consumer_state(c)->registry, "frame");
  return e && e->has_value ? e->value.v.i : -1;
}

/* Clients of one provider share the bridge's bus handle, so the provider
 * cannot tell them apart by sender: the bridge refuses a client's message
 * naming another consumer's id. Consumer A (remote, stats + registry) and
 * a raw link client B (its own consumer, stats only) on one bridge, and a
 * local consumer L: B's messages for itself pass; B unsubscribing A,
 * re-subscribing A with fewer features, acking and resyncing for A, and
 * unsubscribing L are refused, and A keeps getting its registry (before,
 * the provider dropped A and, with nobody else asking, stopped collecting
 * the registry while A, still getting stats, never noticed). */
TEST(a_client_cannot_speak_for_another_clients_consumer) {
  fresh_dir();
  spawn_provider("net-app", 0);
  spy_server_desc sd = {0};
  spy_server *s = start_server(&sd);
  CHECK(s);
  int port = spy_server_port(s);
  spy_consumer *c[2] = {0};
  CHECK_OK(
      remote_consumer(&c[0], port, NULL, SPY_FEAT_STATS | SPY_FEAT_REGISTRY));
  spy_consumer_desc ld = {.dir = dir, .features = SPY_FEAT_STATS};
  CHECK_OK(spy_consumer_create(&c[1], &ld));
  CHECK(POLL_ALL(c, 2, 20,
                 connected(c[0]) && connected(c[1]) && reg_frame(c[0]) > 0));
  /* L's acks (one a second) pass the bridge's handle: it knows L. */
  double settle = tu_now_s() + 2.5;
  while (tu_now_s() < settle)
    POLL_ALL(c, 2, 0.1, 0);
  uint64_t a = spy_consumer_id(c[0]), l = spy_consumer_id(c[1]);
  long long before = json_num(healthz(port), NULL, "disallowed");
  int fd = tcp_to("127.0.0.1", port);
  CHECK(fd >= 0);
  static uint8_t buf[1 << 16];
  spy_link_rec r;
  CHECK_OK(link_hello(fd, NULL));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_WELCOME);
  char name[64];
  snprintf(name, sizeof name, "spyglass:%016llx",
           (unsigned long long)spy_consumer_state(c[0])->provider.id);
  CHECK_OK(link_send(fd, SPY_LINK_OPEN, 1, name, strlen(name)));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_OPENED);
  uint64_t b = 0xb0b0b0b0b0b0ull;
  CHECK_OK(post_as(fd, 1, SPY_MSG_SUBSCRIBE, b, SPY_FEAT_STATS));
  CHECK_OK(post_as(fd, 1, SPY_MSG_ACK, b, SPY_FEAT_STATS));
  CHECK_OK(post_as(fd, 1, SPY_MSG_UNSUBSCRIBE, a, 0));
  CHECK_OK(post_as(fd, 1, SPY_MSG_SUBSCRIBE, a, SPY_FEAT_STATS));
  CHECK_OK(post_as(fd, 1, SPY_MSG_ACK, a, 0));
  CHECK_OK(post_as(fd, 1, SPY_MSG_RESYNC, a, 0));
  CHECK_OK(post_as(fd, 1, SPY_MSG_UNSUBSCRIBE, l, 0));
  CHECK_OK(post_as(fd, 1, SPY_MSG_ACK, b, SPY_FEAT_STATS));
  /* The bridge has read them once the refusals are counted. */
  long long refused = 0;
  double end = tu_now_s() + 10;
  while ((refused = json_num(healthz(port), NULL, "disallowed") - before) < 5 &&
         tu_now_s() < end)
    POLL_ALL(c, 2, 0.1, 0);
  fprintf(stderr, "  refused %lld of B's messages\n", refused);
  /* Had A been dropped, its registry would stop here: it keeps coming. */
  POLL_ALL(c, 2, 1.0, 0);
  int64_t v0 = reg_frame(c[0]);
  int fresh = POLL_ALL(c, 2, 20, reg_frame(c[0]) > v0 + 5);
  fprintf(stderr, "  A's registry frame %lld then %lld\n", (long long)v0,
          (long long)reg_frame(c[0]));
  /* B's own unsubscribe passes. */
  CHECK_OK(post_as(fd, 1, SPY_MSG_UNSUBSCRIBE, b, 0));
  POLL_ALL(c, 2, 0.3, 0);
  long long after = json_num(healthz(port), NULL, "disallowed") - before;
  close(fd);
  for (int i = 0; i < 2; i++)
    spy_consumer_destroy(c[i]);
  spy_server_thread_stop(s);
  CHECK_EQ(refused, 5);
  CHECK_EQ(after, 5);
  CHECK(fresh);
}

TEST(http_checks_host_origin_and_token) {
  fresh_dir();
  spy_server_desc sd = {.token = "0123456789abcdef0123456789abcdef",
                        .allow_origins =
                            (const char *const[]){"https://dash.example"},
                        .n_allow_origins = 1};
  spy_server *s = start_server(&sd);
  CHECK(s);
  int port = spy_server_port(s);
  char req[1024];
  CHECK(strstr(http_get(port, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
               "200 OK"));
  CHECK(strstr(healthz(port), "\"status\":\"ok\""));
  /* DNS rebinding: an unknown name. */
  CHECK(strstr(http_get(port, "GET /healthz HTTP/1.1\r\nHost: evil.example"
                              "\r\n\r\n"),
               "403 Forbidden"));
  CHECK(strstr(out, "Host"));
  /* No Host at all. */
  CHECK(strstr(http_get(port, "GET / HTTP/1.1\r\n\r\n"), "403"));
  const char *ws = "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  /* Our own origin: upgraded, the accept key of RFC 6455's example. */
  snprintf(req, sizeof req,
           "GET /link HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Origin: http://127.0.0.1:%d\r\n%s\r\n",
           port, port, ws);
  int fd = tcp_to("127.0.0.1", port);
  CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
  char ans[512] = {0};
  CHECK(read(fd, ans, sizeof ans - 1) > 0);
  close(fd);
  CHECK(strstr(ans, "101 Switching Protocols"));
  CHECK(strstr(ans, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
  /* Cross-site WebSocket hijacking: a foreign page. */
  snprintf(req, sizeof req,
           "GET /link HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Origin: http://evil.example\r\n%s\r\n",
           port, ws);
  CHECK(strstr(http_get(port, req), "403 Forbidden"));
  CHECK(strstr(out, "Origin"));
  /* An allowed foreign origin still needs the token... */
  snprintf(req, sizeof req,
           "GET /link HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Origin: https://dash.example\r\n%s\r\n",
           port, ws);
  CHECK(strstr(http_get(port, req), "403 Forbidden"));
  CHECK(strstr(out, "token"));
  /* ...and with it is upgraded; a wrong one is refused. */
  snprintf(req, sizeof req,
           "GET /link?token=0123456789abcdef0123456789abcdef HTTP/1.1\r\n"
           "Host: 127.0.0.1:%d\r\nOrigin: https://dash.example\r\n%s\r\n",
           port, ws);
  fd = tcp_to("127.0.0.1", port);
  CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
  memset(ans, 0, sizeof ans);
  CHECK(read(fd, ans, sizeof ans - 1) > 0);
  close(fd);
  CHECK(strstr(ans, "101 Switching Protocols"));
  snprintf(req, sizeof req,
           "GET /link?token=wrongwrongwrongwrong HTTP/1.1\r\n"
           "Host: 127.0.0.1:%d\r\nOrigin: https://dash.example\r\n%s\r\n",
           port, ws);
  CHECK(strstr(http_get(port, req), "403 Forbidden"));
  /* A request head beyond the bound. */
  static char big[20000];
  memset(big, 'a', sizeof big);
  memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
  memcpy(big + sizeof big - 5, "\r\n\r\n", 5);
  CHECK(strstr(http_get(port, big), "431"));
  spy_server_thread_stop(s);
}

TEST(link_token_checked_and_required_off_loopback) {
  fresh_dir();
  const char *tok = "0123456789abcdef0123456789abcdef";
  spy_server_desc sd = {.token = tok, .listen = "0.0.0.0:0"};
  spy_server *s = start_server(&sd);
  CHECK(s);
  int port = spy_server_port(s);
  static uint8_t buf[4096];
  spy_link_rec r;
  /* Loopback: no token needed, a wrong one refused. */
  int fd = tcp_to("127.0.0.1", port);
  CHECK_OK(link_hello(fd, NULL));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_WELCOME);
  close(fd);
  fd = tcp_to("127.0.0.1", port);
  CHECK_OK(link_hello(fd, "wrongwrongwrongwrongwrong"));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_ERROR);
  CHECK_EQ(r.code, SPY_EACCES);
  close(fd);
  /* The consumer API reports it. */
  spy_consumer *c = NULL;
  CHECK_EQ(remote_consumer(&c, port, "wrongwrongwrongwrongwrong", 0),
           SPY_EACCES);
  /* From this host's own non-loopback address, if it has one. */
  struct ifaddrs *ifs, *i;
  char ip[INET_ADDRSTRLEN] = "";
  if (getifaddrs(&ifs) == 0) {
    for (i = ifs; i && !ip[0]; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)i->ifa_addr;
        if ((ntohl(a->sin_addr.s_addr) >> 24) != 127)
          inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
      }
    freeifaddrs(ifs);
  }
  if (ip[0]) {
    fd = tcp_to(ip, port);
    CHECK(fd >= 0);
    CHECK_OK(link_hello(fd, NULL));
    CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_ERROR);
    CHECK_EQ(r.code, SPY_EACCES);
    close(fd);
    fd = tcp_to(ip, port);
    CHECK_OK(link_hello(fd, tok));
    CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_WELCOME);
    close(fd);
    /* HTTP too. */
    fd = tcp_to(ip, port);
    const char *req = "GET /healthz HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n";
    CHECK(write(fd, req, strlen(req)) > 0);
    char ans[256] = {0};
    CHECK(read(fd, ans, sizeof ans - 1) > 0);
    close(fd);
    CHECK(strstr(ans, "403"));
  } else {
    fprintf(stderr, "  no non-loopback IPv4 address: that part not run\n");
  }
  spy_server_thread_stop(s);
}

TEST(non_loopback_listen_without_token_is_refused) {
  fresh_dir();
  spy_server_desc sd = {.listen = "0.0.0.0:0", .log = quiet_log};
  spy_server *s = NULL;
  CHECK_EQ(spy_server_create(&s, &sd), SPY_EINVAL);
  CHECK(!s);
}

TEST(clock_sync_over_the_link) {
  fresh_dir();
  spawn_provider("net-app", 0);
  spy_server_desc sd = {0};
  spy_server *s = start_server(&sd);
  CHECK(s);
  spy_consumer *c;
  CHECK_OK(remote_consumer(&c, spy_server_port(s), NULL, 0));
  int ok =
      POLL_UNTIL(c, 20, connected(c) && spy_consumer_state(c)->clock_synced);
  const spy_state *st = spy_consumer_state(c);
  fprintf(stderr, "  offset %lld ns rtt %lld ns rounds %u\n",
          (long long)st->clock_offset_ns, (long long)st->clock_rtt_ns,
          st->clock_rounds);
  /* Same host, same clock: the offset is within the round trip. */
  ok &= st->clock_rounds == SPY_CLOCK_DEFAULT_ROUNDS && st->clock_rtt_ns > 0 &&
        llabs(st->clock_offset_ns) <= st->clock_rtt_ns + 1000000;
  ok &= spy_consumer_clock_sync(c) == 0 && st->clock_syncs >= 2;
  spy_consumer_destroy(c);
  spy_server_thread_stop(s);
  CHECK(ok);
}

TEST(consumer_without_a_remote_backend_is_not_supported) {
  fresh_dir();
  spy_channel_set_remote(NULL);
  spy_consumer *c = NULL;
  spy_consumer_desc d = {.dir = dir, .connect = "127.0.0.1:1"};
  CHECK_EQ(spy_consumer_create(&c, &d), SPY_ENOTSUP);
  spy_net_register();
  CHECK(spy_channel_remote() == spy_net_channel_ops());
  /* Nothing listens on port 1. */
  CHECK_EQ(spy_consumer_create(&c, &d), SPY_ECONNREFUSED);
}

/* Reads until the server closes (1) or 10 s pass (0). */
static int closed_by_server(int fd) {
  char b[512];
  double end = tu_now_s() + 10;
  while (tu_now_s() < end) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, 100) > 0 && read(fd, b, sizeof b) <= 0)
      return 1;
  }
  return 0;
}

TEST(slow_handshakes_and_idle_links_are_closed) {
  fresh_dir();
  spy_server_desc sd = {.handshake_ms = 300, .idle_ms = 600};
  spy_server *s = start_server(&sd);
  CHECK(s);
  int port = spy_server_port(s);
  /* Slowloris: a request head that never ends. */
  int fd = tcp_to("127.0.0.1", port);
  CHECK(write(fd, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", 33) == 33);
  CHECK(closed_by_server(fd));
  close(fd);
  /* A link that never says HELLO. */
  fd = tcp_to("127.0.0.1", port);
  CHECK(closed_by_server(fd));
  close(fd);
  /* A link that says HELLO and then nothing. */
  static uint8_t buf[4096];
  spy_link_rec r;
  fd = tcp_to("127.0.0.1", port);
  CHECK_OK(link_hello(fd, NULL));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_WELCOME);
  CHECK(closed_by_server(fd));
  close(fd);
  const char *h = healthz(port);
  CHECK_EQ(json_num(h, NULL, "n_clients"), 1); /* the /healthz request */
  spy_server_thread_stop(s);
}

/* A provider process with its own server; it writes its id and port. */
static void inproc_main(void) {
  spy_net_register();
  spy_provider_desc d = {
      .name = "inproc", .dir = dir, .flush_ms = 50, .listen = "127.0.0.1:0"};
  spy_provider *p;
  int rc = spy_provider_create(&p, &d);
  char path[300];
  snprintf(path, sizeof path, "%s/inproc.port", dir);
  FILE *f = fopen(path, "w");
  fprintf(f, "%d %016llx\n", rc < 0 ? rc : spy_provider_listen_port(p),
          rc < 0 ? 0ull : (unsigned long long)spy_provider_id(p));
  fclose(f);
  if (rc < 0)
    _exit(3);
  for (uint64_t fr = 1;; fr++) {
    spy_frame_begin(p);
    spy_value_set_i64(p, "frame", (int64_t)fr);
    spy_frame_end(p);
    usleep(2000);
  }
}

TEST(in_process_server_serves_its_provider_only) {
  fresh_dir();
  spy_provider_set_listen_hook(NULL); /* as in an app without spyglass_net */
  spy_provider *np = NULL;
  spy_provider_desc nd = {.dir = dir, .listen = "127.0.0.1:0"};
  CHECK_EQ(spy_provider_create(&np, &nd), SPY_ENOTSUP);
  spawn_provider("other-app", 0); /* on the same bus: not served */
  pid_t pid = tu_fork();
  if (pid == 0)
    inproc_main();
  char path[300];
  snprintf(path, sizeof path, "%s/inproc.port", dir);
  int port = 0;
  char id[17] = "";
  for (double end = tu_now_s() + 10; tu_now_s() < end && port == 0;
       usleep(20000)) {
    FILE *f = fopen(path, "r");
    if (f) {
      if (fscanf(f, "%d %16s", &port, id) != 2)
        port = 0;
      fclose(f);
    }
  }
  CHECK(port > 0);
  spy_consumer *c;
  CHECK_OK(remote_consumer(&c, port, NULL, 0));
  int ok = POLL_UNTIL(c, 20, connected(c));
  char got[17];
  snprintf(got, sizeof got, "%016llx",
           (unsigned long long)spy_consumer_state(c)->provider.id);
  ok &= strcmp(got, id) == 0 &&
        strcmp(spy_consumer_state(c)->provider_name, "inproc") == 0;
  spy_consumer_destroy(c);
  /* The other provider's channel is not served. */
  spy_consumer *l;
  spy_consumer_desc ld = {.dir = dir, .want = "other-app"};
  CHECK_OK(spy_consumer_create(&l, &ld));
  ok &= POLL_UNTIL(l, 20, connected(l));
  char other[64];
  snprintf(other, sizeof other, "spyglass:%016llx",
           (unsigned long long)spy_consumer_state(l)->provider.id);
  spy_consumer_destroy(l);
  int fd = tcp_to("127.0.0.1", port);
  static uint8_t buf[4096];
  spy_link_rec r;
  CHECK_OK(link_hello(fd, NULL));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_WELCOME);
  CHECK_OK(link_send(fd, SPY_LINK_OPEN, 1, other, strlen(other)));
  CHECK_EQ(link_read(fd, buf, sizeof buf, &r), SPY_LINK_CLOSE);
  CHECK_EQ(r.code, SPY_EACCES);
  close(fd);
  CHECK(ok);
}

/* A frame of `len` bytes carrying (tag, n) in its section. */
static int tagged_frame(uint8_t *b, size_t len, uint32_t tag, uint32_t n) {
  spy_frame_writer w;
  spy_frame_start(&w, b, len, SPY_MSG_DATA, 0, 0, 0);
  spy_frame_section_begin(&w, 200);
  size_t room = len - SPY_FRAME_MIN - SPY_SECTION_HEADER_BYTES;
  uint8_t *p = spy_frame_reserve(&w, room);
  if (!p)
    return -1;
  memset(p, 0x5a, room);
  spy_wr32(p, tag);
  spy_wr32(p + 4, n);
  return spy_frame_finish(&w);
}

/* Posts probes on tx until rx receives one (the bridge has opened the
 * name); 1 if it did within 10 s. */
static int relayed(spy_channel *tx, spy_channel *rx, uint8_t *f, int len) {
  static uint8_t got[1 << 17];
  for (double end = tu_now_s() + 10; tu_now_s() < end;) {
    spy_channel_post(tx, f, (size_t)len);
    if (spy_channel_recv(rx, got, sizeof got, 20, NULL) == len)
      return 1;
  }
  return 0;
}

/* Frames that arrive in one read are handed out one receive at a time from
 * the link's buffer; what is still buffered there is sorted by the next
 * read of any kind, so another channel's frames behind them are seen by a
 * wait and come in order. */
TEST(a_burst_over_one_link_reaches_both_channels_in_order) {
  fresh_dir();
  spy_server_desc sd = {0};
  spy_server *s = start_server(&sd);
  CHECK(s);
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", spy_server_port(s));
  const spy_channel_ops *ops = spy_net_channel_ops();
  void *link = NULL;
  CHECK_OK(ops->link_open(&link, addr, NULL));
  const char *names[2] = {"spyglass:00000000000000a1",
                          "spyglass:00000000000000a2"};
  spy_channel *rx[2], *tx[2];
  static uint8_t f[16384], got[1 << 17];
  for (int k = 0; k < 2; k++) {
    spy_channel_desc rd = {.name = names[k], .ops = ops, .ops_arg = link};
    CHECK_OK(spy_channel_open(&rx[k], &rd));
    spy_channel_desc td = {.name = names[k], .dir = dir};
    CHECK_OK(spy_channel_open(&tx[k], &td));
    int len = tagged_frame(f, 256, 9, 0);
    CHECK(relayed(tx[k], rx[k], f, len));
    while (spy_channel_recv(rx[k], got, sizeof got, 50, NULL) > 0)
      ; /* late probes */
  }
  /* 40 frames of 16 KiB on the first name, then 5 small ones on the
   * second, posted back to back: the link reads them in a few large
   * pieces, the second name's behind the first's last. */
  for (uint32_t i = 0; i < 40; i++) {
    int len = tagged_frame(f, sizeof f, 1, i);
    CHECK_OK(spy_channel_post(tx[0], f, (size_t)len));
  }
  for (uint32_t i = 0; i < 5; i++) {
    int len = tagged_frame(f, 128, 2, i);
    CHECK_OK(spy_channel_post(tx[1], f, (size_t)len));
  }
  usleep(100000); /* all relayed: the last reads take them together */
  uint32_t next = 0;
  int bad = 0;
  while (next < 40) {
    int n = spy_channel_recv(rx[0], got, sizeof got, 5000, NULL);
    if (n != (int)sizeof f)
      break;
    const uint8_t *p = got + SPY_FRAME_MIN + SPY_SECTION_HEADER_BYTES;
    bad += spy_rd32(p) != 1 || spy_rd32(p + 4) != next;
    next++;
  }
  CHECK_EQ(next, 40);
  CHECK_EQ(bad, 0);
  /* The second name's frames: a wait sees them, they come in order. */
  CHECK_EQ(spy_channel_wait(rx[1], 5000), 1);
  for (uint32_t i = 0; i < 5; i++) {
    int n = spy_channel_recv(rx[1], got, sizeof got, 5000, NULL);
    CHECK_EQ(n, 128);
    const uint8_t *p = got + SPY_FRAME_MIN + SPY_SECTION_HEADER_BYTES;
    CHECK_EQ(spy_rd32(p), 2);
    CHECK_EQ(spy_rd32(p + 4), i);
  }
  spy_channel_stats st;
  spy_channel_get_stats(rx[0], &st);
  CHECK_EQ(st.lost, 0);
  for (int k = 0; k < 2; k++) {
    spy_channel_close(rx[k]);
    spy_channel_close(tx[k]);
  }
  ops->link_close(link);
  spy_server_thread_stop(s);
}

TEST_MAIN(TEST_CASE(link_records_round_trip_and_bad_ones_are_refused),
          TEST_CASE(two_remote_and_one_local_consumer_all_get_everything),
          TEST_CASE(clients_of_one_channel_share_one_bus_handle),
          TEST_CASE(remote_consumer_of_a_killed_provider_picks_up_a_new_one),
          TEST_CASE(stalled_client_drops_alone_and_resyncs_to_the_exact_state),
          TEST_CASE(remote_client_cannot_announce_or_inject_data),
          TEST_CASE(a_client_cannot_speak_for_another_clients_consumer),
          TEST_CASE(http_checks_host_origin_and_token),
          TEST_CASE(link_token_checked_and_required_off_loopback),
          TEST_CASE(non_loopback_listen_without_token_is_refused),
          TEST_CASE(clock_sync_over_the_link),
          TEST_CASE(consumer_without_a_remote_backend_is_not_supported),
          TEST_CASE(in_process_server_serves_its_provider_only),
          TEST_CASE(slow_handshakes_and_idle_links_are_closed),
          TEST_CASE(a_burst_over_one_link_reaches_both_channels_in_order))
