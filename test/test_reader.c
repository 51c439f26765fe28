/* test_reader.c — the trace reader over its three backends (JSON-lines,
 * SQLite, PostgreSQL), and the project's one JSON string escaper.
 *
 * Proves: the escaper makes every byte string valid JSON (invalid UTF-8
 * as U+FFFD, counted) and never splits a sequence at a buffer edge;
 * Latin-1 payloads and names give strict-valid JSON-lines whose
 * replacements the summary counts, while the SQL stores give back the
 * exact bytes; actions stream in seq order (meta.json merged into
 * logs.json), across many stored batches, and a rewind repeats them; a
 * payload is found before the iteration reaches it; reading a large
 * session holds a bounded amount of memory, not the session (JSON-lines
 * a line at a time, PostgreSQL through a cursor); a JSON-lines trace cut
 * mid-line is read up to its last complete line with a warning naming the
 * line and its byte offset, while a bad line in the middle is an error
 * naming both; the public JSON form round-trips 64-bit integers and NUL
 * bytes; an event line in the writer's own form is read by the quick scan
 * into the same action the JSON library gives, and lines in any other
 * form get the same answer either way; a trace written before the escaper (raw
 * Latin-1 bytes) still reads, its bytes counted; one session of a SQLite store
 * holding several is read by its rows' rowid ranges, not by scanning the
 * others; a hook-call query (build, plugin, module, start order or the
 * slowest, a limit) gives exactly the calls and the order worked out from
 * the full list, equal durations in start order, from each store and from
 * the replay of a SQLite store's actions alike (its odd calls, which
 * hook_calls rows cannot hold alone, too), and the replay holds the
 * limit's calls, not the session's.
 *
 * The PostgreSQL parts need SPY_TEST_PG (a conninfo; scripts/test.sh sets
 * it, and the reader_pg CTest, test/reader_pg.sh, starts a server of its
 * own and runs every case); without it a case covers the two file stores
 * and ends as SKIP. */
#include <fcntl.h>
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "core/json_escape.h"
#include "spyglass/trace.h"
#include "store/reader.h"
#include "store/store.h"
#include "testlib.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

/* ---- stores ------------------------------------------------------------- */

typedef struct store {
  const char *writer; /* "jsonl", "sqlite", "postgres" */
  char dir[256];      /* the session dir (jsonl) or the dir of trace.db */
  const char *conninfo;
  char conn[512];
  char sid[128];
  size_t batch; /* actions per writer batch; 0 = default */
} store;

static const char *const writers[] = {"jsonl", "sqlite", "postgres"};

/* Prepares s for writer w. 0, or 1 when the store is not available here
 * (PostgreSQL without SPY_TEST_PG: the reader_pg test runs it). */
static int store_init(store *s, const char *w) {
  memset(s, 0, sizeof *s);
  s->writer = w;
  if (strcmp(w, "postgres") == 0) {
    const char *pg = getenv("SPY_TEST_PG");
    if (!pg)
      return 1;
    /* a loaded machine can take more than the script's 2 s to answer */
    snprintf(s->conn, sizeof s->conn, "%s%s", pg,
             strchr(pg, '=') && !strstr(pg, "://") ? " connect_timeout=20"
                                                   : "");
    s->conninfo = s->conn;
  }
  snprintf(s->dir, sizeof s->dir, "/tmp/spy-reader-XXXXXX");
  return mkdtemp(s->dir) ? 0 : -1;
}

static void store_free(store *s) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", s->dir);
}

static spy_trace *session(store *s) {
  spy_trace *t = NULL;
  spy_trace_desc d = {.enabled = 1,
                      .writer = s->writer,
                      .dir = s->dir,
                      .conninfo = s->conninfo,
                      .batch_actions = (uint32_t)s->batch};
  if (spy_trace_create(&t, &d) < 0)
    return NULL;
  snprintf(s->sid, sizeof s->sid, "%s", spy_trace_session_id(t));
  return t;
}

static int open_reader(const store *s, spy_trace_reader **r) {
  int rc = spy_trace_reader_open(s->conninfo ? s->conninfo : s->dir,
                                 s->conninfo ? s->sid : NULL, r);
  if (rc < 0)
    fprintf(stderr, "  reader: %s\n", spy_trace_reader_error(*r));
  return rc;
}

/* Runs fn once per store that is available, naming the store first. */
#define FOR_STORES(fn)                                                         \
  do {                                                                         \
    int absent_ = 0;                                                           \
    for (int w_ = 0; w_ < 3; w_++) {                                           \
      store s_;                                                                \
      int rc_ = store_init(&s_, writers[w_]);                                  \
      CHECK(rc_ >= 0);                                                         \
      if (rc_ == 1) {                                                          \
        absent_ = 1;                                                           \
        continue;                                                              \
      }                                                                        \
      fprintf(stderr, "  store: %s\n", writers[w_]);                           \
      fn(&s_);                                                                 \
      store_free(&s_);                                                         \
      if (spy_test_failed_)                                                    \
        return;                                                                \
    }                                                                          \
    if (absent_)                                                               \
      SKIP("the postgres part did not run (no SPY_TEST_PG)");                  \
  } while (0)

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  rewind(f);
  char *p = malloc((size_t)len + 1);
  if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
    free(p);
    p = NULL;
  }
  fclose(f);
  if (p)
    p[len] = 0;
  *n = (size_t)len;
  return p;
}

/* ---- the generated encoders --------------------------------------------- */

static void (*fill_release)(void *owner); /* texts lent with it when set */
static void no_release(void *owner) { (void)owner; }

/* Fills the struct of kind k at base from its descriptor: strings, texts,
 * numbers and lists of two items, with a null for every optional field
 * when `nulls` (pool: where list items live). */
static void fill_struct(const spy_trace_kind *k, char *base, int nulls,
                        char **pool, int depth) {
  static const char *const strs[] = {"alpha", "b", "", "module/dir/x.c"};
  static const int64_t ints[] = {-7, INT64_MAX, 0};
  for (uint32_t i = 0; i < k->nfields; i++) {
    const spy_trace_field *f = &k->fields[i];
    char *at = base + f->offset;
    int opt = f->type == SPY_TF_OSTR || f->type == SPY_TF_OSRC ||
              f->type == SPY_TF_OINT || f->type == SPY_TF_OBOOL ||
              f->type == SPY_TF_OLIST || f->type == SPY_TF_OSTRS;
    int null = nulls && opt;
    switch (f->type) {
    case SPY_TF_STR:
    case SPY_TF_OSTR: {
      const char *v = null ? NULL : strs[(i + (uint32_t)depth) % 4];
      memcpy(at, &v, sizeof v);
      break;
    }
    case SPY_TF_SRC:
    case SPY_TF_OSRC: {
      spy_trace_text t = {null ? NULL : "int x;\n\0bin", null ? 0 : 11,
                          fill_release, fill_release ? (void *)base : NULL};
      memcpy(at, &t, sizeof t);
      break;
    }
    case SPY_TF_INT:
    case SPY_TF_OINT: {
      int64_t v = null ? SPY_TRACE_NULL_INT : (int64_t)i * 1000 - 3;
      memcpy(at, &v, sizeof v);
      break;
    }
    case SPY_TF_BOOL:
    case SPY_TF_OBOOL: *at = (char)(null ? -1 : (int)(i & 1)); break;
    default: { /* lists */
      spy_trace_list l = {NULL, 0};
      if (!null) {
        l.n = 2;
        if (f->type == SPY_TF_STRS || f->type == SPY_TF_OSTRS)
          l.items = strs;
        else if (f->type == SPY_TF_INTS)
          l.items = ints;
        else {
          char *items = *pool;
          *pool += 2 * ((f->rec->size + 15) & ~(size_t)15);
          memset(items, 0, 2 * f->rec->size);
          for (int j = 0; j < 2; j++)
            fill_struct(f->rec, items + (size_t)j * f->rec->size, j == 1, pool,
                        depth + 1);
          l.items = items;
        }
      }
      memcpy(at, &l.items, sizeof l.items);
      memcpy(at + offsetof(spy_trace_list, n), &l.n, sizeof l.n);
    }
    }
  }
}

/* Strings go into a record through an inline path when shorter than 64
 * bytes (aligned 16-byte loads find the NUL): every length around that
 * limit, at every alignment, and ending on the last byte of a page whose
 * next page is not mapped, comes back exact, as does the size asked for
 * with no room (the sizing pass). */
TEST(short_strings_encode_exactly_at_every_length_and_page_end) {
  long page = sysconf(_SC_PAGESIZE);
  char *map = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(map != MAP_FAILED);
  CHECK(mprotect(map + page, (size_t)page, PROT_NONE) == 0);
  static uint8_t buf[512];
  spy_trace_arena ar = {0};
  int bad = 0;
  for (int at_end = 0; at_end < 2; at_end++)
    for (size_t n = 0; n <= 80; n++)
      for (size_t align = 0; align < 16; align++) {
        char *s = at_end ? map + page - 1 - n : map + 64 + align;
        if (at_end && align)
          break; /* the end fixes the place */
        for (size_t i = 0; i < n; i++)
          s[i] = (char)('a' + (i * 7 + align) % 26);
        s[n] = 0;
        spy_act_hook_load_call_start act = {s, "plugin", 1, s, 0};
        int64_t need = spy_trace_encode(&spy_kind_hook_load_call_start, &act, 1,
                                        2, 3, NULL, 0);
        int64_t len = spy_trace_encode(&spy_kind_hook_load_call_start, &act, 1,
                                       2, 3, buf, sizeof buf);
        spy_trace_action a;
        const spy_trace_val *m = NULL, *c = NULL;
        if (len > 0 && spy_trace_decode(buf, (size_t)len, &ar, &a) == len) {
          m = spy_trace_get(&a, "module_id");
          c = spy_trace_get(&a, "call_id");
        }
        if (need != len || !m || !c || m->n != n || c->n != n ||
            memcmp(m->u.s, s, n) != 0 || memcmp(c->u.s, s, n) != 0) {
          if (bad++ < 5)
            fprintf(stderr, "  length %zu, align %zu, at page end %d\n", n,
                    align, at_end);
        }
      }
  spy_trace_arena_free(&ar);
  munmap(map, (size_t)page * 2);
  CHECK_EQ(bad, 0);
}

/* Every built-in kind's generated encoder writes the bytes the descriptor
 * walk writes, with and without nulls; in the session's own queues (lend)
 * it leaves the name out, which the public decoder refuses and the
 * session's decoder puts back. */
