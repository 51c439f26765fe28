/* channel.c — named broadcast channels: a directory per channel holding one
 * entry file per opener; each entry names the opener's ring and the
 * channel's control page, both sealed memfds (see bus.h, ring.h, ctl.h,
 * shm.h).
 *
 * Membership changes (open, close, sweeping a dead opener, re-creating a
 * lost entry) happen under an exclusive flock on the channel directory and
 * bump the control page's generation; readers rescan the directory when it
 * changes. Each entry is flock'ed by its owner for its whole life, so an
 * entry whose lock can be taken belongs to a dead process and is removed.
 *
 * Nothing in the directory or in shared memory is trusted: entries are
 * checked before use and skipped (and counted) when they do not hold up,
 * rings are read through validated private geometry (ring.h), a peer whose
 * ring keeps failing is dropped and re-mapped later with a back-off, and a
 * waiting reader that finds data announced but none readable backs off
 * instead of spinning. Each opener checks its own directory entry now and
 * then, off the post path, and re-creates the directory and the entry when
 * something removed or damaged them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bus/ctl.h"
#include "bus/ring.h"
#include "bus/rundir.h"
#include "bus/shm.h"
#include "platform/platform.h"
#include "spyglass/bus.h"
#include "spyglass/wire.h"

#define RING_PREFIX "r-"
#define TMP_PREFIX ".t-"
#define MAX_PEERS 256
#define MAX_FORGOTTEN 32
#define MAX_RETIRED 4
#define SPIN_NS 20000         /* how long a reader watches before it sleeps */
#define SPIN_AFTER_NS 100000  /* ... if frames came this close together */
#define MAINT_NS 250000000ull /* own entry check, retries of bad peers */
#define FAIL_LIMIT 32         /* inconsistent reads in a row: drop */
#define RETRY_MIN_NS 100000000ull  /* first re-map attempt of a bad peer */
#define RETRY_MAX_NS 5000000000ull /* back-off cap */
#define FUTILE_MIN_NS 1000000ull   /* data announced, none readable: sleep */
#define FUTILE_MAX_NS 64000000ull

/* What a receive reads first (the cursor, the sender's id), then what it
 * reads when a read fails, then the cold part (name, mapping). */
typedef struct peer {
  spy_ring_reader rd;
  uint64_t owner_id;
  uint32_t fails; /* inconsistent reads in a row */
  int gone;       /* no longer in the directory: drain, then drop */
  void *map;
  size_t map_bytes;
  char file[64];
} peer;

/* A peer we dropped or could not map: where its cursor was (to resume
 * exactly, without loss or repeats, if it comes back) and, for a bad one,
 * when to try it again. */
typedef struct forgotten {
  char file[64];
  uint64_t owner_id, pos, next_seq;
  uint64_t retry_ns, backoff_ns;
  int bad;  /* mapping or reading failed: retry after retry_ns */
  int seen; /* present in the last scan */
} forgotten;

/* The fields a post or a receive touches come first, together (a few
 * cache lines and one page: a reader woken from a sleep finds them cold);
 * the paths, the forgotten list and the watcher thread's state follow. */
struct spy_channel {
  /* Another backend (bus.h spy_channel_ops): every call goes to it. */
  const spy_channel_ops *ops;
  void *impl;
  /* ---- hot: every receive ---- */
  spy_ctl *ctl;
  int efd;
  int npeers;
  int rr;
  uint32_t gen_seen;
  uint32_t calls;
  uint32_t futile;       /* waits that found data announced but none read */
  int wait_said_pending; /* spy_channel_wait returned 1 */
  int busy;              /* a peer read failed in the last pass */
  int spin;              /* more than one CPU: watching before sleeping pays */
  uint64_t last_rx_ns;   /* when a receive last returned a frame */
  uint64_t rx_gap_ns;    /* and how long after the one before */
  uint64_t next_maint_ns;
  spy_channel_stats st;
  spy_channel_view *view; /* the receive in progress is in place */
  /* ---- hot: every post ---- */
  uint64_t id;
  int post_sock; /* unbound socket to signal readers with, -1 not yet */
  uint32_t uid;  /* getuid() at open: in every doorbell name, looked up
                    once instead of one system call per signal */
  spy_ring_writer w;
  /* ---- the peers, each hot part first ---- */
  peer peers[MAX_PEERS];
  /* ---- cold ---- */
  char root[PATH_MAX];
  char dir[PATH_MAX];
  int dfd;
  int ctl_fd;
  uint64_t ctl_id;
  spy_ctl *retired[MAX_RETIRED]; /* replaced control pages (fd mode) */
  int nretired;
  int ring_fd;
  void *ring_mem;
  size_t ring_map;
  uint32_t ring_bytes;
  int entry_fd;
  spy_bus_entry entry;
  char ring_file[64];
  uint64_t created_ns;
  forgotten fg[MAX_FORGOTTEN];
  int nfg;
  uint64_t recreated_seen; /* spy_channel_recreated */
  /* spy_channel_fd: a datagram socket posters signal directly (efd_sock),
   * else an eventfd; the watcher thread only as a fallback */
  int efd_sock;  /* efd is our bound socket (the event-loop doorbell) */
  int wake_slot; /* the ctl slot we last armed, -1 none */
  pthread_t watcher;
  int watcher_started;
  _Atomic int watcher_stop;
  _Atomic uint32_t armed; /* 1: the app drained; the watcher may signal */
  pthread_mutex_t lock;   /* fd mode: recv vs the watcher's peek */
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
  ch->dfd = ch->ring_fd = ch->efd = ch->entry_fd = ch->ctl_fd = -1;
  ch->wake_slot = ch->post_sock = -1;
  *out = ch;
  return 0;
}

/* ---- directory helpers -------------------------------------------------- */

static int is_ring_name(const char *n) {
  return strncmp(n, RING_PREFIX, strlen(RING_PREFIX)) == 0;
}

