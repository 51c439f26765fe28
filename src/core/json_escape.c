/* json_escape.c — the project's one JSON string escaper (see
 * json_escape.h). Runs of plain ASCII are copied in one go; anything else
 * is decoded one sequence at a time. */
#include "json_escape.h"

#include <string.h>

size_t spy__utf8_seq(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len;
  unsigned min;
  if (c < 0x80)
    return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    min = 0x80;
    c &= 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    min = 0x800;
    c &= 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    min = 0x10000;
    c &= 0x07;
  } else
    return 0;
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80)
      return 0;
    c = (c << 6) | (p[i] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
    return 0;
  return len;
}

uint64_t spy__utf8_invalid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  uint64_t bad = 0;
  for (size_t i = 0; i < n;) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    size_t l = spy__utf8_seq(p + i, n - i);
    bad += l == 0;
    i += l ? l : 1;
  }
  return bad;
}

/* 1 for the bytes copied as they are: printable ASCII but `"` and `\`. */
static int plain(unsigned char c) {
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

size_t spy__json_escape(char *out, size_t cap, const char *s, size_t n,
                        size_t *used, uint64_t *replaced) {
  static const char hx[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0, o = 0;
  uint64_t bad = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && plain(p[run]))
      run++;
    if (run > i) {
      size_t k = run - i;
      if (k > cap - o)
        k = cap - o;
      memcpy(out + o, p + i, k);
      o += k;
      i += k;
      if (i < run)
        break; /* out is full */
      continue;
    }
    unsigned char c = p[i];
    if (c < 0x80) { /* `"`, `\` or a control byte */
      char e = c == '"'    ? '"'
               : c == '\\' ? '\\'
               : c == '\n' ? 'n'
               : c == '\t' ? 't'
               : c == '\r' ? 'r'
                           : 0;
      size_t need = e ? 2 : 6;
      if (cap - o < need)
        break;
      out[o++] = '\\';
      if (e)
        out[o++] = e;
      else {
        memcpy(out + o, "u00", 3);
        out[o + 3] = hx[c >> 4];
        out[o + 4] = hx[c & 15];
        o += 5;
      }
      i++;
      continue;
    }
    size_t l = spy__utf8_seq(p + i, n - i);
    if (l) {
      if (cap - o < l)
        break;
      memcpy(out + o, p + i, l);
      o += l;
      i += l;
    } else {
      if (cap - o < 6)
        break;
      memcpy(out + o, "\\ufffd", 6);
      o += 6;
      i++;
      bad++;
    }
  }
  *used = i;
  if (replaced)
    *replaced += bad;
  return o;
}
