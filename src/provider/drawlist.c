/* drawlist.c — the batch list and the render-pass tree (drawlist.h).
 *
 * The frame thread fills `cur` for the frame in progress; the first call
 * of a later frame (or the flush after the frame ended) moves it to
 * `done`, the last complete frame, which the flush hashes and sends when
 * the hash differs from the one last sent. The tables are made by the
 * service (its tick) when a subscriber first wants either feature and
 * published with a release store; until then the frame thread's calls do
 * nothing. */
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "provider/provider_internal.h"
#include "spyglass/drawlist.h"

#define NAME 64

typedef struct dl_batch {
  char kind[NAME], key[NAME];
  uint32_t instances, draws;
} dl_batch;

typedef struct dl_pass {
  char label[NAME];
  uint16_t parent;
  uint32_t draws, triangles, cpu_us;
  uint64_t t0;
} dl_pass;

typedef struct dl_lists {
  dl_batch b[SPY_DRAWLIST_BATCHES];
  dl_pass p[SPY_DRAWLIST_PASSES];
  uint32_t nb, np;
} dl_lists;

struct spy__drawlist {
  dl_lists cur, done;
  uint64_t frame; /* the frame `cur` belongs to */
  uint16_t open[SPY_DRAWLIST_DEPTH];
  uint32_t depth;
  uint64_t sent_b, sent_p; /* hashes last sent */
  uint32_t ver_b, ver_p;
  int sent_any_b, sent_any_p;
  _Atomic uint64_t dropped;
};

static void copy_name(char *dst, const char *s) {
  size_t n = s ? strnlen(s, NAME - 1) : 0;
  memcpy(dst, s ? s : "", n);
  dst[n] = 0;
}

/* The frame moved on: cur becomes done. */
static void roll(struct spy__drawlist *d, uint64_t frame) {
  if (d->frame == frame)
    return;
  d->done.nb = d->cur.nb;
  d->done.np = d->cur.np;
  memcpy(d->done.b, d->cur.b, d->cur.nb * sizeof d->cur.b[0]);
  memcpy(d->done.p, d->cur.p, d->cur.np * sizeof d->cur.p[0]);
  d->cur.nb = d->cur.np = 0;
  d->depth = 0;
  d->frame = frame;
}

static struct spy__drawlist *get(spy_provider *p) {
  struct spy__drawlist *d =
      atomic_load_explicit(&p->drawlist, memory_order_acquire);
  if (d)
    roll(d, p->frame_no);
  return d;
}

void spy__batch_add(spy_provider *p, const char *kind, const char *key,
                    uint32_t instances, uint32_t draws) {
  struct spy__drawlist *d = get(p);
  if (!d)
    return;
  if (d->cur.nb == SPY_DRAWLIST_BATCHES) {
    atomic_fetch_add_explicit(&d->dropped, 1, memory_order_relaxed);
    return;
  }
  dl_batch *b = &d->cur.b[d->cur.nb++];
  copy_name(b->kind, kind);
  copy_name(b->key, key);
  b->instances = instances;
  b->draws = draws;
}

void spy__pass_begin(spy_provider *p, const char *label) {
  struct spy__drawlist *d = get(p);
  if (!d)
    return;
  if (d->cur.np == SPY_DRAWLIST_PASSES || d->depth == SPY_DRAWLIST_DEPTH) {
    atomic_fetch_add_explicit(&d->dropped, 1, memory_order_relaxed);
    if (d->depth < SPY_DRAWLIST_DEPTH)
      d->open[d->depth++] = UINT16_MAX - 1; /* keeps begin/end paired */
    return;
  }
  uint16_t i = (uint16_t)d->cur.np++;
  dl_pass *x = &d->cur.p[i];
  copy_name(x->label, label);
  x->parent = SPY_PASS_ROOT;
  for (uint32_t k = d->depth; k > 0; k--)
    if (d->open[k - 1] < SPY_DRAWLIST_PASSES) {
      x->parent = d->open[k - 1];
      break;
    }
  x->draws = x->triangles = x->cpu_us = 0;
  x->t0 = spy__ticks();
  d->open[d->depth++] = i;
}

