/* attach.c — measuring every post through a transport: the profiler's
 * hook on the transport (transport.h), and what it records.
 *
 * A transport has one nullable hook that its post path reads with one
 * relaxed load; attach() sets it to the profiler's hook, detach() clears
 * it. The ops table is never touched, so nothing is swapped at run time
 * and no thread has to be kept away from the transport meanwhile. The
 * hook runs on the posting thread and records into that thread's own lane
 * (profiler.c): no lock. One profiler may be attached to any number of
 * transports; a transport has at most one profiler at a time.
 */
#include <string.h>

#include "profiler/profiler_internal.h"

void spy__profiler_on_post(void *ctx, const spy_post_sample *s) {
  spy_profiler *p = ctx;
  spy_msg_record r;
  memset(&r, 0, sizeof r);
  r.type = s->type;
  r.t_ns = s->t_ns;
  if (s->bad) {
    /* Not a frame we can account for: flagged, zero cost. */
    r.flags = SPY_MSGREC_ERROR;
    r.err = SPY_EBADHEADER;
  } else {
    r.encode_ns = s->encode_ns;
    r.post_ns = s->post_ns;
    r.bytes = p->desc.no_size ? 0 : s->len;
    if (s->rc < 0) {
      r.flags = SPY_MSGREC_POST_FAILED;
      r.err = s->rc;
    }
  }
  spy__profiler_record(p, &r);
}

int spy_profiler_attach(spy_profiler *p, spy_transport *t) {
  if (!p || !t || !t->ops || !t->ops->post)
    return SPY_EINVAL;
  return spy_transport_set_hook(t, &p->hook);
}

int spy_profiler_detach(spy_profiler *p, spy_transport *t) {
  if (!p || !t)
    return SPY_EINVAL;
  return spy_transport_clear_hook(t, &p->hook);
}

int spy_profiler_attached(const spy_profiler *p, spy_transport *t) {
  return p && t && atomic_load(&t->hook) == &p->hook;
}

int spy_profiler_wrap(spy_profiler *p, spy_transport *t) {
  return spy_profiler_attach(p, t);
}

int spy_profiler_unwrap(spy_profiler *p, spy_transport *t) {
  return spy_profiler_detach(p, t);
}
