/* trace_query.h — `spyglass trace builds|hooks|module|source` (see
 * trace_query.c). Each takes argc/argv starting at its subcommand's name
 * and returns the exit code (cli.h: 0 ok, 1 the store cannot be read or
 * the thing asked for is not in it, 2 bad usage). */
#ifndef SPY_TOOL_TRACE_QUERY_H
#define SPY_TOOL_TRACE_QUERY_H

int trace_builds(int argc, char **argv);
int trace_hooks(int argc, char **argv);
int trace_module(int argc, char **argv);
int trace_source(int argc, char **argv);

#endif
