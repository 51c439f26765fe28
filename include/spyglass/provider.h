/* provider.h — the inspected program's side: per-frame stats, counters, GPU
 * time, environment and named values, sent to whoever subscribes.
 *
 * A provider announces itself on the discovery channel and serves
 * subscriptions on its own data channel (see bus.h and docs/wire.md). It
 * collects only what some subscriber asked for: with no subscriber, every
 * hot-path call below is one load and one branch.
 *
 *   spy_provider *p;
 *   spy_provider_desc d = {.name = "my-game"};
 *   spy_provider_create(&p, &d);
 *   for (;;) {
 *     spy_frame_begin(p);
 *     render();
 *     spy_counter_set(p, SPY_COUNTER_DRAWS, draws);
 *     spy_value_set_f64(p, "scene.time", t);
 *     spy_frame_end(p);
 *   }
 *   spy_provider_destroy(p);
 *
 * Threads: the hot-path calls (frame, counters, GPU, values) belong to one
 * thread, the frame thread. spy_env_* may be called from any thread. The
 * provider's own work (answering discovery, subscriptions, heartbeat,
 * posting) runs on the offload transport's worker thread, or on the frame
 * thread at flush ticks with the inline transport.
 *
 * Live message profile: while a subscriber asks for SPY_FEAT_MSGPROF the
 * provider attaches its own message profiler (profiler.h) to its
 * transport's hook and every data frame carries the summary (MSGPROF
 * section); when none does, the hook is cleared and a post costs one
 * relaxed load of it, as before. While profiled, each post on the frame
 * thread is timed and recorded into the frame thread's own lane (no lock);
 * the service folds the lanes and computes the summary, and the frame
 * thread takes the latest one through a wait-free triple buffer.
 *
 * Clock sync: a consumer may ask for a sync (clock.h); the provider serves
 * it on a thread of its own, started at the first request, so neither the
 * frame thread nor the worker ever waits for a consumer.
 *
 * Compiled out: the SPY_* macros at the end expand to nothing unless
 * SPY_ENABLE is defined; the types stay valid either way.
 */
#ifndef SPYGLASS_PROVIDER_H
#define SPYGLASS_PROVIDER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "spyglass/clock.h"
#include "spyglass/error.h"
#include "spyglass/transport.h"
#include "spyglass/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spy_provider spy_provider;

/* Built-in counters, the stats overlay's set; application counters named
 * in the desc follow them, from SPY_COUNTER_BUILTIN on. */
typedef enum spy_counter {
  SPY_COUNTER_DRAWS = 0,     /* draw calls this frame */
  SPY_COUNTER_PASSES = 1,    /* render passes */
  SPY_COUNTER_MIPS = 2,      /* mip-generation passes */
  SPY_COUNTER_OBJECTS = 3,   /* objects mounted */
  SPY_COUNTER_FAST = 4,      /* fast shapes visible */
  SPY_COUNTER_EFFECT = 5,    /* effect shapes */
  SPY_COUNTER_PARTICLES = 6, /* particles */
  SPY_COUNTER_DIRTY = 7,     /* dirty frames remaining */
  SPY_COUNTER_BUILTIN = 8
} spy_counter;

#define SPY_MAX_COUNTERS SPY_STATS_MAX_COUNTERS
/* Samples held between flushes. A flush comes every flush_ms or, sooner,
 * when the ring fills (above 960 frames/s at the default 250 ms); the
 * newest are dropped (and counted) only while flushes cannot be sent. */
#define SPY_SAMPLE_RING 240u

