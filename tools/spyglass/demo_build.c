/* demo_build.c — `spyglass demo build SRC_DIR`: a small, real build over a
 * directory of C sources, traced like a bundler's build.
 *
 * Modules are the .c and .h files; #include "x" / <x> edges that resolve
 * inside SRC_DIR make the module graph (one resolveId call per include).
 * Each module is loaded, then run through a chain of transform plugins:
 * most pass most modules through unchanged, strip-comments and
 * collapse-whitespace really rewrite. Modules are grouped into one chunk
 * per directory, each chunk is rendered (concatenation, through a
 * renderChunk plugin) and written as an asset. Every hook call is traced
 * with its input and output source. The "naive" trace mode is the
 * reference's "before": each action serialised to JSON with its source
 * inline, parsed back and serialised again, and written on the build
 * thread.
 *
 * Module texts and chunks live in reference-counted blocks (shared
 * texts), which the traced build lends to the trace instead of having
 * each payload copied at its emit (spy_trace_text.release): a block is
 * freed when the build and the trace are both done with it — how a
 * bundler that keeps its sources in shared strings traces for free. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "demo_build.h"
#include "opts.h"
#include "spyglass/trace_feed.h"
#include "store/store.h"

typedef struct module {
  char *path; /* relative to src_dir */
  char *code; /* after the transform chain */
  size_t len;
  uint32_t *imports, nimports, cap_imports;
  char **requests;
  uint32_t *importers, nimporters, cap_importers;
  uint32_t chunk;
  char *raw; /* watch mode: the source as loaded */
  size_t rawlen;
  int64_t mtime_ns, size;
  uint64_t ino;
  int dirty; /* watch mode: 1 changed, 2 an importer of a changed one */
} module;

typedef struct cached {
  char *path, *raw, *code;
  size_t rawlen, len;
  int64_t mtime_ns, size;
  uint64_t ino;
  char **importers; /* paths owned by other entries */
  uint32_t nimporters;
} cached;

/* A thread's CPU time, run-queue wait and faults (bench trace). */
typedef struct thread_use {
  uint64_t cpu_ns, rq_ns, minflt, majflt, nvcsw, nivcsw;
} thread_use;

typedef struct demo {
  const demo_build_opts *o;
  spy_trace *t;
  FILE *naive;
  spy__buf nbuf;
  spy_trace_arena narena;
  thread_use use0; /* the build thread's use when the build began */
  uint64_t nseq, naive_ns, naive_failed;
  module *mods;
  uint32_t nmods, cap_mods;
  uint32_t *table; /* path hash table of module index + 1 */
  uint32_t tcap;
  uint64_t calls, actions;
  spy__buf tmp;
  cached *cache; /* watch mode: the last build's modules, by path */
  uint32_t ncache;
  int quiet; /* resolving a reused module's includes: not traced */
} demo;

/* ---- tracing: the session or the naive baseline ------------------------ */

/* The action's JSON-lines form into d->nbuf (the public formatter; the
 * buffer grows when an action needs more). 0 or SPY_ENOMEM. */
static int naive_json(demo *d, const spy_trace_action *a) {
  for (;;) {
    int64_t n = spy_trace_json_format(a, "naive", d->nbuf.p, d->nbuf.cap);
    if (n < 0)
      return (int)n;
    if ((size_t)n <= d->nbuf.cap) {
      d->nbuf.len = (size_t)n;
      return 0;
    }
    if (spy__buf_reserve(&d->nbuf, (size_t)n) < 0)
      return SPY_ENOMEM;
  }
}

/* The "before": serialise (tree -> JSON), parse it back into a value,
 * serialise again, write and flush — all on the calling thread. */
static void naive_emit(demo *d, const spy_trace_kind *k, const void *act) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint8_t stackbuf[4096];
  int64_t need = spy_trace_encode(k, act, ++d->nseq, spy__now_us(), 1, stackbuf,
                                  sizeof stackbuf);
  uint8_t *p =
      need > (int64_t)sizeof stackbuf ? malloc((size_t)need) : stackbuf;
  if (!p)
    return;
  if (p != stackbuf)
    spy_trace_encode(k, act, d->nseq, spy__now_us(), 1, p, (size_t)need);
  spy_trace_arena_reset(&d->narena);
  spy_trace_action a;
  spy_trace_action b;
  if (spy_trace_decode(p, (size_t)need, &d->narena, &a) > 0 &&
      naive_json(d, &a) == 0 &&
      spy_trace_json_parse(d->nbuf.p, d->nbuf.len, &d->narena, &b) == 0 &&
      naive_json(d, &b) == 0) {
    fwrite(d->nbuf.p, 1, d->nbuf.len, d->naive);
    fputc('\n', d->naive);
    if (fflush(d->naive) != 0)
      d->naive_failed++;
  } else
    d->naive_failed++;
  if (p != stackbuf)
    free(p);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  d->naive_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000 +
                            (t1.tv_nsec - t0.tv_nsec));
}

#define EMIT(d, snake, ...)                                                    \
  do {                                                                         \
    (d)->actions++;                                                            \
    if ((d)->naive)                                                            \
      naive_emit((d), &spy_kind_##snake, &(spy_act_##snake){__VA_ARGS__});     \
    else                                                                       \
      spy_emit_##snake((d)->t, &(spy_act_##snake){__VA_ARGS__});               \
  } while (0)

static int tracing(const demo *d) {
  return !d->quiet && (d->naive || spy_trace_on(d->t));
}

static spy_trace_text TX(const char *p, size_t n) {
  return (spy_trace_text){p, n, NULL, NULL};
}

/* ---- shared texts ---------------------------------------------------------
 * A text's bytes follow its reference count; text_new hands out the bytes
 * (NUL-terminated) with one reference, the build's. */
typedef struct shared_text {
  _Atomic uint32_t refs;
  uint32_t pad;
  char bytes[];
} shared_text;

static shared_text *text_of(const char *p) {
  return (shared_text *)(void *)(p - offsetof(shared_text, bytes));
}

static char *text_new(size_t n) {
  shared_text *s = malloc(sizeof *s + n + 1);
  if (!s)
    return NULL;
  atomic_init(&s->refs, 1);
  s->bytes[n] = 0;
  return s->bytes;
}

static void text_unref(void *owner) {
  shared_text *s = owner;
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
    free(s);
}

/* Drops the build's reference (p NULL: nothing). */
static void text_free(char *p) {
  if (p)
    text_unref(text_of(p));
}

/* A text lent to the trace: one more reference, dropped by the session
 * (only call it when the session is on: a disabled one releases nothing). */
static spy_trace_text LEND(const char *p, size_t n) {
  shared_text *s = text_of(p);
  atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
  return (spy_trace_text){p, n, text_unref, s};
}

/* A payload for an emit: lent to a session that records, else as is. */
#define SRC(d, p, n) ((d)->naive ? TX((p), (n)) : LEND((p), (n)))

/* A whole file as a shared text, or NULL (errno set). */
static char *text_slurp(const char *path, size_t *n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0)
    return NULL;
  char *p = NULL;
  if (fstat(fd, &sb) == 0 && (p = text_new((size_t)sb.st_size))) {
    size_t got = 0, want = (size_t)sb.st_size;
    while (got < want) {
      ssize_t k = read(fd, p + got, want - got);
      if (k <= 0)
        break;
      got += (size_t)k;
    }
    p[got] = 0; /* a file that shrank meanwhile: what was read */
    *n = got;
  }
  close(fd);
  return p;
}

