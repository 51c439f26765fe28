/* bench_serve.c — `spyglass bench serve`: the bridge (spyglass/net.h) in a
 * process of its own, against baselines measured in the same run:
 *   - post → receive latency from a bus post to a remote consumer's link,
 *     against the direct bus latency plus one bare loopback TCP hop;
 *   - 64 KiB frames to one TCP client, against a plain loopback TCP socket
 *     pair;
 *   - the bridge's CPU per relayed MB with 1, 4 and 16 clients (it relays
 *     the same bytes; nothing is re-encoded);
 *   - the bridge's RSS while one client does not read for 60 s (5 with
 *     --quick): bounded by its send queue.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "platform/platform.h"
#include "spyglass/bus.h"
#include "spyglass/net.h"
#include "spyglass/wire.h"

#define CHAN "spyglass:00000000000000be"
#define BIG (64u * 1024u)
#define WINDOW 24
#define MAX_CLIENTS 16

static char dir[128];
static int port;
static pid_t bridge;

/* ---- the bridge process ------------------------------------------------- */

static void quiet(void *arg, const char *line) {
  (void)arg;
  (void)line;
}

static void start_bridge(void) {
  int p[2];
  if (pipe(p) < 0)
    exit(1);
  bridge = fork();
  if (bridge == 0) {
    close(p[0]);
    spy_server_desc d = {.listen = "127.0.0.1:0", .dir = dir, .log = quiet};
    spy_server *s;
    int rc = spy_server_create(&s, &d);
    int pt = rc < 0 ? rc : spy_server_port(s);
    if (write(p[1], &pt, sizeof pt) != sizeof pt || rc < 0)
      _exit(1);
    close(p[1]);
    spy_server_run(s, -1);
    _exit(0);
  }
  close(p[1]);
  if (read(p[0], &port, sizeof port) != sizeof port || port <= 0) {
    fprintf(stderr, "bench serve: the bridge did not start\n");
    exit(1);
  }
  close(p[0]);
}

/* CPU (ns) and RSS (bytes) of a process, from /proc. */
static double proc_cpu_ns(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return NAN;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  unsigned long ut = 0, st = 0;
  /* fields after ")": state(3) … utime(14) stime(15) */
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                   &ut, &st) != 2)
    return NAN;
  return (double)(ut + st) * 1e9 / (double)sysconf(_SC_CLK_TCK);
}

static double proc_rss(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  double kb = NAN;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0)
      kb = atof(line + 6);
  if (f)
    fclose(f);
  return kb * 1024;
}

/* ---- frames -------------------------------------------------------------- */

/* A valid frame of `len` bytes whose section carries a timestamp. */
static int make_frame(uint8_t *b, size_t len, uint32_t seq) {
  spy_frame_writer w;
  spy_frame_start(&w, b, len, SPY_MSG_DATA, 0, seq, 0);
  spy_frame_section_begin(&w, 200);
  size_t room = len - SPY_FRAME_MIN - SPY_SECTION_HEADER_BYTES;
  void *p = spy_frame_reserve(&w, room);
  if (p)
    memset(p, 0x5a, room);
  return spy_frame_finish(&w);
}

static void stamp(uint8_t *frame, uint64_t t) {
  spy_wr64(frame + SPY_FRAME_MIN + SPY_SECTION_HEADER_BYTES, t);
}
static uint64_t stamp_of(const uint8_t *frame) {
  return spy_rd64(frame + SPY_FRAME_MIN + SPY_SECTION_HEADER_BYTES);
}

static spy_channel *open_local(void) {
  spy_channel *ch = NULL;
  spy_channel_desc d = {.name = CHAN, .ring_bytes = 4u << 20, .dir = dir};
  if (spy_channel_open(&ch, &d) < 0)
    exit(1);
  return ch;
}

typedef struct remote {
  void *link;
  spy_channel *ch;
} remote;

static void open_remote(remote *r) {
  const spy_channel_ops *ops = spy_net_channel_ops();
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  if (ops->link_open(&r->link, addr, NULL) < 0) {
    fprintf(stderr, "bench serve: cannot connect to the bridge\n");
    exit(1);
  }
  spy_channel_desc d = {.name = CHAN, .ops = ops, .ops_arg = r->link};
  if (spy_channel_open(&r->ch, &d) < 0)
    exit(1);
}

static void close_remote(remote *r) {
  spy_channel_close(r->ch);
  spy_net_channel_ops()->link_close(r->link);
}

