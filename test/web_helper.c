/* web_helper.c — the C side of the dashboard's tests (test/web_*.mjs).
 *
 *   web_helper golden DIR        frames written by the C encoder, each as
 *                                DIR/NAME.bin, with DIR/NAME.json: what the
 *                                C decoder reads from it (or the error code
 *                                and offset it rejects it with), for the
 *                                JS codec to match field by field
 *   web_helper provider NAME S   a provider with values known per frame
 *                                (det.frame = the frame number, …) for S
 *                                seconds (0: until killed)
 *   web_helper images NAME S     a provider of known images and draw lists
 *                                (images() below) for S seconds
 *   web_helper truth NAME S OUT  a C consumer of provider NAME on this host's
 *                                bus: every state it holds after a data
 *                                frame (last frame key, registry values),
 *                                one JSON line per state, for S seconds
 *   web_helper zprovider NAME S  a provider whose thread "sim" opens a known
 *                                zone sequence every frame (frame > update >
 *                                3 substeps, draw > deep > deep > deep)
 *   web_helper zcheck DIR        for every DIR/NAME.bin, one line "NAME
 *                                RESULT": the frame decoder's or the ZONES
 *                                decoder's error name, or "ok"
 *   web_helper ztruth NAME S OUT a C consumer of its zones: per complete
 *                                frame, the spans of thread "sim" (name,
 *                                depth, start from the frame's, duration)
 *
 * The provider's values, with n its own loop count (not the provider's
 * frame key, which counts watched frames only): det.frame (float) = n,
 * det.parity (bool) = n odd, det.neg (int) = −n, det.vec (float3) = (n,
 * n/2, −1); counter draws = n mod 100. Every value changes every frame,
 * and a data frame carries the values of its batch's last frame, so the
 * state as of frame F is what the C consumer held after the last data
 * frame whose batch ended at or before F.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "spyglass/buffers.h"
#include "spyglass/clock.h"
#include "spyglass/consumer.h"
#include "spyglass/drawlist.h"
#include "spyglass/profiler.h"
#include "spyglass/provider.h"
#include "spyglass/wire.h"
#include "spyglass/zones.h"
#ifdef SPY_HAVE_VPX
#include "spyglass/vpx.h"
#endif

static uint8_t buf[1 << 16];

/* ---- golden frames ------------------------------------------------------ */

static FILE *json;

static void jstr(const char *s, uint32_t n) {
  fputc('"', json);
  for (uint32_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      fprintf(json, "\\%c", c);
    else if (c < 0x20)
      fprintf(json, "\\u%04x", c);
    else
      fputc(c, json);
  }
  fputc('"', json);
}

static void jnum(double v) {
  if (isnan(v))
    fprintf(json, "null");
  else
    fprintf(json, "%.17g", v);
}

static void jvalue(const spy_value *v) {
  switch (v->kind) {
  case SPY_VAL_FLOAT: jnum(v->v.f[0]); break;
  case SPY_VAL_UINT:
  case SPY_VAL_BITS: fprintf(json, "%llu", (unsigned long long)v->v.u); break;
  case SPY_VAL_INT: fprintf(json, "%lld", (long long)v->v.i); break;
  case SPY_VAL_FLOAT2:
  case SPY_VAL_FLOAT3:
  case SPY_VAL_FLOAT4: {
    int n = v->kind - SPY_VAL_FLOAT2 + 2;
    fputc('[', json);
    for (int i = 0; i < n; i++) {
      if (i)
        fputc(',', json);
      jnum(v->v.f[i]);
    }
    fputc(']', json);
    break;
  }
  case SPY_VAL_BOOL: fprintf(json, v->v.b ? "true" : "false"); break;
  case SPY_VAL_STRING: jstr(v->v.s.ptr, v->v.s.len); break;
  case SPY_VAL_BLOB:
    fputc('[', json);
    for (uint32_t i = 0; i < v->v.s.len; i++)
      fprintf(json, "%s%u", i ? "," : "", (unsigned char)v->v.s.ptr[i]);
    fputc(']', json);
    break;
  default: fprintf(json, "null");
  }
}

static void jhex(uint64_t v) {
  fprintf(json, "\"%016llx\"", (unsigned long long)v);
}

/* A BUFFERS entry's metadata (wire.h spy_buffer_meta) as "meta", or the
 * error the C decoder refuses it with. */
static const char *err_name(int rc);
static void dump_buffer_meta(const spy_value *v) {
  spy_buffer_meta m;
  int rc = spy_buffer_meta_decode(v, &m);
  if (rc < 0) {
    fprintf(json, ",\"meta\":{\"error\":\"%s\"}", err_name(rc));
    return;
  }
  fprintf(json,
          ",\"meta\":{\"pixelType\":%u,\"mode\":%u,\"display\":%u,"
          "\"width\":%u,\"height\":%u,\"servedWidth\":%u,\"servedHeight\":%u,"
          "\"codec\":%u,\"maxFps\":%u,\"lastFrame\":%llu,\"captured\":%llu,"
          "\"dropped\":%llu}",
          m.pixel_type, m.mode, m.display, m.width, m.height, m.served_width,
          m.served_height, m.codec, m.max_fps, (unsigned long long)m.last_frame,
          (unsigned long long)m.captured, (unsigned long long)m.dropped);
}

/* A BUFFER_VARIANTS entry's records as "variants", or the error the C
 * decoder refuses them with. */
static void dump_buffer_variants(const spy_value *v) {
  spy_buffer_variant x[SPY_BUFFER_VARIANT_LIST_MAX];
  int n = spy_buffer_variants_decode(v, x, SPY_BUFFER_VARIANT_LIST_MAX);
  if (n < 0) {
    fprintf(json, ",\"variants\":{\"error\":\"%s\"}", err_name(n));
    return;
  }
  fprintf(json, ",\"variants\":[");
  for (int i = 0; i < n; i++)
    fprintf(json,
            "%s{\"mode\":%u,\"display\":%u,\"codec\":%u,\"longEdge\":%u,"
            "\"servedWidth\":%u,\"servedHeight\":%u}",
            i ? "," : "", x[i].mode, x[i].display, x[i].codec, x[i].long_edge,
            x[i].served_width, x[i].served_height);
  fputc(']', json);
}

/* PIXELS, BATCHES and PASSES as the C decoder reads them. */
static int dump_image_section(const spy_section *s) {
  int rc;
  if (s->id == SPY_SEC_PIXELS) {
    spy_pixels px;
    if ((rc = spy_get_pixels(s, &px)) < 0)
      return rc;
    fprintf(json,
            "\"pixels\":{\"frame\":%llu,\"capturedMs\":%llu,\"width\":%u,"
            "\"height\":%u,\"pixelType\":%u,\"display\":%u,\"key\":%s,"
            "\"part\":%s,\"codec\":%u,\"partOffset\":%u,\"partTotal\":%u,"
            "\"variantMode\":%u,\"variantLongEdge\":%u,\"name\":",
            (unsigned long long)px.frame, (unsigned long long)px.captured_ms,
            px.width, px.height, px.pixel_type, px.display,
            px.key_frame ? "true" : "false", px.part_total ? "true" : "false",
            px.codec, px.part_offset, px.part_total, px.variant_mode,
            px.variant_long_edge);
    jstr(px.name, px.name_len);
    fprintf(json, ",\"data\":[");
    for (uint32_t i = 0; i < px.data_len; i++)
      fprintf(json, "%s%u", i ? "," : "", ((const uint8_t *)px.data)[i]);
    fprintf(json, "]}");
    return 0;
  }
  if (s->id == SPY_SEC_PROBE) {
    uint32_t nq;
    if ((rc = spy_get_probe(s, &nq)) < 0)
      return rc;
    fprintf(json, "\"probe\":[");
    const uint8_t *cur = NULL;
    spy_probe q;
    for (int i = 0; spy_probe_next(s, &cur, &q); i++) {
      fprintf(json,
              "%s{\"frame\":%llu,\"x\":%u,\"y\":%u,\"pixelType\":%u,"
              "\"name\":",
              i ? "," : "", (unsigned long long)q.frame, q.x, q.y,
              q.pixel_type);
      jstr(q.name, q.name_len);
      fprintf(json, ",\"value\":[");
      for (int k = 0; k < 16; k++)
        fprintf(json, "%s%u", k ? "," : "", q.value[k]);
      fprintf(json, "]}");
    }
    fprintf(json, "]");
    return 0;
  }
  spy_list_iter it;
  if (s->id == SPY_SEC_BATCHES) {
    if ((rc = spy_get_batches(s, &it)) < 0)
      return rc;
    fprintf(json, "\"batches\":{\"version\":%u,\"batches\":[", it.version);
    spy_batch_info b;
    for (int i = 0; spy_batches_next(&it, &b); i++) {
      fprintf(json, "%s{\"kind\":", i ? "," : "");
      jstr(b.kind, b.kind_len);
      fprintf(json, ",\"key\":");
      jstr(b.key, b.key_len);
      fprintf(json, ",\"instances\":%u,\"draws\":%u}", b.instances, b.draws);
    }
    fprintf(json, "]}");
    return 0;
  }
  if ((rc = spy_get_passes(s, &it)) < 0)
    return rc;
  fprintf(json, "\"passes\":{\"version\":%u,\"passes\":[", it.version);
  spy_pass_info q;
  for (int i = 0; spy_passes_next(&it, &q); i++) {
    fprintf(json, "%s{\"parent\":%u,\"label\":", i ? "," : "", q.parent);
    jstr(q.label, q.label_len);
    fprintf(json, ",\"draws\":%u,\"triangles\":%u,\"cpuUs\":%u}", q.draws,
            q.triangles, q.cpu_us);
  }
  fprintf(json, "]}");
  return 0;
}

