/* http.c — one HTTP/1.1 request head, parsed within fixed buffers (the
 * caller bounds the head's size), and the WebSocket accept key. */
#include "net/http.h"

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "spyglass/error.h"

static int atoi_safe(const char *s) {
  int v = 0;
  for (; *s >= '0' && *s <= '9' && v < 10000; s++)
    v = v * 10 + (*s - '0');
  return *s ? -1 : v;
}

static int copy_field(char *dst, size_t cap, const char *s, size_t n) {
  while (n && (*s == ' ' || *s == '\t')) {
    s++;
    n--;
  }
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  if (n >= cap)
    return SPY_ENOBUFS;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
      return SPY_EINVAL;
  memcpy(dst, s, n);
  dst[n] = 0;
  return 0;
}

/* Case-insensitive: does the comma-separated list v contain token t? */
static int list_has(const char *v, size_t n, const char *t) {
  size_t tl = strlen(t);
  for (size_t i = 0; i < n;) {
    while (i < n && (v[i] == ' ' || v[i] == ','))
      i++;
    size_t j = i;
    while (j < n && v[j] != ',')
      j++;
    size_t e = j;
    while (e > i && v[e - 1] == ' ')
      e--;
    if (e - i == tl && strncasecmp(v + i, t, tl) == 0)
      return 1;
    i = j;
  }
  return 0;
}

static int parse_target(spy_http_req *r, const char *s, size_t n) {
  if (n == 0 || s[0] != '/')
    return SPY_EINVAL;
  const char *q = memchr(s, '?', n);
  size_t pl = q ? (size_t)(q - s) : n;
  int rc = copy_field(r->path, sizeof r->path, s, pl);
  if (rc < 0 || !q)
    return rc;
  const char *e = s + n;
  for (const char *p = q + 1; p < e;) {
    const char *amp = memchr(p, '&', (size_t)(e - p));
    const char *end = amp ? amp : e;
    if (end - p > 6 && memcmp(p, "token=", 6) == 0) {
      rc = copy_field(r->token, sizeof r->token, p + 6, (size_t)(end - p - 6));
      if (rc < 0)
        return rc;
      r->has_token = 1;
    }
    p = end + 1;
  }
  return 0;
}

int spy__http_parse(const char *buf, size_t n, spy_http_req *r) {
  memset(r, 0, sizeof *r);
  const char *end = buf + n, *p = buf;
  const char *eol = memchr(p, '\n', n);
  if (!eol)
    return SPY_EINVAL;
  /* Request line: METHOD SP TARGET SP HTTP/1.x */
  const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
  if (!sp1 || sp1 - p >= (long)sizeof r->method)
    return SPY_EINVAL;
  memcpy(r->method, p, (size_t)(sp1 - p));
  const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
  if (!sp2 || eol - sp2 < 9 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
    return SPY_EINVAL;
  int rc = parse_target(r, sp1 + 1, (size_t)(sp2 - sp1 - 1));
  if (rc < 0)
    return rc;
  int conn_upgrade = 0, upgrade = 0;
  for (p = eol + 1; p < end; p = eol + 1) {
    eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol)
      return SPY_EINVAL;
    size_t ll = (size_t)(eol - p);
    if (ll && p[ll - 1] == '\r')
      ll--;
    if (ll == 0)
      break; /* the blank line */
    const char *colon = memchr(p, ':', ll);
    if (!colon || colon == p)
      return SPY_EINVAL;
    size_t kl = (size_t)(colon - p);
    const char *v = colon + 1;
    size_t vl = ll - kl - 1;
#define IS(name) (kl == strlen(name) && strncasecmp(p, name, kl) == 0)
    if (IS("Host")) {
      if (r->has_host)
        return SPY_EINVAL; /* two Hosts: which one is checked? */
      rc = copy_field(r->host, sizeof r->host, v, vl);
      r->has_host = 1;
    } else if (IS("Origin")) {
      rc = copy_field(r->origin, sizeof r->origin, v, vl);
      r->has_origin = 1;
    } else if (IS("Sec-WebSocket-Key")) {
      rc = copy_field(r->ws_key, sizeof r->ws_key, v, vl);
    } else if (IS("Sec-WebSocket-Version")) {
      char ver[8];
      rc = copy_field(ver, sizeof ver, v, vl);
      if (rc == 0)
        r->ws_version = atoi_safe(ver);
    } else if (IS("Upgrade")) {
      upgrade = list_has(v, vl, "websocket");
    } else if (IS("Connection")) {
      conn_upgrade = list_has(v, vl, "upgrade");
    } else if (IS("Authorization")) {
      while (vl && *v == ' ') {
        v++;
        vl--;
      }
      if (vl > 7 && strncasecmp(v, "Bearer ", 7) == 0) {
        rc = copy_field(r->token, sizeof r->token, v + 7, vl - 7);
        r->has_token = 1;
      }
    }
#undef IS
    if (rc < 0)
      return rc;
  }
  r->upgrade_ws = upgrade && conn_upgrade;
  return 0;
}

int spy__ws_accept(const char *key, char out[32]) {
  static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  char in[64 + sizeof guid];
  size_t kl = strlen(key);
  if (kl == 0 || kl > 64)
    return SPY_EINVAL;
  memcpy(in, key, kl);
  memcpy(in + kl, guid, sizeof guid - 1);
  unsigned char md[SHA_DIGEST_LENGTH];
  unsigned int ml = 0;
  if (!EVP_Digest(in, kl + sizeof guid - 1, md, &ml, EVP_sha1(), NULL))
    return SPY_EINVAL;
  EVP_EncodeBlock((unsigned char *)out, md, (int)ml);
  return 0;
}
