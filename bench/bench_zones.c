/* bench_zones.c — `spyglass bench zones`: what one zone (a begin + end
 * pair) costs the inspected thread, with nobody subscribed to zones and
 * while a consumer in another process drains them live, next to an empty
 * loop and a loop of two clock reads (the floor of timing anything) in the
 * same run; bytes per zone on the wire (what the consumer received), the
 * provider's other threads' CPU per zone (the service draining and
 * encoding), the consumer process's CPU per span it rebuilt (whole run),
 * zones dropped, and peak RSS after 1M and 100M zones. Then both sides'
 * CPU per zone measured apart in one process on one thread (drain +
 * encode, decode + apply): what a loaded machine moves least.
 * SPY_BENCH_ZONES_INPROC=N runs only that, N batches (for a profiler).
 * SPY_BENCH_ZONES_PIN=1 places the threads (pin_apart), and
 * SPY_BENCH_ZONES_RING=BYTES sets the ring size (zone_buffer_bytes). */
#include <dirent.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "platform/platform.h"
#include "provider/provider_internal.h"
#include "spyglass/consumer.h"
#include "spyglass/provider.h"
#include "spyglass/zones.h"

static char dir[128];
static spy_zone_loc loc = {"bench", "loop_zone", "bench_zones.c", 1, 0, 0};

/* The timed loops start on a 64-byte boundary with GCC (the release
 * build): a loop of a few instructions that straddles one costs a cycle
 * more an iteration, which moved the no-subscriber row by 0.6 ns between
 * two builds of the same instructions. */
#if defined(__GNUC__) && !defined(__clang__)
#define LOOP_FN __attribute__((noinline, optimize("align-loops=64")))
#else
#define LOOP_FN __attribute__((noinline))
#endif

LOOP_FN static void loop_empty(spy_provider *p, uint64_t n) {
  (void)p;
  for (uint64_t i = 0; i < n; i++)
    __asm__ __volatile__("" ::: "memory");
}

LOOP_FN static void loop_clock(spy_provider *p, uint64_t n) {
  (void)p;
  uint64_t acc = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t a = spy__ticks();
    __asm__ __volatile__("" ::: "memory");
    uint64_t b = spy__ticks();
    acc += b - a;
  }
  bench_sink(acc);
}

LOOP_FN static void loop_zone(spy_provider *p, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    spy_zone_begin(p, &loc);
    __asm__ __volatile__("" ::: "memory");
    spy_zone_end(p);
  }
}

/* n zones paced at `rate` a second (a busy wait between them, as a program
 * doing work between zones): the drops at a steady rate below full speed. */
__attribute__((noinline)) static void loop_paced(spy_provider *p, uint64_t n,
                                                 double rate) {
  uint64_t t0 = bench_now_ns();
  for (uint64_t i = 0; i < n; i++) {
    uint64_t due = t0 + (uint64_t)((double)i * 1e9 / rate);
    while (bench_now_ns() < due)
      __asm__ __volatile__("" ::: "memory");
    spy_zone_begin(p, &loc);
    __asm__ __volatile__("" ::: "memory");
    spy_zone_end(p);
  }
}

/* SPY_BENCH_ZONES_PIN=1: the calling (instrumented) thread on the first
 * CPU it may use, every other thread of this process and the consumer
 * process on the second, so a run does not depend on where the scheduler
 * put the service (a placement the machine's other load moves). */
static void pin_apart(pid_t consumer) {
  const char *e = getenv("SPY_BENCH_ZONES_PIN");
  int a, b;
  if (!e || !atoi(e))
    return;
  bench_two_cpus(&a, &b);
  if (a < 0)
    return;
  cpu_set_t sa, sb;
  CPU_ZERO(&sa);
  CPU_ZERO(&sb);
  CPU_SET(a, &sa);
  CPU_SET(b, &sb);
  int self = (int)syscall(SYS_gettid);
  DIR *d = opendir("/proc/self/task");
  struct dirent *de;
  while (d && (de = readdir(d))) {
    int tid = atoi(de->d_name);
    if (tid > 0 && tid != self)
      sched_setaffinity(tid, sizeof sb, &sb);
  }
  if (d)
    closedir(d);
  sched_setaffinity(consumer, sizeof sb, &sb);
  sched_setaffinity(0, sizeof sa, &sa);
}

