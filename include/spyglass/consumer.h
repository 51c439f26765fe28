/* consumer.h — the inspecting side: find a provider, subscribe, keep the
 * subscription alive, and accumulate everything it sends into a state a UI
 * renders from.
 *
 *   spy_consumer *c;
 *   spy_consumer_desc d = {0};           // any provider, default features
 *   spy_consumer_create(&c, &d);
 *   for (;;) {
 *     spy_consumer_poll(c, 100);         // protocol + apply, <= 100 ms
 *     const spy_state *s = spy_consumer_state(c);
 *     printf("%.1f fps\n", spy_state_last(s, SPY_FIELD_FPS));
 *   }
 *   spy_consumer_destroy(c);
 *
 * The same API works in the provider's own process (an in-process panel)
 * and in another process: both go over the same channels.
 *
 * Discovery: provider:query on the discovery channel, re-sent with backoff
 * (500 ms doubling to 5000 ms, 10 attempts); the first announce (a user
 * provider preferred over a system one among announces that arrive
 * together) triggers a subscription, unless the desc names a provider by
 * id or name. A provider that starts later still connects by its own
 * announce. Heartbeat: ack every 1000 ms; with no message from the
 * provider for 5000 ms the consumer subscribes again, and if that brings
 * nothing either, or the provider says gone, it searches again.
 *
 * Threads: one consumer is used by one thread at a time. Ownership: the
 * consumer owns its state; spy_consumer_state() returns a view valid until
 * the next poll or destroy.
 */
#ifndef SPYGLASS_CONSUMER_H
#define SPYGLASS_CONSUMER_H

#include <stdint.h>

#include "spyglass/error.h"
#include "spyglass/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spy_consumer spy_consumer;

typedef enum spy_conn {
  SPY_CONN_SEARCHING = 0,   /* no provider chosen yet */
  SPY_CONN_SUBSCRIBING = 1, /* subscribe sent, no ack yet */
  SPY_CONN_CONNECTED = 2,   /* receiving */
  SPY_CONN_LOST = 3         /* provider went away; searching again */
} spy_conn;

/* One accumulated value (environment, registry or buffer metadata). */
typedef struct spy_state_entry {
  char name[SPY_KEY_MAX + 1];
  spy_value value;  /* strings point into `text` */
  char *text;       /* owned copy of a string value */
  uint32_t text_cap;
  uint8_t has_value; /* 0: metadata only (outside the registry filter) */
  uint64_t updated_ms; /* consumer's monotonic ms of the last change */
} spy_state_entry;

typedef struct spy_state_table {
  spy_state_entry *e;
  uint32_t n, cap;
} spy_state_table;

typedef enum spy_field {
  SPY_FIELD_FPS = 0,
  SPY_FIELD_CPU_MS = 1,
  SPY_FIELD_GPU_MS = 2, /* NAN: not available */
  SPY_FIELD_COUNTER0 = 3 /* counter c is SPY_FIELD_COUNTER0 + c */
} spy_field;

typedef struct spy_state {
  spy_conn conn;
  spy_provider_info provider; /* name points into provider_name */
  char provider_name[SPY_NAME_MAX + 1];
  uint64_t connected_ms, last_msg_ms; /* consumer monotonic ms */
  /* Stats history: per-field rings of `history` samples, newest last. */
  uint32_t history;    /* capacity */
  uint32_t len;        /* samples held */
  uint32_t head;       /* index of the next write */
  float *rings;        /* [3 + SPY_STATS_MAX_COUNTERS][history] */
  uint64_t samples;    /* samples received in total */
  uint64_t last_frame; /* provider frame key of the newest sample */
  uint64_t samples_lost; /* gaps in frame keys (provider drops) */
  float batch_mean[3]; /* fps, cpu, gpu means of the last batch */
  char counter_names[SPY_STATS_MAX_COUNTERS][SPY_KEY_MAX + 1];
  uint32_t n_counters;
  spy_state_table env, registry, buffers;
  uint64_t health[SPY_HEALTH_FIELD_COUNT];
  /* Bookkeeping */
  uint64_t frames_received, bytes_received;
  uint64_t frames_lost;  /* bus overruns and sequence gaps */
  uint64_t resyncs;      /* resync requests sent */
  uint64_t snapshots;    /* full snapshots applied */
  uint64_t malformed;    /* frames rejected by the decoder */
  uint64_t subscribes;   /* subscribe messages sent */
  uint64_t reconnects;   /* times a provider was lost */
  double rx_frames_per_s, rx_bytes_per_s; /* over the last second */
  int64_t clock_offset_ns; /* provider clock − ours, when synced */
  int clock_synced;
  /* What this state keeps: frames on a shared channel carry the union of
   * every subscriber's features. 0 = everything (recordings). */
  uint32_t features;
  int registry_filter;            /* 1: only registry_names get values */
  const char *const *registry_names;
  uint32_t n_registry_names;
} spy_state;

