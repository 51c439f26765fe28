/* provider.c — creating and destroying a provider, and its frame-thread
 * work: the frame clock, per-frame samples, counters, GPU attribution and
 * named values (see provider.h; the state is in provider_internal.h).
 *
 * A sample is written once per frame into columnar rings of scaled
 * integers (fps ×10, cpu and gpu ms ×100, counters), SPY_SAMPLE_RING deep;
 * a full ring drops the newest sample and counts it. Samples are keyed by
 * the provider's frame counter.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/platform.h"
#include "provider/provider_internal.h"

/* The inline fast paths cast the provider to its hot part. */
_Static_assert(SPY_MAX_COUNTERS % 8 == 0, "frame_begin clears 8 at a time");
_Static_assert(offsetof(struct spy_provider, hot) == 0,
               "spy__provider_hot must be the provider's first member");

static const char *const builtin_counters[SPY_COUNTER_BUILTIN] = {
    "draws", "passes", "mips",      "objects",
    "fast",  "effect", "particles", "dirty"};

uint64_t spy__provider_wall_ms(void) { return spy__wall_ms(); }

static uint64_t ms_to_ticks(spy_provider *p, uint32_t ms) {
  return (uint64_t)((double)ms * 1e6 / p->ns_per_tick);
}

static void resolve_defaults(spy_provider_desc *d) {
  if (!d->registry_capacity)
    d->registry_capacity = 256;
  if (!d->string_max)
    d->string_max = 128;
  if (!d->ring_bytes)
    d->ring_bytes = 4u << 20;
  if (!d->flush_ms)
    d->flush_ms = 250;
  if (!d->idle_ping_ms)
    d->idle_ping_ms = 2000;
  if (!d->ack_grace_ms)
    d->ack_grace_ms = 3000;
  if (!d->checkpoint_ms)
    d->checkpoint_ms = 5000;
  if (!d->env_sample_ms)
    d->env_sample_ms = 250;
}

static void process_name(char *out, size_t cap) {
  out[0] = 0;
  FILE *f = fopen("/proc/self/comm", "r");
  if (f) {
    if (fgets(out, (int)cap, f))
      out[strcspn(out, "\n")] = 0;
    fclose(f);
  }
  if (!out[0])
    snprintf(out, cap, "pid-%d", (int)getpid());
}

