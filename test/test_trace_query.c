/* test_trace_query.c — `spyglass trace builds|hooks|module|source` over
 * the three stores.
 *
 * One session is recorded into all three stores at once (a test writer
 * that hands every action to the real JSON-lines, SQLite and PostgreSQL
 * writers), so the stores hold the very same actions, timestamps
 * included. Proves: every command's --json answer (and module --diff's
 * text) is byte for byte the same from each store; builds lists each
 * build of the session with its own counts; hooks filters by build and
 * plugin and --slowest N gives the N longest calls of the full list,
 * longest first, equal durations in start order (calls given equal times
 * by the tee), for every --build/--plugin combination, N past the count,
 * a plugin and a build that made no call;
 * module gives the import edges both ways and the module's hook calls in
 * order with bytes in → out, and --diff the lines each transform removed
 * and added; source gives back exactly the bytes emitted (NUL bytes
 * included), also for a payload stored as a delta of another; in the
 * plain sqlite3 shell, libspyglass_sqlite's spy_source decodes delta rows
 * and hook_calls is a table after close; bad
 * ids and unknown modules are errors naming what was wrong.
 *
 * The PostgreSQL part needs SPY_TEST_PG (reader_pg.sh sets it); without
 * it the two file stores are compared and the case ends as SKIP. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spyglass/trace.h"
#include "store/store.h"
#include "testlib.h"
#include "testutil.h"

/* ---- a writer that tees to the three built-in writers -------------------
 */

enum { NW = 3 };
static const char *const wnames[NW] = {"jsonl", "sqlite", "postgres"};

typedef struct tee {
  const spy_trace_writer_ops *ops[NW];
  void *st[NW];
  int n;
  char sid[128];
  spy__buf json; /* a record whose time the tee set */
} tee;

static char g_dir[256], g_pg[1024];

static int tee_open(void **state, const spy_trace_writer_cfg *cfg) {
  tee *t = calloc(1, sizeof *t);
  if (!t)
    return SPY_ENOMEM;
  *state = t;
  snprintf(t->sid, sizeof t->sid, "%s", cfg->session_id);
  for (int i = 0; i < NW; i++) {
    if (i == 2 && !g_pg[0])
      break;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", cfg->dir, wnames[i]);
    if (i < 2 && mkdir(dir, 0755) != 0)
      return SPY_EIO;
    spy_trace_writer_cfg c = *cfg;
    c.dir = i < 2 ? dir : NULL;
    c.conninfo = i == 2 ? g_pg : NULL;
    t->ops[i] = spy_trace_writer_find(wnames[i]);
    int rc = t->ops[i]->open(&t->st[i], &c);
    t->n = i + 1;
    if (rc < 0)
      return rc;
  }
  return 0;
}

static int tee_source(void *state, const uint64_t hash[2], const char *p,
                      size_t n) {
  tee *t = state;
  int rc = 0;
  for (int i = 0; i < t->n; i++)
    if (t->ops[i]->source) {
      int r = t->ops[i]->source(t->st[i], hash, p, n);
      rc = rc ? rc : r;
    }
  return rc;
}

/* The calls of plugin "tie" get set times (µs after TIE_BASE, far from
 * the clock's) by call id, so that durations and start times tie exactly:
 * {call id, start, end}. t6 ends before it starts (duration 0). */
#define TIE_BASE 4000000000000000ull
static const struct {
  const char *id;
  uint64_t start, end;
} tie_times[] = {
    {"t1", 1000, 1100}, {"t2", 1000, 1100}, {"t3", 990, 1090},
    {"t4", 1200, 1250}, {"t5", 1300, 1350}, {"t6", 1400, 1390},
};
#define NTIE (sizeof tie_times / sizeof tie_times[0])

