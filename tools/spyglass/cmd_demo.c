/* cmd_demo.c — `spyglass demo`: a real program to inspect. Its frame loop
 * updates the scene on the CPU, submits it to the device thread, reports
 * the GPU times as they resolve, and instruments all of it with a provider.
 * Without --headless it also watches itself through an in-process
 * consumer, the way an in-game panel would: the overlay in a terminal, one
 * summary line per second otherwise. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "demo_scene.h"
#include "opts.h"
#include "spyglass/buffers.h"
#include "spyglass/consumer.h"
#include "spyglass/drawlist.h"
#include "spyglass/provider.h"
#include "web.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
  (void)sig;
  stop_requested = 1;
}

typedef struct demo_opts {
  double seconds; /* 0 = until stopped */
  const char *name;
  double fps_cap; /* 0 = none */
  int load;
  int headless;
  int serve; /* --serve: the in-process bridge + dashboard on :7420 */
  int port;  /* --port N: the bridge's port (0 = any free one) */
  uint32_t width, height;
  const char *dir;
} demo_opts;

static void help(FILE *f) {
  fprintf(
      f, "usage: spyglass demo [--seconds N] [--name NAME] [--fps-cap N]\n"
         "                     [--load K] [--size WxH] [--headless] [--dir D]\n"
         "                     [--serve] [--port N]\n"
         "       spyglass demo build SRC_DIR …   (a traced build; see its "
         "--help)\n\n"
         "Runs an animated scene (spheres ray-marched by a device thread,\n"
         "particles updated on the CPU) instrumented with a spyglass\n"
         "provider: FPS, CPU and GPU time, counters, camera and scene time,\n"
         "the environment. --load K multiplies the work.\n\n"
         "  --headless  only provide: watch it with `spyglass top`\n"
         "  otherwise   watch it in-process: the overlay on a terminal, one\n"
         "              summary line per second when not on a terminal\n"
         "  --seconds N stop after N seconds (default: until q or Ctrl-C;\n"
         "              10 when not on a terminal and not headless)\n"
         "  --serve     also serve this provider and the browser dashboard\n"
         "              at http://127.0.0.1:7420/ (in-process bridge)\n"
         "  --port N    serve on port N instead (0 = any free port; the URL\n"
         "              printed is the one bound); implies --serve\n\n"
         "exit codes: 0 ran, 1 could not start, 2 bad usage\n");
}

