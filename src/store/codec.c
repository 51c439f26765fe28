/* codec.c — the TRACE record encoding (docs/wire.md, TRACE): encode from a
 * catalog struct or a decoded tree, bounds-checked decode into a value
 * tree, validation against a descriptor; plus the decode arena and the
 * content hash (XXH3-128: libxxhash's run-time dispatch where it has one,
 * which takes AVX2 where the CPU has it — a third of the instructions of
 * its default build per byte, and the same hash).
 *
 * A record is a 32-byte header (u32 bytes, u16 kind, u16 name_len, u64 seq,
 * u64 ts_us, u32 build, u32 0), the kind's name, then one REC value. A
 * value is a u8 tag and its payload. An encoder writes what fits in the
 * buffer it is given and returns the length the record needs, so the
 * emitter encodes straight into its queue's free space and encodes again
 * only in the rare case that the record did not fit.
 *
 * For the session's own queues a lent payload (spy_trace_text.release)
 * may be encoded as a reference (SPY__TV_LENT: pointer, release, owner);
 * the public decoder refuses that tag, and spy__trace_release_record
 * releases the references of a record once the writer is done with it.
 * Those records also leave a built-in kind's name out (name_len 0: the
 * id says it), which only spy__trace_decode_lent accepts.
 */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#ifdef SPY_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* XXH3_128bits is its dispatching version */
#endif

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/json_escape.h" /* spy__small_copy */
#include "store.h"

#define HDR 32u
#define MAX_DEPTH 16
#define STR_MAX 0x7fffffffu
#define LENT_SAME 0x80000000u

typedef struct enc {
  uint8_t *p;
  size_t cap, len;
  int err;
  int refs;        /* write a hashed SRC as its SRCREF */
  spy__lend *lend; /* lent payloads as SPY__TV_LENT (when lend->on) */
} enc;

#if defined(__GNUC__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define LIKELY(x) (x)
#endif

/* Little-endian stores (one move on a little-endian host). */
static inline void st32(uint8_t *w, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(w, &v, 4);
#else
  w[0] = (uint8_t)v, w[1] = (uint8_t)(v >> 8), w[2] = (uint8_t)(v >> 16),
  w[3] = (uint8_t)(v >> 24);
#endif
}
static inline void st64(uint8_t *w, uint64_t v) {
  st32(w, (uint32_t)v);
  st32(w + 4, (uint32_t)(v >> 32));
}

/* The emitter's hot path: each put writes only when the record still
 * fits (the length counts on, so the caller learns the size it needs). */
static inline void put(enc *e, const void *s, size_t n) {
  if (LIKELY(e->len + n <= e->cap))
    memcpy(e->p + e->len, s, n);
  e->len += n;
}
static inline void put_u8(enc *e, uint8_t v) {
  if (LIKELY(e->len < e->cap))
    e->p[e->len] = v;
  e->len++;
}
static inline void put_u32(enc *e, uint32_t v) {
  if (LIKELY(e->len + 4 <= e->cap))
    st32(e->p + e->len, v);
  e->len += 4;
}
static inline void put_tag_u64(enc *e, uint8_t tag, uint64_t v) {
  if (LIKELY(e->len + 9 <= e->cap)) {
    e->p[e->len] = tag;
    st64(e->p + e->len + 1, v);
  }
  e->len += 9;
}
static void put_u64(enc *e, uint64_t v) {
  put_u32(e, (uint32_t)v);
  put_u32(e, (uint32_t)(v >> 32));
}
/* A string value's tag and length: where its n bytes go, or NULL when
 * they do not fit (the length counts on). */
static inline uint8_t *put_str_head(enc *e, uint8_t tag, size_t n) {
  uint8_t *w = NULL;
  if (LIKELY(e->len + 5 + n <= e->cap)) {
    w = e->p + e->len;
    w[0] = tag;
    st32(w + 1, (uint32_t)n);
    w += 5;
  }
  e->len += 5 + n;
  return w;
}
static inline void put_str(enc *e, uint8_t tag, const char *s, size_t n) {
  if (n > STR_MAX) {
    e->err = SPY_EINVAL;
    return;
  }
  uint8_t *w = put_str_head(e, tag, n);
  if (w)
    memcpy(w, s, n);
}

/* A lent payload by reference: tag, u32 length, then its pointer,
 * release and owner as this process's pointers (never leaves it). The
 * length's top bit (LENT_SAME) marks a payload of the same owner as the
 * queue's previous lent one (a hook's output lent again as the next
 * hook's input): the bytes are held once, so counted once. */
