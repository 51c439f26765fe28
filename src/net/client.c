/* client.c — the remote channel backend: spy_channel_* over one TCP link
 * to a bridge (`spyglass serve` or a provider's in-process server).
 *
 * A link is one connection carrying up to SPY_LINK_CHANNELS_MAX channels.
 * It has no thread: whoever waits on any of its channels reads the socket
 * and sorts the records into per-channel queues (bounded: the oldest
 * frames are dropped and counted as lost), so a consumer polling its data
 * channel does not lose the discovery channel's frames. The first frame
 * for the channel being received, when nothing is queued ahead of it,
 * goes straight from the socket buffer into the caller's buffer (no queue
 * node, one copy). A dropped
 * connection is made again with backoff and its channels reopened.
 */
#include <errno.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/net_internal.h"
#include "spyglass/net.h"
#include "spyglass/wire.h"

#define QUEUE_MAX (16u << 20) /* bytes queued per channel */
#define CONNECT_MS 5000
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 2000
#define SPIN_NS 20000        /* a receive watches this long before it sleeps */
#define SPIN_AFTER_NS 100000 /* ... if frames came this close together */

typedef struct qnode {
  struct qnode *next;
  uint32_t lost, len;
  uint8_t data[];
} qnode;

struct netlink;

typedef struct lchan {
  struct netlink *l;
  uint16_t num;
  int used, opened;
  int32_t closed; /* the server closed it: the reason (< 0) */
  char name[SPY_CHANNEL_NAME_MAX + 1];
  uint64_t id;
  qnode *head, *tail;
  size_t qbytes;
  uint32_t lost; /* dropped here, added to the next frame's lost */
  spy_channel_stats st;
} lchan;

typedef struct netlink {
  char host[256], port[8];
  SSL_CTX *tls; /* "tls://HOST:PORT": TLS, the server's name verified */
  SSL *ssl;
  char token[SPY_LINK_TOKEN_MAX + 1];
  int fd;
  int welcomed;
  int32_t error; /* the server's ERROR, or 0 */
  uint8_t *rx;
  size_t rx_off, rx_len, rx_cap; /* records not sorted yet: [rx_off, rx_len) */
  uint64_t retry_ns, backoff_ms;
  uint64_t last_rx_ns, rx_gap_ns; /* the last frame received, and how long
                                     after the one before */
  lchan ch[SPY_LINK_CHANNELS_MAX];
  /* clock: the reply to the round in flight */
  uint64_t clk_t0, clk_t[3];
  int clk_got;
  /* A receive in progress (ch_recv): its channel's next frame, if none is
   * queued, is copied to buf directly; got is its length (or
   * SPY_ENOBUFS), 0 while none came. */
  struct {
    struct lchan *c;
    void *buf;
    size_t cap;
    spy_recv_info *info;
    int got;
  } direct;
} netlink;

static uint64_t now_ms(void) { return spy__net_mono_ns() / 1000000ull; }

static void drop_conn(netlink *l) {
  if (l->ssl) {
    SSL_free(l->ssl);
    l->ssl = NULL;
  }
  if (l->fd >= 0)
    close(l->fd);
  l->fd = -1;
  l->welcomed = 0;
  l->rx_off = l->rx_len = 0;
  for (unsigned i = 1; i < SPY_LINK_CHANNELS_MAX; i++)
    l->ch[i].opened = 0;
  l->retry_ns = spy__net_mono_ns() + l->backoff_ms * 1000000ull;
  l->backoff_ms =
      l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : l->backoff_ms * 2;
}

/* Plain or TLS I/O: > 0 bytes, 0 end, -EAGAIN (with *want the poll
 * events to wait for), other < 0 errors. */
static ssize_t io_read(netlink *l, void *b, size_t n, short *want) {
  *want = POLLIN;
  if (l->ssl) {
    int r = SSL_read(l->ssl, b, (int)(n > 1 << 30 ? 1 << 30 : n));
    if (r > 0)
      return r;
    int e = SSL_get_error(l->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      *want = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
      return -EAGAIN;
    }
    return e == SSL_ERROR_ZERO_RETURN ? 0 : -EIO;
  }
  ssize_t r = recv(l->fd, b, n, 0);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return -EAGAIN;
  return r < 0 ? -errno : r;
}