/* r itself, or (a "tie" call's Start or End) r with its set time. */
static const spy_trace_record *tie_time(tee *t, const spy_trace_record *r,
                                        spy_trace_action *a,
                                        spy_trace_record *out) {
  const spy_trace_val *cid = spy_trace_get(r->action, "call_id");
  const spy_trace_val *pl = spy_trace_get(r->action, "plugin_name");
  if (!cid || !pl || pl->n != 3 || memcmp(pl->u.s, "tie", 3) != 0)
    return r;
  for (size_t i = 0; i < NTIE; i++)
    if (strlen(tie_times[i].id) == cid->n &&
        memcmp(tie_times[i].id, cid->u.s, cid->n) == 0) {
      *a = *r->action;
      a->ts_us =
          TIE_BASE + (a->kind->role == SPY_ROLE_HOOK_START ? tie_times[i].start
                                                           : tie_times[i].end);
      t->json.len = 0;
      spy__trace_json(&t->json, t->sid, a);
      *out = *r;
      out->action = a;
      out->json = t->json.p;
      out->json_len = t->json.len;
      return t->json.err ? r : out;
    }
  return r;
}

static int tee_action(void *state, const spy_trace_record *r) {
  tee *t = state;
  spy_trace_action a;
  spy_trace_record timed;
  r = tie_time(t, r, &a, &timed);
  int rc = 0;
  for (int i = 0; i < t->n; i++) {
    int x = t->ops[i]->action(t->st[i], r);
    rc = rc ? rc : x;
  }
  return rc;
}

static int tee_commit(void *state) {
  tee *t = state;
  int rc = 0;
  for (int i = 0; i < t->n; i++) {
    int x = t->ops[i]->commit(t->st[i]);
    rc = rc ? rc : x;
  }
  return rc;
}

static int64_t tee_close(void *state) {
  tee *t = state;
  int64_t lost = 0;
  for (int i = 0; t && i < t->n; i++)
    lost += t->ops[i]->close(t->st[i]);
  if (t)
    spy__buf_free(&t->json);
  free(t);
  return lost;
}

static const spy_trace_writer_ops tee_ops = {.name = "tee",
                                             .open = tee_open,
                                             .source = tee_source,
                                             .action = tee_action,
                                             .commit = tee_commit,
                                             .close = tee_close,
                                             .flags = SPY_TRACE_WRITER_MKDIR};

/* ---- the recorded session -----------------------------------------------
 */

static const char a_src[] = "// a.c\n#include \"b.h\"\n"
                            "int a(void) { return 1; } // drop me\n"
                            "int keep(void) { return 2; }\n"
                            "int more(void) { return 3; } // drop me\n";
static const char a_out[] = "// a.c\n#include \"b.h\"\n"
                            "int a(void) { return 1; }\n"
                            "int keep(void) { return 2; }\n"
                            "int more(void) { return 3; }\n";
/* a second version of a.c, a delta of the first, for build 2 */
static const char a_src2[] = "// a.c\n#include \"b.h\"\n"
                             "int a(void) { return 1; } // drop me\n"
                             "int keep(void) { return 20; }\n"
                             "int more(void) { return 3; } // drop me\n";
/* b.h: NUL bytes and UTF-8 (exact in every store) */
static const char b_src[] = "// b.h caf\xc3\xa9\n\0\0int b;\n\0end";
#define B_LEN (sizeof b_src - 1)

static void hook_load(spy_trace *t, const char *mod, const char *p, size_t n,
                      int *cid) {
  char id[32];
  snprintf(id, sizeof id, "c%d", ++*cid);
  spy_act_hook_load_call_start s = {mod, "resolver", 1, id, 0};
  spy_emit_hook_load_call_start(t, &s);
  usleep(200);
  spy_act_hook_load_call_end e = {mod, {p, n}, "resolver", 1, id, 0};
  spy_emit_hook_load_call_end(t, &e);
}

static void hook_transform(spy_trace *t, const char *plugin, int pid,
                           const char *mod, const char *in, size_t nin,
                           const char *out, size_t nout, int *cid) {
  char id[32];
  snprintf(id, sizeof id, "c%d", ++*cid);
  spy_act_hook_transform_call_start s = {mod, {in, nin}, plugin, pid, id, 0};
  spy_emit_hook_transform_call_start(t, &s);
  usleep(100);
  spy_act_hook_transform_call_end e = {mod, {out, nout}, plugin, pid, id, 0};
  spy_emit_hook_transform_call_end(t, &e);
}