/* Opens entry `name` in dfd and removes it if its owner is dead (its lock
 * can be taken). Only regular files of ours are judged; anything else is
 * left alone (rescan counts it). Returns 1 if removed, 0 if not. */
static int reap_if_dead(int dfd, const char *name) {
  int fd = openat(dfd, name,
                  O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return 0;
  struct stat st;
  int dead = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
    dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (dead)
    unlinkat(dfd, name, 0);
  close(fd);
  return dead;
}

/* Calls fn(dfd, name, arg) for every ring-named entry (and, with tmp,
 * every temporary one); stops when fn returns non-zero and returns that,
 * else 0; -errno if the directory cannot be read. */
static int each_entry_of(int dfd, int (*fn)(int, const char *, void *),
                         void *arg, int tmp) {
  int dup_fd = dup(dfd);
  if (dup_fd < 0)
    return -errno;
  DIR *d = fdopendir(dup_fd);
  if (!d) {
    close(dup_fd);
    return -errno;
  }
  rewinddir(d);
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)))
    if (is_ring_name(e->d_name) ||
        (tmp && strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0))
      rc = fn(dfd, e->d_name, arg);
  closedir(d);
  return rc;
}

static int each_entry(int dfd, int (*fn)(int, const char *, void *),
                      void *arg) {
  return each_entry_of(dfd, fn, arg, 0);
}

typedef struct reap_ctx {
  int live, reaped;
} reap_ctx;

static int reap_one(int dfd, const char *name, void *arg) {
  reap_ctx *r = arg;
  if (!is_ring_name(name)) {
    /* A temporary entry seen with the directory locked was left by an
     * opener that died while writing it (they are renamed under the
     * lock). */
    reap_if_dead(dfd, name);
    return 0;
  }
  if (reap_if_dead(dfd, name))
    r->reaped++;
  else
    r->live++;
  return 0;
}

/* With the directory locked: reaps dead entries; returns those left. */
static int reap_dir(int dfd, int *reaped) {
  reap_ctx r = {0, 0};
  int rc = each_entry_of(dfd, reap_one, &r, 1);
  *reaped += r.reaped;
  return rc < 0 ? rc : r.live;
}

/* Maps the control page another opener's entry names, checking it is the
 * one the entry says. */