/* What the C decoder makes of one section, as JSON. */
/* BUILD (live build progress): the keys web/wire_trace.js decodes to. */
static int dump_build(const spy_section *s) {
  static spy_build_progress b;
  int rc = spy_get_build(s, &b);
  if (rc < 0)
    return rc;
  fprintf(json,
          "\"build\":{\"build\":%u,\"flags\":%u,\"ended\":%s,"
          "\"startedUs\":%llu,\"endedUs\":%llu,\"modulesDone\":%u,"
          "\"modulesTotal\":%u,\"actions\":%llu,\"hookCalls\":%llu,"
          "\"hookUs\":%llu,\"plugins\":[",
          b.build, b.flags, (b.flags & SPY_BUILD_ENDED) ? "true" : "false",
          (unsigned long long)b.started_us, (unsigned long long)b.ended_us,
          b.modules_done, b.modules_total, (unsigned long long)b.actions,
          (unsigned long long)b.hook_calls, (unsigned long long)b.hook_us);
  for (uint32_t i = 0; i < b.n_plugins; i++) {
    const spy_build_plugin *p = &b.plugins[i];
    fprintf(json, "%s{\"name\":", i ? "," : "");
    jstr(p->name, (uint32_t)strlen(p->name));
    fprintf(json, ",\"p50Us\":%u,\"maxUs\":%llu,\"calls\":[", p->p50_us,
            (unsigned long long)p->max_us);
    for (uint32_t h = 0; h < SPY_BUILD_HOOKS; h++)
      fprintf(json, "%s%llu", h ? "," : "", (unsigned long long)p->calls[h]);
    fprintf(json, "],\"totalUs\":[");
    for (uint32_t h = 0; h < SPY_BUILD_HOOKS; h++)
      fprintf(json, "%s%llu", h ? "," : "", (unsigned long long)p->total_us[h]);
    fprintf(json, "]}");
  }
  fprintf(json, "],\"slow\":[");
  for (uint32_t i = 0; i < b.n_slow; i++) {
    const spy_build_slow *sl = &b.slow[i];
    fprintf(json, "%s{\"hook\":%u,\"plugin\":%u,\"durUs\":%llu,\"module\":",
            i ? "," : "", sl->hook, sl->plugin, (unsigned long long)sl->dur_us);
    jstr(sl->module, (uint32_t)strlen(sl->module));
    fputc('}', json);
  }
  fprintf(json, "]}");
  return 0;
}

