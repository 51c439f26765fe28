/* test_bus.c — named broadcast channels with real processes and real shared
 * memory: fan-out to many readers, both directions, overrun accounting,
 * the runtime directory's ownership checks, cleanup after dead openers, the
 * event-loop fd and idle waits. */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/file.h>

#include "spyglass/bus.h"
#include "testlib.h"
#include "testutil.h"

static char dir[256];

static void fresh_dir(void) {
  if (dir[0])
    tu_rm_rf(dir);
  tu_rundir(dir, sizeof dir);
}

static spy_channel *open_ch(const char *name, uint32_t ring) {
  spy_channel *ch = NULL;
  spy_channel_desc d = {.name = name, .ring_bytes = ring, .dir = dir};
  int rc = spy_channel_open(&ch, &d);
  if (rc < 0)
    fprintf(stderr, "  open %s: %s\n", name, spy_strerror(rc));
  return ch;
}

/* A test frame: u32 seq then `extra` filler bytes. */
static size_t mk(uint8_t *b, uint32_t seq, size_t extra) {
  memcpy(b, &seq, 4);
  memset(b + 4, (int)(seq & 0xFF), extra);
  return 4 + extra;
}

static int check_frame(const uint8_t *b, int len, uint32_t *seq) {
  if (len < 4)
    return 0;
  memcpy(seq, b, 4);
  for (int i = 4; i < len; i++)
    if (b[i] != (uint8_t)(*seq & 0xFF))
      return 0;
  return 1;
}

TEST(two_processes_exchange_frames_both_ways) {
  fresh_dir();
  spy_channel *a = open_ch("pair", 0);
  CHECK(a);
  pid_t pid = tu_fork();
  if (pid == 0) {
    spy_channel *b = open_ch("pair", 0);
    uint8_t f[256];
    if (!b || spy_channel_post(b, f, mk(f, 1, 100)) < 0)
      _exit(3);
    int n = spy_channel_recv(b, f, sizeof f, 5000, NULL);
    uint32_t seq;
    _exit(n == 104 && check_frame(f, n, &seq) && seq == 2 ? 0 : 4);
  }
  uint8_t f[256];
  spy_recv_info info;
  int n = spy_channel_recv(a, f, sizeof f, 5000, &info);
  uint32_t seq = 0;
  CHECK_EQ(n, 104);
  CHECK(check_frame(f, n, &seq) && seq == 1);
  CHECK(info.sender != spy_channel_id(a));
  CHECK_OK(spy_channel_post(a, f, mk(f, 2, 100)));
  CHECK_EQ(tu_wait(pid, 10), 0);
  spy_channel_close(a);
}

TEST(eight_consumers_receive_every_frame) {
  enum { READERS = 8, FRAMES = 3000 };
  fresh_dir();
  spy_channel *w = open_ch("fanout", 0);
  CHECK(w);
  int ready[2];
  CHECK(pipe(ready) == 0);
  pid_t kids[READERS];
  for (int k = 0; k < READERS; k++) {
    kids[k] = tu_fork();
    if (kids[k] == 0) {
      spy_channel *r = open_ch("fanout", 64 << 10);
      if (!r || write(ready[1], "x", 1) != 1)
        _exit(3);
      uint8_t f[512];
      spy_recv_info info;
      for (uint32_t i = 0; i < FRAMES; i++) {
        int n = spy_channel_recv(r, f, sizeof f, 10000, &info);
        uint32_t seq;
        if (n <= 0 || !check_frame(f, n, &seq) || seq != i || info.lost)
          _exit(10);
      }
      spy_channel_close(r);
      _exit(0);
    }
  }
  char c;
  for (int k = 0; k < READERS; k++)
    CHECK(read(ready[0], &c, 1) == 1);
  uint8_t f[512];
  for (uint32_t i = 0; i < FRAMES; i++) {
    CHECK_OK(spy_channel_post(w, f, mk(f, i, 60 + i % 200)));
    if (i % 256 == 255)
      usleep(1000); /* 1 MiB ring: let slow starters keep up */
  }
  for (int k = 0; k < READERS; k++)
    CHECK_EQ(tu_wait(kids[k], 30), 0);
  spy_channel_stats st;
  spy_channel_get_stats(w, &st);
  CHECK_EQ(st.posted, FRAMES);
  close(ready[0]);
  close(ready[1]);
  spy_channel_close(w);
}

