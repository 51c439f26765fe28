/* buffers.c — named image buffers (buffers.h): declaring them, the union
 * of the subscriptions' buffer requests, the frame thread's one copy into
 * a pooled buffer, and their metadata as BUFFERS deltas.
 *
 * Variants. Each subscriber gets what it asked for: the union of the
 * requests for a buffer is a list of distinct variants (mode, display
 * resolved for the type, long edge as asked), at most
 * SPY_BUFFER_VARIANTS_MAX; a request beyond that is refused (no pixels
 * for that subscriber, counted in spy_buffer_stats.refused), the earlier
 * subscribers keep theirs. One capture per frame serves every variant:
 * the worker converts (and encodes) each from the same pooled copy.
 *
 * Threads. The service (subscribe, unsubscribe, resync) keeps each
 * subscriber's requests and publishes, per declared buffer, its variants
 * (one atomic word each: mode | display << 8 | long_edge << 16, under a
 * sequence counter: odd while being written) and a key-frame epoch. The
 * frame thread takes a consistent copy when the counter moved; a copy
 * caught mid-write is retried on a later submit, never waited for.
 * Declaring a buffer (setup) and changing the requests take the table's
 * mutex, so a buffer declared after a subscription still gets its
 * request; the frame thread's submit reads only the atomics. The
 * service also makes the transport's 16 MiB tier the first time pixels are
 * wanted (acquire + release on its own thread), so the frame thread never
 * allocates; until that is done a due capture is dropped and counted. It
 * then writes one byte in every page of each pooled buffer, as far as the
 * largest declared buffer reaches (again, once, for the buffers then
 * free when a larger one is declared),
 * so the frame thread's copy never takes a page fault on a fresh page:
 * that was most of what a subscribed submit cost over a memcpy. A resize
 * beyond every declared size faults on its first copies only.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "provider/provider_internal.h"
#include "spyglass/buffers.h"
#include "spyglass/codec.h"

typedef struct buf_req {
  char *name;
  uint8_t mode, display;
  uint16_t long_edge;
} buf_req;

typedef struct buf_sub {
  uint64_t id; /* 0: free */
  buf_req *req;
  uint32_t n;
} buf_sub;

typedef struct buf_entry {
  char name[SPY_KEY_MAX + 1]; /* immutable once published */
  uint32_t name_len;
  /* service -> frame thread: the variants under a sequence counter */
  _Atomic uint32_t vseq, vn, vword[SPY_BUFFER_VARIANTS_MAX];
  _Atomic uint32_t key_epoch;
  /* The pixel a consumer probes (service -> frame thread): 0 none, else
   * PROBE_ON | y << 14 | x; who asked (under mu). */
  _Atomic uint32_t probe_xy;
  uint64_t prober;
  /* frame thread: the probed pixel's source bytes at the last capture */
  uint64_t probe_frame;
  uint32_t probe_at, probe_version, probe_sent;
  uint8_t probe_val[16];
  /* frame thread */
  uint32_t type, w, h, max_fps;
  uint64_t interval_ticks, next_capture;
  uint64_t last_frame, captured, dropped;
  uint32_t cur_seq, cur_n, cur[SPY_BUFFER_VARIANTS_MAX]; /* its copy */
  uint32_t version, sent_version;
  int owed;               /* its last due capture found the pool empty */
  uint64_t waiting_since; /* due, waiting for owed ones since (0: not) */
} buf_entry;

