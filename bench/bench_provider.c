/* bench_provider.c — `spyglass bench provider`: what one frame of
 * instrumentation costs the inspected thread (begin + end + 8 counters + 4
 * named values), with nobody watching, and watched through the inline and
 * the offload transport, next to an empty loop and a loop of two clock
 * reads (the physical floor of measuring a frame) in the same run; heap
 * allocations on the frame thread; peak RSS over short and long runs.
 *
 * Watched frames are measured with no sample dropped: the provider flushes
 * every SPY_SAMPLE_RING frames (spy_provider_flush, inside the timed
 * loop, so each frame carries its share of encoding and posting the data
 * frame), and before each batch the bench waits, untimed, until the
 * offload worker has returned the pool's buffers (it picks up posts
 * between its channel waits, so a loop much faster than a real frame rate
 * would otherwise find the pool empty and drop). The drop path — frames
 * measured while the sample ring is full — is a row of its own. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc_count.h"
#include "bench.h"
#include "platform/platform.h"
#include "spyglass/consumer.h"
#include "spyglass/provider.h"

static char dir[128];
static spy_provider *prov;
static uint64_t frame_no;

static void empty_frame(void *arg) {
  (void)arg;
  __asm__ __volatile__("" ::: "memory");
}

static void clock_frame(void *arg) {
  (void)arg;
  uint64_t t0 = spy__ticks();
  __asm__ __volatile__("" ::: "memory");
  uint64_t t1 = spy__ticks();
  bench_sink(t1 - t0);
}

/* The 8 counters of a frame (inline: they are part of what is measured). */
static inline void set_counters(spy_provider *p, uint64_t f) {
  spy_counter_set(p, SPY_COUNTER_DRAWS, (uint32_t)f);
  spy_counter_set(p, SPY_COUNTER_PASSES, 2);
  spy_counter_set(p, SPY_COUNTER_MIPS, 0);
  spy_counter_set(p, SPY_COUNTER_OBJECTS, 120);
  spy_counter_set(p, SPY_COUNTER_FAST, 80);
  spy_counter_set(p, SPY_COUNTER_EFFECT, 40);
  spy_counter_set(p, SPY_COUNTER_PARTICLES, 5000);
  spy_counter_set(p, SPY_COUNTER_DIRTY, 1);
}

static void instrumented_frame(void *arg) {
  spy_provider *p = arg;
  uint64_t f = frame_no++;
  spy_frame_begin(p);
  set_counters(p, f);
  spy_value_set_f64(p, "scene.time", (double)f * 0.016);
  spy_value_set_i64(p, "frame", (int64_t)f);
  spy_value_set_bool(p, "even", !(f & 1));
  spy_value_set_f64(p, "load", 1.0);
  spy_frame_end(p);
}

/* The same frame with the named values set through handles (looked up
 * once) and the typed setters, the fast way for a hot loop. */
static int h_time, h_frame, h_even, h_load;
static void handle_frame(void *arg) {
  spy_provider *p = arg;
  uint64_t f = frame_no++;
  spy_frame_begin(p);
  set_counters(p, f);
  spy_value_set_f64_at(p, h_time, (double)f * 0.016);
  spy_value_set_i64_at(p, h_frame, (int64_t)f);
  spy_value_set_bool_at(p, h_even, !(f & 1));
  spy_value_set_f64_at(p, h_load, 1.0);
  spy_frame_end(p);
}

/* By handle with a spy_value the caller builds (spy_value_set_at): the
 * value is built before the watched check. */
static void value_frame(void *arg) {
  spy_provider *p = arg;
  uint64_t f = frame_no++;
  spy_frame_begin(p);
  set_counters(p, f);
  spy_value v = {.kind = SPY_VAL_FLOAT};
  v.v.f[0] = (double)f * 0.016;
  spy_value_set_at(p, h_time, &v);
  v.kind = SPY_VAL_INT;
  v.v.i = (int64_t)f;
  spy_value_set_at(p, h_frame, &v);
  v.kind = SPY_VAL_BOOL;
  v.v.b = !(f & 1);
  spy_value_set_at(p, h_even, &v);
  v.kind = SPY_VAL_FLOAT;
  v.v.f[0] = 1.0;
  spy_value_set_at(p, h_load, &v);
  spy_frame_end(p);
}

