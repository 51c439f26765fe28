/* transport.c — the producer transports behind spy_transport_ops: the
 * tiered buffer pool both share, and the two ways of posting.
 *
 * offload: post pushes the buffer on a lock-free queue and returns; a
 * worker thread posts it to the channel and returns it to the pool. The
 * calling thread makes no system call and takes no lock.
 * inline: post does the same work on the calling thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "spyglass/transport.h"
#include "spyglass/wire.h"
#include "transport/mpmc.h"

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
  uint32_t seq; /* stamped by the posting thread */
  _Atomic uint64_t acquire_failed, posted, bytes_posted, post_failed;
  /* offload */
  pthread_t worker;
  int worker_started;
  _Atomic int stop;
  _Atomic uint32_t kick;
  void (*tick)(void *ctx, int wait_ms);
  void *tick_ctx;
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
      atomic_store_explicit(&t->large_state, tier_alloc(t, SPY_TIER_LARGE) ? -1 : 2,
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
  return b;
}

static void t_release(spy_transport *pub, spy_buffer *b) {
  transport_impl *t = (transport_impl *)pub;
  if (b)
    spy__mpmc_push(&t->free_q[b->tier], b);
}

/* Stamps the sequence number and posts; on the posting thread only. */
static int post_now(transport_impl *t, spy_buffer *b) {
  if (b->len >= SPY_FRAME_MIN && spy_rd32(b->data + 16) == SPY_SEC_FRAME)
    spy_wr32(b->data + 28, t->seq++);
  int rc = spy_channel_post(t->ch, b->data, b->len);
  if (rc == 0) {
    atomic_fetch_add_explicit(&t->posted, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->bytes_posted, b->len, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&t->post_failed, 1, memory_order_relaxed);
  }
  t_release(&t->pub, b);
  return rc;
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
  (void)pub;
  return 0; /* raw RGBA8 only in this build */
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
}

static void drain(transport_impl *t) {
  spy_buffer *b;
  while ((b = spy__mpmc_pop(&t->post_q)))
    post_now(t, b);
}

static void *worker_main(void *arg) {
  transport_impl *t = arg;
  while (!atomic_load_explicit(&t->stop, memory_order_acquire)) {
    drain(t);
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
  free(t);
}

static const spy_transport_ops offload_ops = {
    .name = "offload",
    .acquire = t_acquire,
    .post = offload_post,
    .convert = NULL,
    .codec_supported = t_codec,
    .release_unused = t_release,
    .pool_stats = t_stats,
    .dispose = t_dispose,
};

static const spy_transport_ops inline_ops = {
    .name = "inline",
    .acquire = t_acquire,
    .post = inline_post,
    .convert = NULL,
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