/* ---- scanning ----------------------------------------------------------- */

static uint64_t hstr(const char *s) {
  uint64_t h[2];
  spy_trace_hash(s, strlen(s), h);
  return h[1];
}

static int add_module(demo *d, const char *rel) {
  if (d->nmods == d->cap_mods) {
    d->cap_mods = d->cap_mods ? 2 * d->cap_mods : 1024;
    module *g = realloc(d->mods, d->cap_mods * sizeof *g);
    if (!g)
      return SPY_ENOMEM;
    d->mods = g;
  }
  d->mods[d->nmods++] = (module){.path = strdup(rel)};
  return d->mods[d->nmods - 1].path ? 0 : SPY_ENOMEM;
}

static int scan(demo *d, const char *root, const char *rel, int depth) {
  char path[8300];
  snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
  DIR *dir = opendir(path);
  if (!dir)
    return depth == 0 ? -errno : 0;
  struct dirent *e;
  int rc = 0;
  while (rc == 0 && (e = readdir(dir))) {
    if (e->d_name[0] == '.')
      continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    snprintf(path, sizeof path, "%s/%s", root, sub);
    struct stat sb;
    if (lstat(path, &sb) != 0)
      continue;
    if (S_ISDIR(sb.st_mode) && depth < 32)
      rc = scan(d, root, sub, depth + 1);
    else if (S_ISREG(sb.st_mode)) {
      size_t n = strlen(e->d_name);
      if (n > 2 && e->d_name[n - 2] == '.' &&
          (e->d_name[n - 1] == 'c' || e->d_name[n - 1] == 'h'))
        rc = add_module(d, sub);
    }
  }
  closedir(dir);
  return rc;
}

static int cmp_mod(const void *a, const void *b) {
  return strcmp(((const module *)a)->path, ((const module *)b)->path);
}

static int build_table(demo *d) {
  d->tcap = 1;
  while (d->tcap < 2 * d->nmods + 2)
    d->tcap *= 2;
  d->table = calloc(d->tcap, sizeof *d->table);
  if (!d->table)
    return SPY_ENOMEM;
  for (uint32_t i = 0; i < d->nmods; i++) {
    uint64_t j = hstr(d->mods[i].path) & (d->tcap - 1);
    while (d->table[j])
      j = (j + 1) & (d->tcap - 1);
    d->table[j] = i + 1;
  }
  return 0;
}

static int find_module(const demo *d, const char *rel) {
  uint64_t j = hstr(rel) & (d->tcap - 1);
  while (d->table[j]) {
    if (strcmp(d->mods[d->table[j] - 1].path, rel) == 0)
      return (int)d->table[j] - 1;
    j = (j + 1) & (d->tcap - 1);
  }
  return -1;
}

/* Normalises a/b/../c into a/c in place. */
static void normalise(char *p) {
  char *parts[256];
  int n = 0;
  char *save, *tok = strtok_r(p, "/", &save);
  char out[4096];
  while (tok && n < 256) {
    if (strcmp(tok, "..") == 0) {
      if (n)
        n--;
    } else if (strcmp(tok, ".") != 0)
      parts[n++] = tok;
    tok = strtok_r(NULL, "/", &save);
  }
  size_t o = 0;
  out[0] = 0;
  for (int i = 0; i < n; i++)
    o += (size_t)snprintf(out + o, sizeof out - o, "%s%s", i ? "/" : "",
                          parts[i]);
  memcpy(p, out, o + 1);
}

/* ---- plugins --------------------------------------------------------------
 */

/* Returns the rewritten source in out (reset), or 0 if unchanged. */
typedef int (*transform_fn)(const module *m, const char *src, size_t n,
                            spy__buf *out);

static int t_pass(const module *m, const char *s, size_t n, spy__buf *out) {
  (void)m, (void)s, (void)n, (void)out;
  return 0;
}

/* Rewrites only generated files (a marker on the first line). */
static int t_banner(const module *m, const char *s, size_t n, spy__buf *out) {
  (void)m;
  if (n < 12 || memcmp(s, "/* @banner", 10) != 0)
    return 0;
  out->len = 0;
  spy__buf_puts(out, "/* built by spyglass demo */\n");
  spy__buf_put(out, s, n);
  return 1;
}

static int t_strip_comments(const module *m, const char *s, size_t n,
                            spy__buf *out) {
  (void)m;
  out->len = 0;
  int changed = 0;
  for (size_t i = 0; i < n;) {
    if (s[i] == '"' || s[i] == '\'') {
      char q = s[i];
      size_t j = i + 1;
      while (j < n && s[j] != q && s[j] != '\n')
        j += s[j] == '\\' ? 2 : 1;
      j = j < n ? j + 1 : n;
      spy__buf_put(out, s + i, j - i);
      i = j;
    } else if (i + 1 < n && s[i] == '/' && s[i + 1] == '*') {
      const char *e = NULL;
      for (size_t j = i + 2; j + 1 < n; j++)
        if (s[j] == '*' && s[j + 1] == '/') {
          e = s + j + 2;
          break;
        }
      i = e ? (size_t)(e - s) : n;
      spy__buf_putc(out, ' ');
      changed = 1;
    } else if (i + 1 < n && s[i] == '/' && s[i + 1] == '/') {
      while (i < n && s[i] != '\n')
        i++;
      changed = 1;
    } else {
      size_t j = i + 1;
      while (j < n && s[j] != '"' && s[j] != '\'' && s[j] != '/')
        j++;
      spy__buf_put(out, s + i, j - i);
      i = j;
    }
  }
  return changed;
}

static int t_collapse_ws(const module *m, const char *s, size_t n,
                         spy__buf *out) {
  (void)m;
  out->len = 0;
  int changed = 0, blank_run = 0;
  size_t i = 0;
  while (i < n) {
    size_t e = i;
    while (e < n && s[e] != '\n')
      e++;
    size_t a = i, b = e;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r'))
      b--;
    changed |= b != e;
    if (a == b) {
      if (blank_run++) {
        changed = 1;
        i = e + 1;
        continue;
      }
    } else
      blank_run = 0;
    spy__buf_put(out, s + a, b - a);
    if (e < n)
      spy__buf_putc(out, '\n');
    i = e + 1;
  }
  return changed;
}

static const struct {
  const char *name;
  transform_fn fn;
} plugins[] = {
    {"demo:resolver", NULL}, /* resolveId + load */
    {"demo:banner", t_banner},     {"demo:strip-comments", t_strip_comments},
    {"demo:define-check", t_pass}, {"demo:collapse-whitespace", t_collapse_ws},
    {"demo:license-scan", t_pass}, {"demo:footer", NULL}, /* renderChunk */
};
enum { NPLUGINS = sizeof plugins / sizeof plugins[0], P_FOOTER = 6 };

