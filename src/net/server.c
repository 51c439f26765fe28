/* server.c — the bridge: remote clients reach the local bus's channels
 * over TCP links or WebSocket, all in one epoll loop on one thread.
 *
 * Each accepted connection is told apart by its first bytes: an HTTP
 * request (`/` and `/healthz`, or a WebSocket upgrade at `/link`) or a
 * link's HELLO record. A link client opens channels by name. The bridge
 * holds one bus handle per distinct name (a `bchan`, its events through
 * spy_channel_fd in the same epoll set), shared by every client that
 * opened that name: each bus frame is received once and sent as it is,
 * in a link FRAME record (docs/wire.md, "Links"), to each of them; what
 * clients post goes to the bus through the same handle. The handle is
 * closed when its last client closes the channel.
 *
 * Never a stalled bus: bus frames are drained as soon as they arrive and
 * appended to the client's bounded send queue, or dropped and counted when
 * it is full; the count travels as `lost` in the client's next frame on
 * that channel, so its consumer sees the gap and asks for a resync.
 *
 * Security: loopback by default; a token (128 bits) for any client not on
 * loopback and for WebSocket upgrades from a foreign (but allowed) Origin;
 * Origin and Host checks on HTTP (403, logged); client frames pass an
 * allow-list of consumer message types, each fully decoded first; every
 * size and time is bounded (net.h, spy_server_desc).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "net/http.h"
#include "net/net_internal.h"
#include "spyglass/clock.h"
#include "spyglass/net.h"
#include "spyglass/wire.h"

#define MAX_LISTEN 2
#define BUS_BURST 256   /* frames drained from one channel per turn */
#define REFUSALS_MAX 64 /* disallowed messages before a client is dropped */

enum { K_LISTEN = 1, K_CONN = 2, K_BUS = 3, K_STOP = 4 };

typedef struct ep {
  int kind;
  struct conn *c;
  struct bchan *b;
  int fd;
} ep;

typedef struct bsub {
  struct conn *c;
  int chan; /* the client's channel number for this name */
} bsub;

/* Whose consumer id is this, on one shared data channel. Every client of
 * a name posts through the one bus handle, so the provider cannot tell
 * them apart by sender: the bridge keeps who names which consumer id and
 * refuses a client's message naming an id that another client, or a
 * consumer on the local bus, is using (it would unsubscribe, keep alive
 * or re-subscribe someone else's consumer). An id is taken by the first
 * message naming it and kept while its owner names it; one not named for
 * ID_IDLE_NS is free again: an honest consumer acks every second, and a
 * provider drops a consumer it has not heard from for its ack grace (3 s
 * by default) anyway. So a consumer whose link came back on a new
 * connection (the old one not yet seen closed) gets its id back soon. */
#define IDS_MAX 256      /* consumer ids tracked per data channel */
#define IDS_PER_CLIENT 8 /* ids one client may use on one channel */
#define ID_IDLE_NS 3000000000ull
typedef struct owned_id {
  uint64_t id;
  struct conn *c; /* NULL: a consumer on the local bus */
  int chan;
  uint64_t seen_ns;
} owned_id;

/* One bus handle, shared by every client that opened its name. */
typedef struct bchan {
  char name[SPY_CHANNEL_NAME_MAX + 1];
  spy_channel *bus; /* NULL once closed (freed after the event batch) */
  ep ev;
  int is_disc;
  int backlog; /* more to drain: revisit without waiting */
  bsub *subs;
  uint32_t nsubs, subcap;
  owned_id *ids; /* IDS_MAX of them once a consumer id was named */
  uint32_t nids;
  struct bchan *next; /* s->bchans, or s->dead_b once closed */
} bchan;

typedef struct schan {
  bchan *b;      /* NULL: this channel number is not open */
  uint32_t lost; /* dropped for this client since its last frame here */
} schan;

enum { S_TLS, S_NEW, S_HTTP, S_LINK, S_WS, S_CLOSING };

typedef struct conn {
  struct spy_server *srv;
  int fd, state, dead;
  ep ev;
  uint32_t want_events;
  SSL *ssl;
  uint64_t id;
  char peer[64];
  int loopback, authed, is_ws, hello;
  uint8_t *in;
  size_t in_len, in_cap;
  uint8_t *out;
  size_t out_off, out_len, out_cap;
  int close_when_sent;
  wslay_event_context_ptr ws;
  uint64_t deadline_ns, last_rx_ns;
  schan ch[SPY_LINK_CHANNELS_MAX];
  uint64_t frames_sent, bytes_sent, dropped, dropped_bytes, refused;
  struct conn *next_dead;
} conn;

struct spy_server {
  spy_server_desc d;
  char token[SPY_LINK_TOKEN_MAX + 1];
  int token_generated;
  char listen_host[256];
  int ep;
  int lfd[MAX_LISTEN];
  ep lev[MAX_LISTEN];
  int nlisten;
  int port;
  int stopfd;
  ep stopev;
  _Atomic int stopping;
  SSL_CTX *tls;
  conn **conns;
  uint32_t nconns;
  conn *dead;
  bchan *bchans, *dead_b;
  uint8_t *rx; /* one bus frame at a time */
  uint8_t *scratch;
  uint64_t next_id;
  uint64_t last_full_log_ns;
  spy_server_stats st;
  pthread_t thread;
};

/* ---- logging ------------------------------------------------------------ */

