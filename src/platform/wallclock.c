/* wallclock.c — calibrating and re-anchoring the counter-based wall clock
 * of wallclock.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "platform/wallclock.h"

#define FIRST_NS 20000000ull    /* the first calibration's baseline */
#define ANCHOR_NS 1000000000ull /* re-anchor this often */
/* a pair wider than this many ticks (~20 µs at 3 GHz: the thread was
 * preempted or interrupted in every try) is not used */
#define WIDE_TICKS 60000u
/* an anchor predicted farther than this from the monotonic clock by the
 * last one (~100 ppm over the second between them) restarts the rate's
 * baseline */
#define DRIFT_US 100u

#if defined(__x86_64__) || defined(__i386__)
/* CLOCK_REALTIME minus CLOCK_MONOTONIC now, in ns: the wall clock read
 * between two monotonic reads, the tightest of a few tries. */
static int64_t realtime_offset_ns(void) {
  uint64_t best = UINT64_MAX;
  int64_t off = 0;
  for (int i = 0; i < 4; i++) {
    uint64_t a = spy__mono_ns(), w = spy__wall_us(), b = spy__mono_ns();
    if (b - a < best) {
      best = b - a;
      off = (int64_t)(w * 1000u) - (int64_t)(a + (b - a) / 2);
    }
  }
  return off;
}

/* The best rate measured in this process (the longest baseline), so a
 * session made after another starts calibrated. */
static pthread_mutex_t known_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t known_scale, known_span_ns;

/* Publishes the anchor (tick, ns) with `scale` under the sequence lock. */
static void anchor(spy__wallclock *c, uint64_t tick, uint64_t ns,
                   uint64_t scale) {
  int64_t off = realtime_offset_ns();
  uint64_t us0 = (uint64_t)((int64_t)ns + off) / 1000u;
  uint32_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);
  atomic_store_explicit(&c->seq, s + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&c->tick0, tick, memory_order_relaxed);
  atomic_store_explicit(&c->us0, us0, memory_order_relaxed);
  atomic_store_explicit(&c->scale, scale, memory_order_relaxed);
  /* never 0 again (0 means "not calibrated") */
  atomic_store_explicit(&c->seq, s + 2 ? s + 2 : 2, memory_order_release);
  c->at_tick = tick;
  c->at_ns = ns;
  c->due_ns = ns + ANCHOR_NS;
}
#endif

void spy__wallclock_init(spy__wallclock *c) {
  memset(c, 0, sizeof *c);
  const char *e = getenv("SPY_TRACE_CLOCK");
  c->off = !spy__tsc_invariant() || (e && strcmp(e, "system") == 0);
#if defined(__x86_64__) || defined(__i386__)
  if (c->off)
    return;
  if (spy__tsc_pair(&c->base_tick, &c->base_ns) > WIDE_TICKS) {
    c->base_ns = 0; /* the first tend takes the baseline */
    return;
  }
  c->due_ns = c->base_ns + FIRST_NS;
  pthread_mutex_lock(&known_mu);
  uint64_t scale = known_scale;
  pthread_mutex_unlock(&known_mu);
  if (scale) /* the process knows the rate: calibrated from the start */
    anchor(c, c->base_tick, c->base_ns, scale);
#endif
}

void spy__wallclock_tend(spy__wallclock *c, uint64_t now_ns) {
  if (c->off || now_ns < c->due_ns)
    return;
#if defined(__x86_64__) || defined(__i386__)
  uint64_t tick = 0, ns = 0;
  if (spy__tsc_pair(&tick, &ns) > WIDE_TICKS)
    return; /* the next round tries again */
  if (!c->base_ns) {
    c->base_tick = tick;
    c->base_ns = ns;
    c->due_ns = ns + FIRST_NS;
    return;
  }
  if (tick <= c->base_tick || ns <= c->base_ns) {
    c->off = 1; /* a counter that went back: not a clock */
    atomic_store_explicit(&c->seq, 0, memory_order_release);
    return;
  }
  if (c->at_ns && tick > c->at_tick) {
    /* where the last anchor and the published rate put this moment, on
     * the monotonic clock: off by more than DRIFT_US, the counter's rate
     * changed, and the rate is measured again from the last anchor */
    uint64_t sc = atomic_load_explicit(&c->scale, memory_order_relaxed);
    uint64_t pred =
        c->at_ns / 1000u +
        (uint64_t)(((unsigned __int128)(tick - c->at_tick) * sc) >> 32);
    uint64_t real = ns / 1000u;
    if ((pred > real ? pred - real : real - pred) > DRIFT_US) {
      c->base_tick = c->at_tick;
      c->base_ns = c->at_ns;
      c->rebased++;
      pthread_mutex_lock(&known_mu);
      known_span_ns = 0; /* the process's rate is as stale as ours */
      pthread_mutex_unlock(&known_mu);
    }
  }
  uint64_t span = ns - c->base_ns;
  unsigned __int128 num = (unsigned __int128)span << 32;
  uint64_t scale =
      (uint64_t)(num / ((unsigned __int128)(tick - c->base_tick) * 1000u));
  /* the process's rate when it was measured over longer than ours */
  pthread_mutex_lock(&known_mu);
  if (span >= known_span_ns) {
    known_scale = scale;
    known_span_ns = span;
  } else
    scale = known_scale;
  pthread_mutex_unlock(&known_mu);
  anchor(c, tick, ns, scale);
#else
  (void)now_ns;
#endif
}
