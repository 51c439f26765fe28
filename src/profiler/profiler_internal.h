/* profiler_internal.h — the message profiler's state, shared by
 * profiler.c (ring, totals, measure, summary) and wrap.c (the wrapping
 * transport ops). Not installed. */
#ifndef SPY_PROFILER_INTERNAL_H
#define SPY_PROFILER_INTERNAL_H

#include <pthread.h>

#include "spyglass/profiler.h"

/* One wrapped transport. `ops` is the table the transport points at while
 * wrapped; each slot has its own, so a wrapper op finds its slot (and so
 * the profiler and the original table) from t->ops with container_of, with
 * no global lookup. */
struct spy__wrap_slot {
  spy_transport_ops ops;
  spy_transport *t; /* NULL: slot free */
  const spy_transport_ops *orig;
  int orig_timing;
  spy_profiler *p;
};

/* Running totals of one message type since the last reset. */
struct spy__type_acc {
  uint32_t type;
  uint64_t count, errors, bytes;
  uint64_t enc_sum, enc_n, enc_max;
  uint64_t post_sum, post_n, post_max;
};

struct spy_profiler {
  pthread_mutex_t mu;         /* ring, totals, wrap slots */
  pthread_mutex_t measure_mu; /* the scratch buffer */
  spy_profiler_desc desc;     /* defaults resolved */
  uint32_t mask;              /* capacity - 1 */
  spy_msg_record *ring;
  uint64_t n, errors, t_reset;
  struct spy__type_acc acc[SPY_PROFILER_MAX_TYPES];
  uint32_t n_acc;
  uint64_t *sort_buf; /* capacity entries, for percentiles */
  uint8_t *scratch;
  struct spy__wrap_slot *slots;
};

/* Stamps r->index and stores r in the ring and the totals, then calls the
 * callback. r->t_ns must be set by the caller. Thread-safe. Also the
 * tests' way of recording synthetic messages with known costs. */
void spy__profiler_record(spy_profiler *p, spy_msg_record *r);

/* Unwraps every wrapped transport (destroy). Caller holds no lock. */
void spy__profiler_unwrap_all(spy_profiler *p);

#endif