static int dump_section(const spy_frame *f, const spy_section *s) {
  int rc = 0;
  if (s->id == SPY_SEC_BUILD)
    return dump_build(s);
  switch (s->id) {
  case SPY_SEC_STATS: {
    spy_stats_batch b;
    if ((rc = spy_get_stats(s, &b)) < 0)
      return rc;
    fprintf(json,
            "\"stats\":{\"startFrame\":%llu,\"count\":%u,\"nCounters\":%u,"
            "\"flags\":%u,\"fps\":[",
            (unsigned long long)b.start_frame, b.count, b.n_counters, b.flags);
    for (uint32_t i = 0; i < b.count; i++)
      fprintf(json, "%s%.17g", i ? "," : "", spy_stats_fps_x10(&b, i) / 10.0);
    fprintf(json, "],\"cpu\":[");
    for (uint32_t i = 0; i < b.count; i++)
      fprintf(json, "%s%.17g", i ? "," : "", spy_stats_cpu_x100(&b, i) / 100.0);
    fprintf(json, "],\"gpu\":[");
    for (uint32_t i = 0; i < b.count; i++) {
      uint16_t g = spy_stats_gpu_x100(&b, i);
      fprintf(json, "%s", i ? "," : "");
      jnum(g == SPY_GPU_NONE ? NAN : g / 100.0);
    }
    fprintf(json, "],\"counters\":[");
    for (uint32_t c = 0; c < b.n_counters; c++) {
      fprintf(json, "%s[", c ? "," : "");
      for (uint32_t i = 0; i < b.count; i++)
        fprintf(json, "%s%u", i ? "," : "", spy_stats_counter(&b, c, i));
      fputc(']', json);
    }
    fprintf(json, "]}");
    return 0;
  }
  case SPY_SEC_STATS_SCHEMA: {
    spy_name_iter it;
    if ((rc = spy_get_name_list(s, &it)) < 0)
      return rc;
    const char *n;
    uint32_t len;
    fprintf(json, "\"schema\":[");
    for (int i = 0; spy_name_next(&it, &n, &len); i++) {
      if (i)
        fputc(',', json);
      jstr(n, len);
    }
    fputc(']', json);
    return 0;
  }
  case SPY_SEC_ENV:
  case SPY_SEC_REGISTRY:
  case SPY_SEC_BUFFERS:
  case SPY_SEC_BUFFER_VARIANTS: {
    spy_delta_iter it;
    if ((rc = spy_get_delta(s, &it)) < 0)
      return rc;
    fprintf(json, "\"%s\":{\"full\":%s,\"count\":%d,\"entries\":[",
            s->id == SPY_SEC_BUFFER_VARIANTS ? "bufferVariants"
                                             : spy_section_name(s->id),
            it.flags & SPY_DELTA_FULL ? "true" : "false", rc);
    spy_delta_entry e;
    for (int i = 0; spy_delta_next(&it, &e); i++) {
      fprintf(json, "%s{\"state\":%u,\"kind\":%u,\"key\":", i ? "," : "",
              e.state, e.value.kind);
      jstr(e.key, e.key_len);
      fprintf(json, ",\"value\":");
      if (e.state == SPY_DELTA_SET)
        jvalue(&e.value);
      else
        fprintf(json, "null");
      if (s->id == SPY_SEC_BUFFERS && e.state == SPY_DELTA_SET)
        dump_buffer_meta(&e.value);
      if (s->id == SPY_SEC_BUFFER_VARIANTS && e.state == SPY_DELTA_SET)
        dump_buffer_variants(&e.value);
      fputc('}', json);
    }
    fprintf(json, "]}");
    return 0;
  }
  case SPY_SEC_HEALTH: {
    uint64_t v[SPY_HEALTH_FIELD_COUNT];
    if ((rc = spy_get_health(s, v, SPY_HEALTH_FIELD_COUNT)) < 0)
      return rc;
    fprintf(json, "\"health\":{\"n\":%d,\"values\":[", rc);
    for (int i = 0; i < SPY_HEALTH_FIELD_COUNT; i++)
      fprintf(json, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
    fprintf(json, "]}");
    return 0;
  }
  case SPY_SEC_PROVIDER: {
    spy_provider_info p;
    if ((rc = spy_get_provider(s, &p)) < 0)
      return rc;
    fprintf(json, "\"provider\":{\"id\":");
    jhex(p.id);
    fprintf(json,
            ",\"startMs\":%llu,\"pid\":%u,\"kind\":%u,\"subscribers\":%u,"
            "\"name\":",
            (unsigned long long)p.start_ms, p.pid, p.kind, p.subscribers);
    jstr(p.name, p.name_len);
    fputc('}', json);
    return 0;
  }
  case SPY_SEC_PEER: {
    spy_peer_info p;
    if ((rc = spy_get_peer(s, &p)) < 0)
      return rc;
    fprintf(json, "\"peer\":{\"id\":");
    jhex(p.id);
    fprintf(json, ",\"features\":%u}", p.features);
    return 0;
  }
  case SPY_SEC_SUBSCRIPTION: {
    spy_subscription sub;
    if ((rc = spy_get_subscription(s, &sub)) < 0)
      return rc;
    fprintf(json, "\"subscription\":{\"consumer\":");
    jhex(sub.consumer);
    fprintf(json, ",\"features\":%u,\"flags\":%u,\"registry\":[", sub.features,
            sub.flags);
    const uint8_t *cur = NULL;
    const char *n;
    uint32_t len;
    for (int i = 0; spy_subscription_next_registry(&sub, &cur, &n, &len); i++) {
      if (i)
        fputc(',', json);
      jstr(n, len);
    }
    fprintf(json, "],\"buffers\":[");
    cur = NULL;
    spy_buffer_request br;
    for (int i = 0; spy_subscription_next_buffer(&sub, &cur, &br); i++) {
      fprintf(json, "%s{\"name\":", i ? "," : "");
      jstr(br.name, br.name_len);
      fprintf(json, ",\"mode\":%u,\"display\":%u,\"longEdge\":%u}", br.mode,
              br.display, br.long_edge);
    }
    fprintf(json, "]}");
    return 0;
  }
  case SPY_SEC_MSGPROF: {
    static spy_msgprof_summary m;
    if ((rc = spy_get_msgprof(s, &m)) < 0)
      return rc;
    fprintf(json,
            "\"msgprof\":{\"nTypes\":%u,\"flags\":%u,\"messages\":%llu,"
            "\"errors\":%llu,\"elapsedNs\":%llu,\"types\":[",
            m.n_types, m.flags, (unsigned long long)m.messages,
            (unsigned long long)m.errors, (unsigned long long)m.elapsed_ns);
    for (uint32_t i = 0; i < m.n_types; i++) {
      const spy_msgprof_type *t = &m.types[i];
      fprintf(json,
              "%s{\"type\":%u,\"count\":%llu,\"errors\":%llu,"
              "\"bytes\":%llu,\"encode\":{\"mean\":%llu,\"p50\":%llu,"
              "\"p99\":%llu,\"max\":%llu},\"post\":{\"mean\":%llu,"
              "\"p50\":%llu,\"p99\":%llu,\"max\":%llu}}",
              i ? "," : "", t->type, (unsigned long long)t->count,
              (unsigned long long)t->errors, (unsigned long long)t->bytes,
              (unsigned long long)t->encode.mean_ns,
              (unsigned long long)t->encode.p50_ns,
              (unsigned long long)t->encode.p99_ns,
              (unsigned long long)t->encode.max_ns,
              (unsigned long long)t->post.mean_ns,
              (unsigned long long)t->post.p50_ns,
              (unsigned long long)t->post.p99_ns,
              (unsigned long long)t->post.max_ns);
    }
    fprintf(json, "]}");
    return 0;
  }
  case SPY_SEC_CLOCK: {
    spy_clock_msg m;
    if ((rc = spy_get_clock(s, &m)) < 0)
      return rc;
    fprintf(json, "\"clock\":{\"op\":%u,\"rounds\":%u,\"provider\":", m.op,
            m.rounds);
    jhex(m.provider);
    fprintf(json, ",\"consumer\":");
    jhex(m.consumer);
    fprintf(json, ",\"offsetNs\":%lld,\"rttNs\":%lld}", (long long)m.offset_ns,
            (long long)m.rtt_ns);
    return 0;
  }
  case SPY_SEC_ZONES: {
    spy_zones_iter it;
    if ((rc = spy_get_zones(s, &it)) < 0)
      return rc;
    fprintf(json, "\"zones\":{\"flags\":%u,\"baseNs\":%llu,\"locs\":[",
            it.flags, (unsigned long long)it.base_ns);
    spy_zone_loc_info l;
    for (int i = 0; spy_zones_next_loc(&it, &l); i++) {
      fprintf(json,
              "%s{\"id\":%u,\"line\":%u,\"color\":%u,\"name\":", i ? "," : "",
              l.id, l.line, l.color);
      jstr(l.name, l.name_len);
      fprintf(json, ",\"function\":");
      jstr(l.function, l.function_len);
      fprintf(json, ",\"file\":");
      jstr(l.file, l.file_len);
      fputc('}', json);
    }
    fprintf(json, "],\"threads\":[");
    spy_zone_thread_info t;
    spy_zone_event_iter ev;
    for (int i = 0; spy_zones_next_thread(&it, &t, &ev); i++) {
      fprintf(json, "%s{\"thread\":%u,\"osTid\":%u,\"flags\":%u,\"name\":",
              i ? "," : "", t.thread, t.os_tid, t.flags);
      jstr(t.name, t.name_len);
      fprintf(json, ",\"dropped\":%llu,\"ev\":[",
              (unsigned long long)t.dropped);
      spy_zone_event e;
      for (int k = 0; spy_zone_event_next(&ev, &e); k++)
        fprintf(json, "%s%u,%llu,%llu", k ? "," : "", e.kind,
                (unsigned long long)e.t_ns, (unsigned long long)e.value);
      fprintf(json, "]}");
    }
    fprintf(json, "]}");
    return 0;
  }
  case SPY_SEC_PIXELS:
  case SPY_SEC_PROBE:
  case SPY_SEC_BATCHES:
  case SPY_SEC_PASSES: return dump_image_section(s);
  default: (void)f; return 1; /* not ours: listed as unknown */
  }
}

static const char *err_name(int rc) {
  switch (rc) {
  case SPY_ETRUNCATED: return "ETRUNCATED";
  case SPY_ETOOBIG: return "ETOOBIG";
  case SPY_EBADTYPE: return "EBADTYPE";
  case SPY_EBADSECTION: return "EBADSECTION";
  case SPY_EBADVERSION: return "EBADVERSION";
  case SPY_EBADVALUE: return "EBADVALUE";
  case SPY_EBADHEADER: return "EBADHEADER";
  case SPY_ENOSECTION: return "ENOSECTION";
  default: return "other";
  }
}

/* Writes DIR/NAME.bin (n bytes) and DIR/NAME.json (the C decoding). */
static int emit(const char *dir, const char *name, const uint8_t *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.bin", dir, name);
  FILE *b = fopen(path, "wb");
  if (!b || fwrite(p, 1, n, b) != n) {
    perror(path);
    return -1;
  }
  fclose(b);
  snprintf(path, sizeof path, "%s/%s.json", dir, name);
  json = fopen(path, "w");
  if (!json) {
    perror(path);
    return -1;
  }
  spy_frame f;
  size_t off = 0;
  int rc = spy_frame_decode(p, n, &f, &off);
  if (rc < 0) {
    fprintf(json, "{\"error\":\"%s\",\"offset\":%zu}\n", err_name(rc), off);
    fclose(json);
    return 0;
  }
  fprintf(json,
          "{\"type\":%u,\"typeName\":\"%s\",\"ts\":%llu,\"version\":%u,"
          "\"flags\":%u,\"seq\":%u,\"len\":%u,\"sections\":[",
          f.type, spy_msg_type_name(f.type), (unsigned long long)f.ts_ms,
          f.version, f.flags, f.seq, f.len);
  size_t cur = 0;
  spy_section s;
  for (int i = 0; spy_frame_next_section(&f, &cur, &s); i++)
    fprintf(json, "%s{\"id\":%u,\"len\":%u}", i ? "," : "", s.id, s.len);
  fprintf(json, "],\"decoded\":{");
  cur = 0;
  int first = 1, sec_err = 0;
  long pos = ftell(json);
  while (spy_frame_next_section(&f, &cur, &s)) {
    if (!first)
      fputc(',', json);
    long before = ftell(json);
    rc = dump_section(&f, &s);
    if (rc == 1) { /* unknown: nothing written, undo the comma */
      fseek(json, first ? before : before - 1, SEEK_SET);
      continue;
    }
    if (rc < 0) {
      sec_err = rc;
      break;
    }
    first = 0;
  }
  if (sec_err) { /* the whole frame is reported as the section's error */
    fseek(json, pos, SEEK_SET);
    fprintf(json, "},\"sectionError\":{\"id\":%u,\"error\":\"%s\"}}\n", s.id,
            err_name(sec_err));
  } else {
    fprintf(json, "}}\n");
  }
  /* A rewind leaves stale bytes after the end: cut the file there. */
  long end = ftell(json);
  fflush(json);
  if (ftruncate(fileno(json), end) != 0)
    perror("ftruncate");
  fclose(json);
  return 0;
}

/* ZONES golden frames (web/wire_zones.js): a full section, a delta one with
 * two threads, and malformed ones refused as spy_get_zones refuses them. */
static int golden_zones(const char *dir) {
  spy_frame_writer w;
  spy_zones_writer z;
  const uint64_t base = 123456789012345ull;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 13, 50,
                  SPY_FRAME_CHECKPOINT);
  spy_zones_begin(&z, &w, SPY_ZONES_FULL, base);
  spy_zone_loc_info l1 = {.id = 16,
                          .line = 42,
                          .color = 0x3080ff,
                          .name = "update",
                          .name_len = 6,
                          .function = "frame_update",
                          .function_len = 12,
                          .file = "demo/sim.c",
                          .file_len = 10};
  spy_zone_loc_info l2 = {.id = 17,
                          .line = 7,
                          .name = "substep ünï",
                          .name_len = 13,
                          .function = "f",
                          .function_len = 1,
                          .file = "a.c",
                          .file_len = 3};
  spy_zone_loc_info l3 = {.id = 65535,
                          .line = 4000000000u,
                          .name = "x",
                          .name_len = 1,
                          .function = "",
                          .function_len = 0,
                          .file = "",
                          .file_len = 0};
  spy_zones_put_loc(&z, &l1);
  spy_zones_put_loc(&z, &l2);
  spy_zones_put_loc(&z, &l3);
  spy_zone_thread_info t = {.thread = 1,
                            .os_tid = 4242,
                            .flags =
                                SPY_ZONES_THREAD_NAMED | SPY_ZONES_THREAD_RESET,
                            .name = "frame",
                            .name_len = 5,
                            .dropped = 3};
  spy_zones_thread_begin(&z, &t);
  spy_zones_put_event(&z, SPY_ZONE_EV_FRAME, base + 10, 9007199254740000ull);
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, base + 10, 16);
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, base + 300, 17);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, base + 5000300, 0);
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, base + 5000301, 65535);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, base + 9000000000ull, 0);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, base + 9000000001ull, 0);
  spy_zones_thread_end(&z);
  spy_zone_thread_info t2 = {
      .thread = 2, .os_tid = 4243, .flags = 0, .dropped = 0};
  spy_zones_thread_begin(&z, &t2); /* no events at all */
  spy_zones_end(&z);
  int n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "zones_full", buf, (size_t)n) < 0)
    return 1;
  size_t full_len = (size_t)n;
  static uint8_t keep[4096];
  memcpy(keep, buf, full_len);
  /* A delta section: no locations, two threads, a gone one. */
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 14, 51, 0);
  spy_zones_begin(&z, &w, 0, base + 50);
  spy_zone_thread_info t3 = {.thread = 7,
                             .os_tid = 1,
                             .flags =
                                 SPY_ZONES_THREAD_GONE | SPY_ZONES_THREAD_NAMED,
                             .name = "device",
                             .name_len = 6,
                             .dropped = 9007199254740991ull};
  spy_zones_thread_begin(&z, &t3);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, base + 49, 0); /* clamped */
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, base + 60, 300);
  spy_zones_thread_end(&z);
  spy_zones_thread_begin(&z, &t);
  spy_zones_put_event(&z, SPY_ZONE_EV_FRAME, base + 1000000, 5);
  spy_zones_end(&z);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "zones_delta", buf, (size_t)n) < 0)
    return 1;
  /* Malformed: find the section in the full frame (after the 32-byte
   * frame header: id, len, then the section). */
  const size_t sec = 40;
  struct {
    const char *name;
    size_t at;
    uint32_t v;
    int width;
  } bad[] = {
      {"bad_zones_flags", sec, 2, 2},
      {"bad_zones_reserved", sec + 12, 1, 4},
      {"bad_zones_count", sec + 8, 1000, 4},
      {"bad_zones_loc_id", sec + 24, 15, 4},
      {"bad_zones_file", sec + 24 + 14, 2000, 2},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memcpy(buf, keep, full_len);
    if (bad[i].width == 2)
      spy_wr16(buf + bad[i].at, (uint16_t)bad[i].v);
    else
      spy_wr32(buf + bad[i].at, bad[i].v);
    if (emit(dir, bad[i].name, buf, full_len) < 0)
      return 1;
  }
  /* Event-level faults, in a one-thread section built by hand. */
  static const struct {
    const char *name;
    uint8_t ev[40];
    uint32_t n;
  } evs[] = {
      {"bad_zones_kind", {0x03}, 1},           /* kind 3 */
      {"bad_zones_begin_id", {0x01, 0x05}, 2}, /* location id 5 */
      {"bad_zones_varint", {0x81}, 1},         /* cut varint */
      {"bad_zones_long",
       {0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
       10},                  /* more than 64 bits */
      {"bad_zones_overflow", /* four deltas of 2^62 - 1: past 2^64 */
       {0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
       40},
      {"zones_events_ok", {0x04, 0x11, 0x10, 0x00, 0x0a, 0x07}, 6},
  };
  for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
    spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 15, 52, 0);
    spy_zones_begin(&z, &w, 0, base);
    spy_zone_thread_info t4 = {.thread = 3, .os_tid = 5};
    spy_zones_thread_begin(&z, &t4);
    spy_frame_put(&w, evs[i].ev, evs[i].n);
    spy_zones_end(&z);
    n = spy_frame_finish(&w);
    if (n < 0 || emit(dir, evs[i].name, buf, (size_t)n) < 0)
      return 1;
  }
  return 0;
}

