/* trace_state.c — a consumer's view of a traced build's live progress:
 * the BUILD sections (wire/trace.c) a provider's build feed sends. The
 * latest section is kept whole; when a new build number appears, or a
 * build is first seen ended, its summary goes into the history. */
#include <string.h>

#include "spyglass/consumer.h"

int spy__state_build_apply(spy_state *s, const spy_section *sec);

static void remember(spy_build_state *b, const spy_build_progress *p) {
  if (!p->build)
    return;
  if (b->n_done && b->done[b->n_done - 1].build == p->build)
    b->n_done--; /* the same build again (its end): replace */
  if (b->n_done == SPY_BUILD_HISTORY) {
    memmove(b->done, b->done + 1, (SPY_BUILD_HISTORY - 1) * sizeof *b->done);
    b->n_done--;
  }
  b->done[b->n_done++] = (spy_build_done){.build = p->build,
                                          .modules = p->modules_done,
                                          .started_us = p->started_us,
                                          .ended_us = p->ended_us,
                                          .hook_calls = p->hook_calls,
                                          .hook_us = p->hook_us};
}

int spy__state_build_apply(spy_state *s, const spy_section *sec) {
  spy_build_progress p;
  int rc = spy_get_build(sec, &p);
  if (rc < 0)
    return rc;
  spy_build_state *b = &s->builds;
  /* a build replaced before we saw its end: keep what we saw of it */
  if (b->cur.build && b->cur.build != p.build &&
      !(b->cur.flags & SPY_BUILD_ENDED))
    remember(b, &b->cur);
  if ((p.flags & SPY_BUILD_ENDED) &&
      !(b->cur.build == p.build && (b->cur.flags & SPY_BUILD_ENDED)))
    remember(b, &p);
  b->cur = p;
  b->sections++;
  return 0;
}