TEST(slow_reader_overruns_counts_loss_and_carries_on) {
  enum { FRAMES = 5000 };
  fresh_dir();
  spy_channel *r = open_ch("slow", 64 << 10);
  spy_channel *w = open_ch("slow", 64 << 10);
  CHECK(r && w);
  uint8_t f[256];
  for (uint32_t i = 0; i < FRAMES; i++)
    CHECK_OK(spy_channel_post(w, f, mk(f, i, 100)));
  uint64_t lost = 0, got = 0;
  uint32_t last = 0, seq = 0;
  spy_recv_info info;
  int n, first = 1;
  while ((n = spy_channel_recv(r, f, sizeof f, 0, &info)) > 0) {
    CHECK(check_frame(f, n, &seq));
    if (!first)
      CHECK(seq > last);
    first = 0;
    last = seq;
    lost += info.lost;
    got++;
  }
  CHECK_EQ(n, SPY_EAGAIN);
  CHECK(lost > 0);
  CHECK_EQ(last, FRAMES - 1);
  /* Everything is accounted for: received + lost = posted. */
  CHECK_EQ(got + lost, FRAMES);
  spy_channel_stats st;
  spy_channel_get_stats(r, &st);
  CHECK_EQ(st.lost, lost);
  /* And the reader carries on with new frames. */
  CHECK_OK(spy_channel_post(w, f, mk(f, 77777, 10)));
  n = spy_channel_recv(r, f, sizeof f, 1000, &info);
  CHECK(check_frame(f, n, &seq) && seq == 77777 && info.lost == 0);
  spy_channel_close(r);
  spy_channel_close(w);
}

TEST(foreign_owned_or_world_writable_runtime_dir_is_refused) {
  fresh_dir();
  spy_channel *ch = NULL;
  spy_channel_desc d = {.name = "x", .dir = dir};
  chmod(dir, 0777);
  CHECK_EQ(spy_channel_open(&ch, &d), SPY_EOWNER);
  chmod(dir, 0750);
  CHECK_EQ(spy_channel_open(&ch, &d), SPY_EOWNER);
  chmod(dir, 0700);
  if (geteuid() == 0) {
    CHECK(chown(dir, 65534, 65534) == 0);
    CHECK_EQ(spy_channel_open(&ch, &d), SPY_EOWNER);
    CHECK(chown(dir, 0, 0) == 0);
  }
  /* A symlink where the directory should be. */
  char link[300];
  snprintf(link, sizeof link, "%s-link", dir);
  CHECK(symlink(dir, link) == 0);
  d.dir = link;
  CHECK_EQ(spy_channel_open(&ch, &d), SPY_EOWNER);
  unlink(link);
  d.dir = dir;
  CHECK_OK(spy_channel_open(&ch, &d));
  spy_channel_close(ch);
  char buf[512];
  CHECK_EQ(spy_runtime_dir(dir, buf, sizeof buf), 0);
  CHECK_STR(buf, dir);
}

TEST(stale_channel_from_dead_process_is_removed_on_next_open) {
  fresh_dir();
  pid_t pid = tu_fork();
  if (pid == 0) {
    spy_channel *c = open_ch("stale", 0);
    if (!c)
      _exit(3);
    raise(SIGKILL); /* dies holding its ring: no close */
    _exit(4);
  }
  CHECK_EQ(tu_wait(pid, 10), 128 + SIGKILL);
  char path[400];
  snprintf(path, sizeof path, "%s/stale", dir);
  CHECK_EQ(tu_count_entries(path), 1); /* the dead opener's entry */
  spy_channel *other = open_ch("other", 0);
  CHECK(other);
  CHECK_EQ(tu_count_entries(path), -1); /* swept away entirely */
  spy_channel_close(other);
  CHECK_EQ(tu_count_entries(dir), 0); /* nothing accumulates */
}