struct spy__buffers {
  pthread_mutex_t mu; /* declare vs the service's request changes */
  buf_entry e[SPY_BUFFERS_MAX];
  _Atomic uint32_t count;
  buf_sub subs[MAX_SUBSCRIBERS]; /* under mu */
  _Atomic uint32_t large_ready;  /* the service made the 16 MiB tier */
  size_t declared_bytes;         /* largest declared image (under mu) */
  size_t faulted_bytes;          /* pages touched per pooled buffer (service) */
  _Atomic uint32_t wanted;       /* buffers with a variant */
  _Atomic uint32_t variants;     /* variants served, all buffers */
  _Atomic uint32_t refused;      /* requests beyond the variant bound */
  uint32_t owed_n;               /* entries owed a capture (frame thread) */
  uint64_t owed_seen;            /* frame an owed entry last tried in */
  uint64_t empty_seen; /* frame + 1 an acquire last found the pool empty */
  _Atomic uint64_t st_submits, st_captured, st_dropped, st_bytes;
};

#define RELAXED memory_order_relaxed
#define PROBE_ON (1u << 28)
#define BUMP(x, n) atomic_fetch_add_explicit(&(x), (n), RELAXED)

static struct spy__buffers *get(const spy_provider *p) {
  return atomic_load_explicit(&((spy_provider *)p)->buffers,
                              memory_order_acquire);
}

/* The table, made on first need by whichever thread needs it first. */
static struct spy__buffers *need(spy_provider *p) {
  struct spy__buffers *b = get(p);
  if (b)
    return b;
  b = calloc(1, sizeof *b);
  if (!b)
    return NULL;
  pthread_mutex_init(&b->mu, NULL);
  struct spy__buffers *expect = NULL;
  if (!atomic_compare_exchange_strong(&p->buffers, &expect, b)) {
    pthread_mutex_destroy(&b->mu);
    free(b);
    return expect;
  }
  return b;
}

/* One variant word: mode | display << 8 | long_edge << 16. */
static uint32_t vword(uint32_t mode, uint32_t display, uint32_t edge) {
  return mode | display << 8 | edge << 16;
}

/* The distinct variants the requests for one buffer ask (under mu), in
 * subscriber order; *refused counts the requests beyond the bound. */
static uint32_t variants_of(const struct spy__buffers *b, const buf_entry *e,
                            uint32_t out[SPY_BUFFER_VARIANTS_MAX],
                            uint32_t *refused) {
  uint32_t n = 0;
  for (int s = 0; s < MAX_SUBSCRIBERS; s++) {
    const buf_sub *x = &b->subs[s];
    for (uint32_t k = 0; x->id && k < x->n; k++) {
      const buf_req *r = &x->req[k];
      if (strcmp(r->name, e->name) != 0 || r->mode < SPY_BUFFER_THUMBNAIL ||
          r->mode > SPY_BUFFER_STREAM)
        continue;
      uint32_t v = vword(r->mode, spy_display_resolve(e->type, r->display),
                         spy_variant_long_edge(r->mode, r->long_edge));
      uint32_t i = 0;
      while (i < n && out[i] != v)
        i++;
      if (i < n)
        continue; /* the same as an earlier subscriber's: shared */
      if (n == SPY_BUFFER_VARIANTS_MAX)
        (*refused)++;
      else
        out[n++] = v;
    }
  }
  return n;
}

static void publish_wants(struct spy__buffers *b) {
  uint32_t n = atomic_load(&b->count), wanted = 0, variants = 0, refused = 0;
  for (uint32_t i = 0; i < n; i++) {
    buf_entry *e = &b->e[i];
    uint32_t v[SPY_BUFFER_VARIANTS_MAX];
    uint32_t vn = variants_of(b, e, v, &refused);
    /* seqlock write (one writer: under mu) */
    uint32_t q = atomic_load_explicit(&e->vseq, RELAXED);
    atomic_store_explicit(&e->vseq, q + 1, RELAXED);
    atomic_thread_fence(memory_order_release);
    for (uint32_t k = 0; k < vn; k++)
      atomic_store_explicit(&e->vword[k], v[k], RELAXED);
    atomic_store_explicit(&e->vn, vn, RELAXED);
    atomic_store_explicit(&e->vseq, q + 2, memory_order_release);
    wanted += vn != 0;
    variants += vn;
  }
  atomic_store(&b->wanted, wanted);
  atomic_store(&b->variants, variants);
  atomic_store(&b->refused, refused);
}