static void logf_(spy_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void logf_(spy_server *s, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (s->d.log)
    s->d.log(s->d.log_arg, line);
  else
    fprintf(stderr, "spyglass serve: %s\n", line);
}

/* ---- connection I/O (plain or TLS) -------------------------------------- */

/* > 0 bytes, 0 end of stream, SPY_EAGAIN, or another error. */
static ssize_t conn_read(conn *c, void *buf, size_t n) {
  if (c->ssl) {
    int r = SSL_read(c->ssl, buf, (int)(n > 1 << 30 ? 1 << 30 : n));
    if (r > 0)
      return r;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
      return SPY_EAGAIN;
    return e == SSL_ERROR_ZERO_RETURN ? 0 : SPY_EIO;
  }
  for (;;) {
    ssize_t r = recv(c->fd, buf, n, 0);
    if (r >= 0)
      return r;
    if (errno == EINTR)
      continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? SPY_EAGAIN : -errno;
  }
}

static ssize_t conn_write(conn *c, const void *buf, size_t n) {
  if (c->ssl) {
    int r = SSL_write(c->ssl, buf, (int)(n > 1 << 30 ? 1 << 30 : n));
    if (r > 0)
      return r;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
      return SPY_EAGAIN;
    return SPY_EIO;
  }
  for (;;) {
    ssize_t r = send(c->fd, buf, n, MSG_NOSIGNAL);
    if (r >= 0)
      return r;
    if (errno == EINTR)
      continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? SPY_EAGAIN : -errno;
  }
}

static void set_events(conn *c, uint32_t ev) {
  if (c->want_events == ev || c->dead)
    return;
  struct epoll_event e = {.events = ev, .data.ptr = &c->ev};
  epoll_ctl(c->srv->ep, EPOLL_CTL_MOD, c->fd, &e);
  c->want_events = ev;
}

/* ---- connection lifetime ------------------------------------------------ */

/* Closes b's bus handle and unlists it. b itself is freed after this
 * batch of events (one may still point at b->ev: it is skipped, b->bus
 * being NULL). */
static void bchan_release(spy_server *s, bchan *b) {
  if (b->ev.fd >= 0)
    epoll_ctl(s->ep, EPOLL_CTL_DEL, b->ev.fd, NULL);
  spy_channel_close(b->bus);
  b->bus = NULL;
  b->ev.fd = -1;
  for (bchan **pp = &s->bchans; *pp; pp = &(*pp)->next)
    if (*pp == b) {
      *pp = b->next;
      break;
    }
  b->next = s->dead_b;
  s->dead_b = b;
}

static void ids_remove(bchan *b, uint32_t i) { b->ids[i] = b->ids[--b->nids]; }

/* Drops client c's channel `chan` from b; the last one closes it. */
static void bchan_unsub(spy_server *s, bchan *b, conn *c, int chan) {
  for (uint32_t i = b->nids; i-- > 0;)
    if (b->ids[i].c == c && b->ids[i].chan == chan)
      ids_remove(b, i);
  for (uint32_t i = 0; i < b->nsubs; i++)
    if (b->subs[i].c == c && b->subs[i].chan == chan) {
      b->subs[i] = b->subs[--b->nsubs];
      break;
    }
  if (!b->nsubs)
    bchan_release(s, b);
}

static void close_chan(conn *c, int i) {
  schan *h = &c->ch[i];
  if (!h->b)
    return;
  bchan_unsub(c->srv, h->b, c, i);
  memset(h, 0, sizeof *h);
}

static void conn_kill(conn *c, const char *why) {
  if (c->dead)
    return;
  spy_server *s = c->srv;
  if (why)
    logf_(s, "client %llu (%s): closed: %s", (unsigned long long)c->id, c->peer,
          why);
  for (int i = 1; i < (int)SPY_LINK_CHANNELS_MAX; i++)
    close_chan(c, i);
  epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
  if (c->ssl) {
    SSL_free(c->ssl);
    c->ssl = NULL;
  }
  close(c->fd);
  c->fd = -1;
  c->dead = 1;
  for (uint32_t i = 0; i < s->nconns; i++)
    if (s->conns[i] == c) {
      s->conns[i] = s->conns[--s->nconns];
      break;
    }
  s->st.clients = s->nconns;
  c->next_dead = s->dead; /* freed after this batch of events */
  s->dead = c;
}

static void conn_free(conn *c) {
  if (c->ws)
    wslay_event_context_free(c->ws);
  free(c->in);
  free(c->out);
  free(c);
}

/* ---- send queue --------------------------------------------------------- */

static size_t queued(const conn *c) {
  size_t n = c->out_len - c->out_off;
  if (c->ws)
    n += wslay_event_get_queued_msg_length(c->ws);
  return n;
}

/* Appends raw bytes to the byte queue (HTTP responses, TCP link records).
 * 0, or SPY_ENOBUFS when it would pass the bound. */
static int out_append(conn *c, const void *a, size_t alen, const void *b,
                      size_t blen) {
  size_t n = alen + blen;
  if (queued(c) + n > c->srv->d.queue_bytes)
    return SPY_ENOBUFS;
  if (c->out_off && c->out_len + n > c->out_cap) {
    memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
    c->out_len -= c->out_off;
    c->out_off = 0;
  }
  if (c->out_len + n > c->out_cap) {
    size_t cap = c->out_cap ? c->out_cap : 65536;
    while (cap < c->out_len + n)
      cap *= 2;
    uint8_t *nb = realloc(c->out, cap);
    if (!nb)
      return SPY_ENOBUFS;
    c->out = nb;
    c->out_cap = cap;
  }
  memcpy(c->out + c->out_len, a, alen);
  if (blen)
    memcpy(c->out + c->out_len + alen, b, blen);
  c->out_len += n;
  return 0;
}

/* Sends a link record (header + a + b) on whichever framing the client
 * speaks. SPY_ENOBUFS: the queue is full, nothing was queued. */
static int send_rec(conn *c, uint8_t op, uint16_t chan, const void *a,
                    size_t alen, const void *b, size_t blen) {
  uint8_t hdr[SPY_LINK_HEADER_BYTES];
  spy_link_header(hdr, op, chan, (uint32_t)(alen + blen));
  if (!c->is_ws) {
    uint8_t tmp[SPY_LINK_HEADER_BYTES + 64];
    if (alen > 64)
      return SPY_EINVAL;
    memcpy(tmp, hdr, sizeof hdr);
    memcpy(tmp + sizeof hdr, a, alen);
    size_t head = sizeof hdr + alen, sent = 0;
    if (c->out_len == c->out_off && !c->ssl && c->state == S_LINK &&
        queued(c) + head + blen <= c->srv->d.queue_bytes) {
      /* Nothing queued: straight from the caller's bytes (one copy less,
       * no wait for the next epoll turn); only what the socket did not
       * take is queued. */
      struct iovec iov[2] = {{tmp, head}, {(void *)b, blen}};
      struct msghdr mh = {.msg_iov = iov, .msg_iovlen = blen ? 2 : 1};
      ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0)
        sent = (size_t)w;
    }
    if (sent >= head + blen)
      return 0;
    if (sent >= head)
      return out_append(c, (const uint8_t *)b + (sent - head),
                        blen - (sent - head), NULL, 0);
    return out_append(c, tmp + sent, head - sent, b, blen);
  }
  size_t n = SPY_LINK_HEADER_BYTES + alen + blen;
  if (queued(c) + n > c->srv->d.queue_bytes)
    return SPY_ENOBUFS;
  uint8_t *m = c->srv->scratch;
  memcpy(m, hdr, sizeof hdr);
  memcpy(m + sizeof hdr, a, alen);
  if (blen)
    memcpy(m + sizeof hdr + alen, b, blen);
  struct wslay_event_msg msg = {
      .opcode = WSLAY_BINARY_FRAME, .msg = m, .msg_length = n};
  return wslay_event_queue_msg(c->ws, &msg) == 0 ? 0 : SPY_ENOBUFS;
}

static void send_error(conn *c, int code, const char *text) {
  uint8_t a[4];
  spy_wr32(a, (uint32_t)code);
  send_rec(c, SPY_LINK_ERROR, 0, a, 4, text, strlen(text));
  c->close_when_sent = 1;
}

/* Writes what is queued. Returns < 0 if the connection failed. */
static int flush_out(conn *c) {
  while (c->out_off < c->out_len) {
    ssize_t w = conn_write(c, c->out + c->out_off, c->out_len - c->out_off);
    if (w == SPY_EAGAIN)
      break;
    if (w <= 0)
      return -1;
    c->out_off += (size_t)w;
  }
  if (c->out_off == c->out_len)
    c->out_off = c->out_len = 0;
  if (c->ws && c->out_len == 0 && wslay_event_want_write(c->ws) &&
      wslay_event_send(c->ws) < 0)
    return -1;
  int more = c->out_len > 0 || (c->ws && wslay_event_want_write(c->ws));
  if (!more && c->close_when_sent)
    return -1;
  if (c->ws && !wslay_event_want_read(c->ws) && !more)
    return -1; /* the close handshake is over */
  uint32_t ev = EPOLLIN | (more ? EPOLLOUT : 0);
  if (c->ssl && SSL_want_write(c->ssl))
    ev |= EPOLLOUT;
  set_events(c, ev);
  return 0;
}

/* ---- HTTP --------------------------------------------------------------- */

static void http_reply(conn *c, int code, const char *reason, const char *type,
                       const char *body) {
  char head[512];
  size_t bl = strlen(body);
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                   "Content-Length: %zu\r\nCache-Control: no-store\r\n"
                   "X-Content-Type-Options: nosniff\r\n"
                   "Connection: close\r\n\r\n",
                   code, reason, type, bl);
  out_append(c, head, (size_t)n, body, bl);
  c->close_when_sent = 1;
}

/* The page's files (spy_server_set_web): process-wide, set before any
 * server starts. */
static const spy_web_asset *web_assets;
static size_t web_n;