TEST(dead_peer_ring_is_reaped_while_channel_lives) {
  fresh_dir();
  spy_channel *a = open_ch("live", 0);
  CHECK(a);
  int up[2], go[2];
  CHECK(pipe(up) == 0 && pipe(go) == 0);
  pid_t pid = tu_fork();
  if (pid == 0) {
    spy_channel *c = open_ch("live", 0);
    uint8_t f[64];
    char x;
    if (!c || write(up[1], "o", 1) != 1 || read(go[0], &x, 1) != 1 ||
        spy_channel_post(c, f, mk(f, 9, 8)) < 0)
      _exit(3);
    raise(SIGKILL);
    _exit(4);
  }
  char x;
  CHECK(read(up[0], &x, 1) == 1);
  spy_channel_wait(a, 0); /* sees the new opener and maps its ring */
  spy_channel_stats st;
  spy_channel_get_stats(a, &st);
  CHECK_EQ(st.peers, 1);
  CHECK(write(go[1], "g", 1) == 1);
  CHECK_EQ(tu_wait(pid, 10), 128 + SIGKILL);
  for (int i = 0; i < 2; i++) {
    close(up[i]);
    close(go[i]);
  }
  char path[400];
  snprintf(path, sizeof path, "%s/live", dir);
  CHECK_EQ(tu_count_entries(path), 2);
  /* The dead opener's last frame is still delivered (its ring lives on
   * while a reader maps it). */
  uint8_t f[64];
  uint32_t seq;
  int n = spy_channel_recv(a, f, sizeof f, 2000, NULL);
  CHECK(check_frame(f, n, &seq) && seq == 9);
  CHECK_OK(spy_bus_sweep(dir));
  CHECK_EQ(tu_count_entries(path), 1); /* a's entry */
  spy_channel_close(a);
  CHECK_EQ(tu_count_entries(dir), 0);
}

static spy_channel *thread_ch;
static void *post_later(void *arg) {
  usleep((useconds_t)(uintptr_t)arg);
  uint8_t f[64];
  spy_channel_post(thread_ch, f, mk(f, 5, 20));
  return NULL;
}

TEST(event_loop_fd_becomes_readable_on_post_and_rearms) {
  fresh_dir();
  spy_channel *r = open_ch("fd", 0);
  thread_ch = open_ch("fd", 0);
  CHECK(r && thread_ch);
  int fd = spy_channel_fd(r);
  CHECK(fd >= 0);
  uint8_t f[64];
  while (spy_channel_recv(r, f, sizeof f, 0, NULL) > 0) {
  }
  struct pollfd p = {.fd = fd, .events = POLLIN};
  CHECK_EQ(poll(&p, 1, 50), 0); /* nothing posted: not readable */
  for (int round = 0; round < 3; round++) {
    pthread_t t;
    pthread_create(&t, NULL, post_later, (void *)(uintptr_t)20000);
    CHECK_EQ(poll(&p, 1, 5000), 1);
    pthread_join(t, NULL);
    uint32_t seq;
    int n = spy_channel_recv(r, f, sizeof f, 0, NULL);
    CHECK(check_frame(f, n, &seq) && seq == 5);
    CHECK_EQ(spy_channel_recv(r, f, sizeof f, 0, NULL), SPY_EAGAIN);
  }
  spy_channel_close(r);
  spy_channel_close(thread_ch);
}

static void *noop(void *arg) { return arg; }
static int thread_count(void) { return tu_count_entries("/proc/self/task"); }

/* The fd is a doorbell the poster rings: no thread per handle. With more
 * sleeping fd readers than the control page has slots, the extra ones
 * fall back to a watcher thread, and every one still wakes on a post. */
TEST(event_loop_fds_need_no_thread_and_fall_back_past_the_slots) {
  fresh_dir();
  enum { N = 66 }; /* 64 slots */
  spy_channel *r[N];
  int fds[N];
  thread_ch = open_ch("many-fd", 0);
  CHECK(thread_ch);
  /* A sanitizer's runtime may start a thread of its own at the first
   * pthread_create: have that happen before counting. */
  pthread_t t;
  pthread_create(&t, NULL, noop, NULL);
  pthread_join(t, NULL);
  int before = thread_count();
  uint8_t f[64];
  for (int i = 0; i < N; i++) {
    r[i] = open_ch("many-fd", 0);
    CHECK(r[i]);
    fds[i] = spy_channel_fd(r[i]);
    CHECK(fds[i] >= 0);
    while (spy_channel_recv(r[i], f, sizeof f, 0, NULL) > 0) {
    }
    if (i == 63)
      CHECK_EQ(thread_count(), before); /* 64 armed, no thread */
  }
  CHECK_EQ(thread_count(), before + (N - 64));
  /* Later openers joining may have signalled the earlier ones (a new
   * peer): drain all once more. */
  for (int i = 0; i < N; i++)
    while (spy_channel_recv(r[i], f, sizeof f, 0, NULL) > 0) {
    }
  for (int round = 0; round < 2; round++) {
    struct pollfd p[N];
    for (int i = 0; i < N; i++)
      p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    CHECK_EQ(poll(p, N, 50), 0); /* nothing posted: none readable */
    CHECK_OK(spy_channel_post(thread_ch, f, mk(f, 7, 20)));
    double end = tu_now_s() + 10;
    int ready = 0;
    while (ready < N && tu_now_s() < end) {
      for (int i = 0; i < N; i++) {
        if (!p[i].fd || poll(&p[i], 1, 0) != 1)
          continue;
        uint32_t seq;
        int n = spy_channel_recv(r[i], f, sizeof f, 0, NULL);
        CHECK(check_frame(f, n, &seq) && seq == 7);
        CHECK_EQ(spy_channel_recv(r[i], f, sizeof f, 0, NULL), SPY_EAGAIN);
        p[i].fd = 0; /* done this round */
        ready++;
      }
      usleep(1000);
    }
    CHECK_EQ(ready, N);
  }
  for (int i = 0; i < N; i++)
    spy_channel_close(r[i]);
  spy_channel_close(thread_ch);
}

