/* testlib.h — the spyglass test harness: a table of named cases, run all or
 * one by name (`test_wire decode_rejects_truncated_section`), each failed
 * check printed with file and line. Ends with "N passed, N failed, N skipped".
 *
 * A case that cannot run here (no PostgreSQL server was set up for it) calls
 * SKIP("why"): it is neither passed nor failed, and it is counted. When
 * $SPY_TEST_TOTALS names a file, each run appends one line to it,
 * "<program> <passed> <failed> <skipped>", so scripts/test.sh can check that
 * nothing was skipped in a run that set everything up.
 *
 * Usage:
 *   TEST(frame_round_trips) { CHECK_EQ(1 + 1, 2); }
 *   TEST_MAIN(TEST_CASE(frame_round_trips), ...)
 */
#ifndef SPY_TESTLIB_H
#define SPY_TESTLIB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct spy_test_case {
  const char *name;
  void (*fn)(void);
};

static int spy_test_failed_;
static int spy_test_skipped_;
/* Called after every case, pass or fail (testutil.h uses it to kill child
 * processes a failed check left behind). */
static void (*spy_test_after_each_)(void);

#define TEST(name) static void name(void)
#define TEST_CASE(name)                                                        \
  { #name, name }

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__,       \
              #cond);                                                          \
      spy_test_failed_ = 1;                                                    \
      return;                                                                  \
    }                                                                          \
  } while (0)

#define CHECK_EQ(a, b)                                                         \
  do {                                                                         \
    long long a_ = (long long)(a), b_ = (long long)(b);                        \
    if (a_ != b_) {                                                            \
      fprintf(stderr, "  %s:%d: CHECK_EQ(%s, %s) failed: %lld != %lld\n",      \
              __FILE__, __LINE__, #a, #b, a_, b_);                             \
      spy_test_failed_ = 1;                                                    \
      return;                                                                  \
    }                                                                          \
  } while (0)

#define CHECK_STR(a, b)                                                        \
  do {                                                                         \
    const char *a_ = (a), *b_ = (b);                                           \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                   \
      fprintf(stderr, "  %s:%d: CHECK_STR(%s, %s) failed: \"%s\" != \"%s\"\n", \
              __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)",                  \
              b_ ? b_ : "(null)");                                             \
      spy_test_failed_ = 1;                                                    \
      return;                                                                  \
    }                                                                          \
  } while (0)

/* Ends the case as skipped, with the reason printed (a printf format). */
#define SKIP(...)                                                              \
  do {                                                                         \
    fprintf(stderr, "  skipped: ");                                            \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n");                                                     \
    spy_test_skipped_ = 1;                                                     \
    return;                                                                    \
  } while (0)

/* Checks that a call returned 0 and prints the error name otherwise. */
#define CHECK_OK(expr)                                                         \
  do {                                                                         \
    long long r_ = (long long)(expr);                                          \
    if (r_ < 0) {                                                              \
      fprintf(stderr, "  %s:%d: %s failed: %lld\n", __FILE__, __LINE__, #expr, \
              r_);                                                             \
      spy_test_failed_ = 1;                                                    \
      return;                                                                  \
    }                                                                          \
  } while (0)

static inline int spy_test_run(int argc, char **argv,
                               const struct spy_test_case *cases, size_t n) {
  int passed = 0, failed = 0, skipped = 0, ran = 0;
  for (size_t i = 0; i < n; i++) {
    if (argc > 1) {
      int wanted = 0;
      for (int a = 1; a < argc; a++)
        if (strcmp(argv[a], cases[i].name) == 0)
          wanted = 1;
      if (!wanted)
        continue;
    }
    ran++;
    spy_test_failed_ = 0;
    spy_test_skipped_ = 0;
    fprintf(stderr, "[ RUN  ] %s\n", cases[i].name);
    cases[i].fn();
    if (spy_test_after_each_)
      spy_test_after_each_();
    if (spy_test_failed_) {
      failed++;
      fprintf(stderr, "[ FAIL ] %s\n", cases[i].name);
    } else if (spy_test_skipped_) {
      skipped++;
      fprintf(stderr, "[ SKIP ] %s\n", cases[i].name);
    } else {
      passed++;
      fprintf(stderr, "[  OK  ] %s\n", cases[i].name);
    }
  }
  if (argc > 1 && ran == 0) {
    fprintf(stderr, "no test named %s\n", argv[1]);
    return 2;
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  const char *totals = getenv("SPY_TEST_TOTALS");
  FILE *f = totals && *totals ? fopen(totals, "a") : NULL;
  if (f) {
    const char *prog = strrchr(argv[0], '/');
    fprintf(f, "%s %d %d %d\n", prog ? prog + 1 : argv[0], passed, failed,
            skipped);
    fclose(f);
  }
  return failed ? 1 : 0;
}

#define TEST_MAIN(...)                                                         \
  int main(int argc, char **argv) {                                            \
    static const struct spy_test_case cases_[] = {__VA_ARGS__};                \
    return spy_test_run(argc, argv, cases_, sizeof cases_ / sizeof cases_[0]); \
  }

#endif
