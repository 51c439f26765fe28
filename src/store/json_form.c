/* json_form.c — the JSON-lines form of an action (Rolldown's devtools log
 * format, field names from the catalog), StringRef lines, and the growable
 * buffer they are written into. The JSON-lines writer (and any custom
 * writer) gets this form; the SQL writers store the binary record
 * instead (codec.c). Strings go through the project's one escaper, so a
 * line is valid JSON whatever bytes the traced program gave. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_escape.h"
#include "store.h"

int spy__buf_reserve(spy__buf *b, size_t extra) {
  if (b->err)
    return b->err;
  if (b->len + extra <= b->cap)
    return 0;
  size_t ncap = b->cap ? b->cap : 256;
  while (ncap < b->len + extra)
    ncap *= 2;
  char *p = realloc(b->p, ncap);
  if (!p)
    return b->err = SPY_ENOMEM;
  b->p = p;
  b->cap = ncap;
  return 0;
}

void spy__buf_put(spy__buf *b, const void *p, size_t n) {
  if (n == 0 || spy__buf_reserve(b, n) < 0)
    return;
  memcpy(b->p + b->len, p, n);
  b->len += n;
}

/* n bytes from s to d: under 32 (names, digits) with overlapping moves
 * that read and write only those bytes, inline; a call to memcpy else. */
static inline void copy_short(char *d, const char *s, size_t n) {
  if (n >= 32)
    memcpy(d, s, n);
  else
    spy__small_copy(d, s, n);
}

/* The appends below, inlined for the common case of room left. */
static inline void put_fast(spy__buf *b, const void *p, size_t n) {
  if (!b->err && b->cap - b->len >= n) {
    copy_short(b->p + b->len, p, n);
    b->len += n;
  } else
    spy__buf_put(b, p, n);
}

static inline void putc_fast(spy__buf *b, char c) {
  if (!b->err && b->len < b->cap)
    b->p[b->len++] = c;
  else
    spy__buf_putc(b, c);
}

#define PUT_LIT(b, s) put_fast((b), (s), sizeof(s) - 1)

void spy__buf_puts(spy__buf *b, const char *s) {
  spy__buf_put(b, s, strlen(s));
}

void spy__buf_putc(spy__buf *b, char c) {
  if (spy__buf_reserve(b, 1) == 0)
    b->p[b->len++] = c;
}

/* The decimal digits of v, written backwards from end, two at a time
 * (eight at a time in 32-bit arithmetic while more than eight are left:
 * a timestamp in microseconds has 16); returns where they begin (at most
 * 20 bytes before end). */
static const char pairs[] = "00010203040506070809"
                            "10111213141516171819"
                            "20212223242526272829"
                            "30313233343536373839"
                            "40414243444546474849"
                            "50515253545556575859"
                            "60616263646566676869"
                            "70717273747576777879"
                            "80818283848586878889"
                            "90919293949596979899";

static char *u64_digits(char *end, uint64_t v) {
  while (v >= 100000000) {
    uint32_t lo = (uint32_t)(v % 100000000), hi4 = lo / 10000, lo4 = lo % 10000;
    v /= 100000000;
    end -= 8;
    memcpy(end, pairs + 2 * (hi4 / 100), 2);
    memcpy(end + 2, pairs + 2 * (hi4 % 100), 2);
    memcpy(end + 4, pairs + 2 * (lo4 / 100), 2);
    memcpy(end + 6, pairs + 2 * (lo4 % 100), 2);
  }
  uint32_t w = (uint32_t)v;
  while (w >= 100) {
    end -= 2;
    memcpy(end, pairs + 2 * (w % 100), 2);
    w /= 100;
  }
  if (w >= 10) {
    end -= 2;
    memcpy(end, pairs + 2 * w, 2);
  } else
    *--end = (char)('0' + w);
  return end;
}

void spy__buf_u64(spy__buf *b, uint64_t v) {
  char t[24], *d = u64_digits(t + sizeof t, v);
  put_fast(b, d, (size_t)(t + sizeof t - d));
}

void spy__buf_i64(spy__buf *b, int64_t v) {
  if (v < 0) {
    spy__buf_putc(b, '-');
    spy__buf_u64(b, 0 - (uint64_t)v);
  } else
    spy__buf_u64(b, (uint64_t)v);
}

void spy__buf_free(spy__buf *b) {
  free(b->p);
  *b = (spy__buf){0};
}

/* The project's one escaper (core/json_escape.c): invalid UTF-8 becomes
 * U+FFFD, counted in b->replaced. Reserves the worst case once. */
void spy__json_str(spy__buf *b, const char *s, size_t n) {
  size_t cap = SPY__JSON_ESC_MAX * n;
  if ((b->err || b->cap - b->len < cap + 2) && spy__buf_reserve(b, cap + 2) < 0)
    return;
  char *o = b->p + b->len;
  size_t used;
  *o++ = '"';
  o += spy__json_escape(o, cap, s, n, &used, &b->replaced);
  *o++ = '"';
  b->len = (size_t)(o - b->p);
}

static void put_members(spy__buf *b, const spy_trace_kind *k,
                        const spy_trace_val *rec, int comma, int builtin);

/* A field name and its colon. The names of the built-in kinds and their
 * records are the catalog's plain identifiers (test_json_escape checks
 * them all): copied as they are. An application's go through the
 * escaper. */