typedef struct spy_provider_desc {
  const char *name;             /* program name; NULL = this process's name */
  spy_provider_kind kind;       /* default SPY_PROVIDER_USER */
  spy_transport_kind transport; /* default AUTO (offload, else inline) */
  const char *dir;              /* runtime directory; NULL = default */
  const char *const *counters;  /* application counter names, in order */
  uint32_t n_counters;          /* at most SPY_MAX_COUNTERS - 8 */
  uint32_t registry_capacity;   /* named values; default 256 */
  uint32_t string_max;          /* bytes kept per string value; default 128 */
  uint32_t ring_bytes;          /* data channel ring; default 4 MiB */
  /* Protocol timings, milliseconds (tests scale them down). */
  uint32_t flush_ms;           /* default 250 */
  uint32_t idle_ping_ms;       /* default 2000 */
  uint32_t ack_grace_ms;       /* default 3000 */
  uint32_t checkpoint_ms;      /* default 5000 */
  uint32_t env_sample_ms;      /* RSS / heap sampling; default 250 */
  int simulate_worker_failure; /* test hook, see spy_transport_desc */
  /* Test hooks for clock sync: the clock this provider answers syncs with
   * is clock_now(clock_now_ctx) (NULL: CLOCK_MONOTONIC) plus
   * clock_test_offset_ns (see spy_clock_opts). */
  spy_clock_now_fn clock_now;
  void *clock_now_ctx;
  int64_t clock_test_offset_ns;
  /* CPU zones (zones.h): bytes of each thread's zone ring, rounded up to a
   * power of two; default 4 MiB (262144 zones, SPY_ZONE_BUFFER_DEFAULT
   * in zones.h), at least 4 KiB. */
  uint32_t zone_buffer_bytes;
  /* In-process server: "ADDR:PORT" (port 0: any free one) serves this
   * provider only over TCP / WebSocket, as `spyglass serve` does, on a
   * thread of its own (never the frame thread). It needs spyglass_net
   * (its spy_net_register installs the hook); without it create fails
   * with SPY_ENOTSUP. listen_token: as --token-file (NULL: generated,
   * loopback only). */
  const char *listen;
  const char *listen_token;
} spy_provider_desc;

/* How the core starts an in-process server without linking the net
 * layer: spyglass_net registers these (spy_net_register). start returns
 * 0 and the server handle, or a negative error; port gives its port. */
typedef struct spy_listen_hook {
  int (*start)(void **server, const char *listen, const char *token,
               uint64_t provider_id, const char *dir);
  void (*stop)(void *server);
  int (*port)(const void *server);
} spy_listen_hook;
void spy_provider_set_listen_hook(const spy_listen_hook *hook);
/* The in-process server's port, or 0 without one. */
int spy_provider_listen_port(const spy_provider *p);

/* Creates a provider, opens its channels and announces it. *out receives
 * it; free with spy_provider_destroy(). Everything the hot path needs is
 * allocated here. Errors: SPY_EINVAL (bad desc), SPY_ENOMEM, SPY_EOWNER
 * (runtime directory), or a channel/transport error. */
int spy_provider_create(spy_provider **out, const spy_provider_desc *desc);
/* Posts provider:gone, stops the worker and frees everything. NULL is
 * accepted. Not concurrent with the hot-path calls. */
void spy_provider_destroy(spy_provider *p);
/* The provider's id (its data channel is "spyglass:<16 hex digits>"). */
uint64_t spy_provider_id(const spy_provider *p);
/* The effective desc, defaults resolved. */
void spy_provider_get_desc(const spy_provider *p, spy_provider_desc *out);
/* Which transport is in use: "offload" or "inline". */
const char *spy_provider_transport_name(const spy_provider *p);
/* The transport (its ops never change), e.g. to attach a message profiler
 * of your own (spy_profiler_attach). A transport has one profiler hook:
 * while the provider's own profiler is attached for a MSGPROF subscriber
 * (spy_provider_stats.msgprof_attached), attaching yours returns
 * SPY_EBUSY; while yours is attached, the provider's is not, MSGPROF
 * subscribers receive an empty profile, and the provider tries again at
 * each service tick. */
spy_transport *spy_provider_transport(spy_provider *p);

/* Frame thread: sends what is pending now instead of at the next flush
 * tick (e.g. before exit, or at the end of a build). Returns 0, or
 * SPY_EPOOLEMPTY if the flush had to be dropped (counted; the samples stay
 * for the next one). Never waits. */
int spy_provider_flush(spy_provider *p);

