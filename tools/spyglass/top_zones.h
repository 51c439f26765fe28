/* top_zones.h — the zones view of `spyglass top` (key z): per location the
 * calls, total, self and longest time over the provider's last second,
 * longest total first, and the threads with their spans and drops. */
#ifndef SPY_TOOL_TOP_ZONES_H
#define SPY_TOOL_TOP_ZONES_H

#include "spyglass/consumer.h"

/* Draws rows y0..y1-1 (ncurses, not refreshed). */
void top_zones_draw(int y0, int y1, const spy_state *s);

/* One row of the table: what top_zones_draw shows, sorted. Fills up to
 * max rows and returns how many locations had calls in the last second. */
typedef struct top_zone_row {
  const spy_zone_location *loc;
  spy_zone_sums sums;
} top_zone_row;
int top_zones_rows(const spy_state *s, top_zone_row *out, int max);

#endif