TEST(idle_wait_sleeps_without_spinning_and_wakes_on_post) {
  fresh_dir();
  spy_channel *r = open_ch("idle", 0);
  thread_ch = open_ch("idle", 0);
  CHECK(r && thread_ch);
  uint8_t f[64];
  struct timespec c0, c1;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  double t0 = tu_now_s();
  CHECK_EQ(spy_channel_recv(r, f, sizeof f, 400, NULL), SPY_EAGAIN);
  double waited = tu_now_s() - t0;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  double cpu =
      (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
  CHECK(waited >= 0.39);
  CHECK(cpu < 0.05); /* asleep, not polling */
  /* A blocking receive returns when another thread posts. */
  pthread_t t;
  pthread_create(&t, NULL, post_later, (void *)(uintptr_t)50000);
  int n = spy_channel_recv(r, f, sizeof f, -1, NULL);
  pthread_join(t, NULL);
  CHECK_EQ(n, 24);
  spy_channel_close(r);
  spy_channel_close(thread_ch);
}

TEST(oversize_frames_are_refused_or_skipped) {
  fresh_dir();
  spy_channel *r = open_ch("big", 64 << 10);
  spy_channel *w = open_ch("big", 64 << 10);
  CHECK(r && w);
  static uint8_t f[40000];
  CHECK_EQ(spy_channel_post(w, f, 20000), SPY_ETOOBIG); /* > ring / 4 */
  CHECK_EQ(spy_channel_post(w, f, 0), SPY_EINVAL);
  CHECK_OK(spy_channel_post(w, f, mk(f, 1, 1000)));
  CHECK_OK(spy_channel_post(w, f, mk(f, 2, 10)));
  spy_recv_info info;
  CHECK_EQ(spy_channel_recv(r, f, 100, 1000, &info), SPY_ENOBUFS);
  CHECK_EQ(info.len, 1004);
  uint32_t seq;
  int n = spy_channel_recv(r, f, 100, 1000, &info);
  CHECK(check_frame(f, n, &seq) && seq == 2);
  spy_channel_stats st;
  spy_channel_get_stats(r, &st);
  CHECK_EQ(st.oversize, 1);
  spy_channel_close(r);
  spy_channel_close(w);
}

TEST(bad_names_and_ring_sizes_are_rejected) {
  fresh_dir();
  const char *bad[] = {"", ".hidden", "a/b", "sp ace", "..", "x\n"};
  spy_channel *ch;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    spy_channel_desc d = {.name = bad[i], .dir = dir};
    CHECK_EQ(spy_channel_open(&ch, &d), SPY_EINVAL);
  }
  spy_channel_desc d = {.name = "ok", .dir = dir, .ring_bytes = 100000};
  CHECK_EQ(spy_channel_open(&ch, &d), SPY_EINVAL);
  d.ring_bytes = 1024;
  CHECK_EQ(spy_channel_open(&ch, &d), SPY_EINVAL);
  d.name = "spyglass:0123abcd_x-y.z";
  d.ring_bytes = 0;
  CHECK_OK(spy_channel_open(&ch, &d));
  spy_channel_close(ch);
}

typedef struct pump {
  spy_channel *ch;
  int frames;
  atomic_int ok;
  atomic_int got; /* frames received so far: the poster stays within reach */
} pump;

