/* service.c — the provider's side of the protocol: answering discovery,
 * keeping the subscriber list and its union, the heartbeat, and sampling
 * the environment. Runs as the offload worker's tick (or on the frame
 * thread at ticks with the inline transport); talks to the frame thread
 * only through atomics (see provider_internal.h).
 *
 *   provider:query          -> provider:announce (discovery channel)
 *   subscribe {features, registry filter, buffers}
 *                           -> subscribe:ack, snapshot on the next flush
 *   ack (every second)      keeps a subscriber; none for ack_grace_ms
 *                           drops it and what only it wanted
 *   ack from a consumer not subscribed (dropped, or refused when full)
 *                           -> ping naming it (PEER): it subscribes again
 *   resync                  -> snapshot on the next flush
 *   unsubscribe             drops it
 *   nothing posted for idle_ping_ms while subscribed -> ping
 *   clock request (a subscriber's)
 *                           -> a job for the clock thread (clocksrv.c);
 *                              clock ready once it has the segment open
 *   a subscriber that asked for a sync leaves -> its segment file removed
 *   SPY_FEAT_MSGPROF wanted / no longer -> the provider's profiler on /
 *                              off the transport's hook; summaries for the
 *                              frame thread meanwhile (msgprof.c)
 */
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/platform.h"
#include "provider/provider_internal.h"

static uint64_t mono_ms(void) { return spy__mono_ns() / 1000000ull; }

int spy__announce(spy_provider *p, uint32_t type) {
  uint8_t buf[512];
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, type, spy__wall_ms(), 0, 0);
  spy_provider_info info = {.id = p->id,
                            .start_ms = p->start_ms,
                            .pid = (uint32_t)getpid(),
                            .kind = (uint8_t)p->desc.kind,
                            .subscribers = (uint16_t)atomic_load(&p->nsubs_pub),
                            .name = p->name};
  spy_put_provider(&w, &info);
  int n = spy_frame_finish(&w);
  return n < 0 ? n : spy_channel_post(p->disc, buf, (size_t)n);
}

/* A control message on the data channel, through the transport so it is
 * sequenced with the data frames (and profiled with them). `clk` is the
 * CLOCK section of a clock message. */
static void post_ctl(spy_provider *p, uint32_t type, uint64_t peer,
                     uint32_t features, const spy_clock_msg *clk) {
  spy_buffer *b = spy_transport_acquire(p->tr, SPY_TIER_SMALL);
  if (!b)
    return; /* counted by the pool; the heartbeat retries */
  uint64_t t0 = spy_transport_timed(p->tr) ? spy__mono_ns() : 0;
  spy_frame_writer w;
  spy_frame_start(&w, b->data, b->cap, type, spy__wall_ms(), 0, 0);
  if (clk)
    spy_put_clock(&w, clk);
  else if (type != SPY_MSG_PING)
    spy_put_peer(&w, peer, features);
  else {
    spy_provider_info info = {.id = p->id,
                              .start_ms = p->start_ms,
                              .pid = (uint32_t)getpid(),
                              .kind = (uint8_t)p->desc.kind,
                              .subscribers = (uint16_t)p->nsubs,
                              .name = p->name};
    spy_put_provider(&w, &info);
    if (peer) /* "you are not subscribed": that consumer subscribes again */
      spy_put_peer(&w, peer, 0);
  }
  int n = spy_frame_finish(&w);
  if (t0)
    b->encode_ns = spy__mono_ns() - t0;
  if (n > 0)
    spy_transport_post(p->tr, b, (size_t)n);
  else
    p->tr->ops->release_unused(p->tr, b);
}

static void free_names(subscriber *s) {
  for (uint32_t k = 0; k < s->n_names; k++)
    free(s->names[k]);
  free(s->names);
  s->names = NULL;
  s->n_names = 0;
}

/* Publishes the union of every subscription to the frame thread: the
 * watch word, 0 for nobody, else (period << 32) | features, with a new
 * period each time watching starts from nobody (the service is its only
 * writer). */
static void recompute(spy_provider *p) {
  uint32_t f = 0;
  int all = 0;
  for (int i = 0; i < p->nsubs; i++) {
    f |= p->subs[i].features;
    if ((p->subs[i].features & SPY_FEAT_REGISTRY) && !p->subs[i].has_filter)
      all = 1;
  }
  uint64_t before = atomic_load_explicit(&p->hot.watch, memory_order_relaxed);
  if (f && !before)
    p->watch_period++;
  if ((f & SPY_FEAT_TRACE) && !(before & SPY_FEAT_TRACE))
    spy__trace_feed_watch_began(p); /* before the gate opens */
  atomic_store(&p->reg_all_wanted, all);
  atomic_store(&p->nsubs_pub, (uint32_t)p->nsubs);
  atomic_store_explicit(&p->hot.watch,
                        f ? ((uint64_t)p->watch_period << 32) | f : 0,
                        memory_order_release);
  p->filter_gen++;
}

/* Sets each registry entry's `wanted` from the filters (service thread;
 * entry names are immutable once published through reg.count). */