/* Median ns per iteration over `rounds` rounds of n iterations: wall
 * time, and this thread's own CPU time in *cpu (on a loaded machine the
 * difference is time the thread waited for a core). */
static double time_loop(void (*fn)(spy_provider *, uint64_t), spy_provider *p,
                        uint64_t n, int rounds, double *cpu) {
  double v[64], c[64];
  if (rounds > 64)
    rounds = 64;
  fn(p, n / 4); /* warm */
  for (int r = 0; r < rounds; r++) {
    uint64_t t0 = bench_now_ns(), c0 = bench_thread_cpu_ns();
    fn(p, n);
    v[r] = (double)(bench_now_ns() - t0) / (double)n;
    c[r] = (double)(bench_thread_cpu_ns() - c0) / (double)n;
  }
  *cpu = bench_quantile(c, (size_t)rounds, 0.5);
  return bench_quantile(v, (size_t)rounds, 0.5);
}

static double peak_rss_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

/* The consumer process: drains zones until SIGTERM, then writes its
 * bytes received, spans rebuilt and frames lost to fd. */
static volatile sig_atomic_t stop;
static void on_term(int s) {
  (void)s;
  stop = 1;
}
static void consumer_main(int fd) {
  signal(SIGTERM, on_term);
  spy_consumer *c;
  spy_consumer_desc d = {.dir = dir,
                         .features = SPY_FEAT_ZONES,
                         .query_initial_ms = 20,
                         .no_clock_sync = 1,
                         .zone_frames = 4,
                         .zone_spans = 4096};
  if (spy_consumer_create(&c, &d) < 0)
    _exit(1);
  while (!stop)
    spy_consumer_poll(c, 1);
  const spy_state *s = spy_consumer_state(c);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  unsigned long long v[4] = {
      s->bytes_received, s->zones.spans, s->frames_lost,
      (unsigned long long)ru.ru_utime.tv_sec * 1000000000ull +
          (unsigned long long)ru.ru_utime.tv_usec * 1000ull +
          (unsigned long long)ru.ru_stime.tv_sec * 1000000000ull +
          (unsigned long long)ru.ru_stime.tv_usec * 1000ull};
  if (write(fd, v, sizeof v) != (ssize_t)sizeof v)
    _exit(2);
  spy_consumer_destroy(c);
  _exit(0);
}

/* The two sides' CPU per zone without a second core's noise: a provider
 * with the inline transport and a consumer in this process, on this one
 * thread. Batches of `per` zones are written, then drained and encoded by
 * the provider's service (timed), then decoded and applied by the
 * consumer (timed), `batches` times. Thread CPU, so a loaded machine
 * moves it little. 0, or -1 if the consumer never subscribed. */
