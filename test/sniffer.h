/* sniffer.h — a hand-driven consumer for provider tests: subscribes on a
 * provider's data channel with raw frames, acks, and hands back each data
 * frame decoded, so a test sees exactly what the provider sent. */
#ifndef SPY_TEST_SNIFFER_H
#define SPY_TEST_SNIFFER_H

#include "spyglass/bus.h"
#include "spyglass/wire.h"
#include "testutil.h"

typedef struct sniffer {
  spy_channel *ch;
  uint64_t id;
  uint32_t features;
  double last_ack;
  uint8_t buf[1 << 20];
  spy_frame f;
} sniffer;

static inline int sniff_post(sniffer *s, uint32_t type, const char *const *reg,
                             uint16_t nreg, int filter) {
  uint8_t b[4096];
  spy_frame_writer w;
  spy_frame_start(&w, b, sizeof b, type, 0, 0, 0);
  if (type == SPY_MSG_SUBSCRIBE) {
    spy_subscription sub = {.consumer = s->id,
                            .features = s->features,
                            .flags = filter ? SPY_SUB_REGISTRY_FILTER : 0,
                            .n_registry = nreg,
                            .registry = reg};
    spy_put_subscription(&w, &sub);
  } else {
    spy_put_peer(&w, s->id, s->features);
  }
  int n = spy_frame_finish(&w);
  return n < 0 ? n : spy_channel_post(s->ch, b, (size_t)n);
}

/* Opens the provider's data channel and subscribes; waits for the ack.
 * Returns 0 or a negative error. */
static inline int sniff_open(sniffer *s, const char *dir, uint64_t provider,
                             uint32_t features) {
  char name[64];
  snprintf(name, sizeof name, "spyglass:%016llx", (unsigned long long)provider);
  spy_channel_desc d = {.name = name, .dir = dir};
  int rc = spy_channel_open(&s->ch, &d);
  if (rc < 0)
    return rc;
  s->id = 0x5151515151515151ull;
  s->features = features;
  sniff_post(s, SPY_MSG_SUBSCRIBE, NULL, 0, 0);
  s->last_ack = tu_now_s();
  double end = tu_now_s() + 5;
  while (tu_now_s() < end) {
    int n = spy_channel_recv(s->ch, s->buf, sizeof s->buf, 50, NULL);
    if (n > 0 && spy_frame_decode(s->buf, (size_t)n, &s->f, NULL) == 0 &&
        s->f.type == SPY_MSG_SUBSCRIBE_ACK)
      return 0;
  }
  return SPY_ETIMEDOUT;
}

/* Next DATA frame within `seconds` (acking as a consumer would); 1 if one
 * arrived (in s->f), 0 if not. */
static inline int sniff_data(sniffer *s, double seconds) {
  double end = tu_now_s() + seconds;
  while (tu_now_s() < end) {
    if (tu_now_s() - s->last_ack > 0.1) {
      sniff_post(s, SPY_MSG_ACK, NULL, 0, 0);
      s->last_ack = tu_now_s();
    }
    int n = spy_channel_recv(s->ch, s->buf, sizeof s->buf, 10, NULL);
    if (n > 0 && spy_frame_decode(s->buf, (size_t)n, &s->f, NULL) == 0 &&
        s->f.type == SPY_MSG_DATA)
      return 1;
  }
  return 0;
}

static inline void sniff_close(sniffer *s) {
  sniff_post(s, SPY_MSG_UNSUBSCRIBE, NULL, 0, 0);
  spy_channel_close(s->ch);
}

#endif
