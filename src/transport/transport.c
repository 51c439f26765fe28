/* transport.c — the producer transports behind spy_transport_ops: the
 * tiered buffer pool both share, and the two ways of posting.
 *
 * offload: post pushes the buffer on a lock-free queue and returns; a
 * worker thread posts it to the channel and returns it to the pool. The
 * calling thread makes no system call and takes no lock.
 * inline: post does the same work on the calling thread.
 *
 * The profiler hook (spy_transport_set_hook) belongs to the common head,
 * so it works on any transport: spy_transport_post() reads it with one
 * relaxed load and takes the hooked path below only while it is set.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "spyglass/codec.h"
#include "spyglass/media.h"
#include "spyglass/transport.h"
#include "spyglass/wire.h"
#include "transport/mpmc.h"

#define BUF_CONVERT 1 /* spy_buffer.reserved: holds pixels to convert */
#define ENC_SLOTS 16  /* streamed buffer sizes with an open encoder */

/* A video encoder kept by the worker for one buffer name, display mode
 * and size (a stream variant). */
typedef struct enc_slot {
  char name[SPY_KEY_MAX + 1];
  uint32_t w, h;
  uint8_t display;
  uint64_t serial; /* the last request that used it */
  const spy_video_codec_ops *ops;
  void *enc; /* NULL: free slot */
  uint64_t last_key_ms, last_use_ms;
  uint32_t epoch;
} enc_slot;

/* A convert request waiting in the post queue with its pixels buffer. */
typedef struct convert_job {
  spy_convert_request req;
  char name[SPY_KEY_MAX + 1];
  uint64_t captured_ms;
} convert_job;

typedef struct transport_impl {
  spy_transport pub; /* first: the public head */
  spy_transport_kind kind;
  spy_channel *ch;
  spy__mpmc free_q[SPY_TIER_COUNT];
  spy_buffer *bufs[SPY_TIER_COUNT];
  uint8_t *mem[SPY_TIER_COUNT];
  uint32_t count[SPY_TIER_COUNT];
  uint32_t bytes[SPY_TIER_COUNT];
  _Atomic int large_state; /* 0 none, 1 allocating, 2 ready, -1 failed */
  spy__mpmc post_q;
  convert_job jobs[SPY_TIER_COUNT][SPY_POOL_SMALL_COUNT]; /* by buffer */
  uint32_t seq; /* stamped by the posting thread */
  _Atomic uint64_t acquire_failed, posted, bytes_posted, post_failed;
  /* offload */
  pthread_t worker;
  int worker_started;
  _Atomic int stop;
  _Atomic uint32_t kick;
  void (*tick)(void *ctx, int wait_ms);
  void *tick_ctx;
  /* convert (the posting thread): encoders, scratch images and frames,
   * grown on first need and kept */
  enc_slot enc[ENC_SLOTS];
  uint64_t cv_serial; /* convert requests handled */
  _Atomic uint32_t n_enc;
  uint8_t *cv_rgba, *cv_enc, *cv_frame;
  size_t cv_rgba_cap, cv_enc_cap, cv_frame_cap;
  _Atomic uint64_t encode_failed;
} transport_impl;

static const uint32_t tier_bytes[SPY_TIER_COUNT] = {
    SPY_POOL_SMALL_BYTES, SPY_POOL_MEDIUM_BYTES, SPY_POOL_LARGE_BYTES};
static const uint32_t tier_count[SPY_TIER_COUNT] = {
    SPY_POOL_SMALL_COUNT, SPY_POOL_MEDIUM_COUNT, SPY_POOL_LARGE_COUNT};

static int tier_alloc(transport_impl *t, int tier) {
  uint32_t n = tier_count[tier], sz = tier_bytes[tier];
  t->bufs[tier] = calloc(n, sizeof(spy_buffer));
  t->mem[tier] = malloc((size_t)n * sz);
  if (!t->bufs[tier] || !t->mem[tier] || spy__mpmc_init(&t->free_q[tier], n))
    return SPY_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    spy_buffer *b = &t->bufs[tier][i];
    b->data = t->mem[tier] + (size_t)i * sz;
    b->cap = sz;
    b->tier = (uint8_t)tier;
    b->index = (uint16_t)i;
    spy__mpmc_push(&t->free_q[tier], b);
  }
  t->count[tier] = n;
  t->bytes[tier] = sz;
  return 0;
}