static int inproc(int batches, uint32_t per, double *enc_ns, double *dec_ns) {
  char d2[128];
  if (bench_tempdir(d2, sizeof d2) < 0)
    return -1;
  spy_provider *p;
  spy_provider_desc pd = {.name = "bench-zones-inproc",
                          .dir = d2,
                          .transport = SPY_TRANSPORT_INLINE,
                          .zone_buffer_bytes = 16u << 20};
  spy_consumer *c;
  spy_consumer_desc cd = {.dir = d2,
                          .features = SPY_FEAT_ZONES,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .zone_frames = 4,
                          .zone_spans = 4096};
  int rc = -1;
  if (spy_provider_create(&p, &pd) < 0)
    goto out_dir;
  if (spy_consumer_create(&c, &cd) < 0)
    goto out_p;
  uint64_t end = bench_now_ns() + 20000000000ull;
  while (!spy__zone_epoch(p) && bench_now_ns() < end) {
    spy__service(p, 0);
    spy_consumer_poll(c, 1);
  }
  if (!spy__zone_epoch(p))
    goto out_c;
  const spy_state *st = spy_consumer_state(c);
  loop_zone(p, 1000); /* the ring, the location */
  for (int k = 0; k < 100 && st->zones.spans < 1000; k++) {
    spy__service(p, 0);
    spy_consumer_poll(c, 0);
  }
  uint64_t enc = 0, dec = 0, zones = 0;
  for (int b = 0; b < batches; b++) {
    spy_provider_stats s0, s1;
    spy_provider_get_stats(p, &s0);
    loop_zone(p, per);
    uint64_t want = st->zones.spans + per;
    uint64_t t0 = bench_thread_cpu_ns();
    for (int k = 0; k < 64; k++) {
      spy__service(p, 0);
      spy_provider_get_stats(p, &s1);
      if (s1.zone_records - s0.zone_records >= 2ull * per)
        break;
    }
    uint64_t t1 = bench_thread_cpu_ns();
    for (int k = 0; k < 4096 && st->zones.spans < want; k++)
      spy_consumer_poll(c, 0);
    uint64_t t2 = bench_thread_cpu_ns();
    enc += t1 - t0;
    dec += t2 - t1;
    zones += per;
  }
  *enc_ns = (double)enc / (double)zones;
  *dec_ns = (double)dec / (double)zones;
  rc = 0;
out_c:
  spy_consumer_destroy(c);
out_p:
  spy_provider_destroy(p);
out_dir:
  spy_bus_sweep(d2);
  rmdir(d2);
  return rc;
}

/* ---- the consumer's apply alone ------------------------------------------
 * The same encoded ZONES sections fed to a consumer state again and again
 * (their base times moved on each pass): what applying costs per span once
 * the bytes are here, next to unpacking them alone (spy_zones_unpack, the
 * one-pass decode) and a memcpy of the same bytes, in the same run, thread
 * CPU time. Two timelines: flat pairs as the streaming loop writes them,
 * and nested frames (frame > update > 4 substeps of 3 leaves, draw of 8
 * items; frame markers; zones left open across sections). The state keeps
 * what the streaming consumer above keeps. SPY_BENCH_ZONES_APPLY=N runs
 * only this, N passes (for a profiler). */
#define AP_SECTIONS 64
#define AP_SPANS 4096u /* per section */

typedef struct ap_set {
  uint8_t *buf[AP_SECTIONS];
  spy_frame f[AP_SECTIONS];
  spy_section sec[AP_SECTIONS];
  uint64_t base[AP_SECTIONS];
  uint64_t spans, period_ns;
  size_t bytes, max_len;
} ap_set;

typedef struct ap_ev {
  uint8_t kind;
  uint64_t t, v;
} ap_ev;

static uint32_t ap_rand(uint32_t *s) {
  *s = *s * 1103515245u + 12345u;
  return *s >> 16;
}

/* The timeline's events; *n events, *spans begins. */
static ap_ev *ap_timeline(int nested, size_t *n, uint64_t *spans) {
  size_t cap = (size_t)AP_SECTIONS * AP_SPANS * 3, k = 0; /* 55 a frame of 27 */
  ap_ev *e = malloc(cap * sizeof *e);
  uint64_t t = 1000000000ull, frame = 1, b = 0;
  uint32_t r = 7;
  if (!e)
    return NULL;
#define AP_B(loc, dt) (t += (dt), e[k++] = (ap_ev){SPY_ZONE_EV_BEGIN, t, (loc)})
#define AP_E(dt) (t += (dt), e[k++] = (ap_ev){SPY_ZONE_EV_END, t, 0})
  while (b + 32 < (uint64_t)AP_SECTIONS * AP_SPANS) {
    if (!nested) {
      AP_B(16, 6 + ap_rand(&r) % 8);
      AP_E(6 + ap_rand(&r) % 8);
      b++;
      continue;
    }
    t += 200;
    e[k++] = (ap_ev){SPY_ZONE_EV_FRAME, t, frame++};
    AP_B(16, 40);
    AP_B(17, 30);
    for (int i = 0; i < 4; i++) {
      AP_B(18, 20);
      for (int j = 0; j < 3; j++) {
        AP_B(19, 10 + ap_rand(&r) % 20);
        AP_E(40 + ap_rand(&r) % 200);
      }
      AP_E(15);
    }
    AP_E(10);
    AP_B(20, 25);
    for (int i = 0; i < 8; i++) {
      AP_B(21, 5 + ap_rand(&r) % 10);
      AP_E(30 + ap_rand(&r) % 100);
    }
    AP_E(10);
    AP_E(20);
    b += 1 + 1 + 4 * 4 + 1 + 8;
  }
#undef AP_B
#undef AP_E
  *n = k;
  *spans = b;
  return e;
}

