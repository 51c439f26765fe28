/* consumer.c — the consumer's side of the protocol: discovery with
 * backoff, subscription, heartbeat, liveness, resync on gaps, clock sync
 * with the provider, and applying data frames to the state (state.c). See
 * consumer.h for the rules.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "spyglass/bus.h"
#include "spyglass/clock.h"
#include "spyglass/consumer.h"

#define MAX_CANDIDATES 32
/* After choosing a system provider, a user provider that answers within
 * this long still wins: the first announce subscribes at once, without a
 * collection window, and the preference is kept by switching. */
#define PREFER_WINDOW_MS 1000

typedef struct candidate {
  spy_provider_info info;
  char name[SPY_NAME_MAX + 1];
  uint64_t seen_ms;
} candidate;

struct spy_consumer {
  spy_state st;
  spy_consumer_desc d;
  uint64_t id;
  spy_channel *disc, *data;
  uint8_t *rx;
  size_t rxcap;
  uint8_t *ctl; /* control frames; sized for our subscribe */
  size_t ctl_cap;
  /* searching */
  uint32_t queries_sent;
  uint64_t next_query_ms, query_delay_ms;
  /* connected */
  uint64_t sub_sent_ms, last_ack_ms, resubscribed_ms, chosen_ms;
  uint32_t last_seq;
  int have_seq;
  int resub_attempts;
  /* rate meter */
  uint64_t meter_start_ms, meter_frames, meter_bytes;
  /* copies of the desc's arrays */
  char **reg;
  spy_buffer_request *bufs;
  /* clock sync: the segment while a request waits for READY */
  spy_clock_seg *clk;
  uint64_t clk_deadline_ms;
  uint64_t clk_auto_provider; /* provider already synced on connect */
  int clk_rc;                 /* last outcome; 1 while pending */
  /* remote (desc.connect): the link every channel goes through */
  const spy_channel_ops *remote;
  void *link;
};

static uint64_t now_ms(void) { return spy__mono_ns() / 1000000ull; }

static void resolve(spy_consumer_desc *d) {
  if (!d->features)
    d->features =
        SPY_FEAT_STATS | SPY_FEAT_ENV | SPY_FEAT_REGISTRY | SPY_FEAT_HEALTH;
  if (!d->query_initial_ms)
    d->query_initial_ms = 500;
  if (!d->query_max_ms)
    d->query_max_ms = 5000;
  if (!d->query_attempts)
    d->query_attempts = 10;
  if (!d->ack_ms)
    d->ack_ms = 1000;
  if (!d->liveness_ms)
    d->liveness_ms = 5000;
  if (!d->stale_ms)
    d->stale_ms = 2000;
  if (!d->recv_bytes)
    d->recv_bytes = 1u << 20;
  if (!d->clock_rounds)
    d->clock_rounds = SPY_CLOCK_DEFAULT_ROUNDS;
  if (!d->clock_timeout_ms)
    d->clock_timeout_ms = 1000;
}

/* Posts a small control frame on `ch`; `clk`: a clock message's section. */
static int post_msg(spy_consumer *c, spy_channel *ch, uint32_t type,
                    const spy_clock_msg *clk) {
  spy_frame_writer w;
  spy_frame_start(&w, c->ctl, c->ctl_cap, type, spy__wall_ms(), 0, 0);
  if (clk) {
    spy_put_clock(&w, clk);
  } else if (type == SPY_MSG_SUBSCRIBE) {
    spy_subscription s = {
        .consumer = c->id,
        .features = c->d.features,
        .flags = c->d.registry_filter ? SPY_SUB_REGISTRY_FILTER : 0,
        .n_registry = (uint16_t)c->d.n_registry,
        .n_buffers = (uint16_t)c->d.n_buffers,
        .registry = (const char *const *)c->reg,
        .buffers = c->bufs};
    spy_put_subscription(&w, &s);
  } else {
    spy_put_peer(&w, c->id, c->d.features);
  }
  int n = spy_frame_finish(&w);
  return n < 0 ? n : spy_channel_post(ch, c->ctl, (size_t)n);
}

static int post_ctl(spy_consumer *c, spy_channel *ch, uint32_t type) {
  return post_msg(c, ch, type, NULL);
}