static void get_handles(void) {
  h_time = spy_value_handle(prov, "scene.time");
  h_frame = spy_value_handle(prov, "frame");
  h_even = spy_value_handle(prov, "even");
  h_load = spy_value_handle(prov, "load");
}

/* Untimed: until the transport has every MEDIUM buffer back. */
static void wait_pool(void) {
  spy_transport *t = spy_provider_transport(prov);
  spy_pool_stats ps;
  uint64_t end = bench_now_ns() + 1000000000ull;
  for (;;) {
    t->ops->pool_stats(t, &ps);
    if (ps.free[SPY_TIER_MEDIUM] == ps.total[SPY_TIER_MEDIUM] ||
        bench_now_ns() > end)
      return;
    usleep(50);
  }
}

/* Watched frames, no sample dropped: `batches` batches of SPY_SAMPLE_RING
 * frames, each followed by a flush, all timed, the pool refilled between
 * batches (untimed); the median per-frame figure over `rounds` rounds.
 * *dropped gets the samples and flushes dropped meanwhile (should be 0). */
static double time_no_drop(void (*fn)(void *), int rounds, int batches,
                           uint64_t *dropped) {
  double v[64];
  spy_provider_stats st;
  spy_provider_flush(prov); /* start with an empty sample ring */
  spy_provider_get_stats(prov, &st);
  uint64_t before = st.samples_dropped + st.flushes_dropped;
  double npt = spy__ns_per_tick();
  for (int r = 0; r < rounds; r++) {
    uint64_t ticks = 0;
    for (int b = 0; b < batches; b++) {
      wait_pool();
      uint64_t t0 = spy__ticks();
      for (unsigned i = 0; i < SPY_SAMPLE_RING; i++)
        fn(prov);
      spy_provider_flush(prov);
      ticks += spy__ticks() - t0;
    }
    v[r] = (double)ticks * npt / ((double)batches * SPY_SAMPLE_RING);
  }
  spy_provider_get_stats(prov, &st);
  *dropped = st.samples_dropped + st.flushes_dropped - before;
  return bench_quantile(v, (size_t)rounds, 0.5);
}

/* The two clock reads timed like the watched rows (batches of
 * SPY_SAMPLE_RING after a short sleep), so that their ratio compares like
 * with like: batched timing on a loaded machine sees fewer preemptions
 * than a long continuous loop. */
static double time_clock_batched(int rounds, int batches) {
  double v[64];
  double npt = spy__ns_per_tick();
  for (int r = 0; r < rounds; r++) {
    uint64_t ticks = 0;
    for (int b = 0; b < batches; b++) {
      usleep(50);
      uint64_t t0 = spy__ticks();
      for (unsigned i = 0; i < SPY_SAMPLE_RING; i++)
        clock_frame(NULL);
      ticks += spy__ticks() - t0;
    }
    v[r] = (double)ticks * npt / ((double)batches * SPY_SAMPLE_RING);
  }
  return bench_quantile(v, (size_t)rounds, 0.5);
}

/* The drop path: the sample ring full (no flush), every sample dropped. */
static double time_drop_path(int rounds, double target) {
  spy_provider_flush(prov);
  for (unsigned i = 0; i < SPY_SAMPLE_RING; i++)
    instrumented_frame(prov);
  return bench_time_op(instrumented_frame, prov, rounds, target);
}

static _Atomic long consumer_tid; /* the bench's consumer thread, if any */

/* The provider's threads' CPU while nothing happens for `ms`: the frame
 * thread idle, and the consumer (if any, its thread not counted) only
 * acking. Microseconds of CPU
 * per second of wall time. */
static double idle_cpu_us_per_s(int ms) {
  double c0 = bench_other_threads_cpu_ns(atomic_load(&consumer_tid));
  uint64_t t0 = bench_now_ns();
  usleep((useconds_t)ms * 1000);
  double c1 = bench_other_threads_cpu_ns(atomic_load(&consumer_tid));
  uint64_t t1 = bench_now_ns();
  return (c1 - c0) / 1e3 / ((double)(t1 - t0) / 1e9);
}

static _Atomic int consumer_stop;
static void *consumer_main(void *arg) {
  spy_consumer *c = arg;
  atomic_store(&consumer_tid, (long)syscall(SYS_gettid));
  while (!atomic_load(&consumer_stop))
    spy_consumer_poll(c, 100); /* like `spyglass top`: 10 Hz */
  return NULL;
}