TEST(generated_encoders_write_what_the_descriptor_walk_writes) {
  static _Alignas(16) char act[4096], pool[1 << 16];
  static uint8_t fast[8192], slow[8192];
  spy_trace_arena ar = {0};
  spy__lentv lv = {0};
  for (int id = 1; id <= SPY_TRACE_KIND_COUNT; id++) {
    const spy_trace_kind *k = spy_trace_kinds[id];
    for (int nulls = 0; nulls < 2; nulls++) {
      char *p = pool;
      memset(act, 0, sizeof act);
      CHECK(k->size <= sizeof act);
      fill_struct(k, act, nulls, &p, 0);
      int64_t a = spy_trace_encode(k, act, 9, 77, 3, fast, sizeof fast);
      int64_t b =
          spy__trace_encode_generic(k, act, 9, 77, 3, slow, sizeof slow, NULL);
      CHECK(a > 32 && (size_t)a < sizeof fast);
      if (a != b || memcmp(fast, slow, (size_t)a) != 0)
        fprintf(stderr, "  kind %s, nulls %d: %lld vs %lld bytes\n", k->name,
                nulls, (long long)a, (long long)b);
      CHECK_EQ(a, b);
      CHECK(memcmp(fast, slow, (size_t)a) == 0);
      /* a lending encode: the same record but for the name */
      spy__lend ld = {1, NULL, 0, 0};
      int64_t c =
          spy__trace_encode_lend(k, act, 9, 77, 3, fast, sizeof fast, &ld);
      size_t nl = strlen(k->name);
      CHECK_EQ(c, a - (int64_t)nl);
      /* with the texts lent: references, counted alike by both encoders */
      fill_release = no_release;
      p = pool;
      fill_struct(k, act, nulls, &p, 0);
      fill_release = NULL;
      spy__lend l1 = {1, NULL, 0, 0}, l2 = {1, NULL, 0, 0};
      int64_t c2 =
          spy__trace_encode_lend(k, act, 9, 77, 3, fast, sizeof fast, &l1);
      int64_t b2 =
          spy__trace_encode_generic(k, act, 9, 77, 3, slow, sizeof slow, &l2);
      CHECK_EQ(c2, b2 - (int64_t)nl);
      CHECK(memcmp(fast + 32, slow + 32 + nl, (size_t)c2 - 32) == 0);
      CHECK(l1.bytes == l2.bytes && l1.held == l2.held && l1.owner == l2.owner);
      /* back to the copied form for the checks below */
      p = pool;
      fill_struct(k, act, nulls, &p, 0);
      c = spy__trace_encode_lend(k, act, 9, 77, 3, fast, sizeof fast, &ld);
      spy__trace_encode_generic(k, act, 9, 77, 3, slow, sizeof slow, NULL);
      CHECK(fast[6] == 0 && fast[7] == 0 && fast[4] == (uint8_t)id);
      CHECK(memcmp(fast + 8, slow + 8, 24) == 0);
      CHECK(memcmp(fast + 32, slow + 32 + nl, (size_t)c - 32) == 0);
      spy_trace_action x;
      CHECK_EQ(spy_trace_decode(fast, (size_t)c, &ar, &x), SPY_EBADVALUE);
      CHECK_EQ(spy__trace_decode_lent(fast, (size_t)c, &ar, &x, &lv), (int)c);
      CHECK(x.kind == k && x.name_len == nl &&
            memcmp(x.name, k->name, nl) == 0);
    }
  }
  /* a required string left NULL is refused by both */
  spy_act_hook_load_call_start s = {
      .module_id = NULL, .plugin_name = "p", .call_id = "c"};
  CHECK_EQ(spy_trace_encode(&spy_kind_hook_load_call_start, &s, 1, 1, 0, fast,
                            sizeof fast),
           SPY_EINVAL);
  CHECK_EQ(spy__trace_encode_generic(&spy_kind_hook_load_call_start, &s, 1, 1,
                                     0, slow, sizeof slow, NULL),
           SPY_EINVAL);
  free(lv.v);
  spy_trace_arena_free(&ar);
}

/* ---- the escaper --------------------------------------------------------- */