static spy_buffer *t_acquire(spy_transport *pub, spy_tier tier) {
  transport_impl *t = (transport_impl *)pub;
  if ((unsigned)tier >= SPY_TIER_COUNT)
    return NULL;
  if (tier == SPY_TIER_LARGE &&
      atomic_load_explicit(&t->large_state, memory_order_acquire) != 2) {
    int expect = 0;
    if (atomic_compare_exchange_strong(&t->large_state, &expect, 1))
      atomic_store_explicit(&t->large_state,
                            tier_alloc(t, SPY_TIER_LARGE) ? -1 : 2,
                            memory_order_release);
    if (atomic_load_explicit(&t->large_state, memory_order_acquire) != 2) {
      atomic_fetch_add_explicit(&t->acquire_failed, 1, memory_order_relaxed);
      return NULL;
    }
  }
  spy_buffer *b = spy__mpmc_pop(&t->free_q[tier]);
  if (!b) {
    atomic_fetch_add_explicit(&t->acquire_failed, 1, memory_order_relaxed);
    return NULL;
  }
  b->len = 0;
  b->encode_ns = 0;
  b->reserved = 0;
  return b;
}

static void t_release(spy_transport *pub, spy_buffer *b) {
  transport_impl *t = (transport_impl *)pub;
  if (b)
    spy__mpmc_push(&t->free_q[b->tier], b);
}

/* Stamps the sequence number and posts; on the posting thread only. */
static int post_bytes(transport_impl *t, uint8_t *data, uint32_t len) {
  if (len >= SPY_FRAME_MIN && spy_rd32(data + 16) == SPY_SEC_FRAME)
    spy_wr32(data + 28, t->seq++);
  int rc = spy_channel_post(t->ch, data, len);
  if (rc == 0) {
    atomic_fetch_add_explicit(&t->posted, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->bytes_posted, len, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&t->post_failed, 1, memory_order_relaxed);
  }
  return rc;
}

static int post_now(transport_impl *t, spy_buffer *b) {
  int rc = post_bytes(t, b->data, b->len);
  t_release(&t->pub, b);
  return rc;
}

/* ---- convert: pixels to RGBA8, VP9 or raw, in frames (worker) -------- */

/* Posts one buffer:raw / buffer:chunk frame the worker built in its own
 * scratch (not a pooled buffer, so not through spy_transport_post) and,
 * while a profiler hook is set, hands it the sample like any other post:
 * buffer frames show in the message profiler's per-type table.
 * `encode_ns` is the conversion and encode time (given with the first
 * part of a payload). */
static int post_pixels(transport_impl *t, uint8_t *data, uint32_t len,
                       uint64_t encode_ns) {
  spy_transport *pub = &t->pub;
  if (!atomic_load_explicit(&pub->hook, memory_order_relaxed))
    return post_bytes(t, data, len);
  atomic_fetch_add(&pub->hook_users, 1);
  const spy_post_hook *h = atomic_load(&pub->hook);
  if (!h) { /* cleared meanwhile */
    atomic_fetch_sub_explicit(&pub->hook_users, 1, memory_order_release);
    return post_bytes(t, data, len);
  }
  spy_post_sample s = {.len = len, .encode_ns = encode_ns};
  s.type = len >= 8 ? spy_rd32(data + 4) : 0;
  uint64_t t0 = spy__mono_ns();
  s.rc = post_bytes(t, data, len);
  s.t_ns = spy__mono_ns();
  s.post_ns = s.t_ns - t0;
  h->on_post(h->ctx, &s);
  atomic_fetch_sub_explicit(&pub->hook_users, 1, memory_order_release);
  return s.rc;
}

/* Frame overhead of a PIXELS frame besides its data: header, FRAME
 * section, PIXELS section header and fixed part, name, part header. */
static uint32_t pixels_overhead(size_t name_len) {
  return SPY_FRAME_MIN + SPY_SECTION_HEADER_BYTES + 36u +
         (uint32_t)((name_len + 3u) & ~(size_t)3u) + SPY_PIXELS_VARIANT_BYTES +
         SPY_PIXELS_PART_HEADER + 8u;
}

