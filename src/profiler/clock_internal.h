/* clock_internal.h — the clock-sync segment's memory layout and handle,
 * shared by clock_seg.c (mapping it) and clock.c (the protocol). Not
 * installed. */
#ifndef SPY_CLOCK_INTERNAL_H
#define SPY_CLOCK_INTERNAL_H

#include <limits.h>
#include <stdatomic.h>

#include "spyglass/clock.h"

#define SPY__CLOCK_DONE 0x80000000u /* req bit: result published */
#define SPY__CLOCK_PEER_SLEEPS 0x1u /* waiters bits */
#define SPY__CLOCK_INIT_SLEEPS 0x2u

/* The shared bytes; layout documented in clock.h. */
struct spy__clock_shm {
  uint32_t magic;
  uint16_t version;
  uint16_t size;
  _Atomic uint32_t req;
  _Atomic uint32_t ack;
  _Atomic int64_t t_peer;
  _Atomic int64_t offset_ns;
  _Atomic int64_t rtt_ns;
  _Atomic uint32_t rounds;
  _Atomic uint32_t waiters;
};
_Static_assert(sizeof(struct spy__clock_shm) == SPY_CLOCK_SEG_BYTES,
               "clock segment layout");

struct spy_clock_seg {
  struct spy__clock_shm *shm;
  int owner;           /* created by name: unlink on close */
  int fd;              /* the creator's sealed memfd, or -1 */
  char path[PATH_MAX]; /* named segments */
};

#endif
