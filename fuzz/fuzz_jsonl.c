/* fuzz_jsonl.c — libFuzzer target for the JSON-lines reader
 * (src/store/reader_jsonl.c): the input is a session directory's files,
 * its first byte saying how many of the following bytes are meta.json,
 * the rest logs.json. The reader opens it, iterates every action twice
 * (a rewind between), looks up every payload an action names, and runs
 * the summary, builds and hook calls. Whatever the bytes: an error or an
 * answer, never a crash, an overread or an unbounded allocation. Each
 * line of logs.json is also parsed twice on its own, once as the reader's
 * iteration does (a StringRef or an event in the writer's form read by
 * the quick scans of json_parse.c) and once with its content asked for
 * (always the JSON library): both must agree on what the line is, its id
 * and its size, and for an event on the decoded action, field by field. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyglass/trace.h"
#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void put(const char *name, const uint8_t *p, size_t n) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f)
    abort();
  if (n && fwrite(p, 1, n, f) != n)
    abort();
  fclose(f);
}

static int on_build(void *arg, const spy_trace_build_info *b) {
  (void)arg, (void)b;
  return 0;
}

static int on_call(void *arg, const spy_trace_hook_call *h) {
  (void)arg;
  return h->plugin == NULL || h->module == NULL; /* never NULL */
}

static void lookups(spy_trace_reader *r, const spy_trace_val *v, int depth) {
  if (depth > 8)
    return;
  if (v->type == SPY_TV_SRCREF && v->has_hash) {
    const char *p;
    size_t n;
    if (spy_trace_reader_source(r, v->hash, &p, &n) == 0 && n && !p)
      abort();
  } else if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC)
    for (uint32_t i = 0; i < v->n; i++)
      lookups(r, &v->u.items[i], depth + 1);
}

/* Two decoded values are the same tree (the members each type uses). */
static int same_val(const spy_trace_val *a, const spy_trace_val *b) {
  if (a->type != b->type)
    return 0;
  switch (a->type) {
  case SPY_TV_INT: return a->u.i == b->u.i;
  case SPY_TV_STR:
  case SPY_TV_SRC:
    return a->n == b->n && memcmp(a->u.s, b->u.s, a->n) == 0 &&
           a->u.s[a->n] == 0 && b->u.s[b->n] == 0;
  case SPY_TV_SRCREF:
    return a->has_hash == b->has_hash && a->hash[0] == b->hash[0] &&
           a->hash[1] == b->hash[1];
  case SPY_TV_LIST:
  case SPY_TV_REC:
    if (a->n != b->n)
      return 0;
    for (uint32_t i = 0; i < a->n; i++)
      if (!same_val(&a->u.items[i], &b->u.items[i]))
        return 0;
    return 1;
  default: return 1;
  }
}

static int same_action(const spy_trace_action *a, const spy_trace_action *b) {
  return a->kind == b->kind && a->seq == b->seq && a->ts_us == b->ts_us &&
         a->build == b->build && a->name_len == b->name_len &&
         memcmp(a->name, b->name, a->name_len) == 0 &&
         same_val(&a->fields, &b->fields);
}

/* The quick scans (a StringRef, an event in the writer's form) and the
 * JSON library agree on one line: the same answer, the same id and
 * size, the same decoded action. */
static void same_line(const char *p, size_t n) {
  static spy_trace_arena a1, a2;
  static spy__buf content;
  spy__jline l1, l2;
  spy_trace_arena_reset(&a1);
  spy_trace_arena_reset(&a2);
  content.len = 0;
  int r1 = spy__json_line(p, n, &a1, &l1, NULL, NULL, 0);
  int r2 = spy__json_line(p, n, &a2, &l2, &content, NULL, 0);
  if (r1 == SPY_ENOMEM || r2 == SPY_ENOMEM)
    return;
  if (r1 != r2 || l1.is_ref != l2.is_ref)
    abort();
  if (r1 == 1 && (l1.hash[0] != l2.hash[0] || l1.hash[1] != l2.hash[1] ||
                  l1.size != l2.size || content.len != l2.size))
    abort();
  if (r1 == 0 &&
      (l1.replaced != l2.replaced || !same_action(&l1.action, &l2.action)))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/spy-fuzz-jsonl-XXXXXX");
    if (!mkdtemp(dir))
      abort();
  }
  if (size == 0)
    return 0;
  size_t meta = data[0] < size - 1 ? data[0] : size - 1;
  put("meta.json", data + 1, meta);
  put("logs.json", data + 1 + meta, size - 1 - meta);
  const char *logs = (const char *)data + 1 + meta,
             *end = (const char *)data + size;
  while (logs < end) {
    const char *nl = memchr(logs, '\n', (size_t)(end - logs));
    size_t n = nl ? (size_t)(nl - logs) : (size_t)(end - logs);
    same_line(logs, n);
    logs += n + 1;
  }
  spy_trace_reader *r;
  if (spy_trace_reader_open(dir, NULL, &r) == 0) {
    for (int pass = 0; pass < 2; pass++) {
      spy_trace_action a;
      for (int i = 0; i < 100000 && spy_trace_reader_next(r, &a) == 1; i++)
        if (pass == 0)
          lookups(r, &a.fields, 0);
      spy_trace_reader_rewind(r);
    }
    spy_trace_summary s;
    (void)spy_trace_reader_summary(r, &s);
    (void)spy_trace_reader_builds(r, on_build, NULL);
    if (spy_trace_reader_hook_calls(r, on_call, NULL) == 0 &&
        spy_trace_reader_warning(r) && !*spy_trace_reader_warning(r))
      abort();
  }
  spy_trace_reader_close(r);
  return 0;
}