static ssize_t io_write(netlink *l, const void *b, size_t n, short *want) {
  *want = POLLOUT;
  if (l->ssl) {
    int r = SSL_write(l->ssl, b, (int)(n > 1 << 30 ? 1 << 30 : n));
    if (r > 0)
      return r;
    int e = SSL_get_error(l->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      *want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      return -EAGAIN;
    }
    return -EIO;
  }
  ssize_t w = send(l->fd, b, n, MSG_NOSIGNAL);
  if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return -EAGAIN;
  return w < 0 ? -errno : w;
}

/* Writes all of p, waiting for the socket up to 1 s at a time. */
static int send_all(netlink *l, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    short want;
    ssize_t w = io_write(l, b, n, &want);
    if (w > 0) {
      b += w;
      n -= (size_t)w;
      continue;
    }
    if (w == -EAGAIN) {
      struct pollfd pf = {.fd = l->fd, .events = want};
      if (poll(&pf, 1, 1000) > 0)
        continue;
    }
    int rc = w < 0 && w != -EAGAIN ? (int)w : SPY_EPIPE;
    drop_conn(l);
    return rc;
  }
  return 0;
}

static int send_rec(netlink *l, uint8_t op, uint16_t chan, const void *a,
                    size_t alen, const void *b, size_t blen) {
  if (l->fd < 0)
    return SPY_EGONE;
  uint8_t hdr[SPY_LINK_HEADER_BYTES];
  spy_link_header(hdr, op, chan, (uint32_t)(alen + blen));
  int rc = send_all(l, hdr, sizeof hdr);
  if (rc == 0 && alen)
    rc = send_all(l, a, alen);
  if (rc == 0 && blen)
    rc = send_all(l, b, blen);
  return rc;
}

static void queue_push(lchan *c, const spy_link_rec *r) {
  while (c->head && c->qbytes + r->frame_len > QUEUE_MAX) {
    qnode *old = c->head; /* too far behind: the oldest goes */
    c->head = old->next;
    if (!c->head)
      c->tail = NULL;
    c->qbytes -= old->len;
    c->lost += 1 + old->lost;
    c->st.lost += 1;
    free(old);
  }
  qnode *q = malloc(sizeof *q + r->frame_len);
  if (!q) {
    c->lost++;
    c->st.lost++;
    return;
  }
  q->next = NULL;
  q->lost = r->lost + c->lost;
  c->lost = 0;
  q->len = r->frame_len;
  memcpy(q->data, r->frame, r->frame_len);
  if (c->tail)
    c->tail->next = q;
  else
    c->head = q;
  c->tail = q;
  c->qbytes += q->len;
  c->st.lost += r->lost;
}

/* Delivers frame record r of c into buf (the ch_recv in progress). */
static int take(lchan *c, const spy_link_rec *r, void *buf, size_t cap,
                spy_recv_info *info) {
  uint32_t lost = r->lost + c->lost;
  c->lost = 0;
  c->st.lost += r->lost;
  if (info) {
    info->sender = c->id;
    info->lost = lost;
    info->len = r->frame_len;
  }
  if (r->frame_len > cap) {
    c->st.oversize++;
    return SPY_ENOBUFS;
  }
  memcpy(buf, r->frame, r->frame_len);
  c->st.received++;
  c->st.bytes_received += r->frame_len;
  return (int)r->frame_len;
}

