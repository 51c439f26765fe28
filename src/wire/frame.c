/* frame.c — the frame header, the TLV section walk, and the byte writer.
 *
 * The writer appends to a caller's buffer with a sticky error, so hot
 * encoders chain puts without checks. The decoder validates the whole frame
 * once (header, every section bound, the FRAME section, the type) so that
 * later section walks need no checks of their own. See docs/wire.md.
 */
#include <string.h>

#include "spyglass/wire.h"

#define PAD4(n) (((n) + 3u) & ~(size_t)3u)

const char *spy_msg_type_name(uint32_t type) {
  switch (type) {
  case SPY_MSG_DATA: return "data";
  case SPY_MSG_SUBSCRIBE: return "subscribe";
  case SPY_MSG_SUBSCRIBE_ACK: return "subscribe:ack";
  case SPY_MSG_ACK: return "ack";
  case SPY_MSG_UNSUBSCRIBE: return "unsubscribe";
  case SPY_MSG_PING: return "ping";
  case SPY_MSG_PROVIDER_ANNOUNCE: return "provider:announce";
  case SPY_MSG_PROVIDER_QUERY: return "provider:query";
  case SPY_MSG_PROVIDER_GONE: return "provider:gone";
  case SPY_MSG_BUFFER_CHUNK: return "buffer:chunk";
  case SPY_MSG_BUFFER_RAW: return "buffer:raw";
  case SPY_MSG_RESYNC: return "resync";
  case SPY_MSG_TRACE: return "trace";
  case SPY_MSG_CLOCK: return "clock";
  case SPY_MSG_BUFFER_PROBE: return "buffer:probe";
  default: return NULL;
  }
}

const char *spy_section_name(uint32_t id) {
  switch (id) {
  case SPY_SEC_FRAME: return "frame";
  case SPY_SEC_STATS: return "stats";
  case SPY_SEC_ENV: return "env";
  case SPY_SEC_REGISTRY: return "registry";
  case SPY_SEC_BUFFERS: return "buffers";
  case SPY_SEC_STATS_SCHEMA: return "stats_schema";
  case SPY_SEC_HEALTH: return "health";
  case SPY_SEC_PROVIDER: return "provider";
  case SPY_SEC_PEER: return "peer";
  case SPY_SEC_SUBSCRIPTION: return "subscription";
  case SPY_SEC_PIXELS: return "pixels";
  case SPY_SEC_BATCHES: return "batches";
  case SPY_SEC_PASSES: return "passes";
  case SPY_SEC_TRACE: return "trace";
  case SPY_SEC_MSGPROF: return "msgprof";
  case SPY_SEC_CLOCK: return "clock";
  case SPY_SEC_ZONES: return "zones";
  case SPY_SEC_BUILD: return "build";
  case SPY_SEC_PROBE: return "probe";
  case SPY_SEC_BUFFER_VARIANTS: return "buffer_variants";
  default: return NULL;
  }
}

/* ---- writer ------------------------------------------------------------ */

int spy_frame_start(spy_frame_writer *w, void *buf, size_t cap, uint32_t type,
                    uint64_t ts_ms, uint32_t seq, uint16_t flags) {
  w->buf = buf;
  w->cap = cap > SPY_FRAME_MAX ? SPY_FRAME_MAX : cap;
  w->len = 0;
  w->sec_start = 0;
  w->err = 0;
  if (!buf)
    return w->err = SPY_EINVAL;
  if (w->cap < SPY_FRAME_MIN)
    return w->err = SPY_ENOBUFS;
  uint8_t *p = w->buf;
  spy_wr32(p + 4, type);
  spy_wr32(p + 8, (uint32_t)ts_ms);
  spy_wr32(p + 12, (uint32_t)(ts_ms >> 32));
  spy_wr32(p + 16, SPY_SEC_FRAME);
  spy_wr32(p + 20, 8);
  spy_wr16(p + 24, SPY_WIRE_VERSION);
  spy_wr16(p + 26, flags);
  spy_wr32(p + 28, seq);
  w->len = SPY_FRAME_MIN;
  return 0;
}

void spy_frame_section_end(spy_frame_writer *w) {
  if (!w->sec_start)
    return;
  size_t body = w->len - w->sec_start - SPY_SECTION_HEADER_BYTES;
  if (!w->err)
    spy_wr32(w->buf + w->sec_start + 4, (uint32_t)body);
  w->sec_start = 0;
  size_t padded = PAD4(w->len);
  if (w->err)
    return;
  if (padded > w->cap) {
    w->err = SPY_ENOBUFS;
    return;
  }
  while (w->len < padded)
    w->buf[w->len++] = 0;
}

void spy_frame_section_begin(spy_frame_writer *w, uint32_t id) {
  spy_frame_section_end(w);
  if (w->err)
    return;
  if (w->cap - w->len < SPY_SECTION_HEADER_BYTES) {
    w->err = SPY_ENOBUFS;
    return;
  }
  w->sec_start = w->len;
  spy_wr32(w->buf + w->len, id);
  spy_wr32(w->buf + w->len + 4, 0);
  w->len += SPY_SECTION_HEADER_BYTES;
}

