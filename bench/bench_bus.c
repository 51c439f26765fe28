/* bench_bus.c — `spyglass bench bus`: the shared-memory channel against the
 * copy-per-reader design it replaces, measured in one run:
 *   - the poster's cost per post with 1, 2, 4 and 8 reader processes,
 *     against sending the same frame once per reader over Unix datagram
 *     sockets (what a structured-clone-per-subscriber bus does);
 *   - 64 KiB frame throughput to one reader, against memcpy bandwidth;
 *   - post→receive latency between two processes, against a bare futex
 *     wake between the same two processes.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "platform/platform.h"
#include "spyglass/bus.h"

#define SMALL_FRAME 64
#ifndef TPUT_WINDOW
#define TPUT_WINDOW 24 /* frames in flight in the throughput case */
#endif

typedef struct shared {
  _Atomic uint64_t consumed[8];
  _Atomic uint32_t ready;
  _Atomic uint32_t bell; /* for the futex baseline */
  _Atomic uint64_t stamp;
  double lat_ns[4096];
  _Atomic uint32_t nlat;
  /* throughput flow control: bumped per frame consumed; the poster
   * sleeps on it while the window is full, until consumed[0] reaches
   * wake_at (a low-water mark, as a socket writer is woken) */
  _Atomic uint32_t progress, poster_asleep;
  _Atomic uint64_t wake_at;
} shared;

static char dir[128];
static shared *sh;

static double thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static spy_channel *open_ch(const char *name, uint32_t ring) {
  spy_channel *ch = NULL;
  spy_channel_desc d = {.name = name, .ring_bytes = ring, .dir = dir};
  int rc = spy_channel_open(&ch, &d);
  if (rc < 0) {
    fprintf(stderr, "bench bus: open %s: %s\n", name, spy_strerror(rc));
    exit(1);
  }
  return ch;
}

/* The reader took frame number `n` (counted from 1): wake the poster if
 * it waits for the window to drain this far. */
static void progressed(uint64_t n) {
  atomic_fetch_add(&sh->progress, 1);
  if (atomic_load(&sh->poster_asleep) && n >= atomic_load(&sh->wake_at))
    spy__futex_wake((uint32_t *)&sh->progress, 1);
}

/* The poster waits (at most 1 ms a turn) until the reader has taken
 * `until` frames: it sleeps as a writer to a full socket sleeps in write,
 * woken at a low-water mark rather than for every frame taken, instead of
 * spinning in sched_yield for the CPU the reader may need. */
static void wait_consumed(uint64_t until) {
  atomic_store(&sh->wake_at, until);
  uint64_t give_up = bench_now_ns() + 10000000000ull; /* a reader died */
  while (bench_now_ns() < give_up) {
    uint32_t seen = atomic_load(&sh->progress);
    atomic_store(&sh->poster_asleep, 1);
    if (atomic_load(&sh->consumed[0]) >= until)
      break;
    spy__futex_wait((uint32_t *)&sh->progress, seen, 1000000);
  }
  atomic_store(&sh->poster_asleep, 0);
}

/* Reads every byte of a frame in place, 8 at a time, as a decoder would:
 * an in-place receive is not done until the frame has reached the
 * reader's core. */
static uint64_t sum_frame(const uint8_t *p, size_t n) {
  uint64_t a = 0, b = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint64_t x, y;
    memcpy(&x, p + i, 8);
    memcpy(&y, p + i + 8, 8);
    a += x;
    b ^= y;
  }
  for (; i < n; i++)
    a += p[i];
  return a + b;
}

/* Reader process: drains until a frame whose first byte is 0xFF. With
 * in_place, each frame is received as a view into the poster's ring,
 * every byte read there, then released. */
