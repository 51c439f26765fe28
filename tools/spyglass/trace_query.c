/* trace_query.c — the questions `spyglass trace` answers about one
 * recorded session, over any of the three stores (the reader gives the
 * same action stream for each, so the answers are the same):
 *   builds  STORE                       each build: start, duration,
 *                                       modules, hook calls
 *   hooks   STORE [--build N] [--plugin P] [--slowest N]
 *                                       hook calls in start order, or the
 *                                       N slowest
 *   module  STORE MODULE [--build N] [--diff]
 *                                       its import edges both ways and every
 *                                       hook call on it in order, with bytes
 *                                       in → out and (--diff) what each
 *                                       transform changed
 *   source  STORE ID                    a payload's exact bytes
 * Every one takes --json and --session ID. The hook calls are asked of
 * the reader as a query (spyglass/trace.h: build, plugin or module,
 * start order or the slowest, a limit) that a SQLite store answers in one
 * statement and any other store by one replay keeping only what is asked
 * for; `hooks` prints each call as it comes, holding none. */
#include "trace_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "json.h"
#include "line_diff.h"
#include "opts.h"
#include "spyglass/trace.h"

/* ---- shared ------------------------------------------------------------- */

static int open_store(const char *store, const char *session,
                      spy_trace_reader **r) {
  int rc = spy_trace_reader_open(store, session, r);
  if (rc < 0) {
    fprintf(stderr, "spyglass trace: %s (%s)\n", spy_trace_reader_error(*r),
            spy_err_name(rc));
    spy_trace_reader_close(*r);
    *r = NULL;
  }
  return rc;
}

static int read_failed(spy_trace_reader *r, int rc) {
  fprintf(stderr, "spyglass trace: %s (%s)\n", spy_trace_reader_error(r),
          spy_err_name(rc));
  spy_trace_reader_close(r);
  return EXIT_FAIL;
}

static void warn_past(spy_trace_reader *r) {
  if (spy_trace_reader_warning(r))
    fprintf(stderr, "spyglass trace: warning: %s\n",
            spy_trace_reader_warning(r));
}

static void fmt_time(char *out, size_t cap, uint64_t us) {
  time_t s = (time_t)(us / 1000000);
  struct tm tm;
  gmtime_r(&s, &tm);
  size_t n = strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(out + n, cap - n, ".%03u", (unsigned)(us / 1000 % 1000));
}

/* A hook call, copied out of the reader's callback (`module` fetches
 * payloads between calls, which the callback's strings do not outlive). */
typedef struct call {
  uint32_t build;
  char *hook, *plugin, *module, *call_id;
  uint64_t started_us, ended_us;
  int has_input, has_output;
  uint64_t input[2], output[2];
} call;

typedef struct calls {
  call *v;
  size_t n, cap;
  int oom;
} calls;

static uint64_t dur(const spy_trace_hook_call *h) {
  return h->ended_us > h->started_us ? h->ended_us - h->started_us : 0;
}

/* The reader's view of a copied call. */
static spy_trace_hook_call view(const call *c) {
  return (spy_trace_hook_call){c->build,
                               c->hook,
                               c->plugin,
                               c->module,
                               c->call_id,
                               c->started_us,
                               c->ended_us,
                               c->has_input,
                               c->has_output,
                               {c->input[0], c->input[1]},
                               {c->output[0], c->output[1]}};
}

static int on_call(void *arg, const spy_trace_hook_call *h) {
  calls *cs = arg;
  if (cs->n == cs->cap) {
    size_t cap = cs->cap ? 2 * cs->cap : 256;
    call *g = realloc(cs->v, cap * sizeof *g);
    if (!g) {
      cs->oom = 1;
      return 1;
    }
    cs->v = g;
    cs->cap = cap;
  }
  call *c = &cs->v[cs->n];
  *c = (call){h->build,
              strdup(h->hook),
              strdup(h->plugin),
              strdup(h->module),
              strdup(h->call_id),
              h->started_us,
              h->ended_us,
              h->has_input,
              h->has_output,
              {h->input[0], h->input[1]},
              {h->output[0], h->output[1]}};
  if (!c->hook || !c->plugin || !c->module || !c->call_id) {
    free(c->hook);
    free(c->plugin);
    free(c->module);
    free(c->call_id);
    cs->oom = 1;
    return 1;
  }
  cs->n++;
  return 0;
}

