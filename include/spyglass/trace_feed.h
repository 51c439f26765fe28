/* trace_feed.h — a provider's build feed: live progress of a traced build
 * for subscribers of SPY_FEAT_TRACE (the BUILD section, wire.h).
 *
 * A build tool that traces into a session (spyglass/trace.h) and also
 * creates a provider calls spy_trace_publish (in spyglass_store) once; the
 * session then hands each action to these calls, which aggregate it into
 * the current build's progress: modules done, hook calls and time per
 * plugin and hook, the slowest calls. The provider's service thread sends
 * the progress when it changed, at most SPY_TRACE_FEED_HZ times a second,
 * and whole once a second. While nobody subscribes to TRACE the gate word
 * is clear and the session calls nothing: nothing is collected.
 *
 * The calls take a short lock of the feed's own (the service holds it for
 * one copy of the progress), allocate nothing and make no system call;
 * any thread may call them. Part of the core library (libc + pthreads).
 */
#ifndef SPYGLASS_TRACE_FEED_H
#define SPYGLASS_TRACE_FEED_H

#include <stdint.h>

#include "spyglass/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPY_TRACE_FEED_HZ 6 /* progress sections per second at most */

/* Makes the provider's feed (once; later calls return the same) and
 * gives the word and mask that tell whether anyone subscribes: collect
 * only while (__atomic_load_n(word, __ATOMIC_RELAXED) & mask) != 0.
 * Returns 0, SPY_EINVAL (p NULL), SPY_ENOMEM. */
int spy_trace_feed_enable(spy_provider *p, const volatile uint64_t **word,
                          uint64_t *mask);
/* 1 while a subscriber wants TRACE (any thread). */
int spy_trace_feed_wanted(spy_provider *p);

/* The hooks (indexes of spy_build_hook_name in wire.h). */
enum {
  SPY_HOOK_TRANSFORM,
  SPY_HOOK_LOAD,
  SPY_HOOK_RESOLVE_ID,
  SPY_HOOK_RENDER_CHUNK
};

/* Feed calls: no-ops before spy_trace_feed_enable. `build` is the
 * session's build number of the action (0: none). ts_us is the action's
 * wall-clock time. A build begins fresh (its plugins and slowest calls
 * reset). A hook's end is matched to its start by call_id (a string);
 * an end without a start in the last 1024 open calls counts with no
 * duration. Strings are copied (cut to the wire's bounds).
 *
 * Late joiners: nothing is collected while nobody watches, so a watch
 * that begins while a build runs cannot know what came before. The first
 * action after such a start (or of a build whose start the feed did not
 * see) begins the build's record afresh with SPY_BUILD_PARTIAL set and
 * started_us = that action's time: a PARTIAL record's counts are exactly
 * the actions from started_us on, not the whole build's. */
void spy_trace_feed_build(spy_provider *p, uint32_t build, int ended,
                          uint64_t ts_us);
void spy_trace_feed_modules(spy_provider *p, uint32_t build, uint32_t total,
                            uint64_t ts_us);
void spy_trace_feed_hook_start(spy_provider *p, uint32_t build,
                               const char *call_id, uint64_t ts_us);
void spy_trace_feed_hook_end(spy_provider *p, uint32_t build, uint32_t hook,
                             const char *plugin, const char *call_id,
                             const char *module, uint64_t ts_us);
/* Any other action: counted only. */
void spy_trace_feed_other(spy_provider *p, uint32_t build, uint64_t ts_us);

typedef struct spy_trace_feed_stats {
  uint64_t taken;     /* actions collected (only while subscribed) */
  uint64_t sent;      /* BUILD sections posted */
  uint64_t dropped;   /* sections not sent (no buffer) */
  uint64_t unmatched; /* hook ends with no recorded start */
} spy_trace_feed_stats;
/* Counters so far (zeros before enable); any thread. */
void spy_trace_feed_get_stats(spy_provider *p, spy_trace_feed_stats *out);

#ifdef __cplusplus
}
#endif
#endif
