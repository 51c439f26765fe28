/* main.c — records a one-build trace into a temporary session directory
 * and reads it back: the smallest program using the store layer. */
#include <spyglass/trace.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  char dir[] = "/tmp/spy-trace-example-XXXXXX";
  if (!mkdtemp(dir))
    return 1;
  spy_trace *t;
  spy_trace_desc d = {.enabled = 1, .writer = "sqlite", .dir = dir};
  int rc = spy_trace_create(&t, &d);
  if (rc < 0) {
    printf("create: %s\n", spy_strerror(rc));
    return 1;
  }
  spy_trace_build_begin(t);
  spy_emit_hook_transform_call_start(
      t, &(spy_act_hook_transform_call_start){.module_id = "main.c",
                                              .content = {"int x;\n", 7},
                                              .plugin_name = "example",
                                              .plugin_id = 0,
                                              .call_id = "1"});
  spy_trace_build_end(t);
  spy_trace_destroy(t);
  spy_trace_reader *r;
  if (spy_trace_reader_open(dir, NULL, &r) < 0)
    return 1;
  spy_trace_summary s;
  spy_trace_reader_summary(r, &s);
  spy_trace_reader_close(r);
  printf("trace example: %llu actions, %llu source(s)\n",
         (unsigned long long)s.actions, (unsigned long long)s.sources);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 && s.actions == 3 ? 0 : 1;
}