/* Frame thread: takes the published variants if they changed (a copy
 * caught mid-write keeps the old one until a later call). Returns 1 if
 * the copy changed. */
static int refresh(buf_entry *e) {
  uint32_t q = atomic_load_explicit(&e->vseq, memory_order_acquire);
  if (q == e->cur_seq || (q & 1u))
    return 0;
  uint32_t v[SPY_BUFFER_VARIANTS_MAX];
  uint32_t n = atomic_load_explicit(&e->vn, RELAXED);
  if (n > SPY_BUFFER_VARIANTS_MAX)
    return 0;
  for (uint32_t k = 0; k < n; k++)
    v[k] = atomic_load_explicit(&e->vword[k], RELAXED);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&e->vseq, RELAXED) != q)
    return 0;
  int changed = n != e->cur_n || memcmp(v, e->cur, n * sizeof *v) != 0;
  memcpy(e->cur, v, n * sizeof *v);
  e->cur_n = n;
  e->cur_seq = q;
  return changed;
}

/* The variant the metadata calls "served": the first stream, else the
 * largest thumbnail. */
static uint32_t primary(const buf_entry *e) {
  uint32_t best = 0;
  for (uint32_t k = 0; k < e->cur_n; k++) {
    uint32_t v = e->cur[k];
    if ((v & 0xff) == SPY_BUFFER_STREAM)
      return v;
    if (!best || (v >> 16) > (best >> 16))
      best = v;
  }
  return best;
}

static int valid_size(uint32_t type, uint32_t w, uint32_t h) {
  uint32_t bpp = spy_pixel_bytes(type);
  return bpp && w && h && w <= SPY_IMAGE_MAX_EDGE && h <= SPY_IMAGE_MAX_EDGE &&
         (uint64_t)w * h * bpp <= SPY_POOL_LARGE_BYTES;
}

int spy_buffer_declare(spy_provider *p, const spy_buffer_desc *d) {
  size_t nlen = d && d->name ? strlen(d->name) : 0;
  if (!p || !nlen || nlen > SPY_KEY_MAX ||
      !valid_size(d->pixel_type, d->width, d->height))
    return SPY_EINVAL;
  struct spy__buffers *b = need(p);
  if (!b)
    return SPY_ENOMEM;
  pthread_mutex_lock(&b->mu);
  uint32_t n = atomic_load(&b->count), i;
  for (i = 0; i < n && strcmp(b->e[i].name, d->name) != 0; i++)
    ;
  if (i == n && n == SPY_BUFFERS_MAX) {
    pthread_mutex_unlock(&b->mu);
    return SPY_ENOSPC;
  }
  buf_entry *e = &b->e[i];
  if (i == n) {
    memcpy(e->name, d->name, nlen + 1);
    e->name_len = (uint32_t)nlen;
  }
  e->type = d->pixel_type;
  e->w = d->width;
  e->h = d->height;
  e->max_fps = d->max_fps ? d->max_fps : 4;
  e->interval_ticks =
      (uint64_t)(1e9 / (double)e->max_fps / p->ns_per_tick + 0.5);
  e->version++;
  size_t bytes = (size_t)d->width * d->height * spy_pixel_bytes(d->pixel_type);
  if (bytes > b->declared_bytes)
    b->declared_bytes = bytes;
  if (i == n)
    atomic_store_explicit(&b->count, n + 1, memory_order_release);
  publish_wants(b);
  pthread_mutex_unlock(&b->mu);
  return (int)i;
}