static void calls_free(calls *cs) {
  for (size_t i = 0; i < cs->n; i++) {
    free(cs->v[i].hook);
    free(cs->v[i].plugin);
    free(cs->v[i].module);
    free(cs->v[i].call_id);
  }
  free(cs->v);
}

static void json_hash(json_out *j, const char *key, int has,
                      const uint64_t h[2]) {
  jw_key(j, key);
  if (!has) {
    jw_null(j);
    return;
  }
  char hex[33];
  spy_trace_hash_hex(h, hex);
  jw_str(j, hex);
}

/* The fields `hooks` and `module` both print for a call, in this order. */
static void put_call_timing(json_out *j, const spy_trace_hook_call *c) {
  jw_key(j, "call_id");
  jw_str(j, c->call_id);
  jw_key(j, "started_us");
  jw_uint(j, c->started_us);
  jw_key(j, "duration_us");
  jw_uint(j, dur(c));
  json_hash(j, "input_source_id", c->has_input, c->input);
}

/* ---- builds --------------------------------------------------------------
 */

typedef struct bstat {
  uint64_t started, ended, modules, hook_calls, actions;
  int seen;
} bstat;

static void help_builds(FILE *f) {
  fprintf(f,
          "usage: spyglass trace builds STORE [--session ID] [--json]\n\n"
          "Lists the builds of the session: build number, start time (UTC),\n"
          "duration, modules in its module graph, hook calls, actions.\n");
}

int trace_builds(int argc, char **argv) {
  const char *store = NULL, *session = NULL;
  int as_json = 0;
  const cli_opt opts[] = {
      {"--json", CLI_FLAG, &as_json, 0, 0, 0, NULL},
      {"--session", CLI_STR, &session, 0, 0, 0, "a session id"},
  };
  int prc =
      cli_parse("trace builds", argc, argv, opts, sizeof opts / sizeof opts[0],
                &store, 1, NULL, help_builds);
  if (prc)
    return prc == 1 ? EXIT_OK : EXIT_USAGE;
  if (!store) {
    help_builds(stderr);
    return EXIT_USAGE;
  }
  spy_trace_reader *r;
  if (open_store(store, session, &r) < 0)
    return EXIT_FAIL;
  bstat *bs = NULL;
  size_t nb = 0;
  spy_trace_action a;
  int rc;
  while ((rc = spy_trace_reader_next(r, &a)) == 1) {
    if (!a.build)
      continue;
    if (a.build > 1000000) {
      rc = SPY_EBADVALUE;
      fprintf(stderr, "spyglass trace: build number %u is out of range\n",
              a.build);
      break;
    }
    if (a.build > nb) {
      bstat *g = realloc(bs, a.build * sizeof *g);
      if (!g) {
        rc = SPY_ENOMEM;
        break;
      }
      memset(g + nb, 0, (a.build - nb) * sizeof *g);
      bs = g;
      nb = a.build;
    }
    bstat *b = &bs[a.build - 1];
    b->actions++;
    if (a.kind == &spy_kind_build_start) {
      b->seen = 1;
      b->started = a.ts_us;
    } else if (a.kind == &spy_kind_build_end)
      b->ended = a.ts_us;
    else if (a.kind == &spy_kind_module_graph_ready) {
      const spy_trace_val *m = spy_trace_get(&a, "modules");
      b->modules = m ? m->n : 0;
    } else if (a.kind && a.kind->role == SPY_ROLE_HOOK_END)
      b->hook_calls++;
  }
  if (rc < 0) {
    free(bs);
    return read_failed(r, rc);
  }
  warn_past(r);
  json_out j;
  if (as_json) {
    jw_init(&j, stdout);
    jw_obj_begin(&j);
    jw_key(&j, "builds");
    jw_arr_begin(&j);
  } else
    printf("%-6s %-23s %12s %8s %10s %8s\n", "build", "started (UTC)",
           "duration ms", "modules", "hook calls", "actions");
  for (size_t i = 0; i < nb; i++) {
    bstat *b = &bs[i];
    if (!b->seen)
      continue;
    if (as_json) {
      jw_obj_begin(&j);
      jw_key(&j, "build");
      jw_uint(&j, i + 1);
      jw_key(&j, "started_us");
      jw_uint(&j, b->started);
      jw_key(&j, "ended_us");
      if (b->ended)
        jw_uint(&j, b->ended);
      else
        jw_null(&j);
      jw_key(&j, "modules");
      jw_uint(&j, b->modules);
      jw_key(&j, "hook_calls");
      jw_uint(&j, b->hook_calls);
      jw_key(&j, "actions");
      jw_uint(&j, b->actions);
      jw_obj_end(&j);
    } else {
      char t[64], d[32] = "unfinished";
      fmt_time(t, sizeof t, b->started);
      if (b->ended)
        snprintf(d, sizeof d, "%.1f",
                 (double)(b->ended > b->started ? b->ended - b->started : 0) /
                     1e3);
      printf("%-6zu %-23s %12s %8llu %10llu %8llu\n", i + 1, t, d,
             (unsigned long long)b->modules, (unsigned long long)b->hook_calls,
             (unsigned long long)b->actions);
    }
  }
  if (as_json) {
    jw_arr_end(&j);
    jw_obj_end(&j);
    jw_newline(&j);
  }
  free(bs);
  spy_trace_reader_close(r);
  return EXIT_OK;
}

