/* rundir.h — the per-user runtime directory and channel directories:
 * where they are, creating them 0700, refusing ones that another user owns
 * or others can reach. Internal to the bus (and the clock's named
 * segments). */
#ifndef SPY_BUS_RUNDIR_H
#define SPY_BUS_RUNDIR_H

#include <stddef.h>

/* Resolves (and creates/checks) the runtime directory; see bus.h. */
int spy__rundir_resolve(const char *override, char *buf, size_t cap);
/* Checks that path is a real directory owned by us with no group/other
 * access: 0, SPY_EOWNER, or -errno from lstat. */
int spy__dir_check(const char *path);
/* Creates path with mode 0700 if missing, then checks it. */
int spy__dir_ensure(const char *path);
/* 1 if name is a valid channel name: [A-Za-z0-9._:-]{1,128}, not starting
 * with '.'. */
int spy__channel_name_ok(const char *name);

#endif
