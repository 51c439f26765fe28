/* trace.c — the BUILD section (id 17): a traced build's live progress as
 * the provider's build feed sends it to TRACE subscribers (layout in
 * wire.h and docs/wire.md). The decoder bounds every count and length
 * before it reads, and copies names into the fixed struct it fills. */
#include <string.h>

#include "spyglass/wire.h"

static const char *const hook_names[SPY_BUILD_HOOKS] = {
    "transform", "load", "resolve_id", "render_chunk"};

const char *spy_build_hook_name(uint32_t hook) {
  return hook < SPY_BUILD_HOOKS ? hook_names[hook] : "?";
}

static void fail(spy_frame_writer *w) {
  if (!w->err)
    w->err = SPY_EINVAL;
}

void spy_put_build(spy_frame_writer *w, const spy_build_progress *b) {
  if (b->n_plugins > SPY_BUILD_PLUGINS_MAX || b->n_slow > SPY_BUILD_SLOW_MAX ||
      (b->flags & ~(SPY_BUILD_ENDED | SPY_BUILD_PARTIAL))) {
    fail(w);
    return;
  }
  for (uint32_t i = 0; i < b->n_slow; i++)
    if (b->slow[i].hook >= SPY_BUILD_HOOKS ||
        b->slow[i].plugin >= b->n_plugins) {
      fail(w);
      return;
    }
  spy_frame_section_begin(w, SPY_SEC_BUILD);
  spy_frame_put_u32(w, b->build);
  spy_frame_put_u32(w, b->flags);
  spy_frame_put_u64(w, b->started_us);
  spy_frame_put_u64(w, b->ended_us);
  spy_frame_put_u32(w, b->modules_done);
  spy_frame_put_u32(w, b->modules_total);
  spy_frame_put_u64(w, b->actions);
  spy_frame_put_u64(w, b->hook_calls);
  spy_frame_put_u64(w, b->hook_us);
  spy_frame_put_u16(w, b->n_plugins);
  spy_frame_put_u16(w, b->n_slow);
  spy_frame_put_u32(w, 0);
  for (uint32_t i = 0; i < b->n_plugins; i++) {
    const spy_build_plugin *p = &b->plugins[i];
    size_t n = strnlen(p->name, SPY_BUILD_NAME_MAX);
    spy_frame_put_u16(w, (uint16_t)n);
    spy_frame_put_u16(w, 0);
    spy_frame_put_u32(w, p->p50_us);
    for (uint32_t h = 0; h < SPY_BUILD_HOOKS; h++) {
      spy_frame_put_u64(w, p->calls[h]);
      spy_frame_put_u64(w, p->total_us[h]);
    }
    spy_frame_put_u64(w, p->max_us);
    spy_frame_put(w, p->name, n);
  }
  for (uint32_t i = 0; i < b->n_slow; i++) {
    const spy_build_slow *s = &b->slow[i];
    size_t n = strnlen(s->module, SPY_BUILD_MODULE_MAX);
    spy_frame_put_u8(w, s->hook);
    spy_frame_put_u8(w, 0);
    spy_frame_put_u16(w, s->plugin);
    spy_frame_put_u16(w, (uint16_t)n);
    spy_frame_put_u16(w, 0);
    spy_frame_put_u64(w, s->dur_us);
    spy_frame_put(w, s->module, n);
  }
  spy_frame_section_end(w);
}

int spy_get_build(const spy_section *s, spy_build_progress *out) {
  memset(out, 0, sizeof *out);
  if (s->len < SPY_BUILD_HEAD_BYTES)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data, *end = s->data + s->len;
  out->build = spy_rd32(p);
  out->flags = spy_rd32(p + 4);
  out->started_us = spy_rd64(p + 8);
  out->ended_us = spy_rd64(p + 16);
  out->modules_done = spy_rd32(p + 24);
  out->modules_total = spy_rd32(p + 28);
  out->actions = spy_rd64(p + 32);
  out->hook_calls = spy_rd64(p + 40);
  out->hook_us = spy_rd64(p + 48);
  out->n_plugins = spy_rd16(p + 56);
  out->n_slow = spy_rd16(p + 58);
  if ((out->flags & ~(SPY_BUILD_ENDED | SPY_BUILD_PARTIAL)) ||
      spy_rd32(p + 60) || out->n_plugins > SPY_BUILD_PLUGINS_MAX ||
      out->n_slow > SPY_BUILD_SLOW_MAX)
    return SPY_EBADVALUE;
  p += SPY_BUILD_HEAD_BYTES;
  for (uint32_t i = 0; i < out->n_plugins; i++) {
    spy_build_plugin *pl = &out->plugins[i];
    if ((size_t)(end - p) < SPY_BUILD_PLUGIN_BYTES)
      return SPY_EBADSECTION;
    uint32_t n = spy_rd16(p);
    if (n > SPY_BUILD_NAME_MAX || spy_rd16(p + 2))
      return SPY_EBADVALUE;
    pl->p50_us = spy_rd32(p + 4);
    for (uint32_t h = 0; h < SPY_BUILD_HOOKS; h++) {
      pl->calls[h] = spy_rd64(p + 8 + 16 * h);
      pl->total_us[h] = spy_rd64(p + 16 + 16 * h);
    }
    pl->max_us = spy_rd64(p + 8 + 16 * SPY_BUILD_HOOKS);
    p += SPY_BUILD_PLUGIN_BYTES;
    if ((size_t)(end - p) < n)
      return SPY_EBADSECTION;
    memcpy(pl->name, p, n);
    pl->name[n] = 0;
    p += n;
  }
  for (uint32_t i = 0; i < out->n_slow; i++) {
    spy_build_slow *sl = &out->slow[i];
    if ((size_t)(end - p) < SPY_BUILD_SLOW_BYTES)
      return SPY_EBADSECTION;
    uint32_t n = spy_rd16(p + 4);
    sl->hook = p[0];
    sl->plugin = spy_rd16(p + 2);
    sl->dur_us = spy_rd64(p + 8);
    if (p[1] || spy_rd16(p + 6) || sl->hook >= SPY_BUILD_HOOKS ||
        sl->plugin >= out->n_plugins || n > SPY_BUILD_MODULE_MAX)
      return SPY_EBADVALUE;
    p += SPY_BUILD_SLOW_BYTES;
    if ((size_t)(end - p) < n)
      return SPY_EBADSECTION;
    memcpy(sl->module, p, n);
    sl->module[n] = 0;
    p += n;
  }
  return p == end ? 0 : SPY_EBADSECTION;
}