static void put_lent(enc *e, const spy_trace_text *t) {
  if (t->len > STR_MAX) {
    e->err = SPY_EINVAL;
    return;
  }
  uint8_t b[5 + 3 * sizeof(void *)];
  b[0] = SPY__TV_LENT;
  uint32_t n = (uint32_t)t->len;
  e->lend->bytes += t->len;
  if (t->owner == e->lend->owner)
    n |= LENT_SAME;
  else
    e->lend->held += t->len;
  e->lend->owner = t->owner;
  b[1] = (uint8_t)n, b[2] = (uint8_t)(n >> 8), b[3] = (uint8_t)(n >> 16),
  b[4] = (uint8_t)(n >> 24);
  memcpy(b + 5, &t->ptr, sizeof(void *));
  memcpy(b + 5 + sizeof(void *), &t->release, sizeof(void *));
  memcpy(b + 5 + 2 * sizeof(void *), &t->owner, sizeof(void *));
  put(e, b, sizeof b);
}

static void enc_header(enc *e, const char *name, size_t nl, uint16_t id,
                       uint64_t seq, uint64_t ts, uint32_t build) {
  if (LIKELY(e->len + HDR + nl <= e->cap)) {
    uint8_t *w = e->p + e->len;
    st32(w, 0); /* patched at the end */
    st32(w + 4, (uint32_t)id | (uint32_t)nl << 16);
    st64(w + 8, seq);
    st64(w + 16, ts);
    st32(w + 24, build);
    st32(w + 28, 0);
    if (nl) /* the session's queues leave it out */
      memcpy(w + HDR, name, nl);
  }
  e->len += HDR + nl;
}

static int64_t enc_finish(enc *e) {
  if (e->err)
    return e->err;
  if (e->len > 0xffffffffu)
    return SPY_EINVAL;
  if (e->len <= e->cap) {
    uint32_t n = (uint32_t)e->len;
    uint8_t b[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
                    (uint8_t)(n >> 24)};
    memcpy(e->p, b, 4);
  }
  return (int64_t)e->len;
}

/* ---- from a catalog struct ---------------------------------------------- */

#if defined(__SSE2__)
/* A length n such that s has no NUL in its first n bytes: the length of
 * s when its NUL lies in the 16-byte blocks that cover its first max
 * bytes (max a multiple of 16), else max. strlen's way, 16 aligned bytes
 * at a time (an aligned load never crosses a page; the bytes before s in
 * the first one are masked off, which no sanitizer can tell from a read
 * of them: hence the attribute, as for libc's own). */
__attribute__((no_sanitize("address", "thread"))) static inline size_t
short_len(const char *s, size_t max) {
  const __m128i zero = _mm_setzero_si128();
  const char *a = (const char *)((uintptr_t)s & ~(uintptr_t)15);
  unsigned skip = (unsigned)(s - a);
  unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
                   _mm_load_si128((const __m128i *)(const void *)a), zero)) >>
               skip;
  size_t n = 16 - skip;
  if (z)
    return (size_t)__builtin_ctz(z);
  for (; n < max; n += 16) {
    a += 16;
    z = (unsigned)_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_load_si128((const __m128i *)(const void *)a), zero));
    if (z)
      return n + (size_t)__builtin_ctz(z);
  }
  return max;
}

#else
static inline size_t short_len(const char *s, size_t max) {
  (void)max;
  return strlen(s);
}
#endif

/* Strings shorter than this (a module id, a plugin's name, a call id)
 * are measured by short_len and copied by spy__small_copy, inline: the
 * calls to strlen and memcpy were ~100 of an emit's ~600 instructions. */
#define SHORT_STR 32

/* A string or source field, or null (an error where it is required). */
static inline __attribute__((always_inline)) void enc_str(enc *e, const char *s,
                                                          int nullable) {
  if (s) {
    size_t n = short_len(s, SHORT_STR);
    if (n < SHORT_STR) {
      uint8_t *w = put_str_head(e, SPY_TV_STR, n);
      if (w)
        spy__small_copy((char *)w, s, n);
    } else /* no NUL in its first n bytes: measured on from there */
      put_str(e, SPY_TV_STR, s, n + strlen(s + n));
  } else {
    if (!nullable)
      e->err = SPY_EINVAL;
    put_u8(e, SPY_TV_NULL);
  }
}

