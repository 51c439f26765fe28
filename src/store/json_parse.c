/* json_parse.c — a JSON-lines event back into a decoded action, guided by
 * the catalog, and the StringRef lines that carry payloads. The parsing is
 * jansson's (Debian's libjansson): it is strict (one value per line, UTF-8
 * checked, \u0000 kept with JSON_ALLOW_NUL) and length-aware, which a
 * reader of files from outside needs; only this file knows it. Lines in
 * the exact form this project's writer gives them (a StringRef, an event
 * of a built-in kind) are read first by quick scans that build the same
 * answer without a tree of JSON values; whatever they do not take as it
 * is goes to the library, which stays the reference (fuzz_jsonl and
 * test_reader check that both read every line alike).
 *
 * The tree it builds lives in the caller's arena (strings copied), so the
 * jansson value is freed before returning. A line holding bytes that are
 * not UTF-8 (written by a spyglass before every string went through the
 * one escaper) is read with those bytes replaced by U+FFFD, and counted. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_escape.h"
#include "store.h"

/* Deepest nesting of values a line may hold (the catalog needs 4). */
#define MAX_DEPTH 32

static int hexv(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

int spy__hash_parse(const char *s, size_t n, uint64_t out[2]) {
  if (n != 32)
    return SPY_EBADVALUE;
  for (int w = 0; w < 2; w++) {
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
      int h = hexv(s[w * 16 + i]);
      if (h < 0)
        return SPY_EBADVALUE;
      v = v << 4 | (uint64_t)h;
    }
    out[w] = v;
  }
  return 0;
}

static const char *copy_str(spy_trace_arena *a, const char *s, size_t n) {
  char *o = spy_trace_arena_alloc(a, n + 1);
  if (!o)
    return NULL;
  memcpy(o, s, n);
  o[n] = 0;
  return o;
}

static int to_val(const json_t *j, const spy_trace_field *f, int depth,
                  spy_trace_arena *a, spy_trace_val *v);

/* An object read as the record `rec`: its fields by name, null if absent. */
static int to_rec(const json_t *o, const spy_trace_kind *rec, int depth,
                  spy_trace_arena *a, spy_trace_val *v) {
  v->type = SPY_TV_REC;
  v->n = rec->nfields;
  spy_trace_val *items =
      rec->nfields ? spy_trace_arena_alloc(a, rec->nfields * sizeof *items)
                   : NULL;
  if (rec->nfields && !items)
    return SPY_ENOMEM;
  for (uint32_t k = 0; k < rec->nfields; k++) {
    int rc = to_val(json_object_get(o, rec->fields[k].name), &rec->fields[k],
                    depth + 1, a, &items[k]);
    if (rc < 0)
      return rc;
  }
  v->u.items = items;
  return 0;
}

/* JSON value -> tree value, typed by the field (f NULL: untyped; j NULL:
 * an absent member, null). */
