/* test_options_cli.c — every `spyglass` command's options as a user types
 * them wrong: each bad value is refused with exit 2 and a message naming
 * the option, each runtime failure exits 1 saying why, and the good forms
 * (--opt=value, --, help) still work. One table, one real process each. */
#include "testlib.h"
#include "testutil.h"

static char err[8192], out[8192];

/* Runs `spyglass ARGS` with stdin from /dev/null; stderr into err, stdout
 * into out; returns the exit code. */
static int run(const char *args) {
  char tmp[] = "/tmp/spy_opts_err_XXXXXX";
  int fd = mkstemp(tmp);
  if (fd < 0)
    return -1;
  close(fd);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s %s </dev/null 2>%s", SPY_TOOL_PATH, args, tmp);
  int rc = tu_run_capture(cmd, out, sizeof out);
  FILE *f = fopen(tmp, "r");
  size_t n = f ? fread(err, 1, sizeof err - 1, f) : 0;
  err[n] = 0;
  if (f)
    fclose(f);
  unlink(tmp);
  return rc;
}

static const struct {
  const char *args;
  int code;
  const char *says; /* on stderr */
} cases[] = {
    /* demo: every numeric option range-checked */
    {"demo --seconds -1", 2, "--seconds wants"},
    {"demo --seconds 1e999", 2, "--seconds wants"},
    {"demo --seconds nan", 2, "--seconds wants"},
    {"demo --seconds 3x", 2, "--seconds wants"},
    {"demo --fps-cap 1e-9", 2, "--fps-cap wants"},
    {"demo --fps-cap -5", 2, "--fps-cap wants"},
    {"demo --load 4294967297", 2, "--load wants"},
    {"demo --load 0", 2, "--load wants"},
    {"demo --load ' 3'", 2, "--load wants"},
    {"demo --size 16x16garbage", 2, "--size wants"},
    {"demo --size 4x4", 2, "--size wants"},
    {"demo --size 16", 2, "--size wants"},
    {"demo --size x16", 2, "--size wants"},
    {"demo --name", 2, "--name wants"},
    {"demo --bogus", 2, "unknown option '--bogus'"},
    {"demo --headless=1", 2, "--headless takes no value"},
    {"demo stray", 2, "unexpected argument 'stray'"},
    /* demo build */
    {"demo build --hook-delay-us abc src", 2, "--hook-delay-us wants"},
    {"demo build --hook-delay-us -1 src", 2, "--hook-delay-us wants"},
    {"demo build --retry-ms 1.5 src", 2, "--retry-ms wants"},
    {"demo build --retry-bytes 99999999999999999999 src", 2,
     "--retry-bytes wants"},
    {"demo build src --trace", 2, "--trace wants"},
    {"demo build a b", 2, "unexpected argument 'b'"},
    {"demo build /nonexistent-src --out /etc/passwd", 1,
     "cannot create --out /etc/passwd: not a directory"},
    {"demo build /nonexistent-src --out /tmp", 1, "/nonexistent-src"},
    /* ls, top */
    {"ls --wait -5", 2, "--wait wants"},
    {"ls --wait 60001", 2, "--wait wants"},
    {"ls --wait", 2, "--wait wants"},
    {"ls --dir", 2, "--dir wants"},
    {"ls extra", 2, "unexpected argument"},
    {"top --interval 5", 2, "--interval wants"},
    {"top --interval=abc", 2, "--interval wants"},
    {"top --wait 1e3", 2, "--wait wants"},
    {"top a b", 2, "unexpected argument 'b'"},
    {"top --bogus", 2, "unknown option '--bogus'"},
    /* decode */
    {"decode /", 1, "Is a directory"},
    {"decode --bogus", 2, "unknown option"},
    {"decode a b", 2, "unexpected argument 'b'"},
    /* trace summary: a flag is never taken for the store */
    {"trace summary --session", 2, "--session wants"},
    {"trace summary --bogus", 2, "unknown option '--bogus'"},
    {"trace summary --session --json", 2, "--session wants"},
    {"trace summary /nonexistent-store --session", 2, "--session wants"},
    {"trace summary a b", 2, "unexpected argument 'b'"},
    /* bench */
    {"bench wire --bogus", 2, "unknown option '--bogus'"},
};

TEST(every_bad_option_is_refused_with_a_message_naming_it) {
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = run(cases[i].args);
    if (rc != cases[i].code || !strstr(err, cases[i].says)) {
      fprintf(stderr, "  spyglass %s: exit %d (want %d), stderr: %s\n",
              cases[i].args, rc, cases[i].code, err);
      bad++;
    }
  }
  CHECK_EQ(bad, 0);
}

TEST(good_option_forms_still_work) {
  char d[256], args[600];
  CHECK(tu_rundir(d, sizeof d));
  /* --opt=value and --opt value mean the same */
  snprintf(args, sizeof args, "ls --json --wait=50 --dir=%s", d);
  CHECK_EQ(run(args), 0);
  CHECK(strstr(out, "\"providers\""));
  snprintf(args, sizeof args, "ls --wait 50 --dir %s", d);
  CHECK_EQ(run(args), 0);
  CHECK(strstr(out, "no providers (waited 50 ms)"));
  /* every command's help exits 0 */
  const char *helps[] = {
      "demo --help",      "demo build --help", "ls -h",
      "top --help",       "decode --help",     "trace --help",
      "bench wire --help"};
  for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++) {
    if (run(helps[i]) != 0 || !strstr(out, "usage"))
      fprintf(stderr, "  spyglass %s: no usage on stdout\n", helps[i]);
    CHECK(strstr(out, "usage"));
  }
  /* -- ends the options: decode reads a file named like an option */
  char path[400];
  snprintf(path, sizeof path, "%s/--x", d);
  FILE *f = fopen(path, "w");
  CHECK(f);
  fclose(f);
  snprintf(args, sizeof args, "decode -- %s", path);
  CHECK_EQ(run(args), 0); /* empty: no frames, no error */
  /* a short demo with every numeric option at a good value */
  snprintf(args, sizeof args,
           "demo --headless --seconds 0.5 --fps-cap 30 --load 2 --size 16x16 "
           "--name opts --dir %s",
           d);
  CHECK_EQ(run(args), 0);
  tu_rm_rf(d);
}

TEST_MAIN(TEST_CASE(every_bad_option_is_refused_with_a_message_naming_it),
          TEST_CASE(good_option_forms_still_work))