/* ---- hooks ---------------------------------------------------------------
 */

static void help_hooks(FILE *f) {
  fprintf(f, "usage: spyglass trace hooks STORE [--build N] [--plugin P] "
             "[--slowest N]\n"
             "                            [--session ID] [--json]\n\n"
             "Lists hook calls in the order they started (--slowest N: the N\n"
             "longest, longest first; equal ones in start order): build, "
             "hook,\nplugin, duration in µs, the module (or request) it was "
             "called on.\n");
}

typedef struct hooks_out {
  int as_json, begun;
  uint64_t n; /* calls printed */
  json_out j;
} hooks_out;

/* The header or the JSON's opening, before the first call (none when the
 * store fails before it). */
static void hooks_begin(hooks_out *o) {
  if (o->begun)
    return;
  o->begun = 1;
  if (o->as_json) {
    jw_init(&o->j, stdout);
    jw_obj_begin(&o->j);
    jw_key(&o->j, "hook_calls");
    jw_arr_begin(&o->j);
  } else
    printf("%-6s %-13s %-28s %10s  %s\n", "build", "hook", "plugin", "µs",
           "module");
}

/* Prints one call as the reader gives it (nothing is held). */
static int put_hook(void *arg, const spy_trace_hook_call *c) {
  hooks_out *o = arg;
  json_out *j = &o->j;
  hooks_begin(o);
  o->n++;
  if (!o->as_json) {
    printf("%-6u %-13s %-28s %10llu  %s\n", c->build, c->hook, c->plugin,
           (unsigned long long)dur(c), c->module);
    return 0;
  }
  jw_obj_begin(j);
  jw_key(j, "build");
  jw_uint(j, c->build);
  jw_key(j, "hook");
  jw_str(j, c->hook);
  jw_key(j, "plugin");
  jw_str(j, c->plugin);
  jw_key(j, "module");
  jw_str(j, c->module);
  put_call_timing(j, c);
  json_hash(j, "output_source_id", c->has_output, c->output);
  jw_obj_end(j);
  return 0;
}