typedef struct spy_provider_stats {
  uint64_t frames;          /* frames measured (frame_end while watched) */
  uint64_t skipped;         /* frame_skip calls while watched */
  uint64_t samples_dropped; /* ring full: newest dropped */
  uint64_t flushes;         /* data frames posted */
  uint64_t flushes_dropped; /* pool empty */
  uint32_t subscribers;
  uint32_t features; /* union of subscribed features */
  /* Collector invocations, per feature (tests check that an unwatched
   * feature is never collected). */
  uint64_t stats_samples, env_samples, registry_flushes, health_flushes;
  /* Live message profile: 1 while the provider's profiler is attached to
   * its transport for a MSGPROF subscriber. */
  uint32_t msgprof_attached;
  /* Clock syncs served to consumers, and those that failed (timed out,
   * segment missing or malformed). */
  uint64_t clock_syncs, clock_failures;
  /* GPU attribution: resolves ignored because their id was never issued,
   * resolves ignored because the duration was NaN, negative or over
   * SPY_GPU_MS_MAX, and device resets seen (issued ids going back by more
   * than SPY_GPU_RESET_GAP: the mapping restarts). */
  uint64_t gpu_unknown_ids, gpu_bad_durations, gpu_resets;
  /* CPU zones: zones dropped (a full ring, too many threads, too many
   * locations), frame markers dropped, threads holding a ring, and zone
   * records drained and frames posted by the service. */
  uint64_t zones_dropped, zone_markers_dropped;
  uint32_t zone_threads;
  uint64_t zone_records, zone_frames;
} spy_provider_stats;
void spy_provider_get_stats(const spy_provider *p, spy_provider_stats *out);

/* ---- the hot path ------------------------------------------------------ */

/* The part of the provider the inline fast paths read. Internal layout:
 * use the functions below. */
typedef struct spy__provider_hot {
  /* What is watched, the one word that says so: 0 while nobody
   * subscribes; else the union of the subscribers' features (low 32 bits)
   * and the watch period (high 32 bits, a new one each time watching starts
   * from nobody). Written by the service only. */
  _Atomic uint64_t watch;
  /* The frame thread's copy, taken at frame_begin (and frame_skip): every
   * check until the next begin reads this plain field, so with nobody
   * watching the compiler folds them all into the first. */
  uint64_t frame_watch;
  /* Non-zero with the inline transport: frame_end also serves the
   * channels, watched or not. Set once at create. */
  uint32_t inline_service;
  uint32_t counters[SPY_MAX_COUNTERS]; /* this frame's counter values */
  /* CPU zones (zones.h): the zone epoch, 0 while nobody subscribes to
   * SPY_FEAT_ZONES. Read by any thread at SPY__ZONES_HOT_OFFSET: past the
   * counters, off the cache line the frame thread writes every frame. */
  _Atomic uint32_t zones;
  /* The typed by-handle setters' pending values: one slot per registry
   * entry (vcap = registry_capacity), written by the frame thread with a
   * plain store and applied to the registry at the next flush (a later
   * set of the same entry by any other setter cancels it). kind 0 = none
   * pending. Set once at create. */
  struct spy__vslot {
    uint64_t bits;
    uint32_t kind;
    uint32_t pad_;
  } * vslots;
  uint32_t vcap;
} spy__provider_hot;

void spy__frame_begin(spy_provider *p);
void spy__frame_end(spy_provider *p);
void spy__frame_skip(spy_provider *p, int reason);
void spy__gpu_issued(spy_provider *p, uint64_t gpu_frame);
void spy__gpu_resolved(spy_provider *p, uint64_t gpu_frame, double ms);
void spy__value_set(spy_provider *p, const char *name, const spy_value *v);
void spy__value_set_at(spy_provider *p, int handle, const spy_value *v);
void spy__value_set_f64_at(spy_provider *p, int handle, double v);
void spy__value_set_i64_at(spy_provider *p, int handle, int64_t v);
void spy__value_set_u64_at(spy_provider *p, int handle, uint64_t v);
void spy__value_set_bool_at(spy_provider *p, int handle, int v);
void spy__value_set_vec_at(spy_provider *p, int handle, double x, double y,
                           double z, double w, int n);

