/* transport.h — the producer side's send path: pooled buffers and a post
 * that never blocks the inspected thread.
 *
 * The provider fills a pooled buffer with an encoded frame on the inspected
 * thread and hands it to the transport. Two implementations sit behind the
 * one table of function pointers below, so nothing above it names a
 * transport:
 *   - offload: a worker thread posts the buffer to the channel and returns
 *     it to the pool. The inspected thread only touches lock-free queues:
 *     no lock, no system call, no allocation.
 *   - inline: the same work on the calling thread (single-threaded or
 *     embedded targets, or when the worker cannot start).
 *
 * Pool tiers: SMALL 4 KiB × 8, MEDIUM 256 KiB × 4 (the per-flush data
 * frame), LARGE 16 MiB × 4 (buffer readback; allocated only when a buffer
 * subscription first needs one). All buffers are allocated when the
 * transport is created (LARGE: on first use), never on the hot path. When a
 * tier is empty, acquire returns NULL and the caller drops its flush and
 * counts it: nothing ever waits for a buffer.
 *
 * Profiler hook: a transport carries one nullable hook (spy_post_hook),
 * set and cleared at run time by a message profiler (profiler.h). Every
 * post through spy_transport_post() reads it with one relaxed load; while
 * it is NULL that is the whole cost. While set, the post is timed and the
 * hook is called on the posting thread after it. The ops table itself never
 * changes after create.
 */
#ifndef SPYGLASS_TRANSPORT_H
#define SPYGLASS_TRANSPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "spyglass/bus.h"
#include "spyglass/error.h"
#include "spyglass/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum spy_tier {
  SPY_TIER_SMALL = 0,  /* 4 KiB */
  SPY_TIER_MEDIUM = 1, /* 256 KiB */
  SPY_TIER_LARGE = 2,  /* 16 MiB */
  SPY_TIER_COUNT = 3
} spy_tier;

#define SPY_POOL_SMALL_BYTES (4u * 1024u)
#define SPY_POOL_SMALL_COUNT 8u
#define SPY_POOL_MEDIUM_BYTES (256u * 1024u)
#define SPY_POOL_MEDIUM_COUNT 4u
#define SPY_POOL_LARGE_BYTES (16u * 1024u * 1024u)
#define SPY_POOL_LARGE_COUNT 4u

/* A pooled buffer. Owned by the pool; lent to the caller between acquire
 * and post (or release_unused). */
typedef struct spy_buffer {
  uint8_t *data;
  uint32_t cap;
  uint8_t tier;
  uint8_t reserved;
  uint16_t index;
  uint32_t len; /* set by post: the frame's length */
  /* Set by the encoder while the transport has a hook
   * (spy_transport_timed()): nanoseconds spent encoding the frame now in
   * `data`. 0 otherwise (acquire clears it). */
  uint64_t encode_ns;
} spy_buffer;

typedef struct spy_pool_stats {
  uint32_t free[SPY_TIER_COUNT];
  uint32_t total[SPY_TIER_COUNT];
  uint64_t acquire_failed; /* acquires that found the tier empty */
  uint64_t posted;         /* frames posted to the channel */
  uint64_t bytes_posted;
  uint64_t post_failed; /* posts the channel refused (too big, closed) */
  uint32_t encoders;    /* video encoders open on the worker now */
} spy_pool_stats;

/* One image made from a capture: what some subscribers asked for. */
#define SPY_BUFFER_VARIANTS_MAX 4u /* variants of one buffer at a time */
typedef struct spy_convert_variant {
  uint8_t mode;       /* spy_buffer_mode */
  uint8_t display;    /* spy_display_mode (media.h) */
  uint16_t long_edge; /* as requested (spy_variant_long_edge, media.h) */
} spy_convert_variant;

/* A request to convert captured pixels (in a LARGE buffer) to RGBA8 and,
 * for a stream subscription with codec support, encode them. */