int trace_hooks(int argc, char **argv) {
  const char *store = NULL, *session = NULL, *plugin = NULL;
  int as_json = 0, build = 0, slowest = 0;
  const cli_opt opts[] = {
      {"--json", CLI_FLAG, &as_json, 0, 0, 0, NULL},
      {"--session", CLI_STR, &session, 0, 0, 0, "a session id"},
      {"--build", CLI_INT, &build, 1, 1000000, 0, "a build number"},
      {"--plugin", CLI_STR, &plugin, 0, 0, 0, "a plugin name"},
      {"--slowest", CLI_INT, &slowest, 1, 100000000, 0, "a number of calls"},
  };
  int prc =
      cli_parse("trace hooks", argc, argv, opts, sizeof opts / sizeof opts[0],
                &store, 1, NULL, help_hooks);
  if (prc)
    return prc == 1 ? EXIT_OK : EXIT_USAGE;
  if (!store) {
    help_hooks(stderr);
    return EXIT_USAGE;
  }
  spy_trace_reader *r;
  if (open_store(store, session, &r) < 0)
    return EXIT_FAIL;
  spy_trace_call_query q = {.build = (uint32_t)build,
                            .plugin = plugin,
                            .order = slowest ? SPY_TRACE_CALLS_SLOWEST
                                             : SPY_TRACE_CALLS_STARTED,
                            .limit = (uint64_t)slowest};
  hooks_out o = {.as_json = as_json};
  int rc = spy_trace_reader_hook_calls_query(r, &q, put_hook, &o);
  if (rc < 0) {
    fflush(stdout);
    return read_failed(r, rc);
  }
  warn_past(r);
  hooks_begin(&o);
  if (as_json) {
    jw_arr_end(&o.j);
    jw_obj_end(&o.j);
    jw_newline(&o.j);
  }
  if (!o.n && (plugin || build)) /* a typo in a name finds nothing */
    fprintf(stderr,
            "spyglass: no hook call%s%s%s%s%.0d in the session "
            "(`spyglass trace summary %s` lists its builds and plugins)\n",
            plugin ? " of plugin '" : "", plugin ? plugin : "",
            plugin ? "'" : "", build ? " in build " : "", build, store);
  spy_trace_reader_close(r);
  return EXIT_OK;
}

/* ---- module --------------------------------------------------------------
 */

typedef struct edge {
  char *other, *kind;
  int out; /* 1: MODULE imports other; 0: other imports MODULE */
} edge;

typedef struct edges {
  const char *module;
  edge *v;
  size_t n, cap;
  int oom, found;
} edges;

static int on_edge(void *arg, const char *from, const char *to,
                   const char *kind) {
  edges *es = arg;
  int out = strcmp(from, es->module) == 0;
  if (!out && strcmp(to, es->module) != 0)
    return 0;
  if (es->n == es->cap) {
    size_t cap = es->cap ? 2 * es->cap : 16;
    edge *g = realloc(es->v, cap * sizeof *g);
    if (!g) {
      es->oom = 1;
      return 1;
    }
    es->v = g;
    es->cap = cap;
  }
  edge *e = &es->v[es->n];
  e->other = strdup(out ? to : from);
  e->kind = strdup(kind);
  e->out = out;
  if (!e->other || !e->kind) {
    free(e->other);
    free(e->kind);
    es->oom = 1;
    return 1;
  }
  es->n++;
  return 0;
}

/* The edges one way (out: what the module imports) as a JSON array. */
static void json_edges(json_out *j, const char *key, const edges *es, int out) {
  jw_key(j, key);
  jw_arr_begin(j);
  for (size_t i = 0; i < es->n; i++)
    if (es->v[i].out == out) {
      jw_obj_begin(j);
      jw_key(j, "module");
      jw_str(j, es->v[i].other);
      jw_key(j, "kind");
      jw_str(j, es->v[i].kind);
      jw_obj_end(j);
    }
  jw_arr_end(j);
}

static int on_module(void *arg, const char *module, int is_external) {
  (void)is_external;
  edges *es = arg;
  if (strcmp(module, es->module) == 0) {
    es->found = 1;
    return 1;
  }
  return 0;
}

