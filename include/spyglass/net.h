/* net.h — links: bus channels carried over TCP or WebSocket to another
 * machine or a browser (library spyglass_net: wslay + OpenSSL; the core
 * library does not need it).
 *
 * Three parts:
 *  - the link record codec (docs/wire.md, "Links"): one connection
 *    multiplexes any number of channels; a record opens a channel by name,
 *    carries one wire frame on it byte for byte, or closes it;
 *  - the bridge (spy_server): `spyglass serve`, or a provider's in-process
 *    server, opens local bus channels on behalf of each remote client and
 *    relays frames both ways in one epoll loop;
 *  - the remote channel backend (spy_net_channel_ops): spy_channel_open
 *    over a link, so spy_consumer works unchanged with `connect`.
 *
 * Thread-safety: a spy_server runs on one thread (spy_server_run); only
 * spy_server_stop may be called from another. A link is used by one thread
 * at a time (the consumer that owns it).
 */
#ifndef SPYGLASS_NET_H
#define SPYGLASS_NET_H

#include <stddef.h>
#include <stdint.h>

#include "spyglass/bus.h"
#include "spyglass/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- link records ------------------------------------------------------ */

#define SPY_LINK_VERSION 1u
#define SPY_LINK_HEADER_BYTES 8u
#define SPY_LINK_MAGIC 0x4c595053u  /* "SPYL", first word of HELLO */
#define SPY_LINK_CHANNELS_MAX 64u   /* channels open on one link */
#define SPY_LINK_TOKEN_MAX 128u     /* token bytes in HELLO */
#define SPY_LINK_CLIENT_MAX 65536u  /* default bound, client → server */
#define SPY_LINK_DEFAULT_PORT 7420u /* `spyglass serve` */
/* The largest payload any record may have (a FRAME of SPY_FRAME_MAX). */
#define SPY_LINK_PAYLOAD_MAX (16u * 1024u * 1024u + 8u)

typedef enum spy_link_op {
  SPY_LINK_HELLO = 1,   /* c→s first: magic, version, token */
  SPY_LINK_WELCOME = 2, /* s→c: version, the client's record bound */
  SPY_LINK_OPEN = 3,    /* c→s: open channel `chan` by name */
  SPY_LINK_OPENED = 4,  /* s→c: it is open (u64 the bridge's opener id) */
  SPY_LINK_CLOSE = 5,   /* either way: chan closed (i32 reason, 0 = asked) */
  SPY_LINK_FRAME = 6,   /* either way: u32 lost, u32 0, one wire frame */
  SPY_LINK_CLOCK = 7,   /* c→s u64 t0; s→c u64 t0, t1, t2 (server ns) */
  SPY_LINK_ERROR = 8    /* s→c: i32 code, text; the server then closes */
} spy_link_op;

/* A parsed record: views into the caller's bytes. */
typedef struct spy_link_rec {
  uint8_t op;
  uint16_t chan;
  uint32_t len;           /* payload bytes */
  const uint8_t *payload; /* len bytes */
  /* by op: */
  uint32_t version, max_record; /* HELLO (version), WELCOME */
  const char *text;             /* HELLO token, OPEN name, ERROR message */
  uint32_t text_len;
  uint64_t id;          /* OPENED */
  int32_t code;         /* CLOSE, ERROR */
  uint32_t lost;        /* FRAME: frames lost on this channel just before */
  uint64_t t[3];        /* CLOCK: t0 (request); t0, t1, t2 (reply) */
  int clock_reply;      /* CLOCK: 1 if it carries t1, t2 */
  const uint8_t *frame; /* FRAME: the wire frame, unchanged */
  uint32_t frame_len;
} spy_link_rec;

/* Parses one record at p (n bytes available). Returns the bytes it takes
 * (> 0), 0 if more bytes are needed (n < header, or < header + len), or:
 * SPY_ETOOBIG (payload above max_payload: decided from the header, before
 * anything else is read), SPY_EBADHEADER (unknown op, nonzero flags),
 * SPY_EBADVALUE (a payload of the wrong size or content for its op: bad
 * magic, token or name too long, channel 0 or ≥ SPY_LINK_CHANNELS_MAX,
 * FRAME shorter than a wire frame or its used_bytes not its length). The
 * wire frame inside FRAME is not decoded here (spy_frame_decode). Never
 * allocates. */
int spy_link_parse(const void *p, size_t n, size_t max_payload,
                   spy_link_rec *out);

/* Writes a record header + payload a (alen bytes) + b (blen bytes) into
 * buf. Returns the record's length or SPY_ENOBUFS / SPY_ETOOBIG. */
int spy_link_encode(void *buf, size_t cap, uint8_t op, uint16_t chan,
                    const void *a, size_t alen, const void *b, size_t blen);
/* Just the 8-byte header (for a record whose payload is written apart). */
void spy_link_header(void *buf, uint8_t op, uint16_t chan, uint32_t len);

/* ---- the bridge -------------------------------------------------------- */

typedef struct spy_server spy_server;