int spy_provider_create(spy_provider **out, const spy_provider_desc *desc) {
  *out = NULL;
  spy_provider_desc d = desc ? *desc : (spy_provider_desc){0};
  resolve_defaults(&d);
  if (d.n_counters > SPY_MAX_COUNTERS - SPY_COUNTER_BUILTIN ||
      (d.n_counters && !d.counters) || d.kind > SPY_PROVIDER_SYSTEM ||
      d.string_max > 4096 || d.registry_capacity > 65536)
    return SPY_EINVAL;
  if (d.name && strlen(d.name) > SPY_NAME_MAX)
    return SPY_EINVAL;
  spy_provider *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
  if (!p)
    return SPY_ENOMEM;
  memset(p, 0, sizeof *p);
  spy__env_init(&p->env);
  p->desc = d;
  if (d.name)
    snprintf(p->name, sizeof p->name, "%s", d.name);
  else
    process_name(p->name, sizeof p->name);
  p->desc.name = p->name;
  p->desc.counters = NULL; /* copied below; not kept */
  p->id = spy__random_u64();
  p->start_ms = spy__wall_ms();
  spy__ticks_init();
  p->ns_per_tick = spy__ns_per_tick();
  p->flush_ticks = ms_to_ticks(p, d.flush_ms);
  p->checkpoint_ticks = ms_to_ticks(p, d.checkpoint_ms);
  p->service_ticks = ms_to_ticks(p, 5);
  p->gpu_last = SPY_GPU_NONE;
  spy__msgprof_init(p);
  if (spy__zones_init(p) < 0) {
    spy_provider_destroy(p);
    return SPY_ENOMEM;
  }
  p->n_counters = SPY_COUNTER_BUILTIN + d.n_counters;
  for (uint32_t c = 0; c < p->n_counters; c++) {
    const char *n = c < SPY_COUNTER_BUILTIN
                        ? builtin_counters[c]
                        : d.counters[c - SPY_COUNTER_BUILTIN];
    if (!n || !*n || strlen(n) > SPY_KEY_MAX) {
      spy_provider_destroy(p);
      return SPY_EINVAL;
    }
    snprintf(p->counter_names[c], sizeof p->counter_names[c], "%s", n);
  }
  p->rxcap = 64 * 1024;
  p->rxbuf = malloc(p->rxcap);
  /* Columns for n_counters rounded up to 8: frame_end copies eight at a
   * time (the extra columns are never encoded). */
  p->ctr = calloc((size_t)((p->n_counters + 7) & ~7u) * SPY_SAMPLE_RING,
                  sizeof *p->ctr);
  int rc = !p->rxbuf || !p->ctr
               ? SPY_ENOMEM
               : spy__registry_init(&p->reg, d.registry_capacity, d.string_max);
  if (rc == 0) { /* the typed by-handle setters' slots, read inline */
    p->hot.vslots = p->reg.slots;
    p->hot.vcap = d.registry_capacity;
  }
  char data_name[64];
  snprintf(data_name, sizeof data_name, SPY_DISCOVERY_CHANNEL ":%016llx",
           (unsigned long long)p->id);
  spy_channel_desc cd = {
      .name = SPY_DISCOVERY_CHANNEL, .ring_bytes = 256u << 10, .dir = d.dir};
  if (rc == 0)
    rc = spy_channel_open(&p->disc, &cd);
  cd.name = data_name;
  cd.ring_bytes = d.ring_bytes;
  if (rc == 0)
    rc = spy_channel_open(&p->data, &cd);
  /* Announce before the worker exists: the discovery channel then has a
   * single user at a time. */
  if (rc == 0)
    spy__announce(p, SPY_MSG_PROVIDER_ANNOUNCE);
  if (rc == 0) {
    spy_transport_desc td = {.kind = d.transport,
                             .channel = p->data,
                             .tick = spy__service,
                             .tick_ctx = p,
                             .simulate_worker_failure =
                                 d.simulate_worker_failure};
    rc = spy_transport_create(&p->tr, &td);
  }
  if (rc == 0 && d.listen)
    rc = spy__listen_start(p);
  if (rc < 0) {
    spy_provider_destroy(p);
    return rc;
  }
  p->last_post_ms = spy__mono_ns() / 1000000ull;
  p->tr_name = p->tr->ops->name;
  p->hot.inline_service = strcmp(p->tr->ops->name, "inline") == 0;
  atomic_store_explicit(&p->ready, 1, memory_order_release);
  spy__futex_wake((uint32_t *)&p->ready, 1);
  *out = p;
  return 0;
}

void spy_provider_destroy(spy_provider *p) {
  if (!p)
    return;
  if (p->tr)
    p->tr->ops->dispose(p->tr); /* joins the worker: no more service,
                                   no more posts through the hook */
  spy__clock_stop(p); /* after the service: cancels a sync being served */
  spy_profiler_destroy(p->prof); /* its transport is gone */
  if (p->disc)
    spy__announce(p, SPY_MSG_PROVIDER_GONE);
  spy__listen_stop(p);
  spy_channel_close(p->data);
  spy_channel_close(p->disc);
  for (int i = 0; i < p->nsubs; i++) {
    for (uint32_t k = 0; k < p->subs[i].n_names; k++)
      free(p->subs[i].names[k]);
    free(p->subs[i].names);
  }
  spy__zones_free(p); /* after the service: nobody drains any more */
  spy__buffers_free(p);
  spy__drawlist_free(p);
  spy__trace_feed_free(p);
  spy__registry_free(&p->reg);
  spy__env_free(&p->env);
  free(p->rxbuf);
  free(p->ctr);
  free(p);
}

uint64_t spy_provider_id(const spy_provider *p) { return p->id; }

void spy_provider_get_desc(const spy_provider *p, spy_provider_desc *out) {
  *out = p->desc;
}

const char *spy_provider_transport_name(const spy_provider *p) {
  return p->tr_name;
}

spy_transport *spy_provider_transport(spy_provider *p) { return p->tr; }

