/* web.h — the browser dashboard's files (web/), embedded in the tool at
 * build time (cmake/embed_web.cmake writes web_assets.c in the build
 * directory) and handed to every bridge the tool starts: `spyglass serve`
 * and `spyglass demo --serve`. */
#ifndef SPY_TOOL_WEB_H
#define SPY_TOOL_WEB_H

#include <stddef.h>

#include "spyglass/net.h"

extern const spy_web_asset spy_tool_web_assets[];
extern const size_t spy_tool_web_n;

/* Makes this process's bridges serve the dashboard. */
static inline void tool_web_install(void) {
  spy_server_set_web(spy_tool_web_assets, spy_tool_web_n);
}

#endif
