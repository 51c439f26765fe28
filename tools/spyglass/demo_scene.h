/* demo_scene.h — the demo's workload: an animated scene of spheres and
 * particles, updated on the CPU each frame and ray-marched (signed distance
 * fields) into an RGBA8 framebuffer by a separate "device" thread, which
 * reports each frame's render time later, sometimes several frames at
 * once, the way GPU timestamp queries resolve. Cost grows with `load`. */
#ifndef SPY_DEMO_SCENE_H
#define SPY_DEMO_SCENE_H

#include <stdint.h>

#include "spyglass/provider.h"

typedef struct demo_scene demo_scene;

typedef struct demo_stats {
  uint32_t draws, passes, mips, objects, fast, effect, particles, dirty;
  double camera[3];
  double time; /* scene seconds */
} demo_stats;

/* A render time the device resolved: frame `gpu_frame` took `ms`; with
 * coalescing, the frames before it that were not reported took it too. */
typedef struct demo_gpu_result {
  uint64_t gpu_frame;
  double ms;
} demo_gpu_result;

/* width x height framebuffer; load >= 1 scales objects, particles and
 * march steps. Returns NULL on allocation failure. Starts the device
 * thread. The scene's work is instrumented with CPU zones on provider p
 * (not NULL): update, particle substeps, draw-list build and submit on the
 * frame thread ("frame"), and the render on the device thread
 * ("device"). */
demo_scene *demo_scene_create(uint32_t width, uint32_t height, int load,
                              spy_provider *p);
void demo_scene_destroy(demo_scene *s);

/* The CPU part of a frame: advances the scene by dt seconds, updates the
 * particles, builds the draw list; fills *out. */
void demo_scene_update(demo_scene *s, double dt, demo_stats *out);
/* Waits until the device can take another frame (two in flight at most:
 * then the device is the bottleneck, as a GPU would be). Call before the
 * frame's CPU work, like waiting for a swapchain image. */
void demo_scene_wait_ready(demo_scene *s);
/* Submits the frame to the device; returns its GPU frame id. */
uint64_t demo_scene_submit(demo_scene *s);
/* Takes up to max resolved timings (non-blocking); returns how many. */
int demo_scene_poll_gpu(demo_scene *s, demo_gpu_result *out, int max);
/* The last completed framebuffer (RGBA8, width*height*4), for previews. */
const uint8_t *demo_scene_pixels(demo_scene *s, uint32_t *w, uint32_t *h);
/* The last completed frame's render targets, width x height each: the
 * RGBA8 framebuffer, its R32F depth and its RGBA16F normals. */
void demo_scene_buffers(demo_scene *s, const uint8_t **color,
                        const float **depth, const uint16_t **normal);

#endif