static int grow(uint8_t **p, size_t *cap, size_t need) {
  if (*cap >= need)
    return 0;
  uint8_t *n = realloc(*p, need);
  if (!n)
    return SPY_ENOMEM;
  *p = n;
  *cap = need;
  return 0;
}

/* Posts a payload as one PIXELS frame, or in parts when it is larger than
 * one frame allows. Each part that cannot be posted is counted. */
static int post_payload(transport_impl *t, uint32_t type, spy_pixels meta,
                        const uint8_t *data, uint32_t len, uint32_t max_frame,
                        uint64_t encode_ns) {
  size_t nlen = strlen(meta.name);
  uint32_t over = pixels_overhead(nlen);
  if (!max_frame)
    max_frame = 1u << 20;
  if (max_frame > SPY_FRAME_MAX)
    max_frame = SPY_FRAME_MAX;
  if (max_frame < over + 64u)
    return SPY_EINVAL;
  uint32_t room = (max_frame - over) & ~3u;
  int parts = len > room;
  if (grow(&t->cv_frame, &t->cv_frame_cap,
           (size_t)(parts ? room : len) + over)) {
    atomic_fetch_add_explicit(&t->post_failed, 1, memory_order_relaxed);
    return SPY_ENOMEM;
  }
  int rc = 0;
  uint32_t off = 0;
  do {
    uint32_t n = len - off < room ? len - off : room;
    spy_pixels px = meta;
    px.data = data + off;
    px.data_len = n;
    px.part_offset = parts ? off : 0;
    px.part_total = parts ? len : 0;
    spy_frame_writer w;
    spy_frame_start(&w, t->cv_frame, t->cv_frame_cap, type, meta.captured_ms, 0,
                    0);
    spy_put_pixels(&w, &px);
    int flen = spy_frame_finish(&w);
    int r = flen < 0 ? flen
                     : post_pixels(t, t->cv_frame, (uint32_t)flen,
                                   off ? 0 : encode_ns);
    if (flen < 0)
      atomic_fetch_add_explicit(&t->post_failed, 1, memory_order_relaxed);
    if (r && !rc)
      rc = r;
    off += n;
  } while (off < len);
  return rc;
}

static void enc_close(transport_impl *t, enc_slot *e) {
  if (!e->enc)
    return;
  e->ops->encoder_destroy(e->enc);
  e->enc = NULL;
  atomic_fetch_sub_explicit(&t->n_enc, 1, memory_order_relaxed);
}

/* The encoder slot for a stream variant: one per buffer name, display and
 * size (a resize starts a new one, with a key frame; the old one is closed
 * once a request no longer names it). *fresh is set for a new encoder. */
static enc_slot *enc_for(transport_impl *t, const spy_video_codec_ops *vc,
                         const char *name, uint8_t display, uint32_t w,
                         uint32_t h, uint32_t fps, uint64_t now, int *fresh) {
  enc_slot *free_slot = NULL, *lru = NULL;
  *fresh = 0;
  for (int i = 0; i < ENC_SLOTS; i++) {
    enc_slot *e = &t->enc[i];
    if (e->enc && e->w == w && e->h == h && e->display == display &&
        e->ops == vc && strcmp(e->name, name) == 0) {
      e->last_use_ms = now;
      e->serial = t->cv_serial;
      return e;
    }
    if (!e->enc && !free_slot)
      free_slot = e;
    if (e->enc && e->serial != t->cv_serial &&
        (!lru || e->last_use_ms < lru->last_use_ms))
      lru = e;
  }
  enc_slot *e = free_slot ? free_slot : lru;
  if (!e)
    return NULL; /* every slot serves this very request */
  enc_close(t, e);
  memset(e, 0, sizeof *e);
  if (vc->encoder_create(&e->enc, w, h, fps ? fps : 4) < 0 || !e->enc) {
    e->enc = NULL;
    return NULL;
  }
  atomic_fetch_add_explicit(&t->n_enc, 1, memory_order_relaxed);
  e->ops = vc;
  size_t nlen = strnlen(name, SPY_KEY_MAX);
  memcpy(e->name, name, nlen);
  e->name[nlen] = 0;
  e->w = w;
  e->h = h;
  e->display = display;
  e->last_use_ms = now;
  e->serial = t->cv_serial;
  *fresh = 1;
  return e;
}