static void *reader_thread(void *arg) {
  pump *p = arg;
  uint8_t f[2048];
  for (int i = 0; i < p->frames; i++) {
    uint32_t seq;
    spy_recv_info info;
    int n = spy_channel_recv(p->ch, f, sizeof f, 10000, &info);
    if (n <= 0 || !check_frame(f, n, &seq) || seq != (uint32_t)i || info.lost)
      return NULL;
    atomic_store(&p->got, i + 1);
  }
  atomic_store(&p->ok, 1);
  return NULL;
}

TEST(threads_in_one_process_are_separate_openers) {
  fresh_dir();
  pump p = {.frames = 20000};
  p.ch = open_ch("threads", 0);
  spy_channel *w = open_ch("threads", 0);
  CHECK(p.ch && w);
  pthread_t t;
  pthread_create(&t, NULL, reader_thread, &p);
  uint8_t f[2048];
  for (int i = 0; i < p.frames; i++) {
    /* Keep within the reader's reach (the ring holds ~1000 such frames),
     * however late the scheduler runs it; give up if it stopped. */
    double end = tu_now_s() + 20;
    while (i - atomic_load(&p.got) > 500 && tu_now_s() < end)
      usleep(200);
    while (spy_channel_post(w, f, mk(f, (uint32_t)i, 100 + i % 900)) < 0) {
    }
  }
  pthread_join(t, NULL);
  CHECK(atomic_load(&p.ok));
  /* The poster never receives its own frames. */
  CHECK_EQ(spy_channel_recv(w, f, sizeof f, 0, NULL), SPY_EAGAIN);
  spy_channel_close(p.ch);
  spy_channel_close(w);
}

TEST(in_place_receive_reads_the_ring_and_releases) {
  fresh_dir();
  spy_channel *r = open_ch("view", 64 << 10);
  pid_t pid = tu_fork();
  if (pid == 0) {
    spy_channel *w = open_ch("view", 2u << 20); /* holds them all */
    uint8_t f[8192];
    if (!w)
      _exit(3);
    /* Small and large frames (up to 8 KiB); the 2 MiB ring holds all
     * 200 without wrapping, so none is lost however late the reader runs
     * (wrapping and overruns: the next case and test_bus_faults). */
    for (uint32_t i = 0; i < 200; i++)
      if (spy_channel_post(w, f, mk(f, i, 1 + (i * 997) % 8000)) < 0)
        _exit(4);
    /* Wait for the reader to say it is done before closing. */
    int n = spy_channel_recv(w, f, sizeof f, 10000, NULL);
    spy_channel_close(w);
    _exit(n > 0 ? 0 : 5);
  }
  CHECK(r);
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < 200; i++) {
    spy_channel_view v;
    spy_recv_info info;
    int n = spy_channel_recv_view(r, &v, 10000, &info);
    CHECK_EQ(n, 5 + (i * 997) % 8000);
    CHECK_EQ(v.len, (uint32_t)n);
    CHECK_EQ(info.len, (uint32_t)n);
    CHECK_EQ(info.lost, 0);
    uint32_t seq = 0;
    CHECK(check_frame(v.data, n, &seq) && seq == i);
    CHECK_OK(spy_channel_view_release(r, &v));
    /* Released once: a second release is refused. */
    CHECK_EQ(spy_channel_view_release(r, &v), SPY_EINVAL);
    bytes += (uint64_t)n;
    if (i % 50 == 48) { /* copying receives mix with in-place ones */
      uint8_t f[8192];
      int m = spy_channel_recv(r, f, sizeof f, 10000, NULL);
      CHECK_EQ(m, 5 + ((i + 1) * 997) % 8000);
      CHECK(check_frame(f, m, &seq));
      CHECK_EQ(seq, ++i);
      bytes += (uint64_t)m;
    }
  }
  spy_channel_stats st;
  spy_channel_get_stats(r, &st);
  CHECK_EQ(st.received, 200);
  CHECK_EQ(st.bytes_received, bytes);
  CHECK_EQ(st.lost, 0);
  /* Nothing more: the wait ends as a copying receive's does. */
  spy_channel_view v;
  CHECK_EQ(spy_channel_recv_view(r, &v, 0, NULL), SPY_EAGAIN);
  CHECK(v.data == NULL && v.len == 0);
  CHECK_EQ(spy_channel_view_release(r, &v), SPY_EINVAL);
  uint8_t done[8] = {1};
  CHECK_OK(spy_channel_post(r, done, sizeof done));
  CHECK_EQ(tu_wait(pid, 20), 0);
  spy_channel_close(r);
}

