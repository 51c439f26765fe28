/* link.c — the link record codec (docs/wire.md, "Links"): an 8-byte
 * header (u32 payload length, u8 op, u8 flags, u16 channel) and a payload
 * checked per op. The bound on a payload is decided from the header alone,
 * so a peer cannot make a reader buffer more than it allows. */
#include <string.h>

#include "spyglass/net.h"
#include "spyglass/wire.h"

void spy_link_header(void *buf, uint8_t op, uint16_t chan, uint32_t len) {
  uint8_t *p = buf;
  spy_wr32(p, len);
  p[4] = op;
  p[5] = 0;
  spy_wr16(p + 6, chan);
}

int spy_link_encode(void *buf, size_t cap, uint8_t op, uint16_t chan,
                    const void *a, size_t alen, const void *b, size_t blen) {
  if (alen + blen > SPY_LINK_PAYLOAD_MAX)
    return SPY_ETOOBIG;
  size_t n = SPY_LINK_HEADER_BYTES + alen + blen;
  if (n > cap)
    return SPY_ENOBUFS;
  uint8_t *p = buf;
  spy_link_header(p, op, chan, (uint32_t)(alen + blen));
  if (alen)
    memcpy(p + SPY_LINK_HEADER_BYTES, a, alen);
  if (blen)
    memcpy(p + SPY_LINK_HEADER_BYTES + alen, b, blen);
  return (int)n;
}

static int chan_ok(uint16_t c) { return c > 0 && c < SPY_LINK_CHANNELS_MAX; }

/* Channel names a link may carry: the bus's own charset. */
static int name_ok(const uint8_t *s, uint32_t n) {
  if (n == 0 || n > SPY_CHANNEL_NAME_MAX)
    return 0;
  for (uint32_t i = 0; i < n; i++) {
    uint8_t c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
          c == '-'))
      return 0;
  }
  return 1;
}

static int check_payload(spy_link_rec *r) {
  const uint8_t *p = r->payload;
  uint32_t n = r->len;
  switch (r->op) {
  case SPY_LINK_HELLO: {
    if (r->chan || n < 12 || spy_rd32(p) != SPY_LINK_MAGIC)
      return SPY_EBADVALUE;
    r->version = spy_rd32(p + 4);
    uint32_t tl = spy_rd16(p + 8);
    if (spy_rd16(p + 10) || tl > SPY_LINK_TOKEN_MAX || 12 + tl != n)
      return SPY_EBADVALUE;
    r->text = (const char *)p + 12;
    r->text_len = tl;
    return 0;
  }
  case SPY_LINK_WELCOME:
    if (r->chan || n != 8)
      return SPY_EBADVALUE;
    r->version = spy_rd32(p);
    r->max_record = spy_rd32(p + 4);
    return 0;
  case SPY_LINK_OPEN:
    if (!chan_ok(r->chan) || !name_ok(p, n))
      return SPY_EBADVALUE;
    r->text = (const char *)p;
    r->text_len = n;
    return 0;
  case SPY_LINK_OPENED:
    if (!chan_ok(r->chan) || n != 8)
      return SPY_EBADVALUE;
    r->id = spy_rd64(p);
    return 0;
  case SPY_LINK_CLOSE:
    if (!chan_ok(r->chan) || n != 4)
      return SPY_EBADVALUE;
    r->code = (int32_t)spy_rd32(p);
    return 0;
  case SPY_LINK_FRAME: {
    if (!chan_ok(r->chan) || n < 8 + SPY_FRAME_MIN || spy_rd32(p + 4))
      return SPY_EBADVALUE;
    r->lost = spy_rd32(p);
    r->frame = p + 8;
    r->frame_len = n - 8;
    /* One whole frame, nothing after it: used_bytes is the length. */
    if (spy_rd32(r->frame) != r->frame_len)
      return SPY_EBADVALUE;
    return 0;
  }
  case SPY_LINK_CLOCK:
    if (r->chan || (n != 8 && n != 24))
      return SPY_EBADVALUE;
    r->clock_reply = n == 24;
    for (uint32_t i = 0; i < n / 8; i++)
      r->t[i] = spy_rd64(p + 8 * i);
    return 0;
  case SPY_LINK_ERROR: {
    if (r->chan || n < 4 || n > 4 + 1024)
      return SPY_EBADVALUE;
    r->code = (int32_t)spy_rd32(p);
    r->text = (const char *)p + 4;
    r->text_len = n - 4;
    return 0;
  }
  default: return SPY_EBADHEADER;
  }
}

int spy_link_parse(const void *buf, size_t n, size_t max_payload,
                   spy_link_rec *out) {
  memset(out, 0, sizeof *out);
  if (n < SPY_LINK_HEADER_BYTES)
    return 0;
  const uint8_t *p = buf;
  uint32_t len = spy_rd32(p);
  if (max_payload > SPY_LINK_PAYLOAD_MAX)
    max_payload = SPY_LINK_PAYLOAD_MAX;
  if (len > max_payload)
    return SPY_ETOOBIG;
  if (p[4] < SPY_LINK_HELLO || p[4] > SPY_LINK_ERROR || p[5])
    return SPY_EBADHEADER;
  if (n - SPY_LINK_HEADER_BYTES < len)
    return 0;
  out->op = p[4];
  out->chan = spy_rd16(p + 6);
  out->len = len;
  out->payload = p + SPY_LINK_HEADER_BYTES;
  int rc = check_payload(out);
  if (rc < 0) {
    memset(out, 0, sizeof *out);
    return rc;
  }
  return (int)(SPY_LINK_HEADER_BYTES + len);
}