/* Image and draw-list frames (PIXELS, BUFFERS metadata, BATCHES, PASSES,
 * a subscription with display modes), good and malformed, in DIR/img
 * (test/web_pixels.test.mjs; the codec test reads DIR only). */
static int golden_images(const char *top) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/img", top);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    perror(dir);
    return -1;
  }
  static uint8_t big[1 << 12];
  spy_frame_writer w;
  int n;
  uint8_t px[2 * 3 * 4];
  for (unsigned i = 0; i < sizeof px; i++)
    px[i] = (uint8_t)(i * 37 + 5);
  /* A raw 2x3 image, whole. */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_BUFFER_RAW, 100, 7, 0);
  spy_pixels p = {.frame = 9007199254740000ull,
                  .captured_ms = 1764585600123ull,
                  .width = 2,
                  .height = 3,
                  .pixel_type = SPY_PIXEL_RGBA16F,
                  .display = 4,
                  .key_frame = 1,
                  .codec = SPY_CODEC_RGBA8,
                  .name = "normals ü",
                  .data = px,
                  .data_len = sizeof px};
  spy_put_pixels(&w, &p);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "raw_whole", big, (size_t)n) < 0)
    return -1;
  /* The same image's second part (bytes 8..24 of 24). */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_BUFFER_RAW, 101, 8, 0);
  spy_pixels q = p;
  q.data = px + 8;
  q.data_len = 16;
  q.part_offset = 8;
  q.part_total = sizeof px;
  spy_put_pixels(&w, &q);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "raw_part", big, (size_t)n) < 0)
    return -1;
  uint8_t bad[1 << 12];
  size_t bn = (size_t)n;
  /* offset + length past the total */
  memcpy(bad, big, bn);
  spy_wr32(bad + 32 + 8 + 36 + 12, 9);
  if (emit(dir, "bad_part_range", bad, bn) < 0)
    return -1;
  /* a total over 64 MiB */
  memcpy(bad, big, bn);
  spy_wr32(bad + 32 + 8 + 36 + 12 + 4, SPY_PIXELS_TOTAL_MAX + 1);
  if (emit(dir, "bad_part_total", bad, bn) < 0)
    return -1;
  /* A VP9 chunk, a delta frame. */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_BUFFER_CHUNK, 102, 9, 0);
  uint8_t vp9[5] = {0x82, 0x49, 0x83, 0x42, 0x00};
  spy_pixels c = {.frame = 77,
                  .captured_ms = 5,
                  .width = 1280,
                  .height = 720,
                  .pixel_type = SPY_PIXEL_RGBA8,
                  .display = 1,
                  .codec = SPY_CODEC_VP9,
                  .name = "framebuffer",
                  .data = vp9,
                  .data_len = sizeof vp9};
  spy_put_pixels(&w, &c);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "vp9_chunk", big, (size_t)n) < 0)
    return -1;
  bn = (size_t)n;
  memcpy(bad, big, bn);
  bad[32 + 8 + 27] = 0x09; /* an unknown flag */
  if (emit(dir, "bad_pixels_flags", bad, bn) < 0)
    return -1;
  memcpy(bad, big, bn);
  spy_wr16(bad + 32 + 8 + 28, 2); /* an unknown codec */
  if (emit(dir, "bad_pixels_codec", bad, bn) < 0)
    return -1;
  memcpy(bad, big, bn);
  spy_wr32(bad + 32 + 8 + 16, 16385); /* too wide */
  if (emit(dir, "bad_pixels_width", bad, bn) < 0)
    return -1;
  memcpy(bad, big, bn);
  spy_wr32(bad + 32 + 8 + 32, 6); /* data_len past the section */
  if (emit(dir, "bad_pixels_len", bad, bn) < 0)
    return -1;
  /* A variant: a mono thumbnail at long edge 64, whole; a stream's
   * second part at 256 (the variant bytes come before the part header). */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_BUFFER_RAW, 110, 12, 0);
  spy_pixels va = p;
  va.display = 3;
  va.variant_mode = SPY_BUFFER_THUMBNAIL;
  va.variant_long_edge = 64;
  spy_put_pixels(&w, &va);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "raw_variant", big, (size_t)n) < 0)
    return -1;
  bn = (size_t)n;
  const size_t vo = 32 + 8 + 36 + 12; /* "normals ü": 10 bytes, pad 12 */
  memcpy(bad, big, bn);
  bad[vo] = 3; /* a mode that is neither thumbnail nor stream */
  if (emit(dir, "bad_variant_mode", bad, bn) < 0)
    return -1;
  memcpy(bad, big, bn);
  bad[vo + 1] = 1; /* the reserved byte */
  if (emit(dir, "bad_variant_reserved", bad, bn) < 0)
    return -1;
  memcpy(bad, big, bn);
  bad[32 + 8 + 27] = SPY_PIXELS_KEY; /* the flag gone, the bytes still there */
  if (emit(dir, "bad_variant_flag", bad, bn) < 0)
    return -1;
  spy_frame_start(&w, big, sizeof big, SPY_MSG_BUFFER_CHUNK, 111, 13, 0);
  spy_pixels vb = c;
  vb.key_frame = 1;
  vb.data = vp9 + 2;
  vb.data_len = 3;
  vb.part_offset = 2;
  vb.part_total = 5;
  vb.variant_mode = SPY_BUFFER_STREAM;
  vb.variant_long_edge = 256;
  spy_put_pixels(&w, &vb);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "vp9_variant_part", big, (size_t)n) < 0)
    return -1;
  /* PROBE answers in a data frame: an R32F value and an RGBA16F one. */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_DATA, 112, 14, 0);
  spy_probe pq[2] = {
      {.frame = 4242, .x = 7, .y = 5, .pixel_type = 3, .name = "depthf"},
      {.frame = 4243, .x = 16383, .y = 0, .pixel_type = 5, .name = "hdr"}};
  float fv = 502.25f;
  memcpy(pq[0].value, &fv, 4);
  for (int k = 0; k < 4; k++) {
    uint16_t hv = spy_float_to_half(0.5f * (float)k - 0.25f);
    pq[1].value[2 * k] = (uint8_t)hv;
    pq[1].value[2 * k + 1] = (uint8_t)(hv >> 8);
  }
  spy_put_probe(&w, pq, 2);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "probe", big, (size_t)n) < 0)
    return -1;
  bn = (size_t)n;
  memcpy(bad, big, bn);
  spy_wr32(bad + 32 + 8 + 8, 16384); /* x outside any image */
  if (emit(dir, "bad_probe_x", bad, bn) < 0)
    return -1;
  memcpy(bad, big, bn);
  spy_wr32(bad + 32 + 8, 3); /* three entries said, two there */
  if (emit(dir, "bad_probe_count", bad, bn) < 0)
    return -1;
  /* A raw frame whose size does not match width * height * 4. */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_BUFFER_RAW, 103, 10, 0);
  c.codec = SPY_CODEC_RGBA8;
  c.width = 1;
  c.height = 1;
  spy_put_pixels(&w, &c);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "bad_raw_size", big, (size_t)n) < 0)
    return -1;
  /* BUFFERS metadata, BATCHES and PASSES in one data frame. */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_DATA, 104, 11,
                  SPY_FRAME_SNAPSHOT);
  spy_delta_writer d;
  spy_delta_begin(&d, &w, SPY_SEC_BUFFERS, SPY_DELTA_FULL);
  spy_buffer_meta m = {.pixel_type = SPY_PIXEL_R32F,
                       .mode = SPY_BUFFER_STREAM,
                       .display = 2,
                       .width = 1280,
                       .height = 720,
                       .served_width = 640,
                       .served_height = 360,
                       .codec = SPY_CODEC_VP9,
                       .max_fps = 4,
                       .last_frame = 9007199254740991ull,
                       .captured = 12345,
                       .dropped = 3};
  uint8_t blob[SPY_BUFFER_META_BYTES];
  spy_buffer_meta_encode(blob, &m);
  spy_value v = {.kind = SPY_VAL_BLOB, .v.s = {(const char *)blob, 48}};
  spy_delta_put(&d, SPY_DELTA_SET, "depth", 5, &v);
  spy_buffer_meta m2 = {.pixel_type = SPY_PIXEL_RGBA8, .width = 1, .height = 1};
  spy_buffer_meta_encode(blob, &m2);
  spy_delta_put(&d, SPY_DELTA_SET, "framebuffer", 11, &v);
  spy_delta_end(&d);
  spy_batch_info b[3] = {
      {.kind = "mesh", .key = "rock.mat", .instances = 120, .draws = 3},
      {.kind = "sprite", .key = "", .instances = 4000000000u, .draws = 1},
      {.kind = "mesh", .key = "tree ü.mat", .instances = 7, .draws = 2}};
  spy_put_batches(&w, 42, b, 3);
  spy_pass_info ps[3] = {
      {.label = "frame",
       .parent = SPY_PASS_ROOT,
       .draws = 5,
       .triangles = 9,
       .cpu_us = 16667},
      {.label = "shadow",
       .parent = 0,
       .draws = 3,
       .triangles = 48000,
       .cpu_us = 1200},
      {.label = "ui", .parent = SPY_PASS_ROOT, .draws = 2, .cpu_us = 0}};
  spy_put_passes(&w, 7, ps, 3);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "drawlist", big, (size_t)n) < 0)
    return -1;
  /* Every variant of a buffer beside its metadata; a buffer with none. */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_DATA, 107, 14,
                  SPY_FRAME_SNAPSHOT);
  spy_delta_begin(&d, &w, SPY_SEC_BUFFERS, SPY_DELTA_FULL);
  spy_buffer_meta_encode(blob, &m);
  spy_delta_put(&d, SPY_DELTA_SET, "depth", 5, &v);
  spy_delta_end(&d);
  spy_buffer_variant bv[3] = {{.mode = SPY_BUFFER_STREAM,
                               .display = 2,
                               .codec = SPY_CODEC_VP9,
                               .long_edge = 640,
                               .served_width = 640,
                               .served_height = 360},
                              {.mode = SPY_BUFFER_THUMBNAIL,
                               .display = 3,
                               .long_edge = 256,
                               .served_width = 256,
                               .served_height = 144},
                              {.mode = SPY_BUFFER_STREAM,
                               .display = 4,
                               .codec = SPY_CODEC_RGBA8,
                               .served_width = 1280,
                               .served_height = 720}};
  uint8_t vblob[3 * SPY_BUFFER_VARIANT_BYTES];
  spy_buffer_variants_encode(vblob, bv, 3);
  spy_value vv = {.kind = SPY_VAL_BLOB,
                  .v.s = {(const char *)vblob, sizeof vblob}};
  spy_delta_begin(&d, &w, SPY_SEC_BUFFER_VARIANTS, SPY_DELTA_FULL);
  spy_delta_put(&d, SPY_DELTA_SET, "depth", 5, &vv);
  vv.v.s.len = 0;
  spy_delta_put(&d, SPY_DELTA_SET, "framebuffer", 11, &vv);
  spy_delta_end(&d);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "buffer_variants", big, (size_t)n) < 0)
    return -1;
  /* A variant with mode 0: the entry decodes, its variants are refused. */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_DATA, 108, 15, 0);
  spy_delta_begin(&d, &w, SPY_SEC_BUFFER_VARIANTS, 0);
  vblob[SPY_BUFFER_VARIANT_BYTES] = 0;
  vv.v.s.len = sizeof vblob;
  spy_delta_put(&d, SPY_DELTA_SET, "depth", 5, &vv);
  spy_delta_end(&d);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "bad_variants_mode", big, (size_t)n) < 0)
    return -1;
  /* Metadata with an unknown mode: the entry decodes, its meta is refused. */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_DATA, 105, 12, 0);
  spy_delta_begin(&d, &w, SPY_SEC_BUFFERS, 0);
  spy_buffer_meta_encode(blob, &m);
  blob[2] = 3;
  spy_delta_put(&d, SPY_DELTA_SET, "depth", 5, &v);
  spy_delta_end(&d);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "bad_meta_mode", big, (size_t)n) < 0)
    return -1;
  /* A pass whose parent comes after it; a batch count past the section. */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_DATA, 106, 13, 0);
  spy_put_passes(&w, 1, ps, 2);
  n = spy_frame_finish(&w);
  bn = (size_t)n;
  memcpy(bad, big, bn);
  spy_wr16(bad + 32 + 8 + 8, 1); /* pass 0's parent = 1 */
  if (emit(dir, "bad_pass_parent", bad, bn) < 0)
    return -1;
  memcpy(bad, big, bn);
  spy_wr32(bad + 32, SPY_SEC_BATCHES); /* the records are not batches */
  spy_wr32(bad + 32 + 8 + 4, 5);
  if (emit(dir, "bad_batches", bad, bn) < 0)
    return -1;
  /* A subscription with display modes; one with display 6 (refused). */
  spy_frame_start(&w, big, sizeof big, SPY_MSG_SUBSCRIBE, 107, 0, 0);
  spy_buffer_request br[3] = {
      {.name = "framebuffer", .mode = SPY_BUFFER_STREAM, .display = 1},
      {.name = "depth",
       .mode = SPY_BUFFER_THUMBNAIL,
       .display = 4,
       .long_edge = 128},
      {.name = "normals",
       .mode = SPY_BUFFER_THUMBNAIL,
       .display = 5,
       .long_edge = 1280}};
  spy_subscription sub = {.consumer = 0x0123456789abcdefull,
                          .features = SPY_FEAT_BUFFERS | SPY_FEAT_BATCHES |
                                      SPY_FEAT_PASSES,
                          .flags = SPY_SUB_REGISTRY_FILTER,
                          .n_buffers = 3,
                          .buffers = br};
  spy_put_subscription(&w, &sub);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "subscribe_buffers", big, (size_t)n) < 0)
    return -1;
  bn = (size_t)n;
  memcpy(bad, big, bn);
  bad[32 + 8 + 20 + 2 + 11 + 1] = 6; /* framebuffer's display */
  if (emit(dir, "bad_sub_display", bad, bn) < 0)
    return -1;
  return 0;
}