static void ap_free(ap_set *a) {
  for (int i = 0; i < AP_SECTIONS; i++)
    free(a->buf[i]);
}

/* Cuts the timeline into AP_SECTIONS sections of about equal events, each
 * in a DATA frame of its own; the first carries the locations. */
static int ap_encode(ap_set *a, int nested) {
  memset(a, 0, sizeof *a);
  size_t n;
  ap_ev *e = ap_timeline(nested, &n, &a->spans);
  if (!e)
    return -1;
  static const char *names[] = {"frame", "update", "substep",
                                "leaf",  "draw",   "item"};
  size_t per = (n + AP_SECTIONS - 1) / AP_SECTIONS, at = 0;
  for (int i = 0; i < AP_SECTIONS; i++) {
    size_t cap = per * SPY_ZONES_EVENT_MAX + 4096;
    if (!(a->buf[i] = malloc(cap)))
      goto fail;
    spy_frame_writer w;
    spy_frame_start(&w, a->buf[i], cap, SPY_MSG_DATA, 1, (uint32_t)i, 0);
    spy_zones_writer z;
    a->base[i] = at < n ? e[at].t - 1 : e[n - 1].t;
    spy_zones_begin(&z, &w, i ? 0 : SPY_ZONES_FULL, a->base[i]);
    for (uint32_t l = 0; !i && l < 6; l++) {
      spy_zone_loc_info li = {.id = 16 + l,
                              .line = l + 1,
                              .name = names[l],
                              .name_len = (uint32_t)strlen(names[l]),
                              .function = "ap_timeline",
                              .function_len = 11,
                              .file = "bench_zones.c",
                              .file_len = 13};
      spy_zones_put_loc(&z, &li);
    }
    spy_zone_thread_info ti = {.thread = 1,
                               .os_tid = 1,
                               .flags = i ? 0 : SPY_ZONES_THREAD_NAMED,
                               .name = "main",
                               .name_len = 4};
    spy_zones_thread_begin(&z, &ti);
    for (size_t k = 0; k < per && at < n; k++, at++)
      spy_zones_put_event(&z, e[at].kind, e[at].t, e[at].v);
    spy_zones_end(&z);
    int len = spy_frame_finish(&w);
    if (len < 0 || spy_frame_decode(a->buf[i], (size_t)len, &a->f[i], NULL) ||
        !spy_frame_find_section(&a->f[i], SPY_SEC_ZONES, &a->sec[i]))
      goto fail;
    a->bytes += a->sec[i].len;
    if (a->sec[i].len > a->max_len)
      a->max_len = a->sec[i].len;
  }
  a->period_ns = e[n - 1].t - e[0].t + 1000;
  free(e);
  return 0;
fail:
  free(e);
  ap_free(a);
  return -1;
}

/* Moves every section's base time on by pass * the timeline's length. */
static void ap_shift(ap_set *a, uint64_t pass) {
  for (int i = 0; i < AP_SECTIONS; i++)
    spy_wr64((uint8_t *)(uintptr_t)a->sec[i].data + 16,
             a->base[i] + pass * a->period_ns);
}

/* Median thread-CPU ns per span over `rounds` passes: out[0] state apply
 * (decode + apply), out[1] the same with the per-location sums kept (as
 * `top`'s zones view has it), out[2] unpack alone, out[3] memcpy of the
 * bytes. */
