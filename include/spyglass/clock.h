/* clock.h — clock sync between two parties over a small shared segment,
 * so timestamps taken by several threads or processes land on one
 * timeline.
 *
 * Two parties share a 48-byte segment: two threads (an anonymous shared
 * mapping), or two processes on one host (a named segment in the spyglass
 * runtime directory). The initiator runs N rounds (default 5) of an
 * NTP-style exchange: it reads its clock (t0) and raises a request, the
 * peer reads its own clock (t_peer), stores it and answers, the initiator
 * reads its clock again (t1). Each round gives
 *
 *     offset = (t0 + t1) / 2 − t_peer        rtt = t1 − t0
 *
 * and the round with the median RTT is returned, its offset and RTT
 * together, with the number of rounds run. The offset is "initiator clock
 * minus peer clock": a peer timestamp tp is tp + offset on the initiator's
 * timeline. The formula assumes the request and the answer take equally
 * long; the low-RTT rounds are the least lopsided, which is why the
 * median-RTT round is kept rather than the mean.
 *
 * Waiting: each side spins on the shared word (a few µs, then yielding
 * the CPU between checks, up to spin_us), then sleeps on it with a futex;
 * a side that changes a word wakes the other if it sleeps (futex wake both
 * ways). Every wait has a deadline: a peer that is gone
 * gives SPY_ETIMEDOUT, never a hang. A segment whose magic, version or
 * size is wrong gives SPY_EBADSEGMENT.
 *
 * Segment layout (native byte order: both parties are on one host):
 *   0  u32 magic "SPYC"   4 u16 version (1)   6 u16 size (48)
 *   8  u32 req    request counter, bumped by the initiator per round;
 *                 bit 31 set = "sync finished, result below"
 *   12 u32 ack    the peer copies req here once t_peer is written
 *   16 i64 t_peer the peer's clock at its answer (ns)
 *   24 i64 offset_ns, 32 u64 rtt_ns, 40 u32 rounds: the last result
 *   44 u32 waiters  which side sleeps on its futex word
 *
 * Thread-safety: one initiator and one peer per segment at a time; they
 * may share one handle (threads) or each open their own.
 */
#ifndef SPYGLASS_CLOCK_H
#define SPYGLASS_CLOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "spyglass/error.h"
#include "spyglass/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPY_CLOCK_SEG_BYTES 48u
#define SPY_CLOCK_MAGIC 0x43595053u /* "SPYC" little-endian */
#define SPY_CLOCK_VERSION 1u
#define SPY_CLOCK_DEFAULT_ROUNDS 5u
#define SPY_CLOCK_MAX_ROUNDS 64u
#define SPY_CLOCK_NAME_MAX 128u

typedef struct spy_clock_seg spy_clock_seg;

/* A clock: returns nanoseconds. */
typedef int64_t (*spy_clock_now_fn)(void *ctx);

typedef struct spy_clock_opts {
  uint32_t rounds;  /* sync: rounds to run; 0 = 5, at most 64 */
  int timeout_ms;   /* longest wait for the other party; 0 = 1000 */
  uint32_t spin_us; /* spin (yielding after 5 µs) before sleeping; 0 = 50 */
  /* Test hooks: this party's clock is now(now_ctx) (NULL: CLOCK_MONOTONIC)
   * plus test_offset_ns. */
  spy_clock_now_fn now;
  void *now_ctx;
  int64_t test_offset_ns;
  /* Non-NULL: a flag another thread of this process may set to abandon
   * the wait (a sleeping party checks it at least every 20 ms); the call
   * then returns SPY_ECANCELED. For a server thread that must stop. */
  const _Atomic int *cancel;
} spy_clock_opts;

/* One round as measured by the initiator. */
typedef struct spy_clock_round {
  int64_t offset_ns;
  int64_t rtt_ns;
} spy_clock_round;

typedef struct spy_clock_result {
  int64_t offset_ns; /* initiator − peer, from the median-RTT round */
  int64_t rtt_ns;    /* that same round's RTT */
  uint32_t rounds;   /* rounds run */
  uint32_t chosen;   /* index of the round kept (0-based) */
} spy_clock_result;

/* CLOCK_MONOTONIC in ns: the clock both parties use by default. */
int64_t spy_clock_now_ns(void);

/* Creates a segment. name NULL: an anonymous shared mapping, for two
 * threads of this process (or a fork child). Otherwise a named segment
 * <runtime dir>/<name>.clock (name: [A-Za-z0-9._:-], 1..128 bytes) that
 * another process opens with spy_clock_open(); it appears fully
 * initialised or not at all, and replaces a stale one of the same name.
 * The runtime directory is resolved as bus.h describes ($SPYGLASS_DIR,
 * else $XDG_RUNTIME_DIR/spyglass, else /dev/shm/spyglass-<uid> on tmpfs,
 * else /tmp/spyglass-<uid>; mode 0700, owner checked) unless `dir` is
 * given. Errors: SPY_EINVAL (bad name), SPY_EOWNER, SPY_ENAMETOOLONG,
 * SPY_ENOMEM or a system error. Free with spy_clock_close(), which also
 * removes a named segment this call created. */
