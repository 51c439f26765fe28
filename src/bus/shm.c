/* shm.c — the directory entries that point at the bus's sealed memfds
 * (see shm.h; the memfds themselves are made and opened by the platform
 * layer, src/platform/shm.c). */
#include "bus/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spyglass/error.h"

static uint64_t fnv1a(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

void spy__entry_seal(spy_bus_entry *e) {
  e->check = fnv1a(e, offsetof(spy_bus_entry, check));
}

int spy__entry_read(int dfd, const char *name, spy_bus_entry *e) {
  int fd = openat(dfd, name,
                  O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return -errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) < 0)
    rc = -errno;
  else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
           st.st_size != (off_t)sizeof *e)
    rc = SPY_EBADSEGMENT;
  else if (pread(fd, e, sizeof *e, 0) != (ssize_t)sizeof *e)
    rc = SPY_EBADSEGMENT;
  else if (e->magic != SPY_ENTRY_MAGIC || e->version != SPY_ENTRY_VERSION ||
           e->check != fnv1a(e, offsetof(spy_bus_entry, check)))
    rc = SPY_EBADSEGMENT;
  close(fd);
  return rc;
}
