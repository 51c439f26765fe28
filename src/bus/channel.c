/* channel.c — named broadcast channels: a directory per channel holding a
 * control page and one ring file per opener (see bus.h, ring.h, ctl.h).
 *
 * Membership changes (open, close, sweeping a dead opener) happen under an
 * exclusive flock on the channel directory and bump the control page's
 * generation; readers rescan the directory when it changes. Each ring file
 * is flock'ed by its owner for its whole life, so a ring whose lock can be
 * taken belongs to a dead process and is removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus/ctl.h"
#include "bus/ring.h"
#include "bus/rundir.h"
#include "platform/platform.h"
#include "spyglass/bus.h"
#include "spyglass/wire.h"

#define RING_PREFIX "r-"
#define MAX_PEERS 256
#define SPIN_NS 20000 /* how long a reader watches before it sleeps */

typedef struct peer {
  char file[64];
  spy_ring_hdr *hdr;
  size_t map_bytes;
  spy_ring_cursor cur;
  int gone; /* no longer in the directory: drain, then drop */
} peer;

struct spy_channel {
  char dir[PATH_MAX];
  int dfd;
  spy_ctl *ctl;
  int ring_fd;
  spy_ring_hdr *ring;
  size_t ring_map;
  char ring_file[64];
  uint64_t id;
  uint32_t gen_seen;
  peer peers[MAX_PEERS];
  int npeers;
  int rr;
  spy_channel_stats st;
  /* spy_channel_fd's watcher */
  int efd;
  pthread_t watcher;
  int watcher_started;
  _Atomic int watcher_stop;
  _Atomic uint32_t armed; /* 1: the app drained; the watcher may signal */
  pthread_mutex_t lock;   /* fd mode: recv vs the watcher's peek */
  /* Another backend (bus.h spy_channel_ops): every call goes to it. */
  const spy_channel_ops *ops;
  void *impl;
};

/* ---- backend dispatch (bus.h "channel backends") ------------------------ */

static _Atomic(const spy_channel_ops *) remote_ops;
void spy_channel_set_remote(const spy_channel_ops *ops) {
  atomic_store(&remote_ops, ops);
}
const spy_channel_ops *spy_channel_remote(void) {
  return atomic_load(&remote_ops);
}

static int open_backend(spy_channel **out, const spy_channel_desc *desc) {
  if (!desc->ops->open || !desc->ops->close || !desc->ops->post ||
      !desc->ops->recv)
    return SPY_EINVAL;
  spy_channel *ch = calloc(1, sizeof *ch);
  if (!ch)
    return SPY_ENOMEM;
  int rc = desc->ops->open(desc->ops_arg, desc, &ch->impl);
  if (rc < 0) {
    free(ch);
    return rc;
  }
  ch->ops = desc->ops;
  ch->dfd = ch->ring_fd = ch->efd = -1;
  *out = ch;
  return 0;
}

/* ---- directory helpers -------------------------------------------------- */

static int is_ring_name(const char *n) {
  return strncmp(n, RING_PREFIX, strlen(RING_PREFIX)) == 0;
}

/* Opens ring file `name` in dfd and removes it if its owner is dead.
 * Returns 1 if removed, 0 if alive (or not ours to judge). */
static int reap_if_dead(int dfd, const char *name) {
  int fd = openat(dfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return 0;
  int dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (dead)
    unlinkat(dfd, name, 0);
  close(fd);
  return dead;
}

/* With the directory locked: reaps dead rings; returns live rings left. */
static int reap_dir(int dfd, int *reaped) {
  int dup_fd = dup(dfd);
  if (dup_fd < 0)
    return -errno;
  DIR *d = fdopendir(dup_fd);
  if (!d) {
    close(dup_fd);
    return -errno;
  }
  rewinddir(d);
  int live = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!is_ring_name(e->d_name))
      continue;
    if (reap_if_dead(dfd, e->d_name))
      (*reaped)++;
    else
      live++;
  }
  closedir(d);
  return live;
}

