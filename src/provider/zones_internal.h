/* zones_internal.h — the provider's CPU-zone state (zones.c): one ring per
 * thread that has opened a zone, the list the service drains, and the
 * hooks the rest of the provider calls.
 *
 * Ownership of a ring: two references, its thread's and its provider's.
 * The thread drops its own at exit (marking the ring dead), the provider
 * when the service has drained a dead ring, or at destroy (marking it
 * orphaned). Whoever drops the last one frees it.
 */
#ifndef SPY_ZONES_INTERNAL_H
#define SPY_ZONES_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "spyglass/zones.h"

struct spy_provider_stats;

/* Record codes, the low 16 bits of a ring record. */
#define ZREC_END 0u
#define ZREC_FRAME 1u /* the next record is the frame number */
#define ZREC_RESET 2u /* the next record is the epoch adopted */

typedef struct zone_buf {
  spy__zone_ring r; /* first: spy__zone_cur points here */
  /* the thread's (slow path) */
  uint32_t skip;       /* dropped zones open, innermost first */
  uint32_t saved_open; /* r.resv - r.head (zones open) while skipping */
  uint32_t hold;       /* begins to drop before re-reading tail */
  struct zone_buf *thread_next;
  const void *owner; /* the provider, compared only */
  _Atomic uint64_t dropped;
  /* shared */
  _Alignas(64) _Atomic uint64_t tail; /* records consumed by the service */
  _Atomic int refs;
  _Atomic int dead;   /* the thread exited */
  _Atomic int orphan; /* the provider is gone */
  /* the service's (and the list lock's) */
  struct zone_buf *next;
  uint32_t index; /* thread number on the wire, >= 1 */
  uint32_t os_tid;
  char name[SPY_ZONE_NAME_MAX + 1]; /* under the list lock */
  _Atomic uint32_t name_ver;        /* bumped under the list lock */
  uint32_t w_epoch;                 /* epoch whose RESET the service saw */
  uint32_t w_name_sent;             /* name_ver sent; 0: not yet */
  int w_reset;                      /* send RESET in the next block */
  int w_gone_sent;
  uint64_t w_ticks;        /* last full tick value seen */
  uint64_t w_dropped_sent; /* dropped count last sent */
  uint64_t w_pending;      /* a FRAME / RESET record waits for its value */
  uint64_t rec[];
} zone_buf;

typedef struct spy__zones {
  pthread_mutex_t mu; /* the list, names, thread count */
  zone_buf *list;
  uint32_t nthreads, next_index;
  uint32_t records; /* per ring, a power of two */
  /* tick -> provider CLOCK_MONOTONIC ns */
  uint64_t tick0, mono0;   /* at create */
  uint64_t tick_a, mono_a; /* the anchor, re-read every second */
  double npt;              /* ns per tick since create */
  int64_t mult;            /* npt in 32.32 fixed point */
  /* service thread */
  uint32_t epoch;
  uint32_t loc_next; /* next location id to send */
  int full;          /* sending a FULL pass (snapshot, checkpoint) */
  uint64_t next_checkpoint_ms;
  _Atomic uint32_t snapshot_req; /* set on subscribe / resync */
  /* the drain's period: 1 ms, shorter while a ring fills fast */
  uint64_t last_drain_ns; /* when the last drain read the heads */
  uint64_t period_ns;     /* 0: the 1 ms default; else a shorter one */
  int may_sleep;          /* this tick's service may wait (not inline) */
  /* statistics */
  _Atomic uint64_t st_dropped, st_markers_dropped, st_records, st_frames;
  _Atomic uint32_t st_threads;
  uint64_t dropped_gone; /* drops of rings let go (under mu) */
} spy__zones;

struct spy_provider;
int spy__zones_init(struct spy_provider *p);
void spy__zones_free(struct spy_provider *p);
/* Service: publish the epoch from the subscribed features, drain every
 * ring, post ZONES frames. */
void spy__zones_service(struct spy_provider *p);
/* Service: the longest it should wait for input now (ms). */
int spy__zones_wait_ms(struct spy_provider *p, int wait_ms);
/* Service: a subscriber came or asked for a snapshot. */
void spy__zones_snapshot(struct spy_provider *p);
/* Frame thread, at frame_begin while zones are subscribed. */
void spy__zones_frame(struct spy_provider *p, uint64_t frame_no,
                      uint64_t ticks);
void spy__zones_stats(const struct spy_provider *p,
                      struct spy_provider_stats *out);

#endif