int spy_consumer_create(spy_consumer **out, const spy_consumer_desc *desc) {
  *out = NULL;
  spy_consumer *c = calloc(1, sizeof *c);
  if (!c)
    return SPY_ENOMEM;
  c->d = desc ? *desc : (spy_consumer_desc){0};
  resolve(&c->d);
  int rc = 0;
  if (c->d.n_registry > SPY_SUB_MAX_NAMES ||
      c->d.n_buffers > SPY_SUB_MAX_NAMES ||
      c->d.clock_rounds > SPY_CLOCK_MAX_ROUNDS ||
      (c->d.n_registry && !c->d.registry) || (c->d.n_buffers && !c->d.buffers))
    rc = SPY_EINVAL;
  if (rc == 0 && c->d.n_registry) {
    c->reg = calloc(c->d.n_registry, sizeof *c->reg);
    for (uint32_t i = 0; c->reg && i < c->d.n_registry; i++)
      if (!c->d.registry[i] || !(c->reg[i] = strdup(c->d.registry[i])))
        rc = c->d.registry[i] ? SPY_ENOMEM : SPY_EINVAL;
    if (!c->reg)
      rc = SPY_ENOMEM;
  }
  if (rc == 0 && c->d.n_buffers) {
    c->bufs = calloc(c->d.n_buffers, sizeof *c->bufs);
    if (!c->bufs)
      rc = SPY_ENOMEM;
    for (uint32_t i = 0; c->bufs && i < c->d.n_buffers; i++) {
      c->bufs[i] = c->d.buffers[i];
      c->bufs[i].name =
          c->d.buffers[i].name ? strdup(c->d.buffers[i].name) : NULL;
      if (!c->bufs[i].name)
        rc = c->d.buffers[i].name ? SPY_ENOMEM : SPY_EINVAL;
    }
  }
  c->d.registry = NULL;
  c->d.buffers = NULL;
  /* The subscribe frame carries every filter name: size for it. */
  c->ctl_cap = 256;
  for (uint32_t i = 0; c->reg && i < c->d.n_registry; i++)
    c->ctl_cap += 2 + (c->reg[i] ? strlen(c->reg[i]) : 0);
  for (uint32_t i = 0; c->bufs && i < c->d.n_buffers; i++)
    c->ctl_cap += 6 + (c->bufs[i].name ? strlen(c->bufs[i].name) : 0);
  c->ctl = malloc(c->ctl_cap);
  if (rc == 0 && !c->ctl)
    rc = SPY_ENOMEM;
  if (c->d.want)
    c->d.want = strdup(c->d.want);
  c->id = spy__random_u64();
  c->rxcap = c->d.recv_bytes;
  c->rx = malloc(c->rxcap);
  if (rc == 0 && !c->rx)
    rc = SPY_ENOMEM;
  if (rc == 0)
    rc = spy_state_init(&c->st, c->d.history);
  c->st.features = c->d.features;
  spy_state_zones_keep(&c->st, c->d.zone_frames, c->d.zone_spans);
  c->st.registry_filter = c->d.registry_filter;
  c->st.registry_names = (const char *const *)c->reg;
  c->st.n_registry_names = c->reg ? c->d.n_registry : 0;
  c->st.image_filter = 1;
  c->st.image_names = c->bufs;
  c->st.n_image_names = c->bufs ? c->d.n_buffers : 0;
  if (rc == 0 && c->d.connect) {
    c->remote = c->d.remote ? c->d.remote : spy_channel_remote();
    if (!c->remote || !c->remote->link_open)
      rc = SPY_ENOTSUP; /* spyglass_net not linked (or not registered) */
    else
      rc = c->remote->link_open(&c->link, c->d.connect, c->d.token);
  }
  c->d.connect = c->d.token = NULL; /* not kept: the link has them */
  spy_channel_desc cd = {.name = SPY_DISCOVERY_CHANNEL,
                         .ring_bytes = 256u << 10,
                         .dir = c->d.dir,
                         .ops = c->link ? c->remote : NULL,
                         .ops_arg = c->link};
  if (rc == 0)
    rc = spy_channel_open(&c->disc, &cd);
  if (rc < 0) {
    spy_consumer_destroy(c);
    return rc;
  }
  c->query_delay_ms = c->d.query_initial_ms;
  c->next_query_ms = 0; /* query on the first poll */
  c->meter_start_ms = now_ms();
  *out = c;
  return 0;
}

