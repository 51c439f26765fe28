/* rec_trace.c — a recording's build traces: when the provider's live
 * progress (the consumer state's builds, from BUILD sections) shows a
 * build ended, its totals, per-plugin hook time and slowest calls become
 * build, build_hook and hook_call rows (tables in rec_trace.h). A build
 * still running when the provider's recording ends (the recorder stops,
 * the provider goes away) is written as it stood then, with build.ended
 * 0 and no ended_us: its totals are not final, so `spyglass diff` leaves
 * it out. So does it a build the recorder joined after it began (partial
 * 1: the provider counted only what happened since). */
#include <stdlib.h>
#include <string.h>

#include "record/rec.h"
#include "record/rec_trace.h"

static void init(rec_row *r, int stmt, int64_t upid, uint32_t build) {
  memset(r, 0, sizeof *r);
  r->stmt = (uint8_t)stmt;
  cint(r, upid);
  cint(r, build);
}

/* The rows of build b (ended: 1 final, 0 still running). */
static void build_rows(const spy_build_progress *b, int64_t upid, int ended,
                       void (*emit)(void *ctx, rec_row *r), void *ctx) {
  rec_row r;
  init(&r, S_BUILD, upid, b->build);
  cint(&r, (int64_t)b->started_us);
  if (ended)
    cint(&r, (int64_t)b->ended_us);
  else
    r.c[r.n++].t = C_NULL;
  cint(&r, b->modules_done);
  cint(&r, (int64_t)b->hook_calls);
  cint(&r, (int64_t)b->hook_us);
  cint(&r, ended);
  cint(&r, (b->flags & SPY_BUILD_PARTIAL) ? 1 : 0);
  emit(ctx, &r);
  for (uint32_t i = 0; i < b->n_plugins; i++) {
    const spy_build_plugin *p = &b->plugins[i];
    for (uint32_t h = 0; h < SPY_BUILD_HOOKS; h++) {
      if (!p->calls[h])
        continue;
      init(&r, S_BUILD_HOOK, upid, b->build);
      ctext(&r, p->name);
      ctext(&r, spy_build_hook_name(h));
      cint(&r, (int64_t)p->calls[h]);
      cint(&r, (int64_t)p->total_us[h]);
      cint(&r, (int64_t)p->max_us);
      cint(&r, p->p50_us);
      emit(ctx, &r);
    }
  }
  for (uint32_t i = 0; i < b->n_slow; i++) {
    const spy_build_slow *s = &b->slow[i];
    init(&r, S_HOOK_CALL, upid, b->build);
    ctext(&r, b->plugins[s->plugin].name);
    ctext(&r, spy_build_hook_name(s->hook));
    ctext(&r, s->module);
    cint(&r, (int64_t)s->dur_us);
    emit(ctx, &r);
  }
}

/* A build this provider's progress shows that has not been written. */
static const spy_build_progress *unwritten(const spy_state *st,
                                           rec_trace_seen *seen) {
  const spy_build_progress *b = &st->builds.cur;
  if (seen->provider != st->provider.id) {
    seen->provider = st->provider.id;
    seen->build = 0;
  }
  return b->build && b->build != seen->build ? b : NULL;
}

void spy__rec_trace_build(const spy_state *st, int64_t upid,
                          rec_trace_seen *seen,
                          void (*emit)(void *ctx, rec_row *r), void *ctx) {
  const spy_build_progress *b = unwritten(st, seen);
  if (!b || !(b->flags & SPY_BUILD_ENDED))
    return;
  seen->build = b->build;
  build_rows(b, upid, 1, emit, ctx);
}

void spy__rec_trace_end(const spy_state *st, int64_t upid, rec_trace_seen *seen,
                        void (*emit)(void *ctx, rec_row *r), void *ctx) {
  const spy_build_progress *b = unwritten(st, seen);
  if (!b)
    return;
  seen->build = b->build;
  build_rows(b, upid, (b->flags & SPY_BUILD_ENDED) != 0, emit, ctx);
}