static int map_peer_ctl(const spy_bus_entry *e, spy_ctl **out) {
  int fd = spy__shm_open_peer(e->pid, e->ctl_fd, SPY_CTL_BYTES, 1);
  if (fd < 0)
    return fd;
  spy_ctl *c =
      mmap(NULL, SPY_CTL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (c == MAP_FAILED) {
    int rc = -errno;
    close(fd);
    return rc;
  }
  if (c->magic != SPY_CTL_MAGIC || c->version != SPY_CTL_VERSION ||
      c->id != e->ctl_id) {
    munmap(c, SPY_CTL_BYTES);
    close(fd);
    return SPY_EBADSEGMENT;
  }
  *out = c;
  return fd;
}

typedef struct find_ctl_ctx {
  const char *skip;
  spy_ctl *ctl;
  int fd;
  uint64_t id;
} find_ctl_ctx;

static int find_ctl_one(int dfd, const char *name, void *arg) {
  find_ctl_ctx *f = arg;
  spy_bus_entry e;
  if ((f->skip && strcmp(name, f->skip) == 0) ||
      spy__entry_read(dfd, name, &e) < 0)
    return 0;
  int fd = map_peer_ctl(&e, &f->ctl);
  if (fd < 0)
    return 0;
  f->fd = fd;
  f->id = e.ctl_id;
  return 1;
}

/* The control page of the first live opener in dfd other than `skip`. */
static int find_ctl(int dfd, const char *skip, find_ctl_ctx *f) {
  f->skip = skip;
  f->ctl = NULL;
  f->fd = -1;
  return each_entry(dfd, find_ctl_one, f) == 1 ? 0 : SPY_ENOENT;
}

static void bump_generation(int dfd) {
  find_ctl_ctx f;
  if (find_ctl(dfd, NULL, &f) < 0)
    return;
  atomic_fetch_add(&f.ctl->generation, 1);
  spy__ec_notify(f.ctl);
  munmap(f.ctl, SPY_CTL_BYTES);
  close(f.fd);
}

/* Locks the channel directory `path` (creating it, and the runtime
 * directory `root` if that went too), retrying if another process removed
 * it between our mkdir and our lock. Returns the fd. */
static int lock_channel_dir(const char *root, const char *path, int create) {
  for (int tries = 0; tries < 100; tries++) {
    if (create && mkdir(path, 0700) < 0 && errno != EEXIST) {
      if (errno != ENOENT || !root || tries > 0)
        return -errno;
      int rc = spy__dir_ensure(root); /* the runtime directory was removed */
      if (rc < 0)
        return rc;
      continue;
    }
    int rc = spy__dir_check(path);
    if (rc == -ENOENT && create)
      continue; /* another opener's sweep removed it (it was empty) */
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

/* With the directory locked: removes the directory if no entry is left
 * (anything foreign in it makes rmdir fail, which is fine). */
static void remove_if_empty(const char *path, int live) {
  if (live == 0)
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
    int dfd = lock_channel_dir(NULL, path, 0);
    if (dfd < 0)
      continue;
    int before = reaped;
    int live = reap_dir(dfd, &reaped);
    if (reaped != before)
      bump_generation(dfd);
    if (live >= 0)
      remove_if_empty(path, live);
    close(dfd);
  }
  closedir(d);
  return reaped;
}

/* ---- joining: control page, ring, entry -------------------------------- */

static void set_ctl(spy_channel *ch, spy_ctl *c, int fd, uint64_t id) {
  if (ch->ctl) {
    /* The watcher thread may still be asleep on the old page: keep it
     * mapped until close. Without a watcher nobody else uses it. */
    if (ch->watcher_started && ch->nretired < MAX_RETIRED)
      ch->retired[ch->nretired++] = ch->ctl;
    else
      munmap(ch->ctl, SPY_CTL_BYTES);
  }
  if (ch->ctl_fd >= 0)
    close(ch->ctl_fd);
  ch->ctl = c;
  ch->ctl_fd = fd;
  ch->ctl_id = id;
  ch->gen_seen = atomic_load(&c->generation) - 1; /* rescan soon */
}

/* With the directory locked: takes the channel's control page from a live
 * opener, or creates one if there is none (and we have none). */
static int get_ctl(spy_channel *ch, int dfd) {
  find_ctl_ctx f;
  if (find_ctl(dfd, ch->ring_file, &f) == 0) {
    if (f.id == ch->ctl_id) { /* the one we have already */
      munmap(f.ctl, SPY_CTL_BYTES);
      close(f.fd);
      return 0;
    }
    set_ctl(ch, f.ctl, f.fd, f.id);
    return 0;
  }
  if (ch->ctl)
    return 0; /* we are the first in a re-created directory: keep ours */
  int fd = spy__shm_create("spyglass-ctl", SPY_CTL_BYTES);
  if (fd < 0)
    return fd;
  spy_ctl *c =
      mmap(NULL, SPY_CTL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (c == MAP_FAILED) {
    int rc = -errno;
    close(fd);
    return rc;
  }
  c->version = SPY_CTL_VERSION;
  c->id = spy__random_u64();
  atomic_thread_fence(memory_order_release);
  c->magic = SPY_CTL_MAGIC;
  set_ctl(ch, c, fd, c->id);
  return 0;
}

static int create_ring(spy_channel *ch) {
  ch->ring_map = SPY_RING_HEADER_BYTES + (size_t)ch->ring_bytes;
  int fd = spy__shm_create("spyglass-ring", ch->ring_map);
  if (fd < 0)
    return fd;
  /* Populated: the memory is allocated in full already (shm.h), and
   * mapping it now spares the first lap a page fault per page. */
  void *m = mmap(NULL, ch->ring_map, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_POPULATE, fd, 0);
  if (m == MAP_FAILED) {
    int rc = -errno;
    close(fd);
    return rc;
  }
  ch->ring_fd = fd;
  ch->ring_mem = m;
  spy__ring_writer_init(&ch->w, m, ch->ring_bytes, ch->id, (uint32_t)getpid(),
                        ch->created_ns);
  return 0;
}

/* With the directory locked: writes our entry under a temporary name,
 * locks it and renames it into place, so that it never appears half
 * written and never disappears while we replace it. */
static int write_entry(spy_channel *ch, int dfd) {
  spy_bus_entry *e = &ch->entry;
  memset(e, 0, sizeof *e);
  e->magic = SPY_ENTRY_MAGIC;
  e->version = SPY_ENTRY_VERSION;
  e->pid = (uint32_t)getpid();
  e->ring_fd = ch->ring_fd;
  e->ctl_fd = ch->ctl_fd;
  e->ring_bytes = ch->ring_bytes;
  e->owner_id = ch->id;
  e->ctl_id = ch->ctl_id;
  spy__entry_seal(e);
  char tmp[80];
  snprintf(tmp, sizeof tmp, TMP_PREFIX "%s", ch->ring_file + 2);
  unlinkat(dfd, tmp, 0); /* a leftover of ours, or planted */
  int fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                  0600);
  if (fd < 0)
    return -errno;
  int rc = 0;
  ssize_t n = pwrite(fd, e, sizeof *e, 0);
  if (n < 0)
    rc = -errno;
  else if (n != (ssize_t)sizeof *e)
    rc = SPY_ENOSPC;
  if (rc == 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
    rc = -errno;
  if (rc == 0 && renameat(dfd, tmp, dfd, ch->ring_file) < 0)
    rc = -errno;
  if (rc < 0) {
    unlinkat(dfd, tmp, 0);
    close(fd);
    return rc;
  }
  if (ch->entry_fd >= 0)
    close(ch->entry_fd);
  ch->entry_fd = fd;
  return 0;
}

/* Creates (or re-creates) the channel directory and our entry in it, with
 * the directory locked. On success ch->dfd is the new directory. */
static int join(spy_channel *ch) {
  int dfd = lock_channel_dir(ch->root, ch->dir, 1);
  if (dfd < 0)
    return dfd;
  int reaped = 0;
  int live = reap_dir(dfd, &reaped);
  int rc = get_ctl(ch, dfd);
  if (rc == 0 && !ch->ring_mem)
    rc = create_ring(ch);
  if (rc == 0)
    rc = write_entry(ch, dfd);
  if (rc == 0) {
    atomic_fetch_add(&ch->ctl->generation, 1);
    spy__ec_notify(ch->ctl); /* sleepers rescan and find us */
  } else if (live == 0) {
    remove_if_empty(ch->dir, 0); /* leave nothing behind (a full disk) */
  }
  flock(dfd, LOCK_UN);
  if (rc < 0) {
    close(dfd);
    return rc;
  }
  if (ch->dfd >= 0)
    close(ch->dfd);
  ch->dfd = dfd;
  return 0;
}

/* ---- peers -------------------------------------------------------------- */

static forgotten *find_forgotten(spy_channel *ch, const char *file) {
  for (int i = 0; i < ch->nfg; i++)
    if (strcmp(ch->fg[i].file, file) == 0)
      return &ch->fg[i];
  return NULL;
}

static forgotten *add_forgotten(spy_channel *ch, const char *file) {
  forgotten *f = find_forgotten(ch, file);
  if (!f) {
    if (ch->nfg == MAX_FORGOTTEN) { /* full: forget the first */
      memmove(&ch->fg[0], &ch->fg[1], sizeof ch->fg[0] * (MAX_FORGOTTEN - 1));
      ch->nfg--;
    }
    f = &ch->fg[ch->nfg++];
    memset(f, 0, sizeof *f);
    size_t n = strnlen(file, sizeof f->file - 1);
    memcpy(f->file, file, n);
    f->file[n] = 0;
  }
  return f;
}

/* Schedules the next attempt at a bad peer, each later than the last. */
static void mark_bad(forgotten *f) {
  uint64_t b = f->backoff_ns ? f->backoff_ns * 2 : RETRY_MIN_NS;
  f->backoff_ns = b > RETRY_MAX_NS ? RETRY_MAX_NS : b;
  f->retry_ns = spy__mono_ns() + f->backoff_ns;
  f->bad = 1;
}

static void unmap_peer(peer *p) {
  if (p->map)
    munmap(p->map, p->map_bytes);
  p->map = NULL;
}

/* Maps a peer's ring read-only through its entry. 0 on success, < 0 to
 * skip it for now. */
static int map_peer(spy_channel *ch, const char *name, peer *p) {
  spy_bus_entry e;
  int rc = spy__entry_read(ch->dfd, name, &e);
  if (rc < 0)
    return rc;
  uint32_t rb = e.ring_bytes;
  if (rb < (64u << 10) || rb > (256u << 20) || (rb & (rb - 1)) ||
      e.owner_id == ch->id)
    return SPY_EBADSEGMENT;
  size_t bytes = SPY_RING_HEADER_BYTES + (size_t)rb;
  int fd = spy__shm_open_peer(e.pid, e.ring_fd, bytes, 0);
  if (fd < 0)
    return fd;
  void *m = mmap(NULL, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED)
    return -errno;
  const spy_ring_hdr *h = m;
  if (spy__ring_reader_init(&p->rd, m, bytes) < 0 ||
      *(const volatile uint64_t *)&h->owner_id != e.owner_id) {
    munmap(m, bytes);
    return SPY_EBADSEGMENT;
  }
  p->map = m;
  p->map_bytes = bytes;
  p->owner_id = e.owner_id;
  p->fails = 0;
  p->gone = 0;
  snprintf(p->file, sizeof p->file, "%s", name);
  forgotten *f = find_forgotten(ch, name);
  if (f && f->owner_id == e.owner_id) {
    /* Seen before: resume where we were (the reader checks the position
     * like any other, a stale one only costs a resync). */
    p->rd.pos = f->pos;
    p->rd.next_seq = f->next_seq;
  } else if (*(const volatile uint64_t *)&h->created_mono_ns >=
             ch->created_ns) {
    /* A ring born after ours: read it from its start, so an opener's first
     * frames are not lost to our rescan delay. Older rings: from now on. */
    spy__ring_reader_at_start(&p->rd);
  }
  if (f)
    f->bad = 0; /* mapped; the back-off it earned stays */
  return 0;
}

static void drop_peer(spy_channel *ch, int i, int bad) {
  peer *p = &ch->peers[i];
  forgotten *f = add_forgotten(ch, p->file);
  f->owner_id = p->owner_id;
  f->pos = p->rd.pos;
  f->next_seq = p->rd.next_seq;
  if (bad) {
    mark_bad(f);
    ch->st.dropped++;
  }
  unmap_peer(p);
  ch->peers[i] = ch->peers[ch->npeers - 1];
  ch->npeers--;
}

static void rescan(spy_channel *ch) {
  /* Our directory removed (nlink 0) reads as empty: re-create it first,
   * or every peer would look gone. */
  struct stat ds;
  if (fstat(ch->dfd, &ds) == 0 && ds.st_nlink == 0) {
    if (join(ch) < 0) { /* keep the peers we have; upkeep retries */
      ch->gen_seen = atomic_load(&ch->ctl->generation);
      return;
    }
    ch->st.recreated++;
  }
  ch->gen_seen = atomic_load(&ch->ctl->generation);
  for (int i = 0; i < ch->npeers; i++)
    ch->peers[i].gone = 1;
  for (int i = 0; i < ch->nfg; i++)
    ch->fg[i].seen = 0;
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
  uint64_t now = spy__mono_ns();
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!is_ring_name(e->d_name) || strcmp(e->d_name, ch->ring_file) == 0)
      continue;
    if (strlen(e->d_name) >= sizeof ch->peers[0].file) {
      ch->st.skipped++; /* not a name we create */
      continue;
    }
    int known = 0;
    for (int i = 0; i < ch->npeers; i++)
      if (strcmp(ch->peers[i].file, e->d_name) == 0) {
        ch->peers[i].gone = 0;
        known = 1;
      }
    if (known || ch->npeers == MAX_PEERS)
      continue;
    forgotten *f = find_forgotten(ch, e->d_name);
    if (f)
      f->seen = 1;
    if (f && f->bad && now < f->retry_ns)
      continue; /* backing off */
    if (map_peer(ch, e->d_name, &ch->peers[ch->npeers]) == 0) {
      ch->npeers++;
      continue;
    }
    /* Stale (owner dead), foreign, or damaged: skip it, count it once,
     * try again later with a back-off. */
    if (!f || !f->bad)
      ch->st.skipped++;
    f = add_forgotten(ch, e->d_name);
    f->seen = 1;
    mark_bad(f);
  }
  closedir(d);
  /* Bad names that left the directory need no more retries. */
  for (int i = 0; i < ch->nfg;)
    if (ch->fg[i].bad && !ch->fg[i].seen)
      ch->fg[i] = ch->fg[--ch->nfg];
    else
      i++;
  ch->st.peers = 0;
  for (int i = 0; i < ch->npeers; i++)
    ch->st.peers += !ch->peers[i].gone;
}

/* Off the post path, at most every MAINT_NS: repairs our ring's header,
 * checks that our directory and entry are still there and intact
 * (re-creating them if not), and retries peers we could not map. */
static void maintain(spy_channel *ch, uint64_t now) {
  if (now < ch->next_maint_ns)
    return;
  ch->next_maint_ns = now + MAINT_NS;
  if (spy__ring_repair(&ch->w))
    ch->st.corrupt++;
  int need = 0;
  struct stat ds, es, ns;
  spy_bus_entry cur;
  if (fstat(ch->dfd, &ds) < 0 || ds.st_nlink == 0)
    need = 1; /* the directory was removed */
  else if (fstat(ch->entry_fd, &es) < 0 ||
           fstatat(ch->dfd, ch->ring_file, &ns, AT_SYMLINK_NOFOLLOW) < 0 ||
           ns.st_ino != es.st_ino || ns.st_dev != es.st_dev)
    need = 1; /* our entry was removed or replaced */
  else if (es.st_size != (off_t)sizeof cur ||
           pread(ch->entry_fd, &cur, sizeof cur, 0) != (ssize_t)sizeof cur ||
           memcmp(&cur, &ch->entry, sizeof cur) != 0)
    need = 1; /* truncated or overwritten */
  if (need) {
    if (join(ch) == 0) {
      ch->st.recreated++;
      ch->gen_seen = atomic_load(&ch->ctl->generation) - 1;
    } else {
      ch->next_maint_ns = now + 4 * MAINT_NS; /* full disk…: later */
    }
  }
  for (int i = 0; i < ch->nfg; i++)
    if (ch->fg[i].bad && now >= ch->fg[i].retry_ns) {
      rescan(ch);
      break;
    }
}

/* ---- open / close ------------------------------------------------------- */

int spy_channel_open(spy_channel **out, const spy_channel_desc *desc) {
  *out = NULL;
  if (!desc || !spy__channel_name_ok(desc->name))
    return SPY_EINVAL;
  if (desc->ops)
    return open_backend(out, desc);
  uint32_t rb = desc->ring_bytes ? desc->ring_bytes : 1u << 20;
  if (rb < (64u << 10) || rb > (256u << 20) || (rb & (rb - 1)))
    return SPY_EINVAL;
  spy_channel *ch = calloc(1, sizeof *ch);
  if (!ch)
    return SPY_ENOMEM;
  int rc = spy__rundir_resolve(desc->dir, ch->root, sizeof ch->root);
  if (rc < 0) {
    free(ch);
    return rc;
  }
  spy_bus_sweep(desc->dir);
  ch->dfd = ch->ring_fd = ch->efd = ch->entry_fd = ch->ctl_fd = -1;
  ch->wake_slot = ch->post_sock = -1;
  ch->id = spy__random_u64();
  ch->uid = (uint32_t)getuid();
  ch->spin = sysconf(_SC_NPROCESSORS_ONLN) > 1;
  ch->ring_bytes = rb;
  ch->created_ns = spy__mono_ns();
  snprintf(ch->ring_file, sizeof ch->ring_file, RING_PREFIX "%d-%016llx",
           (int)getpid(), (unsigned long long)ch->id);
  if ((size_t)snprintf(ch->dir, sizeof ch->dir, "%s/%s", ch->root,
                       desc->name) >= sizeof ch->dir) {
    free(ch);
    return SPY_ENAMETOOLONG;
  }
  rc = join(ch);
  if (rc < 0) {
    spy_channel_close(ch);
    return rc;
  }
  ch->next_maint_ns = spy__mono_ns() + MAINT_NS;
  rescan(ch);
  *out = ch;
  return 0;
}

static void stop_watcher(spy_channel *ch);
static void disarm(spy_channel *ch);
static int start_watcher(spy_channel *ch);

void spy_channel_close(spy_channel *ch) {
  if (!ch)
    return;
  if (ch->ops) {
    ch->ops->close(ch->impl);
    free(ch);
    return;
  }
  stop_watcher(ch);
  disarm(ch);
  for (int i = 0; i < ch->npeers; i++)
    unmap_peer(&ch->peers[i]);
  if (ch->dfd >= 0 && ch->entry_fd >= 0) {
    flock(ch->dfd, LOCK_EX);
    struct stat es, ns;
    /* Remove our entry, not whatever may have replaced it. */
    if (fstat(ch->entry_fd, &es) == 0 &&
        fstatat(ch->dfd, ch->ring_file, &ns, AT_SYMLINK_NOFOLLOW) == 0 &&
        es.st_ino == ns.st_ino && es.st_dev == ns.st_dev)
      unlinkat(ch->dfd, ch->ring_file, 0);
    int reaped = 0;
    int live = reap_dir(ch->dfd, &reaped);
    if (ch->ctl) {
      atomic_fetch_add(&ch->ctl->generation, 1);
      spy__ec_notify(ch->ctl);
    }
    struct stat ds;
    if (live >= 0 && fstat(ch->dfd, &ds) == 0 && ds.st_nlink > 0)
      remove_if_empty(ch->dir, live);
    flock(ch->dfd, LOCK_UN);
  }
  if (ch->ring_mem)
    munmap(ch->ring_mem, ch->ring_map);
  if (ch->ctl)
    munmap(ch->ctl, SPY_CTL_BYTES);
  for (int i = 0; i < ch->nretired; i++)
    munmap(ch->retired[i], SPY_CTL_BYTES);
  int fds[] = {ch->ring_fd, ch->ctl_fd, ch->entry_fd,
               ch->dfd,     ch->efd,    ch->post_sock};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  free(ch);
}

/* ---- event-loop doorbell ------------------------------------------------
 *
 * A reader in fd mode (spy_channel_fd) has a datagram socket bound to an
 * abstract name made of its uid and id; when it has drained the channel
 * it arms a slot of the control page with its id (ctl.h) and re-checks
 * the rings. A poster, after writing (the notify's seq_cst fence orders
 * that before it reads the mask), clears every slot armed by another
 * opener and sends that reader one byte: the reader's own poll wakes, with
 * no thread in between. A byte from anyone else only costs the reader a
 * look at the rings. More than SPY_CTL_WAKE_SLOTS sleeping at once, or no
 * socket: the watcher thread does it as before. */

static socklen_t wake_name(const spy_channel *ch, uint64_t id,
                           struct sockaddr_un *a) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1,
                   "spyglass-wake-%u-%016llx", (unsigned)ch->uid,
                   (unsigned long long)id);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* Signals the readers armed by others; returns how many. */
