/* test_clock.c — clock sync: an injected offset recovered between threads
 * and between processes, median-RTT selection on synthetic rounds, a peer
 * killed mid-sync (a timeout, not a hang), malformed segments, the
 * runtime directory checks and the CLOCK section. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spyglass/clock.h"
#include "testlib.h"

#define INJECTED_NS 1234567000ll /* +1234.567 ms */
/* One round's offset error is at most half its round trip (the peer's
 * reading lies somewhere between our two), whatever the load: the bound
 * follows each sync's measured RTT, plus this much for rounding. */
#define SLACK_NS 1000ll

/* Checks every sync's error against its own RTT; the worst ratio goes to
 * stderr. */
static int within_half_rtt(const int64_t *err, const int64_t *rtt, int n,
                           const char *what) {
  int ok = 1;
  int64_t worst = 0, worst_rtt = 0;
  for (int i = 0; i < n; i++) {
    if (llabs(err[i]) > rtt[i] / 2 + SLACK_NS)
      ok = 0;
    if (llabs(err[i]) > worst)
      worst = llabs(err[i]), worst_rtt = rtt[i];
  }
  fprintf(stderr, "  %s: worst offset error %lld ns with rtt %lld ns\n", what,
          (long long)worst, (long long)worst_rtt);
  return ok;
}

#define SYNCS 41 /* every one of them is checked against its own RTT */

static char dir[64];

static void make_dir(void) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/spyglass-clock-test-XXXXXX");
    if (!mkdtemp(dir))
      dir[0] = 0;
  }
}

TEST(pick_median_selects_the_median_rtt_round) {
  spy_clock_round r[5] = {
      {500, 50}, {100, 10}, {300, 30}, {200, 20}, {400, 40}};
  spy_clock_result out;
  CHECK_OK(spy_clock_pick_median(r, 5, &out));
  CHECK_EQ(out.chosen, 2);
  CHECK_EQ(out.offset_ns, 300);
  CHECK_EQ(out.rtt_ns, 30);
  CHECK_EQ(out.rounds, 5);
  /* A slow outlier round does not move the choice. */
  spy_clock_round s[5] = {
      {-7, 12}, {99999, 900000}, {-5, 11}, {-6, 13}, {-4, 14}};
  CHECK_OK(spy_clock_pick_median(s, 5, &out));
  CHECK_EQ(out.chosen, 3);
  CHECK_EQ(out.offset_ns, -6);
  /* Even count: the lower median; equal RTTs: the earliest. */
  spy_clock_round e[4] = {{1, 40}, {2, 20}, {3, 30}, {4, 10}};
  CHECK_OK(spy_clock_pick_median(e, 4, &out));
  CHECK_EQ(out.chosen, 1);
  spy_clock_round t[3] = {{1, 5}, {2, 5}, {3, 5}};
  CHECK_OK(spy_clock_pick_median(t, 3, &out));
  CHECK_EQ(out.chosen, 1);
  CHECK_OK(spy_clock_pick_median(t, 1, &out));
  CHECK_EQ(out.chosen, 0);
  CHECK_EQ(spy_clock_pick_median(t, 0, &out), SPY_EINVAL);
  CHECK_EQ(spy_clock_pick_median(t, SPY_CLOCK_MAX_ROUNDS + 1, &out),
           SPY_EINVAL);
}

typedef struct peer_arg {
  spy_clock_seg *seg;
  int syncs;
  int rc;
  spy_clock_result seen;
} peer_arg;

static void *peer_thread(void *arg) {
  peer_arg *a = arg;
  spy_clock_opts o = {.test_offset_ns = INJECTED_NS, .timeout_ms = 5000};
  for (int i = 0; i < a->syncs; i++) {
    int rc = spy_clock_serve(a->seg, &o);
    if (rc < 0) {
      a->rc = rc;
      return NULL;
    }
  }
  a->rc = spy_clock_read_offset(a->seg, &a->seen);
  return NULL;
}

TEST(threads_recover_an_injected_offset) {
  spy_clock_seg *seg;
  CHECK_OK(spy_clock_create(&seg, NULL, NULL));
  spy_clock_result r;
  CHECK_EQ(spy_clock_read_offset(seg, &r), SPY_ENOENT);
  peer_arg a = {.seg = seg, .syncs = SYNCS};
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, peer_thread, &a), 0);
  int64_t err[SYNCS], rtt[SYNCS];
  spy_clock_opts o = {.timeout_ms = 5000};
  int rc = 0;
  for (int i = 0; i < SYNCS && rc == 0; i++) {
    rc = spy_clock_sync(seg, &o, &r);
    err[i] = r.offset_ns + INJECTED_NS; /* initiator − peer = −injected */
    rtt[i] = r.rtt_ns;
    if (rc == 0 && (r.rounds != SPY_CLOCK_DEFAULT_ROUNDS || r.rtt_ns < 0))
      rc = -1;
  }
  pthread_join(th, NULL);
  CHECK_OK(rc);
  CHECK_OK(a.rc);
  CHECK(within_half_rtt(err, rtt, SYNCS, "threads"));
  /* The peer reads the last published result. */
  CHECK_EQ(a.seen.offset_ns, r.offset_ns);
  CHECK_EQ(a.seen.rtt_ns, r.rtt_ns);
  CHECK_EQ(a.seen.rounds, r.rounds);
  spy_clock_close(seg);
}