TEST(in_place_frame_overwritten_while_held_fails_its_release) {
  fresh_dir();
  spy_channel *r = open_ch("lap", 64 << 10);
  spy_channel *w = open_ch("lap", 64 << 10);
  CHECK(r && w);
  uint8_t f[1024];
  CHECK_OK(spy_channel_post(w, f, mk(f, 0, 1000)));
  CHECK_OK(spy_channel_post(w, f, mk(f, 1, 1000)));
  spy_channel_view v;
  CHECK_EQ(spy_channel_recv_view(r, &v, 1000, NULL), 1004);
  /* Not yet reached: intact. The next one, held while the writer laps
   * the 64 KiB ring, is not. */
  CHECK_OK(spy_channel_view_release(r, &v));
  CHECK_EQ(spy_channel_recv_view(r, &v, 1000, NULL), 1004);
  uint32_t seq = 0;
  CHECK(check_frame(v.data, 1004, &seq) && seq == 1);
  for (uint32_t i = 2; i < 200; i++)
    CHECK_OK(spy_channel_post(w, f, mk(f, i, 1000)));
  /* Still in bounds, whatever it holds now. */
  volatile uint8_t last = v.data[v.len - 1];
  (void)last;
  CHECK_EQ(spy_channel_view_release(r, &v), SPY_EOVERRUN);
  spy_channel_stats st;
  spy_channel_get_stats(r, &st);
  CHECK_EQ(st.lost, 1);
  /* The reader carries on past the overrun, counting what it lost. */
  spy_recv_info info;
  int n = spy_channel_recv_view(r, &v, 1000, &info);
  CHECK_EQ(n, 1004);
  CHECK(check_frame(v.data, n, &seq) && seq > 2 && info.lost > 0);
  CHECK_OK(spy_channel_view_release(r, &v));
  spy_channel_close(r);
  spy_channel_close(w);
}

TEST(post_in_place_reserves_writes_and_commits) {
  fresh_dir();
  spy_channel *r = open_ch("reserve", 64 << 10);
  spy_channel *w = open_ch("reserve", 64 << 10);
  CHECK(r && w);
  /* Larger than a quarter of the ring, or nothing: refused. */
  CHECK(spy_channel_post_reserve(w, (16u << 10) + 1) == NULL);
  CHECK(spy_channel_post_reserve(w, 0) == NULL);
  /* Nothing reserved: nothing to commit. */
  CHECK_EQ(spy_channel_post_commit(w, 10), SPY_EINVAL);
  uint8_t f[16384], g[16384];
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < 300; i++) {
    /* Reserve generously, write less, commit what was written; around
     * the ring's end several times. */
    size_t want = 4 + (i * 131) % 6000, room = want + (i % 7) * 512;
    uint8_t *p = spy_channel_post_reserve(w, room);
    CHECK(p != NULL);
    CHECK_EQ(mk(p, i, want - 4), want);
    if (i % 10 == 9) {
      CHECK_OK(spy_channel_post_commit(w, 0)); /* cancelled */
      continue;
    }
    CHECK_OK(spy_channel_post_commit(w, want));
    bytes += want;
    spy_recv_info info;
    int n = spy_channel_recv(r, g, sizeof g, 1000, &info);
    uint32_t seq = 0;
    CHECK_EQ(n, (int)want);
    CHECK(check_frame(g, n, &seq) && seq == i && info.lost == 0);
  }
  /* A cancelled frame was never posted. */
  CHECK_EQ(spy_channel_recv(r, g, sizeof g, 0, NULL), SPY_EAGAIN);
  /* More than reserved: refused, nothing posted, the reservation gone. */
  CHECK(spy_channel_post_reserve(w, 100) != NULL);
  CHECK_EQ(spy_channel_post_commit(w, 101), SPY_EINVAL);
  CHECK_EQ(spy_channel_post_commit(w, 50), SPY_EINVAL);
  CHECK_EQ(spy_channel_recv(r, g, sizeof g, 0, NULL), SPY_EAGAIN);
  /* A post in between cancels a reservation. */
  CHECK(spy_channel_post_reserve(w, 100) != NULL);
  CHECK_OK(spy_channel_post(w, f, mk(f, 9999, 20)));
  CHECK_EQ(spy_channel_post_commit(w, 50), SPY_EINVAL);
  uint32_t seq = 0;
  int n = spy_channel_recv(r, g, sizeof g, 1000, NULL);
  CHECK(check_frame(g, n, &seq) && seq == 9999);
  bytes += 24;
  spy_channel_stats st;
  spy_channel_get_stats(w, &st);
  CHECK_EQ(st.posted, 271);
  CHECK_EQ(st.bytes_posted, bytes);
  spy_channel_close(r);
  spy_channel_close(w);
}

