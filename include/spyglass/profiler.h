/* profiler.h — the message profiler: what encoding a frame and posting it
 * through a transport costs, per message type.
 *
 * Two ways in:
 *   - spy_profiler_measure() encodes one message into the profiler's own
 *     scratch buffer, posts nothing, and records the encode time and the
 *     exact frame size. Use it on a representative message to characterise
 *     a type without touching the live path.
 *   - spy_profiler_attach() sets the transport's profiler hook
 *     (transport.h): every post through it is then timed, and encoders time
 *     their own encode into spy_buffer.encode_ns because the transport says
 *     it is timed (spy_transport_timed()). spy_profiler_detach() clears the
 *     hook. The transport's ops are never swapped: attach and detach may
 *     happen at any time, while other threads post.
 *
 * Recording takes no lock and never waits: each recording thread writes
 * into a lane of its own (a single-producer ring, claimed once per thread;
 * `lanes` of them, `lane_capacity` records each, allocated at create). A
 * full lane, or a thread that finds no free lane, drops the record and
 * counts it (spy_profiler_dropped()). Whoever reads (summary(),
 * messages(), count(), reset()) first folds the lanes into a history ring
 * of `capacity` records and into per-type totals, so read at least once
 * every lane_capacity posts per thread to lose nothing. Nothing is
 * allocated after spy_profiler_create().
 *
 * A message that cannot be encoded is recorded with SPY_MSGREC_ERROR and
 * zero cost, and the profiler never turns a caller's success into a
 * failure: a hooked post returns exactly what the transport's post
 * returned.
 *
 * Overhead: `spyglass bench msgprof` posts through the real offload
 * transport with the hook set and clear, in one run; a hooked post adds
 * two clock reads around the post, two in the encoder, and one record into
 * the thread's lane (figures in the README).
 *
 * Thread-safety: recording (hooked posts on any threads, measure()) is
 * lock-free. The readers — messages(), summary(), count(), reset() — may
 * be called from any thread and serialise among themselves with a mutex
 * that recording never takes; with desc.single_reader they take no lock at
 * all and the caller promises that only one thread reads (the provider's
 * own profiler, read by its service only). attach()/detach() may be called
 * from any thread at any time. destroy() must come after the profiler is
 * detached from every transport it was attached to (or the transport was
 * disposed).
 */
#ifndef SPYGLASS_PROFILER_H
#define SPYGLASS_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#include "spyglass/error.h"
#include "spyglass/transport.h"
#include "spyglass/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spy_profiler spy_profiler;

/* Record flags. */
#define SPY_MSGREC_ERROR 0x01u       /* could not be encoded: costs are 0 */
#define SPY_MSGREC_POST_FAILED 0x02u /* the transport refused the post */
#define SPY_MSGREC_MEASURED 0x04u    /* from measure(), never posted */

/* One measured message. */
typedef struct spy_msg_record {
  uint64_t index;     /* 0, 1, 2 … since create or the last reset */
  uint64_t t_ns;      /* CLOCK_MONOTONIC when it was recorded */
  uint64_t encode_ns; /* time to encode the frame (0 if unknown or error) */
  uint64_t post_ns;   /* time spent in the transport's post (0: measure) */
  uint32_t type;      /* wire message type (spy_msg_type); 0 if unknown */
  uint32_t bytes;     /* exact frame length; 0 when size accounting is off
                         or on error */
  uint32_t flags;     /* SPY_MSGREC_* */
  int32_t err;        /* the encode or post error behind a flag, else 0 */
} spy_msg_record;

/* Called once per measured message, on the thread that measured or
 * posted it. `rec` is only valid during the call (it lives on that
 * thread's stack: nothing is allocated); copy what you keep. It must not
 * call back into the same profiler. */
typedef void (*spy_msg_record_cb)(const spy_msg_record *rec, void *user);

#define SPY_PROFILER_DEFAULT_CAPACITY 256u
#define SPY_PROFILER_DEFAULT_SCRATCH (256u * 1024u)
#define SPY_PROFILER_MAX_TYPES 64u

