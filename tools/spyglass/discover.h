/* discover.h — lists the live providers on this host: posts
 * provider:query on the discovery channel and collects the announces that
 * arrive within a wait (`spyglass ls`, and `top`'s provider picker and
 * name check). */
#ifndef SPY_TOOL_DISCOVER_H
#define SPY_TOOL_DISCOVER_H

#include <stdint.h>

#include "spyglass/wire.h"

#define DISCOVER_MAX 64

typedef struct found_provider {
  spy_provider_info info; /* info.name points to name below */
  char name[SPY_NAME_MAX + 1];
} found_provider;

/* Queries and collects announces for wait_ms into out[0..max), ordered by
 * start time (oldest first), one entry per provider id; a provider that
 * says gone within the wait is left out. With `until` (an id or name) the
 * wait ends as soon as a provider it names answers. dir: runtime
 * directory (NULL = default). Returns the number found (>= 0) or a
 * negative SPY_E… error from opening or posting to the channel. */
int discover(const char *dir, int wait_ms, const char *until,
             found_provider *out, int max);

/* Discovery through a link instead of this host's bus (ls/top
 * --connect): channel backend and its link; NULL = the local bus. */
struct spy_channel_ops;
void discover_via(const struct spy_channel_ops *ops, void *link);

/* True if p is what `want` names: its id as 16 hex digits, or its name. */
int found_matches(const found_provider *p, const char *want);

/* Wall-clock and monotonic milliseconds. */
uint64_t tool_wall_ms(void);
uint64_t tool_mono_ms(void);

#endif