TEST(escaper_replaces_every_invalid_byte_and_never_splits_a_sequence) {
  static const struct {
    const char *in;
    size_t n;
    const char *out;
    uint64_t bad;
  } cases[] = {
      {"caf\xe9", 4, "caf\\ufffd", 1},                 /* Latin-1 é */
      {"\xc3\xa9", 2, "\xc3\xa9", 0},                  /* UTF-8 é */
      {"\xc3", 1, "\\ufffd", 1},                       /* cut sequence */
      {"\xc0\xaf", 2, "\\ufffd\\ufffd", 2},            /* overlong '/' */
      {"\xed\xa0\x80", 3, "\\ufffd\\ufffd\\ufffd", 3}, /* surrogate */
      {"\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80", 0},  /* 4 bytes */
      {"\xf4\x90\x80\x80", 4, "\\ufffd\\ufffd\\ufffd\\ufffd", 4}, /* > max */
      {"a\"b\\c\n\t\r\x01\x7f", 10, "a\\\"b\\\\c\\n\\t\\r\\u0001\x7f", 0},
      {"\0", 1, "\\u0000", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[128];
    size_t used;
    uint64_t bad = 0;
    size_t w =
        spy__json_escape(out, sizeof out, cases[i].in, cases[i].n, &used, &bad);
    out[w] = 0;
    CHECK_EQ(used, cases[i].n);
    CHECK_STR(out, cases[i].out);
    CHECK_EQ(bad, cases[i].bad);
    CHECK_EQ(spy__utf8_invalid(cases[i].in, cases[i].n), cases[i].bad);
  }
  /* small output buffers: pieces concatenate to the whole, no sequence
   * split, and the whole is valid JSON to a strict parser */
  const char *s = "x\xe2\x82\xac\xe9\xf0\x9f\x98\x80\"\x01\xc3\xa9z";
  size_t n = strlen(s);
  char whole[256];
  size_t wn = 0, used;
  uint64_t bad = 0;
  wn = spy__json_escape(whole + 1, sizeof whole - 2, s, n, &used, &bad);
  for (size_t cap = SPY__JSON_ESC_MAX; cap < 12; cap++) {
    char got[256];
    size_t gn = 0, off = 0;
    uint64_t bad2 = 0;
    while (off < n) {
      size_t w =
          spy__json_escape(got + gn, cap, s + off, n - off, &used, &bad2);
      CHECK(used > 0);
      gn += w;
      off += used;
    }
    CHECK_EQ(gn, wn);
    CHECK(memcmp(got, whole + 1, gn) == 0);
    CHECK_EQ(bad2, bad);
  }
  whole[0] = '"';
  whole[wn + 1] = '"';
  json_error_t e;
  json_t *v = json_loadb(whole, wn + 2, JSON_DECODE_ANY, &e);
  CHECK(json_is_string(v));
  json_decref(v);
  CHECK_EQ(bad, 1);
}

/* ---- Latin-1 bytes ------------------------------------------------------- */

static const char latin1[] = "/* caf\xe9 */\nint x; /* na\xefve */\n";

/* Every line of a JSON-lines file passes a strict parser (jansson checks
 * UTF-8); returns the lines, or -1. */
static int strict_lines(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t n;
  char *text = slurp(path, &n);
  if (!text)
    return -1;
  int lines = 0;
  for (char *p = text; p < text + n;) {
    char *nl = memchr(p, '\n', (size_t)(text + n - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(text + n - p);
    json_error_t e;
    json_t *v = json_loadb(p, len, 0, &e);
    if (!v || spy__utf8_invalid(p, len) != 0) {
      fprintf(stderr, "  %s line %d: %s\n", name, lines + 1, e.text);
      free(text);
      return -1;
    }
    json_decref(v);
    lines++;
    p += len + 1;
  }
  free(text);
  return lines;
}

static void latin1_case(store *s) {
  spy_trace *t = session(s);
  CHECK(t);
  spy_rec_input_item in[] = {{"main", "m\xe9.c", 0}};
  spy_emit_session_meta(t, &(spy_act_session_meta){.inputs = {in, 1},
                                                   .cwd = "/w\xff",
                                                   .platform = "node",
                                                   .format = "esm"});
  spy_trace_build_begin(t);
  spy_emit_hook_load_call_start(
      t, &(spy_act_hook_load_call_start){"m\xe9.c", "p", 0, "l1", 0});
  spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){
             "m\xe9.c", {latin1, sizeof latin1 - 1}, "p", 0, "l1", 0});
  spy_trace_build_end(t);
  CHECK_EQ(spy_trace_destroy(t), 0);
  int jsonl = strcmp(s->writer, "jsonl") == 0;
  if (jsonl) {
    CHECK(strict_lines(s->dir, "meta.json") == 1);
    CHECK(strict_lines(s->dir, "logs.json") >= 5);
  }
  spy_trace_reader *r;
  CHECK_OK(open_reader(s, &r));
  spy_trace_summary sum;
  CHECK_OK(spy_trace_reader_summary(r, &sum));
  /* in JSON: the input name and cwd, the module id twice, the payload's
   * two bytes (once: it is stored once) */
  CHECK_EQ(sum.replaced, jsonl ? 6 : 0);
  CHECK_EQ(sum.sources, 1);
  spy_trace_action a;
  int found = 0;
  spy_trace_reader_rewind(r);
  while (spy_trace_reader_next(r, &a) == 1) {
    if (a.kind != &spy_kind_hook_load_call_end)
      continue;
    const spy_trace_val *m = spy_trace_get(&a, "module_id");
    const char *want = jsonl ? "m\xef\xbf\xbd.c" : "m\xe9.c";
    CHECK(m && m->n == strlen(want) && memcmp(m->u.s, want, m->n) == 0);
    const spy_trace_val *c = spy_trace_get(&a, "content");
    CHECK(c && c->has_hash);
    const char *p;
    size_t n;
    CHECK_OK(spy_trace_reader_source(r, c->hash, &p, &n));
    if (jsonl) { /* é and ï, each one U+FFFD */
      CHECK_EQ(n, sizeof latin1 - 1 + 4);
      CHECK(memcmp(p, "/* caf\xef\xbf\xbd */", 11) == 0);
    } else { /* the exact bytes */
      CHECK_EQ(n, sizeof latin1 - 1);
      CHECK(memcmp(p, latin1, n) == 0);
    }
    found++;
  }
  CHECK_EQ(found, 1);
  spy_trace_reader_close(r);
}

TEST(latin1_is_valid_json_and_counted_while_sql_keeps_the_bytes) {
  FOR_STORES(latin1_case);
}

/* A trace written before every string went through the escaper: raw
 * Latin-1 in a line. It reads, its bytes shown as U+FFFD and counted. */
TEST(old_trace_with_raw_latin1_bytes_still_reads) {
  store s;
  CHECK(store_init(&s, "jsonl") == 0);
  char path[512];
  snprintf(path, sizeof path, "%s/logs.json", s.dir);
  FILE *f = fopen(path, "w");
  CHECK(f);
  fprintf(f, "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1,"
             "\"ts_us\":1000,\"action\":\"HookLoadCallStart\","
             "\"module_id\":\"m\xe9.c\",\"plugin_name\":\"p\","
             "\"plugin_id\":0,\"call_id\":\"c\"}\n");
  fclose(f);
  spy_trace_reader *r;
  CHECK_OK(open_reader(&s, &r));
  spy_trace_action a;
  CHECK_EQ(spy_trace_reader_next(r, &a), 1);
  const spy_trace_val *m = spy_trace_get(&a, "module_id");
  CHECK(m && m->n == 6 && memcmp(m->u.s, "m\xef\xbf\xbd.c", 6) == 0);
  spy_trace_summary sum;
  CHECK_OK(spy_trace_reader_summary(r, &sum));
  CHECK_EQ(sum.actions, 1);
  CHECK_EQ(sum.replaced, 1);
  CHECK_EQ(sum.lost, -1); /* no spyglass.json: the writer did not finish */
  spy_trace_reader_close(r);
  store_free(&s);
}

/* Lines as any JSON writer may lay them out: keys in another order,
 * spaces, seq far from the start, a StringRef whose content comes first.
 * Fields are found by parsing, not at byte offsets. */
TEST(jsonl_lines_read_in_any_key_order_and_spacing) {
  store s;
  CHECK(store_init(&s, "jsonl") == 0);
  uint64_t h[2];
  spy_trace_hash("abc", 3, h);
  char id[33];
  spy_trace_hash_hex(h, id);
  char long_id[401];
  memset(long_id, 'x', 400);
  long_id[400] = 0;
  char path[512];
  snprintf(path, sizeof path, "%s/logs.json", s.dir);
  FILE *f = fopen(path, "w");
  CHECK(f);
  fprintf(f,
          "{ \"content\" : \"abc\", \"id\" : \"%s\", "
          "\"action\" : \"StringRef\" }\n",
          id);
  fprintf(f, "\n  \n");
  fprintf(f,
          "{\"call_id\":\"c\",\"plugin_id\":0,\"plugin_name\":\"p\","
          "\"module_id\":\"%s\",\"seq\":2,\"action\":"
          "\"HookLoadCallStart\",\"ts_us\":20}\n",
          long_id);
  fprintf(f,
          "{\"module_id\": \"%s\", \"plugin_name\": \"p\", "
          "\"plugin_id\": 0, \"call_id\": \"c\", \"content\": "
          "\"$ref:%s\", \"action\": \"HookLoadCallEnd\", "
          "\"seq\": 3, \"ts_us\": 30}\n",
          long_id, id);
  fclose(f);
  snprintf(path, sizeof path, "%s/meta.json", s.dir);
  f = fopen(path, "w");
  CHECK(f);
  fprintf(f, "{\"seq\":1, \"action\":\"SessionMeta\", \"cwd\":\"/w\", "
             "\"platform\":\"node\", \"format\":\"esm\", "
             "\"inputs\":[], \"plugins\":[]}\n");
  fclose(f);
  spy_trace_reader *r;
  CHECK_OK(open_reader(&s, &r));
  spy_trace_action a;
  CHECK_EQ(spy_trace_reader_next(r, &a), 1);
  CHECK(a.kind == &spy_kind_session_meta && a.seq == 1);
  CHECK_EQ(spy_trace_reader_next(r, &a), 1);
  CHECK(a.kind == &spy_kind_hook_load_call_start && a.seq == 2);
  CHECK_EQ(spy_trace_reader_next(r, &a), 1);
  CHECK(a.kind == &spy_kind_hook_load_call_end && a.seq == 3);
  CHECK_EQ(a.ts_us, 30);
  CHECK_EQ(spy_trace_get(&a, "module_id")->n, 400);
  const spy_trace_val *c = spy_trace_get(&a, "content");
  CHECK(c->type == SPY_TV_SRCREF && c->hash[0] == h[0] && c->hash[1] == h[1]);
  const char *p;
  size_t n;
  CHECK_OK(spy_trace_reader_source(r, h, &p, &n));
  CHECK(n == 3 && memcmp(p, "abc", 3) == 0);
  CHECK_EQ(spy_trace_reader_next(r, &a), 0);
  spy_trace_summary sum;
  CHECK_OK(spy_trace_reader_summary(r, &sum));
  CHECK_EQ(sum.actions, 3);
  CHECK_EQ(sum.hook_calls, 1);
  CHECK_EQ(sum.sources, 1);
  CHECK_EQ(sum.source_bytes, 3);
  CHECK(spy_trace_reader_warning(r) == NULL);
  spy_trace_reader_close(r);
  /* a seq going backwards in a file: read in file order, with a warning */
  snprintf(path, sizeof path, "%s/logs.json", s.dir);
  f = fopen(path, "a");
  CHECK(f);
  fprintf(f, "{\"action\":\"BuildEnd\",\"seq\":2,\"build_id\":\"1\"}\n");
  fclose(f);
  CHECK_OK(open_reader(&s, &r));
  CHECK_OK(spy_trace_reader_summary(r, &sum));
  CHECK_EQ(sum.actions, 4);
  CHECK(spy_trace_reader_warning(r) &&
        strstr(spy_trace_reader_warning(r), "line 6: seq 2 after 3"));
  spy_trace_reader_close(r);
  store_free(&s);
}

/* ---- streaming ----------------------------------------------------------- */

#define NCALLS 1500

static void payload(int i, char *buf, size_t cap) {
  snprintf(buf, cap, "/* module %d */\nint f%d(void) { return %d; }\n", i, i,
           i * 7);
}

/* SessionMeta, a build, NCALLS load calls with a payload each. */
static int write_calls(store *s) {
  spy_trace *t = session(s);
  if (!t)
    return -1;
  spy_emit_session_meta(t, &(spy_act_session_meta){.cwd = "/w",
                                                   .platform = "node",
                                                   .format = "esm"});
  spy_trace_build_begin(t);
  for (int i = 0; i < NCALLS; i++) {
    char id[32], src[128];
    snprintf(id, sizeof id, "m%d.c", i);
    payload(i, src, sizeof src);
    spy_emit_hook_load_call_start(
        t, &(spy_act_hook_load_call_start){id, "p", 0, id, 0});
    spy_emit_hook_load_call_end(t, &(spy_act_hook_load_call_end){
                                       id, {src, strlen(src)}, "p", 0, id, 0});
  }
  spy_trace_build_end(t);
  return (int)spy_trace_destroy(t);
}

static int count_calls(void *arg, const spy_trace_hook_call *h) {
  (void)h;
  ++*(int *)arg;
  return 0;
}

static void stream_case(store *s) {
  s->batch = 100; /* many stored batches, several cursor fetches */
  CHECK_EQ(write_calls(s), 0);
  spy_trace_reader *r;
  CHECK_OK(open_reader(s, &r));
  for (int pass = 0; pass < 2; pass++) {
    spy_trace_action a;
    uint64_t last = 0, n = 0;
    int rc;
    while ((rc = spy_trace_reader_next(r, &a)) == 1) {
      if (n == 0) /* meta.json's line comes first in seq order */
        CHECK(a.kind == &spy_kind_session_meta);
      CHECK(a.seq > last);
      last = a.seq;
      n++;
    }
    CHECK_EQ(rc, 0);
    CHECK_EQ(n, 2 * NCALLS + 3);
    CHECK_OK(spy_trace_reader_rewind(r));
  }
  int calls = 0;
  CHECK_OK(spy_trace_reader_hook_calls(r, count_calls, &calls));
  CHECK_EQ(calls, NCALLS);
  spy_trace_summary sum;
  CHECK_OK(spy_trace_reader_summary(r, &sum));
  CHECK_EQ(sum.actions, 2 * NCALLS + 3);
  CHECK_EQ(sum.hook_calls, NCALLS);
  CHECK_EQ(sum.sources, NCALLS);
  CHECK_EQ(sum.lost, 0);
  CHECK(sum.stored_bytes > 0);
  CHECK(spy_trace_reader_warning(r) == NULL);
  spy_trace_reader_close(r);
}

TEST(actions_stream_in_seq_order_and_rewind_repeats_them) {
  FOR_STORES(stream_case);
}

static void lookup_case(store *s) {
  CHECK_EQ(write_calls(s), 0);
  spy_trace_reader *r;
  CHECK_OK(open_reader(s, &r));
  /* the last payload first, before any iteration; then an early one */
  int order[] = {NCALLS - 1, 3, NCALLS / 2};
  for (int k = 0; k < 3; k++) {
    char src[128];
    payload(order[k], src, sizeof src);
    uint64_t h[2];
    spy_trace_hash(src, strlen(src), h);
    const char *p;
    size_t n;
    CHECK_OK(spy_trace_reader_source(r, h, &p, &n));
    CHECK(n == strlen(src) && memcmp(p, src, n) == 0);
    if (k == 0) { /* part of the way in, then ask again */
      spy_trace_action a;
      for (int i = 0; i < 10; i++)
        CHECK_EQ(spy_trace_reader_next(r, &a), 1);
    }
  }
  uint64_t none[2] = {1, 2};
  const char *p;
  size_t n;
  CHECK_EQ(spy_trace_reader_source(r, none, &p, &n), SPY_ENOENT);
  spy_trace_reader_close(r);
}

TEST(payload_is_found_before_the_iteration_reaches_it) {
  FOR_STORES(lookup_case);
}

#ifndef SANITIZED
/* Heap in use (glibc): arenas and mmapped blocks. */
static size_t heap_now(void) {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

/* Bytes of the session's stored actions: logs.json, or the SQL store's
 * rows of the session (the case's one kind: its table, plus whatever
 * action_batches keeps). */
static size_t action_bytes(const store *s) {
  if (!s->conninfo) {
    char path[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/logs.json", s->dir);
    return stat(path, &sb) == 0 ? (size_t)sb.st_size : 0;
  }
  PGconn *c = PQconnectdb(s->conninfo);
  const char *params[1] = {s->sid};
  PGresult *res = PQexecParams(c,
                               "SELECT (SELECT coalesce(sum(length(data)),0) "
                               "FROM action_batches WHERE session_id=$1) + "
                               "(SELECT coalesce(sum(pg_column_size(t.*)),0) "
                               "FROM hook_resolve_id_call_start t JOIN "
                               "sessions x ON x.session=t.session WHERE "
                               "x.session_id=$1)",
                               1, NULL, params, NULL, NULL, 0);
  size_t n = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1
                 ? strtoull(PQgetvalue(res, 0, 0), NULL, 10)
                 : 0;
  PQclear(res);
  PQfinish(c);
  return n;
}

static void memory_case(store *s) {
  if (strcmp(s->writer, "sqlite") == 0)
    return; /* steps rows; its page cache is bounded by cache_size */
  s->batch = 512;
  spy_trace *t = session(s);
  CHECK(t);
  /* many small actions in many stored batches (compressed well: more of
   * them for postgres, so the session dwarfs one batch) */
  char id[48];
  int nact = s->conninfo ? 160000 : 40000;
  for (int i = 0; i < nact; i++) {
    snprintf(id, sizeof id, "module/number/%d/of/a/long/path.c", i * 7919);
    spy_emit_hook_resolve_id_call_start(
        t, &(spy_act_hook_resolve_id_call_start){.module_request = id,
                                                 .import_kind = "import",
                                                 .plugin_name = "p",
                                                 .trigger = "automatic",
                                                 .call_id = id});
  }
  CHECK_EQ(spy_trace_destroy(t), 0);
  size_t total = action_bytes(s);
  fprintf(stderr, "  stored actions: %zu bytes\n", total);
  CHECK(total > (256u << 10));
  spy_trace_reader *r;
  CHECK_OK(open_reader(s, &r));
  size_t base = heap_now(), peak = 0;
  spy_trace_action a;
  uint64_t n = 0;
  while (spy_trace_reader_next(r, &a) == 1) {
    size_t h = heap_now();
    if (h > peak)
      peak = h;
    n++;
  }
  CHECK_EQ(n, nact);
  size_t grew = peak > base ? peak - base : 0;
  fprintf(stderr, "  heap grew by %zu bytes while reading\n", grew);
  CHECK(grew < total / 2);
  spy_trace_reader_close(r);
}

#endif

TEST(reading_a_large_session_holds_a_bounded_amount_of_memory) {
#ifdef SANITIZED
  fprintf(stderr, "  sanitizer build: its allocator hides the heap size\n");
#else
  FOR_STORES(memory_case);
#endif
}

/* ---- hook call queries --------------------------------------------------
 */

/* Two builds of calls over three plugins and seven modules, every hook
 * type; most calls take no time (their durations tie), some sleep, some
 * overlap (their End order is not their Start order), the call ids of
 * build 1 come again in build 2, one call never ends. */
#define QCALLS 150
static const char *const qplugins[] = {"pa", "pb", "pc"};

static void q_start(spy_trace *t, int i, const char *pl, const char *mod,
                    const char *id) {
  switch (i % 4) {
  case 0:
    spy_emit_hook_load_call_start(
        t, &(spy_act_hook_load_call_start){mod, pl, 0, id, 0});
    break;
  case 1:
    spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){mod, {"x", 1}, pl, 0, id, 0});
    break;
  case 2:
    spy_emit_hook_resolve_id_call_start(
        t, &(spy_act_hook_resolve_id_call_start){.module_request = mod,
                                                 .import_kind = "import",
                                                 .plugin_name = pl,
                                                 .trigger = "automatic",
                                                 .call_id = id});
    break;
  default:
    spy_emit_hook_render_chunk_start(
        t, &(spy_act_hook_render_chunk_start){pl, 0, id, {"y", 1}});
  }
}

static void q_end(spy_trace *t, int i, const char *pl, const char *mod,
                  const char *id) {
  switch (i % 4) {
  case 0:
    spy_emit_hook_load_call_end(
        t, &(spy_act_hook_load_call_end){mod, {NULL, 0}, pl, 0, id, 0});
    break;
  case 1:
    spy_emit_hook_transform_call_end(
        t, &(spy_act_hook_transform_call_end){mod, {NULL, 0}, pl, 0, id, 0});
    break;
  case 2:
    spy_emit_hook_resolve_id_call_end(
        t, &(spy_act_hook_resolve_id_call_end){.resolved_id = mod,
                                               .is_external = -1,
                                               .plugin_name = pl,
                                               .trigger = "automatic",
                                               .call_id = id});
    break;
  default:
    spy_emit_hook_render_chunk_end(
        t, &(spy_act_hook_render_chunk_end){pl, 0, id, {NULL, 0}});
  }
}

static int write_query_calls(store *s) {
  spy_trace *t = session(s);
  if (!t)
    return -1;
  for (int b = 0; b < 2; b++) {
    spy_trace_build_begin(t);
    for (int i = 0; i < QCALLS; i += 2) {
      char id[2][16], mod[2][16];
      for (int k = 0; k < 2; k++) {
        snprintf(id[k], sizeof id[k], "c%d", i + k);
        snprintf(mod[k], sizeof mod[k], "m%d.c", (i + k) % 7);
      }
      const char *pl[2] = {qplugins[i % 3], qplugins[(i + 1) % 3]};
      q_start(t, i, pl[0], mod[0], id[0]);
      if (i % 6 == 0) { /* i+1 runs inside i */
        q_start(t, i + 1, pl[1], mod[1], id[1]);
        if (i % 12 == 0)
          usleep(100 + (unsigned)(i % 5) * 40);
        q_end(t, i + 1, pl[1], mod[1], id[1]);
        q_end(t, i, pl[0], mod[0], id[0]);
        continue;
      }
      if (i % 10 == 4)
        usleep(60 + (unsigned)(i % 3) * 50);
      q_end(t, i, pl[0], mod[0], id[0]);
      q_start(t, i + 1, pl[1], mod[1], id[1]);
      q_end(t, i + 1, pl[1], mod[1], id[1]);
    }
    if (b == 1)
      q_start(t, 0, "pa", "open.c", "never");
    spy_trace_build_end(t);
  }
  return (int)spy_trace_destroy(t);
}

/* A call as the test keeps it; sseq: its Start's seq, found by the test
 * itself from the action stream. */
typedef struct qc {
  uint32_t build;
  char hook[16], plugin[8], module[16], call_id[16];
  uint64_t started, ended, sseq;
} qc;

typedef struct qcs {
  qc v[2 * QCALLS + 8];
  size_t n;
  int over; /* more calls than v holds */
} qcs;

static int q_keep(void *arg, const spy_trace_hook_call *h) {
  qcs *l = arg;
  if (l->n == sizeof l->v / sizeof l->v[0]) {
    l->over = 1;
    return 1;
  }
  qc *c = &l->v[l->n++];
  memset(c, 0, sizeof *c);
  c->build = h->build;
  snprintf(c->hook, sizeof c->hook, "%s", h->hook);
  snprintf(c->plugin, sizeof c->plugin, "%s", h->plugin);
  snprintf(c->module, sizeof c->module, "%s", h->module);
  snprintf(c->call_id, sizeof c->call_id, "%s", h->call_id);
  c->started = h->started_us;
  c->ended = h->ended_us;
  return 0;
}

static uint64_t qdur(const qc *c) {
  return c->ended > c->started ? c->ended - c->started : 0;
}

static int q_by_start(const void *x, const void *y) {
  const qc *a = x, *b = y;
  if (a->started != b->started)
    return a->started < b->started ? -1 : 1;
  return a->sseq < b->sseq ? -1 : a->sseq > b->sseq;
}

static int q_by_slowest(const void *x, const void *y) {
  uint64_t a = qdur(x), b = qdur(y);
  if (a != b)
    return a > b ? -1 : 1;
  return q_by_start(x, y);
}

/* What q must answer, worked out from every call in end order (all, each
 * with its Start's seq): the ones that match, sorted, the first limit. */
static void q_expect(const qcs *all, const spy_trace_call_query *q, qcs *out) {
  out->n = 0;
  for (size_t i = 0; i < all->n; i++) {
    const qc *c = &all->v[i];
    if ((q->build && c->build != q->build) ||
        (q->plugin && strcmp(q->plugin, c->plugin) != 0) ||
        (q->module && strcmp(q->module, c->module) != 0))
      continue;
    out->v[out->n++] = *c;
  }
  if (q->order != SPY_TRACE_CALLS_ENDED)
    qsort(out->v, out->n, sizeof out->v[0],
          q->order == SPY_TRACE_CALLS_SLOWEST ? q_by_slowest : q_by_start);
  if (q->limit && out->n > q->limit)
    out->n = (size_t)q->limit;
}

static int q_same(const qcs *got, const qcs *want) {
  if (got->over || got->n != want->n)
    return 0;
  for (size_t i = 0; i < got->n; i++) {
    const qc *a = &got->v[i], *b = &want->v[i];
    if (a->build != b->build || strcmp(a->call_id, b->call_id) ||
        strcmp(a->hook, b->hook) || strcmp(a->plugin, b->plugin) ||
        strcmp(a->module, b->module) || a->started != b->started ||
        a->ended != b->ended)
      return 0;
  }
  return 1;
}

static void q_print(const char *what, const qcs *l) {
  fprintf(stderr, "    %s (%zu):", what, l->n);
  for (size_t i = 0; i < l->n && i < 12; i++)
    fprintf(stderr, " %u/%s/%llu", l->v[i].build, l->v[i].call_id,
            (unsigned long long)qdur(&l->v[i]));
  fprintf(stderr, "\n");
}

static qcs q_all, q_want, q_got; /* large: not on the stack */

/* Every query over the store, checked against what the test works out
 * itself; `how` names the path (the store's own or the replay). */
static void query_matrix(spy_trace_reader *r, const char *how) {
  static const uint32_t builds[] = {0, 1, 2, 7};
  static const char *const plugins[] = {NULL, "pa", "pc", "nosuch"};
  static const char *const modules[] = {NULL, "m3.c", ""};
  static const uint64_t limits[] = {0, 1, 3, 10, 1000};
  int bad = 0;
  for (int o = 0; o < 3; o++)
    for (size_t b = 0; b < 4; b++)
      for (size_t p = 0; p < 4; p++)
        for (size_t m = 0; m < 3; m++)
          for (size_t l = 0; l < 5; l++) {
            spy_trace_call_query q = {builds[b], plugins[p], modules[m],
                                      (spy_trace_call_order)o, limits[l]};
            q_expect(&q_all, &q, &q_want);
            q_got.n = 0;
            q_got.over = 0;
            int rc = spy_trace_reader_hook_calls_query(r, &q, q_keep, &q_got);
            if (rc == 0 && q_same(&q_got, &q_want))
              continue;
            if (bad++ < 3) {
              fprintf(stderr,
                      "  %s: order %d build %u plugin %s module %s limit "
                      "%llu: rc %d\n",
                      how, o, q.build, q.plugin ? q.plugin : "(any)",
                      q.module ? q.module : "(any)",
                      (unsigned long long)q.limit, rc);
              q_print("got ", &q_got);
              q_print("want", &q_want);
            }
          }
  CHECK_EQ(bad, 0);
}

static void query_case(store *s) {
  CHECK_EQ(write_query_calls(s), 0);
  spy_trace_reader *r;
  CHECK_OK(open_reader(s, &r));
  /* every call in end order, then each one's Start seq from the actions */
  q_all.n = 0;
  q_all.over = 0;
  CHECK_OK(spy_trace_reader_hook_calls(r, q_keep, &q_all));
  CHECK_EQ(q_all.n, 2 * QCALLS);
  spy_trace_action a;
  int rc;
  CHECK_OK(spy_trace_reader_rewind(r));
  while ((rc = spy_trace_reader_next(r, &a)) == 1) {
    if (!a.kind || a.kind->role != SPY_ROLE_HOOK_START)
      continue;
    const spy_trace_val *cid = spy_trace_get(&a, "call_id");
    for (size_t i = 0; i < q_all.n; i++) {
      qc *c = &q_all.v[i];
      if (c->build == a.build && strlen(c->call_id) == cid->n &&
          memcmp(c->call_id, cid->u.s, cid->n) == 0)
        c->sseq = a.seq;
    }
  }
  CHECK_EQ(rc, 0);
  size_t ties = 0;
  for (size_t i = 0; i < q_all.n; i++) {
    CHECK(q_all.v[i].sseq != 0);
    for (size_t k = i + 1; k < q_all.n && k < i + 4; k++)
      ties += qdur(&q_all.v[i]) == qdur(&q_all.v[k]);
  }
  CHECK(ties > 0); /* the order of equal durations is tested */
  query_matrix(r, s->writer);
  /* the same answers from the replay of the store's actions */
  const spy__reader_ops *own = r->ops;
  spy__reader_ops replay = *own;
  if (own->calls) {
    replay.calls = NULL;
    r->ops = &replay;
    query_matrix(r, "replay");
    r->ops = own;
  }
  /* an order that does not exist */
  spy_trace_call_query q = {.order = (spy_trace_call_order)7};
  CHECK_EQ(spy_trace_reader_hook_calls_query(r, &q, q_keep, &q_got),
           SPY_EINVAL);
  spy_trace_reader_close(r);
}

TEST(hook_call_queries_filter_order_and_limit_alike_in_every_store) {
  FOR_STORES(query_case);
}

#ifndef SANITIZED
static size_t q_peak;

static int q_heap(void *arg, const spy_trace_hook_call *h) {
  (void)h;
  size_t now = heap_now();
  if (now > q_peak)
    q_peak = now;
  ++*(int *)arg;
  return 0;
}

/* 20,000 calls; the 5 slowest by replay (SQLite's own query made to step
 * aside): the heap holds the 5 and the calls in flight, not the 20,000. */
static void query_memory_case(store *s) {
  spy_trace *t = session(s);
  CHECK(t);
  spy_trace_build_begin(t);
  char id[64];
  int ncalls = 20000;
  for (int i = 0; i < ncalls; i++) {
    snprintf(id, sizeof id, "call/number/%d/of/a/long/build", i * 7919);
    spy_emit_hook_load_call_start(
        t, &(spy_act_hook_load_call_start){id, "p", 0, id, 0});
    spy_emit_hook_load_call_end(
        t, &(spy_act_hook_load_call_end){id, {NULL, 0}, "p", 0, id, 0});
  }
  spy_trace_build_end(t);
  CHECK_EQ(spy_trace_destroy(t), 0);
  spy_trace_reader *r;
  CHECK_OK(open_reader(s, &r));
  spy__reader_ops replay = *r->ops;
  replay.calls = NULL;
  const spy__reader_ops *own = r->ops;
  r->ops = &replay;
  spy_trace_call_query q = {.order = SPY_TRACE_CALLS_SLOWEST, .limit = 5};
  int n = 0;
  /* a first pass warms the reader's buffers, the second is measured */
  CHECK_OK(spy_trace_reader_hook_calls_query(r, &q, q_heap, &n));
  size_t base = heap_now();
  q_peak = 0;
  n = 0;
  CHECK_OK(spy_trace_reader_hook_calls_query(r, &q, q_heap, &n));
  CHECK_EQ(n, 5);
  size_t grew = q_peak > base ? q_peak - base : 0;
  fprintf(stderr, "  heap grew by %zu bytes holding the 5 slowest\n", grew);
  /* every call held would be > 20,000 * (a call + its strings) */
  CHECK(grew < 64u << 10);
  /* and the limit ignored would hold them all: the full list grows it */
  q.limit = 0;
  base = heap_now();
  q_peak = 0;
  n = 0;
  CHECK_OK(spy_trace_reader_hook_calls_query(r, &q, q_heap, &n));
  CHECK_EQ(n, ncalls);
  fprintf(stderr, "  and by %zu bytes holding all %d\n",
          q_peak > base ? q_peak - base : 0, ncalls);
  CHECK(q_peak > base + ((size_t)ncalls * 64));
  r->ops = own;
  spy_trace_reader_close(r);
}
#endif

TEST(hook_call_query_by_replay_holds_its_limit_not_the_session) {
#ifdef SANITIZED
  fprintf(stderr, "  sanitizer build: its allocator hides the heap size\n");
#else
  FOR_STORES(query_memory_case);
#endif
}

/* ---- a cut last line ----------------------------------------------------- */

/* Offset and number of the last line of a file (which ends in '\n'). */
static void last_line(const char *path, long *off, int *no, long *size) {
  size_t n;
  char *text = slurp(path, &n);
  *off = 0;
  *no = 0;
  for (size_t i = 0; i < n; i++)
    if (text[i] == '\n') {
      ++*no;
      if (i + 1 < n)
        *off = (long)i + 1;
    }
  *size = (long)n;
  free(text);
}

TEST(cut_last_line_is_read_up_to_the_line_before_with_a_warning) {
  store s;
  CHECK(store_init(&s, "jsonl") == 0);
  CHECK_EQ(write_calls(&s), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/logs.json", s.dir);
  long off, size;
  int no;
  last_line(path, &off, &no, &size);
  CHECK(off > 0 && no > 2);
  /* the newline only: the line is complete, all of it reads, no warning */
  CHECK(truncate(path, size - 1) == 0);
  spy_trace_reader *r;
  CHECK_OK(open_reader(&s, &r));
  spy_trace_summary sum;
  CHECK_OK(spy_trace_reader_summary(r, &sum));
  CHECK_EQ(sum.actions, 2 * NCALLS + 3);
  CHECK(spy_trace_reader_warning(r) == NULL);
  spy_trace_reader_close(r);
  /* mid-line (BuildEnd): one action fewer, a warning naming the line */
  CHECK(truncate(path, off + (size - off) / 2) == 0);
  CHECK_OK(open_reader(&s, &r));
  CHECK_OK(spy_trace_reader_summary(r, &sum));
  CHECK_EQ(sum.actions, 2 * NCALLS + 2);
  CHECK_EQ(sum.hook_calls, NCALLS);
  const char *w = spy_trace_reader_warning(r);
  CHECK(w);
  fprintf(stderr, "  warning: %s\n", w);
  char want[96];
  snprintf(want, sizeof want, "line (%d, at byte %ld)", no, off);
  CHECK(strstr(w, want) != NULL);
  CHECK(strstr(w, "logs.json") != NULL);
  spy_trace_reader_close(r);
  store_free(&s);
}

TEST(bad_line_in_the_middle_is_an_error_naming_line_and_offset) {
  store s;
  CHECK(store_init(&s, "jsonl") == 0);
  CHECK_EQ(write_calls(&s), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/logs.json", s.dir);
  size_t n;
  char *text = slurp(path, &n);
  CHECK(text);
  /* break line 10 */
  long off = 0;
  int no = 1;
  for (size_t i = 0; i < n && no < 10; i++)
    if (text[i] == '\n') {
      no++;
      off = (long)i + 1;
    }
  free(text);
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0);
  CHECK(pwrite(fd, "#", 1, off) == 1);
  close(fd);
  spy_trace_reader *r;
  CHECK_OK(open_reader(&s, &r));
  spy_trace_action a;
  int rc;
  while ((rc = spy_trace_reader_next(r, &a)) == 1)
    ;
  CHECK_EQ(rc, SPY_EBADVALUE);
  const char *e = spy_trace_reader_error(r);
  fprintf(stderr, "  error: %s\n", e);
  char want[64];
  snprintf(want, sizeof want, "line 10 at byte %ld", off);
  CHECK(strstr(e, want) != NULL);
  spy_trace_reader_close(r);
  /* the same when a lookup scans ahead to it, after a few lines read */
  CHECK_OK(open_reader(&s, &r));
  for (int i = 0; i < 3; i++)
    CHECK_EQ(spy_trace_reader_next(r, &a), 1);
  char src[128];
  payload(NCALLS - 1, src, sizeof src);
  uint64_t h[2];
  spy_trace_hash(src, strlen(src), h);
  const char *p;
  size_t pn;
  CHECK_EQ(spy_trace_reader_source(r, h, &p, &pn), SPY_EBADVALUE);
  CHECK(strstr(spy_trace_reader_error(r), want) != NULL);
  spy_trace_reader_close(r);
  store_free(&s);
}

/* ---- the public JSON form ------------------------------------------------ */

TEST(json_form_round_trips_64_bit_integers_and_nul_bytes) {
  static const char src[] = "a\0b\xe2\x82\xac";
  spy_act_hook_load_call_end act = {
      "m.c", {src, sizeof src - 1}, "p", INT64_MAX, "c1", 0};
  uint8_t rec[512];
  int64_t len = spy_trace_encode(&spy_kind_hook_load_call_end, &act, 42,
                                 1700000000123456ull, 3, rec, sizeof rec);
  CHECK(len > 0 && len <= (int64_t)sizeof rec);
  spy_trace_arena arena = {0};
  spy_trace_action a, b;
  CHECK(spy_trace_decode(rec, (size_t)len, &arena, &a) > 0);
  int64_t need = spy_trace_json_format(&a, "sess", NULL, 0);
  CHECK(need > 0);
  char *line = malloc((size_t)need);
  CHECK(line);
  CHECK_EQ(spy_trace_json_format(&a, "sess", line, (size_t)need), need);
  CHECK_EQ(spy_trace_json_parse(line, (size_t)need, &arena, &b), 0);
  free(line);
  CHECK(b.kind == &spy_kind_hook_load_call_end);
  CHECK_EQ(b.seq, 42);
  CHECK_EQ(b.ts_us, 1700000000123456ull);
  CHECK_EQ(b.build, 3);
  CHECK_EQ(spy_trace_get(&b, "plugin_id")->u.i, INT64_MAX);
  const spy_trace_val *c = spy_trace_get(&b, "content");
  CHECK(c->type == SPY_TV_SRC && c->n == sizeof src - 1);
  CHECK(memcmp(c->u.s, src, c->n) == 0);
  /* a StringRef line is not an action; garbage and a cut line are errors */
  const char *ref = "{\"action\":\"StringRef\",\"id\":"
                    "\"0123456789abcdef0123456789abcdef\",\"content\":\"x\"}";
  CHECK_EQ(spy_trace_json_parse(ref, strlen(ref), &arena, &b), 1);
  CHECK_EQ(spy_trace_json_parse("{\"action\":", 10, &arena, &b), SPY_EBADVALUE);
  CHECK_EQ(spy_trace_json_parse("[1,2]", 5, &arena, &b), SPY_EBADVALUE);
  const char *wrong = "{\"action\":\"HookLoadCallStart\",\"module_id\":7}";
  CHECK_EQ(spy_trace_json_parse(wrong, strlen(wrong), &arena, &b),
           SPY_EBADVALUE);
  spy_trace_arena_free(&arena);
}

/* Two decoded values are the same tree (the members each type uses). */
static int same_tree(const spy_trace_val *a, const spy_trace_val *b) {
  if (a->type != b->type)
    return 0;
  switch (a->type) {
  case SPY_TV_INT: return a->u.i == b->u.i;
  case SPY_TV_STR:
  case SPY_TV_SRC:
    return a->n == b->n && memcmp(a->u.s, b->u.s, a->n) == 0 &&
           a->u.s[a->n] == 0 && b->u.s[b->n] == 0;
  case SPY_TV_SRCREF:
    return a->hash[0] == b->hash[0] && a->hash[1] == b->hash[1];
  case SPY_TV_LIST:
  case SPY_TV_REC:
    if (a->n != b->n)
      return 0;
    for (uint32_t i = 0; i < a->n; i++)
      if (!same_tree(&a->u.items[i], &b->u.items[i]))
        return 0;
    return 1;
  default: return 1;
  }
}

/* Reads `line` as the reader does (the quick scan of the writer's own
 * form first) and with the JSON library alone (what asking for a
 * StringRef's content does); returns the first's answer, -100 when the
 * two differ in anything. */
static int read_both(const char *line, spy_trace_action *out) {
  static spy_trace_arena a1, a2;
  spy__buf content = {0};
  spy__jline l1, l2;
  spy_trace_arena_reset(&a1);
  spy_trace_arena_reset(&a2);
  size_t n = strlen(line);
  int r1 = spy__json_line(line, n, &a1, &l1, NULL, NULL, 0);
  int r2 = spy__json_line(line, n, &a2, &l2, &content, NULL, 0);
  spy__buf_free(&content);
  if (r1 != r2 || l1.replaced != l2.replaced)
    return -100;
  if (r1 == 0) {
    const spy_trace_action *a = &l1.action, *b = &l2.action;
    if (a->kind != b->kind || a->seq != b->seq || a->ts_us != b->ts_us ||
        a->build != b->build || a->name_len != b->name_len ||
        memcmp(a->name, b->name, a->name_len) != 0 ||
        !same_tree(&a->fields, &b->fields))
      return -100;
    *out = *a;
  }
  return r1;
}

TEST(jsonl_event_lines_read_alike_by_the_quick_scan_and_the_library) {
  /* the writer's own form, as json_form.c writes it, of several kinds */
  static const char *const good[] = {
      "{\"timestamp\":\"1700000000123\",\"session_id\":\"s-1\",\"build_id\":"
      "\"3\",\"seq\":42,\"ts_us\":1700000000123456,\"action\":"
      "\"HookLoadCallEnd\",\"module_id\":\"m\\u00e9\\n\\\"x\\ud83d\\ude00.c\","
      "\"content\":\"$ref:0123456789abcdef0123456789abcdef\",\"plugin_name\":"
      "\"p\",\"plugin_id\":-7,\"call_id\":\"c1\"}",
      "{\"timestamp\":\"0\",\"session_id\":\"s\",\"seq\":0,\"ts_us\":0,"
      "\"action\":\"HookTransformCallEnd\",\"module_id\":\"a\\u0000b\","
      "\"content\":null,\"plugin_name\":\"\xe2\x82\xac\",\"plugin_id\":0,"
      "\"call_id\":\"c\"}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"build_id\":\"1\",\"seq\":5,"
      "\"ts_us\":1000,\"action\":\"HookResolveIdCallEnd\",\"resolved_id\":"
      "null,\"is_external\":true,\"plugin_name\":\"r\",\"plugin_id\":0,"
      "\"trigger\":\"automatic\",\"call_id\":\"c2\"}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"build_id\":\"1\",\"seq\":6,"
      "\"ts_us\":1000,\"action\":\"HookTransformCallStart\",\"module_id\":"
      "\"m.c\",\"content\":\"inline source, not a ref\",\"plugin_name\":"
      "\"b\",\"plugin_id\":1,\"call_id\":\"c3\"}",
      "{\"timestamp\":\"2\",\"session_id\":\"s\",\"build_id\":\"1\",\"seq\":7,"
      "\"ts_us\":2000,\"action\":\"ModuleGraphReady\",\"modules\":[{\"id\":"
      "\"a.c\",\"is_external\":false,\"imports\":[],\"importers\":[]},{\"id\":"
      "\"b.c\",\"is_external\":false,\"imports\":[{\"module_id\":\"a.c\","
      "\"kind\":\"import-statement\",\"module_request\":\"a.h\"}],"
      "\"importers\":[\"a.c\",\"z.c\"]}]}",
  };
  /* and lines the scan leaves to the library (which reads some, refuses
   * others): both answers must still be the same */
  static const char *const other[] = {
      "{\"timestamp\":\"1\", \"session_id\":\"s\",\"seq\":1,\"ts_us\":1,"
      "\"action\":\"BuildEnd\"}",
      "{\"session_id\":\"s\",\"timestamp\":\"1\",\"seq\":1,\"ts_us\":1,"
      "\"action\":\"BuildStart\"}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1234567890123456789,"
      "\"ts_us\":1,\"action\":\"BuildStart\"}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":01,\"ts_us\":1,"
      "\"action\":\"BuildStart\"}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1.5,\"ts_us\":1,"
      "\"action\":\"BuildStart\"}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1,\"ts_us\":1,"
      "\"action\":\"BuildStart\",\"extra\":1}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1,\"ts_us\":1,"
      "\"action\":\"HookLoadCallStart\",\"module_id\":\"\\ud800\","
      "\"plugin_name\":\"p\",\"plugin_id\":0,\"call_id\":\"c\"}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1,\"ts_us\":1,"
      "\"action\":\"HookLoadCallStart\",\"module_id\":\"\xe9\","
      "\"plugin_name\":\"p\",\"plugin_id\":0,\"call_id\":\"c\"}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1,\"ts_us\":1,"
      "\"action\":\"HookLoadCallStart\",\"module_id\":7,"
      "\"plugin_name\":\"p\",\"plugin_id\":0,\"call_id\":\"c\"}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1,\"ts_us\":1,"
      "\"action\":\"NoSuchKind\",\"x\":[1,{\"y\":2}]}",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1,\"ts_us\":1,"
      "\"action\":\"BuildStart\"} ",
      "{\"timestamp\":\"1\",\"session_id\":\"s\",\"seq\":1,\"ts_us\":1,"
      "\"action\":\"BuildStart\"",
  };
  spy_trace_action a;
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    int rc = read_both(good[i], &a);
    if (rc != 0)
      fprintf(stderr, "  good line %zu: %d\n", i, rc);
    CHECK_EQ(rc, 0);
  }
  /* what the first one says, field by field */
  CHECK_EQ(read_both(good[0], &a), 0);
  CHECK(a.kind == &spy_kind_hook_load_call_end);
  CHECK(a.seq == 42 && a.ts_us == 1700000000123456ull && a.build == 3);
  const spy_trace_val *m = spy_trace_get(&a, "module_id");
  CHECK(m->type == SPY_TV_STR && m->n == 12);
  CHECK(memcmp(m->u.s, "m\xc3\xa9\n\"x\xf0\x9f\x98\x80.c", 12) == 0);
  const spy_trace_val *c = spy_trace_get(&a, "content");
  CHECK(c->type == SPY_TV_SRCREF && c->hash[0] == 0x0123456789abcdefull);
  CHECK_EQ(spy_trace_get(&a, "plugin_id")->u.i, -7);
  CHECK_EQ(read_both(good[4], &a), 0);
  const spy_trace_val *mods = spy_trace_get(&a, "modules");
  CHECK(mods->type == SPY_TV_LIST && mods->n == 2);
  CHECK(mods->u.items[1].type == SPY_TV_REC);
  for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
    int rc = read_both(other[i], &a);
    if (rc == -100)
      fprintf(stderr, "  other line %zu: the two reads differ\n", i);
    CHECK(rc != -100);
  }
  /* a line as the writer itself formats it */
  static const char src[] = "int x;\n";
  spy_act_hook_load_call_end act = {"m.c", {src, sizeof src - 1}, "p", 1, "c1",
                                    0};
  uint8_t rec[512];
  int64_t len = spy_trace_encode(&spy_kind_hook_load_call_end, &act, 9,
                                 1700000000000001ull, 2, rec, sizeof rec);
  CHECK(len > 0);
  spy_trace_arena arena = {0};
  spy_trace_action d;
  CHECK(spy_trace_decode(rec, (size_t)len, &arena, &d) > 0);
  char line[1024];
  int64_t ln = spy_trace_json_format(&d, "sess", line, sizeof line - 1);
  CHECK(ln > 0 && ln < (int64_t)sizeof line);
  line[ln] = 0;
  CHECK_EQ(read_both(line, &a), 0);
  CHECK(a.kind == &spy_kind_hook_load_call_end && a.seq == 9 && a.build == 2);
  spy_trace_arena_free(&arena);
}