void spy_provider_get_stats(const spy_provider *p, spy_provider_stats *out) {
  spy_provider *q = (spy_provider *)p;
  out->frames = atomic_load(&q->st_frames);
  out->skipped = atomic_load(&q->st_skipped);
  out->samples_dropped = atomic_load(&q->st_samples_dropped);
  out->flushes = atomic_load(&q->st_flushes);
  out->flushes_dropped = atomic_load(&q->st_flushes_dropped);
  out->subscribers = atomic_load(&q->nsubs_pub);
  out->features = spy__features_now(q);
  out->stats_samples = atomic_load(&q->st_stats_samples);
  out->env_samples = atomic_load(&q->st_env_samples);
  out->registry_flushes = atomic_load(&q->st_registry_flushes);
  out->health_flushes = atomic_load(&q->st_health_flushes);
  out->msgprof_attached = atomic_load(&q->prof_on);
  out->clock_syncs = atomic_load(&q->st_clock_syncs);
  out->clock_failures = atomic_load(&q->st_clock_failures);
  out->gpu_unknown_ids = atomic_load(&q->st_gpu_unknown_ids);
  out->gpu_bad_durations = atomic_load(&q->st_gpu_bad_durations);
  out->gpu_resets = atomic_load(&q->st_gpu_resets);
  spy__zones_stats(p, out);
}

int spy_provider_flush(spy_provider *p) {
  uint64_t before = atomic_load(&p->st_flushes_dropped);
  spy__flush(p, spy__ticks(), spy__features_now(p));
  return atomic_load(&p->st_flushes_dropped) != before ? SPY_EPOOLEMPTY : 0;
}

int spy_counter_index(const spy_provider *p, const char *name) {
  for (uint32_t c = 0; c < p->n_counters; c++)
    if (strcmp(p->counter_names[c], name) == 0)
      return (int)c;
  return SPY_ENOENT;
}

/* ---- frame thread ------------------------------------------------------ */

/* Relaxed counters only the frame thread writes: no atomic RMW needed. */
#define BUMP(x)                                                                \
  atomic_store_explicit(&(x),                                                  \
                        atomic_load_explicit(&(x), memory_order_relaxed) + 1,  \
                        memory_order_relaxed)

/* The features this frame's begin saw watched. */
static inline uint32_t frame_features(const spy_provider *p) {
  return (uint32_t)p->hot.frame_watch;
}

void spy__frame_begin(spy_provider *p) {
  /* Pairs with the service's release of the watch word: what it set up
   * before publishing (filters, snapshot request) is visible from here. */
  atomic_thread_fence(memory_order_acquire);
  p->t_begin = spy__ticks();
  uint32_t period = (uint32_t)(p->hot.frame_watch >> 32);
  if (period != p->watch_seen) {
    /* Watched again after a while: no FPS across the unwatched gap, and
     * the first flush a full period from now. */
    p->watch_seen = period;
    p->have_prev = 0;
    p->next_flush = p->t_begin + p->flush_ticks;
  }
  /* Eight at a time, each a fixed-size clear the compiler inlines (a
   * plain loop became a memset call); the array holds SPY_MAX_COUNTERS, a
   * multiple of 8, and counters past n_counters are never read. */
  for (uint32_t c = 0, n = p->n_counters; c < n; c += 8)
    memset(&p->hot.counters[c], 0, 8 * sizeof p->hot.counters[0]);
  if (frame_features(p) & SPY_FEAT_ZONES)
    spy__zones_frame(p, p->frame_no, p->t_begin); /* splits the timeline */
}

static inline uint16_t ms_x100(double ms) {
  double v = ms * 100.0 + 0.5;
  if (!(v > 0)) /* NaN included: a cast of NaN would be undefined */
    return 0;
  return v >= 65534.0 ? 65534 : (uint16_t)v;
}

uint16_t spy__ms_x100(double ms) { return ms_x100(ms); }

void spy__samples_derive(spy_provider *p) {
  const double kf = 1e10 / p->ns_per_tick; /* fps ×10 = kf / ticks */
  const double kc = p->ns_per_tick * 1e-4; /* cpu ms ×100 per tick */
  int16_t *restrict fps = p->fps;
  uint16_t *restrict cpu = p->cpu;
  const int32_t *restrict dt = p->dt_t, *restrict ct = p->cpu_t;
  int16_t last = p->fps_before;
  for (uint32_t i = 0, n = p->ring_count; i < n; i++) {
    int32_t d = dt[i], c = ct[i];
    if (d > 0) {
      double q = kf / (double)d;
      last = q >= 32767 ? 32767 : (int16_t)(q + 0.5);
    } else if (d < 0) {
      last = (int16_t)(-1 - d); /* converted at its frame */
    }                           /* 0: no interval, the fps before repeats */
    fps[i] = last;
    double v = (double)c * kc + 0.5;
    cpu[i] = c < 0 ? (uint16_t)(-1 - c) : v >= 65534 ? 65534 : (uint16_t)v;
  }
}

