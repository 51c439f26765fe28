/* remote.h — what `--connect HOST:PORT` and `--token-file F` (parsed by
 * opts.c in ls and top) mean: the bridge to reach instead of this host's
 * bus ($SPYGLASS_CONNECT, $SPYGLASS_TOKEN when the options are not
 * given). */
#ifndef SPY_TOOL_REMOTE_H
#define SPY_TOOL_REMOTE_H

#include "spyglass/bus.h"

typedef struct tool_remote {
  const char *connect; /* NULL: the local bus */
  const char *token_file;
  char token[160];
} tool_remote;

/* After parsing: the environment's defaults, the token file read.
 * Returns 0, or -1 with a message. */
int remote_resolve(const char *cmd, tool_remote *r);
/* The token, or NULL when none. */
const char *remote_token(const tool_remote *r);
/* Describes a failed connect (returns the exit code to use). */
int remote_fail(const char *cmd, const tool_remote *r, int err);

#endif