/* The quick scan reads a built-in kind's fields in the catalog's order
 * and takes the envelope's members for the envelope: no field of a
 * built-in kind may be named like one, and no record may name a field
 * twice (the library would read one member for both). */
static int names_unlike(const spy_trace_kind *k, int top, int depth) {
  static const char *const env[] = {"timestamp", "session_id", "build_id",
                                    "seq",       "ts_us",      "action"};
  if (!k || depth > 8)
    return 1;
  for (uint32_t i = 0; i < k->nfields; i++) {
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(k->fields[i].name, k->fields[j].name) == 0)
        return 0;
    for (size_t e = 0; top && e < sizeof env / sizeof *env; e++)
      if (strcmp(k->fields[i].name, env[e]) == 0)
        return 0;
    if (!names_unlike(k->fields[i].rec, 0, depth + 1))
      return 0;
  }
  return 1;
}

TEST(catalog_field_names_leave_the_envelope_alone) {
  for (int i = 1; i <= SPY_TRACE_KIND_COUNT; i++) {
    if (!names_unlike(spy_trace_kinds[i], 1, 0))
      fprintf(stderr, "  %s\n", spy_trace_kinds[i]->name);
    CHECK(names_unlike(spy_trace_kinds[i], 1, 0));
  }
}

/* ---- every action back byte for byte from the SQL tables ----------------- */