void spy_consumer_destroy(spy_consumer *c) {
  if (!c)
    return;
  spy_clock_close(c->clk); /* removes a pending request's segment */
  if (c->data) {
    post_ctl(c, c->data, SPY_MSG_UNSUBSCRIBE);
    spy_channel_close(c->data);
  }
  spy_channel_close(c->disc);
  if (c->link)
    c->remote->link_close(c->link);
  for (uint32_t i = 0; c->reg && i < c->d.n_registry; i++)
    free(c->reg[i]);
  free(c->reg);
  for (uint32_t i = 0; c->bufs && i < c->d.n_buffers; i++)
    free((char *)c->bufs[i].name);
  free(c->bufs);
  free((char *)c->d.want);
  free(c->rx);
  free(c->ctl);
  spy_state_free(&c->st);
  free(c);
}

const spy_state *spy_consumer_state(const spy_consumer *c) { return &c->st; }
uint64_t spy_consumer_id(const spy_consumer *c) { return c->id; }

int spy_state_is_stale(const spy_consumer *c, const spy_state_entry *e) {
  uint64_t now = now_ms();
  if (c->st.conn != SPY_CONN_CONNECTED ||
      now - c->st.last_msg_ms > c->d.stale_ms)
    return 1; /* the provider itself went quiet */
  /* Unchanged values are not resent, but a checkpoint refreshes every
   * value every 5 s: older than that plus the grace means not refreshed. */
  return e && now - e->updated_ms > 5000 + c->d.stale_ms;
}

/* ---- discovery ---------------------------------------------------------- */

static int wanted(const spy_consumer *c, const spy_provider_info *p) {
  if (!c->d.want)
    return 1;
  char id[17];
  snprintf(id, sizeof id, "%016llx", (unsigned long long)p->id);
  return strcmp(c->d.want, id) == 0 ||
         (strlen(c->d.want) == p->name_len &&
          memcmp(c->d.want, p->name, p->name_len) == 0);
}

/* ---- clock sync ---------------------------------------------------------- */

/* The pending request (if any) ends with rc: its segment is removed. */
static void clock_end(spy_consumer *c, int rc) {
  if (!c->clk)
    return;
  spy_clock_close(c->clk);
  c->clk = NULL;
  c->clk_rc = rc;
  if (rc < 0) {
    c->st.clock_failures++;
    c->st.clock_error = rc;
  }
}

/* Remote: the shared segment cannot cross machines; rounds go over the
 * link to the bridge, whose clock is the provider's host's. */
static int clock_over_link(spy_consumer *c) {
  int64_t off = 0, rtt = 0;
  int rc = c->remote->link_clock
               ? c->remote->link_clock(c->link, c->d.clock_rounds,
                                       (int)c->d.clock_timeout_ms, &off, &rtt)
               : SPY_ENOTSUP;
  c->clk_rc = rc < 0 ? rc : 0;
  if (rc < 0) {
    c->st.clock_failures++;
    c->st.clock_error = rc;
    return rc;
  }
  c->st.clock_offset_ns = off; /* server − ours, as the state keeps it */
  c->st.clock_rtt_ns = rtt;
  c->st.clock_rounds = (uint32_t)rc;
  c->st.clock_synced = 1;
  c->st.clock_synced_ms = now_ms();
  c->st.clock_syncs++;
  c->st.clock_error = 0;
  spy_clock_msg m = {.op = SPY_CLOCK_OP_RESULT,
                     .rounds = (uint8_t)rc,
                     .provider = c->st.provider.id,
                     .consumer = c->id,
                     .offset_ns = -off,
                     .rtt_ns = (uint64_t)rtt};
  post_msg(c, c->data, SPY_MSG_CLOCK, &m);
  return 0;
}

