/* writers.c — the registry of built-in store writers: the one place that
 * names them, looked up by name. What a writer needs from the session is
 * in its ops table's flags, never in a comparison of ops pointers. */
#include <string.h>

#include "store.h"

const spy_trace_writer_ops *spy_trace_writer_find(const char *name) {
  static const spy_trace_writer_ops *const all[] = {
      &spy__writer_jsonl, &spy__writer_sqlite, &spy__writer_pg};
  if (!name)
    return NULL;
  if (strcmp(name, "postgresql") == 0)
    name = "postgres";
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(all[i]->name, name) == 0)
      return all[i];
  return NULL;
}