static inline void enc_src(enc *e, const spy_trace_text *t, int nullable) {
  if (!t->ptr) {
    if (!nullable)
      e->err = SPY_EINVAL;
    put_u8(e, SPY_TV_NULL);
  } else if (e->lend && e->lend->on && t->release)
    put_lent(e, t);
  else
    put_str(e, SPY_TV_SRC, t->ptr, t->len);
}

static void enc_struct(enc *e, const spy_trace_kind *k, const char *base);

static void enc_field(enc *e, const spy_trace_field *f, const char *at) {
  switch (f->type) {
  case SPY_TF_STR:
  case SPY_TF_OSTR: {
    const char *s;
    memcpy(&s, at, sizeof s);
    enc_str(e, s, f->type == SPY_TF_OSTR);
    break;
  }
  case SPY_TF_SRC:
  case SPY_TF_OSRC: {
    spy_trace_text t;
    memcpy(&t, at, sizeof t);
    enc_src(e, &t, f->type == SPY_TF_OSRC);
    break;
  }
  case SPY_TF_INT:
  case SPY_TF_OINT: {
    int64_t v;
    memcpy(&v, at, sizeof v);
    if (f->type == SPY_TF_OINT && v == SPY_TRACE_NULL_INT)
      put_u8(e, SPY_TV_NULL);
    else
      put_tag_u64(e, SPY_TV_INT, (uint64_t)v);
    break;
  }
  case SPY_TF_BOOL:
  case SPY_TF_OBOOL: {
    int8_t v;
    memcpy(&v, at, 1);
    put_u8(e, v < 0 && f->type == SPY_TF_OBOOL ? SPY_TV_NULL
              : v                              ? SPY_TV_TRUE
                                               : SPY_TV_FALSE);
    break;
  }
  default: { /* lists */
    spy_trace_list l;
    memcpy(&l.items, at, sizeof l.items);
    memcpy(&l.n, at + offsetof(spy_trace_list, n), sizeof l.n);
    int nullable = f->type == SPY_TF_OLIST || f->type == SPY_TF_OSTRS;
    if (!l.items) {
      if (nullable) {
        put_u8(e, SPY_TV_NULL);
        break;
      }
      l.n = 0;
    }
    put_u8(e, SPY_TV_LIST);
    put_u32(e, l.n);
    for (uint32_t i = 0; i < l.n; i++) {
      if (f->type == SPY_TF_LIST || f->type == SPY_TF_OLIST)
        enc_struct(e, f->rec, (const char *)l.items + (size_t)i * f->rec->size);
      else if (f->type == SPY_TF_INTS) {
        put_u8(e, SPY_TV_INT);
        put_u64(e, (uint64_t)((const int64_t *)l.items)[i]);
      } else {
        const char *s = ((const char *const *)l.items)[i];
        if (!s) {
          e->err = SPY_EINVAL;
          return;
        }
        put_str(e, SPY_TV_STR, s, strlen(s));
      }
    }
  }
  }
}

static void enc_struct(enc *e, const spy_trace_kind *k, const char *base) {
  if (LIKELY(e->len + 5 <= e->cap)) {
    e->p[e->len] = SPY_TV_REC;
    st32(e->p + e->len + 1, k->nfields);
  }
  e->len += 5;
  for (uint32_t i = 0; i < k->nfields && !e->err; i++)
    enc_field(e, &k->fields[i], base + k->fields[i].offset);
}

/* ---- built-in kinds: one encoder each, generated from the catalog --------
 * The same bytes as enc_struct, written field by field in straight-line
 * code (no descriptor walk, no switch): the emitter's hot path. */