/* Closes the encoders no subscriber wants any more: those of `name` (if
 * given) that the request just handled did not use, and any not used for
 * SPY_ENCODER_IDLE_MS (a buffer nobody streams sends no request). */
static void enc_sweep(transport_impl *t, const char *name, uint64_t now) {
  for (int i = 0; i < ENC_SLOTS; i++) {
    enc_slot *e = &t->enc[i];
    if (!e->enc)
      continue;
    if ((name && e->serial != t->cv_serial && strcmp(e->name, name) == 0) ||
        now - e->last_use_ms >= SPY_ENCODER_IDLE_MS)
      enc_close(t, e);
  }
}

/* Converts one variant of the pixels in px to RGBA8 (a thumbnail, or the
 * stream's size), encodes a stream with the registered codec (offload
 * only) and posts buffer:chunk, else buffer:raw. `last`: px goes back to
 * the pool as soon as this variant's pixels are converted. */
static int convert_variant(transport_impl *t, spy_buffer **px,
                           const convert_job *j, const spy_convert_variant *v,
                           int last, uint64_t t_start) {
  const spy_convert_request *r = &j->req;
  const spy_video_codec_ops *vc =
      v->mode == SPY_BUFFER_STREAM && t->kind == SPY_TRANSPORT_OFFLOAD
          ? spy_video_codec_get(SPY_CODEC_VP9)
          : NULL;
  uint32_t ow = r->width, oh = r->height;
  if (v->mode != SPY_BUFFER_STREAM || v->long_edge)
    spy_thumbnail_size(r->width, r->height, v->long_edge, &ow, &oh);
  size_t img = (size_t)ow * oh * 4;
  int rc = grow(&t->cv_rgba, &t->cv_rgba_cap, img);
  if (rc == 0)
    rc = spy_image_to_rgba8_mode(
        t->cv_rgba, ow, oh, (*px)->data, r->width, r->height,
        (size_t)r->width * spy_pixel_bytes(r->pixel_type), r->pixel_type,
        v->display);
  if (last) {
    t_release(&t->pub, *px);
    *px = NULL;
  }
  if (rc) {
    atomic_fetch_add_explicit(&t->post_failed, 1, memory_order_relaxed);
    return rc;
  }
  uint8_t display = (uint8_t)spy_display_resolve(r->pixel_type, v->display);
  spy_pixels meta = {.frame = r->frame,
                     .captured_ms = j->captured_ms,
                     .width = ow,
                     .height = oh,
                     .pixel_type = r->pixel_type,
                     .display = display,
                     .key_frame = 1,
                     .codec = SPY_CODEC_RGBA8,
                     .name = j->name,
                     .variant_mode = v->mode,
                     .variant_long_edge =
                         spy_variant_long_edge(v->mode, v->long_edge)};
  if (vc) {
    uint64_t now = spy__mono_ns() / 1000000u;
    int fresh;
    enc_slot *e = enc_for(t, vc, j->name, display, ow, oh, r->fps, now, &fresh);
    size_t len = 0;
    int key = 0;
    if (e && grow(&t->cv_enc, &t->cv_enc_cap, img + 65536) == 0) {
      int force = fresh || e->epoch != r->key_epoch ||
                  now - e->last_key_ms >= SPY_KEYFRAME_MS;
      if (vc->encode(e->enc, t->cv_rgba, force, t->cv_enc, t->cv_enc_cap, &len,
                     &key) == 0 &&
          len > 0) {
        if (key) {
          e->last_key_ms = now;
          e->epoch = r->key_epoch;
        }
        meta.codec = vc->codec;
        meta.key_frame = (uint8_t)key;
        return post_payload(t, SPY_MSG_BUFFER_CHUNK, meta, t->cv_enc,
                            (uint32_t)len, r->max_frame,
                            t_start ? spy__mono_ns() - t_start : 0);
      }
    }
    atomic_fetch_add_explicit(&t->encode_failed, 1, memory_order_relaxed);
    /* the codec failed: this frame goes raw, never silently lost */
  }
  return post_payload(t, SPY_MSG_BUFFER_RAW, meta, t->cv_rgba, (uint32_t)img,
                      r->max_frame, t_start ? spy__mono_ns() - t_start : 0);
}

