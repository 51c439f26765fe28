/* discover.c — one round of provider discovery: a query posted on the
 * discovery channel, announces collected until the wait ends. Providers
 * answer every query, so the result is the set alive now; the channel
 * handle is private to the call. */
#include "discover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spyglass/bus.h"

static uint64_t clock_ms(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
uint64_t tool_wall_ms(void) { return clock_ms(CLOCK_REALTIME); }
uint64_t tool_mono_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

int found_matches(const found_provider *p, const char *want) {
  char id[17];
  snprintf(id, sizeof id, "%016llx", (unsigned long long)p->info.id);
  return strcmp(want, id) == 0 || strcmp(want, p->name) == 0;
}

static int by_start(const void *a, const void *b) {
  const found_provider *x = a, *y = b;
  if (x->info.start_ms != y->info.start_ms)
    return x->info.start_ms < y->info.start_ms ? -1 : 1;
  return x->info.id < y->info.id ? -1 : x->info.id > y->info.id;
}

/* Adds or refreshes (a later announce has the newer subscriber count). */
static int note(found_provider *out, int n, int max,
                const spy_provider_info *info) {
  int i = 0;
  while (i < n && out[i].info.id != info->id)
    i++;
  if (i == n) {
    if (n == max)
      return n;
    n++;
  }
  found_provider *p = &out[i];
  p->info = *info;
  uint32_t len = info->name_len > SPY_NAME_MAX ? SPY_NAME_MAX : info->name_len;
  memcpy(p->name, info->name, len);
  p->name[len] = 0;
  p->info.name_len = len; /* info.name is set when the list is final */
  return n;
}

static int forget(found_provider *out, int n, uint64_t id) {
  for (int i = 0; i < n; i++)
    if (out[i].info.id == id) {
      memmove(&out[i], &out[i + 1], (size_t)(n - i - 1) * sizeof *out);
      return n - 1;
    }
  return n;
}

static const spy_channel_ops *via_ops;
static void *via_link;
void discover_via(const spy_channel_ops *ops, void *link) {
  via_ops = ops;
  via_link = link;
}

int discover(const char *dir, int wait_ms, const char *until,
             found_provider *out, int max) {
  spy_channel *ch;
  spy_channel_desc cd = {.name = SPY_DISCOVERY_CHANNEL,
                         .ring_bytes = 64u << 10,
                         .dir = dir,
                         .ops = via_ops,
                         .ops_arg = via_link};
  int rc = spy_channel_open(&ch, &cd);
  if (rc < 0)
    return rc;
  uint8_t q[64];
  spy_frame_writer w;
  spy_frame_start(&w, q, sizeof q, SPY_MSG_PROVIDER_QUERY, tool_wall_ms(), 0,
                  0);
  spy_put_peer(&w, spy_channel_id(ch), 0);
  rc = spy_frame_finish(&w);
  if (rc > 0)
    rc = spy_channel_post(ch, q, (size_t)rc);
  if (rc < 0) {
    spy_channel_close(ch);
    return rc;
  }
  size_t cap = 4096;
  uint8_t *buf = malloc(cap);
  if (!buf) {
    spy_channel_close(ch);
    return SPY_ENOMEM;
  }
  int n = 0;
  uint64_t end = tool_mono_ms() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
  for (;;) {
    uint64_t now = tool_mono_ms();
    int left = now >= end ? 0 : (int)(end - now);
    int len = spy_channel_recv(ch, buf, cap, left, NULL);
    if (len < 0 && len != SPY_ENOBUFS && left == 0)
      break; /* nothing more within the wait (or the channel failed) */
    spy_frame f;
    spy_section s;
    spy_provider_info info;
    if (len <= 0 || spy_frame_decode(buf, (size_t)len, &f, NULL) < 0 ||
        !spy_frame_find_section(&f, SPY_SEC_PROVIDER, &s) ||
        spy_get_provider(&s, &info) < 0)
      continue;
    if (f.type == SPY_MSG_PROVIDER_ANNOUNCE) {
      n = note(out, n, max, &info);
      int hit = 0;
      for (int i = 0; until && i < n; i++)
        hit |= found_matches(&out[i], until);
      if (hit)
        break;
    } else if (f.type == SPY_MSG_PROVIDER_GONE)
      n = forget(out, n, info.id);
  }
  free(buf);
  spy_channel_close(ch);
  qsort(out, (size_t)n, sizeof *out, by_start);
  for (int i = 0; i < n; i++)
    out[i].info.name = out[i].name; /* entries moved: point at their own */
  return n;
}
