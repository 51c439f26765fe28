/* demo_scene.c — the demo's scene, its CPU update and its "device": a
 * thread that ray-marches signed distance fields into an RGBA8
 * framebuffer. See demo_scene.h. The device reports render times through a
 * small queue; every third report is held back and merged into the next
 * one, as coalesced GPU timestamp resolves are. The work is instrumented
 * with CPU zones (SPY_ZONE), so a consumer sees where a frame's time goes
 * on both threads. */
#define SPY_ENABLE /* the demo shows the instrumentation on */
#include "demo_scene.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spyglass/media.h"
#include "spyglass/zones.h"

#define MAX_SPHERES 256
#define MAX_PARTICLES 200000
#define RESULTS 64

typedef struct sphere {
  float x, y, z, r;
  float cr, cg, cb;
} sphere;

typedef struct frame_cmd {
  uint64_t id;
  sphere spheres[MAX_SPHERES];
  int n;
  float cam[3];
  float t;
  int steps;
} frame_cmd;

struct demo_scene {
  spy_provider *p; /* zones */
  int named;       /* the frame thread has named itself */
  uint32_t w, h;
  int load;
  double t;
  /* particles (CPU work) */
  float *px, *py, *vx, *vy;
  uint32_t np;
  /* device */
  pthread_t dev;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  frame_cmd cmd[2]; /* double-buffered submissions */
  int pending[2];
  int stop;
  uint64_t next_id, submitted;
  uint8_t *fb[2];
  float *depth[2];     /* R32F: distance along the ray (30 = sky) */
  uint16_t *normal[2]; /* RGBA16F: surface normal, alpha 1 (sky: 0) */
  int front;
  demo_gpu_result results[RESULTS];
  int nres;
  int held; /* a result held back for coalescing */
  demo_gpu_result held_res;
  sphere scene[MAX_SPHERES];
  int nspheres;
  float cam[3];
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the device: SDF ray marching ---------------------------------------*/

static float scene_sdf(const frame_cmd *c, float x, float y, float z,
                       int *hit) {
  float d = y + 1.0f; /* ground plane */
  *hit = -1;
  for (int i = 0; i < c->n; i++) {
    const sphere *s = &c->spheres[i];
    float dx = x - s->x, dy = y - s->y, dz = z - s->z;
    float ds = sqrtf(dx * dx + dy * dy + dz * dz) - s->r;
    if (ds < d) {
      d = ds;
      *hit = i;
    }
  }
  return d;
}

static void render(spy_provider *p, const frame_cmd *c, uint8_t *fb,
                   float *depth, uint16_t *normal, uint32_t w, uint32_t h) {
  SPY_ZONE(p, "render");
  float aspect = (float)w / (float)h;
  static spy_zone_loc band = SPY_ZONE_LOC("rows", 0x6060c0);
  for (uint32_t j = 0; j < h; j++) {
    if (j % 32 == 0) { /* one zone per band of 32 rows */
      if (j)
        spy_zone_end(p);
      spy_zone_begin(p, &band);
    }
    for (uint32_t i = 0; i < w; i++) {
      float u = ((float)i / (float)w * 2.0f - 1.0f) * aspect;
      float v = 1.0f - (float)j / (float)h * 2.0f;
      float dx = u, dy = v - 0.2f, dz = 1.5f;
      float inv = 1.0f / sqrtf(dx * dx + dy * dy + dz * dz);
      dx *= inv;
      dy *= inv;
      dz *= inv;
      float t = 0.0f;
      int hit = -2;
      for (int k = 0; k < c->steps && t < 30.0f; k++) {
        int which;
        float d = scene_sdf(c, c->cam[0] + dx * t, c->cam[1] + dy * t,
                            c->cam[2] + dz * t, &which);
        if (d < 0.002f) {
          hit = which;
          break;
        }
        t += d;
      }
      uint8_t *px = fb + ((size_t)j * w + i) * 4;
      float shade = hit == -2 ? 0.0f : 1.0f / (1.0f + 0.08f * t * t);
      float r, g, b;
      if (hit >= 0) {
        r = c->spheres[hit].cr;
        g = c->spheres[hit].cg;
        b = c->spheres[hit].cb;
      } else if (hit == -1) {
        int check = ((int)floorf(c->cam[0] + dx * t) +
                     (int)floorf(c->cam[2] + dz * t)) &
                    1;
        r = g = b = check ? 0.8f : 0.3f;
      } else {
        r = 0.15f;
        g = 0.2f;
        b = 0.35f + 0.3f * v;
        shade = 1.0f;
      }
      px[0] = (uint8_t)fminf(255.0f, r * shade * 255.0f);
      px[1] = (uint8_t)fminf(255.0f, g * shade * 255.0f);
      px[2] = (uint8_t)fminf(255.0f, b * shade * 255.0f);
      px[3] = 255;
      size_t k = (size_t)j * w + i;
      depth[k] = hit == -2 ? 30.0f : t; /* the depth buffer */
      float n[4] = {0, 0, 0, 0};        /* the normal buffer */
      if (hit >= 0) {
        const sphere *sp = &c->spheres[hit];
        float ir = 1.0f / (sp->r > 0 ? sp->r : 1);
        n[0] = (c->cam[0] + dx * t - sp->x) * ir;
        n[1] = (c->cam[1] + dy * t - sp->y) * ir;
        n[2] = (c->cam[2] + dz * t - sp->z) * ir;
        n[3] = 1;
      } else if (hit == -1) {
        n[1] = n[3] = 1;
      }
      for (int q = 0; q < 4; q++)
        normal[k * 4 + q] = spy_float_to_half(n[q]);
    }
  }
  if (h)
    spy_zone_end(p); /* the last band */
}

static void push_result(demo_scene *s, demo_gpu_result r) {
  /* Coalescing: every third frame's result waits and goes out with the
   * next one, carrying only the newest duration (as a coalesced resolve
   * reports only its last frame). */
  if (r.gpu_frame % 3 == 1 && !s->held) {
    s->held = 1;
    s->held_res = r;
    return;
  }
  s->held = 0;
  if (s->nres < RESULTS)
    s->results[s->nres++] = r;
}

static void *device_main(void *arg) {
  demo_scene *s = arg;
  spy_thread_name(s->p, "device");
  pthread_mutex_lock(&s->mu);
  for (;;) {
    int slot = -1;
    while (!s->stop && slot < 0) {
      for (int k = 0; k < 2; k++)
        if (s->pending[k] && (slot < 0 || s->cmd[k].id < s->cmd[slot].id))
          slot = k;
      if (slot < 0)
        pthread_cond_wait(&s->cv, &s->mu);
    }
    if (s->stop)
      break;
    frame_cmd *c = &s->cmd[slot];
    int back = 1 - s->front; /* front changes only here, under mu */
    pthread_mutex_unlock(&s->mu);
    double t0 = now_s();
    render(s->p, c, s->fb[back], s->depth[back], s->normal[back], s->w, s->h);
    double ms = (now_s() - t0) * 1000.0;
    pthread_mutex_lock(&s->mu);
    s->front = back;
    push_result(s, (demo_gpu_result){c->id, ms});
    s->pending[slot] = 0;
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* ---- the CPU side ---------------------------------------------------------*/

static float frand(uint32_t *seed) {
  *seed = *seed * 1664525u + 1013904223u;
  return (float)(*seed >> 8) / 16777216.0f;
}

demo_scene *demo_scene_create(uint32_t width, uint32_t height, int load,
                              spy_provider *p) {
  demo_scene *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  s->p = p;
  s->w = width;
  s->h = height;
  s->load = load < 1 ? 1 : load > 64 ? 64 : load;
  s->np = (uint32_t)(20000 * s->load);
  if (s->np > MAX_PARTICLES)
    s->np = MAX_PARTICLES;
  s->px = malloc(s->np * sizeof(float));
  s->py = malloc(s->np * sizeof(float));
  s->vx = malloc(s->np * sizeof(float));
  s->vy = malloc(s->np * sizeof(float));
  s->fb[0] = calloc((size_t)width * height, 4);
  s->fb[1] = calloc((size_t)width * height, 4);
  for (int k = 0; k < 2; k++) {
    s->depth[k] = calloc((size_t)width * height, sizeof(float));
    s->normal[k] = calloc((size_t)width * height, 4 * sizeof(uint16_t));
  }
  if (!s->px || !s->py || !s->vx || !s->vy || !s->fb[0] || !s->fb[1] ||
      !s->depth[0] || !s->depth[1] || !s->normal[0] || !s->normal[1]) {
    demo_scene_destroy(s);
    return NULL;
  }
  uint32_t seed = 12345;
  for (uint32_t i = 0; i < s->np; i++) {
    s->px[i] = frand(&seed) * 2 - 1;
    s->py[i] = frand(&seed) * 2 - 1;
    s->vx[i] = (frand(&seed) - 0.5f) * 0.4f;
    s->vy[i] = (frand(&seed) - 0.5f) * 0.4f;
  }
  s->nspheres = 4 * s->load < MAX_SPHERES ? 4 * s->load : MAX_SPHERES;
  for (int i = 0; i < s->nspheres; i++) {
    s->scene[i].r = 0.25f + 0.2f * frand(&seed);
    s->scene[i].cr = 0.3f + 0.7f * frand(&seed);
    s->scene[i].cg = 0.3f + 0.7f * frand(&seed);
    s->scene[i].cb = 0.3f + 0.7f * frand(&seed);
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (pthread_create(&s->dev, NULL, device_main, s) != 0) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    s->dev = 0;
    demo_scene_destroy(s);
    return NULL;
  }
  return s;
}

void demo_scene_destroy(demo_scene *s) {
  if (!s)
    return;
  if (s->dev) {
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->dev, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
  }
  free(s->px);
  free(s->py);
  free(s->vx);
  free(s->vy);
  free(s->fb[0]);
  free(s->fb[1]);
  for (int k = 0; k < 2; k++) {
    free(s->depth[k]);
    free(s->normal[k]);
  }
  free(s);
}

void demo_scene_update(demo_scene *s, double dt, demo_stats *out) {
  spy_provider *p = s->p;
  if (!s->named) { /* the frame thread: the first update runs on it */
    s->named = 1;
    spy_thread_name(p, "frame");
  }
  SPY_ZONE(p, "update");
  s->t += dt;
  float t = (float)s->t;
  /* Spheres orbit; the camera circles slowly. */
  static spy_zone_loc orbit = SPY_ZONE_LOC("scene", 0);
  spy_zone_begin(p, &orbit);
  for (int i = 0; i < s->nspheres; i++) {
    float a = t * (0.3f + 0.05f * (float)(i % 7)) + (float)i * 2.399f;
    float rad = 1.2f + 0.35f * (float)(i % 5);
    s->scene[i].x = cosf(a) * rad;
    s->scene[i].z = 4.0f + sinf(a) * rad;
    s->scene[i].y = -0.5f + 0.4f * sinf(t * 1.3f + (float)i);
  }
  s->cam[0] = 0.6f * sinf(t * 0.2f);
  s->cam[1] = 0.3f;
  s->cam[2] = -0.5f * cosf(t * 0.2f);
  spy_zone_end(p);
  /* Particles: integrate and bounce (the CPU-side work that grows). */
  { /* the particles zone ends with this block */
    SPY_ZONE_C(p, "particles", 0xe08020);
    float fdt = (float)dt / 4.0f;
    static spy_zone_loc substep = SPY_ZONE_LOC("substep", 0xf0a040);
    for (int sub = 0; sub < 4; sub++) { /* four substeps: stable bounces */
      spy_zone_begin(p, &substep);
      for (uint32_t i = 0; i < s->np; i++) {
        s->vy[i] -= 0.3f * fdt;
        s->px[i] += s->vx[i] * fdt;
        s->py[i] += s->vy[i] * fdt;
        if (s->py[i] < -1.0f) {
          s->py[i] = -1.0f;
          s->vy[i] = -s->vy[i] * 0.9f;
        }
        if (s->px[i] < -1.0f || s->px[i] > 1.0f)
          s->vx[i] = -s->vx[i];
      }
      spy_zone_end(p);
    }
  }
  /* The draw list: one draw per visible sphere group, one instanced draw
   * for the particles, ground and blit. */
  SPY_ZONE(p, "draw list");
  int visible = 0;
  for (int i = 0; i < s->nspheres; i++)
    visible += s->scene[i].z - s->cam[2] > 0.5f;
  out->objects = (uint32_t)s->nspheres;
  out->fast = (uint32_t)visible;
  out->effect = (uint32_t)(s->nspheres - visible);
  out->draws = 3 + (uint32_t)(s->nspheres + 7) / 8;
  out->passes = 1 + (s->load > 2);
  out->mips = s->load > 4 ? 5 : 0;
  out->particles = s->np;
  out->dirty = 1;
  out->camera[0] = s->cam[0];
  out->camera[1] = s->cam[1];
  out->camera[2] = s->cam[2];
  out->time = s->t;
}

void demo_scene_wait_ready(demo_scene *s) {
  pthread_mutex_lock(&s->mu);
  while (s->pending[0] && s->pending[1])
    pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

uint64_t demo_scene_submit(demo_scene *s) {
  SPY_ZONE(s->p, "submit");
  pthread_mutex_lock(&s->mu);
  int slot;
  while (s->pending[0] && s->pending[1])
    pthread_cond_wait(&s->cv, &s->mu); /* only if wait_ready was skipped */
  slot = s->pending[0] ? 1 : 0;
  frame_cmd *c = &s->cmd[slot];
  c->id = ++s->next_id;
  memcpy(c->spheres, s->scene, (size_t)s->nspheres * sizeof(sphere));
  c->n = s->nspheres;
  memcpy(c->cam, s->cam, sizeof c->cam);
  c->t = (float)s->t;
  c->steps = 24 + 4 * s->load;
  s->pending[slot] = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return c->id;
}

int demo_scene_poll_gpu(demo_scene *s, demo_gpu_result *out, int max) {
  pthread_mutex_lock(&s->mu);
  int n = s->nres < max ? s->nres : max;
  memcpy(out, s->results, (size_t)n * sizeof *out);
  memmove(s->results, s->results + n, (size_t)(s->nres - n) * sizeof *out);
  s->nres -= n;
  pthread_mutex_unlock(&s->mu);
  return n;
}

const uint8_t *demo_scene_pixels(demo_scene *s, uint32_t *w, uint32_t *h) {
  *w = s->w;
  *h = s->h;
  pthread_mutex_lock(&s->mu);
  const uint8_t *fb = s->fb[s->front];
  pthread_mutex_unlock(&s->mu);
  return fb;
}

void demo_scene_buffers(demo_scene *s, const uint8_t **color,
                        const float **depth, const uint16_t **normal) {
  pthread_mutex_lock(&s->mu);
  *color = s->fb[s->front];
  *depth = s->depth[s->front];
  *normal = s->normal[s->front];
  pthread_mutex_unlock(&s->mu);
}
