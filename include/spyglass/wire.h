/* wire.h — the spyglass wire frame: one binary frame for every message on
 * every path (in-process, shared memory, TCP, WebSocket, files).
 *
 * The format is specified in docs/wire.md. In short: a 16-byte little-endian
 * header (used_bytes, type, ts_low, ts_high), then TLV sections (feature_id
 * u32, section_bytes u32, bytes, zero padding to a 4-byte boundary). The
 * first section is always SPY_SEC_FRAME, which carries the protocol version,
 * frame flags and the sender's sequence number.
 *
 * Encoding writes into a caller-owned buffer and never allocates. Errors are
 * sticky: after the first failure every put is a no-op and the final
 * spy_frame_finish() returns the error, so a hot encoder needs no checks
 * between puts. Decoding validates the whole frame up front
 * (spy_frame_decode) and then hands out views that point into the caller's
 * buffer: nothing is copied and nothing is allocated. Every function in this
 * header is reentrant and thread-safe on distinct objects.
 */
#ifndef SPYGLASS_WIRE_H
#define SPYGLASS_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "spyglass/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPY_WIRE_VERSION 1u
#define SPY_FRAME_HEADER_BYTES 16u
#define SPY_SECTION_HEADER_BYTES 8u
/* The largest frame any spyglass component encodes or accepts, header
 * included. A header announcing more is refused before anything is read or
 * allocated. */
#define SPY_FRAME_MAX (16u * 1024u * 1024u)
/* Smallest valid frame: header + FRAME section (8 + 8 bytes). */
#define SPY_FRAME_MIN (SPY_FRAME_HEADER_BYTES + SPY_SECTION_HEADER_BYTES + 8u)

/* Bounds on decoded content (a frame that exceeds one is malformed). */
#define SPY_KEY_MAX 255u            /* bytes in a registry / env / buffer key */
#define SPY_STRING_MAX 65535u       /* bytes in a string value */
#define SPY_STATS_MAX_SAMPLES 4096u /* samples in one stats batch */
#define SPY_STATS_MAX_COUNTERS 64u  /* counters per sample */
#define SPY_NAME_MAX 255u           /* program / provider name bytes */

/* Message types. 1..9 follow the original protocol; 10 and 11 were its
 * internal pool messages and stay unused; spyglass's own start at 16. */
typedef enum spy_msg_type {
  SPY_MSG_DATA = 1,
  SPY_MSG_SUBSCRIBE = 2,
  SPY_MSG_SUBSCRIBE_ACK = 3,
  SPY_MSG_ACK = 4,
  SPY_MSG_UNSUBSCRIBE = 5,
  SPY_MSG_PING = 6,
  SPY_MSG_PROVIDER_ANNOUNCE = 7,
  SPY_MSG_PROVIDER_QUERY = 8,
  SPY_MSG_PROVIDER_GONE = 9,
  SPY_MSG_BUFFER_CHUNK = 16, /* an encoded (VP9) chunk of a buffer stream */
  SPY_MSG_BUFFER_RAW = 17,   /* display-ready RGBA8 pixels of a buffer */
  SPY_MSG_RESYNC = 18,       /* consumer saw a gap: send a full snapshot */
  SPY_MSG_TRACE = 19,        /* structured trace actions */
  SPY_MSG_CLOCK = 20,        /* clock-sync request / reply */
  SPY_MSG_BUFFER_PROBE = 21  /* consumer: the source value of a pixel */
} spy_msg_type;

/* Section (feature) ids. 1..4 follow the original protocol. */
typedef enum spy_section_id {
  SPY_SEC_FRAME = 0,        /* version u16, flags u16, seq u32: always first */
  SPY_SEC_STATS = 1,        /* columnar per-frame samples */
  SPY_SEC_ENV = 2,          /* delta list: environment fields */
  SPY_SEC_REGISTRY = 3,     /* delta list: named values */
  SPY_SEC_BUFFERS = 4,      /* delta list: buffer metadata */
  SPY_SEC_STATS_SCHEMA = 5, /* counter names, in column order */
  SPY_SEC_HEALTH = 6,       /* bus / transport health counters */
  SPY_SEC_PROVIDER = 7,     /* who a provider is (announce, gone) */
  SPY_SEC_PEER = 8,         /* a consumer id and its features */
  SPY_SEC_SUBSCRIPTION = 9, /* features, registry filter, buffer modes */
  SPY_SEC_PIXELS = 10,      /* one buffer image (raw or encoded chunk) */
  SPY_SEC_TRACE = 11,       /* trace actions (store layer) */
  SPY_SEC_MSGPROF = 12,     /* message profiler summary */
  SPY_SEC_CLOCK = 13,       /* clock-sync timestamps */
  SPY_SEC_ZONES = 14,       /* CPU zones: per-thread begin/end events */
  SPY_SEC_BATCHES = 15,     /* the batch list: what a frame drew */
  SPY_SEC_PASSES = 16,      /* the render-pass tree */
  SPY_SEC_BUILD = 17,       /* build progress (TRACE feature), wire/trace.c */
  SPY_SEC_PROBE = 18,       /* buffer pixels' source values (wire/buffers.c) */
  SPY_SEC_BUFFER_VARIANTS = 19 /* delta list: every variant a buffer serves */
} spy_section_id;