void spy_server_set_web(const spy_web_asset *assets, size_t n) {
  web_assets = assets;
  web_n = assets ? n : 0;
}

static const spy_web_asset *web_find(const char *path) {
  if (strcmp(path, "/") == 0)
    path = "/index.html";
  for (size_t i = 0; i < web_n; i++)
    if (strcmp(web_assets[i].path, path) == 0)
      return &web_assets[i];
  return NULL;
}

static void web_reply(conn *c, const spy_web_asset *a) {
  char head[512];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 200 OK\r\nContent-Type: %s\r\n"
                   "Content-Length: %zu\r\nCache-Control: no-store\r\n"
                   "X-Content-Type-Options: nosniff\r\n"
                   "Content-Security-Policy: default-src 'self'; "
                   "connect-src 'self' ws: wss:; img-src 'self' data:; "
                   "style-src 'self' 'unsafe-inline'\r\n"
                   "Connection: close\r\n\r\n",
                   a->type, a->len);
  out_append(c, head, (size_t)n, a->data, a->len);
  c->close_when_sent = 1;
}

static void refuse(conn *c, int code, const char *reason, const char *why) {
  spy_server *s = c->srv;
  if (code == 403)
    s->st.refused_forbidden++;
  else
    s->st.refused_bad++;
  logf_(s, "client %llu (%s): %d %s: %s", (unsigned long long)c->id, c->peer,
        code, reason, why);
  char body[256];
  snprintf(body, sizeof body, "%d %s: %s\n", code, reason, why);
  http_reply(c, code, reason, "text/plain; charset=utf-8", body);
}

static int token_ok(const spy_server *s, const char *t, size_t n) {
  size_t k = strlen(s->token);
  /* Compare in constant time; a length mismatch compares against itself
   * so the time does not depend on where the strings differ. */
  if (n != k) {
    CRYPTO_memcmp(s->token, s->token, k);
    return 0;
  }
  return CRYPTO_memcmp(s->token, t, k) == 0;
}

/* The host part of a Host header ("name:port", "[v6]:port"). */
static void host_only(const char *h, char *out, size_t cap) {
  if (h[0] == '[') {
    const char *e = strchr(h, ']');
    size_t n = e ? (size_t)(e - h + 1) : strlen(h);
    snprintf(out, cap, "%.*s", (int)n, h);
    return;
  }
  const char *colon = strrchr(h, ':');
  size_t n = colon ? (size_t)(colon - h) : strlen(h);
  snprintf(out, cap, "%.*s", (int)n, h);
}

static int is_ip_literal(const char *h) {
  unsigned char b[16];
  char tmp[64];
  if (h[0] == '[') {
    size_t n = strlen(h);
    if (n < 3 || n - 2 >= sizeof tmp || h[n - 1] != ']')
      return 0;
    memcpy(tmp, h + 1, n - 2);
    tmp[n - 2] = 0;
    return inet_pton(AF_INET6, tmp, b) == 1;
  }
  return inet_pton(AF_INET, h, b) == 1;
}

/* DNS rebinding: a name we do not know could point anywhere. */
static int host_allowed(const spy_server *s, const char *hosthdr) {
  char h[256];
  host_only(hosthdr, h, sizeof h);
  if (!h[0])
    return 0;
  if (strcasecmp(h, "localhost") == 0 || is_ip_literal(h) ||
      strcasecmp(h, s->listen_host) == 0)
    return 1;
  for (uint32_t i = 0; i < s->d.n_allow_hosts; i++)
    if (strcasecmp(h, s->d.allow_hosts[i]) == 0)
      return 1;
  return 0;
}

/* Our own origin: the scheme we serve and the Host the request used. */
static int origin_own(const spy_server *s, const spy_http_req *r) {
  char own[300];
  snprintf(own, sizeof own, "%s://%s", s->tls ? "https" : "http", r->host);
  return strcasecmp(own, r->origin) == 0;
}

static int origin_listed(const spy_server *s, const char *o) {
  for (uint32_t i = 0; i < s->d.n_allow_origins; i++)
    if (strcasecmp(o, s->d.allow_origins[i]) == 0 ||
        strcmp(s->d.allow_origins[i], "*") == 0)
      return 1;
  return 0;
}

static void healthz(conn *c) {
  spy_server *s = c->srv;
  size_t cap = 1024 + (size_t)s->nconns * 320, n = 0;
  char *b = malloc(cap);
  if (!b) {
    http_reply(c, 503, "Service Unavailable", "text/plain", "out of memory\n");
    return;
  }
#define P(...) n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__)
  P("{\"status\":\"ok\",\"port\":%d,\"max_clients\":%u,\"n_clients\":%u,"
    "\"accepted\":%llu,\"refused_full\":%llu,\"refused_forbidden\":%llu,"
    "\"refused_bad\":%llu,\"disallowed\":%llu,\"frames_relayed\":%llu,"
    "\"bytes_relayed\":%llu,\"dropped\":%llu,\"clients\":[",
    s->port, s->d.max_clients, s->nconns, (unsigned long long)s->st.accepted,
    (unsigned long long)s->st.refused_full,
    (unsigned long long)s->st.refused_forbidden,
    (unsigned long long)s->st.refused_bad, (unsigned long long)s->st.disallowed,
    (unsigned long long)s->st.frames_relayed,
    (unsigned long long)s->st.bytes_relayed, (unsigned long long)s->st.dropped);
  int first = 1;
  for (uint32_t i = 0; i < s->nconns && n + 320 < cap; i++) {
    conn *k = s->conns[i];
    if (k->state != S_LINK && k->state != S_WS)
      continue;
    int chans = 0;
    for (int j = 1; j < (int)SPY_LINK_CHANNELS_MAX; j++)
      chans += k->ch[j].b != NULL;
    P("%s{\"id\":%llu,\"peer\":\"%s\",\"kind\":\"%s\",\"tls\":%s,"
      "\"channels\":%d,\"frames_sent\":%llu,\"bytes_sent\":%llu,"
      "\"dropped\":%llu,\"dropped_bytes\":%llu,\"queued_bytes\":%zu,"
      "\"refused\":%llu}",
      first ? "" : ",", (unsigned long long)k->id, k->peer,
      k->is_ws ? "websocket" : "tcp", k->ssl ? "true" : "false", chans,
      (unsigned long long)k->frames_sent, (unsigned long long)k->bytes_sent,
      (unsigned long long)k->dropped, (unsigned long long)k->dropped_bytes,
      queued(k), (unsigned long long)k->refused);
    first = 0;
  }
  P("]}\n");
#undef P
  http_reply(c, 200, "OK", "application/json", b);
  free(b);
}

static ssize_t ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                          int flags, void *user);
static ssize_t ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data,
                          size_t len, int flags, void *user);
static void ws_msg_cb(wslay_event_context_ptr ctx,
                      const struct wslay_event_on_msg_recv_arg *arg,
                      void *user);

static void upgrade_ws(conn *c, const spy_http_req *r) {
  spy_server *s = c->srv;
  char accept[32];
  if (r->ws_version != 13 || spy__ws_accept(r->ws_key, accept) < 0) {
    refuse(c, 400, "Bad Request", "WebSocket version 13 with a key wanted");
    return;
  }
  char head[256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                   accept);
  out_append(c, head, (size_t)n, NULL, 0);
  static const struct wslay_event_callbacks cbs = {.recv_callback = ws_recv_cb,
                                                   .send_callback = ws_send_cb,
                                                   .on_msg_recv_callback =
                                                       ws_msg_cb};
  if (wslay_event_context_server_init(&c->ws, &cbs, c) != 0) {
    conn_kill(c, "out of memory");
    return;
  }
  wslay_event_config_set_max_recv_msg_length(c->ws, s->d.client_max);
  c->is_ws = 1;
  c->state = S_WS;
  logf_(s, "client %llu (%s): WebSocket%s", (unsigned long long)c->id, c->peer,
        c->ssl ? " (TLS)" : "");
}