/* ---- the build
 * ---------------------------------------------------------------- */

static void call_id(demo *d, char out[32]) {
  snprintf(out, 32, "c%llu", (unsigned long long)++d->calls);
}

static void sleep_us(uint32_t us) {
  if (!us)
    return;
  struct timespec ts = {us / 1000000u, (long)(us % 1000000u) * 1000};
  nanosleep(&ts, NULL);
}

/* Busy-waits us µs of wall time: a CPU-bound plugin. Its median call
 * stays put on a loaded machine, where a sleep's wake-up comes late by
 * however long the scheduler makes it wait. */
static void spin_us(uint32_t us) {
  if (!us)
    return;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do
    clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) <
         (long long)us * 1000);
}

static int add_edge(module *from, uint32_t to, const char *req) {
  if (from->nimports == from->cap_imports) {
    from->cap_imports = from->cap_imports ? 2 * from->cap_imports : 8;
    uint32_t *g = realloc(from->imports, from->cap_imports * sizeof *g);
    char **r = realloc(from->requests, from->cap_imports * sizeof *r);
    if (g)
      from->imports = g;
    if (r)
      from->requests = r;
    if (!g || !r)
      return SPY_ENOMEM;
  }
  from->requests[from->nimports] = strdup(req);
  from->imports[from->nimports++] = to;
  return 0;
}

static int add_importer(module *to, uint32_t from) {
  if (to->nimporters == to->cap_importers) {
    to->cap_importers = to->cap_importers ? 2 * to->cap_importers : 8;
    uint32_t *g = realloc(to->importers, to->cap_importers * sizeof *g);
    if (!g)
      return SPY_ENOMEM;
    to->importers = g;
  }
  to->importers[to->nimporters++] = from;
  return 0;
}

/* resolveId for every #include of module i. */
static int resolve_includes(demo *d, uint32_t i, const char *src, size_t n) {
  module *m = &d->mods[i];
  for (const char *p = src, *end = src + n; p < end;) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    if (!e)
      e = end;
    const char *q = p;
    while (q < e && (*q == ' ' || *q == '\t'))
      q++;
    if (q < e && *q == '#') {
      q++;
      while (q < e && (*q == ' ' || *q == '\t'))
        q++;
      if (e - q > 8 && memcmp(q, "include", 7) == 0) {
        q += 7;
        while (q < e && (*q == ' ' || *q == '\t'))
          q++;
        char open = q < e ? *q : 0, close = open == '<' ? '>' : '"';
        const char *r = q + 1, *re = r;
        while (re < e && *re != close)
          re++;
        if ((open == '"' || open == '<') && re < e && re - r < 1000) {
          char req[1024], cand[6000];
          snprintf(req, sizeof req, "%.*s", (int)(re - r), r);
          int to = -1;
          if (open == '"') {
            const char *slash = strrchr(m->path, '/');
            snprintf(cand, sizeof cand, "%.*s%s%s",
                     slash ? (int)(slash - m->path) : 0, m->path,
                     slash ? "/" : "", req);
            normalise(cand);
            to = find_module(d, cand);
          }
          if (to < 0) {
            snprintf(cand, sizeof cand, "%s", req);
            normalise(cand);
            to = find_module(d, cand);
          }
          char cid[32];
          call_id(d, cid);
          if (tracing(d)) {
            EMIT(d, hook_resolve_id_call_start, .importer = m->path,
                 .module_request = req, .import_kind = "import-statement",
                 .plugin_name = plugins[0].name, .plugin_id = 0,
                 .trigger = "automatic", .call_id = cid);
            EMIT(d, hook_resolve_id_call_end,
                 .resolved_id = to >= 0 ? d->mods[to].path : NULL,
                 .is_external = to >= 0 ? -1 : 1,
                 .plugin_name = plugins[0].name, .plugin_id = 0,
                 .trigger = "automatic", .call_id = cid);
          }
          if (to >= 0 && (uint32_t)to != i) {
            if (add_edge(m, (uint32_t)to, req) < 0 ||
                add_importer(&d->mods[to], i) < 0)
              return SPY_ENOMEM;
          }
        }
      }
    }
    p = e + 1;
  }
  return 0;
}

static int process_module(demo *d, uint32_t i) {
  module *m = &d->mods[i];
  char path[8192], cid[32];
  snprintf(path, sizeof path, "%s/%s", d->o->src_dir, m->path);
  call_id(d, cid);
  if (tracing(d))
    EMIT(d, hook_load_call_start, .module_id = m->path,
         .plugin_name = plugins[0].name, .plugin_id = 0, .call_id = cid);
  size_t n = 0;
  char *src = text_slurp(path, &n);
  if (!src && (src = text_new(0)))
    n = 0;
  if (!src)
    return SPY_ENOMEM;
  if (d->o->watch) { /* kept to resolve its includes in later builds */
    m->raw = malloc(n + 1);
    if (!m->raw) {
      text_free(src);
      return SPY_ENOMEM;
    }
    memcpy(m->raw, src, n + 1);
    m->rawlen = n;
  }
  if (tracing(d))
    EMIT(d, hook_load_call_end, .module_id = m->path, .content = SRC(d, src, n),
         .plugin_name = plugins[0].name, .plugin_id = 0, .call_id = cid);
  int rc = resolve_includes(d, i, src, n);
  spy__buf out = {0};
  for (int p = 1; p < P_FOOTER && rc == 0; p++) {
    call_id(d, cid);
    if (tracing(d))
      EMIT(d, hook_transform_call_start, .module_id = m->path,
           .content = SRC(d, src, n), .plugin_name = plugins[p].name,
           .plugin_id = p, .call_id = cid);
    sleep_us(
        d->o->hook_delay_us +
        (d->o->slow_plugin && strcmp(d->o->slow_plugin, plugins[p].name) == 0
             ? d->o->slow_us
             : 0));
    spin_us(d->o->hook_spin_us);
    if (d->o->work)
      d->o->work(src, n);
    int changed = plugins[p].fn(m, src, n, &out);
    if (out.err)
      rc = out.err;
    if (changed) {
      char *nsrc = text_new(out.len);
      if (!nsrc) {
        rc = SPY_ENOMEM;
        break;
      }
      memcpy(nsrc, out.p, out.len);
      text_free(src);
      src = nsrc;
      n = out.len;
    }
    if (tracing(d))
      EMIT(d, hook_transform_call_end, .module_id = m->path,
           .content = changed ? SRC(d, src, n) : TX(NULL, 0),
           .plugin_name = plugins[p].name, .plugin_id = p, .call_id = cid);
  }
  spy__buf_free(&out);
  m->code = src;
  m->len = n;
  return rc;
}

static void emit_session_meta(demo *d) {
  spy_rec_plugin_item pi[NPLUGINS];
  for (int i = 0; i < NPLUGINS; i++)
    pi[i] = (spy_rec_plugin_item){.name = plugins[i].name, .plugin_id = i};
  spy_rec_input_item in = {.name = NULL, .filename = d->o->src_dir};
  EMIT(d, session_meta, .inputs = {&in, 1}, .plugins = {pi, NPLUGINS},
       .cwd = d->o->src_dir, .platform = "neutral", .format = "esm",
       .dir = d->o->out_dir, .file = NULL);
}