int spy_buffer_resize(spy_provider *p, int handle, uint32_t w, uint32_t h) {
  struct spy__buffers *b = p ? get(p) : NULL;
  if (!b || handle < 0 || (uint32_t)handle >= atomic_load(&b->count))
    return SPY_EINVAL;
  buf_entry *e = &b->e[handle];
  if (!valid_size(e->type, w, h))
    return SPY_EINVAL;
  if (e->w != w || e->h != h) {
    e->w = w;
    e->h = h;
    e->version++;
  }
  return 0;
}

void spy_buffer_get_stats(const spy_provider *p, spy_buffer_stats *out) {
  memset(out, 0, sizeof *out);
  struct spy__buffers *b = p ? get(p) : NULL;
  if (!b)
    return;
  out->submits = atomic_load(&b->st_submits);
  out->captured = atomic_load(&b->st_captured);
  out->dropped = atomic_load(&b->st_dropped);
  out->bytes_copied = atomic_load(&b->st_bytes);
  out->wanted = atomic_load(&b->wanted);
  out->variants = atomic_load(&b->variants);
  out->refused = atomic_load(&b->refused);
}

/* The largest frame the data channel takes (a record is at most a quarter
 * of the ring) and a consumer's default receive buffer holds. */
static uint32_t max_frame(const spy_provider *p) {
  uint32_t m = p->desc.ring_bytes / 4u - 64u;
  return m < (1u << 20) ? m : (1u << 20);
}

/* The entry is no longer owed a capture (it captured, or is not wanted). */
static void settle(struct spy__buffers *b, buf_entry *e) {
  e->waiting_since = 0;
  if (e->owed) {
    e->owed = 0;
    b->owed_n--;
  }
}

