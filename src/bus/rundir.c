/* rundir.c — the runtime directory: resolution order, creation with mode
 * 0700 and the ownership check every open goes through (see bus.h). */
#include "bus/rundir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "spyglass/bus.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

int spy__dir_check(const char *path) {
  struct stat st;
  if (lstat(path, &st) < 0)
    return -errno;
  if (!S_ISDIR(st.st_mode))
    return SPY_EOWNER; /* a file or a symlink where our directory should be */
  if (st.st_uid != geteuid() || (st.st_mode & 077))
    return SPY_EOWNER;
  return 0;
}

int spy__dir_ensure(const char *path) {
  if (mkdir(path, 0700) < 0 && errno != EEXIST)
    return -errno;
  return spy__dir_check(path);
}

int spy__rundir_resolve(const char *override, char *buf, size_t cap) {
  const char *env;
  int n;
  if (override && *override)
    n = snprintf(buf, cap, "%s", override);
  else if ((env = getenv("SPYGLASS_DIR")) && *env)
    n = snprintf(buf, cap, "%s", env);
  else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
    n = snprintf(buf, cap, "%s/spyglass", env);
  else {
    /* /dev/shm keeps the rings in memory; /tmp may be a disk, where the
     * kernel would write the ring pages back for nothing. */
    struct statfs sf;
    int shm = statfs("/dev/shm", &sf) == 0 && sf.f_type == TMPFS_MAGIC;
    n = snprintf(buf, cap, "%s/spyglass-%u", shm ? "/dev/shm" : "/tmp",
                 (unsigned)geteuid());
  }
  if (n < 0 || (size_t)n >= cap - 64) /* room for channel and ring names */
    return SPY_ENAMETOOLONG;
  return spy__dir_ensure(buf);
}

int spy__channel_name_ok(const char *name) {
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

int spy_runtime_dir(const char *dir, char *buf, size_t cap) {
  return spy__rundir_resolve(dir, buf, cap);
}