/* Feature bits in a subscription: bit (1 << section id). */
#define SPY_FEAT(sec) (1u << (sec))
#define SPY_FEAT_STATS SPY_FEAT(SPY_SEC_STATS)
#define SPY_FEAT_ENV SPY_FEAT(SPY_SEC_ENV)
#define SPY_FEAT_REGISTRY SPY_FEAT(SPY_SEC_REGISTRY)
#define SPY_FEAT_BUFFERS SPY_FEAT(SPY_SEC_BUFFERS)
#define SPY_FEAT_HEALTH SPY_FEAT(SPY_SEC_HEALTH)
#define SPY_FEAT_TRACE SPY_FEAT(SPY_SEC_TRACE)
#define SPY_FEAT_MSGPROF SPY_FEAT(SPY_SEC_MSGPROF)
#define SPY_FEAT_ZONES SPY_FEAT(SPY_SEC_ZONES)
#define SPY_FEAT_BATCHES SPY_FEAT(SPY_SEC_BATCHES)
#define SPY_FEAT_PASSES SPY_FEAT(SPY_SEC_PASSES)

/* Frame flags (in the FRAME section). */
#define SPY_FRAME_SNAPSHOT 0x0001u   /* every feature sent whole */
#define SPY_FRAME_CHECKPOINT 0x0002u /* periodic whole registry */

/* Returns the name of a message type ("data", "subscribe", …) or NULL. */
const char *spy_msg_type_name(uint32_t type);
/* Returns the name of a section id ("stats", "env", …) or NULL. */
const char *spy_section_name(uint32_t id);

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */

/* A frame under construction in a caller-owned buffer. Zero it or fill it
 * with spy_frame_start(); it holds no resources and needs no destroy. */
typedef struct spy_frame_writer {
  uint8_t *buf;
  size_t cap;
  size_t len;
  size_t sec_start; /* offset of the open section's header, or 0 */
  int err;          /* first error, sticky */
} spy_frame_writer;

/* Begins a frame of `type` in buf[0..cap): writes the header and the FRAME
 * section. ts_ms is wall-clock milliseconds since the epoch. Fails (and the
 * error sticks) with SPY_ENOBUFS if cap < SPY_FRAME_MIN, SPY_EINVAL on a NULL
 * buffer. cap above SPY_FRAME_MAX is clamped to it. */
int spy_frame_start(spy_frame_writer *w, void *buf, size_t cap, uint32_t type,
                    uint64_t ts_ms, uint32_t seq, uint16_t flags);

/* Opens a section; the previous one, if open, is closed first. */
void spy_frame_section_begin(spy_frame_writer *w, uint32_t id);
/* Closes the open section: writes its length and pads to 4 bytes. */
void spy_frame_section_end(spy_frame_writer *w);
/* Appends raw bytes / little-endian integers to the open section. Set
 * SPY_ENOBUFS (sticky) when the buffer is full. */
void spy_frame_put(spy_frame_writer *w, const void *p, size_t n);
void spy_frame_put_u8(spy_frame_writer *w, uint8_t v);
void spy_frame_put_u16(spy_frame_writer *w, uint16_t v);
void spy_frame_put_u32(spy_frame_writer *w, uint32_t v);
void spy_frame_put_u64(spy_frame_writer *w, uint64_t v);
void spy_frame_put_f64(spy_frame_writer *w, double v);
/* Reserves n bytes in the open section and returns where to write them, or
 * NULL (error set). For columnar arrays written in place. */
void *spy_frame_reserve(spy_frame_writer *w, size_t n);

/* Closes the open section and writes used_bytes. Returns the frame length
 * (> 0) or the sticky negative error. The frame is then in w->buf. */
int spy_frame_finish(spy_frame_writer *w);

/* ------------------------------------------------------------------------ */
/* Decoding                                                                  */

/* A validated frame: views into the caller's bytes, valid while they are. */
typedef struct spy_frame {
  uint32_t type;
  uint64_t ts_ms;
  uint16_t version;
  uint16_t flags;
  uint32_t seq;
  const uint8_t *bytes; /* the whole frame */
  uint32_t len;         /* used_bytes */
} spy_frame;

typedef struct spy_section {
  uint32_t id;
  uint32_t len;
  const uint8_t *data;
} spy_section;

/* Reads only the 16-byte header at p (n bytes available) and returns the
 * frame's used_bytes (> 0), so a stream reader knows how much to read next.
 * SPY_ETRUNCATED if n < 16, SPY_EBADHEADER if used_bytes < SPY_FRAME_MIN or
 * not a multiple of 4, SPY_ETOOBIG if used_bytes > SPY_FRAME_MAX. Nothing is
 * allocated whatever the header claims. */
int spy_frame_peek_len(const void *p, size_t n);

/* Validates a whole frame at p (n bytes available, the frame may be
 * followed by more bytes) and fills *out. Checks the header, that every
 * section lies within the frame, that the first is a well-formed FRAME
 * section of this protocol version, and that the type is known.
 * Errors: SPY_ETRUNCATED, SPY_ETOOBIG, SPY_EBADHEADER, SPY_EBADSECTION,
 * SPY_ENOSECTION, SPY_EBADVERSION, SPY_EBADTYPE. On failure *out is left
 * zeroed, and *err_off (if non-NULL) receives the byte offset within the
 * frame where the problem was found. */
int spy_frame_decode(const void *p, size_t n, spy_frame *out, size_t *err_off);

/* Iterates the sections after FRAME. *cursor starts at 0. Returns 1 and
 * fills *s while there is a section, 0 at the end. The frame must come
 * from spy_frame_decode (its sections are already bounds-checked). */
int spy_frame_next_section(const spy_frame *f, size_t *cursor, spy_section *s);
/* Finds the first section with `id`; returns 1 if found, else 0. */
int spy_frame_find_section(const spy_frame *f, uint32_t id, spy_section *s);

/* ------------------------------------------------------------------------ */
/* STATS: columnar per-frame samples                                         */
/*
 * Section layout: u64 start_frame, u32 count, u16 n_counters, u16 flags,
 * then u32 counters[n_counters][count] (one column per counter),
 * i16 fps_x10[count], u16 cpu_x100[count], u16 gpu_x100[count].
 * gpu_x100 == SPY_GPU_NONE means "not available" (no timing), never 0 ms.
 */