typedef struct spy_server_desc {
  const char *listen; /* "ADDR:PORT" ("[v6]:PORT"); NULL = 127.0.0.1 and
                         ::1, port 7420; port 0 = any free one */
  const char *token;  /* NULL: generated (128 bits, hex) and required where
                         below; a non-loopback listen needs one given */
  const char *const *allow_origins; /* WebSocket Origins besides our own */
  uint32_t n_allow_origins;
  const char *const *allow_hosts; /* Host names besides loopback, IP
                                     literals and the listen address */
  uint32_t n_allow_hosts;
  const char *tls_cert, *tls_key; /* PEM files: TLS on every connection */
  uint32_t max_clients;           /* 64 */
  uint32_t queue_bytes;           /* per-client send queue; 8 MiB */
  uint32_t client_max;    /* client → server record / WS message: 64 KiB */
  uint32_t header_max;    /* HTTP request head: 8 KiB */
  uint32_t handshake_ms;  /* until HELLO (or the HTTP request) done: 5000 */
  uint32_t idle_ms;       /* nothing received for this long: 60000 */
  const char *dir;        /* runtime directory of the local bus */
  uint64_t only_provider; /* in-process: relay only this provider; 0 all */
  void (*log)(void *arg, const char *line); /* NULL = stderr */
  void *log_arg;
} spy_server_desc;

/* Binds and listens. The desc's strings and arrays are used in place
 * (dir, allow lists): they must outlive the server. Errors: SPY_EINVAL (bad
 * address, a non-loopback listen without a token, bad limits: the log says
 * which), SPY_EBUSY (the port is in use: the log names it), SPY_EINVAL also for
 * unreadable TLS files, or a system error. */
int spy_server_create(spy_server **out, const spy_server_desc *desc);
/* Runs the loop until spy_server_stop (or timeout_ms, < 0 forever).
 * Returns 0 or a system error. */
int spy_server_run(spy_server *s, int timeout_ms);
/* Makes spy_server_run return soon. Any thread, async-signal-safe. */
void spy_server_stop(spy_server *s);
/* Disconnects every client, closes the channels, frees. NULL accepted. */
void spy_server_destroy(spy_server *s);
/* The bound port (useful with port 0), the token in force. */
int spy_server_port(const spy_server *s);
const char *spy_server_token(const spy_server *s);
/* 1 if the token was generated here (the caller should print it). */
int spy_server_token_generated(const spy_server *s);

typedef struct spy_server_stats {
  uint32_t clients;
  uint64_t accepted, refused_full, refused_forbidden, refused_bad;
  uint64_t disallowed;     /* client messages refused by the allow-list */
  uint64_t frames_relayed; /* bus → clients (per client copy) */
  uint64_t bytes_relayed;
  uint64_t dropped; /* frames dropped for slow clients, all clients */
} spy_server_stats;
void spy_server_get_stats(const spy_server *s, spy_server_stats *out);

/* Starts a server on a thread of its own (the in-process server).
 * spy_server_thread_stop stops, joins and destroys it. */
int spy_server_thread_start(spy_server **out, const spy_server_desc *desc);
void spy_server_thread_stop(spy_server *s);

/* ---- static pages ------------------------------------------------------ */

/* Files a bridge serves over HTTP besides /link and /healthz (the browser
 * dashboard: web/, embedded in the `spyglass` tool at build time). GET of
 * `path` answers `data` with Content-Type `type`; `/` answers the asset
 * "/index.html" when there is one. These are the page's code, the same for
 * everyone: they are served without the token (the Host check still
 * applies); the bus itself (/link, /healthz) keeps every check. */
typedef struct spy_web_asset {
  const char *path; /* "/index.html", "/wire.js", … */
  const char *type; /* "text/html; charset=utf-8", … */
  const unsigned char *data;
  size_t len;
} spy_web_asset;

/* Sets the assets every server of this process serves (NULL, 0: none).
 * The array is used in place and must outlive the servers; call it before
 * starting them. */
void spy_server_set_web(const spy_web_asset *assets, size_t n);

/* ---- remote channels --------------------------------------------------- */

/* The link backend: with spy_channel_desc.ops = spy_net_channel_ops() and
 * ops_arg = a link from its link_open, spy_channel_* work over the link.
 * link_open(addr "HOST:PORT", token or NULL) connects, says HELLO and
 * waits for WELCOME (5 s): SPY_EINVAL (address), SPY_EACCES (token
 * refused), SPY_EBUSY (server full), SPY_ETIMEDOUT, SPY_EBADHEADER (not a
 * spyglass server), or a system error (connection refused…). A link
 * whose connection drops reconnects by itself (backoff 250 ms … 2 s) and
 * opens its channels again; frames meanwhile are lost (the protocol's
 * liveness and resync recover). */
const spy_channel_ops *spy_net_channel_ops(void);

/* Makes spy_net_channel_ops() the default remote backend of this process
 * (spy_channel_set_remote) and the in-process server of providers whose
 * desc sets `listen`. Runs by itself when libspyglass_net.so is loaded;
 * a program linking the static library calls it once. */
void spy_net_register(void);

#ifdef __cplusplus
}
#endif
#endif
