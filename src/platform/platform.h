/* platform.h — the OS-specific primitives spyglass needs, behind one
 * internal header (Linux: futex, clock_gettime, getrandom). Nothing outside
 * src/platform/ includes an OS header for these. */
#ifndef SPY_PLATFORM_H
#define SPY_PLATFORM_H

#include <stdint.h>

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC). */
uint64_t spy__mono_ns(void);
/* CPU time of the calling thread in nanoseconds (CLOCK_THREAD_CPUTIME_ID:
 * a system call, not for a hot path). */
uint64_t spy__thread_cpu_ns(void);
/* Wall clock in milliseconds since the Unix epoch (CLOCK_REALTIME). */
uint64_t spy__wall_ms(void);
/* Wall clock in microseconds since the Unix epoch (CLOCK_REALTIME). */
uint64_t spy__wall_us(void);
/* A random 64-bit value from the kernel (never 0). */
uint64_t spy__random_u64(void);

/* Futex on a 32-bit word in memory shared between processes. wait returns
 * 0 when woken (or the value already differed), SPY_ETIMEDOUT on timeout
 * (timeout_ns < 0: forever), SPY_EINTR on a signal. wake returns the
 * number of waiters woken. */
int spy__futex_wait(uint32_t *addr, uint32_t expected, int64_t timeout_ns);
int spy__futex_wake(uint32_t *addr, int count);

/* Sealed shared memory (src/platform/shm.c). A memfd of `bytes`,
 * allocated in full and sealed against shrinking and growing, so a mapping
 * of it never faults for lack of backing whoever else holds it.
 * spy__shm_create returns the fd or SPY_ENOSPC / SPY_ENOMEM / -errno.
 * spy__shm_open_peer opens another process's such memfd through
 * /proc/<pid>/fd/<fd> (allowed by the kernel only to processes that may
 * ptrace-read it: same user, dumpable) and checks it is a regular file of
 * this user of exactly `bytes`, sealed; returns the fd, SPY_EBADSEGMENT
 * when a check fails, or -errno. Never blocks. */
#include <stddef.h>
int spy__shm_create(const char *name, size_t bytes);
int spy__shm_open_peer(uint32_t pid, int32_t fd, size_t bytes, int writable);

/* The frame clock: a calibrated cycle counter, or CLOCK_MONOTONIC in ns.
 * Call spy__ticks_init() once before the first spy__ticks(). */
void spy__ticks_init(void);
extern int spy__use_tsc;
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif
static inline uint64_t spy__ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_expect(spy__use_tsc, 1))
    return __rdtsc();
#endif
  return spy__mono_ns();
}
double spy__ns_per_tick(void);
/* 1 when the CPU's time-stamp counter runs at a constant rate in every
 * power state (x86 with constant_tsc and nonstop_tsc; read once). */
int spy__tsc_invariant(void);
#if defined(__x86_64__) || defined(__i386__)
/* The counter (*tick) and CLOCK_MONOTONIC (*ns) at one moment, the
 * tightest of a few tries; returns that pair's width in ticks. */
uint64_t spy__tsc_pair(uint64_t *tick, uint64_t *ns);
#endif
int spy__ticks_are_tsc(void);

/* For the few copies that race with a writer by design and are validated
 * afterwards (seqlocks, the broadcast ring): ThreadSanitizer is told not to
 * instrument them. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPY_NO_TSAN __attribute__((no_sanitize("thread"), noinline))
#endif
#endif
#if !defined(SPY_NO_TSAN) && defined(__SANITIZE_THREAD__)
#define SPY_NO_TSAN __attribute__((no_sanitize_thread, noinline))
#endif
#ifndef SPY_NO_TSAN
#define SPY_NO_TSAN
#endif

/* A pause hint for spin-wait loops. */
static inline void spy__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
