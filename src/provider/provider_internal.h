/* provider_internal.h — the provider's state, shared by its files:
 *   provider.c   create/destroy, the frame clock, samples, GPU attribution
 *   flush.c      encoding one data frame per flush tick
 *   registry.c   named values kept in wire form
 *   env.c        environment fields (seqlock'ed, set from any thread)
 *   service.c    discovery, subscriptions, heartbeat (worker thread)
 *   msgprof.c    the live message profile: the provider's profiler on
 *                the transport's hook while a subscriber wants
 *                SPY_FEAT_MSGPROF, its summary handed to the frame thread
 *   clocksrv.c   the thread that serves clock syncs to consumers
 *   zones.c      CPU zones: per-thread rings, drained by the service
 *
 * Threads. The frame thread owns the samples, the registry values and the
 * delta bookkeeping, and encodes the data frame at each flush tick. The
 * service (the offload worker, or the frame thread at ticks with the inline
 * transport) owns the channels' receive side and the subscriber list, and
 * publishes to the frame thread through atomics only: the watch word
 * (hot.watch: who watches what, one word), the snapshot request, each
 * registry entry's `wanted` flag and the message profile's triple buffer.
 */
#ifndef SPY_PROVIDER_INTERNAL_H
#define SPY_PROVIDER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "provider/zones_internal.h"
#include "spyglass/bus.h"
#include "spyglass/clock.h"
#include "spyglass/profiler.h"
#include "spyglass/provider.h"

#define MAX_SUBSCRIBERS 16
#define GPU_MAP_MAX 256
#define ENV_MAX 32
#define ENV_STR_MAX 128
#define NAME_CACHE_BITS 8
#define NAME_CACHE (1 << NAME_CACHE_BITS)

/* ---- registry ---------------------------------------------------------- */

typedef struct reg_entry {
  /* What a flush and a set read first, on the entry's first line; the
   * name (read by lookups and the service's filters) after it. */
  uint8_t *enc; /* this entry in wire form, value updated in place */
  uint32_t name_len;
  uint8_t kind;
  _Atomic uint8_t wanted; /* written by the service: in some filter */
  uint8_t meta_sent;      /* metadata-only form last sent */
  uint32_t version, sent_version;
  uint32_t enc_len; /* bytes of the encoded SET entry in enc */
  char name[SPY_KEY_MAX + 1];
} reg_entry;

typedef struct registry {
  reg_entry *e;
  uint8_t *arena;
  uint32_t slot_bytes; /* room per entry in arena */
  uint32_t cap, string_max;
  _Atomic uint32_t count; /* entries published (names readable) */
  int32_t *table;         /* open addressing: entry index or -1 */
  uint32_t table_mask;
  struct {
    const char *ptr;
    int32_t idx;
  } cache[NAME_CACHE]; /* name pointer -> entry, checked by content */
  /* The typed by-handle setters' pending values (spy__provider_hot.vslots,
   * cap of them): applied by spy__registry_apply, cancelled by any other
   * store to the entry. */
  struct spy__vslot *slots;
} registry;

int spy__registry_init(registry *r, uint32_t cap, uint32_t string_max);
void spy__registry_free(registry *r);
/* Entry for name, registering it (frame thread). < 0: SPY_ENOSPC/EINVAL. */
int spy__registry_lookup(registry *r, const char *name, int register_it,
                         int wanted_default);
/* Stores v in entry i (frame thread). */
void spy__registry_store(registry *r, int i, const spy_value *v);
/* Applies the typed setters' pending values to their entries (frame
 * thread, at a flush, before encoding). */
void spy__registry_apply(registry *r);
/* Appends the REGISTRY section: changed entries, or all if full. */
void spy__registry_encode(registry *r, spy_frame_writer *w, int full);

/* ---- environment ------------------------------------------------------- */

typedef struct env_field {
  char key[32];
  spy_value value; /* strings point into str */
  char str[ENV_STR_MAX];
  uint32_t version;
} env_field;