void spy__samples_sent(spy_provider *p) {
  if (p->ring_count)
    p->fps_before = p->drop_fps_set ? p->drop_fps : p->fps[p->ring_count - 1];
  p->drop_fps_set = 0;
  p->ring_count = 0; /* the next sample sets ring_start */
}

/* A frame's interval or CPU time that does not fit its column (0 ticks,
 * or 2^31 and more): converted here, stored as -1 - the wire value. */
__attribute__((noinline)) static int32_t odd_fps(spy_provider *p, uint64_t dt) {
  double dt_ns = (double)dt * p->ns_per_tick;
  double fps = dt_ns > 0 ? 1e10 / dt_ns : 0; /* ×10 */
  return -1 - (fps >= 32767 ? 32767 : (int32_t)(fps + 0.5));
}
__attribute__((noinline)) static int32_t odd_cpu(spy_provider *p,
                                                 uint64_t ticks) {
  return -1 - (int32_t)ms_x100((double)ticks * p->ns_per_tick * 1e-6);
}

/* The ring is full and this frame's sample is dropped: its fps is still
 * what a next frame with no previous end repeats (as if it were kept). */
__attribute__((noinline)) static void drop_sample(spy_provider *p,
                                                  uint64_t now) {
  if (p->have_prev) {
    double dt_ns = (double)(now - p->t_prev_end) * p->ns_per_tick;
    double fps = dt_ns > 0 ? 1e10 / dt_ns : 0;
    p->drop_fps = fps >= 32767 ? 32767 : (int16_t)(fps + 0.5);
    p->drop_fps_set = 1;
  }
  BUMP(p->st_samples_dropped); /* full: the newest is dropped */
}

/* Frames before the ring fills at which its flush's memory is asked for
 * (prefetch_flush). */
#define FLUSH_PREFETCH_LEAD 8u

/* A few frames before the ring fills (and the flush runs): what the flush
 * reads and writes that no frame touches is fetched in the background —
 * the registry's pending slots, entries and encoded values, the derived
 * sample columns, the environment's and the statistics' lines — so the
 * flush does not wait for them one after another (each is touched once per
 * flush and is rarely still in cache by then). Prefetches only: no load,
 * no fault, nothing waited for. */
__attribute__((noinline)) static void prefetch_flush(spy_provider *p) {
  registry *r = &p->reg;
  uint32_t n = atomic_load_explicit(&r->count, memory_order_relaxed);
  if (n > 32)
    n = 32; /* a large registry: the first ones */
  for (uint32_t i = 0; i < n; i += 4)
    __builtin_prefetch(&r->slots[i], 1, 3);
  for (uint32_t i = 0; i < n; i++) {
    __builtin_prefetch(&r->e[i], 1, 3);
    __builtin_prefetch(r->arena + (size_t)i * r->slot_bytes, 1, 3);
  }
  for (uint32_t o = 0; o < sizeof p->fps; o += 64)
    __builtin_prefetch((const char *)p->fps + o, 1, 3);
  for (uint32_t o = 0; o < sizeof p->cpu; o += 64)
    __builtin_prefetch((const char *)p->cpu + o, 1, 3);
  __builtin_prefetch(&p->env.seq, 0, 3);
  __builtin_prefetch(&p->env.snap_seq, 1, 3);
  __builtin_prefetch(&p->snapshot_req, 1, 3);
  __builtin_prefetch(&p->st_flushes, 1, 3);
  __builtin_prefetch(&p->next_checkpoint, 1, 3);
  __builtin_prefetch(&p->tr, 0, 3);
  __builtin_prefetch(&p->env_local_set, 1, 3);
}

