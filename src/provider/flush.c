/* flush.c — one data frame per flush tick, encoded on the frame thread
 * straight into a pooled buffer and handed to the transport.
 *
 * The frame carries only what subscribers asked for and only what changed:
 * the samples since the last flush (always new), then the registry, the
 * environment and health as deltas. A snapshot request (new subscriber,
 * resync) makes every section whole; every checkpoint_ms the registry is
 * sent whole and marked as a checkpoint. While a subscriber wants the
 * message profile every frame also carries the latest summary the service
 * made (MSGPROF, msgprof.c), and while the transport is timed (its
 * profiler hook is set) the encode is timed into the buffer's encode_ns.
 * If the pool is empty the flush is dropped and counted; the samples stay
 * in the ring for the next tick.
 *
 * What the frames leave to the flush: the typed by-handle setters' pending
 * values (applied to the registry first), and the samples' raw ticks,
 * from which fps and cpu ms are derived here (spy__samples_derive) just
 * before the columns are copied.
 *
 * Why here and not on the worker: encoding the samples is a copy of the
 * columns this thread already owns; handing raw columns to the worker to
 * encode there would copy them twice. The frame is still encoded once.
 */
#include <string.h>

#include "platform/platform.h"
#include "provider/provider_internal.h"

static void put_health(spy_provider *p, spy_frame_writer *w) {
  spy_pool_stats ps;
  p->tr->ops->pool_stats(p->tr, &ps);
  uint64_t v[SPY_HEALTH_FIELD_COUNT] = {0};
  v[SPY_HEALTH_FRAMES_POSTED] = ps.posted;
  v[SPY_HEALTH_BYTES_POSTED] = ps.bytes_posted;
  v[SPY_HEALTH_FLUSHES_DROPPED] =
      atomic_load_explicit(&p->st_flushes_dropped, memory_order_relaxed);
  v[SPY_HEALTH_SAMPLES_DROPPED] =
      atomic_load_explicit(&p->st_samples_dropped, memory_order_relaxed);
  v[SPY_HEALTH_FRAMES_LOST] = ps.post_failed;
  v[SPY_HEALTH_SUBSCRIBERS] =
      atomic_load_explicit(&p->nsubs_pub, memory_order_relaxed);
  v[SPY_HEALTH_POOL_SMALL_FREE] = ps.free[SPY_TIER_SMALL];
  v[SPY_HEALTH_POOL_MEDIUM_FREE] = ps.free[SPY_TIER_MEDIUM];
  v[SPY_HEALTH_POOL_LARGE_FREE] = ps.free[SPY_TIER_LARGE];
  spy_put_health(w, v, SPY_HEALTH_FIELD_COUNT);
}

/* The environment fields the frame thread keeps itself, given to the
 * table only when they changed (the compare here is on one line of p). */
static void update_local_env(spy_provider *p) {
  uint64_t rss = atomic_load_explicit(&p->rss_bytes, memory_order_relaxed);
  uint64_t heap = atomic_load_explicit(&p->heap_bytes, memory_order_relaxed);
  int first = !p->env_local_set;
  spy_value v = {.kind = SPY_VAL_BOOL};
  if (first || p->skip_reason != p->env_skip_reason) {
    v.v.b = p->skip_reason == SPY_SKIP_PAUSED;
    spy__env_set_local(&p->env, 0, "paused", &v);
    v.v.b = p->skip_reason == SPY_SKIP_IDLE;
    spy__env_set_local(&p->env, 1, "idle", &v);
    p->env_skip_reason = p->skip_reason;
  }
  v.kind = SPY_VAL_UINT;
  if (rss && (first || rss != p->env_rss)) {
    v.v.u = rss;
    spy__env_set_local(&p->env, 2, "memory.rss_bytes", &v);
  }
  if (heap && (first || heap != p->env_heap)) {
    v.v.u = heap;
    spy__env_set_local(&p->env, 3, "memory.heap_bytes", &v);
  }
  p->env_rss = rss;
  p->env_heap = heap;
  p->env_local_set = 1;
}

