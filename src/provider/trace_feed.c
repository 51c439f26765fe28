/* trace_feed.c — the provider's build feed: aggregates a trace session's
 * actions (handed over by the store's bus tap, src/store/bus_tap.c) into
 * the current build's progress and sends it as a BUILD section
 * (wire/trace.c) to TRACE subscribers, throttled.
 *
 * Why aggregate here and not stream every action: a bundler emits tens of
 * thousands of hook calls per second, each with its source; subscribers
 * want progress (what runs, how far, which plugin is slow), a few times a
 * second. So the emitting thread folds each action into fixed tables
 * under a short lock (no allocation, no system call) and the service
 * thread copies them out at most SPY_TRACE_FEED_HZ times a second, only
 * when something changed (and whole once a second, for subscribers that
 * came in since). Nobody subscribed: the session's tap sees the gate word
 * clear and calls nothing here.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "provider/provider_internal.h"
#include "spyglass/trace_feed.h"

#define OPEN_SLOTS 1024u /* open hook calls remembered, a power of two */
#define PROBE 8u
/* Call durations per plugin: 8 buckets per octave (exact below 8 µs),
 * durations cut at 2^34 µs; the median is read from it (±6 %). */
#define HBUCKETS 264u
#define HMAX_US (1ull << 34)

static uint32_t bucket_of(uint64_t v) {
  if (v >= HMAX_US)
    v = HMAX_US - 1;
  if (v < 8)
    return (uint32_t)v;
  uint32_t e = 63u - (uint32_t)__builtin_clzll(v); /* >= 3 */
  return (e - 2u) * 8u + (uint32_t)((v >> (e - 3u)) & 7u);
}
/* The middle of a bucket. */
static uint64_t bucket_mid(uint32_t b) {
  if (b < 8)
    return b;
  uint32_t e = b / 8u + 2u, sub = b % 8u;
  uint64_t w = 1ull << (e - 3u);
  return ((8ull + sub) << (e - 3u)) + w / 2;
}

typedef struct open_call {
  uint64_t h; /* call id hash; 0 = free */
  uint64_t start_us;
} open_call;

struct spy__trace_feed {
  pthread_mutex_t mu;
  spy_build_progress cur; /* under mu */
  uint64_t version;       /* under mu: bumped by each change */
  open_call open[OPEN_SLOTS];
  uint32_t hist[SPY_BUILD_PLUGINS_MAX][HBUCKETS]; /* under mu, per plugin */
  _Atomic uint64_t taken, sent, dropped, unmatched;
  /* Watch periods: bumped (service thread) each time TRACE becomes wanted
   * after it was not; the feed calls compare it with the period the
   * current record was collected in (under mu). */
  _Atomic uint32_t period;
  uint32_t cur_period; /* under mu */
  /* service thread only */
  uint64_t sent_version, last_ms, last_full_ms;
  spy_build_progress out;
};

static uint64_t hash_id(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; s && *s; s++)
    h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h ? h : 1;
}

static struct spy__trace_feed *feed_of(spy_provider *p) {
  return p ? atomic_load_explicit(&p->trace_feed, memory_order_acquire) : NULL;
}

