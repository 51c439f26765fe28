/* zones_state.h — the consumer state's CPU zones (zones_state.c), applied
 * by state.c for each ZONES section. */
#ifndef SPY_ZONES_STATE_H
#define SPY_ZONES_STATE_H

#include "spyglass/consumer.h"

/* Checks the whole section and unpacks its events in one pass over the
 * bytes (spy_zones_unpack, into the state's scratch), then applies them.
 * 0 or a decode error (nothing applied), or SPY_ENOMEM (nothing applied
 * if the scratch could not grow; else applied up to there). */
int spy__state_zones_apply(spy_state *s, const spy_section *sec);
/* Frees what the zone state holds; keeps its configuration. */
void spy__state_zones_free(spy_state *s);

#endif
