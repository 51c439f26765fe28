/* wallclock.h — the wall clock (µs since the Unix epoch) read from the
 * CPU's time-stamp counter, for timestamps taken on a hot path: a trace
 * session stamps every action, and clock_gettime costs 20–35 ns on a VM
 * where the counter costs ~10.
 *
 * One thread at a time tends the clock (spy__wallclock_tend): it measures
 * the counter's rate against CLOCK_MONOTONIC over a baseline that grows
 * from the clock's start, and re-anchors the counter to CLOCK_REALTIME
 * about once a second, so the clock follows the system's (NTP slews and
 * steps included) to within microseconds. When an anchor finds the
 * counter ran off the rate by more than 100 ppm since the last one (a
 * virtual machine moved to another host), the baseline restarts there. A
 * clock started after another
 * was calibrated in the process uses the best rate known until its own
 * baseline is longer. Any thread reads it (spy__wallclock_us): until the
 * first calibration (20 ms into the process's first clock), without an
 * invariant counter, or with SPY_TRACE_CLOCK=system, a read is
 * clock_gettime's. */
#ifndef SPY_PLATFORM_WALLCLOCK_H
#define SPY_PLATFORM_WALLCLOCK_H

#include <stdatomic.h>
#include <stdint.h>

#include "platform/platform.h"

typedef struct spy__wallclock {
  /* the anchor, under a sequence lock: odd while the tender changes it,
   * 0 until the first calibration (readers use the system clock) */
  _Atomic uint32_t seq;
  _Atomic uint64_t tick0; /* the counter at the anchor… */
  _Atomic uint64_t us0;   /* …and the wall clock then, in µs */
  _Atomic uint64_t scale; /* µs per tick, 32.32 fixed point */
  /* the tender's own */
  uint64_t base_tick, base_ns; /* the rate's baseline: the first pair */
  uint64_t at_tick, at_ns;     /* the last anchor's pair */
  uint64_t due_ns;             /* CLOCK_MONOTONIC of the next anchor */
  uint32_t rebased; /* baselines restarted: the counter's rate changed */
  int off;          /* the system clock only */
} spy__wallclock;

/* Starts the clock: its baseline pair now; calibrated at once when the
 * process knows the rate, else from the first tend ≥ 20 ms later. */
void spy__wallclock_init(spy__wallclock *c);

/* Calibrates or re-anchors when due; now_ns is CLOCK_MONOTONIC (the
 * caller has it). Cheap when not due: a compare. One thread at a time. */
void spy__wallclock_tend(spy__wallclock *c, uint64_t now_ns);

/* The wall clock in µs since the epoch; any thread. */
static inline uint64_t spy__wallclock_us(spy__wallclock *c) {
#if defined(__x86_64__) || defined(__i386__)
  uint32_t s = atomic_load_explicit(&c->seq, memory_order_acquire);
  if (__builtin_expect(s != 0 && !(s & 1), 1)) {
    uint64_t t0 = atomic_load_explicit(&c->tick0, memory_order_relaxed);
    uint64_t u0 = atomic_load_explicit(&c->us0, memory_order_relaxed);
    uint64_t sc = atomic_load_explicit(&c->scale, memory_order_relaxed);
    uint64_t now = __rdtsc();
    atomic_thread_fence(memory_order_acquire);
    /* a counter behind the anchor (another core's, not in step) falls
     * back to the system clock */
    uint32_t s2 = atomic_load_explicit(&c->seq, memory_order_relaxed);
    if (__builtin_expect(s2 == s && now >= t0, 1))
      return u0 + (uint64_t)(((unsigned __int128)(now - t0) * sc) >> 32);
  }
#else
  (void)c;
#endif
  return spy__wall_us();
}

#endif
