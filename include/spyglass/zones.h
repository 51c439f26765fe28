/* zones.h — CPU zones: nested, named spans of time on any thread of the
 * inspected program, streamed live to consumers (wire section ZONES).
 *
 *   void update(spy_provider *p) {
 *     SPY_ZONE(p, "update");            // ends where the block ends
 *     for (int i = 0; i < 4; i++) {
 *       SPY_ZONE(p, "substep");
 *       step(i);
 *     }
 *   }
 *
 *   static spy_zone_loc draw = SPY_ZONE_LOC("draw", 0x3080ff); // in a
 *   spy_zone_begin(p, &draw);           // function; the explicit pair
 *   build_draw_list();
 *   spy_zone_end(p);
 *
 * A location (name, function, file, line, optional colour) is a static
 * object: it gets a small id the first time a zone uses it, and only the id
 * travels with each zone. Zones nest; an end closes the innermost open zone
 * of the calling thread.
 *
 * Cost. With nobody subscribed to SPY_FEAT_ZONES a begin or an end is one
 * load and one branch, and nothing is written anywhere. Subscribed, each
 * is one clock read and one 8-byte record into the calling thread's own
 * single-producer ring (and one store of its head, a begin one more): no
 * lock, no system call, no allocation. The provider's service (the
 * offload worker, or the frame thread at its ticks with the inline
 * transport) drains every thread's ring about every
 * millisecond, sooner while a ring fills fast (the worker sleeps for the
 * time the fastest ring takes to fill a quarter, from 50 us), and posts
 * the ZONES section (docs/wire.md).
 *
 * Memory. A thread's ring is allocated the first time it opens a zone
 * while zones are subscribed (or calls spy_thread_name): that is the one
 * allocation, spy_provider_desc.zone_buffer_bytes (default 4 MiB,
 * SPY_ZONE_BUFFER_DEFAULT; pages are touched as the ring fills) per
 * thread and provider, freed after the thread exits and its ring has been
 * drained, or with the provider. A full ring drops whole zones: the begin
 * and its end are both left out (and so is everything nested inside), and
 * the drop is counted (spy_provider_stats.zones_dropped, and in the wire
 * section), never half a zone.
 *
 * Frames. While zones are subscribed, spy_frame_begin() writes a frame
 * marker into the frame thread's ring, so a consumer splits the timeline
 * into the provider's frames.
 *
 * Clock. Zones are timed with the provider's frame clock (the calibrated
 * time-stamp counter, else CLOCK_MONOTONIC) and sent as nanoseconds of the
 * provider's CLOCK_MONOTONIC; a consumer maps them to its own clock with
 * the clock-sync offset (consumer.h: spy_state.clock_offset_ns).
 *
 * Threads. Every function here may be called from any thread. A thread's
 * zones must be closed on the thread that opened them. A provider must not
 * be destroyed while another thread is inside a zone call on it. Up to
 * SPY_ZONE_THREADS_MAX threads per provider have rings at a time; zones of
 * threads beyond that are dropped and counted.
 *
 * Compiled out: SPY_ZONE, SPY_ZONE_BEGIN, SPY_ZONE_END and SPY_THREAD_NAME
 * expand to nothing unless SPY_ENABLE is defined. C++: spyglass/zones.hpp.
 */
#ifndef SPYGLASS_ZONES_H
#define SPYGLASS_ZONES_H

#include <stdint.h>

#include "spyglass/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spy_provider spy_provider; /* provider.h */

/* A source location. Make it static (SPY_ZONE_LOC or SPY_ZONE do) and
 * leave `id` zero: the first zone registers it. Strings must live as long
 * as the process (literals). */
typedef struct spy_zone_loc {
  const char *name;     /* what the zone is, e.g. "update" */
  const char *function; /* __func__ */
  const char *file;     /* __FILE__ */
  uint32_t line;
  uint32_t color; /* 0xRRGGBB, 0 = the viewer's choice */
  uint32_t id;    /* 0 until registered, then >= SPY_ZONE_ID_FIRST (read
                     and written with atomic builtins) */
} spy_zone_loc;

#define SPY_ZONE_ID_FIRST 16u     /* ids below are record codes */
#define SPY_ZONE_ID_MAX 65535u    /* at most 65520 locations per process */
#define SPY_ZONE_THREADS_MAX 256u /* threads with a ring, per provider */
#define SPY_ZONE_NAME_MAX 63u     /* bytes of a thread name kept */
/* Default ring bytes per thread: larger than a core's L2 several times,
 * so the service's cached copies of a line are gone before the thread
 * writes it again (a smaller ring makes the thread pay for taking them
 * back: zones.c, spy__zones_init). */
#define SPY_ZONE_BUFFER_DEFAULT (4u << 20)

/* A location for this line of this function (inside a function body). */
#define SPY_ZONE_LOC(name, color)                                              \
  { (name), __func__, __FILE__, (uint32_t)__LINE__, (uint32_t)(color), 0 }

/* Names the calling thread ("render", "audio") for consumers: sent with its
 * zones and again at every checkpoint. Cut to SPY_ZONE_NAME_MAX bytes.
 * Creates the thread's ring if it has none (the one allocation). Returns
 * 0, SPY_EINVAL (NULL name), SPY_ENOMEM, or SPY_ENOSPC (too many
 * threads). Takes the provider's zone-list lock: not for the hot path. */
