/* bus.h — named broadcast channels on one host, in shared memory.
 *
 * The C counterpart of the browser's BroadcastChannel. A channel is a name;
 * every opener of that name (a thread or process of the same user on this
 * host) receives every frame any *other* opener posts to it. There is no
 * daemon.
 *
 * Each opener owns one single-producer ring in shared memory, listed in the
 * channel's directory under the per-user runtime directory. Posting copies
 * the frame once into the poster's own ring, so a post costs the same
 * whatever the number of readers and never waits for one. Receiving reads
 * every other opener's ring from a private cursor. A reader that falls
 * behind detects the overrun, counts the frames it lost and carries on from
 * the oldest frame still intact. A ring whose owner died (its lock is no
 * longer held) is removed by the next opener of any channel.
 *
 * Runtime directory: $SPYGLASS_DIR, else $XDG_RUNTIME_DIR/spyglass, else
 * /dev/shm/spyglass-<uid> when /dev/shm is a tmpfs, else
 * /tmp/spyglass-<uid>. It is created with mode 0700; an existing one must be
 * a real directory owned by this user and not accessible by others, or
 * every open fails with SPY_EOWNER.
 *
 * What a broken neighbour cannot do. The rings and the channel's control
 * page are sealed memfds, allocated in full at open (a system that cannot
 * back them fails the open with SPY_ENOSPC / SPY_ENOMEM) and sealed against
 * shrinking, so no process, whatever it does to the runtime directory, can
 * make a mapping fault: no SIGBUS, ever, and no signal handler installed.
 * The directory only holds one small entry file per opener saying where its
 * ring is; other openers of the same user reach the ring through
 * /proc/<pid>/fd (so a process must be able to ptrace-read the owner — same
 * user, same pid namespace, owner not made undumpable — to read its
 * frames). An entry is used only if it is a regular file of this user,
 * opened without following links or blocking (a FIFO or symlink planted
 * there is skipped and counted), and its checksum and the memory it names
 * pass their checks. Shared bytes that lie (a garbage header, random bytes
 * in records, a hole punched in a ring that reads as zeros) cost the reader a
 * resync and the frames in between, counted in `lost` and `corrupt`; never an
 * out-of-bounds access, a crash or a spin; a poster never reads its ring back,
 * so nothing written there can disturb it. Each opener re-creates the runtime
 * directory, the channel's directory and its entry within about a second of
 * their removal or damage (checked when it receives or waits, never when it
 * posts); readers that had it mapped resume exactly where they were. A full
 * file system makes spy_channel_open fail with SPY_ENOSPC (the entry cannot be
 * written); it does not disturb openers already running.
 *
 * Thread-safety: a spy_channel handle is used by one thread at a time
 * (post and receive may be on different threads only if the caller
 * serialises them); different handles, even on the same name in one
 * process, are independent.
 */
#ifndef SPYGLASS_BUS_H
#define SPYGLASS_BUS_H

#include <stddef.h>
#include <stdint.h>

#include "spyglass/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spy_channel spy_channel;
struct spy_channel_ops;

#define SPY_CHANNEL_NAME_MAX 128u
#define SPY_DISCOVERY_CHANNEL "spyglass"

typedef struct spy_channel_desc {
  const char *name;    /* required: [A-Za-z0-9._:-], 1..128 bytes */
  uint32_t ring_bytes; /* this opener's ring; 0 = 1 MiB; power of two,
                          64 KiB .. 256 MiB. The largest frame it can post
                          is ring_bytes / 4. */
  const char *dir;     /* runtime directory; NULL = the default above */
  /* Another backend for this handle (e.g. a link to `spyglass serve`, see
   * spyglass/net.h); NULL = the shared-memory bus. ops_arg is passed to
   * its open (for a link: the connection). */
  const struct spy_channel_ops *ops;
  void *ops_arg;
} spy_channel_desc;

/* Opens (creating if needed) the channel and this opener's ring.
 * Errors: SPY_EINVAL (bad name or ring size), SPY_EOWNER (runtime directory
 * owned by another user or accessible by others), SPY_ENOSPC (no room for
 * the ring's memory or the directory entry), SPY_ENOMEM, or a system
 * error. Free with spy_channel_close(). */
int spy_channel_open(spy_channel **out, const spy_channel_desc *desc);

/* Closes the handle and removes its ring; the last opener of a channel
 * removes the channel's directory. NULL is accepted. */
void spy_channel_close(spy_channel *ch);

/* Posts one frame (len bytes) to every other opener. Never blocks: the
 * frame is copied into this opener's ring (overwriting the oldest frames
 * if readers are behind) and sleeping readers are woken. Returns 0 or
 * SPY_ETOOBIG (len > ring_bytes / 4), SPY_EINVAL (len 0 or > SPY_FRAME_MAX).
 * The bytes are not interpreted. */
