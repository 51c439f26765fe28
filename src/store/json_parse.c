/* json_parse.c — a small bounds-checked JSON parser (values in an arena)
 * and the conversion of a JSON-lines event back into a decoded action,
 * guided by the catalog. Used by the readers of all three stores: the SQL
 * stores keep each action's JSON-lines form in their actions table. */
#include <stdlib.h>
#include <string.h>

#include "store.h"

typedef struct jp {
  const char *p, *end;
  spy_trace_arena *a;
  int depth;
} jp;

static void ws(jp *j) {
  while (j->p < j->end &&
         (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
    j->p++;
}

static int hexv(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

static int put_utf8(char *o, uint32_t cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12);
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18);
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static int str(jp *j, const char **out, uint32_t *len) {
  if (j->p >= j->end || *j->p != '"')
    return SPY_EBADVALUE;
  const char *s = ++j->p;
  const char *e = s;
  int esc = 0;
  while (e < j->end && *e != '"') {
    if (*e == '\\') {
      esc = 1;
      e++;
    }
    e++;
  }
  if (e >= j->end)
    return SPY_EBADVALUE;
  size_t n = (size_t)(e - s);
  if (n > 0x7fffffffu)
    return SPY_EBADVALUE;
  if (!esc) {
    *out = s;
    *len = (uint32_t)n;
    j->p = e + 1;
    return 0;
  }
  char *o = spy_trace_arena_alloc(j->a, n + 1);
  if (!o)
    return SPY_ENOMEM;
  size_t k = 0;
  for (const char *c = s; c < e; c++) {
    if (*c != '\\') {
      o[k++] = *c;
      continue;
    }
    c++;
    switch (*c) {
    case 'n': o[k++] = '\n'; break;
    case 't': o[k++] = '\t'; break;
    case 'r': o[k++] = '\r'; break;
    case 'b': o[k++] = '\b'; break;
    case 'f': o[k++] = '\f'; break;
    case '"':
    case '\\':
    case '/': o[k++] = *c; break;
    case 'u': {
      if (e - c < 5)
        return SPY_EBADVALUE;
      uint32_t cp = 0;
      for (int i = 1; i <= 4; i++) {
        int h = hexv(c[i]);
        if (h < 0)
          return SPY_EBADVALUE;
        cp = cp << 4 | (uint32_t)h;
      }
      c += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && e - c >= 7 && c[1] == '\\' &&
          c[2] == 'u') {
        uint32_t lo = 0;
        int ok = 1;
        for (int i = 3; i <= 6; i++) {
          int h = hexv(c[i]);
          if (h < 0)
            ok = 0;
          lo = lo << 4 | (uint32_t)(h < 0 ? 0 : h);
        }
        if (ok && lo >= 0xDC00 && lo < 0xE000) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          c += 6;
        }
      }
      /* the escaped form is at least as long as its UTF-8 (6 >= 3, 12 >= 4) */
      k += (size_t)put_utf8(o + k, cp);
      break;
    }
    default: return SPY_EBADVALUE;
    }
  }
  *out = o;
  *len = (uint32_t)k;
  j->p = e + 1;
  return 0;
}

static int value(jp *j, spy__jv *v);

static int container(jp *j, spy__jv *v, char close) {
  if (++j->depth > 32)
    return SPY_EBADVALUE;
  j->p++;
  /* members are collected in a growing array, then copied */
  size_t cap = 8, n = 0;
  spy__jv *tmp = malloc(cap * sizeof *tmp);
  if (!tmp)
    return SPY_ENOMEM;
  int rc = 0;
  ws(j);
  if (j->p < j->end && *j->p == close)
    j->p++;
  else
    for (;;) {
      if (n == cap) {
        spy__jv *g = realloc(tmp, 2 * cap * sizeof *tmp);
        if (!g) {
          rc = SPY_ENOMEM;
          break;
        }
        tmp = g;
        cap *= 2;
      }
      spy__jv *m = &tmp[n];
      memset(m, 0, sizeof *m);
      ws(j);
      if (close == '}') {
        if ((rc = str(j, &m->key, &m->key_len)) < 0)
          break;
        ws(j);
        if (j->p >= j->end || *j->p != ':') {
          rc = SPY_EBADVALUE;
          break;
        }
        j->p++;
      }
      const char *key = m->key;
      uint32_t kl = m->key_len;
      if ((rc = value(j, m)) < 0)
        break;
      m->key = key;
      m->key_len = kl;
      n++;
      ws(j);
      if (j->p < j->end && *j->p == ',') {
        j->p++;
        continue;
      }
      if (j->p < j->end && *j->p == close) {
        j->p++;
        break;
      }
      rc = SPY_EBADVALUE;
      break;
    }
  if (rc == 0 && n) {
    v->items = spy_trace_arena_alloc(j->a, n * sizeof *tmp);
    if (!v->items)
      rc = SPY_ENOMEM;
    else
      memcpy(v->items, tmp, n * sizeof *tmp);
  }
  free(tmp);
  v->type = close == '}' ? 'o' : 'a';
  v->n = (uint32_t)n;
  j->depth--;
  return rc;
}