void spy__frame_end(spy_provider *p) {
  uint32_t f = frame_features(p);
  uint64_t now = 0;
  int ring_filled = 0;
  if (f) {
    /* This frame's begin was watched (frame_watch is its copy). */
    now = spy__ticks();
    if (f & SPY_FEAT_STATS) {
      uint32_t i = p->ring_count;
      if (i == 0)
        p->ring_start = p->frame_no; /* the batch's key */
      /* The ring's last slot taken: the flush comes now rather than at
       * its time (above ~960 frames/s a 250 ms flush would find the ring
       * overflowed). A flush that cannot be sent keeps the samples, and
       * only then are the newest dropped. */
      ring_filled = i + 1 == SPY_SAMPLE_RING;
      if (i == SPY_SAMPLE_RING - FLUSH_PREFETCH_LEAD)
        prefetch_flush(p);
      if (i < SPY_SAMPLE_RING) {
        /* Raw ticks only: fps and cpu ms are derived at the flush, off
         * this path (no conversion, no division per frame). */
        uint64_t cpu = now - p->t_begin;
        p->cpu_t[i] = cpu < INT32_MAX ? (int32_t)cpu : odd_cpu(p, cpu);
        int32_t d = 0; /* no previous end: the fps before repeats */
        if (p->have_prev) {
          uint64_t dt = now - p->t_prev_end;
          d = dt - 1 < INT32_MAX - 1 ? (int32_t)dt : odd_fps(p, dt);
        }
        p->dt_t[i] = d;
        p->gpu[i] = p->gpu_last;
        /* Locals (a store through ctr could alias any field of p, which
         * the loop would load again each time round), eight at a time:
         * the columns are allocated for n_counters rounded up to 8 and
         * the counters array holds SPY_MAX_COUNTERS, so a last partial
         * group copies zeros into columns nobody encodes. No tail loop,
         * and no vectorised loop with its alias checks (the empty asm
         * hides the column pointer's progression from the vectoriser; it
         * emits nothing): for the usual 8 counters, 8 loads and 8 stores. */
        uint32_t *col = p->ctr + i;
        const uint32_t *v = p->hot.counters;
        const uint32_t *v_end = v + p->n_counters;
        for (; v < v_end; v += 8, col += 8 * SPY_SAMPLE_RING) {
          __asm__("" : "+r"(col));
          col[0 * SPY_SAMPLE_RING] = v[0]; /* unrolled: -O2 does not */
          col[1 * SPY_SAMPLE_RING] = v[1];
          col[2 * SPY_SAMPLE_RING] = v[2];
          col[3 * SPY_SAMPLE_RING] = v[3];
          col[4 * SPY_SAMPLE_RING] = v[4];
          col[5 * SPY_SAMPLE_RING] = v[5];
          col[6 * SPY_SAMPLE_RING] = v[6];
          col[7 * SPY_SAMPLE_RING] = v[7];
        }
        p->ring_count = i + 1;
      } else {
        drop_sample(p, now);
      }
      BUMP(p->st_stats_samples);
    }
    p->t_prev_end = now;
    p->have_prev = 1;
    p->skip_reason = 0;
    p->frame_no++;
    BUMP(p->st_frames);
    if (now >= p->next_flush || ring_filled)
      spy__flush(p, now, f);
  }
  /* Inline transport: the frame thread also answers the channels: every
   * service_ticks while watched (the clock was read anyway), else every
   * 64th frame reads the clock to check. */
  if (p->hot.inline_service) {
    if (!f && --p->service_countdown > 0)
      return;
    p->service_countdown = 64;
    if (!now)
      now = spy__ticks();
    if (now >= p->next_service) {
      p->next_service = now + p->service_ticks;
      spy__service(p, 0);
    }
  }
}

void spy__frame_skip(spy_provider *p, int reason) {
  atomic_thread_fence(memory_order_acquire); /* as in frame_begin */
  /* Nothing measured; every value keeps its last reading. The frame
   * interval restarts, so the next FPS is not inflated by the pause. */
  uint32_t period = (uint32_t)(p->hot.frame_watch >> 32);
  uint64_t now = spy__ticks();
  if (period != p->watch_seen) {
    p->watch_seen = period;
    p->next_flush = now + p->flush_ticks;
  }
  p->skip_reason = (uint8_t)reason;
  p->have_prev = 0;
  BUMP(p->st_skipped);
  if (now >= p->next_flush)
    spy__flush(p, now, frame_features(p));
}

