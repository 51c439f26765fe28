/* cmd_trace.c — `spyglass trace`: dispatches builds / hooks / module /
 * source (trace_query.c) and answers `summary STORE`: what a recorded trace
 * holds (any of the three stores): actions, builds, module and chunk counts,
 * the slowest hooks per plugin, bytes of source stored and saved by dedup, and
 * how many actions the writer could not store; bytes that were not UTF-8
 * (replaced in JSON-lines) when there were any, and on stderr what the
 * reader read past (a cut last line). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "opts.h"
#include "spyglass/trace.h"
#include "trace_query.h"

typedef struct plug {
  char name[128];
  char hook[16];
  uint64_t calls, total_us, max_us;
  char slowest[256];
} plug;

typedef struct agg {
  plug p[64];
  int n;
} agg;

static int on_call(void *arg, const spy_trace_hook_call *h) {
  agg *a = arg;
  int i = 0;
  while (i < a->n &&
         (strcmp(a->p[i].name, h->plugin) || strcmp(a->p[i].hook, h->hook)))
    i++;
  if (i == a->n) {
    if (a->n == 64)
      return 0;
    memset(&a->p[i], 0, sizeof a->p[i]);
    snprintf(a->p[i].name, sizeof a->p[i].name, "%s", h->plugin);
    snprintf(a->p[i].hook, sizeof a->p[i].hook, "%s", h->hook);
    a->n++;
  }
  uint64_t d = h->ended_us > h->started_us ? h->ended_us - h->started_us : 0;
  a->p[i].calls++;
  a->p[i].total_us += d;
  if (d >= a->p[i].max_us) {
    a->p[i].max_us = d;
    snprintf(a->p[i].slowest, sizeof a->p[i].slowest, "%s", h->module);
  }
  return 0;
}

static int by_total(const void *x, const void *y) {
  const plug *a = x, *b = y;
  return a->total_us < b->total_us ? 1 : a->total_us > b->total_us ? -1 : 0;
}

static void help(FILE *f) {
  fprintf(f, "usage: spyglass trace summary STORE [--session ID] [--json]\n"
             "       spyglass trace builds STORE\n"
             "       spyglass trace hooks STORE [--build N] [--plugin P] "
             "[--slowest N]\n"
             "       spyglass trace module STORE MODULE [--build N] [--diff]\n"
             "       spyglass trace source STORE ID\n"
             "       spyglass trace recover DIR [--db CONNINFO] [--json]\n"
             "(each with --session ID and --json; `spyglass trace SUB --help`)"
             "\n\n"
             "STORE is a session directory (JSON-lines or SQLite), a trace.db\n"
             "file, or a postgres:// URI. Prints actions and builds, module\n"
             "and chunk counts, the slowest hooks per plugin, bytes of source\n"
             "stored and saved by dedup, and actions not stored.\n"
             "recover: after a traced process was killed while its trace\n"
             "spilled to disk, adds the spilled actions the store did not\n"
             "commit (DIR: the session directory; postgres: the spill\n"
             "directory and --db) and removes the spill files.\n"
             "exit codes: 0 ok, 1 the store cannot be read (or is from a\n"
             "newer schema), 2 bad usage\n");
}

/* `trace recover DIR`: spy_trace_recover and what it did. */
static int trace_recover(int argc, char **argv) {
  const char *dir = NULL, *db = NULL;
  int as_json = 0;
  const cli_opt opts[] = {
      {"--json", CLI_FLAG, &as_json, 0, 0, 0, NULL},
      {"--db", CLI_STR, &db, 0, 0, 0, "a postgres conninfo"},
  };
  int prc = cli_parse("trace recover", argc, argv, opts,
                      sizeof opts / sizeof opts[0], &dir, 1, NULL, help);
  if (prc)
    return prc == 1 ? EXIT_OK : EXIT_USAGE;
  if (!dir) {
    help(stderr);
    return EXIT_USAGE;
  }
  spy_trace_recovery rv;
  char err[512];
  int rc = spy_trace_recover(dir, db, &rv, err, sizeof err);
  if (rc < 0) {
    fprintf(stderr, "spyglass trace recover: %s (%s)\n", err[0] ? err : dir,
            spy_err_name(rc));
    return EXIT_FAIL;
  }
  if (as_json) {
    json_out j;
    jw_init(&j, stdout);
    jw_obj_begin(&j);
    jw_key(&j, "files");
    jw_uint(&j, rv.files);
    jw_key(&j, "committed");
    jw_uint(&j, rv.committed);
    jw_key(&j, "recovered");
    jw_uint(&j, rv.recovered);
    jw_key(&j, "skipped");
    jw_uint(&j, rv.skipped);
    jw_key(&j, "lost_in_memory");
    jw_uint(&j, rv.lost);
    jw_key(&j, "torn");
    jw_uint(&j, rv.torn);
    jw_key(&j, "not_stored");
    jw_int(&j, rv.not_stored);
    jw_obj_end(&j);
    jw_newline(&j);
  } else if (!rv.files)
    printf("%s: no spill files, nothing to recover\n", dir);
  else
    printf("%s: %u spill file(s); the store held actions up to %llu; %llu "
           "recovered from the spill, %llu already stored, %llu lost (in "
           "memory when the process died), %llu cut records, %lld not "
           "stored\n",
           dir, rv.files, (unsigned long long)rv.committed,
           (unsigned long long)rv.recovered, (unsigned long long)rv.skipped,
           (unsigned long long)rv.lost, (unsigned long long)rv.torn,
           (long long)rv.not_stored);
  return rv.not_stored > 0 ? EXIT_FAIL : EXIT_OK;
}

