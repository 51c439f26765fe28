/* rec_provider.c — a small provider for the recording tests: frames at a
 * fixed rate with CPU zones `tick` > {`steady`, `work`} whose busy times
 * are given on the command line (a deliberate slowdown of one zone), a
 * counter, a value, and an optional clock-sync offset (the provider's
 * test hook) so that --all recordings show distinct offsets, and an
 * optional buffer `frame` (64x36 RGBA8) whose every captured frame
 * stalls STALL_MS more (wall time) before it ends: a frame whose image
 * leaves the provider long before its stats sample does.
 *
 *   rec_provider NAME SECONDS FPS WORK_US STEADY_US [CLOCK_OFFSET_MS
 *                [STALL_MS]] */
#define SPY_ENABLE 1
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "spyglass/buffers.h"
#include "spyglass/provider.h"
#include "spyglass/zones.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Busy for us microseconds of thread CPU time (not wall time: a loaded
 * machine makes the zone longer, never shorter). */
static volatile unsigned sink; /* keeps the busy loop's work */

static void busy_us(double us) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  double end = (double)ts.tv_sec * 1e6 + ts.tv_nsec / 1e3 + us;
  for (;;) {
    for (int i = 0; i < 200; i++)
      sink += (unsigned)i;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    if ((double)ts.tv_sec * 1e6 + ts.tv_nsec / 1e3 >= end)
      break;
  }
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: rec_provider NAME SECONDS FPS WORK_US STEADY_US "
                    "[CLOCK_OFFSET_MS [STALL_MS]]\n");
    return 2;
  }
  double seconds = atof(argv[2]), fps = atof(argv[3]);
  double work = atof(argv[4]), steady = atof(argv[5]);
  spy_provider_desc d = {.name = argv[1]};
  if (argc > 6)
    d.clock_test_offset_ns = (int64_t)(atof(argv[6]) * 1e6);
  spy_provider *p;
  int rc = spy_provider_create(&p, &d);
  if (rc < 0) {
    fprintf(stderr, "rec_provider: %s\n", spy_strerror(rc));
    return 1;
  }
  SPY_THREAD_NAME(p, "main");
  double stall_ms = argc > 7 ? atof(argv[7]) : -1;
  static uint8_t px[64 * 36 * 4];
  int fb = -1;
  if (stall_ms >= 0) {
    fb = spy_buffer_declare(p, &(spy_buffer_desc){.name = "frame",
                                                  .pixel_type = SPY_PIXEL_RGBA8,
                                                  .width = 64,
                                                  .height = 36});
    if (fb < 0) {
      fprintf(stderr, "rec_provider: buffer: %s\n", spy_strerror(fb));
      return 1;
    }
  }
  double start = now_s(), next = start;
  uint64_t n = 0;
  while (now_s() - start < seconds) {
    spy_frame_begin(p);
    {
      SPY_ZONE(p, "tick");
      {
        SPY_ZONE(p, "steady");
        busy_us(steady);
      }
      {
        SPY_ZONE(p, "work");
        busy_us(work);
      }
    }
    spy_counter_set(p, SPY_COUNTER_OBJECTS, (uint32_t)(n % 7));
    spy_value_set_f64(p, "test.frame", (double)n);
    if (fb >= 0) {
      for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(n + i);
      if (spy_buffer_submit(p, fb, px, 64 * 4) == 1)
        usleep((useconds_t)(stall_ms * 1000));
    }
    spy_frame_end(p);
    n++;
    next += 1.0 / fps;
    double left = next - now_s();
    if (left > 0)
      usleep((useconds_t)(left * 1e6));
    else
      next = now_s();
  }
  spy_provider_destroy(p);
  printf("%llu frames\n", (unsigned long long)n);
  return 0;
}
