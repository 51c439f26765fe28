/* ticks.c — the provider's frame clock: the CPU's invariant time-stamp
 * counter, calibrated once against CLOCK_MONOTONIC, or CLOCK_MONOTONIC
 * itself where there is no usable counter. Reading the counter costs a few
 * nanoseconds; clock_gettime costs several times that on a VM. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "platform/platform.h"

static double ns_per_tick = 1.0;
int spy__use_tsc;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
static inline uint64_t rdtsc(void) { return __rdtsc(); }

/* The counter is only a clock if it runs at a constant rate through every
 * power state: the kernel says so with these two cpuinfo flags. */
static int read_tsc_invariant(void) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f)
    return 0;
  char line[4096];
  int constant = 0, nonstop = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0)
      continue;
    constant = strstr(line, " constant_tsc") != NULL;
    nonstop = strstr(line, " nonstop_tsc") != NULL;
    break;
  }
  fclose(f);
  return constant && nonstop;
}

static int invariant;
static pthread_once_t invariant_once = PTHREAD_ONCE_INIT;
static void check_invariant(void) { invariant = read_tsc_invariant(); }
#endif

int spy__tsc_invariant(void) {
#if defined(__x86_64__) || defined(__i386__)
  pthread_once(&invariant_once, check_invariant);
  return invariant;
#else
  return 0;
#endif
}

#if defined(__x86_64__) || defined(__i386__)
/* One CLOCK_MONOTONIC reading and the counter at the same moment: the
 * counter read on both sides of the clock, the tightest of a few tries
 * (a thread preempted between the two reads of a pair, as on a loaded
 * machine, would otherwise skew a rate by the whole preemption). */
uint64_t spy__tsc_pair(uint64_t *tick, uint64_t *ns) {
  uint64_t best = UINT64_MAX;
  *tick = rdtsc();
  *ns = spy__mono_ns();
  for (int i = 0; i < 8; i++) {
    uint64_t a = rdtsc(), n = spy__mono_ns(), b = rdtsc();
    if (b >= a && b - a < best) {
      best = b - a;
      *ns = n;
      *tick = a + (b - a) / 2;
    }
  }
  return best;
}
#endif

static void calibrate(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (!spy__tsc_invariant())
    return;
  uint64_t n0 = spy__mono_ns(), c0 = rdtsc(), n1 = n0, c1 = c0;
  spy__tsc_pair(&c0, &n0);
  while (spy__mono_ns() - n0 < 5000000) {
  }
  spy__tsc_pair(&c1, &n1);
  if (c1 <= c0 || n1 <= n0)
    return;
  ns_per_tick = (double)(n1 - n0) / (double)(c1 - c0);
  spy__use_tsc = 1;
#endif
}

void spy__ticks_init(void) { pthread_once(&once, calibrate); }

double spy__ns_per_tick(void) { return ns_per_tick; }
int spy__ticks_are_tsc(void) { return spy__use_tsc; }