#define SPY_PROFILER_DEFAULT_LANES 8u

typedef struct spy_profiler_desc {
  uint32_t capacity;            /* history kept, a power of two; 0 = 256 */
  spy_msg_record_cb on_message; /* NULL = none */
  void *user;                   /* passed to on_message */
  int no_size;                  /* non-zero: size accounting off (0 = on) */
  /* measure()'s encode buffer; 0 = 256 KiB, at most SPY_FRAME_MAX. A
   * message that does not fit is recorded as an encode error (ENOBUFS). */
  uint32_t scratch_bytes;
  uint32_t lanes;         /* threads that may record; 0 = 8, at most 256 */
  uint32_t lane_capacity; /* records a lane holds between two reads, a
                             power of two; 0 = max(capacity, 256) */
  int single_reader;      /* non-zero: one thread reads, readers take no
                             lock (0 = readers lock among themselves) */
} spy_profiler_desc;

/* Creates a profiler. desc may be NULL (all defaults). Allocates the
 * history ring, the lanes and the scratch buffer (touched once so
 * measure() never pays page faults). Errors: SPY_EINVAL (capacity or
 * lane_capacity not a power of two, too many lanes, scratch over
 * SPY_FRAME_MAX), SPY_ENOMEM. *out is NULL on failure. Free with
 * spy_profiler_destroy(). */
int spy_profiler_create(spy_profiler **out, const spy_profiler_desc *desc);

/* Frees the profiler. NULL is accepted. Detach it from every transport
 * first (a transport still hooked would call into freed memory). */
void spy_profiler_destroy(spy_profiler *p);

/* The effective configuration (defaults resolved). */
void spy_profiler_get_desc(const spy_profiler *p, spy_profiler_desc *out);

/* A message to measure: its type and a function that writes its sections.
 * measure() starts the frame (header + FRAME section) in the scratch
 * buffer, calls encode(w, ctx), and finishes the frame; encode returns 0
 * or a negative error (errors left sticky in w count as well). */
typedef int (*spy_msg_encode_fn)(spy_frame_writer *w, void *ctx);
typedef struct spy_msg {
  uint32_t type; /* spy_msg_type */
  spy_msg_encode_fn encode;
  void *ctx;
} spy_msg;

/* Encodes msg once into the scratch buffer, posts nothing, and records it
 * (flag SPY_MSGREC_MEASURED). *out (may be NULL) receives the record. An
 * encode failure is not an error of this call: it returns 0 and the record
 * carries SPY_MSGREC_ERROR, err and zero cost. Returns SPY_EINVAL only for
 * a NULL profiler, message or encode function. Serialised with other
 * measure() calls on the same profiler (they share the scratch buffer). */
int spy_profiler_measure(spy_profiler *p, const spy_msg *msg,
                         spy_msg_record *out);

/* Sets t's profiler hook to this profiler: from the next post on, every
 * post through spy_transport_post(t, …) on any thread is timed and
 * recorded into the posting thread's lane. A post whose buffer does not
 * hold a frame of exactly `len` bytes is recorded with SPY_MSGREC_ERROR
 * (SPY_EBADHEADER) and zero cost; a failed post with
 * SPY_MSGREC_POST_FAILED and the transport's error. One profiler may be
 * attached to several transports; a transport has one profiler at a time.
 * Any thread, any time. Errors: SPY_EINVAL (NULL, or t has no ops),
 * SPY_EEXIST (already attached to t), SPY_EBUSY (another profiler is). */
int spy_profiler_attach(spy_profiler *p, spy_transport *t);

/* Clears t's hook, then waits until no post that saw it is still
 * recording (the length of one post; the caller spins, the posting
 * threads never wait). Not from inside on_message. Errors: SPY_EINVAL
 * (NULL), SPY_ENOENT (not attached to t). */
int spy_profiler_detach(spy_profiler *p, spy_transport *t);

/* 1 if p is t's hook now, else 0. */
int spy_profiler_attached(const spy_profiler *p, spy_transport *t);