#define SPY_GPU_NONE 0xFFFFu

typedef struct spy_stats_batch {
  uint64_t start_frame;
  uint32_t count;
  uint16_t n_counters;
  uint16_t flags;
  /* Encoding: pointers to the columns to copy. Decoding: unaligned views
   * into the frame; read them with spy_stats_* accessors or memcpy. */
  const void *fps_x10;  /* int16[count] */
  const void *cpu_x100; /* uint16[count] */
  const void *gpu_x100; /* uint16[count] */
  const void *counters; /* uint32[n_counters][count] */
  /* Encoding only: elements between the starts of two counter columns in
   * `counters` (0 = count, i.e. packed). Lets a ring of fixed capacity be
   * encoded without repacking. */
  uint32_t counter_stride;
} spy_stats_batch;

/* Appends a STATS section. Columns are copied as little-endian arrays. */
void spy_put_stats(spy_frame_writer *w, const spy_stats_batch *b);
/* Parses a STATS section into views. SPY_EBADSECTION if the length does
 * not match count/n_counters, SPY_EBADVALUE if a bound is exceeded. */
int spy_get_stats(const spy_section *s, spy_stats_batch *out);
int16_t spy_stats_fps_x10(const spy_stats_batch *b, uint32_t i);
uint16_t spy_stats_cpu_x100(const spy_stats_batch *b, uint32_t i);
uint16_t spy_stats_gpu_x100(const spy_stats_batch *b, uint32_t i);
uint32_t spy_stats_counter(const spy_stats_batch *b, uint32_t c, uint32_t i);

/* STATS_SCHEMA: u16 n, u16 reserved, then n × (u16 len, bytes) names. */
void spy_put_name_list(spy_frame_writer *w, uint32_t section_id,
                       const char *const *names, uint32_t n);
typedef struct spy_name_iter {
  const uint8_t *p, *end;
  uint32_t left;
} spy_name_iter;
/* Validates a name-list section and prepares iteration; returns the count
 * or SPY_EBADSECTION / SPY_EBADVALUE. */
int spy_get_name_list(const spy_section *s, spy_name_iter *it);
/* Returns 1 with the next name (not NUL-terminated), 0 at the end. */
int spy_name_next(spy_name_iter *it, const char **name, uint32_t *len);

/* ------------------------------------------------------------------------ */
/* Delta lists: ENV, REGISTRY, BUFFERS                                       */
/*
 * Section layout: u16 flags, u16 reserved, u32 count, then count entries:
 * u8 state, u8 kind, u16 key_len, u32 value_len, key, value, pad to 4.
 * A key absent from the list is unchanged (unless the list is FULL, when
 * everything not listed is cleared); state CLEARED resets it; state SET
 * replaces it with the value; state META says it exists, with its kind,
 * but carries no value (value_len 0).
 */
#define SPY_DELTA_FULL 0x0001u /* a whole snapshot, not a delta */

typedef enum spy_delta_state {
  SPY_DELTA_SET = 1,     /* replaced by the value */
  SPY_DELTA_CLEARED = 2, /* reset: no value */
  SPY_DELTA_META = 3     /* exists with this kind, value not sampled (a
                            registry entry outside the subscription filter) */
} spy_delta_state;

/* Value kinds. 1..7 follow the original registry kinds. */
typedef enum spy_value_kind {
  SPY_VAL_NONE = 0,   /* no value (with CLEARED) */
  SPY_VAL_FLOAT = 1,  /* f64 */
  SPY_VAL_UINT = 2,   /* u64 */
  SPY_VAL_INT = 3,    /* i64 */
  SPY_VAL_FLOAT2 = 4, /* f64[2] */
  SPY_VAL_FLOAT3 = 5, /* f64[3] */
  SPY_VAL_FLOAT4 = 6, /* f64[4] */
  SPY_VAL_BITS = 7,   /* u64 bit set */
  SPY_VAL_BOOL = 8,   /* u8 0/1 */
  SPY_VAL_STRING = 9, /* UTF-8 bytes, no NUL, ≤ SPY_STRING_MAX */
  SPY_VAL_BLOB = 10   /* opaque bytes, ≤ SPY_STRING_MAX */
} spy_value_kind;

/* Size of a fixed-size kind's value, 0 for NONE, -1 for variable size
 * (STRING, BLOB), -2 for an unknown kind. */
int spy_value_kind_size(uint32_t kind);
const char *spy_value_kind_name(uint32_t kind);

/* A decoded or to-be-encoded value. */
typedef struct spy_value {
  uint8_t kind;
  union {
    double f[4];
    uint64_t u;
    int64_t i;
    int b;
    struct {
      const char *ptr;
      uint32_t len;
    } s;
  } v;
} spy_value;

typedef struct spy_delta_entry {
  uint8_t state; /* spy_delta_state */
  const char *key;
  uint32_t key_len;
  spy_value value;
} spy_delta_entry;

/* Opens a delta-list section; returns nothing, errors are sticky. Call
 * spy_delta_put() for each entry and spy_delta_end() to close it. */
typedef struct spy_delta_writer {
  spy_frame_writer *w;
  size_t count_off;
  uint32_t count;
} spy_delta_writer;
void spy_delta_begin(spy_delta_writer *d, spy_frame_writer *w,
                     uint32_t section_id, uint16_t flags);
/* Appends one entry. key must be 1..SPY_KEY_MAX bytes; a string longer
 * than SPY_STRING_MAX sets SPY_EINVAL. */