/* Makes every variant of one capture (one conversion each, the capture
 * read in place), returns px to the pool after the last conversion and
 * closes the buffer's encoders no variant uses any more. On the posting
 * thread. */
static int convert_now(transport_impl *t, spy_buffer *px,
                       const convert_job *job) {
  /* A copy: the job slot belongs to px, which goes back to the pool (and
   * to the next capture) as soon as its pixels are converted. */
  convert_job local = *job;
  local.req.name = local.name;
  const spy_convert_request *r = &local.req;
  spy_convert_variant one = {r->mode, r->display, r->long_edge};
  const spy_convert_variant *vs = r->n_variants ? r->variants : &one;
  uint32_t n = r->n_variants ? r->n_variants : 1;
  t->cv_serial++;
  int rc = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t t_start = atomic_load_explicit(&t->pub.hook, memory_order_relaxed)
                           ? spy__mono_ns()
                           : 0; /* timed only for the profiler */
    int r1 = convert_variant(t, &px, &local, &vs[i], i + 1 == n, t_start);
    if (r1 && !rc)
      rc = r1;
  }
  enc_sweep(t, local.name, spy__mono_ns() / 1000000u);
  return rc;
}

/* Checks a convert request against its pixels; fills the job. */
static int prepare_convert(transport_impl *t, const spy_convert_request *req,
                           spy_buffer *px, convert_job **job) {
  uint32_t bpp = req ? spy_pixel_bytes(req->pixel_type) : 0;
  size_t nlen = req && req->name ? strlen(req->name) : 0;
  int bad_variants = req && req->n_variants > SPY_BUFFER_VARIANTS_MAX;
  for (uint32_t i = 0; req && !bad_variants && i < req->n_variants; i++)
    bad_variants = req->variants[i].mode < SPY_BUFFER_THUMBNAIL ||
                   req->variants[i].mode > SPY_BUFFER_STREAM;
  if (!px || !bpp || bad_variants || nlen == 0 || nlen > SPY_KEY_MAX ||
      !req->width || !req->height || req->width > SPY_IMAGE_MAX_EDGE ||
      req->height > SPY_IMAGE_MAX_EDGE ||
      (uint64_t)req->width * req->height * bpp > px->cap ||
      px->index >= SPY_POOL_SMALL_COUNT) {
    if (px)
      t_release(&t->pub, px);
    atomic_fetch_add_explicit(&t->post_failed, 1, memory_order_relaxed);
    return SPY_EINVAL;
  }
  convert_job *j = &t->jobs[px->tier][px->index];
  j->req = *req;
  memcpy(j->name, req->name, nlen + 1);
  j->req.name = j->name;
  j->captured_ms = spy__wall_ms();
  *job = j;
  return 0;
}

static int inline_convert(spy_transport *pub, const spy_convert_request *req,
                          spy_buffer *px) {
  transport_impl *t = (transport_impl *)pub;
  convert_job *j;
  int rc = prepare_convert(t, req, px, &j);
  return rc ? rc : convert_now(t, px, j);
}

static int offload_convert(spy_transport *pub, const spy_convert_request *req,
                           spy_buffer *px) {
  transport_impl *t = (transport_impl *)pub;
  convert_job *j;
  int rc = prepare_convert(t, req, px, &j);
  if (rc)
    return rc;
  px->reserved = BUF_CONVERT; /* the worker converts it */
  if (!spy__mpmc_push(&t->post_q, px)) {
    atomic_fetch_add_explicit(&t->post_failed, 1, memory_order_relaxed);
    t_release(pub, px);
    return SPY_ENOBUFS;
  }
  return 0;
}