/* The flush could not be sent: count it; a snapshot is still owed. */
static void drop(spy_provider *p, int snap) {
  atomic_fetch_add_explicit(&p->st_flushes_dropped, 1, memory_order_relaxed);
  if (snap)
    atomic_store(&p->snapshot_req, 1);
}

void spy__flush(spy_provider *p, uint64_t now, uint32_t f) {
  p->next_flush = now + p->flush_ticks;
  spy__registry_apply(&p->reg); /* the typed setters' pending values */
  if (!f)
    return;
  /* The latest profile summary, made by the service: no lock, no sort
   * here, never a wait. */
  const spy_msgprof_summary *prof =
      (f & SPY_FEAT_MSGPROF) ? spy__msgprof_take(p) : NULL;
  int snap =
      atomic_exchange_explicit(&p->snapshot_req, 0, memory_order_acq_rel) != 0;
  int checkpoint = (f & SPY_FEAT_REGISTRY) && now >= p->next_checkpoint;
  spy_buffer *b = spy_transport_acquire(p->tr, SPY_TIER_MEDIUM);
  if (!b) {
    drop(p, snap);
    return;
  }
  int timing = spy_transport_timed(p->tr);
  uint64_t t0 = timing ? spy__mono_ns() : 0;
  uint16_t flags = (uint16_t)((snap ? SPY_FRAME_SNAPSHOT : 0) |
                              (checkpoint ? SPY_FRAME_CHECKPOINT : 0));
  spy_frame_writer w;
  spy_frame_start(&w, b->data, b->cap, SPY_MSG_DATA, spy__wall_ms(), 0, flags);
  if ((f & SPY_FEAT_STATS) && p->ring_count) {
    spy__samples_derive(p);
    spy_stats_batch sb = {.start_frame = p->ring_start,
                          .count = p->ring_count,
                          .n_counters = (uint16_t)p->n_counters,
                          .fps_x10 = p->fps,
                          .cpu_x100 = p->cpu,
                          .gpu_x100 = p->gpu,
                          .counters = p->ctr,
                          .counter_stride = SPY_SAMPLE_RING};
    spy_put_stats(&w, &sb);
  }
  if ((f & SPY_FEAT_STATS) && snap) {
    const char *names[SPY_MAX_COUNTERS];
    for (uint32_t c = 0; c < p->n_counters; c++)
      names[c] = p->counter_names[c];
    spy_put_name_list(&w, SPY_SEC_STATS_SCHEMA, names, p->n_counters);
  }
  if (f & SPY_FEAT_REGISTRY) {
    spy__registry_encode(&p->reg, &w, snap || checkpoint);
    atomic_fetch_add_explicit(&p->st_registry_flushes, 1, memory_order_relaxed);
    if (checkpoint)
      p->next_checkpoint = now + p->checkpoint_ticks;
  }
  if (f & SPY_FEAT_ENV) {
    update_local_env(p);
    spy__env_encode(&p->env, &w, snap);
  }
  if (f & SPY_FEAT_BUFFERS)
    spy__buffers_encode(p, &w, snap);
  if (f & (SPY_FEAT_BATCHES | SPY_FEAT_PASSES))
    spy__drawlist_encode(p, &w, snap, f);
  if (f & SPY_FEAT_HEALTH) {
    put_health(p, &w);
    atomic_fetch_add_explicit(&p->st_health_flushes, 1, memory_order_relaxed);
  }
  if (prof)
    spy_put_msgprof(&w, prof);
  int len = spy_frame_finish(&w);
  if (len <= (int)SPY_FRAME_MIN) {
    /* Nothing to say (or it did not fit): the ping covers liveness. */
    p->tr->ops->release_unused(p->tr, b);
    if (len < 0)
      drop(p, snap);
    return;
  }
  if (timing)
    b->encode_ns = spy__mono_ns() - t0;
  if (p->ring_count && !(f & SPY_FEAT_STATS))
    spy__samples_derive(p); /* not encoded, but the next fps follows it */
  spy__samples_sent(p);
  if (spy_transport_post(p->tr, b, (size_t)len) == 0)
    atomic_fetch_add_explicit(&p->st_flushes, 1, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&p->st_flushes_dropped, 1, memory_order_relaxed);
}