void spy_delta_put(spy_delta_writer *d, uint8_t state, const char *key,
                   uint32_t key_len, const spy_value *value);
void spy_delta_end(spy_delta_writer *d);

/* Pre-encoded entries. A producer that keeps its state in wire form (the
 * provider's registry does) encodes each entry once with
 * spy_delta_encode_entry() into its own storage, updates the value bytes in
 * place, and copies changed entries into a frame with
 * spy_delta_put_encoded(): a delta then costs one memcpy per run of
 * entries instead of one field-by-field encode per entry.
 * spy_delta_entry_size: bytes one entry takes (padded to 4).
 * spy_delta_encode_entry: returns the bytes written (> 0) or SPY_EINVAL /
 * SPY_ENOBUFS. spy_delta_put_encoded: appends `bytes` of `count` entries
 * that must come from spy_delta_encode_entry (not checked here; a frame
 * holding malformed ones is rejected by every decoder). */
size_t spy_delta_entry_size(uint32_t key_len, uint32_t value_len);
int spy_delta_encode_entry(void *dst, size_t cap, uint8_t state,
                           const char *key, uint32_t key_len,
                           const spy_value *value);
void spy_delta_put_encoded(spy_delta_writer *d, const void *entries,
                           size_t bytes, uint32_t count);

typedef struct spy_delta_iter {
  const uint8_t *p, *end;
  uint32_t left;
  uint16_t flags;
} spy_delta_iter;
/* Validates every entry of a delta-list section and prepares iteration.
 * Returns the entry count, or SPY_EBADSECTION / SPY_EBADVALUE. */
int spy_get_delta(const spy_section *s, spy_delta_iter *it);
/* Returns 1 with the next entry (views into the frame), 0 at the end.
 * Inline (below): a consumer's apply loop runs it once per entry. */
static inline int spy_delta_next(spy_delta_iter *it, spy_delta_entry *e);

/* ------------------------------------------------------------------------ */
/* Control payloads                                                          */

typedef enum spy_provider_kind {
  SPY_PROVIDER_USER = 0,
  SPY_PROVIDER_SYSTEM = 1
} spy_provider_kind;

/* PROVIDER section: u64 id, u64 start_ms, u32 pid, u8 kind, u8 reserved,
 * u16 subscribers, u16 name_len, u16 reserved, name. */
typedef struct spy_provider_info {
  uint64_t id;
  uint64_t start_ms; /* wall clock, ms since the epoch */
  uint32_t pid;
  uint8_t kind; /* spy_provider_kind */
  uint16_t subscribers;
  const char *name; /* decoded: a view, not NUL-terminated */
  uint32_t name_len;
} spy_provider_info;
void spy_put_provider(spy_frame_writer *w, const spy_provider_info *p);
int spy_get_provider(const spy_section *s, spy_provider_info *out);

/* PEER section: u64 id, u32 features, u32 reserved. */
typedef struct spy_peer_info {
  uint64_t id;
  uint32_t features;
} spy_peer_info;
void spy_put_peer(spy_frame_writer *w, uint64_t id, uint32_t features);
int spy_get_peer(const spy_section *s, spy_peer_info *out);

/* SUBSCRIPTION section: u64 consumer, u32 features, u16 flags,
 * u16 n_registry, u16 n_buffers, u16 reserved, then n_registry × (u16 len,
 * name), then n_buffers × (u16 len, name, u8 mode, u8 reserved,
 * u16 thumb_long_edge). Flag SPY_SUB_REGISTRY_FILTER: a filter is present
 * (n_registry may be 0 = "no entries, metadata only"); without it every
 * entry is sampled. */
#define SPY_SUB_REGISTRY_FILTER 0x0001u
#define SPY_SUB_MAX_NAMES 1024u
#define SPY_SUB_DISPLAY_MAX 5u /* display modes 0..5 (media.h) */

typedef enum spy_buffer_mode {
  SPY_BUFFER_THUMBNAIL = 1,
  SPY_BUFFER_STREAM = 2
} spy_buffer_mode;

typedef struct spy_buffer_request {
  const char *name;
  uint32_t name_len;
  uint8_t mode;       /* spy_buffer_mode */
  uint16_t long_edge; /* thumbnail long edge in px; 0 = 256 (stream: 0 =
                         full size) */
  uint8_t display;    /* spy_display_mode (media.h); 0 = the type's default.
                         On the wire: the byte after mode (≤ 5). */
} spy_buffer_request;

typedef struct spy_subscription {
  uint64_t consumer;
  uint32_t features;
  uint16_t flags;
  uint16_t n_registry;
  uint16_t n_buffers;
  /* Encoding: arrays of n_registry names / n_buffers requests. Decoding:
   * NULL; iterate with spy_subscription_registry / _buffer. */
  const char *const *registry;
  const spy_buffer_request *buffers;
  /* Decoding: views for the iterators. */
  const uint8_t *reg_p, *buf_p, *end;
} spy_subscription;
void spy_put_subscription(spy_frame_writer *w, const spy_subscription *s);
int spy_get_subscription(const spy_section *s, spy_subscription *out);
/* Walk the decoded lists: *cursor starts at NULL; return 1 while there is
 * an item. Only valid on a subscription from spy_get_subscription. */
int spy_subscription_next_registry(const spy_subscription *s,
                                   const uint8_t **cursor, const char **name,
                                   uint32_t *len);
int spy_subscription_next_buffer(const spy_subscription *s,
                                 const uint8_t **cursor,
                                 spy_buffer_request *out);

/* HEALTH section: u32 n, u32 reserved, u64 values[n]. Fields are appended
 * over time; a reader takes the ones it knows and ignores the rest. */
