/* testutil.h — helpers shared by tests that use real processes and real
 * directories: a private runtime directory per test, recursive removal,
 * waiting for a child with a deadline, polling a consumer until a
 * condition holds. */
#ifndef SPY_TESTUTIL_H
#define SPY_TESTUTIL_H

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

/* Creates a fresh 0700 directory for one test's channels. */
static inline char *tu_rundir(char *buf, size_t cap) {
  snprintf(buf, cap, "/dev/shm/spy_test_XXXXXX");
  if (!mkdtemp(buf)) {
    snprintf(buf, cap, "/tmp/spy_test_XXXXXX");
    if (!mkdtemp(buf))
      return NULL;
  }
  chmod(buf, 0700);
  return buf;
}

static inline void tu_rm_rf(const char *path) {
  char cmd[1100];
  int n = snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  if (n < 0 || (size_t)n >= sizeof cmd || system(cmd) != 0)
    fprintf(stderr, "  warning: could not remove %s\n", path);
}

/* Counts entries (other than . and ..) in a directory; -1 if missing. */
static inline int tu_count_entries(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      n++;
  closedir(d);
  return n;
}

/* Child processes a test started: whatever happens to the test, they are
 * killed and reaped after it. */
static pid_t tu_children[64];
static int tu_nchildren;

static inline void tu_reap_children(void) {
  for (int i = 0; i < tu_nchildren; i++) {
    if (kill(tu_children[i], SIGKILL) == 0)
      waitpid(tu_children[i], NULL, 0);
  }
  tu_nchildren = 0;
}

static inline void tu_forget(pid_t pid) {
  for (int i = 0; i < tu_nchildren; i++)
    if (tu_children[i] == pid)
      tu_children[i--] = tu_children[--tu_nchildren];
}

/* fork() that registers the child for tu_reap_children. */
static inline pid_t tu_fork(void) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    /* Die with the test, even if it is killed (a ctest timeout): no
     * provider left running behind it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(1);
  }
  if (pid > 0) {
    spy_test_after_each_ = tu_reap_children;
    if (tu_nchildren < 64)
      tu_children[tu_nchildren++] = pid;
  }
  return pid;
}

static inline double tu_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits for pid up to `seconds`; kills it after that. Returns its exit
 * status (0..255), 128+signal if killed by one, or -1 on timeout. */
static inline int tu_wait(pid_t pid, double seconds) {
  double end = tu_now_s() + seconds;
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      tu_forget(pid);
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    if (r < 0)
      return -1;
    if (tu_now_s() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      tu_forget(pid);
      return -1;
    }
    usleep(2000);
  }
}

/* Polls consumer c (spyglass/consumer.h) until cond holds or `seconds`
 * pass; returns cond's last value. */
#define POLL_UNTIL(c, seconds, cond)                                           \
  ({                                                                           \
    double end_ = tu_now_s() + (seconds);                                      \
    int ok_ = 0;                                                               \
    while (!(ok_ = (cond)) && tu_now_s() < end_)                               \
      spy_consumer_poll((c), 20);                                              \
    ok_;                                                                       \
  })

/* Runs a shell command and captures its standard output into buf (cut to
 * cap - 1 bytes, NUL-terminated). Returns its exit code, or -1 if it did
 * not exit normally. */
static inline int tu_run_capture(const char *cmd, char *buf, size_t cap) {
  buf[0] = 0;
  FILE *p = popen(cmd, "r");
  if (!p)
    return -1;
  size_t n = fread(buf, 1, cap - 1, p);
  buf[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