typedef struct spy_convert_request {
  const char *name; /* buffer entry name */
  uint64_t frame;   /* provider frame the pixels were read on */
  uint32_t width, height;
  uint16_t pixel_type; /* spy_pixel_type (media.h) */
  uint8_t mode;        /* spy_buffer_mode */
  uint16_t long_edge;  /* thumbnail long edge (0: 256); stream: 0 = full
                          size, else downscaled to it */
  uint8_t display;     /* spy_display_mode (media.h) */
  /* Stream: a value different from the last request's for this buffer
   * forces a key frame (the provider bumps it for a new subscriber or a
   * resync). Key frames are also forced on the first frame of a size and
   * at least every SPY_KEYFRAME_MS. */
  uint32_t key_epoch;
  /* The largest frame to post (the channel's limit); a payload larger
   * than one frame is sent in parts (PIXELS flag part). 0 = 1 MiB. */
  uint32_t max_frame;
  uint16_t fps; /* the stream's rate, for the encoder; 0 = 4 */
  /* Variants: n_variants images (1..SPY_BUFFER_VARIANTS_MAX) made from the
   * one capture, each converted and posted on its own, each PIXELS frame
   * saying which variant it is. 0: the one variant mode / display /
   * long_edge above. The worker keeps a stream variant's encoder per
   * buffer name, display and size while requests still name it; one no
   * request named for SPY_ENCODER_IDLE_MS is closed. */
  uint8_t n_variants;
  spy_convert_variant variants[SPY_BUFFER_VARIANTS_MAX];
} spy_convert_request;
#define SPY_ENCODER_IDLE_MS 5000u

#define SPY_KEYFRAME_MS 2000u /* a key frame at least this often */

typedef struct spy_transport spy_transport;

typedef struct spy_transport_ops {
  const char *name; /* "offload" or "inline" */
  /* Takes a free buffer of the tier, or NULL if none is free. Lock-free,
   * never waits, never allocates (LARGE: allocates its buffers on the
   * first call, which is on a buffer subscription's first readback). */
  spy_buffer *(*acquire)(spy_transport *t, spy_tier tier);
  /* Posts the frame in b->data[0..len) to the channel and returns b to the
   * pool; ownership of b passes to the transport whatever the result.
   * The FRAME section's sequence number is stamped at the moment of
   * posting, on the posting thread, so a channel's frames are numbered in
   * the order they are really posted. Any thread may post. Returns 0, or a
   * negative error (the frame is dropped and counted). */
  int (*post)(spy_transport *t, spy_buffer *b, size_t len);
  /* Converts and posts captured pixels as buffer:raw or buffer:chunk.
   * Takes ownership of pixels (rows packed: width * bytes per pixel).
   * Offload: the conversion, the encode and the posts run on the worker;
   * the call only queues. Inline: all of it on the calling thread, raw
   * only. Stream requests are encoded with the registered video codec
   * (codec.h) when there is one (offload only), else sent raw. The worker
   * keeps one encoder per buffer name, display and size. May be NULL (not
   * supported). */
  int (*convert)(spy_transport *t, const spy_convert_request *req,
                 spy_buffer *pixels);
  /* Codec support: -1 not known yet, 0 no VP9 (raw only), 1 VP9 (a VP9
   * codec is registered and this transport encodes: offload). */
  int (*codec_supported)(spy_transport *t);
  /* Returns an acquired buffer that will not be posted. */
  void (*release_unused)(spy_transport *t, spy_buffer *b);
  void (*pool_stats)(spy_transport *t, spy_pool_stats *out);
  /* Stops the worker (posting what it holds), frees the pool. */
  void (*dispose)(spy_transport *t);
} spy_transport_ops;

/* What one hooked post cost, handed to the hook on the posting thread. */
typedef struct spy_post_sample {
  uint64_t t_ns;      /* CLOCK_MONOTONIC when the post returned */
  uint64_t encode_ns; /* spy_buffer.encode_ns as the encoder left it */
  uint64_t post_ns;   /* time spent in ops->post */
  uint32_t type;      /* the frame header's message type; 0 if none */
  uint32_t len;       /* bytes posted */
  int32_t rc;         /* what ops->post returned */
  int32_t bad;        /* 1: the buffer did not hold a frame of exactly len
                         bytes (or was NULL): the costs are not meaningful */
} spy_post_sample;