typedef enum spy_health_field {
  SPY_HEALTH_FRAMES_POSTED,
  SPY_HEALTH_BYTES_POSTED,
  SPY_HEALTH_FLUSHES_DROPPED, /* pool empty: flush dropped */
  SPY_HEALTH_SAMPLES_DROPPED, /* sample ring full: newest dropped */
  SPY_HEALTH_FRAMES_LOST,     /* reader overruns seen by the provider */
  SPY_HEALTH_SUBSCRIBERS,
  SPY_HEALTH_POOL_SMALL_FREE,
  SPY_HEALTH_POOL_MEDIUM_FREE,
  SPY_HEALTH_POOL_LARGE_FREE,
  SPY_HEALTH_FIELD_COUNT
} spy_health_field;
void spy_put_health(spy_frame_writer *w, const uint64_t *values, uint32_t n);
/* Decodes up to max values into out (missing ones are zeroed); returns the
 * number present in the section or a negative error. */
int spy_get_health(const spy_section *s, uint64_t *out, uint32_t max);

/* PIXELS section: u64 frame, u64 captured_ms, u32 width, u32 height,
 * u16 pixel_type, u8 display, u8 flags, u16 codec, u16 name_len,
 * u32 data_len, name, pad to 4, [variant], data. flags: 0x1 key frame,
 * 0x2 part (the data starts with u32 offset, u32 total: these bytes are
 * [offset, offset + data_len - 8) of a payload of `total` bytes sent in
 * consecutive frames, too big for one), 0x4 variant (4 bytes before the
 * data, not counted in data_len: u8 mode, u8 0, u16 long_edge — the
 * request this image answers, so that each subscriber keeps its own). */
typedef enum spy_codec { SPY_CODEC_RGBA8 = 0, SPY_CODEC_VP9 = 1 } spy_codec;
#define SPY_PIXELS_KEY 0x01u
#define SPY_PIXELS_PART 0x02u
#define SPY_PIXELS_VARIANT 0x04u
#define SPY_PIXELS_VARIANT_BYTES 4u
#define SPY_PIXELS_PART_HEADER 8u
#define SPY_PIXELS_TOTAL_MAX (64u * 1024u * 1024u) /* a payload, all parts */
typedef struct spy_pixels {
  uint64_t frame;
  uint64_t captured_ms;
  uint32_t width, height;
  uint16_t pixel_type; /* source pixel type before conversion */
  uint8_t display;     /* spy_display_mode served */
  uint8_t key_frame;   /* 1: a key frame (RGBA8 frames always are) */
  uint16_t codec;      /* spy_codec */
  const char *name;
  uint32_t name_len;
  const void *data; /* this frame's bytes of the payload (after the part
                       header) */
  uint32_t data_len;
  /* Parts: part_total 0 = the whole payload is here. Else data is bytes
   * [part_offset, part_offset + data_len) of part_total. */
  uint32_t part_offset, part_total;
  /* The variant (request) the image answers: variant_mode 0 = not said
   * (an older provider), else spy_buffer_mode; variant_long_edge as the
   * request asked (thumbnail: 0 already made 256; stream: 0 = full size).
   * The display asked is `display` (resolved, media.h). */
  uint8_t variant_mode;
  uint16_t variant_long_edge;
} spy_pixels;
void spy_put_pixels(spy_frame_writer *w, const spy_pixels *px);
/* Like spy_put_pixels, but reserves px->data_len bytes for the caller to
 * fill (px->data is ignored) and returns where, or NULL on error (sticky).
 * The section closes at the next section or spy_frame_finish. */
void *spy_put_pixels_reserve(spy_frame_writer *w, const spy_pixels *px);
int spy_get_pixels(const spy_section *s, spy_pixels *out);

/* ------------------------------------------------------------------------ */
/* Buffer metadata: the value of a BUFFERS delta entry (key = buffer name)  */
/*
 * A BLOB of 48 bytes: u16 pixel_type, u8 mode served (0 none, else
 * spy_buffer_mode), u8 display, u32 width, u32 height, u32 served_width,
 * u32 served_height, u16 codec, u16 max_fps, u64 last_frame (provider frame
 * of the last capture; 0 none), u64 captured (captures so far), u64
 * dropped (captures dropped: no pool buffer, queue full).
 */
#define SPY_BUFFER_META_BYTES 48u
typedef struct spy_buffer_meta {
  uint16_t pixel_type;
  uint8_t mode; /* 0: metadata only (nobody asked for pixels) */
  uint8_t display;
  uint32_t width, height;
  uint32_t served_width, served_height; /* what is sent (0: nothing) */
  uint16_t codec;                       /* spy_codec of what is sent */
  uint16_t max_fps;
  uint64_t last_frame, captured, dropped;
} spy_buffer_meta;
/* PROBE section: the source value of one pixel per buffer (a float
 * buffer's value before conversion). A consumer asks with a
 * SPY_MSG_BUFFER_PROBE frame (PEER + PROBE with one entry; frame and
 * value 0; x = SPY_PROBE_STOP stops); the provider reads the pixel at
 * each capture of that buffer and sends the entries that changed in its
 * DATA frames to BUFFERS subscribers. u32 n (≤ SPY_PROBE_MAX), u32 0, then
 * n × (u64 frame, u32 x, u32 y, u16 pixel_type, u16 name_len,
 * u8 value[16], name, pad to 4). frame: the capture it was read on (the
 * image of that frame shows it); value: the pixel's bytes as submitted
 * (spy_pixel_bytes of the type, little-endian floats or halves), the rest
 * zero. x, y < 16384 or x = y = SPY_PROBE_STOP. */
