/* bus_tap.c — the glue that publishes a trace session's builds on the
 * bus: spy_trace_publish sets the session's tap (trace.h) to hand each
 * action to the provider's build feed (trace_feed.h, in the core
 * library), gated on the provider's TRACE subscription word so that an
 * unwatched build pays one load and a branch per action.
 *
 * The store sits above the core library, so the feed knows nothing of
 * actions: this file maps the catalog's kinds to the feed's few calls
 * (build start / end, the module graph's size, a hook's start and end). */
#include "spyglass/trace.h"
#include "spyglass/trace_feed.h"

static void tap_action(void *ctx, const spy_trace_kind *kind, const void *act,
                       uint64_t ts, uint32_t build) {
  spy_provider *p = ctx;
  switch (kind->id) {
  case 2: spy_trace_feed_build(p, build, 0, ts); break;
  case 3: spy_trace_feed_build(p, build, 1, ts); break;
  case 4:
    /* a LIST member's count carries the field's name (trace.h) */
    spy_trace_feed_modules(
        p, build, ((const spy_act_module_graph_ready *)act)->modules.modules,
        ts);
    break;
  case 7:
    spy_trace_feed_hook_start(
        p, build, ((const spy_act_hook_resolve_id_call_start *)act)->call_id,
        ts);
    break;
  case 9:
    spy_trace_feed_hook_start(
        p, build, ((const spy_act_hook_load_call_start *)act)->call_id, ts);
    break;
  case 11:
    spy_trace_feed_hook_start(
        p, build, ((const spy_act_hook_transform_call_start *)act)->call_id,
        ts);
    break;
  case 13:
    spy_trace_feed_hook_start(
        p, build, ((const spy_act_hook_render_chunk_start *)act)->call_id, ts);
    break;
  case 8: {
    const spy_act_hook_resolve_id_call_end *a = act;
    spy_trace_feed_hook_end(p, build, SPY_HOOK_RESOLVE_ID, a->plugin_name,
                            a->call_id, a->resolved_id ? a->resolved_id : "",
                            ts);
    break;
  }
  case 10: {
    const spy_act_hook_load_call_end *a = act;
    spy_trace_feed_hook_end(p, build, SPY_HOOK_LOAD, a->plugin_name, a->call_id,
                            a->module_id, ts);
    break;
  }
  case 12: {
    const spy_act_hook_transform_call_end *a = act;
    spy_trace_feed_hook_end(p, build, SPY_HOOK_TRANSFORM, a->plugin_name,
                            a->call_id, a->module_id, ts);
    break;
  }
  case 14: {
    const spy_act_hook_render_chunk_end *a = act;
    spy_trace_feed_hook_end(p, build, SPY_HOOK_RENDER_CHUNK, a->plugin_name,
                            a->call_id, "", ts);
    break;
  }
  default: spy_trace_feed_other(p, build, ts); break;
  }
}

int spy_trace_publish(spy_trace *t, struct spy_provider *p) {
  if (!t)
    return SPY_EINVAL;
  if (!p)
    return spy_trace_set_tap(t, NULL);
  if (!spy_trace_on(t))
    return 0;
  spy_trace_tap tap = {.action = tap_action, .ctx = p};
  int rc = spy_trace_feed_enable(p, &tap.gate, &tap.mask);
  return rc < 0 ? rc : spy_trace_set_tap(t, &tap);
}
