/* clock_seg.c — the clock-sync segment's memory: an anonymous shared
 * mapping, or a named file mapped by two processes (Linux).
 *
 * A named segment is created under a unique temporary name, initialised,
 * then renamed into place, so an opener sees either nothing or a complete
 * segment; the opener still checks size, owner, magic and version, since
 * anything could have put a file there. Segments live in the bus's
 * runtime directory, resolved (created and checked) through the bus's
 * public API, spy_runtime_dir(); names follow the rule of channel names.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profiler/clock_internal.h"
#include "spyglass/bus.h"

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
  /* A unique temporary (mode 0600), renamed into place once initialised. */
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    rc = -errno;
    free(s);
    return rc;
  }
  if (ftruncate(fd, SPY_CLOCK_SEG_BYTES) < 0 || !(s->shm = map_fd(fd))) {
    rc = -errno;
    close(fd);
    unlink(tmp);
    free(s);
    return rc;
  }
  close(fd);
  init_shm(s->shm);
  if (rename(tmp, s->path) < 0) {
    rc = -errno;
    munmap(s->shm, SPY_CLOCK_SEG_BYTES);
    unlink(tmp);
    free(s);
    return rc;
  }
  s->owner = 1;
  *out = s;
  return 0;
}

int spy_clock_open(spy_clock_seg **out, const char *name, const char *dir) {
  if (!out || !name)
    return SPY_EINVAL;
  *out = NULL;
  spy_clock_seg *s = calloc(1, sizeof *s);
  if (!s)
    return SPY_ENOMEM;
  int rc = seg_path(name, dir, s->path, sizeof s->path);
  int fd = -1;
  if (rc == 0 && (fd = open(s->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) < 0)
    rc = -errno;
  struct stat st;
  if (rc == 0 && fstat(fd, &st) < 0)
    rc = -errno;
  if (rc == 0 && st.st_uid != geteuid())
    rc = SPY_EOWNER;
  if (rc == 0 && (!S_ISREG(st.st_mode) || st.st_size != SPY_CLOCK_SEG_BYTES))
    rc = SPY_EBADSEGMENT;
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