static int ring_readers(spy_channel *ch) {
  spy_ctl *c = ch->ctl;
  uint64_t m = atomic_load_explicit(&c->wake_mask, memory_order_relaxed);
  int n = 0;
  while (m) {
    int i = __builtin_ctzll(m);
    m &= m - 1;
    uint64_t id = atomic_load_explicit(&c->wake_id[i], memory_order_relaxed);
    if (id == ch->id)
      continue; /* our own: a handle does not receive its posts */
    atomic_fetch_and(&c->wake_mask, ~(1ull << i));
    id = atomic_exchange(&c->wake_id[i], 0);
    if (!id || id == ch->id) {
      if (id) { /* ours after all (re-armed in between): put it back */
        atomic_store(&c->wake_id[i], id);
        atomic_fetch_or(&c->wake_mask, 1ull << i);
      }
      continue;
    }
    if (ch->post_sock < 0)
      ch->post_sock =
          socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ch->post_sock < 0)
      continue;
    struct sockaddr_un a;
    socklen_t al = wake_name(ch, id, &a);
    char b = 1;
    /* Not there (it closed or died), or its queue is full (it is readable
     * anyway): nothing to do. */
    if (sendto(ch->post_sock, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
               (struct sockaddr *)&a, al) == 1)
      n++;
  }
  return n;
}