static void on_rec(netlink *l, const spy_link_rec *r) {
  lchan *c = r->chan ? &l->ch[r->chan] : NULL;
  switch (r->op) {
  case SPY_LINK_WELCOME: l->welcomed = 1; break;
  case SPY_LINK_OPENED:
    if (c->used) {
      c->opened = 1;
      c->id = r->id;
    }
    break;
  case SPY_LINK_CLOSE:
    if (c->used) {
      c->opened = 0;
      c->closed = r->code < 0 ? r->code : SPY_EGONE;
    }
    break;
  case SPY_LINK_FRAME:
    if (c->used && c->opened) {
      if (l->direct.c == c && !l->direct.got && !c->head)
        l->direct.got =
            take(c, r, l->direct.buf, l->direct.cap, l->direct.info);
      else
        queue_push(c, r);
    }
    break;
  case SPY_LINK_CLOCK:
    if (r->clock_reply && r->t[0] == l->clk_t0) {
      memcpy(l->clk_t, r->t, sizeof l->clk_t);
      l->clk_got = 1;
    }
    break;
  case SPY_LINK_ERROR: l->error = r->code < 0 ? r->code : SPY_EACCES; break;
  default: break; /* HELLO / OPEN are the client's own */
  }
}

/* Sorts the complete records buffered in rx. It stops after a frame has
 * landed in a receive's own buffer (l->direct): the records after it stay
 * buffered for the next call, so a burst read at once reaches the caller
 * frame by frame with one copy each, never through the queue (a heap
 * block and a second copy per frame). Returns 1 if it handled a record, 0
 * if there was none complete, -1 if the connection was dropped. */
static int sort_rx(netlink *l) {
  int any = 0;
  size_t off = l->rx_off;
  while (!l->direct.got) {
    spy_link_rec r;
    int c =
        spy_link_parse(l->rx + off, l->rx_len - off, SPY_LINK_PAYLOAD_MAX, &r);
    if (c == 0)
      break;
    if (c < 0) {
      if (!l->welcomed && l->rx_len - off >= 12 &&
          memcmp(l->rx + off, "HTTP/1.1 503", 12) == 0)
        l->error = SPY_EBUSY;
      else if (!l->welcomed)
        l->error = SPY_EBADHEADER;
      drop_conn(l);
      return -1;
    }
    on_rec(l, &r);
    any = 1;
    off += (size_t)c;
    if (l->fd < 0)
      return -1;
  }
  l->rx_off = off;
  if (off == l->rx_len)
    l->rx_off = l->rx_len = 0;
  return any;
}

/* Sorts what is buffered, then reads what the socket has (waiting up to
 * timeout_ms for it, unless the buffer gave something) and sorts that.
 * Returns 1 if anything arrived, 0 if not, < 0 when the connection
 * ended. */
static int read_some(netlink *l, int timeout_ms) {
  int got = 0;
  if (l->rx_off < l->rx_len) {
    int r = sort_rx(l);
    if (r < 0)
      return -1;
    if (l->direct.got)
      return 1;
    if (r > 0) {
      got = 1;
      timeout_ms = 0; /* progress already: do not sleep */
    }
  }
  struct pollfd pf = {.fd = l->fd, .events = POLLIN};
  /* TLS may hold decrypted bytes the socket no longer shows. */
  if (!(l->ssl && SSL_pending(l->ssl)) && poll(&pf, 1, timeout_ms) <= 0)
    return got;
  for (;;) {
    if (l->rx_off) { /* only a partial record is left: to the front */
      memmove(l->rx, l->rx + l->rx_off, l->rx_len - l->rx_off);
      l->rx_len -= l->rx_off;
      l->rx_off = 0;
    }
    if (l->rx_cap - l->rx_len < 65536 &&
        l->rx_cap < SPY_LINK_PAYLOAD_MAX + 2 * SPY_LINK_HEADER_BYTES) {
      size_t nc = l->rx_cap ? l->rx_cap * 2 : 1u << 17;
      uint8_t *nb = realloc(l->rx, nc);
      if (!nb)
        break;
      l->rx = nb;
      l->rx_cap = nc;
    }
    size_t room = l->rx_cap - l->rx_len;
    if (!room)
      break;
    short want;
    ssize_t n = io_read(l, l->rx + l->rx_len, room, &want);
    if (n == 0 || (n < 0 && n != -EAGAIN)) {
      if (!l->welcomed && l->rx_len >= 12 &&
          memcmp(l->rx, "HTTP/1.1 503", 12) == 0)
        l->error = SPY_EBUSY; /* refused before the link began: full */
      drop_conn(l);
      return -1;
    }
    if (n < 0)
      break;
    l->rx_len += (size_t)n;
    got = 1;
    if (sort_rx(l) < 0)
      return -1;
    /* A frame for the waiting receive: the rest can wait in the socket. A
     * plain socket that gave less than asked for is empty: the next poll
     * says when there is more (reading on to EAGAIN would cost each
     * received frame a second system call). TLS may hold more decrypted
     * bytes, so it reads on. */
    if (l->direct.got || (!l->ssl && (size_t)n < room))
      break;
  }
  return got;
}

