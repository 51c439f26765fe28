/* clock.c — the clock-sync protocol over the shared segment: rounds,
 * median-RTT selection, the peer's answer loop, the published result.
 *
 * A request is pending while req != ack. The initiator bumps req (after
 * reading t0), the peer stores t_peer and copies req into ack, the
 * initiator sees ack == req and reads t1. Stores are sequentially
 * consistent, and a side sets its bit in `waiters` before sleeping on its
 * futex and re-checks the word, so a waker that finds the bit clear can
 * skip the wake system call without losing one (the spinning case, which
 * keeps a system call out of the measured path). See clock.h.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "platform/platform.h"
#include "profiler/clock_internal.h"

int64_t spy_clock_now_ns(void) { return (int64_t)spy__mono_ns(); }

typedef struct party {
  spy_clock_now_fn now;
  void *ctx;
  int64_t offset_ns, timeout_ns, spin_ns;
  uint32_t rounds;
} party;

static int resolve(const spy_clock_opts *o, party *p) {
  spy_clock_opts d = {0};
  if (o)
    d = *o;
  if (!d.rounds)
    d.rounds = SPY_CLOCK_DEFAULT_ROUNDS;
  if (d.rounds > SPY_CLOCK_MAX_ROUNDS || d.timeout_ms < 0)
    return SPY_EINVAL;
  p->now = d.now;
  p->ctx = d.now_ctx;
  p->offset_ns = d.test_offset_ns;
  p->timeout_ns = (int64_t)(d.timeout_ms ? d.timeout_ms : 1000) * 1000000;
  p->spin_ns = (int64_t)(d.spin_us ? d.spin_us : 50) * 1000;
  p->rounds = d.rounds;
  return 0;
}

static int64_t party_now(const party *p) {
  return (p->now ? p->now(p->ctx) : spy_clock_now_ns()) + p->offset_ns;
}

static int seg_ok(const struct spy__clock_shm *m) {
  return m->magic == SPY_CLOCK_MAGIC && m->version == SPY_CLOCK_VERSION &&
         m->size == SPY_CLOCK_SEG_BYTES;
}

/* Waits while *word == old: spins for spin_ns, then sleeps on the futex
 * with `bit` set in waiters, up to timeout_ns in all. */
static int wait_while(struct spy__clock_shm *m, _Atomic uint32_t *word,
                      uint32_t old, uint32_t bit, const party *p) {
  int64_t start = spy_clock_now_ns();
  int64_t deadline = start + p->timeout_ns, spin_end = start + p->spin_ns;
  /* Spin: pure for the first few µs (the other side on its own core
   * answers in well under one), then yielding, so that on a busy machine
   * a peer waiting for our core gets it at once rather than after our
   * time slice. */
  int64_t yield_after = start + 5000;
  for (unsigned i = 1; atomic_load(word) == old; i++) {
    if (!(i & 63)) {
      int64_t now = spy_clock_now_ns();
      if (now >= spin_end)
        break;
      if (now >= yield_after)
        sched_yield();
    }
    spy__cpu_relax();
  }
  for (;;) {
    if (atomic_load(word) != old)
      return 0;
    if (!seg_ok(m))
      return SPY_EBADSEGMENT;
    atomic_fetch_or(&m->waiters, bit);
    int rc = 0;
    int64_t left = deadline - spy_clock_now_ns();
    if (left <= 0) /* (a negative timeout would wait forever) */
      rc = SPY_ETIMEDOUT;
    else if (atomic_load(word) == old)
      rc = spy__futex_wait((uint32_t *)word, old, left);
    atomic_fetch_and(&m->waiters, ~bit);
    if (rc == SPY_ETIMEDOUT)
      return atomic_load(word) != old ? 0 : SPY_ETIMEDOUT;
    if (rc < 0 && rc != SPY_EINTR)
      return rc;
  }
}

/* Stores v into word and wakes the other side if it sleeps on it. */
static void signal_word(struct spy__clock_shm *m, _Atomic uint32_t *word,
                        uint32_t v, uint32_t bit) {
  atomic_store(word, v);
  if (atomic_load(&m->waiters) & bit)
    spy__futex_wake((uint32_t *)word, INT_MAX);
}

static uint32_t next_req(uint32_t req) {
  req = (req + 1) & ~SPY__CLOCK_DONE;
  return req ? req : 1;
}

int spy_clock_pick_median(const spy_clock_round *rounds, uint32_t n,
                          spy_clock_result *out) {
  if (!rounds || !out || n == 0 || n > SPY_CLOCK_MAX_ROUNDS)
    return SPY_EINVAL;
  uint32_t idx[SPY_CLOCK_MAX_ROUNDS];
  /* Insertion sort by RTT: stable, so equal RTTs keep their order. */
  for (uint32_t i = 0; i < n; i++) {
    uint32_t j = i;
    while (j > 0 && rounds[idx[j - 1]].rtt_ns > rounds[i].rtt_ns) {
      idx[j] = idx[j - 1];
      j--;
    }
    idx[j] = i;
  }
  uint32_t k = idx[(n - 1) / 2];
  out->offset_ns = rounds[k].offset_ns;
  out->rtt_ns = rounds[k].rtt_ns;
  out->rounds = n;
  out->chosen = k;
  return 0;
}