static void help_module(FILE *f) {
  fprintf(f,
          "usage: spyglass trace module STORE MODULE [--build N] [--diff]\n"
          "                             [--session ID] [--json]\n\n"
          "MODULE's import edges (what it imports, what imports it) and every\n"
          "hook call on it in the order they started: hook, plugin, duration,\n"
          "bytes in → out. --diff adds the unified diff of what each call\n"
          "changed. Without --build: the last build that called a hook on\n"
          "MODULE.\n"
          "exit codes: 0 ok, 1 the store cannot be read or MODULE is not in\n"
          "the build, 2 bad usage\n");
}

/* A payload's bytes, copied (the reader's buffer is reused). */
static int fetch_copy(spy_trace_reader *r, int has, const uint64_t h[2],
                      char **p, size_t *n) {
  *p = NULL;
  *n = 0;
  if (!has)
    return 0;
  const char *s;
  size_t len;
  int rc = spy_trace_reader_source(r, h, &s, &len);
  if (rc < 0)
    return rc;
  *p = malloc(len ? len : 1);
  if (!*p)
    return SPY_ENOMEM;
  memcpy(*p, s, len);
  *n = len;
  return 0;
}

int trace_module(int argc, char **argv) {
  const char *pos[2] = {NULL, NULL}, *session = NULL;
  int as_json = 0, build = 0, diff = 0, npos = 0;
  const cli_opt opts[] = {
      {"--json", CLI_FLAG, &as_json, 0, 0, 0, NULL},
      {"--diff", CLI_FLAG, &diff, 0, 0, 0, NULL},
      {"--session", CLI_STR, &session, 0, 0, 0, "a session id"},
      {"--build", CLI_INT, &build, 1, 1000000, 0, "a build number"},
  };
  int prc = cli_parse("trace module", argc, argv, opts,
                      sizeof opts / sizeof opts[0], pos, 2, &npos, help_module);
  if (prc)
    return prc == 1 ? EXIT_OK : EXIT_USAGE;
  if (npos != 2) {
    help_module(stderr);
    return EXIT_USAGE;
  }
  const char *module = pos[1];
  spy_trace_reader *r;
  if (open_store(pos[0], session, &r) < 0)
    return EXIT_FAIL;
  /* its calls in start order (every build's unless --build) */
  calls cs = {0};
  edges es = {.module = module};
  spy_trace_call_query q = {.build = (uint32_t)build,
                            .module = module,
                            .order = SPY_TRACE_CALLS_STARTED};
  int rc = spy_trace_reader_hook_calls_query(r, &q, on_call, &cs);
  if (rc == 0 && cs.oom)
    rc = SPY_ENOMEM;
  uint32_t b = (uint32_t)build;
  for (size_t i = 0; !build && i < cs.n; i++)
    if (cs.v[i].build > b)
      b = cs.v[i].build;
  /* only the chosen build's calls */
  size_t k = 0;
  for (size_t i = 0; i < cs.n; i++) {
    if (cs.v[i].build == b)
      cs.v[k++] = cs.v[i];
    else {
      free(cs.v[i].hook);
      free(cs.v[i].plugin);
      free(cs.v[i].module);
      free(cs.v[i].call_id);
    }
  }
  cs.n = k;
  if (rc == 0 && b)
    rc = spy_trace_reader_modules(r, b, on_module, &es);
  if (rc == 0 && b)
    rc = spy_trace_reader_imports(r, b, on_edge, &es);
  if (rc == 0 && es.oom)
    rc = SPY_ENOMEM;
  int ok = rc == 0;
  if (ok && !cs.n && !es.found) {
    if (b)
      fprintf(stderr, "spyglass trace: module '%s' is not in build %u\n",
              module, b);
    else
      fprintf(stderr, "spyglass trace: no hook call on module '%s'\n", module);
    ok = 0;
  }
  if (ok) {
    warn_past(r);
    json_out j;
    if (as_json) {
      jw_init(&j, stdout);
      jw_obj_begin(&j);
      jw_key(&j, "module");
      jw_str(&j, module);
      jw_key(&j, "build");
      jw_uint(&j, b);
      json_edges(&j, "imports", &es, 1);
      json_edges(&j, "importers", &es, 0);
      jw_key(&j, "hook_calls");
      jw_arr_begin(&j);
    } else {
      printf("module %s (build %u)\n\nimports:\n", module, b);
      for (size_t i = 0; i < es.n; i++)
        if (es.v[i].out)
          printf("  -> %s (%s)\n", es.v[i].other, es.v[i].kind);
      printf("imported by:\n");
      for (size_t i = 0; i < es.n; i++)
        if (!es.v[i].out)
          printf("  <- %s (%s)\n", es.v[i].other, es.v[i].kind);
      printf("\nhook calls:\n%-4s %-13s %-28s %10s  %s\n", "#", "hook",
             "plugin", "µs", "bytes in -> out");
    }
    for (size_t i = 0; i < cs.n && rc == 0; i++) {
      const call *c = &cs.v[i];
      const spy_trace_hook_call h = view(c);
      char *in = NULL, *out = NULL;
      size_t nin = 0, nout = 0;
      rc = fetch_copy(r, c->has_input, c->input, &in, &nin);
      if (rc == 0)
        rc = fetch_copy(r, c->has_output, c->output, &out, &nout);
      if (rc < 0) {
        free(in);
        break;
      }
      if (as_json) {
        jw_obj_begin(&j);
        jw_key(&j, "hook");
        jw_str(&j, c->hook);
        jw_key(&j, "plugin");
        jw_str(&j, c->plugin);
        put_call_timing(&j, &h);
        jw_key(&j, "bytes_in");
        if (c->has_input)
          jw_uint(&j, nin);
        else
          jw_null(&j);
        json_hash(&j, "output_source_id", c->has_output, c->output);
        jw_key(&j, "bytes_out");
        if (c->has_output)
          jw_uint(&j, nout);
        else
          jw_null(&j);
        jw_key(&j, "changed");
        jw_bool(&j, c->has_input && c->has_output &&
                        (nin != nout || memcmp(in, out, nin) != 0));
        jw_obj_end(&j);
      } else {
        char bi[32] = "-", bo[32] = "-";
        if (c->has_input)
          snprintf(bi, sizeof bi, "%zu", nin);
        if (c->has_output)
          snprintf(bo, sizeof bo, "%zu", nout);
        printf("%-4zu %-13s %-28s %10llu  %s -> %s\n", i + 1, c->hook,
               c->plugin, (unsigned long long)dur(&h), bi, bo);
        if (diff && c->has_input && c->has_output) {
          char an[512], bn[512];
          snprintf(an, sizeof an, "%s (before %s)", module, c->plugin);
          snprintf(bn, sizeof bn, "%s (after %s)", module, c->plugin);
          fflush(stdout);
          if (line_diff(stdout, an, in, nin, bn, out, nout) < 0)
            rc = SPY_ENOMEM;
        }
      }
      free(in);
      free(out);
    }
    if (rc < 0)
      fprintf(stderr, "spyglass trace: %s (%s)\n", spy_trace_reader_error(r),
              spy_err_name(rc));
    else if (as_json) {
      jw_arr_end(&j);
      jw_obj_end(&j);
      jw_newline(&j);
    }
  } else if (rc < 0)
    fprintf(stderr, "spyglass trace: %s (%s)\n", spy_trace_reader_error(r),
            spy_err_name(rc));
  for (size_t i = 0; i < es.n; i++) {
    free(es.v[i].other);
    free(es.v[i].kind);
  }
  free(es.v);
  calls_free(&cs);
  spy_trace_reader_close(r);
  return ok && rc == 0 ? EXIT_OK : EXIT_FAIL;
}

