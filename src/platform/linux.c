/* linux.c — Linux implementations of platform.h: futex, clocks, random. */
#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"
#include "spyglass/error.h"

uint64_t spy__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t spy__thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t spy__wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

uint64_t spy__wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000ull;
}

uint64_t spy__random_u64(void) {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
      v = spy__mono_ns() ^ ((uint64_t)getpid() << 32); /* never expected */
  }
  return v;
}

int spy__futex_wait(uint32_t *addr, uint32_t expected, int64_t timeout_ns) {
  struct timespec ts, *tp = NULL;
  if (timeout_ns >= 0) {
    ts.tv_sec = (time_t)(timeout_ns / 1000000000);
    ts.tv_nsec = (long)(timeout_ns % 1000000000);
    tp = &ts;
  }
  /* Shared (not FUTEX_PRIVATE): the word lives in a mapping that other
   * processes share. */
  long r = syscall(SYS_futex, addr, FUTEX_WAIT, expected, tp, NULL, 0);
  if (r == 0 || errno == EAGAIN)
    return 0;
  if (errno == ETIMEDOUT)
    return SPY_ETIMEDOUT;
  if (errno == EINTR)
    return SPY_EINTR;
  return -errno;
}

int spy__futex_wake(uint32_t *addr, int count) {
  long r = syscall(SYS_futex, addr, FUTEX_WAKE, count, NULL, NULL, 0);
  return r < 0 ? -errno : (int)r;
}