/* Waits until the peer has answered req (ack == req). */
static int wait_ack(struct spy__clock_shm *m, uint32_t req, const party *p) {
  for (;;) {
    uint32_t a = atomic_load(&m->ack);
    if (a == req)
      return 0;
    int rc = wait_while(m, &m->ack, a, SPY__CLOCK_INIT_SLEEPS, p);
    if (rc < 0)
      return rc;
  }
}

int spy_clock_sync(spy_clock_seg *s, const spy_clock_opts *o,
                   spy_clock_result *out) {
  party p;
  if (!s || !out || resolve(o, &p) < 0)
    return SPY_EINVAL;
  memset(out, 0, sizeof *out);
  struct spy__clock_shm *m = s->shm;
  if (!seg_ok(m))
    return SPY_EBADSEGMENT;
  uint32_t req = atomic_load(&m->req);
  /* The previous sync's "finished" must be seen by the peer first, or it
   * would take our rounds for more of that one. */
  int rc = (req & SPY__CLOCK_DONE) ? wait_ack(m, req, &p) : 0;
  spy_clock_round r[SPY_CLOCK_MAX_ROUNDS];
  for (uint32_t i = 0; rc == 0 && i < p.rounds; i++) {
    req = next_req(req);
    int64_t t0 = party_now(&p);
    signal_word(m, &m->req, req, SPY__CLOCK_PEER_SLEEPS);
    rc = wait_ack(m, req, &p);
    int64_t t1 = party_now(&p);
    int64_t tp = atomic_load_explicit(&m->t_peer, memory_order_relaxed);
    r[i].rtt_ns = t1 - t0;
    r[i].offset_ns = (t0 - tp) + (t1 - t0) / 2;
  }
  if (rc < 0)
    return rc;
  spy_clock_pick_median(r, p.rounds, out);
  atomic_store_explicit(&m->offset_ns, out->offset_ns, memory_order_relaxed);
  atomic_store_explicit(&m->rtt_ns, out->rtt_ns, memory_order_relaxed);
  atomic_store_explicit(&m->rounds, out->rounds, memory_order_relaxed);
  signal_word(m, &m->req, next_req(req) | SPY__CLOCK_DONE,
              SPY__CLOCK_PEER_SLEEPS);
  return 0;
}

int spy_clock_serve(spy_clock_seg *s, const spy_clock_opts *o) {
  party p;
  if (!s || resolve(o, &p) < 0)
    return SPY_EINVAL;
  struct spy__clock_shm *m = s->shm;
  if (!seg_ok(m))
    return SPY_EBADSEGMENT;
  int answered = 0;
  for (;;) {
    /* Pending while req != ack. */
    int rc = wait_while(m, &m->req, atomic_load(&m->ack),
                        SPY__CLOCK_PEER_SLEEPS, &p);
    if (rc < 0)
      return rc;
    uint32_t v = atomic_load(&m->req);
    if (!seg_ok(m))
      return SPY_EBADSEGMENT;
    if (v & SPY__CLOCK_DONE) {
      signal_word(m, &m->ack, v, SPY__CLOCK_INIT_SLEEPS);
      if (answered)
        return answered;
      continue; /* the end of a sync we took no part in */
    }
    atomic_store_explicit(&m->t_peer, party_now(&p), memory_order_relaxed);
    signal_word(m, &m->ack, v, SPY__CLOCK_INIT_SLEEPS);
    answered++;
  }
}

int spy_clock_read_offset(const spy_clock_seg *s, spy_clock_result *out) {
  if (!s || !out)
    return SPY_EINVAL;
  memset(out, 0, sizeof *out);
  struct spy__clock_shm *m = s->shm;
  if (!seg_ok(m))
    return SPY_EBADSEGMENT;
  /* The result fields are written before the DONE request is stored. */
  (void)atomic_load(&m->req);
  uint32_t n = atomic_load_explicit(&m->rounds, memory_order_relaxed);
  if (!n)
    return SPY_ENOENT;
  out->offset_ns = atomic_load_explicit(&m->offset_ns, memory_order_relaxed);
  out->rtt_ns = atomic_load_explicit(&m->rtt_ns, memory_order_relaxed);
  out->rounds = n;
  return 0;
}

int spy_clock_segment_name(uint64_t provider_id, uint64_t consumer_id,
                           char *buf, size_t cap) {
  int n = snprintf(buf, cap, "clock-%016llx-%016llx",
                   (unsigned long long)provider_id,
                   (unsigned long long)consumer_id);
  return n < 0 || (size_t)n >= cap ? SPY_ENAMETOOLONG : n;
}
