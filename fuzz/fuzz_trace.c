/* fuzz_trace.c — libFuzzer target for the store's decoders: a wire frame
 * whose TRACE sections are walked record by record, or raw records back to
 * back, and the same bytes as a JSON-lines event (what the readers parse).
 * Whatever the bytes: an error or a valid tree, never a crash, overread or
 * unbounded allocation; a decoded record re-encodes to the same bytes, and
 * its JSON form parses back into the same tree. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spyglass/trace.h"
#include "spyglass/wire.h"
#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static spy_trace_arena arena, arena2;
static spy__buf json;

static void check_record(const uint8_t *rec, const spy_trace_action *a) {
  uint32_t len;
  memcpy(&len, rec, 4);
  int64_t n = spy_trace_encode_action(a, NULL, 0);
  if (n != (int64_t)len)
    abort();
  uint8_t *again = malloc((size_t)n);
  if (!again)
    return;
  spy_trace_encode_action(a, again, (size_t)n);
  if (memcmp(again, rec, (size_t)n) != 0)
    abort();
  free(again);
  /* the JSON-lines form of a known kind parses back (JSON integers are
   * read as int64: a seq or time beyond it, which no session makes, is
   * not asked to) */
  if (!a->kind || a->seq > INT64_MAX || a->ts_us > INT64_MAX)
    return;
  json.len = 0;
  spy__trace_json(&json, "fuzz", a);
  if (json.err)
    return;
  spy_trace_arena_reset(&arena2);
  spy_trace_action b;
  if (spy_trace_json_parse(json.p, json.len, &arena2, &b) != 0 ||
      b.kind != a->kind || b.fields.n != a->fields.n)
    abort();
}

static void walk_records(const uint8_t *p, size_t n) {
  size_t off = 0;
  spy_trace_action a;
  for (int i = 0; i < 64; i++) {
    size_t at = off;
    spy_trace_arena_reset(&arena);
    if (spy_trace_section_next(p, n, &off, &arena, &a) != 1)
      break;
    check_record(p + at, &a);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  spy_frame f;
  if (spy_frame_decode(data, size, &f, NULL) == 0) {
    size_t cur = 0;
    spy_section s;
    while (spy_frame_next_section(&f, &cur, &s))
      if (s.id == SPY_SEC_TRACE)
        walk_records(s.data, s.len);
  } else {
    walk_records(data, size);
  }
  /* the same bytes as one JSON-lines event */
  spy_trace_arena_reset(&arena);
  spy_trace_action a;
  (void)spy_trace_json_parse((const char *)data, size, &arena, &a);
  return 0;
}