static int emit_module_graph(demo *d) {
  spy_rec_module *ms = calloc(d->nmods ? d->nmods : 1, sizeof *ms);
  spy_rec_module_import **imps = calloc(d->nmods ? d->nmods : 1, sizeof *imps);
  const char ***importers = calloc(d->nmods ? d->nmods : 1, sizeof *importers);
  int rc = ms && imps && importers ? 0 : SPY_ENOMEM;
  for (uint32_t i = 0; rc == 0 && i < d->nmods; i++) {
    module *m = &d->mods[i];
    imps[i] = calloc(m->nimports + 1, sizeof **imps);
    importers[i] = calloc(m->nimporters + 1, sizeof **importers);
    if (!imps[i] || !importers[i]) {
      rc = SPY_ENOMEM;
      break;
    }
    for (uint32_t j = 0; j < m->nimports; j++)
      imps[i][j] = (spy_rec_module_import){
          d->mods[m->imports[j]].path, "import-statement", m->requests[j], 0};
    for (uint32_t j = 0; j < m->nimporters; j++)
      importers[i][j] = d->mods[m->importers[j]].path;
    ms[i] = (spy_rec_module){.id = m->path,
                             .is_external = 0,
                             .imports = {imps[i], m->nimports},
                             .importers = {importers[i], m->nimporters}};
  }
  if (rc == 0)
    EMIT(d, module_graph_ready, .modules = {ms, d->nmods});
  for (uint32_t i = 0; i < d->nmods; i++) {
    if (imps)
      free(imps[i]);
    if (importers)
      free(importers[i]);
  }
  free(ms);
  free(imps);
  free(importers);
  return rc;
}

typedef struct chunk {
  char *name;
  uint32_t *mods, n, cap;
  char *code;
  size_t len;
} chunk;

static int write_asset(const char *dir, const char *name, const char *p,
                       size_t n) {
  char path[8300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f)
    return -errno;
  int bad = fwrite(p, 1, n, f) != n;
  bad |= fclose(f) != 0;
  return bad ? SPY_EIO : 0;
}

/* The calling thread's CPU time, run-queue wait and faults so far. */
static void thread_use_now(thread_use *u) {
  memset(u, 0, sizeof *u);
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
    u->cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) {
    u->minflt = (uint64_t)ru.ru_minflt;
    u->majflt = (uint64_t)ru.ru_majflt;
    u->nvcsw = (uint64_t)ru.ru_nvcsw;
    u->nivcsw = (uint64_t)ru.ru_nivcsw;
  }
  /* schedstat: ns on the CPU, ns waiting on a run queue, timeslices */
  FILE *f = fopen("/proc/thread-self/schedstat", "r");
  if (f) {
    unsigned long long run, wait;
    if (fscanf(f, "%llu %llu", &run, &wait) == 2)
      u->rq_ns = wait;
    fclose(f);
  }
}