/* An application kind: kept in action_batches, and in its own table. */
#define APP_EVENT(F, X)                                                        \
  F(X, STR, label, _)                                                          \
  F(X, OINT, n, _)                                                             \
  F(X, OBOOL, ok, _)
SPY_TRACE_DECLARE_KIND(AppEvent, app_event, APP_EVENT)
SPY_TRACE_DEFINE_KIND(AppEvent, app_event, APP_EVENT)

/* A writer in front of a built-in one that keeps the binary record of
 * every action it is given (payloads by reference): what the store must
 * give back. */
typedef struct capture {
  const spy_trace_writer_ops *real;
  void *st;
  spy__buf recs;
  size_t kept; /* record bytes of the kinds the tables cannot hold */
  int pg;
} capture;

static int cap_open(void **state, const spy_trace_writer_cfg *cfg) {
  capture *c = cfg->arg;
  *state = c;
  return c->real->open(&c->st, cfg);
}
static int cap_source(void *state, const uint64_t h[2], const char *p,
                      size_t n) {
  capture *c = state;
  return c->real->source(c->st, h, p, n);
}
static int cap_action(void *state, const spy_trace_record *r) {
  capture *c = state;
  size_t before = c->recs.len;
  spy__trace_record_put(&c->recs, r->action);
  const spy_trace_action *a = r->action;
  const spy_trace_val *m = spy_trace_get(a, "module_id");
  /* an application kind; a list string that is not UTF-8 (JSON changes
   * it); postgres: any text that is not UTF-8 */
  if (a->kind == &spy_kind_app_event ||
      a->kind == &spy_kind_module_graph_ready ||
      (c->pg && m && m->type == SPY_TV_STR && memchr(m->u.s, '\xe9', m->n)))
    c->kept += c->recs.len - before;
  return c->real->action(c->st, r);
}
static int cap_commit(void *state) {
  capture *c = state;
  return c->real->commit(c->st);
}
static int64_t cap_close(void *state) {
  capture *c = state;
  return c->real->close(c->st);
}
static const spy_trace_writer_ops cap_sqlite = {
    .name = "capture",
    .open = cap_open,
    .source = cap_source,
    .action = cap_action,
    .commit = cap_commit,
    .close = cap_close,
    .flags = SPY_TRACE_WRITER_RECORDS | SPY_TRACE_WRITER_MKDIR};
