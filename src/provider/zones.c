/* zones.c — CPU zones on the provider side: the process's location
 * registry, one single-producer ring per (thread, provider), and the
 * service's drain that turns rings into ZONES sections (wire/zones.c).
 *
 * The ring. Each record is one u64: the low 48 bits of the frame clock
 * shifted left by 16, ORed with a code: 0 end, 1 frame marker, 2 epoch
 * reset (both followed by one raw value record), >= 16 begin of that
 * location id. The thread writes records and publishes `head` with a
 * release store; the service reads up to `head` and publishes `tail`. The
 * thread reads `tail` only when its cached limit (`lim` = tail + records)
 * runs out.
 *
 * Whole zones. `resv` is head plus the ends reserved for the zones still
 * open, so a begin needs room for itself and its end (resv + 2 <= lim),
 * and an end never needs a check. A begin that finds no room starts dropping:
 * it and every zone opened inside it are left out (`skip` counts them), their
 * ends likewise, so what reaches the wire always nests.
 *
 * Epochs. The provider's zone word (spy__provider_hot.zones) is 0 while
 * nobody subscribes to zones, else an epoch number unique in the process.
 * A ring follows one epoch: the first zone call that sees a new one writes
 * a reset record and forgets its open zones (an end whose begin was not
 * recorded writes nothing), and the service drops records older than the
 * reset. So subscribing, unsubscribing and subscribing again never leave
 * a consumer with half a zone.
 *
 * Clock: ticks map to the provider's CLOCK_MONOTONIC nanoseconds through
 * an anchor re-read every second and the tick rate measured since the
 * provider started (finer than the 5 ms start-up calibration); the
 * mapping is continuous and monotonic (a slew, never a step), so nesting
 * survives the conversion.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"
#include "provider/provider_internal.h"

_Static_assert(offsetof(spy__provider_hot, zones) == SPY__ZONES_HOT_OFFSET,
               "zones.h reads the zone epoch at SPY__ZONES_HOT_OFFSET");
_Static_assert(SPY_ZONE_ID_FIRST == SPY_ZONES_LOC_ID_MIN &&
                   SPY_ZONE_ID_MAX == SPY_ZONES_LOC_ID_MAX,
               "location ids: the API and the wire agree");

#define MASK48 ((1ull << 48) - 1)
#define MAX_FRAMES_PER_TICK 2 /* MEDIUM buffers in flight per service tick */
#define HOLD 64               /* begins dropped before re-reading the tail */

/* ---- the location registry (process-wide: locations are static) ------- */

#define LOC_CHUNK 1024u
#define LOC_CHUNKS ((SPY_ZONE_ID_MAX + 1u) / LOC_CHUNK)

static pthread_mutex_t loc_mu = PTHREAD_MUTEX_INITIALIZER;
static spy_zone_loc **loc_tab[LOC_CHUNKS];
static _Atomic uint32_t loc_count = SPY_ZONE_ID_FIRST; /* next id */