static int to_val(const json_t *j, const spy_trace_field *f, int depth,
                  spy_trace_arena *a, spy_trace_val *v) {
  memset(v, 0, sizeof *v);
  if (depth > MAX_DEPTH)
    return SPY_EBADVALUE;
  switch (j ? json_typeof(j) : JSON_NULL) {
  case JSON_NULL: v->type = SPY_TV_NULL; return 0;
  case JSON_TRUE: v->type = SPY_TV_TRUE; return 0;
  case JSON_FALSE: v->type = SPY_TV_FALSE; return 0;
  case JSON_INTEGER:
    v->type = SPY_TV_INT;
    v->u.i = (int64_t)json_integer_value(j);
    return 0;
  case JSON_REAL: { /* not in the catalog's types: kept as its text */
    char t[40];
    int n = snprintf(t, sizeof t, "%.17g", json_real_value(j));
    v->type = SPY_TV_STR;
    v->n = (uint32_t)n;
    return (v->u.s = copy_str(a, t, (size_t)n)) ? 0 : SPY_ENOMEM;
  }
  case JSON_STRING: {
    const char *s = json_string_value(j);
    size_t n = json_string_length(j);
    if (n > UINT32_MAX)
      return SPY_EBADVALUE;
    if (f && (f->type == SPY_TF_SRC || f->type == SPY_TF_OSRC)) {
      if (n == 37 && memcmp(s, "$ref:", 5) == 0 &&
          spy__hash_parse(s + 5, 32, v->hash) == 0) {
        v->type = SPY_TV_SRCREF;
        v->has_hash = 1;
        return 0;
      }
      v->type = SPY_TV_SRC;
    } else
      v->type = SPY_TV_STR;
    v->n = (uint32_t)n;
    return (v->u.s = copy_str(a, s, n)) ? 0 : SPY_ENOMEM;
  }
  case JSON_ARRAY: {
    const spy_trace_kind *rec =
        f && (f->type == SPY_TF_LIST || f->type == SPY_TF_OLIST) ? f->rec
                                                                 : NULL;
    size_t n = json_array_size(j);
    if (n > UINT32_MAX)
      return SPY_EBADVALUE;
    spy_trace_val *items = n ? spy_trace_arena_alloc(a, n * sizeof *items) : 0;
    if (n && !items)
      return SPY_ENOMEM;
    for (size_t i = 0; i < n; i++) {
      const json_t *it = json_array_get(j, i);
      int rc = rec && json_is_object(it)
                   ? to_rec(it, rec, depth + 1, a, &items[i])
                   : to_val(it, NULL, depth + 1, a, &items[i]);
      if (rc < 0)
        return rc;
    }
    v->type = SPY_TV_LIST;
    v->n = (uint32_t)n;
    v->u.items = items;
    return 0;
  }
  case JSON_OBJECT: { /* without a record type: its members in order */
    size_t n = json_object_size(j), i = 0;
    spy_trace_val *items = n ? spy_trace_arena_alloc(a, n * sizeof *items) : 0;
    if (n && !items)
      return SPY_ENOMEM;
    const char *key;
    json_t *m;
    json_object_foreach((json_t *)j, key, m) {
      int rc = to_val(m, NULL, depth + 1, a, &items[i++]);
      if (rc < 0)
        return rc;
    }
    v->type = SPY_TV_REC;
    v->n = (uint32_t)n;
    v->u.items = items;
    return 0;
  }
  }
  return SPY_EBADVALUE;
}

static const char *const envelope[] = {"timestamp", "session_id", "build_id",
                                       "seq",       "ts_us",      "action"};

static int is_envelope(const char *key) {
  for (size_t e = 0; e < sizeof envelope / sizeof *envelope; e++)
    if (strcmp(key, envelope[e]) == 0)
      return 1;
  return 0;
}

static int to_action(const json_t *o, spy_trace_arena *a,
                     spy_trace_action *out) {
  const json_t *v;
  const spy_trace_kind *k = NULL;
  const char *name = json_string_value(json_object_get(o, "action"));
  size_t name_len = json_string_length(json_object_get(o, "action"));
  if (name_len > UINT32_MAX)
    return SPY_EBADVALUE;
  if (strlen(name) == name_len)
    k = spy_trace_kind_find(name);
  if (!(out->name = copy_str(a, name, name_len)))
    return SPY_ENOMEM;
  out->name_len = (uint32_t)name_len;
  out->kind = k;
  if (json_is_integer(v = json_object_get(o, "seq")))
    out->seq = (uint64_t)json_integer_value(v);
  if (json_is_integer(v = json_object_get(o, "ts_us")))
    out->ts_us = (uint64_t)json_integer_value(v);
  else if (json_is_string(v = json_object_get(o, "timestamp")))
    out->ts_us = (uint64_t)strtoull(json_string_value(v), NULL, 10) * 1000u;
  if (json_is_string(v = json_object_get(o, "build_id")))
    out->build = (uint32_t)strtoul(json_string_value(v), NULL, 10);
  out->fields.type = SPY_TV_REC;
  if (k) {
    int rc = to_rec(o, k, 0, a, &out->fields);
    return rc < 0 ? rc : spy_trace_check(k, &out->fields);
  }
  /* a kind this build does not know: every member but the envelope */
  uint32_t n = 0;
  const char *key;
  json_t *m;
  json_object_foreach((json_t *)o, key, m) n += !is_envelope(key);
  spy_trace_val *items = n ? spy_trace_arena_alloc(a, n * sizeof *items) : 0;
  if (n && !items)
    return SPY_ENOMEM;
  uint32_t w = 0;
  json_object_foreach((json_t *)o, key, m) {
    if (is_envelope(key))
      continue;
    int rc = to_val(m, NULL, 1, a, &items[w++]);
    if (rc < 0)
      return rc;
  }
  out->fields.n = n;
  out->fields.u.items = items;
  return 0;
}