static const spy_trace_writer_ops cap_pg = {.name = "capture",
                                            .open = cap_open,
                                            .source = cap_source,
                                            .action = cap_action,
                                            .commit = cap_commit,
                                            .close = cap_close,
                                            .flags = SPY_TRACE_WRITER_RECORDS |
                                                     SPY_TRACE_WRITER_CONNINFO};

/* One of every built-in kind with lists nested, empty and null, null and
 * extreme integers, payloads present and null, non-UTF-8 text, and an
 * application kind. */
static void emit_every_kind(spy_trace *t) {
  spy_rec_input_item in[] = {{NULL, "src", 0}, {"main", "a.c", 0}};
  spy_rec_plugin_item pl[] = {{"p", 0, 0}, {"q", 1, 0}};
  spy_emit_session_meta(t, &(spy_act_session_meta){.inputs = {in, 2},
                                                   .plugins = {pl, 2},
                                                   .cwd = "/w",
                                                   .platform = "node",
                                                   .format = "esm",
                                                   .file = "out.js"});
  spy_trace_build_begin(t);
  spy_rec_module_import im[] = {{"b.h", "include", "b.h", 0},
                                {"c\tq\n.h", "include", "\"c.h\"", 0}};
  const char *importers[] = {"x\xe9.c", "y.c"};
  spy_rec_module mods[] = {
      {.id = "a.c", .imports = {im, 2}, .importers = {importers, 2}},
      {.id = "b.h", .is_external = 1},
      {.id = "e.c", .imports = {im, 0}, .importers = {importers, 0}}};
  spy_emit_module_graph_ready(t, &(spy_act_module_graph_ready){{mods, 3}, 0});
  static const char *const cm[] = {"a.c", "b.h"};
  spy_rec_chunk_import ci[] = {{2, "static", 0}};
  spy_rec_chunk ch[] = {{.chunk_id = 1,
                         .name = "main",
                         .advanced_chunk_group_id = SPY_TRACE_NULL_INT,
                         .is_user_defined_entry = 1,
                         .modules = {cm, 2},
                         .reason = "entry",
                         .imports = {ci, 1}},
                        {.chunk_id = 2,
                         .advanced_chunk_group_id = 7,
                         .is_async_entry = 1,
                         .entry_module = "b.h",
                         .reason = "dynamic"}};
  spy_emit_chunk_graph_ready(t, &(spy_act_chunk_graph_ready){{ch, 2}, 0});
  static const int64_t ids[] = {INT64_MIN, -1, 0, INT64_MAX};
  spy_rec_package_info pk[] = {{.package_id = "p@1",
                                .version = "1.0",
                                .package_json_path = "/p/package.json",
                                .package_root = "/p",
                                .is_used = 1,
                                .dependency_type = "prod",
                                .size = 1234,
                                .modules = {cm, 2},
                                .chunk_ids = {ids, 4}}};
  spy_emit_package_graph_ready(t, &(spy_act_package_graph_ready){{pk, 1}, 0});
  const char *src = "int a;\n", *out = "int a; /* x */\n";
  spy_emit_hook_resolve_id_call_start(
      t, &(spy_act_hook_resolve_id_call_start){.module_request = "b.h",
                                               .import_kind = "include",
                                               .plugin_name = "p",
                                               .trigger = "automatic",
                                               .call_id = "r1"});
  spy_emit_hook_resolve_id_call_end(
      t, &(spy_act_hook_resolve_id_call_end){.resolved_id = "/w/b.h",
                                             .is_external = -1,
                                             .plugin_name = "p",
                                             .trigger = "automatic",
                                             .call_id = "r1"});
  spy_emit_hook_load_call_start(
      t, &(spy_act_hook_load_call_start){"m\xe9.c", "p", 0, "l1", 0});
  spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){"m\xe9.c", {NULL, 0}, "p", 0, "l1", 0});
  spy_emit_hook_transform_call_start(
      t, &(spy_act_hook_transform_call_start){
             "a.c", {src, strlen(src)}, "q", 1, "t1", 0});
  spy_emit_hook_transform_call_end(
      t, &(spy_act_hook_transform_call_end){
             "a.c", {out, strlen(out)}, "q", 1, "t1", 0});
  spy_emit_app_event(t, &(spy_act_app_event){"hello", SPY_TRACE_NULL_INT, 1});
  spy_emit_hook_render_chunk_start(
      t, &(spy_act_hook_render_chunk_start){"q", 1, "c1", {out, strlen(out)}});
  spy_emit_hook_render_chunk_end(
      t, &(spy_act_hook_render_chunk_end){"q", 1, "c1", {NULL, 0}});
  spy_rec_asset as[] = {{1, {out, strlen(out)}, 15, "main.js", 0},
                        {SPY_TRACE_NULL_INT, {NULL, 0}, 0, "x.map", 0}};
  spy_emit_assets_ready(t, &(spy_act_assets_ready){{as, 2}, 0});
  spy_emit_app_event(t, &(spy_act_app_event){"bye", 3, -1});
  /* a call that never ends */
  spy_emit_hook_transform_call_start(
      t, &(spy_act_hook_transform_call_start){
             "e.c", {src, strlen(src)}, "p", 0, "t2", 0});
  spy_trace_build_end(t);
}