static void graph(spy_trace *t) {
  spy_rec_module_import ia[] = {{"b.h", "import-statement", "b.h", 0}};
  const char *imp_b[] = {"a.c"};
  spy_rec_module mods[] = {
      {"a.c", 0, {ia, 1}, {NULL, 0}, 0},
      {"b.h", 0, {NULL, 0}, {imp_b, 1}, 0},
  };
  spy_act_module_graph_ready g = {{mods, 2}, 0};
  spy_emit_module_graph_ready(t, &g);
}

static char g_sid[128];

/* Records the session (two builds) into every store. 0 ok. */
static int record(void) {
  spy_trace *t = NULL;
  spy_trace_desc d = {.enabled = 1, .dir = g_dir, .ops = &tee_ops};
  if (spy_trace_create(&t, &d) < 0)
    return -1;
  snprintf(g_sid, sizeof g_sid, "%s", spy_trace_session_id(t));
  int cid = 0;
  spy_trace_build_begin(t);
  hook_load(t, "a.c", a_src, sizeof a_src - 1, &cid);
  hook_transform(t, "strip", 2, "a.c", a_src, sizeof a_src - 1, a_out,
                 sizeof a_out - 1, &cid);
  hook_transform(t, "noop", 3, "a.c", a_out, sizeof a_out - 1, NULL, 0, &cid);
  hook_load(t, "b.h", b_src, B_LEN, &cid);
  hook_transform(t, "strip", 2, "b.h", b_src, B_LEN, NULL, 0, &cid);
  graph(t);
  spy_trace_build_end(t);
  /* build 2: a.c changed */
  spy_trace_build_begin(t);
  hook_load(t, "a.c", a_src2, sizeof a_src2 - 1, &cid);
  hook_transform(t, "strip", 2, "a.c", a_src2, sizeof a_src2 - 1, a_out,
                 sizeof a_out - 1, &cid);
  /* plugin "tie": set times (tie_time) whose durations and starts tie */
  for (size_t i = 0; i < NTIE; i++) {
    spy_act_hook_transform_call_start s = {"t.c", {"t", 1},        "tie",
                                           4,     tie_times[i].id, 0};
    spy_emit_hook_transform_call_start(t, &s);
    spy_act_hook_transform_call_end e = {"t.c", {NULL, 0},       "tie",
                                         4,     tie_times[i].id, 0};
    spy_emit_hook_transform_call_end(t, &e);
  }
  /* a call that never ends is not reported */
  spy_act_hook_load_call_start open = {"t.c", "tie", 4, "t7", 0};
  spy_emit_hook_load_call_start(t, &open);
  graph(t);
  spy_trace_build_end(t);
  return spy_trace_destroy(t) == 0 ? 0 : -1;
}

/* ---- running the tool ---------------------------------------------------
 */

typedef struct out {
  char *p;
  size_t n;
  int rc;
} out;

/* Runs `spyglass trace ARGS` against store w (0 jsonl, 1 sqlite, 2
 * postgres); captures all of stdout. */
