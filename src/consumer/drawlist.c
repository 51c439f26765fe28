/* drawlist.c — the consumer state's batch list and pass tree: each
 * BATCHES / PASSES section replaces the list whole (consumer.h). */
#include <stdlib.h>
#include <string.h>

#include "consumer/drawlist_state.h"

static void name(char *dst, const char *s, uint32_t n) {
  if (n > 63)
    n = 63;
  memcpy(dst, s, n);
  dst[n] = 0;
}

static int apply_batches(spy_state *st, const spy_section *sec) {
  spy_list_iter it;
  int n = spy_get_batches(sec, &it);
  if (n < 0)
    return n;
  spy_state_batch *b = n ? malloc((size_t)n * sizeof *b) : NULL;
  if (n && !b)
    return SPY_ENOMEM;
  spy_batch_info x;
  for (int i = 0; spy_batches_next(&it, &x); i++) {
    name(b[i].kind, x.kind, x.kind_len);
    name(b[i].key, x.key, x.key_len);
    b[i].instances = x.instances;
    b[i].draws = x.draws;
  }
  free(st->batches);
  st->batches = b;
  st->n_batches = (uint32_t)n;
  st->batches_version = it.version;
  st->batch_lists++;
  return 0;
}

static int apply_passes(spy_state *st, const spy_section *sec) {
  spy_list_iter it;
  int n = spy_get_passes(sec, &it);
  if (n < 0)
    return n;
  spy_state_pass *p = n ? malloc((size_t)n * sizeof *p) : NULL;
  if (n && !p)
    return SPY_ENOMEM;
  spy_pass_info x;
  for (int i = 0; spy_passes_next(&it, &x); i++) {
    name(p[i].label, x.label, x.label_len);
    p[i].parent = x.parent;
    p[i].draws = x.draws;
    p[i].triangles = x.triangles;
    p[i].cpu_ms = x.cpu_us / 1000.0;
  }
  free(st->passes);
  st->passes = p;
  st->n_passes = (uint32_t)n;
  st->passes_version = it.version;
  st->pass_lists++;
  return 0;
}

int spy__state_drawlist_apply(spy_state *s, const spy_section *sec) {
  return sec->id == SPY_SEC_BATCHES ? apply_batches(s, sec)
                                    : apply_passes(s, sec);
}

void spy__state_drawlist_free(spy_state *s) {
  free(s->batches);
  free(s->passes);
  s->batches = NULL;
  s->passes = NULL;
  s->n_batches = s->n_passes = 0;
}