TEST(processes_recover_an_injected_offset) {
  make_dir();
  CHECK(dir[0]);
  char name[64];
  CHECK(spy_clock_segment_name(0xabcull, (uint64_t)getpid(), name,
                               sizeof name) > 0);
  spy_clock_seg *seg;
  CHECK_OK(spy_clock_create(&seg, name, dir));
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    /* The child: its own mapping, opened by name, its clock offset. */
    spy_clock_seg *mine;
    if (spy_clock_open(&mine, name, dir) < 0)
      _exit(3);
    spy_clock_opts o = {.test_offset_ns = INJECTED_NS, .timeout_ms = 5000};
    for (int i = 0; i < SYNCS; i++)
      if (spy_clock_serve(mine, &o) <= 0)
        _exit(4);
    spy_clock_result r;
    int rc = spy_clock_read_offset(mine, &r);
    spy_clock_close(mine);
    _exit(rc == 0 && r.rounds == SPY_CLOCK_DEFAULT_ROUNDS ? 0 : 5);
  }
  int64_t err[SYNCS], rtt[SYNCS];
  spy_clock_opts o = {.timeout_ms = 5000};
  spy_clock_result r;
  int rc = 0;
  for (int i = 0; i < SYNCS && rc == 0; i++) {
    rc = spy_clock_sync(seg, &o, &r);
    err[i] = r.offset_ns + INJECTED_NS;
    rtt[i] = r.rtt_ns;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  spy_clock_close(seg);
  CHECK_OK(rc);
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);
  CHECK(within_half_rtt(err, rtt, SYNCS, "processes"));
  /* The creator removed the named segment. */
  CHECK_EQ(spy_clock_open(&seg, name, dir), SPY_ENOENT);
}

/* The dying peer's clock: on its third reading (the third round) the
 * process kills itself, between reading the request and answering. */
static int64_t dying_clock(void *ctx) {
  int *n = ctx;
  if (++*n == 3)
    raise(SIGKILL);
  return spy_clock_now_ns();
}

TEST(peer_killed_mid_sync_gives_a_timeout_not_a_hang) {
  make_dir();
  CHECK(dir[0]);
  spy_clock_seg *seg;
  CHECK_OK(spy_clock_create(&seg, "killed", dir));
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    spy_clock_seg *mine;
    if (spy_clock_open(&mine, "killed", dir) < 0)
      _exit(3);
    int n = 0;
    spy_clock_opts o = {.now = dying_clock, .now_ctx = &n, .timeout_ms = 5000};
    spy_clock_serve(mine, &o);
    _exit(4); /* not reached */
  }
  spy_clock_opts o = {.timeout_ms = 300};
  spy_clock_result r;
  int64_t t0 = spy_clock_now_ns();
  int rc = spy_clock_sync(seg, &o, &r);
  int64_t took = spy_clock_now_ns() - t0;
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  CHECK_EQ(rc, SPY_ETIMEDOUT);
  CHECK(took < 3000000000ll);
  /* And again, with the peer long gone: a timeout each time. */
  CHECK_EQ(spy_clock_sync(seg, &o, &r), SPY_ETIMEDOUT);
  spy_clock_close(seg);
}

TEST(no_peer_and_no_initiator_time_out) {
  spy_clock_seg *seg;
  CHECK_OK(spy_clock_create(&seg, NULL, NULL));
  spy_clock_opts o = {.timeout_ms = 50};
  spy_clock_result r;
  CHECK_EQ(spy_clock_sync(seg, &o, &r), SPY_ETIMEDOUT);
  spy_clock_close(seg);
  CHECK_OK(spy_clock_create(&seg, NULL, NULL));
  CHECK_EQ(spy_clock_serve(seg, &o), SPY_ETIMEDOUT);
  spy_clock_opts bad = {.rounds = SPY_CLOCK_MAX_ROUNDS + 1};
  CHECK_EQ(spy_clock_sync(seg, &bad, &r), SPY_EINVAL);
  CHECK_EQ(spy_clock_sync(NULL, NULL, &r), SPY_EINVAL);
  spy_clock_close(seg);
  spy_clock_close(NULL);
}