void spy__gpu_issued(spy_provider *p, uint64_t gpu_frame) {
  if (p->gpu_issued_any && gpu_frame < p->gpu_issued_max &&
      p->gpu_issued_max - gpu_frame > SPY_GPU_RESET_GAP) {
    /* Ids went far back: the device (or its timer queries) restarted.
     * What is still mapped belongs to the old numbering; the forward fill
     * keeps its last value until the new numbering resolves. */
    p->gmap_n = 0;
    p->gpu_newest = 0;
    p->gpu_any = 0;
    p->gpu_issued_max = gpu_frame;
    BUMP(p->st_gpu_resets);
  } else if (!p->gpu_issued_any || gpu_frame > p->gpu_issued_max) {
    p->gpu_issued_max = gpu_frame;
  }
  p->gpu_issued_any = 1;
  if (p->gmap_n == GPU_MAP_MAX) { /* never resolved: forget the oldest */
    memmove(p->gmap, p->gmap + 1, (GPU_MAP_MAX - 1) * sizeof p->gmap[0]);
    p->gmap_n--;
  }
  p->gmap[p->gmap_n].gpu_id = gpu_frame;
  p->gmap[p->gmap_n].frame = p->frame_no; /* the frame now in progress */
  p->gmap_n++;
}

void spy__gpu_resolved(spy_provider *p, uint64_t gpu_frame, double ms) {
  if (!(ms >= 0.0 && ms <= SPY_GPU_MS_MAX)) { /* NaN fails both */
    BUMP(p->st_gpu_bad_durations);
    return;
  }
  if (!p->gpu_issued_any || gpu_frame > p->gpu_issued_max) {
    /* Never issued: it would claim every pending frame and pin the
     * forward fill above every real id. */
    BUMP(p->st_gpu_unknown_ids);
    return;
  }
  uint16_t v = ms_x100(ms);
  uint32_t keep = 0;
  for (uint32_t i = 0; i < p->gmap_n; i++) {
    if (p->gmap[i].gpu_id <= gpu_frame) {
      uint64_t fr = p->gmap[i].frame;
      if (fr >= p->ring_start && fr < p->ring_start + p->ring_count)
        p->gpu[fr - p->ring_start] = v; /* not flushed yet: attribute */
    } else {
      p->gmap[keep++] = p->gmap[i];
    }
  }
  p->gmap_n = keep;
  /* Forward fill for frames still waiting, from the newest GPU frame seen:
   * a late answer for an older frame does not roll it back. */
  if (!p->gpu_any || gpu_frame >= p->gpu_newest) {
    p->gpu_newest = gpu_frame;
    p->gpu_last = v;
    p->gpu_any = 1;
  }
}

void spy_value_set_str(spy_provider *p, const char *name, const char *s) {
  if (!spy__watched(p) || !s)
    return;
  spy_value x = {.kind = SPY_VAL_STRING};
  x.v.s.ptr = s;
  x.v.s.len = (uint32_t)strnlen(s, SPY_STRING_MAX);
  spy__value_set(p, name, &x);
}

int spy_value_handle(spy_provider *p, const char *name) {
  return spy__registry_lookup(
      &p->reg, name, 1,
      atomic_load_explicit(&p->reg_all_wanted, memory_order_relaxed));
}

/* ---- environment setters (any thread) ---------------------------------- */

void spy_env_set_adapter(spy_provider *p, const char *adapter) {
  spy_env_set(p, "adapter", adapter);
}

void spy_env_set_resolution(spy_provider *p, uint32_t width, uint32_t height,
                            double pixel_ratio) {
  spy_value v = {.kind = SPY_VAL_UINT};
  v.v.u = width;
  spy__env_set(&p->env, "width", &v);
  v.v.u = height;
  spy__env_set(&p->env, "height", &v);
  v.kind = SPY_VAL_FLOAT;
  v.v.f[0] = pixel_ratio;
  spy__env_set(&p->env, "pixel_ratio", &v);
}

void spy_env_set_debug_mode(spy_provider *p, const char *mode) {
  spy_env_set(p, "debug_mode", mode ? mode : "");
}

void spy_env_set(spy_provider *p, const char *key, const char *value) {
  if (!key || !value)
    return;
  spy_value v = {.kind = SPY_VAL_STRING};
  v.v.s.ptr = value;
  v.v.s.len = (uint32_t)strnlen(value, ENV_STR_MAX);
  spy__env_set(&p->env, key, &v);
}
