/* ring.h — one opener's broadcast ring in shared memory: a single writer,
 * any number of readers that never write to it.
 *
 * Positions are byte offsets that only grow (64-bit, never wrap in
 * practice); pos & (size-1) indexes the data. A record is a 16-byte header
 * {u32 len, u32 total, u64 seq} and the frame, padded to 16. A record with
 * len 0 is padding up to the end of the data area.
 *
 * The writer publishes in three steps: `oldest` moves past the records it is
 * about to overwrite, `tail_intent` announces the end it is about to write
 * up to, then the data is written and `head` published. A reader copies a
 * record out, then re-reads `tail_intent`: if the writer may have reached
 * the record's bytes meanwhile (tail_intent > pos + size), the copy is
 * discarded as an overrun. This is the broadcast-buffer scheme of Aeron and
 * the Disruptor, for readers that cannot hold the writer back.
 */
#ifndef SPY_BUS_RING_H
#define SPY_BUS_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SPY_RING_MAGIC 0x52595053u /* "SPYR" */
#define SPY_RING_VERSION 1u
#define SPY_RING_HEADER_BYTES 4096u
#define SPY_RING_RECORD_HEADER 16u

typedef struct spy_ring_hdr {
  uint32_t magic;
  uint32_t version;
  uint32_t data_bytes; /* power of two */
  uint32_t pid;
  uint64_t owner_id;
  uint64_t created_mono_ns;
  uint8_t pad0[32];
  _Atomic uint64_t tail_intent; /* own cache line: written before data */
  uint8_t pad1[56];
  _Atomic uint64_t head;    /* end of the last published record */
  _Atomic uint64_t oldest;  /* start of the oldest intact record */
  _Atomic uint64_t records; /* records published */
} spy_ring_hdr;

/* A reader's private cursor into one ring. */
typedef struct spy_ring_cursor {
  uint64_t pos;
  uint64_t next_seq;
} spy_ring_cursor;

/* Initialises a ring header over fresh (zeroed) memory. */
void spy__ring_init(spy_ring_hdr *h, uint32_t data_bytes, uint64_t owner_id);
/* Validates a mapped ring's header against the mapping's size: 0 or
 * SPY_EBADSEGMENT. */
int spy__ring_check(const spy_ring_hdr *h, size_t map_bytes);
/* Writes one record. Returns 0 or SPY_ETOOBIG. Single writer only. */
int spy__ring_write(spy_ring_hdr *h, const void *frame, uint32_t len);
/* Reads the next record at the cursor into buf. Returns the frame length,
 * 0 if the ring has nothing new, SPY_ENOBUFS if the frame is larger than
 * cap (*len_out set; the record is skipped). *lost receives the number of
 * records lost to overruns before this one. Never trusts the shared bytes:
 * a corrupt ring yields SPY_EBADSEGMENT, never an out-of-bounds access. */
int spy__ring_read(const spy_ring_hdr *h, spy_ring_cursor *c, void *buf,
                   size_t cap, uint64_t *lost, uint32_t *len_out);
/* Cursor at the ring's current end (only frames written from now on). */
void spy__ring_cursor_at_head(const spy_ring_hdr *h, spy_ring_cursor *c);
/* Cursor at the oldest frame the ring still holds, for a ring born after
 * the reader: frames already overwritten count as lost. */
void spy__ring_cursor_at_oldest(const spy_ring_hdr *h, spy_ring_cursor *c);
/* 1 if the cursor has something to read. */
int spy__ring_pending(const spy_ring_hdr *h, const spy_ring_cursor *c);

static inline uint8_t *spy__ring_data(const spy_ring_hdr *h) {
  return (uint8_t *)h + SPY_RING_HEADER_BYTES;
}

#endif