static int ap_measure(int nested, int rounds, double out[4]) {
  ap_set a;
  if (ap_encode(&a, nested) < 0)
    return -1;
  spy_state st[2];
  uint64_t *words = malloc(a.max_len * sizeof *words);
  uint8_t *copy = malloc(a.max_len);
  int inits = 0;
  for (; inits < 2 && spy_state_init(&st[inits], 4) == 0; inits++)
    spy_state_zones_keep(&st[inits], 4, 4096);
  if (!words || !copy || inits < 2) {
    while (inits--)
      spy_state_free(&st[inits]);
    free(words);
    free(copy);
    ap_free(&a);
    return -1;
  }
  spy_state_zones_sums(&st[1], 1);
  double v[4][64];
  if (rounds > 64)
    rounds = 64;
  uint64_t pass = 0, sink = 0;
  int rc = 0;
  for (int r = -1; r < rounds; r++) { /* -1: warm (the ring, the names) */
    uint64_t t[5];
    t[0] = bench_thread_cpu_ns();
    for (int k = 0; k < 2; k++) {
      ap_shift(&a, pass + (uint64_t)k);
      for (int i = 0; i < AP_SECTIONS; i++)
        if (spy_state_apply(&st[k], &a.f[i], 0) < 0)
          rc = -1;
      t[k + 1] = bench_thread_cpu_ns();
    }
    pass += 2;
    for (int i = 0; i < AP_SECTIONS; i++) {
      spy_zones_iter it;
      size_t nw;
      if (spy_zones_unpack(&a.sec[i], &it, words, a.max_len, &nw) < 0)
        rc = -1;
      sink += words[nw / 2];
    }
    t[3] = bench_thread_cpu_ns();
    for (int i = 0; i < AP_SECTIONS; i++) {
      memcpy(copy, a.sec[i].data, a.sec[i].len);
      __asm__ __volatile__("" : : "r"(copy) : "memory");
    }
    t[4] = bench_thread_cpu_ns();
    if (r < 0)
      continue;
    for (int k = 0; k < 4; k++)
      v[k][r] = (double)(t[k + 1] - t[k]) / (double)a.spans;
  }
  bench_sink(sink + st[0].zones.spans + st[1].zones.spans);
  if (getenv("SPY_BENCH_ZONES_APPLY"))
    printf("%s: %llu spans a pass, %.2f bytes a span; %llu spans rebuilt\n",
           nested ? "nested" : "flat", (unsigned long long)a.spans,
           (double)a.bytes / (double)a.spans,
           (unsigned long long)st[0].zones.spans);
  for (int k = 0; k < 4; k++)
    out[k] = bench_quantile(v[k], (size_t)rounds, 0.5);
  spy_state_free(&st[0]);
  spy_state_free(&st[1]);
  free(words);
  free(copy);
  ap_free(&a);
  return rc;
}

/* Appends the rows (ns per span in the first column). */
static void ap_rows(bench_table *t, int rounds) {
  double na = NAN;
  for (int nested = 0; nested < 2; nested++) {
    double m[4] = {na, na, na, na};
    if (ap_measure(nested, rounds, m) < 0)
      fprintf(stderr, "bench zones: the apply replay failed\n");
    char name[64];
    const char *what = nested ? "nested" : "flat";
    snprintf(name, sizeof name, "consumer apply ns/span, %s (apply alone)",
             what);
    bench_row(t, name, (double[]){m[0] - m[2], na, na, na, na});
    snprintf(name, sizeof name, "  %s: with unpack (decode + apply)", what);
    bench_row(t, name, (double[]){m[0], na, na, na, na});
    snprintf(name, sizeof name, "  %s: apply alone, sums kept (top)", what);
    bench_row(t, name, (double[]){m[1] - m[2], na, na, na, na});
    snprintf(name, sizeof name, "  %s: unpack alone", what);
    bench_row(t, name, (double[]){m[2], na, na, na, na});
    snprintf(name, sizeof name, "  %s: memcpy of the same bytes", what);
    bench_row(t, name, (double[]){m[3], na, na, na, na});
  }
}