/* A list field goes through the generic encoder. */
#define ENC_LISTF(e, v, type, r)                                               \
  enc_field(e, &(const spy_trace_field){NULL, type, 0, &spy_rec_kind_##r},     \
            (const char *)&(v))

#define ENC_STR(e, v, r) enc_str(e, v, 0)
#define ENC_OSTR(e, v, r) enc_str(e, v, 1)
#define ENC_SRC(e, v, r) enc_src(e, &(v), 0)
#define ENC_OSRC(e, v, r) enc_src(e, &(v), 1)
#define ENC_INT(e, v, r) put_tag_u64(e, SPY_TV_INT, (uint64_t)(v))
#define ENC_OINT(e, v, r)                                                      \
  ((v) == SPY_TRACE_NULL_INT ? put_u8(e, SPY_TV_NULL)                          \
                             : put_tag_u64(e, SPY_TV_INT, (uint64_t)(v)))
#define ENC_BOOL(e, v, r) put_u8(e, (v) ? SPY_TV_TRUE : SPY_TV_FALSE)
#define ENC_OBOOL(e, v, r)                                                     \
  put_u8(e, (v) < 0 ? SPY_TV_NULL : (v) ? SPY_TV_TRUE : SPY_TV_FALSE)
#define ENC_LIST(e, v, r) ENC_LISTF(e, v, SPY_TF_LIST, r)
#define ENC_OLIST(e, v, r) ENC_LISTF(e, v, SPY_TF_OLIST, r)
#define ENC_STRS(e, v, r) ENC_LISTF(e, v, SPY_TF_STRS, r)
#define ENC_OSTRS(e, v, r) ENC_LISTF(e, v, SPY_TF_OSTRS, r)
#define ENC_INTS(e, v, r) ENC_LISTF(e, v, SPY_TF_INTS, r)

#define ENC_ONE_FIELD(X, type, name, rec) ENC_##type(e, a->name, rec);
#define ENC_COUNT_FIELD(X, type, name, rec) +1
#define ENC_KIND_FN(id, Name, snake, role, FIELDS)                             \
  static void enc_kind_##snake(enc *e, const void *act) {                      \
    const spy_act_##snake *a = act;                                            \
    (void)a;                                                                   \
    if (LIKELY(e->len + 5 <= e->cap)) {                                        \
      e->p[e->len] = SPY_TV_REC;                                               \
      st32(e->p + e->len + 1, 0 FIELDS(ENC_COUNT_FIELD, _));                   \
    }                                                                          \
    e->len += 5;                                                               \
    FIELDS(ENC_ONE_FIELD, _)                                                   \
  }
SPY_TRACE_ACTIONS(ENC_KIND_FN)