static void bus_reader_mode(int k, const char *name, uint32_t ring,
                            int in_place) {
  spy_channel *ch = open_ch(name, ring);
  atomic_fetch_add(&sh->ready, 1);
  static uint8_t buf[1 << 20];
  while (in_place) {
    spy_channel_view v;
    int n = spy_channel_recv_view(ch, &v, 5000, NULL);
    if (n == SPY_EAGAIN)
      break;
    if (n <= 0)
      continue;
    uint8_t first = v.data[0];
    bench_sink(sum_frame(v.data, v.len));
    if (spy_channel_view_release(ch, &v) < 0)
      continue; /* overwritten while read: lost, not delivered */
    progressed(atomic_fetch_add(&sh->consumed[k], 1) + 1);
    if (first == 0xFF)
      break;
  }
  for (; !in_place;) {
    int n = spy_channel_recv(ch, buf, sizeof buf, 5000, NULL);
    if (n == SPY_EAGAIN)
      break;
    if (n <= 0)
      continue;
    progressed(atomic_fetch_add(&sh->consumed[k], 1) + 1);
    if (buf[0] == 0xFF)
      break;
  }
  spy_channel_close(ch);
  _exit(0);
}

static void bus_reader(int k, const char *name, uint32_t ring) {
  bus_reader_mode(k, name, ring, 0);
}

static void wait_ready(uint32_t n) {
  while (atomic_load(&sh->ready) < n)
    usleep(1000);
}

static void reap(pid_t *kids, int n) {
  for (int i = 0; i < n; i++)
    waitpid(kids[i], NULL, 0);
}

typedef struct post_result {
  double wall_ns, cpu_ns, delivered, wakes_per_post;
} post_result;

static post_result bench_bus_post(int readers, int frames) {
  post_result r = {0};
  memset(sh, 0, sizeof *sh);
  spy_channel *w = open_ch("bench-post", 4u << 20);
  pid_t kids[8];
  for (int k = 0; k < readers; k++)
    if ((kids[k] = fork()) == 0)
      bus_reader(k, "bench-post", 64u << 10);
  wait_ready((uint32_t)readers);
  usleep(20000);
  uint8_t f[SMALL_FRAME];
  memset(f, 1, sizeof f);
  double c0 = thread_cpu_ns();
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < frames; i++)
    spy_channel_post(w, f, sizeof f);
  uint64_t t1 = bench_now_ns();
  double c1 = thread_cpu_ns();
  f[0] = 0xFF;
  usleep(50000);
  spy_channel_post(w, f, sizeof f);
  reap(kids, readers);
  spy_channel_stats st;
  spy_channel_get_stats(w, &st);
  uint64_t got = 0;
  for (int k = 0; k < readers; k++)
    got += atomic_load(&sh->consumed[k]) - 1;
  r.wall_ns = (double)(t1 - t0) / frames;
  r.cpu_ns = (c1 - c0) / frames;
  r.delivered = (double)got / ((double)frames * readers);
  r.wakes_per_post = (double)st.wakes / (frames + 1);
  spy_channel_close(w);
  return r;
}

/* Baseline: the same frames sent once per reader over datagram sockets. */
static post_result bench_uds_post(int readers, int frames) {
  post_result r = {0};
  memset(sh, 0, sizeof *sh);
  int fds[8][2];
  pid_t kids[8];
  for (int k = 0; k < readers; k++) {
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, fds[k]) < 0)
      exit(1);
    if ((kids[k] = fork()) == 0) {
      close(fds[k][0]);
      atomic_fetch_add(&sh->ready, 1);
      uint8_t buf[256];
      for (;;) {
        ssize_t n = recv(fds[k][1], buf, sizeof buf, 0);
        if (n <= 0)
          break;
        atomic_fetch_add(&sh->consumed[k], 1);
        if (buf[0] == 0xFF)
          break;
      }
      _exit(0);
    }
    close(fds[k][1]);
  }
  wait_ready((uint32_t)readers);
  usleep(20000);
  uint8_t f[SMALL_FRAME];
  memset(f, 1, sizeof f);
  double c0 = thread_cpu_ns();
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < frames; i++)
    for (int k = 0; k < readers; k++)
      send(fds[k][0], f, sizeof f, MSG_DONTWAIT); /* a full buffer drops */
  uint64_t t1 = bench_now_ns();
  double c1 = thread_cpu_ns();
  f[0] = 0xFF;
  usleep(50000);
  for (int k = 0; k < readers; k++)
    send(fds[k][0], f, sizeof f, 0);
  reap(kids, readers);
  uint64_t got = 0;
  for (int k = 0; k < readers; k++) {
    got += atomic_load(&sh->consumed[k]) - 1;
    close(fds[k][0]);
  }
  r.wall_ns = (double)(t1 - t0) / frames;
  r.cpu_ns = (c1 - c0) / frames;
  r.delivered = (double)got / ((double)frames * readers);
  return r;
}