/* ---- source --------------------------------------------------------------
 */

static void help_source(FILE *f) {
  fprintf(f, "usage: spyglass trace source STORE ID [--session ID] [--json]\n\n"
             "Writes the payload with content id ID (32 hex digits, as in\n"
             "`trace hooks --json` or a *_source_id column) to stdout: its\n"
             "exact bytes, delta chains resolved. --json: {id, size, text}\n"
             "(bytes that are not UTF-8 shown as U+FFFD; text is exact when\n"
             "\"utf8\" is true).\n"
             "exit codes: 0 ok, 1 unreadable store or no such source, 2 bad "
             "usage\n");
}

static int parse_id(const char *s, uint64_t h[2]) {
  if (strlen(s) != 32)
    return -1;
  h[0] = h[1] = 0;
  for (int i = 0; i < 32; i++) {
    int c = s[i], v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      return -1;
    h[i / 16] = h[i / 16] << 4 | (uint64_t)v;
  }
  return 0;
}

/* True if p[0..n) is well-formed UTF-8. */
static int is_utf8(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    size_t len = c < 0x80                ? 1
                 : c >= 0xc2 && c < 0xe0 ? 2
                 : c >= 0xe0 && c < 0xf0 ? 3
                 : c >= 0xf0 && c < 0xf5 ? 4
                                         : 0;
    if (!len || i + len > n)
      return 0;
    for (size_t k = 1; k < len; k++)
      if ((p[i + k] & 0xc0) != 0x80)
        return 0;
    if (len == 3) {
      unsigned cp = (c & 15u) << 12 | (p[i + 1] & 63u) << 6 | (p[i + 2] & 63u);
      if (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))
        return 0;
    } else if (len == 4) {
      unsigned cp = (c & 7u) << 18 | (p[i + 1] & 63u) << 12 |
                    (p[i + 2] & 63u) << 6 | (p[i + 3] & 63u);
      if (cp < 0x10000 || cp > 0x10ffff)
        return 0;
    }
    i += len;
  }
  return 1;
}