static int value(jp *j, spy__jv *v) {
  memset(v, 0, sizeof *v);
  ws(j);
  if (j->p >= j->end)
    return SPY_EBADVALUE;
  char c = *j->p;
  if (c == '{')
    return container(j, v, '}');
  if (c == '[')
    return container(j, v, ']');
  if (c == '"') {
    v->type = 's';
    return str(j, &v->s, &v->n);
  }
  static const struct {
    const char *w;
    char t;
  } lits[] = {{"null", 'n'}, {"true", 't'}, {"false", 'f'}};
  for (int i = 0; i < 3; i++) {
    size_t l = strlen(lits[i].w);
    if ((size_t)(j->end - j->p) >= l && memcmp(j->p, lits[i].w, l) == 0) {
      v->type = lits[i].t;
      j->p += l;
      return 0;
    }
  }
  const char *s = j->p;
  int neg = 0, frac = 0;
  if (*j->p == '-') {
    neg = 1;
    j->p++;
  }
  uint64_t acc = 0;
  int digits = 0;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
    if (acc > (UINT64_MAX - 9) / 10)
      frac = 1;
    acc = acc * 10 + (uint64_t)(*j->p - '0');
    j->p++;
    digits++;
  }
  while (j->p < j->end &&
         (*j->p == '.' || *j->p == 'e' || *j->p == 'E' || *j->p == '+' ||
          *j->p == '-' || (*j->p >= '0' && *j->p <= '9'))) {
    frac = 1;
    j->p++;
  }
  if (!digits)
    return SPY_EBADVALUE;
  v->type = frac || acc > (uint64_t)INT64_MAX + (uint64_t)neg ? 'd' : 'i';
  v->i = neg ? (int64_t)(0 - acc) : (int64_t)acc;
  v->s = s;
  v->n = (uint32_t)(j->p - s);
  return 0;
}

int spy__json_parse(const char *p, size_t n, spy_trace_arena *a, spy__jv *out) {
  jp j = {p, p + n, a, 0};
  int rc = value(&j, out);
  if (rc < 0)
    return rc;
  ws(&j);
  return j.p == j.end ? 0 : SPY_EBADVALUE;
}