/* Where the two ends of the throughput case run: SPY_BENCH_BUS_PIN=1 pins
 * the poster and the reader to two CPUs. Not by default: on a quiet
 * machine it removes the case where the scheduler puts both on one CPU
 * and they take turns instead of copying at the same time, but on a
 * loaded one a pinned reader waits for its CPU while the other is free
 * (0.03-0.07x memcpy pinned against 0.14-0.46x not, load 12). */
static int cpu_a = -1, cpu_b = -1;
static cpu_set_t cpus_all;

static void pick_cpus(void) {
  const char *e = getenv("SPY_BENCH_BUS_PIN");
  if (!e || strcmp(e, "1") != 0 ||
      sched_getaffinity(0, sizeof cpus_all, &cpus_all) != 0)
    return;
  bench_two_cpus(&cpu_a, &cpu_b);
}

static void pin_to(int cpu) {
  if (cpu < 0)
    return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

static void unpin(void) {
  if (cpu_a >= 0)
    sched_setaffinity(0, sizeof cpus_all, &cpus_all);
}

/* 64 KiB frames to one reader, with flow control so nothing is lapped:
 * MB/s delivered. */
static double bench_throughput(int frames, int in_place) {
  enum { FRAME = 64 << 10 };
  memset(sh, 0, sizeof *sh);
  spy_channel *w = open_ch("bench-tput", 4u << 20);
  pid_t kid = fork();
  if (kid == 0) {
    pin_to(cpu_b);
    bus_reader_mode(0, "bench-tput", 64u << 10, in_place);
  }
  pin_to(cpu_a);
  wait_ready(1);
  usleep(20000);
  static uint8_t f[FRAME];
  memset(f, 1, sizeof f);
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < frames; i++) {
    /* the ring holds 63: stay well inside it */
    if ((uint64_t)i - atomic_load(&sh->consumed[0]) > TPUT_WINDOW)
      wait_consumed((uint64_t)i - TPUT_WINDOW / 2);
    spy_channel_post(w, f, sizeof f);
  }
  wait_consumed((uint64_t)frames);
  uint64_t t1 = bench_now_ns();
  f[0] = 0xFF;
  spy_channel_post(w, f, sizeof f);
  reap(&kid, 1);
  spy_channel_close(w);
  unpin();
  return (double)frames * FRAME / 1e6 / ((double)(t1 - t0) / 1e9);
}

/* The baseline: 64 KiB copies out of a 4 MiB region, as the reader copies
 * out of the poster's 4 MiB ring, on the poster's CPU. */
static double bench_memcpy_bw(int n) {
  enum { BLOCK = 64 << 10, REGION = 4 << 20 };
  uint8_t *src = malloc(REGION), *dst = malloc(BLOCK);
  memset(src, 3, REGION);
  memset(dst, 0, BLOCK);
  pin_to(cpu_a);
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < n; i++) {
    memcpy(dst, src + (size_t)(i % (REGION / BLOCK)) * BLOCK, BLOCK);
    bench_sink(dst[i % BLOCK]);
  }
  uint64_t t1 = bench_now_ns();
  unpin();
  free(src);
  free(dst);
  return (double)n * BLOCK / 1e6 / ((double)(t1 - t0) / 1e9);
}

/* Post→receive latency: the poster stamps the frame with its monotonic
 * clock; the reader, asleep in recv, records arrival − stamp. */
static void latency_reader_bus(void) {
  spy_channel *ch = open_ch("bench-lat", 1u << 20);
  atomic_fetch_add(&sh->ready, 1);
  uint8_t buf[256];
  for (;;) {
    int n = spy_channel_recv(ch, buf, sizeof buf, 5000, NULL);
    if (n <= 0)
      break;
    uint64_t now = spy__mono_ns(), stamp;
    memcpy(&stamp, buf + 8, 8);
    if (buf[0] == 0xFF)
      break;
    uint32_t i = atomic_fetch_add(&sh->nlat, 1);
    if (i < 4096)
      sh->lat_ns[i] = (double)(now - stamp);
  }
  spy_channel_close(ch);
  _exit(0);
}

