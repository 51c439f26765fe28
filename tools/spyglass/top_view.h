/* top_view.h — draws the stats overlay of `spyglass top` with ncurses:
 * FPS / CPU / GPU in threshold colours, the CPU sparkline against the
 * 16.7 ms line, counters, memory, resolution, PAUSED / idle, the named
 * values (scrollable), bus health and the adapter footer; and the provider
 * picker. Any terminal size, any state (empty, NAN) draws without error:
 * what does not fit is cut. */
#ifndef SPY_TOOL_TOP_VIEW_H
#define SPY_TOOL_TOP_VIEW_H

#include "discover.h"
#include "spyglass/consumer.h"

typedef struct top_view {
  int ascii;        /* no Unicode: ASCII sparkline and rules */
  int scroll;       /* first named value shown (clamped when drawn) */
  int value_rows;   /* rows the values had at the last draw (paging) */
  char status[256]; /* what the connection line says when not live */
  /* The picker (key p): the providers found and the highlighted one. */
  found_provider list[DISCOVER_MAX];
  int n_list, sel;
  int zones; /* key z: the zones view instead of the named values */
} top_view;

/* After initscr(): colours, if the terminal has them. */
void top_view_init(top_view *v);
/* Draws the whole screen for the consumer's state (not refreshed: the
 * caller calls refresh()). */
void top_view_draw(top_view *v, const spy_consumer *c);
/* Draws the provider picker over the screen. */
void top_view_draw_picker(const top_view *v);

#endif
