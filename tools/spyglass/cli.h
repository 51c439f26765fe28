/* cli.h — the `spyglass` command's subcommands. Each takes argc/argv
 * starting at its own name and returns the process exit code:
 * 0 success, 1 a runtime failure, 2 bad usage or malformed input. */
#ifndef SPY_TOOL_CLI_H
#define SPY_TOOL_CLI_H

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

int cmd_decode(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_demo_build(int argc, char **argv);
int cmd_trace(int argc, char **argv);

/* True if argv[i] is -h or --help. */
int cli_is_help(const char *arg);

#endif