static void latency_reader_futex(void) {
  atomic_fetch_add(&sh->ready, 1);
  uint32_t seen = atomic_load(&sh->bell);
  for (;;) {
    while (atomic_load(&sh->bell) == seen)
      spy__futex_wait((uint32_t *)&sh->bell, seen, 5000000000ll);
    seen = atomic_load(&sh->bell);
    uint64_t now = spy__mono_ns(), stamp = atomic_load(&sh->stamp);
    if (stamp == UINT64_MAX)
      break;
    uint32_t i = atomic_fetch_add(&sh->nlat, 1);
    if (i < 4096)
      sh->lat_ns[i] = (double)(now - stamp);
  }
  _exit(0);
}

static void latency(int use_bus, int samples, double *p50, double *p99,
                    double *poster_ns) {
  memset(sh, 0, sizeof *sh);
  spy_channel *w = use_bus ? open_ch("bench-lat", 1u << 20) : NULL;
  pid_t kid = fork();
  if (kid == 0) {
    if (use_bus)
      latency_reader_bus();
    latency_reader_futex();
  }
  wait_ready(1);
  usleep(20000);
  uint8_t f[64] = {0};
  double post_total = 0;
  for (int i = 0; i < samples; i++) {
    usleep(300); /* let the reader fall asleep: we measure a wake */
    uint64_t t0 = spy__mono_ns();
    if (use_bus) {
      memcpy(f + 8, &t0, 8);
      spy_channel_post(w, f, sizeof f);
    } else {
      atomic_store(&sh->stamp, t0);
      atomic_fetch_add(&sh->bell, 1);
      spy__futex_wake((uint32_t *)&sh->bell, 1);
    }
    post_total += (double)(spy__mono_ns() - t0);
  }
  usleep(20000);
  if (use_bus) {
    f[0] = 0xFF;
    spy_channel_post(w, f, sizeof f);
  } else {
    atomic_store(&sh->stamp, UINT64_MAX);
    atomic_fetch_add(&sh->bell, 1);
    spy__futex_wake((uint32_t *)&sh->bell, 1);
  }
  reap(&kid, 1);
  uint32_t n = atomic_load(&sh->nlat);
  if (n > 4096)
    n = 4096;
  *p50 = bench_quantile(sh->lat_ns, n, 0.5);
  *p99 = bench_quantile(sh->lat_ns, n, 0.99);
  *poster_ns = post_total / samples;
  if (w)
    spy_channel_close(w);
}