#define SPY_PROBE_MAX 32u
#define SPY_PROBE_STOP 0xffffffffu
typedef struct spy_probe {
  uint64_t frame;
  uint32_t x, y;
  uint16_t pixel_type;
  const char *name;
  uint32_t name_len; /* 0: strlen(name) when encoding */
  uint8_t value[16];
} spy_probe;
/* Appends a PROBE section of n entries (n ≤ SPY_PROBE_MAX, else
 * SPY_EINVAL, sticky). */
void spy_put_probe(spy_frame_writer *w, const spy_probe *items, uint32_t n);
/* Checks a whole PROBE section; *n entries. 0, SPY_EBADSECTION (lengths)
 * or SPY_EBADVALUE (a count, name, coordinate or type out of range). */
int spy_get_probe(const spy_section *s, uint32_t *n);
/* Walks a checked section: *cursor starts at NULL; 1 while an entry. */
int spy_probe_next(const spy_section *s, const uint8_t **cursor,
                   spy_probe *out);

/* Writes the 48-byte form into out. */
void spy_buffer_meta_encode(uint8_t out[SPY_BUFFER_META_BYTES],
                            const spy_buffer_meta *m);
/* Reads a BUFFERS entry's value; SPY_EBADVALUE if it is not a 48-byte
 * BLOB. */
int spy_buffer_meta_decode(const spy_value *v, spy_buffer_meta *out);

/* BUFFER_VARIANTS section (19): a delta list like BUFFERS, in the same
 * data frames and under the same feature bit (SPY_FEAT_BUFFERS), keyed by
 * buffer name; the value is a BLOB of n × SPY_BUFFER_VARIANT_BYTES
 * (n ≤ SPY_BUFFER_VARIANT_LIST_MAX; 0: metadata only), one record per
 * variant served: u8 mode (1 thumbnail, 2 stream), u8 display (resolved
 * for the type), u16 codec (spy_codec of what is sent), u16 long_edge (as
 * requested: spy_variant_long_edge), u16 0, u32 served_width,
 * u32 served_height. BUFFERS' 48-byte value still names one of them (the
 * first stream, else the largest thumbnail), so older readers, which
 * skip this section, read what they always read. */
#define SPY_BUFFER_VARIANT_BYTES 16u
#define SPY_BUFFER_VARIANT_LIST_MAX 16u
typedef struct spy_buffer_variant {
  uint8_t mode, display;
  uint16_t codec, long_edge;
  uint32_t served_width, served_height;
} spy_buffer_variant;
/* Writes n records into out (n × SPY_BUFFER_VARIANT_BYTES bytes, n ≤
 * SPY_BUFFER_VARIANT_LIST_MAX; the caller sizes out). */
void spy_buffer_variants_encode(uint8_t *out, const spy_buffer_variant *v,
                                uint32_t n);
/* Reads a BUFFER_VARIANTS entry's value into out (room for max). Returns
 * the number of records (0..SPY_BUFFER_VARIANT_LIST_MAX, at most max are
 * stored), or SPY_EBADVALUE: not a BLOB, a length not a multiple of the
 * record, too many, or a mode, display or codec out of range. */
int spy_buffer_variants_decode(const spy_value *v, spy_buffer_variant *out,
                               uint32_t max);

/* ------------------------------------------------------------------------ */
/* ZONES: CPU zones (docs/wire.md)                                           */
/*
 * Section layout: u16 flags, u16 reserved, u32 n_locs, u32 n_threads,
 * u32 reserved, u64 base_ns; then n_locs location records, then n_threads
 * thread blocks, each padded to 4. A thread block's events are varints:
 * v = delta_ns << 2 | kind (0 end, 1 begin + varint location id, 2 frame +
 * varint frame number); delta from the previous event of the block, the
 * first from base_ns. Times are the provider's CLOCK_MONOTONIC ns.
 */
#define SPY_ZONES_FULL 0x0001u /* every location and thread name follows */
#define SPY_ZONES_THREAD_RESET 0x01u /* forget the thread's open zones */
#define SPY_ZONES_THREAD_NAMED 0x02u /* the block carries the thread name */
#define SPY_ZONES_THREAD_GONE 0x04u  /* the thread exited: its last block */
#define SPY_ZONES_LOC_ID_MIN 16u
#define SPY_ZONES_LOC_ID_MAX 65535u
#define SPY_ZONES_FILE_MAX 1023u /* bytes of a location's file name */

typedef enum spy_zone_event_kind {
  SPY_ZONE_EV_END = 0,
  SPY_ZONE_EV_BEGIN = 1, /* value: location id */
  SPY_ZONE_EV_FRAME = 2  /* value: the provider's frame number */
} spy_zone_event_kind;

typedef struct spy_zone_loc_info {
  uint32_t id, line, color;
  const char *name, *function, *file; /* decoded: views, not terminated */
  uint32_t name_len, function_len, file_len; /* name, function <= 255 */
} spy_zone_loc_info;

typedef struct spy_zone_thread_info {
  uint32_t thread; /* provider-local number, >= 1 */
  uint32_t os_tid;
  uint8_t flags; /* SPY_ZONES_THREAD_* */
  const char *name;
  uint32_t name_len; /* <= 63 */
  uint64_t dropped;  /* zones dropped on this thread so far (total) */
} spy_zone_thread_info;

typedef struct spy_zone_event {
  uint8_t kind;   /* spy_zone_event_kind */
  uint64_t t_ns;  /* absolute: base_ns + the deltas so far */
  uint64_t value; /* location id / frame number; 0 for end */
} spy_zone_event;

/* Encoding: begin, locations, then threads (each: thread_begin, events,
 * thread_end), end. Errors are sticky in the frame writer. */