int spy_channel_post(spy_channel *ch, const void *frame, size_t len);

/* Posting in place: reserves room for a frame of up to max_len bytes in
 * this opener's ring and returns where to write it (max_len writable
 * bytes), or NULL (max_len 0, over ring_bytes / 4 or SPY_FRAME_MAX, or a
 * handle of another backend, which has no ring). spy_channel_post_commit
 * then posts the first len bytes written there, as spy_channel_post
 * would, without the copy: an encoder (spy_frame_writer) can write the
 * frame straight into the ring.
 *
 * Ownership: the bytes are shared memory. Readers treat the reserved
 * room as overwritten from the reserve on (the oldest frames there are
 * lost to a reader that had not read them yet), and another process of
 * the same user could write there too: store to it, never load back from
 * it (spy_frame_writer only stores). Valid until the commit; any other
 * post, reserve or close on the handle in between cancels it (and its
 * bytes must not be written after that: they may be another frame's).
 * Thread-safety: as spy_channel_post (one thread at a time per handle). */
void *spy_channel_post_reserve(spy_channel *ch, size_t max_len);

/* Posts the reserved frame's first len bytes (len <= max_len) to every
 * other opener and wakes sleeping readers; len 0 cancels (nothing is
 * posted). Returns 0, SPY_EINVAL (nothing reserved, or len > max_len:
 * nothing is posted) or SPY_ENOTSUP (another backend). */
int spy_channel_post_commit(spy_channel *ch, size_t len);

typedef struct spy_recv_info {
  uint64_t sender; /* id of the opener that posted it */
  uint64_t lost;   /* frames from this sender lost to overrun just before
                      this one (0 normally) */
  uint32_t len;    /* frame length (also set on SPY_ENOBUFS) */
} spy_recv_info;

/* Receives the next frame from any other opener into buf (cap bytes).
 * Waits up to timeout_ms (0: do not wait, < 0: forever) without spinning.
 * Returns the frame length (> 0); SPY_EAGAIN when the wait ended with no
 * frame; SPY_ENOBUFS if the next frame is larger than cap (it is skipped
 * and info->len says how large it was). info may be NULL. */
int spy_channel_recv(spy_channel *ch, void *buf, size_t cap, int timeout_ms,
                     spy_recv_info *info);

/* A frame received in place (spy_channel_recv_view): its bytes as they
 * lie in the sender's ring, read-only shared memory. The fields after
 * `len` are the handle's own. */
typedef struct spy_channel_view {
  const uint8_t *data; /* the frame */
  uint32_t len;        /* its length */
  uint32_t peer_;
  uint64_t at_;
  const void *ring_;
} spy_channel_view;

/* Receives the next frame like spy_channel_recv, without copying it:
 * view->data points into the sender's ring. Same waiting and return
 * values (never SPY_ENOBUFS: there is no buffer to be too small).
 *
 * Ownership and lifetime: the bytes belong to the sender, who never waits
 * for readers. They stay mapped until the next receive, wait or close on
 * this handle (posting in between is fine), but a sender that laps this
 * reader overwrites them, and a broken sender may write anything there
 * at any time. So a caller reads each byte it uses once (decode into its
 * own variables, then check those), never trusts a value it loaded twice
 * to be the same, and calls spy_channel_view_release() when done: only
 * if that returns 0 did every load made before it see the frame as
 * posted. Reading is always in bounds of the mapping, whatever the
 * sender does; view->len was checked against it.
 *
 * For a large frame that is decoded once (an image, a batch) this saves
 * the copy spy_channel_recv makes; for small frames it saves nothing.
 * Only the shared-memory bus has it: a handle opened with another
 * backend (desc->ops) returns SPY_ENOTSUP (use spy_channel_recv).
 * Thread-safety: as spy_channel_recv; the view may be read by any thread
 * until it is released. */
int spy_channel_recv_view(spy_channel *ch, spy_channel_view *view,
                          int timeout_ms, spy_recv_info *info);

/* Ends a view: 0 if the sender did not reach the frame's bytes since
 * spy_channel_recv_view returned it (what was read is what was posted);
 * SPY_EOVERRUN if it may have (discard whatever was decoded from it; the
 * frame is counted in `lost`); SPY_EINVAL if the view is not this
 * handle's latest. */
int spy_channel_view_release(spy_channel *ch, spy_channel_view *view);

/* Waits up to timeout_ms (0: just check, < 0: forever) until a frame is
 * waiting, without taking it. Returns 1 if one is, 0 if not. For a reader
 * that wants to drain with its own logic after the wait. Not for use with
 * spy_channel_fd on the same handle. */
int spy_channel_wait(spy_channel *ch, int timeout_ms);