/* A profiler hook: on_post(ctx, sample) runs on the posting thread after
 * each post, so it must not block (the message profiler records into a
 * ring of the calling thread's own). Owned by whoever sets it; it must
 * stay valid until spy_transport_clear_hook() has returned. */
typedef struct spy_post_hook {
  void (*on_post)(void *ctx, const spy_post_sample *s);
  void *ctx;
} spy_post_hook;

/* The common head of every transport. `ops` is fixed at create. */
struct spy_transport {
  const spy_transport_ops *ops;
  /* The profiler hook or NULL (spy_transport_set_hook). */
  _Atomic(const spy_post_hook *) hook;
  /* Hooked posts in progress (only touched while a hook is set), so that
   * clearing a hook can wait until none of them still uses it. */
  _Atomic uint32_t hook_users;
};

typedef enum spy_transport_kind {
  SPY_TRANSPORT_AUTO = 0, /* offload, falling back to inline */
  SPY_TRANSPORT_OFFLOAD = 1,
  SPY_TRANSPORT_INLINE = 2
} spy_transport_kind;

typedef struct spy_transport_desc {
  spy_transport_kind kind; /* default AUTO */
  spy_channel *channel;    /* where frames go; not owned */
  /* Offload only: the worker calls tick(tick_ctx, wait_ms) between
   * draining its queue; tick may block up to wait_ms waiting for input
   * (the provider answers its channels there). Without tick the worker
   * polls its queue every 10 ms. The inline transport never calls it. */
  void (*tick)(void *ctx, int wait_ms);
  void *tick_ctx;
  /* Test hook: make the offload worker fail to start (AUTO then falls
   * back to inline; OFFLOAD fails with the error). */
  int simulate_worker_failure;
} spy_transport_desc;

/* Creates a transport. *out receives it; destroy with
 * t->ops->dispose(t). Errors: SPY_EINVAL (no channel), SPY_ENOMEM, or the
 * worker's start error for OFFLOAD. AUTO never fails for lack of a
 * worker: it returns an inline transport instead. */
int spy_transport_create(spy_transport **out, const spy_transport_desc *desc);

/* Sets t's profiler hook. Any thread, at any time (posts in progress on
 * other threads see it from their next post). Returns 0, SPY_EEXIST (h is
 * already set), SPY_EBUSY (another hook is set: one at a time), SPY_EINVAL
 * (NULL t, h or h->on_post). */
int spy_transport_set_hook(spy_transport *t, const spy_post_hook *h);

/* Clears t's hook if it is h, then waits until no post that saw h is still
 * inside it (a post's length: the clearing thread spins and yields; the
 * posting threads never wait). After it returns h may be freed. Must not
 * be called from inside h->on_post. Returns 0 or SPY_ENOENT (h is not the
 * hook). */
int spy_transport_clear_hook(spy_transport *t, const spy_post_hook *h);

/* Non-zero while a hook is set: encoders then time their encode into
 * spy_buffer.encode_ns. One relaxed load. */
static inline int spy_transport_timed(spy_transport *t) {
  return atomic_load_explicit(&t->hook, memory_order_relaxed) != NULL;
}

/* The hooked path of spy_transport_post (internal). */
int spy__transport_post_hooked(spy_transport *t, spy_buffer *b, size_t len);

/* Convenience forwards to t->ops. Post through spy_transport_post() (not
 * t->ops->post) so that a profiler hook sees the post. */
static inline spy_buffer *spy_transport_acquire(spy_transport *t,
                                                spy_tier tier) {
  return t->ops->acquire(t, tier);
}
static inline int spy_transport_post(spy_transport *t, spy_buffer *b,
                                     size_t len) {
  if (__builtin_expect(
          atomic_load_explicit(&t->hook, memory_order_relaxed) != NULL, 0))
    return spy__transport_post_hooked(t, b, len);
  return t->ops->post(t, b, len);
}

#ifdef __cplusplus
}
#endif
#endif