void spy__pass_end(spy_provider *p, uint32_t draws, uint32_t triangles) {
  struct spy__drawlist *d = get(p);
  if (!d || !d->depth)
    return;
  uint16_t i = d->open[--d->depth];
  if (i >= SPY_DRAWLIST_PASSES)
    return; /* a dropped pass */
  dl_pass *x = &d->cur.p[i];
  x->draws = draws;
  x->triangles = triangles;
  double us = (double)(spy__ticks() - x->t0) * p->ns_per_tick / 1e3;
  x->cpu_us = us > 4e9 ? 4000000000u : (uint32_t)(us + 0.5);
}

static uint64_t fnv(uint64_t h, const void *v, size_t n) {
  const uint8_t *b = v;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

void spy__drawlist_encode(spy_provider *p, spy_frame_writer *w, int full,
                          uint32_t features) {
  struct spy__drawlist *d =
      atomic_load_explicit(&p->drawlist, memory_order_acquire);
  if (!d)
    return;
  roll(d, p->frame_no);
  if (features & SPY_FEAT_BATCHES) {
    uint64_t h = 14695981039346656037ull;
    spy_batch_info bi[SPY_DRAWLIST_BATCHES];
    for (uint32_t i = 0; i < d->done.nb; i++) {
      dl_batch *b = &d->done.b[i];
      h = fnv(h, b->kind, strlen(b->kind) + 1);
      h = fnv(h, b->key, strlen(b->key) + 1);
      h = fnv(h, &b->instances, 8);
      bi[i] = (spy_batch_info){.kind = b->kind,
                               .key = b->key,
                               .kind_len = (uint32_t)strlen(b->kind),
                               .key_len = (uint32_t)strlen(b->key),
                               .instances = b->instances,
                               .draws = b->draws};
    }
    if (h != d->sent_b || !d->sent_any_b)
      d->ver_b++;
    if (full || h != d->sent_b || !d->sent_any_b) {
      spy_put_batches(w, d->ver_b, bi, d->done.nb);
      d->sent_b = h;
      d->sent_any_b = 1;
    }
  }
  if (features & SPY_FEAT_PASSES) {
    uint64_t h = 14695981039346656037ull;
    spy_pass_info pi[SPY_DRAWLIST_PASSES];
    for (uint32_t i = 0; i < d->done.np; i++) {
      dl_pass *x = &d->done.p[i];
      h = fnv(h, x->label, strlen(x->label) + 1);
      h = fnv(h, &x->parent, sizeof x->parent);
      uint32_t tenth_ms = x->cpu_us / 100; /* CPU time to 0.1 ms */
      h = fnv(h, &x->draws, 8);
      h = fnv(h, &tenth_ms, 4);
      pi[i] = (spy_pass_info){.label = x->label,
                              .label_len = (uint32_t)strlen(x->label),
                              .parent = x->parent,
                              .draws = x->draws,
                              .triangles = x->triangles,
                              .cpu_us = x->cpu_us};
    }
    if (h != d->sent_p || !d->sent_any_p)
      d->ver_p++;
    if (full || h != d->sent_p || !d->sent_any_p) {
      spy_put_passes(w, d->ver_p, pi, d->done.np);
      d->sent_p = h;
      d->sent_any_p = 1;
    }
  }
}

void spy__drawlist_service(spy_provider *p) {
  uint32_t f =
      (uint32_t)atomic_load_explicit(&p->hot.watch, memory_order_relaxed);
  if (!(f & (SPY_FEAT_BATCHES | SPY_FEAT_PASSES)) ||
      atomic_load_explicit(&p->drawlist, memory_order_relaxed))
    return;
  struct spy__drawlist *d = calloc(1, sizeof *d);
  if (d) {
    d->frame = UINT64_MAX;
    atomic_store_explicit(&p->drawlist, d, memory_order_release);
  }
}

void spy__drawlist_free(spy_provider *p) {
  free(atomic_load(&p->drawlist));
  atomic_store(&p->drawlist, NULL);
}