static void put_name(spy__buf *b, const char *name, int builtin) {
  size_t n = strlen(name);
  if (!builtin) {
    spy__json_str(b, name, n);
    putc_fast(b, ':');
    return;
  }
  if (!b->err && b->cap - b->len >= n + 3) {
    char *d = b->p + b->len;
    d[0] = '"';
    copy_short(d + 1, name, n);
    d[n + 1] = '"';
    d[n + 2] = ':';
    b->len += n + 3;
    return;
  }
  putc_fast(b, '"');
  put_fast(b, name, n);
  PUT_LIT(b, "\":");
}

static void put_val(spy__buf *b, const spy_trace_kind *rec,
                    const spy_trace_val *v, int builtin) {
  switch (v->type) {
  case SPY_TV_NULL: PUT_LIT(b, "null"); break;
  case SPY_TV_FALSE: PUT_LIT(b, "false"); break;
  case SPY_TV_TRUE: PUT_LIT(b, "true"); break;
  case SPY_TV_INT: spy__buf_i64(b, v->u.i); break;
  case SPY_TV_STR: spy__json_str(b, v->u.s, v->n); break;
  case SPY_TV_SRC:
  case SPY_TV_SRCREF:
    if (v->has_hash) { /* "$ref:<32 hex digits>": nothing to escape */
      if (spy__buf_reserve(b, 39) == 0) {
        char *d = b->p + b->len;
        memcpy(d, "\"$ref:", 6);
        spy_trace_hash_hex(v->hash, d + 6); /* and a NUL, made the quote */
        d[38] = '"';
        b->len += 39;
      }
    } else
      spy__json_str(b, v->u.s, v->n);
    break;
  case SPY_TV_LIST:
    putc_fast(b, '[');
    for (uint32_t i = 0; i < v->n; i++) {
      if (i)
        putc_fast(b, ',');
      put_val(b, rec, &v->u.items[i], builtin);
    }
    putc_fast(b, ']');
    break;
  case SPY_TV_REC:
    putc_fast(b, '{');
    put_members(b, rec, v, 0, builtin);
    putc_fast(b, '}');
    break;
  }
}

/* "name":value for each field of a REC, named by its descriptor (fN for
 * a kind this build does not know); `comma` puts one before the first;
 * `builtin`: k is the catalog's (or one of its records). */
static void put_members(spy__buf *b, const spy_trace_kind *k,
                        const spy_trace_val *rec, int comma, int builtin) {
  for (uint32_t i = 0; i < rec->n; i++) {
    if (i || comma)
      putc_fast(b, ',');
    const spy_trace_field *f = k && i < k->nfields ? &k->fields[i] : NULL;
    if (f)
      put_name(b, f->name, builtin);
    else {
      char key[16];
      int kn = snprintf(key, sizeof key, "f%u", (unsigned)i);
      spy__json_str(b, key, (size_t)kn);
      putc_fast(b, ':');
    }
    put_val(b, f ? f->rec : NULL, &rec->u.items[i], builtin);
  }
}

void spy__trace_json(spy__buf *b, const char *session_id,
                     const spy_trace_action *a) {
  /* the timestamp in ms is ts_us's digits but the last three */
  char t[24], *us = u64_digits(t + sizeof t, a->ts_us);
  size_t nus = (size_t)(t + sizeof t - us);
  PUT_LIT(b, "{\"timestamp\":\"");
  if (nus > 3)
    put_fast(b, us, nus - 3);
  else
    putc_fast(b, '0');
  PUT_LIT(b, "\",\"session_id\":");
  spy__json_str(b, session_id, strlen(session_id));
  if (a->build) {
    PUT_LIT(b, ",\"build_id\":\"");
    spy__buf_u64(b, a->build);
    putc_fast(b, '"');
  }
  PUT_LIT(b, ",\"seq\":");
  spy__buf_u64(b, a->seq);
  PUT_LIT(b, ",\"ts_us\":");
  put_fast(b, us, nus);
  PUT_LIT(b, ",\"action\":");
  spy__json_str(b, a->name, a->name_len);
  /* flattened into the event */
  const spy_trace_kind *k = a->kind;
  int builtin = k && k->id && k->id <= SPY_TRACE_KIND_COUNT &&
                spy_trace_kinds[k->id] == k;
  put_members(b, k, &a->fields, 1, builtin);
  putc_fast(b, '}');
}

void spy__trace_json_stringref(spy__buf *b, const uint64_t hash[2],
                               const char *p, size_t n) {
  char id[33];
  spy_trace_hash_hex(hash, id);
  PUT_LIT(b, "{\"action\":\"StringRef\",\"id\":\"");
  put_fast(b, id, 32);
  PUT_LIT(b, "\",\"content\":");
  spy__json_str(b, p, n);
  putc_fast(b, '}');
}

int64_t spy_trace_json_format(const spy_trace_action *a, const char *session_id,
                              char *buf, size_t cap) {
  spy__buf b = {0};
  spy__trace_json(&b, session_id ? session_id : "", a);
  int64_t n = b.err ? SPY_ENOMEM : (int64_t)b.len;
  if (n > 0 && buf && (size_t)n <= cap)
    memcpy(buf, b.p, (size_t)n);
  spy__buf_free(&b);
  return n;
}
