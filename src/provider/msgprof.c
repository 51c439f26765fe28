/* msgprof.c — the provider's live message profile: its own transport
 * wrapped by a message profiler while some subscriber asks for
 * SPY_FEAT_MSGPROF, unwrapped when none does, and the summary published as
 * a MSGPROF section in the data frames (flush.c).
 *
 * Who swaps the ops. spy_profiler_wrap/unwrap rewrite p->tr->ops, a plain
 * pointer that the frame thread reads in its flush and the service reads
 * when it posts control messages. The swap is done by the service (the
 * only writer, and it never posts concurrently with itself) behind a
 * Dekker handshake with the frame thread, in which neither side waits:
 *
 *   frame thread (flush)               service (tick)
 *   gate_flush = 1                     gate_swap = 1
 *   if gate_swap: gate_flush = 0,      if gate_flush: gate_swap = 0,
 *     skip; retry at the next frame      retry at the next tick
 *   ... acquire, encode, post ...      ... wrap or unwrap ...
 *   gate_flush = 0                     gate_swap = 0
 *
 * With sequentially consistent stores and loads at most one side gets
 * through; the release of the gate orders the swap before the other side's
 * next use of the ops. With the inline transport the service runs on the
 * frame thread outside its flush, so the gate is always open to it. A
 * watched-but-unprofiled provider pays one store and one load per flush
 * (not per frame); an unwatched one pays nothing.
 */
#include "provider/provider_internal.h"

int spy__ops_enter(spy_provider *p) {
  atomic_store(&p->gate_flush, 1);
  if (atomic_load(&p->gate_swap)) {
    atomic_store(&p->gate_flush, 0);
    return 0;
  }
  return 1;
}

void spy__ops_leave(spy_provider *p) { atomic_store(&p->gate_flush, 0); }

static int swap_enter(spy_provider *p) {
  atomic_store(&p->gate_swap, 1);
  if (atomic_load(&p->gate_flush)) {
    atomic_store(&p->gate_swap, 0);
    return 0;
  }
  return 1;
}

void spy__msgprof_tick(spy_provider *p) {
  uint32_t want = (atomic_load(&p->features) & SPY_FEAT_MSGPROF) != 0;
  if (want == atomic_load_explicit(&p->prof_on, memory_order_relaxed))
    return;
  if (want && !p->prof) {
    if (p->prof_failed)
      return;
    /* measure() is never called here: the smallest scratch buffer. */
    spy_profiler_desc d = {.scratch_bytes = 4096, .max_wrapped = 1};
    if (spy_profiler_create(&p->prof, &d) < 0) {
      p->prof_failed = 1;
      return;
    }
  }
  if (!swap_enter(p))
    return; /* the frame thread is flushing: next tick */
  int rc;
  if (want) {
    spy_profiler_reset(p->prof); /* a new session: totals from now */
    rc = spy_profiler_wrap(p->prof, p->tr);
  } else {
    rc = spy_profiler_unwrap(p->prof, p->tr);
  }
  if (rc == 0)
    atomic_store_explicit(&p->prof_on, want, memory_order_release);
  else if (want)
    p->prof_failed = 1; /* wrapped by someone else: leave it alone */
  atomic_store(&p->gate_swap, 0);
}