void *spy_frame_reserve(spy_frame_writer *w, size_t n) {
  if (w->err)
    return NULL;
  if (!w->sec_start || n > w->cap - w->len) {
    w->err = w->sec_start ? SPY_ENOBUFS : SPY_EINVAL;
    return NULL;
  }
  void *p = w->buf + w->len;
  w->len += n;
  return p;
}

void spy_frame_put(spy_frame_writer *w, const void *p, size_t n) {
  void *d = spy_frame_reserve(w, n);
  if (d && n)
    memcpy(d, p, n);
}

void spy_frame_put_u8(spy_frame_writer *w, uint8_t v) {
  uint8_t *d = spy_frame_reserve(w, 1);
  if (d)
    *d = v;
}
void spy_frame_put_u16(spy_frame_writer *w, uint16_t v) {
  uint8_t *d = spy_frame_reserve(w, 2);
  if (d)
    spy_wr16(d, v);
}
void spy_frame_put_u32(spy_frame_writer *w, uint32_t v) {
  uint8_t *d = spy_frame_reserve(w, 4);
  if (d)
    spy_wr32(d, v);
}
void spy_frame_put_u64(spy_frame_writer *w, uint64_t v) {
  uint8_t *d = spy_frame_reserve(w, 8);
  if (d)
    spy_wr64(d, v);
}
void spy_frame_put_f64(spy_frame_writer *w, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  spy_frame_put_u64(w, u);
}

int spy_frame_finish(spy_frame_writer *w) {
  spy_frame_section_end(w);
  if (w->err)
    return w->err;
  if (!w->buf)
    return w->err = SPY_EINVAL;
  spy_wr32(w->buf, (uint32_t)w->len);
  return (int)w->len;
}

/* ---- decoder ----------------------------------------------------------- */

static int known_type(uint32_t t) { return spy_msg_type_name(t) != NULL; }

int spy_frame_peek_len(const void *p, size_t n) {
  if (!p || n < SPY_FRAME_HEADER_BYTES)
    return SPY_ETRUNCATED;
  uint32_t used = spy_rd32(p);
  if (used > SPY_FRAME_MAX)
    return SPY_ETOOBIG;
  if (used < SPY_FRAME_MIN || (used & 3u))
    return SPY_EBADHEADER;
  return (int)used;
}

static int fail(spy_frame *out, size_t *err_off, size_t off, int err) {
  memset(out, 0, sizeof *out);
  if (err_off)
    *err_off = off;
  return err;
}

int spy_frame_decode(const void *p, size_t n, spy_frame *out, size_t *err_off) {
  const uint8_t *b = p;
  int used = spy_frame_peek_len(p, n);
  if (used < 0)
    return fail(out, err_off, 0, used);
  if ((size_t)used > n)
    return fail(out, err_off, n, SPY_ETRUNCATED);
  /* FRAME section first. */
  if (spy_rd32(b + 16) != SPY_SEC_FRAME)
    return fail(out, err_off, 16, SPY_ENOSECTION);
  if (spy_rd32(b + 20) != 8)
    return fail(out, err_off, 20, SPY_EBADSECTION);
  uint16_t version = spy_rd16(b + 24);
  if (version != SPY_WIRE_VERSION)
    return fail(out, err_off, 24, SPY_EBADVERSION);
  uint32_t type = spy_rd32(b + 4);
  if (!known_type(type))
    return fail(out, err_off, 4, SPY_EBADTYPE);
  /* Every section must lie within used_bytes, padded to 4. */
  size_t off = SPY_FRAME_MIN;
  while (off < (size_t)used) {
    if ((size_t)used - off < SPY_SECTION_HEADER_BYTES)
      return fail(out, err_off, off, SPY_ETRUNCATED);
    uint32_t slen = spy_rd32(b + off + 4);
    size_t room = (size_t)used - off - SPY_SECTION_HEADER_BYTES;
    if (slen > room)
      return fail(out, err_off, off + 4, SPY_EBADSECTION);
    if (spy_rd32(b + off) == SPY_SEC_FRAME)
      return fail(out, err_off, off, SPY_EBADSECTION);
    off += SPY_SECTION_HEADER_BYTES + PAD4((size_t)slen);
  }
  out->type = type;
  out->ts_ms = (uint64_t)spy_rd32(b + 8) | ((uint64_t)spy_rd32(b + 12) << 32);
  out->version = version;
  out->flags = spy_rd16(b + 26);
  out->seq = spy_rd32(b + 28);
  out->bytes = b;
  out->len = (uint32_t)used;
  return 0;
}

int spy_frame_next_section(const spy_frame *f, size_t *cursor, spy_section *s) {
  size_t off = *cursor ? *cursor : SPY_FRAME_MIN;
  if (off + SPY_SECTION_HEADER_BYTES > f->len)
    return 0;
  s->id = spy_rd32(f->bytes + off);
  s->len = spy_rd32(f->bytes + off + 4);
  s->data = f->bytes + off + SPY_SECTION_HEADER_BYTES;
  *cursor = off + SPY_SECTION_HEADER_BYTES + PAD4((size_t)s->len);
  return 1;
}

int spy_frame_find_section(const spy_frame *f, uint32_t id, spy_section *s) {
  size_t cur = 0;
  while (spy_frame_next_section(f, &cur, s))
    if (s->id == id)
      return 1;
  return 0;
}
