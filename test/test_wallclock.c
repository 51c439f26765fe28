/* test_wallclock.c — the counter-based wall clock of trace timestamps
 * (src/platform/wallclock.h): it reads the system clock until calibrated,
 * then agrees with CLOCK_REALTIME through re-anchoring while other
 * threads read it; a clock started later in the process is calibrated at
 * once; a counter whose rate changed is measured again;
 * SPY_TRACE_CLOCK=system keeps it off. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "platform/wallclock.h"
#include "testlib.h"

/* Generous: a reading is compared with system readings taken just before
 * and after it, and the rate is measured over 20 ms on a busy machine. */
#define SLACK_US 2000

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Starts c reading the counter; 0 without an invariant counter. */
static int counter_clock(spy__wallclock *c) {
  unsetenv("SPY_TRACE_CLOCK");
  spy__wallclock_init(c);
  return !c->off;
}

static _Atomic int64_t worst_us; /* the largest distance seen, reported */

/* A reading lies between the system clock's before and after it. */
static int agrees(spy__wallclock *c) {
  uint64_t a = spy__wall_us(), v = spy__wallclock_us(c), b = spy__wall_us();
  int64_t d = (int64_t)v < (int64_t)a   ? (int64_t)(a - v)
              : (int64_t)v > (int64_t)b ? (int64_t)(v - b)
                                        : 0;
  for (int64_t w = atomic_load(&worst_us);
       d > w && !atomic_compare_exchange_weak(&worst_us, &w, d);)
    ;
  if (v + SLACK_US < a || v > b + SLACK_US) {
    fprintf(stderr, "  clock %llu outside [%llu, %llu]\n",
            (unsigned long long)v, (unsigned long long)a,
            (unsigned long long)b);
    return 0;
  }
  return 1;
}

TEST(reads_the_system_clock_until_calibrated_then_the_counter) {
  unsetenv("SPY_TRACE_CLOCK");
  spy__wallclock c;
  spy__wallclock_init(&c);
  CHECK(agrees(&c));
  spy__wallclock_tend(&c, spy__mono_ns()); /* too early: no calibration */
  CHECK_EQ(atomic_load(&c.seq), 0);
  if (!spy__tsc_invariant()) { /* the system clock for good */
    CHECK(c.off);
    sleep_ms(25);
    spy__wallclock_tend(&c, spy__mono_ns() + 2000000000ull);
    CHECK_EQ(atomic_load(&c.seq), 0);
    CHECK(agrees(&c));
    return;
  }
  sleep_ms(25);
  spy__wallclock_tend(&c, spy__mono_ns());
  CHECK(atomic_load(&c.seq) != 0 && atomic_load(&c.seq) % 2 == 0);
  CHECK(atomic_load(&c.scale) > 0);
  for (int i = 0; i < 40; i++) {
    CHECK(agrees(&c));
    sleep_ms(5);
  }
  /* not due again within the second: the anchor stays */
  uint32_t s = atomic_load(&c.seq);
  spy__wallclock_tend(&c, spy__mono_ns());
  CHECK_EQ(atomic_load(&c.seq), s);
  /* due: re-anchored, and still the system's time */
  spy__wallclock_tend(&c, spy__mono_ns() + 2000000000ull);
  CHECK_EQ(atomic_load(&c.seq), s + 2);
  CHECK(agrees(&c));
  CHECK_EQ(c.rebased, 0); /* a steady counter never restarts the rate */
  /* a clock started after that one knows the rate at once */
  spy__wallclock c2;
  spy__wallclock_init(&c2);
  CHECK(atomic_load(&c2.seq) != 0);
  CHECK(agrees(&c2));
  fprintf(stderr, "  the clock was at most %lld µs outside the system's\n",
          (long long)atomic_load(&worst_us));
}

TEST(system_setting_keeps_the_counter_off) {
  setenv("SPY_TRACE_CLOCK", "system", 1);
  spy__wallclock c;
  spy__wallclock_init(&c);
  unsetenv("SPY_TRACE_CLOCK");
  CHECK(c.off);
  sleep_ms(25);
  spy__wallclock_tend(&c, spy__mono_ns() + 2000000000ull);
  CHECK_EQ(atomic_load(&c.seq), 0);
  CHECK(agrees(&c));
}

TEST(a_changed_counter_rate_is_measured_again) {
  spy__wallclock c;
  if (!counter_clock(&c)) /* the first case checked that */
    return;
  sleep_ms(25);
  spy__wallclock_tend(&c, spy__mono_ns() + 2000000000ull);
  CHECK(atomic_load(&c.seq) != 0);
  CHECK(agrees(&c));
  /* as if the counter ran at another rate before the last anchor than
   * after it (a VM moved to another host): the published rate and the
   * baseline's history both off by 20 %; the readings drift off the
   * system's */
  atomic_store(&c.scale, atomic_load(&c.scale) * 6 / 5);
  c.base_tick = c.at_tick - (c.at_tick - c.base_tick) * 6 / 5;
  sleep_ms(50);
  uint64_t a = spy__wall_us(), v = spy__wallclock_us(&c);
  CHECK(v > a + 5000); /* ~10 ms ahead after 50 ms */
  spy__wallclock_tend(&c, spy__mono_ns() + 2000000000ull);
  CHECK_EQ(c.rebased, 1);
  CHECK(agrees(&c));
  sleep_ms(50); /* the rate measured again holds */
  CHECK(agrees(&c));
  spy__wallclock_tend(&c, spy__mono_ns() + 2000000000ull);
  CHECK_EQ(c.rebased, 1);
  CHECK(agrees(&c));
}

typedef struct {
  spy__wallclock *c;
  _Atomic int *stop;
  int bad;
  uint64_t reads;
} reader_arg;

static void *reader(void *p) {
  reader_arg *r = p;
  while (!atomic_load(r->stop)) {
    if (!agrees(r->c))
      r->bad++;
    r->reads++;
  }
  return NULL;
}

TEST(readers_agree_while_the_clock_is_re_anchored) {
  spy__wallclock c;
  if (!counter_clock(&c)) /* the first case checked that */
    return;
  _Atomic int stop = 0;
  reader_arg ra[2] = {{&c, &stop, 0, 0}, {&c, &stop, 0, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    CHECK_EQ(pthread_create(&th[i], NULL, reader, &ra[i]), 0);
  sleep_ms(25);
  uint32_t s0 = atomic_load(&c.seq);
  /* re-anchor as fast as possible: every call is due */
  for (int i = 0; i < 20000; i++)
    spy__wallclock_tend(&c, spy__mono_ns() + 2000000000ull * (uint64_t)(i + 1));
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  CHECK(atomic_load(&c.seq) - s0 >= 2 * 1000); /* a wide pair is skipped */
  fprintf(stderr, "  %llu + %llu reads during 20,000 re-anchors\n",
          (unsigned long long)ra[0].reads, (unsigned long long)ra[1].reads);
  CHECK_EQ(ra[0].bad + ra[1].bad, 0);
  CHECK(ra[0].reads > 0 && ra[1].reads > 0);
}

TEST_MAIN(TEST_CASE(reads_the_system_clock_until_calibrated_then_the_counter),
          TEST_CASE(system_setting_keeps_the_counter_off),
          TEST_CASE(a_changed_counter_rate_is_measured_again),
          TEST_CASE(readers_agree_while_the_clock_is_re_anchored))
