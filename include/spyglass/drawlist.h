/* drawlist.h — what a frame drew: the batch list (kind, material or run
 * key, instances, draw calls) and the render-pass tree (label, parent,
 * draw calls, triangles, CPU time), for consumers that subscribe to
 * SPY_FEAT_BATCHES / SPY_FEAT_PASSES.
 *
 *   spy_frame_begin(p);
 *   spy_pass_begin(p, "shadow");
 *   spy_batch_add(p, "mesh", "rock.mat", 120, 3);
 *   spy_pass_end(p, 3, 48000);
 *   spy_frame_end(p);
 *
 * Nobody subscribed: each call is one load and one branch. Subscribed:
 * a copy into fixed tables (SPY_DRAWLIST_BATCHES batches, SPY_DRAWLIST_PASSES
 * passes per frame, names cut to 63 bytes; more are counted as dropped),
 * made by the provider's service when the first subscriber asks, never on
 * the frame thread. At each flush the last complete frame's lists are sent
 * as BATCHES / PASSES sections (docs/wire.md), each only if it changed
 * since it was last sent (whole in a snapshot), with a new version.
 *
 * Threads: the frame thread only (between frame_begin and frame_end).
 */
#ifndef SPYGLASS_DRAWLIST_H
#define SPYGLASS_DRAWLIST_H

#include <stdint.h>

#include "spyglass/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPY_DRAWLIST_BATCHES 256u
#define SPY_DRAWLIST_PASSES 64u
#define SPY_DRAWLIST_DEPTH 16u /* nested passes */

void spy__batch_add(spy_provider *p, const char *kind, const char *key,
                    uint32_t instances, uint32_t draws);
void spy__pass_begin(spy_provider *p, const char *label);
void spy__pass_end(spy_provider *p, uint32_t draws, uint32_t triangles);

/* One batch this frame drew: `instances` objects in `draws` draw calls of
 * one kind ("mesh", "sprite", …) and material / run key. */
static inline void spy_batch_add(spy_provider *p, const char *kind,
                                 const char *key, uint32_t instances,
                                 uint32_t draws) {
  if (spy__watching(p, SPY_FEAT_BATCHES))
    spy__batch_add(p, kind, key, instances, draws);
}
/* Opens a render pass (nested in the one open, if any); its CPU time runs
 * until the matching spy_pass_end, which gives its draw calls and
 * triangles. An end with no pass open is ignored. */
static inline void spy_pass_begin(spy_provider *p, const char *label) {
  if (spy__watching(p, SPY_FEAT_PASSES))
    spy__pass_begin(p, label);
}
static inline void spy_pass_end(spy_provider *p, uint32_t draws,
                                uint32_t triangles) {
  if (spy__watching(p, SPY_FEAT_PASSES))
    spy__pass_end(p, draws, triangles);
}

#ifdef __cplusplus
}
#endif
#endif