/* ---- latency ------------------------------------------------------------- */

static double p_of(double *v, int n, double q) {
  return bench_quantile(v, (size_t)n, q);
}

/* Post one small frame, wait for it at `rx`; n samples. */
static void latency(spy_channel *tx, spy_channel *rx, int n, double *out) {
  static uint8_t f[256], got[4096];
  int len = make_frame(f, 128, 0);
  for (int i = 0; i < n; i++) {
    stamp(f, bench_now_ns());
    spy_channel_post(tx, f, (size_t)len);
    for (;;) {
      int r = spy_channel_recv(rx, got, sizeof got, 1000, NULL);
      if (r == len && stamp_of(got) == stamp_of(f))
        break;
      if (r == SPY_EAGAIN)
        break;
    }
    out[i] = (double)(bench_now_ns() - stamp_of(f));
    usleep(500);
  }
}

static void tcp_pair(int fds[2]) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  bind(l, (struct sockaddr *)&a, sizeof a);
  listen(l, 1);
  getsockname(l, (struct sockaddr *)&a, &al);
  fds[0] = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fds[0], (struct sockaddr *)&a, sizeof a) < 0)
    exit(1);
  fds[1] = accept(l, NULL, NULL);
  close(l);
  int one = 1;
  setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void tcp_latency(int n, double *out) {
  int fds[2];
  tcp_pair(fds);
  uint8_t b[136];
  for (int i = 0; i < n; i++) {
    uint64_t t = bench_now_ns();
    memcpy(b, &t, 8);
    if (write(fds[0], b, sizeof b) != sizeof b)
      exit(1);
    size_t got = 0;
    while (got < sizeof b) {
      ssize_t r = read(fds[1], b + got, sizeof b - got);
      if (r <= 0)
        exit(1);
      got += (size_t)r;
    }
    out[i] = (double)(bench_now_ns() - t);
    usleep(500);
  }
  close(fds[0]);
  close(fds[1]);
}

/* The baselines with a wake-up, as the bridge path has them: the
 * receiver is another process asleep in its receive (the bus reader in
 * spy_channel_recv, the TCP reader in read), so each hop includes waking
 * it, like the bridge's own hop and the link's. It records arrival −
 * stamp into shared memory. */
typedef struct woken {
  _Atomic uint32_t ready, n;
  double ns[2000];
} woken;

