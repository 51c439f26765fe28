/* profiler_internal.h — the message profiler's state, shared by
 * profiler.c (lanes, folding, totals, measure, summary) and attach.c (the
 * transport hook). Not installed.
 *
 * Recording never takes a lock: each recording thread owns a lane, a
 * single-producer single-consumer ring of records, found through a
 * thread-local cache and claimed once with a compare-and-swap. The reader
 * (summary, messages, count, reset) folds every lane into the history ring
 * and the per-type totals; readers serialise among themselves with `mu`
 * unless the profiler was created with single_reader. */
#ifndef SPY_PROFILER_INTERNAL_H
#define SPY_PROFILER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "spyglass/profiler.h"

/* One recording thread's ring. The owner writes records and `head`; the
 * reader reads them and writes `tail`. */
struct spy__lane {
  _Alignas(64) _Atomic uintptr_t owner; /* 0: free; else the thread's token */
  _Atomic uint64_t head;                /* records written */
  uint64_t seq;                         /* owner's count, for on_message */
  _Alignas(64) _Atomic uint64_t tail;   /* records folded */
  spy_msg_record *rec;                  /* lane_capacity of them */
};

/* Running totals of one message type since the last reset. */
struct spy__type_acc {
  uint32_t type;
  uint64_t count, errors, bytes;
  uint64_t enc_sum, enc_n, enc_max;
  uint64_t post_sum, post_n, post_max;
};

struct spy_profiler {
  uint64_t uid;               /* unique per profiler ever made (lane cache) */
  pthread_mutex_t mu;         /* readers among themselves */
  pthread_mutex_t measure_mu; /* the scratch buffer */
  spy_profiler_desc desc;     /* defaults resolved */
  uint32_t mask;              /* capacity - 1 */
  uint32_t lane_mask;         /* lane_capacity - 1 */
  spy_msg_record *ring;       /* folded history */
  uint64_t n, errors, t_reset;
  struct spy__type_acc acc[SPY_PROFILER_MAX_TYPES];
  uint32_t n_acc;
  uint64_t *sort_buf; /* capacity entries, for percentiles */
  uint8_t *scratch;
  struct spy__lane *lanes; /* desc.lanes of them */
  spy_msg_record *lane_mem;
  _Atomic uint64_t dropped; /* records lost: lane full or no lane free */
  spy_post_hook hook;       /* what attach() sets on a transport */
};

/* Records r from the calling thread: into its lane (no lock), then the
 * callback. r->t_ns must be set by the caller; r->index is set to the
 * lane's own count for the callback and re-stamped when folded. Also the
 * tests' way of recording synthetic messages with known costs. */
void spy__profiler_record(spy_profiler *p, spy_msg_record *r);

/* The hook's function (attach.c): one post's sample into a record. */
void spy__profiler_on_post(void *ctx, const spy_post_sample *s);

#endif
