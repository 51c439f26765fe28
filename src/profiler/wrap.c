/* wrap.c — measuring every post through a transport by swapping its ops
 * table for a forwarding one.
 *
 * Each wrapped transport gets a slot inside its profiler; the slot holds a
 * copy of the original table with post, acquire and dispose replaced. The
 * transport's ops pointer then points into the slot, so a wrapper op
 * recovers the slot (profiler and original table) from t->ops alone: no
 * global registry, no lookup. The ops left alone (convert, codec_supported,
 * release_unused, pool_stats) are the original function pointers, so they
 * cost nothing extra.
 *
 * A transport is wrapped by at most one profiler at a time: a second
 * wrapper would find the first one's slot through t->ops and recurse.
 */
#include <stddef.h>
#include <string.h>

#include "platform/platform.h"
#include "profiler/profiler_internal.h"

static struct spy__wrap_slot *slot_of(spy_transport *t) {
  return (
      struct spy__wrap_slot *)(void *)((char *)(uintptr_t)t->ops -
                                       offsetof(struct spy__wrap_slot, ops));
}

static int wrapped_post(spy_transport *t, spy_buffer *b, size_t len) {
  struct spy__wrap_slot *s = slot_of(t);
  spy_profiler *p = s->p;
  spy_msg_record r;
  memset(&r, 0, sizeof r);
  /* Read what we need before posting: the buffer belongs to the
   * transport (and may be reused by another thread) once post returns. */
  int bad = !b || !b->data || len < SPY_FRAME_MIN || spy_rd32(b->data) != len;
  if (b && b->data && len >= 8)
    r.type = spy_rd32(b->data + 4);
  uint64_t enc = b ? b->encode_ns : 0;
  uint64_t t0 = spy__mono_ns();
  int rc = s->orig->post(t, b, len);
  uint64_t t1 = spy__mono_ns();
  r.t_ns = t1;
  if (bad) {
    /* Not a frame we can account for: flagged, zero cost. */
    r.flags = SPY_MSGREC_ERROR;
    r.err = SPY_EBADHEADER;
  } else {
    r.encode_ns = enc;
    r.post_ns = t1 - t0;
    r.bytes = p->desc.no_size ? 0 : (uint32_t)len;
    if (rc < 0) {
      r.flags = SPY_MSGREC_POST_FAILED;
      r.err = rc;
    }
  }
  spy__profiler_record(p, &r);
  return rc; /* exactly what the transport said */
}

static spy_buffer *wrapped_acquire(spy_transport *t, spy_tier tier) {
  struct spy__wrap_slot *s = slot_of(t);
  spy_buffer *b = s->orig->acquire(t, tier);
  if (b)
    b->encode_ns = 0; /* an encoder that does not time itself reports 0 */
  return b;
}

/* Restores t and frees the slot. Called with p->mu held. */
static void restore(struct spy__wrap_slot *s) {
  s->t->ops = s->orig;
  s->t->timing_wanted = s->orig_timing;
  s->t = NULL;
  s->orig = NULL;
}

static void wrapped_dispose(spy_transport *t) {
  struct spy__wrap_slot *s = slot_of(t);
  const spy_transport_ops *orig = s->orig;
  pthread_mutex_lock(&s->p->mu);
  restore(s);
  pthread_mutex_unlock(&s->p->mu);
  if (orig->dispose)
    orig->dispose(t);
}

int spy_profiler_wrap(spy_profiler *p, spy_transport *t) {
  if (!p || !t || !t->ops || !t->ops->post)
    return SPY_EINVAL;
  if (t->ops->post == wrapped_post) {
    /* Ours or another profiler's. */
    return slot_of(t)->p == p ? SPY_EEXIST : SPY_EBUSY;
  }
  int rc = SPY_ENOSPC;
  pthread_mutex_lock(&p->mu);
  for (uint32_t i = 0; i < p->desc.max_wrapped; i++) {
    struct spy__wrap_slot *s = &p->slots[i];
    if (s->t)
      continue;
    s->t = t;
    s->p = p;
    s->orig = t->ops;
    s->orig_timing = t->timing_wanted;
    s->ops = *t->ops;
    s->ops.post = wrapped_post;
    if (s->ops.acquire)
      s->ops.acquire = wrapped_acquire;
    s->ops.dispose = wrapped_dispose;
    t->ops = &s->ops;
    t->timing_wanted = 1;
    rc = 0;
    break;
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

int spy_profiler_unwrap(spy_profiler *p, spy_transport *t) {
  if (!p || !t)
    return SPY_EINVAL;
  int rc = SPY_ENOENT;
  pthread_mutex_lock(&p->mu);
  for (uint32_t i = 0; i < p->desc.max_wrapped; i++) {
    struct spy__wrap_slot *s = &p->slots[i];
    if (s->t != t)
      continue;
    if (t->ops != &s->ops) {
      rc = SPY_EBUSY; /* someone swapped the table again since */
    } else {
      restore(s);
      rc = 0;
    }
    break;
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

void spy__profiler_unwrap_all(spy_profiler *p) {
  pthread_mutex_lock(&p->mu);
  for (uint32_t i = 0; i < p->desc.max_wrapped; i++)
    if (p->slots[i].t && p->slots[i].t->ops == &p->slots[i].ops)
      restore(&p->slots[i]);
  pthread_mutex_unlock(&p->mu);
}