static int check_post(transport_impl *t, spy_buffer *b, size_t len) {
  if (!b)
    return SPY_EINVAL;
  if (len == 0 || len > b->cap) {
    atomic_fetch_add_explicit(&t->post_failed, 1, memory_order_relaxed);
    t_release(&t->pub, b);
    return SPY_EINVAL;
  }
  b->len = (uint32_t)len;
  return 0;
}

static int inline_post(spy_transport *pub, spy_buffer *b, size_t len) {
  transport_impl *t = (transport_impl *)pub;
  int rc = check_post(t, b, len);
  return rc ? rc : post_now(t, b);
}

static int offload_post(spy_transport *pub, spy_buffer *b, size_t len) {
  transport_impl *t = (transport_impl *)pub;
  int rc = check_post(t, b, len);
  if (rc)
    return rc;
  if (!spy__mpmc_push(&t->post_q, b)) {
    atomic_fetch_add_explicit(&t->post_failed, 1, memory_order_relaxed);
    t_release(pub, b);
    return SPY_ENOBUFS;
  }
  return 0;
}

static int t_codec(spy_transport *pub) {
  transport_impl *t = (transport_impl *)pub;
  return t->kind == SPY_TRANSPORT_OFFLOAD &&
         spy_video_codec_get(SPY_CODEC_VP9) != NULL;
}

static void t_stats(spy_transport *pub, spy_pool_stats *out) {
  transport_impl *t = (transport_impl *)pub;
  memset(out, 0, sizeof *out);
  for (int i = 0; i < SPY_TIER_COUNT; i++) {
    out->total[i] = t->count[i];
    if (!t->free_q[i].cells)
      continue;
    uint64_t h = atomic_load(&t->free_q[i].head),
             tl = atomic_load(&t->free_q[i].tail);
    out->free[i] = (uint32_t)(h - tl);
  }
  out->acquire_failed = atomic_load(&t->acquire_failed);
  out->posted = atomic_load(&t->posted);
  out->bytes_posted = atomic_load(&t->bytes_posted);
  out->post_failed = atomic_load(&t->post_failed);
  out->encoders = atomic_load_explicit(&t->n_enc, memory_order_relaxed);
}

static void drain(transport_impl *t) {
  spy_buffer *b;
  while ((b = spy__mpmc_pop(&t->post_q))) {
    if (b->reserved == BUF_CONVERT)
      convert_now(t, b, &t->jobs[b->tier][b->index]);
    else
      post_now(t, b);
  }
}

static void *worker_main(void *arg) {
  transport_impl *t = arg;
  while (!atomic_load_explicit(&t->stop, memory_order_acquire)) {
    drain(t);
    if (atomic_load_explicit(&t->n_enc, memory_order_relaxed))
      enc_sweep(t, NULL, spy__mono_ns() / 1000000u);
    if (t->tick)
      t->tick(t->tick_ctx, 10);
    else
      spy__futex_wait((uint32_t *)&t->kick, 0, 10000000);
  }
  drain(t);
  return NULL;
}

static void t_dispose(spy_transport *pub) {
  transport_impl *t = (transport_impl *)pub;
  if (!t)
    return;
  if (t->worker_started) {
    atomic_store_explicit(&t->stop, 1, memory_order_release);
    atomic_store(&t->kick, 1);
    spy__futex_wake((uint32_t *)&t->kick, 1);
    pthread_join(t->worker, NULL);
  }
  for (int i = 0; i < SPY_TIER_COUNT; i++) {
    spy__mpmc_free(&t->free_q[i]);
    free(t->bufs[i]);
    free(t->mem[i]);
  }
  spy__mpmc_free(&t->post_q);
  for (int i = 0; i < ENC_SLOTS; i++)
    if (t->enc[i].enc)
      t->enc[i].ops->encoder_destroy(t->enc[i].enc);
  free(t->cv_rgba);
  free(t->cv_enc);
  free(t->cv_frame);
  free(t);
}

/* ---- the profiler hook ------------------------------------------------ */

int spy_transport_set_hook(spy_transport *t, const spy_post_hook *h) {
  if (!t || !h || !h->on_post)
    return SPY_EINVAL;
  const spy_post_hook *none = NULL;
  if (atomic_compare_exchange_strong(&t->hook, &none, h))
    return 0;
  return none == h ? SPY_EEXIST : SPY_EBUSY;
}

