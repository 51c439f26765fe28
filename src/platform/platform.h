/* platform.h — the OS-specific primitives spyglass needs, behind one
 * internal header (Linux: futex, clock_gettime, getrandom). Nothing outside
 * src/platform/ includes an OS header for these. */
#ifndef SPY_PLATFORM_H
#define SPY_PLATFORM_H

#include <stdint.h>

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC). */
uint64_t spy__mono_ns(void);
/* Wall clock in milliseconds since the Unix epoch (CLOCK_REALTIME). */
uint64_t spy__wall_ms(void);
/* A random 64-bit value from the kernel (never 0). */
uint64_t spy__random_u64(void);

/* Futex on a 32-bit word in memory shared between processes. wait returns
 * 0 when woken (or the value already differed), SPY_ETIMEDOUT on timeout
 * (timeout_ns < 0: forever), SPY_EINTR on a signal. wake returns the
 * number of waiters woken. */
int spy__futex_wait(uint32_t *addr, uint32_t expected, int64_t timeout_ns);
int spy__futex_wake(uint32_t *addr, int count);

/* A pause hint for spin-wait loops. */
static inline void spy__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