/* A file descriptor that becomes readable when frames may be waiting, for
 * an event loop (poll/epoll). After it polls readable, call
 * spy_channel_recv(…, 0, …) until SPY_EAGAIN: that drains the fd and
 * re-arms it. No thread: the fd is a datagram socket (an abstract Unix
 * name made of the uid and this opener's id) and the SPY_EAGAIN arms a
 * slot in the channel's control page; the next post by another opener
 * clears the slot and sends the socket one byte (one system call, only
 * while a reader is armed, like the futex wake). A byte from elsewhere
 * only makes the next receive look at the rings. When all 64 slots are
 * armed by others, or the name is taken, a watcher thread does the
 * signalling instead (the old way: one more thread wake-up of latency).
 * A poster in another network namespace cannot reach the abstract name:
 * a loop that may serve such posters should also receive now and then
 * (spyglass serve does, every 100 ms).
 * Returns the fd (owned by the channel) or a negative error. */
int spy_channel_fd(spy_channel *ch);

/* 1 the first time it is called after this opener re-created its channel
 * directory or its entry (they had been removed or damaged; see above),
 * else 0. Newcomers can find the opener again from then on; an opener
 * that announces itself (a provider) does it again. Same thread rules as
 * spy_channel_recv. */
int spy_channel_recreated(spy_channel *ch);

/* This opener's id (also the sender id its frames carry). */
uint64_t spy_channel_id(const spy_channel *ch);

typedef struct spy_channel_stats {
  uint64_t posted, bytes_posted;     /* by this opener */
  uint64_t received, bytes_received; /* by this opener */
  uint64_t lost;                     /* overruns seen by this opener */
  uint64_t oversize;                 /* frames skipped: larger than cap */
  uint64_t wakes;                    /* futex wakes this opener issued */
  uint32_t peers;                    /* other openers currently mapped */
  uint64_t corrupt;   /* inconsistent ring headers or records met (each
                         one a resync at the writer's head, its frames
                         counted in `lost`), own ring header repaired */
  uint64_t skipped;   /* directory entries skipped: foreign, stale,
                         damaged, or naming memory that fails the checks
                         (once per entry until it recovers) */
  uint64_t dropped;   /* peers dropped because their ring kept failing
                         (retried with a back-off, re-mapped if it heals) */
  uint64_t recreated; /* times this opener re-created its channel
                         directory or its entry after they were removed or
                         damaged (a provider re-announces itself then) */
} spy_channel_stats;
void spy_channel_get_stats(const spy_channel *ch, spy_channel_stats *out);

/* Resolves the runtime directory (creating and checking it as described
 * above) into buf. Returns 0 or SPY_EOWNER / SPY_ENAMETOOLONG / a system
 * error. `dir` overrides the default as in spy_channel_desc. */
int spy_runtime_dir(const char *dir, char *buf, size_t cap);

/* Removes dead openers' rings and empty channel directories under the
 * runtime directory. spy_channel_open() does this already; exposed for
 * tools. Returns the number of rings removed or a negative error. */
int spy_bus_sweep(const char *dir);

/* ---- channel backends --------------------------------------------------
 *
 * A second backend under the same channel API: every spy_channel_*
 * function on a handle opened with desc->ops calls the matching op with
 * the backend's own handle (`impl`). The remote link (spyglass_net) is
 * one; the shared-memory bus is the built-in default. Optional ops may be
 * NULL (then the call returns SPY_ENOTSUP, or zero stats).
 *
 * link_open / link_close / link_clock are for a consumer that is given
 * only an address (spy_consumer_desc.connect): they make and end the
 * connection whose handle is then passed as ops_arg to every open, and
 * run a clock sync over it (offset = server clock − ours, ns). */
typedef struct spy_channel_ops {
  const char *name; /* "link", … */
  int (*open)(void *arg, const spy_channel_desc *desc, void **impl);
  void (*close)(void *impl);
  int (*post)(void *impl, const void *frame, size_t len);
  int (*recv)(void *impl, void *buf, size_t cap, int timeout_ms,
              spy_recv_info *info);
  int (*wait)(void *impl, int timeout_ms);
  int (*fd)(void *impl);
  uint64_t (*id)(const void *impl);
  void (*get_stats)(const void *impl, spy_channel_stats *out);
  int (*link_open)(void **link, const char *addr, const char *token);
  void (*link_close)(void *link);
  int (*link_clock)(void *link, uint32_t rounds, int timeout_ms,
                    int64_t *offset_ns, int64_t *rtt_ns);
} spy_channel_ops;

/* The remote backend a consumer uses for `connect` when its desc names
 * none: set by spyglass_net (spy_net_register, also run when libspyglass_net
 * is loaded as a shared library). NULL until then. Thread-safe (atomic). */
void spy_channel_set_remote(const spy_channel_ops *ops);
const spy_channel_ops *spy_channel_remote(void);

#ifdef __cplusplus
}
#endif
#endif