/* Creates the segment and asks the provider to serve a sync on it. */
static int clock_start(spy_consumer *c) {
  if (!c->data || c->st.conn != SPY_CONN_CONNECTED)
    return SPY_EGONE;
  clock_end(c, SPY_ECANCELED); /* an older request is abandoned */
  if (c->link)
    return clock_over_link(c);
  char name[SPY_CLOCK_NAME_MAX + 1];
  int rc = spy_clock_segment_name(c->st.provider.id, c->id, name, sizeof name);
  if (rc >= 0)
    rc = spy_clock_create(&c->clk, name, c->d.dir);
  if (rc < 0) {
    c->st.clock_failures++;
    c->st.clock_error = c->clk_rc = rc;
    return rc;
  }
  spy_clock_msg m = {.op = SPY_CLOCK_OP_REQUEST,
                     .rounds = (uint8_t)c->d.clock_rounds,
                     .provider = c->st.provider.id,
                     .consumer = c->id};
  rc = post_msg(c, c->data, SPY_MSG_CLOCK, &m);
  if (rc < 0) {
    clock_end(c, rc);
    return rc;
  }
  c->clk_rc = 1;
  c->clk_deadline_ms = now_ms() + c->d.clock_timeout_ms;
  return 0;
}

/* The provider serves: run the rounds now, keep and announce the result. */
static void clock_run(spy_consumer *c, uint64_t now) {
  spy_clock_opts o = {.rounds = c->d.clock_rounds,
                      .timeout_ms = (int)c->d.clock_timeout_ms};
  spy_clock_result r;
  int rc = spy_clock_sync(c->clk, &o, &r);
  clock_end(c, rc);
  if (rc < 0)
    return;
  /* The sync gives ours − provider's; the state keeps provider − ours. */
  c->st.clock_offset_ns = -r.offset_ns;
  c->st.clock_rtt_ns = r.rtt_ns;
  c->st.clock_rounds = r.rounds;
  c->st.clock_synced = 1;
  c->st.clock_synced_ms = now;
  c->st.clock_syncs++;
  c->st.clock_error = 0;
  spy_clock_msg m = {.op = SPY_CLOCK_OP_RESULT,
                     .rounds = (uint8_t)r.rounds,
                     .provider = c->st.provider.id,
                     .consumer = c->id,
                     .offset_ns = r.offset_ns,
                     .rtt_ns = r.rtt_ns};
  post_msg(c, c->data, SPY_MSG_CLOCK, &m);
}

/* The op of a clock message addressed to us by our provider, or 0. */
static int clock_op_for_us(const spy_consumer *c, const spy_frame *f) {
  spy_section s;
  spy_clock_msg m;
  if (f->type != SPY_MSG_CLOCK ||
      !spy_frame_find_section(f, SPY_SEC_CLOCK, &s) ||
      spy_get_clock(&s, &m) < 0 || m.consumer != c->id ||
      m.provider != c->st.provider.id)
    return 0;
  return m.op;
}

/* A clock READY, whoever it is for (only the provider sends READY). */
static int clock_ready_any(const spy_frame *f) {
  spy_section s;
  spy_clock_msg m;
  return f->type == SPY_MSG_CLOCK &&
         spy_frame_find_section(f, SPY_SEC_CLOCK, &s) &&
         spy_get_clock(&s, &m) == 0 && m.op == SPY_CLOCK_OP_READY;
}

int spy_consumer_clock_sync(spy_consumer *c) {
  int rc = clock_start(c);
  if (rc < 0)
    return rc;
  /* poll's timers end the request at its deadline at the latest. */
  while (c->clk_rc == 1)
    spy_consumer_poll(c, 5);
  return c->clk_rc;
}

/* ---- connection --------------------------------------------------------- */

static void disconnect(spy_consumer *c, spy_conn next) {
  clock_end(c, SPY_EGONE);
  if (c->data) {
    spy_channel_close(c->data);
    c->data = NULL;
  }
  if (c->st.conn == SPY_CONN_CONNECTED || c->st.conn == SPY_CONN_SUBSCRIBING)
    c->st.reconnects++;
  c->st.conn = next;
  c->have_seq = 0;
  c->queries_sent = 0;
  c->query_delay_ms = c->d.query_initial_ms;
  c->next_query_ms = 0;
}

/* A different provider: nothing of the old one's state carries over. When
 * fresh rings cannot be allocated the old ones stay, emptied: out of
 * memory must not bring back anything that was just freed. */