int cmd_trace(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    help(argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  if (strcmp(argv[1], "builds") == 0)
    return trace_builds(argc - 1, argv + 1);
  if (strcmp(argv[1], "hooks") == 0)
    return trace_hooks(argc - 1, argv + 1);
  if (strcmp(argv[1], "module") == 0)
    return trace_module(argc - 1, argv + 1);
  if (strcmp(argv[1], "source") == 0)
    return trace_source(argc - 1, argv + 1);
  if (strcmp(argv[1], "recover") == 0)
    return trace_recover(argc - 1, argv + 1);
  if (strcmp(argv[1], "summary") != 0) {
    fprintf(stderr, "spyglass trace: unknown subcommand '%s'\n", argv[1]);
    help(stderr);
    return EXIT_USAGE;
  }
  const char *store = NULL, *session = NULL;
  int as_json = 0;
  const cli_opt opts[] = {
      {"--json", CLI_FLAG, &as_json, 0, 0, 0, NULL},
      {"--session", CLI_STR, &session, 0, 0, 0, "a session id"},
  };
  int prc = cli_parse("trace summary", argc - 1, argv + 1, opts,
                      sizeof opts / sizeof opts[0], &store, 1, NULL, help);
  if (prc)
    return prc == 1 ? EXIT_OK : EXIT_USAGE;
  if (!store) {
    help(stderr);
    return EXIT_USAGE;
  }
  spy_trace_reader *r;
  int rc = spy_trace_reader_open(store, session, &r);
  if (rc < 0) {
    fprintf(stderr, "spyglass trace: %s (%s)\n", spy_trace_reader_error(r),
            spy_err_name(rc));
    spy_trace_reader_close(r);
    return EXIT_FAIL;
  }
  spy_trace_summary s;
  static agg a;
  a.n = 0;
  rc = spy_trace_reader_summary(r, &s);
  if (rc == 0)
    rc = spy_trace_reader_hook_calls(r, on_call, &a);
  if (rc < 0) {
    fprintf(stderr, "spyglass trace: %s (%s)\n", spy_trace_reader_error(r),
            spy_err_name(rc));
    spy_trace_reader_close(r);
    return EXIT_FAIL;
  }
  if (spy_trace_reader_warning(r))
    fprintf(stderr, "spyglass trace: warning: %s\n",
            spy_trace_reader_warning(r));
  qsort(a.p, (size_t)a.n, sizeof a.p[0], by_total);
  if (as_json) {
    json_out j;
    jw_init(&j, stdout);
    jw_obj_begin(&j);
    jw_key(&j, "actions");
    jw_uint(&j, s.actions);
    jw_key(&j, "builds");
    jw_uint(&j, s.builds);
    jw_key(&j, "modules");
    jw_uint(&j, s.modules);
    jw_key(&j, "chunks");
    jw_uint(&j, s.chunks);
    jw_key(&j, "hook_calls");
    jw_uint(&j, s.hook_calls);
    jw_key(&j, "sources");
    jw_uint(&j, s.sources);
    jw_key(&j, "source_bytes");
    jw_uint(&j, s.source_bytes);
    jw_key(&j, "stored_bytes");
    jw_uint(&j, s.stored_bytes);
    jw_key(&j, "saved_bytes");
    jw_uint(&j, s.saved_bytes);
    jw_key(&j, "not_stored");
    jw_int(&j, s.lost);
    jw_key(&j, "not_utf8_bytes");
    jw_uint(&j, s.replaced);
    jw_key(&j, "plugins");
    jw_arr_begin(&j);
    for (int i = 0; i < a.n; i++) {
      jw_obj_begin(&j);
      jw_key(&j, "plugin");
      jw_str(&j, a.p[i].name);
      jw_key(&j, "hook");
      jw_str(&j, a.p[i].hook);
      jw_key(&j, "calls");
      jw_uint(&j, a.p[i].calls);
      jw_key(&j, "total_us");
      jw_uint(&j, a.p[i].total_us);
      jw_key(&j, "max_us");
      jw_uint(&j, a.p[i].max_us);
      jw_key(&j, "slowest");
      jw_str(&j, a.p[i].slowest);
      jw_obj_end(&j);
    }
    jw_arr_end(&j);
    jw_obj_end(&j);
    jw_newline(&j);
  } else {
    printf("actions     %llu in %llu build(s)\n", (unsigned long long)s.actions,
           (unsigned long long)s.builds);
    printf("modules     %llu\nchunks      %llu\nhook calls  %llu\n",
           (unsigned long long)s.modules, (unsigned long long)s.chunks,
           (unsigned long long)s.hook_calls);
    printf("sources     %llu distinct, %llu bytes (%llu on disk), "
           "%llu bytes saved by dedup\n",
           (unsigned long long)s.sources, (unsigned long long)s.source_bytes,
           (unsigned long long)s.stored_bytes,
           (unsigned long long)s.saved_bytes);
    if (s.lost < 0)
      printf("not stored  unknown (the writer did not finish)\n");
    else
      printf("not stored  %lld actions\n", (long long)s.lost);
    if (s.replaced)
      printf("not UTF-8   %llu bytes, shown as U+FFFD in the JSON\n",
             (unsigned long long)s.replaced);
    printf("\nslowest hooks per plugin:\n%-28s %-13s %8s %10s %8s  %s\n",
           "plugin", "hook", "calls", "total ms", "max µs", "slowest on");
    for (int i = 0; i < a.n; i++)
      printf("%-28s %-13s %8llu %10.1f %8llu  %s\n", a.p[i].name, a.p[i].hook,
             (unsigned long long)a.p[i].calls, (double)a.p[i].total_us / 1e3,
             (unsigned long long)a.p[i].max_us, a.p[i].slowest);
  }
  spy_trace_reader_close(r);
  return EXIT_OK;
}
