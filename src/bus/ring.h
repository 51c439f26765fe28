/* ring.h — one opener's broadcast ring in shared memory: a single writer,
 * any number of readers that never write to it.
 *
 * Positions are byte offsets that only grow (64-bit, never wrap in
 * practice); pos & (size-1) indexes the data. A record is a 16-byte header
 * {u32 len, u32 total, u64 seq} and the frame, padded to 16. A record with
 * len 0 is padding up to the end of the data area.
 *
 * The writer publishes in two steps: `tail_intent` announces the end it is
 * about to write up to, then the data is written and `head` published. A
 * reader copies a record out, then re-reads `tail_intent`: if the writer may
 * have reached the record's bytes meanwhile (tail_intent > pos + size), the
 * copy is discarded as an overrun. This is the broadcast-buffer scheme of
 * Aeron and the Disruptor, for readers that cannot hold the writer back.
 *
 * Shared memory is not trusted by anyone. The writer keeps its position,
 * sequence and the ring size in private memory (spy_ring_writer) and only
 * stores to the header, never loads from it. A reader keeps the geometry it
 * validated at map time (spy_ring_reader) and checks every position and
 * length it loads against it: a header or record that does not fit is an
 * inconsistency, after which the reader resyncs at the writer's head. A
 * reader that is lapped resumes at `resume`, a record start the writer
 * publishes once per eighth of the ring from what it remembers privately
 * (the start of the first record in the eighth five eighths back, so still
 * intact until the writer moves on), checked like any other position; the
 * records it missed are counted from the sequence numbers.
 */
#ifndef SPY_BUS_RING_H
#define SPY_BUS_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SPY_RING_MAGIC 0x52595053u /* "SPYR" */
#define SPY_RING_VERSION 2u
#define SPY_RING_HEADER_BYTES 4096u
#define SPY_RING_RECORD_HEADER 16u
#define SPY_RING_MIN_RECORD 32u /* header + 1 byte, padded */

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
  _Atomic uint64_t resume;  /* a record start still intact, for lapped
                               readers: about 3/4 of the ring behind */
  _Atomic uint64_t records; /* records published */
} spy_ring_hdr;

/* The writer's private state: nothing here is ever read back from the
 * shared header. */
typedef struct spy_ring_writer {
  spy_ring_hdr *h;
  uint8_t *data;
  uint64_t size, mask; /* data bytes */
  uint64_t head;       /* end of the last record written */
  uint64_t seq;        /* records written */
  /* Resume points: marks[s & 7] is the first record starting at or after
   * eighth s of the ring's history (shift: log2(size / 8)). */
  uint64_t marks[8];
  uint64_t eighth;
  unsigned shift;
  uint64_t intent;    /* the highest tail_intent announced */
  uint64_t res_start; /* the reserved record's position ... */
  uint32_t res_max;   /* ... and room (0: none reserved) */
  spy_ring_hdr ident; /* the constant fields as initialised */
} spy_ring_writer;

/* A reader's private view of one ring: the geometry validated at map time
 * and its cursor. */
typedef struct spy_ring_reader {
  const spy_ring_hdr *h;
  const uint8_t *data;
  uint64_t size, mask;
  uint64_t pos;      /* next record to read */
  uint64_t next_seq; /* sequence expected there */
  uint64_t skipped;  /* bytes passed over since the last frame read */
} spy_ring_reader;

/* Initialises a ring over fresh memory of SPY_RING_HEADER_BYTES +
 * data_bytes (a power of two >= 4096) and the writer's private state. */
void spy__ring_writer_init(spy_ring_writer *w, void *mem, uint32_t data_bytes,
                           uint64_t owner_id, uint32_t pid,
                           uint64_t created_mono_ns);
/* Writes one record. Returns 0 or SPY_ETOOBIG (len 0, or the record is
 * larger than a quarter of the ring). Single writer only; never loads from
 * shared memory, so whatever another process does to the ring it cannot
 * make this fail, loop or write out of bounds. */
int spy__ring_write(spy_ring_writer *w, const void *frame, uint32_t len);
/* Reserves the next record for a frame of up to max_len bytes, to be
 * written in place: returns where the frame's bytes go (max_len of them,
 * inside the ring), or NULL if max_len is 0 or the record would be larger
 * than a quarter of the ring. Readers count the bytes it covers as
 * overwritten from now on. Publish with spy__ring_commit. Single writer;
 * the caller only stores to the returned bytes: another process may
 * change them too, so a value loaded back from there is not the one
 * stored. */
void *spy__ring_reserve(spy_ring_writer *w, uint32_t max_len);
/* Publishes the reserved record with its first len bytes as the frame
 * (len <= max_len; 0 cancels: nothing is published). 0, or SPY_EINVAL
 * (nothing reserved, or len > max_len; the reservation is dropped). */
int spy__ring_commit(spy_ring_writer *w, uint32_t len);
/* Re-stores the header's constant fields if something overwrote them, so
 * that readers mapping the ring later accept it again. Returns 1 if it
 * repaired anything. Not for the hot path; may run on another thread than
 * spy__ring_write (the fields are disjoint). */
int spy__ring_repair(spy_ring_writer *w);

/* Validates a mapped ring's header against the mapping's size and sets up
 * a reader with the cursor at the head. 0 or SPY_EBADSEGMENT. */
int spy__ring_reader_init(spy_ring_reader *r, const void *mem,
                          size_t map_bytes);
/* Cursor at the ring's current end (only frames written from now on). */
void spy__ring_reader_at_head(spy_ring_reader *r);
/* Cursor at the ring's first frame if it has not wrapped yet (a ring born
 * after the reader), else at the head; frames already overwritten count as
 * lost. */
void spy__ring_reader_at_start(spy_ring_reader *r);
/* Reads the next record into buf. Returns the frame length; 0 if there is
 * nothing new; SPY_ENOBUFS if the frame is larger than cap (*len_out set;
 * the record is skipped); SPY_EBADSEGMENT if the shared header or record
 * was inconsistent (the cursor has been moved to the head: the next call
 * works again); SPY_EAGAIN if the writer kept lapping the copy (call again
 * later). *lost receives the number of records lost before this one
 * (overrun or resync). Never accesses memory outside the mapping and never
 * loops more than a few times, whatever the shared bytes hold. */
int spy__ring_read(spy_ring_reader *r, void *buf, size_t cap, uint64_t *lost,
                   uint32_t *len_out);
/* Like spy__ring_read without the copy: *data is the next frame's bytes
 * in the ring (*len_out of them, always inside the mapping), *at the
 * record's position, and the cursor moves past it. The bytes stay the
 * writer's: it may overwrite them at any time, and a broken one may
 * write anything there. spy__ring_intact(r, at) says afterwards whether
 * they may have changed while they were read. Returns the length, 0,
 * SPY_EBADSEGMENT or SPY_EAGAIN as spy__ring_read. */
int spy__ring_peek(spy_ring_reader *r, const uint8_t **data, uint64_t *at,
                   uint64_t *lost, uint32_t *len_out);
/* 1 if the writer has not reached the record at `at` since it was
 * peeked (every load of its bytes made before this call saw what was
 * posted, if the writer is well-behaved), 0 if it may have. */
int spy__ring_intact(const spy_ring_reader *r, uint64_t at);
/* 1 if the writer's head is not where the cursor is. */
int spy__ring_pending(const spy_ring_reader *r);

#endif