static out run(int w, const char *args) {
  char cmd[4096];
  if (w == 2)
    snprintf(cmd, sizeof cmd, "%s trace %s --session %s '%s'", SPY_TOOL_PATH,
             args, g_sid, g_pg);
  else
    snprintf(cmd, sizeof cmd, "%s trace %s '%s/%s'", SPY_TOOL_PATH, args, g_dir,
             wnames[w]);
  out o = {NULL, 0, -1};
  FILE *p = popen(cmd, "r");
  if (!p)
    return o;
  size_t cap = 0;
  for (;;) {
    if (o.n + 4096 > cap) {
      cap = cap ? 2 * cap : 65536;
      char *g = realloc(o.p, cap + 1);
      if (!g)
        break;
      o.p = g;
    }
    size_t r = fread(o.p + o.n, 1, cap - o.n, p);
    if (!r)
      break;
    o.n += r;
  }
  if (o.p)
    o.p[o.n] = 0;
  int st = pclose(p);
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

static int nstores(void) { return g_pg[0] ? 3 : 2; }

/* The answer of store 0 to args, checked equal in every other store. */
static out same_everywhere(const char *args) {
  out first = run(0, args);
  for (int w = 1; w < nstores(); w++) {
    out o = run(w, args);
    if (o.rc != first.rc || o.n != first.n || memcmp(o.p, first.p, o.n)) {
      fprintf(stderr, "  `trace %s`: %s differs from jsonl:\n%s\n---\n%s\n",
              args, wnames[w], first.p ? first.p : "", o.p ? o.p : "");
      first.rc = -2;
    }
    free(o.p);
  }
  return first;
}

/* Positional store argument: the tool's commands put it first; `run`
 * appends it, which cli_parse accepts anywhere. For module and source the
 * store must come before MODULE / ID, so those are built by hand. */
static out run_pos(int w, const char *sub, const char *rest) {
  char args[2048], store[1400];
  if (w == 2)
    snprintf(store, sizeof store, "'%s' --session %s", g_pg, g_sid);
  else
    snprintf(store, sizeof store, "'%s/%s'", g_dir, wnames[w]);
  snprintf(args, sizeof args, "%s %s %s", sub, store, rest);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s trace %s", SPY_TOOL_PATH, args);
  out o = {NULL, 0, -1};
  FILE *p = popen(cmd, "r");
  if (!p)
    return o;
  size_t cap = 0;
  for (;;) {
    if (o.n + 4096 > cap) {
      cap = cap ? 2 * cap : 65536;
      char *g = realloc(o.p, cap + 1);
      if (!g)
        break;
      o.p = g;
    }
    size_t r = fread(o.p + o.n, 1, cap - o.n, p);
    if (!r)
      break;
    o.n += r;
  }
  if (o.p)
    o.p[o.n] = 0;
  int st = pclose(p);
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

static out same_everywhere_pos(const char *sub, const char *rest) {
  out first = run_pos(0, sub, rest);
  for (int w = 1; w < nstores(); w++) {
    out o = run_pos(w, sub, rest);
    if (o.rc != first.rc || o.n != first.n || memcmp(o.p, first.p, o.n)) {
      fprintf(stderr,
              "  `trace %s … %s`: %s differs from jsonl:\n%s\n---\n%s\n", sub,
              rest, wnames[w], first.p ? first.p : "", o.p ? o.p : "");
      first.rc = -2;
    }
    free(o.p);
  }
  return first;
}

static void hex_of(const char *p, size_t n, char hex[33]) {
  uint64_t h[2];
  spy_trace_hash(p, n, h);
  spy_trace_hash_hex(h, hex);
}

/* The call ids of a `hooks --json` answer, joined by ',' into out. */
static json_t *ids_of(const out *o, char *ids, size_t cap) {
  json_error_t je;
  json_t *j = o->p ? json_loads(o->p, 0, &je) : NULL;
  json_t *hs = json_object_get(j, "hook_calls");
  ids[0] = 0;
  size_t n = 0;
  for (size_t i = 0; i < json_array_size(hs); i++)
    n += (size_t)snprintf(
        ids + n, n < cap ? cap - n : 0, "%s%s", i ? "," : "",
        json_string_value(json_object_get(json_array_get(hs, i), "call_id")));
  return j;
}

/* `hooks --slowest N` with --build and --plugin: the same from every store,
 * exactly the first N of the whole ordered list (fewer when fewer match),
 * longest first, equal durations in start order (start time, then the
 * Start's seq). 1 when every check held. */
static int slowest_cases(void) {
  int ok = 1;
  char ids[4096], args[256];
  /* the tie calls: t3 started first of the three 100 µs ones, t1 and t2
   * started together (t1's Start came first); t4, t5 50 µs; t6 0 */
  static const struct {
    const char *args, *ids;
  } want[] = {
      {"hooks --plugin tie --json", "t3,t1,t2,t4,t5,t6"},
      {"hooks --plugin tie --slowest 1 --json", "t3"},
      {"hooks --plugin tie --slowest 2 --json", "t3,t1"},
      {"hooks --plugin tie --slowest 3 --json", "t3,t1,t2"},
      {"hooks --plugin tie --slowest 4 --json", "t3,t1,t2,t4"},
      {"hooks --plugin tie --slowest 6 --json", "t3,t1,t2,t4,t5,t6"},
      {"hooks --plugin tie --slowest 1000 --json", "t3,t1,t2,t4,t5,t6"},
      {"hooks --plugin tie --build 2 --slowest 5 --json", "t3,t1,t2,t4,t5"},
      {"hooks --plugin tie --build 1 --slowest 5 --json", ""},
      {"hooks --plugin nosuch --slowest 5 --json", ""},
      {"hooks --build 9 --slowest 5 --json", ""},
      {"hooks --plugin nosuch --json", ""},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    out o = same_everywhere(want[i].args);
    json_t *j = ids_of(&o, ids, sizeof ids);
    if (o.rc != 0 || !j || strcmp(ids, want[i].ids) != 0) {
      fprintf(stderr, "  `trace %s`: rc %d, calls %s, want %s\n", want[i].args,
              o.rc, ids, want[i].ids);
      ok = 0;
    }
    json_decref(j);
    free(o.p);
  }
  /* every combination: the first N of the unlimited answer */
  static const char *const builds[] = {"", " --build 1", " --build 2",
                                       " --build 9"};
  static const char *const plugins[] = {"", " --plugin strip", " --plugin tie",
                                        " --plugin resolver",
                                        " --plugin nosuch"};
  static const int ns[] = {1, 2, 3, 5, 100};
  for (size_t b = 0; b < 4; b++)
    for (size_t p = 0; p < 5; p++) {
      snprintf(args, sizeof args, "hooks --slowest 100000000%s%s --json",
               builds[b], plugins[p]);
      out all = same_everywhere(args);
      char every[4096];
      json_t *ja = ids_of(&all, every, sizeof every);
      json_t *hs = json_object_get(ja, "hook_calls");
      size_t n = json_array_size(hs);
      ok &= all.rc == 0 && ja != NULL;
      for (size_t i = 1; i < n; i++) /* longest first */
        ok &= json_integer_value(
                  json_object_get(json_array_get(hs, i - 1), "duration_us")) >=
              json_integer_value(
                  json_object_get(json_array_get(hs, i), "duration_us"));
      for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        snprintf(args, sizeof args, "hooks --slowest %d%s%s --json", ns[k],
                 builds[b], plugins[p]);
        out o = same_everywhere(args);
        json_t *j = ids_of(&o, ids, sizeof ids);
        size_t m = json_array_size(json_object_get(j, "hook_calls"));
        size_t len = strlen(ids);
        int good = o.rc == 0 && j &&
                   m == (n < (size_t)ns[k] ? n : (size_t)ns[k]) &&
                   strncmp(every, ids, len) == 0 &&
                   (every[len] == 0 || every[len] == ',');
        if (!good)
          fprintf(stderr, "  `trace %s`: rc %d, %zu calls %s; all: %s\n", args,
                  o.rc, m, ids, every);
        ok &= good;
        json_decref(j);
        free(o.p);
      }
      /* the text form too */
      snprintf(args, sizeof args, "hooks --slowest 2%s%s", builds[b],
               plugins[p]);
      out t = same_everywhere(args);
      ok &= t.rc == 0;
      free(t.p);
      json_decref(ja);
      free(all.p);
    }
  /* a filter that matches nothing (a typo) says so on stderr, exit 0 */
  for (int w = 0; w < 2; w++) {
    char cmd[4096], said[1024] = "";
    snprintf(cmd, sizeof cmd,
             "%s trace hooks --plugin nosuch '%s/%s' 2>&1 >/dev/null",
             SPY_TOOL_PATH, g_dir, wnames[w]);
    FILE *p = popen(cmd, "r");
    size_t got = p ? fread(said, 1, sizeof said - 1, p) : 0;
    said[got] = 0;
    int st = p ? pclose(p) : -1;
    if (!strstr(said, "no hook call of plugin 'nosuch'") || st != 0) {
      fprintf(stderr, "  `trace hooks --plugin nosuch` (%s): %d, said %s\n",
              wnames[w], st, said);
      ok = 0;
    }
  }
  return ok;
}

/* ---- the case -----------------------------------------------------------
 */

TEST(every_command_gives_the_same_answer_from_every_store) {
  snprintf(g_dir, sizeof g_dir, "/tmp/spy-tquery-XXXXXX");
  CHECK(mkdtemp(g_dir) != NULL);
  const char *pg = getenv("SPY_TEST_PG");
  if (pg)
    snprintf(g_pg, sizeof g_pg, "%s%s", pg,
             strchr(pg, '=') && !strstr(pg, "://") ? " connect_timeout=20"
                                                   : "");
  CHECK_EQ(record(), 0);

  /* builds */
  out o = same_everywhere("builds --json");
  CHECK_EQ(o.rc, 0);
  json_error_t je;
  json_t *j = json_loads(o.p, 0, &je);
  CHECK(j != NULL);
  json_t *bs = json_object_get(j, "builds");
  CHECK_EQ(json_array_size(bs), 2);
  CHECK_EQ(
      json_integer_value(json_object_get(json_array_get(bs, 0), "modules")), 2);
  CHECK_EQ(
      json_integer_value(json_object_get(json_array_get(bs, 0), "hook_calls")),
      5);
  CHECK_EQ(
      json_integer_value(json_object_get(json_array_get(bs, 1), "hook_calls")),
      2 + (json_int_t)NTIE);
  json_decref(j);
  free(o.p);
  o = same_everywhere("builds");
  CHECK_EQ(o.rc, 0);
  free(o.p);

  /* hooks: everything, then the slowest, then filtered */
  o = same_everywhere("hooks --json");
  CHECK_EQ(o.rc, 0);
  j = json_loads(o.p, 0, &je);
  CHECK(j != NULL);
  json_t *hs = json_object_get(j, "hook_calls");
  CHECK_EQ(json_array_size(hs), 7 + NTIE);
  json_int_t maxd = -1;
  for (size_t i = 0; i < json_array_size(hs); i++) {
    json_int_t d = json_integer_value(
        json_object_get(json_array_get(hs, i), "duration_us"));
    if (d > maxd)
      maxd = d;
  }
  free(o.p);
  o = same_everywhere("hooks --slowest 1 --json");
  CHECK_EQ(o.rc, 0);
  json_t *s1 = json_loads(o.p, 0, &je);
  CHECK(s1 != NULL);
  json_t *top = json_object_get(s1, "hook_calls");
  CHECK_EQ(json_array_size(top), 1);
  CHECK_EQ(json_integer_value(
               json_object_get(json_array_get(top, 0), "duration_us")),
           maxd);
  json_decref(s1);
  json_decref(j);
  free(o.p);
  o = same_everywhere("hooks --build 2 --plugin strip --json");
  CHECK_EQ(o.rc, 0);
  j = json_loads(o.p, 0, &je);
  CHECK(j != NULL);
  hs = json_object_get(j, "hook_calls");
  CHECK_EQ(json_array_size(hs), 1);
  CHECK_STR(json_string_value(json_object_get(json_array_get(hs, 0), "module")),
            "a.c");
  json_decref(j);
  free(o.p);

  /* the slowest of a build and a plugin, with ties, limits past the
   * count, a plugin and a build with no call */
  CHECK(slowest_cases());

  /* module: edges, calls in order with bytes, the diff */
  o = same_everywhere_pos("module", "a.c --build 1 --json");
  CHECK_EQ(o.rc, 0);
  j = json_loads(o.p, 0, &je);
  CHECK(j != NULL);
  json_t *imps = json_object_get(j, "imports");
  CHECK_EQ(json_array_size(imps), 1);
  CHECK_STR(
      json_string_value(json_object_get(json_array_get(imps, 0), "module")),
      "b.h");
  hs = json_object_get(j, "hook_calls");
  CHECK_EQ(json_array_size(hs), 3);
  static const char *const order[] = {"resolver", "strip", "noop"};
  for (size_t i = 0; i < 3 && i < json_array_size(hs); i++)
    CHECK_STR(
        json_string_value(json_object_get(json_array_get(hs, i), "plugin")),
        order[i]);
  json_t *strip = json_array_get(hs, 1);
  CHECK_EQ(json_integer_value(json_object_get(strip, "bytes_in")),
           sizeof a_src - 1);
  CHECK_EQ(json_integer_value(json_object_get(strip, "bytes_out")),
           sizeof a_out - 1);
  CHECK(json_is_true(json_object_get(strip, "changed")));
  json_decref(j);
  free(o.p);
  o = same_everywhere_pos("module", "b.h --json");
  CHECK_EQ(o.rc, 0);
  j = json_loads(o.p, 0, &je);
  CHECK(j != NULL);
  json_t *ims = json_object_get(j, "importers");
  CHECK_EQ(json_array_size(ims), 1);
  /* without --build: the last build that called a hook on it (1) */
  CHECK_EQ(json_integer_value(json_object_get(j, "build")), 1);
  json_decref(j);
  free(o.p);
  o = same_everywhere_pos("module", "a.c --build 1 --diff");
  CHECK_EQ(o.rc, 0);
  CHECK(strstr(o.p, "-int a(void) { return 1; } // drop me\n"
                    "-int keep(void) { return 2; }\n") == NULL);
  CHECK(strstr(o.p, "@@ -1,5 +1,5 @@\n"
                    " // a.c\n"
                    " #include \"b.h\"\n"
                    "-int a(void) { return 1; } // drop me\n"
                    "+int a(void) { return 1; }\n"
                    " int keep(void) { return 2; }\n"
                    "-int more(void) { return 3; } // drop me\n"
                    "+int more(void) { return 3; }\n") != NULL);
  free(o.p);
  o = same_everywhere_pos("module", "nosuch.c");
  CHECK_EQ(o.rc, 1);
  free(o.p);

  /* source: exact bytes, a delta's too */
  char hex[33], args[128];
  hex_of(b_src, B_LEN, hex);
  o = same_everywhere_pos("source", hex);
  CHECK_EQ(o.rc, 0);
  CHECK_EQ(o.n, B_LEN);
  CHECK(o.n == B_LEN && memcmp(o.p, b_src, B_LEN) == 0);
  free(o.p);
  hex_of(a_src2, sizeof a_src2 - 1, hex);
  o = same_everywhere_pos("source", hex);
  CHECK_EQ(o.rc, 0);
  CHECK_STR(o.p, a_src2);
  free(o.p);
  snprintf(args, sizeof args, "%s --json", hex);
  o = same_everywhere_pos("source", args);
  CHECK_EQ(o.rc, 0);
  free(o.p);
  o = same_everywhere_pos("source", "0123456789abcdef0123456789abcdef");
  CHECK_EQ(o.rc, 1);
  free(o.p);
  o = run_pos(1, "source", "not-hex");
  CHECK_EQ(o.rc, 2);
  free(o.p);

  /* the SQLite extension in the plain sqlite3 shell: spy_source decodes a
   * delta chain; hook_calls is a table with its index after close */
  char cmd[4096], buf[4096];
  snprintf(cmd, sizeof cmd,
           "sqlite3 '%s/sqlite/trace.db' '.load %s' "
           "\"SELECT count(*) FROM sources WHERE codec IN (2, 3) AND "
           "spy_source(source_id) = CAST(spy_source(source_id) AS TEXT)\" "
           "\"SELECT hex(spy_source('%s'))\" "
           "\"SELECT type FROM sqlite_master WHERE name='hook_calls'\" "
           "\"SELECT count(*) FROM hook_calls WHERE plugin_name='strip'\"",
           g_dir, SPY_SQLITE_EXT, hex);
  CHECK_EQ(tu_run_capture(cmd, buf, sizeof buf), 0);
  char want[4096] = "", *w = want;
  for (size_t i = 0; i < sizeof a_src2 - 1; i++)
    w += sprintf(w, "%02X", (unsigned char)a_src2[i]);
  char *line2 = strchr(buf, '\n');
  CHECK(line2 != NULL);
  CHECK(atoi(buf) >= 1); /* a_src2 and a_out are deltas */
  CHECK(line2 && strncmp(line2 + 1, want, strlen(want)) == 0);
  CHECK(strstr(buf, "\ntable\n3\n") != NULL);
  snprintf(cmd, sizeof cmd,
           "sqlite3 '%s/sqlite/trace.db' '.load %s' "
           "\"SELECT spy_source('0123456789abcdef0123456789abcdef')\" 2>&1",
           g_dir, SPY_SQLITE_EXT);
  CHECK(tu_run_capture(cmd, buf, sizeof buf) != 0);
  CHECK(strstr(buf, "no source 0123456789abcdef0123456789abcdef") != NULL);

  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  CHECK_EQ(system(cmd), 0);
  if (!g_pg[0])
    SKIP("the postgres part did not run (no SPY_TEST_PG)");
}

TEST_MAIN(TEST_CASE(every_command_gives_the_same_answer_from_every_store))
