/* demo_build.h — the `spyglass demo build` workload as a function, so that
 * `spyglass bench trace` can run it in-process: a small real build over a
 * directory of C sources, every hook call traced. */
#ifndef SPY_TOOL_DEMO_BUILD_H
#define SPY_TOOL_DEMO_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "spyglass/trace.h"

typedef struct demo_build_opts {
  const char *src_dir;
  const char *out_dir;   /* assets go to <out>/dist; NULL = do not write */
  const char *trace;     /* NULL/"none", "jsonl", "sqlite", "postgres://…",
                            "naive" (the reference's before: inline, twice) */
  const char *trace_dir; /* session dir override (NULL: <out>/.spyglass/<id>) */
  uint32_t hook_delay_us; /* sleep in each transform (fault tests) */
  uint32_t hook_spin_us;  /* busy-wait in each transform (diff tests) */
  size_t retry_bytes;     /* postgres buffering budget (0 = default) */
  uint32_t retry_ms;      /* postgres retry on close (0 = default) */
  int quiet;
  int watch;               /* rebuild on every change until SIGINT / SIGTERM */
  uint32_t builds;         /* full builds in the one session (0 = 1) */
  uint32_t debounce_ms;    /* watch: quiet time that ends a burst (0 = 100) */
  const char *slow_plugin; /* this plugin's transforms sleep slow_us more */
  uint32_t slow_us;
  const char *bus_name;     /* provider name to publish progress under (NULL:
                               no provider, the bench's in-process runs) */
  double wait_subscriber_s; /* wait up to this long for a TRACE subscriber
                               before building (0: do not wait) */
  /* called with each transform's input before the plugin runs (bench: a
   * realistic per-module cost, e.g. tokenising); NULL = none */
  void (*work)(const char *src, size_t n);
} demo_build_opts;

typedef struct demo_build_result {
  uint32_t modules, chunks, edges; /* of the last build */
  uint32_t builds;                 /* builds run (watch mode: more than one) */
  uint32_t retransformed; /* modules the last build loaded and transformed */
  uint64_t source_bytes, actions;
  double wall_ms;        /* build + trace drain */
  double build_ms;       /* the build alone (emitting included) */
  spy_trace_stats st;    /* traced runs */
  int64_t not_stored;    /* actions the store did not get */
  uint64_t naive_ns;     /* naive mode: time spent serialising and writing */
  uint64_t naive_failed; /* naive mode: actions it could not write */
  uint64_t bus_taken;    /* actions the provider's build feed collected */
  uint64_t bus_sent;     /* BUILD sections it posted */
  /* the build thread over the build (session create to BuildEnd): where
   * its wall time went (bench trace) */
  uint64_t build_cpu_ns; /* its CPU time (CLOCK_THREAD_CPUTIME_ID) */
  uint64_t build_rq_ns;  /* time it waited, runnable, for a CPU
                            (/proc/thread-self/schedstat; 0 unknown) */
  uint64_t build_minflt; /* its page faults (minor, major) */
  uint64_t build_majflt;
  uint64_t build_nvcsw;  /* times it blocked (voluntary switches) */
  uint64_t build_nivcsw; /* times it was preempted */
  char session_id[64];
  char trace_dir[4200];
} demo_build_result;

/* Runs the build; returns 0 or a negative SPY_E code (message on stderr). */
int demo_build_run(const demo_build_opts *o, demo_build_result *r);

#endif
