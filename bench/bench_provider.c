/* bench_provider.c — `spyglass bench provider`: what one frame of
 * instrumentation costs the inspected thread (begin + end + 8 counters + 4
 * named values), with nobody watching, and watched through the inline and
 * the offload transport, next to an empty loop and a loop of two clock
 * reads (the physical floor of measuring a frame) in the same run; heap
 * allocations on the frame thread; peak RSS over short and long runs. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
 * once), the fast way for a hot loop. */
static int h_time, h_frame, h_even, h_load;
static void handle_frame(void *arg) {
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

static _Atomic int consumer_stop;
static void *consumer_main(void *arg) {
  spy_consumer *c = arg;
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
  spy_provider_desc d = {.name = "bench", .dir = dir, .transport = kind};
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

/* Runs n frames watched through the offload transport; returns the frame
 * thread's allocations. */
static long run_frames(uint64_t n) {
  alloc_count_start();
  for (uint64_t i = 0; i < n; i++)
    instrumented_frame(prov);
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
  double t_empty = bench_time_op(empty_frame, NULL, rounds, target);
  double t_clock = bench_time_op(clock_frame, NULL, rounds, target);
  watched w = {0};
  if (setup(SPY_TRANSPORT_OFFLOAD, 0, &w) < 0)
    return 1;
  double t_off = bench_time_op(instrumented_frame, prov, rounds, target);
  teardown(0, &w);
  if (setup(SPY_TRANSPORT_INLINE, 1, &w) < 0)
    return 1;
  double t_inline = bench_time_op(instrumented_frame, prov, rounds, target);
  long a_inline = run_frames(o.quick ? 20000 : 200000);
  teardown(1, &w);
  if (setup(SPY_TRANSPORT_OFFLOAD, 1, &w) < 0)
    return 1;
  double t_offload = bench_time_op(instrumented_frame, prov, rounds, target);
  h_time = spy_value_handle(prov, "scene.time");
  h_frame = spy_value_handle(prov, "frame");
  h_even = spy_value_handle(prov, "even");
  h_load = spy_value_handle(prov, "load");
  double t_handle = bench_time_op(handle_frame, prov, rounds, target);
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
  bench_row(&t, "subscribed, inline transport",
            (double[]){t_inline, t_inline / t_clock, t_inline - t_empty,
                       counted == 0 ? (double)a_inline : NAN});
  bench_row(&t, "subscribed, offload transport",
            (double[]){t_offload, t_offload / t_clock, t_offload - t_empty,
                       counted == 0 ? (double)a_offload : NAN});
  bench_row(&t, "  same, values by handle",
            (double[]){t_handle, t_handle / t_clock, t_handle - t_empty, na});
  static char n1s[160], n2s[200], clk[120];
  snprintf(clk, sizeof clk,
           "clock: %s; goals: no subscriber <= empty + 1.5 "
           "ns, offload <= 2x two clock reads, 0 allocations",
           spy__ticks_are_tsc() ? "calibrated TSC" : "CLOCK_MONOTONIC");
  snprintf(n1s, sizeof n1s,
           "peak RSS %.1f MB after %llu watched frames, %.1f MB after %llu "
           "more (bounded by the pools)",
           rss1, (unsigned long long)n1, rss2, (unsigned long long)(4 * n1));
  snprintf(n2s, sizeof n2s,
           "offload run: %llu flushes posted, %llu dropped, %llu samples "
           "dropped; allocations counted on the frame thread only",
           (unsigned long long)st.flushes,
           (unsigned long long)st.flushes_dropped,
           (unsigned long long)st.samples_dropped);
  t.notes[t.nnotes++] = clk;
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
