/* drawlist_state.h — internal: the consumer state's batch list and pass
 * tree (drawlist.c). */
#ifndef SPY_CONSUMER_DRAWLIST_STATE_H
#define SPY_CONSUMER_DRAWLIST_STATE_H

#include "spyglass/consumer.h"

int spy__state_drawlist_apply(spy_state *s, const spy_section *sec);
void spy__state_drawlist_free(spy_state *s);

#endif