int spy__buffer_submit(spy_provider *p, int handle, const void *pixels,
                       size_t stride) {
  struct spy__buffers *b = get(p);
  if (!b || handle < 0 ||
      (uint32_t)handle >= atomic_load_explicit(&b->count, RELAXED) || !pixels)
    return SPY_EINVAL;
  buf_entry *e = &b->e[handle];
  uint32_t bpp = spy_pixel_bytes(e->type);
  size_t row = (size_t)e->w * bpp;
  if (stride < row)
    return SPY_EINVAL;
  BUMP(b->st_submits, 1);
  if (refresh(e))
    e->version++; /* the variants served changed */
  if (!e->cur_n) {
    settle(b, e);
    return 0;
  }
  /* Fairness. Every buffer declared at one rate falls due at the same
   * time, and the application submits them in one order: with more due
   * than the pool holds, the first ones would take every buffer the
   * worker returns and the last ones would never capture. So a buffer
   * whose due capture found the pool empty is owed: it tries again on
   * each submit until it captures, and while an owed buffer is still
   * being submitted (it tried this frame or the last) the others give
   * back the pool buffer they got and stay due. */
  uint64_t now = spy__ticks();
  int due = now >= e->next_capture;
  if (!due && !e->owed)
    return 0;
  if (!e->owed && b->owed_n && b->owed_seen + 2 > p->frame_no) {
    /* Theirs first, checked before taking a pool buffer, so a buffer
     * that waits never takes one only to give it back. If the pool was
     * found empty in this very frame, this due capture is turned away
     * like theirs: dropped, counted, owed. Else it stays due and waits;
     * one kept waiting a whole interval has missed a capture the rate
     * asked for: counted as a drop, and it is owed from then on too. */
    if (due && b->empty_seen == p->frame_no + 1) {
      e->waiting_since = 0;
      e->owed = 1;
      b->owed_n++;
      e->next_capture = now + e->interval_ticks;
      e->dropped++;
      e->version++;
      BUMP(b->st_dropped, 1);
      return SPY_EPOOLEMPTY;
    }
    if (!e->waiting_since) {
      e->waiting_since = now;
    } else if (now - e->waiting_since >= e->interval_ticks) {
      e->waiting_since = 0;
      e->owed = 1;
      b->owed_n++;
      e->dropped++;
      e->version++;
      BUMP(b->st_dropped, 1);
    }
    return 0;
  }
  if (!atomic_load_explicit(&b->large_ready, memory_order_acquire)) {
    e->next_capture = now + e->interval_ticks;
    e->dropped++;
    e->version++;
    BUMP(b->st_dropped, 1);
    return SPY_EPOOLEMPTY;
  }
  spy_buffer *px = spy_transport_acquire(p->tr, SPY_TIER_LARGE);
  if (!px) {
    b->empty_seen = p->frame_no + 1;
    if (!e->owed) {
      e->owed = 1;
      b->owed_n++;
    }
    b->owed_seen = p->frame_no;
    if (!due) /* an early retry: not a capture the rate asked for */
      return 0;
    e->next_capture = now + e->interval_ticks;
    e->dropped++;
    e->version++;
    BUMP(b->st_dropped, 1);
    return SPY_EPOOLEMPTY;
  }
  if (due)
    e->next_capture = now + e->interval_ticks;
  settle(b, e);
  int rc = SPY_EPOOLEMPTY;
  if (p->tr->ops->convert) {
    const uint8_t *s = pixels;
    if (stride == row) {
      memcpy(px->data, s, row * e->h);
    } else {
      for (uint32_t y = 0; y < e->h; y++)
        memcpy(px->data + row * y, s + stride * y, row);
    }
    uint32_t pq = atomic_load_explicit(&e->probe_xy, RELAXED);
    uint32_t qx = pq & 0x3fffu, qy = pq >> 14 & 0x3fffu;
    if (pq && qx < e->w && qy < e->h) { /* its source value, this capture */
      memset(e->probe_val, 0, sizeof e->probe_val);
      memcpy(e->probe_val, s + stride * qy + (size_t)qx * bpp, bpp);
      e->probe_frame = p->frame_no;
      e->probe_at = pq;
      e->probe_version++;
    }
    spy_convert_request req = {.name = e->name,
                               .frame = p->frame_no,
                               .width = e->w,
                               .height = e->h,
                               .pixel_type = (uint16_t)e->type,
                               .key_epoch =
                                   atomic_load_explicit(&e->key_epoch, RELAXED),
                               .max_frame = max_frame(p),
                               .fps = (uint16_t)e->max_fps,
                               .n_variants = (uint8_t)e->cur_n};
    for (uint32_t k = 0; k < e->cur_n; k++)
      req.variants[k] =
          (spy_convert_variant){.mode = (uint8_t)(e->cur[k] & 0xff),
                                .display = (uint8_t)(e->cur[k] >> 8 & 0xff),
                                .long_edge = (uint16_t)(e->cur[k] >> 16)};
    req.mode = req.variants[0].mode;
    req.display = req.variants[0].display;
    req.long_edge = req.variants[0].long_edge;
    rc = p->tr->ops->convert(p->tr, &req, px);
    if (rc == 0)
      BUMP(b->st_bytes, row * e->h);
  } else {
    p->tr->ops->release_unused(p->tr, px);
  }
  e->version++;
  if (rc < 0) {
    e->dropped++;
    BUMP(b->st_dropped, 1);
    return rc == SPY_EINVAL ? rc : SPY_EPOOLEMPTY;
  }
  e->captured++;
  e->last_frame = p->frame_no;
  BUMP(b->st_captured, 1);
  return 1;
}

/* ---- service thread ----------------------------------------------------- */

static void free_sub(buf_sub *x) {
  for (uint32_t k = 0; k < x->n; k++)
    free(x->req[k].name);
  free(x->req);
  memset(x, 0, sizeof *x);
}

/* Bumps the key-frame epoch of each buffer x streams (under mu): only
 * those encoders start over on a key frame, not every buffer's. The epoch
 * is per buffer, so each stream variant of such a buffer gets one. */