static void reset_state(spy_consumer *c) {
  spy_state keep = c->st;
  c->st.rings = NULL; /* kept: everything else goes */
  spy_state_free(&c->st);
  if (spy_state_init(&c->st, keep.history) == 0)
    free(keep.rings);
  else /* out of memory: the state is empty but for the old rings (len 0) */
    c->st.rings = keep.rings;
  c->st.features = keep.features;
  c->st.zones.keep_frames = keep.zones.keep_frames;
  c->st.zones.keep_spans = keep.zones.keep_spans;
  spy_state_zones_sums(&c->st, keep.zones.sums_on);
  c->st.registry_filter = keep.registry_filter;
  c->st.registry_names = keep.registry_names;
  c->st.n_registry_names = keep.n_registry_names;
  c->st.image_filter = keep.image_filter;
  c->st.image_names = keep.image_names;
  c->st.n_image_names = keep.n_image_names;
  c->st.reconnects = keep.reconnects;
  c->st.sub_dropped = keep.sub_dropped;
  c->st.subscribes = keep.subscribes;
  c->st.resyncs = keep.resyncs;
  c->st.frames_received = keep.frames_received;
  c->st.bytes_received = keep.bytes_received;
  c->st.frames_lost = keep.frames_lost;
  c->st.malformed = keep.malformed;
}

static int subscribe_to(spy_consumer *c, const candidate *p) {
  if (p->info.id != c->st.provider.id && c->st.provider.id)
    reset_state(c);
  char name[64];
  snprintf(name, sizeof name, SPY_DISCOVERY_CHANNEL ":%016llx",
           (unsigned long long)p->info.id);
  uint32_t ring = 64u << 10; /* room for 4 of our largest frames */
  while (ring < 4 * c->ctl_cap && ring < (256u << 20))
    ring <<= 1;
  spy_channel_desc cd = {.name = name,
                         .ring_bytes = ring,
                         .dir = c->d.dir,
                         .ops = c->link ? c->remote : NULL,
                         .ops_arg = c->link};
  int rc = spy_channel_open(&c->data, &cd);
  if (rc < 0)
    return rc;
  c->st.provider = p->info;
  memcpy(c->st.provider_name, p->name, sizeof c->st.provider_name);
  c->st.provider.name = c->st.provider_name;
  c->st.conn = SPY_CONN_SUBSCRIBING;
  uint64_t now = now_ms();
  c->chosen_ms = now;
  c->sub_sent_ms = c->resubscribed_ms = c->last_ack_ms = now;
  c->st.last_msg_ms = now;
  c->resub_attempts = 0;
  c->have_seq = 0;
  c->st.subscribes++;
  return post_ctl(c, c->data, SPY_MSG_SUBSCRIBE);
}

/* Reads the discovery channel: candidates while searching, gone while
 * connected. */
static void read_discovery(spy_consumer *c) {
  candidate cands[MAX_CANDIDATES];
  int ncand = 0;
  for (int k = 0; k < 256; k++) {
    int n = spy_channel_recv(c->disc, c->rx, c->rxcap, 0, NULL);
    if (n == SPY_EAGAIN)
      break;
    if (n < 0)
      continue;
    spy_frame f;
    spy_section s;
    spy_provider_info info;
    if (spy_frame_decode(c->rx, (size_t)n, &f, NULL) < 0) {
      c->st.malformed++;
      continue;
    }
    if ((f.type != SPY_MSG_PROVIDER_ANNOUNCE &&
         f.type != SPY_MSG_PROVIDER_GONE) ||
        !spy_frame_find_section(&f, SPY_SEC_PROVIDER, &s) ||
        spy_get_provider(&s, &info) < 0)
      continue;
    if (f.type == SPY_MSG_PROVIDER_GONE) {
      if (c->st.conn != SPY_CONN_SEARCHING && info.id == c->st.provider.id)
        disconnect(c, SPY_CONN_LOST);
      for (int i = 0; i < ncand; i++)
        if (cands[i].info.id == info.id)
          cands[i--] = cands[--ncand];
      continue;
    }
    int searching =
        c->st.conn == SPY_CONN_SEARCHING || c->st.conn == SPY_CONN_LOST;
    /* Connected to a system provider we did not ask for by name, and a
     * user provider answers soon after: the user one is preferred. */
    int upgrade = !searching && !c->d.want &&
                  c->st.provider.kind == SPY_PROVIDER_SYSTEM &&
                  info.kind == SPY_PROVIDER_USER &&
                  now_ms() - c->chosen_ms < PREFER_WINDOW_MS;
    if ((!searching && !upgrade) || !wanted(c, &info) ||
        ncand == MAX_CANDIDATES)
      continue;
    int dup = 0;
    for (int i = 0; i < ncand; i++)
      dup |= cands[i].info.id == info.id;
    if (dup)
      continue;
    candidate *x = &cands[ncand++];
    x->info = info;
    memcpy(x->name, info.name, info.name_len);
    x->name[info.name_len] = 0;
    x->info.name = x->name;
  }
  if (!ncand)
    return;
  /* Among announces that arrived together: a user provider first, then
   * the first announced. */
  int best = 0;
  for (int i = 1; i < ncand; i++)
    if (cands[i].info.kind == SPY_PROVIDER_USER &&
        cands[best].info.kind != SPY_PROVIDER_USER)
      best = i;
  if (c->data) { /* the upgrade from a system provider */
    clock_end(c, SPY_EGONE);
    post_ctl(c, c->data, SPY_MSG_UNSUBSCRIBE);
    spy_channel_close(c->data);
    c->data = NULL;
  }
  subscribe_to(c, &cands[best]);
}