/* Copies p[0..n) with every byte that does not begin a valid UTF-8
 * sequence as U+FFFD (EF BF BD); such bytes are >= 0x80, never JSON
 * syntax, so the line's structure is unchanged. */
static char *mend_utf8(const char *p, size_t n, size_t *out_n) {
  char *o = malloc(3 * n + 1);
  if (!o)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    size_t l = spy__utf8_seq((const unsigned char *)p + i, n - i);
    if (l) {
      memcpy(o + k, p + i, l);
      k += l;
      i += l;
    } else {
      memcpy(o + k, "\xEF\xBF\xBD", 3);
      k += 3;
      i++;
    }
  }
  *out_n = k;
  return o;
}

static int hex4(const unsigned char *s) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexv((char)s[i]);
    if (h < 0)
      return -1;
    v = v << 4 | h;
  }
  return v;
}

/* Scans a JSON string's body from s (after its opening quote) to its
 * closing quote: returns the quote, or NULL when the string is cut,
 * holds a control byte, a bad escape, a lone surrogate or bytes that are
 * not UTF-8. *size: its decoded bytes; *plain: no escape in it. */
static const unsigned char *str_scan(const unsigned char *s,
                                     const unsigned char *end, size_t *size,
                                     int *plain) {
  *size = 0;
  *plain = 1;
  for (;;) {
    size_t k = spy__json_plain_len((const char *)s, (size_t)(end - s));
    s += k;
    *size += k;
    if (s == end)
      return NULL;
    unsigned c = *s;
    if (c == '"')
      return s;
    *plain = 0;
    if (c == '\\') {
      if (end - s < 2)
        return NULL;
      if (s[1] && strchr("\"\\/bfnrt", s[1])) {
        ++*size;
        s += 2;
        continue;
      }
      if (s[1] != 'u')
        return NULL;
      int u = end - s >= 6 ? hex4(s + 2) : -1;
      if (u < 0 || (u >= 0xDC00 && u <= 0xDFFF))
        return NULL;
      if (u >= 0xD800 && u <= 0xDBFF) { /* a pair: one 4-byte sequence */
        int lo =
            end - s >= 12 && s[6] == '\\' && s[7] == 'u' ? hex4(s + 8) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF)
          return NULL;
        *size += 4;
        s += 12;
        continue;
      }
      *size += u < 0x80 ? 1 : u < 0x800 ? 2 : 3;
      s += 6;
      continue;
    }
    if (c < 0x20)
      return NULL;
    size_t l = spy__utf8_seq(s, (size_t)(end - s));
    if (!l)
      return NULL;
    s += l;
    *size += l;
  }
}

/* A StringRef line in the exact form this project's writer gives it,
 * {"action":"StringRef","id":"<32 hex>","content":"<string>"}, read
 * without building a tree (payloads are most of a store's bytes): the id,
 * and the content's decoded size from one pass over its escapes. 1 with
 * out set; 0 for any other shape and for anything the scan does not
 * take as it is (bytes that are not UTF-8, a raw control byte, a bad
 * escape, a lone surrogate), which then goes to the JSON library, so
 * what is accepted and what it means is the library's. */