typedef struct spy_consumer_desc {
  const char *want;        /* provider id (16 hex digits) or name; NULL any */
  uint32_t features;       /* 0 = STATS | ENV | REGISTRY | HEALTH */
  int registry_filter;     /* 1: only the names below (possibly none) */
  const char *const *registry;
  uint32_t n_registry;
  const spy_buffer_request *buffers;
  uint32_t n_buffers;
  const char *dir;         /* runtime directory; NULL = default */
  uint32_t history;        /* samples kept per field; default 600 */
  /* Timings, milliseconds (defaults as in the header comment). */
  uint32_t query_initial_ms, query_max_ms, query_attempts;
  uint32_t ack_ms, liveness_ms, stale_ms;
  uint32_t recv_bytes;     /* largest frame accepted; default 1 MiB */
} spy_consumer_desc;

/* Creates a consumer and starts searching. Errors: SPY_EINVAL,
 * SPY_ENOMEM, SPY_EOWNER or a channel error. */
int spy_consumer_create(spy_consumer **out, const spy_consumer_desc *desc);
/* Unsubscribes (if connected) and frees. NULL is accepted. */
void spy_consumer_destroy(spy_consumer *c);
/* Runs the protocol for up to timeout_ms (0: only what is pending): sends
 * queries, subscribes, acks, applies every frame received. Returns the
 * number of frames applied (>= 0) or a negative error. */
int spy_consumer_poll(spy_consumer *c, int timeout_ms);
const spy_state *spy_consumer_state(const spy_consumer *c);
/* This consumer's id. */
uint64_t spy_consumer_id(const spy_consumer *c);
/* Asks the provider for a full snapshot now. */
int spy_consumer_resync(spy_consumer *c);

/* Reading the state */
/* The sample `age` back from the newest (0 = newest) of a field; NAN if
 * there is none. */
float spy_state_sample(const spy_state *s, uint32_t field, uint32_t age);
static inline float spy_state_last(const spy_state *s, uint32_t field) {
  return spy_state_sample(s, field, 0);
}
/* The entry named `name` in a table, or NULL. */
const spy_state_entry *spy_state_find(const spy_state_table *t,
                                      const char *name);
/* 1 if the entry has not changed for stale_ms (a value not refreshed). */
int spy_state_is_stale(const spy_consumer *c, const spy_state_entry *e);
/* Index of a counter by name, or -1. */
int spy_state_counter(const spy_state *s, const char *name);

/* Applying frames without the protocol (recordings, tests): a state of
 * `history` samples, frames applied in order. */
int spy_state_init(spy_state *s, uint32_t history);
void spy_state_free(spy_state *s);
/* Applies one decoded DATA frame: absent = keep, cleared = reset, present
 * = replace; FULL lists replace the whole table. Returns 0 or the decode
 * error of the first malformed section (nothing of that section is
 * applied). now_ms stamps updated entries. */
int spy_state_apply(spy_state *s, const spy_frame *f, uint64_t now_ms);

#ifdef __cplusplus
}
#endif
#endif
