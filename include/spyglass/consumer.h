/* consumer.h — the inspecting side: find a provider, subscribe, keep the
 * subscription alive, and accumulate everything it sends into a state a UI
 * renders from.
 *
 *   spy_consumer *c;
 *   spy_consumer_desc d = {0};           // any provider, default features
 *   spy_consumer_create(&c, &d);
 *   for (;;) {
 *     spy_consumer_poll(c, 100);         // protocol + apply, <= 100 ms
 *     const spy_state *s = spy_consumer_state(c);
 *     printf("%.1f fps\n", spy_state_last(s, SPY_FIELD_FPS));
 *   }
 *   spy_consumer_destroy(c);
 *
 * The same API works in the provider's own process (an in-process panel)
 * and in another process: both go over the same channels.
 *
 * Discovery: provider:query on the discovery channel, re-sent with backoff
 * (500 ms doubling to 5000 ms, 10 attempts); the first announce (a user
 * provider preferred over a system one among announces that arrive
 * together) triggers a subscription, unless the desc names a provider by
 * id or name. A provider that starts later still connects by its own
 * announce. Heartbeat: ack every 1000 ms; with no message from the
 * provider for 5000 ms the consumer subscribes again, and if that brings
 * nothing either, or the provider says gone, it searches again. A
 * provider that dropped us (it heard no ack for its grace, say) while
 * others keep its channel busy answers our next ack with a ping naming
 * us: we subscribe again (counted in spy_state.sub_dropped).
 *
 * Clock sync: once connected to a provider, the consumer syncs its clock
 * with it (unless the desc says no_clock_sync): it creates the segment
 * spy_clock_segment_name(provider, consumer), posts a CLOCK request on the
 * data channel, and when the provider answers READY runs the rounds
 * (clock.h) inside spy_consumer_poll (tens of µs; at most clock_timeout_ms
 * if the provider dies mid-sync), stores the result in the state and
 * posts it as a CLOCK result. spy_consumer_clock_sync() does it again.
 * The segment file is removed when the sync ends, whatever the outcome.
 *
 * Message profile: a consumer whose features include SPY_FEAT_MSGPROF
 * makes the provider profile its transport; the state's `msgprof` then
 * holds the latest per-type summary (spy_state_msgprof).
 *
 * Threads: one consumer is used by one thread at a time. Ownership: the
 * consumer owns its state; spy_consumer_state() returns a view valid until
 * the next poll or destroy.
 */
#ifndef SPYGLASS_CONSUMER_H
#define SPYGLASS_CONSUMER_H

#include <stdint.h>

#include "spyglass/error.h"
#include "spyglass/profiler.h"
#include "spyglass/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spy_consumer spy_consumer;
struct spy_channel_ops;

typedef enum spy_conn {
  SPY_CONN_SEARCHING = 0,   /* no provider chosen yet */
  SPY_CONN_SUBSCRIBING = 1, /* subscribe sent, no ack yet */
  SPY_CONN_CONNECTED = 2,   /* receiving */
  SPY_CONN_LOST = 3         /* provider went away; searching again */
} spy_conn;

/* One accumulated value (environment, registry or buffer metadata). */
typedef struct spy_state_entry {
  char name[SPY_KEY_MAX + 1];
  spy_value value; /* strings point into `text` */
  char *text;      /* owned copy of a string value */
  uint32_t text_cap;
  uint8_t has_value;   /* 0: metadata only (outside the registry filter) */
  uint64_t updated_ms; /* consumer's monotonic ms of the last change */
} spy_state_entry;

typedef struct spy_state_table {
  spy_state_entry *e;
  uint32_t n, cap;
} spy_state_table;

typedef enum spy_field {
  SPY_FIELD_FPS = 0,
  SPY_FIELD_CPU_MS = 1,
  SPY_FIELD_GPU_MS = 2,  /* NAN: not available */
  SPY_FIELD_COUNTER0 = 3 /* counter c is SPY_FIELD_COUNTER0 + c */
} spy_field;

