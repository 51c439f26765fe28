/* shm.c — sealed memfds and the directory entries that point at them (see
 * shm.h). */
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

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

int spy__shm_create(const char *name, size_t bytes) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return -errno;
  int rc = 0;
  if (ftruncate(fd, (off_t)bytes) < 0)
    rc = -errno;
  /* Reserve every page now: a mapping must never meet a page the system
   * cannot supply. posix_fallocate returns the error, not errno. */
  if (rc == 0 && (rc = -posix_fallocate(fd, 0, (off_t)bytes)) == -EFBIG)
    rc = SPY_ENOSPC;
  if (rc == 0 && fcntl(fd, F_ADD_SEALS, SEALS) < 0)
    rc = -errno;
  if (rc < 0) {
    close(fd);
    return rc;
  }
  return fd;
}

int spy__shm_open_peer(uint32_t pid, int32_t fd, size_t bytes, int writable) {
  if (pid == 0 || fd < 0)
    return SPY_EBADSEGMENT;
  char path[64];
  snprintf(path, sizeof path, "/proc/%u/fd/%d", (unsigned)pid, (int)fd);
  int m = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK |
                         O_NOCTTY);
  if (m < 0)
    return -errno;
  struct stat st;
  int rc = 0;
  if (fstat(m, &st) < 0)
    rc = -errno;
  else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
           (size_t)st.st_size != bytes)
    rc = SPY_EBADSEGMENT;
  else {
    int seals = fcntl(m, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
                         (F_SEAL_SHRINK | F_SEAL_GROW))
      rc = SPY_EBADSEGMENT; /* not a sealed memfd: it could shrink */
  }
  if (rc < 0) {
    close(m);
    return rc;
  }
  return m;
}

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