static int quick_ref(const char *line, size_t n, spy__jline *out) {
  static const char head[] = "{\"action\":\"StringRef\",\"id\":\"";
  static const char mid[] = "\",\"content\":\"";
  const size_t hl = sizeof head - 1, ml = sizeof mid - 1;
  uint64_t h[2];
  if (n < hl + 32 + ml + 2 || memcmp(line, head, hl) != 0 ||
      memcmp(line + hl + 32, mid, ml) != 0 ||
      spy__hash_parse(line + hl, 32, h) < 0)
    return 0;
  const unsigned char *s = (const unsigned char *)line + hl + 32 + ml;
  const unsigned char *end = (const unsigned char *)line + n;
  size_t size;
  int plain;
  if (!(s = str_scan(s, end, &size, &plain)))
    return 0;
  if (end - s != 2 || s[1] != '}')
    return 0;
  out->is_ref = 1;
  out->hash[0] = h[0];
  out->hash[1] = h[1];
  out->size = size;
  return 1;
}

/* ---- the writer's own event lines, without the JSON library ----------
 * An event line in the exact form json_form.c writes it: the envelope
 * {"timestamp":"…","session_id":"…"[,"build_id":"…"],"seq":N,"ts_us":N,
 * "action":"Kind" and then every field of that built-in kind, in the
 * catalog's order, "name":value, and }. Read in one pass into the same
 * tree to_action() builds from the library's (typed by the same two
 * rules: a $ref string in a payload field, an object in a list of
 * records). Anything else (white space, another order, a member more or
 * less, a real number, an integer of 19 digits or more, bytes that are
 * not UTF-8, a raw control byte, a bad or lone-surrogate escape, an
 * object outside a list of records, fields that spy_trace_check refuses)
 * makes it answer 0, and the line goes to the JSON library: what is
 * accepted and what it means stays the library's (fuzz_jsonl checks that
 * both read every line alike). */

#define QUICK_DEPTH 16 /* deeper goes to the library (its bound is 32) */

typedef struct qp {
  const unsigned char *s, *end;
  spy_trace_arena *a;
  int nomem;
} qp;

static int q_lit(qp *q, const char *lit, size_t n) {
  if ((size_t)(q->end - q->s) < n || memcmp(q->s, lit, n) != 0)
    return 0;
  q->s += n;
  return 1;
}

/* A JSON integer that fits with room to spare (at most 18 digits). */
static int q_int(qp *q, int64_t *out) {
  const unsigned char *s = q->s;
  int neg = s < q->end && *s == '-';
  s += neg;
  const unsigned char *d = s;
  uint64_t v = 0;
  while (s < q->end && *s >= '0' && *s <= '9' && s - d < 19)
    v = v * 10 + (uint64_t)(*s++ - '0');
  size_t nd = (size_t)(s - d);
  if (nd == 0 || nd > 18 || (nd > 1 && *d == '0'))
    return 0;
  if (s < q->end && (*s == '.' || *s == 'e' || *s == 'E'))
    return 0;
  *out = neg ? -(int64_t)v : (int64_t)v;
  q->s = s;
  return 1;
}

/* Digits between quotes (the envelope's timestamp and build_id). */
static int q_digits(qp *q, uint64_t *out, size_t max) {
  const unsigned char *s = q->s;
  uint64_t v = 0;
  while (s < q->end && *s >= '0' && *s <= '9' && (size_t)(s - q->s) < max)
    v = v * 10 + (uint64_t)(*s++ - '0');
  if (s == q->s || s == q->end || *s != '"')
    return 0;
  *out = v;
  q->s = s + 1;
  return 1;
}

/* The body of a string after its opening quote, decoded into the arena
 * (NUL-terminated, as copy_str does). */