/* One message type's row of the provider's message profile. */
typedef struct spy_state_msgprof_row {
  uint32_t type;                   /* spy_msg_type (0: types folded together) */
  uint64_t count, errors, bytes;   /* since the provider's profiler reset */
  double msgs_per_s, bytes_per_s;  /* over the last second of the provider's
                                      clock (since the reset until one
                                      second has passed) */
  spy_msgprof_ns encode, post;     /* mean / p50 / p99 / max, ns */
  uint64_t base_count, base_bytes; /* rate bookkeeping */
} spy_state_msgprof_row;

#define SPY_STATE_MSGPROF_ROWS 16

/* The latest MSGPROF summary the provider published (a copy). For the
 * offload transport `post` is the hand-off to the worker's queue; for the
 * inline transport it is the channel post itself. */
typedef struct spy_state_msgprof {
  uint64_t updated_ms; /* consumer monotonic ms of the last one; 0: none */
  uint64_t messages, errors; /* all types */
  uint64_t elapsed_ns;       /* since the provider's profiler reset */
  uint32_t flags;            /* SPY_MSGPROF_NO_SIZE */
  uint32_t n;                /* rows filled, ascending type */
  uint32_t rows_dropped;     /* types beyond SPY_STATE_MSGPROF_ROWS */
  uint64_t base_elapsed_ns;  /* rate bookkeeping */
  int rate_rolled;
  spy_state_msgprof_row rows[SPY_STATE_MSGPROF_ROWS];
} spy_state_msgprof;

/* ---- CPU zones (SPY_FEAT_ZONES; zones.h, docs/wire.md ZONES) ---------- *
 * The state rebuilds every thread's nested spans from the zone events:
 * spans in begin order with their depth, kept for the last `keep_frames`
 * provider frames (at most `keep_spans` per thread), the frame markers,
 * the locations by id, and, once someone asks for them
 * (spy_state_zone_last_second, spy_state_zones_sums), per location the
 * calls, total, self and longest time of each second. Times are the
 * provider's CLOCK_MONOTONIC nanoseconds; spy_state_zone_local_ns() maps
 * one to this consumer's clock with the clock-sync offset. After a gap in
 * the provider's frames the open zones are closed as cut (their ends were
 * lost) and rebuilding goes on exactly from the next begin. The span
 * rings are allocated as they fill (then reused: nothing is allocated per
 * span). */
#define SPY_ZONE_SPAN_CUT 0x1u /* end lost (gap, thread reset) */
typedef struct spy_zone_span {
  uint64_t start_ns, end_ns; /* end_ns 0 while open */
  uint32_t loc;              /* location id: spy_state_zone_loc() */
  uint16_t depth;            /* 0: outermost */
  uint16_t flags;            /* SPY_ZONE_SPAN_* */
} spy_zone_span;

typedef struct spy_zone_sums {
  uint64_t calls, total_ns, self_ns, max_ns;
} spy_zone_sums;

typedef struct spy_zone_location {
  uint32_t id, line, color;
  char *name, *function, *file; /* owned, NUL-terminated */
} spy_zone_location;

#define SPY_ZONE_DEPTH_MAX 1024u /* deeper zones are counted, not kept */
typedef struct spy_zone_thread {
  uint32_t thread, os_tid; /* provider-local number, OS thread id */
  char name[64];
  int gone;         /* the thread exited */
  uint64_t dropped; /* zones the provider dropped on it (total) */
  /* Spans in begin order: a ring of cap (a power of two), n held; span
   * number a (absolute, from 0) is at spans[a & (cap - 1)]; `first` is the
   * oldest held, at `start`. */
  spy_zone_span *spans;
  uint32_t cap, n, start;
  uint64_t first;
  /* Open zones, innermost last: absolute span number, and (while the
   * sums are kept) the children's time, child_ns[d + 1] for depth d. */
  uint64_t *open;
  uint64_t *child_ns;
  uint32_t depth, open_cap, too_deep;
  uint64_t unmatched; /* ends whose begin this state never saw */
} spy_zone_thread;

typedef struct spy_zone_frame {
  uint64_t frame;    /* the provider's frame number */
  uint64_t start_ns; /* its frame_begin */
} spy_zone_frame;