typedef struct spy_zones_writer {
  spy_frame_writer *w;
  size_t hdr; /* offset of the section's first byte */
  size_t thr; /* offset of the open thread block, 0 if none */
  uint32_t n_locs, n_threads;
  uint64_t base_ns, last_ns;
} spy_zones_writer;
void spy_zones_begin(spy_zones_writer *z, spy_frame_writer *w, uint16_t flags,
                     uint64_t base_ns);
void spy_zones_put_loc(spy_zones_writer *z, const spy_zone_loc_info *l);
void spy_zones_thread_begin(spy_zones_writer *z, const spy_zone_thread_info *t);
/* t_ns below the previous event's time is taken as that time. */
void spy_zones_put_event(spy_zones_writer *z, uint8_t kind, uint64_t t_ns,
                         uint64_t value);
void spy_zones_thread_end(spy_zones_writer *z);
/* Closes the section (and an open thread block). */
void spy_zones_end(spy_zones_writer *z);
/* Bytes at most one event takes. */
#define SPY_ZONES_EVENT_MAX 20u

/* Decoding: spy_get_zones validates the whole section (every location,
 * block and event) before anything is handed out. Returns 0 or
 * SPY_EBADSECTION (lengths) / SPY_EBADVALUE (a bad kind, id, varint, time
 * overflow, nonzero reserved field). */
typedef struct spy_zones_iter {
  uint16_t flags;
  uint32_t n_locs, n_threads;
  uint64_t base_ns;
  const uint8_t *p, *end;
  uint32_t locs_left, threads_left;
} spy_zones_iter;
typedef struct spy_zone_event_iter {
  const uint8_t *p, *end;
  uint64_t t_ns;
} spy_zone_event_iter;
int spy_get_zones(const spy_section *s, spy_zones_iter *it);
/* 1 with the next location, 0 when they are done. */
int spy_zones_next_loc(spy_zones_iter *it, spy_zone_loc_info *out);
/* 1 with the next thread block and an iterator over its events, 0 at the
 * end (locations not yet read are skipped). */
int spy_zones_next_thread(spy_zones_iter *it, spy_zone_thread_info *out,
                          spy_zone_event_iter *ev);
int spy_zone_event_next(spy_zone_event_iter *ev, spy_zone_event *out);

/* One validating pass: checks what spy_get_zones checks (same codes) and
 * writes every thread block's events to words[] as packed words, block
 * after block, each block closed by a block-end word; the thread headers
 * and locations still come from spy_zones_next_loc / _next_thread.
 * `cap` must be at least s->len words (always enough); else SPY_ENOBUFS.
 * *n_words: words written (0 on an error; then words[] holds garbage).
 * A packed word w: kind = w & 3 (SPY_ZPK_*); for END, BEGIN and FRAME the
 * time delta from the block's previous event (the first from base_ns) is
 * w >> SPY_ZPK_DELTA_SHIFT and a begin's location id (w >> 2) & 0xffff; a
 * FRAME word is followed by a raw word, the frame number; SPECIAL words
 * carry (w >> 2) & 0xffff: BLOCK_END, or ADVANCE (the next raw word is a
 * delta too large for the field, added to the time). */
#define SPY_ZPK_END 0u
#define SPY_ZPK_BEGIN 1u
#define SPY_ZPK_FRAME 2u
#define SPY_ZPK_SPECIAL 3u
#define SPY_ZPK_BLOCK_END 0u
#define SPY_ZPK_ADVANCE 1u
#define SPY_ZPK_DELTA_SHIFT 18u
int spy_zones_unpack(const spy_section *s, spy_zones_iter *it, uint64_t *words,
                     size_t cap, size_t *n_words);

/* ------------------------------------------------------------------------ */
/* BATCHES and PASSES: what a frame drew and its render-pass tree           */
/*
 * Each section is a whole list with a version, sent only when the list
 * changed (and whole in a snapshot): u32 version, u32 count, then records
 * padded to 4.
 * BATCHES record: u16 kind_len, u16 key_len, u32 instances, u32 draws,
 *   kind, key (each ≤ 255 bytes).
 * PASSES record: u16 parent (index of an earlier pass, 0xFFFF a root),
 *   u16 label_len, u32 draws, u32 triangles, u32 cpu_us, label (≤ 255).
 */
#define SPY_BATCHES_MAX 4096u
#define SPY_PASSES_MAX 1024u
#define SPY_PASS_ROOT 0xFFFFu
typedef struct spy_batch_info {
  const char *kind, *key;     /* decoded: views, not NUL-terminated */
  uint32_t kind_len, key_len; /* encoding: 0 = strlen (cut to 255) */
  uint32_t instances, draws;
} spy_batch_info;
typedef struct spy_pass_info {
  const char *label;
  uint32_t label_len;
  uint16_t parent; /* SPY_PASS_ROOT or an earlier index */
  uint32_t draws, triangles, cpu_us;
} spy_pass_info;
typedef struct spy_list_iter {
  uint32_t version, count, left;
  const uint8_t *p;
} spy_list_iter;
void spy_put_batches(spy_frame_writer *w, uint32_t version,
                     const spy_batch_info *b, uint32_t n);
void spy_put_passes(spy_frame_writer *w, uint32_t version,
                    const spy_pass_info *p, uint32_t n);
/* Validate a section whole and prepare iteration: the count, or
 * SPY_EBADSECTION (lengths) / SPY_EBADVALUE (a bound, a parent that does
 * not come before its child). */
int spy_get_batches(const spy_section *s, spy_list_iter *it);
int spy_get_passes(const spy_section *s, spy_list_iter *it);
/* 1 with the next record (views into the frame), 0 at the end. */
int spy_batches_next(spy_list_iter *it, spy_batch_info *out);
int spy_passes_next(spy_list_iter *it, spy_pass_info *out);

