/* state_json.h — a consumer's state as one JSON object: the provider, the
 * connection, the newest stats and the CPU history the sparkline draws,
 * counters, environment, named values and bus health (`top --json`). */
#ifndef SPY_TOOL_STATE_JSON_H
#define SPY_TOOL_STATE_JSON_H

#include "json.h"
#include "spyglass/consumer.h"

void state_to_json(json_out *j, const spy_consumer *c);
/* "searching", "subscribing", "connected", "lost". */
const char *state_conn_name(spy_conn conn);

#endif
