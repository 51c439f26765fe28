/* hashset.c — a set of 128-bit content hashes (open addressing, linear
 * probing, grown at half full). The session's "payloads seen" and the
 * PostgreSQL writer's "payloads of dropped batches" are both one. A zero
 * pair marks a free slot, so a real zero pair is kept as {0, 1}: a
 * harmless alias. Also the SQLite and JSON-lines writers' record of the
 * payloads a failed batch took with it (stored again when named). */
#include <stdlib.h>
#include <string.h>

#include "store.h"

/* The slot holding (a, b), or the free slot where it would go. */
static size_t slot(const spy__hset *s, uint64_t a, uint64_t b) {
  size_t j = (size_t)b & (s->cap - 1);
  while ((s->v[2 * j] || s->v[2 * j + 1]) &&
         !(s->v[2 * j] == a && s->v[2 * j + 1] == b))
    j = (j + 1) & (s->cap - 1);
  return j;
}

static void put(spy__hset *s, uint64_t a, uint64_t b) {
  size_t j = slot(s, a, b);
  s->v[2 * j] = a;
  s->v[2 * j + 1] = b;
}

int spy__hset_add(spy__hset *s, const uint64_t h[2]) {
  if ((s->n + 1) * 2 > s->cap) {
    size_t ocap = s->cap, ncap = s->cap ? s->cap * 2 : 256;
    uint64_t *old = s->v;
    if (!(s->v = calloc(ncap, 2 * sizeof *s->v))) {
      s->v = old;
      return SPY_ENOMEM;
    }
    s->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
      if (old[2 * i] || old[2 * i + 1])
        put(s, old[2 * i], old[2 * i + 1]);
    free(old);
  }
  uint64_t a = h[0], b = h[1] | !(h[0] | h[1]);
  size_t j = slot(s, a, b);
  if (s->v[2 * j] || s->v[2 * j + 1])
    return 0;
  s->v[2 * j] = a;
  s->v[2 * j + 1] = b;
  s->n++;
  return 1;
}

int spy__hset_take(spy__hset *s, const uint64_t h[2]) {
  if (!s->n)
    return 0;
  uint64_t a = h[0], b = h[1] | !(h[0] | h[1]);
  size_t j = slot(s, a, b);
  if (!s->v[2 * j] && !s->v[2 * j + 1])
    return 0;
  s->v[2 * j] = s->v[2 * j + 1] = 0;
  s->n--;
  /* re-place the rest of the probe run so lookups still find it */
  for (size_t k = (j + 1) & (s->cap - 1); s->v[2 * k] || s->v[2 * k + 1];
       k = (k + 1) & (s->cap - 1)) {
    uint64_t x = s->v[2 * k], y = s->v[2 * k + 1];
    s->v[2 * k] = s->v[2 * k + 1] = 0;
    put(s, x, y);
  }
  return 1;
}

void spy__hset_free(spy__hset *s) {
  free(s->v);
  *s = (spy__hset){0};
}

/* ---- payloads of failed batches ----------------------------------------- */

void spy__lost_src_note(spy__lost_src *l, const uint64_t hash[2]) {
  spy__buf_put(&l->batch, hash, 16);
}

int spy__lost_src_fail(spy__lost_src *l) {
  int rc = l->batch.err;
  for (size_t i = 0; rc == 0 && i + 16 <= l->batch.len; i += 16) {
    uint64_t h[2];
    memcpy(h, l->batch.p + i, 16);
    int r = spy__hset_add(&l->gone, h);
    if (r < 0)
      rc = r;
  }
  l->batch.len = 0;
  l->batch.err = 0;
  return rc;
}

void spy__lost_src_commit(spy__lost_src *l) {
  l->batch.len = 0;
  l->batch.err = 0;
}

int spy__lost_src_resend(spy__lost_src *l, const spy_trace_val *v,
                         int (*store)(void *, const uint64_t[2], const char *,
                                      size_t),
                         void *arg) {
  if (!l->gone.n)
    return 0;
  if (v->type == SPY_TV_SRC && v->has_hash && spy__hset_take(&l->gone, v->hash))
    return store(arg, v->hash, v->u.s, v->n);
  if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC)
    for (uint32_t i = 0; i < v->n; i++) {
      int rc = spy__lost_src_resend(l, &v->u.items[i], store, arg);
      if (rc)
        return rc;
    }
  return 0;
}

void spy__lost_src_free(spy__lost_src *l) {
  spy__buf_free(&l->batch);
  spy__hset_free(&l->gone);
}