const spy__jv *spy__jv_get(const spy__jv *o, const char *key) {
  if (!o || o->type != 'o')
    return NULL;
  size_t kl = strlen(key);
  for (uint32_t i = 0; i < o->n; i++)
    if (o->items[i].key_len == kl && memcmp(o->items[i].key, key, kl) == 0)
      return &o->items[i];
  return NULL;
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

/* JSON value -> tree value, typed by the field (f NULL: untyped). */
static int to_val(const spy__jv *j, const spy_trace_field *f,
                  spy_trace_arena *a, spy_trace_val *v) {
  memset(v, 0, sizeof *v);
  switch (j->type) {
  case 'n': v->type = SPY_TV_NULL; return 0;
  case 't': v->type = SPY_TV_TRUE; return 0;
  case 'f': v->type = SPY_TV_FALSE; return 0;
  case 'i':
    v->type = SPY_TV_INT;
    v->u.i = j->i;
    return 0;
  case 'd':
    v->type = SPY_TV_STR;
    v->u.s = j->s;
    v->n = j->n;
    return 0;
  case 's':
    if (f && (f->type == SPY_TF_SRC || f->type == SPY_TF_OSRC)) {
      if (j->n == 37 && memcmp(j->s, "$ref:", 5) == 0 &&
          spy__hash_parse(j->s + 5, 32, v->hash) == 0) {
        v->type = SPY_TV_SRCREF;
        v->has_hash = 1;
        return 0;
      }
      v->type = SPY_TV_SRC;
    } else
      v->type = SPY_TV_STR;
    v->u.s = j->s;
    v->n = j->n;
    return 0;
  default: break;
  }
  const spy_trace_kind *rec =
      f && (f->type == SPY_TF_LIST || f->type == SPY_TF_OLIST) ? f->rec : NULL;
  spy_trace_val *items = NULL;
  uint32_t n = j->type == 'o' && rec ? rec->nfields : j->n;
  if (n) {
    items = spy_trace_arena_alloc(a, n * sizeof *items);
    if (!items)
      return SPY_ENOMEM;
  }
  if (j->type == 'a') {
    v->type = SPY_TV_LIST;
    for (uint32_t i = 0; i < n; i++) {
      const spy__jv *it = &j->items[i];
      if (rec && it->type == 'o') {
        int rc = 0;
        spy_trace_field rf = {NULL, SPY_TF_LIST, 0, rec};
        (void)rf;
        items[i].type = SPY_TV_REC;
        items[i].n = rec->nfields;
        spy_trace_val *ri =
            rec->nfields ? spy_trace_arena_alloc(a, rec->nfields * sizeof *ri)
                         : NULL;
        if (rec->nfields && !ri)
          return SPY_ENOMEM;
        for (uint32_t k = 0; k < rec->nfields; k++) {
          const spy__jv *m = spy__jv_get(it, rec->fields[k].name);
          spy__jv nul = {.type = 'n'};
          if ((rc = to_val(m ? m : &nul, &rec->fields[k], a, &ri[k])) < 0)
            return rc;
        }
        items[i].u.items = ri;
      } else {
        int rc = to_val(it, NULL, a, &items[i]);
        if (rc < 0)
          return rc;
      }
    }
  } else { /* an object without a record type: members in order */
    v->type = SPY_TV_REC;
    for (uint32_t i = 0; i < n; i++) {
      int rc = to_val(&j->items[i], NULL, a, &items[i]);
      if (rc < 0)
        return rc;
    }
  }
  v->n = n;
  v->u.items = items;
  return 0;
}

static const char *const envelope[] = {"timestamp", "session_id", "build_id",
                                       "seq",       "ts_us",      "action"};

int spy__json_to_action(const spy__jv *o, spy_trace_arena *a,
                        spy_trace_action *out) {
  memset(out, 0, sizeof *out);
  const spy__jv *act = spy__jv_get(o, "action");
  if (!act || act->type != 's')
    return SPY_EBADVALUE;
  if (act->n == 9 && memcmp(act->s, "StringRef", 9) == 0)
    return 1;
  out->name = act->s;
  out->name_len = act->n;
  char name[64];
  if (act->n < sizeof name) {
    memcpy(name, act->s, act->n);
    name[act->n] = 0;
    out->kind = spy_trace_kind_find(name);
  }
  const spy__jv *v;
  if ((v = spy__jv_get(o, "seq")) && v->type == 'i')
    out->seq = (uint64_t)v->i;
  if ((v = spy__jv_get(o, "ts_us")) && v->type == 'i')
    out->ts_us = (uint64_t)v->i;
  else if ((v = spy__jv_get(o, "timestamp")) && v->type == 's')
    out->ts_us = (uint64_t)strtoull(v->s, NULL, 10) * 1000u;
  if ((v = spy__jv_get(o, "build_id")) && v->type == 's')
    out->build = (uint32_t)strtoul(v->s, NULL, 10);
  const spy_trace_kind *k = out->kind;
  uint32_t n = 0;
  if (k)
    n = k->nfields;
  else
    for (uint32_t i = 0; i < o->n; i++) {
      int env = 0;
      for (size_t e = 0; e < sizeof envelope / sizeof *envelope; e++)
        env |= o->items[i].key_len == strlen(envelope[e]) &&
               memcmp(o->items[i].key, envelope[e], o->items[i].key_len) == 0;
      n += !env;
    }
  spy_trace_val *items = n ? spy_trace_arena_alloc(a, n * sizeof *items) : NULL;
  if (n && !items)
    return SPY_ENOMEM;
  uint32_t w = 0;
  for (uint32_t i = 0; k ? i < k->nfields : i < o->n; i++) {
    const spy__jv *m;
    const spy_trace_field *f = NULL;
    spy__jv nul = {.type = 'n'};
    if (k) {
      f = &k->fields[i];
      m = spy__jv_get(o, f->name);
      if (!m)
        m = &nul;
    } else {
      m = &o->items[i];
      int env = 0;
      for (size_t e = 0; e < sizeof envelope / sizeof *envelope; e++)
        env |= m->key_len == strlen(envelope[e]) &&
               memcmp(m->key, envelope[e], m->key_len) == 0;
      if (env)
        continue;
    }
    int rc = to_val(m, f, a, &items[w++]);
    if (rc < 0)
      return rc;
  }
  out->fields.type = SPY_TV_REC;
  out->fields.n = n;
  out->fields.u.items = items;
  if (k)
    return spy_trace_check(k, &out->fields);
  return 0;
}