/* A whole request head is in c->in[0..n). */
static void on_http(conn *c, size_t n) {
  spy_server *s = c->srv;
  spy_http_req r;
  int rc = spy__http_parse((const char *)c->in, n, &r);
  /* Whatever follows the head (a WebSocket's first frames) stays. */
  memmove(c->in, c->in + n, c->in_len - n);
  c->in_len -= n;
  if (rc == SPY_ENOBUFS) {
    refuse(c, 431, "Request Header Fields Too Large", "a header is too long");
    return;
  }
  if (rc < 0) {
    refuse(c, 400, "Bad Request", "malformed request");
    return;
  }
  if (strcmp(r.method, "GET") != 0) {
    refuse(c, 405, "Method Not Allowed", "only GET");
    return;
  }
  if (!r.has_host || !host_allowed(s, r.host)) {
    char why[300];
    snprintf(why, sizeof why, "Host '%.200s' is not allowed (--allow-host)",
             r.has_host ? r.host : "");
    refuse(c, 403, "Forbidden", why);
    return;
  }
  const spy_web_asset *page = web_find(r.path);
  if (page) { /* the page's code is public: the token guards the bus, and
                 the page itself says when its token is wrong */
    web_reply(c, page);
    return;
  }
  int token = r.has_token && token_ok(s, r.token, strlen(r.token));
  if (r.has_token && !token) {
    refuse(c, 403, "Forbidden", "wrong token");
    return;
  }
  c->authed = token;
  if (strcmp(r.path, "/link") == 0) {
    if (!r.upgrade_ws) {
      refuse(c, 400, "Bad Request", "/link is a WebSocket endpoint");
      return;
    }
    if (r.has_origin) {
      int own = origin_own(s, &r);
      if (!own && !origin_listed(s, r.origin)) {
        char why[300];
        snprintf(why, sizeof why,
                 "Origin '%.200s' is not allowed (--allow-origin)", r.origin);
        refuse(c, 403, "Forbidden", why);
        return;
      }
      if (!own && !token) {
        refuse(c, 403, "Forbidden", "a foreign Origin needs the token");
        return;
      }
    }
    if (!c->loopback && !token) {
      refuse(c, 403, "Forbidden", "not from loopback: the token is needed");
      return;
    }
    upgrade_ws(c, &r);
    return;
  }
  if (!c->loopback && !token) {
    refuse(c, 403, "Forbidden", "not from loopback: the token is needed");
    return;
  }
  if (strcmp(r.path, "/healthz") == 0) {
    healthz(c);
  } else if (strcmp(r.path, "/") == 0) {
    http_reply(c, 200, "OK", "text/plain; charset=utf-8",
               "spyglass serve: the local bus of this host, relayed.\n"
               "  /link     WebSocket: link records (docs/wire.md, Links)\n"
               "  /healthz  JSON: clients, their drops, refusals\n"
               "`spyglass top --connect HOST:PORT` speaks the TCP link on "
               "this same port.\n");
  } else {
    http_reply(c, 404, "Not Found", "text/plain", "not found\n");
  }
}

/* ---- link records from a client ----------------------------------------- */

static int name_allowed(const spy_server *s, const char *n, uint32_t len,
                        int *is_disc) {
  static const char pre[] = SPY_DISCOVERY_CHANNEL ":";
  *is_disc = len == strlen(SPY_DISCOVERY_CHANNEL) &&
             memcmp(n, SPY_DISCOVERY_CHANNEL, len) == 0;
  if (*is_disc)
    return 1;
  if (len != sizeof pre - 1 + 16 || memcmp(n, pre, sizeof pre - 1) != 0)
    return 0;
  for (uint32_t i = sizeof pre - 1; i < len; i++)
    if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f')))
      return 0;
  if (s->d.only_provider) {
    char want[17];
    snprintf(want, sizeof want, "%016llx",
             (unsigned long long)s->d.only_provider);
    return memcmp(n + sizeof pre - 1, want, 16) == 0;
  }
  return 1;
}

/* What a remote client may post: consumer-side messages only, each one
 * decoded whole. Returns 0 or why it is refused; *named = the consumer id
 * the message speaks for (data channels). */
static const char *frame_refusal(const uint8_t *p, uint32_t n, int is_disc,
                                 uint64_t *named) {
  spy_frame f;
  spy_section sec;
  if (spy_frame_decode(p, n, &f, NULL) < 0)
    return "malformed frame";
  if (is_disc) {
    spy_peer_info peer;
    if (f.type != SPY_MSG_PROVIDER_QUERY)
      return "only provider:query on the discovery channel";
    if (!spy_frame_find_section(&f, SPY_SEC_PEER, &sec) ||
        spy_get_peer(&sec, &peer) < 0)
      return "malformed query";
    return NULL;
  }
  switch (f.type) {
  case SPY_MSG_SUBSCRIBE: {
    spy_subscription sub;
    if (!spy_frame_find_section(&f, SPY_SEC_SUBSCRIPTION, &sec) ||
        spy_get_subscription(&sec, &sub) < 0)
      return "malformed subscribe";
    *named = sub.consumer;
    return NULL;
  }
  case SPY_MSG_UNSUBSCRIBE:
  case SPY_MSG_ACK:
  case SPY_MSG_RESYNC: {
    spy_peer_info peer;
    if (!spy_frame_find_section(&f, SPY_SEC_PEER, &sec) ||
        spy_get_peer(&sec, &peer) < 0)
      return "malformed peer message";
    *named = peer.id;
    return NULL;
  }
  case SPY_MSG_CLOCK: {
    spy_clock_msg m;
    if (!spy_frame_find_section(&f, SPY_SEC_CLOCK, &sec) ||
        spy_get_clock(&sec, &m) < 0)
      return "malformed clock message";
    *named = m.consumer;
    return NULL;
  }
  default: return "not a consumer message";
  }
}

static void refused_msg(conn *c, const char *why, uint32_t type) {
  c->refused++;
  c->srv->st.disallowed++;
  if (c->refused <= 3 || c->refused == REFUSALS_MAX)
    logf_(c->srv, "client %llu (%s): refused a message (type %u): %s",
          (unsigned long long)c->id, c->peer, type, why);
  if (c->refused >= REFUSALS_MAX)
    conn_kill(c, "too many refused messages");
}

/* Opens the bus handle of `name` for the bridge (its fd in the epoll
 * set) and lists it; no client yet. */
static int bchan_open(spy_server *s, const char *name, int disc, bchan **out) {
  bchan *b = calloc(1, sizeof *b);
  if (!b)
    return SPY_ENOMEM;
  spy_channel_desc cd = {
      .name = name, .ring_bytes = 64u << 10, .dir = s->d.dir};
  int rc = spy_channel_open(&b->bus, &cd);
  int fd = rc == 0 ? spy_channel_fd(b->bus) : rc;
  if (rc == 0 && fd < 0) {
    spy_channel_close(b->bus);
    rc = fd;
  }
  if (rc < 0) {
    free(b);
    return rc;
  }
  snprintf(b->name, sizeof b->name, "%s", name);
  b->is_disc = disc;
  b->ev = (ep){.kind = K_BUS, .b = b, .fd = fd};
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = &b->ev};
  epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e);
  b->next = s->bchans;
  s->bchans = b;
  *out = b;
  return 0;
}

