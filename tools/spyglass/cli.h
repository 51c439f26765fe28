/* cli.h — the `spyglass` command's subcommands. Each takes argc/argv
 * starting at its own name and returns the process exit code:
 * 0 success, 1 a runtime failure, 2 bad usage or malformed input. */
#ifndef SPY_TOOL_CLI_H
#define SPY_TOOL_CLI_H

#include <stddef.h>
#include <stdint.h>

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

int cmd_decode(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_demo_build(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_snap(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Options are parsed with cli_parse (opts.h), the same for every command. */

/* True if argv[i] is -h or --help. */
int cli_is_help(const char *arg);
/* Parses a millisecond option value 0..max into *out; prints an error
 * naming `cmd` and `opt` and returns -1 if arg is missing or invalid. */
int cli_parse_ms(const char *cmd, const char *opt, const char *arg, int max,
                 int *out);
/* Formats a duration as 42s, 3m07s or 2h15m. */
void cli_format_age(char *buf, size_t cap, uint64_t ms);

#endif