typedef struct watched {
  spy_consumer *c;
  pthread_t t;
} watched;

/* Creates the provider and, if asked, an in-process consumer subscribed to
 * it (stats, env, registry, health), waiting until the subscription is
 * live. */
static int setup(spy_transport_kind kind, int watch, watched *w) {
  /* Flushes are the bench's own (every SPY_SAMPLE_RING frames). */
  spy_provider_desc d = {
      .name = "bench", .dir = dir, .transport = kind, .flush_ms = 1000000};
  if (spy_provider_create(&prov, &d) < 0)
    return -1;
  if (!watch)
    return 0;
  spy_consumer_desc cd = {.dir = dir, .query_initial_ms = 20};
  if (spy_consumer_create(&w->c, &cd) < 0)
    return -1;
  atomic_store(&consumer_stop, 0);
  pthread_create(&w->t, NULL, consumer_main, w->c);
  spy_provider_stats st;
  uint64_t end = bench_now_ns() + 10000000000ull;
  do {
    instrumented_frame(prov); /* the inline transport answers from here */
    usleep(500);
    spy_provider_get_stats(prov, &st);
  } while (!(st.features & SPY_FEAT_REGISTRY) && bench_now_ns() < end);
  return (st.features & SPY_FEAT_REGISTRY) ? 0 : -1;
}

static void teardown(int watch, watched *w) {
  if (watch) {
    atomic_store(&consumer_stop, 1);
    pthread_join(w->t, NULL);
    atomic_store(&consumer_tid, 0);
    spy_consumer_destroy(w->c);
  }
  spy_provider_destroy(prov);
  prov = NULL;
}

static double peak_rss_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

/* Runs n frames watched, flushing every SPY_SAMPLE_RING; returns the
 * frame thread's allocations. */
static long run_frames(uint64_t n) {
  alloc_count_start();
  for (uint64_t i = 0; i < n; i++) {
    instrumented_frame(prov);
    if (i % SPY_SAMPLE_RING == SPY_SAMPLE_RING - 1)
      spy_provider_flush(prov);
  }
  return alloc_count_stop();
}