int trace_source(int argc, char **argv) {
  const char *pos[2] = {NULL, NULL}, *session = NULL;
  int as_json = 0, npos = 0;
  const cli_opt opts[] = {
      {"--json", CLI_FLAG, &as_json, 0, 0, 0, NULL},
      {"--session", CLI_STR, &session, 0, 0, 0, "a session id"},
  };
  int prc = cli_parse("trace source", argc, argv, opts,
                      sizeof opts / sizeof opts[0], pos, 2, &npos, help_source);
  if (prc)
    return prc == 1 ? EXIT_OK : EXIT_USAGE;
  if (npos != 2) {
    help_source(stderr);
    return EXIT_USAGE;
  }
  uint64_t h[2];
  if (parse_id(pos[1], h) < 0) {
    fprintf(stderr, "spyglass trace source: ID wants 32 hex digits, not '%s'\n",
            pos[1]);
    return EXIT_USAGE;
  }
  spy_trace_reader *r;
  if (open_store(pos[0], session, &r) < 0)
    return EXIT_FAIL;
  const char *p;
  size_t n;
  int rc = spy_trace_reader_source(r, h, &p, &n);
  if (rc == SPY_ENOENT) {
    fprintf(stderr, "spyglass trace: no source %s in the store\n", pos[1]);
    spy_trace_reader_close(r);
    return EXIT_FAIL;
  }
  if (rc < 0)
    return read_failed(r, rc);
  if (as_json) {
    char hex[33];
    spy_trace_hash_hex(h, hex);
    json_out j;
    jw_init(&j, stdout);
    jw_obj_begin(&j);
    jw_key(&j, "id");
    jw_str(&j, hex);
    jw_key(&j, "size");
    jw_uint(&j, n);
    jw_key(&j, "utf8");
    jw_bool(&j, is_utf8((const unsigned char *)p, n));
    jw_key(&j, "text");
    jw_strn(&j, p, n);
    jw_obj_end(&j);
    jw_newline(&j);
  } else if (fwrite(p, 1, n, stdout) != n || fflush(stdout) != 0) {
    fprintf(stderr, "spyglass trace: writing the source failed\n");
    spy_trace_reader_close(r);
    return EXIT_FAIL;
  }
  spy_trace_reader_close(r);
  return EXIT_OK;
}