int spy_transport_clear_hook(spy_transport *t, const spy_post_hook *h) {
  if (!t || !h)
    return SPY_ENOENT;
  const spy_post_hook *cur = h;
  if (!atomic_compare_exchange_strong(&t->hook, &cur, NULL))
    return SPY_ENOENT;
  /* Sequentially consistent on both sides (the store above, the count and
   * re-load in post_hooked): either a post saw NULL, or it is counted
   * here. Waiting is the clearing thread's; posts never wait. */
  for (int spins = 0; atomic_load(&t->hook_users) != 0; spins++) {
    if (spins < 64)
      spy__cpu_relax();
    else
      sched_yield();
  }
  return 0;
}

int spy__transport_post_hooked(spy_transport *t, spy_buffer *b, size_t len) {
  atomic_fetch_add(&t->hook_users, 1);
  const spy_post_hook *h = atomic_load(&t->hook);
  if (!h) { /* cleared meanwhile */
    atomic_fetch_sub_explicit(&t->hook_users, 1, memory_order_release);
    return t->ops->post(t, b, len);
  }
  /* Read what the sample needs before posting: the buffer belongs to the
   * transport (and may be reused by another thread) once post returns. */
  spy_post_sample s = {.len = (uint32_t)len};
  s.bad = !b || !b->data || len < SPY_FRAME_MIN || len > b->cap ||
          spy_rd32(b->data) != len;
  if (b && b->data && len >= 8 && len <= b->cap)
    s.type = spy_rd32(b->data + 4);
  s.encode_ns = b ? b->encode_ns : 0;
  uint64_t t0 = spy__mono_ns();
  s.rc = t->ops->post(t, b, len);
  s.t_ns = spy__mono_ns();
  s.post_ns = s.t_ns - t0;
  h->on_post(h->ctx, &s);
  atomic_fetch_sub_explicit(&t->hook_users, 1, memory_order_release);
  return s.rc;
}

static const spy_transport_ops offload_ops = {
    .name = "offload",
    .acquire = t_acquire,
    .post = offload_post,
    .convert = offload_convert,
    .codec_supported = t_codec,
    .release_unused = t_release,
    .pool_stats = t_stats,
    .dispose = t_dispose,
};

static const spy_transport_ops inline_ops = {
    .name = "inline",
    .acquire = t_acquire,
    .post = inline_post,
    .convert = inline_convert,
    .codec_supported = t_codec,
    .release_unused = t_release,
    .pool_stats = t_stats,
    .dispose = t_dispose,
};

int spy_transport_create(spy_transport **out, const spy_transport_desc *desc) {
  *out = NULL;
  if (!desc || !desc->channel || (unsigned)desc->kind > SPY_TRANSPORT_INLINE)
    return SPY_EINVAL;
  transport_impl *t = calloc(1, sizeof *t);
  if (!t)
    return SPY_ENOMEM;
  t->ch = desc->channel;
  t->tick = desc->tick;
  t->tick_ctx = desc->tick_ctx;
  if (tier_alloc(t, SPY_TIER_SMALL) || tier_alloc(t, SPY_TIER_MEDIUM) ||
      spy__mpmc_init(&t->post_q, 64)) {
    t_dispose(&t->pub);
    return SPY_ENOMEM;
  }
  t->kind = desc->kind == SPY_TRANSPORT_INLINE ? SPY_TRANSPORT_INLINE
                                               : SPY_TRANSPORT_OFFLOAD;
  if (t->kind == SPY_TRANSPORT_OFFLOAD) {
    int rc = desc->simulate_worker_failure
                 ? EAGAIN
                 : pthread_create(&t->worker, NULL, worker_main, t);
    if (rc == 0) {
      t->worker_started = 1;
    } else if (desc->kind == SPY_TRANSPORT_AUTO) {
      t->kind = SPY_TRANSPORT_INLINE; /* a working fallback */
    } else {
      t_dispose(&t->pub);
      return -rc;
    }
  }
  t->pub.ops = t->kind == SPY_TRANSPORT_OFFLOAD ? &offload_ops : &inline_ops;
  *out = &t->pub;
  return 0;
}