static void open_chan(conn *c, const spy_link_rec *r) {
  spy_server *s = c->srv;
  uint8_t code[4];
  int disc;
  char name[SPY_CHANNEL_NAME_MAX + 1];
  memcpy(name, r->text, r->text_len);
  name[r->text_len] = 0;
  int rc = 0;
  if (c->ch[r->chan].b)
    rc = SPY_EEXIST;
  else if (!name_allowed(s, name, r->text_len, &disc))
    rc = SPY_EACCES;
  schan *h = &c->ch[r->chan];
  bchan *b = NULL;
  if (rc == 0) {
    b = s->bchans;
    while (b && strcmp(b->name, name) != 0)
      b = b->next;
  }
  if (rc == 0 && !b)
    rc = bchan_open(s, name, disc, &b);
  if (rc == 0 && b->nsubs == b->subcap) {
    uint32_t cap = b->subcap ? b->subcap * 2 : 4;
    bsub *ns = realloc(b->subs, cap * sizeof *ns);
    if (ns) {
      b->subs = ns;
      b->subcap = cap;
    } else {
      rc = SPY_ENOMEM;
      if (!b->nsubs) /* just opened for this client: undo */
        bchan_release(s, b);
    }
  }
  if (rc < 0) {
    spy_wr32(code, (uint32_t)rc);
    send_rec(c, SPY_LINK_CLOSE, r->chan, code, 4, NULL, 0);
    if (rc == SPY_EACCES)
      refused_msg(c, "channel not served here", 0);
    return;
  }
  b->subs[b->nsubs++] = (bsub){.c = c, .chan = r->chan};
  h->b = b;
  h->lost = 0;
  uint8_t id[8];
  spy_wr64(id, spy_channel_id(b->bus));
  send_rec(c, SPY_LINK_OPENED, r->chan, id, 8, NULL, 0);
}

static owned_id *ids_find(bchan *b, uint64_t id) {
  for (uint32_t i = 0; i < b->nids; i++)
    if (b->ids[i].id == id)
      return &b->ids[i];
  return NULL;
}

/* A free slot in b's table (an idle entry is reused), or NULL. */
static owned_id *ids_slot(bchan *b, uint64_t now) {
  if (!b->ids && !(b->ids = calloc(IDS_MAX, sizeof *b->ids)))
    return NULL;
  if (b->nids < IDS_MAX)
    return &b->ids[b->nids++];
  for (uint32_t i = 0; i < b->nids; i++)
    if (now - b->ids[i].seen_ns > ID_IDLE_NS)
      return &b->ids[i];
  return NULL;
}

/* May client c, on its channel `chan` of b, post a message of `type`
 * naming consumer `id`? Returns 0 or why not; takes a free id for c. */
static const char *id_refusal(bchan *b, conn *c, int chan, uint32_t type,
                              uint64_t id) {
  uint64_t now = spy__net_mono_ns();
  owned_id *e = ids_find(b, id);
  if (e && (e->c != c || e->chan != chan) && now - e->seen_ns <= ID_IDLE_NS)
    return e->c ? "names another client's consumer" : "names a local consumer";
  if (!e) {
    if (type == SPY_MSG_UNSUBSCRIBE)
      return NULL; /* nobody here uses it: nothing to take */
    uint32_t mine = 0;
    for (uint32_t i = 0; i < b->nids; i++)
      mine += b->ids[i].c == c && b->ids[i].chan == chan;
    if (mine >= IDS_PER_CLIENT)
      return "too many consumer ids on one channel";
    if (!(e = ids_slot(b, now)))
      return "too many consumers on this channel";
  }
  *e = (owned_id){.id = id, .c = c, .chan = chan, .seen_ns = now};
  if (type == SPY_MSG_UNSUBSCRIBE)
    ids_remove(b, (uint32_t)(e - b->ids));
  return NULL;
}

/* A consumer message from the local bus (not one of ours: the bridge's
 * own posts do not come back): its id is a local consumer's. */
static void ids_note_local(bchan *b, const uint8_t *p, int n) {
  if (b->is_disc || n < (int)SPY_FRAME_MIN)
    return;
  uint32_t type = spy_rd32(p + 4);
  if (type != SPY_MSG_SUBSCRIBE && type != SPY_MSG_ACK &&
      type != SPY_MSG_RESYNC && type != SPY_MSG_UNSUBSCRIBE)
    return; /* the provider's frames and clock traffic: not a claim */
  uint64_t id = 0;
  if (frame_refusal(p, (uint32_t)n, 0, &id))
    return;
  uint64_t now = spy__net_mono_ns();
  owned_id *e = ids_find(b, id);
  if (e && e->c && now - e->seen_ns <= ID_IDLE_NS)
    return; /* a client's (a copy of its id on the bus is not a claim) */
  if (type == SPY_MSG_UNSUBSCRIBE) {
    if (e)
      ids_remove(b, (uint32_t)(e - b->ids));
    return;
  }
  if (e || (e = ids_slot(b, now)))
    *e = (owned_id){.id = id, .c = NULL, .chan = 0, .seen_ns = now};
}

/* One record from a client (TCP stream or one WebSocket message). */
static void on_client_rec(conn *c, const spy_link_rec *r) {
  spy_server *s = c->srv;
  if (!c->hello) {
    if (r->op != SPY_LINK_HELLO) {
      s->st.refused_bad++;
      send_error(c, SPY_EBADHEADER, "HELLO first");
      return;
    }
    if (r->version != SPY_LINK_VERSION) {
      s->st.refused_bad++;
      send_error(c, SPY_EBADVERSION, "link version not supported");
      return;
    }
    int given = r->text_len > 0;
    if (given && !token_ok(s, r->text, r->text_len)) {
      s->st.refused_forbidden++;
      logf_(s, "client %llu (%s): wrong token", (unsigned long long)c->id,
            c->peer);
      send_error(c, SPY_EACCES, "wrong token");
      return;
    }
    if (!c->loopback && !c->authed && !given) {
      s->st.refused_forbidden++;
      logf_(s, "client %llu (%s): no token (not from loopback)",
            (unsigned long long)c->id, c->peer);
      send_error(c, SPY_EACCES, "the token is needed off loopback");
      return;
    }
    c->hello = 1;
    c->deadline_ns = 0;
    uint8_t w[8];
    spy_wr32(w, SPY_LINK_VERSION);
    spy_wr32(w + 4, s->d.client_max);
    send_rec(c, SPY_LINK_WELCOME, 0, w, 8, NULL, 0);
    logf_(s, "client %llu (%s): link open%s", (unsigned long long)c->id,
          c->peer, c->is_ws ? " (WebSocket)" : "");
    return;
  }
  switch (r->op) {
  case SPY_LINK_OPEN: open_chan(c, r); break;
  case SPY_LINK_CLOSE: close_chan(c, r->chan); break;
  case SPY_LINK_CLOCK: {
    if (r->clock_reply)
      break;
    uint8_t t[24];
    spy_wr64(t, r->t[0]);
    spy_wr64(t + 8, c->last_rx_ns);
    spy_wr64(t + 16, spy__net_mono_ns());
    send_rec(c, SPY_LINK_CLOCK, 0, t, 24, NULL, 0);
    break;
  }
  case SPY_LINK_FRAME: {
    schan *h = &c->ch[r->chan];
    if (!h->b) {
      refused_msg(c, "channel not open", 0);
      break;
    }
    uint64_t named = 0;
    const char *why =
        frame_refusal(r->frame, r->frame_len, h->b->is_disc, &named);
    if (!why && !h->b->is_disc)
      why = id_refusal(h->b, c, r->chan, spy_rd32(r->frame + 4), named);
    if (why) {
      refused_msg(c, why, spy_rd32(r->frame + 4));
      break;
    }
    spy_channel_post(h->b->bus, r->frame, r->frame_len);
    break;
  }
  default:
    s->st.refused_bad++;
    send_error(c, SPY_EBADHEADER, "not a client record");
    break;
  }
}