int bench_bus(int argc, char **argv) {
  bench_opts o;
  /* SPY_BENCH_BUS_CASES=post,tput,latency selects parts (profiling). */
  const char *cases = getenv("SPY_BENCH_BUS_CASES");
  if (!cases)
    cases = "post,tput,latency";
  int rc = bench_parse(argc, argv, &o,
                       "usage: spyglass bench bus [--json] [--quick]\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  if (bench_tempdir(dir, sizeof dir) < 0)
    return 1;
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED)
    return 1;
  int frames = o.quick ? 20000 : 200000;
  bench_table t = {
      .title = "bench bus: one channel, 64-byte frames; baseline: the same "
               "frame sent once per reader over Unix datagram sockets",
      .cols = {"case", "poster_ns_per_post", "poster_cpu_ns", "delivered_pct",
               "wakes_per_post", "x_baseline"},
      .ncols = 6};
  static const int counts[] = {1, 2, 4, 8};
  for (int i = 0; i < 4 && strstr(cases, "post"); i++) {
    int r = counts[i];
    post_result b = bench_bus_post(r, frames);
    post_result u = bench_uds_post(r, frames);
    char name[64];
    snprintf(name, sizeof name, "bus, %d reader%s", r, r > 1 ? "s" : "");
    bench_row(&t, name,
              (double[]){b.wall_ns, b.cpu_ns, 100 * b.delivered,
                         b.wakes_per_post, b.cpu_ns / u.cpu_ns});
    snprintf(name, sizeof name, "uds per reader, %d", r);
    bench_row(&t, name,
              (double[]){u.wall_ns, u.cpu_ns, 100 * u.delivered, NAN, 1.0});
  }
  t.notes[t.nnotes++] = "x_baseline = bus poster CPU / socket poster CPU "
                        "for the same reader count (goal at 8: <= 0.05)";
  if (strstr(cases, "post"))
    bench_print(&t, &o);

  /* Throughput in rounds, each next to its own memcpy baseline (a 5 ms
   * window on a shared machine reads anything from 10 to 35 GB/s): the
   * medians of the rounds and the median of their ratios. */
  enum { TPUT_ROUNDS = 7 };
  double v_bus[TPUT_ROUNDS], v_mem[TPUT_ROUNDS], v_x[TPUT_ROUNDS];
  double v_ip[TPUT_ROUNDS], v_ipx[TPUT_ROUNDS];
  double bw_bus = NAN, bw_mem = NAN, bw_x = NAN, bw_ip = NAN, bw_ipx = NAN;
  pick_cpus();
  if (strstr(cases, "tput")) {
    for (int k = 0; k < TPUT_ROUNDS; k++) {
      v_mem[k] = bench_memcpy_bw(o.quick ? 200 : 1000);
      v_bus[k] = bench_throughput(o.quick ? 100 : 1000, 0);
      v_ip[k] = bench_throughput(o.quick ? 100 : 1000, 1);
      v_x[k] = v_bus[k] / v_mem[k];
      v_ipx[k] = v_ip[k] / v_mem[k];
    }
    bw_ip = bench_quantile(v_ip, TPUT_ROUNDS, 0.5);
    bw_ipx = bench_quantile(v_ipx, TPUT_ROUNDS, 0.5);
    bw_bus = bench_quantile(v_bus, TPUT_ROUNDS, 0.5);
    bw_mem = bench_quantile(v_mem, TPUT_ROUNDS, 0.5);
    bw_x = bench_quantile(v_x, TPUT_ROUNDS, 0.5);
  }
  bench_table t2 = {.title = "bench bus: 64 KiB frames to one reader process",
                    .cols = {"case", "MB_per_s", "x_memcpy"},
                    .ncols = 3};
  bench_row(&t2, "memcpy 64 KiB (baseline)", (double[]){bw_mem, 1.0});
  bench_row(&t2, "bus post+receive (copy)", (double[]){bw_bus, bw_x});
  bench_row(&t2, "bus post+receive in place", (double[]){bw_ip, bw_ipx});
  static char tput_note[256];
  snprintf(tput_note, sizeof tput_note,
           "goal: x_memcpy >= 0.5; medians of %d rounds, each next to its "
           "own baseline; poster and reader %s; in place: "
           "spy_channel_recv_view, the reader reads every byte",
           TPUT_ROUNDS, cpu_a >= 0 ? "pinned to two CPUs" : "not pinned");
  t2.notes[t2.nnotes++] = tput_note;
  if (!o.json)
    printf("\n");
  bench_print(&t2, &o);

  int samples = o.quick ? 200 : 2000;
  double b50, b99, bpost, f50, f99, fpost;
  b50 = b99 = bpost = f50 = f99 = fpost = NAN;
  if (strstr(cases, "latency")) {
    latency(1, samples, &b50, &b99, &bpost);
    latency(0, samples, &f50, &f99, &fpost);
  }
  bench_table t3 = {
      .title = "bench bus: post->receive latency between two "
               "processes, reader asleep",
      .cols = {"case", "p50_us", "p99_us", "poster_us", "p50_x_futex"},
      .ncols = 5};
  bench_row(&t3, "bare futex wake (baseline)",
            (double[]){f50 / 1e3, f99 / 1e3, fpost / 1e3, 1.0});
  bench_row(&t3, "bus post -> recv",
            (double[]){b50 / 1e3, b99 / 1e3, bpost / 1e3, b50 / f50});
  t3.notes[t3.nnotes++] = "goal: p50_x_futex <= 1.5";
  if (!o.json)
    printf("\n");
  bench_print(&t3, &o);
  spy_bus_sweep(dir);
  rmdir(dir);
  return 0;
}