static void count(_Atomic uint64_t *c) {
  atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

int spy_trace_feed_enable(spy_provider *p, const volatile uint64_t **word,
                          uint64_t *mask) {
  if (!p)
    return SPY_EINVAL;
  if (!feed_of(p)) {
    struct spy__trace_feed *f = calloc(1, sizeof *f);
    if (!f)
      return SPY_ENOMEM;
    pthread_mutex_init(&f->mu, NULL);
    struct spy__trace_feed *none = NULL;
    if (!atomic_compare_exchange_strong(&p->trace_feed, &none, f)) {
      pthread_mutex_destroy(&f->mu);
      free(f);
    }
  }
  if (word)
    *word = (const volatile uint64_t *)(const void *)&p->hot.watch;
  if (mask)
    *mask = SPY_FEAT_TRACE;
  return 0;
}

int spy_trace_feed_wanted(spy_provider *p) {
  return p && (spy__features_now(p) & SPY_FEAT_TRACE) != 0;
}

/* A fresh record for `build` (under mu); the actions count goes on. */
static void fresh(struct spy__trace_feed *f, uint32_t build, uint32_t flags,
                  uint64_t ts_us) {
  spy_build_progress *b = &f->cur;
  uint64_t actions = b->actions;
  memset(b, 0, sizeof *b);
  b->actions = actions;
  b->build = build;
  b->flags = flags;
  b->started_us = ts_us;
  memset(f->open, 0, sizeof f->open);
  memset(f->hist, 0, sizeof f->hist);
}

/* The record an action of `build` goes into (under mu). Collection runs
 * only while someone watches, so a watch that began after the build did
 * sees only part of it: when the feed saw no start of this build, or this
 * is the first action since a watch began while the build ran (the
 * actions in between were not handed over), the record starts afresh
 * here, flagged SPY_BUILD_PARTIAL, with started_us = this action's time:
 * its counts are exactly the actions from then on. */
static spy_build_progress *enter(struct spy__trace_feed *f, uint32_t build,
                                 uint64_t ts_us) {
  spy_build_progress *b = &f->cur;
  uint32_t period = atomic_load_explicit(&f->period, memory_order_relaxed);
  int new_watch = period != f->cur_period;
  f->cur_period = period;
  if (build &&
      (build != b->build || (new_watch && !(b->flags & SPY_BUILD_ENDED))))
    fresh(f, build, SPY_BUILD_PARTIAL, ts_us);
  return b;
}

void spy_trace_feed_build(spy_provider *p, uint32_t build, int ended,
                          uint64_t ts_us) {
  struct spy__trace_feed *f = feed_of(p);
  if (!f)
    return;
  count(&f->taken);
  pthread_mutex_lock(&f->mu);
  spy_build_progress *b = &f->cur;
  if (!ended) {
    f->cur_period = atomic_load_explicit(&f->period, memory_order_relaxed);
    fresh(f, build, 0, ts_us); /* seen from its start: whole */
  } else {
    b = enter(f, build, ts_us);
    if (b->build == build) {
      b->flags |= SPY_BUILD_ENDED;
      b->ended_us = ts_us;
    }
  }
  b->actions++;
  f->version++;
  pthread_mutex_unlock(&f->mu);
}

void spy_trace_feed_modules(spy_provider *p, uint32_t build, uint32_t total,
                            uint64_t ts_us) {
  struct spy__trace_feed *f = feed_of(p);
  if (!f)
    return;
  count(&f->taken);
  pthread_mutex_lock(&f->mu);
  spy_build_progress *b = enter(f, build, ts_us);
  b->modules_total = total;
  b->actions++;
  f->version++;
  pthread_mutex_unlock(&f->mu);
}

void spy_trace_feed_other(spy_provider *p, uint32_t build, uint64_t ts_us) {
  struct spy__trace_feed *f = feed_of(p);
  if (!f)
    return;
  count(&f->taken);
  pthread_mutex_lock(&f->mu);
  enter(f, build, ts_us)->actions++;
  pthread_mutex_unlock(&f->mu);
}

void spy_trace_feed_hook_start(spy_provider *p, uint32_t build,
                               const char *call_id, uint64_t ts_us) {
  struct spy__trace_feed *f = feed_of(p);
  if (!f)
    return;
  count(&f->taken);
  uint64_t h = hash_id(call_id);
  pthread_mutex_lock(&f->mu);
  enter(f, build, ts_us)->actions++;
  for (uint32_t k = 0; k < PROBE; k++) {
    open_call *o = &f->open[(h + k) & (OPEN_SLOTS - 1)];
    if (!o->h || o->h == h) {
      o->h = h;
      o->start_us = ts_us;
      break;
    }
  } /* all taken: its end counts without a duration */
  pthread_mutex_unlock(&f->mu);
}

/* The plugin's entry (under mu): found by name, else the next free one,
 * else the last (other plugins are folded into it). */
static uint32_t plugin_at(spy_build_progress *b, const char *name) {
  if (!name)
    name = "";
  for (uint32_t i = 0; i < b->n_plugins; i++)
    if (strncmp(b->plugins[i].name, name, SPY_BUILD_NAME_MAX) == 0)
      return i;
  if (b->n_plugins < SPY_BUILD_PLUGINS_MAX) {
    uint32_t i = b->n_plugins++;
    memset(&b->plugins[i], 0, sizeof b->plugins[i]);
    size_t n = strnlen(name, SPY_BUILD_NAME_MAX);
    memcpy(b->plugins[i].name, name, n);
    return i;
  }
  spy_build_plugin *last = &b->plugins[SPY_BUILD_PLUGINS_MAX - 1];
  memcpy(last->name, "(other)", 8);
  return SPY_BUILD_PLUGINS_MAX - 1;
}

/* Keeps the SPY_BUILD_SLOW_MAX slowest calls, slowest first (under mu). */
static void note_slow(spy_build_progress *b, uint32_t hook, uint32_t plugin,
                      const char *module, uint64_t dur) {
  uint32_t n = b->n_slow;
  if (n == SPY_BUILD_SLOW_MAX && b->slow[n - 1].dur_us >= dur)
    return;
  uint32_t at = n < SPY_BUILD_SLOW_MAX ? n : n - 1;
  while (at > 0 && b->slow[at - 1].dur_us < dur) {
    b->slow[at] = b->slow[at - 1];
    at--;
  }
  if (n < SPY_BUILD_SLOW_MAX)
    b->n_slow++;
  spy_build_slow *s = &b->slow[at];
  s->hook = (uint8_t)hook;
  s->plugin = (uint16_t)plugin;
  s->dur_us = dur;
  size_t len = module ? strnlen(module, SPY_BUILD_MODULE_MAX) : 0;
  memcpy(s->module, module ? module : "", len);
  s->module[len] = 0;
}

void spy_trace_feed_hook_end(spy_provider *p, uint32_t build, uint32_t hook,
                             const char *plugin, const char *call_id,
                             const char *module, uint64_t ts_us) {
  struct spy__trace_feed *f = feed_of(p);
  if (!f || hook >= SPY_BUILD_HOOKS)
    return;
  count(&f->taken);
  uint64_t h = hash_id(call_id);
  pthread_mutex_lock(&f->mu);
  spy_build_progress *b = enter(f, build, ts_us);
  b->actions++;
  int have = 0;
  uint64_t dur = 0;
  for (uint32_t k = 0; k < PROBE; k++) {
    open_call *o = &f->open[(h + k) & (OPEN_SLOTS - 1)];
    if (o->h == h) {
      dur = ts_us > o->start_us ? ts_us - o->start_us : 0;
      o->h = 0;
      have = 1;
      break;
    }
  }
  uint32_t i = plugin_at(b, plugin);
  spy_build_plugin *pl = &b->plugins[i];
  pl->calls[hook]++;
  pl->total_us[hook] += dur;
  if (dur > pl->max_us)
    pl->max_us = dur;
  if (have)
    f->hist[i][bucket_of(dur)]++;
  b->hook_calls++;
  b->hook_us += dur;
  if (hook == SPY_HOOK_LOAD)
    b->modules_done++;
  if (have)
    note_slow(b, hook, i, module, dur);
  f->version++;
  pthread_mutex_unlock(&f->mu);
  if (!have)
    count(&f->unmatched);
}

void spy_trace_feed_get_stats(spy_provider *p, spy_trace_feed_stats *out) {
  memset(out, 0, sizeof *out);
  struct spy__trace_feed *f = feed_of(p);
  if (!f)
    return;
  out->taken = atomic_load_explicit(&f->taken, memory_order_relaxed);
  out->sent = atomic_load_explicit(&f->sent, memory_order_relaxed);
  out->dropped = atomic_load_explicit(&f->dropped, memory_order_relaxed);
  out->unmatched = atomic_load_explicit(&f->unmatched, memory_order_relaxed);
}

void spy__trace_feed_watch_began(spy_provider *p) {
  struct spy__trace_feed *f = feed_of(p);
  if (!f)
    return;
  atomic_fetch_add_explicit(&f->period, 1, memory_order_relaxed);
  /* A build still open in the record went on unwatched: what it holds is
   * not the whole of it (its next action starts it afresh; if none comes,
   * the build may have ended unseen). */
  pthread_mutex_lock(&f->mu);
  if (f->cur.build && !(f->cur.flags & SPY_BUILD_ENDED)) {
    f->cur.flags |= SPY_BUILD_PARTIAL;
    f->version++;
  }
  pthread_mutex_unlock(&f->mu);
}

void spy__trace_feed_service(spy_provider *p) {
  struct spy__trace_feed *f = feed_of(p);
  if (!f || !(spy__features_now(p) & SPY_FEAT_TRACE))
    return;
  uint64_t now = spy__mono_ns() / 1000000ull;
  if (now - f->last_ms < 1000u / SPY_TRACE_FEED_HZ)
    return;
  int full = now - f->last_full_ms >= 1000;
  pthread_mutex_lock(&f->mu);
  uint64_t v = f->version;
  int changed = v != f->sent_version;
  if (changed || full) {
    f->out = f->cur;
    for (uint32_t i = 0; i < f->out.n_plugins; i++) {
      uint64_t n = 0, seen = 0;
      for (uint32_t k = 0; k < HBUCKETS; k++)
        n += f->hist[i][k];
      uint32_t k = 0;
      for (; n && k < HBUCKETS; k++)
        if ((seen += f->hist[i][k]) * 2 >= n)
          break;
      uint64_t mid = n ? bucket_mid(k) : 0;
      f->out.plugins[i].p50_us = mid > UINT32_MAX ? UINT32_MAX : (uint32_t)mid;
    }
  }
  pthread_mutex_unlock(&f->mu);
  if (!changed && !full)
    return;
  if (!f->out.build && !changed)
    return; /* no build yet: nothing to say */
  spy_buffer *buf = spy_transport_acquire(p->tr, SPY_TIER_MEDIUM);
  if (!buf) {
    count(&f->dropped); /* the next tick tries again */
    return;
  }
  spy_frame_writer w;
  spy_frame_start(&w, buf->data, buf->cap, SPY_MSG_DATA, spy__wall_ms(), 0, 0);
  spy_put_build(&w, &f->out);
  int len = spy_frame_finish(&w);
  if (len <= (int)SPY_FRAME_MIN) {
    p->tr->ops->release_unused(p->tr, buf);
    count(&f->dropped);
    return;
  }
  f->last_ms = now;
  f->last_full_ms = now;
  f->sent_version = v;
  if (spy_transport_post(p->tr, buf, (size_t)len) == 0)
    count(&f->sent);
  else
    count(&f->dropped);
}

void spy__trace_feed_free(spy_provider *p) {
  struct spy__trace_feed *f = atomic_load(&p->trace_feed);
  if (!f)
    return;
  pthread_mutex_destroy(&f->mu);
  free(f);
  atomic_store(&p->trace_feed, NULL);
}