/* Parses TCP link records from c->in. */
static void on_link_bytes(conn *c) {
  size_t off = 0;
  while (!c->dead && !c->close_when_sent) {
    spy_link_rec r;
    int n =
        spy_link_parse(c->in + off, c->in_len - off, c->srv->d.client_max, &r);
    if (n == 0)
      break;
    if (n < 0) {
      c->srv->st.refused_bad++;
      logf_(c->srv, "client %llu (%s): bad link record: %s",
            (unsigned long long)c->id, c->peer, spy_strerror(n));
      send_error(c, n, "bad link record");
      break;
    }
    on_client_rec(c, &r);
    off += (size_t)n;
  }
  if (c->dead)
    return;
  memmove(c->in, c->in + off, c->in_len - off);
  c->in_len -= off;
}

/* ---- WebSocket (wslay callbacks) ---------------------------------------- */

static ssize_t ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                          int flags, void *user) {
  (void)flags;
  conn *c = user;
  if (c->in_len) { /* bytes that came with the upgrade request */
    size_t n = len < c->in_len ? len : c->in_len;
    memcpy(buf, c->in, n);
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
    return (ssize_t)n;
  }
  ssize_t r = conn_read(c, buf, len);
  if (r == SPY_EAGAIN) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  if (r <= 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  c->last_rx_ns = spy__net_mono_ns();
  return r;
}

static ssize_t ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data,
                          size_t len, int flags, void *user) {
  (void)flags;
  conn *c = user;
  ssize_t r = conn_write(c, data, len);
  if (r == SPY_EAGAIN) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  if (r < 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  return r;
}

static void ws_msg_cb(wslay_event_context_ptr ctx,
                      const struct wslay_event_on_msg_recv_arg *arg,
                      void *user) {
  conn *c = user;
  if (c->dead || arg->opcode >= 8)
    return; /* ping, pong, close: wslay answers them */
  if (arg->opcode != WSLAY_BINARY_FRAME) {
    c->srv->st.refused_bad++;
    wslay_event_queue_close(ctx, WSLAY_CODE_UNSUPPORTED_DATA,
                            (const uint8_t *)"binary link records only", 24);
    return;
  }
  spy_link_rec r;
  int n = spy_link_parse(arg->msg, arg->msg_length, c->srv->d.client_max, &r);
  if (n <= 0 || (size_t)n != arg->msg_length) {
    c->srv->st.refused_bad++;
    logf_(c->srv, "client %llu (%s): bad link record in a WebSocket message",
          (unsigned long long)c->id, c->peer);
    wslay_event_queue_close(ctx, WSLAY_CODE_PROTOCOL_ERROR,
                            (const uint8_t *)"one link record per message", 27);
    return;
  }
  on_client_rec(c, &r);
}

/* ---- reading a connection ----------------------------------------------- */

static int in_reserve(conn *c, size_t want, size_t max) {
  if (c->in_cap - c->in_len >= want)
    return 0;
  size_t cap = c->in_cap ? c->in_cap : 4096;
  while (cap - c->in_len < want && cap < max)
    cap *= 2;
  if (cap > max)
    cap = max;
  if (cap <= c->in_len)
    return SPY_ENOBUFS;
  uint8_t *nb = realloc(c->in, cap);
  if (!nb)
    return SPY_ENOMEM;
  c->in = nb;
  c->in_cap = cap;
  return 0;
}

static void on_readable(conn *c) {
  spy_server *s = c->srv;
  if (c->state == S_TLS) {
    int r = SSL_accept(c->ssl);
    if (r == 1) {
      c->state = S_NEW;
    } else {
      int e = SSL_get_error(c->ssl, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        set_events(c, EPOLLIN | (e == SSL_ERROR_WANT_WRITE ? EPOLLOUT : 0));
        return;
      }
      s->st.refused_bad++;
      conn_kill(c, "TLS handshake failed");
      return;
    }
  }
  if (c->state == S_WS) {
    if (wslay_event_recv(c->ws) < 0) {
      conn_kill(c, NULL);
      return;
    }
    if (!c->dead && flush_out(c) < 0)
      conn_kill(c, NULL);
    return;
  }
  /* HTTP head, or TCP link records. */
  size_t max = c->state == S_LINK || c->state == S_NEW
                   ? SPY_LINK_HEADER_BYTES + s->d.client_max
                   : s->d.header_max;
  if (c->state == S_NEW && max < s->d.header_max)
    max = s->d.header_max;
  for (int turns = 0; turns < 64 && !c->dead; turns++) {
    if (in_reserve(c, 4096, max) < 0 && c->in_cap == c->in_len) {
      if (c->state == S_HTTP || c->state == S_NEW)
        refuse(c, 431, "Request Header Fields Too Large",
               "the request head is too long");
      break;
    }
    ssize_t n = conn_read(c, c->in + c->in_len, c->in_cap - c->in_len);
    if (n == SPY_EAGAIN)
      break;
    if (n <= 0) {
      conn_kill(c, c->hello ? "disconnected" : NULL);
      return;
    }
    c->in_len += (size_t)n;
    c->last_rx_ns = spy__net_mono_ns();
    if (c->close_when_sent) {
      c->in_len = 0; /* refused already: what follows is ignored */
      continue;
    }
    if (c->state == S_NEW && c->in_len >= 4) {
      int http = memcmp(c->in, "GET ", 4) == 0 ||
                 (c->in[0] >= 'A' && c->in[0] <= 'Z' && c->in[1] >= 'A' &&
                  c->in[1] <= 'Z' && c->in[2] >= 'A' && c->in[2] <= 'Z');
      c->state = http ? S_HTTP : S_LINK;
    }
    if (c->state == S_HTTP) {
      uint8_t *e = memmem(c->in, c->in_len, "\r\n\r\n", 4);
      if (e) {
        on_http(c, (size_t)(e - c->in) + 4);
        if (c->state == S_WS && !c->dead) {
          if (wslay_event_recv(c->ws) < 0)
            conn_kill(c, NULL);
          break;
        }
      } else if (c->in_len >= s->d.header_max) {
        refuse(c, 431, "Request Header Fields Too Large",
               "the request head is too long");
      }
    } else if (c->state == S_LINK) {
      on_link_bytes(c);
    }
  }
  if (!c->dead && flush_out(c) < 0)
    conn_kill(c, NULL);
}

/* ---- the bus side ------------------------------------------------------- */

/* Discovery frames of other providers are not relayed by an in-process
 * server (it serves its own provider only). */
static int relay_ok(const spy_server *s, const bchan *b, const uint8_t *p,
                    int n) {
  if (!s->d.only_provider || !b->is_disc)
    return 1;
  spy_frame f;
  spy_section sec;
  spy_provider_info info;
  return spy_frame_decode(p, (size_t)n, &f, NULL) == 0 &&
         spy_frame_find_section(&f, SPY_SEC_PROVIDER, &sec) &&
         spy_get_provider(&sec, &info) == 0 && info.id == s->d.only_provider;
}

/* One bus frame to one client; full queue: this client loses it, alone. */
static void relay_one(spy_server *s, const bsub *u, const spy_recv_info *info,
                      int n) {
  conn *c = u->c;
  schan *h = &c->ch[u->chan];
  uint8_t pre[8];
  uint64_t lost = (uint64_t)h->lost + info->lost;
  spy_wr32(pre, lost > UINT32_MAX ? UINT32_MAX : (uint32_t)lost);
  spy_wr32(pre + 4, 0);
  if (send_rec(c, SPY_LINK_FRAME, (uint16_t)u->chan, pre, 8, s->rx, (size_t)n) <
      0) {
    h->lost++;
    c->dropped++;
    c->dropped_bytes += (uint64_t)n;
    s->st.dropped++;
    return;
  }
  h->lost = 0;
  c->frames_sent++;
  c->bytes_sent += (uint64_t)n;
  s->st.frames_relayed++;
  s->st.bytes_relayed += (uint64_t)n;
}

/* Drains b's bus handle: each frame is received once and fanned out to
 * every client that opened the name. */
static void on_bus(spy_server *s, bchan *b) {
  b->backlog = 0;
  for (int k = 0; k < BUS_BURST; k++) {
    spy_recv_info info;
    int n = spy_channel_recv(b->bus, s->rx, SPY_FRAME_MAX, 0, &info);
    if (n == SPY_EAGAIN)
      break;
    if (n == SPY_ENOBUFS) {
      for (uint32_t i = 0; i < b->nsubs; i++)
        b->subs[i].c->ch[b->subs[i].chan].lost++;
      continue;
    }
    if (n < 0)
      break;
    if (!relay_ok(s, b, s->rx, n))
      continue;
    ids_note_local(b, s->rx, n);
    for (uint32_t i = 0; i < b->nsubs; i++)
      relay_one(s, &b->subs[i], &info, n);
    if (k == BUS_BURST - 1)
      b->backlog = 1;
  }
  /* A failed client leaves b->subs (swapping the last one in): walk
   * down, so none is skipped; b may close with its last client. */
  for (int i = (int)b->nsubs - 1; i >= 0; i--) {
    if (i >= (int)b->nsubs)
      continue;
    conn *c = b->subs[i].c;
    if (!c->dead && flush_out(c) < 0)
      conn_kill(c, NULL);
  }
}

/* ---- accept, timers ------------------------------------------------------ */

static int addr_loopback(const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *v4 = (const void *)a;
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (a->ss_family == AF_INET6) {
    const struct sockaddr_in6 *v6 = (const void *)a;
    if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr))
      return 1;
    return IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) &&
           v6->sin6_addr.s6_addr[12] == 127;
  }
  return 0;
}

