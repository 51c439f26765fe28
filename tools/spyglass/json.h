/* json.h — tiny JSON emitter for the CLI's --json output (jw_*: apart from
 * jansson's json_* names, which the tool also links): strings are
 * escaped (invalid UTF-8 becomes U+FFFD), numbers printed so they round
 * trip, commas placed by a depth stack. Writes to a FILE; no allocation. */
#ifndef SPY_TOOL_JSON_H
#define SPY_TOOL_JSON_H

#include <stdint.h>
#include <stdio.h>

typedef struct json_out {
  FILE *f;
  int depth;
  uint8_t need_comma[64];
} json_out;

void jw_init(json_out *j, FILE *f);
void jw_obj_begin(json_out *j);
void jw_obj_end(json_out *j);
void jw_arr_begin(json_out *j);
void jw_arr_end(json_out *j);
/* A key inside an object; the next value call supplies its value. */
void jw_key(json_out *j, const char *key);
void jw_str(json_out *j, const char *s);
void jw_strn(json_out *j, const char *s, size_t n);
void jw_int(json_out *j, int64_t v);
void jw_uint(json_out *j, uint64_t v);
void jw_num(json_out *j, double v); /* NaN/inf print as null */
void jw_bool(json_out *j, int v);
void jw_null(json_out *j);
/* Ends a top-level value with a newline. */
void jw_newline(json_out *j);

#endif
