/* clock_seg.c — the clock-sync segment's memory: an anonymous shared
 * mapping, or, between processes, a sealed memfd found through a small
 * file in the runtime directory (Linux).
 *
 * The segment itself is never a file of the directory: a file can be
 * truncated under a mapping, and touching the lost page would kill the
 * process (SIGBUS) — the provider, the user's program, among them. It is
 * a memfd allocated in full and sealed against shrinking (platform.h's
 * spy__shm_create), owned by the creator, which keeps it open. The file
 * <name>.clock only says where it is (the creator's pid and fd); it is
 * written under a unique temporary name and renamed into place, so an
 * opener sees either nothing or a complete pointer. The opener treats it
 * as untrusted: a regular file of this user of the exact size, opened
 * without following links or blocking, then the memfd through /proc,
 * checked for size, owner and seals, then the segment's magic, version
 * and size. The directory is the bus's runtime directory, resolved
 * (created and checked) through bus.h's spy_runtime_dir(); names follow
 * the rule of channel names.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/platform.h"
#include "profiler/clock_internal.h"
#include "spyglass/bus.h"

#define POINTER_MAGIC 0x4b595053u /* "SPYK": where a named segment is */
#define POINTER_VERSION 1u

/* The contents of <name>.clock. */
typedef struct seg_pointer {
  uint32_t magic;
  uint32_t version;
  uint32_t pid; /* the creator */
  int32_t fd;   /* its memfd, in the creator's process */
} seg_pointer;

/* [A-Za-z0-9._:-]{1,SPY_CHANNEL_NAME_MAX}, not starting with '.': a file
 * name in the runtime directory, never a path or a hidden file. */
static int name_ok(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > SPY_CHANNEL_NAME_MAX || name[0] == '.')
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
          c == '-'))
      return 0;
  }
  return 1;
}

static int seg_path(const char *name, const char *dir, char *buf, size_t cap) {
  if (!name_ok(name))
    return SPY_EINVAL;
  char d[PATH_MAX];
  int rc = spy_runtime_dir(dir, d, sizeof d);
  if (rc < 0)
    return rc;
  int n = snprintf(buf, cap, "%s/%s.clock", d, name);
  return n < 0 || (size_t)n >= cap ? SPY_ENAMETOOLONG : 0;
}

static void init_shm(struct spy__clock_shm *m) {
  m->magic = SPY_CLOCK_MAGIC;
  m->version = SPY_CLOCK_VERSION;
  m->size = SPY_CLOCK_SEG_BYTES;
  atomic_store(&m->req, 0);
  atomic_store(&m->ack, 0);
  atomic_store(&m->t_peer, 0);
  atomic_store(&m->offset_ns, 0);
  atomic_store(&m->rtt_ns, 0);
  atomic_store(&m->rounds, 0);
  atomic_store(&m->waiters, 0);
}

static void *map_fd(int fd) {
  void *p = mmap(NULL, SPY_CLOCK_SEG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
                 fd, 0);
  return p == MAP_FAILED ? NULL : p;
}

