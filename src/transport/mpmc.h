/* mpmc.h — a bounded lock-free multi-producer multi-consumer queue of
 * pointers (Dmitry Vyukov's design): one sequence number per cell, no ABA,
 * no allocation after init. Used for the transport's free lists and its
 * post queue. Capacity is a power of two. */
#ifndef SPY_TRANSPORT_MPMC_H
#define SPY_TRANSPORT_MPMC_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct spy__mpmc_cell {
  _Atomic uint64_t seq;
  void *item;
} spy__mpmc_cell;

typedef struct spy__mpmc {
  spy__mpmc_cell *cells;
  uint64_t mask;
  _Alignas(64) _Atomic uint64_t head; /* next push */
  _Alignas(64) _Atomic uint64_t tail; /* next pop */
} spy__mpmc;

static inline int spy__mpmc_init(spy__mpmc *q, uint32_t cap) {
  q->cells = calloc(cap, sizeof *q->cells);
  if (!q->cells)
    return -1;
  q->mask = cap - 1;
  for (uint32_t i = 0; i < cap; i++)
    atomic_store_explicit(&q->cells[i].seq, i, memory_order_relaxed);
  atomic_store(&q->head, 0);
  atomic_store(&q->tail, 0);
  return 0;
}

static inline void spy__mpmc_free(spy__mpmc *q) {
  free(q->cells);
  q->cells = NULL;
}

/* 1 pushed, 0 full. */
static inline int spy__mpmc_push(spy__mpmc *q, void *item) {
  uint64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
  for (;;) {
    spy__mpmc_cell *c = &q->cells[pos & q->mask];
    uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    int64_t dif = (int64_t)seq - (int64_t)pos;
    if (dif == 0) {
      if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
        c->item = item;
        atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
        return 1;
      }
    } else if (dif < 0) {
      return 0;
    } else {
      pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    }
  }
}

/* The item, or NULL when empty. */
static inline void *spy__mpmc_pop(spy__mpmc *q) {
  uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
  for (;;) {
    spy__mpmc_cell *c = &q->cells[pos & q->mask];
    uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    int64_t dif = (int64_t)seq - (int64_t)(pos + 1);
    if (dif == 0) {
      if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
        void *item = c->item;
        atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
        return item;
      }
    } else if (dif < 0) {
      return NULL;
    } else {
      pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    }
  }
}

#endif