static int q_str(qp *q, const char **out, size_t *out_n) {
  const unsigned char *b = q->s, *s = b, *end = q->end;
  size_t size;
  int plain;
  if (!(s = str_scan(s, end, &size, &plain))) /* to the closing quote */
    return 0;
  if (size > UINT32_MAX)
    return 0;
  char *o = spy_trace_arena_alloc(q->a, size + 1);
  if (!o) {
    q->nomem = 1;
    return 0;
  }
  q->s = s + 1;
  *out = o;
  *out_n = size;
  if (plain) {
    memcpy(o, b, size);
    o[size] = 0;
    return 1;
  }
  for (s = b; *s != '"';) { /* decode what the scan accepted */
    if (*s != '\\') {
      *o++ = (char)*s++;
      continue;
    }
    unsigned c = s[1];
    if (c != 'u') {
      *o++ = c == 'b'   ? '\b'
             : c == 'f' ? '\f'
             : c == 'n' ? '\n'
             : c == 'r' ? '\r'
             : c == 't' ? '\t'
                        : (char)c;
      s += 2;
      continue;
    }
    unsigned u = (unsigned)hex4(s + 2);
    s += 6;
    if (u >= 0xD800 && u <= 0xDBFF) {
      u = 0x10000 + ((u - 0xD800) << 10) + ((unsigned)hex4(s + 2) - 0xDC00);
      s += 6;
    }
    if (u < 0x80)
      *o++ = (char)u;
    else if (u < 0x800) {
      *o++ = (char)(0xC0 | u >> 6);
      *o++ = (char)(0x80 | (u & 0x3F));
    } else if (u < 0x10000) {
      *o++ = (char)(0xE0 | u >> 12);
      *o++ = (char)(0x80 | (u >> 6 & 0x3F));
      *o++ = (char)(0x80 | (u & 0x3F));
    } else {
      *o++ = (char)(0xF0 | u >> 18);
      *o++ = (char)(0x80 | (u >> 12 & 0x3F));
      *o++ = (char)(0x80 | (u >> 6 & 0x3F));
      *o++ = (char)(0x80 | (u & 0x3F));
    }
  }
  *o = 0;
  return 1;
}

static int q_val(qp *q, const spy_trace_field *f, int depth, spy_trace_val *v);

/* An object as the record `rec`: exactly its fields, in order. */
static int q_rec(qp *q, const spy_trace_kind *rec, int depth,
                 spy_trace_val *v) {
  if (!q_lit(q, "{", 1))
    return 0;
  spy_trace_val *items = NULL;
  if (rec->nfields &&
      !(items = spy_trace_arena_alloc(q->a, rec->nfields * sizeof *items))) {
    q->nomem = 1;
    return 0;
  }
  for (uint32_t k = 0; k < rec->nfields; k++) {
    const char *name = rec->fields[k].name;
    size_t nl = strlen(name);
    if ((k && !q_lit(q, ",", 1)) || !q_lit(q, "\"", 1) || !q_lit(q, name, nl) ||
        !q_lit(q, "\":", 2) || !q_val(q, &rec->fields[k], depth + 1, &items[k]))
      return 0;
  }
  if (!q_lit(q, "}", 1))
    return 0;
  v->type = SPY_TV_REC;
  v->n = rec->nfields;
  v->u.items = items;
  return 1;
}

