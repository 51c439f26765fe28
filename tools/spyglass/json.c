/* json.c — the CLI's JSON emitter (see json.h); strings go through the
 * project's one escaper, core/json_escape.c. */
#include "json.h"

#include "core/json_escape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void jw_init(json_out *j, FILE *f) {
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

void jw_obj_begin(json_out *j) { push(j, '{'); }
void jw_obj_end(json_out *j) { pop(j, '}'); }
void jw_arr_begin(json_out *j) { push(j, '['); }
void jw_arr_end(json_out *j) { pop(j, ']'); }

void jw_key(json_out *j, const char *key) {
  jw_str(j, key);
  fputc(':', j->f);
  /* The value that follows must not write another comma. */
  j->need_comma[j->depth] = 0;
}

/* The project's one escaper (core/json_escape.c), through a stack buffer:
 * invalid UTF-8 becomes U+FFFD, and nothing is allocated. */
void jw_strn(json_out *j, const char *s, size_t n) {
  sep(j);
  char tmp[1536];
  fputc('"', j->f);
  while (n > 0) {
    size_t used;
    size_t w = spy__json_escape(tmp, sizeof tmp, s, n, &used, NULL);
    fwrite(tmp, 1, w, j->f);
    s += used;
    n -= used;
  }
  fputc('"', j->f);
}

void jw_str(json_out *j, const char *s) { jw_strn(j, s, strlen(s)); }
void jw_int(json_out *j, int64_t v) {
  sep(j);
  fprintf(j->f, "%lld", (long long)v);
}
void jw_uint(json_out *j, uint64_t v) {
  sep(j);
  fprintf(j->f, "%llu", (unsigned long long)v);
}
void jw_num(json_out *j, double v) {
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
void jw_bool(json_out *j, int v) {
  sep(j);
  fputs(v ? "true" : "false", j->f);
}
void jw_null(json_out *j) {
  sep(j);
  fputs("null", j->f);
}
void jw_newline(json_out *j) { fputc('\n', j->f); }