static void key_streams_of(struct spy__buffers *b, const buf_sub *x) {
  uint32_t n = atomic_load(&b->count);
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < x->n; k++)
      if (x->req[k].mode == SPY_BUFFER_STREAM &&
          strcmp(x->req[k].name, b->e[i].name) == 0) {
        atomic_fetch_add(&b->e[i].key_epoch, 1);
        break;
      }
}

void spy__buffers_subscribe(spy_provider *p, const spy_subscription *sub) {
  struct spy__buffers *b = get(p);
  if (!b && !sub->n_buffers)
    return;
  if (!b && !(b = need(p)))
    return;
  pthread_mutex_lock(&b->mu);
  buf_sub *x = NULL;
  for (int s = 0; s < MAX_SUBSCRIBERS && !x; s++)
    if (b->subs[s].id == sub->consumer)
      x = &b->subs[s];
  for (int s = 0; s < MAX_SUBSCRIBERS && !x; s++)
    if (!b->subs[s].id)
      x = &b->subs[s];
  if (x) {
    free_sub(x);
    if (sub->n_buffers) {
      x->req = calloc(sub->n_buffers, sizeof *x->req);
      const uint8_t *cur = NULL;
      spy_buffer_request r;
      while (x->req && spy_subscription_next_buffer(sub, &cur, &r)) {
        buf_req *q = &x->req[x->n];
        if (!(q->name = strndup(r.name, r.name_len)))
          break;
        q->mode = r.mode;
        q->display = r.display;
        q->long_edge = r.long_edge;
        x->n++;
      }
      x->id = sub->consumer;
    }
  }
  publish_wants(b);
  if (x) /* the new subscriber's streams start on a key frame */
    key_streams_of(b, x);
  pthread_mutex_unlock(&b->mu);
}

void spy__buffers_probe(spy_provider *p, uint64_t consumer,
                        const spy_probe *q) {
  struct spy__buffers *b = get(p);
  if (!b)
    return;
  pthread_mutex_lock(&b->mu);
  uint32_t n = atomic_load(&b->count);
  for (uint32_t i = 0; i < n; i++) {
    buf_entry *e = &b->e[i];
    if (e->name_len != q->name_len || memcmp(e->name, q->name, q->name_len))
      continue;
    if (q->x == SPY_PROBE_STOP) {
      if (e->prober == consumer) {
        atomic_store_explicit(&e->probe_xy, 0, RELAXED);
        e->prober = 0;
      }
    } else if (q->x < 16384 && q->y < 16384) { /* the latest asker's */
      atomic_store_explicit(&e->probe_xy, PROBE_ON | q->y << 14 | q->x,
                            RELAXED);
      e->prober = consumer;
    }
  }
  pthread_mutex_unlock(&b->mu);
}

void spy__buffers_unsubscribe(spy_provider *p, uint64_t consumer) {
  struct spy__buffers *b = get(p);
  if (!b)
    return;
  pthread_mutex_lock(&b->mu);
  for (int s = 0; s < MAX_SUBSCRIBERS; s++)
    if (b->subs[s].id == consumer)
      free_sub(&b->subs[s]);
  uint32_t n = atomic_load(&b->count);
  for (uint32_t i = 0; i < n; i++)
    if (b->e[i].prober == consumer) {
      atomic_store_explicit(&b->e[i].probe_xy, 0, RELAXED);
      b->e[i].prober = 0;
    }
  publish_wants(b);
  pthread_mutex_unlock(&b->mu);
}

void spy__buffers_keyframe(spy_provider *p, uint64_t consumer) {
  struct spy__buffers *b = get(p);
  if (!b)
    return;
  pthread_mutex_lock(&b->mu);
  for (int s = 0; s < MAX_SUBSCRIBERS; s++)
    if (b->subs[s].id && b->subs[s].id == consumer)
      key_streams_of(b, &b->subs[s]);
  pthread_mutex_unlock(&b->mu);
}

/* Touches the pages of every pooled buffer not in use, up to `bytes`:
 * the kernel maps them here rather than in the frame thread's copy.
 * Returns 1 if every buffer was free (all of them are touched). */
