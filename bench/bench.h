/* bench.h — shared helpers for `spyglass bench …`: a monotonic clock,
 * medians and percentiles, batched timing of an operation, and a result
 * table printed as text or JSON. Every benchmark reports figures next to a
 * baseline measured in the same run, never a fixed threshold. */
#ifndef SPY_BENCH_H
#define SPY_BENCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_opts {
  int json;  /* --json: one JSON document on stdout */
  int quick; /* --quick: fewer rounds (for tests of the bench itself) */
} bench_opts;

uint64_t bench_now_ns(void);
/* The calling thread's CPU time in ns (a round preempted by a neighbour
 * is not charged for it). */
uint64_t bench_thread_cpu_ns(void);
/* The first two CPUs this process may run on, for benches that place two
 * threads apart: *a and *b, or both -1 when there are fewer than two. */
void bench_two_cpus(int *a, int *b);
/* CPU time (ns) of every thread of this process but the calling one and
 * `skip_tid` (0: none), from /proc/self/task/<tid>/schedstat's first field
 * (time on a CPU); NAN when /proc cannot be read. */
double bench_other_threads_cpu_ns(long skip_tid);
/* Sorts v in place and returns the q-quantile (0.5 = median). */
double bench_quantile(double *v, size_t n, double q);

/* Times fn(arg) repeatedly: `rounds` rounds, each of enough calls to last
 * about target_ms, and returns the median ns per call. */
double bench_time_op(void (*fn)(void *), void *arg, int rounds,
                     double target_ms);

/* A results table: rows of named numeric columns. */
#define BENCH_MAX_COLS 24
#define BENCH_MAX_ROWS 32
typedef struct bench_table {
  const char *title;
  const char *cols[BENCH_MAX_COLS]; /* column names; first is the row name */
  int ncols;
  struct {
    char name[64];
    double v[BENCH_MAX_COLS];
  } rows[BENCH_MAX_ROWS];
  int nrows;
  const char *notes[8];
  int nnotes;
} bench_table;

/* Adds a row; NAN values print as "-" (text) or null (JSON). */
void bench_row(bench_table *t, const char *name, const double *values);
void bench_print(const bench_table *t, const bench_opts *o);

/* Parses --json / --quick; returns 0, or 2 (usage) after printing why. */
int bench_parse(int argc, char **argv, bench_opts *o, const char *usage);

/* Creates a private 0700 runtime directory for a benchmark's channels
 * (in /dev/shm, else /tmp) into buf. Returns 0 or -1. */
int bench_tempdir(char *buf, size_t cap);

/* Keeps a value alive so the optimiser cannot drop the work behind it. */
void bench_sink(uint64_t v);

int bench_wire(int argc, char **argv);
int bench_bus(int argc, char **argv);
int bench_provider(int argc, char **argv);
int bench_clock(int argc, char **argv);
int bench_msgprof(int argc, char **argv);
int bench_trace(int argc, char **argv);
int bench_record(int argc, char **argv);
int bench_zones(int argc, char **argv);
int bench_buffers(int argc, char **argv);
int bench_serve(int argc, char **argv);
int bench_dashboard(int argc, char **argv);

/* Appends bench wire's stats flush (240 samples x (fps, cpu, gpu, 8
 * counters) + a 50-entry registry delta, provider path) to a started
 * frame: the "small message" of other benches. */
struct spy_frame_writer;
void bench_put_stats_flush(struct spy_frame_writer *w);

#endif