/* A value typed by its field as to_val() types it. */
static int q_val(qp *q, const spy_trace_field *f, int depth, spy_trace_val *v) {
  memset(v, 0, sizeof *v);
  if (depth > QUICK_DEPTH || q->s == q->end)
    return 0;
  switch (*q->s) {
  case 'n': v->type = SPY_TV_NULL; return q_lit(q, "null", 4);
  case 't': v->type = SPY_TV_TRUE; return q_lit(q, "true", 4);
  case 'f': v->type = SPY_TV_FALSE; return q_lit(q, "false", 5);
  case '"': {
    const char *s;
    size_t n;
    q->s++;
    if (!q_str(q, &s, &n))
      return 0;
    if (f && (f->type == SPY_TF_SRC || f->type == SPY_TF_OSRC)) {
      if (n == 37 && memcmp(s, "$ref:", 5) == 0 &&
          spy__hash_parse(s + 5, 32, v->hash) == 0) {
        v->type = SPY_TV_SRCREF;
        v->has_hash = 1;
        return 1;
      }
      v->type = SPY_TV_SRC;
    } else
      v->type = SPY_TV_STR;
    v->n = (uint32_t)n;
    v->u.s = s;
    return 1;
  }
  case '[': {
    const spy_trace_kind *rec =
        f && (f->type == SPY_TF_LIST || f->type == SPY_TF_OLIST) ? f->rec
                                                                 : NULL;
    q->s++;
    spy_trace_val *items = NULL;
    uint32_t n = 0, cap = 0;
    if (!q_lit(q, "]", 1)) {
      for (;;) {
        if (n == cap) { /* grown in the arena: the old copy is left */
          uint32_t nc = cap ? 2 * cap : 8;
          spy_trace_val *g =
              nc < cap ? NULL : spy_trace_arena_alloc(q->a, nc * sizeof *g);
          if (!g) {
            q->nomem = nc >= cap;
            return 0;
          }
          if (n)
            memcpy(g, items, n * sizeof *g);
          items = g;
          cap = nc;
        }
        int ok = rec && q->s < q->end && *q->s == '{'
                     ? q_rec(q, rec, depth + 1, &items[n])
                     : q_val(q, NULL, depth + 1, &items[n]);
        if (!ok)
          return 0;
        n++;
        if (q_lit(q, "]", 1))
          break;
        if (!q_lit(q, ",", 1))
          return 0;
      }
    }
    v->type = SPY_TV_LIST;
    v->n = n;
    v->u.items = items;
    return 1;
  }
  default:
    if (*q->s == '-' || (*q->s >= '0' && *q->s <= '9')) {
      v->type = SPY_TV_INT;
      return q_int(q, &v->u.i);
    }
    return 0; /* an object outside a list of records, or not JSON */
  }
}

/* 1 with out->action set; 0 for the library to read the line; or
 * SPY_ENOMEM. */
static int quick_event(const char *line, size_t n, spy_trace_arena *a,
                       spy__jline *out) {
  qp q = {(const unsigned char *)line, (const unsigned char *)line + n, a, 0};
  spy_trace_action *act = &out->action;
  uint64_t ts_ms, build = 0;
  int64_t seq, ts;
  const char *sid, *name;
  size_t sid_n, name_n;
  if (!q_lit(&q, "{\"timestamp\":\"", 14) || !q_digits(&q, &ts_ms, 19) ||
      !q_lit(&q, ",\"session_id\":\"", 15) || !q_str(&q, &sid, &sid_n))
    return q.nomem ? SPY_ENOMEM : 0;
  if (q_lit(&q, ",\"build_id\":\"", 13) && !q_digits(&q, &build, 9))
    return 0;
  if (!q_lit(&q, ",\"seq\":", 7) || !q_int(&q, &seq) ||
      !q_lit(&q, ",\"ts_us\":", 9) || !q_int(&q, &ts) ||
      !q_lit(&q, ",\"action\":\"", 11) || !q_str(&q, &name, &name_n))
    return q.nomem ? SPY_ENOMEM : 0;
  const spy_trace_kind *k =
      strlen(name) == name_n ? spy_trace_kind_find(name) : NULL;
  if (!k)
    return 0; /* a kind this build does not know */
  spy_trace_val *items = NULL;
  if (k->nfields &&
      !(items = spy_trace_arena_alloc(a, k->nfields * sizeof *items)))
    return SPY_ENOMEM;
  for (uint32_t i = 0; i < k->nfields; i++) {
    const char *fname = k->fields[i].name;
    size_t fl = strlen(fname);
    if (!q_lit(&q, ",\"", 2) || !q_lit(&q, fname, fl) || !q_lit(&q, "\":", 2) ||
        !q_val(&q, &k->fields[i], 1, &items[i]))
      return q.nomem ? SPY_ENOMEM : 0;
  }
  if (!q_lit(&q, "}", 1) || q.s != q.end)
    return 0;
  act->fields.type = SPY_TV_REC;
  act->fields.n = k->nfields;
  act->fields.u.items = items;
  if (spy_trace_check(k, &act->fields) < 0)
    return 0; /* refused: the library's path says why */
  act->name = name;
  act->name_len = (uint32_t)name_n;
  act->kind = k;
  act->seq = (uint64_t)seq;
  act->ts_us = (uint64_t)ts;
  act->build = (uint32_t)build;
  return 1; /* the timestamp and session_id are not kept (to_action) */
}