/* TLS over the connected socket; the certificate must name l->host. */
static int tls_handshake(netlink *l) {
  l->ssl = SSL_new(l->tls);
  if (!l->ssl || SSL_set_fd(l->ssl, l->fd) != 1)
    return SPY_ENOMEM;
  SSL_set_tlsext_host_name(l->ssl, l->host);
  SSL_set1_host(l->ssl, l->host);
  SSL_set_verify(l->ssl, SSL_VERIFY_PEER, NULL);
  uint64_t end = now_ms() + CONNECT_MS;
  for (;;) {
    int r = SSL_connect(l->ssl);
    if (r == 1)
      return 0;
    int e = SSL_get_error(l->ssl, r);
    if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
        now_ms() >= end)
      return e == SSL_ERROR_SSL ? SPY_EACCES : SPY_ETIMEDOUT;
    struct pollfd pf = {.fd = l->fd,
                        .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
    poll(&pf, 1, (int)(end - now_ms()));
  }
}

/* Connects, says HELLO, waits for WELCOME, reopens the channels. */
static int connect_now(netlink *l) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(l->host, l->port, &hints, &res);
  if (rc != 0)
    return SPY_EINVAL;
  rc = SPY_ECONNREFUSED;
  for (struct addrinfo *a = res; a && l->fd < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      rc = -errno;
      continue;
    }
    spy__net_nonblock(fd);
    if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
      rc = -errno;
      close(fd);
      continue;
    }
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t el = sizeof err;
    if (poll(&pf, 1, CONNECT_MS) <= 0) {
      rc = SPY_ETIMEDOUT;
      close(fd);
      continue;
    }
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
      rc = -err;
      close(fd);
      continue;
    }
    l->fd = fd;
  }
  freeaddrinfo(res);
  if (l->fd < 0)
    return rc;
  if (l->tls) {
    rc = tls_handshake(l);
    if (rc < 0) {
      drop_conn(l);
      return rc;
    }
  }
  uint8_t hello[12];
  size_t tl = strlen(l->token);
  spy_wr32(hello, SPY_LINK_MAGIC);
  spy_wr32(hello + 4, SPY_LINK_VERSION);
  spy_wr16(hello + 8, (uint16_t)tl);
  spy_wr16(hello + 10, 0);
  l->error = 0;
  rc = send_rec(l, SPY_LINK_HELLO, 0, hello, sizeof hello, l->token, tl);
  uint64_t end = now_ms() + CONNECT_MS;
  while (rc == 0 && !l->welcomed && l->fd >= 0 && now_ms() < end)
    read_some(l, (int)(end - now_ms()));
  if (!l->welcomed) {
    rc = l->error ? l->error : rc < 0 ? rc : SPY_ETIMEDOUT;
    if (l->fd >= 0)
      drop_conn(l);
    return rc;
  }
  l->backoff_ms = BACKOFF_MIN_MS;
  for (unsigned i = 1; i < SPY_LINK_CHANNELS_MAX; i++)
    if (l->ch[i].used && l->ch[i].closed == 0)
      send_rec(l, SPY_LINK_OPEN, (uint16_t)i, l->ch[i].name,
               strlen(l->ch[i].name), NULL, 0);
  return 0;
}