/* The names of the first version: the same as attach() / detach(). */
int spy_profiler_wrap(spy_profiler *p, spy_transport *t);
int spy_profiler_unwrap(spy_profiler *p, spy_transport *t);

/* Copies the history's records, oldest first, into out (up to max: the
 * most recent max of them). Returns how many were copied. A record's
 * `index` is its place in the history (0, 1, 2 … in the order the lanes
 * were folded); in on_message, which runs before the fold, it counts the
 * calling thread's own records instead. */
size_t spy_profiler_messages(spy_profiler *p, spy_msg_record *out, size_t max);

/* Messages recorded since create or the last reset (may exceed the
 * history's capacity; errors included; dropped ones not). */
uint64_t spy_profiler_count(spy_profiler *p);

/* Records lost since create because a lane was full or no lane was free
 * for the recording thread. Any thread. */
uint64_t spy_profiler_dropped(spy_profiler *p);

/* Forgets every record and total (records still in lanes included).
 * Attached transports stay attached. */
void spy_profiler_reset(spy_profiler *p);

/* Nanosecond figures of one cost over the messages of one type. */
typedef struct spy_msgprof_ns {
  uint64_t mean_ns, p50_ns, p99_ns, max_ns;
} spy_msgprof_ns;

/* Per-type summary. count, errors, bytes, mean and max cover every
 * message since the last reset; p50 and p99 cover those of this type
 * still in the history (the last `capacity` messages). Means and
 * percentiles leave out errored messages; post figures leave out
 * measure() records (which have no post). */
typedef struct spy_msgprof_type {
  uint32_t type;
  uint64_t count;  /* messages, errors included */
  uint64_t errors; /* SPY_MSGREC_ERROR or SPY_MSGREC_POST_FAILED */
  uint64_t bytes;  /* total bytes (0 with size accounting off) */
  spy_msgprof_ns encode, post;
} spy_msgprof_type;

typedef struct spy_msgprof_summary {
  uint64_t messages; /* = spy_profiler_count() */
  uint64_t errors;
  uint64_t elapsed_ns; /* since create or the last reset */
  uint32_t flags;      /* SPY_MSGPROF_NO_SIZE */
  uint32_t n_types;    /* entries filled in `types` */
  spy_msgprof_type types[SPY_PROFILER_MAX_TYPES]; /* ascending type */
} spy_msgprof_summary;

#define SPY_MSGPROF_NO_SIZE 0x1u /* size accounting was off */

/* Fills *out (the caller's; a few KiB, may live anywhere). Folds the
 * lanes, then sorts a copy of the history in buffers allocated at create
 * (a few µs at the default capacity; under the readers' mutex unless
 * single_reader). Types beyond SPY_PROFILER_MAX_TYPES distinct ones are
 * folded into type 0. */
void spy_profiler_summary(spy_profiler *p, spy_msgprof_summary *out);

/* ------------------------------------------------------------------------ */
/* MSGPROF section (SPY_SEC_MSGPROF = 12): a summary on the wire, so a
 * provider can publish its transport's profile as a feature.
 *
 *   u32 n_types (≤ 64), u32 flags, u64 messages, u64 errors, u64 elapsed_ns
 *   n_types × (u32 type, u32 0, u64 count, u64 errors, u64 bytes,
 *              u64 encode mean, p50, p99, max,
 *              u64 post mean, p50, p99, max)               (96 bytes each)
 *
 * section_bytes must be exactly 32 + 96 · n_types. */
#define SPY_MSGPROF_HEAD_BYTES 32u
#define SPY_MSGPROF_ENTRY_BYTES 96u

/* Appends a MSGPROF section; errors are sticky in w (SPY_EINVAL if
 * n_types > SPY_PROFILER_MAX_TYPES). */
void spy_put_msgprof(spy_frame_writer *w, const spy_msgprof_summary *s);
/* Decodes a MSGPROF section into *out (copied: no views). Errors:
 * SPY_EBADSECTION (length does not match), SPY_EBADVALUE (too many types,
 * types not strictly ascending). */
int spy_get_msgprof(const spy_section *s, spy_msgprof_summary *out);

#ifdef __cplusplus
}
#endif
#endif