int bench_provider(int argc, char **argv) {
  bench_opts o;
  int rc = bench_parse(argc, argv, &o,
                       "usage: spyglass bench provider [--json] [--quick]\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  if (bench_tempdir(dir, sizeof dir) < 0)
    return 1;
  spy__ticks_init();
  int rounds = o.quick ? 5 : 21;
  double target = o.quick ? 5 : 25;
  int nd_rounds = o.quick ? 3 : 11, nd_batches = o.quick ? 3 : 20;
  double t_empty = bench_time_op(empty_frame, NULL, rounds, target);
  double t_clock = bench_time_op(clock_frame, NULL, rounds, target);
  watched w = {0};
  if (setup(SPY_TRANSPORT_OFFLOAD, 0, &w) < 0)
    return 1;
  get_handles();
  double t_off = bench_time_op(instrumented_frame, prov, rounds, target);
  double t_off_h = bench_time_op(handle_frame, prov, rounds, target);
  double t_off_v = bench_time_op(value_frame, prov, rounds, target);
  int idle_ms = o.quick ? 500 : 2000;
  double idle_unwatched = idle_cpu_us_per_s(idle_ms);
  teardown(0, &w);
  uint64_t drop_inline = 0, drop_off = 0, drop_h = 0;
  if (setup(SPY_TRANSPORT_INLINE, 1, &w) < 0)
    return 1;
  double t_inline =
      time_no_drop(instrumented_frame, nd_rounds, nd_batches, &drop_inline);
  long a_inline = run_frames(o.quick ? 20000 : 200000);
  teardown(1, &w);
  if (setup(SPY_TRANSPORT_OFFLOAD, 1, &w) < 0)
    return 1;
  double t_offload =
      time_no_drop(instrumented_frame, nd_rounds, nd_batches, &drop_off);
  get_handles();
  double t_handle = time_no_drop(handle_frame, nd_rounds, nd_batches, &drop_h);
  double t_drop = time_drop_path(rounds, target);
  double t_clock_b = time_clock_batched(nd_rounds, nd_batches);
  double idle_watched = idle_cpu_us_per_s(idle_ms);
  uint64_t n1 = o.quick ? 50000 : 1000000;
  long a_offload = run_frames(n1);
  double rss1 = peak_rss_mb();
  a_offload += run_frames(4 * n1);
  double rss2 = peak_rss_mb();
  spy_provider_stats st;
  spy_provider_get_stats(prov, &st);
  teardown(1, &w);

  double na = NAN;
  double counted = alloc_count_available() ? 0 : NAN;
  bench_table t = {
      .title = "bench provider: one frame = begin + end + 8 counters + 4 "
               "named values, on the inspected thread",
      .cols = {"case", "ns_per_frame", "x_two_clock_reads", "minus_empty_ns",
               "allocations"},
      .ncols = 5};
  bench_row(&t, "empty loop (baseline)",
            (double[]){t_empty, t_empty / t_clock, 0, na});
  bench_row(&t, "two clock reads (floor)",
            (double[]){t_clock, 1.0, t_clock - t_empty, na});
  bench_row(&t, "no subscriber",
            (double[]){t_off, t_off / t_clock, t_off - t_empty, na});
  bench_row(&t, "  same, by handle (typed setters)",
            (double[]){t_off_h, t_off_h / t_clock, t_off_h - t_empty, na});
  bench_row(&t, "  same, by handle (spy_value_set_at)",
            (double[]){t_off_v, t_off_v / t_clock, t_off_v - t_empty, na});
  bench_row(&t, "two clock reads, batched",
            (double[]){t_clock_b, 1.0, t_clock_b - t_empty, na});
  bench_row(&t, "watched, inline transport",
            (double[]){t_inline, t_inline / t_clock_b, t_inline - t_empty,
                       counted == 0 ? (double)a_inline : NAN});
  bench_row(&t, "watched, offload transport",
            (double[]){t_offload, t_offload / t_clock_b, t_offload - t_empty,
                       counted == 0 ? (double)a_offload : NAN});
  bench_row(&t, "  same, by handle (typed setters)",
            (double[]){t_handle, t_handle / t_clock_b, t_handle - t_empty, na});
  bench_row(&t, "  drop path: sample ring full",
            (double[]){t_drop, t_drop / t_clock, t_drop - t_empty, na});
  static char n1s[160], n2s[240], n3s[240], clk[140];
  snprintf(clk, sizeof clk,
           "clock: %s; goals: no subscriber <= empty + 1.5 ns, watched by "
           "handle <= 2x two clock reads, 0 allocations",
           spy__ticks_are_tsc() ? "calibrated TSC" : "CLOCK_MONOTONIC");
  snprintf(n3s, sizeof n3s,
           "watched rows: a flush every %u frames inside the timing (its "
           "share included), ratios to the batched clock reads; samples + "
           "flushes dropped while timed: inline %llu, offload %llu, by "
           "handle %llu",
           SPY_SAMPLE_RING, (unsigned long long)drop_inline,
           (unsigned long long)drop_off, (unsigned long long)drop_h);
  snprintf(n1s, sizeof n1s,
           "peak RSS %.1f MB after %llu watched frames, %.1f MB after %llu "
           "more (bounded by the pools)",
           rss1, (unsigned long long)n1, rss2, (unsigned long long)(4 * n1));
  snprintf(n2s, sizeof n2s,
           "offload run: %llu flushes posted, %llu dropped (pool empty: the "
           "allocation runs do not wait for the worker), %llu samples "
           "dropped; allocations counted on the frame thread only",
           (unsigned long long)st.flushes,
           (unsigned long long)st.flushes_dropped,
           (unsigned long long)st.samples_dropped);
  static char n4s[200];
  snprintf(n4s, sizeof n4s,
           "provider threads' CPU while the frame thread is idle for %d ms: "
           "no subscriber %.1f us/s, one subscriber %.1f us/s (the "
           "consumer's thread not counted)",
           idle_ms, idle_unwatched, idle_watched);
  t.notes[t.nnotes++] = clk;
  t.notes[t.nnotes++] = n4s;
  t.notes[t.nnotes++] = n3s;
  t.notes[t.nnotes++] = n1s;
  t.notes[t.nnotes++] = n2s;
  if (!alloc_count_available())
    t.notes[t.nnotes++] = "allocations: not counted in this build "
                          "(sanitizers own malloc)";
  bench_print(&t, &o);
  spy_bus_sweep(dir);
  rmdir(dir);
  return 0;
}