#define SPY_ZONE_FRAMES_MAX 256u
typedef struct spy__zone_sum spy__zone_sum; /* zones_state.c */
typedef struct spy_zone_state {
  uint32_t keep_frames;     /* default 16 (at most SPY_ZONE_FRAMES_MAX - 1) */
  uint32_t keep_spans;      /* per thread; default 65536 */
  spy_zone_location **locs; /* by id - SPY_ZONES_LOC_ID_MIN; NULL: unknown */
  uint32_t n_locs;          /* slots in locs */
  spy_zone_thread *threads;
  uint32_t n_threads, threads_cap;
  spy_zone_frame frames[SPY_ZONE_FRAMES_MAX]; /* ring, newest at head - 1 */
  uint32_t n_frames, frames_head;
  uint64_t latest_ns; /* the newest event time seen */
  uint64_t events, spans, unmatched, cut, dropped;
  uint64_t seen_lost; /* frames_lost when last looked at */
  uint64_t *scratch;  /* one section's unpacked events (internal) */
  size_t scratch_cap; /* words */
  /* Per-location sums (internal): kept from second sums_from on. */
  int sums_on;
  uint64_t sums_from;
  spy__zone_sum *sums; /* n_locs slots, like locs */
} spy_zone_state;

/* ---- images (buffer:raw / buffer:chunk; buffers.h, codec.h) ----------- *
 * The latest display-ready RGBA8 image of each buffer the provider sent,
 * with the provider frame it was read on. buffer:raw frames replace it;
 * buffer:chunk frames are decoded with the registered codec (codec.h):
 * after a join, a gap in the provider's frames or a decode error, chunks
 * are skipped until a key frame. A payload sent in parts is put together
 * first (a part missing: the payload is dropped and counted). Without a
 * registered codec, chunks are counted in `undecodable` and skipped. */
typedef struct spy_state_image {
  char name[SPY_KEY_MAX + 1];
  uint64_t frame;       /* provider frame of the image; valid if rgba */
  uint64_t captured_ms; /* provider wall clock at the capture */
  uint64_t updated_ms;  /* consumer monotonic ms */
  uint32_t width, height;
  uint16_t pixel_type; /* the source's spy_pixel_type */
  uint8_t display;     /* spy_display_mode it was converted with */
  uint16_t codec;      /* spy_codec it arrived in */
  /* The variant (spy_pixels.variant_*): an image per buffer and variant
   * (a recording sees every subscriber's); mode 0 = the provider did not
   * say (one image per buffer). */
  uint8_t mode;
  uint16_t long_edge;
  uint8_t *rgba;   /* width * height * 4 bytes, owned; NULL: none yet */
  uint64_t images; /* images completed */
  uint64_t chunks, key_frames, skipped, decode_errors, parts_lost;
  int waiting_key; /* stream: chunks skipped until the next key frame */
  /* internal: the decoder and the payload being put together */
  void *dec;
  const void *dec_ops;
  uint8_t *part;
  uint32_t part_len, part_total, part_cap;
  uint64_t part_frame;
  uint32_t rgba_cap;
} spy_state_image;

/* ---- the batch list and pass tree (drawlist.h) ------------------------ *
 * Each list as the provider last sent it (it sends one only when it
 * changed); names cut to 63 bytes. */
typedef struct spy_state_batch {
  char kind[64], key[64];
  uint32_t instances, draws;
} spy_state_batch;
typedef struct spy_state_pass {
  char label[64];
  uint16_t parent; /* SPY_PASS_ROOT or an earlier index */
  uint32_t draws, triangles;
  double cpu_ms;
} spy_state_pass;

/* ---- live build progress (SPY_FEAT_TRACE; wire.h BUILD) -------------- *
 * The provider's latest BUILD section whole, and a summary of each build
 * that ended (the last SPY_BUILD_HISTORY, oldest first). */
#define SPY_BUILD_HISTORY 16u
typedef struct spy_build_done {
  uint32_t build, modules;
  uint64_t started_us, ended_us, hook_calls, hook_us;
} spy_build_done;
typedef struct spy_build_state {
  uint64_t sections;      /* BUILD sections applied */
  spy_build_progress cur; /* the latest (cur.build 0: none yet) */
  spy_build_done done[SPY_BUILD_HISTORY];
  uint32_t n_done;
} spy_build_state;