/* ---- data -------------------------------------------------------------- */

/* A ping carrying a PEER section with our id: the provider's answer to an
 * ack from a consumer it does not have as a subscriber. */
static int names_us(const spy_consumer *c, const spy_frame *f) {
  spy_section s;
  spy_peer_info peer;
  return spy_frame_find_section(f, SPY_SEC_PEER, &s) &&
         spy_get_peer(&s, &peer) == 0 && peer.id == c->id;
}

static void on_frame(spy_consumer *c, const uint8_t *buf, int n,
                     const spy_recv_info *info, uint64_t now) {
  spy_frame f;
  if (spy_frame_decode(buf, (size_t)n, &f, NULL) < 0) {
    c->st.malformed++;
    return;
  }
  /* Frames from the provider are numbered; other consumers' frames on the
   * channel (subscribe, ack) are not ours to check. */
  int clock_op = clock_op_for_us(c, &f);
  /* A READY for another consumer is the provider's too: it carries the
   * provider's sequence number, and skipping it would look like a gap. */
  int from_provider = f.type == SPY_MSG_DATA || f.type == SPY_MSG_PING ||
                      f.type == SPY_MSG_SUBSCRIBE_ACK ||
                      f.type == SPY_MSG_BUFFER_RAW ||
                      f.type == SPY_MSG_BUFFER_CHUNK ||
                      clock_op == SPY_CLOCK_OP_READY || clock_ready_any(&f);
  if (!from_provider)
    return;
  c->st.last_msg_ms = now;
  c->st.frames_received++;
  c->st.bytes_received += (uint64_t)n;
  c->meter_frames++;
  c->meter_bytes += (uint64_t)n;
  int gap = info->lost > 0 || (c->have_seq && f.seq != c->last_seq + 1);
  if (gap && c->st.conn == SPY_CONN_CONNECTED) {
    c->st.frames_lost += info->lost ? info->lost : 1;
    c->st.resyncs++;
    post_ctl(c, c->data, SPY_MSG_RESYNC); /* the next flush is whole */
  }
  if (gap)
    spy_state_pixels_gap(&c->st); /* streams wait for a key frame */
  c->last_seq = f.seq;
  c->have_seq = 1;
  if (f.type == SPY_MSG_SUBSCRIBE_ACK) {
    spy_section s;
    spy_peer_info peer;
    if (spy_frame_find_section(&f, SPY_SEC_PEER, &s) &&
        spy_get_peer(&s, &peer) == 0 && peer.id == c->id &&
        c->st.conn == SPY_CONN_SUBSCRIBING) {
      c->st.conn = SPY_CONN_CONNECTED;
      c->st.connected_ms = now;
      /* Once per provider, not on every re-subscription. */
      if (!c->d.no_clock_sync && c->clk_auto_provider != c->st.provider.id) {
        c->clk_auto_provider = c->st.provider.id;
        clock_start(c);
      }
    }
    return;
  }
  if (f.type == SPY_MSG_PING && c->st.conn == SPY_CONN_CONNECTED &&
      names_us(c, &f)) {
    /* The provider no longer has us (it judged us dead, say) though the
     * channel stays busy with the others' data: subscribe again. */
    c->st.sub_dropped++;
    c->st.conn = SPY_CONN_SUBSCRIBING;
    c->sub_sent_ms = now;
    c->st.subscribes++;
    post_ctl(c, c->data, SPY_MSG_SUBSCRIBE);
    return;
  }
  if (clock_op == SPY_CLOCK_OP_READY) {
    if (c->clk)
      clock_run(c, now);
    return;
  }
  if (f.type == SPY_MSG_DATA) {
    if (c->st.conn == SPY_CONN_SUBSCRIBING) {
      /* Data before our ack (another subscriber's flush): apply it; our
       * own snapshot follows. */
    }
    if (spy_state_apply(&c->st, &f, now) < 0)
      c->st.malformed++;
    if (c->d.on_data)
      c->d.on_data(c->d.on_data_user, &f, &c->st);
  } else if (f.type == SPY_MSG_BUFFER_RAW || f.type == SPY_MSG_BUFFER_CHUNK) {
    if (c->d.on_pixels)
      c->d.on_pixels(c->d.on_data_user, &f, &c->st);
    else if (spy_state_apply_pixels(&c->st, &f, now) < 0)
      c->st.malformed++;
  }
}