static int write_file(const char *path, const void *p, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return -1;
  ssize_t w = write(fd, p, n);
  close(fd);
  return w == (ssize_t)n ? 0 : -1;
}

/* The pointer file's layout (clock_seg.c): magic "SPYK", version, the
 * creator's pid and memfd. */
static int write_pointer(const char *path, uint32_t magic, uint32_t pid,
                         int32_t fd) {
  uint32_t p[4] = {magic, 1, pid, (uint32_t)fd};
  return write_file(path, p, sizeof p);
}

/* Opens the creator's segment memory the way a hostile process of the
 * same user could: through the pointer file and /proc. */
static int open_segment_memory(const char *path) {
  uint32_t p[4];
  int fd = open(path, O_RDONLY);
  if (fd < 0 || read(fd, p, sizeof p) != (ssize_t)sizeof p)
    return -1;
  close(fd);
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%u/fd/%d", p[2], (int)p[3]);
  return open(proc, O_RDWR);
}

TEST(malformed_segments_are_rejected) {
  make_dir();
  CHECK(dir[0]);
  char path[256];
  spy_clock_seg *seg;
  CHECK_EQ(spy_clock_open(&seg, "absent", dir), SPY_ENOENT);
  snprintf(path, sizeof path, "%s/bad.clock", dir);
  /* A plain file holding a well-formed segment: it could be truncated
   * under the mapping, so it is refused. */
  uint8_t good[SPY_CLOCK_SEG_BYTES] = {0};
  spy_wr32(good, SPY_CLOCK_MAGIC);
  spy_wr16(good + 4, SPY_CLOCK_VERSION);
  spy_wr16(good + 6, SPY_CLOCK_SEG_BYTES);
  CHECK_OK(write_file(path, good, sizeof good));
  CHECK_EQ(spy_clock_open(&seg, "bad", dir), SPY_EBADSEGMENT);
  /* Pointers that are wrong in each way. */
  CHECK_OK(write_pointer(path, 0x12345678, (uint32_t)getpid(), 0));
  CHECK_EQ(spy_clock_open(&seg, "bad", dir), SPY_EBADSEGMENT); /* magic */
  int plain = open(path, O_RDONLY); /* a regular file, not a sealed memfd */
  CHECK(plain >= 0);
  CHECK_OK(write_pointer(path, 0x4b595053, (uint32_t)getpid(), plain));
  CHECK_EQ(spy_clock_open(&seg, "bad", dir), SPY_EBADSEGMENT);
  close(plain);
  CHECK_OK(write_pointer(path, 0x4b595053, 999999999, 3)); /* no process */
  CHECK_EQ(spy_clock_open(&seg, "bad", dir), SPY_EBADSEGMENT);
  CHECK_OK(write_file(path, good, 12)); /* too short */
  CHECK_EQ(spy_clock_open(&seg, "bad", dir), SPY_EBADSEGMENT);
  unlink(path);
  /* A FIFO named like a segment: refused at once, never blocks. */
  CHECK_OK(mkfifo(path, 0600));
  CHECK_EQ(spy_clock_open(&seg, "bad", dir), SPY_EBADSEGMENT);
  unlink(path);
  /* A good segment opens; its memory cannot be shrunk under the mapping
   * (no SIGBUS for anyone mapping it): it is still mapped and intact. */
  spy_clock_seg *peer;
  CHECK_OK(spy_clock_create(&seg, "inuse", dir));
  CHECK_OK(spy_clock_open(&peer, "inuse", dir));
  snprintf(path, sizeof path, "%s/inuse.clock", dir);
  int mem = open_segment_memory(path);
  CHECK(mem >= 0);
  CHECK(ftruncate(mem, 0) < 0);
  spy_clock_result none;
  CHECK_EQ(spy_clock_read_offset(peer, &none), SPY_ENOENT); /* mapped, intact */
  /* Corrupted while in use: every call on it says so. */
  uint32_t junk = 0xdeadbeef;
  CHECK_EQ(pwrite(mem, &junk, 4, 0), 4);
  close(mem);
  spy_clock_result r;
  spy_clock_opts o = {.timeout_ms = 50};
  CHECK_EQ(spy_clock_sync(seg, &o, &r), SPY_EBADSEGMENT);
  CHECK_EQ(spy_clock_serve(peer, &o), SPY_EBADSEGMENT);
  CHECK_EQ(spy_clock_read_offset(peer, &r), SPY_EBADSEGMENT);
  spy_clock_close(peer);
  spy_clock_close(seg);
}

