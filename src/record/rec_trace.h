/* rec_trace.h — build traces in a recording (rec_trace.c): the tables a
 * provider's live build progress (BUILD sections, SPY_FEAT_TRACE) becomes,
 * their statements, and the per-source hook the recorder calls. */
#ifndef SPY_REC_TRACE_H
#define SPY_REC_TRACE_H

#include <stdint.h>

#include "spyglass/consumer.h"

/* Tables: one build row per build seen ended (ended 1), or still running
 * when the provider's recording ended (ended 0, ended_us NULL: totals so
 * far); partial 1 when the recorder joined after the build began (its
 * counts are those since started_us, not the whole build's); build_hook:
 * per build,
 * plugin and hook its calls, total and slowest time (µs), and the
 * plugin's median call (all its hooks); hook_call: the
 * build's slowest calls (the provider keeps SPY_BUILD_SLOW_MAX). */
#define SPY_REC_TRACE_DDL                                                      \
  "CREATE TABLE IF NOT EXISTS build(recording_id BIGINT NOT NULL,"             \
  " upid BIGINT, build BIGINT, started_us BIGINT, ended_us BIGINT,"            \
  " modules BIGINT, hook_calls BIGINT, hook_us BIGINT, ended BIGINT,"          \
  " partial BIGINT);\n"                                                        \
  "CREATE TABLE IF NOT EXISTS build_hook(recording_id BIGINT NOT NULL,"        \
  " upid BIGINT, build BIGINT, plugin TEXT, hook TEXT, calls BIGINT,"          \
  " total_us BIGINT, max_us BIGINT, plugin_p50_us BIGINT);\n"                  \
  "CREATE TABLE IF NOT EXISTS hook_call(recording_id BIGINT NOT NULL,"         \
  " upid BIGINT, build BIGINT, plugin TEXT, hook TEXT, module TEXT,"           \
  " dur_us BIGINT);\n"
#define SPY_REC_SQL_BUILD                                                      \
  "INSERT INTO build(recording_id, upid, build, started_us, ended_us,"         \
  " modules, hook_calls, hook_us, ended, partial)"                             \
  " VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)"
#define SPY_REC_SQL_BUILD_HOOK                                                 \
  "INSERT INTO build_hook(recording_id, upid, build, plugin, hook, calls,"     \
  " total_us, max_us, plugin_p50_us) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9)"
#define SPY_REC_SQL_HOOK_CALL                                                  \
  "INSERT INTO hook_call(recording_id, upid, build, plugin, hook, module,"     \
  " dur_us) VALUES($1,$2,$3,$4,$5,$6,$7)"

struct rec_row;
/* What a source has recorded of its builds. Zero-initialise. */
typedef struct rec_trace_seen {
  uint64_t provider; /* whose builds (a new provider numbers from 1) */
  uint32_t build;    /* the last build written */
} rec_trace_seen;
/* After a frame with a BUILD section was applied to st: a build seen
 * ended for the first time becomes its rows, each handed to emit (which
 * takes ownership of the row's text). */
void spy__rec_trace_build(const spy_state *st, int64_t upid,
                          rec_trace_seen *seen,
                          void (*emit)(void *ctx, struct rec_row *r),
                          void *ctx);
/* The provider's recording ends: a build not written yet (still running)
 * becomes its rows with ended 0. */
void spy__rec_trace_end(const spy_state *st, int64_t upid, rec_trace_seen *seen,
                        void (*emit)(void *ctx, struct rec_row *r), void *ctx);

#endif
