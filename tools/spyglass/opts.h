/* opts.h — the one option parser of the `spyglass` commands: a table of
 * options per command, each with its kind and, for numbers, its range.
 *
 * Accepted forms: `--name VALUE`, `--name=VALUE`, flags alone, positional
 * arguments anywhere, `--` ends the options. Every refusal prints one line
 * naming the command, the option and what it wants ("spyglass demo:
 * --load wants an integer 1..64, not '0'") and the caller exits 2. Numbers
 * must be written whole (no trailing text), finite and in range; a string
 * value must not be empty nor look like an option (`--session --json` is
 * a missing value, not a session named "--json").
 *
 * Not thread-safe (command-line parsing, once, on the main thread). */
#ifndef SPY_TOOL_OPTS_H
#define SPY_TOOL_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum cli_opt_kind {
  CLI_FLAG,   /* int *: set to 1 */
  CLI_STR,    /* const char **: the argument itself (not copied) */
  CLI_INT,    /* int *: decimal integer in [min, max] */
  CLI_U64,    /* uint64_t *: decimal integer in [min, max] */
  CLI_DOUBLE, /* double *: finite number in [min, max] (or 0, zero_ok) */
  CLI_SIZE,   /* uint32_t[2]: WxH, each in [min, max] */
  CLI_STRS    /* cli_strs *: repeatable; each value appended (not copied),
                 at most `max` of them */
} cli_opt_kind;

/* The values of a repeatable string option (CLI_STRS), in order given.
 * v has room for the option's `max` values. */
typedef struct cli_strs {
  const char **v;
  uint32_t n;
} cli_strs;

typedef struct cli_opt {
  const char *name; /* with its dashes: "--seconds" */
  cli_opt_kind kind;
  void *out;
  double min, max;  /* numbers: the accepted range (both ends included) */
  int zero_ok;      /* CLI_DOUBLE: 0 is accepted as well ("none") */
  const char *unit; /* in messages: "a number of seconds"; NULL: generic */
} cli_opt;

/* Parses argv[1..argc) of command `cmd` (as printed: "demo build") against
 * opts[0..nopts). Positional arguments go to pos[0..maxpos) and their
 * count to *npos (more than maxpos is an error). -h / --help prints
 * help(stdout). Returns 0 parsed, 1 help printed (exit 0), 2 refused (a
 * message is printed on stderr; exit 2). */
int cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts,
              size_t nopts, const char **pos, int maxpos, int *npos,
              void (*help)(FILE *));

#endif