static void bump_generation(int dfd) {
  int fd = openat(dfd, "ctl", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return;
  spy_ctl *c =
      mmap(NULL, SPY_CTL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (c == MAP_FAILED)
    return;
  if (c->magic == SPY_CTL_MAGIC) {
    atomic_fetch_add(&c->generation, 1);
    spy__ec_notify(c);
  }
  munmap(c, SPY_CTL_BYTES);
}

/* Locks the channel directory `path` (creating it), retrying if another
 * process removed it between our mkdir and our lock. Returns the fd. */
static int lock_channel_dir(const char *path, int create) {
  for (int tries = 0; tries < 100; tries++) {
    if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
      return -errno;
    int rc = spy__dir_check(path);
    if (rc < 0)
      return rc;
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0) {
      if (errno == ENOENT && create)
        continue;
      return -errno;
    }
    if (flock(dfd, LOCK_EX) < 0) {
      close(dfd);
      return -errno;
    }
    struct stat st;
    if (fstat(dfd, &st) == 0 && st.st_nlink > 0)
      return dfd;
    close(dfd); /* removed under us: start again */
    if (!create)
      return SPY_ENOENT;
  }
  return SPY_EBUSY;
}

/* With the directory locked: removes ctl and the directory if no ring is
 * left. */
static void remove_if_empty(int dfd, const char *path, int live) {
  if (live > 0)
    return;
  unlinkat(dfd, "ctl", 0);
  rmdir(path);
}

int spy_bus_sweep(const char *dir) {
  char root[PATH_MAX];
  int rc = spy__rundir_resolve(dir, root, sizeof root);
  if (rc < 0)
    return rc;
  DIR *d = opendir(root);
  if (!d)
    return -errno;
  int reaped = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !spy__channel_name_ok(e->d_name))
      continue;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", root, e->d_name) >=
        (int)sizeof path)
      continue;
    int dfd = lock_channel_dir(path, 0);
    if (dfd < 0)
      continue;
    int before = reaped;
    int live = reap_dir(dfd, &reaped);
    if (reaped != before)
      bump_generation(dfd);
    if (live >= 0)
      remove_if_empty(dfd, path, live);
    close(dfd);
  }
  closedir(d);
  return reaped;
}

/* ---- open / close ------------------------------------------------------- */

/* fstat + the owner check every shared file gets; 0, SPY_EOWNER or -errno. */
static int stat_owned(int fd, struct stat *st) {
  if (fstat(fd, st) < 0)
    return -errno;
  return st->st_uid == geteuid() ? 0 : SPY_EOWNER;
}

