/* The README's embedding example: a frame loop inspected by spyglass.
 * Run it, then `spyglass top` in another terminal. */
#include <spyglass/spyglass.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int frames = argc > 1 ? atoi(argv[1]) : 600;
  spy_provider *p;
  spy_provider_desc desc = {.name = "my-game"};
  if (spy_provider_create(&p, &desc) < 0)
    return 1;
  for (int f = 0; f < frames; f++) { /* your game loop */
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, 42);
    spy_value_set_f64(p, "player.speed", f * 0.1);
    usleep(16000); /* update() + render() */
    spy_frame_end(p);
  }
  spy_provider_destroy(p);
  return 0;
}
