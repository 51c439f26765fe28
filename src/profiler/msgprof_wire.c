/* msgprof_wire.c — the MSGPROF section (id 12): a profiler summary on the
 * wire, layout in profiler.h and docs/wire.md. The decoder checks the
 * exact length and the type order before reading anything. */
#include <string.h>

#include "spyglass/profiler.h"

static void put_ns(spy_frame_writer *w, const spy_msgprof_ns *n) {
  spy_frame_put_u64(w, n->mean_ns);
  spy_frame_put_u64(w, n->p50_ns);
  spy_frame_put_u64(w, n->p99_ns);
  spy_frame_put_u64(w, n->max_ns);
}

void spy_put_msgprof(spy_frame_writer *w, const spy_msgprof_summary *s) {
  if (s->n_types > SPY_PROFILER_MAX_TYPES) {
    if (!w->err)
      w->err = SPY_EINVAL;
    return;
  }
  spy_frame_section_begin(w, SPY_SEC_MSGPROF);
  spy_frame_put_u32(w, s->n_types);
  spy_frame_put_u32(w, s->flags);
  spy_frame_put_u64(w, s->messages);
  spy_frame_put_u64(w, s->errors);
  spy_frame_put_u64(w, s->elapsed_ns);
  for (uint32_t i = 0; i < s->n_types; i++) {
    const spy_msgprof_type *t = &s->types[i];
    spy_frame_put_u32(w, t->type);
    spy_frame_put_u32(w, 0);
    spy_frame_put_u64(w, t->count);
    spy_frame_put_u64(w, t->errors);
    spy_frame_put_u64(w, t->bytes);
    put_ns(w, &t->encode);
    put_ns(w, &t->post);
  }
  spy_frame_section_end(w);
}

static void get_ns(const uint8_t *p, spy_msgprof_ns *n) {
  n->mean_ns = spy_rd64(p);
  n->p50_ns = spy_rd64(p + 8);
  n->p99_ns = spy_rd64(p + 16);
  n->max_ns = spy_rd64(p + 24);
}

int spy_get_msgprof(const spy_section *s, spy_msgprof_summary *out) {
  memset(out, 0, sizeof *out);
  if (s->len < SPY_MSGPROF_HEAD_BYTES)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data;
  uint32_t n = spy_rd32(p);
  if (n > SPY_PROFILER_MAX_TYPES)
    return SPY_EBADVALUE;
  if (s->len != SPY_MSGPROF_HEAD_BYTES + n * SPY_MSGPROF_ENTRY_BYTES)
    return SPY_EBADSECTION;
  for (uint32_t i = 1; i < n; i++) {
    const uint8_t *e = p + SPY_MSGPROF_HEAD_BYTES + i * SPY_MSGPROF_ENTRY_BYTES;
    if (spy_rd32(e) <= spy_rd32(e - SPY_MSGPROF_ENTRY_BYTES))
      return SPY_EBADVALUE;
  }
  out->n_types = n;
  out->flags = spy_rd32(p + 4);
  out->messages = spy_rd64(p + 8);
  out->errors = spy_rd64(p + 16);
  out->elapsed_ns = spy_rd64(p + 24);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = p + SPY_MSGPROF_HEAD_BYTES + i * SPY_MSGPROF_ENTRY_BYTES;
    spy_msgprof_type *t = &out->types[i];
    t->type = spy_rd32(e);
    t->count = spy_rd64(e + 8);
    t->errors = spy_rd64(e + 16);
    t->bytes = spy_rd64(e + 24);
    get_ns(e + 32, &t->encode);
    get_ns(e + 64, &t->post);
  }
  return 0;
}