static uint32_t register_loc(spy_zone_loc *loc) {
  pthread_mutex_lock(&loc_mu);
  uint32_t id = __atomic_load_n(&loc->id, __ATOMIC_ACQUIRE);
  uint32_t n = atomic_load_explicit(&loc_count, memory_order_relaxed);
  if (!id && n <= SPY_ZONE_ID_MAX) {
    spy_zone_loc ***c = &loc_tab[n / LOC_CHUNK];
    if (!*c)
      *c = calloc(LOC_CHUNK, sizeof **c);
    if (*c) {
      (*c)[n % LOC_CHUNK] = loc;
      id = n;
      __atomic_store_n(&loc->id, id, __ATOMIC_RELEASE);
      atomic_store_explicit(&loc_count, n + 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&loc_mu);
  return id;
}

/* A registered location (id < loc_count read with acquire). */
static const spy_zone_loc *loc_at(uint32_t id) {
  return loc_tab[id / LOC_CHUNK][id % LOC_CHUNK];
}

uint32_t spy_zone_locations(void) {
  return atomic_load(&loc_count) - SPY_ZONE_ID_FIRST;
}

/* ---- the calling thread's rings ----------------------------------------- */

/* Epoch 0 and no room: every call on a thread without a ring goes slow. */
static zone_buf zone_none;
__thread spy__zone_ring *spy__zone_cur = &zone_none.r;
static __thread zone_buf *thr_list; /* this thread's rings, any provider */
static pthread_key_t thr_key;
static pthread_once_t thr_once = PTHREAD_ONCE_INIT;
static _Atomic uint32_t epoch_counter;

uint64_t spy__zone_mono_ticks(void) { return spy__mono_ns(); }

static void unref(zone_buf *b) {
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
    free(b);
}

/* Thread exit: its rings are dead; the service drains and frees them. */
static void thr_exit(void *arg) {
  (void)arg;
  zone_buf *b = thr_list;
  thr_list = NULL;
  spy__zone_cur = &zone_none.r;
  while (b) {
    zone_buf *next = b->thread_next;
    atomic_store_explicit(&b->dead, 1, memory_order_release);
    unref(b);
    b = next;
  }
}

static void thr_key_make(void) { pthread_key_create(&thr_key, thr_exit); }

/* This thread's ring for p, made if `create` (the one allocation). Rings
 * of destroyed providers are let go on the way. *err: why there is none. */
static zone_buf *thread_ring(spy_provider *p, int create, int *err) {
  zone_buf **pp = &thr_list;
  while (*pp) {
    zone_buf *b = *pp;
    if (atomic_load_explicit(&b->orphan, memory_order_acquire)) {
      *pp = b->thread_next;
      if (spy__zone_cur == &b->r)
        spy__zone_cur = &zone_none.r;
      unref(b);
      continue;
    }
    if (b->owner == p)
      return b;
    pp = &b->thread_next;
  }
  *err = 0;
  if (!create)
    return NULL;
  spy__zones *z = &p->zones;
  size_t bytes = sizeof(zone_buf) + (size_t)z->records * sizeof(uint64_t);
  zone_buf *b = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  if (!b) {
    *err = SPY_ENOMEM;
    return NULL;
  }
  memset(b, 0, sizeof *b);
  b->r.mask = z->records - 1;
  b->r.rec = b->rec;
  b->owner = p;
  atomic_init(&b->refs, 2);
  b->os_tid = (uint32_t)syscall(SYS_gettid);
  b->w_ticks = spy__ticks();
  pthread_once(&thr_once, thr_key_make);
  pthread_setspecific(thr_key, b); /* non-NULL: thr_exit runs */
  pthread_mutex_lock(&z->mu);
  if (z->nthreads >= SPY_ZONE_THREADS_MAX) {
    pthread_mutex_unlock(&z->mu);
    free(b);
    *err = SPY_ENOSPC;
    return NULL;
  }
  b->index = ++z->next_index;
  b->next = z->list;
  z->list = b;
  z->nthreads++;
  pthread_mutex_unlock(&z->mu);
  b->thread_next = thr_list;
  thr_list = b;
  return b;
}

/* The thread's own stores of a ring's records before `h` reach the
 * service. */
static void publish(zone_buf *b, uint64_t h) {
  __atomic_store_n(&b->r.head, h, __ATOMIC_RELEASE);
}

static uint32_t free_records(zone_buf *b) {
  uint64_t tail = atomic_load_explicit(&b->tail, memory_order_acquire);
  return (uint32_t)((uint64_t)b->r.mask + 1 - (b->r.head - tail));
}

/* Follows epoch e from now on: a reset record, no zone open. 0 if the
 * ring has no room for the reset yet. */
static int adopt(zone_buf *b, uint32_t e) {
  uint32_t f = free_records(b);
  if (f < 2)
    return 0;
  uint64_t h = b->r.head;
  b->r.rec[h & b->r.mask] = (spy__ticks() << 16) | ZREC_RESET;
  b->r.rec[(h + 1) & b->r.mask] = e;
  b->r.epoch = e;
  b->r.resv = h + 2; /* no zone open */
  b->r.lim = h + f;  /* tail + records */
  b->skip = b->saved_open = b->hold = 0;
  publish(b, h + 2);
  return 1;
}

/* The ring the fast path should use for p, following epoch e; NULL if
 * none (no ring and !create, allocation failed, or no room to reset). */
static zone_buf *bind(spy_provider *p, uint32_t e, int create) {
  zone_buf *b = (zone_buf *)(void *)spy__zone_cur;
  if (b == &zone_none || b->owner != p ||
      atomic_load_explicit(&b->orphan, memory_order_acquire)) {
    int err;
    b = thread_ring(p, create, &err);
    if (!b)
      return NULL;
    spy__zone_cur = &b->r;
  }
  if (b->r.epoch != e && !adopt(b, e))
    return NULL;
  return b;
}

/* A ring's drops are its thread's own counter (no shared write on the
 * drop path); zones dropped without a ring go to the provider's. */
static void count_drop(spy_provider *p, zone_buf *b) {
  if (b)
    atomic_store_explicit(
        &b->dropped,
        atomic_load_explicit(&b->dropped, memory_order_relaxed) + 1,
        memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&p->zones.st_dropped, 1, memory_order_relaxed);
}

/* Room for a begin (itself and its end) beyond the reserved ends? */
static int has_room(const zone_buf *b) { return b->r.resv + 2 <= b->r.lim; }

static void refresh_room(zone_buf *b) {
  b->r.lim = b->r.head + free_records(b);
}

void spy__zone_begin_slow(spy_provider *p, spy_zone_loc *loc) {
  uint32_t e = spy__zone_epoch(p);
  if (!e)
    return;
  zone_buf *b = bind(p, e, 1);
  if (!b) {
    count_drop(p, NULL);
    return;
  }
  if (b->skip) { /* inside a dropped zone: dropped too */
    b->skip++;
    count_drop(p, b);
    return;
  }
  uint32_t id = __atomic_load_n(&loc->id, __ATOMIC_ACQUIRE);
  if (!id)
    id = register_loc(loc);
  /* Full: the service's tail is re-read only every HOLD begins, so a
   * thread outrunning the drain does not pull its cache line each time. */
  if (!has_room(b) && (!b->hold || !--b->hold)) {
    refresh_room(b);
    if (!has_room(b))
      b->hold = HOLD;
  }
  if (!id || !has_room(b)) {
    /* Dropped, with everything inside it. The fast paths go slow while
     * skipping: no limit for begins, no open zone for ends. */
    b->saved_open = (uint32_t)(b->r.resv - b->r.head);
    b->r.resv = b->r.head;
    b->r.lim = 0;
    b->skip = 1;
    count_drop(p, b);
    return;
  }
  uint64_t h = b->r.head;
  b->r.rec[h & b->r.mask] = (spy__ticks() << 16) | id;
  b->r.resv += 2;
  publish(b, h + 1);
}

void spy__zone_end_slow(spy_provider *p) {
  uint32_t e = spy__zone_epoch(p);
  if (!e)
    return;
  zone_buf *b = bind(p, e, 0);
  if (!b)
    return;
  if (b->skip) {
    if (--b->skip == 0) /* lim stays 0: the next begin looks */
      b->r.resv = b->r.head + b->saved_open;
    return;
  }
  uint64_t h = b->r.head;
  if (b->r.resv == h)
    return; /* its begin was not recorded */
  b->r.rec[h & b->r.mask] = spy__ticks() << 16;
  publish(b, h + 1);
}

void spy__zones_frame(spy_provider *p, uint64_t frame_no, uint64_t ticks) {
  uint32_t e = spy__zone_epoch(p);
  if (!e)
    return;
  zone_buf *b = bind(p, e, 1);
  if (b && !b->skip && !has_room(b))
    refresh_room(b);
  if (!b || b->skip || !has_room(b)) {
    atomic_fetch_add_explicit(&p->zones.st_markers_dropped, 1,
                              memory_order_relaxed);
    return;
  }
  uint64_t h = b->r.head;
  b->r.rec[h & b->r.mask] = (ticks << 16) | ZREC_FRAME;
  b->r.rec[(h + 1) & b->r.mask] = frame_no;
  b->r.resv += 2;
  publish(b, h + 2);
}

int spy_thread_name(spy_provider *p, const char *name) {
  if (!p || !name)
    return SPY_EINVAL;
  int err = 0;
  zone_buf *b = thread_ring(p, 1, &err);
  if (!b)
    return err ? err : SPY_ENOMEM;
  spy__zones *z = &p->zones;
  pthread_mutex_lock(&z->mu);
  size_t n = strnlen(name, SPY_ZONE_NAME_MAX);
  memcpy(b->name, name, n);
  b->name[n] = 0;
  atomic_fetch_add(&b->name_ver, 1);
  pthread_mutex_unlock(&z->mu);
  return 0;
}

/* ---- provider lifetime ------------------------------------------------- */

/* ns = mono_a + (ticks - tick_a) * npt, in 32.32 fixed point. */
static inline uint64_t to_ns(const spy__zones *z, uint64_t ticks) {
  int64_t dt = (int64_t)(ticks - z->tick_a);
  /* The drain's case, a TSC over 2 GHz: within 2^32 ticks of the anchor
   * (re-read every second) the product fits 64 bits; same value. */
  if (dt >= 0 && dt < (1ll << 32) && z->mult >= 0 && z->mult < (1ll << 31))
    return z->mono_a + ((uint64_t)dt * (uint64_t)z->mult >> 32);
  __int128 d = (__int128)dt * z->mult;
  __int128 ns = (__int128)z->mono_a + (d >> 32);
  return ns < 0 ? 0 : (uint64_t)ns;
}

static void anchor(spy__zones *z, int first) {
  /* The tightest of three (mono, ticks, mono) readings. */
  uint64_t best = UINT64_MAX, t = 0, m = 0;
  for (int i = 0; i < 3; i++) {
    uint64_t m0 = spy__mono_ns(), tk = spy__ticks(), m1 = spy__mono_ns();
    if (m1 - m0 < best) {
      best = m1 - m0;
      t = tk;
      m = m0 + (m1 - m0) / 2;
    }
  }
  if (first) {
    z->tick0 = z->tick_a = t;
    z->mono0 = z->mono_a = m;
    z->mult = (int64_t)(z->npt * 4294967296.0);
    return;
  }
  if (m - z->mono0 > 500000000ull && t > z->tick0)
    z->npt = (double)(m - z->mono0) / (double)(t - z->tick0);
  /* Continuous, never a step: the new segment starts where the current
   * mapping is at t, and its rate takes in the error to the true clock
   * over the next second (a slew, as NTP does). A step would reorder
   * nested zones whose begin and end are converted on either side of it
   * (a child ending after its parent). Only a large error (a first
   * estimate far off, a suspended machine) is corrected at once. */
  int64_t cur = (int64_t)to_ns(z, t);
  int64_t err = (int64_t)m - cur;
  double rate = z->npt;
  if (err > -1000000 && err < 1000000) {
    rate += (double)err * z->npt / 1e9; /* err ns spread over ~1 s */
    m = (uint64_t)cur;
  }
  z->tick_a = t;
  z->mono_a = m;
  z->mult = (int64_t)(rate * 4294967296.0);
}

int spy__zones_init(spy_provider *p) {
  spy__zones *z = &p->zones;
  /* The default is several times a core's L2 (1-2 MiB on current x86):
   * the service's reads leave shared copies of the ring's lines in its
   * core's caches, and a ring that wraps before they are evicted makes
   * the thread take them back on every line it rewrites. Measured with
   * `spyglass bench zones` (2-core Zen 4, service on the other core): a
   * zone pair at 1.07-1.30x the two-clock-read floor with 1 MiB,
   * 1.06-1.16x with 2 MiB, 1.03-1.05x with 4 MiB, 1.41-1.58x with
   * 256 KiB; the thread's CPU time, not waiting for a core. */
  uint32_t bytes = p->desc.zone_buffer_bytes ? p->desc.zone_buffer_bytes
                                             : SPY_ZONE_BUFFER_DEFAULT;
  if (bytes < 4096)
    bytes = 4096;
  if (bytes > (1u << 30))
    bytes = 1u << 30;
  uint32_t rec = 512;
  while ((uint64_t)rec * 8 < bytes)
    rec <<= 1;
  z->records = rec;
  p->desc.zone_buffer_bytes = rec * 8;
  z->npt = p->ns_per_tick;
  anchor(z, 1);
  z->loc_next = SPY_ZONE_ID_FIRST;
  return pthread_mutex_init(&z->mu, NULL) ? SPY_ENOMEM : 0;
}

void spy__zones_free(spy_provider *p) {
  spy__zones *z = &p->zones;
  if (!z->records)
    return; /* never initialised */
  pthread_mutex_lock(&z->mu);
  zone_buf *b = z->list;
  z->list = NULL;
  pthread_mutex_unlock(&z->mu);
  while (b) {
    zone_buf *next = b->next;
    atomic_store_explicit(&b->orphan, 1, memory_order_release);
    unref(b);
    b = next;
  }
  pthread_mutex_destroy(&z->mu);
}

void spy__zones_stats(const spy_provider *cp, spy_provider_stats *out) {
  spy_provider *p = (spy_provider *)cp;
  spy__zones *z = &p->zones;
  uint64_t dropped = atomic_load(&z->st_dropped);
  pthread_mutex_lock(&z->mu);
  for (zone_buf *b = z->list; b; b = b->next)
    dropped += atomic_load_explicit(&b->dropped, memory_order_relaxed);
  dropped += z->dropped_gone;
  pthread_mutex_unlock(&z->mu);
  out->zones_dropped = dropped;
  out->zone_markers_dropped = atomic_load(&z->st_markers_dropped);
  out->zone_records = atomic_load(&z->st_records);
  out->zone_frames = atomic_load(&z->st_frames);
  out->zone_threads = atomic_load(&z->st_threads);
}

void spy__zones_snapshot(spy_provider *p) {
  atomic_store(&p->zones.snapshot_req, 1);
}

int spy__zones_wait_ms(spy_provider *p, int wait_ms) {
  /* Drained about every millisecond while subscribed, and sooner while a
   * ring fills fast (period_ns, from the last drain's fill): the service
   * then does not wait for input, it sleeps that long before the drain. */
  spy__zones *z = &p->zones;
  z->may_sleep = z->epoch && wait_ms > 0 && z->period_ns;
  if (z->may_sleep)
    return 0;
  return z->epoch && wait_ms > 1 ? 1 : wait_ms;
}

/* The next drain period from this one's fill: the time the fastest ring
 * takes to fill a quarter of itself at the rate it filled since the last
 * drain, between PERIOD_MIN_NS and 1 ms (0 = the 1 ms default). Rings
 * filled slower than that need nothing sooner; a thread outrunning it
 * gets drained before its ring is full, without a system call of its
 * own. */
#define PERIOD_MIN_NS 50000ull
static void adapt_period(spy__zones *z, uint64_t most, uint64_t now_ns) {
  uint64_t dt = now_ns - z->last_drain_ns;
  z->last_drain_ns = now_ns;
  uint64_t quarter = z->records / 4;
  if (!z->epoch || dt == 0 || dt > 100000000ull || most * 4 < quarter) {
    z->period_ns = 0; /* idle, or under a sixteenth a drain */
    return;
  }
  /* most records in dt ns: a quarter takes quarter * dt / most ns */
  uint64_t t = most ? (uint64_t)((double)quarter * (double)dt / (double)most)
                    : 1000000ull;
  if (t < PERIOD_MIN_NS)
    t = PERIOD_MIN_NS;
  z->period_ns = t >= 1000000ull ? 0 : t;
}

/* Before a drain in the short period: sleeps out the rest of it. */
static void period_sleep(spy__zones *z) {
  if (!z->may_sleep)
    return;
  z->may_sleep = 0;
  uint64_t now = spy__mono_ns(), due = z->last_drain_ns + z->period_ns;
  if (now >= due)
    return;
  uint64_t d = due - now;
  struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
  nanosleep(&ts, NULL);
}

/* ---- the service's drain ------------------------------------------------ */

typedef struct enc {
  spy_provider *p;
  spy_buffer *buf;
  spy_frame_writer w;
  spy_zones_writer zw;
  int frames; /* posted this tick */
  uint16_t flags;
  uint64_t base_ns;
  zone_buf *thr; /* the thread whose block is open */
} enc;

static void enc_post(enc *e) {
  if (!e->buf)
    return;
  spy_zones_end(&e->zw);
  int len = spy_frame_finish(&e->w);
  spy_provider *p = e->p;
  if (len > (int)SPY_FRAME_MIN) {
    if (spy_transport_post(p->tr, e->buf, (size_t)len) == 0)
      atomic_fetch_add_explicit(&p->zones.st_frames, 1, memory_order_relaxed);
  } else {
    p->tr->ops->release_unused(p->tr, e->buf);
  }
  e->buf = NULL;
  e->frames++;
}

static void open_block(enc *e, zone_buf *b, uint8_t flags, int with_name) {
  spy_zone_thread_info ti = {
      .thread = b->index,
      .os_tid = b->os_tid,
      .flags = flags,
      .dropped = atomic_load_explicit(&b->dropped, memory_order_relaxed)};
  char name[SPY_ZONE_NAME_MAX + 1];
  if (with_name) {
    pthread_mutex_lock(&e->p->zones.mu);
    memcpy(name, b->name, sizeof name);
    b->w_name_sent = atomic_load(&b->name_ver);
    pthread_mutex_unlock(&e->p->zones.mu);
    ti.flags |= SPY_ZONES_THREAD_NAMED;
    ti.name = name;
    ti.name_len = (uint32_t)strlen(name);
  }
  if (b->w_reset) {
    ti.flags |= SPY_ZONES_THREAD_RESET;
    b->w_reset = 0;
  }
  b->w_dropped_sent = ti.dropped;
  spy_zones_thread_begin(&e->zw, &ti);
  e->thr = b;
}

/* Room for `need` more bytes in the frame, starting a new frame if the
 * current one is full (the open thread block continues in it). 0 when no
 * frame may be started now (pool empty, or enough frames this tick). */
static int ensure(enc *e, size_t need) {
  need += 64; /* padding, section and block ends */
  if (e->buf && e->w.cap - e->w.len >= need && !e->w.err)
    return 1;
  zone_buf *cont = e->buf ? e->thr : NULL;
  enc_post(e);
  if (e->frames >= MAX_FRAMES_PER_TICK)
    return 0;
  spy_provider *p = e->p;
  e->buf = spy_transport_acquire(p->tr, SPY_TIER_MEDIUM);
  if (!e->buf)
    return 0;
  spy_frame_start(&e->w, e->buf->data, e->buf->cap, SPY_MSG_DATA,
                  spy__wall_ms(), 0, 0);
  spy_zones_begin(&e->zw, &e->w, e->flags, e->base_ns);
  e->flags = 0; /* FULL marks the first section of a pass */
  e->thr = NULL;
  if (cont)
    open_block(e, cont, 0, 0);
  return e->w.cap - e->w.len >= need;
}

static inline uint64_t unwrap(zone_buf *b, uint64_t t48) {
  uint64_t base = b->w_ticks, half = 1ull << 47;
  uint64_t c = (base & ~MASK48) | t48;
  if (c + half < base)
    c += 1ull << 48;
  else if (c > base + half && c >= (1ull << 48))
    c -= 1ull << 48;
  b->w_ticks = c;
  return c;
}

/* spy_zones_put_event for the drain's common case, inline: the caller has
 * made sure of SPY_ZONES_EVENT_MAX bytes of room. Same bytes. */
static inline void put_fast(enc *e, uint8_t kind, uint64_t ns, uint64_t value) {
  spy_frame_writer *w = &e->w;
  uint64_t last = e->zw.last_ns;
  uint64_t d = ns > last ? ns - last : 0;
  if (d >> 62)
    d = 0;
  e->zw.last_ns = last + d;
  uint8_t *o = w->buf + w->len;
  uint64_t v = d << 2 | kind;
  while (v >= 0x80) {
    *o++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *o++ = (uint8_t)v;
  if (kind != SPY_ZONE_EV_END) {
    while (value >= 0x80) {
      *o++ = (uint8_t)(value | 0x80);
      value >>= 7;
    }
    *o++ = (uint8_t)value;
  }
  w->len = (size_t)(o - w->buf);
}

/* The drain's batch loop: encodes the begin and end records from i on,
 * as many as the frame surely has room for (SPY_ZONES_EVENT_MAX each)
 * and up to the ring's wrap, without a call or a room check per record.
 * Stops before a frame or reset record, or a time not within 2^32 ticks
 * after the anchor (to_ns()'s fast case); returns the next index. Same
 * bytes as put_fast(to_ns(unwrap())) record by record: a record's low 48
 * tick bits less the anchor's, modulo 2^48, are its ticks since the
 * anchor when under 2^32 (records are drained within a second or so of
 * being written, the anchor is re-read every second), so one subtraction
 * and one test do unwrap()'s and to_ns()'s range checks, and the times
 * are kept relative to the anchor's nanoseconds. */
static uint64_t drain_run(enc *e, zone_buf *b, uint64_t i, uint64_t head) {
  const spy__zones *z = &e->p->zones;
  spy_frame_writer *w = &e->w;
  /* The anchor's ns under 2^61: every time here is below 2^62, so no
   * delta needs put_fast()'s clamp. */
  if (z->mult < 0 || z->mult >= (1ll << 31) || (z->mono_a >> 61))
    return i; /* not the fast case: record by record */
  const uint64_t ta16 = z->tick_a << 16, mult = (uint64_t)z->mult;
  const uint64_t mono_a = z->mono_a;
  for (;;) {
    size_t room = w->cap - w->len;
    if (i >= head || room < 128)
      return i;
    uint64_t n = (room - 64) / SPY_ZONES_EVENT_MAX;
    uint64_t at = i & b->r.mask, wrap = (uint64_t)b->r.mask + 1 - at;
    if (n > head - i)
      n = head - i;
    if (n > wrap)
      n = wrap;
    const uint64_t *src = b->r.rec + at;
    uint8_t *o = w->buf + w->len;
    /* last may precede the anchor: relative to it, signed */
    int64_t last = (int64_t)(e->zw.last_ns - mono_a);
    uint64_t dt = UINT64_MAX, k = 0;
    for (; k < n; k++) {
      uint64_t r = src[k];
      uint64_t code = r & 0xffffu;
      if (__builtin_expect(code - 1 < ZREC_RESET, 0))
        break;               /* frame or reset: the record-by-record path */
      uint64_t x = r - ta16; /* (ticks since the anchor) << 16 | code */
      if (__builtin_expect(x >> 48, 0))
        break; /* before the anchor, or far after it: to_ns() */
      dt = x >> 16;
      int64_t ns = (int64_t)(dt * mult >> 32);
      int64_t d = ns > last ? ns - last : 0;
      last += d;
      uint64_t v = (uint64_t)d << 2 | (code != 0);
      if (__builtin_expect(v < 0x80, 1)) {
        *o++ = (uint8_t)v;
      } else {
        do {
          *o++ = (uint8_t)(v | 0x80);
          v >>= 7;
        } while (v >= 0x80);
        *o++ = (uint8_t)v;
      }
      if (__builtin_expect(code < 0x80, 1)) {
        *o = (uint8_t)code; /* an end writes nothing: the byte is room */
        o += code != 0;
      } else {
        do {
          *o++ = (uint8_t)(code | 0x80);
          code >>= 7;
        } while (code >= 0x80);
        *o++ = (uint8_t)code;
      }
    }
    w->len = (size_t)(o - w->buf);
    e->zw.last_ns = mono_a + (uint64_t)last;
    if (dt != UINT64_MAX)
      b->w_ticks = z->tick_a + dt;
    i += k;
    if (k < n)
      return i;
  }
}

/* Drains one ring into blocks; 0 if it had to stop (no frame). */
static int drain_ring(enc *e, zone_buf *b, uint64_t head, int dead) {
  spy__zones *z = &e->p->zones;
  uint64_t tail = atomic_load_explicit(&b->tail, memory_order_relaxed);
  uint64_t dropped = atomic_load_explicit(&b->dropped, memory_order_relaxed);
  /* The name itself is read under the lock, in open_block. */
  int name_due = atomic_load(&b->name_ver) != b->w_name_sent;
  int gone = dead && !b->w_gone_sent;
  if (tail == head && !name_due && dropped == b->w_dropped_sent && !gone)
    return 1;
  int ok = 1;
  uint64_t i = tail;
  if (!ensure(e, 128))
    return 0;
  open_block(e, b, gone ? SPY_ZONES_THREAD_GONE : 0, name_due);
  for (; i < head; i++) {
    if (!b->w_pending && b->w_epoch == z->epoch && !e->w.err) {
      /* Begins and ends: the batch loop, up to a special record. */
      i = drain_run(e, b, i, head);
      if (i == head)
        break;
    }
    uint64_t r = b->r.rec[i & b->r.mask];
    if (b->w_pending) {
      uint64_t code = b->w_pending & 0xffffu, tk = b->w_pending >> 16;
      b->w_pending = 0;
      if (code == ZREC_RESET) {
        b->w_epoch = (uint32_t)r;
        if (b->w_epoch == z->epoch) {
          /* A new block: consumers forget this thread's open zones. */
          b->w_reset = 1;
          if (!ensure(e, 128)) {
            ok = 0;
            i++;
            break;
          }
          open_block(e, b, 0, 0);
        }
      } else if (b->w_epoch == z->epoch) {
        if (!ensure(e, SPY_ZONES_EVENT_MAX)) {
          b->w_pending = (tk << 16) | code; /* not consumed */
          ok = 0;
          break;
        }
        spy_zones_put_event(&e->zw, SPY_ZONE_EV_FRAME, to_ns(z, tk), r);
      }
      continue;
    }
    uint32_t code = (uint32_t)(r & 0xffffu);
    uint64_t tk = unwrap(b, r >> 16);
    if (code == ZREC_FRAME || code == ZREC_RESET) {
      b->w_pending = (tk << 16) | code;
      continue;
    }
    if (b->w_epoch != z->epoch)
      continue; /* older than the thread's reset: nobody's */
    if ((e->w.cap - e->w.len < 128 || e->w.err) &&
        !ensure(e, SPY_ZONES_EVENT_MAX)) {
      ok = 0;
      break;
    }
    put_fast(e, code ? SPY_ZONE_EV_BEGIN : SPY_ZONE_EV_END, to_ns(z, tk), code);
  }
  atomic_fetch_add_explicit(&z->st_records, i - tail, memory_order_relaxed);
  atomic_store_explicit(&b->tail, i, memory_order_release);
  if (ok && gone)
    b->w_gone_sent = 1;
  spy_zones_thread_end(&e->zw);
  e->thr = NULL;
  return ok;
}

/* The oldest time any ring holds (the sections' base). */
static uint64_t oldest_ns(spy__zones *z, zone_buf **v, const uint64_t *heads,
                          int n) {
  uint64_t base = to_ns(z, spy__ticks());
  for (int k = 0; k < n; k++) {
    uint64_t tail = atomic_load_explicit(&v[k]->tail, memory_order_relaxed);
    if (tail == heads[k] || v[k]->w_pending)
      continue;
    uint64_t r = v[k]->r.rec[tail & v[k]->r.mask];
    uint64_t save = v[k]->w_ticks;
    uint64_t t = to_ns(z, unwrap(v[k], r >> 16));
    v[k]->w_ticks = save;
    if (t < base)
      base = t;
  }
  return base;
}

static void release_dead(spy_provider *p, zone_buf **v, int n, int want) {
  spy__zones *z = &p->zones;
  for (int k = 0; k < n; k++) {
    zone_buf *b = v[k];
    if (!atomic_load_explicit(&b->dead, memory_order_acquire) ||
        atomic_load(&b->tail) !=
            __atomic_load_n(&b->r.head, __ATOMIC_ACQUIRE) ||
        (want && !b->w_gone_sent))
      continue;
    pthread_mutex_lock(&z->mu);
    for (zone_buf **pp = &z->list; *pp; pp = &(*pp)->next)
      if (*pp == b) {
        *pp = b->next;
        z->nthreads--;
        z->dropped_gone += atomic_load(&b->dropped);
        break;
      }
    pthread_mutex_unlock(&z->mu);
    unref(b);
  }
}

void spy__zones_service(spy_provider *p) {
  spy__zones *z = &p->zones;
  uint32_t f = spy__features_now(p);
  int want = (f & SPY_FEAT_ZONES) != 0;
  uint64_t now_ms = spy__mono_ns() / 1000000ull;
  if (want && !z->epoch) {
    uint32_t e;
    do
      e = atomic_fetch_add(&epoch_counter, 1) + 1;
    while (!e);
    z->epoch = e;
    z->full = 1;
    z->next_checkpoint_ms = now_ms + p->desc.checkpoint_ms;
    atomic_store_explicit(&p->hot.zones, e, memory_order_release);
  } else if (!want && z->epoch) {
    z->epoch = 0;
    atomic_store_explicit(&p->hot.zones, 0, memory_order_release);
  }
  if (atomic_exchange(&z->snapshot_req, 0) && want)
    z->full = 1;
  if (want && now_ms >= z->next_checkpoint_ms) {
    z->full = 1; /* late joiners and lost frames: names again */
    z->next_checkpoint_ms = now_ms + p->desc.checkpoint_ms;
  }

  period_sleep(z);
  zone_buf *v[SPY_ZONE_THREADS_MAX];
  uint64_t heads[SPY_ZONE_THREADS_MAX];
  int dead[SPY_ZONE_THREADS_MAX];
  int n = 0;
  pthread_mutex_lock(&z->mu);
  for (zone_buf *b = z->list; b && n < (int)SPY_ZONE_THREADS_MAX; b = b->next)
    v[n++] = b;
  atomic_store_explicit(&z->st_threads, z->nthreads, memory_order_relaxed);
  pthread_mutex_unlock(&z->mu);
  uint64_t most = 0; /* the most records any ring holds now */
  for (int k = 0; k < n; k++) {
    /* dead before head: a dead ring's head is final */
    dead[k] = atomic_load_explicit(&v[k]->dead, memory_order_acquire);
    heads[k] = __atomic_load_n(&v[k]->r.head, __ATOMIC_ACQUIRE);
    uint64_t held =
        heads[k] - atomic_load_explicit(&v[k]->tail, memory_order_relaxed);
    if (held > most)
      most = held;
  }
  adapt_period(z, most, spy__mono_ns());
  if (!want) {
    for (int k = 0; k < n; k++) {
      v[k]->w_pending = 0;
      atomic_store_explicit(&v[k]->tail, heads[k], memory_order_release);
    }
    release_dead(p, v, n, 0);
    return;
  }
  enc e = {.p = p, .flags = z->full ? SPY_ZONES_FULL : 0};
  e.base_ns = oldest_ns(z, v, heads, n);
  if (z->full) {
    z->loc_next = SPY_ZONE_ID_FIRST;
    for (int k = 0; k < n; k++)
      v[k]->w_name_sent = 0;
    z->full = 0;
  }
  uint32_t count = atomic_load_explicit(&loc_count, memory_order_acquire);
  int ok = 1;
  while (ok && z->loc_next < count) {
    const spy_zone_loc *l = loc_at(z->loc_next);
    spy_zone_loc_info li = {.id = z->loc_next,
                            .line = l->line,
                            .color = l->color,
                            .name = l->name ? l->name : "",
                            .function = l->function ? l->function : "",
                            .file = l->file ? l->file : ""};
    li.name_len = (uint32_t)strnlen(li.name, 255);
    li.function_len = (uint32_t)strnlen(li.function, 255);
    li.file_len = (uint32_t)strlen(li.file);
    if (!(ok = ensure(&e, 16 + 255 + 255 + SPY_ZONES_FILE_MAX + 4)))
      break;
    spy_zones_put_loc(&e.zw, &li);
    z->loc_next++;
  }
  for (int k = 0; ok && k < n; k++)
    ok = drain_ring(&e, v[k], heads[k], dead[k]);
  enc_post(&e);
  release_dead(p, v, n, 1);
  /* After the drain: what is left in the rings was written after it, so
   * hardly any record is converted by a segment that began after it. */
  if (now_ms - z->mono_a / 1000000ull >= 1000)
    anchor(z, 0);
}