/* Inside a frame: is anyone watching (as of this frame's begin)? */
static inline int spy__watched(const spy_provider *p) {
  return __builtin_expect(((const spy__provider_hot *)p)->frame_watch != 0, 0);
}
/* Inside a frame: does some subscriber want feature(s) `feat`? The same
 * one load and test as spy__watched. */
static inline int spy__watching(const spy_provider *p, uint32_t feat) {
  return __builtin_expect(
      ((uint32_t)((const spy__provider_hot *)p)->frame_watch & feat) != 0, 0);
}

/* Brackets the frame's CPU work: CPU ms = end − begin; FPS = 1 / (time
 * between this frame_end and the previous one), not averaged. Calls in
 * between (counters, values, GPU) and until the next frame_begin follow
 * the watched state this frame_begin saw. */
static inline void spy_frame_begin(spy_provider *p) {
  spy__provider_hot *h = (spy__provider_hot *)p;
  uint64_t w = atomic_load_explicit(&h->watch, memory_order_relaxed);
  h->frame_watch = w;
  if (__builtin_expect(w != 0, 0))
    spy__frame_begin(p);
}
/* A frame whose begin nobody watched is not measured, even if a subscriber
 * arrived meanwhile: the first measured frame is the next one. */
static inline void spy_frame_end(spy_provider *p) {
  spy__provider_hot *h = (spy__provider_hot *)p;
  if (__builtin_expect((h->frame_watch | h->inline_service) != 0, 0))
    spy__frame_end(p);
}

typedef enum spy_skip_reason {
  SPY_SKIP_PAUSED = 1, /* not visible: nothing drawn */
  SPY_SKIP_CAPPED = 2, /* frame-rate cap: too soon */
  SPY_SKIP_IDLE = 3    /* nothing changed: nothing to draw */
} spy_skip_reason;

/* A frame that was not rendered: nothing is measured, every value keeps
 * its last reading, and the environment shows PAUSED or idle until the
 * next frame_end. */
static inline void spy_frame_skip(spy_provider *p, spy_skip_reason why) {
  spy__provider_hot *h = (spy__provider_hot *)p;
  uint64_t w = atomic_load_explicit(&h->watch, memory_order_relaxed);
  h->frame_watch = w;
  if (__builtin_expect(w != 0, 0))
    spy__frame_skip(p, (int)why);
}

/* Sets / adds to a counter for this frame. Counters reset to 0 at
 * frame_begin. Out-of-range indexes are ignored. */
static inline void spy_counter_set(spy_provider *p, uint32_t c, uint32_t v) {
  if (spy__watching(p, SPY_FEAT_STATS) && c < SPY_MAX_COUNTERS)
    ((spy__provider_hot *)p)->counters[c] = v;
}
static inline void spy_counter_add(spy_provider *p, uint32_t c, uint32_t d) {
  if (spy__watching(p, SPY_FEAT_STATS) && c < SPY_MAX_COUNTERS)
    ((spy__provider_hot *)p)->counters[c] += d;
}
/* Index of a counter by name (built-in names: "draws", "passes", "mips",
 * "objects", "fast", "effect", "particles", "dirty"), or SPY_ENOENT. */
int spy_counter_index(const spy_provider *p, const char *name);

/* GPU timing, which resolves late, out of order and sometimes coalesced.
 * gpu_issued: this frame (between begin and end) submitted GPU work that
 * the application identifies as gpu_frame. gpu_resolved: the GPU took `ms`
 * for gpu_frame; the duration is written to every not-yet-flushed frame
 * still waiting at or before gpu_frame, and those waits are cleared. A
 * frame flushed before its value arrived keeps the last known value. With
 * no GPU timing ever, samples read "not available", never 0.
 * Bad input is ignored and counted (spy_provider_stats): a resolve for an
 * id above every id issued so far, or with a duration that is NaN,
 * negative or over SPY_GPU_MS_MAX. An issued id more than
 * SPY_GPU_RESET_GAP below the highest one issued is a device reset: the
 * pending mappings are forgotten and attribution starts again from it. */
