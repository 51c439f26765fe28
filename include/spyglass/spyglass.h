/* spyglass.h — the umbrella header: include this one.
 *
 * spyglass is live devtools telemetry for C programs: a provider inside the
 * inspected program samples per-frame stats, named values and trace events;
 * consumers in the same process, another process or another machine
 * discover it and subscribe. See README.md for a ten-line example.
 */
#ifndef SPYGLASS_H
#define SPYGLASS_H

#define SPY_VERSION_MAJOR 0
#define SPY_VERSION_MINOR 1
#define SPY_VERSION_PATCH 0
#define SPY_VERSION_STRING "0.1.0"

#include "spyglass/bus.h"
#include "spyglass/clock.h"
#include "spyglass/consumer.h"
#include "spyglass/error.h"
#include "spyglass/profiler.h"
#include "spyglass/provider.h"
#include "spyglass/transport.h"
#include "spyglass/wire.h"

#endif