static void apply_filters(spy_provider *p) {
  uint32_t n = atomic_load_explicit(&p->reg.count, memory_order_acquire);
  if (p->filter_gen == p->filter_gen_applied && n == p->reg_seen)
    return;
  int all = atomic_load(&p->reg_all_wanted);
  for (uint32_t i = 0; i < n; i++) {
    int want = all;
    for (int s = 0; !want && s < p->nsubs; s++) {
      if (!(p->subs[s].features & SPY_FEAT_REGISTRY))
        continue;
      for (uint32_t k = 0; !want && k < p->subs[s].n_names; k++)
        want = strcmp(p->subs[s].names[k], p->reg.e[i].name) == 0;
    }
    atomic_store_explicit(&p->reg.e[i].wanted, (uint8_t)want,
                          memory_order_relaxed);
  }
  p->filter_gen_applied = p->filter_gen;
  p->reg_seen = n;
}

static int find_sub(spy_provider *p, uint64_t id) {
  for (int i = 0; i < p->nsubs; i++)
    if (p->subs[i].id == id)
      return i;
  return -1;
}

static void drop_sub(spy_provider *p, int i) {
  if (p->subs[i].clock_used) /* dead or gone: its segment must not stay */
    spy__clock_push(p, p->subs[i].id, 1);
  spy__buffers_unsubscribe(p, p->subs[i].id);
  free_names(&p->subs[i]);
  p->subs[i] = p->subs[p->nsubs - 1];
  memset(&p->subs[p->nsubs - 1], 0, sizeof p->subs[0]);
  p->nsubs--;
  recompute(p);
}

static void on_subscribe(spy_provider *p, const spy_section *s, uint64_t now) {
  spy_subscription sub;
  if (spy_get_subscription(s, &sub) < 0)
    return;
  int i = find_sub(p, sub.consumer);
  if (i < 0) {
    if (p->nsubs == MAX_SUBSCRIBERS)
      return; /* full: the consumer retries and sees no ack */
    i = p->nsubs++;
  }
  subscriber *x = &p->subs[i];
  free_names(x);
  x->id = sub.consumer;
  x->features = sub.features;
  x->last_ack_ms = now;
  x->has_filter = (sub.flags & SPY_SUB_REGISTRY_FILTER) != 0;
  if (sub.n_registry) {
    x->names = calloc(sub.n_registry, sizeof *x->names);
    const uint8_t *cur = NULL;
    const char *name;
    uint32_t len;
    while (x->names && spy_subscription_next_registry(&sub, &cur, &name, &len))
      if ((x->names[x->n_names] = strndup(name, len)))
        x->n_names++;
  }
  recompute(p);
  apply_filters(p);
  spy__buffers_subscribe(p, &sub);   /* its buffers map */
  atomic_store(&p->snapshot_req, 1); /* every collector starts whole */
  spy__zones_snapshot(p);
  post_ctl(p, SPY_MSG_SUBSCRIBE_ACK, sub.consumer, sub.features, NULL);
}

/* A subscriber asks for a clock sync: the clock thread serves it. */
static void on_clock(spy_provider *p, const spy_frame *f, uint64_t now) {
  spy_section s;
  spy_clock_msg m;
  if (!spy_frame_find_section(f, SPY_SEC_CLOCK, &s) ||
      spy_get_clock(&s, &m) < 0 || m.op != SPY_CLOCK_OP_REQUEST ||
      m.provider != p->id)
    return; /* results and other consumers' traffic */
  int i = find_sub(p, m.consumer);
  if (i < 0)
    return; /* subscribers only */
  p->subs[i].last_ack_ms = now;
  p->subs[i].clock_used = 1;
  spy__clock_push(p, m.consumer, 0); /* failed: the consumer times out */
}

/* READY for every segment the clock thread has opened since last tick. */
static void clock_ready(spy_provider *p) {
  uint64_t consumer;
  while (spy__clock_next_ready(p, &consumer)) {
    spy_clock_msg ready = {
        .op = SPY_CLOCK_OP_READY, .provider = p->id, .consumer = consumer};
    post_ctl(p, SPY_MSG_CLOCK, consumer, 0, &ready);
  }
}

static void on_data_msg(spy_provider *p, const uint8_t *buf, int n,
                        uint64_t now) {
  spy_frame f;
  if (spy_frame_decode(buf, (size_t)n, &f, NULL) < 0)
    return; /* malformed: ignored (the bus counted it as received) */
  spy_section s;
  if (f.type == SPY_MSG_SUBSCRIBE) {
    if (spy_frame_find_section(&f, SPY_SEC_SUBSCRIPTION, &s))
      on_subscribe(p, &s, now);
    return;
  }
  if (f.type == SPY_MSG_CLOCK) {
    on_clock(p, &f, now);
    return;
  }
  spy_peer_info peer;
  if (!spy_frame_find_section(&f, SPY_SEC_PEER, &s) ||
      spy_get_peer(&s, &peer) < 0)
    return;
  int i = find_sub(p, peer.id);
  switch (f.type) {
  case SPY_MSG_ACK:
    if (i >= 0)
      p->subs[i].last_ack_ms = now;
    else /* dropped (ack grace) or refused: tell it, it subscribes again */
      post_ctl(p, SPY_MSG_PING, peer.id, 0, NULL);
    break;
  case SPY_MSG_RESYNC:
    if (i >= 0) {
      p->subs[i].last_ack_ms = now;
      atomic_store(&p->snapshot_req, 1);
      spy__zones_snapshot(p);
      spy__buffers_keyframe(p, peer.id); /* its streams restart on a key */
    }
    break;
  case SPY_MSG_UNSUBSCRIBE:
    if (i >= 0)
      drop_sub(p, i);
    break;
  case SPY_MSG_BUFFER_PROBE: { /* buffers.c: a pixel's source value */
    uint32_t nq;
    const uint8_t *cur = NULL;
    spy_probe q;
    if (i >= 0 && spy_frame_find_section(&f, SPY_SEC_PROBE, &s) &&
        spy_get_probe(&s, &nq) == 0)
      while (spy_probe_next(&s, &cur, &q))
        spy__buffers_probe(p, peer.id, &q);
    break;
  }
  default: break;
  }
}