typedef struct spy_state {
  spy_conn conn;
  spy_provider_info provider; /* name points into provider_name */
  char provider_name[SPY_NAME_MAX + 1];
  uint64_t connected_ms, last_msg_ms; /* consumer monotonic ms */
  /* Stats history: per-field rings of `history` samples, newest last. */
  uint32_t history;      /* capacity */
  uint32_t len;          /* samples held */
  uint32_t head;         /* index of the next write */
  float *rings;          /* [3 + SPY_STATS_MAX_COUNTERS][history] */
  uint64_t samples;      /* samples received in total */
  uint64_t last_frame;   /* provider frame key of the newest sample */
  uint64_t samples_lost; /* gaps in frame keys (provider drops) */
  float batch_mean[3];   /* fps, cpu, gpu means of the last batch */
  char counter_names[SPY_STATS_MAX_COUNTERS][SPY_KEY_MAX + 1];
  uint32_t n_counters;
  spy_state_table env, registry, buffers;
  /* Every variant each buffer serves (BUFFER_VARIANTS: a BLOB per buffer
   * name, read with spy_buffer_variants_decode; `buffers` names one). */
  spy_state_table buffer_variants;
  uint64_t health[SPY_HEALTH_FIELD_COUNT];
  /* Bookkeeping */
  uint64_t frames_received, bytes_received;
  uint64_t frames_lost;                   /* bus overruns and sequence gaps */
  uint64_t resyncs;                       /* resync requests sent */
  uint64_t snapshots;                     /* full snapshots applied */
  uint64_t malformed;                     /* frames rejected by the decoder */
  uint64_t subscribes;                    /* subscribe messages sent */
  uint64_t reconnects;                    /* times a provider was lost */
  double rx_frames_per_s, rx_bytes_per_s; /* over the last second */
  /* Times the provider said it no longer had us as a subscriber (it
   * judged us dead, or was full) while we thought we were connected; we
   * subscribed again each time. */
  uint64_t sub_dropped;
  /* Clock sync: provider clock − ours, when synced, so a provider
   * timestamp t is t − clock_offset_ns on our clock. */
  int64_t clock_offset_ns;
  int clock_synced;
  /* What this state keeps: frames on a shared channel carry the union of
   * every subscriber's features. 0 = everything (recordings). */
  uint32_t features;
  int registry_filter; /* 1: only registry_names get values */
  const char *const *registry_names;
  uint32_t n_registry_names;
  /* Clock sync, continued: the round trip of the round the offset came
   * from, rounds run, when (consumer monotonic ms), syncs done and
   * failed, and the last failure's error (0 if the last sync worked). */
  int64_t clock_rtt_ns;
  uint32_t clock_rounds;
  uint64_t clock_synced_ms;
  uint64_t clock_syncs, clock_failures;
  int clock_error;
  /* The provider's message profile (SPY_FEAT_MSGPROF). */
  spy_state_msgprof msgprof;
  /* CPU zones (SPY_FEAT_ZONES). */
  spy_zone_state zones;
  /* Images of buffers (buffer:raw, buffer:chunk). */
  spy_state_image *images;
  uint32_t n_images, images_cap;
  uint64_t undecodable; /* chunks of a codec no one registered */
  /* Which buffers this state decodes: a live consumer sets the filter to
   * its own requests (the channel carries every subscriber's buffers);
   * frames of any other buffer, or of another variant of it (mode,
   * display, long edge), are counted in images_ignored, neither copied
   * nor decoded. 0 = every buffer and variant (recordings). At most 128
   * images are kept (32 buffers x 4 variants); frames of more are
   * counted in images_ignored too. */
  int image_filter;
  const spy_buffer_request *image_names;
  uint32_t n_image_names;
  uint64_t images_ignored;
  /* The batch list and pass tree (SPY_FEAT_BATCHES, SPY_FEAT_PASSES):
   * versions as the provider numbered them, lists received. */
  spy_state_batch *batches;
  uint32_t n_batches, batches_version;
  spy_state_pass *passes;
  uint32_t n_passes, passes_version;
  uint64_t batch_lists, pass_lists;
  /* Live build progress of a traced build (SPY_FEAT_TRACE). */
  spy_build_state builds;
} spy_state;