static void meter(spy_consumer *c, uint64_t now) {
  uint64_t dt = now - c->meter_start_ms;
  if (dt < 1000)
    return;
  c->st.rx_frames_per_s = (double)c->meter_frames * 1000.0 / (double)dt;
  c->st.rx_bytes_per_s = (double)c->meter_bytes * 1000.0 / (double)dt;
  c->meter_frames = c->meter_bytes = 0;
  c->meter_start_ms = now;
}

/* `may_judge`: 0 when frames were left unread (silence is not judged). */
static void timers(spy_consumer *c, uint64_t now, int may_judge) {
  if (c->st.conn == SPY_CONN_SEARCHING || c->st.conn == SPY_CONN_LOST) {
    if (c->queries_sent < c->d.query_attempts && now >= c->next_query_ms) {
      post_ctl(c, c->disc, SPY_MSG_PROVIDER_QUERY);
      c->queries_sent++;
      c->next_query_ms = now + c->query_delay_ms;
      c->query_delay_ms *= 2;
      if (c->query_delay_ms > c->d.query_max_ms)
        c->query_delay_ms = c->d.query_max_ms;
    }
    return;
  }
  if (c->clk && now >= c->clk_deadline_ms)
    clock_end(c, SPY_ETIMEDOUT); /* no READY: the provider does not serve */
  if (now - c->last_ack_ms >= c->d.ack_ms) {
    post_ctl(c, c->data, SPY_MSG_ACK);
    c->last_ack_ms = now;
  }
  if (c->st.conn == SPY_CONN_SUBSCRIBING &&
      now - c->sub_sent_ms >= c->d.ack_ms) {
    /* No ack yet: the provider may not have seen our subscribe. */
    post_ctl(c, c->data, SPY_MSG_SUBSCRIBE);
    c->st.subscribes++;
    c->sub_sent_ms = now;
  }
  uint64_t silent = now - c->st.last_msg_ms;
  if (!may_judge)
    return;
  if (silent >= c->d.liveness_ms &&
      now - c->resubscribed_ms >= c->d.liveness_ms) {
    if (c->resub_attempts >= 1) {
      disconnect(c, SPY_CONN_LOST); /* still nothing: find a provider */
      return;
    }
    c->resub_attempts++;
    c->resubscribed_ms = now;
    c->st.conn = SPY_CONN_SUBSCRIBING;
    c->sub_sent_ms = now;
    c->st.subscribes++;
    post_ctl(c, c->data, SPY_MSG_SUBSCRIBE);
  } else if (silent < c->d.liveness_ms) {
    c->resub_attempts = 0;
  }
}

/* Takes what waits on the data channel without waiting for more. A
 * provider faster than us must not keep us here past the deadline, but
 * silence is judged after this: so the drain stops early only once it has
 * heard from the provider (or after a bound of other peers' frames).
 * Returns 1 when it may judge silence (the channel was emptied, or the
 * provider was heard), 0 when it stopped with frames still unread. */