static double ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 +
         (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The modules of build n-1 that build n may reuse (watch mode): each one's
 * loaded source and transformed code, and what its file looked like. */
static int cmp_cached(const void *a, const void *b) {
  return strcmp(((const cached *)a)->path, ((const cached *)b)->path);
}

static cached *find_cached(demo *d, const char *path) {
  cached key = {.path = (char *)path};
  return d->ncache
             ? bsearch(&key, d->cache, d->ncache, sizeof *d->cache, cmp_cached)
             : NULL;
}

static void free_cache(demo *d) {
  for (uint32_t i = 0; i < d->ncache; i++) {
    free(d->cache[i].path);
    free(d->cache[i].raw);
    text_free(d->cache[i].code);
    free(d->cache[i].importers);
  }
  free(d->cache);
  d->cache = NULL;
  d->ncache = 0;
}

static void stat_module(demo *d, module *m) {
  char path[8300];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s", d->o->src_dir, m->path);
  if (stat(path, &sb) == 0) {
    m->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    m->size = (int64_t)sb.st_size;
    m->ino = (uint64_t)sb.st_ino;
  }
}

/* Watch mode: marks the modules build n must load and transform again —
 * new files, files whose mtime, size or inode changed, and the modules
 * that include one of them (in the new graph, and in the old one for a
 * file that is gone); reuses the rest. Builds the include graph without
 * tracing it (the dirty modules' resolveId calls are traced when they are
 * processed). */
static int plan_rebuild(demo *d) {
  int rc = 0;
  for (uint32_t i = 0; i < d->nmods; i++) {
    module *m = &d->mods[i];
    stat_module(d, m);
    cached *c = find_cached(d, m->path);
    m->dirty = !c || c->mtime_ns != m->mtime_ns || c->size != m->size ||
               c->ino != m->ino;
  }
  /* a file gone: the modules that included it */
  for (uint32_t k = 0; k < d->ncache; k++) {
    if (find_module(d, d->cache[k].path) >= 0)
      continue;
    for (uint32_t j = 0; j < d->cache[k].nimporters; j++) {
      int i = find_module(d, d->cache[k].importers[j]);
      if (i >= 0)
        d->mods[i].dirty = 1;
    }
  }
  /* the graph from the sources as they are now, silently */
  d->quiet = 1;
  for (uint32_t i = 0; i < d->nmods && rc == 0; i++) {
    module *m = &d->mods[i];
    cached *c = find_cached(d, m->path);
    size_t n = 0;
    char path[8300], *src;
    snprintf(path, sizeof path, "%s/%s", d->o->src_dir, m->path);
    if (!m->dirty && c)
      rc = resolve_includes(d, i, c->raw, c->rawlen);
    else if ((src = spy__slurp(path, &n))) {
      rc = resolve_includes(d, i, src, n);
      free(src);
    }
  }
  d->quiet = 0;
  for (uint32_t i = 0; i < d->nmods; i++) {
    module *m = &d->mods[i];
    if (m->dirty != 1)
      continue;
    for (uint32_t j = 0; j < m->nimporters; j++)
      if (!d->mods[m->importers[j]].dirty)
        d->mods[m->importers[j]].dirty = 2; /* an importer */
  }
  /* the graph is built again as the modules are processed */
  for (uint32_t i = 0; i < d->nmods; i++) {
    module *m = &d->mods[i];
    for (uint32_t j = 0; j < m->nimports; j++)
      free(m->requests[j]);
    m->nimports = 0;
    m->nimporters = 0;
  }
  return rc;
}

/* Keeps this build's modules for the next one (watch mode). */
static int keep_modules(demo *d) {
  free_cache(d);
  d->cache = calloc(d->nmods ? d->nmods : 1, sizeof *d->cache);
  if (!d->cache)
    return SPY_ENOMEM;
  for (uint32_t i = 0; i < d->nmods; i++) {
    module *m = &d->mods[i];
    cached *c = &d->cache[i];
    *c = (cached){m->path,     m->raw,  m->code, m->rawlen, m->len,
                  m->mtime_ns, m->size, m->ino,  NULL,      0};
    m->path = m->raw = m->code = NULL;
    d->ncache = i + 1;
    c->importers = calloc(m->nimporters + 1, sizeof *c->importers);
    if (!c->importers)
      return SPY_ENOMEM;
  }
  /* cache index = module index: the importers' paths the cache owns */
  for (uint32_t i = 0; i < d->nmods; i++) {
    module *m = &d->mods[i];
    for (uint32_t j = 0; j < m->nimporters; j++)
      d->cache[i].importers[d->cache[i].nimporters++] =
          d->cache[m->importers[j]].path;
  }
  return 0;
}

static void free_modules(demo *d) {
  for (uint32_t i = 0; i < d->nmods; i++) {
    module *m = &d->mods[i];
    for (uint32_t j = 0; j < m->nimports; j++)
      free(m->requests[j]);
    free(m->requests);
    free(m->imports);
    free(m->importers);
    text_free(m->code);
    free(m->raw);
    free(m->path);
  }
  free(d->mods);
  free(d->table);
  d->mods = NULL;
  d->table = NULL;
  d->nmods = d->cap_mods = 0;
}

/* One build of the session: scan, (watch: plan), load + transform,
 * graphs, chunks, render, assets, each traced inside its own BuildStart /
 * BuildEnd. */
static int one_build(demo *d, demo_build_result *res,
                     const struct timespec *start) {
  const demo_build_opts *o = d->o;
  struct timespec t0 = *start;
  int rc = scan(d, o->src_dir, "", 0);
  if (rc < 0) {
    fprintf(stderr, "spyglass demo build: cannot read %s: %s\n", o->src_dir,
            spy_strerror(rc));
    return rc;
  }
  qsort(d->mods, d->nmods, sizeof *d->mods, cmp_mod);
  if ((rc = build_table(d)) < 0)
    return rc;
  if (o->watch)
    rc = plan_rebuild(d);
  res->builds++;
  res->retransformed = 0;
  res->source_bytes = 0;
  if (d->naive) {
    d->actions++;
    naive_emit(d, &spy_kind_build_start, &(spy_act_build_start){0});
  } else if (spy_trace_on(d->t)) {
    d->actions++;
    spy_trace_build_begin(d->t);
  }

  /* load, resolve, transform (watch: only what changed, and its
   * importers; the rest as the last build left it) */
  for (uint32_t i = 0; i < d->nmods && rc == 0; i++) {
    module *m = &d->mods[i];
    cached *c = o->watch && !m->dirty ? find_cached(d, m->path) : NULL;
    if (c) {
      m->raw = c->raw;
      m->rawlen = c->rawlen;
      m->code = c->code;
      m->len = c->len;
      c->raw = c->code = NULL;
      d->quiet = 1;
      rc = resolve_includes(d, i, m->raw, m->rawlen);
      d->quiet = 0;
    } else {
      rc = process_module(d, i);
      res->retransformed++;
    }
    res->source_bytes += m->len;
  }
  if (rc == 0 && tracing(d))
    rc = emit_module_graph(d);

  /* chunks: one per directory */
  chunk *cs = NULL;
  uint32_t nc = 0;
  for (uint32_t i = 0; i < d->nmods && rc == 0; i++) {
    const char *slash = strrchr(d->mods[i].path, '/');
    size_t dl = slash ? (size_t)(slash - d->mods[i].path) : 0;
    if (!nc || strlen(cs[nc - 1].name) != (dl ? dl : 4) ||
        memcmp(cs[nc - 1].name, dl ? d->mods[i].path : "root", dl ? dl : 4)) {
      chunk *g = realloc(cs, (nc + 1) * sizeof *g);
      if (!g) {
        rc = SPY_ENOMEM;
        break;
      }
      cs = g;
      cs[nc] = (chunk){0};
      cs[nc].name = dl ? strndup(d->mods[i].path, dl) : strdup("root");
      nc++;
    }
    chunk *c = &cs[nc - 1];
    if (c->n == c->cap) {
      c->cap = c->cap ? 2 * c->cap : 16;
      uint32_t *g = realloc(c->mods, c->cap * sizeof *g);
      if (!g) {
        rc = SPY_ENOMEM;
        break;
      }
      c->mods = g;
    }
    c->mods[c->n++] = i;
    d->mods[i].chunk = nc - 1;
  }
  if (rc == 0 && tracing(d)) {
    spy_rec_chunk *rc_ = calloc(nc ? nc : 1, sizeof *rc_);
    const char ***names = calloc(nc ? nc : 1, sizeof *names);
    spy_rec_chunk_import **cimps = calloc(nc ? nc : 1, sizeof *cimps);
    for (uint32_t c = 0; rc_ && names && cimps && c < nc; c++) {
      names[c] = calloc(cs[c].n, sizeof **names);
      cimps[c] = calloc(nc, sizeof **cimps);
      uint8_t *seen = calloc(nc, 1);
      uint32_t ni = 0;
      for (uint32_t k = 0; names[c] && k < cs[c].n; k++) {
        module *m = &d->mods[cs[c].mods[k]];
        names[c][k] = m->path;
        for (uint32_t j = 0; cimps[c] && seen && j < m->nimports; j++) {
          uint32_t oc = d->mods[m->imports[j]].chunk;
          if (oc != c && !seen[oc]) {
            seen[oc] = 1;
            cimps[c][ni++] = (spy_rec_chunk_import){oc, "import-statement", 0};
          }
        }
      }
      free(seen);
      rc_[c] = (spy_rec_chunk){.chunk_id = c,
                               .name = cs[c].name,
                               .advanced_chunk_group_id = SPY_TRACE_NULL_INT,
                               .is_user_defined_entry = 0,
                               .is_async_entry = 0,
                               .entry_module = NULL,
                               .modules = {names[c], cs[c].n},
                               .reason = "common",
                               .imports = {cimps[c], ni}};
    }
    if (rc_ && names && cimps)
      EMIT(d, chunk_graph_ready, .chunks = {rc_, nc});
    for (uint32_t c = 0; names && cimps && c < nc; c++) {
      free(names[c]);
      free(cimps[c]);
    }
    free(rc_);
    free(names);
    free(cimps);
  }

  /* render */
  for (uint32_t c = 0; c < nc && rc == 0; c++) {
    size_t len = 0;
    for (uint32_t k = 0; k < cs[c].n; k++) {
      module *m = &d->mods[cs[c].mods[k]];
      len += 7 + strlen(m->path) + m->len; /* comment line + code */
    }
    char *code = text_new(len), *w = code;
    if (!code) {
      rc = SPY_ENOMEM;
      break;
    }
    for (uint32_t k = 0; k < cs[c].n; k++) {
      module *m = &d->mods[cs[c].mods[k]];
      size_t pl = strlen(m->path);
      memcpy(w, "/* ", 3);
      memcpy(w + 3, m->path, pl);
      memcpy(w + 3 + pl, " */\n", 4);
      if (m->len)
        memcpy(w + 7 + pl, m->code, m->len);
      w += 7 + pl + m->len;
    }
    char cid[32];
    call_id(d, cid);
    if (tracing(d))
      EMIT(d, hook_render_chunk_start, .plugin_name = plugins[P_FOOTER].name,
           .plugin_id = P_FOOTER, .call_id = cid, .content = SRC(d, code, len));
    if (tracing(d))
      EMIT(d, hook_render_chunk_end, .plugin_name = plugins[P_FOOTER].name,
           .plugin_id = P_FOOTER, .call_id = cid, .content = TX(NULL, 0));
    cs[c].code = code;
    cs[c].len = len;
  }

  /* assets */
  char dist[4096] = "";
  if (rc == 0 && o->out_dir) {
    snprintf(dist, sizeof dist, "%s/dist", o->out_dir);
    rc = spy__mkdirs(dist);
  }
  spy_rec_asset *as = calloc(nc ? nc : 1, sizeof *as);
  char(*fnames)[300] = calloc(nc ? nc : 1, sizeof *fnames);
  if (!as || !fnames)
    rc = SPY_ENOMEM;
  for (uint32_t c = 0; c < nc && rc == 0; c++) {
    snprintf(fnames[c], sizeof fnames[c], "%s.c", cs[c].name);
    for (char *p = fnames[c]; *p; p++)
      if (*p == '/')
        *p = '_';
    if (dist[0])
      rc =
          write_asset(dist, fnames[c], cs[c].code ? cs[c].code : "", cs[c].len);
  }
  if (rc == 0 && tracing(d)) {
    for (uint32_t c = 0; c < nc; c++) /* rendered: every chunk has code */
      as[c] = (spy_rec_asset){.chunk_id = c,
                              .content = SRC(d, cs[c].code, cs[c].len),
                              .size = (int64_t)cs[c].len,
                              .filename = fnames[c]};
    EMIT(d, assets_ready, .assets = {as, nc});
  }
  if (d->naive) {
    d->actions++;
    naive_emit(d, &spy_kind_build_end, &(spy_act_build_end){0});
  } else if (spy_trace_on(d->t)) {
    d->actions++;
    spy_trace_build_end(d->t);
  }
  res->build_ms = ms_since(&t0);
  thread_use u;
  thread_use_now(&u);
  res->build_cpu_ns = u.cpu_ns - d->use0.cpu_ns;
  res->build_rq_ns = u.rq_ns - d->use0.rq_ns;
  res->build_minflt = u.minflt - d->use0.minflt;
  res->build_majflt = u.majflt - d->use0.majflt;
  res->build_nvcsw = u.nvcsw - d->use0.nvcsw;
  res->build_nivcsw = u.nivcsw - d->use0.nivcsw;
  d->use0 = u; /* watch: the next build counts from here */
  res->modules = d->nmods;
  res->chunks = nc;
  res->edges = 0;
  for (uint32_t i = 0; i < d->nmods; i++)
    res->edges += d->mods[i].nimports;
  for (uint32_t c = 0; c < nc; c++) {
    free(cs[c].name);
    free(cs[c].mods);
    text_free(cs[c].code);
  }
  free(cs);
  free(as);
  free(fnames);
  if (rc == 0 && o->watch)
    rc = keep_modules(d);
  free_modules(d);
  return rc;
}

/* ---- watch mode ------------------------------------------------------
 */

/* Adds an inotify watch on every directory under the source tree (again
 * before each wait: a directory made since is watched from then on). */
static void watch_dirs(int fd, const char *root, const char *rel, int depth) {
  char path[8300];
  snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
  if (inotify_add_watch(fd, path,
                        IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_TO |
                            IN_MOVED_FROM | IN_MODIFY | IN_ATTRIB) < 0 ||
      depth >= 32)
    return;
  DIR *dir = opendir(path);
  if (!dir)
    return;
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (e->d_name[0] == '.')
      continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    snprintf(path, sizeof path, "%s/%s", root, sub);
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
      watch_dirs(fd, root, sub, depth + 1);
  }
  closedir(dir);
}