static int golden(const char *dir) {
  spy_frame_writer w;
  int n;
  /* 1. A data frame with everything a provider sends. */
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 1764585600123ull, 41,
                  SPY_FRAME_SNAPSHOT | SPY_FRAME_CHECKPOINT);
  int16_t fps[5] = {600, 599, -5, 32767, 0};
  uint16_t cpu[5] = {1667, 12, 0, 65535, 100};
  uint16_t gpu[5] = {800, SPY_GPU_NONE, 0, 65534, 3};
  uint32_t ctr[3][5] = {
      {1, 2, 3, 4, 5}, {0, 4294967295u, 7, 8, 9}, {100, 200, 300, 400, 500}};
  spy_stats_batch sb = {.start_frame = 9007199254740000ull,
                        .count = 5,
                        .n_counters = 3,
                        .flags = 0,
                        .fps_x10 = fps,
                        .cpu_x100 = cpu,
                        .gpu_x100 = gpu,
                        .counters = ctr};
  spy_put_stats(&w, &sb);
  const char *names[3] = {"draws", "passes", "particles ünicode"};
  spy_put_name_list(&w, SPY_SEC_STATS_SCHEMA, names, 3);
  spy_delta_writer d;
  spy_delta_begin(&d, &w, SPY_SEC_REGISTRY, SPY_DELTA_FULL);
  spy_value v = {.kind = SPY_VAL_FLOAT, .v.f = {-1.5e-300}};
  spy_delta_put(&d, SPY_DELTA_SET, "f", 1, &v);
  v = (spy_value){.kind = SPY_VAL_UINT, .v.u = 9007199254740991ull};
  spy_delta_put(&d, SPY_DELTA_SET, "u.max53", 7, &v);
  v = (spy_value){.kind = SPY_VAL_INT, .v.i = -1234567890123ll};
  spy_delta_put(&d, SPY_DELTA_SET, "int", 3, &v);
  v = (spy_value){.kind = SPY_VAL_FLOAT2, .v.f = {1, 2}};
  spy_delta_put(&d, SPY_DELTA_SET, "v2", 2, &v);
  v = (spy_value){.kind = SPY_VAL_FLOAT3, .v.f = {0.1, -0.2, 3e10}};
  spy_delta_put(&d, SPY_DELTA_SET, "camera.position", 15, &v);
  v = (spy_value){.kind = SPY_VAL_FLOAT4, .v.f = {1, 0, 0, 1}};
  spy_delta_put(&d, SPY_DELTA_SET, "v4", 2, &v);
  v = (spy_value){.kind = SPY_VAL_BITS, .v.u = 0x5a5aull};
  spy_delta_put(&d, SPY_DELTA_SET, "bits", 4, &v);
  v = (spy_value){.kind = SPY_VAL_BOOL, .v.b = 1};
  spy_delta_put(&d, SPY_DELTA_SET, "flag", 4, &v);
  v = (spy_value){.kind = SPY_VAL_STRING, .v.s = {"héllo \"q\"", 10}};
  spy_delta_put(&d, SPY_DELTA_SET, "str", 3, &v);
  v = (spy_value){.kind = SPY_VAL_BLOB, .v.s = {"\x00\x01\xff", 3}};
  spy_delta_put(&d, SPY_DELTA_SET, "blob", 4, &v);
  v = (spy_value){.kind = SPY_VAL_FLOAT};
  spy_delta_put(&d, SPY_DELTA_META, "hidden", 6, &v);
  spy_delta_put(&d, SPY_DELTA_CLEARED, "gone", 4, NULL);
  spy_delta_end(&d);
  spy_delta_begin(&d, &w, SPY_SEC_ENV, 0);
  v = (spy_value){.kind = SPY_VAL_STRING, .v.s = {"1920x1080", 9}};
  spy_delta_put(&d, SPY_DELTA_SET, "resolution", 10, &v);
  spy_delta_end(&d);
  uint64_t health[SPY_HEALTH_FIELD_COUNT] = {10, 20000, 1, 2, 3, 4, 5, 6, 7};
  spy_put_health(&w, health, SPY_HEALTH_FIELD_COUNT);
  static spy_msgprof_summary m;
  m.messages = 100;
  m.errors = 1;
  m.elapsed_ns = 2500000000ull;
  m.n_types = 2;
  m.types[0] = (spy_msgprof_type){.type = 1,
                                  .count = 90,
                                  .errors = 1,
                                  .bytes = 123456,
                                  .encode = {1000, 900, 5000, 9000},
                                  .post = {200, 150, 900, 1200}};
  m.types[1] = (spy_msgprof_type){.type = 3, .count = 10, .bytes = 400};
  spy_put_msgprof(&w, &m);
  spy_frame_section_begin(&w, 200); /* unknown: skipped by every reader */
  spy_frame_put_u32(&w, 0xdeadbeef);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "data_full", buf, (size_t)n) < 0)
    return 1;
  /* 2. A small delta frame without stats. */
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 5, 42, 0);
  spy_delta_begin(&d, &w, SPY_SEC_REGISTRY, 0);
  v = (spy_value){.kind = SPY_VAL_FLOAT, .v.f = {2.25}};
  spy_delta_put(&d, SPY_DELTA_SET, "f", 1, &v);
  spy_delta_end(&d);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "data_delta", buf, (size_t)n) < 0)
    return 1;
  /* 3. Control messages. */
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_PROVIDER_ANNOUNCE, 7, 1, 0);
  spy_provider_info pi = {.id = 0xfedcba9876543210ull,
                          .start_ms = 1764585600000ull,
                          .pid = 4242,
                          .kind = SPY_PROVIDER_SYSTEM,
                          .subscribers = 3,
                          .name = "my-game"};
  spy_put_provider(&w, &pi);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "announce", buf, (size_t)n) < 0)
    return 1;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_SUBSCRIBE, 8, 0, 0);
  const char *reg[2] = {"camera.position", "scene.time"};
  spy_buffer_request br[1] = {
      {.name = "color", .mode = SPY_BUFFER_THUMBNAIL, .long_edge = 128}};
  spy_subscription sub = {.consumer = 0x0123456789abcdefull,
                          .features = SPY_FEAT_STATS | SPY_FEAT_REGISTRY,
                          .flags = SPY_SUB_REGISTRY_FILTER,
                          .n_registry = 2,
                          .n_buffers = 1,
                          .registry = reg,
                          .buffers = br};
  spy_put_subscription(&w, &sub);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "subscribe", buf, (size_t)n) < 0)
    return 1;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_ACK, 9, 0, 0);
  spy_put_peer(&w, 0x8000000000000001ull, 0x104e);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "ack", buf, (size_t)n) < 0)
    return 1;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_CLOCK, 10, 77, 0);
  spy_clock_msg cm = {.op = SPY_CLOCK_OP_RESULT,
                      .rounds = 5,
                      .provider = 1,
                      .consumer = 2,
                      .offset_ns = -123456789,
                      .rtt_ns = 54321};
  spy_put_clock(&w, &cm);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "clock", buf, (size_t)n) < 0)
    return 1;
  /* 4. Malformed frames: the JS decoder must refuse them as C does. */
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_PING, 11, 1, 0);
  n = spy_frame_finish(&w);
  uint8_t bad[64];
  memcpy(bad, buf, (size_t)n);
  spy_wr32(bad + 4, 99); /* unknown type */
  if (emit(dir, "bad_type", bad, (size_t)n) < 0)
    return 1;
  memcpy(bad, buf, (size_t)n);
  spy_wr16(bad + 24, 2); /* version */
  if (emit(dir, "bad_version", bad, (size_t)n) < 0)
    return 1;
  memcpy(bad, buf, (size_t)n);
  spy_wr32(bad, 30); /* not a multiple of 4, < 32 */
  if (emit(dir, "bad_header", bad, (size_t)n) < 0)
    return 1;
  if (emit(dir, "truncated", buf, (size_t)n - 4) < 0)
    return 1;
  memcpy(bad, buf, (size_t)n);
  spy_wr32(bad, SPY_FRAME_MAX + 4);
  if (emit(dir, "too_big", bad, 16) < 0)
    return 1;
  /* A section that runs past the frame. */
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 12, 2, 0);
  spy_put_health(&w, health, 2);
  n = spy_frame_finish(&w);
  memcpy(bad, buf, (size_t)n);
  spy_wr32(bad + 36, 400);
  if (emit(dir, "bad_section", bad, (size_t)n) < 0)
    return 1;
  /* A stats section whose length does not match its counts. */
  memcpy(bad, buf, (size_t)n);
  spy_wr32(bad + 32, SPY_SEC_STATS);
  if (emit(dir, "bad_stats", bad, (size_t)n) < 0)
    return 1;
  if (golden_zones(dir))
    return 1;
  if (golden_images(dir) < 0)
    return 1;
  /* Live build progress (BUILD): a running build with plugins and slow
   * calls, and one whose slow call names a plugin that is not there. */
  static spy_build_progress bp;
  memset(&bp, 0, sizeof bp);
  bp.build = 3;
  bp.started_us = 1796000000123456ull;
  bp.modules_done = 41;
  bp.modules_total = 120;
  bp.actions = 700;
  bp.hook_calls = 250;
  bp.hook_us = 98765;
  bp.n_plugins = 2;
  strcpy(bp.plugins[0].name, "demo:resolver");
  bp.plugins[0].calls[1] = 41;
  bp.plugins[0].total_us[1] = 820;
  bp.plugins[0].calls[2] = 60;
  bp.plugins[0].total_us[2] = 61;
  bp.plugins[0].p50_us = 5;
  bp.plugins[0].max_us = 90;
  strcpy(bp.plugins[1].name, "demo:banner \xc3\xa9");
  bp.plugins[1].calls[0] = 149;
  bp.plugins[1].total_us[0] = 97884;
  bp.plugins[1].p50_us = 640;
  bp.plugins[1].max_us = 4000;
  bp.n_slow = 2;
  bp.slow[0] = (spy_build_slow){.hook = 0, .plugin = 1, .dur_us = 4000};
  strcpy(bp.slow[0].module, "d1/f7.h");
  bp.slow[1] = (spy_build_slow){.hook = 1, .plugin = 0, .dur_us = 90};
  strcpy(bp.slow[1].module, "d0/f0.h");
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 13, 3, 0);
  spy_put_build(&w, &bp);
  n = spy_frame_finish(&w);
  if (n < 0 || emit(dir, "build_progress", buf, (size_t)n) < 0)
    return 1;
  static uint8_t badb[1024];
  memcpy(badb, buf, (size_t)n);
  /* the last slow record ("d0/f0.h") starts 16 + 7 bytes before the
   * section's end: its plugin becomes 9 of 2 */
  spy_wr16(badb + 40 + spy_rd32(badb + 36) - (16 + 7) + 2, 9);
  if (emit(dir, "bad_build", badb, (size_t)n) < 0)
    return 1;
  printf("golden frames in %s\n", dir);
  return 0;
}