/* Arms a slot with our id (keeps the one we hold). 1 armed, 0 all taken. */
static int arm(spy_channel *ch) {
  spy_ctl *c = ch->ctl;
  int i = ch->wake_slot;
  if (i < 0 || atomic_load(&c->wake_id[i]) != ch->id) {
    i = -1;
    for (int k = 0; k < (int)SPY_CTL_WAKE_SLOTS && i < 0; k++) {
      uint64_t z = 0;
      if (atomic_compare_exchange_strong(&c->wake_id[k], &z, ch->id))
        i = k;
    }
    ch->wake_slot = i;
    if (i < 0)
      return 0;
  }
  atomic_fetch_or(&c->wake_mask, 1ull << i); /* seq_cst: then re-check */
  return 1;
}

static void disarm(spy_channel *ch) {
  if (ch->wake_slot < 0 || !ch->ctl)
    return;
  uint64_t id = ch->id;
  atomic_compare_exchange_strong(&ch->ctl->wake_id[ch->wake_slot], &id, 0);
  ch->wake_slot = -1;
}

/* Makes our own fd readable. */
static void signal_self(spy_channel *ch) {
  if (ch->efd_sock) {
    struct sockaddr_un a;
    socklen_t al = wake_name(ch, ch->id, &a);
    char b = 1;
    if (sendto(ch->efd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
               (struct sockaddr *)&a, al) < 0) {
      /* queue full: readable already */
    }
    return;
  }
  uint64_t one = 1;
  if (write(ch->efd, &one, sizeof one) < 0) {
    /* eventfd counter full: the fd is readable anyway */
  }
}