static void on_accept(spy_server *s, int lfd) {
  for (int k = 0; k < 64; k++) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int fd =
        accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE)
        logf_(s, "accept: %s", strerror(errno));
      return;
    }
    if (s->nconns >= s->d.max_clients) {
      static const char full[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
          "Content-Length: 17\r\nConnection: close\r\n\r\ntoo many clients\n";
      if (send(fd, full, sizeof full - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* the refusal is best effort; the close is the answer */
      }
      close(fd);
      s->st.refused_full++;
      uint64_t now = spy__net_mono_ns();
      if (now - s->last_full_log_ns > 1000000000ull) {
        logf_(s, "refused a client: --max-clients %u reached",
              s->d.max_clients);
        s->last_full_log_ns = now;
      }
      continue;
    }
    conn *c = calloc(1, sizeof *c);
    if (!c) {
      close(fd);
      continue;
    }
    spy__net_nonblock(fd);
    c->srv = s;
    c->fd = fd;
    c->id = ++s->next_id;
    c->loopback = addr_loopback(&sa);
    char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";
    getnameinfo((struct sockaddr *)&sa, sl, host, sizeof host, port,
                sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(c->peer, sizeof c->peer,
             sa.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
    c->last_rx_ns = spy__net_mono_ns();
    c->deadline_ns = c->last_rx_ns + (uint64_t)s->d.handshake_ms * 1000000ull;
    c->state = S_NEW;
    if (s->tls) {
      c->ssl = SSL_new(s->tls);
      if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1) {
        SSL_free(c->ssl);
        close(fd);
        free(c);
        continue;
      }
      c->state = S_TLS;
    }
    c->ev = (ep){.kind = K_CONN, .c = c, .fd = fd};
    c->want_events = EPOLLIN;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &c->ev};
    epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e);
    s->conns[s->nconns++] = c;
    s->st.clients = s->nconns;
    s->st.accepted++;
  }
}

static void sweep(spy_server *s) {
  uint64_t now = spy__net_mono_ns();
  for (uint32_t i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    /* Until HELLO (an HTTP exchange never gets one) the handshake clock
     * runs: slow headers, or a refusal the client does not read. */
    if (!c->hello && c->deadline_ns && now > c->deadline_ns) {
      s->st.refused_bad++;
      conn_kill(c, c->state == S_WS || c->state == S_LINK
                       ? "no HELLO in time"
                       : "handshake not done in time");
      i--;
    } else if (now - c->last_rx_ns > (uint64_t)s->d.idle_ms * 1000000ull) {
      conn_kill(c, "idle");
      i--;
    }
  }
}

/* ---- create / run / destroy --------------------------------------------- */

static int host_is_loopback(const char *h) {
  struct in_addr a4;
  struct in6_addr a6;
  if (strcmp(h, "localhost") == 0)
    return 1;
  if (inet_pton(AF_INET, h, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, h, &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6);
  return 0;
}

static int bind_one(spy_server *s, const char *host, int port, int required) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV | AI_PASSIVE},
                  *res = NULL;
  char ps[8];
  snprintf(ps, sizeof ps, "%d", port);
  int g = getaddrinfo(host, ps, &hints, &res);
  if (g != 0) {
    logf_(s, "cannot listen on %s: %s", host, gai_strerror(g));
    return SPY_EINVAL;
  }
  int fd =
      socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -errno : 0;
  int one = 1;
  if (rc == 0) {
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (res->ai_family == AF_INET6)
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 128) < 0)
      rc = -errno;
  }
  int fam = res->ai_family;
  freeaddrinfo(res);
  if (rc < 0) {
    if (fd >= 0)
      close(fd);
    if (rc == -EADDRINUSE) {
      logf_(s,
            "port %d on %s is already in use (another spyglass serve? "
            "choose one with --listen ADDR:PORT)",
            port, host);
      return SPY_EBUSY;
    }
    if (!required && (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT))
      return 0; /* no IPv6 loopback on this host: IPv4 is enough */
    logf_(s, "cannot listen on %s port %d: %s", host, port, strerror(-rc));
    return rc;
  }
  if (s->port == 0) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(fam == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                    : ((struct sockaddr_in *)&sa)->sin_port);
  }
  int i = s->nlisten++;
  s->lfd[i] = fd;
  s->lev[i] = (ep){.kind = K_LISTEN, .fd = fd};
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = &s->lev[i]};
  epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e);
  return 0;
}

static int setup_tls(spy_server *s) {
  s->tls = SSL_CTX_new(TLS_server_method());
  if (!s->tls)
    return SPY_ENOMEM;
  SSL_CTX_set_min_proto_version(s->tls, TLS1_2_VERSION);
  SSL_CTX_set_mode(s->tls, SSL_MODE_ENABLE_PARTIAL_WRITE |
                               SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(s->tls, s->d.tls_cert) != 1 ||
      SSL_CTX_use_PrivateKey_file(s->tls, s->d.tls_key, SSL_FILETYPE_PEM) !=
          1 ||
      SSL_CTX_check_private_key(s->tls) != 1) {
    char e[256];
    ERR_error_string_n(ERR_get_error(), e, sizeof e);
    logf_(s, "TLS: cannot use %s / %s: %s", s->d.tls_cert, s->d.tls_key, e);
    return SPY_EINVAL;
  }
  return 0;
}