typedef struct spy_consumer_desc {
  const char *want;    /* provider id (16 hex digits) or name; NULL any */
  uint32_t features;   /* 0 = STATS | ENV | REGISTRY | HEALTH */
  int registry_filter; /* 1: only the names below (possibly none) */
  const char *const *registry;
  uint32_t n_registry;
  const spy_buffer_request *buffers;
  uint32_t n_buffers;
  const char *dir;  /* runtime directory; NULL = default */
  uint32_t history; /* samples kept per field; default 600 */
  /* Timings, milliseconds (defaults as in the header comment). */
  uint32_t query_initial_ms, query_max_ms, query_attempts;
  uint32_t ack_ms, liveness_ms, stale_ms;
  uint32_t recv_bytes; /* largest frame accepted; default 1 MiB */
  /* Clock sync. */
  int no_clock_sync;         /* 1: do not sync on connect (default: do) */
  uint32_t clock_rounds;     /* rounds per sync; default 5, at most 64 */
  uint32_t clock_timeout_ms; /* wait for READY, and per round; default 1000 */
  /* CPU zones (with SPY_FEAT_ZONES in features): frames of spans kept
   * (default 16) and spans kept per thread (default 65536, rounded up to
   * a power of two). */
  uint32_t zone_frames, zone_spans;
  /* Remote: reach the providers of another host through its bridge
   * (`spyglass serve`, or a provider's in-process server) at "HOST:PORT"
   * instead of this host's bus; everything above the channels is the
   * same. token: the bridge's (needed off its loopback). The link backend
   * is `remote`, else the process's registered one (spyglass/net.h
   * spy_net_register); with neither, create fails with SPY_ENOTSUP. The
   * clock is then synced over the link (median-RTT round of clock_rounds)
   * with the bridge's host, which is the provider's. */
  const char *connect;
  const char *token;
  const struct spy_channel_ops *remote;
  /* Recordings: called on the polling thread with every DATA frame from
   * the provider, right after it was applied to the state (the frame's
   * bytes are valid only during the call). NULL: none. */
  void (*on_data)(void *user, const spy_frame *f, const spy_state *s);
  void *on_data_user;
  /* Recordings: called (with on_data_user) with every buffer:raw /
   * buffer:chunk frame from the provider INSTEAD of applying it to the
   * state's images: a recorder keeps the bytes, decoding them would be
   * wasted work. NULL: the state's images get them. */
  void (*on_pixels)(void *user, const spy_frame *f, const spy_state *s);
} spy_consumer_desc;

/* Creates a consumer and starts searching. Errors: SPY_EINVAL,
 * SPY_ENOMEM, SPY_EOWNER or a channel error. */
int spy_consumer_create(spy_consumer **out, const spy_consumer_desc *desc);
/* Unsubscribes (if connected) and frees. NULL is accepted. */
void spy_consumer_destroy(spy_consumer *c);
/* Runs the protocol for up to timeout_ms (0: only what is pending): sends
 * queries, subscribes, acks, applies every frame received. Returns the
 * number of frames applied (>= 0) or a negative error. */
int spy_consumer_poll(spy_consumer *c, int timeout_ms);
const spy_state *spy_consumer_state(const spy_consumer *c);
/* This consumer's id. */
uint64_t spy_consumer_id(const spy_consumer *c);
/* Asks the provider for a full snapshot now. */
int spy_consumer_resync(spy_consumer *c);
/* Replaces the buffers this consumer asks for (copied; at most
 * SPY_SUB_MAX_NAMES) and, when subscribed, subscribes again with them
 * (the provider answers with a full snapshot and key frames). For a
 * consumer that learns the names from the provider's BUFFERS metadata.
 * Not from inside on_data / on_pixels. Returns 0, SPY_EINVAL or
 * SPY_ENOMEM (the old list kept), or the post's error. */
int spy_consumer_set_buffers(spy_consumer *c, const spy_buffer_request *b,
                             uint32_t n);
/* Syncs the clock with the connected provider now (again), processing the
 * channels meanwhile, and stores the result in the state (clock_offset_ns,
 * clock_rtt_ns, clock_synced). Blocks for the sync: normally a few ms
 * (the provider's answer comes at its next service tick), at most about
 * twice clock_timeout_ms. Returns 0, SPY_EGONE (not connected),
 * SPY_ETIMEDOUT (the provider did not answer, or stopped answering: the
 * consumer goes on as before), or a segment error. */