/* hook_calls' columns of schema 4 and 5 (the hook_calls_live view's) */
#define HC                                                                     \
  "session_id,build_id,call_id,hook_type,plugin_name,plugin_id,module_id,"     \
  "started_at,ended_at,input_source_id,output_source_id"

/* Emits into a store through the capturing writer (c: what it was
 * given), then reads the session back: the same records, twice. */
static void exact_round_trip(store *s, capture *c, void (*emit)(spy_trace *),
                             uint32_t batch) {
  c->pg = s->conninfo != NULL;
  c->real = spy_trace_writer_find(s->writer);
  spy_trace *t = NULL;
  spy_trace_desc d = {.enabled = 1,
                      .ops = c->pg ? &cap_pg : &cap_sqlite,
                      .ops_arg = c,
                      .dir = s->dir,
                      .conninfo = s->conninfo,
                      .batch_actions = batch};
  CHECK_OK(spy_trace_create(&t, &d));
  snprintf(s->sid, sizeof s->sid, "%s", spy_trace_session_id(t));
  emit(t);
  CHECK_EQ(spy_trace_destroy(t), 0);
  spy_trace_reader *r;
  CHECK_OK(open_reader(s, &r));
  spy__buf got = {0};
  for (int pass = 0; pass < 2; pass++) {
    got.len = 0;
    spy_trace_action a;
    int rc;
    while ((rc = spy_trace_reader_next(r, &a)) == 1)
      spy__trace_record_put(&got, &a);
    CHECK_EQ(rc, 0);
    CHECK_EQ(got.len, c->recs.len);
    CHECK(memcmp(got.p, c->recs.p, got.len) == 0);
    CHECK_OK(spy_trace_reader_rewind(r));
  }
  spy_trace_reader_close(r);
  spy__buf_free(&got);
}

/* Hook calls a hook_calls row cannot hold alone: an End whose plugin or
 * module differs from its Start's, an End without a Start; and one call
 * open across several commits (its row inserted, then updated). */
static void emit_odd_calls(spy_trace *t) {
  const char *src = "int a;\n", *out = "int b;\n";
  spy_trace_build_begin(t);
  spy_emit_hook_transform_call_start(
      t, &(spy_act_hook_transform_call_start){
             "a.c", {src, strlen(src)}, "q", 1, "t1", 0});
  spy_emit_hook_transform_call_end(
      t, &(spy_act_hook_transform_call_end){
             "a.c", {out, strlen(out)}, "r", 1, "t1", 0});
  spy_emit_hook_load_call_end(
      t, &(spy_act_hook_load_call_end){"z.c", {NULL, 0}, "p", 0, "l9", 0});
  spy_emit_hook_resolve_id_call_start(
      t, &(spy_act_hook_resolve_id_call_start){.importer = "a.c",
                                               .module_request = "b.h",
                                               .import_kind = "include",
                                               .plugin_name = "p",
                                               .trigger = "automatic",
                                               .call_id = "r1"});
  spy_emit_hook_transform_call_start(
      t, &(spy_act_hook_transform_call_start){
             "x.c", {src, strlen(src)}, "q", 1, "t3", 0});
  spy_emit_hook_transform_call_end(
      t, &(spy_act_hook_transform_call_end){
             "y.c", {out, strlen(out)}, "q", 1, "t3", 0});
  spy_emit_app_event(t, &(spy_act_app_event){"between", 1, 0});
  spy_emit_hook_resolve_id_call_end(
      t, &(spy_act_hook_resolve_id_call_end){.resolved_id = "/w/b.h",
                                             .is_external = 0,
                                             .plugin_name = "p",
                                             .trigger = "automatic",
                                             .call_id = "r1"});
  spy_trace_build_end(t);
}

