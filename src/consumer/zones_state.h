/* zones_state.h — the consumer state's CPU zones (zones_state.c), applied
 * by state.c for each ZONES section. */
#ifndef SPY_ZONES_STATE_H
#define SPY_ZONES_STATE_H

#include "spyglass/consumer.h"

/* Validates the section whole, then applies it. 0 or a decode error
 * (nothing applied), or SPY_ENOMEM (applied up to there). */
int spy__state_zones_apply(spy_state *s, const spy_section *sec);
/* Frees what the zone state holds; keeps its configuration. */
void spy__state_zones_free(spy_state *s);

#endif