int spy_consumer_clock_sync(spy_consumer *c);

/* Reading the state */
/* The sample `age` back from the newest (0 = newest) of a field; NAN if
 * there is none. */
float spy_state_sample(const spy_state *s, uint32_t field, uint32_t age);
static inline float spy_state_last(const spy_state *s, uint32_t field) {
  return spy_state_sample(s, field, 0);
}
/* The entry named `name` in a table, or NULL. */
const spy_state_entry *spy_state_find(const spy_state_table *t,
                                      const char *name);
/* 1 if the entry has not changed for stale_ms (a value not refreshed). */
int spy_state_is_stale(const spy_consumer *c, const spy_state_entry *e);
/* Index of a counter by name, or -1. */
int spy_state_counter(const spy_state *s, const char *name);
/* The message-profile row of a message type, or NULL. */
const spy_state_msgprof_row *spy_state_msgprof_type(const spy_state *s,
                                                    uint32_t type);

/* CPU zones. The location with this id, or NULL (not known yet). */
const spy_zone_location *spy_state_zone_loc(const spy_state *s, uint32_t id);
/* Span i (0 = the oldest kept) of a thread, or NULL past the end. */
const spy_zone_span *spy_zone_thread_span(const spy_zone_thread *t, uint32_t i);
/* The frame `age` back from the newest (0): its number, start and end
 * (the next frame's start; 0 for the newest). 1, or 0 if there is none. */
int spy_state_zone_frame(const spy_state *s, uint32_t age, uint64_t *frame,
                         uint64_t *start_ns, uint64_t *end_ns);
/* A location's sums over the last complete second of the provider's clock
 * (zero if it was not called then). The state keeps these sums only once
 * asked: the first call switches them on (it writes that to the state,
 * the one thing a reader of the state changes; same thread as the polls),
 * and returns zeros until a whole second has been summed. */
spy_zone_sums spy_state_zone_last_second(const spy_state *s,
                                         const spy_zone_location *l);
/* Keeps the per-location sums from now on (on) or not; off by default,
 * switched on by spy_state_zone_last_second. Keeping them costs applying
 * a few ns per span. */
void spy_state_zones_sums(spy_state *s, int on);
/* A provider time on this consumer's monotonic clock (clock_offset_ns). */
static inline int64_t spy_state_zone_local_ns(const spy_state *s,
                                              uint64_t provider_ns) {
  return (int64_t)provider_ns - s->clock_offset_ns;
}
/* Sets what the zone state keeps (0: the default); for states made with
 * spy_state_init (a consumer takes them from its desc). */
void spy_state_zones_keep(spy_state *s, uint32_t frames, uint32_t spans);

/* Applying frames without the protocol (recordings, tests): a state of
 * `history` samples, frames applied in order. */
int spy_state_init(spy_state *s, uint32_t history);
void spy_state_free(spy_state *s);
/* Applies one decoded DATA frame: absent = keep, cleared = reset, present
 * = replace; FULL lists replace the whole table. Returns 0 or the decode
 * error of the first malformed section (nothing of that section is
 * applied). now_ms stamps updated entries. */
int spy_state_apply(spy_state *s, const spy_frame *f, uint64_t now_ms);
/* Applies one decoded buffer:raw or buffer:chunk frame to the images.
 * Returns 0 or the decode error (SPY_EBADSECTION, SPY_EBADVALUE,
 * SPY_ENOMEM); a chunk skipped while waiting for a key frame is 0. */
int spy_state_apply_pixels(spy_state *s, const spy_frame *f, uint64_t now_ms);
/* Frames were lost: every stream waits for its next key frame. */
void spy_state_pixels_gap(spy_state *s);
/* The image of a buffer, or NULL (none received). Valid until the next
 * poll / apply. With several variants of the buffer (image_filter 0), the
 * first one received. */
const spy_state_image *spy_state_image_find(const spy_state *s,
                                            const char *name);
/* The image of one variant of a buffer: the one a request `r` (name, mode,
 * display, long_edge) gets, or NULL. */
const spy_state_image *
spy_state_image_find_variant(const spy_state *s, const spy_buffer_request *r);

#ifdef __cplusplus
}
#endif
#endif
