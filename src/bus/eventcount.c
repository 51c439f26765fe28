/* eventcount.c — the channel doorbell: readers register, re-check for
 * data, then sleep on a futex; posters wake only when someone registered,
 * once per epoch (see ctl.h). The classic eventcount, in shared memory. */
#include <limits.h>

#include "bus/ctl.h"
#include "platform/platform.h"
#include "spyglass/error.h"

uint32_t spy__ec_prepare(spy_ctl *c) {
  return atomic_fetch_add_explicit(&c->ec, 1, memory_order_seq_cst) + 1;
}

void spy__ec_cancel(spy_ctl *c, uint32_t st) {
  uint32_t cur = atomic_load_explicit(&c->ec, memory_order_relaxed);
  /* Only if no notify happened since: a notify already removed us. */
  while ((cur & ~SPY_EC_WAITERS) == (st & ~SPY_EC_WAITERS) &&
         (cur & SPY_EC_WAITERS)) {
    if (atomic_compare_exchange_weak_explicit(
            &c->ec, &cur, cur - 1, memory_order_seq_cst, memory_order_relaxed))
      return;
  }
}

int spy__ec_wait(spy_ctl *c, uint32_t st, int64_t ns) {
  uint64_t deadline = ns >= 0 ? spy__mono_ns() + (uint64_t)ns : 0;
  for (;;) {
    uint32_t cur = atomic_load_explicit(&c->ec, memory_order_acquire);
    if ((cur & ~SPY_EC_WAITERS) != (st & ~SPY_EC_WAITERS))
      return 0; /* the epoch moved: we were woken */
    int64_t left = -1;
    if (ns >= 0) {
      uint64_t now = spy__mono_ns();
      if (now >= deadline)
        return SPY_ETIMEDOUT;
      left = (int64_t)(deadline - now);
    }
    /* Other waiters registering change the word too: that returns early
     * and we loop. */
    spy__futex_wait((uint32_t *)&c->ec, cur, left);
  }
}

int spy__ec_notify(spy_ctl *c) {
  atomic_thread_fence(memory_order_seq_cst);
  uint32_t cur = atomic_load_explicit(&c->ec, memory_order_relaxed);
  while (cur & SPY_EC_WAITERS) {
    uint32_t next = (cur & ~SPY_EC_WAITERS) + SPY_EC_EPOCH_ONE;
    if (atomic_compare_exchange_weak_explicit(
            &c->ec, &cur, next, memory_order_seq_cst, memory_order_relaxed)) {
      spy__futex_wake((uint32_t *)&c->ec, INT_MAX);
      return 1;
    }
  }
  return 0;
}