/* Reads what inotify has; returns 1 if anything happened to a module
 * file (.c / .h) or a directory, 0 if not, -1 on error. */
static int drain_events(int fd) {
  char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
  int hit = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0)
      return errno == EAGAIN ? hit : -1;
    for (char *p = buf; p < buf + n;) {
      const struct inotify_event *ev = (const struct inotify_event *)p;
      size_t len = ev->len ? strlen(ev->name) : 0;
      if ((ev->mask & (IN_ISDIR | IN_Q_OVERFLOW)) ||
          (len > 2 && ev->name[0] != '.' && ev->name[len - 2] == '.' &&
           (ev->name[len - 1] == 'c' || ev->name[len - 1] == 'h')))
        hit = 1;
      p += sizeof *ev + ev->len;
    }
  }
}

/* Rebuilds on every change until SIGINT or SIGTERM: waits for a change to
 * a module file, then for the tree to be quiet for debounce_ms (rapid
 * saves make one rebuild), then runs the next build of the same session.
 * SIGINT and SIGTERM are blocked in every thread (demo_build_run blocks
 * them before the trace session starts its threads) and read here from a
 * signalfd, so a signal during a build ends the session after that build.
 * Returns 0 (a signal ended it) or a negative code. */
static int demo_watch(demo *d, demo_build_result *res) {
  const demo_build_opts *o = d->o;
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
  int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  int rc = sfd < 0 || ifd < 0 ? -errno : 0;
  if (rc == 0)
    watch_dirs(ifd, o->src_dir, "", 0);
  if (rc == 0 && !o->quiet) {
    printf("build %u: %u modules, %u transformed, %.1f ms; watching %s "
           "(Ctrl-C ends the session)\n",
           res->builds, res->modules, res->retransformed, res->build_ms,
           o->src_dir);
    fflush(stdout);
  }
  uint32_t debounce = o->debounce_ms ? o->debounce_ms : 100;
  while (rc == 0) {
    struct pollfd pf[2] = {{sfd, POLLIN, 0}, {ifd, POLLIN, 0}};
    int timeout = -1, changed = 0;
    for (;;) { /* a change, then quiet for `debounce` ms */
      int n = poll(pf, 2, timeout);
      if (n < 0 && errno != EINTR) {
        rc = -errno;
        break;
      }
      if (pf[0].revents) { /* taken, so that unblocking it later is quiet */
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
          ;
        goto stop;
      }
      if (n == 0 && changed)
        break;
      if (pf[1].revents) {
        int h = drain_events(ifd);
        if (h < 0) {
          rc = -errno;
          break;
        }
        if (h) {
          changed = 1;
          timeout = (int)debounce;
        }
      }
    }
    if (rc < 0)
      break;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = one_build(d, res, &t0);
    watch_dirs(ifd, o->src_dir, "", 0);
    if (rc == 0 && !o->quiet) {
      printf("build %u: %u modules, %u transformed, %.1f ms\n", res->builds,
             res->modules, res->retransformed, res->build_ms);
      fflush(stdout);
    }
  }
stop:
  if (sfd >= 0)
    close(sfd);
  if (ifd >= 0)
    close(ifd);
  return rc;
}