static void odd_calls_case(store *s) {
  if (strcmp(s->writer, "jsonl") == 0)
    return; /* the capturing writer wraps the SQL ones */
  capture c = {0};
  exact_round_trip(s, &c, emit_odd_calls, 1); /* a commit per action */
  /* the store's answers to hook call queries are the replay's: the
   * Start's plugin and module count, an End without a Start is no call */
  spy_trace_reader *r;
  CHECK_OK(open_reader(s, &r));
  static const char *const plugins[] = {NULL, "q", "r", "p"};
  static const char *const modules[] = {NULL, "x.c", "y.c", "b.h"};
  const spy__reader_ops *own = r->ops;
  spy__reader_ops replay = *own;
  replay.calls = NULL;
  for (int o = 0; o < 3; o++)
    for (size_t k = 0; k < 4; k++)
      for (int by = 0; by < 2; by++) {
        spy_trace_call_query q = {0, by ? NULL : plugins[k],
                                  by ? modules[k] : NULL,
                                  (spy_trace_call_order)o, 0};
        q_got.n = q_want.n = 0;
        q_got.over = q_want.over = 0;
        CHECK_OK(spy_trace_reader_hook_calls_query(r, &q, q_keep, &q_got));
        r->ops = &replay;
        CHECK_OK(spy_trace_reader_hook_calls_query(r, &q, q_keep, &q_want));
        r->ops = own;
        if (!q.plugin && !q.module)
          CHECK_EQ(q_got.n, 3); /* t1, t3, r1 */
        if (!q_same(&q_got, &q_want)) {
          fprintf(stderr, "  order %d plugin %s module %s:\n", o,
                  q.plugin ? q.plugin : "(any)", q.module ? q.module : "(any)");
          q_print("store ", &q_got);
          q_print("replay", &q_want);
          CHECK(0);
        }
      }
  spy_trace_reader_close(r);
  if (!c.pg && strcmp(s->writer, "sqlite") == 0) {
    char path[512];
    snprintf(path, sizeof path, "%s/trace.db", s->dir);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(
              db,
              "SELECT (SELECT count(*) FROM hook_transform_call_end_kept), "
              "(SELECT count(*) FROM hook_load_call_end_kept), (SELECT "
              "count(*) FROM hook_calls), (SELECT count(*) FROM hook_calls "
              "WHERE kept=2), (SELECT count(*) FROM hook_calls WHERE "
              "call_id='r1' AND kept=0 AND end_seq IS NOT NULL AND "
              "end_resolved_id='/w/b.h'), (SELECT count(*) FROM "
              "hook_transform_call_start_kept) + (SELECT count(*) FROM "
              "hook_resolve_id_call_start_kept), (SELECT count(*) FROM "
              "hook_resolve_id_call_start WHERE importer='a.c')",
              -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ(sqlite3_column_int64(st, 0), 2); /* t1's and t3's Ends */
    CHECK_EQ(sqlite3_column_int64(st, 1), 1); /* l9, no Start */
    CHECK_EQ(sqlite3_column_int64(st, 2), 3);
    CHECK_EQ(sqlite3_column_int64(st, 3), 2);
    CHECK_EQ(sqlite3_column_int64(st, 4), 1); /* inserted, then updated */
    CHECK_EQ(sqlite3_column_int64(st, 5), 0);
    CHECK_EQ(sqlite3_column_int64(st, 6), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  spy__buf_free(&c.recs);
}

TEST(hook_calls_a_row_cannot_hold_come_back_byte_for_byte) {
  FOR_STORES(odd_calls_case);
}

static void exact_case(store *s) {
  if (strcmp(s->writer, "jsonl") == 0)
    return; /* JSON holds U+FFFD for the non-UTF-8 bytes */
  capture c = {0};
  exact_round_trip(s, &c, emit_every_kind, 3); /* records across batches */
  /* action_batches held the records of only the kept actions */
  if (!c.pg) {
    char path[512];
    snprintf(path, sizeof path, "%s/trace.db", s->dir);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db,
                             "SELECT sum(size), sum(count) FROM "
                             "action_batches",
                             -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    fprintf(stderr, "  records kept: %lld of %zu bytes\n",
            (long long)sqlite3_column_int64(st, 0), c.recs.len);
    CHECK_EQ((size_t)sqlite3_column_int64(st, 0), c.kept);
    CHECK_EQ(sqlite3_column_int64(st, 1), 18); /* every action counted */
    sqlite3_finalize(st);
    /* hook_calls, filled as calls ended, holds what its view joins */
    CHECK(sqlite3_prepare_v2(
              db,
              "SELECT (SELECT count(*) FROM hook_calls), (SELECT count(*) "
              "FROM hook_calls_live), (SELECT count(*) FROM (SELECT " HC
              " FROM hook_calls EXCEPT SELECT * FROM hook_calls_live)), "
              "(SELECT count(*) FROM (SELECT * FROM hook_calls_live EXCEPT "
              "SELECT " HC " FROM hook_calls)), (SELECT count(*) FROM "
              "hook_calls WHERE ended_at IS NULL), (SELECT count(*) FROM "
              "hook_calls WHERE end_seq IS NOT NULL), (SELECT count(*) FROM "
              "hook_load_call_end_kept) + (SELECT count(*) FROM "
              "hook_transform_call_end_kept) + (SELECT count(*) FROM "
              "hook_resolve_id_call_end_kept) + (SELECT count(*) FROM "
              "hook_render_chunk_end_kept)",
              -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ(sqlite3_column_int64(st, 0), 5);
    CHECK_EQ(sqlite3_column_int64(st, 1), 5);
    CHECK_EQ(sqlite3_column_int64(st, 2), 0);
    CHECK_EQ(sqlite3_column_int64(st, 3), 0);
    CHECK_EQ(sqlite3_column_int64(st, 4), 1);
    /* schema 6: an End whose fields match its Start's is kept in its
     * call's row (all four here), any other in <end>_kept */
    fprintf(stderr, "  Ends in hook_calls rows: %lld, in kept tables: %lld\n",
            (long long)sqlite3_column_int64(st, 5),
            (long long)sqlite3_column_int64(st, 6));
    CHECK_EQ(sqlite3_column_int64(st, 5), 4);
    CHECK_EQ(sqlite3_column_int64(st, 6), 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  spy__buf_free(&c.recs);
}

TEST(sql_tables_give_every_action_back_byte_for_byte) {
  FOR_STORES(exact_case);
}

/* ---- a store of many sessions (SQLite) ----------------------------------- */

/* A VFS in front of the default one counting the bytes read from main
 * database files: what reading one session of a store costs. */
typedef struct cfile {
  sqlite3_file base;
  sqlite3_file *real; /* the default VFS's file, right after this */
  int main;
} cfile;
static sqlite3_vfs *real_vfs, count_vfs;
static sqlite3_io_methods count_io;
static uint64_t db_read_bytes;

#define REAL(f) (((cfile *)(f))->real)
static int c_close(sqlite3_file *f) {
  return REAL(f)->pMethods->xClose(REAL(f));
}
static int c_read(sqlite3_file *f, void *p, int n, sqlite3_int64 off) {
  if (((cfile *)f)->main)
    db_read_bytes += (uint64_t)n;
  return REAL(f)->pMethods->xRead(REAL(f), p, n, off);
}
static int c_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off) {
  return REAL(f)->pMethods->xWrite(REAL(f), p, n, off);
}
static int c_truncate(sqlite3_file *f, sqlite3_int64 n) {
  return REAL(f)->pMethods->xTruncate(REAL(f), n);
}
static int c_sync(sqlite3_file *f, int flags) {
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int c_size(sqlite3_file *f, sqlite3_int64 *n) {
  return REAL(f)->pMethods->xFileSize(REAL(f), n);
}
static int c_lock(sqlite3_file *f, int l) {
  return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int c_unlock(sqlite3_file *f, int l) {
  return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int c_reserved(sqlite3_file *f, int *out) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int c_fcntl(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int c_sector(sqlite3_file *f) {
  return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int c_dev(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int c_shmmap(sqlite3_file *f, int i, int sz, int ext,
                    void volatile **p) {
  return REAL(f)->pMethods->xShmMap(REAL(f), i, sz, ext, p);
}
static int c_shmlock(sqlite3_file *f, int off, int n, int flags) {
  return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void c_shmbarrier(sqlite3_file *f) {
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int c_shmunmap(sqlite3_file *f, int del) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int c_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **p) {
  *p = NULL; /* every page through xRead, where it is counted */
  (void)f, (void)off, (void)n;
  return SQLITE_OK;
}
static int c_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
  (void)f, (void)off, (void)p;
  return SQLITE_OK;
}
static int c_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags,
                  int *out) {
  (void)v;
  cfile *c = (cfile *)f;
  c->real = (sqlite3_file *)(c + 1);
  c->main = (flags & SQLITE_OPEN_MAIN_DB) != 0;
  int rc = real_vfs->xOpen(real_vfs, name, c->real, flags, out);
  c->base.pMethods = c->real->pMethods ? &count_io : NULL;
  return rc;
}
static const sqlite3_io_methods count_methods = {
    3,         c_close,      c_read,     c_write, c_truncate, c_sync, c_size,
    c_lock,    c_unlock,     c_reserved, c_fcntl, c_sector,   c_dev,  c_shmmap,
    c_shmlock, c_shmbarrier, c_shmunmap, c_fetch, c_unfetch};

/* Reads session sid of the SQLite store in dir whole — its actions as
 * records into recs, its hook calls counted into *calls — through the
 * counting VFS; returns the bytes read from trace.db, 0 on failure. */
static int count_call(void *arg, const spy_trace_hook_call *c) {
  (void)c;
  ++*(int *)arg;
  return 0;
}
static uint64_t read_session(const char *dir, const char *sid, spy__buf *recs,
                             int *calls) {
  if (!real_vfs) {
    real_vfs = sqlite3_vfs_find(NULL);
    count_vfs = *real_vfs;
    count_vfs.zName = "spy-count";
    count_vfs.pNext = NULL;
    count_vfs.szOsFile = (int)sizeof(cfile) + real_vfs->szOsFile;
    count_vfs.xOpen = c_open;
    count_io = count_methods;
  }
  sqlite3_vfs_register(&count_vfs, 1);
  db_read_bytes = 0;
  spy_trace_reader *r;
  int rc = spy_trace_reader_open(dir, sid, &r), ok = rc == 0;
  spy_trace_action a;
  recs->len = 0;
  while (ok && (rc = spy_trace_reader_next(r, &a)) == 1)
    spy__trace_record_put(recs, &a);
  *calls = 0;
  ok = ok && rc == 0 && spy_trace_reader_hook_calls(r, count_call, calls) == 0;
  spy_trace_reader_close(r);
  sqlite3_vfs_register(real_vfs, 1);
  sqlite3_vfs_unregister(&count_vfs);
  return ok ? db_read_bytes : 0;
}

static spy_trace *capture_session(const char *dir, capture *c) {
  memset(c, 0, sizeof *c);
  c->real = spy_trace_writer_find("sqlite");
  spy_trace *t = NULL;
  spy_trace_desc d = {.enabled = 1,
                      .ops = &cap_sqlite,
                      .ops_arg = c,
                      .dir = dir,
                      .batch_actions = 64};
  return spy_trace_create(&t, &d) < 0 ? NULL : t;
}

/* n transform calls on one payload: many rows, one source. */
static void emit_calls(spy_trace *t, int from, int n) {
  static const char src[] = "int x;\n";
  for (int i = from; i < from + n; i++) {
    char mod[32], id[32];
    snprintf(mod, sizeof mod, "dir/module-%06d.c", i);
    snprintf(id, sizeof id, "call-%06d", i);
    spy_emit_hook_transform_call_start(
        t, &(spy_act_hook_transform_call_start){
               mod, {src, sizeof src - 1}, "plugin", 2, id, 0});
    spy_emit_hook_transform_call_end(
        t, &(spy_act_hook_transform_call_end){
               mod, {src, sizeof src - 1}, "plugin", 2, id, 0});
  }
}

static off_t file_size(const char *dir) {
  char path[512];
  struct stat sb;
  snprintf(path, sizeof path, "%s/trace.db", dir);
  return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* A store holding a small session written between the halves of a large
 * one (both open at once): each session reads back exactly what was
 * emitted into it, and reading the small one reads its rows' pages, not
 * every row of the large one (the store's size grew by more than four
 * times what reading the small one grew by). Before session_rows the
 * reader scanned every action table per session. */
TEST(sqlite_reads_one_session_of_many_without_scanning_the_others) {
  store one, many;
  CHECK(store_init(&one, "sqlite") == 0 && store_init(&many, "sqlite") == 0);
  capture alone, small, large;
  spy_trace *t = capture_session(one.dir, &alone);
  CHECK(t);
  char sid_alone[128];
  snprintf(sid_alone, sizeof sid_alone, "%s", spy_trace_session_id(t));
  emit_every_kind(t);
  CHECK_EQ(spy_trace_destroy(t), 0);

  spy_trace *tl = capture_session(many.dir, &large);
  spy_trace *ts = capture_session(many.dir, &small);
  CHECK(tl && ts);
  char sid_small[128], sid_large[128];
  snprintf(sid_small, sizeof sid_small, "%s", spy_trace_session_id(ts));
  snprintf(sid_large, sizeof sid_large, "%s", spy_trace_session_id(tl));
  spy_trace_build_begin(tl);
  emit_calls(tl, 0, 3000);
  CHECK_OK(spy_trace_flush(tl));
  emit_every_kind(ts);
  /* closed before the large one goes on: its call that never ended gets
   * its hook_calls row at close, and a row after the large session's
   * would put them all in its range */
  CHECK_EQ(spy_trace_destroy(ts), 0);
  emit_calls(tl, 3000, 3000);
  spy_trace_build_end(tl);
  CHECK_EQ(spy_trace_destroy(tl), 0);

  spy__buf got = {0};
  int calls_alone, calls_small, calls_large;
  uint64_t read_alone = read_session(one.dir, sid_alone, &got, &calls_alone);
  CHECK(read_alone > 0);
  CHECK_EQ(got.len, alone.recs.len);
  CHECK(memcmp(got.p, alone.recs.p, got.len) == 0);
  uint64_t read_small = read_session(many.dir, sid_small, &got, &calls_small);
  CHECK(read_small > 0);
  CHECK_EQ(got.len, small.recs.len);
  CHECK(memcmp(got.p, small.recs.p, got.len) == 0);
  CHECK_EQ(calls_small, calls_alone);
  CHECK(read_session(many.dir, sid_large, &got, &calls_large) > 0);
  CHECK_EQ(got.len, large.recs.len);
  CHECK(memcmp(got.p, large.recs.p, got.len) == 0);
  CHECK_EQ(calls_large, 6000);
  off_t grew = file_size(many.dir) - file_size(one.dir);
  fprintf(stderr,
          "  read %llu bytes alone, %llu beside the large session (the "
          "store %lld bytes larger)\n",
          (unsigned long long)read_alone, (unsigned long long)read_small,
          (long long)grew);
  CHECK(grew > 0);
  CHECK(read_small < read_alone + (uint64_t)grew / 4);
  spy__buf_free(&got);
  spy__buf_free(&alone.recs);
  spy__buf_free(&small.recs);
  spy__buf_free(&large.recs);
  store_free(&one);
  store_free(&many);
}

/* A store written by the schema-3 writer (every action in action_batches
 * too): the fixture's SQL text, the stream its reader gave as JSON lines. */
TEST(schema_3_store_still_reads_the_same) {
  store s;
  CHECK(store_init(&s, "sqlite") == 0);
  size_t n;
  char *sql = slurp(SPY_FIXTURES "/trace_v3.sql", &n);
  char *want = slurp(SPY_FIXTURES "/trace_v3.jsonl", &n);
  CHECK(sql && want);
  char path[512];
  snprintf(path, sizeof path, "%s/trace.db", s.dir);
  sqlite3 *db;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(db);
  spy_trace_reader *r;
  CHECK_OK(open_reader(&s, &r));
  spy__buf got = {0};
  spy_trace_action a;
  int rc;
  static char line[1 << 16];
  while ((rc = spy_trace_reader_next(r, &a)) == 1) {
    int64_t len = spy_trace_json_format(&a, "S", line, sizeof line);
    CHECK(len > 0 && len < (int64_t)sizeof line);
    spy__buf_put(&got, line, (size_t)len);
    spy__buf_putc(&got, '\n');
  }
  CHECK_EQ(rc, 0);
  CHECK_EQ(got.len, n);
  CHECK(memcmp(got.p, want, n) == 0);
  spy_trace_summary sum;
  CHECK_OK(spy_trace_reader_summary(r, &sum));
  CHECK_EQ(sum.actions, 50);
  CHECK_EQ(sum.lost, 0);
  CHECK(sum.sources > 0);
  spy_trace_reader_close(r);
  spy__buf_free(&got);
  free(sql);
  free(want);
  store_free(&s);
}

TEST_MAIN(
    TEST_CASE(short_strings_encode_exactly_at_every_length_and_page_end),
    TEST_CASE(escaper_replaces_every_invalid_byte_and_never_splits_a_sequence),
    TEST_CASE(sql_tables_give_every_action_back_byte_for_byte),
    TEST_CASE(hook_calls_a_row_cannot_hold_come_back_byte_for_byte),
    TEST_CASE(schema_3_store_still_reads_the_same),
    TEST_CASE(sqlite_reads_one_session_of_many_without_scanning_the_others),
    TEST_CASE(latin1_is_valid_json_and_counted_while_sql_keeps_the_bytes),
    TEST_CASE(old_trace_with_raw_latin1_bytes_still_reads),
    TEST_CASE(jsonl_lines_read_in_any_key_order_and_spacing),
    TEST_CASE(actions_stream_in_seq_order_and_rewind_repeats_them),
    TEST_CASE(hook_call_queries_filter_order_and_limit_alike_in_every_store),
    TEST_CASE(hook_call_query_by_replay_holds_its_limit_not_the_session),
    TEST_CASE(payload_is_found_before_the_iteration_reaches_it),
    TEST_CASE(reading_a_large_session_holds_a_bounded_amount_of_memory),
    TEST_CASE(cut_last_line_is_read_up_to_the_line_before_with_a_warning),
    TEST_CASE(bad_line_in_the_middle_is_an_error_naming_line_and_offset),
    TEST_CASE(json_form_round_trips_64_bit_integers_and_nul_bytes),
    TEST_CASE(jsonl_event_lines_read_alike_by_the_quick_scan_and_the_library),
    TEST_CASE(catalog_field_names_leave_the_envelope_alone),
    TEST_CASE(generated_encoders_write_what_the_descriptor_walk_writes))
