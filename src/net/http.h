/* http.h — the bridge's HTTP side: parsing one bounded request head, the
 * WebSocket accept key (RFC 6455, SHA-1 and base64 from OpenSSL). */
#ifndef SPY_NET_HTTP_H
#define SPY_NET_HTTP_H

#include <stddef.h>

typedef struct spy_http_req {
  char method[8];
  char path[256];  /* without the query */
  char token[160]; /* ?token= in the query, or Authorization: Bearer */
  char host[256];
  char origin[256];
  char ws_key[64];
  int has_host, has_origin, has_token;
  int upgrade_ws; /* Upgrade: websocket and Connection: upgrade */
  int ws_version; /* Sec-WebSocket-Version */
} spy_http_req;

/* Parses a request head (n bytes up to and including the blank line).
 * Returns 0, SPY_EINVAL (malformed: 400) or SPY_ENOBUFS (a field longer
 * than its buffer: 431). */
int spy__http_parse(const char *buf, size_t n, spy_http_req *r);
/* Sec-WebSocket-Accept for key: base64(SHA-1(key + GUID)), 28 chars. */
int spy__ws_accept(const char *key, char out[32]);

#endif
