/* clocksrv.c — the provider's side of clock sync with consumers: a small
 * thread that serves the syncs consumers request over the data channel.
 *
 * A consumer creates the segment spy_clock_segment_name(provider,
 * consumer) and posts a CLOCK request; the service (service.c) checks it
 * comes from a subscriber and pushes a job here. This thread opens the
 * segment, hands the consumer's id back to the service, which posts READY
 * at its next tick (so READY means "the segment is open and its rounds
 * are answered at once", and a consumer never waits behind another
 * consumer's sync), answers the rounds (spy_clock_serve) and closes it. Serving
 * blocks for the length of the sync (or up to its timeout if the consumer dies
 * mid-sync), which is why it has a thread of its own: the frame thread and the
 * offload worker never wait for a consumer. The thread starts at the first
 * request (so a provider nobody syncs with has none) and lives until destroy;
 * the service hands it jobs through a single-producer ring and a futex, without
 * a lock.
 *
 * Cleanup: the consumer created the file and removes it when its sync
 * ends. If it dies first, the service drops it after ack_grace_ms and
 * pushes a cleanup job that removes its segment file, so dead consumers
 * leave nothing in the runtime directory.
 */
#include <pthread.h>

#include "platform/platform.h"
#include "provider/provider_internal.h"

#define SERVE_TIMEOUT_MS 1000
#define CLOCK_STACK (256u * 1024u)

static void run_job(spy_provider *p, const clock_job *j) {
  char name[SPY_CLOCK_NAME_MAX + 1];
  if (spy_clock_segment_name(p->id, j->consumer, name, sizeof name) < 0)
    return;
  if (j->cleanup) {
    spy_clock_remove(name, p->desc.dir);
    return;
  }
  spy_clock_seg *seg;
  int rc = spy_clock_open(&seg, name, p->desc.dir);
  if (rc == 0) {
    clock_server *cs = &p->cs;
    uint32_t h = atomic_load_explicit(&cs->ready_head, memory_order_relaxed);
    if (h - atomic_load_explicit(&cs->ready_tail, memory_order_acquire) <
        CLOCK_JOBS) { /* else no READY: the consumer times out */
      cs->ready[h % CLOCK_JOBS] = j->consumer;
      atomic_store_explicit(&cs->ready_head, h + 1, memory_order_release);
    }
    spy_clock_opts o = {.timeout_ms = SERVE_TIMEOUT_MS,
                        .now = p->desc.clock_now,
                        .now_ctx = p->desc.clock_now_ctx,
                        .test_offset_ns = p->desc.clock_test_offset_ns,
                        .cancel = &p->cs.stop};
    rc = spy_clock_serve(seg, &o);
    spy_clock_close(seg);
  }
  atomic_fetch_add_explicit(rc > 0 ? &p->st_clock_syncs : &p->st_clock_failures,
                            1, memory_order_relaxed);
}

static void *clock_main(void *arg) {
  spy_provider *p = arg;
  clock_server *cs = &p->cs;
  while (!atomic_load(&cs->stop)) {
    uint32_t h = atomic_load_explicit(&cs->head, memory_order_acquire);
    uint32_t t = atomic_load_explicit(&cs->tail, memory_order_relaxed);
    if (t == h) {
      spy__futex_wait((uint32_t *)&cs->head, h, 100000000); /* 100 ms */
      continue;
    }
    clock_job j = cs->jobs[t % CLOCK_JOBS];
    atomic_store_explicit(&cs->tail, t + 1, memory_order_release);
    run_job(p, &j);
  }
  return NULL;
}

int spy__clock_push(spy_provider *p, uint64_t consumer, int cleanup) {
  clock_server *cs = &p->cs;
  if (!cs->started) {
    if (cs->start_failed)
      return SPY_EAGAIN;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, CLOCK_STACK);
    int rc = pthread_create(&cs->th, &a, clock_main, p);
    pthread_attr_destroy(&a);
    if (rc != 0) {
      cs->start_failed = 1; /* no thread: requests go unanswered */
      return -rc;
    }
    cs->started = 1;
  }
  uint32_t h = atomic_load_explicit(&cs->head, memory_order_relaxed);
  if (h - atomic_load_explicit(&cs->tail, memory_order_acquire) >= CLOCK_JOBS)
    return SPY_ENOBUFS; /* the consumer times out and may retry */
  cs->jobs[h % CLOCK_JOBS] =
      (clock_job){.consumer = consumer, .cleanup = cleanup};
  atomic_store_explicit(&cs->head, h + 1, memory_order_release);
  spy__futex_wake((uint32_t *)&cs->head, 1);
  return 0;
}

int spy__clock_next_ready(spy_provider *p, uint64_t *consumer) {
  clock_server *cs = &p->cs;
  uint32_t t = atomic_load_explicit(&cs->ready_tail, memory_order_relaxed);
  if (!cs->started ||
      t == atomic_load_explicit(&cs->ready_head, memory_order_acquire))
    return 0;
  *consumer = cs->ready[t % CLOCK_JOBS];
  atomic_store_explicit(&cs->ready_tail, t + 1, memory_order_release);
  return 1;
}

void spy__clock_stop(spy_provider *p) {
  clock_server *cs = &p->cs;
  if (!cs->started)
    return;
  atomic_store(&cs->stop, 1); /* also cancels a sync being served */
  spy__futex_wake((uint32_t *)&cs->head, 1);
  pthread_join(cs->th, NULL);
  cs->started = 0;
}