/* ---- deterministic provider -----------------------------------------------
 */

static volatile sig_atomic_t stop;
static void on_sig(int s) {
  (void)s;
  stop = 1;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int provider(const char *name, double seconds) {
  spy_provider *p;
  spy_provider_desc pd = {.name = name};
  int rc = spy_provider_create(&p, &pd);
  if (rc < 0) {
    fprintf(stderr, "web_helper: provider: %s\n", spy_strerror(rc));
    return 1;
  }
  spy_env_set_adapter(p, "web_helper deterministic adapter");
  spy_env_set_resolution(p, 640, 360, 1.0);
  spy_env_set_debug_mode(p, "wireframe");
  printf("provider %016llx %s\n", (unsigned long long)spy_provider_id(p), name);
  fflush(stdout);
  signal(SIGINT, on_sig);
  signal(SIGTERM, on_sig);
  double end = mono_s() + seconds;
  for (uint64_t frame = 0; !stop && (seconds <= 0 || mono_s() < end); frame++) {
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, (uint32_t)(frame % 100));
    spy_counter_set(p, SPY_COUNTER_PARTICLES, 1000);
    spy_value_set_f64(p, "det.frame", (double)frame);
    spy_value_set_bool(p, "det.parity", frame & 1);
    spy_value_set_i64(p, "det.neg", -(int64_t)frame);
    double vec[3] = {(double)frame, (double)frame / 2, -1};
    spy_value_set_vec(p, "det.vec", vec, 3);
    spy_frame_end(p);
    usleep(15000);
  }
  spy_provider_destroy(p);
  return 0;
}