int spy__json_line(const char *p, size_t n, spy_trace_arena *a, spy__jline *out,
                   spy__buf *content, char *msg, size_t msgcap) {
  memset(out, 0, sizeof *out);
  if (!content) { /* the writer's own forms first (content: the library) */
    if (quick_ref(p, n, out))
      return 1;
    int rc = quick_event(p, n, a, out);
    if (rc == 1)
      return 0;
    if (rc < 0)
      return rc;
    memset(out, 0, sizeof *out);
  }
  json_error_t e;
  json_t *o = json_loadb(p, n, JSON_ALLOW_NUL, &e);
  if (!o && json_error_code(&e) == json_error_invalid_utf8) {
    size_t mn;
    char *mended = mend_utf8(p, n, &mn);
    if (!mended)
      return SPY_ENOMEM;
    out->replaced = spy__utf8_invalid(p, n);
    o = json_loadb(mended, mn, JSON_ALLOW_NUL, &e);
    free(mended);
  }
  if (!o) {
    if (json_error_code(&e) == json_error_out_of_memory)
      return SPY_ENOMEM;
    if (msg)
      snprintf(msg, msgcap, "not valid JSON at column %d: %s", e.column,
               e.text);
    return SPY_EBADVALUE;
  }
  int rc = 0;
  const json_t *act = json_object_get(o, "action");
  if (!json_is_object(o) || !json_is_string(act)) {
    if (msg)
      snprintf(msg, msgcap, "not an event (no \"action\" string)");
    rc = SPY_EBADVALUE;
  } else if (strcmp(json_string_value(act), "StringRef") == 0) {
    const json_t *id = json_object_get(o, "id"),
                 *c = json_object_get(o, "content");
    if (!json_is_string(id) || !json_is_string(c) ||
        spy__hash_parse(json_string_value(id), json_string_length(id),
                        out->hash) < 0) {
      if (msg)
        snprintf(msg, msgcap, "a StringRef without a 32-hex id and content");
      rc = SPY_EBADVALUE;
    } else {
      out->is_ref = 1;
      out->size = json_string_length(c);
      if (content) {
        spy__buf_put(content, json_string_value(c), out->size);
        rc = content->err;
      }
      if (rc == 0)
        rc = 1;
    }
  } else {
    rc = to_action(o, a, &out->action);
    if (rc == SPY_EBADVALUE && msg)
      snprintf(msg, msgcap, "an event whose fields do not match its kind");
  }
  json_decref(o);
  return rc;
}

int spy_trace_json_parse(const char *line, size_t n, spy_trace_arena *arena,
                         spy_trace_action *out) {
  spy__jline l;
  int rc = spy__json_line(line, n, arena, &l, NULL, NULL, 0);
  *out = l.action;
  return rc;
}

int spy__json_ints(const char *p, size_t n, const char *const *keys,
                   int64_t *vals, int nkeys) {
  json_t *o = json_loadb(p, n, 0, NULL);
  if (!json_is_object(o)) {
    json_decref(o);
    return SPY_EBADVALUE;
  }
  for (int i = 0; i < nkeys; i++) {
    const json_t *v = json_object_get(o, keys[i]);
    if (json_is_integer(v))
      vals[i] = (int64_t)json_integer_value(v);
  }
  json_decref(o);
  return 0;
}
