/* ctl.h — a channel's control page, shared by every opener of the channel:
 * the membership generation (bumped when a ring comes or goes) and the
 * doorbell futex with its sleeper count, and the slots of sleeping
 * event-loop readers. It is a sealed memfd (shm.h) that
 * every opener keeps open and names in its directory entry; a new opener
 * takes it from any live one. */
#ifndef SPY_BUS_CTL_H
#define SPY_BUS_CTL_H

#include <stdatomic.h>
#include <stdint.h>

#define SPY_CTL_MAGIC 0x4C545053u /* "SPTL" */
#define SPY_CTL_VERSION 3u
#define SPY_CTL_WAKE_SLOTS 64u
#define SPY_CTL_BYTES 4096u

typedef struct spy_ctl {
  uint32_t magic;
  uint32_t version;
  _Atomic uint32_t generation; /* rings added or removed */
  uint32_t pad0;
  uint64_t id;       /* random, also in every opener's entry */
  uint32_t pad1[10]; /* the eventcount at byte 64 */
  /* Eventcount (epoch << 12 | waiters) that readers sleep on. A poster
   * wakes only when a reader is registered, and then once for all of them:
   * the wake advances the epoch and clears the count, so the posts that
   * follow before anyone sleeps again cost no system call. */
  _Atomic uint32_t ec;
  uint32_t pad2;
  /* Event-loop readers (spy_channel_fd) asleep in someone's poll: slot i
   * holds the id of one (0: free) and bit i of wake_mask says slot i may
   * be armed. A poster that finds a slot armed by another opener clears
   * it and signals that reader's socket (channel.c, "event-loop
   * doorbell"); the reader re-arms after each drain. */
  _Atomic uint64_t wake_mask;
  _Atomic uint64_t wake_id[SPY_CTL_WAKE_SLOTS];
} spy_ctl;

_Static_assert(sizeof(spy_ctl) <= SPY_CTL_BYTES, "the control page");

#define SPY_EC_WAITERS 0xFFFu
#define SPY_EC_EPOCH_ONE 0x1000u

/* Registers a waiter; returns the state to pass to wait/cancel. */
uint32_t spy__ec_prepare(spy_ctl *c);
/* Withdraws a registration (found data after all, or timed out). */
void spy__ec_cancel(spy_ctl *c, uint32_t st);
/* Sleeps until a notify after `st`'s registration or the timeout
 * (ns < 0: none). 0 woken, SPY_ETIMEDOUT. */
int spy__ec_wait(spy_ctl *c, uint32_t st, int64_t ns);
/* Wakes every registered waiter; returns 1 if a system call was made. */
int spy__ec_notify(spy_ctl *c);

#endif