int demo_build_run(const demo_build_opts *o, demo_build_result *res) {
  memset(res, 0, sizeof *res);
  demo d = {.o = o};
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  thread_use_now(&d.use0);
  int rc = 0;
  sigset_t sigs, old;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  /* watch: the session's threads inherit the mask (demo_watch) */
  if (o->watch && pthread_sigmask(SIG_BLOCK, &sigs, &old) != 0)
    return SPY_EIO;
  /* the trace session */
  const char *tr = o->trace ? o->trace : "none";
  spy_trace_desc desc = {0};
  char naive_path[4100];
  if (strcmp(tr, "naive") == 0) {
    const char *dir = o->trace_dir ? o->trace_dir : o->out_dir;
    spy__mkdirs(dir);
    snprintf(naive_path, sizeof naive_path, "%s/naive.jsonl", dir);
    d.naive = fopen(naive_path, "w");
    if (!d.naive) {
      rc = -errno;
      if (o->watch)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
      return rc;
    }
    snprintf(res->trace_dir, sizeof res->trace_dir, "%s", naive_path);
  } else if (strcmp(tr, "none") != 0) {
    desc.enabled = 1;
    desc.cwd = o->out_dir;
    desc.dir = o->trace_dir;
    desc.retry_bytes = o->retry_bytes;
    desc.retry_ms = o->retry_ms;
    if (strncmp(tr, "postgres", 8) == 0 || strchr(tr, '=')) {
      desc.writer = "postgres";
      desc.conninfo = tr;
    } else
      desc.writer = tr;
  }
  if ((rc = spy_trace_create(&d.t, &desc)) < 0) {
    fprintf(stderr, "spyglass demo build: cannot start the %s trace: %s\n", tr,
            spy_strerror(rc));
    if (o->watch)
      pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
  }
  if (spy_trace_on(d.t)) {
    snprintf(res->session_id, sizeof res->session_id, "%s",
             spy_trace_session_id(d.t));
    if (spy_trace_dir(d.t))
      snprintf(res->trace_dir, sizeof res->trace_dir, "%s", spy_trace_dir(d.t));
  }
  if (tracing(&d))
    emit_session_meta(&d);

  /* live progress on the bus: a provider the session publishes through */
  spy_provider *bus = NULL;
  if (o->bus_name && spy_trace_on(d.t)) {
    spy_provider_desc pd = {.name = o->bus_name};
    int brc = spy_provider_create(&bus, &pd);
    if (brc == 0)
      brc = spy_trace_publish(d.t, bus);
    if (brc < 0)
      fprintf(stderr, "spyglass demo build: not publishing on the bus: %s\n",
              spy_strerror(brc));
    for (double w = 0;
         bus && !spy_trace_feed_wanted(bus) && w < o->wait_subscriber_s;
         w += 0.01)
      sleep_us(10000);
  }

  rc = one_build(&d, res, &t0);
  /* more full builds in the same session (each its own BuildStart /
   * BuildEnd, every module transformed again): several samples of each
   * plugin's hook times in one recording */
  for (uint32_t k = 1; rc == 0 && !o->watch && k < o->builds; k++) {
    /* the feed holds one build: the ended one reaches subscribers (a
     * section posted after its end) before the next replaces it */
    if (bus && spy_trace_feed_wanted(bus)) {
      spy_trace_feed_stats fs0, fs1;
      spy_trace_feed_get_stats(bus, &fs0);
      for (int w = 0; w < 200; w++) {
        sleep_us(10000);
        spy_trace_feed_get_stats(bus, &fs1);
        if (fs1.sent > fs0.sent)
          break;
      }
    }
    struct timespec tk;
    clock_gettime(CLOCK_MONOTONIC, &tk);
    rc = one_build(&d, res, &tk);
  }
  if (rc == 0 && o->watch)
    rc = demo_watch(&d, res);

  if (bus) {
    /* the last progress reaches subscribers before the provider goes:
     * a section posted after the build ended carries its end */
    spy_trace_feed_stats fs0, fs1;
    spy_trace_feed_get_stats(bus, &fs0);
    for (int k = 0; k < 40 && spy_trace_feed_wanted(bus); k++) {
      sleep_us(50000);
      spy_trace_feed_get_stats(bus, &fs1);
      if (fs1.sent > fs0.sent)
        break;
    }
    spy_trace_feed_stats fs;
    spy_trace_feed_get_stats(bus, &fs);
    res->bus_taken = fs.taken;
    res->bus_sent = fs.sent;
    spy_trace_publish(d.t, NULL);
  }
  spy_trace_flush(d.t);
  spy_trace_get_stats(d.t, &res->st);
  res->not_stored = spy_trace_destroy(d.t);
  if (d.naive)
    fclose(d.naive);
  res->wall_ms = ms_since(&t0);
  res->actions = d.actions;
  res->naive_ns = d.naive_ns;
  res->naive_failed = d.naive_failed;
  free_modules(&d);
  free_cache(&d);
  spy__buf_free(&d.nbuf);
  spy_trace_arena_free(&d.narena);
  spy_provider_destroy(bus);
  if (o->watch)
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* ---- the command
 * ---------------------------------------------------------------- */

static void help(FILE *f) {
  fprintf(
      f, "usage: spyglass demo build SRC_DIR [--trace jsonl|sqlite|"
         "postgres://…|none] [--out DIR]\n\n"
         "Builds the C sources under SRC_DIR like a bundler: resolves\n"
         "#include edges into a module graph, loads each file, runs it\n"
         "through a chain of transform plugins, groups modules into one\n"
         "chunk per directory and writes each chunk to DIR/dist. With\n"
         "--trace every hook call is recorded with its input and output\n"
         "source; the session lands in DIR/.spyglass/<session-id>/\n"
         "(PostgreSQL: in the database). DIR defaults to ./spyglass-out.\n\n"
         "  --watch             keep watching SRC_DIR (inotify): each change\n"
         "                      rebuilds, as a new build of the same trace\n"
         "                      session, the changed modules and the ones\n"
         "                      that include them; Ctrl-C / SIGTERM ends it\n"
         "  --debounce-ms N     watch: a burst of saves ends after N ms of\n"
         "                      quiet (default 100) and makes one rebuild\n"
         "  --builds N          build N times in the one session, each a\n"
         "                      full build of its own (default 1)\n"
         "  --hook-delay-us N   sleep N µs in each transform (tests)\n"
         "  --hook-spin-us N    busy-wait N µs in each transform (a CPU-bound\n"
         "                      plugin, steady medians under load; tests)\n"
         "  --slow-plugin NAME:US  NAME's transforms sleep US µs more\n"
         "                      (a deliberate regression, diff tests)\n"
         "  --name NAME         traced builds publish their live progress\n"
         "                      on the bus as provider NAME (default\n"
         "                      demo-build): `spyglass top`, the dashboard\n"
         "  --no-bus            do not publish on the bus\n"
         "  --wait-subscriber S wait up to S seconds for a live viewer\n"
         "                      (TRACE subscriber) before building\n"
         "  --retry-bytes N     postgres: bytes buffered while away\n"
         "  --retry-ms N        postgres: how long to retry at the end\n");
}

int cmd_demo_build(int argc, char **argv) {
  demo_build_opts o = {.out_dir = "spyglass-out", .trace = "none"};
  int delay_us = 0, spin_us_opt = 0, retry_ms = 0, debounce_ms = 100,
      no_bus = 0, builds = 1;
  o.bus_name = "demo-build";
  uint64_t retry_bytes = 0;
  const cli_opt opts[] = {
      {"--watch", CLI_FLAG, &o.watch, 0, 0, 0, NULL},
      {"--debounce-ms", CLI_INT, &debounce_ms, 1, 60000, 0,
       "a number of milliseconds"},
      {"--builds", CLI_INT, &builds, 1, 1000, 0, "a number of builds"},
      {"--trace", CLI_STR, &o.trace, 0, 0, 0,
       "jsonl, sqlite, naive, none or a postgres:// URI"},
      {"--out", CLI_STR, &o.out_dir, 0, 0, 0, "a directory"},
      {"--hook-delay-us", CLI_INT, &delay_us, 0, 10000000, 0,
       "a number of microseconds"},
      {"--hook-spin-us", CLI_INT, &spin_us_opt, 0, 10000000, 0,
       "a number of microseconds"},
      {"--slow-plugin", CLI_STR, &o.slow_plugin, 0, 0, 0, "NAME:US"},
      {"--name", CLI_STR, &o.bus_name, 0, 0, 0, "a provider name"},
      {"--no-bus", CLI_FLAG, &no_bus, 0, 0, 0, NULL},
      {"--wait-subscriber", CLI_DOUBLE, &o.wait_subscriber_s, 0, 3600, 0,
       "a number of seconds"},
      {"--retry-bytes", CLI_U64, &retry_bytes, 0, 1099511627776.0, 0,
       "a number of bytes"},
      {"--retry-ms", CLI_INT, &retry_ms, 0, 86400000, 0,
       "a number of milliseconds"},
  };
  int prc = cli_parse("demo build", argc, argv, opts,
                      sizeof opts / sizeof opts[0], &o.src_dir, 1, NULL, help);
  if (prc)
    return prc == 1 ? EXIT_OK : EXIT_USAGE;
  o.hook_delay_us = (uint32_t)delay_us;
  o.hook_spin_us = (uint32_t)spin_us_opt;
  o.builds = (uint32_t)builds;
  if (no_bus)
    o.bus_name = NULL;
  static char slow_name[128];
  if (o.slow_plugin) {
    const char *colon = strrchr(o.slow_plugin, ':');
    char *end = NULL;
    long us = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || colon == o.slow_plugin || !end || *end || us < 0 ||
        us > 10000000 || (size_t)(colon - o.slow_plugin) >= sizeof slow_name) {
      fprintf(stderr,
              "spyglass demo build: --slow-plugin wants NAME:US "
              "(microseconds, at most 10000000), not '%s'\n",
              o.slow_plugin);
      return EXIT_USAGE;
    }
    memcpy(slow_name, o.slow_plugin, (size_t)(colon - o.slow_plugin));
    slow_name[colon - o.slow_plugin] = 0;
    o.slow_plugin = slow_name;
    o.slow_us = (uint32_t)us;
  }
  o.debounce_ms = (uint32_t)debounce_ms;
  o.retry_bytes = (size_t)retry_bytes;
  o.retry_ms = (uint32_t)retry_ms;
  if (!o.src_dir) {
    help(stderr);
    return EXIT_USAGE;
  }
  if (strcmp(o.trace, "jsonl") && strcmp(o.trace, "sqlite") &&
      strcmp(o.trace, "none") && strcmp(o.trace, "naive") &&
      strncmp(o.trace, "postgres", 8) != 0) {
    fprintf(stderr, "spyglass demo build: unknown trace '%s'\n", o.trace);
    return EXIT_USAGE;
  }
  char abs_out[4096];
  int rc = spy__mkdirs(o.out_dir);
  struct stat st;
  if (rc == 0 && stat(o.out_dir, &st) != 0)
    rc = -errno;
  else if (rc == 0 && !S_ISDIR(st.st_mode))
    rc = SPY_ENOTDIR; /* mkdir's EEXIST hid a file there */
  if (rc < 0) {
    fprintf(stderr, "spyglass demo build: cannot create --out %s: %s\n",
            o.out_dir, spy_strerror(rc));
    return EXIT_FAIL;
  }
  if (realpath(o.out_dir, abs_out))
    o.out_dir = abs_out;
  demo_build_result r;
  rc = demo_build_run(&o, &r);
  if (rc < 0) {
    /* the failures demo_build_run already named end the same way */
    fprintf(stderr, "spyglass demo build: failed: %s\n", spy_strerror(rc));
    return EXIT_FAIL;
  }
  if (o.watch)
    printf("session ended after %u builds; the last built %u modules (%u "
           "include edges) into %u chunks\n",
           r.builds, r.modules, r.edges, r.chunks);
  else
    printf("built %u modules (%u include edges) into %u chunks in %.1f ms "
           "(%.1f ms building, %.1f ms finishing the trace; the build "
           "thread's CPU %.1f ms)\n",
           r.modules, r.edges, r.chunks, r.wall_ms, r.build_ms,
           r.wall_ms - r.build_ms, (double)r.build_cpu_ns / 1e6);
  if (r.naive_ns)
    printf("naive trace: %llu actions, %llu not written, %.1f ms serialising "
           "and writing them on the build thread: %s\n",
           (unsigned long long)r.actions, (unsigned long long)r.naive_failed,
           (double)r.naive_ns / 1e6, r.trace_dir);
  if (r.session_id[0]) {
    printf("trace: session %s, %llu actions, %llu written, %lld not stored, "
           "%llu queue waits\n",
           r.session_id, (unsigned long long)r.st.emitted,
           (unsigned long long)r.st.written, (long long)r.not_stored,
           (unsigned long long)r.st.waits);
    if (r.st.lent_bytes)
      printf("trace: %.1f MB of source lent to the trace, not copied; "
             "%llu actions copied theirs (the lent bound or the spill "
             "file)\n",
             (double)r.st.lent_bytes / 1e6,
             (unsigned long long)r.st.lent_copied);
    if (r.st.spilled)
      printf("trace: the writer fell behind: %llu actions spilled (%llu to "
             "memory, %llu to the spill file, %.1f MB); the build did not "
             "wait for them; packing them after the build took %.1f ms\n",
             (unsigned long long)r.st.spilled,
             (unsigned long long)(r.st.spilled - r.st.spilled_disk),
             (unsigned long long)r.st.spilled_disk,
             (double)r.st.spilled_bytes / 1e6, r.wall_ms - r.build_ms);
    if (r.st.spill_fails)
      printf("trace: %llu spill file(s) could not be written: the build "
             "waited for the writer (%llu queue waits)\n",
             (unsigned long long)r.st.spill_fails,
             (unsigned long long)r.st.waits);
    if (r.trace_dir[0])
      printf("trace: %s\n", r.trace_dir);
  }
  if (o.bus_name && r.session_id[0])
    printf("bus: %llu actions collected for live viewers, %llu progress "
           "sections sent\n",
           (unsigned long long)r.bus_taken, (unsigned long long)r.bus_sent);
  return r.not_stored > 0 ? EXIT_FAIL : EXIT_OK;
}