static void drain_fd(spy_channel *ch) {
  uint64_t v;
  if (!ch->efd_sock) {
    if (read(ch->efd, &v, sizeof v) < 0) {
      /* not signalled: nothing to drain */
    }
    return;
  }
  /* One datagram: a poster signals only a slot it found armed and disarms
   * it as it does, so one is what an arm lets in. Should more be queued
   * (signal_self), the fd stays readable and the next turn takes them;
   * reading on to EAGAIN would cost every wake-up a second system call. */
  char b[64];
  if (recv(ch->efd, b, sizeof b, MSG_DONTWAIT) < 0) {
    /* nothing queued: nothing to drain */
  }
}

/* ---- post / receive ----------------------------------------------------- */

/* A frame of len bytes is in the ring: counts it and wakes sleeping
 * readers, once for all of them, only if any registered (the
 * eventcount's fence orders our head store before its check). */
static inline void published(spy_channel *ch, size_t len) {
  ch->st.posted++;
  ch->st.bytes_posted += len;
  ch->st.wakes += (uint64_t)spy__ec_notify(ch->ctl);
  ch->st.wakes += (uint64_t)ring_readers(ch);
}

int spy_channel_post(spy_channel *ch, const void *frame, size_t len) {
  if (ch->ops)
    return ch->ops->post(ch->impl, frame, len);
  if (!frame || len == 0 || len > SPY_FRAME_MAX)
    return SPY_EINVAL;
  int rc = spy__ring_write(&ch->w, frame, (uint32_t)len);
  if (rc < 0)
    return rc;
  published(ch, len);
  return 0;
}

void *spy_channel_post_reserve(spy_channel *ch, size_t max_len) {
  if (ch->ops || max_len == 0 || max_len > SPY_FRAME_MAX)
    return NULL;
  return spy__ring_reserve(&ch->w, (uint32_t)max_len);
}

int spy_channel_post_commit(spy_channel *ch, size_t len) {
  if (ch->ops)
    return SPY_ENOTSUP;
  if (len > SPY_FRAME_MAX) {
    spy__ring_commit(&ch->w, 0);
    return SPY_EINVAL;
  }
  int rc = spy__ring_commit(&ch->w, (uint32_t)len);
  if (rc < 0 || len == 0)
    return rc;
  published(ch, len);
  return 0;
}