static int parse(int argc, char **argv, demo_opts *o) {
  *o = (demo_opts){.name = "spyglass-demo",
                   .load = 1,
                   .width = 160,
                   .height = 90,
                   .seconds = -1,
                   .port = -1};
  uint32_t size[2] = {o->width, o->height};
  const cli_opt opts[] = {
      {"--seconds", CLI_DOUBLE, &o->seconds, 0, 1e6, 0, "a number of seconds"},
      {"--name", CLI_STR, &o->name, 0, 0, 0, "a provider name"},
      {"--fps-cap", CLI_DOUBLE, &o->fps_cap, 1, 1000, 1, "frames per second"},
      {"--load", CLI_INT, &o->load, 1, 64, 0, "a work multiplier"},
      {"--size", CLI_SIZE, size, 8, 4096, 0, NULL},
      {"--headless", CLI_FLAG, &o->headless, 0, 0, 0, NULL},
      {"--serve", CLI_FLAG, &o->serve, 0, 0, 0, NULL},
      {"--port", CLI_INT, &o->port, 0, 65535, 0, "a port number"},
      {"--dir", CLI_STR, &o->dir, 0, 0, 0, "a directory"},
  };
  int rc = cli_parse("demo", argc, argv, opts, sizeof opts / sizeof opts[0],
                     NULL, 0, NULL, help);
  if (rc == 0 && strlen(o->name) > SPY_NAME_MAX) {
    fprintf(stderr, "spyglass demo: --name is at most %u bytes\n",
            SPY_NAME_MAX);
    rc = 2;
  }
  if (o->port >= 0)
    o->serve = 1;
  else
    o->port = 7420;
  o->width = size[0];
  o->height = size[1];
  return rc;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the in-process watcher -------------------------------------------- */

typedef struct watcher {
  pthread_t t;
  char want[17];
  const char *dir;
  _Atomic int stop;
} watcher;

static void summary_line(const spy_state *s) {
  int c_draws = spy_state_counter(s, "draws");
  int c_parts = spy_state_counter(s, "particles");
  float gpu = spy_state_last(s, SPY_FIELD_GPU_MS);
  char gbuf[32];
  if (isnan(gpu))
    snprintf(gbuf, sizeof gbuf, "n/a");
  else
    snprintf(gbuf, sizeof gbuf, "%.2f ms", (double)gpu);
  printf("fps %6.1f  cpu %6.2f ms  gpu %9s  draws %3.0f  particles %6.0f"
         "  samples %llu  frames %llu lost %llu\n",
         (double)s->batch_mean[0], (double)s->batch_mean[1], gbuf,
         c_draws >= 0
             ? (double)spy_state_last(s, SPY_FIELD_COUNTER0 + (uint32_t)c_draws)
             : NAN,
         c_parts >= 0
             ? (double)spy_state_last(s, SPY_FIELD_COUNTER0 + (uint32_t)c_parts)
             : NAN,
         (unsigned long long)s->samples, (unsigned long long)s->frames_received,
         (unsigned long long)s->frames_lost);
  fflush(stdout);
}

static void *watch_main(void *arg) {
  watcher *w = arg;
  spy_consumer *c;
  spy_consumer_desc d = {.want = w->want, .dir = w->dir};
  if (spy_consumer_create(&c, &d) < 0)
    return NULL;
  double next = now_s() + 1.0;
  while (!atomic_load(&w->stop)) {
    spy_consumer_poll(c, 100);
    if (now_s() >= next) {
      next += 1.0;
      const spy_state *s = spy_consumer_state(c);
      if (s->conn == SPY_CONN_CONNECTED && s->samples)
        summary_line(s);
      else
        printf("waiting for the demo's provider…\n");
    }
  }
  spy_consumer_destroy(c);
  return NULL;
}

/* ---- the frame loop ------------------------------------------------------ */

typedef struct frame_loop_ctx {
  spy_provider *p;
  demo_scene *scene;
  const demo_opts *o;
} frame_loop_ctx;

static void frame_loop(frame_loop_ctx *fl) {
  spy_provider *p = fl->p;
  demo_scene *scene = fl->scene;
  const demo_opts o = *fl->o;
  double start = now_s(), prev = start;
  /* The render targets, as named buffers (buffers.h): sent only to a
   * subscriber that asks for them (spyglass snap, the dashboard). */
  uint32_t bw, bh;
  demo_scene_pixels(scene, &bw, &bh);
  int hb[3] = {
      spy_buffer_declare(p, &(spy_buffer_desc){.name = "framebuffer",
                                               .pixel_type = SPY_PIXEL_RGBA8,
                                               .width = bw,
                                               .height = bh}),
      spy_buffer_declare(p, &(spy_buffer_desc){.name = "depth",
                                               .pixel_type = SPY_PIXEL_R32F,
                                               .width = bw,
                                               .height = bh}),
      spy_buffer_declare(p, &(spy_buffer_desc){.name = "normals",
                                               .pixel_type = SPY_PIXEL_RGBA16F,
                                               .width = bw,
                                               .height = bh})};
  while (!stop_requested && (o.seconds <= 0 || now_s() - start < o.seconds)) {
    demo_scene_wait_ready(scene); /* not the frame's CPU time */
    double t = now_s();
    double dt = t - prev;
    prev = t;
    spy_frame_begin(p);
    demo_gpu_result res[16];
    int n = demo_scene_poll_gpu(scene, res, 16);
    for (int i = 0; i < n; i++)
      spy_gpu_resolved(p, res[i].gpu_frame, res[i].ms);
    demo_stats st;
    spy_pass_begin(p, "frame");
    spy_pass_begin(p, "update"); /* the CPU side: scene and particles */
    demo_scene_update(scene, dt > 0.1 ? 0.1 : dt, &st);
    spy_pass_end(p, 0, 0);
    spy_counter_set(p, SPY_COUNTER_DRAWS, st.draws);
    spy_counter_set(p, SPY_COUNTER_PASSES, st.passes);
    spy_counter_set(p, SPY_COUNTER_MIPS, st.mips);
    spy_counter_set(p, SPY_COUNTER_OBJECTS, st.objects);
    spy_counter_set(p, SPY_COUNTER_FAST, st.fast);
    spy_counter_set(p, SPY_COUNTER_EFFECT, st.effect);
    spy_counter_set(p, SPY_COUNTER_PARTICLES, st.particles);
    spy_counter_set(p, SPY_COUNTER_DIRTY, st.dirty);
    spy_value_set_vec(p, "camera.position", st.camera, 3);
    spy_value_set_f64(p, "scene.time", st.time);
    spy_value_set_i64(p, "scene.load", o.load);
    spy_value_set_bool(p, "fps.capped", o.fps_cap > 0);
    spy_pass_begin(p, "submit"); /* the draw list to the device */
    uint64_t id = demo_scene_submit(scene);
    spy_pass_end(p, st.draws, 0);
    spy_pass_end(p, st.draws, 0);
    /* what was drawn, by kind: the batch list */
    spy_batch_add(p, "mesh", "sphere.sdf", st.objects, st.draws);
    spy_batch_add(p, "points", "particles", st.particles, 1);
    spy_batch_add(p, "effect", "glow", st.effect, st.effect ? 1 : 0);
    spy_gpu_issued(p, id);
    if (spy__watched(p)) { /* the last finished frame's targets */
      const uint8_t *fb;
      const float *depth;
      const uint16_t *normal;
      demo_scene_buffers(scene, &fb, &depth, &normal);
      spy_buffer_submit(p, hb[0], fb, (size_t)bw * 4);
      spy_buffer_submit(p, hb[1], depth, (size_t)bw * 4);
      spy_buffer_submit(p, hb[2], normal, (size_t)bw * 8);
    }
    spy_frame_end(p);
    if (o.fps_cap > 0) {
      double next = t + 1.0 / o.fps_cap, left = next - now_s();
      if (left > 0)
        usleep((useconds_t)(left * 1e6));
    }
  }
}

static void *frame_thread(void *arg) {
  frame_loop((frame_loop_ctx *)arg);
  return NULL;
}

int cmd_demo(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "build") == 0) /* demo_build.c */
    return cmd_demo_build(argc - 1, argv + 1);
  demo_opts o;
  int rc = parse(argc, argv, &o);
  if (rc)
    return rc == 1 ? EXIT_OK : EXIT_USAGE;
  int tty = isatty(STDOUT_FILENO);
  if (o.seconds < 0)
    o.seconds = (!tty && !o.headless) ? 10 : 0;

  spy_provider *p;
  spy_provider_desc pd = {.name = o.name, .dir = o.dir};
  char listen[32];
  if (o.serve) {
    tool_web_install();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", o.port);
    pd.listen = listen;
  }
  rc = spy_provider_create(&p, &pd);
  if (rc < 0) {
    fprintf(stderr, "spyglass demo: cannot create the provider: %s\n",
            spy_strerror(rc));
    return EXIT_FAIL;
  }
  demo_scene *scene = demo_scene_create(o.width, o.height, o.load, p);
  if (!scene) {
    fprintf(stderr, "spyglass demo: out of memory\n");
    spy_provider_destroy(p);
    return EXIT_FAIL;
  }
  spy_env_set_adapter(p, "spyglass software device (SDF ray marcher thread)");
  spy_env_set_resolution(p, o.width, o.height, 1.0);
  spy_env_set_debug_mode(p, "");
  char load[16];
  snprintf(load, sizeof load, "%d", o.load);
  spy_env_set(p, "load", load);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  fprintf(stderr, "spyglass demo: provider %016llx \"%s\" (pid %d)%s\n",
          (unsigned long long)spy_provider_id(p), o.name, (int)getpid(),
          o.headless ? ": watch it with `spyglass top`" : "");
  if (o.serve)
    fprintf(stderr, "spyglass demo: dashboard http://127.0.0.1:%d/\n",
            spy_provider_listen_port(p));

  watcher w = {.dir = o.dir};
  snprintf(w.want, sizeof w.want, "%016llx",
           (unsigned long long)spy_provider_id(p));
  int overlay = !o.headless && tty;
  int watching = !o.headless && !tty;
  if (watching && pthread_create(&w.t, NULL, watch_main, &w) != 0)
    watching = 0;

  frame_loop_ctx fl = {.p = p, .scene = scene, .o = &o};
  if (overlay) {
    /* The overlay needs the terminal's thread: the frames run on another,
     * and `spyglass top` watches them from here, in this process. */
    pthread_t ft;
    if (pthread_create(&ft, NULL, frame_thread, &fl) != 0) {
      overlay = 0;
    } else {
      char *targv[6] = {"top", w.want, NULL, NULL, NULL, NULL};
      int targc = 2;
      if (o.dir) {
        targv[targc++] = "--dir";
        targv[targc++] = (char *)o.dir;
      }
      rc = cmd_top(targc, targv);
      stop_requested = 1;
      pthread_join(ft, NULL);
    }
  }
  if (!overlay)
    frame_loop(&fl);
  if (watching) {
    atomic_store(&w.stop, 1);
    pthread_join(w.t, NULL);
  }
  demo_scene_destroy(scene);
  spy_provider_destroy(p);
  return overlay ? rc : EXIT_OK;
}
