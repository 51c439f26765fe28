/* test_provider_alloc.c — the inspected thread makes no heap allocation,
 * takes no lock and makes no futex call in steady state: malloc, calloc,
 * realloc, free, pthread_mutex_lock/trylock and syscall (the futex
 * wrapper's way in) are interposed and count calls made on the frame
 * thread between frame 100 and frame 10,000, with a subscriber attached
 * that also wants the message profile (so every post is profiled and every
 * flush carries its summary) and has synced its clock, for both
 * transports. Locks and syscalls are checked with the offload transport:
 * with the inline one the frame thread is also the service by design (it
 * reads and posts to the channels). (The first clock request starts the
 * provider's clock thread; with the inline transport that one-off happens
 * on the frame thread, before the steady state counted here.) (Not built
 * under the sanitizers, which own malloc themselves.) */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>

#include "spyglass/consumer.h"
#include "spyglass/provider.h"
#include "testlib.h"
#include "testutil.h"

#include "alloc_counter.h"

/* Locks and syscalls, by the static library's calls (they resolve to these
 * definitions in the executable). The real ones are looked up before main,
 * so dlsym's own work is never counted. */
static _Atomic long locks, syscalls;
static int (*real_lock)(pthread_mutex_t *), (*real_trylock)(pthread_mutex_t *);
static long (*real_syscall)(long, ...);
__attribute__((constructor)) static void find_real(void) {
  real_lock =
      (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_lock");
  real_trylock =
      (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_trylock");
  real_syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
}
int pthread_mutex_lock(pthread_mutex_t *m) {
  if (counting)
    atomic_fetch_add(&locks, 1);
  return real_lock(m);
}
int pthread_mutex_trylock(pthread_mutex_t *m) {
  if (counting)
    atomic_fetch_add(&locks, 1);
  return real_trylock(m);
}
/* Forwards the six argument registers whatever the call passed (the way
 * the C library's own syscall() reads them). */
long syscall(long nr, ...) {
  va_list ap;
  va_start(ap, nr);
  long a[6];
  for (int i = 0; i < 6; i++)
    a[i] = va_arg(ap, long);
  va_end(ap);
  if (counting)
    atomic_fetch_add(&syscalls, 1);
  return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static char dir[256];
static _Atomic int stop;

static void *consumer_thread(void *arg) {
  spy_consumer *c = arg;
  while (!atomic_load(&stop))
    spy_consumer_poll(c, 20);
  return NULL;
}

static long run(spy_transport_kind kind, uint64_t *flushes, long *n_locks,
                long *n_syscalls) {
  tu_rundir(dir, sizeof dir);
  spy_provider *p;
  spy_provider_desc d = {.name = "alloc",
                         .dir = dir,
                         .transport = kind,
                         .flush_ms = 5,
                         .env_sample_ms = 5};
  if (spy_provider_create(&p, &d) < 0)
    return -1;
  spy_consumer *c;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .features = SPY_FEAT_STATS | SPY_FEAT_ENV |
                                      SPY_FEAT_REGISTRY | SPY_FEAT_HEALTH |
                                      SPY_FEAT_MSGPROF};
  if (spy_consumer_create(&c, &cd) < 0)
    return -1;
  atomic_store(&stop, 0);
  pthread_t t;
  pthread_create(&t, NULL, consumer_thread, c);
  /* Wait until subscribed, driving frames (the inline transport serves
   * the channels from here). */
  spy_provider_stats st;
  double end = tu_now_s() + 10;
  do {
    spy_frame_begin(p);
    spy_frame_end(p);
    usleep(200);
    spy_provider_get_stats(p, &st);
  } while (!((st.features & SPY_FEAT_REGISTRY) && st.msgprof_attached &&
             st.clock_syncs) &&
           tu_now_s() < end);
  if (!st.msgprof_attached || !st.clock_syncs)
    return -2;
  spy_env_set_adapter(p, "software");
  atomic_store(&allocs, 0);
  atomic_store(&locks, 0);
  atomic_store(&syscalls, 0);
  double v[3] = {1, 2, 3};
  for (int f = 0; f < 10000; f++) {
    if (f == 100)
      counting = 1;
    spy_frame_begin(p);
    for (uint32_t k = 0; k < 8; k++)
      spy_counter_set(p, k, (uint32_t)(f + k));
    spy_value_set_f64(p, "time", f * 0.016);
    spy_value_set_i64(p, "frame", f);
    spy_value_set_vec(p, "camera", v, 3);
    spy_value_set_bool(p, "even", !(f & 1));
    spy_gpu_issued(p, (uint64_t)f);
    if (f % 3 == 2)
      spy_gpu_resolved(p, (uint64_t)f - 1, 1.5);
    spy_frame_end(p);
    if (f % 50 == 0)
      usleep(1000); /* let flushes happen in between */
  }
  counting = 0;
  long n = atomic_load(&allocs);
  *n_locks = atomic_load(&locks);
  *n_syscalls = atomic_load(&syscalls);
  spy_provider_get_stats(p, &st);
  *flushes = st.flushes;
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
  tu_rm_rf(dir);
  return n;
}

TEST(offload_frame_thread_allocates_and_locks_nothing_while_profiled) {
  uint64_t flushes = 0;
  long n_locks = -1, n_syscalls = -1;
  CHECK_EQ(run(SPY_TRANSPORT_OFFLOAD, &flushes, &n_locks, &n_syscalls), 0);
  CHECK(flushes > 5);      /* data really flowed meanwhile */
  CHECK_EQ(n_locks, 0);    /* no mutex, message profile included */
  CHECK_EQ(n_syscalls, 0); /* no futex wait or wake */
}

TEST(inline_frame_thread_allocates_nothing_in_steady_state) {
  uint64_t flushes = 0;
  long n_locks, n_syscalls;
  CHECK_EQ(run(SPY_TRANSPORT_INLINE, &flushes, &n_locks, &n_syscalls), 0);
  CHECK(flushes > 5);
}

TEST(the_counters_see_allocations_and_locks_when_there_are_some) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  atomic_store(&locks, 0);
  counting = 1;
  void *volatile p = malloc(16);
  pthread_mutex_lock(&m);
  counting = 0;
  pthread_mutex_unlock(&m);
  free(p);
  CHECK(atomic_load(&allocs) > 0); /* the interposition works */
  CHECK_EQ(atomic_load(&locks), 1);
}

TEST_MAIN(
    TEST_CASE(offload_frame_thread_allocates_and_locks_nothing_while_profiled),
    TEST_CASE(inline_frame_thread_allocates_nothing_in_steady_state),
    TEST_CASE(the_counters_see_allocations_and_locks_when_there_are_some))