TEST(a_large_reservation_committed_small_still_counts_as_overwritten) {
  /* A reader far behind holds frames the writer's reservations may have
   * covered: even when the records committed are small, the room that
   * was reserved is treated as written, so the reader loses those frames
   * (counted) instead of reading what the writer may have put there. */
  fresh_dir();
  spy_channel *r = open_ch("cover", 64 << 10);
  spy_channel *w = open_ch("cover", 64 << 10);
  CHECK(r && w);
  uint8_t f[512], g[512];
  /* About 60 KiB of 500-byte frames: the ring's history. */
  for (uint32_t i = 0; i < 118; i++)
    CHECK_OK(spy_channel_post(w, f, mk(f, i, 496)));
  /* The reader has read the first five: its cursor is in what the
   * reservation below covers. */
  uint32_t got = 0, seq = 0;
  for (; got < 5; got++) {
    CHECK_EQ(spy_channel_recv(r, g, sizeof g, 1000, NULL), 500);
    CHECK(check_frame(g, 500, &seq) && seq == got);
  }
  /* Reserve nearly 16 KiB (a quarter), fill it all, commit 8 bytes: the
   * next 16 KiB of the oldest frames are gone as far as readers know,
   * also after a smaller post announces less. */
  size_t room = (16u << 10) - 64;
  uint8_t *p = spy_channel_post_reserve(w, room);
  CHECK(p != NULL);
  memset(p, 0xEE, room);
  CHECK_EQ(mk(p, 118, 4), 8);
  CHECK_OK(spy_channel_post_commit(w, 8));
  CHECK_OK(spy_channel_post(w, f, mk(f, 119, 4)));
  uint64_t lost = 0;
  spy_recv_info info;
  int n;
  while ((n = spy_channel_recv(r, g, sizeof g, 0, &info)) > 0) {
    lost += info.lost;
    got++;
    CHECK(check_frame(g, n, &seq)); /* never the 0xEE filler */
  }
  CHECK(lost > 0);
  CHECK_EQ(got + lost, 120);
  CHECK_EQ(seq, 119);
  /* Lapped cleanly: no filler ever read as a record header. */
  spy_channel_stats st;
  spy_channel_get_stats(r, &st);
  CHECK_EQ(st.corrupt, 0);
  spy_channel_close(r);
  spy_channel_close(w);
}

int main(int argc, char **argv) {
  static const struct spy_test_case cases[] = {
      TEST_CASE(two_processes_exchange_frames_both_ways),
      TEST_CASE(event_loop_fds_need_no_thread_and_fall_back_past_the_slots),
      TEST_CASE(eight_consumers_receive_every_frame),
      TEST_CASE(slow_reader_overruns_counts_loss_and_carries_on),
      TEST_CASE(foreign_owned_or_world_writable_runtime_dir_is_refused),
      TEST_CASE(stale_channel_from_dead_process_is_removed_on_next_open),
      TEST_CASE(dead_peer_ring_is_reaped_while_channel_lives),
      TEST_CASE(event_loop_fd_becomes_readable_on_post_and_rearms),
      TEST_CASE(idle_wait_sleeps_without_spinning_and_wakes_on_post),
      TEST_CASE(oversize_frames_are_refused_or_skipped),
      TEST_CASE(bad_names_and_ring_sizes_are_rejected),
      TEST_CASE(threads_in_one_process_are_separate_openers),
      TEST_CASE(in_place_receive_reads_the_ring_and_releases),
      TEST_CASE(in_place_frame_overwritten_while_held_fails_its_release),
      TEST_CASE(post_in_place_reserves_writes_and_commits),
      TEST_CASE(
          a_large_reservation_committed_small_still_counts_as_overwritten)};
  int rc = spy_test_run(argc, argv, cases, sizeof cases / sizeof cases[0]);
  if (dir[0])
    tu_rm_rf(dir);
  return rc;
}