static int prefault(spy_provider *p, size_t bytes) {
  spy_buffer *held[SPY_POOL_LARGE_COUNT];
  uint32_t n = 0;
  while (n < SPY_POOL_LARGE_COUNT &&
         (held[n] = spy_transport_acquire(p->tr, SPY_TIER_LARGE)))
    n++;
  for (uint32_t i = 0; i < n; i++) {
    volatile uint8_t *d = held[i]->data;
    size_t lim = bytes < held[i]->cap ? bytes : held[i]->cap;
    for (size_t o = 0; o < lim; o += 4096) /* the smallest page size */
      d[o] = 0;
    p->tr->ops->release_unused(p->tr, held[i]);
  }
  return n == SPY_POOL_LARGE_COUNT;
}

void spy__buffers_service(spy_provider *p) {
  struct spy__buffers *b = get(p);
  if (!b || !atomic_load(&b->wanted))
    return;
  pthread_mutex_lock(&b->mu);
  size_t want = b->declared_bytes;
  pthread_mutex_unlock(&b->mu);
  if (atomic_load_explicit(&b->large_ready, RELAXED)) {
    /* A larger buffer was declared since: touch what it adds in the
     * buffers free now, once (best effort: retrying until all four are
     * free at once would keep taking them from the frame thread). */
    if (want > b->faulted_bytes) {
      prefault(p, want);
      b->faulted_bytes = want;
    }
    return;
  }
  /* Make the 16 MiB tier here, not on the frame thread's first capture,
   * and map its pages before the frame thread may copy into them. */
  spy_buffer *x = spy_transport_acquire(p->tr, SPY_TIER_LARGE);
  if (x) {
    p->tr->ops->release_unused(p->tr, x);
    prefault(p, want); /* all free: nobody takes one before large_ready */
    b->faulted_bytes = want;
    atomic_store_explicit(&b->large_ready, 1, memory_order_release);
  }
}

/* ---- frame thread: the BUFFERS section ---------------------------------- */

/* What one variant word of e serves: mode, display, size, codec. */
static spy_buffer_variant served(const buf_entry *e, uint32_t v, int codec) {
  spy_buffer_variant x = {
      .mode = (uint8_t)(v & 0xff),
      .display = (uint8_t)spy_display_resolve(e->type, v >> 8 & 0xff),
      .long_edge = (uint16_t)(v >> 16),
      .served_width = e->w,
      .served_height = e->h};
  if (x.mode != SPY_BUFFER_STREAM || x.long_edge)
    spy_thumbnail_size(e->w, e->h, x.long_edge, &x.served_width,
                       &x.served_height);
  x.codec =
      (uint16_t)(x.mode == SPY_BUFFER_STREAM && codec == 1 ? SPY_CODEC_VP9
                                                           : SPY_CODEC_RGBA8);
  return x;
}