typedef struct env_table {
  pthread_mutex_t writers; /* setters from any thread, among themselves */
  _Atomic uint32_t seq;    /* seqlock: odd while a setter writes */
  env_field f[ENV_MAX];
  _Atomic uint32_t n;
  /* Frame thread: the copy last read, and what was last sent. */
  env_field snap[ENV_MAX];
  uint32_t snap_n;
  uint32_t snap_seq; /* seq of that copy (snap_ok: there is one) */
  int snap_ok;
  int local_dirty; /* a local field changed since the last encode */
  uint32_t sent_version[ENV_MAX];
  /* Fields the frame thread itself keeps (paused, idle, memory): no
   * seqlock needed. */
  env_field local[8];
  uint32_t local_sent[8];
  uint32_t local_n;
} env_table;

void spy__env_init(env_table *e);
void spy__env_free(env_table *e);
void spy__env_set(env_table *e, const char *key, const spy_value *v);
/* Frame thread: sets one of its own fields (slot < 8). */
void spy__env_set_local(env_table *e, uint32_t slot, const char *key,
                        const spy_value *v);
/* Frame thread: appends the ENV section with what changed since the last
 * call, or everything if full. Nothing at all if nothing changed. */
void spy__env_encode(env_table *e, spy_frame_writer *w, int full);

/* ---- subscribers (service thread) -------------------------------------- */

typedef struct subscriber {
  uint64_t id;
  uint32_t features;
  uint64_t last_ack_ms;
  int clock_used; /* asked for a clock sync: its segment is cleaned up */
  int has_filter;
  char **names;
  uint32_t n_names;
} subscriber;

/* ---- clock server (clocksrv.c) ---------------------------------------- */

#define CLOCK_JOBS 16

typedef struct clock_job {
  uint64_t consumer;
  int cleanup; /* 1: remove the consumer's segment file, 0: serve a sync */
} clock_job;

/* Two single-producer single-consumer rings: jobs (service -> clock
 * thread) and segments opened, ready to be announced (clock thread ->
 * service, which posts READY through the transport). */
typedef struct clock_server {
  pthread_t th;
  int started, start_failed; /* service thread */
  _Atomic int stop;
  _Atomic uint32_t head; /* jobs pushed; the clock thread's futex word */
  _Atomic uint32_t tail; /* jobs taken */
  clock_job jobs[CLOCK_JOBS];
  _Atomic uint32_t ready_head, ready_tail;
  uint64_t ready[CLOCK_JOBS]; /* consumer ids now being served */
} clock_server;

/* ---- the provider ------------------------------------------------------ */

struct spy_provider {
  spy__provider_hot hot; /* first: read by the inline fast paths */