static int map_ctl(spy_channel *ch) {
  int fd =
      openat(ch->dfd, "ctl", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return -errno;
  struct stat st;
  int rc = stat_owned(fd, &st);
  if (rc == 0 && st.st_size == 0 && ftruncate(fd, SPY_CTL_BYTES) < 0)
    rc = -errno;
  else if (rc == 0 && st.st_size != 0 && st.st_size != SPY_CTL_BYTES)
    rc = SPY_EBADSEGMENT;
  if (rc == 0) {
    ch->ctl =
        mmap(NULL, SPY_CTL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ch->ctl == MAP_FAILED) {
      ch->ctl = NULL;
      rc = -errno;
    } else if (ch->ctl->magic == 0) {
      ch->ctl->version = SPY_CTL_VERSION;
      ch->ctl->magic = SPY_CTL_MAGIC; /* under the directory lock */
    } else if (ch->ctl->magic != SPY_CTL_MAGIC ||
               ch->ctl->version != SPY_CTL_VERSION) {
      rc = SPY_EBADSEGMENT;
    }
  }
  close(fd);
  return rc;
}

static int create_ring(spy_channel *ch, uint32_t data_bytes) {
  snprintf(ch->ring_file, sizeof ch->ring_file, RING_PREFIX "%d-%016llx",
           (int)getpid(), (unsigned long long)ch->id);
  int fd = openat(ch->dfd, ch->ring_file,
                  O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return -errno;
  ch->ring_fd = fd;
  if (flock(fd, LOCK_EX | LOCK_NB) < 0)
    return -errno;
  ch->ring_map = SPY_RING_HEADER_BYTES + (size_t)data_bytes;
  if (ftruncate(fd, (off_t)ch->ring_map) < 0)
    return -errno;
  void *m = mmap(NULL, ch->ring_map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED)
    return -errno;
  ch->ring = m;
  ch->ring->pid = (uint32_t)getpid();
  ch->ring->created_mono_ns = spy__mono_ns();
  spy__ring_init(ch->ring, data_bytes, ch->id);
  return 0;
}

static void unmap_peer(peer *p) {
  if (p->hdr)
    munmap(p->hdr, p->map_bytes);
  p->hdr = NULL;
}

/* Maps a peer's ring read-only. 0 on success, < 0 to skip it for now. */
static int map_peer(spy_channel *ch, const char *name, peer *p) {
  int fd = openat(ch->dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -errno;
  struct stat st;
  int rc = stat_owned(fd, &st);
  if (rc == 0 && ((size_t)st.st_size <= SPY_RING_HEADER_BYTES ||
                  (size_t)st.st_size > SPY_RING_HEADER_BYTES + (256u << 20)))
    rc = SPY_EBADSEGMENT;
  if (rc == 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      rc = -errno;
    } else {
      p->hdr = m;
      p->map_bytes = (size_t)st.st_size;
      rc = spy__ring_check(p->hdr, p->map_bytes);
      if (rc < 0)
        unmap_peer(p);
    }
  }
  close(fd);
  if (rc == 0) {
    size_t n = strlen(name);
    if (n >= sizeof p->file)
      n = sizeof p->file - 1; /* names we skip are longer; see rescan */
    memcpy(p->file, name, n);
    p->file[n] = 0;
    p->gone = 0;
    /* A ring born after ours: read it from its start, so an opener's first
     * frames are not lost to our rescan delay. Older rings: from now on. */
    if (p->hdr->created_mono_ns >= ch->ring->created_mono_ns)
      spy__ring_cursor_at_oldest(p->hdr, &p->cur);
    else
      spy__ring_cursor_at_head(p->hdr, &p->cur);
  }
  return rc;
}

static void rescan(spy_channel *ch) {
  ch->gen_seen = atomic_load(&ch->ctl->generation);
  for (int i = 0; i < ch->npeers; i++)
    ch->peers[i].gone = 1;
  int dup_fd = dup(ch->dfd);
  DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
  if (!d) {
    if (dup_fd >= 0)
      close(dup_fd);
    for (int i = 0; i < ch->npeers; i++)
      ch->peers[i].gone = 0;
    return;
  }
  rewinddir(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!is_ring_name(e->d_name) || strcmp(e->d_name, ch->ring_file) == 0 ||
        strlen(e->d_name) >= sizeof ch->peers[0].file)
      continue;
    int known = 0;
    for (int i = 0; i < ch->npeers; i++)
      if (strcmp(ch->peers[i].file, e->d_name) == 0) {
        ch->peers[i].gone = 0;
        known = 1;
      }
    if (!known && ch->npeers < MAX_PEERS &&
        map_peer(ch, e->d_name, &ch->peers[ch->npeers]) == 0)
      ch->npeers++;
  }
  closedir(d);
  ch->st.peers = 0;
  for (int i = 0; i < ch->npeers; i++)
    ch->st.peers += !ch->peers[i].gone;
}

static void drop_peer(spy_channel *ch, int i) {
  unmap_peer(&ch->peers[i]);
  ch->peers[i] = ch->peers[ch->npeers - 1];
  ch->npeers--;
}

int spy_channel_open(spy_channel **out, const spy_channel_desc *desc) {
  *out = NULL;
  if (!desc || !spy__channel_name_ok(desc->name))
    return SPY_EINVAL;
  if (desc->ops)
    return open_backend(out, desc);
  uint32_t rb = desc->ring_bytes ? desc->ring_bytes : 1u << 20;
  if (rb < (64u << 10) || rb > (256u << 20) || (rb & (rb - 1)))
    return SPY_EINVAL;
  char root[PATH_MAX];
  int rc = spy__rundir_resolve(desc->dir, root, sizeof root);
  if (rc < 0)
    return rc;
  spy_bus_sweep(desc->dir);
  spy_channel *ch = calloc(1, sizeof *ch);
  if (!ch)
    return SPY_ENOMEM;
  ch->dfd = ch->ring_fd = ch->efd = -1;
  ch->id = spy__random_u64();
  if ((size_t)snprintf(ch->dir, sizeof ch->dir, "%s/%s", root, desc->name) >=
      sizeof ch->dir) {
    free(ch);
    return SPY_ENAMETOOLONG;
  }
  rc = lock_channel_dir(ch->dir, 1);
  if (rc < 0) {
    free(ch);
    return rc;
  }
  ch->dfd = rc;
  int reaped = 0;
  reap_dir(ch->dfd, &reaped);
  rc = map_ctl(ch);
  if (rc == 0)
    rc = create_ring(ch, rb);
  if (rc == 0) {
    atomic_fetch_add(&ch->ctl->generation, 1);
    spy__ec_notify(ch->ctl); /* sleepers rescan and find us */
  }
  flock(ch->dfd, LOCK_UN);
  if (rc < 0) {
    if (ch->ring_fd >= 0)
      unlinkat(ch->dfd, ch->ring_file, 0);
    spy_channel_close(ch);
    return rc;
  }
  rescan(ch);
  *out = ch;
  return 0;
}

static void stop_watcher(spy_channel *ch);

void spy_channel_close(spy_channel *ch) {
  if (!ch)
    return;
  if (ch->ops) {
    ch->ops->close(ch->impl);
    free(ch);
    return;
  }
  stop_watcher(ch);
  for (int i = 0; i < ch->npeers; i++)
    unmap_peer(&ch->peers[i]);
  if (ch->dfd >= 0 && ch->ring) {
    flock(ch->dfd, LOCK_EX);
    unlinkat(ch->dfd, ch->ring_file, 0);
    int reaped = 0;
    int live = reap_dir(ch->dfd, &reaped);
    if (ch->ctl) {
      atomic_fetch_add(&ch->ctl->generation, 1);
      spy__ec_notify(ch->ctl);
    }
    if (live >= 0)
      remove_if_empty(ch->dfd, ch->dir, live);
    flock(ch->dfd, LOCK_UN);
  }
  if (ch->ring)
    munmap(ch->ring, ch->ring_map);
  if (ch->ctl)
    munmap(ch->ctl, SPY_CTL_BYTES);
  if (ch->ring_fd >= 0)
    close(ch->ring_fd);
  if (ch->dfd >= 0)
    close(ch->dfd);
  if (ch->efd >= 0)
    close(ch->efd);
  free(ch);
}

/* ---- post / receive ----------------------------------------------------- */

int spy_channel_post(spy_channel *ch, const void *frame, size_t len) {
  if (ch->ops)
    return ch->ops->post(ch->impl, frame, len);
  if (!frame || len == 0 || len > SPY_FRAME_MAX)
    return SPY_EINVAL;
  int rc = spy__ring_write(ch->ring, frame, (uint32_t)len);
  if (rc < 0)
    return rc;
  ch->st.posted++;
  ch->st.bytes_posted += len;
  /* Wake sleeping readers, once for all of them, only if any registered:
   * the eventcount's fence orders our head store before its check. */
  ch->st.wakes += (uint64_t)spy__ec_notify(ch->ctl);
  return 0;
}

/* One pass over the peers, round robin. Returns > 0 (length), 0 (nothing),
 * or SPY_ENOBUFS. */
static int read_any(spy_channel *ch, void *buf, size_t cap,
                    spy_recv_info *info) {
  for (int n = 0; n < ch->npeers; n++) {
    int i = (ch->rr + n) % ch->npeers;
    peer *p = &ch->peers[i];
    uint64_t lost = 0;
    uint32_t len = 0;
    int r = spy__ring_read(p->hdr, &p->cur, buf, cap, &lost, &len);
    if (lost)
      ch->st.lost += lost;
    if (r > 0 || r == SPY_ENOBUFS) {
      if (info) {
        info->sender = p->hdr->owner_id;
        info->lost = lost;
        info->len = len;
      }
      ch->rr = (i + 1) % ch->npeers;
      if (r > 0) {
        ch->st.received++;
        ch->st.bytes_received += (uint64_t)r;
      } else {
        ch->st.oversize++;
      }
      return r;
    }
    if (r == SPY_EBADSEGMENT || (r == 0 && p->gone)) {
      drop_peer(ch, i); /* corrupt, or its owner left and it is drained */
      n--;
    }
  }
  return 0;
}

static int gen_changed(spy_channel *ch) {
  return atomic_load_explicit(&ch->ctl->generation, memory_order_acquire) !=
         ch->gen_seen;
}

static int any_pending(spy_channel *ch) {
  for (int i = 0; i < ch->npeers; i++)
    if (spy__ring_pending(ch->peers[i].hdr, &ch->peers[i].cur))
      return 1;
  return gen_changed(ch);
}

static int recv_locked(spy_channel *ch, void *buf, size_t cap, int timeout_ms,
                       spy_recv_info *info) {
  uint64_t deadline =
      timeout_ms > 0 ? spy__mono_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
  for (;;) {
    if (gen_changed(ch))
      rescan(ch);
    int r = read_any(ch, buf, cap, info);
    if (r != 0)
      return r;
    if (timeout_ms == 0)
      return SPY_EAGAIN;
    int64_t wait_ns = -1;
    if (timeout_ms > 0) {
      uint64_t now = spy__mono_ns();
      if (now >= deadline)
        return SPY_EAGAIN;
      wait_ns = (int64_t)(deadline - now);
    }
    /* Before sleeping, watch the rings for a few microseconds: in a burst
     * the next frame usually lands within that, and a reader that never
     * sleeps costs its posters no wake-up at all. */
    uint64_t spin_end = spy__mono_ns() + SPIN_NS;
    int landed = 0;
    while (!(landed = any_pending(ch)) && spy__mono_ns() < spin_end)
      spy__cpu_relax();
    if (landed)
      continue;
    /* Register, re-check (a post may have landed since), sleep. */
    uint32_t st = spy__ec_prepare(ch->ctl);
    if (any_pending(ch)) {
      spy__ec_cancel(ch->ctl, st);
      continue;
    }
    if (ch->efd >= 0)
      pthread_mutex_unlock(&ch->lock);
    if (spy__ec_wait(ch->ctl, st, wait_ns) == SPY_ETIMEDOUT)
      spy__ec_cancel(ch->ctl, st);
    if (ch->efd >= 0)
      pthread_mutex_lock(&ch->lock);
  }
}

int spy_channel_wait(spy_channel *ch, int timeout_ms) {
  if (ch->ops)
    return ch->ops->wait ? ch->ops->wait(ch->impl, timeout_ms) : SPY_ENOTSUP;
  uint64_t deadline =
      timeout_ms > 0 ? spy__mono_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
  for (;;) {
    if (gen_changed(ch))
      rescan(ch);
    if (any_pending(ch))
      return 1;
    if (timeout_ms == 0)
      return 0;
    int64_t wait_ns = -1;
    if (timeout_ms > 0) {
      uint64_t now = spy__mono_ns();
      if (now >= deadline)
        return 0;
      wait_ns = (int64_t)(deadline - now);
    }
    uint32_t st = spy__ec_prepare(ch->ctl);
    if (any_pending(ch)) {
      spy__ec_cancel(ch->ctl, st);
      return 1;
    }
    if (spy__ec_wait(ch->ctl, st, wait_ns) == SPY_ETIMEDOUT)
      spy__ec_cancel(ch->ctl, st);
  }
}

int spy_channel_recv(spy_channel *ch, void *buf, size_t cap, int timeout_ms,
                     spy_recv_info *info) {
  if (ch->ops)
    return ch->ops->recv(ch->impl, buf, cap, timeout_ms, info);
  if (ch->efd < 0)
    return recv_locked(ch, buf, cap, timeout_ms, info);
  /* fd mode: the watcher thread reads the peer list too. */
  pthread_mutex_lock(&ch->lock);
  int r = recv_locked(ch, buf, cap, timeout_ms, info);
  if (r == SPY_EAGAIN) {
    uint64_t v;
    if (read(ch->efd, &v, sizeof v) < 0) {
      /* not signalled: nothing to drain */
    }
    atomic_store(&ch->armed, 1);
    spy__futex_wake((uint32_t *)&ch->armed, 1);
  }
  pthread_mutex_unlock(&ch->lock);
  return r;
}

/* ---- event-loop fd ------------------------------------------------------ */

static void *watch(void *arg) {
  spy_channel *ch = arg;
  while (!atomic_load(&ch->watcher_stop)) {
    if (!atomic_load(&ch->armed)) {
      spy__futex_wait((uint32_t *)&ch->armed, 0, 200000000);
      continue;
    }
    uint32_t st = spy__ec_prepare(ch->ctl);
    pthread_mutex_lock(&ch->lock);
    int pending = any_pending(ch);
    pthread_mutex_unlock(&ch->lock);
    if (!pending && spy__ec_wait(ch->ctl, st, 200000000) == SPY_ETIMEDOUT) {
      spy__ec_cancel(ch->ctl, st);
      continue;
    }
    if (pending)
      spy__ec_cancel(ch->ctl, st);
    pthread_mutex_lock(&ch->lock);
    pending = any_pending(ch);
    pthread_mutex_unlock(&ch->lock);
    if (pending && atomic_exchange(&ch->armed, 0)) {
      uint64_t one = 1;
      if (write(ch->efd, &one, sizeof one) < 0) {
        /* eventfd counter full: the fd is readable anyway */
      }
    }
  }
  return NULL;
}

int spy_channel_fd(spy_channel *ch) {
  if (ch->ops)
    return ch->ops->fd ? ch->ops->fd(ch->impl) : SPY_ENOTSUP;
  if (ch->efd >= 0)
    return ch->efd;
  int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0)
    return -errno;
  /* Start readable: the app drains first, which arms the watcher. */
  uint64_t one = 1;
  if (write(efd, &one, sizeof one) < 0) {
    /* cannot happen on a fresh eventfd */
  }
  pthread_mutex_init(&ch->lock, NULL);
  atomic_store(&ch->armed, 0);
  ch->efd = efd;
  int rc = pthread_create(&ch->watcher, NULL, watch, ch);
  if (rc != 0) {
    close(efd);
    ch->efd = -1;
    pthread_mutex_destroy(&ch->lock);
    return -rc;
  }
  ch->watcher_started = 1;
  return ch->efd;
}

static void stop_watcher(spy_channel *ch) {
  if (!ch->watcher_started)
    return;
  atomic_store(&ch->watcher_stop, 1);
  atomic_store(&ch->armed, 1);
  spy__futex_wake((uint32_t *)&ch->armed, 1);
  /* Wake it if it sleeps on the channel: a notify needs a registration,
   * which it has while asleep. */
  spy__ec_notify(ch->ctl);
  pthread_join(ch->watcher, NULL);
  ch->watcher_started = 0;
  pthread_mutex_destroy(&ch->lock);
}

uint64_t spy_channel_id(const spy_channel *ch) {
  if (ch->ops)
    return ch->ops->id ? ch->ops->id(ch->impl) : 0;
  return ch->id;
}

void spy_channel_get_stats(const spy_channel *ch, spy_channel_stats *out) {
  if (ch->ops) {
    memset(out, 0, sizeof *out);
    if (ch->ops->get_stats)
      ch->ops->get_stats(ch->impl, out);
    return;
  }
  *out = ch->st;
}