static woken *woken_map(void) {
  woken *w = mmap(NULL, sizeof *w, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (w == MAP_FAILED)
    exit(1);
  memset(w, 0, sizeof *w);
  return w;
}

/* Copies the samples the receiver recorded; returns how many. */
static int woken_collect(woken *w, int n, double *out) {
  uint32_t got = atomic_load(&w->n);
  int k = (int)got < n ? (int)got : n;
  memcpy(out, w->ns, (size_t)k * sizeof *out);
  munmap(w, sizeof *w);
  return k;
}

static int bus_woken(spy_channel *tx, int n, double *out) {
  woken *w = woken_map();
  pid_t kid = fork();
  if (kid == 0) {
    spy_channel *rx = open_local();
    atomic_store(&w->ready, 1);
    static uint8_t got[4096];
    for (;;) {
      int r = spy_channel_recv(rx, got, sizeof got, 5000, NULL);
      if (r == SPY_EAGAIN)
        break;
      if (r <= 0)
        continue;
      uint64_t now = bench_now_ns(), t = stamp_of(got);
      if (t == UINT64_MAX)
        break;
      uint32_t i = atomic_fetch_add(&w->n, 1);
      if (i < 2000)
        w->ns[i] = (double)(now - t);
    }
    spy_channel_close(rx);
    _exit(0);
  }
  while (!atomic_load(&w->ready))
    usleep(1000);
  usleep(20000);
  static uint8_t f[256];
  int len = make_frame(f, 128, 0);
  for (int i = 0; i < n; i++) {
    stamp(f, bench_now_ns());
    spy_channel_post(tx, f, (size_t)len);
    usleep(500);
  }
  usleep(20000);
  stamp(f, UINT64_MAX);
  spy_channel_post(tx, f, (size_t)len);
  waitpid(kid, NULL, 0);
  return woken_collect(w, n, out);
}

static int tcp_woken(int n, double *out) {
  int fds[2];
  tcp_pair(fds);
  woken *w = woken_map();
  pid_t kid = fork();
  if (kid == 0) {
    close(fds[0]);
    atomic_store(&w->ready, 1);
    uint8_t b[136];
    for (;;) {
      size_t got = 0;
      while (got < sizeof b) {
        ssize_t r = read(fds[1], b + got, sizeof b - got);
        if (r <= 0)
          _exit(0);
        got += (size_t)r;
      }
      uint64_t now = bench_now_ns(), t;
      memcpy(&t, b, 8);
      uint32_t i = atomic_fetch_add(&w->n, 1);
      if (i < 2000)
        w->ns[i] = (double)(now - t);
    }
  }
  close(fds[1]);
  while (!atomic_load(&w->ready))
    usleep(1000);
  usleep(20000);
  uint8_t b[136] = {0};
  for (int i = 0; i < n; i++) {
    uint64_t t = bench_now_ns();
    memcpy(b, &t, 8);
    if (write(fds[0], b, sizeof b) != sizeof b)
      exit(1);
    usleep(500);
  }
  close(fds[0]);
  waitpid(kid, NULL, 0);
  return woken_collect(w, n, out);
}

/* ---- throughput and CPU -------------------------------------------------- */

/* Flow control: the poster sleeps on `progress` (bumped by every receive)
 * while the window is full, as a writer to a full socket sleeps in write;
 * spinning in sched_yield instead took the CPU the bridge and the
 * receivers need (three threads on two cores). */
static _Atomic uint32_t progress, poster_asleep;

static void wait_progress(uint32_t seen) {
  atomic_store(&poster_asleep, 1);
  if (atomic_load(&progress) == seen)
    spy__futex_wait((uint32_t *)&progress, seen, 1000000);
  atomic_store(&poster_asleep, 0);
}

typedef struct rx_arg {
  remote r;
  _Atomic uint64_t got;
  _Atomic int stop;
} rx_arg;

static void *rx_main(void *arg) {
  rx_arg *a = arg;
  static _Thread_local uint8_t buf[BIG + 64];
  while (!atomic_load(&a->stop)) {
    int r = spy_channel_recv(a->r.ch, buf, sizeof buf, 50, NULL);
    if (r > 0) {
      atomic_fetch_add(&a->got, 1);
      atomic_fetch_add(&progress, 1);
      if (atomic_load(&poster_asleep))
        spy__futex_wake((uint32_t *)&progress, 1);
    }
  }
  return NULL;
}

/* Posts `frames` 64 KiB frames to n remote clients, each kept within
 * WINDOW frames of the slowest; returns the wall time (ns) and the bridge
 * CPU (ns) meanwhile. */
static void relay(int nclients, int frames, double *wall, double *cpu) {
  static rx_arg a[MAX_CLIENTS];
  pthread_t th[MAX_CLIENTS];
  spy_channel *tx = open_local();
  for (int i = 0; i < nclients; i++) {
    memset(&a[i], 0, sizeof a[i]);
    open_remote(&a[i].r);
    pthread_create(&th[i], NULL, rx_main, &a[i]);
  }
  static uint8_t f[BIG];
  int len = make_frame(f, BIG, 0);
  double c0 = proc_cpu_ns(bridge);
  uint64_t t0 = bench_now_ns();
  for (int k = 0; k < frames; k++) {
    for (;;) {
      uint32_t seen = atomic_load(&progress);
      uint64_t slow = UINT64_MAX;
      for (int i = 0; i < nclients; i++) {
        uint64_t g = atomic_load(&a[i].got);
        slow = g < slow ? g : slow;
      }
      if ((uint64_t)k < slow + WINDOW)
        break;
      wait_progress(seen);
    }
    spy_channel_post(tx, f, (size_t)len);
  }
  for (int i = 0; i < nclients; i++) {
    uint64_t end = bench_now_ns() + 5000000000ull;
    for (;;) {
      uint32_t seen = atomic_load(&progress);
      if (atomic_load(&a[i].got) >= (uint64_t)frames || bench_now_ns() >= end)
        break;
      wait_progress(seen);
    }
  }
  *wall = (double)(bench_now_ns() - t0);
  *cpu = proc_cpu_ns(bridge) - c0;
  for (int i = 0; i < nclients; i++) {
    atomic_store(&a[i].stop, 1);
    pthread_join(th[i], NULL);
    close_remote(&a[i].r);
  }
  spy_channel_close(tx);
}

static double tcp_throughput(int frames) {
  int fds[2];
  tcp_pair(fds);
  static uint8_t b[BIG];
  pid_t kid = fork();
  if (kid == 0) {
    size_t want = (size_t)frames * BIG, got = 0;
    while (got < want) {
      ssize_t r = read(fds[1], b, sizeof b);
      if (r <= 0)
        _exit(1);
      got += (size_t)r;
    }
    _exit(0);
  }
  uint64_t t0 = bench_now_ns();
  for (int k = 0; k < frames; k++) {
    size_t off = 0;
    while (off < BIG) {
      ssize_t w = write(fds[0], b + off, BIG - off);
      if (w <= 0)
        exit(1);
      off += (size_t)w;
    }
  }
  waitpid(kid, NULL, 0);
  double ns = (double)(bench_now_ns() - t0);
  close(fds[0]);
  close(fds[1]);
  return (double)frames * BIG / (ns / 1e9) / 1e6;
}

/* One client opens the channel and never reads; frames keep coming. */
static void stalled(double seconds, double *rss0, double *rss_max,
                    double *rss_end) {
  spy_channel *tx = open_local();
  remote r;
  open_remote(&r);
  static uint8_t f[BIG];
  int len = make_frame(f, BIG, 0);
  *rss0 = proc_rss(bridge);
  *rss_max = *rss0;
  uint64_t end = bench_now_ns() + (uint64_t)(seconds * 1e9);
  while (bench_now_ns() < end) {
    for (int i = 0; i < 16; i++)
      spy_channel_post(tx, f, (size_t)len); /* 1 MiB per 10 ms: 100 MB/s */
    usleep(10000);
    double m = proc_rss(bridge);
    if (m > *rss_max)
      *rss_max = m;
  }
  *rss_end = proc_rss(bridge);
  close_remote(&r);
  spy_channel_close(tx);
}

int bench_serve(int argc, char **argv) {
  bench_opts o;
  int rc = bench_parse(argc, argv, &o,
                       "usage: spyglass bench serve [--json] [--quick]\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  signal(SIGPIPE, SIG_IGN);
  if (bench_tempdir(dir, sizeof dir) < 0)
    return 1;
  /* SPY_BENCH_SERVE_CASES=latency,tput,cpu,rss selects parts (profiling). */
  const char *cases = getenv("SPY_BENCH_SERVE_CASES");
  if (!cases)
    cases = "latency,tput,cpu,rss";
  start_bridge();
  double wall, cpu;
  if (strstr(cases, "latency")) {
    int nlat = o.quick ? 200 : 2000;
    static double lr[2000], lb[2000], lt[2000], lbw[2000], ltw[2000];
    /* Through the bridge and the baselines in turn, in 4 rounds, so that
     * a change of load meets every path alike. */
    int per = nlat / 4, nbw = 0, ntw = 0;
    spy_channel *tx = open_local();
    for (int k = 0; k < 4; k++) {
      remote r;
      open_remote(&r);
      latency(tx, r.ch, per, lr + k * per);
      close_remote(&r);
      nbw += bus_woken(tx, per, lbw + nbw);
      ntw += tcp_woken(per, ltw + ntw);
      spy_channel *rx = open_local();
      latency(tx, rx, per, lb + k * per);
      spy_channel_close(rx);
      tcp_latency(per, lt + k * per);
    }
    spy_channel_close(tx);
    nlat = 4 * per;
    double r50 = p_of(lr, nlat, 0.5), r99 = p_of(lr, nlat, 0.99);
    double b50 = p_of(lb, nlat, 0.5), b99 = p_of(lb, nlat, 0.99);
    double t50 = p_of(lt, nlat, 0.5), t99 = p_of(lt, nlat, 0.99);
    double bw50 = p_of(lbw, nbw, 0.5), bw99 = p_of(lbw, nbw, 0.99);
    double tw50 = p_of(ltw, ntw, 0.5), tw99 = p_of(ltw, ntw, 0.99);
    bench_table t = {.title = "bench serve: post -> remote receive latency "
                              "(loopback TCP, bridge in its own process)",
                     .cols = {"path", "p50_us", "p99_us", "p50_vs_sum",
                              "p50_vs_sum_no_wake"},
                     .ncols = 5};
    bench_row(&t, "bus -> bridge -> link",
              (double[]){r50 / 1e3, r99 / 1e3, r50 / (bw50 + tw50),
                         r50 / (b50 + t50)});
    bench_row(&t, "bus, reader asleep (baseline)",
              (double[]){bw50 / 1e3, bw99 / 1e3, NAN, NAN});
    bench_row(&t, "TCP hop, reader asleep (base)",
              (double[]){tw50 / 1e3, tw99 / 1e3, NAN, NAN});
    bench_row(&t, "bus, same thread, no wake",
              (double[]){b50 / 1e3, b99 / 1e3, NAN, NAN});
    bench_row(&t, "TCP hop, same thread, no wake",
              (double[]){t50 / 1e3, t99 / 1e3, NAN, NAN});
    t.notes[t.nnotes++] =
        "goal: p50 through the bridge <= 1.3 x (bus + TCP hop), each "
        "baseline hop waking its receiver as the bridge path's two hops do";
    bench_print(&t, &o);
  }
  if (strstr(cases, "tput")) {
    /* throughput to one client vs a plain socket pair */
    int frames = o.quick ? 400 : 4000;
    /* In rounds, each path in turn, so that a change of load meets both
     * alike: the median of the rounds' ratios. */
    enum { ROUNDS = 5 };
    double vb[ROUNDS], vt[ROUNDS], vr[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
      relay(1, frames / ROUNDS, &wall, &cpu);
      vb[k] = (double)(frames / ROUNDS) * BIG / (wall / 1e9) / 1e6;
      vt[k] = tcp_throughput(frames / ROUNDS);
      vr[k] = vb[k] / vt[k];
    }
    double mb1 = bench_quantile(vb, ROUNDS, 0.5);
    double base = bench_quantile(vt, ROUNDS, 0.5);
    double ratio = bench_quantile(vr, ROUNDS, 0.5);
    bench_table t2 = {.title = "bench serve: 64 KiB frames to one TCP client",
                      .cols = {"path", "MB_per_s", "vs_socket_pair"},
                      .ncols = 3};
    bench_row(&t2, "bus -> bridge -> link", (double[]){mb1, ratio});
    bench_row(&t2, "loopback TCP pair (baseline)", (double[]){base, 1.0});
    t2.notes[t2.nnotes++] = "goal: >= 0.7 x the socket pair (medians of 5 "
                            "alternating rounds; the ratio is the median of "
                            "the rounds' ratios)";
    bench_print(&t2, &o);
  }
  if (strstr(cases, "cpu")) {
    /* CPU per relayed MB */
    bench_table t3 = {
        .title = "bench serve: bridge CPU per relayed MB",
        .cols = {"clients", "cpu_ms_per_MB", "vs_1_client", "MB_relayed"},
        .ncols = 4};
    double one = NAN;
    int ns[] = {1, 4, 16};
    for (int i = 0; i < 3; i++) {
      int fr = o.quick ? 200 : 1000;
      relay(ns[i], fr, &wall, &cpu);
      double mb = (double)fr * BIG * ns[i] / 1e6;
      double per = cpu / 1e6 / mb;
      if (i == 0)
        one = per;
      char name[32];
      snprintf(name, sizeof name, "%d", ns[i]);
      bench_row(&t3, name, (double[]){per, per / one, mb});
    }
    t3.notes[t3.nnotes++] =
        "goal: per-MB cost does not grow with clients "
        "(frames are relayed as they are, never re-encoded)";
    t3.notes[t3.nnotes++] = "bridge CPU from /proc (10 ms ticks)";
    bench_print(&t3, &o);
  }
  if (strstr(cases, "rss")) {
    /* RSS with one client stalled */
    double secs = o.quick ? 5 : 60, r0, rmax, rend;
    stalled(secs, &r0, &rmax, &rend);
    bench_table t4 = {.title = "bench serve: bridge RSS, one client not "
                               "reading (8 MiB send queue)",
                      .cols = {"when", "RSS_MiB"},
                      .ncols = 2};
    bench_row(&t4, "before", (double[]){r0 / 1048576});
    bench_row(&t4, "max while stalled", (double[]){rmax / 1048576});
    bench_row(&t4, "at the end", (double[]){rend / 1048576});
    char note[96];
    snprintf(note, sizeof note, "stalled for %.0f s at 100 MB/s offered", secs);
    t4.notes[t4.nnotes++] = note;
    bench_print(&t4, &o);
  }
  kill(bridge, SIGKILL);
  waitpid(bridge, NULL, 0);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) {
    /* a leftover temp dir is harmless */
  }
  return 0;
}