  /* frame thread ------------------------------------------------------- */
  /* What every watched frame reads and writes, on one line of its own
   * (not hot.zones' line, which other threads read); the frame counter
   * statistics on the next. */
  _Alignas(64) uint64_t t_begin;
  uint64_t t_prev_end, next_flush;
  uint64_t frame_no;
  uint32_t *ctr; /* [n_counters rounded up to 8][SPY_SAMPLE_RING] */
  uint64_t ring_start;
  uint32_t ring_count;
  uint32_t n_counters;
  uint16_t gpu_last; /* forward fill; SPY_GPU_NONE before any timing */
  uint8_t have_prev;
  uint8_t skip_reason;
  uint32_t watch_seen; /* the watch period this thread last measured in */
  _Alignas(64) _Atomic uint64_t st_frames, st_stats_samples; /* relaxed */
  /* fps of the newest frame dropped with the ring full (drop_fps_set):
   * what a frame after it with no previous end keeps. */
  int16_t drop_fps;
  int drop_fps_set;
  double ns_per_tick;
  uint64_t flush_ticks;
  uint64_t next_checkpoint, checkpoint_ticks;
  uint64_t next_service, service_ticks; /* inline transport only */
  int service_countdown;
  int gpu_any;
  uint64_t gpu_newest;     /* newest GPU frame id resolved */
  uint64_t gpu_issued_max; /* highest GPU frame id issued (gpu_issued_any) */
  int gpu_issued_any;
  /* Sample ring, columnar, SPY_SAMPLE_RING deep. A frame stores raw
   * ticks: its CPU time (end - begin) and the interval from the previous
   * frame's end (0: none, so its fps repeats the one before); fps and cpu
   * ms are derived from them at the flush (spy__samples_derive). A value
   * that does not fit (0 ticks, 2^31 and more) is converted at the frame
   * instead and stored as -1 - the wire value. fps_before: the fps before
   * slot 0. */
  int32_t dt_t[SPY_SAMPLE_RING], cpu_t[SPY_SAMPLE_RING];
  int16_t fps_before;
  int16_t fps[SPY_SAMPLE_RING];
  uint16_t cpu[SPY_SAMPLE_RING], gpu[SPY_SAMPLE_RING];
  char counter_names[SPY_MAX_COUNTERS][SPY_KEY_MAX + 1];
  struct {
    uint64_t gpu_id, frame;
  } gmap[GPU_MAP_MAX];
  uint32_t gmap_n;
  registry reg;
  env_table env;
  /* What update_local_env (flush.c) last gave the environment. */
  int env_local_set, env_skip_reason;
  uint64_t env_rss, env_heap;

  /* shared: service -> frame thread ------------------------------------ */
  _Atomic uint32_t snapshot_req;
  _Atomic uint64_t rss_bytes, heap_bytes; /* sampled by the service */

  /* statistics (relaxed atomics; read from any thread) ----------------- */
  _Atomic uint64_t st_skipped, st_samples_dropped, st_flushes,
      st_flushes_dropped, st_env_samples, st_registry_flushes,
      st_health_flushes, st_gpu_unknown_ids, st_gpu_bad_durations,
      st_gpu_resets;

  /* service thread ----------------------------------------------------- */
  spy_provider_desc desc; /* defaults resolved */
  char name[SPY_NAME_MAX + 1];
  uint64_t id, start_ms;
  spy_channel *disc, *data;
  spy_transport *tr;
  const char *tr_name; /* "offload" / "inline", read from any thread */
  subscriber subs[MAX_SUBSCRIBERS];
  int nsubs;
  _Atomic uint32_t nsubs_pub;
  uint8_t *rxbuf;
  size_t rxcap;
  uint64_t last_posted, last_post_ms, next_env_ms;
  uint64_t frames_seen; /* service: frames + skips at its last wait */
  uint32_t filter_gen, filter_gen_applied, reg_seen;
  _Atomic int reg_all_wanted; /* some subscriber has no registry filter */
  _Atomic uint32_t ready;     /* create finished: the service may run */
  uint32_t watch_period;      /* the service's: the current or last period */

  /* live message profile (msgprof.c) ----------------------------------- */
  spy_profiler *prof;       /* made by the service at the first want */
  int prof_failed;          /* create failed: not retried */
  int prof_attached;        /* service: our hook is on the transport */
  _Atomic uint32_t prof_on; /* the same, for spy_provider_get_stats */
  uint64_t prof_next_ms;    /* service: next summary due */
  /* Triple buffer of summaries: the service fills sums[sum_back] and
   * swaps it into sum_mid (with SUM_FRESH); the frame thread swaps
   * sum_front out of sum_mid when it is fresh. Wait-free on both sides. */
  spy_msgprof_summary sums[3];
  _Atomic uint32_t sum_mid;
  uint32_t sum_back, sum_front;

  /* clock sync (clocksrv.c) --------------------------------------------- */
  clock_server cs;
  _Atomic uint64_t st_clock_syncs, st_clock_failures;

  /* CPU zones (zones.c) -------------------------------------------------- */
  spy__zones zones;