/* ---- a provider of known images -------------------------------------------
 * "test": RGBA8 64x48, pixel (x, y) = (4x, 5y, xy mod 256, 255 − x), the
 * same every frame; "moving": RGBA8 320x240, a gradient that scrolls (a
 * VP9 stream with something to encode); "depthf": R32F 40x30, pixel
 * (x, y) = 100 y + x / 4 + 0.5 (exact in a float; the probe's source
 * value); a batch list and a pass tree with known values (instances = the
 * frame's parity + 10). */
static int images(const char *name, double seconds) {
#ifdef SPY_HAVE_VPX
  spy_vpx_register(); /* "moving" as a VP9 stream */
#endif
  spy_provider *p;
  spy_provider_desc pd = {.name = name};
  int rc = spy_provider_create(&p, &pd);
  if (rc < 0) {
    fprintf(stderr, "web_helper: images: %s\n", spy_strerror(rc));
    return 1;
  }
  static uint8_t test[64 * 48 * 4], moving[320 * 240 * 4];
  for (uint32_t y = 0; y < 48; y++)
    for (uint32_t x = 0; x < 64; x++) {
      uint8_t *q = test + (y * 64 + x) * 4;
      q[0] = (uint8_t)(4 * x);
      q[1] = (uint8_t)(5 * y);
      q[2] = (uint8_t)(x * y);
      q[3] = (uint8_t)(255 - x);
    }
  int ht =
      spy_buffer_declare(p, &(spy_buffer_desc){.name = "test",
                                               .pixel_type = SPY_PIXEL_RGBA8,
                                               .width = 64,
                                               .height = 48,
                                               .max_fps = 10});
  int hm =
      spy_buffer_declare(p, &(spy_buffer_desc){.name = "moving",
                                               .pixel_type = SPY_PIXEL_RGBA8,
                                               .width = 320,
                                               .height = 240,
                                               .max_fps = 10});
  static float depthf[40 * 30];
  for (uint32_t y = 0; y < 30; y++)
    for (uint32_t x = 0; x < 40; x++)
      depthf[y * 40 + x] = 100.0f * (float)y + (float)x / 4.0f + 0.5f;
  int hd =
      spy_buffer_declare(p, &(spy_buffer_desc){.name = "depthf",
                                               .pixel_type = SPY_PIXEL_R32F,
                                               .width = 40,
                                               .height = 30,
                                               .max_fps = 10});
  if (ht < 0 || hm < 0 || hd < 0) {
    fprintf(stderr, "web_helper: images: declare: %s\n",
            spy_strerror(ht < 0   ? ht
                         : hm < 0 ? hm
                                  : hd));
    return 1;
  }
  printf("provider %016llx %s\n", (unsigned long long)spy_provider_id(p), name);
  fflush(stdout);
  signal(SIGINT, on_sig);
  signal(SIGTERM, on_sig);
  double end = mono_s() + seconds;
  for (uint64_t frame = 0; !stop && (seconds <= 0 || mono_s() < end); frame++) {
    spy_frame_begin(p);
    for (uint32_t y = 0; y < 240; y++)
      for (uint32_t x = 0; x < 320; x++) {
        uint8_t *q = moving + (y * 320 + x) * 4;
        q[0] = (uint8_t)(x + frame * 3);
        q[1] = (uint8_t)y;
        q[2] = (uint8_t)((x / 40 + y / 40) & 1 ? 220 : 30);
        q[3] = 255;
      }
    spy_pass_begin(p, "scene");
    spy_pass_begin(p, "shadow");
    spy_batch_add(p, "mesh", "rock.mat", 10 + (uint32_t)(frame & 1), 3);
    spy_pass_end(p, 3, 48000);
    spy_batch_add(p, "mesh", "tree.mat", 7, 2);
    spy_batch_add(p, "sprite", "ui.atlas", 40, 1);
    spy_pass_end(p, 6, 50000);
    spy_buffer_submit(p, ht, test, 64 * 4);
    spy_buffer_submit(p, hm, moving, 320 * 4);
    spy_buffer_submit(p, hd, depthf, 40 * 4);
    spy_frame_end(p);
    usleep(15000);
  }
  spy_provider_destroy(p);
  return 0;
}