static void sample_memory(spy_provider *p) {
  /* open/read/close: no allocation, unlike stdio. */
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char b[128];
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n > 0) {
      b[n] = 0;
      char *sp = strchr(b, ' ');
      if (sp)
        atomic_store(&p->rss_bytes, strtoull(sp + 1, NULL, 10) *
                                        (uint64_t)sysconf(_SC_PAGESIZE));
    }
  }
  struct mallinfo2 mi = mallinfo2();
  atomic_store(&p->heap_bytes, (uint64_t)mi.uordblks);
  atomic_fetch_add_explicit(&p->st_env_samples, 1, memory_order_relaxed);
}

static void timers(spy_provider *p, uint64_t now) {
  for (int i = 0; i < p->nsubs;) {
    if (now - p->subs[i].last_ack_ms > p->desc.ack_grace_ms)
      drop_sub(p, i); /* silent consumer: dead or gone */
    else
      i++;
  }
  apply_filters(p);
  spy_pool_stats ps;
  p->tr->ops->pool_stats(p->tr, &ps);
  if (ps.posted != p->last_posted) {
    p->last_posted = ps.posted;
    p->last_post_ms = now;
  } else if (p->nsubs && now - p->last_post_ms >= p->desc.idle_ping_ms) {
    post_ctl(p, SPY_MSG_PING, 0, 0, NULL);
    p->last_post_ms = now;
  }
  if ((spy__features_now(p) & SPY_FEAT_ENV) && now >= p->next_env_ms) {
    sample_memory(p);
    p->next_env_ms = now + p->desc.env_sample_ms;
  }
}

void spy__service(void *ctx, int wait_ms) {
  spy_provider *p = ctx;
  if (!atomic_load_explicit(&p->ready, memory_order_acquire)) {
    spy__futex_wait((uint32_t *)&p->ready, 0, 1000000); /* create not done */
    return;
  }
  /* With nobody subscribed there is no flush to pick up: sleep longer.
   * Subscribed, but no frame measured (or skipped) since the last wait:
   * the frame thread is idle and no flush is due soon, so longer too
   * (50 ms: a flush from a frame thread that resumes waits at most that
   * for its post; the next wait is short again). Messages wake the wait
   * early either way. */
  if (!p->nsubs && wait_ms > 0) {
    wait_ms = 100;
  } else if (wait_ms > 0 && wait_ms < 50) {
    uint64_t fr = atomic_load_explicit(&p->st_frames, memory_order_relaxed) +
                  atomic_load_explicit(&p->st_skipped, memory_order_relaxed);
    if (fr == p->frames_seen)
      wait_ms = 50;
    p->frames_seen = fr;
  }
  wait_ms = spy__zones_wait_ms(p, wait_ms);
  int got = spy_channel_recv(p->data, p->rxbuf, p->rxcap, wait_ms, NULL);
  for (int k = 0; got != SPY_EAGAIN && k < 64; k++) {
    if (got > 0)
      on_data_msg(p, p->rxbuf, got, mono_ms());
    got = spy_channel_recv(p->data, p->rxbuf, p->rxcap, 0, NULL);
  }
  for (int k = 0; k < 64; k++) {
    got = spy_channel_recv(p->disc, p->rxbuf, p->rxcap, 0, NULL);
    if (got == SPY_EAGAIN)
      break;
    spy_frame f;
    if (got > 0 && spy_frame_decode(p->rxbuf, (size_t)got, &f, NULL) == 0 &&
        f.type == SPY_MSG_PROVIDER_QUERY)
      spy__announce(p, SPY_MSG_PROVIDER_ANNOUNCE);
  }
  if (spy_channel_recreated(p->disc)) /* the runtime directory was lost */
    spy__announce(p, SPY_MSG_PROVIDER_ANNOUNCE);
  uint64_t now = mono_ms();
  timers(p, now);
  clock_ready(p);
  spy__msgprof_tick(p, now);
  spy__zones_service(p); /* CPU zones: drain the threads' rings */
  spy__buffers_service(p);
  spy__drawlist_service(p);
  spy__trace_feed_service(p); /* build progress for TRACE subscribers */
}