int spy_server_create(spy_server **out, const spy_server_desc *desc) {
  *out = NULL;
  spy_server *s = calloc(1, sizeof *s);
  if (!s)
    return SPY_ENOMEM;
  s->d = desc ? *desc : (spy_server_desc){0};
  s->ep = s->stopfd = -1;
  if (!s->d.max_clients)
    s->d.max_clients = 64;
  if (!s->d.queue_bytes)
    s->d.queue_bytes = 8u << 20;
  if (!s->d.client_max)
    s->d.client_max = SPY_LINK_CLIENT_MAX;
  if (!s->d.header_max)
    s->d.header_max = 8192;
  if (!s->d.handshake_ms)
    s->d.handshake_ms = 5000;
  if (!s->d.idle_ms)
    s->d.idle_ms = 60000;
  int rc = 0;
  if (s->d.max_clients > 4096 || s->d.client_max > SPY_LINK_PAYLOAD_MAX ||
      s->d.client_max < 256 || s->d.queue_bytes < 65536 ||
      s->d.header_max < 512 || s->d.header_max > (1u << 20) ||
      (!s->d.tls_cert != !s->d.tls_key)) {
    logf_(s, "bad limits (or --tls-cert without --tls-key)");
    rc = SPY_EINVAL;
  }
  char host[256] = "127.0.0.1", port[8] = "7420";
  if (rc == 0 && s->d.listen &&
      spy__net_split(s->d.listen, host, sizeof host, port, sizeof port) < 0) {
    logf_(s, "--listen wants ADDR:PORT (IPv6 in brackets), not '%s'",
          s->d.listen);
    rc = SPY_EINVAL;
  }
  snprintf(s->listen_host, sizeof s->listen_host, "%s", host);
  if (rc == 0 && s->d.token) {
    size_t tl = strlen(s->d.token);
    if (tl < 16 || tl > SPY_LINK_TOKEN_MAX) {
      logf_(s, "the token must be 16..%u characters (128 bits or more)",
            SPY_LINK_TOKEN_MAX);
      rc = SPY_EINVAL;
    } else {
      memcpy(s->token, s->d.token, tl + 1);
    }
  }
  if (rc == 0 && !s->d.token) {
    if (!host_is_loopback(host)) {
      logf_(s,
            "listening on %s needs --token-file (a client off this host "
            "must prove it may read the bus)",
            host);
      rc = SPY_EINVAL;
    } else {
      unsigned char r[16];
      if (RAND_bytes(r, sizeof r) != 1) {
        rc = SPY_EIO;
      } else {
        for (int i = 0; i < 16; i++)
          snprintf(s->token + 2 * i, 3, "%02x", r[i]);
        s->token_generated = 1;
      }
    }
  }
  if (rc == 0 && s->d.tls_cert)
    rc = setup_tls(s);
  if (rc == 0) {
    s->conns = calloc(s->d.max_clients, sizeof *s->conns);
    s->rx = malloc(SPY_FRAME_MAX);
    s->scratch = malloc(SPY_LINK_HEADER_BYTES + 64 + SPY_FRAME_MAX);
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!s->conns || !s->rx || !s->scratch)
      rc = SPY_ENOMEM;
    else if (s->ep < 0 || s->stopfd < 0)
      rc = -errno;
  }
  if (rc == 0) {
    s->stopev = (ep){.kind = K_STOP, .fd = s->stopfd};
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &s->stopev};
    epoll_ctl(s->ep, EPOLL_CTL_ADD, s->stopfd, &e);
    int p = atoi(port);
    if (s->d.listen) {
      rc = bind_one(s, host, p, 1);
    } else {
      rc = bind_one(s, "127.0.0.1", p, 1);
      if (rc == 0)
        rc = bind_one(s, "::1", s->port, 0);
    }
  }
  if (rc < 0) {
    spy_server_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

static void free_dead(spy_server *s) {
  while (s->dead) {
    conn *c = s->dead;
    s->dead = c->next_dead;
    conn_free(c);
  }
  while (s->dead_b) {
    bchan *b = s->dead_b;
    s->dead_b = b->next;
    free(b->subs);
    free(b->ids);
    free(b);
  }
}

int spy_server_run(spy_server *s, int timeout_ms) {
  uint64_t end = timeout_ms >= 0
                     ? spy__net_mono_ns() + (uint64_t)timeout_ms * 1000000ull
                     : UINT64_MAX;
  uint64_t next_sweep = 0;
  struct epoll_event evs[64];
  while (!atomic_load(&s->stopping)) {
    uint64_t now = spy__net_mono_ns();
    if (now >= end)
      break;
    if (now >= next_sweep) {
      sweep(s);
      /* A doorbell a poster could not ring (bus.h, spy_channel_fd) costs
       * at most this long. */
      for (bchan *b = s->bchans, *nx; b; b = nx) {
        nx = b->next;
        if (b->bus)
          on_bus(s, b);
      }
      free_dead(s);
      next_sweep = now + 100000000ull;
    }
    int backlog = 0;
    for (bchan *b = s->bchans; b && !backlog; b = b->next)
      backlog |= b->backlog;
    int wait = backlog ? 0 : 100;
    int n = epoll_wait(s->ep, evs, 64, wait);
    if (n < 0 && errno != EINTR)
      return -errno;
    for (int i = 0; i < n; i++) {
      ep *e = evs[i].data.ptr;
      if (e->kind == K_STOP)
        continue;
      if (e->kind == K_LISTEN) {
        on_accept(s, e->fd);
        continue;
      }
      if (e->kind == K_BUS) {
        if (e->b->bus)
          on_bus(s, e->b);
        continue;
      }
      conn *c = e->c;
      if (!c || c->dead)
        continue;
      if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        on_readable(c);
      if (!c->dead && (evs[i].events & EPOLLOUT)) {
        if (c->state == S_TLS)
          on_readable(c);
        else if (flush_out(c) < 0)
          conn_kill(c, NULL);
      }
    }
    if (backlog)
      for (bchan *b = s->bchans, *nx; b; b = nx) {
        nx = b->next; /* b may close (and leave the list) in on_bus */
        if (b->backlog && b->bus)
          on_bus(s, b);
      }
    free_dead(s);
  }
  return 0;
}

void spy_server_stop(spy_server *s) {
  atomic_store(&s->stopping, 1);
  uint64_t one = 1;
  if (s->stopfd >= 0 && write(s->stopfd, &one, sizeof one) < 0) {
    /* the counter is full: the loop is woken already */
  }
}

void spy_server_destroy(spy_server *s) {
  if (!s)
    return;
  while (s->nconns)
    conn_kill(s->conns[0], NULL);
  free_dead(s);
  for (int i = 0; i < s->nlisten; i++)
    close(s->lfd[i]);
  if (s->ep >= 0)
    close(s->ep);
  if (s->stopfd >= 0)
    close(s->stopfd);
  if (s->tls)
    SSL_CTX_free(s->tls);
  free(s->conns);
  free(s->rx);
  free(s->scratch);
  free(s);
}

int spy_server_port(const spy_server *s) { return s->port; }
const char *spy_server_token(const spy_server *s) { return s->token; }
int spy_server_token_generated(const spy_server *s) {
  return s->token_generated;
}

void spy_server_get_stats(const spy_server *s, spy_server_stats *out) {
  *out = s->st;
}

static void *server_main(void *arg) {
  spy_server_run(arg, -1);
  return NULL;
}

int spy_server_thread_start(spy_server **out, const spy_server_desc *desc) {
  int rc = spy_server_create(out, desc);
  if (rc < 0)
    return rc;
  rc = pthread_create(&(*out)->thread, NULL, server_main, *out);
  if (rc != 0) {
    spy_server_destroy(*out);
    *out = NULL;
    return -rc;
  }
  return 0;
}

void spy_server_thread_stop(spy_server *s) {
  if (!s)
    return;
  spy_server_stop(s);
  pthread_join(s->thread, NULL);
  spy_server_destroy(s);
}