int spy_thread_name(spy_provider *p, const char *name);

/* Number of locations registered in this process. */
uint32_t spy_zone_locations(void);

/* ---- the hot path (internal layout: use the functions below) ---------- */

/* The calling thread's ring for one provider: what begin and end touch.
 * Written by its thread only; the service reads head (release-stored by
 * the thread). One word per record, and per begin or end one record and
 * one head store: a begin also moves resv, an end needs nothing else.
 *   open zones = resv - head (their ends are reserved)
 *   a begin fits while resv + 2 <= lim (itself and its end) */
typedef struct spy__zone_ring {
  uint32_t epoch; /* the provider's zone epoch this ring follows */
  uint32_t mask;  /* records - 1 */
  uint64_t *rec;  /* (ticks << 16) | code */
  uint64_t head;  /* records written, published with a release store */
  uint64_t resv;  /* head + the zones still open */
  uint64_t lim;   /* the service's tail + records, as last read; 0 makes
                     every begin take the slow path */
} spy__zone_ring;

/* The provider's zone epoch (0: zones not subscribed) is a word of its hot
 * block (provider.h, spy__provider_hot.zones), read here at its offset so
 * that this header needs neither provider.h nor C11 atomics and also
 * compiles as C++ (zones.c checks the offset at build time). */
#define SPY__ZONES_HOT_OFFSET 276u

extern __thread spy__zone_ring *spy__zone_cur
    __attribute__((tls_model("initial-exec")));
extern int spy__use_tsc;
void spy__zone_begin_slow(spy_provider *p, spy_zone_loc *loc);
void spy__zone_end_slow(spy_provider *p);
uint64_t spy__zone_mono_ticks(void);

static inline uint64_t spy__zone_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_expect(spy__use_tsc, 1))
    return __builtin_ia32_rdtsc();
#endif
  return spy__zone_mono_ticks();
}

static inline uint32_t spy__zone_epoch(const spy_provider *p) {
  return __atomic_load_n(
      (const uint32_t *)(const void *)((const char *)p + SPY__ZONES_HOT_OFFSET),
      __ATOMIC_RELAXED);
}

/* Opens a zone at loc on the calling thread. */
static inline void spy_zone_begin(spy_provider *p, spy_zone_loc *loc) {
  uint32_t e = spy__zone_epoch(p);
  if (__builtin_expect(e == 0, 1))
    return; /* nobody subscribed to zones */
  spy__zone_ring *r = spy__zone_cur;
  uint32_t id = __atomic_load_n(&loc->id, __ATOMIC_RELAXED);
  uint64_t resv = r->resv;
  if (__builtin_expect(r->epoch != e || resv + 2 > r->lim || id == 0, 0)) {
    spy__zone_begin_slow(p, loc);
    return;
  }
  uint64_t h = r->head;
  r->rec[h & r->mask] = (spy__zone_ticks() << 16) | id;
  r->resv = resv + 2; /* this begin, and its end reserved */
  __atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
}

/* Closes the calling thread's innermost open zone. An end without a
 * recorded begin (the zone began before anyone subscribed, or was
 * dropped) writes nothing. */
static inline void spy_zone_end(spy_provider *p) {
  uint32_t e = spy__zone_epoch(p);
  if (__builtin_expect(e == 0, 1))
    return;
  spy__zone_ring *r = spy__zone_cur;
  uint64_t h = r->head;
  if (__builtin_expect(r->epoch != e || r->resv == h, 0)) {
    spy__zone_end_slow(p);
    return;
  }
  r->rec[h & r->mask] = spy__zone_ticks() << 16; /* code 0: end */
  __atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
}

/* For SPY_ZONE's cleanup attribute. */
static inline void spy__zone_cleanup(spy_provider **pp) { spy_zone_end(*pp); }

#define SPY__ZCAT2(a, b) a##b
#define SPY__ZCAT(a, b) SPY__ZCAT2(a, b)

#ifdef SPY_ENABLE
/* A zone from here to the end of the enclosing block (GCC / clang). */
#define SPY_ZONE_C(p, name, color) SPY__ZONE_N(p, name, color, __COUNTER__)
#define SPY__ZONE_N(p, name, color, n)                                         \
  static spy_zone_loc SPY__ZCAT(spy__zloc_, n) = SPY_ZONE_LOC(name, color);    \
  spy_provider *SPY__ZCAT(spy__zscope_, n)                                     \
      __attribute__((cleanup(spy__zone_cleanup), unused)) =                    \
          (spy_zone_begin((p), &SPY__ZCAT(spy__zloc_, n)), (p))
#define SPY_ZONE(p, name) SPY_ZONE_C(p, name, 0)
#define SPY_ZONE_BEGIN(p, loc) spy_zone_begin((p), (loc))
#define SPY_ZONE_END(p) spy_zone_end(p)
#define SPY_THREAD_NAME(p, name) ((void)spy_thread_name((p), (name)))
#else
#define SPY_ZONE_C(p, name, color) ((void)0)
#define SPY_ZONE(p, name) ((void)0)
#define SPY_ZONE_BEGIN(p, loc) ((void)0)
#define SPY_ZONE_END(p) ((void)0)
#define SPY_THREAD_NAME(p, name) ((void)0)
#endif

#ifdef __cplusplus
}
#endif
#endif