int spy_clock_create(spy_clock_seg **out, const char *name, const char *dir) {
  if (!out)
    return SPY_EINVAL;
  *out = NULL;
  spy_clock_seg *s = calloc(1, sizeof *s);
  if (!s)
    return SPY_ENOMEM;
  s->fd = -1;
  if (!name) {
    void *p = mmap(NULL, SPY_CLOCK_SEG_BYTES, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      int rc = -errno;
      free(s);
      return rc;
    }
    s->shm = p;
    init_shm(s->shm);
    *out = s;
    return 0;
  }
  int rc = seg_path(name, dir, s->path, sizeof s->path);
  char tmp[PATH_MAX + 16];
  if (rc == 0 &&
      snprintf(tmp, sizeof tmp, "%s.XXXXXX", s->path) >= (int)sizeof tmp)
    rc = SPY_ENAMETOOLONG;
  if (rc < 0) {
    free(s);
    return rc;
  }
  int mfd = spy__shm_create("spyglass-clock", SPY_CLOCK_SEG_BYTES);
  if (mfd < 0 || !(s->shm = map_fd(mfd))) {
    rc = mfd < 0 ? mfd : -errno;
    if (mfd >= 0)
      close(mfd);
    free(s);
    return rc;
  }
  s->fd = mfd;
  init_shm(s->shm);
  /* The pointer: a unique temporary (mode 0600), renamed into place. */
  seg_pointer ptr = {POINTER_MAGIC, POINTER_VERSION, (uint32_t)getpid(), mfd};
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    rc = -errno;
  else {
    if (write(fd, &ptr, sizeof ptr) != (ssize_t)sizeof ptr)
      rc = errno ? -errno : SPY_EIO;
    close(fd);
    if (rc == 0 && rename(tmp, s->path) < 0)
      rc = -errno;
    if (rc < 0)
      unlink(tmp);
  }
  if (rc < 0) {
    munmap(s->shm, SPY_CLOCK_SEG_BYTES);
    close(mfd);
    free(s);
    return rc;
  }
  s->owner = 1;
  *out = s;
  return 0;
}

/* Reads the pointer file at path: SPY_EBADSEGMENT unless it is a regular
 * file of the right size and contents (a FIFO or device is refused
 * without blocking), SPY_EOWNER when another user's. */
static int read_pointer(const char *path, seg_pointer *ptr) {
  int fd =
      open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return -errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) < 0)
    rc = -errno;
  else if (st.st_uid != geteuid())
    rc = SPY_EOWNER;
  else if (!S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof *ptr ||
           pread(fd, ptr, sizeof *ptr, 0) != (ssize_t)sizeof *ptr ||
           ptr->magic != POINTER_MAGIC || ptr->version != POINTER_VERSION)
    rc = SPY_EBADSEGMENT;
  close(fd);
  return rc;
}

int spy_clock_open(spy_clock_seg **out, const char *name, const char *dir) {
  if (!out || !name)
    return SPY_EINVAL;
  *out = NULL;
  spy_clock_seg *s = calloc(1, sizeof *s);
  if (!s)
    return SPY_ENOMEM;
  s->fd = -1;
  int rc = seg_path(name, dir, s->path, sizeof s->path);
  seg_pointer ptr;
  if (rc == 0)
    rc = read_pointer(s->path, &ptr);
  int fd = -1;
  if (rc == 0) {
    fd = spy__shm_open_peer(ptr.pid, ptr.fd, SPY_CLOCK_SEG_BYTES, 1);
    if (fd < 0) /* ENOENT here: a creator gone, not a missing segment */
      rc = fd == -ENOENT ? SPY_EBADSEGMENT : fd;
  }
  if (rc == 0 && !(s->shm = map_fd(fd)))
    rc = -errno;
  if (fd >= 0)
    close(fd);
  if (rc == 0 && (s->shm->magic != SPY_CLOCK_MAGIC ||
                  s->shm->version != SPY_CLOCK_VERSION ||
                  s->shm->size != SPY_CLOCK_SEG_BYTES)) {
    munmap(s->shm, SPY_CLOCK_SEG_BYTES);
    rc = SPY_EBADSEGMENT;
  }
  if (rc < 0) {
    free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void spy_clock_close(spy_clock_seg *s) {
  if (!s)
    return;
  if (s->shm)
    munmap(s->shm, SPY_CLOCK_SEG_BYTES);
  if (s->owner)
    unlink(s->path);
  if (s->fd >= 0)
    close(s->fd);
  free(s);
}

int spy_clock_remove(const char *name, const char *dir) {
  if (!name)
    return SPY_EINVAL;
  char path[PATH_MAX];
  int rc = seg_path(name, dir, path, sizeof path);
  if (rc < 0)
    return rc;
  return unlink(path) < 0 ? -errno : 0;
}
