/* profiler.h — the message profiler: what encoding a frame and posting it
 * through a transport costs, per message type.
 *
 * Two ways in:
 *   - spy_profiler_measure() encodes one message into the profiler's own
 *     scratch buffer, posts nothing, and records the encode time and the
 *     exact frame size. Use it on a representative message to characterise
 *     a type without touching the live path.
 *   - spy_profiler_wrap() swaps a transport's ops table for one that times
 *     every post (and asks encoders, through spy_transport.timing_wanted, to
 *     time their encode into spy_buffer.encode_ns). spy_profiler_unwrap()
 *     puts the transport back exactly as it was.
 *
 * Every measured message becomes a spy_msg_record in a ring of a
 * power-of-two capacity (default 256, allocated at create), optionally
 * handed to a callback, and folded into per-type totals. Nothing is
 * allocated after spy_profiler_create().
 *
 * A message that cannot be encoded is recorded with SPY_MSGREC_ERROR and
 * zero cost, and the profiler never turns a caller's success into a
 * failure: a wrapped post returns exactly what the original post returned.
 *
 * Overhead, measured with `spyglass bench msgprof` on the 2-core
 * development VM (medians; "post" is acquire + encode + post, and the post
 * goes through an in-bench transport that copies the frame into a ring, so
 * it is one memcpy; the real transport's post costs more, which makes these
 * ratios upper bounds):
 *
 *   message                      unwrapped   wrapped          measure() alone
 *   stats flush, 10,832 bytes    789 ns      995 ns (1.26×)   470 ns (0.60×)
 *   buffer:raw, 1 MiB            73.5 µs     74.5 µs (1.01×)  35.2 µs (0.48×)
 *
 * A wrapped post adds a fixed 140–230 ns whatever the message size: four
 * clock reads (31–35 ns each here: two by the encoder, two around the
 * post) and one record under a mutex. (The 1 MiB ratio is bandwidth noise:
 * 0.90–1.15 over twelve runs, mostly 1.00–1.05.) Unlike the browser library
 * this follows, wrap() does not encode a message twice to separate encode from
 * post, which doubled the cost of a large message there: the encoder times
 * itself because the wrapped transport asks it to. measure() encodes once into
 * the profiler's scratch buffer and posts nothing, for about 100 ns more than
 * the bare encode. So: wrap a transport for the session you investigate and
 * unwrap it after; call measure() on one representative message to price a
 * type without touching the live path.
 *
 * Thread-safety: a profiler may record from several threads at once (posts
 * through several wrapped transports, measure() calls); recording takes
 * the profiler's mutex for the few stores of one record. messages(),
 * summary(), count() and reset() may be called from any thread.
 * wrap()/unwrap() change the transport's ops pointer, which is not atomic:
 * call them while no other thread is using that transport.
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

typedef struct spy_profiler_desc {
  uint32_t capacity;            /* records kept, a power of two; 0 = 256 */
  spy_msg_record_cb on_message; /* NULL = none */
  void *user;                   /* passed to on_message */
  int no_size;                  /* non-zero: size accounting off (0 = on) */
  /* measure()'s encode buffer; 0 = 256 KiB, at most SPY_FRAME_MAX. A
   * message that does not fit is recorded as an encode error (ENOBUFS). */
  uint32_t scratch_bytes;
  uint32_t max_wrapped; /* transports wrapped at once; 0 = 8 */
} spy_profiler_desc;

/* Creates a profiler. desc may be NULL (all defaults). Allocates the ring,
 * the scratch buffer (touched once so measure() never pays page faults)
 * and the wrapper slots. Errors: SPY_EINVAL (capacity not a power of two,
 * scratch over SPY_FRAME_MAX), SPY_ENOMEM. *out is NULL on failure. Free
 * with spy_profiler_destroy(). */
int spy_profiler_create(spy_profiler **out, const spy_profiler_desc *desc);

/* Unwraps every transport still wrapped (restoring it) and frees the
 * profiler. NULL is accepted. Must not race with posts through wrapped
 * transports. */
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

/* Makes every post through t measured. The profiler keeps t's original
 * ops pointer and timing_wanted flag, points t->ops at a table of its own
 * that forwards every op to the original (post timed; acquire clears the
 * buffer's encode_ns; dispose unwraps first), and sets t->timing_wanted.
 * The wrapper finds its profiler and the original table from t->ops alone
 * (each wrapped transport has its own table inside the profiler): no
 * global state; one profiler may wrap several transports and several
 * profilers may each wrap their own. A transport is wrapped by at most one
 * profiler at a time. A post whose buffer does not hold a frame of
 * exactly `len` bytes is forwarded and recorded with SPY_MSGREC_ERROR
 * (SPY_EBADHEADER) and zero cost; a failed post with
 * SPY_MSGREC_POST_FAILED and the transport's error.
 * Errors: SPY_EINVAL (NULL, or t has no ops), SPY_EEXIST (already wrapped
 * by this profiler), SPY_EBUSY (wrapped by another profiler), SPY_ENOSPC
 * (max_wrapped reached). */
int spy_profiler_wrap(spy_profiler *p, spy_transport *t);

/* Restores t->ops and t->timing_wanted to exactly what they were at
 * wrap(). Errors: SPY_ENOENT (not wrapped by this profiler), SPY_EBUSY
 * (another wrapper was put on top since: unwrap that one first). */
int spy_profiler_unwrap(spy_profiler *p, spy_transport *t);

/* Copies the ring's records, oldest first, into out (up to max: the most
 * recent max of them). Returns how many were copied. */
size_t spy_profiler_messages(spy_profiler *p, spy_msg_record *out, size_t max);

/* Messages recorded since create or the last reset (may exceed the ring's
 * capacity; errors included). */
uint64_t spy_profiler_count(spy_profiler *p);

/* Forgets every record and total. Wrapped transports stay wrapped. */
void spy_profiler_reset(spy_profiler *p);

/* Nanosecond figures of one cost over the messages of one type. */
typedef struct spy_msgprof_ns {
  uint64_t mean_ns, p50_ns, p99_ns, max_ns;
} spy_msgprof_ns;

/* Per-type summary. count, errors, bytes, mean and max cover every
 * message since the last reset; p50 and p99 cover those of this type
 * still in the ring (the last `capacity` messages). Means and
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

/* Fills *out (the caller's; a few KiB, may live anywhere). Sorts a copy of
 * the ring in buffers allocated at create; holds the profiler's mutex
 * meanwhile (a few µs at the default capacity). Types beyond
 * SPY_PROFILER_MAX_TYPES distinct ones are folded into type 0. */
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
