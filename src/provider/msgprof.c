/* msgprof.c — the provider's live message profile: its own profiler on
 * the transport's hook while some subscriber asks for SPY_FEAT_MSGPROF,
 * off when none does, and the summary handed to the frame thread for the
 * MSGPROF section of its data frames (flush.c).
 *
 * Nothing here makes the frame thread wait. Attaching and detaching set
 * and clear the transport's hook (transport.h), which any post reads with
 * one relaxed load; the ops table is never swapped. While attached, each
 * post on the frame thread records into that thread's own lane of the
 * profiler (no lock). The service — the only reader of this profiler, so
 * it is made single_reader and its reads take no lock either — folds the
 * lanes and computes a summary a few times per flush period, into the
 * back buffer of a triple buffer; the frame thread takes the newest one at
 * its flush with one exchange:
 *
 *   service:       fill sums[back];  back = xchg(mid, back | FRESH)
 *   frame thread:  if (mid & FRESH)  front = xchg(mid, front)
 *
 * The three indexes are always a permutation of 0..2, so neither side ever
 * touches the buffer the other is using and neither retries. Detaching
 * waits for a hooked post in progress on another thread to leave the hook
 * (the service waits, the length of one post; with the inline transport
 * the service is the frame thread, the only poster, and nothing is in
 * progress).
 */
#include <string.h>

#include "provider/provider_internal.h"

#define SUM_FRESH 4u
#define SUM_INDEX 3u

void spy__msgprof_init(spy_provider *p) {
  p->sum_back = 0;
  atomic_store_explicit(&p->sum_mid, 1, memory_order_relaxed);
  p->sum_front = 2;
}

/* Service: publishes sums[sum_back]. */
static void publish(spy_provider *p) {
  p->sum_back = atomic_exchange_explicit(&p->sum_mid, p->sum_back | SUM_FRESH,
                                         memory_order_acq_rel) &
                SUM_INDEX;
}

const spy_msgprof_summary *spy__msgprof_take(spy_provider *p) {
  if (atomic_load_explicit(&p->sum_mid, memory_order_relaxed) & SUM_FRESH)
    p->sum_front = atomic_exchange_explicit(&p->sum_mid, p->sum_front,
                                            memory_order_acq_rel) &
                   SUM_INDEX;
  return &p->sums[p->sum_front];
}

static void attach(spy_provider *p, uint64_t now_ms) {
  if (!p->prof) {
    if (p->prof_failed)
      return;
    /* measure() is never called here: the smallest scratch buffer. Lanes:
     * the frame thread, the worker, and a user's thread or two. */
    spy_profiler_desc d = {.scratch_bytes = 4096,
                           .lanes = 4,
                           .lane_capacity = 256,
                           .single_reader = 1};
    if (spy_profiler_create(&p->prof, &d) < 0) {
      p->prof_failed = 1;
      return;
    }
  }
  /* SPY_EBUSY: the application attached a profiler of its own; tried
   * again at the next tick. */
  if (spy_profiler_attach(p->prof, p->tr) != 0)
    return;
  spy_profiler_reset(p->prof); /* a new session: totals from now */
  p->prof_attached = 1;
  p->prof_next_ms = now_ms; /* a first summary at once */
  atomic_store(&p->prof_on, 1);
}

static void detach(spy_provider *p) {
  spy_profiler_detach(p->prof, p->tr);
  p->prof_attached = 0;
  atomic_store(&p->prof_on, 0);
  /* The next session starts from an empty profile, not this one's. */
  memset(&p->sums[p->sum_back], 0, sizeof p->sums[0]);
  publish(p);
}

void spy__msgprof_tick(spy_provider *p, uint64_t now_ms) {
  int want = (spy__features_now(p) & SPY_FEAT_MSGPROF) != 0;
  if (want && !p->prof_attached)
    attach(p, now_ms);
  else if (!want && p->prof_attached)
    detach(p);
  if (!p->prof_attached || now_ms < p->prof_next_ms)
    return;
  /* About four summaries per flush period (every 50 ms at most): each
   * flush sends one at most a quarter period old. */
  uint32_t every = p->desc.flush_ms / 4;
  p->prof_next_ms = now_ms + (every > 50 ? 50 : every ? every : 1);
  spy_profiler_summary(p->prof, &p->sums[p->sum_back]);
  publish(p);
}