  /* Named image buffers (buffers.c): made by the first declare or buffer
   * subscription, whichever comes first. */
  _Atomic(struct spy__buffers *) buffers;
  /* The batch list and pass tree (drawlist.c): made by the service when a
   * subscriber first wants them. */
  _Atomic(struct spy__drawlist *) drawlist;
  /* The build feed (trace_feed.c): made by spy_trace_feed_enable. */
  _Atomic(struct spy__trace_feed *) trace_feed;
  /* in-process server (listen.c) */
  void *server;
};

/* service.c */
void spy__service(void *ctx, int wait_ms); /* the transport's tick */
int spy__announce(spy_provider *p, uint32_t type);
/* The union of the subscribers' features, as the service last published
 * it (any thread). */
static inline uint32_t spy__features_now(spy_provider *p) {
  return (uint32_t)atomic_load_explicit(&p->hot.watch, memory_order_acquire);
}

/* flush.c: encodes and posts one data frame of features f (frame thread;
 * sent, dropped and counted, or nothing to send). */
void spy__flush(spy_provider *p, uint64_t now, uint32_t f);
/* msgprof.c */
void spy__msgprof_init(spy_provider *p);
void spy__msgprof_tick(spy_provider *p, uint64_t now_ms); /* service */
/* Frame thread: the latest summary (a zero one before the first). */
const spy_msgprof_summary *spy__msgprof_take(spy_provider *p);
/* provider.c: ms -> the wire's ms ×100, saturated; NaN and <= 0 give 0. */
uint16_t spy__ms_x100(double ms);
/* provider.c (frame thread, at a flush): fps and cpu ms of the samples in
 * the ring from their raw ticks (again after a flush that was not sent:
 * the raw ticks stay); and, once they are sent, an empty ring. */
void spy__samples_derive(spy_provider *p);
void spy__samples_sent(spy_provider *p);
/* clocksrv.c (service thread, except stop: destroy) */
int spy__clock_push(spy_provider *p, uint64_t consumer, int cleanup);
/* Next consumer whose segment the clock thread has opened (to answer
 * READY), 1; or 0 if none. */
int spy__clock_next_ready(spy_provider *p, uint64_t *consumer);
void spy__clock_stop(spy_provider *p);

uint64_t spy__provider_wall_ms(void);

/* buffers.c: the service's side (subscribe / unsubscribe / resync, and a
 * tick that makes the 16 MiB pool tier off the frame thread), the frame
 * thread's BUFFERS section at a flush, and the teardown. */
struct spy__buffers;
void spy__buffers_subscribe(spy_provider *p, const spy_subscription *sub);
void spy__buffers_unsubscribe(spy_provider *p, uint64_t consumer);
/* Forces a key frame on the next chunk of every stream `consumer` asked
 * for (its buffers only, not the other subscribers'); service thread. */
void spy__buffers_keyframe(spy_provider *p, uint64_t consumer);
/* A consumer's SPY_MSG_BUFFER_PROBE entry (service thread). */
void spy__buffers_probe(spy_provider *p, uint64_t consumer, const spy_probe *q);
void spy__buffers_service(spy_provider *p);
void spy__buffers_encode(spy_provider *p, spy_frame_writer *w, int full);
void spy__buffers_free(spy_provider *p);
/* drawlist.c: the service makes the tables; the flush sends what changed. */
struct spy__drawlist;
void spy__drawlist_service(spy_provider *p);
void spy__drawlist_encode(spy_provider *p, spy_frame_writer *w, int full,
                          uint32_t features);
void spy__drawlist_free(spy_provider *p);
/* trace_feed.c: the service sends the build progress; destroy frees it. */
struct spy__trace_feed;
void spy__trace_feed_service(spy_provider *p);
/* The service: TRACE became wanted (it was not): a new watch period. */
void spy__trace_feed_watch_began(spy_provider *p);
void spy__trace_feed_free(spy_provider *p);
/* listen.c: the in-process server, through the net layer's hook. */
int spy__listen_start(spy_provider *p);
void spy__listen_stop(spy_provider *p);

#endif