/* ------------------------------------------------------------------------ */
/* BUILD: live progress of a traced build (docs/wire.md)                     */
/*
 * Sent in SPY_MSG_TRACE frames, a few times a second while a subscriber
 * has SPY_FEAT_TRACE and the build changed; the provider's build feed
 * (src/provider/trace_feed.c) aggregates the trace actions into it. One
 * section describes the current (or last) build whole.
 */
#define SPY_BUILD_HOOKS 4u /* transform, load, resolve_id, render_chunk */
#define SPY_BUILD_PLUGINS_MAX 32u /* more are folded into the last entry */
#define SPY_BUILD_SLOW_MAX 8u     /* slowest hook calls kept per build */
#define SPY_BUILD_NAME_MAX 63u    /* bytes of a plugin name */
#define SPY_BUILD_MODULE_MAX 255u /* bytes of a module id (cut) */
#define SPY_BUILD_ENDED 0x1u      /* flags: the build has ended */
/* flags: counts since started_us only (a watch began after the build
 * did; started_us is then when collection began, trace_feed.h) */
#define SPY_BUILD_PARTIAL 0x2u
#define SPY_BUILD_HEAD_BYTES 64u
#define SPY_BUILD_PLUGIN_BYTES (8u + 16u * SPY_BUILD_HOOKS + 8u)
#define SPY_BUILD_SLOW_BYTES 16u
typedef struct spy_build_plugin {
  char name[SPY_BUILD_NAME_MAX + 1];
  uint64_t calls[SPY_BUILD_HOOKS];
  uint64_t total_us[SPY_BUILD_HOOKS];
  uint64_t max_us; /* the slowest call of any hook */
  uint32_t p50_us; /* median call of any hook (±6 %), saturated */
} spy_build_plugin;
typedef struct spy_build_slow {
  uint8_t hook;    /* < SPY_BUILD_HOOKS */
  uint16_t plugin; /* index into plugins[] */
  uint64_t dur_us;
  char module[SPY_BUILD_MODULE_MAX + 1];
} spy_build_slow;
typedef struct spy_build_progress {
  uint32_t build;                /* build number in the session, 0 = none yet */
  uint32_t flags;                /* SPY_BUILD_* */
  uint64_t started_us, ended_us; /* wall clock µs; ended 0 while running */
  uint32_t modules_done;         /* load hooks finished in this build */
  uint32_t modules_total;        /* from the module graph, 0 until known */
  uint64_t actions;              /* actions the feed took since it was made */
  uint64_t hook_calls;           /* finished hook calls in this build */
  uint64_t hook_us;              /* their total time */
  uint16_t n_plugins, n_slow;
  spy_build_plugin plugins[SPY_BUILD_PLUGINS_MAX];
  spy_build_slow slow[SPY_BUILD_SLOW_MAX]; /* slowest first */
} spy_build_progress;
/* The hook's name ("transform", …) for an index < SPY_BUILD_HOOKS, else
 * "?". */
const char *spy_build_hook_name(uint32_t hook);
/* Appends a BUILD section (sets w->err SPY_EINVAL for counts or indexes
 * beyond the bounds above). */
void spy_put_build(spy_frame_writer *w, const spy_build_progress *b);
/* Decodes and validates a BUILD section whole into *out (names are
 * NUL-terminated copies). Returns 0, SPY_EBADSECTION (lengths) or
 * SPY_EBADVALUE (a count, index, flag or reserved field out of range). */
int spy_get_build(const spy_section *s, spy_build_progress *out);

/* ------------------------------------------------------------------------ */
/* Little-endian helpers (inline: used by every decoder)                    */

static inline uint16_t spy_rd16(const uint8_t *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t spy_rd32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}
static inline uint64_t spy_rd64(const uint8_t *p) {
  return (uint64_t)spy_rd32(p) | ((uint64_t)spy_rd32(p + 4) << 32);
}
static inline void spy_wr16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void spy_wr32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}
static inline void spy_wr64(uint8_t *p, uint64_t v) {
  spy_wr32(p, (uint32_t)v);
  spy_wr32(p + 4, (uint32_t)(v >> 32));
}

/* ------------------------------------------------------------------------ */
/* Inline delta iteration (entries were validated by spy_get_delta)         */

static inline int spy_delta_next(spy_delta_iter *it, spy_delta_entry *e) {
  if (!it->left)
    return 0;
  const uint8_t *p = it->p;
  uint32_t klen = spy_rd16(p + 2), vlen = spy_rd32(p + 4);
  const uint8_t *v = p + 8 + klen;
  uint8_t kind = p[1];
  e->state = p[0];
  e->key = (const char *)p + 8;
  e->key_len = klen;
  e->value.kind = kind;
  if (kind == SPY_VAL_STRING || kind == SPY_VAL_BLOB) {
    e->value.v.s.ptr = (const char *)v;
    e->value.v.s.len = vlen;
  } else if (kind == SPY_VAL_BOOL) {
    e->value.v.b = v[0] != 0;
  } else {
    /* vlen was checked by the validating decoder; the bound on f[] is
     * repeated here so no inlining can see a path past it */
    uint32_t nf = vlen / 8, cap = sizeof e->value.v.f / sizeof e->value.v.f[0];
    for (uint32_t i = 0; i < nf && i < cap; i++) {
      uint64_t u = spy_rd64(v + 8 * i);
      memcpy(&e->value.v.f[i], &u, 8);
    }
  }
  size_t padded = (8 + (size_t)klen + vlen + 3u) & ~(size_t)3u;
  size_t avail = (size_t)(it->end - p);
  it->p += padded > avail ? avail : padded;
  it->left--;
  return 1;
}

#ifdef __cplusplus
}
#endif
#endif
