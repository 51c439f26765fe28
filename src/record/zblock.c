/* zblock.c — the packed zone block codec (zblock.h for the format). The
 * columns are written as varints into one buffer and compressed with one
 * zstd call; decoding checks the magic, the counts against SPY_ZB_MAX,
 * the decompressed size against what the header said and each varint
 * against the end of its buffer. */
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "record/zblock.h"
#include "spyglass/error.h"

#define NCOLS 7
#define VARINT_MAX 10
/* A raw column buffer never exceeds n zones x 7 columns x 10 bytes. */
#define RAW_MAX ((size_t)SPY_ZB_MAX * NCOLS * VARINT_MAX)

/* a - b without signed overflow (the values may come from a fuzzer) */
static int64_t sub(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a - (uint64_t)b);
}
static uint64_t zz(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static int64_t unzz(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static size_t put(uint8_t *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

/* Reads a varint from [*p, end); 0 on success, -1 past the end or over
 * 64 bits. */
static int get(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end)
      return -1;
    uint8_t b = *(*p)++;
    if (shift == 63 && b > 1)
      return -1;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

static int cmp(const void *a, const void *b) {
  const spy_zb_zone *x = a, *y = b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->depth != y->depth)
    return x->depth < y->depth ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

void spy__zb_sort(spy_zb_zone *z, uint32_t n) { qsort(z, n, sizeof *z, cmp); }

/* The parent the decoder infers at depth d: the last zone one level up,
 * if no zone at that level or above came since (0: none, NULL). Levels
 * 0..top-1 are known; a zone deeper than top leaves a gap (top stays). */
#define PSTACK_LEVELS 256u
typedef struct pstack {
  int64_t id[PSTACK_LEVELS];
  uint32_t top;
} pstack;

static int64_t implied(const pstack *s, uint32_t d) {
  return d > 0 && d - 1 < s->top ? s->id[d - 1] : 0;
}
static void visit(pstack *s, uint32_t d, int64_t id) {
  if (d < PSTACK_LEVELS && d <= s->top) {
    s->id[d] = id;
    s->top = d + 1;
  }
}

int spy__zb_encode(const spy_zb_zone *z, uint32_t n, int level, uint8_t **out,
                   size_t *len) {
  *out = NULL;
  *len = 0;
  if (!z || n == 0 || n > SPY_ZB_MAX)
    return SPY_EINVAL;
  size_t cap = (size_t)n * NCOLS * VARINT_MAX;
  uint8_t *raw = malloc(cap);
  if (!raw)
    return SPY_ENOMEM;
  size_t o = 0;
  int64_t prev = 0;
  for (uint32_t i = 0; i < n; i++, prev = z[i - 1].id)
    o += put(raw + o, zz(sub(z[i].id, prev)));
  prev = 0;
  for (uint32_t i = 0; i < n; i++, prev = z[i - 1].ts)
    o += put(raw + o, zz(sub(z[i].ts, prev)));
  for (uint32_t i = 0; i < n; i++)
    o += put(raw + o, zz(z[i].dur));
  for (uint32_t i = 0; i < n; i++) {
    if (z[i].depth >= SPY_ZB_DEPTH_MAX) {
      free(raw);
      return SPY_EINVAL;
    }
    o += put(raw + o, z[i].depth);
  }
  prev = 0;
  for (uint32_t i = 0; i < n; i++, prev = z[i - 1].name_id)
    o += put(raw + o, zz(sub(z[i].name_id, prev)));
  pstack ps = {.top = 0};
  for (uint32_t i = 0; i < n; i++) {
    int64_t imp = implied(&ps, z[i].depth);
    uint64_t code = z[i].parent == imp ? 0
                    : !z[i].parent     ? 1
                                       : zz(sub(z[i].id, z[i].parent)) + 2;
    o += put(raw + o, code);
    visit(&ps, z[i].depth, z[i].id);
  }
  for (uint32_t i = 0; i < n; i++)
    o += put(raw + o, z[i].flags);
  size_t bound = ZSTD_compressBound(o);
  uint8_t *b = malloc(3 + 2 * VARINT_MAX + bound);
  if (!b) {
    free(raw);
    return SPY_ENOMEM;
  }
  size_t h = 0;
  b[h++] = 'Z';
  b[h++] = 'B';
  b[h++] = 1;
  h += put(b + h, n);
  h += put(b + h, o);
  size_t c = ZSTD_compress(b + h, bound, raw, o, level ? level : 3);
  free(raw);
  if (ZSTD_isError(c)) {
    free(b);
    return SPY_ENOMEM;
  }
  *out = b;
  *len = h + c;
  return 0;
}

int spy__zb_decode(spy_zb_dec *d, const void *blob, size_t len, uint32_t *n) {
  *n = 0;
  const uint8_t *p = blob, *end = p + len;
  uint64_t nz, raw_len;
  if (!blob || len < 3 || p[0] != 'Z' || p[1] != 'B' || p[2] != 1)
    return SPY_EBADVALUE;
  p += 3;
  if (get(&p, end, &nz) || get(&p, end, &raw_len) || nz == 0 ||
      nz > SPY_ZB_MAX || raw_len < nz * NCOLS ||
      raw_len > nz * NCOLS * VARINT_MAX)
    return SPY_EBADVALUE;
  /* the frame must say its size and say the same */
  unsigned long long fs = ZSTD_getFrameContentSize(p, (size_t)(end - p));
  if (fs == ZSTD_CONTENTSIZE_ERROR || fs == ZSTD_CONTENTSIZE_UNKNOWN ||
      fs != raw_len)
    return SPY_EBADVALUE;
  if (!d->dctx && !(d->dctx = ZSTD_createDCtx()))
    return SPY_ENOMEM;
  if (d->raw_cap < raw_len) {
    uint8_t *r = realloc(d->raw, raw_len);
    if (!r)
      return SPY_ENOMEM;
    d->raw = r;
    d->raw_cap = raw_len;
  }
  if (d->z_cap < nz) {
    spy_zb_zone *z = realloc(d->z, nz * sizeof *z);
    if (!z)
      return SPY_ENOMEM;
    d->z = z;
    d->z_cap = (uint32_t)nz;
  }
  size_t got =
      ZSTD_decompressDCtx(d->dctx, d->raw, raw_len, p, (size_t)(end - p));
  if (ZSTD_isError(got) || got != raw_len)
    return SPY_EBADVALUE;
  const uint8_t *q = d->raw, *qe = d->raw + raw_len;
  spy_zb_zone *z = d->z;
  uint64_t v;
  int64_t prev = 0;
  for (uint64_t i = 0; i < nz; i++) {
    if (get(&q, qe, &v))
      return SPY_EBADVALUE;
    z[i].id = prev = (int64_t)((uint64_t)prev + (uint64_t)unzz(v));
  }
  prev = 0;
  for (uint64_t i = 0; i < nz; i++) {
    if (get(&q, qe, &v))
      return SPY_EBADVALUE;
    z[i].ts = prev = (int64_t)((uint64_t)prev + (uint64_t)unzz(v));
  }
  for (uint64_t i = 0; i < nz; i++) {
    if (get(&q, qe, &v))
      return SPY_EBADVALUE;
    z[i].dur = unzz(v);
  }
  for (uint64_t i = 0; i < nz; i++) {
    if (get(&q, qe, &v) || v >= SPY_ZB_DEPTH_MAX)
      return SPY_EBADVALUE;
    z[i].depth = (uint32_t)v;
  }
  prev = 0;
  for (uint64_t i = 0; i < nz; i++) {
    if (get(&q, qe, &v))
      return SPY_EBADVALUE;
    z[i].name_id = prev = (int64_t)((uint64_t)prev + (uint64_t)unzz(v));
  }
  pstack ps = {.top = 0};
  for (uint64_t i = 0; i < nz; i++) {
    if (get(&q, qe, &v))
      return SPY_EBADVALUE;
    z[i].parent = v == 0 ? implied(&ps, z[i].depth)
                  : v == 1
                      ? 0
                      : (int64_t)((uint64_t)z[i].id - (uint64_t)unzz(v - 2));
    visit(&ps, z[i].depth, z[i].id);
  }
  for (uint64_t i = 0; i < nz; i++) {
    if (get(&q, qe, &v) || v > UINT32_MAX)
      return SPY_EBADVALUE;
    z[i].flags = (uint32_t)v;
  }
  if (q != qe)
    return SPY_EBADVALUE; /* bytes left over: not what the header said */
  *n = (uint32_t)nz;
  return 0;
}

void spy__zb_dec_free(spy_zb_dec *d) {
  ZSTD_freeDCtx(d->dctx);
  free(d->raw);
  free(d->z);
  memset(d, 0, sizeof *d);
}

/* ---- the merge ------------------------------------------------------------
 */
void spy__zb_merge_init(spy_zb_merge *m, spy_zb_fetch_fn fetch, void *user) {
  memset(m, 0, sizeof *m);
  m->fetch = fetch;
  m->user = user;
}

static int before(int64_t ta, const spy_zb_zone *a, int64_t tb,
                  const spy_zb_zone *b) {
  if (ta != tb)
    return ta < tb;
  return cmp(a, b) < 0;
}

/* The open block whose next zone comes first (-1: none open). */
static int head(const spy_zb_merge *m) {
  int best = -1;
  for (uint32_t k = 0; k < m->nopen; k++) {
    const spy_zb_open *o = &m->open[k];
    if (best < 0 || before(o->track, &o->dec.z[o->i], m->open[best].track,
                           &m->open[best].dec.z[m->open[best].i]))
      best = (int)k;
  }
  return best;
}

int spy__zb_merge_next(spy_zb_merge *m, int64_t *track, spy_zb_zone *z) {
  if (!m->open && !(m->open = calloc(SPY_ZB_OPEN_MAX, sizeof *m->open)))
    return SPY_ENOMEM;
  for (;;) {
    if (!m->ahead && !m->ended) {
      const void *b;
      size_t len;
      int rc = m->fetch(m->user, &m->a_track, &m->a_ts0, &b, &len);
      if (rc < 0)
        return rc;
      if (rc == 0) {
        m->ended = 1;
      } else {
        if (m->a_cap < len) {
          uint8_t *nb = realloc(m->a_blob, len);
          if (!nb)
            return SPY_ENOMEM;
          m->a_blob = nb;
          m->a_cap = len;
        }
        if (len)
          memcpy(m->a_blob, b, len);
        m->a_len = len;
        m->ahead = 1;
      }
    }
    int h = head(m);
    /* the fetched block opens once the merge has reached its start */
    int take = m->ahead && m->nopen < SPY_ZB_OPEN_MAX &&
               (h < 0 || m->a_track < m->open[h].track ||
                (m->a_track == m->open[h].track &&
                 m->a_ts0 <= m->open[h].dec.z[m->open[h].i].ts));
    if (take) {
      spy_zb_open *o = &m->open[m->nopen];
      uint32_t n;
      int rc = spy__zb_decode(&o->dec, m->a_blob, m->a_len, &n);
      if (rc < 0)
        return rc;
      o->track = m->a_track;
      o->n = n;
      o->i = 0;
      m->nopen++;
      m->ahead = 0;
      continue;
    }
    if (h < 0)
      return 0;
    spy_zb_open *o = &m->open[h];
    *track = o->track;
    *z = o->dec.z[o->i++];
    if (o->i == o->n) { /* done: its slot (and buffers) to the end */
      spy_zb_open t = *o;
      *o = m->open[m->nopen - 1];
      m->open[m->nopen - 1] = t;
      m->nopen--;
    }
    return 1;
  }
}

void spy__zb_merge_free(spy_zb_merge *m) {
  if (m->open)
    for (uint32_t k = 0; k < SPY_ZB_OPEN_MAX; k++)
      spy__zb_dec_free(&m->open[k].dec);
  free(m->open);
  free(m->a_blob);
  memset(m, 0, sizeof *m);
}
