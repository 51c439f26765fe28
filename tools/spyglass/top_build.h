/* top_build.h — the build view of `spyglass top`: a traced build's live
 * progress (the provider's BUILD sections, SPY_FEAT_TRACE), shown in place
 * of the values table whenever the provider publishes builds. */
#ifndef SPY_TOOL_TOP_BUILD_H
#define SPY_TOOL_TOP_BUILD_H

#include <stddef.h>

#include "json.h"
#include "spyglass/consumer.h"

/* 1 when the provider has published build progress. */
int top_build_seen(const spy_state *s);
/* Draws rows y0..y1-1 (ncurses, not refreshed). */
void top_build_draw(int y0, int y1, const spy_state *s);
/* One line: "build 3 running: 120/400 modules, 610 hook calls, …". */
void top_build_line(const spy_state *s, char *out, size_t cap);
/* The "build" member of `top --json` (null before any progress). */
void top_build_json(json_out *j, const spy_state *s);

#endif