/* ---- the C consumer's truth
 * ------------------------------------------------
 */

static int truth(const char *name, double seconds, const char *out) {
  FILE *o = fopen(out, "w");
  if (!o) {
    perror(out);
    return 1;
  }
  spy_consumer *c;
  spy_consumer_desc d = {.want = name, .no_clock_sync = 1};
  int rc = spy_consumer_create(&c, &d);
  if (rc < 0) {
    fprintf(stderr, "web_helper: consumer: %s\n", spy_strerror(rc));
    return 1;
  }
  signal(SIGINT, on_sig);
  signal(SIGTERM, on_sig);
  uint64_t last = UINT64_MAX;
  double end = mono_s() + seconds;
  while (!stop && mono_s() < end) {
    spy_consumer_poll(c, 2);
    const spy_state *s = spy_consumer_state(c);
    if (!s->samples || s->last_frame == last)
      continue;
    last = s->last_frame;
    fprintf(o, "{\"frame\":%llu,\"values\":{", (unsigned long long)last);
    json = o;
    for (uint32_t i = 0; i < s->registry.n; i++) {
      const spy_state_entry *e = &s->registry.e[i];
      fprintf(o, "%s", i ? "," : "");
      jstr(e->name, (uint32_t)strlen(e->name));
      fputc(':', o);
      if (e->has_value)
        jvalue(&e->value);
      else
        fprintf(o, "null");
    }
    fprintf(o, "},\"draws\":%.0f}\n",
            (double)spy_state_last(s, SPY_FIELD_COUNTER0 + SPY_COUNTER_DRAWS));
    fflush(o);
  }
  spy_consumer_destroy(c);
  fclose(o);
  return 0;
}

/* ---- a known zone sequence and the C consumer's spans of it ---------------
 */

static void spin_us(double us) {
  double end = mono_s() + us / 1e6;
  while (mono_s() < end) {
  }
}

static int zprovider(const char *name, double seconds) {
  static spy_zone_loc l_frame = {"frame", "zprovider", "web_helper.c",
                                 1,       0x3080ff,    0};
  static spy_zone_loc l_update = {"update", "zprovider", "web_helper.c",
                                  2,        0,           0};
  static spy_zone_loc l_sub = {"substep", "zprovider", "web_helper.c",
                               3,         0x7fd962,    0};
  static spy_zone_loc l_draw = {"draw", "zprovider", "web_helper.c", 4, 0, 0};
  static spy_zone_loc l_deep = {"deep", "zprovider", "web_helper.c",
                                5,      0xff6b6b,    0};
  spy_provider *p;
  spy_provider_desc pd = {.name = name};
  int rc = spy_provider_create(&p, &pd);
  if (rc < 0) {
    fprintf(stderr, "web_helper: zprovider: %s\n", spy_strerror(rc));
    return 1;
  }
  spy_thread_name(p, "sim");
  printf("provider %016llx %s\n", (unsigned long long)spy_provider_id(p), name);
  fflush(stdout);
  signal(SIGINT, on_sig);
  signal(SIGTERM, on_sig);
  double end = mono_s() + seconds;
  while (!stop && (seconds <= 0 || mono_s() < end)) {
    spy_frame_begin(p);
    spy_zone_begin(p, &l_frame);
    spy_zone_begin(p, &l_update);
    for (int i = 0; i < 3; i++) {
      spy_zone_begin(p, &l_sub);
      spin_us(100 + 50 * i);
      spy_zone_end(p);
    }
    spy_zone_end(p);
    spy_zone_begin(p, &l_draw);
    for (int d = 0; d < 3; d++) {
      spy_zone_begin(p, &l_deep);
      spin_us(40);
    }
    for (int d = 0; d < 3; d++)
      spy_zone_end(p);
    spy_zone_end(p);
    spy_zone_end(p);
    spy_frame_end(p);
    usleep(12000);
  }
  spy_provider_destroy(p);
  return 0;
}

static int ztruth(const char *name, double seconds, const char *out) {
  FILE *o = fopen(out, "w");
  if (!o) {
    perror(out);
    return 1;
  }
  spy_consumer *c;
  spy_consumer_desc d = {.want = name,
                         .features = SPY_FEAT_STATS | SPY_FEAT_ZONES,
                         .zone_frames = 64,
                         .no_clock_sync = 1};
  int rc = spy_consumer_create(&c, &d);
  if (rc < 0) {
    fprintf(stderr, "web_helper: consumer: %s\n", spy_strerror(rc));
    return 1;
  }
  signal(SIGINT, on_sig);
  signal(SIGTERM, on_sig);
  uint64_t written = 0;
  int any = 0;
  double end = mono_s() + seconds;
  while (!stop && mono_s() < end) {
    spy_consumer_poll(c, 2);
    const spy_state *s = spy_consumer_state(c);
    const spy_zone_thread *t = NULL;
    for (uint32_t i = 0; i < s->zones.n_threads; i++)
      if (!strcmp(s->zones.threads[i].name, "sim"))
        t = &s->zones.threads[i];
    if (!t)
      continue;
    /* Frames two markers old are complete on every thread. */
    for (uint32_t age = 8; age >= 2; age--) {
      uint64_t fr, a, b;
      if (!spy_state_zone_frame(s, age, &fr, &a, &b) || (any && fr <= written))
        continue;
      fprintf(o, "{\"frame\":%llu,\"spans\":[", (unsigned long long)fr);
      int k = 0;
      for (uint32_t i = 0; i < t->n; i++) {
        const spy_zone_span *sp = spy_zone_thread_span(t, i);
        if (sp->start_ns < a || sp->start_ns >= b || !sp->end_ns)
          continue;
        const spy_zone_location *l = spy_state_zone_loc(s, sp->loc);
        fprintf(o, "%s[", k++ ? "," : "");
        json = o;
        if (l)
          jstr(l->name, (uint32_t)strlen(l->name));
        else
          fprintf(o, "null");
        fprintf(o, ",%u,%llu,%llu]", sp->depth,
                (unsigned long long)(sp->start_ns - a),
                (unsigned long long)(sp->end_ns - sp->start_ns));
      }
      fprintf(o, "]}\n");
      written = fr;
      any = 1;
    }
    fflush(o);
  }
  spy_consumer_destroy(c);
  fclose(o);
  return 0;
}

/* What the C decoders make of every DIR/NAME.bin (the JS differential fuzz
 * in test/web_zones_state.test.mjs). */
static int zcheck(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    perror(dir);
    return 1;
  }
  static uint8_t in[1 << 16];
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t nl = strlen(e->d_name);
    if (nl < 5 || strcmp(e->d_name + nl - 4, ".bin"))
      continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f)
      continue;
    size_t n = fread(in, 1, sizeof in, f);
    fclose(f);
    spy_frame fr;
    size_t off = 0;
    int rc = spy_frame_decode(in, n, &fr, &off);
    if (rc == 0) {
      size_t cur = 0;
      spy_section s;
      spy_zones_iter it;
      while (rc == 0 && spy_frame_next_section(&fr, &cur, &s))
        if (s.id == SPY_SEC_ZONES)
          rc = spy_get_zones(&s, &it);
    }
    printf("%.*s %s\n", (int)(nl - 4), e->d_name, rc ? err_name(rc) : "ok");
  }
  closedir(d);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "golden"))
    return golden(argv[2]);
  if (argc == 4 && !strcmp(argv[1], "provider"))
    return provider(argv[2], atof(argv[3]));
  if (argc == 4 && !strcmp(argv[1], "images"))
    return images(argv[2], atof(argv[3]));
  if (argc == 5 && !strcmp(argv[1], "truth"))
    return truth(argv[2], atof(argv[3]), argv[4]);
  if (argc == 3 && !strcmp(argv[1], "zcheck"))
    return zcheck(argv[2]);
  if (argc == 4 && !strcmp(argv[1], "zprovider"))
    return zprovider(argv[2], atof(argv[3]));
  if (argc == 5 && !strcmp(argv[1], "ztruth"))
    return ztruth(argv[2], atof(argv[3]), argv[4]);
  fprintf(stderr, "usage: web_helper golden DIR | provider NAME SECONDS | "
                  "truth NAME SECONDS OUT\n");
  return 2;
}