typedef struct kind_enc {
  void (*fn)(enc *e, const void *act);
  uint16_t name_len;
} kind_enc;
#define ENC_KIND_ROW(id, Name, snake, role, FIELDS)                            \
  [id] = {enc_kind_##snake, (uint16_t)(sizeof #Name - 1)},
static const kind_enc kind_encs[SPY_TRACE_KIND_COUNT + 1] = {
    SPY_TRACE_ACTIONS(ENC_KIND_ROW)};

int64_t spy__trace_encode_lend(const spy_trace_kind *kind, const void *act,
                               uint64_t seq, uint64_t ts_us, uint32_t build,
                               void *buf, size_t cap, spy__lend *lend) {
  if (!kind || (!act && kind->nfields))
    return SPY_EINVAL;
  if (lend)
    lend->bytes = lend->held = 0;
  enc e = {buf, buf ? cap : 0, 0, 0, 0, lend};
  uint16_t id = kind->id;
  if (LIKELY(id && id <= SPY_TRACE_KIND_COUNT && kind == spy_trace_kinds[id])) {
    /* the session's own queues leave a built-in kind's name out: its id
     * says it (spy__trace_decode_lent puts it back) */
    enc_header(&e, kind->name, lend ? 0 : kind_encs[id].name_len, id, seq,
               ts_us, build);
    kind_encs[id].fn(&e, act);
    return enc_finish(&e);
  }
  return spy__trace_encode_generic(kind, act, seq, ts_us, build, buf, cap,
                                   lend);
}

/* The descriptor walk: application kinds (tests compare it with the
 * generated encoders). */
int64_t spy__trace_encode_generic(const spy_trace_kind *kind, const void *act,
                                  uint64_t seq, uint64_t ts_us, uint32_t build,
                                  void *buf, size_t cap, spy__lend *lend) {
  if (!kind || (!act && kind->nfields) || strlen(kind->name) > 0xffff)
    return SPY_EINVAL;
  if (lend)
    lend->bytes = lend->held = 0;
  enc e = {buf, buf ? cap : 0, 0, 0, 0, lend};
  enc_header(&e, kind->name, strlen(kind->name), kind->id, seq, ts_us, build);
  static const char none = 0;
  enc_struct(&e, kind, act ? (const char *)act : &none);
  return enc_finish(&e);
}

int64_t spy_trace_encode(const spy_trace_kind *kind, const void *act,
                         uint64_t seq, uint64_t ts_us, uint32_t build,
                         void *buf, size_t cap) {
  return spy__trace_encode_lend(kind, act, seq, ts_us, build, buf, cap, NULL);
}

/* ---- lent payloads: released once -------------------------------------- */

static int release_struct(const spy_trace_kind *k, const char *base);

static int release_field(const spy_trace_field *f, const char *at) {
  int n = 0;
  if (f->type == SPY_TF_SRC || f->type == SPY_TF_OSRC) {
    spy_trace_text t;
    memcpy(&t, at, sizeof t);
    if (t.ptr && t.release) {
      t.release(t.owner);
      n++;
    }
  } else if (f->type == SPY_TF_LIST || f->type == SPY_TF_OLIST) {
    spy_trace_list l;
    memcpy(&l.items, at, sizeof l.items);
    memcpy(&l.n, at + offsetof(spy_trace_list, n), sizeof l.n);
    for (uint32_t i = 0; l.items && i < l.n; i++)
      n += release_struct(f->rec,
                          (const char *)l.items + (size_t)i * f->rec->size);
  }
  return n;
}

static int release_struct(const spy_trace_kind *k, const char *base) {
  int n = 0;
  for (uint32_t i = 0; i < k->nfields; i++)
    n += release_field(&k->fields[i], base + k->fields[i].offset);
  return n;
}

int spy__trace_release_act(const spy_trace_kind *kind, const void *act) {
  return kind && act ? release_struct(kind, act) : 0;
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* Walks one value of a record the session encoded, releasing each lent
 * payload; returns the bytes it spans, or 0 when the record is cut. */
static size_t release_val(const uint8_t *p, const uint8_t *end, int depth,
                          uint64_t *bytes) {
  if (p >= end || depth > MAX_DEPTH)
    return 0;
  size_t left = (size_t)(end - p) - 1;
  uint32_t n;
  switch (p[0]) {
  case SPY_TV_NULL:
  case SPY_TV_FALSE:
  case SPY_TV_TRUE: return 1;
  case SPY_TV_INT: return left >= 8 ? 9 : 0;
  case SPY_TV_SRCREF: return left >= 16 ? 17 : 0;
  case SPY_TV_STR:
  case SPY_TV_SRC:
    if (left < 4)
      return 0;
    n = le32(p + 1);
    return n <= left - 4 ? 5 + (size_t)n : 0;
  case SPY__TV_LENT: {
    spy_trace_text t;
    if (left < 4 + 3 * sizeof(void *))
      return 0;
    n = le32(p + 1);
    memcpy(&t.ptr, p + 5, sizeof(void *));
    memcpy(&t.release, p + 5 + sizeof(void *), sizeof(void *));
    memcpy(&t.owner, p + 5 + 2 * sizeof(void *), sizeof(void *));
    t.release(t.owner);
    if (!(n & LENT_SAME))
      *bytes += n;
    return 5 + 3 * sizeof(void *);
  }
  case SPY_TV_LIST:
  case SPY_TV_REC: {
    if (left < 4)
      return 0;
    n = le32(p + 1);
    size_t off = 5;
    for (uint32_t i = 0; i < n; i++) {
      size_t k = release_val(p + off, end, depth + 1, bytes);
      if (!k)
        return 0;
      off += k;
    }
    return off;
  }
  default: return 0;
  }
}

uint64_t spy__trace_release_record(const void *rec, size_t n) {
  const uint8_t *b = rec;
  uint64_t bytes = 0;
  if (n < HDR)
    return 0;
  size_t nl = (size_t)(b[6] | b[7] << 8);
  if (HDR + nl <= n)
    release_val(b + HDR + nl, b + n, 0, &bytes);
  return bytes;
}

/* ---- from a tree ----------------------------------------------------------
 */

static void enc_val(enc *e, const spy_trace_val *v) {
  switch (v->type) {
  case SPY_TV_INT:
    put_u8(e, SPY_TV_INT);
    put_u64(e, (uint64_t)v->u.i);
    break;
  case SPY_TV_SRC:
  case SPY_TV_SRCREF:
    if (v->type == SPY_TV_SRC && !(e->refs && v->has_hash)) {
      put_str(e, v->type, v->u.s, v->n);
      break;
    }
    /* a SRCREF, or a payload stored once elsewhere: referenced here */
    put_u8(e, SPY_TV_SRCREF);
    put_u64(e, v->hash[0]);
    put_u64(e, v->hash[1]);
    break;
  case SPY_TV_LIST:
  case SPY_TV_REC:
    put_u8(e, v->type);
    put_u32(e, v->n);
    for (uint32_t i = 0; i < v->n; i++)
      enc_val(e, &v->u.items[i]);
    break;
  case SPY_TV_STR: put_str(e, v->type, v->u.s, v->n); break;
  default: put_u8(e, v->type); break;
  }
}

static int64_t encode_action(const spy_trace_action *a, void *buf, size_t cap,
                             int refs) {
  if (!a || !a->name || a->name_len > 0xffff)
    return SPY_EINVAL;
  enc e = {buf, buf ? cap : 0, 0, 0, refs, NULL};
  enc_header(&e, a->name, a->name_len, a->kind ? a->kind->id : 0, a->seq,
             a->ts_us, a->build);
  enc_val(&e, &a->fields);
  return enc_finish(&e);
}

int64_t spy_trace_encode_action(const spy_trace_action *a, void *buf,
                                size_t cap) {
  return encode_action(a, buf, cap, 0);
}

int spy__trace_record_put(spy__buf *b, const spy_trace_action *a) {
  /* one pass into the room there is (a record is small: its payloads are
   * references); a second only when it did not fit */
  if (spy__buf_reserve(b, 1024) < 0)
    return b->err;
  size_t room = b->cap - b->len;
  int64_t need = encode_action(a, b->p + b->len, room, 1);
  if (need < 0)
    return (int)need;
  if ((size_t)need > room) {
    if (spy__buf_reserve(b, (size_t)need) < 0)
      return b->err;
    encode_action(a, b->p + b->len, (size_t)need, 1);
  }
  b->len += (size_t)need;
  return 0;
}

/* ---- arena ----------------------------------------------------------------
 */

typedef struct block {
  struct block *next;
  size_t cap;
  max_align_t data[];
} block;

void *spy_trace_arena_alloc(spy_trace_arena *a, size_t n) {
  n = (n + 15u) & ~(size_t)15u;
  if (!a->head || a->used + n > a->cap) {
    size_t cap = n > 65536 ? n : 65536;
    block *b = malloc(sizeof *b + cap);
    if (!b)
      return NULL;
    b->next = a->head;
    b->cap = cap;
    a->head = b;
    a->used = 0;
    a->cap = cap;
  }
  void *p = (char *)((block *)a->head)->data + a->used;
  a->used += n;
  return p;
}

void spy_trace_arena_reset(spy_trace_arena *a) {
  block *b = a->head;
  if (!b)
    return;
  block *rest = b->next;
  b->next = NULL;
  while (rest) {
    block *nx = rest->next;
    free(rest);
    rest = nx;
  }
  a->used = 0;
  a->cap = b->cap;
}

void spy_trace_arena_free(spy_trace_arena *a) {
  spy_trace_arena_reset(a);
  free(a->head);
  a->head = NULL;
  a->used = a->cap = 0;
}

/* ---- decode ----------------------------------------------------------------
 */

typedef struct dec {
  const uint8_t *p, *end;
  spy_trace_arena *arena;
  spy__lentv *lent; /* the session's own record: SPY__TV_LENT is a payload,
                     listed here; NULL: refused */
} dec;

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) {
  return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static int dec_val(dec *d, spy_trace_val *v, int depth) {
  memset(v, 0, sizeof *v);
  if (d->p >= d->end)
    return SPY_ETRUNCATED;
  uint8_t tag = *d->p++;
  v->type = tag;
  size_t left = (size_t)(d->end - d->p);
  switch (tag) {
  case SPY_TV_NULL:
  case SPY_TV_FALSE:
  case SPY_TV_TRUE: return 0;
  case SPY_TV_INT:
    if (left < 8)
      return SPY_ETRUNCATED;
    v->u.i = (int64_t)rd64(d->p);
    d->p += 8;
    return 0;
  case SPY_TV_STR:
  case SPY_TV_SRC: {
    if (left < 4)
      return SPY_ETRUNCATED;
    uint32_t n = rd32(d->p);
    if (n > left - 4)
      return SPY_ETRUNCATED;
    v->n = n;
    v->u.s = (const char *)d->p + 4;
    d->p += 4 + (size_t)n;
    return 0;
  }
  case SPY__TV_LENT: {
    if (!d->lent) /* a pointer: never from outside the process */
      return SPY_EBADVALUE;
    if (left < 4 + 3 * sizeof(void *))
      return SPY_ETRUNCATED;
    uint32_t n = rd32(d->p);
    v->type = SPY_TV_SRC;
    v->n = n & ~LENT_SAME;
    memcpy(&v->u.s, d->p + 4, sizeof(void *));
    spy__lentv *lv = d->lent;
    if (lv->n == lv->cap) {
      uint32_t cap = lv->cap ? lv->cap * 2 : 16;
      spy__lent *nv = realloc(lv->v, cap * sizeof *nv);
      if (nv) {
        lv->v = nv;
        lv->cap = cap;
      } else
        lv->lost = 1;
    }
    if (lv->n < lv->cap) {
      spy__lent *l = &lv->v[lv->n++];
      l->val = v;
      memcpy(&l->release, d->p + 4 + sizeof(void *), sizeof(void *));
      memcpy(&l->owner, d->p + 4 + 2 * sizeof(void *), sizeof(void *));
      l->held = n & LENT_SAME ? 0 : v->n;
    }
    d->p += 4 + 3 * sizeof(void *);
    return 0;
  }
  case SPY_TV_SRCREF:
    if (left < 16)
      return SPY_ETRUNCATED;
    v->hash[0] = rd64(d->p);
    v->hash[1] = rd64(d->p + 8);
    v->has_hash = 1;
    d->p += 16;
    return 0;
  case SPY_TV_LIST:
  case SPY_TV_REC: {
    if (depth >= MAX_DEPTH)
      return SPY_EBADVALUE;
    if (left < 4)
      return SPY_ETRUNCATED;
    uint32_t n = rd32(d->p);
    d->p += 4;
    if (n > left - 4) /* every value takes at least one byte */
      return SPY_ETRUNCATED;
    spy_trace_val *items = NULL;
    if (n) {
      items = spy_trace_arena_alloc(d->arena, (size_t)n * sizeof *items);
      if (!items)
        return SPY_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
      int rc = dec_val(d, &items[i], depth + 1);
      if (rc < 0)
        return rc;
    }
    v->n = n;
    v->u.items = items;
    return 0;
  }
  default: return SPY_EBADVALUE;
  }
}

static int decode_rec(const void *p, size_t n, spy_trace_arena *arena,
                      spy_trace_action *out, spy__lentv *lent) {
  memset(out, 0, sizeof *out);
  const uint8_t *b = p;
  if (!p || n < HDR)
    return SPY_ETRUNCATED;
  uint32_t bytes = rd32(b);
  if (bytes < HDR || bytes > 0x7fffffffu)
    return SPY_EBADSECTION;
  if (bytes > n)
    return SPY_ETRUNCATED;
  uint16_t id = (uint16_t)(b[4] | b[5] << 8);
  uint16_t nl = (uint16_t)(b[6] | b[7] << 8);
  if (HDR + (size_t)nl > bytes)
    return SPY_EBADSECTION;
  spy_trace_action a = {0};
  a.seq = rd64(b + 8);
  a.ts_us = rd64(b + 16);
  a.build = rd32(b + 24);
  if (rd32(b + 28) != 0) /* reserved */
    return SPY_EBADVALUE;
  a.name = (const char *)b + HDR;
  a.name_len = nl;
  if (id > SPY_TRACE_KIND_COUNT)
    return SPY_EBADVALUE;
  if (id) {
    a.kind = spy_trace_kinds[id];
    if (nl == 0 && lent) { /* the session's own record: no name */
      a.name = a.kind->name;
      a.name_len = kind_encs[id].name_len;
    } else if (kind_encs[id].name_len != nl ||
               memcmp(a.kind->name, a.name, nl) != 0)
      return SPY_EBADVALUE;
  }
  dec d = {b + HDR + nl, b + bytes, arena, lent};
  int rc = dec_val(&d, &a.fields, 0);
  if (rc < 0)
    return rc;
  if (d.p != d.end)
    return SPY_EBADSECTION;
  if (a.fields.type != SPY_TV_REC)
    return SPY_EBADVALUE;
  /* the session's own records were encoded from the kind's struct by its
   * generated encoder: they match the declaration by construction */
  if (a.kind && !(lent && nl == 0) &&
      (rc = spy_trace_check(a.kind, &a.fields)) < 0)
    return rc;
  *out = a;
  return (int)bytes;
}

int spy_trace_decode(const void *p, size_t n, spy_trace_arena *arena,
                     spy_trace_action *out) {
  return decode_rec(p, n, arena, out, NULL);
}

int spy__trace_decode_lent(const void *p, size_t n, spy_trace_arena *arena,
                           spy_trace_action *out, spy__lentv *lv) {
  lv->n = 0;
  lv->lost = 0;
  return decode_rec(p, n, arena, out, lv);
}

int spy_trace_section_next(const void *data, size_t len, size_t *off,
                           spy_trace_arena *arena, spy_trace_action *out) {
  if (*off >= len)
    return 0;
  int rc =
      spy_trace_decode((const uint8_t *)data + *off, len - *off, arena, out);
  if (rc < 0)
    return rc;
  *off += (size_t)rc;
  return 1;
}

/* ---- validation ------------------------------------------------------------
 */

static int check_field(const spy_trace_field *f, const spy_trace_val *v) {
  int t = v->type;
  switch (f->type) {
  case SPY_TF_OSTR:
    if (t == SPY_TV_NULL)
      return 0;
    /* fall through */
  case SPY_TF_STR: return t == SPY_TV_STR ? 0 : SPY_EBADVALUE;
  case SPY_TF_OSRC:
    if (t == SPY_TV_NULL)
      return 0;
    /* fall through */
  case SPY_TF_SRC:
    return t == SPY_TV_SRC || t == SPY_TV_SRCREF ? 0 : SPY_EBADVALUE;
  case SPY_TF_OINT:
    if (t == SPY_TV_NULL)
      return 0;
    /* fall through */
  case SPY_TF_INT: return t == SPY_TV_INT ? 0 : SPY_EBADVALUE;
  case SPY_TF_OBOOL:
    if (t == SPY_TV_NULL)
      return 0;
    /* fall through */
  case SPY_TF_BOOL:
    return t == SPY_TV_TRUE || t == SPY_TV_FALSE ? 0 : SPY_EBADVALUE;
  default: break;
  }
  int nullable = f->type == SPY_TF_OLIST || f->type == SPY_TF_OSTRS;
  if (t == SPY_TV_NULL)
    return nullable ? 0 : SPY_EBADVALUE;
  if (t != SPY_TV_LIST)
    return SPY_EBADVALUE;
  for (uint32_t i = 0; i < v->n; i++) {
    const spy_trace_val *it = &v->u.items[i];
    int rc = 0;
    if (f->type == SPY_TF_LIST || f->type == SPY_TF_OLIST)
      rc = spy_trace_check(f->rec, it);
    else if (f->type == SPY_TF_INTS)
      rc = it->type == SPY_TV_INT ? 0 : SPY_EBADVALUE;
    else
      rc = it->type == SPY_TV_STR ? 0 : SPY_EBADVALUE;
    if (rc < 0)
      return rc;
  }
  return 0;
}

int spy_trace_check(const spy_trace_kind *kind, const spy_trace_val *rec) {
  if (!kind || !rec || rec->type != SPY_TV_REC || rec->n != kind->nfields)
    return SPY_EBADVALUE;
  for (uint32_t i = 0; i < kind->nfields; i++) {
    int rc = check_field(&kind->fields[i], &rec->u.items[i]);
    if (rc < 0)
      return rc;
  }
  return 0;
}

const spy_trace_val *spy__field(const spy_trace_kind *k,
                                const spy_trace_val *rec, const char *name) {
  if (!k || !rec)
    return NULL;
  for (uint32_t i = 0; i < k->nfields && i < rec->n; i++)
    if (strcmp(k->fields[i].name, name) == 0)
      return &rec->u.items[i];
  return NULL;
}

const spy_trace_val *spy_trace_get(const spy_trace_action *a,
                                   const char *name) {
  return a ? spy__field(a->kind, &a->fields, name) : NULL;
}

/* ---- hashing ---------------------------------------------------------------
 */

void spy_trace_hash(const void *p, size_t n, uint64_t out[2]) {
  XXH128_hash_t h = XXH3_128bits(p, n);
  out[0] = h.high64;
  out[1] = h.low64;
}

void spy_trace_hash_hex(const uint64_t hash[2], char out[33]) {
  /* a byte at a time: two digits per lookup */
  static const char hx[] = "000102030405060708090a0b0c0d0e0f"
                           "101112131415161718191a1b1c1d1e1f"
                           "202122232425262728292a2b2c2d2e2f"
                           "303132333435363738393a3b3c3d3e3f"
                           "404142434445464748494a4b4c4d4e4f"
                           "505152535455565758595a5b5c5d5e5f"
                           "606162636465666768696a6b6c6d6e6f"
                           "707172737475767778797a7b7c7d7e7f"
                           "808182838485868788898a8b8c8d8e8f"
                           "909192939495969798999a9b9c9d9e9f"
                           "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
                           "b0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
                           "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
                           "d0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
                           "e0e1e2e3e4e5e6e7e8e9eaebecedeeef"
                           "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
  for (int w = 0; w < 2; w++) {
    uint64_t v = hash[w];
    for (int i = 7; i >= 0; i--, v >>= 8)
      memcpy(out + w * 16 + 2 * i, hx + 2 * (v & 0xff), 2);
  }
  out[32] = 0;
}
