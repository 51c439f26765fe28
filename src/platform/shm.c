/* shm.c — sealed shared memory (Linux memfds): memory two processes of
 * the same user share and that neither can shrink under the other's
 * mapping, so touching it can never raise SIGBUS (see platform.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/platform.h"
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