TEST(names_and_runtime_directory_are_checked) {
  make_dir();
  CHECK(dir[0]);
  spy_clock_seg *seg;
  CHECK_EQ(spy_clock_create(&seg, "a/b", dir), SPY_EINVAL);
  CHECK_EQ(spy_clock_create(&seg, "", dir), SPY_EINVAL);
  CHECK_EQ(spy_clock_create(&seg, ".hidden", dir), SPY_EINVAL);
  char open_dir[128];
  snprintf(open_dir, sizeof open_dir, "%s/shared", dir);
  CHECK_OK(mkdir(open_dir, 0755));
  CHECK_OK(chmod(open_dir, 0755));
  CHECK_EQ(spy_clock_create(&seg, "x", open_dir), SPY_EOWNER);
  rmdir(open_dir);
  /* $SPYGLASS_DIR is the default when no dir is given. */
  char env_dir[128];
  snprintf(env_dir, sizeof env_dir, "%s/env", dir);
  setenv("SPYGLASS_DIR", env_dir, 1);
  CHECK_OK(spy_clock_create(&seg, "viaenv", NULL));
  char path[256];
  snprintf(path, sizeof path, "%s/viaenv.clock", env_dir);
  struct stat st;
  CHECK_OK(stat(path, &st));
  CHECK_EQ(st.st_size, 16); /* the pointer to the sealed memfd */
  CHECK_OK(stat(env_dir, &st));
  CHECK_EQ(st.st_mode & 0777, 0700);
  spy_clock_close(seg);
  unsetenv("SPYGLASS_DIR");
  rmdir(env_dir);
  char name[64];
  CHECK_EQ(spy_clock_segment_name(0x1234, 0xff, name, sizeof name), 39);
  CHECK_STR(name, "clock-0000000000001234-00000000000000ff");
  CHECK_EQ(spy_clock_segment_name(1, 2, name, 10), SPY_ENAMETOOLONG);
}

TEST(clock_section_round_trips_and_rejects_malformed) {
  uint8_t buf[256];
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_CLOCK, 1, 1, 0);
  spy_clock_msg m = {.op = SPY_CLOCK_OP_RESULT,
                     .rounds = 5,
                     .provider = 0x1122334455667788ull,
                     .consumer = 9,
                     .offset_ns = -INJECTED_NS,
                     .rtt_ns = 4321};
  spy_put_clock(&w, &m);
  int n = spy_frame_finish(&w);
  CHECK(n > 0);
  spy_frame f;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  spy_section s;
  CHECK(spy_frame_find_section(&f, SPY_SEC_CLOCK, &s));
  spy_clock_msg d;
  CHECK_OK(spy_get_clock(&s, &d));
  CHECK_EQ(d.op, m.op);
  CHECK_EQ(d.rounds, 5);
  CHECK(d.provider == m.provider);
  CHECK_EQ(d.consumer, 9);
  CHECK_EQ(d.offset_ns, -INJECTED_NS);
  CHECK_EQ(d.rtt_ns, 4321);
  uint8_t b[SPY_CLOCK_SECTION_BYTES];
  memcpy(b, s.data, sizeof b);
  spy_section bad = {.id = SPY_SEC_CLOCK, .len = 36, .data = b};
  CHECK_EQ(spy_get_clock(&bad, &d), SPY_EBADSECTION);
  bad.len = sizeof b;
  b[0] = 9; /* op */
  CHECK_EQ(spy_get_clock(&bad, &d), SPY_EBADVALUE);
  b[0] = SPY_CLOCK_OP_REQUEST;
  b[1] = 200; /* rounds */
  CHECK_EQ(spy_get_clock(&bad, &d), SPY_EBADVALUE);
  b[1] = 5;
  spy_wr64(b + 32, (uint64_t)-1); /* negative RTT */
  CHECK_EQ(spy_get_clock(&bad, &d), SPY_EBADVALUE);
}

static void cleanup(void) {
  if (dir[0]) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
      fprintf(stderr, "could not remove %s\n", dir);
  }
}

static const struct spy_test_case cases[] = {
    TEST_CASE(pick_median_selects_the_median_rtt_round),
    TEST_CASE(threads_recover_an_injected_offset),
    TEST_CASE(processes_recover_an_injected_offset),
    TEST_CASE(peer_killed_mid_sync_gives_a_timeout_not_a_hang),
    TEST_CASE(no_peer_and_no_initiator_time_out),
    TEST_CASE(malformed_segments_are_rejected),
    TEST_CASE(names_and_runtime_directory_are_checked),
    TEST_CASE(clock_section_round_trips_and_rejects_malformed)};

int main(int argc, char **argv) {
  int rc = spy_test_run(argc, argv, cases, sizeof cases / sizeof cases[0]);
  cleanup();
  return rc;
}