static int drain(spy_consumer *c, uint64_t deadline, int *applied) {
  uint64_t heard = c->st.frames_received; /* counts provider frames */
  for (int k = 0; c->data; k++) {
    if (k >= 4096)
      return 0;
    spy_recv_info info;
    int n = spy_channel_recv(c->data, c->rx, c->rxcap, 0, &info);
    if (n == SPY_EAGAIN || (n < 0 && n != SPY_ENOBUFS))
      return 1;
    uint64_t t = now_ms();
    if (n > 0) {
      on_frame(c, c->rx, n, &info, t);
      (*applied)++;
    } else {
      c->st.frames_lost++;
    }
    if (t >= deadline && c->st.frames_received != heard)
      return 1;
  }
  return 1;
}

int spy_consumer_poll(spy_consumer *c, int timeout_ms) {
  uint64_t start = now_ms();
  uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms;
  int applied = 0;
  for (;;) {
    read_discovery(c);
    /* Read what is waiting first, then judge silence: a consumer that
     * polls late has the provider's pings in its ring. */
    int emptied = drain(c, deadline, &applied);
    uint64_t now = now_ms();
    timers(c, now, emptied);
    meter(c, now);
    if (now >= deadline || (timeout_ms < 0 && applied))
      break;
    /* Wait on the data channel when we have one, else on discovery, but
     * never past the next timer. */
    int64_t left = timeout_ms < 0 ? 100 : (int64_t)(deadline - now);
    int64_t step = left > 100 ? 100 : left;
    if (c->st.conn == SPY_CONN_SEARCHING || c->st.conn == SPY_CONN_LOST ||
        !c->data) {
      if (c->queries_sent < c->d.query_attempts && c->next_query_ms > now &&
          (int64_t)(c->next_query_ms - now) < step)
        step = (int64_t)(c->next_query_ms - now);
      /* Wait for discovery traffic without consuming it, then read it
       * all through read_discovery. */
      spy_channel_wait(c->disc, (int)step);
    } else {
      spy_recv_info info;
      int n = spy_channel_recv(c->data, c->rx, c->rxcap, (int)step, &info);
      if (n > 0) {
        on_frame(c, c->rx, n, &info, now_ms());
        applied++;
      } else if (n == SPY_ENOBUFS) {
        c->st.frames_lost++;
      }
    }
  }
  return applied;
}

int spy_consumer_resync(spy_consumer *c) {
  if (!c->data)
    return SPY_EGONE;
  c->st.resyncs++;
  return post_ctl(c, c->data, SPY_MSG_RESYNC);
}

int spy_consumer_set_buffers(spy_consumer *c, const spy_buffer_request *b,
                             uint32_t n) {
  if (n > SPY_SUB_MAX_NAMES || (n && !b))
    return SPY_EINVAL;
  spy_buffer_request *nb = n ? calloc(n, sizeof *nb) : NULL;
  if (n && !nb)
    return SPY_ENOMEM;
  int rc = 0;
  size_t cap = 256; /* as at create: room for every name */
  for (uint32_t i = 0; c->reg && i < c->d.n_registry; i++)
    cap += 2 + (c->reg[i] ? strlen(c->reg[i]) : 0);
  for (uint32_t i = 0; i < n && !rc; i++) {
    nb[i] = b[i];
    if (!b[i].name)
      rc = SPY_EINVAL;
    else if (!(nb[i].name = strdup(b[i].name)))
      rc = SPY_ENOMEM;
    else
      cap += 6 + strlen(b[i].name);
  }
  uint8_t *ctl = rc ? NULL : malloc(cap);
  if (!rc && !ctl)
    rc = SPY_ENOMEM;
  if (rc) {
    for (uint32_t i = 0; i < n; i++)
      free((char *)nb[i].name);
    free(nb);
    return rc;
  }
  for (uint32_t i = 0; c->bufs && i < c->d.n_buffers; i++)
    free((char *)c->bufs[i].name);
  free(c->bufs);
  free(c->ctl);
  c->ctl = ctl;
  c->ctl_cap = cap;
  c->bufs = nb;
  c->d.n_buffers = n;
  c->st.image_names = c->bufs;
  c->st.n_image_names = n;
  if (c->data && (c->st.conn == SPY_CONN_SUBSCRIBING ||
                  c->st.conn == SPY_CONN_CONNECTED)) {
    c->st.subscribes++;
    return post_ctl(c, c->data, SPY_MSG_SUBSCRIBE);
  }
  return 0;
}