/* One pass over the peers, round robin. Returns > 0 (length), 0 (nothing),
 * or SPY_ENOBUFS. Sets ch->busy when a ring could not be read cleanly.
 * With ch->view set, the frame is left in place and described there. */
static int read_any(spy_channel *ch, void *buf, size_t cap,
                    spy_recv_info *info) {
  spy_channel_view *v = ch->view;
  for (int n = 0; n < ch->npeers; n++) {
    int i = (ch->rr + n) % ch->npeers;
    peer *p = &ch->peers[i];
    uint64_t lost = 0;
    uint32_t len = 0;
    int r;
    if (v) {
      r = spy__ring_peek(&p->rd, &v->data, &v->at_, &lost, &len);
      if (r > 0) {
        v->len = len;
        v->peer_ = (uint32_t)i;
        v->ring_ = p->rd.h;
      }
    } else {
      r = spy__ring_read(&p->rd, buf, cap, &lost, &len);
    }
    if (lost)
      ch->st.lost += lost;
    if (r > 0 || r == SPY_ENOBUFS) {
      p->fails = 0;
      if (info) {
        info->sender = p->owner_id;
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
    if (r == SPY_EBADSEGMENT) {
      ch->st.corrupt++; /* the reader resynced at the head */
      p->fails++;
    }
    if (r < 0)
      ch->busy = 1;
    if (p->fails >= FAIL_LIMIT || (p->gone && r <= 0)) {
      /* keeps failing (re-mapped later), or its owner left and it is
       * drained or unreadable */
      drop_peer(ch, i, p->fails >= FAIL_LIMIT);
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
    if (spy__ring_pending(&ch->peers[i].rd))
      return 1;
  return gen_changed(ch);
}

/* Sleeps on the doorbell for at most ns (a post wakes it early): the wait
 * of a reader that was told data is there and found none. */
static void back_off(spy_channel *ch, int64_t ns) {
  uint32_t st = spy__ec_prepare(ch->ctl);
  if (ch->efd >= 0)
    pthread_mutex_unlock(&ch->lock);
  if (spy__ec_wait(ch->ctl, st, ns) == SPY_ETIMEDOUT)
    spy__ec_cancel(ch->ctl, st);
  if (ch->efd >= 0)
    pthread_mutex_lock(&ch->lock);
}

static int64_t futile_ns(uint32_t futile) {
  uint64_t ns = FUTILE_MIN_NS << (futile < 7 ? futile : 6);
  return (int64_t)(ns < FUTILE_MAX_NS ? ns : FUTILE_MAX_NS);
}

static int recv_locked(spy_channel *ch, void *buf, size_t cap, int timeout_ms,
                       spy_recv_info *info) {
  uint64_t deadline =
      timeout_ms > 0 ? spy__mono_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
  int expect = 0; /* the last round saw data announced */
  uint32_t futile = 0;
  for (;;) {
    if ((++ch->calls & 1023) == 0)
      maintain(ch, spy__mono_ns()); /* a reader that is never idle */
    if (gen_changed(ch))
      rescan(ch);
    ch->busy = 0;
    int r = read_any(ch, buf, cap, info);
    if (r != 0) {
      ch->futile = 0;
      ch->wait_said_pending = 0;
      if (r > 0 && ch->spin) {
        uint64_t t = spy__mono_ns();
        ch->rx_gap_ns = t - ch->last_rx_ns;
        ch->last_rx_ns = t;
      }
      return r;
    }
    uint64_t now = spy__mono_ns();
    maintain(ch, now);
    if (timeout_ms == 0) {
      if (ch->wait_said_pending && ch->futile < 64)
        ch->futile++; /* spy_channel_wait said there was data */
      ch->wait_said_pending = 0;
      return SPY_EAGAIN;
    }
    int64_t wait_ns = -1;
    if (timeout_ms > 0) {
      if (now >= deadline)
        return SPY_EAGAIN;
      wait_ns = (int64_t)(deadline - now);
    }
    /* Data announced but nothing readable, again: a ring that lies or a
     * writer that keeps lapping us. Sleep a growing while instead of
     * spinning on it. */
    if (expect || ch->busy)
      futile++;
    else
      futile = 0;
    expect = 0;
    if (futile >= 2) {
      int64_t b = futile_ns(futile - 2);
      back_off(ch, wait_ns >= 0 && wait_ns < b ? wait_ns : b);
      continue;
    }
    /* Before sleeping, watch the rings for a few microseconds, but only
     * in a burst (the last two frames came within SPIN_AFTER_NS of each
     * other, the last one that recently) and with another CPU to post
     * it: then the next frame usually lands within that, and a reader
     * that never sleeps costs its posters no wake-up at all. A reader of
     * lone frames (a provider's worker between ticks, a reply now and
     * then) goes straight to sleep: a spin after each of them would take
     * CPU from the program it shares the machine with, and on a
     * scheduler that weighs recent CPU use (EEVDF) make the wake-up of
     * that reader wait for the poster's time slice instead of preempting
     * it (a bare futex waiter's does). */
    if (ch->spin && ch->rx_gap_ns < SPIN_AFTER_NS &&
        now - ch->last_rx_ns < SPIN_AFTER_NS) {
      uint64_t spin_end = now + SPIN_NS;
      while (!(expect = any_pending(ch)) && spy__mono_ns() < spin_end)
        spy__cpu_relax();
      if (expect)
        continue;
    }
    /* Register, re-check (a post may have landed since), sleep. */
    uint32_t st = spy__ec_prepare(ch->ctl);
    if ((expect = any_pending(ch))) {
      spy__ec_cancel(ch->ctl, st);
      continue;
    }
    if (wait_ns < 0 || wait_ns > (int64_t)MAINT_NS)
      wait_ns = (int64_t)MAINT_NS; /* wake for our own upkeep now and then */
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
  /* The caller's receives found nothing after we last said there was
   * something: wait a growing while before saying so again. */
  if (ch->futile >= 2 && timeout_ms != 0) {
    int64_t b = futile_ns(ch->futile - 2);
    back_off(ch, timeout_ms > 0 && (int64_t)timeout_ms * 1000000 < b
                     ? (int64_t)timeout_ms * 1000000
                     : b);
  }
  for (;;) {
    uint64_t now = spy__mono_ns();
    maintain(ch, now);
    if (gen_changed(ch))
      rescan(ch);
    if (any_pending(ch))
      return ch->wait_said_pending = 1;
    if (timeout_ms == 0)
      return 0;
    int64_t wait_ns = -1;
    if (timeout_ms > 0) {
      if (now >= deadline)
        return 0;
      wait_ns = (int64_t)(deadline - now);
    }
    /* Wake up for our own upkeep now and then. */
    if (wait_ns < 0 || wait_ns > (int64_t)MAINT_NS)
      wait_ns = (int64_t)MAINT_NS;
    uint32_t st = spy__ec_prepare(ch->ctl);
    if (any_pending(ch)) {
      spy__ec_cancel(ch->ctl, st);
      return ch->wait_said_pending = 1;
    }
    if (spy__ec_wait(ch->ctl, st, wait_ns) == SPY_ETIMEDOUT)
      spy__ec_cancel(ch->ctl, st);
  }
}

static int recv_any(spy_channel *ch, void *buf, size_t cap, int timeout_ms,
                    spy_recv_info *info) {
  if (ch->efd < 0)
    return recv_locked(ch, buf, cap, timeout_ms, info);
  /* fd mode: a watcher thread, if any, reads the peer list too. */
  pthread_mutex_lock(&ch->lock);
  int r;
  for (int tries = 0;; tries++) {
    r = recv_locked(ch, buf, cap, timeout_ms, info);
    if (r != SPY_EAGAIN)
      break;
    drain_fd(ch);
    if (ch->efd_sock && arm(ch)) {
      /* Armed; a post that landed before it would not signal us. */
      if (!any_pending(ch))
        break;
      if (tries < 4)
        continue;
      signal_self(ch); /* data announced but unreadable: poll again */
      break;
    }
    /* No slot free (or no socket): the watcher thread signals us. */
    if (!ch->watcher_started && start_watcher(ch) < 0) {
      signal_self(ch); /* poll again later rather than never */
      break;
    }
    atomic_store(&ch->armed, 1);
    spy__futex_wake((uint32_t *)&ch->armed, 1);
    break;
  }
  pthread_mutex_unlock(&ch->lock);
  return r;
}

int spy_channel_recv(spy_channel *ch, void *buf, size_t cap, int timeout_ms,
                     spy_recv_info *info) {
  if (ch->ops)
    return ch->ops->recv(ch->impl, buf, cap, timeout_ms, info);
  ch->view = NULL;
  return recv_any(ch, buf, cap, timeout_ms, info);
}

int spy_channel_recv_view(spy_channel *ch, spy_channel_view *view,
                          int timeout_ms, spy_recv_info *info) {
  if (ch->ops)
    return SPY_ENOTSUP;
  if (!view)
    return SPY_EINVAL;
  memset(view, 0, sizeof *view);
  ch->view = view;
  int r = recv_any(ch, NULL, 0, timeout_ms, info);
  ch->view = NULL;
  if (r <= 0)
    memset(view, 0, sizeof *view);
  return r;
}

int spy_channel_view_release(spy_channel *ch, spy_channel_view *view) {
  if (ch->ops || !view || !view->ring_ || view->peer_ >= (uint32_t)ch->npeers)
    return SPY_EINVAL;
  const peer *p = &ch->peers[view->peer_];
  if (p->rd.h != view->ring_)
    return SPY_EINVAL;
  int ok = spy__ring_intact(&p->rd, view->at_);
  view->ring_ = NULL; /* released: a second release is refused */
  if (ok)
    return 0;
  ch->st.lost++;
  return SPY_EOVERRUN;
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
    /* Checked and signalled under the lock: a receive that read the data
     * and re-armed after our check must not then find the fd readable
     * with nothing to read (the app would see a wake-up for nothing). */
    pthread_mutex_lock(&ch->lock);
    if (any_pending(ch) && atomic_exchange(&ch->armed, 0))
      signal_self(ch);
    pthread_mutex_unlock(&ch->lock);
  }
  return NULL;
}

static int start_watcher(spy_channel *ch) {
  atomic_store(&ch->armed, 0);
  atomic_store(&ch->watcher_stop, 0);
  int rc = pthread_create(&ch->watcher, NULL, watch, ch);
  if (rc != 0)
    return -rc;
  ch->watcher_started = 1;
  return 0;
}

int spy_channel_fd(spy_channel *ch) {
  if (ch->ops)
    return ch->ops->fd ? ch->ops->fd(ch->impl) : SPY_ENOTSUP;
  if (ch->efd >= 0)
    return ch->efd;
  /* The doorbell socket; if its name is taken (or no AF_UNIX), an eventfd
   * and the watcher thread. */
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_un a;
  socklen_t al = wake_name(ch, ch->id, &a);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, al) < 0) {
    close(fd);
    fd = -1;
  }
  ch->efd_sock = fd >= 0;
  if (fd < 0)
    fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0)
    return -errno;
  pthread_mutex_init(&ch->lock, NULL);
  ch->efd = fd;
  /* Start readable: the app drains first, which arms the doorbell. */
  signal_self(ch);
  if (!ch->efd_sock) {
    int rc = start_watcher(ch);
    if (rc < 0) {
      close(fd);
      ch->efd = -1;
      pthread_mutex_destroy(&ch->lock);
      return rc;
    }
  }
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

int spy_channel_recreated(spy_channel *ch) {
  if (ch->ops || ch->st.recreated == ch->recreated_seen)
    return 0;
  ch->recreated_seen = ch->st.recreated;
  return 1;
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