/* Runs the link for up to timeout_ms: reconnects when due, reads. */
static void pump(netlink *l, int timeout_ms) {
  if (l->fd < 0) {
    uint64_t now = spy__net_mono_ns();
    if (now >= l->retry_ns && connect_now(l) == 0)
      return;
    if (l->fd < 0) {
      if (timeout_ms > 0) {
        uint64_t wait = l->retry_ns > now ? (l->retry_ns - now) / 1000000 : 0;
        if (wait > (uint64_t)timeout_ms)
          wait = (uint64_t)timeout_ms;
        poll(NULL, 0, (int)wait);
      }
      return;
    }
  }
  read_some(l, timeout_ms);
}

/* ---- link ops ------------------------------------------------------------ */

static int link_open(void **out, const char *addr, const char *token) {
  *out = NULL;
  netlink *l = calloc(1, sizeof *l);
  if (!l)
    return SPY_ENOMEM;
  l->fd = -1;
  l->backoff_ms = BACKOFF_MIN_MS;
  if (addr && strncmp(addr, "tls://", 6) == 0) {
    addr += 6;
    l->tls = SSL_CTX_new(TLS_client_method());
    if (!l->tls) {
      free(l);
      return SPY_ENOMEM;
    }
    SSL_CTX_set_min_proto_version(l->tls, TLS1_2_VERSION);
    SSL_CTX_set_mode(l->tls, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    const char *ca = getenv("SPYGLASS_CA");
    if (ca && *ca ? SSL_CTX_load_verify_locations(l->tls, ca, NULL) != 1
                  : SSL_CTX_set_default_verify_paths(l->tls) != 1) {
      SSL_CTX_free(l->tls);
      free(l);
      return SPY_EINVAL;
    }
  }
  if (spy__net_split(addr, l->host, sizeof l->host, l->port, sizeof l->port) <
          0 ||
      (token && strlen(token) > SPY_LINK_TOKEN_MAX)) {
    free(l);
    return SPY_EINVAL;
  }
  snprintf(l->token, sizeof l->token, "%s", token ? token : "");
  for (unsigned i = 0; i < SPY_LINK_CHANNELS_MAX; i++) {
    l->ch[i].l = l;
    l->ch[i].num = (uint16_t)i;
  }
  int rc = connect_now(l);
  if (rc < 0) {
    if (l->tls)
      SSL_CTX_free(l->tls);
    free(l->rx);
    free(l);
    return rc;
  }
  *out = l;
  return 0;
}

static void queue_clear(lchan *c) {
  for (qnode *q = c->head, *n; q; q = n) {
    n = q->next;
    free(q);
  }
  c->head = c->tail = NULL;
  c->qbytes = 0;
}

static void link_close(void *arg) {
  netlink *l = arg;
  if (!l)
    return;
  if (l->fd >= 0)
    drop_conn(l);
  if (l->tls)
    SSL_CTX_free(l->tls);
  for (unsigned i = 0; i < SPY_LINK_CHANNELS_MAX; i++)
    queue_clear(&l->ch[i]);
  free(l->rx);
  free(l);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* NTP-style rounds over the link: offset = server clock − ours, from the
 * round whose round trip is the median. */
static int link_clock(void *arg, uint32_t rounds, int timeout_ms,
                      int64_t *offset_ns, int64_t *rtt_ns) {
  netlink *l = arg;
  if (rounds == 0 || rounds > 64)
    return SPY_EINVAL;
  int64_t rtt[64], off[64], sorted[64];
  uint32_t done = 0;
  for (uint32_t i = 0; i < rounds; i++) {
    if (l->fd < 0)
      return SPY_EGONE;
    uint8_t t0b[8];
    l->clk_t0 = spy__net_mono_ns();
    l->clk_got = 0;
    spy_wr64(t0b, l->clk_t0);
    int rc = send_rec(l, SPY_LINK_CLOCK, 0, t0b, 8, NULL, 0);
    if (rc < 0)
      return rc;
    uint64_t end = now_ms() + (uint64_t)timeout_ms;
    while (!l->clk_got && l->fd >= 0 && now_ms() < end)
      read_some(l, (int)(end - now_ms()));
    uint64_t t3 = spy__net_mono_ns();
    if (!l->clk_got)
      return l->fd < 0 ? SPY_EGONE : SPY_ETIMEDOUT;
    int64_t t0 = (int64_t)l->clk_t[0], t1 = (int64_t)l->clk_t[1],
            t2 = (int64_t)l->clk_t[2];
    rtt[done] = ((int64_t)t3 - t0) - (t2 - t1);
    if (rtt[done] < 0)
      rtt[done] = 0;
    off[done] = ((t1 - t0) + (t2 - (int64_t)t3)) / 2;
    sorted[done] = rtt[done];
    done++;
  }
  qsort(sorted, done, sizeof sorted[0], cmp_i64);
  int64_t med = sorted[(done - 1) / 2];
  for (uint32_t i = 0; i < done; i++)
    if (rtt[i] == med) {
      *offset_ns = off[i];
      *rtt_ns = rtt[i];
      break;
    }
  return (int)done;
}

/* ---- channel ops ------------------------------------------------------- */

static int ch_open(void *arg, const spy_channel_desc *desc, void **impl) {
  netlink *l = arg;
  if (!l)
    return SPY_EINVAL;
  lchan *c = NULL;
  for (unsigned i = 1; i < SPY_LINK_CHANNELS_MAX && !c; i++)
    if (!l->ch[i].used)
      c = &l->ch[i];
  if (!c)
    return SPY_EMFILE;
  size_t nl = strlen(desc->name);
  if (nl > SPY_CHANNEL_NAME_MAX)
    return SPY_EINVAL;
  memcpy(c->name, desc->name, nl + 1);
  c->used = 1;
  c->opened = 0;
  c->closed = 0;
  c->lost = 0;
  c->id = 0;
  memset(&c->st, 0, sizeof c->st);
  if (l->fd < 0)
    pump(l, 0);
  if (l->fd >= 0)
    send_rec(l, SPY_LINK_OPEN, c->num, c->name, nl, NULL, 0);
  uint64_t end = now_ms() + CONNECT_MS;
  while (l->fd >= 0 && !c->opened && !c->closed && now_ms() < end)
    read_some(l, (int)(end - now_ms()));
  if (c->closed || (l->fd >= 0 && !c->opened)) {
    int rc = c->closed ? c->closed : SPY_ETIMEDOUT;
    c->used = 0;
    return rc;
  }
  /* Down now: it opens when the link comes back. */
  *impl = c;
  return 0;
}

static void ch_close(void *impl) {
  lchan *c = impl;
  netlink *l = c->l;
  if (l->fd >= 0 && c->opened) {
    uint8_t z[4] = {0};
    send_rec(l, SPY_LINK_CLOSE, c->num, z, 4, NULL, 0);
  }
  queue_clear(c);
  c->used = c->opened = 0;
}

static int ch_post(void *impl, const void *frame, size_t len) {
  lchan *c = impl;
  if (!frame || len < SPY_FRAME_MIN || len > SPY_LINK_CLIENT_MAX)
    return SPY_EINVAL;
  if (!c->opened)
    return SPY_EGONE;
  uint8_t pre[8] = {0};
  int rc = send_rec(c->l, SPY_LINK_FRAME, c->num, pre, 8, frame, len);
  if (rc == 0) {
    c->st.posted++;
    c->st.bytes_posted += len;
  }
  return rc;
}

/* Pops the head frame into buf. */
static int pop(lchan *c, void *buf, size_t cap, spy_recv_info *info) {
  qnode *q = c->head;
  c->head = q->next;
  if (!c->head)
    c->tail = NULL;
  c->qbytes -= q->len;
  if (info) {
    info->sender = c->id;
    info->lost = q->lost;
    info->len = q->len;
  }
  int r;
  if (q->len > cap) {
    c->st.oversize++;
    r = SPY_ENOBUFS;
  } else {
    memcpy(buf, q->data, q->len);
    c->st.received++;
    c->st.bytes_received += q->len;
    r = (int)q->len;
  }
  free(q);
  return r;
}

static int ch_wait(void *impl, int timeout_ms) {
  lchan *c = impl;
  uint64_t end = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  for (;;) {
    if (c->head)
      return 1;
    uint64_t now = now_ms();
    int left = timeout_ms < 0 ? 100 : now >= end ? 0 : (int)(end - now);
    pump(c->l, left);
    if (c->head)
      return 1;
    if (timeout_ms >= 0 && now_ms() >= end)
      return 0;
  }
}

static int ch_recv_wait(lchan *c, void *buf, size_t cap, int timeout_ms,
                        spy_recv_info *info);

/* Receives, noting when frames come (for the spin rule in ch_recv_wait). */
static int ch_recv(void *impl, void *buf, size_t cap, int timeout_ms,
                   spy_recv_info *info) {
  lchan *c = impl;
  int r = c->head ? pop(c, buf, cap, info)
                  : ch_recv_wait(c, buf, cap, timeout_ms, info);
  if (r > 0) {
    uint64_t t = spy__net_mono_ns();
    c->l->rx_gap_ns = t - c->l->last_rx_ns;
    c->l->last_rx_ns = t;
  }
  return r;
}

static int ch_recv_wait(lchan *c, void *buf, size_t cap, int timeout_ms,
                        spy_recv_info *info) {
  netlink *l = c->l;
  /* Wait with a direct target: the frame comes to buf, never queued. */
  l->direct.c = c;
  l->direct.buf = buf;
  l->direct.cap = cap;
  l->direct.info = info;
  l->direct.got = 0;
  uint64_t end = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  /* Only in a burst (the last two frames came close together, the last
   * one recently), as the bus does: a reply that comes now and then is
   * slept for, so the spin takes no CPU from the bridge or the program
   * that will send it, and the wake-up is the socket's own. */
  uint64_t t0 = spy__net_mono_ns();
  int spun =
      !(l->rx_gap_ns < SPIN_AFTER_NS && t0 - l->last_rx_ns < SPIN_AFTER_NS);
  for (;;) {
    if (l->direct.got || c->head)
      break;
    uint64_t now = now_ms();
    int left = timeout_ms < 0 ? 100 : now >= end ? 0 : (int)(end - now);
    /* Like the bus: watch the socket a few microseconds before sleeping
     * (a reply in flight usually lands within that; no wake-up then). */
    if (left > 0 && l->fd >= 0 && !spun) {
      spun = 1;
      uint64_t spin_end = spy__net_mono_ns() + SPIN_NS;
      while (!l->direct.got && !c->head && l->fd >= 0 &&
             spy__net_mono_ns() < spin_end)
        read_some(l, 0);
      continue;
    }
    pump(l, left);
    if (l->direct.got || c->head || (timeout_ms >= 0 && now_ms() >= end))
      break;
  }
  int got = l->direct.got;
  l->direct.c = NULL;
  l->direct.got = 0; /* records buffered after it are sorted by the next read */
  if (got)
    return got;
  return c->head ? pop(c, buf, cap, info) : SPY_EAGAIN;
}

static int ch_fd(void *impl) {
  (void)impl;
  return SPY_ENOTSUP; /* the link has no thread to signal one */
}

static uint64_t ch_id(const void *impl) { return ((const lchan *)impl)->id; }

static void ch_stats(const void *impl, spy_channel_stats *out) {
  *out = ((const lchan *)impl)->st;
}

static const spy_channel_ops link_ops = {
    .name = "link",
    .open = ch_open,
    .close = ch_close,
    .post = ch_post,
    .recv = ch_recv,
    .wait = ch_wait,
    .fd = ch_fd,
    .id = ch_id,
    .get_stats = ch_stats,
    .link_open = link_open,
    .link_close = link_close,
    .link_clock = link_clock,
};

const spy_channel_ops *spy_net_channel_ops(void) { return &link_ops; }