int spy_clock_create(spy_clock_seg **out, const char *name, const char *dir);

/* Opens a named segment created by another party. Errors: SPY_ENOENT (not
 * there yet), SPY_EBADSEGMENT (wrong size, magic or version), SPY_EOWNER
 * (the file or directory belongs to someone else), SPY_EINVAL, or a
 * system error. Free with spy_clock_close() (the segment stays). */
int spy_clock_open(spy_clock_seg **out, const char *name, const char *dir);

/* Unmaps the segment; removes its file if this handle created it. NULL is
 * accepted. */
void spy_clock_close(spy_clock_seg *s);

/* Removes the named segment's file (the mappings of parties that have it
 * open stay valid): the survivor's cleanup when its creator died before
 * closing it. Errors: SPY_ENOENT (not there), SPY_EINVAL (bad name),
 * SPY_EOWNER, or a system error. */
int spy_clock_remove(const char *name, const char *dir);

/* The initiator's side: runs o->rounds rounds (opts may be NULL), fills
 * *out from the median-RTT round and publishes the result in the segment
 * for the peer. If most rounds of one sync were disturbed (a party
 * preempted), even the median round is lopsided and its rtt_ns is large:
 * where it matters, run a few syncs and keep the median offset, or the
 * offset of the lowest-RTT sync. Errors: SPY_ETIMEDOUT (the peer did not answer
 * within timeout_ms: it is gone or stuck), SPY_EBADSEGMENT, SPY_EINVAL. */
int spy_clock_sync(spy_clock_seg *s, const spy_clock_opts *o,
                   spy_clock_result *out);

/* The peer's side of one sync: answers rounds until the initiator
 * publishes its result, then returns the number of rounds answered (> 0).
 * Waits at most timeout_ms for each request (SPY_ETIMEDOUT). Blocks:
 * call it on a thread that may wait. Errors also SPY_EBADSEGMENT,
 * SPY_EINVAL. */
int spy_clock_serve(spy_clock_seg *s, const spy_clock_opts *o);

/* The result the initiator last published (for the peer: its own clock is
 * its timestamp + offset_ns on the initiator's timeline). SPY_ENOENT if no
 * sync has finished yet; SPY_EBADSEGMENT. */
int spy_clock_read_offset(const spy_clock_seg *s, spy_clock_result *out);

/* Picks the round with the median RTT (the lower median for an even n;
 * the earliest among equal RTTs) into *out. Errors: SPY_EINVAL if n is 0
 * or above SPY_CLOCK_MAX_ROUNDS. Pure: exposed for tests and for callers
 * that run their own exchange. */
int spy_clock_pick_median(const spy_clock_round *rounds, uint32_t n,
                          spy_clock_result *out);

/* The segment name a consumer and a provider use for their sync:
 * "clock-<provider id>-<consumer id>" in hex. Returns its length or
 * SPY_ENAMETOOLONG. */
int spy_clock_segment_name(uint64_t provider_id, uint64_t consumer_id,
                           char *buf, size_t cap);

/* ------------------------------------------------------------------------ */
/* CLOCK section (SPY_SEC_CLOCK = 13) in a clock message (SPY_MSG_CLOCK =
 * 20), how a consumer arranges a sync with a provider over the bus:
 *   REQUEST  consumer → provider: "open the segment named
 *            spy_clock_segment_name(provider, consumer) and serve a sync"
 *   READY    provider → consumer: "I am serving it"
 *   RESULT   consumer → provider (and recorders): the offset it found
 *
 *   u8 op, u8 rounds, u16 0, u32 0, u64 provider, u64 consumer,
 *   i64 offset_ns, u64 rtt_ns                               (40 bytes)
 */
#define SPY_CLOCK_SECTION_BYTES 40u

typedef enum spy_clock_op {
  SPY_CLOCK_OP_REQUEST = 1,
  SPY_CLOCK_OP_READY = 2,
  SPY_CLOCK_OP_RESULT = 3
} spy_clock_op;

typedef struct spy_clock_msg {
  uint8_t op;     /* spy_clock_op */
  uint8_t rounds; /* REQUEST: rounds planned; RESULT: rounds run */
  uint64_t provider, consumer;
  int64_t offset_ns; /* RESULT only, else 0 */
  int64_t rtt_ns;    /* RESULT only, else 0 */
} spy_clock_msg;

void spy_put_clock(spy_frame_writer *w, const spy_clock_msg *m);
/* Errors: SPY_EBADSECTION (length not 40), SPY_EBADVALUE (unknown op,
 * rounds over 64, negative RTT). */
int spy_get_clock(const spy_section *s, spy_clock_msg *out);

#ifdef __cplusplus
}
#endif
#endif