#define SPY_GPU_MS_MAX 10000.0  /* longest plausible GPU frame, ms */
#define SPY_GPU_RESET_GAP 4096u /* ids going back further: a reset */
static inline void spy_gpu_issued(spy_provider *p, uint64_t gpu_frame) {
  if (spy__watching(p, SPY_FEAT_STATS))
    spy__gpu_issued(p, gpu_frame);
}
static inline void spy_gpu_resolved(spy_provider *p, uint64_t gpu_frame,
                                    double ms) {
  if (spy__watching(p, SPY_FEAT_STATS))
    spy__gpu_resolved(p, gpu_frame, ms);
}

/* Named values. Set by name (the first set registers the name; at most
 * registry_capacity names) or by handle (spy_value_handle) to skip the
 * lookup. Only values that changed since the last flush are sent. While
 * nobody watches the registry a set is one branch and stores nothing, so
 * set values every frame (or whenever they change, and at least once after
 * a consumer subscribes). Strings longer than string_max are cut. */
static inline void spy_value_set_f64(spy_provider *p, const char *name,
                                     double v) {
  if (spy__watching(p, SPY_FEAT_REGISTRY)) {
    spy_value x = {.kind = SPY_VAL_FLOAT};
    x.v.f[0] = v;
    spy__value_set(p, name, &x);
  }
}
static inline void spy_value_set_i64(spy_provider *p, const char *name,
                                     int64_t v) {
  if (spy__watching(p, SPY_FEAT_REGISTRY)) {
    spy_value x = {.kind = SPY_VAL_INT};
    x.v.i = v;
    spy__value_set(p, name, &x);
  }
}
static inline void spy_value_set_bool(spy_provider *p, const char *name,
                                      int v) {
  if (spy__watching(p, SPY_FEAT_REGISTRY)) {
    spy_value x = {.kind = SPY_VAL_BOOL};
    x.v.b = v != 0;
    spy__value_set(p, name, &x);
  }
}
static inline void spy_value_set_vec(spy_provider *p, const char *name,
                                     const double *v, int n) {
  if (spy__watching(p, SPY_FEAT_REGISTRY) && n >= 1 && n <= 4) {
    spy_value x = {
        .kind = (uint8_t)(n == 1 ? SPY_VAL_FLOAT : SPY_VAL_FLOAT2 + (n - 2))};
    for (int i = 0; i < n; i++)
      x.v.f[i] = v[i];
    spy__value_set(p, name, &x);
  }
}
void spy_value_set_str(spy_provider *p, const char *name, const char *s);
/* Any spy_value (kinds of wire.h, strings cut to string_max). */
static inline void spy_value_set(spy_provider *p, const char *name,
                                 const spy_value *v) {
  if (spy__watching(p, SPY_FEAT_REGISTRY))
    spy__value_set(p, name, v);
}
/* A handle for `name` (registering it), for spy_value_set_at; or
 * SPY_ENOSPC when the registry is full, SPY_EINVAL for a bad name. */
int spy_value_handle(spy_provider *p, const char *name);
/* By handle, any spy_value. The caller builds v before the check, which
 * costs a few stores even when nobody watches: in a hot loop prefer the
 * typed setters below, which build the value only inside the check (an
 * unwatched set is then the same one load and branch as by name). An
 * invalid handle (< 0, or not from this provider) is ignored. */
static inline void spy_value_set_at(spy_provider *p, int handle,
                                    const spy_value *v) {
  if (spy__watching(p, SPY_FEAT_REGISTRY))
    spy__value_set_at(p, handle, v);
}
/* The typed by-handle setters: a plain store of the value's bits into
 * the handle's slot (see spy__provider_hot.vslots), applied at the next
 * flush; no call, no lookup. An invalid handle is ignored. */