void spy__buffers_encode(spy_provider *p, spy_frame_writer *w, int full) {
  struct spy__buffers *b = get(p);
  uint32_t n = b ? atomic_load_explicit(&b->count, memory_order_acquire) : 0;
  int any = full, probes = 0;
  for (uint32_t i = 0; i < n; i++) {
    any = any || b->e[i].version != b->e[i].sent_version;
    probes += b->e[i].probe_frame &&
              (full || b->e[i].probe_version != b->e[i].probe_sent);
  }
  if (probes) { /* the source values read at the last captures */
    spy_probe q[SPY_BUFFERS_MAX];
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
      buf_entry *e = &b->e[i];
      if (!e->probe_frame || (!full && e->probe_version == e->probe_sent))
        continue;
      q[k] = (spy_probe){.frame = e->probe_frame,
                         .x = e->probe_at & 0x3fffu,
                         .y = e->probe_at >> 14 & 0x3fffu,
                         .pixel_type = (uint16_t)e->type,
                         .name = e->name,
                         .name_len = e->name_len};
      memcpy(q[k].value, e->probe_val, 16);
      e->probe_sent = e->probe_version;
      k++;
    }
    spy_put_probe(w, q, k);
  }
  if (!any)
    return;
  spy_delta_writer d;
  spy_delta_begin(&d, w, SPY_SEC_BUFFERS, full ? SPY_DELTA_FULL : 0);
  int codec =
      p->tr->ops->codec_supported ? p->tr->ops->codec_supported(p->tr) : 0;
  uint8_t sent[SPY_BUFFERS_MAX] = {0}; /* listed in this BUFFERS section */
  for (uint32_t i = 0; i < n; i++) {
    buf_entry *e = &b->e[i];
    if (refresh(e))
      e->version++;
    uint32_t want = primary(e);
    if (!full && e->version == e->sent_version)
      continue;
    sent[i] = 1;
    spy_buffer_meta m = {.pixel_type = (uint16_t)e->type,
                         .mode = (uint8_t)(want & 0xff),
                         .width = e->w,
                         .height = e->h,
                         .max_fps = (uint16_t)e->max_fps,
                         .last_frame = e->last_frame,
                         .captured = e->captured,
                         .dropped = e->dropped};
    m.display = (uint8_t)spy_display_resolve(e->type, want >> 8 & 0xff);
    if (m.mode) {
      uint32_t edge = want >> 16;
      m.served_width = e->w;
      m.served_height = e->h;
      if (m.mode != SPY_BUFFER_STREAM || edge)
        spy_thumbnail_size(e->w, e->h, edge, &m.served_width, &m.served_height);
      m.codec = (uint16_t)(m.mode == SPY_BUFFER_STREAM && codec == 1
                               ? SPY_CODEC_VP9
                               : SPY_CODEC_RGBA8);
    }
    uint8_t blob[SPY_BUFFER_META_BYTES];
    spy_buffer_meta_encode(blob, &m);
    spy_value v = {.kind = SPY_VAL_BLOB};
    v.v.s.ptr = (const char *)blob;
    v.v.s.len = sizeof blob;
    spy_delta_put(&d, SPY_DELTA_SET, e->name, e->name_len, &v);
    e->sent_version = e->version;
  }
  spy_delta_end(&d);
  /* Every variant served, for the entries just listed (BUFFERS names one
   * of them only, as older readers expect). */
  spy_delta_begin(&d, w, SPY_SEC_BUFFER_VARIANTS, full ? SPY_DELTA_FULL : 0);
  for (uint32_t i = 0; i < n; i++) {
    if (!sent[i])
      continue;
    const buf_entry *e = &b->e[i];
    spy_buffer_variant vs[SPY_BUFFER_VARIANTS_MAX];
    uint32_t nv = 0;
    for (uint32_t k = 0; k < e->cur_n && k < SPY_BUFFER_VARIANTS_MAX; k++)
      vs[nv++] = served(e, e->cur[k], codec);
    uint8_t blob[SPY_BUFFER_VARIANTS_MAX * SPY_BUFFER_VARIANT_BYTES];
    spy_buffer_variants_encode(blob, vs, nv);
    spy_value v = {.kind = SPY_VAL_BLOB};
    v.v.s.ptr = (const char *)blob;
    v.v.s.len = nv * SPY_BUFFER_VARIANT_BYTES;
    spy_delta_put(&d, SPY_DELTA_SET, e->name, e->name_len, &v);
  }
  spy_delta_end(&d);
}

void spy__buffers_free(spy_provider *p) {
  struct spy__buffers *b = get(p);
  if (!b)
    return;
  for (int s = 0; s < MAX_SUBSCRIBERS; s++)
    free_sub(&b->subs[s]);
  pthread_mutex_destroy(&b->mu);
  free(b);
  atomic_store(&p->buffers, NULL);
}
