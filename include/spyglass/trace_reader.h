/* trace_reader.h — questions about a recorded session's hook calls that
 * the store answers itself: only the calls of one build, plugin or module,
 * in the order asked for, at most N of them (`spyglass trace hooks
 * --slowest N`). The reader and spy_trace_hook_call are trace.h's; this
 * header adds the query beside spy_trace_reader_hook_calls.
 *
 * A SQLite store of schema 6 or later answers with one query over its
 * hook_calls table (filter, ORDER BY, LIMIT); every other store (JSON-lines,
 * PostgreSQL, older SQLite stores) is replayed action by action, the filter
 * applied as each call ends and, with a limit, only the best `limit` calls
 * kept (a bounded heap): memory grows with the limit and the calls in
 * flight, not with the session. The answer is the same from every store
 * holding the same session. */
#ifndef SPYGLASS_TRACE_READER_H
#define SPYGLASS_TRACE_READER_H

#include <stdint.h>

#include "spyglass/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The order calls are reported in. Every order is total, so the answer
 * (and which calls a limit keeps) is the same from every store. */
typedef enum spy_trace_call_order {
  /* as the calls ended (spy_trace_reader_hook_calls's order) */
  SPY_TRACE_CALLS_ENDED = 0,
  /* as they started: started_us, ties by the Start action's seq */
  SPY_TRACE_CALLS_STARTED,
  /* longest first: ended_us - started_us (0 when negative) descending,
   * ties in start order as above */
  SPY_TRACE_CALLS_SLOWEST,
} spy_trace_call_order;

/* Which calls, in which order, how many. All zero: every ended call, in
 * the order they ended. The strings are the caller's, read during the
 * call only. */
typedef struct spy_trace_call_query {
  uint32_t build;             /* only this build's calls; 0: every build */
  const char *plugin;         /* only this plugin's; NULL: every plugin */
  const char *module;         /* only calls on this module (or request; ""
                                 matches render_chunk's); NULL: any */
  spy_trace_call_order order; /* default SPY_TRACE_CALLS_ENDED */
  uint64_t limit;             /* at most this many, the first in `order`;
                                 0: no limit */
} spy_trace_call_query;

/* Calls cb once per hook call of the session that matches q, in q's order,
 * at most q->limit times (return nonzero from cb to stop early). q NULL is
 * the all-zero query. The call's strings are valid during cb only. A call
 * that never ended is not reported. Returns 0, SPY_EINVAL (r NULL, an
 * unknown order), SPY_ENOMEM or another negative code with the reader's
 * error set (spy_trace_reader_error). Not thread-safe on one reader; it
 * moves the reader's position (rewind before spy_trace_reader_next). */
int spy_trace_reader_hook_calls_query(
    spy_trace_reader *r, const spy_trace_call_query *q,
    int (*cb)(void *, const spy_trace_hook_call *), void *arg);

#ifdef __cplusplus
}
#endif

#endif
