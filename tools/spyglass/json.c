/* json.c — the CLI's JSON emitter (see json.h). */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void json_init(json_out *j, FILE *f) {
  memset(j, 0, sizeof *j);
  j->f = f;
}

/* Called before every value and key: writes the comma if needed. */
static void sep(json_out *j) {
  if (j->depth > 0 && j->need_comma[j->depth])
    fputc(',', j->f);
  if (j->depth > 0)
    j->need_comma[j->depth] = 1;
}

static void push(json_out *j, char c) {
  sep(j);
  fputc(c, j->f);
  if (j->depth < 63)
    j->depth++;
  j->need_comma[j->depth] = 0;
}

static void pop(json_out *j, char c) {
  fputc(c, j->f);
  if (j->depth > 0)
    j->depth--;
}

void json_obj_begin(json_out *j) { push(j, '{'); }
void json_obj_end(json_out *j) { pop(j, '}'); }
void json_arr_begin(json_out *j) { push(j, '['); }
void json_arr_end(json_out *j) { pop(j, ']'); }

void json_key(json_out *j, const char *key) {
  json_str(j, key);
  fputc(':', j->f);
  /* The value that follows must not write another comma. */
  j->need_comma[j->depth] = 0;
}

/* Length of a valid UTF-8 sequence at p (n bytes left), or 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n) {
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

void json_strn(json_out *j, const char *s, size_t n) {
  sep(j);
  const unsigned char *p = (const unsigned char *)s;
  fputc('"', j->f);
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c == '"' || c == '\\') {
      fputc('\\', j->f);
      fputc(c, j->f);
      i++;
    } else if (c < 0x20) {
      fprintf(j->f, "\\u%04x", c);
      i++;
    } else {
      size_t l = utf8_len(p + i, n - i);
      if (!l) {
        fputs("\\ufffd", j->f);
        i++;
      } else {
        fwrite(p + i, 1, l, j->f);
        i += l;
      }
    }
  }
  fputc('"', j->f);
}

void json_str(json_out *j, const char *s) { json_strn(j, s, strlen(s)); }
void json_int(json_out *j, int64_t v) {
  sep(j);
  fprintf(j->f, "%lld", (long long)v);
}
void json_uint(json_out *j, uint64_t v) {
  sep(j);
  fprintf(j->f, "%llu", (unsigned long long)v);
}
void json_num(json_out *j, double v) {
  sep(j);
  char tmp[40];
  if (isfinite(v)) {
    snprintf(tmp, sizeof tmp, "%.15g", v);
    if (strtod(tmp, NULL) != v)
      snprintf(tmp, sizeof tmp, "%.17g", v);
    fputs(tmp, j->f);
  } else
    fputs("null", j->f);
}
void json_bool(json_out *j, int v) {
  sep(j);
  fputs(v ? "true" : "false", j->f);
}
void json_null(json_out *j) {
  sep(j);
  fputs("null", j->f);
}
void json_newline(json_out *j) { fputc('\n', j->f); }