int bench_zones(int argc, char **argv) {
  bench_opts o;
  int rc = bench_parse(argc, argv, &o,
                       "usage: spyglass bench zones [--json] [--quick]\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  if (bench_tempdir(dir, sizeof dir) < 0)
    return 1;
  spy__ticks_init();
  if (getenv("SPY_BENCH_ZONES_APPLY")) { /* only the apply replay */
    bench_table t = {.title = "bench zones: consumer apply replay",
                     .cols = {"case", "ns_per_span", "-", "-", "-", "-"},
                     .ncols = 6};
    ap_rows(&t, atoi(getenv("SPY_BENCH_ZONES_APPLY")));
    bench_print(&t, &o);
    rmdir(dir);
    return 0;
  }
  if (getenv("SPY_BENCH_ZONES_INPROC")) { /* only the in-process rows: */
    double e, dc;                         /* for a profiler */
    if (inproc(atoi(getenv("SPY_BENCH_ZONES_INPROC")), 200000, &e, &dc) < 0)
      return 1;
    printf("in-process: drain + encode %.3f ns, decode + apply %.3f ns per "
           "zone\n",
           e, dc);
    rmdir(dir);
    return 0;
  }
  int rounds = o.quick ? 5 : 15;
  uint64_t n = o.quick ? 200000 : 2000000;
  spy_provider *p;
  /* SPY_BENCH_ZONES_RING=BYTES: another ring size than the default. */
  const char *ring = getenv("SPY_BENCH_ZONES_RING");
  spy_provider_desc d = {.name = "bench-zones",
                         .dir = dir,
                         .zone_buffer_bytes =
                             ring ? (uint32_t)strtoul(ring, NULL, 0) : 0};
  if (spy_provider_create(&p, &d) < 0)
    return 1;
  double c_empty, c_clock, c_off, c_on;
  double t_empty = time_loop(loop_empty, p, n, rounds, &c_empty);
  double t_clock = time_loop(loop_clock, p, n, rounds, &c_clock);
  double t_off = time_loop(loop_zone, p, n, rounds, &c_off);
  spy_provider_stats st0;
  spy_provider_get_stats(p, &st0);

  int pfd[2];
  if (pipe(pfd) < 0)
    return 1;
  pid_t pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    consumer_main(pfd[1]);
  }
  close(pfd[1]);
  uint64_t end = bench_now_ns() + 20000000000ull;
  while (!spy__zone_epoch(p) && bench_now_ns() < end)
    usleep(1000);
  if (!spy__zone_epoch(p)) {
    fprintf(stderr, "bench zones: no consumer subscribed\n");
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return 1;
  }
  pin_apart(pid);
  spy_provider_stats s1, s2, s3;
  loop_zone(p, n / 4); /* the ring exists, the location is registered */
  spy_provider_get_stats(p, &s1);
  double cpu0 = bench_other_threads_cpu_ns(0);
  uint64_t w0 = bench_now_ns();
  double t_on = time_loop(loop_zone, p, n, rounds, &c_on);
  uint64_t w1 = bench_now_ns();
  double cpu1 = bench_other_threads_cpu_ns(0);
  spy_provider_get_stats(p, &s2);
  /* Drops at a steady 1M zones/s (what a busy program emits). */
  uint64_t paced_n = o.quick ? 300000 : 1000000;
  loop_paced(p, paced_n, 1e6);
  usleep(20000);
  spy_provider_stats s4;
  spy_provider_get_stats(p, &s4);
  double paced_drop =
      100.0 * (double)(s4.zones_dropped - s2.zones_dropped) / (double)paced_n;
  /* RSS: after 1M zones, then after 100M (--quick: 10M). */
  loop_zone(p, 1000000);
  double rss1 = peak_rss_mb();
  uint64_t big = o.quick ? 10000000ull : 100000000ull;
  loop_zone(p, big);
  double rss2 = peak_rss_mb();
  usleep(100000); /* the last drain */
  spy_provider_get_stats(p, &s3);
  kill(pid, SIGTERM);
  unsigned long long got[4] = {0, 0, 0, 0};
  if (read(pfd[0], got, sizeof got) != (ssize_t)sizeof got)
    memset(got, 0, sizeof got);
  close(pfd[0]);
  waitpid(pid, NULL, 0);
  double ip_enc = NAN, ip_dec = NAN; /* after the RSS figures */
  if (inproc(o.quick ? 5 : 20, 200000, &ip_enc, &ip_dec) < 0)
    fprintf(stderr, "bench zones: the in-process consumer never subscribed\n");

  uint64_t emitted_window = (uint64_t)rounds * n;
  uint64_t zones_window = (s2.zone_records - s1.zone_records) / 2;
  uint64_t dropped_window = s2.zones_dropped - s1.zones_dropped;
  uint64_t emitted_total =
      (uint64_t)(rounds + 1) * n + n / 4 + paced_n + 1000000ull + big;
  uint64_t delivered = (s3.zone_records - st0.zone_records) / 2;
  double bytes_per_zone =
      got[1] ? (double)got[0] / (double)got[1] : (double)NAN;
  double cpu_per_zone =
      zones_window ? (cpu1 - cpu0) / (double)zones_window : NAN;
  double na = NAN;
  bench_table t = {.title = "bench zones: one zone (begin + end) on the "
                            "inspected thread",
                   .cols = {"case", "ns_per_zone", "x_two_clock_reads",
                            "minus_empty_ns", "thread_cpu_ns",
                            "cpu_x_two_clock_reads"},
                   .ncols = 6};
  bench_row(
      &t, "empty loop (baseline)",
      (double[]){t_empty, t_empty / t_clock, 0, c_empty, c_empty / c_clock});
  bench_row(&t, "two clock reads (floor)",
            (double[]){t_clock, 1.0, t_clock - t_empty, c_clock, 1.0});
  bench_row(&t, "no zones subscriber",
            (double[]){t_off, t_off / t_clock, t_off - t_empty, c_off,
                       c_off / c_clock});
  bench_row(
      &t, "streaming to a consumer process",
      (double[]){t_on, t_on / t_clock, t_on - t_empty, c_on, c_on / c_clock});
  bench_row(&t, "wire bytes per zone (consumer)",
            (double[]){bytes_per_zone, na, na, na, na});
  bench_row(&t, "service CPU ns per zone drained",
            (double[]){cpu_per_zone, na, na, na, na});
  bench_row(&t, "consumer process CPU ns per span rebuilt",
            (double[]){got[1] ? (double)got[3] / (double)got[1] : na, na, na,
                       na, na});
  bench_row(&t, "in-process: drain + encode CPU ns per zone",
            (double[]){ip_enc, na, na, na, na});
  bench_row(&t, "in-process: decode + apply CPU ns per zone",
            (double[]){ip_dec, na, na, na, na});
  ap_rows(&t, rounds);
  bench_row(&t, "zones dropped at full speed, %",
            (double[]){100.0 * (double)dropped_window / (double)emitted_window,
                       na, na, na, na});
  bench_row(&t, "zones dropped at 1M zones/s, %",
            (double[]){paced_drop, na, na, na, na});
  bench_row(&t, "peak RSS MB after 1M zones", (double[]){rss1, na, na, na, na});
  bench_row(&t,
            o.quick ? "peak RSS MB after 10M more"
                    : "peak RSS MB after 100M more",
            (double[]){rss2, na, na, na, na});
  static char n1[200], n2[220], n3[160];
  snprintf(n1, sizeof n1,
           "clock: %s; goals: no subscriber <= empty + 1.5 ns, streaming <= "
           "1.25x two clock reads, <= 6 bytes per zone, RSS flat",
           spy__ticks_are_tsc() ? "calibrated TSC" : "CLOCK_MONOTONIC");
  snprintf(n2, sizeof n2,
           "whole run: %llu zones opened, %llu drained, %llu dropped; the "
           "consumer rebuilt %llu spans from %llu bytes, %llu frames lost",
           (unsigned long long)emitted_total, (unsigned long long)delivered,
           (unsigned long long)(s3.zones_dropped - st0.zones_dropped), got[1],
           got[0], got[2]);
  snprintf(n3, sizeof n3,
           "timed streaming window %.0f ms; service CPU = the provider's "
           "other threads over it",
           (double)(w1 - w0) / 1e6);
  t.notes[t.nnotes++] = n1;
  t.notes[t.nnotes++] = n2;
  t.notes[t.nnotes++] = n3;
  bench_print(&t, &o);
  spy_provider_destroy(p);
  spy_bus_sweep(dir);
  rmdir(dir);
  return 0;
}