static inline void spy__vslot_put(spy_provider *p, int handle, uint32_t kind,
                                  uint64_t bits) {
  spy__provider_hot *h = (spy__provider_hot *)p;
  if ((uint32_t)handle < h->vcap) {
    h->vslots[handle].bits = bits;
    h->vslots[handle].kind = kind;
  }
}
static inline void spy_value_set_f64_at(spy_provider *p, int handle, double v) {
  if (spy__watching(p, SPY_FEAT_REGISTRY)) {
    union {
      double d;
      uint64_t u;
    } c = {.d = v};
    spy__vslot_put(p, handle, SPY_VAL_FLOAT, c.u);
  }
}
static inline void spy_value_set_i64_at(spy_provider *p, int handle,
                                        int64_t v) {
  if (spy__watching(p, SPY_FEAT_REGISTRY))
    spy__vslot_put(p, handle, SPY_VAL_INT, (uint64_t)v);
}
static inline void spy_value_set_u64_at(spy_provider *p, int handle,
                                        uint64_t v) {
  if (spy__watching(p, SPY_FEAT_REGISTRY))
    spy__vslot_put(p, handle, SPY_VAL_UINT, v);
}
static inline void spy_value_set_bool_at(spy_provider *p, int handle, int v) {
  if (spy__watching(p, SPY_FEAT_REGISTRY))
    spy__vslot_put(p, handle, SPY_VAL_BOOL, v != 0);
}
static inline void spy_value_set_vec2_at(spy_provider *p, int handle, double x,
                                         double y) {
  if (spy__watching(p, SPY_FEAT_REGISTRY))
    spy__value_set_vec_at(p, handle, x, y, 0, 0, 2);
}
static inline void spy_value_set_vec3_at(spy_provider *p, int handle, double x,
                                         double y, double z) {
  if (spy__watching(p, SPY_FEAT_REGISTRY))
    spy__value_set_vec_at(p, handle, x, y, z, 0, 3);
}
static inline void spy_value_set_vec4_at(spy_provider *p, int handle, double x,
                                         double y, double z, double w) {
  if (spy__watching(p, SPY_FEAT_REGISTRY))
    spy__value_set_vec_at(p, handle, x, y, z, w, 4);
}

/* ---- environment (any thread; diffed against what was last sent) ------ */

void spy_env_set_adapter(spy_provider *p, const char *adapter);
void spy_env_set_resolution(spy_provider *p, uint32_t width, uint32_t height,
                            double pixel_ratio);
void spy_env_set_debug_mode(spy_provider *p, const char *mode); /* "" = off */
/* Any other environment field, as a string. */
void spy_env_set(spy_provider *p, const char *key, const char *value);

/* ---- compiled out unless SPY_ENABLE ------------------------------------ */

#ifdef SPY_ENABLE
#define SPY_FRAME_BEGIN(p) spy_frame_begin(p)
#define SPY_FRAME_END(p) spy_frame_end(p)
#define SPY_FRAME_SKIP(p, why) spy_frame_skip((p), (why))
#define SPY_COUNTER_SET(p, c, v) spy_counter_set((p), (c), (v))
#define SPY_COUNTER_ADD(p, c, v) spy_counter_add((p), (c), (v))
#define SPY_GPU_ISSUED(p, id) spy_gpu_issued((p), (id))
#define SPY_GPU_RESOLVED(p, id, ms) spy_gpu_resolved((p), (id), (ms))
#define SPY_VALUE_F64(p, name, v) spy_value_set_f64((p), (name), (v))
#define SPY_VALUE_I64(p, name, v) spy_value_set_i64((p), (name), (v))
#define SPY_VALUE_BOOL(p, name, v) spy_value_set_bool((p), (name), (v))
#define SPY_VALUE_STR(p, name, v) spy_value_set_str((p), (name), (v))
#else
#define SPY_FRAME_BEGIN(p) ((void)0)
#define SPY_FRAME_END(p) ((void)0)
#define SPY_FRAME_SKIP(p, why) ((void)0)
#define SPY_COUNTER_SET(p, c, v) ((void)0)
#define SPY_COUNTER_ADD(p, c, v) ((void)0)
#define SPY_GPU_ISSUED(p, id) ((void)0)
#define SPY_GPU_RESOLVED(p, id, ms) ((void)0)
#define SPY_VALUE_F64(p, name, v) ((void)0)
#define SPY_VALUE_I64(p, name, v) ((void)0)
#define SPY_VALUE_BOOL(p, name, v) ((void)0)
#define SPY_VALUE_STR(p, name, v) ((void)0)
#endif

#ifdef __cplusplus
}
#endif
#endif
