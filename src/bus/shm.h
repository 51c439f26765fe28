/* shm.h — the bus's shared memory: sealed memfds that no process can
 * shrink, and the small directory entry through which other processes of
 * the same user find them.
 *
 * A ring or control page is a memfd, allocated in full when created and
 * sealed against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW |
 * F_SEAL_SEAL), so a mapping of it can never fault for lack of backing:
 * truncation is refused by the kernel whoever tries it. Other processes
 * open it through /proc/<pid>/fd/<fd>, which the kernel allows only to
 * processes that could ptrace-read the owner (same user, owner dumpable),
 * and check the seals, size and owner before mapping it.
 *
 * The entry file r-<pid>-<id> in the channel directory holds a
 * spy_bus_entry: where to find the owner's ring and the channel's control
 * page, with a checksum. The owner holds an flock on it for its whole
 * life. Entries are untrusted input: read with O_NOFOLLOW | O_NONBLOCK,
 * only regular files of this user of the exact size, checksum verified.
 */
#ifndef SPY_BUS_SHM_H
#define SPY_BUS_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "platform/platform.h" /* spy__shm_create, spy__shm_open_peer */

#define SPY_ENTRY_MAGIC 0x45595053u /* "SPYE" */
#define SPY_ENTRY_VERSION 1u

typedef struct spy_bus_entry {
  uint32_t magic;
  uint32_t version;
  uint32_t pid;
  int32_t ring_fd;     /* in the owner's process */
  int32_t ctl_fd;      /* the channel's control page, same process */
  uint32_t ring_bytes; /* data bytes of the ring */
  uint64_t owner_id;   /* also in the ring's header */
  uint64_t ctl_id;     /* also in the control page */
  uint64_t check;      /* FNV-1a of the bytes above */
} spy_bus_entry;

/* Fills e->check. */
void spy__entry_seal(spy_bus_entry *e);
/* Reads and verifies the entry `name` in dfd. 0, SPY_EBADSEGMENT (not a
 * regular file of ours of the right size, or bad contents) or -errno
 * (ELOOP for a symlink). Never blocks: a FIFO or device is opened
 * non-blocking and refused. */
int spy__entry_read(int dfd, const char *name, spy_bus_entry *e);

#endif
